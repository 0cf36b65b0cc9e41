//! `report::progress`.

use ibprobe::probe::config::Length;
use ibprobe::report::progress::*;

#[test]
fn a_quiet_or_unseen_bar_is_hidden_and_phases_read() {
    let (b, by_time) = run_bar(true, Length::Count(10), 5);
    assert!(b.is_hidden() && !by_time);
    let (b, by_time) = run_bar(true, Length::Duration(std::time::Duration::from_secs(2)), 5);
    assert!(b.is_hidden() && by_time);
    assert_eq!(b.length(), Some(2000));
    assert_eq!(phase_message(Some(100)), "warm-up: 100 messages");
    assert_eq!(phase_message(Some(0)), "measuring");
    assert_eq!(phase_message(None), "measuring");
}
