//! Golden checks of every report format on fixed outcomes whose statistics
//! are known by hand (all body samples below 2048 ns, where the histogram
//! is exact, so every expected number below is the exact nearest-rank
//! value of the sample list).

mod common;

use common::report::{client_outcome, clock, hist, loopback_outcome};
use ibprobe::clock::{Clock, Fallback};
use ibprobe::probe::outcome::Outcome;
use ibprobe::report::format::{PERFTEST_HEADER, PERFTEST_LINE};
use ibprobe::report::run::CSV_HEADER;
use ibprobe::report::{Format, Mode, Report, ReportContext};
use ibprobe::transport::TransportInfo;

/// The table's column header (after the context lines).
const TABLE_HEADER: &str = "latency [us]         count       min       p50       p90       p99     p99.9    p99.99        max      mean ± stdev   % > 10 us";
/// The Markdown table's header row.
const MARKDOWN_HEADER: &str = "| latency [us] | count | min | p50 | p90 | p99 | p99.9 | p99.99 | max | mean ± stdev | % > 10 us |";
/// The Markdown table's alignment row.
const MARKDOWN_ALIGN: &str = "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|";

fn transport() -> TransportInfo {
    TransportInfo {
        name: "shm".into(),
        detail: "two threads, one process".into(),
        facts: vec![("ring".into(), "spsc".into()), ("cpu".into(), "1,2".into())],
    }
}

/// The loopback fixture ([`loopback_outcome`]) with its context.
fn loopback() -> Report {
    let outcome = loopback_outcome();
    let mut ctx = ReportContext::new(Mode::Loopback, transport(), clock(), 32);
    ctx.tool_version = "9.9.9".into();
    ctx.config = vec![
        ("size".into(), "32".into()),
        ("iterations".into(), "1004".into()),
        ("rate_hz".into(), "1000".into()),
    ];
    ctx.warnings = vec!["not pinned to a CPU".into()];
    Report::new(&outcome, ctx)
}

/// The client fixture ([`client_outcome`]) with its context.
fn client() -> Report {
    let outcome = client_outcome();
    let mut ctx = ReportContext::new(Mode::Client, transport(), clock(), 32);
    ctx.tool_version = "9.9.9".into();
    Report::new(&outcome, ctx)
}

#[test]
fn perftest_is_perftests_exact_layout() {
    let out = client().render(Format::Perftest);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert_eq!(
        lines[0],
        "---------------------------------------------------------------------------------------"
    );
    assert_eq!(lines[0], PERFTEST_LINE);
    assert_eq!(
        lines[1],
        " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] "
    );
    assert_eq!(lines[1], PERFTEST_HEADER);
    // printf(" %-7lu %lu          %-7.2f ...") of RTT/2: min 0.500, true max
    // 0.999, typical (median) 0.749, avg 0.74975, stdev 0.1443, p99 0.994,
    // p99.9 0.999.
    assert_eq!(
        lines[2],
        " 32      1000          0.50           1.00         0.75     \t       0.75        \t0.14   \t\t0.99    \t\t1.00   "
    );
    assert_eq!(lines[3], PERFTEST_LINE);
    assert!(out.ends_with('\n'));
}

#[test]
fn perftest_in_loopback_uses_one_way_with_the_true_max() {
    let out = loopback().render(Format::Perftest);
    let row = out.lines().nth(2).expect("a result row");
    let cols: Vec<&str> = row.split_whitespace().collect();
    // bytes, iterations, t_min, t_max (TRUE max: the 250 us outlier that
    // perftest would have dropped), t_typical, t_avg, t_stdev, 99%, 99.9%.
    assert_eq!(
        cols,
        ["32", "1001", "0.60", "250.00", "1.10", "1.35", "7.87", "1.59", "1.60"]
    );
}

