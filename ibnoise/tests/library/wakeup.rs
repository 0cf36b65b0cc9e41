//! `host::wakeup`.

use ibnoise::wakeup::*;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

const NO_FIFO: &str =
    "no SCHED_FIFO here (needs root or CAP_SYS_NICE); ibprobe's tests/host.rs checks the refusal";

fn fifo_allowed() -> bool {
    check_fifo(1).is_ok()
}

#[test]
fn counts_wakeups_per_cpu() {
    if !fifo_allowed() && ibtools_tests::skip("counts_wakeups_per_cpu", NO_FIFO) {
        return;
    }
    let cfg = WakeupConfig {
        cpus: vec![0],
        priority: 1,
        interval: Duration::from_micros(500),
        length: WakeupLength::Count(50),
        lock_memory: false,
    };
    let o = run(&cfg, &AtomicBool::new(false)).unwrap();
    assert_eq!(o.cpus.len(), 1);
    assert_eq!(o.cpus[0].latency.len(), 50);
    assert!(!o.interrupted);
    assert!(o.elapsed_ns >= 50 * 500_000 / 2);
}

#[test]
fn a_duration_bounds_the_run_and_stop_interrupts() {
    if !fifo_allowed()
        && ibtools_tests::skip("a_duration_bounds_the_run_and_stop_interrupts", NO_FIFO)
    {
        return;
    }
    let cfg = WakeupConfig {
        cpus: vec![0],
        priority: 1,
        interval: Duration::from_millis(1),
        length: WakeupLength::Duration(Duration::from_millis(50)),
        lock_memory: false,
    };
    let o = run(&cfg, &AtomicBool::new(false)).unwrap();
    let n = o.cpus[0].latency.len() + o.cpus[0].missed;
    assert!((40..=50).contains(&n), "{n} wake-ups in 50 ms at 1 ms");
    let o = run(&cfg, &AtomicBool::new(true)).unwrap();
    assert!(o.interrupted);
    assert_eq!(o.cpus[0].latency.len(), 0);
}

#[test]
fn a_cpu_outside_the_affinity_is_a_pin_error() {
    if !fifo_allowed() && ibtools_tests::skip("a_cpu_outside_the_affinity_is_a_pin_error", NO_FIFO)
    {
        return;
    }
    let cfg = WakeupConfig {
        cpus: vec![0, 100_000],
        priority: 1,
        interval: Duration::from_millis(1),
        length: WakeupLength::Count(5),
        lock_memory: false,
    };
    let e = run(&cfg, &AtomicBool::new(false)).unwrap_err();
    assert!(matches!(e, WakeupError::Pin { cpu: 100_000, .. }), "{e}");
}
