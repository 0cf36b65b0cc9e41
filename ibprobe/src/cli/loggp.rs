//! `ibprobe loggp`: LogGP parameters of a transport with 95% intervals
//! in loopback, against `ibprobe server`, or on the model's
//! virtual clock; `--predict` sets stream workloads' predictions beside
//! their measurements.

use std::time::{Duration, Instant};

use std::sync::atomic::AtomicBool;

use super::args::{parse_counts, parse_sizes, LoggpArgs, StreamKnobArgs};
use super::common::{
    default_cpu, model_resolution_warning, open_err, product, session_err, stop_flag,
    stream_placement,
};
use super::error::CliError;
use crate::clock::Clock;
use crate::probe::config::{Length, ProbeConfig};
use crate::probe::executor::{loggp_loopback, stream_loopback};
use crate::probe::loggp_fit::fit;
use crate::probe::loggp_predict::{predict, Params, Workload};
use crate::probe::open;
use crate::probe::session::oob::{Oob, DEFAULT_PORT};
use crate::probe::session::{self, StreamHello};
use crate::probe::stream_cost::loop_cost_ns;
use crate::probe::workload::loggp::{self, Loggp, LoggpPlan, SimSource, HEADER};
use crate::probe::workload::Paired;
use crate::report::loggp::{LoggpReport, PredictionRow};
use crate::report::progress::progress_bar;
use crate::spec::{ChannelSpec, CreditReturn, Op, StreamSpec, StreamWorkload, Transport};
use crate::transport::{TransportError, TransportInfo};

/// Default payload sizes (ud: one packet of rxe's 1024 B MTU).
const DEFAULT_SIZES: &str = "8,64,512,4096,16384";
const DEFAULT_SIZES_UD: &str = "8,64,256,1000";

/// The checked plan: sizes in range for the transport, counts in range.
fn plan(a: &LoggpArgs) -> Result<LoggpPlan, CliError> {
    let t = a.transport.transport;
    let text = a.sizes.clone().unwrap_or_else(|| {
        if t == Transport::Ud {
            DEFAULT_SIZES_UD
        } else {
            DEFAULT_SIZES
        }
        .into()
    });
    let mut sizes = parse_sizes(&text).map_err(|e| CliError::input(format!("--sizes: {e}")))?;
    sizes.sort_unstable();
    sizes.dedup();
    if sizes.len() < 2 {
        return Err(CliError::input(format!(
            "--sizes {text}: G is a slope and needs two or more sizes, e.g. --sizes 8,4096"
        )));
    }
    let (range, why) = t.size_range(Op::Send);
    for &s in &sizes {
        let b = s + HEADER;
        if !range.contains(&b) {
            return Err(CliError::input(format!(
                "--sizes: {s} B (+ the {HEADER} B loggp header = {b} B) is out of {t}'s range {}..={} B ({why}); use sizes up to {} B",
                range.start(),
                range.end(),
                range.end().saturating_sub(HEADER)
            )));
        }
    }
    if !(2..=1024).contains(&a.burst) {
        return Err(CliError::input(format!(
            "--burst {}: use 2..=1024 (n - 1 gaps are what g and o_s are measured over)",
            a.burst
        )));
    }
    if !(3..=1000).contains(&a.rounds) {
        return Err(CliError::input(format!(
            "--rounds {}: use 3..=1000 (an interval needs a spread of rounds; 6 or more give a 95% one)",
            a.rounds
        )));
    }
    if !(1..=100_000).contains(&a.reps) {
        return Err(CliError::input(format!(
            "--reps {}: use 1..=100000",
            a.reps
        )));
    }
    Ok(LoggpPlan {
        sizes,
        n: a.burst,
        rounds: a.rounds,
        reps: a.reps,
    })
}

/// The stream shape loggp's round trips run on: room for a whole burst and
/// its answer, slots of the largest message, the whole pool as the window
/// (a burst is posted without credits; the shm rings are sized by it).
pub fn slot_shape(plan: &LoggpPlan) -> StreamSpec {
    let largest = plan.sizes.iter().copied().max().unwrap_or(0) + HEADER;
    let slots = u32::from(plan.n).max(60) + 4;
    StreamSpec {
        slots,
        slot_size: largest.max(64),
        window: slots,
        credit_batch: 1,
        ..StreamSpec::default()
    }
}

