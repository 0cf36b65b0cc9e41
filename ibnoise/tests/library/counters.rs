//! `counters`.

use ibnoise::counters::*;

#[test]
fn since_subtracts_and_keeps_missing_missing() {
    let mut a = Counts::default();
    let mut b = Counts::default();
    a.set(Counter::Interrupts, Some(10));
    b.set(Counter::Interrupts, Some(25));
    b.set(Counter::Cycles, Some(5));
    let d = b.since(&a);
    assert_eq!(d.get(Counter::Interrupts), Some(15));
    assert_eq!(d.get(Counter::Cycles), None);
}

/// Touches 64 pages no one touched before: one byte every 2 MiB of a
/// 128 MiB zeroed allocation, which the allocator maps fresh (above
/// glibc's largest mmap threshold, 32 MiB, so never reused heap
/// memory another test already faulted in) and leaves untouched
/// until written; 2 MiB apart, each write faults even where
/// transparent huge pages map 2 MiB at a time.
fn touch_fresh_pages() -> Vec<u8> {
    const STRIDE: usize = 2 << 20;
    let mut v = vec![0u8; 64 * STRIDE];
    for i in 0..64 {
        v[i * STRIDE] = 1;
    }
    v
}

#[test]
fn a_meter_counts_this_threads_page_faults() {
    let mut m = Meter::open(&measuring_cpus(None), false);
    let before = m.read();
    let v = touch_fresh_pages();
    let after = m.read();
    let d = after.since(&before);
    assert!(d.get(Counter::PageFaultsMinor).unwrap() >= 64, "{d:?}");
    assert_eq!(v.iter().step_by(2 << 20).filter(|&&b| b == 1).count(), 64);
}

#[test]
fn a_read_without_interrupts_counts_the_thread_and_not_the_interrupts() {
    let mut m = Meter::open(&measuring_cpus(None), false);
    let before = m.read_without_interrupts();
    let v = touch_fresh_pages();
    // A voluntary context switch: the thread sleeps.
    std::thread::sleep(std::time::Duration::from_millis(2));
    let after = m.read_without_interrupts();
    let d = after.since(&before);
    assert!(d.get(Counter::PageFaultsMinor).unwrap() >= 64, "{d:?}");
    assert!(d.get(Counter::ContextSwitches).unwrap() >= 1, "{d:?}");
    assert_eq!(d.get(Counter::Interrupts), None);
    // A full read has the interrupts (this machine's /proc is mounted).
    assert!(m.read().get(Counter::Interrupts).is_some());
    drop(v);
}
