//! `report::sweep`.

use ibprobe::report::sweep::*;

#[test]
fn rate_labels() {
    assert_eq!(rate_label(0.0), "back to back");
    assert_eq!(rate_label(1000.0), "1000/s");
    assert_eq!(rate_label(2.5), "2.5/s");
}
