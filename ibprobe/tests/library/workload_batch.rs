//! `probe::workload::batch`.

use ibprobe::probe::workload::batch::*;
use ibprobe::probe::workload::slot::Cause;

#[test]
fn fills_at_k_times_out_after_t_and_counts_causes() {
    let mut b = Batcher::new(3, 100);
    assert_eq!(b.deadline(), None);
    assert!(!b.add(1000));
    assert_eq!(b.deadline(), Some(1100));
    assert!(!b.add(1050));
    assert!(b.add(1060));
    b.posted(Cause::Fill);
    assert_eq!((b.open(), b.deadline()), (0, None));
    b.add(2000);
    assert_eq!(
        b.deadline(),
        Some(2100),
        "the timer starts at the first message"
    );
    b.posted(Cause::Timer);
    b.posted(Cause::Explicit);
    assert_eq!(b.flushes, [1, 1, 1]);
    assert_eq!(Batcher::new(1, 0).deadline(), None);
    assert!(Batcher::new(1, 0).add(5), "k = 1: every message fills");
}
