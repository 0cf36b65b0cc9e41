//! `sys::tsc`.

use ibprobe::sys::tsc::*;

#[test]
fn monotonic_raw_advances() {
    let a = monotonic_raw_ns();
    std::thread::sleep(std::time::Duration::from_millis(2));
    let b = monotonic_raw_ns();
    assert!(
        b > a + 1_000_000,
        "monotonic raw did not advance 1 ms over a 2 ms sleep: {a} -> {b}"
    );
}

#[test]
fn rdtsc_advances() {
    let a = rdtsc();
    std::thread::sleep(std::time::Duration::from_millis(2));
    let b = rdtsc();
    assert!(b > a, "TSC did not advance over a 2 ms sleep: {a} -> {b}");
}