#[test]
fn csv_header_and_rows() {
    let out = loopback().render(Format::Csv);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "transport,mode,bytes,distribution,count,min_ns,p50_ns,p90_ns,p99_ns,p999_ns,p9999_ns,max_ns,mean_ns,stdev_ns,over_10us_count,over_10us_fraction,sent,lost,missed_steps,\
         context_switches,involuntary_context_switches,cpu_migrations,page_faults_minor,page_faults_major,cycles,instructions,cache_misses,interrupts,smis"
    );
    assert_eq!(lines[0], ibprobe::report::run::csv_header());
    assert!(lines[0].starts_with(CSV_HEADER));
    // This synthetic outcome has no counters: their cells are empty.
    assert_eq!(
        lines[1],
        "shm,loopback,32,one_way,1001,600,1100,1500,1590,1599,250000,250000,1348.2,7868.4,1,0.000999,1004,3,5,,,,,,,,,,"
    );
    assert_eq!(
        lines[2],
        "shm,loopback,32,send_completion,1000,400,899,1299,1389,1398,1399,1399,899.5,288.7,0,0.000000,1004,3,5,,,,,,,,,,"
    );
    assert_eq!(lines.len(), 3);
    let ncols = lines[0].split(',').count();
    assert!(lines.iter().all(|l| l.split(',').count() == ncols));
}

#[test]
fn csv_client_has_rtt_and_rtt_half() {
    let out = client().render(Format::Csv);
    let names: Vec<&str> = out
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(3).unwrap_or(""))
        .collect();
    assert_eq!(names, ["rtt", "rtt_half"]);
    let half = out.lines().nth(2).unwrap_or("");
    assert!(
        half.starts_with("shm,client,32,rtt_half,1000,500,749,"),
        "{half}"
    );
}

#[test]
fn markdown_header_and_rows() {
    let out = loopback().render(Format::Markdown);
    let lines: Vec<&str> = out.lines().collect();
    let h = lines
        .iter()
        .position(|l| *l == MARKDOWN_HEADER)
        .expect("markdown header row");
    assert_eq!(
        lines[h],
        "| latency [us] | count | min | p50 | p90 | p99 | p99.9 | p99.99 | max | mean ± stdev | % > 10 us |"
    );
    assert_eq!(lines[h + 1], MARKDOWN_ALIGN);
    assert_eq!(
        lines[h + 2],
        "| one-way | 1001 | 0.600 | 1.100 | 1.500 | 1.590 | 1.599 | 250.000 | 250.000 | 1.348 ± 7.868 | 0.0999% |"
    );
    assert_eq!(
        lines[h + 3],
        "| send-completion | 1000 | 0.400 | 0.899 | 1.299 | 1.389 | 1.398 | 1.399 | 1.399 | 0.899 ± 0.289 | 0.0000% |"
    );
    assert!(out.contains("> **warning** (max_outlier)"), "{out}");
}

#[test]
fn table_is_readable_and_warns() {
    let out = loopback().render(Format::Table);
    assert!(out.starts_with("ibprobe 9.9.9: loopback over shm (two threads, one process), 32 B\n"));
    assert!(out.contains("clock: TSC 2.000 GHz"), "{out}");
    assert!(out.contains(TABLE_HEADER));
    let row = out
        .lines()
        .find(|l| l.starts_with("one-way "))
        .expect("one-way row");
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        cols,
        [
            "one-way", "1001", "0.600", "1.100", "1.500", "1.590", "1.599", "250.000", "250.000",
            "1.348", "±", "7.868", "0.0999%"
        ]
    );
    assert!(out.contains("send-completion "));
    assert!(out.contains("\nnote: pinned to CPU 1\n"), "{out}");
    for needle in [
        "warning: not pinned to a CPU",
        "warning: one-way: max 250.000 us is 227x the median 1.100 us",
        "warning: warm-up max 750.000 us exceeds the measured max 250.000 us",
        "warning: 3 of 1004 messages lost (0.299%)",
        "warning: 5 of 1004 paced steps missed (0.498%)",
    ] {
        assert!(out.contains(needle), "missing {needle:?} in\n{out}");
    }
}

