//! `host::timerlat_trace`.

use ibnoise::timerlat_trace::*;

// Lines as the Debian 6.1.0-56-rt-amd64 kernel writes them (the lab).
const IRQ: &str = "          <idle>-0       [000] d..h1..    11.711089: #4     context    irq timer_latency     39200 ns";
const THREAD: &str = "      timerlat/0-200     [000] .......    11.711530: #4     context thread timer_latency    720670 ns";
const NOISE: &str = "          <idle>-0       [001] dn.h2..    15.562259: irq_noise: local_timer:236 start 15.562137318 duration 81631 ns";

#[test]
fn the_kernels_lines_parse() {
    assert_eq!(
        parse_line(IRQ),
        Some(TraceEvent::Latency {
            cpu: 0,
            ts_ns: 11_711_089_000,
            seq: 4,
            context: Context::Irq,
            latency_ns: 39_200
        })
    );
    assert_eq!(
        parse_line(THREAD),
        Some(TraceEvent::Latency {
            cpu: 0,
            ts_ns: 11_711_530_000,
            seq: 4,
            context: Context::Thread,
            latency_ns: 720_670
        })
    );
    assert_eq!(
        parse_line(NOISE),
        Some(TraceEvent::Noise {
            cpu: 1,
            kind: NoiseKind::Irq,
            source: "local_timer:236",
            start_ns: 15_562_137_318,
            duration_ns: 81_631
        })
    );
    // A task name with spaces and brackets, a thread noise whose
    // source holds colons, softirq and nmi noise.
    let t = "  my [odd] task-77   [003] d..2.  20.000100: thread_noise: kworker/3:1:30 start 20.000050000 duration 2100 ns";
    assert_eq!(
        parse_line(t),
        Some(TraceEvent::Noise {
            cpu: 3,
            kind: NoiseKind::Thread,
            source: "kworker/3:1:30",
            start_ns: 20_000_050_000,
            duration_ns: 2_100
        })
    );
    let s = "  ksoftirqd/1-29 [001] ..s1.  5.5: softirq_noise:    TIMER:1 start 5.400000000 duration 900 ns";
    assert!(matches!(
        parse_line(s),
        Some(TraceEvent::Noise {
            kind: NoiseKind::Softirq,
            source: "TIMER:1",
            ..
        })
    ));
    let n = "  <idle>-0 [002] d.Z1.  5.5: nmi_noise: start 5.400000000 duration 900 ns";
    assert!(matches!(
        parse_line(n),
        Some(TraceEvent::Noise {
            kind: NoiseKind::Nmi,
            source: "nmi",
            cpu: 2,
            ..
        })
    ));
    assert_eq!(
        parse_line("CPU:1 [LOST 120 EVENTS]"),
        Some(TraceEvent::Lost {
            cpu: 1,
            events: 120
        })
    );
    for junk in [
        "# tracer: timerlat",
        "",
        "garbage",
        "  x-1 [000] .... 1.0: sched_switch: prev=a",
        "  x-1 [000] .... 1.0: #1 context nowhere timer_latency 5 ns",
        "  x-1 [000] .... 1.0: #1 context irq timer_latency 5 us",
    ] {
        assert_eq!(parse_line(junk), None, "{junk:?}");
    }
}

