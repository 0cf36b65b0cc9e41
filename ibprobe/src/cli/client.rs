//! `ibprobe client`: the measuring side of a round trip against
//! `ibprobe server` (or an ibexporter responder), through the one
//! handshake of `probe/session/`.

use super::args::ClientArgs;
use super::common::{default_cpu, measure_and_print, session_err, stop_flag};
use super::error::CliError;
use crate::clock::Clock;
use crate::probe::config::Mode;
use crate::probe::session::oob::{Done, Oob, OobError, DEFAULT_PORT};
use crate::probe::session::{self, OneMessage};
use crate::report::threshold::RunKind;

pub fn run(a: &ClientArgs) -> Result<u8, CliError> {
    let t = &a.transport;
    let fail_if = a.fail_if.thresholds(RunKind::Latency)?;
    let mut cfg = a.measure.probe_config(t, Mode::RoundTrip, default_cpu(t))?;
    if a.hw_timestamps {
        crate::spec::check_hw_timestamps(t.transport, t.verbs.signal, true, false)?;
        cfg.hw_timestamps = true;
    }
    let mut spec = t.channel_spec(cfg.size);
    spec.verbs.hw_timestamps = a.hw_timestamps;
    spec.check()?;
    let stop = stop_flag()?;
    let clock = Clock::choose(t.clock);
    let secret = a.secret.secret()?;
    let mut oob = Oob::connect(&a.host, DEFAULT_PORT, a.connect_timeout)
        .map_err(|e| match e {
            OobError::Refused(_) | OobError::Resolve { .. } => CliError::input(e.to_string()),
            _ => CliError::run(e.to_string()),
        })?
        .with_secret(secret);
    let mut params = serde_json::to_value(&cfg).unwrap_or_default();
    params["receiver"] = serde_json::to_value(cfg.receiver()).unwrap_or_default();
    let mut ch =
        session::open_client(&mut oob, &spec, &OneMessage { params }).map_err(session_err)?;
    // --hw-timestamps: Done goes before the report, which needs the
    // server's timestamps (session::hw_finish).
    let mut done_sent = false;
    let mut hw = |o: &mut crate::probe::Outcome| {
        done_sent = o.hw.is_some();
        session::hw_finish(&mut oob, o).map_err(session_err)
    };
    let r = measure_and_print(
        &cfg,
        &a.measure,
        t,
        ch.as_mut(),
        crate::report::Mode::Client,
        stop,
        clock,
        fail_if,
        Some(&mut hw),
    );
    let (sent, interrupted) = r
        .as_ref()
        .map(|(o, _)| (o.sent + o.warmup_count, o.interrupted))
        .unwrap_or((0, false));
    if !done_sent {
        let _ = oob.send(&Done { sent, interrupted });
    }
    drop(ch);
    r.map(|(_, code)| code).map_err(|e| e.against_peer(&a.host))
}
