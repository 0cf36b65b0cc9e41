//! The hot path does not allocate: a counting global allocator wraps the
//! system one, and 1,000,000 iterations of clock read + histogram record
//! (everything created before the loop) must allocate zero times.
//!
//! Why it exists: an allocation inside the measured loop is a latency
//! outlier of its own (a page fault, a lock in the allocator) that the
//! probe would then report as the network's.
//!
//! This file holds one test on purpose: the counter is process-wide, and a
//! second test running on another thread would count its allocations too.

use ibprobe::clock::Clock;
use ibstats::latency::LatencyHistogram;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged; the counter has no effect on memory.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn clock_read_and_record_never_allocate() {
    // The counter must see allocations at all, or a zero below means nothing.
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    let probe = std::hint::black_box(vec![1u8; 64]);
    assert!(
        ALLOCATIONS.load(Ordering::Relaxed) > before,
        "counting allocator not in use"
    );
    drop(probe);

    for clock in [Clock::calibrate(), Clock::monotonic()] {
        let mut hist = LatencyHistogram::new();
        let mut t0 = clock.now();
        let start = ALLOCATIONS.load(Ordering::Relaxed);
        for i in 0..1_000_000u64 {
            let t1 = clock.now();
            hist.record(clock.ticks_to_ns(t1.wrapping_sub(t0)));
            // Also the extremes: a huge (clamped) and a zero sample.
            if i % 100_000 == 0 {
                hist.record(u64::MAX);
                hist.record(0);
            }
            t0 = t1;
        }
        let during = ALLOCATIONS.load(Ordering::Relaxed) - start;
        assert_eq!(
            during,
            0,
            "{during} allocations in 1,000,000 iterations with {}",
            clock.describe()
        );
        assert_eq!(hist.len(), 1_000_000 + 20);
        assert_eq!(hist.summary().max_ns, u64::MAX);
    }
}
