//! `probe::workload::window`.

use ibprobe::probe::workload::window::*;

#[test]
fn a_window_blocks_at_n_and_reopens_on_returns() {
    let mut c = Credits::new(2);
    assert!(c.available());
    c.on_post();
    c.on_post();
    assert!(!c.available());
    assert!(!c.on_return(0));
    assert!(c.on_return(1));
    assert!(c.available());
    assert!(!c.on_return(1), "a repeated report gives nothing");
    c.on_post();
    assert!(
        !c.on_return(99) || c.drained(),
        "a report is capped at what was posted"
    );
    assert!(c.drained());
    assert_eq!(c.max_in_flight, 2);
    c.on_post();
    assert_eq!(c.forget_in_flight(), 1);
    assert!(c.drained());
}