pub fn run(a: &LoggpArgs) -> Result<u8, CliError> {
    let t = &a.transport;
    let plan = plan(a)?;
    let spec = t.channel_spec(plan.sizes[plan.sizes.len() - 1] + HEADER);
    spec.check()?;
    if a.simulate && t.transport != Transport::Model {
        return Err(CliError::input(format!(
            "--simulate runs the model on a virtual clock; it needs --transport model (not {})",
            t.transport
        )));
    }
    if a.simulate && a.host.is_some() {
        return Err(CliError::input(
            "--simulate runs in this process: leave HOST out",
        ));
    }
    let stop = stop_flag()?;
    let (cpu, rx_cpu) = stream_placement(t, a.rx_cpu, a.host.is_none() && !a.simulate);
    let mut warnings = Vec::new();
    let mut notes = Vec::new();
    if !a.simulate {
        warnings.extend(model_resolution_warning(t));
    }
    let steps = (plan.rounds * plan.sizes.len()) as u64;
    let bar = progress_bar(a.output.quiet, steps, "sizes x rounds");
    let mut step = || bar.inc(1);
    let started = Instant::now();
    let clock = Clock::choose(t.clock);
    let timeout_ns = a.timeout.as_nanos().min(u64::MAX as u128) as u64;
    let failed = |e| failed(t.transport, e);
    let (info, mode, samples) = if a.simulate {
        let m = spec
            .model
            .ok_or_else(|| CliError::input("--simulate needs --model"))?;
        let mut src = SimSource::new(m);
        let s = loggp::measure(&mut src, &plan, stop, &mut step).map_err(failed)?;
        let info = TransportInfo {
            name: "model".into(),
            detail: format!("LogGP model {m} (virtual clock)"),
            facts: vec![],
        };
        (info, "simulate", s)
    } else if let Some(host) = &a.host {
        let s = client(a, host, &spec, &plan, clock, timeout_ns, &mut step)?;
        (s.0, "client", s.1)
    } else {
        if cpu.is_some() && cpu == rx_cpu {
            return Err(CliError::input(format!(
                "--rx-cpu {} is the measuring thread's CPU: both spin, and on one CPU each waits a scheduler tick for the other; pick another --rx-cpu or --cpu",
                cpu.unwrap_or_default()
            )));
        }
        let (mut c, mut p) = open::stream_pair(&spec, &slot_shape(&plan)).map_err(open_err)?;
        let info = c.info();
        let s = loggp_loopback(
            c.as_mut(),
            p.as_mut(),
            clock,
            &plan,
            timeout_ns,
            stop,
            (cpu, rx_cpu),
            &mut step,
        )
        .map_err(failed)?;
        if let (Some(c), Some(r)) = (cpu, rx_cpu) {
            notes.push(format!("measuring on cpu {c}, answering on cpu {r}"));
        }
        (info, "loopback", s)
    };
    bar.finish_and_clear();
    let fitted = fit(&samples);
    if let (Some(m), false) = (spec.model, a.simulate) {
        let os = m.ns()[1];
        for p in fitted.points.iter().filter(|p| p.os_ns > 1.1 * os) {
            warnings.push(format!(
                "at {} B the send took {:.1} ns, more than the model's o_s {os} ns: this host's own cost of moving the message outgrows the emulated one, so the real-time model is not honest at that size (use smaller --sizes, a release build, or --simulate)",
                p.size, p.os_ns
            ));
        }
    }
    let mut report = LoggpReport {
        transport: t.transport,
        info,
        mode: mode.into(),
        truth: spec.model.filter(|_| t.transport == Transport::Model),
        n: plan.n,
        rounds: plan.rounds,
        reps: plan.reps,
        lost: samples.lost,
        elapsed_s: started.elapsed().as_secs_f64(),
        fit: fitted,
        warnings,
        notes,
        predictions: Vec::new(),
    };
    if a.predict {
        predictions(a, &mut report, stop, clock, (cpu, rx_cpu))?;
    }
    super::common::print_report(&report, a.output.format())?;
    if let Some(path) = &a.output.plot {
        report
            .write_svg(path)
            .map_err(|e| CliError::run(format!("--plot: {e}")))?;
    }
    Ok(0)
}

