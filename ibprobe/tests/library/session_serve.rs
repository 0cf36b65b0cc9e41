//! `probe::session::serve`.

use crate::fake_hwts::Stamped;
use ibprobe::clock::Clock;
use ibprobe::probe::config::Receiver;
use ibprobe::probe::config::{Mode, ProbeConfig};
use ibprobe::probe::executor;
use ibprobe::probe::session::oob::Oob;
use ibprobe::probe::session::*;
use ibprobe::transport::shm::ShmChannel;
use std::net::TcpListener;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// The `--hw-timestamps` exchange end to end over a real out-of-band
/// connection: the server's echo keeps T3/T4 from its (stamping)
/// channel and sends its report after the client's Done; the client
/// splits its round trips with it.
#[test]
fn the_responder_reports_its_stamps_after_done() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let (c, s) = ShmChannel::pair(64).unwrap();
    let clock = Clock::monotonic();
    let server = std::thread::spawn(move || {
        let mut oob = Oob::accept(&l, Duration::from_secs(5)).unwrap();
        // Responder: T3 = at + 0, T4 = at + 50.
        let mut ch = Stamped::new(s, 7, 50, 0);
        let stop = AtomicBool::new(false);
        serve(
            &mut oob,
            &mut ch,
            &clock,
            &stop,
            None,
            &Receiver::default(),
            Duration::from_secs(1),
        )
        .unwrap()
    });
    let mut oob = Oob::connect(&format!("127.0.0.1:{port}"), port, Duration::from_secs(5)).unwrap();
    // Prober: T2 = at + 0, T5 = at + 300: network = 300 - 50.
    let mut ch = Stamped::new(c, 60_000, 0, 300);
    let cfg = ProbeConfig {
        length: ibprobe::probe::Length::Count(500),
        warmup: 10,
        mode: Mode::RoundTrip,
        lock_memory: false,
        hw_timestamps: true,
        ..ProbeConfig::default()
    };
    let stop = AtomicBool::new(false);
    let mut o = executor::run(&cfg, &mut ch, &clock, &stop, None).unwrap();
    hw_finish(&mut oob, &mut o).unwrap();
    let served = server.join().unwrap();
    assert_eq!(served.echoed, 510);
    assert_eq!(served.end, ServeEnd::Done { sent: 510 });
    let sp = &o.hw_split.as_ref().unwrap().split;
    assert_eq!(sp.len() + sp.invalid, 500);
    assert_eq!((sp.missing_prober, sp.missing_responder), (0, 0));
    assert!(!sp.is_empty());
    assert_eq!(
        (sp.network_rtt.summary().min_ns, sp.network_rtt.max_ns()),
        (250, 250)
    );
    assert_eq!(sp.responder_delay.max_ns(), 50);
}