#[test]
fn client_table_has_rtt_and_half() {
    let out = client().render(Format::Table);
    assert!(out.lines().any(|l| l.starts_with("RTT ")), "{out}");
    let half = out
        .lines()
        .find(|l| l.starts_with("RTT/2 "))
        .expect("RTT/2 row");
    assert_eq!(half.split_whitespace().nth(3), Some("0.749"), "{half}");
    // No outlier, no loss, no warm-up max above the max: only few_samples
    // (for RTT; RTT/2 is the same samples and is not warned twice).
    let warnings: Vec<&str> = out.lines().filter(|l| l.starts_with("warning: ")).collect();
    assert_eq!(warnings.len(), 1, "{out}");
    assert!(
        warnings[0].starts_with("warning: RTT: only 1000 samples"),
        "{out}"
    );
}

#[test]
fn json_round_trips_with_documented_fields() {
    let r = loopback();
    let text = r.render(Format::Json);
    let v: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    assert!(text
        .trim_start()
        .starts_with("{\n  \"schema\": \"ibprobe.report/1\""));
    assert_eq!(v["schema"], "ibprobe.report/1");
    assert_eq!(v["tool"]["name"], "ibprobe");
    assert_eq!(v["tool"]["version"], "9.9.9");
    assert_eq!(v["mode"], "loopback");
    assert_eq!(v["message_size"], 32);
    assert_eq!(v["transport"]["name"], "shm");
    assert_eq!(v["transport"]["facts"]["ring"], "spsc");
    assert_eq!(v["clock"]["kind"], "tsc");
    assert_eq!(v["clock"]["hz"], 2e9);
    assert_eq!(v["clock"]["calibration_error_ppm"], 12.5);
    assert!(v["clock"]["fallback"].is_null());
    // Config keeps its order.
    let keys: Vec<&String> = v["config"]
        .as_object()
        .expect("config object")
        .keys()
        .collect();
    assert_eq!(keys.len(), 3);
    assert!(text.find("\"size\"") < text.find("\"iterations\""));
    assert_eq!(v["config"]["rate_hz"], "1000");
    assert_eq!(v["run"]["sent"], 1004);
    assert_eq!(v["run"]["lost"], 3);
    assert_eq!(v["run"]["missed_steps"], 5);
    assert_eq!(v["run"]["warmup_max_ns"], 750_000);
    assert_eq!(v["run"]["elapsed_ns"], 1_234_567_890u64);
    assert_eq!(v["run"]["interrupted"], false);
    assert_eq!(v["notes"][0], "pinned to CPU 1");
    let d = &v["distributions"];
    assert_eq!(d.as_array().map(Vec::len), Some(2));
    let ow = &d[0];
    assert_eq!(ow["name"], "one_way");
    assert_eq!(ow["label"], "one-way");
    assert_eq!(ow["count"], 1001);
    assert_eq!(ow["min_ns"], 600);
    assert_eq!(ow["p50_ns"], 1100);
    assert_eq!(ow["p90_ns"], 1500);
    assert_eq!(ow["p99_ns"], 1590);
    assert_eq!(ow["p999_ns"], 1599);
    assert_eq!(ow["p9999_ns"], 250_000);
    assert_eq!(ow["max_ns"], 250_000);
    assert_eq!(ow["mean_ns"], 1348);
    assert_eq!(ow["stdev_ns"], 7868);
    assert_eq!(ow["over_10us_count"], 1);
    assert_eq!(ow["us"]["p50"], 1.1);
    assert_eq!(ow["us"]["max"], 250.0);
    assert_eq!(d[1]["name"], "send_completion");
    assert_eq!(d[1]["p50_ns"], 899);
    let codes: Vec<&str> = v["warnings"]
        .as_array()
        .expect("warnings array")
        .iter()
        .filter_map(|w| w["code"].as_str())
        .collect();
    for c in [
        "context",
        "lost",
        "missed_steps",
        "warmup_max",
        "max_outlier",
        "few_samples",
    ] {
        assert!(codes.contains(&c), "missing warning {c} in {codes:?}");
    }
    assert!(!codes.contains(&"clock_fallback"));
    // The Value API gives the same document.
    assert_eq!(ibprobe::report::run::json_value(&r), v);
}