/// `--predict`: each workload of --batches x --windows x --pipelines
/// predicted from the parameters (measured, or --params), then (in
/// loopback) run as `ibprobe stream` runs it, for --predict-duration.
fn predictions(
    a: &LoggpArgs,
    report: &mut LoggpReport,
    stop: &'static AtomicBool,
    clock: Clock,
    (cpu, rx_cpu): (Option<usize>, Option<usize>),
) -> Result<(), CliError> {
    let t = &a.transport;
    let batches = parse_counts("--batches", &a.batches, 1).map_err(CliError::input)?;
    let windows = parse_counts("--windows", &a.windows, 1).map_err(CliError::input)?;
    let pipelines: Vec<Option<u32>> = match &a.pipelines {
        None => vec![None],
        Some(p) => parse_counts("--pipelines", p, 1)
            .map_err(CliError::input)?
            .into_iter()
            .map(Some)
            .collect(),
    };
    let params = match &a.params {
        Some(p) => Params::given(p),
        None => Params::measured(&report.fit),
    };
    report.notes.push(if a.simulate {
        "--predict with --simulate: predictions only (a stream runs in real time)".into()
    } else {
        "predictions add the stream loops' own work per slot (stamping, copying, recording, window state), timed here on free ends (`loop` in JSON)".into()
    });
    let knobs = StreamKnobArgs {
        credit_return: Some(CreditReturn::Piggyback),
        ..StreamKnobArgs::default()
    };
    for ((batch, window), pipeline) in product(product(batches, &windows), &pipelines) {
        let shape = knobs.spec(t.transport, a.predict_size, window, batch, pipeline);
        let loop_ns = if a.simulate {
            (0.0, 0.0)
        } else {
            loop_cost_ns(&shape, a.predict_size, &clock, a.host.is_some())
                .map_err(|e| CliError::run(format!("--predict: timing the stream loops: {e}")))?
        };
        let w = Workload {
            batch,
            window,
            pipeline,
            credit_batch: shape.credit_batch,
            size: a.predict_size,
            loop_ns,
        };
        let p = predict(&params, &w);
        let mut row = PredictionRow {
            batch,
            window,
            pipeline,
            size: a.predict_size,
            predicted_msgs_per_s: p.msgs_per_s,
            predicted_latency_ns: p.latency_ns,
            bound: p.bound.into(),
            loop_ns: [loop_ns.0, loop_ns.1],
            ..PredictionRow::default()
        };
        if !a.simulate {
            let spec = t.channel_spec(a.predict_size);
            let cfg = ProbeConfig {
                size: a.predict_size,
                length: Length::Duration(a.predict_duration),
                warmup: 1000,
                cpu,
                lock_memory: false,
                ..ProbeConfig::default()
            };
            let what = format!("--predict: the stream of batch {batch}, window {window}");
            let out = match &a.host {
                // Each workload is its own session: the server must
                // outlive the first (`ibprobe server --forever`).
                Some(host) => {
                    let to = a.connect_timeout;
                    super::stream::client_stream(host, to, None, &spec, &shape, &cfg, &clock, stop)
                        .map_err(|e| CliError {
                            message: format!("{what} against {host}: {} (each workload is a session of its own: run the server with --forever)", e.message),
                            ..e
                        })?
                        .1
                }
                None => {
                    let (mut tx, mut rx) = open::stream_pair(&spec, &shape).map_err(open_err)?;
                    stream_loopback(&cfg, &shape, tx.as_mut(), rx.as_mut(), &clock, stop, rx_cpu)
                        .map_err(|e| CliError::run(format!("{what} failed: {e}")))?
                }
            };
            row.measured_msgs_per_s = Some(out.msgs_per_sec());
            row.measured_p50_ns = Some(out.latency.summary().p50_ns as f64);
        }
        report.predictions.push(row);
    }
    Ok(())
}

/// Measures against `ibprobe server` at `host`: the Hello asks for a
/// stream of loggp's shape whose server side answers bursts.
fn client(
    a: &LoggpArgs,
    host: &str,
    spec: &ChannelSpec,
    plan: &LoggpPlan,
    clock: Clock,
    timeout_ns: u64,
    step: &mut dyn FnMut(),
) -> Result<(TransportInfo, loggp::Samples), CliError> {
    let stop = stop_flag()?;
    let mut oob = Oob::connect(host, DEFAULT_PORT, a.connect_timeout)
        .map_err(|e| CliError::run(e.to_string()))?;
    let hello = StreamHello {
        spec: slot_shape(plan),
        warmup: 0,
        consume_delay: Duration::ZERO,
        timeout: a.timeout,
        workload: StreamHello::asking(StreamWorkload::Loggp),
    };
    let mut end = session::open_client(&mut oob, spec, &hello).map_err(session_err)?;
    let info = end.info();
    if let Some(c) = default_cpu(&a.transport) {
        crate::sys::host::pin_to_cpu(c)
            .map_err(|e| CliError::run(format!("pin to --cpu {c}: {e}")))?;
    }
    let mut work = Loggp {
        plan,
        clock,
        timeout_ns,
        idle_ns: 0,
        step,
    };
    work.measure(end.as_mut(), stop)
        .map(|s| (info, s))
        .map_err(|e| failed(spec.transport, e))
}

/// A failed measurement: a peer that never answered is the input's fault
/// (exit 2), anything else the run's (3).
fn failed(t: Transport, e: TransportError) -> CliError {
    match e {
        TransportError::Unsupported(m) => CliError::input(format!("{t} loggp: {m}")),
        e => CliError::run(format!("{t} loggp failed: {e}")),
    }
}
