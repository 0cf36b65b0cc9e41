//! `ibprobe stream`: messages streaming through a credit window, batches
//! with a flush timer and pipelined acks. In loopback this
//! process owns both ends, the receiver on its own pinned thread, one
//! clock; with HOST it is the sending side against `ibprobe server`.

use super::args::StreamArgs;
use super::common::{open_err, say, session_err, stop_flag, stream_placement};
use super::error::CliError;
use crate::clock::Clock;
use crate::probe::config::{Mode, ProbeConfig};
use crate::probe::executor::{stream_client, stream_loopback};
use crate::probe::open;
use crate::probe::outcome::StreamOutcome;
use crate::probe::session::oob::{Oob, StreamTally, DEFAULT_PORT};
use crate::probe::session::{self, StreamHello};
use crate::report::hdrlog::HdrLogWriter;
use crate::report::progress::{phase_message, run_bar};
use crate::report::stream::StreamReport;
use crate::report::threshold::{FailIf, RunKind};
use crate::report::Format;
use crate::spec::{ChannelSpec, StreamSpec};
use crate::transport::{TransportError, TransportInfo};
use std::sync::atomic::AtomicBool;

pub fn run(a: &StreamArgs) -> Result<u8, CliError> {
    let t = &a.transport;
    let fail_if = a.fail_if.thresholds(RunKind::Stream)?;
    super::common::warn_model_resolution(t);
    let format = a.measure.format();
    if format == Format::Perftest {
        return Err(CliError::input(
            "--format perftest has no stream row; use table, json, csv or markdown",
        ));
    }
    let (cpu, rx_cpu) = stream_placement(t, a.rx_cpu, a.host.is_none());
    if a.host.is_none() && cpu.is_some() && cpu == rx_cpu {
        return Err(CliError::input(format!(
            "--rx-cpu {} is the sender's CPU: both loops spin, and on one CPU each waits a scheduler tick for the other (about 125 messages/s); pick another CPU for --rx-cpu or --cpu",
            cpu.unwrap_or_default()
        )));
    }
    let mut cfg = a.measure.probe_config(t, Mode::OneWay, cpu)?;
    let spec = t.channel_spec(cfg.size);
    let k = &a.stream;
    let stream = k.spec(t.transport, cfg.size, k.window, k.batch, k.pipeline);
    if a.stamp.stamp_thread {
        stream.check_stamp(t.transport, t.verbs.inline, cfg.size, a.host.is_some())?;
        cfg.stamp_thread = true;
        let allowed = ibhost::rt::allowed_cpus();
        if let Some(w) = super::common::stamp_cpu_warning(&allowed, &[cpu, rx_cpu]) {
            say!("warning: {w}");
        }
    }
    let stop = stop_flag()?;
    let clock = Clock::choose(t.clock);
    let failed = |e| CliError::run(format!("{} stream failed: {e}", t.transport.name()));
    // The stream's warm-up ends inside its loop: the bar shows the run's
    // two phases at once, drawn at its start and cleared at its end.
    let (bar, _) = run_bar(a.measure.quiet, cfg.length, cfg.warmup);
    if cfg.warmup > 0 {
        let warming = phase_message(Some(cfg.warmup));
        bar.set_message(format!("{warming}, then measuring"));
    }
    let (info, out, mode) = match &a.host {
        None => {
            let (mut tx, mut rx) = open::stream_pair(&spec, &stream).map_err(open_err)?;
            let info = tx.info();
            let (tx, rx) = (tx.as_mut(), rx.as_mut());
            let out =
                stream_loopback(&cfg, &stream, tx, rx, &clock, stop, rx_cpu).map_err(failed)?;
            (info, out, "loopback")
        }
        Some(host) => {
            let (secret, to) = (a.secret.secret()?, a.connect_timeout);
            let (info, out) = client_stream(host, to, secret, &spec, &stream, &cfg, &clock, stop)?;
            (info, out, "client")
        }
    };
    bar.finish_and_clear();
    let interrupted = out.send.interrupted || out.recv.interrupted;
    let mut report = StreamReport::new(t.transport, info, mode, cfg.size, &stream, &clock, out);
    report.rate_hz = cfg.rate_hz;
    if !fail_if.is_empty() {
        report.fail_if = Some(FailIf::check(fail_if, &report));
    }
    super::common::print_report(&report, format)?;
    if let Some(path) = &a.measure.hdr_log {
        write_hdr_log(path, &report).map_err(|e| CliError::run(format!("--hdr-log: {e}")))?;
    }
    if let Some(path) = &a.measure.plot {
        let title = format!(
            "ibprobe stream {} {} B, batch {}, window {}",
            t.transport, cfg.size, stream.batch, stream.window
        );
        crate::report::plot::write_svg(path, &title, &report.out.latency)
            .map_err(|e| CliError::run(format!("--plot: {e}")))?;
    }
    let failed = report.fail_if.as_ref().is_some_and(FailIf::failed);
    Ok(super::common::exit_code(interrupted, failed))
}

/// One stream against `ibprobe server` at `host`, this process the
/// sending side: the handshake, the run, the server's counters. Also
/// what `ibprobe loggp HOST --predict` measures its predictions with.
#[allow(clippy::too_many_arguments)]
pub(super) fn client_stream(
    host: &str,
    connect_timeout: std::time::Duration,
    secret: Option<crate::probe::session::auth::Secret>,
    spec: &ChannelSpec,
    stream: &StreamSpec,
    cfg: &ProbeConfig,
    clock: &Clock,
    stop: &AtomicBool,
) -> Result<(TransportInfo, StreamOutcome), CliError> {
    let mut oob = Oob::connect(host, DEFAULT_PORT, connect_timeout)
        .map_err(|e| CliError::run(e.to_string()))?
        .with_secret(secret);
    let hello = StreamHello {
        spec: stream.clone(),
        warmup: cfg.warmup,
        consume_delay: cfg.consume_delay,
        timeout: cfg.timeout,
        workload: None,
    };
    let mut tx = session::open_client(&mut oob, spec, &hello).map_err(session_err)?;
    let info = tx.info();
    let out = stream_client(cfg, stream, tx.as_mut(), clock, stop, || {
        oob.recv::<StreamTally>("waiting for the server's stream counters")
            .map(|m| m.tally)
            .map_err(|e| TransportError::PeerLost(e.to_string()))
    })
    .map_err(|e| CliError::run(format!("{} stream failed: {e}", spec.transport.name())))?;
    Ok((info, out))
}

/// The run as one interval of an HdrHistogram log: the per-message
/// latency, the time in batch and the credit wait, one tag each.
fn write_hdr_log(
    path: &std::path::Path,
    r: &StreamReport,
) -> Result<(), crate::report::ReportError> {
    let mut log = HdrLogWriter::create(
        path,
        &format!("ibprobe stream {} {} B", r.info.detail, r.size),
    )?;
    let end = r.out.elapsed_ns;
    log.write_interval("latency", &r.out.latency, 0, end)?;
    log.write_interval("time_in_batch", &r.out.send_histos.in_batch, 0, end)?;
    log.write_interval("credit_wait", &r.out.send_histos.credit_wait, 0, end)?;
    if let Some(st) = &r.out.stamp {
        log.write_interval("before_hca_read", &st.split.before, 0, end)?;
        log.write_interval("after_hca_read", &st.split.after, 0, end)?;
    }
    log.finish().map(|_| ())
}
