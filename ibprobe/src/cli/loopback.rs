//! `ibprobe loopback`: one process owns both ends; one-way latency (or
//! the round trip through an in-process echo thread) on one clock.

use super::args::LoopbackArgs;
use super::common::{default_cpu, measure_and_print, open_err, stop_flag};
use super::error::CliError;
use crate::clock::Clock;
use crate::probe::config::Mode;
use crate::probe::open;
use crate::report::threshold::RunKind;

pub fn run(a: &LoopbackArgs) -> Result<u8, CliError> {
    let t = &a.transport;
    let fail_if = a.fail_if.thresholds(RunKind::Latency)?;
    if a.hw_timestamps {
        let v = &t.verbs;
        let two_devices = v.peer_dev.is_some() && v.peer_dev != v.dev;
        crate::spec::check_hw_timestamps(t.transport, v.signal, a.round_trip, two_devices)?;
    }
    super::common::warn_model_resolution(t);
    let mode = if a.round_trip {
        Mode::RoundTrip
    } else {
        Mode::OneWay
    };
    let mut cfg = a.measure.probe_config(t, mode, default_cpu(t))?;
    if a.stamp.stamp_thread {
        let other_clock = a.round_trip.then_some("--round-trip");
        crate::spec::check_stamp(t.transport, t.verbs.inline, cfg.size, other_clock)?;
        cfg.stamp_thread = true;
    }
    cfg.hw_timestamps = a.hw_timestamps;
    let mut spec = t.channel_spec(cfg.size);
    spec.verbs.hw_timestamps = a.hw_timestamps;
    let stop = stop_flag()?;
    let clock = Clock::choose(t.clock);
    if a.round_trip {
        super::common::warn_shared_cpu("echo thread");
    }
    let (mut ch, echo) = if a.round_trip {
        // With --cpu, the echo thread stays off the measuring CPU (on the
        // first other allowed one), so the two never share it.
        let echo_cpu = cfg
            .cpu
            .and_then(|m| ibhost::rt::allowed_cpus().into_iter().find(|&c| c != m));
        let (c, e) = open::echo_pair(&spec, cfg.receiver(), clock, echo_cpu).map_err(open_err)?;
        (c, Some(e))
    } else {
        (open::loopback(&spec).map_err(open_err)?, None)
    };
    let r = measure_and_print(
        &cfg,
        &a.measure,
        t,
        ch.as_mut(),
        crate::report::Mode::Loopback,
        stop,
        clock,
        fail_if,
        None,
    );
    drop(ch);
    if let Some(e) = echo {
        let _ = e.finish();
    }
    r.map(|(_, code)| code)
}
