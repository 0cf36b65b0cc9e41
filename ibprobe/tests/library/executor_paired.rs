//! `probe::executor::paired`.

mod tests {
    use ibprobe::clock::Clock;
    use ibprobe::probe::config::Length;
    use ibprobe::probe::config::ProbeConfig;
    use ibprobe::probe::executor::paired::*;
    use ibprobe::probe::open::stream_pair;
    use ibprobe::probe::outcome::{StreamError, StreamOutcome};
    use ibprobe::spec::StreamSpec;
    use ibprobe::spec::{ChannelSpec, Transport};
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    fn cfg(count: u64) -> ProbeConfig {
        ProbeConfig {
            length: Length::Count(count),
            warmup: 100,
            lock_memory: false,
            ..ProbeConfig::default()
        }
    }

    /// The stream tests spin two threads each: one at a time, so their
    /// timing is not the other tests' contention.
    pub(super) static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn run(
        t: Transport,
        cfg: &ProbeConfig,
        spec: &StreamSpec,
    ) -> Result<StreamOutcome, StreamError> {
        let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let (mut a, mut b) = stream_pair(&ChannelSpec::new(t, cfg.size), spec).unwrap();
        let stop = AtomicBool::new(false);
        stream_loopback(
            cfg,
            spec,
            a.as_mut(),
            b.as_mut(),
            &Clock::calibrate(),
            &stop,
            None,
        )
    }

    #[test]
    fn batches_of_k_take_one_post_per_k_messages() {
        for t in [Transport::Shm, Transport::Udp] {
            let spec = StreamSpec {
                batch: 8,
                ..StreamSpec::default()
            };
            let o = run(t, &cfg(20_000), &spec).unwrap();
            assert_eq!(o.send.msgs, 20_000, "{t}");
            assert_eq!(o.recv.msgs + o.lost(), 20_000, "{t}");
            assert_eq!(o.send.data_posts, 2_500, "{t}: 20000 / 8, no partial batch");
            assert!((o.ops_per_msg() - 0.125).abs() < 1e-9, "{t}");
            assert_eq!(o.send.flushes, [2_500, 0, 0], "{t}");
            assert_eq!(o.latency.len(), o.recv.msgs);
            assert!(o.msgs_per_sec() > 0.0);
        }
    }

    #[test]
    fn a_slow_consumer_stalls_the_window_and_never_exceeds_it() {
        let spec = StreamSpec {
            window: 4,
            ..StreamSpec::default()
        };
        let c = ProbeConfig {
            consume_delay: Duration::from_micros(20),
            ..cfg(2_000)
        };
        let o = run(Transport::Shm, &c, &spec).unwrap();
        assert!(o.send.credit_stalls > 0, "{:?}", o.send);
        assert!(
            o.recv.max_unconsumed <= 4 && o.recv.max_unconsumed >= 2,
            "{}",
            o.recv.max_unconsumed
        );
        assert!(o.send.max_in_flight <= 4);
    }

    #[test]
    fn pipeline_depth_bounds_unacked_slots() {
        for d in [1, 2] {
            let spec = StreamSpec {
                pipeline: Some(d),
                ..StreamSpec::default()
            };
            let o = run(Transport::Shm, &cfg(5_000), &spec).unwrap();
            assert!(o.recv.max_unacked <= u64::from(d));
            assert!(o.send.max_unacked <= u64::from(d) && o.send.max_unacked >= 1);
            assert_eq!(
                o.recv.ack_msgs,
                o.send.data_posts + 100,
                "one ack per data slot, warm-up included"
            );
        }
    }

    #[test]
    fn a_timer_flushes_partial_batches_at_a_slow_rate() {
        let spec = StreamSpec {
            batch: 16,
            flush: Some(Duration::from_micros(200)),
            ..StreamSpec::default()
        };
        let c = ProbeConfig {
            rate_hz: Some(1_000.0),
            warmup: 0,
            ..cfg(200)
        };
        let o = run(Transport::Udp, &c, &spec).unwrap();
        // Every flush is the timer's, but the run's end (explicit).
        assert_eq!(o.send.flushes[0], 0, "{:?}", o.send);
        assert!(o.send.flushes[2] <= 1, "{:?}", o.send);
        assert_eq!(o.send.flushes[1] + o.send.flushes[2], o.send.data_posts);
        // Never early (late is this machine's contention; the bound
        // T + 50 us is checked in tests/stream.rs, where runs are alone).
        assert!(o.send_histos.in_batch.summary().p50_ns >= 200_000);
    }

    #[test]
    fn large_messages_span_slots() {
        let spec = StreamSpec {
            slot_size: 256,
            ..StreamSpec::default()
        };
        let c = ProbeConfig {
            size: 1000,
            ..cfg(1_000)
        };
        let o = run(Transport::Shm, &c, &spec).unwrap();
        assert_eq!(o.recv.msgs, 1_000);
        assert_eq!(o.recv.corrupt, 0);
        assert_eq!(
            o.send.data_posts, 5_000,
            "(16 + 1000) / 240 -> 5 slots per message"
        );
    }
}

mod dead_receiver {

    use ibprobe::clock::Clock;
    use ibprobe::probe::config::Length;
    use ibprobe::probe::config::ProbeConfig;
    use ibprobe::probe::open::stream_pair;
    use ibprobe::probe::workload::seam::Paired;
    use ibprobe::probe::workload::stream::Stream;
    use ibprobe::spec::StreamSpec;
    use ibprobe::spec::{ChannelSpec, Transport};
    use ibprobe::transport::TransportError;
    use std::sync::atomic::AtomicBool;
    use std::time::{Duration, Instant};

    /// A receiver that never reads: the sender fills the window, waits
    /// `--timeout` for a credit, and fails (shm at once; udp, lossy, after
    /// `max_consecutive_lost` timeouts in a row), never hangs.
    #[test]
    fn a_dead_receiver_ends_the_run_with_peer_lost_within_the_timeouts() {
        let _one = super::tests::SERIAL
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for (t, timeouts) in [(Transport::Shm, 1u32), (Transport::Udp, 3)] {
            let cfg = ProbeConfig {
                length: Length::Count(100_000),
                warmup: 0,
                timeout: Duration::from_millis(100),
                lock_memory: false,
                ..ProbeConfig::default()
            };
            let spec = StreamSpec {
                window: 8,
                ..StreamSpec::default()
            };
            let (mut tx, _rx) = stream_pair(&ChannelSpec::new(t, 32), &spec).unwrap();
            let clock = Clock::calibrate();
            let mut work = Stream::planned(&cfg, &spec, &clock, false);
            let t0 = Instant::now();
            let r = work.measure(tx.as_mut(), &AtomicBool::new(false));
            let took = t0.elapsed();
            assert!(matches!(r, Err(TransportError::PeerLost(_))), "{t}: {r:?}");
            let most = Duration::from_millis(100) * timeouts + Duration::from_millis(400);
            assert!(
                took >= Duration::from_millis(100) && took < most,
                "{t}: {took:?}"
            );
        }
    }
}
