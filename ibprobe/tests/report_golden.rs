//! Byte-for-byte checks of every human and machine format of the
//! loopback/client, stream, sweep, host, timerlat and compare reports, on
//! fixed inputs, against the files in `tests/golden/`. They hold the renderers to the
//! outputs users and scripts already read: a renderer change that alters
//! one byte fails here. `GOLDEN_UPDATE=1` rewrites the files (only for a
//! deliberate output change, reviewed in the diff).

use std::time::Duration;

mod common;

use common::report::{client_outcome, clock, hist, loopback_outcome};

use ibnoise::timerlat::{TimerlatConfig, TimerlatOutcome};
use ibnoise::timerlat_trace::TimerlatAccumulator;
use ibnoise::wakeup::{CpuWakeup, WakeupConfig, WakeupLength, WakeupOutcome};
use ibprobe::probe::config::Length;
use ibprobe::probe::loggp_fit::{Estimate, Fit, Segment, SizePoint};
use ibprobe::probe::outcome::Outcome;
use ibprobe::probe::outcome::StampRun;
use ibprobe::probe::workload::stream::StampSplit;
use ibprobe::probe::StreamOutcome;
use ibprobe::report::compare::{CompareReport, RoundValues};
use ibprobe::report::host::{HostReport, KernelInfo};
use ibprobe::report::loggp::{LoggpReport, PredictionRow};
use ibprobe::report::stream::StreamReport;
use ibprobe::report::stream_sweep::{Axes, StreamSweepReport};
use ibprobe::report::sweep::{Cell, SweepReport};
use ibprobe::report::threshold::{FailIf, Threshold};
use ibprobe::report::timerlat::TimerlatReport;
use ibprobe::report::{Format, Mode, Report, ReportContext};
use ibprobe::spec::{StreamSpec, Transport};
use ibprobe::transport::TransportInfo;

