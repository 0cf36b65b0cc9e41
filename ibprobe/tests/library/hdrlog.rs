//! `report::hdrlog`.

use ibprobe::report::hdrlog::*;
use ibstats::latency::LatencyHistogram;

#[test]
fn encode_decode_round_trip_keeps_every_count() {
    let mut h = LatencyHistogram::new();
    for v in [1u64, 150, 151, 2_000, 2_000, 99_999, 5_000_000] {
        h.record(v);
    }
    let s = encode(&h);
    assert!(s.starts_with("HISTF"), "{s}");
    let back = decode(&s).unwrap();
    assert_eq!(back, h.to_hdr());
    assert!(decode("not base64!").unwrap_err().contains("base64"));
    assert!(decode("AAAA").unwrap_err().contains("V2"));
}
