//! `counters::attribution`.

use ibnoise::counters::attribution::*;
use ibnoise::counters::{Counter, Counts};
use ibstats::latency::LatencyHistogram;

fn hist(vals: &[u64]) -> LatencyHistogram {
    let mut h = LatencyHistogram::new();
    for &v in vals {
        h.record(v);
    }
    h
}

#[test]
fn intervals_with_a_switch_hold_the_tail() {
    let mut a = Attributor::new();
    let mut quiet = Counts::default();
    quiet.set(Counter::ContextSwitches, Some(0));
    quiet.set(Counter::Interrupts, Some(3));
    let mut busy = quiet;
    busy.set(Counter::ContextSwitches, Some(2));
    for _ in 0..8 {
        a.interval(&quiet, &hist(&[2_000; 1000]));
    }
    let mut slow = vec![2_000; 990];
    slow.extend([31_000; 10]);
    a.interval(&busy, &hist(&slow));
    a.interval(&busy, &hist(&slow));
    let r = a.finish();
    assert_eq!(r.intervals, 10);
    let l = r.likely().expect("a cause");
    assert_eq!(l.cause, "context_switch");
    assert_eq!((l.with.intervals, l.without.intervals), (2, 8));
    assert!(
        l.sentence()
            .contains("intervals with a context switch (2 of 10)"),
        "{}",
        l.sentence()
    );
    // Interrupts were in every interval: no "without" side, not named.
    let irq = r.causes.iter().find(|c| c.cause == "interrupt").unwrap();
    assert_eq!(irq.without.intervals, 0);
    // Page faults were never counted: no line.
    assert!(r.causes.iter().all(|c| c.cause != "page_fault"));
}

#[test]
fn one_lucky_interval_does_not_name_a_cause() {
    let mut a = Attributor::new();
    let mut c = Counts::default();
    c.set(Counter::Interrupts, Some(0));
    a.interval(&c, &hist(&[2_000; 100]));
    c.set(Counter::Interrupts, Some(5));
    for _ in 0..20 {
        a.interval(&c, &hist(&[2_000, 900_000]));
    }
    assert!(a.finish().likely().is_none());
}

#[test]
fn no_cause_is_named_when_the_tails_match() {
    let mut a = Attributor::new();
    let mut c = Counts::default();
    for i in 0..10 {
        c.set(Counter::ContextSwitches, Some(i % 2));
        a.interval(&c, &hist(&[2_000; 100]));
    }
    assert!(a.finish().likely().is_none());
}
