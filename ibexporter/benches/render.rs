//! `/metrics` render time with 100 remote targets x 4 sizes (the issue's
//! target: < 5 ms per scrape).
//!
//! Builds the registry the way `daemon::start` does (build info, the HCA
//! collector on the `hca-mixed` fixture, the latency store, the engine,
//! responder and target self metrics, the local-probes gauge, the window
//! summary as a family source), feeds every series `--rounds` rounds of
//! 100 samples between 1 and 50 us (30 rounds: the steady state of the
//! default 5 min window at the default 10 s interval), then times
//! `Metrics::encode` in each format: warm-up, then `--iterations` timed
//! encodes, printing median / p90 / max in ms, the body size, and PASS
//! or FAIL against 5 ms (judged on p90).
//!
//! "After a round" is the worst case: before each timed encode, one more
//! round is recorded into every one of the series (untimed there; its
//! cost, paid on the probe thread, is printed separately), so the
//! latency families are encoded from scratch. "Between rounds" is a
//! scrape served from the cache.
//!
//! Run: `cargo bench -p ibexporter --bench render [-- --iterations 50 --rounds 30 --targets 100]`
//! (`--strict` exits 1 when a format fails).

use std::sync::Arc;
use std::time::{Duration, Instant};

use ibexporter::collect::hca::HcaCollector;
use ibexporter::collect::latency::{LatencyStore, Round, SeriesKey};
use ibexporter::engine::{EngineMetrics, ResponderMetrics, TargetMetrics};
use ibexporter::http::{FamilySource, Format, Metrics};
use ibstats::latency::LatencyHistogram;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;

/// The target for one `/metrics` answer.
const TARGET: Duration = Duration::from_millis(5);
/// Message sizes of every remote target.
const SIZES: [usize; 4] = [32, 256, 1024, 4096];
/// Samples per round (the default `probes_per_interval`).
const SAMPLES: u64 = 100;

struct Opts {
    iterations: usize,
    warmup: usize,
    rounds: usize,
    targets: usize,
    strict: bool,
}

fn opts() -> Opts {
    let mut o = Opts {
        iterations: 50,
        warmup: 5,
        rounds: 30,
        targets: 100,
        strict: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut num = |name: &str| -> usize {
            args.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{name} wants a number"))
        };
        match a.as_str() {
            "--iterations" => o.iterations = num("--iterations").max(1),
            "--warmup" => o.warmup = num("--warmup"),
            "--rounds" => o.rounds = num("--rounds").max(1),
            "--targets" => o.targets = num("--targets"),
            "--strict" => o.strict = true,
            // cargo bench passes --bench; libtest-style filters are ignored.
            _ => {}
        }
    }
    o
}

/// xorshift64*: deterministic samples without a rand dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A latency in ns between 1 and 50 us, log-uniform (most samples
    /// low, a tail up to 50 us), so every series spreads over many
    /// classic buckets, native buckets and HDR sub-buckets.
    fn latency_ns(&mut self) -> u64 {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        (1_000.0 * 50f64.powf(u)) as u64
    }
}

fn key(source: &str, target: &str, transport: &str, op: &str, size: usize) -> SeriesKey {
    SeriesKey {
        source: source.into(),
        target: target.into(),
        transport: transport.into(),
        op: op.into(),
        size_bytes: size.to_string(),
    }
}