fn golden(name: &str, got: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("GOLDEN_UPDATE").is_some() {
        std::fs::write(&path, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    assert!(
        want == got,
        "{name} differs:\n--- want\n{want}\n--- got\n{got}"
    );
}

fn render(doc: &dyn ibprobe::report::Document, f: Format) -> String {
    ibprobe::report::format::render(doc, f).unwrap_or_else(|e| format!("refused: {e}\n"))
}

fn transport() -> TransportInfo {
    TransportInfo {
        name: "shm".into(),
        detail: "two threads, one process".into(),
        facts: vec![("ring".into(), "spsc".into())],
    }
}

fn thresholds(list: &[&str]) -> Vec<Threshold> {
    list.iter().map(|t| t.parse().unwrap()).collect()
}

fn report(mode: Mode, outcome: Outcome, fail_if: bool) -> Report {
    let mut ctx = ReportContext::new(mode, transport(), clock(), 32);
    ctx.tool_version = "9.9.9".into();
    ctx.config = vec![("size".into(), "32".into())];
    ctx.warnings = vec!["not pinned to a CPU".into()];
    let mut r = Report::new(&outcome, ctx);
    if fail_if {
        r.fail_if = Some(FailIf::check(&thresholds(&["p99>1us", "lost>0"]), &r));
        r.counters = Some(ibprobe::report::counters::fixture());
    }
    r
}

const FORMATS: [(Format, &str); 5] = [
    (Format::Table, "txt"),
    (Format::Json, "json"),
    (Format::Csv, "csv"),
    (Format::Markdown, "md"),
    (Format::Perftest, "perftest"),
];

#[test]
fn loopback_and_client_reports() {
    let (loopback, client) = (loopback_outcome(), client_outcome());
    for (name, r) in [
        ("loopback", report(Mode::Loopback, loopback.clone(), false)),
        ("loopback-fail-if", report(Mode::Loopback, loopback, true)),
        ("client", report(Mode::Client, client, true)),
    ] {
        for (f, ext) in FORMATS {
            golden(&format!("{name}.{ext}"), &r.render(f));
        }
    }
}

fn stream(fail_if: bool) -> StreamReport {
    let mut out = StreamOutcome {
        latency: hist(500..1500),
        elapsed_ns: 2_000_000,
        credit_stall_ns: 7_000,
        ack_wait_ns: 3_000,
        notes: vec!["receiver on CPU 2".into()],
        ..StreamOutcome::default()
    };
    out.send_histos.in_batch = hist(100..200);
    out.send_histos.credit_wait = hist([50, 60, 70]);
    out.send.msgs = 1002;
    out.send.data_posts = 251;
    out.send.flushes = [240, 10, 1];
    out.send.credit_stalls = 4;
    out.send.missed_steps = 2;
    out.recv.msgs = 1000;
    out.recv.lost_slots = 1;
    out.recv.credit_msgs = 30;
    let spec = StreamSpec::default();
    let mut r = StreamReport::new(
        Transport::Shm,
        transport(),
        "loopback",
        32,
        &spec,
        &clock(),
        out,
    );
    r.rate_hz = Some(1000.0);
    if fail_if {
        r.fail_if = Some(FailIf::check(
            &thresholds(&["p99>1us", "msgs_per_sec<1M"]),
            &r,
        ));
        r.out.counters = Some(ibprobe::report::counters::fixture());
    }
    r
}

#[test]
fn stream_reports() {
    for (name, r) in [("stream", stream(false)), ("stream-fail-if", stream(true))] {
        for (f, ext) in FORMATS {
            let text = r.render(f).unwrap_or_else(|e| format!("refused: {e}\n"));
            golden(&format!("{name}.{ext}"), &text);
        }
    }
}

/// `ibprobe stream --stamp-thread` (verbs): the latency split at the
/// HCA's read, in every format (a new JSON field, two table rows, CSV
/// columns after the usual ones).
#[test]
fn stream_report_with_the_stamp_split() {
    let mut r = stream(false);
    r.transport = Transport::Rc;
    r.out.stamp = Some(StampRun {
        split: StampSplit {
            before: hist(100..600),
            after: hist(400..900),
            latency: hist(500..1500),
        },
        pass_ns: 42.5,
        words: 64,
        cpu: Some(3),
    });
    for (f, ext) in FORMATS {
        let text = r.render(f).unwrap_or_else(|e| format!("refused: {e}\n"));
        golden(&format!("stream-stamp.{ext}"), &text);
    }
}

fn kernel() -> KernelInfo {
    KernelInfo {
        release: "6.1.0-rt".into(),
        realtime: true,
    }
}

#[test]
fn host_report() {
    let cfg = WakeupConfig {
        cpus: vec![0, 1],
        priority: 80,
        interval: Duration::from_millis(1),
        length: WakeupLength::Count(3),
        lock_memory: false,
    };
    let h = hist([3_000, 4_000, 50_000]);
    let o = WakeupOutcome {
        cpus: vec![
            CpuWakeup {
                cpu: 0,
                latency: h.clone(),
                missed: 0,
                counters: Some(ibprobe::report::counters::fixture()),
            },
            CpuWakeup {
                cpu: 1,
                latency: h,
                missed: 2,
                counters: None,
            },
        ],
        notes: vec!["mlockall: yes".into()],
        ..Default::default()
    };
    let mut r = HostReport::new(&cfg, &o);
    r.kernel = kernel();
    for c in &mut r.cpus {
        c.isolated = c.cpu == 1;
        c.nohz_full = false;
    }
    r.version = "9.9.9";
    for (f, ext) in &FORMATS[..4] {
        golden(&format!("host.{ext}"), &render(&r, *f));
    }
    let j: serde_json::Value = serde_json::from_str(&render(&r, Format::Json)).unwrap();
    assert_eq!(j["schema"], ibprobe::report::host::SCHEMA);
    assert_eq!(j["cpus"][1]["count"], 3);
    assert_eq!(j["cpus"][1]["max_ns"], 50_000);
    assert_eq!(j["cpus"][1]["over_10us_count"], 1);
    assert_eq!(j["cpu_dma_latency_written"], false);
    assert_eq!(render(&r, Format::Csv).lines().count(), 3);
    assert!(render(&r, Format::Markdown).contains("| 1 |"));
    let t = render(&r, Format::Table);
    assert!(t.contains("50.000"), "{t}");
    assert!(t.contains("2 deadlines missed"), "{t}");
}

#[test]
fn timerlat_report() {
    let mut acc = TimerlatAccumulator::new(&[0, 1], None, 4242);
    for line in [
        "  <idle>-0 [000] d.h2. 1.000130: irq_noise: local_timer:236 start 1.000100000 duration 30000 ns",
        "  <idle>-0 [000] d.h1. 1.000200: #1 context    irq timer_latency   2000 ns",
        "  timerlat/0-9 [000] ..... 1.000210: #1 context thread timer_latency 120000 ns",
        "  <idle>-0 [001] d.h1. 1.000200: #1 context    irq timer_latency   1500 ns",
        "  timerlat/1-9 [001] ..... 1.000210: #1 context thread timer_latency   3000 ns",
        "CPU:1 [LOST 4 EVENTS]",
    ] {
        acc.line(line);
    }
    let cfg = TimerlatConfig {
        cpus: vec![0, 1],
        period: Duration::from_millis(1),
        length: WakeupLength::Count(1),
        tracefs: None,
        interference: true,
    };
    let o = TimerlatOutcome {
        cpus: acc.finish(),
        tracefs: "/sys/kernel/tracing".into(),
        elapsed_ns: 5_000_000,
        interrupted: false,
        unparsed_lines: 2,
        notes: vec!["tracer: timerlat".into()],
    };
    let mut r = TimerlatReport::new(&cfg, &o);
    r.kernel = kernel();
    r.version = "9.9.9";
    for (f, ext) in &FORMATS[..4] {
        golden(&format!("timerlat.{ext}"), &render(&r, *f));
    }
    let j: serde_json::Value = serde_json::from_str(&render(&r, Format::Json)).unwrap();
    assert_eq!(j["schema"], ibprobe::report::timerlat::SCHEMA);
    assert_eq!(j["period_ns"], 1_000_000);
    assert_eq!(j["cpus"][0]["irq"]["max_ns"], 2_000);
    assert_eq!(j["cpus"][0]["thread"]["max_ns"], 120_000);
    assert_eq!(j["cpus"][0]["top_sources"][0]["source"], "local_timer:236");
    assert_eq!(j["cpus"][0]["worst"]["blocking"][0]["kind"], "irq");
    assert_eq!(j["cpus"][1]["lost_events"], 4);
    let csv = render(&r, Format::Csv);
    assert_eq!(csv.lines().count(), 5, "{csv}");
    assert!(csv.contains("\n0,thread,1,120000,"), "{csv}");
    let t = render(&r, Format::Table);
    assert!(
        t.contains("worst thread wake-up 120.000 us (irq 2.000 us)"),
        "{t}"
    );
    assert!(t.contains("irq local_timer:236: 30.000 us"), "{t}");
    assert!(t.contains("dropped 4 trace events"), "{t}");
    assert!(render(&r, Format::Markdown).contains("| 1 | thread | 1 |"));
}

fn one_way(base: u64) -> Outcome {
    Outcome {
        one_way: Some(hist(base..base + 1000)),
        sent: 1000,
        steps: if base > 700 { 1000 } else { 0 },
        missed_steps: if base > 700 { 12 } else { 0 },
        elapsed_ns: 1_000_000,
        ..Outcome::default()
    }
}

#[test]
fn sweep_grid() {
    let (sizes, rates) = ([8, 64], [0.0, 1000.0]);
    let mut cells = Vec::new();
    for (i, &size) in sizes.iter().enumerate() {
        for (j, &rate) in rates.iter().enumerate() {
            let base = 500 + 100 * (2 * i + j) as u64;
            cells.push(Cell {
                size,
                rate,
                report: report(Mode::Loopback, one_way(base), false),
            });
        }
    }
    cells.pop(); // An interrupted sweep: the last cell did not run.
    let r = SweepReport {
        transport: Transport::Shm,
        sizes: &sizes,
        rates: &rates,
        cells: &cells,
        length: Length::Count(1000),
        warmup: 100,
        interrupted: true,
    };
    for (f, ext) in &FORMATS[..4] {
        golden(&format!("sweep.{ext}"), &render(&r, *f));
    }
}

#[test]
fn stream_sweep_grid() {
    let cells = vec![stream(false), stream(true)];
    let axes = Axes {
        sizes: vec![32],
        rates: vec![1000.0],
        windows: vec![64],
        batches: vec![1],
        pipelines: vec![None, Some(2)],
    };
    let r = StreamSweepReport {
        transport: Transport::Shm,
        axes: &axes,
        cells: &cells,
        interrupted: false,
    };
    for (f, ext) in &FORMATS[..4] {
        golden(&format!("stream-sweep.{ext}"), &render(&r, *f));
    }
}

fn round(p50: f64, p99: f64) -> RoundValues {
    [Some(p50), Some(p99), Some(p99 * 1.5), Some(p99 * 3.0), None]
}

#[test]
fn compare_report() {
    let base: Vec<RoundValues> = (0..6)
        .map(|i| round(1000.0 + i as f64, 2000.0 + i as f64))
        .collect();
    let udp: Vec<RoundValues> = (0..6)
        .map(|i| round(9000.0 + i as f64 * 7.0, 20000.0 - i as f64))
        .collect();
    let same: Vec<RoundValues> = (0..6)
        .map(|i| round(1000.0 + (5 - i) as f64, 2000.0 + i as f64))
        .collect();
    let r = CompareReport::new(
        vec!["loopback".into(), "--count".into(), "5000".into()],
        "transport".into(),
        7,
        ibstats::schedule(3, 6, 7),
        &["shm".into(), "udp".into(), "shm2".into()],
        &[base, udp, same],
    );
    for (f, ext) in [
        (Format::Table, "txt"),
        (Format::Markdown, "md"),
        (Format::Json, "json"),
    ] {
        golden(&format!("compare.{ext}"), &render(&r, f));
    }
}

fn estimate(value: f64) -> Estimate {
    Estimate {
        value,
        low: value * 0.9,
        high: value * 1.2,
    }
}

fn loggp(truth: bool) -> LoggpReport {
    let segment = |from_size, to_size, g, big_g| Segment {
        from_size,
        to_size,
        g_ns: estimate(g),
        big_g: estimate(big_g),
        max_residual: 0.031,
    };
    let point = |size: usize, gap_ns| SizePoint {
        size,
        bytes: size + 16,
        prtt1_ns: 5000.0 + size as f64,
        gap_ns,
        os_ns: 1000.5,
        os_prtt_ns: 990.25,
        or_ns: 1500.0,
        empty_poll_ns: 12.0,
    };
    let fit = Fit {
        l: estimate(4987.5),
        os: estimate(1000.0),
        or: estimate(1500.0),
        g: estimate(2000.0),
        big_g: estimate(0.9876),
        segments: vec![
            segment(8, 512, 2010.0, 0.95),
            segment(512, 4096, 1500.0, 1.0),
        ],
        points: vec![point(8, 2020.0), point(512, 2500.0), point(4096, 5600.0)],
        notes: vec!["o_r is read from the answering side".into()],
        warnings: vec!["G's interval is wide".into()],
    };
    let predictions = if truth {
        vec![
            PredictionRow {
                batch: 1,
                window: 64,
                pipeline: None,
                size: 32,
                predicted_msgs_per_s: 400_000.4,
                measured_msgs_per_s: Some(380_000.0),
                predicted_latency_ns: 7000.6,
                measured_p50_ns: Some(7200.0),
                bound: "sender".into(),
                loop_ns: [40.0, 35.0],
            },
            PredictionRow {
                batch: 16,
                window: 64,
                pipeline: Some(2),
                size: 32,
                predicted_msgs_per_s: 2_000_000.0,
                bound: "link".into(),
                ..PredictionRow::default()
            },
        ]
    } else {
        Vec::new()
    };
    LoggpReport {
        transport: if truth {
            Transport::Model
        } else {
            Transport::Udp
        },
        info: transport(),
        mode: "loopback".into(),
        truth: truth.then_some(ibprobe::spec::SPIN_PRESET),
        n: 16,
        rounds: 15,
        reps: 21,
        lost: if truth { 0 } else { 2 },
        elapsed_s: 3.25,
        fit,
        warnings: vec!["not pinned".into()],
        notes: vec!["answering thread on CPU 2".into()],
        predictions,
    }
}

#[test]
fn loggp_report() {
    for (name, r) in [("loggp-model", loggp(true)), ("loggp", loggp(false))] {
        for (f, ext) in [
            (Format::Table, "txt"),
            (Format::Markdown, "md"),
            (Format::Json, "json"),
        ] {
            golden(&format!("{name}.{ext}"), &render(&r, f));
        }
    }
}
