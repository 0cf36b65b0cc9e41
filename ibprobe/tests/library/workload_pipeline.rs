//! `probe::workload::pipeline`.

use ibprobe::probe::workload::pipeline::*;

#[test]
fn depth_d_allows_d_unacked_and_none_allows_all() {
    let mut a = Acks::new(Some(2));
    assert!(a.allows(0) && a.allows(1) && !a.allows(2));
    a.on_post(2);
    assert_eq!(a.max_unacked, 2);
    assert!(a.on_ack(1));
    assert!(a.allows(2) && !a.allows(3));
    assert!(!a.on_ack(1));
    a.forget(5);
    assert!(a.allows(5) && !a.allows(7));
    let none = Acks::new(None);
    assert!(!none.on() && none.allows(1_000_000));
}