/// The registry and family source of `daemon::start`, with `targets`
/// remote udp targets x 4 sizes and the local shm/udp/wake-up probes.
fn build(o: &Opts) -> (Metrics, LatencyStore, Vec<SeriesKey>) {
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/hca-mixed");
    let mut reg = Registry::default();
    reg.register(
        "ibexporter_build",
        "ibexporter build information",
        Info::new(vec![(
            "version".to_string(),
            ibexporter::VERSION.to_string(),
        )]),
    );
    let hca = HcaCollector::new(fixture).unwrap_or_else(|e| panic!("{fixture}: {e}"));
    reg.register_collector(Box::new(hca));
    // No minimum interval between encodes: "after a round" must encode
    // again (the daemon waits up to MIN_ENCODE_INTERVAL, 1 s, which
    // would serve most of those scrapes from the cache).
    let store =
        LatencyStore::new(Duration::from_secs(300)).with_min_encode_interval(Duration::ZERO);
    let em = EngineMetrics::default();
    em.register(&mut reg);
    let local = vec![
        key("hostA", "loopback", "shm", "send", 32),
        key("hostA", "loopback", "udp", "send", 32),
        key("hostA", "cpu0", "host", "wakeup", 0),
        key("hostA", "cpu1", "host", "wakeup", 0),
    ];
    let g: Gauge = Gauge::default();
    g.set(local.len() as i64);
    reg.register(
        "ibexporter_local_probes",
        "Local probes running (HCA loopback ports x sizes, references, wake-up CPUs)",
        g,
    );
    ResponderMetrics::default().register(&mut reg);
    TargetMetrics::default().register(&mut reg);

    let mut series = local;
    for t in 0..o.targets {
        // Names as long as real ones: a host name, not a bare address.
        let name = format!("rdma-node-{:03}.rack{}.example.net", t + 1, t % 8);
        for size in SIZES {
            series.push(key("hostA", &name, "udp", "send", size));
        }
    }
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for k in &series {
        store.declare(k);
    }
    for round in 0..o.rounds {
        for k in &series {
            let mut h = LatencyHistogram::new();
            for _ in 0..SAMPLES {
                h.record(rng.latency_ns());
            }
            // A lost message now and then, as on a real network.
            let timeouts = u64::from(round % 10 == 9);
            let r = Round {
                samples: Some(h),
                timeouts,
                ..Round::default()
            };
            store.record(k, SAMPLES + timeouts, &r);
            em.rounds.inc();
        }
    }
    let source: FamilySource = Arc::new(store.clone());
    let metrics = Metrics::with_registries_and_sources([Arc::new(reg)], vec![source]);
    (metrics, store, series)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn pct(sorted: &[Duration], q: f64) -> Duration {
    // Nearest rank.
    let i = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn main() {
    let o = opts();
    let t = Instant::now();
    let (metrics, store, series) = build(&o);
    let n = series.len();
    // One more round for every series, recorded before each "after a
    // round" encode.
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let rounds: Vec<Round> = series
        .iter()
        .map(|_| {
            let mut h = LatencyHistogram::new();
            for _ in 0..SAMPLES {
                h.record(rng.latency_ns());
            }
            Round {
                samples: Some(h),
                ..Round::default()
            }
        })
        .collect();
    let mut record_times = Vec::new();
    let mut record_all = || {
        let t = Instant::now();
        for (k, r) in series.iter().zip(&rounds) {
            store.record(k, SAMPLES, r);
        }
        record_times.push(t.elapsed());
    };
    println!(
        "render: {} remote targets x {} sizes + 4 local = {n} latency series, {} rounds of {SAMPLES} samples (1-50 us) each; HCA fixture hca-mixed; built in {:.0} ms",
        o.targets,
        SIZES.len(),
        o.rounds,
        ms(t.elapsed())
    );
    // The body must hold every series, or the timing means nothing.
    let text = String::from_utf8(metrics.encode(Format::Text).expect("text encode"))
        .expect("text is UTF-8");
    let windows = text
        .lines()
        .filter(|l| l.starts_with("ibprobe_latency_window_seconds_count{"))
        .count();
    let buckets = text
        .lines()
        .filter(|l| l.starts_with("ibprobe_latency_seconds_count{"))
        .count();
    assert_eq!(windows, n, "window summaries in the text body");
    assert_eq!(buckets, n, "latency histograms in the text body");
    assert!(
        text.contains("ibexporter_hca_port_transmit_bytes_total{"),
        "HCA families missing"
    );
    println!(
        "load average at start: {}; {} warm-up + {} timed encodes per format",
        loadavg(),
        o.warmup,
        o.iterations
    );
    let mut failed = false;
    for (format, fresh) in [
        (Format::Text, true),
        (Format::OpenMetrics, true),
        (Format::Protobuf, true),
        (Format::Text, false),
        (Format::OpenMetrics, false),
        (Format::Protobuf, false),
    ] {
        // fresh: a round just ended (the latency families are encoded
        // again); else a scrape between two rounds (served from the cache).
        let mut touch = || {
            if fresh {
                record_all();
            }
        };
        let mut size = 0;
        for _ in 0..o.warmup {
            touch();
            size = metrics.encode(format).expect("encode").len();
        }
        let mut times = Vec::with_capacity(o.iterations);
        for _ in 0..o.iterations {
            touch();
            let t = Instant::now();
            let body = metrics.encode(format).expect("encode");
            times.push(t.elapsed());
            size = body.len();
            std::hint::black_box(body);
        }
        times.sort();
        let (med, p90, max, min) = (
            pct(&times, 0.5),
            pct(&times, 0.9),
            *times.last().expect("at least one"),
            times[0],
        );
        let mean = times.iter().sum::<Duration>() / times.len() as u32;
        let pass = p90 < TARGET;
        failed |= !pass;
        println!();
        println!(
            "Benchmark: {} {:<11} body {:>9} bytes ({:.1} KiB)",
            if fresh {
                "encode after a round"
            } else {
                "scrape between rounds"
            },
            format.label(),
            size,
            size as f64 / 1024.0
        );
        println!(
            "  Time (median):   {:>7.3} ms   p90 {:>7.3} ms   max {:>7.3} ms",
            ms(med),
            ms(p90),
            ms(max)
        );
        println!(
            "  Range (min … max): {:>5.3} ms … {:.3} ms   mean {:.3} ms   {} runs",
            ms(min),
            ms(max),
            ms(mean),
            times.len()
        );
        println!(
            "  {}: p90 {:.3} ms {} target {} ms",
            if pass { "PASS" } else { "FAIL" },
            ms(p90),
            if pass { "<" } else { ">=" },
            ms(TARGET)
        );
    }
    // Where the time goes: the latency families alone (no cache), and
    // what recording a round costs the probe thread.
    for format in [Format::Text, Format::OpenMetrics, Format::Protobuf] {
        let mut times: Vec<Duration> = (0..o.iterations.min(20))
            .map(|_| {
                let t = Instant::now();
                std::hint::black_box(store.render(format));
                t.elapsed()
            })
            .collect();
        times.sort();
        println!(
            "Breakdown: LatencyStore::render({}) alone ({n} series, no cache): median {:.3} ms, p90 {:.3} ms",
            format.label(),
            ms(pct(&times, 0.5)),
            ms(pct(&times, 0.9))
        );
    }
    record_times.sort();
    println!(
        "Recording one round of {SAMPLES} samples into each of the {n} series (probe thread, {} times): median {:.3} ms, {:.1} us per series",
        record_times.len(),
        ms(pct(&record_times, 0.5)),
        pct(&record_times, 0.5).as_secs_f64() * 1e6 / n as f64
    );
    println!();
    println!("load average at end: {}", loadavg());
    if failed && o.strict {
        std::process::exit(1);
    }
}
