//! `cli::args`.

use ibprobe::cli::args::*;

#[test]
fn rates_parse_with_suffixes_and_zero() {
    assert_eq!(
        parse_rates("0,1000,10k,1.5M").unwrap(),
        vec![0.0, 1000.0, 10_000.0, 1_500_000.0]
    );
    for (s, part) in [
        ("", "empty"),
        ("1,,2", "empty item"),
        ("-5", "not a rate"),
        ("fast", "not a rate"),
        ("inf", "not a rate"),
        ("20M", "highest"),
        ("1k,1000", "twice"),
    ] {
        let e = parse_rates(s).unwrap_err();
        assert!(e.starts_with("--rates "), "{e}");
        assert!(e.contains(part), "{s:?}: {e}");
    }
}