#[test]
fn clock_fallback_and_interruption_are_reported() {
    let outcome = Outcome {
        one_way: Some(hist(1000..21_000)),
        sent: 20_000,
        interrupted: true,
        elapsed_ns: 5_000_000_000,
        ..Outcome::default()
    };
    let clock = Clock::monotonic_because(Fallback::NoNonstopTsc);
    let r = Report::new(
        &outcome,
        ReportContext::new(Mode::Loopback, transport(), clock, 8),
    );
    let text = r.render(Format::Json);
    let v: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let codes: Vec<&str> = v["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .filter_map(|w| w["code"].as_str())
        .collect();
    assert!(codes.contains(&"interrupted"), "{codes:?}");
    assert!(!codes.contains(&"few_samples"), "{codes:?}");
    assert!(codes.contains(&"clock_fallback"), "{codes:?}");
    assert_eq!(v["clock"]["kind"], "monotonic_raw");
    assert!(v["clock"]["hz"].is_null());
    assert!(v["clock"]["fallback"]
        .as_str()
        .is_some_and(|f| f.contains("nonstop_tsc")));
    let table = r.render(Format::Table);
    assert!(
        table.contains("clock: CLOCK_MONOTONIC_RAW (fallback: CPU flags lack nonstop_tsc"),
        "{table}"
    );
    assert!(
        table.contains("warning: interrupted (Ctrl-C) after 5.000 s"),
        "{table}"
    );
}

/// The warnings of a run whose samples are `values` on `clock`, by code,
/// and its table.
fn run_on(clock: Clock, values: std::ops::Range<u64>) -> (serde_json::Value, String) {
    let n = values.end - values.start;
    let outcome = Outcome {
        one_way: Some(hist(values)),
        sent: n,
        elapsed_ns: 1_000_000,
        ..Outcome::default()
    };
    let r = Report::new(
        &outcome,
        ReportContext::new(Mode::Loopback, transport(), clock, 8),
    );
    let v: serde_json::Value = serde_json::from_str(&r.render(Format::Json)).unwrap();
    (v, r.render(Format::Table))
}

fn has_code(v: &serde_json::Value, code: &str) -> bool {
    v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w["code"] == code)
}

#[test]
fn a_median_at_the_clock_resolution_is_warned_about() {
    // clock_gettime with 10 ns steps, shm-like samples 0..=199 ns: min 0,
    // p50 100 ns (10 steps); p90 180 ns and p99 198 ns are not.
    let coarse = Clock::monotonic().with_resolution_ticks(10);
    let (v, table) = run_on(coarse, 0..200);
    assert_eq!(v["clock"]["resolution_ns"], 10.0);
    assert!(has_code(&v, "clock_resolution"), "{}", v["warnings"]);
    assert!(
        table.contains("warning: one-way: min 0.000 us, p50 0.099 us within 10 steps of the clock's 0.010 us resolution")
            && table.contains("use --clock tsc"),
        "{table}"
    );
    assert!(
        !table.contains("p90 0.1"),
        "p90 is not at resolution: {table}"
    );

    // The same samples on a 2 GHz TSC (0.5 ns steps): min 0 is, and no
    // advice to switch clocks.
    let (v, table) = run_on(clock(), 0..200);
    assert!(has_code(&v, "clock_resolution"));
    assert!(
        table.contains("min 0.000 us within 10 steps of the clock's 0.001 us resolution"),
        "{table}"
    );
    assert!(!table.contains("--clock tsc"), "{table}");

    // Far from either resolution: no warning.
    let (v, _) = run_on(Clock::monotonic().with_resolution_ticks(10), 1000..3000);
    assert!(!has_code(&v, "clock_resolution"), "{}", v["warnings"]);
    let (v, _) = run_on(clock(), 100..300);
    assert!(!has_code(&v, "clock_resolution"), "{}", v["warnings"]);
}
