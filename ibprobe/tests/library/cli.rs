//! `cli`.

use ibprobe::cli::*;
use std::time::Duration;

#[test]
fn durations_parse_with_units() {
    assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
    assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
    assert_eq!(parse_duration("200us").unwrap(), Duration::from_micros(200));
    assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
    assert!(parse_duration("1.5").unwrap_err().contains("1.5 what?"));
    assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
    assert!(parse_duration("10x").unwrap_err().contains("unknown unit"));
    assert!(parse_duration("fast")
        .unwrap_err()
        .contains("not a duration"));
}

#[test]
fn the_parser_is_consistent() {
    use clap::CommandFactory;
    Cli::command().debug_assert();
}