#[test]
fn runs_accumulate_per_cpu_and_name_the_worst_wakeups_causes() {
    let mut acc = TimerlatAccumulator::new(&[0, 1], None, 4242);
    // CPU 0: an irq noise, then a thread noise inside activation #4's
    // window [10.810860, 11.711530] (720.67 us), one outside it.
    acc.line("  <idle>-0 [000] d.h2. 10.000010: irq_noise: local_timer:236 start 10.000000000 duration 10000 ns");
    acc.line("  ktimer-5 [000] d..2. 11.711400: thread_noise: ktimers/0:15 start 11.711000000 duration 400000 ns");
    acc.line("  <idle>-0 [000] d.h2. 11.711420: irq_noise: local_timer:236 start 11.711400000 duration 20000 ns");
    acc.line(IRQ);
    acc.line(THREAD);
    acc.line("  <idle>-0 [000] d.h1. 11.712000: #5     context    irq timer_latency      1000 ns");
    acc.line(
        "  timerlat/0-200 [000] ..... 11.712010: #5     context thread timer_latency     5000 ns",
    );
    // CPU 1 only noise; CPU 2 is not measured.
    acc.line(NOISE);
    acc.line("  x-1 [002] d.h1. 11.0: #1 context irq timer_latency 7 ns");
    acc.line("CPU:0 [LOST 3 EVENTS]");
    // The idle task is not interference; our own reader is marked.
    acc.line("  <idle>-0 [000] d..2. 11.800000: thread_noise: swapper/0:0 start 11.700000000 duration 90000 ns");
    acc.line("  ibprobe-4242 [001] d..2. 11.800000: thread_noise: ibprobe:4242 start 11.700000000 duration 5000 ns");
    acc.line("something else");
    assert!(!acc.complete());
    assert_eq!(acc.unparsed, 1);
    let r = acc.finish();
    assert_eq!(r.len(), 2);
    let c0 = &r[0];
    assert_eq!((c0.irq.len(), c0.thread.len()), (2, 2));
    assert_eq!(c0.thread.max_ns(), 720_670);
    assert_eq!(c0.lost_events, 3);
    // Most total time first: the thread (400 us), then the timer (2 runs).
    assert_eq!(c0.sources[0].source, "ktimers/0:15");
    assert_eq!(c0.sources[1].source, "local_timer:236");
    assert_eq!((c0.sources[1].count, c0.sources[1].total_ns), (2, 30_000));
    let w = c0.worst.as_ref().unwrap();
    assert_eq!(
        (w.thread_ns, w.irq_ns, w.at_ns),
        (720_670, Some(39_200), 11_711_530_000)
    );
    // The 10.000 s timer is outside the window; the two others inside.
    assert_eq!(w.blocking.len(), 2, "{:?}", w.blocking);
    assert_eq!(w.blocking[0].kind, NoiseKind::Thread);
    assert_eq!(w.blocking[0].total_ns, 400_000);
    assert_eq!(w.blocking[1].total_ns, 20_000);
    assert_eq!(r[1].sources[0].max_ns, 81_631);
    assert!(!r[1].sources[0].ours);
    assert_eq!(r[1].sources[1].source, "ibprobe:4242");
    assert!(r[1].sources[1].ours);
    assert!(c0.sources.iter().all(|s| !s.source.starts_with("swapper")));
    assert!(r[1].thread.is_empty());
}

#[test]
fn a_count_limit_stops_each_cpu_at_its_own_count() {
    let mut acc = TimerlatAccumulator::new(&[0, 1], Some(2), 4242);
    for i in 1..=3 {
        acc.line(&format!(
            "  x-1 [000] d.h1. 1.{i:06}: #{i} context irq timer_latency 10 ns"
        ));
        acc.line(&format!(
            "  t-1 [000] ..... 1.{i:06}: #{i} context thread timer_latency {i}000 ns"
        ));
    }
    assert!(!acc.complete());
    acc.line("  x-1 [001] d.h1. 2.000001: #1 context irq timer_latency 10 ns");
    acc.line("  t-1 [001] ..... 2.000001: #1 context thread timer_latency 100 ns");
    acc.line("  t-1 [001] ..... 2.000002: #2 context thread timer_latency 100 ns");
    assert!(acc.complete());
    let r = acc.finish();
    assert_eq!(r[0].thread.len(), 2);
    assert_eq!(r[0].thread.max_ns(), 2_000);
}

#[test]
fn a_thread_sample_before_its_cpus_first_irq_sample_is_not_counted() {
    // Tracing switched on between activation #7's IRQ and its thread.
    let mut acc = TimerlatAccumulator::new(&[0], Some(2), 4242);
    acc.line("  t-1 [000] ..... 1.000007: #7 context thread timer_latency 9000 ns");
    acc.line("  x-1 [000] d.h1. 1.000008: #8 context irq timer_latency 10 ns");
    acc.line("  t-1 [000] ..... 1.000008: #8 context thread timer_latency 800 ns");
    assert!(!acc.complete(), "#7's thread sample counted");
    acc.line("  x-1 [000] d.h1. 1.000009: #9 context irq timer_latency 10 ns");
    acc.line("  t-1 [000] ..... 1.000009: #9 context thread timer_latency 900 ns");
    assert!(acc.complete());
    let r = acc.finish();
    assert_eq!((r[0].irq.len(), r[0].thread.len()), (2, 2));
    assert_eq!(r[0].thread.max_ns(), 900);
}
