//! `ibprobe loopback`: one process owns both ends; one-way latency (or
//! the round trip through an in-process echo thread) on one clock.

use super::args::LoopbackArgs;
use super::common::{default_cpu, measure_and_print, open_err, stop_flag};
use super::error::CliError;
use crate::clock::Clock;
use crate::probe::config::Mode;
use crate::probe::open;
use crate::report::threshold::RunKind;

/// Runs `ibprobe loopback`; the exit code.
pub fn run(a: &LoopbackArgs) -> Result<u8, CliError> {
    let t = &a.transport;
    let fail_if = a.fail_if.thresholds(RunKind::Latency)?;
    if a.hw_timestamps {
        crate::spec::check_hw_timestamps(
            t.transport,
            t.verbs.signal,
            a.round_trip,
            t.verbs
                .peer_dev
                .as_ref()
                .is_some_and(|p| Some(p) != t.verbs.dev.as_ref()),
        )
        .map_err(|e| CliError::input(e.0))?;
    }
    super::common::warn_model_resolution(t);
    let mode = if a.round_trip {
        Mode::RoundTrip
    } else {
        Mode::OneWay
    };
    let mut cfg = a.measure.probe_config(t, mode, default_cpu(t))?;
    if a.stamp.stamp_thread {
        crate::spec::check_stamp(
            t.transport,
            t.verbs.inline,
            cfg.size,
            a.round_trip.then_some("--round-trip"),
        )
        .map_err(|e| CliError::input(e.0))?;
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
