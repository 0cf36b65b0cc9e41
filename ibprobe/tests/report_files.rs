//! The report's file outputs: the SVG plot (`--plot`) and the HDR
//! interval log (`--hdr-log`), read back with the hdrhistogram crate.

use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;
use ibprobe::report::hdrlog::HdrLogWriter;
use ibprobe::report::plot::write_svg;
use ibstats::latency::LatencyHistogram;
use std::time::{Duration, SystemTime};

fn body_with_tail() -> LatencyHistogram {
    let mut h = LatencyHistogram::new();
    for i in 0..100_000u64 {
        h.record(700 + (i * 7919) % 400);
    }
    for i in 0..100u64 {
        h.record(5_000 + i * 50);
    }
    h.record(262_144);
    h
}

#[test]
fn svg_has_title_axes_and_marker_labels() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("lat.svg");
    let h = body_with_tail();
    write_svg(&path, "shm loopback, 32 B, one-way", &h).expect("plot written");
    let svg = std::fs::read_to_string(&path).expect("svg readable");
    assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(200)]);
    assert!(svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains("shm loopback, 32 B, one-way"));
    assert!(svg.contains("latency [us]"));
    let s = h.summary();
    let us = |ns: u64| format!("{:.3}", ns as f64 / 1000.0);
    for label in [
        format!("p50 {} us", us(s.p50_ns)),
        format!("p99 {} us", us(s.p99_ns)),
        format!("p99.9 {} us", us(s.p999_ns)),
        // The max is far beyond 1.25 x p99.9: drawn at the edge.
        format!("max {} us (off scale)", us(s.max_ns)),
    ] {
        assert!(svg.contains(&label), "missing marker label {label:?}");
    }
    assert!(svg.contains("<rect"), "no histogram bars");
}

#[test]
fn svg_of_an_empty_histogram_still_written() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("empty.svg");
    write_svg(&path, "udp client, 8 B, RTT", &LatencyHistogram::new()).expect("plot written");
    let svg = std::fs::read_to_string(&path).expect("svg readable");
    assert!(svg.contains("udp client, 8 B, RTT: no samples"));
}

#[test]
fn svg_to_a_missing_directory_names_the_path() {
    let err = write_svg(
        std::path::Path::new("/nonexistent-dir/x.svg"),
        "t",
        &body_with_tail(),
    )
    .expect_err("cannot write there");
    let msg = err.to_string();
    assert!(msg.contains("/nonexistent-dir/x.svg"), "{msg}");
}

/// Standard base64 (RFC 4648) decoder, enough to read the log back.
fn base64_decode(s: &str) -> Vec<u8> {
    let val = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => (c - b'A') as u32,
            b'a'..=b'z' => (c - b'a' + 26) as u32,
            b'0'..=b'9' => (c - b'0' + 52) as u32,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not base64: {c}"),
        }
    };
    let bytes: Vec<u8> = s.bytes().filter(|&c| c != b'=').collect();
    let mut out = Vec::new();
    for chunk in bytes.chunks(4) {
        let mut acc = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            acc |= val(c) << (18 - 6 * i);
        }
        let n = chunk.len() * 6 / 8;
        for i in 0..n {
            out.push((acc >> (16 - 8 * i)) as u8);
        }
    }
    out
}

#[test]
fn hdr_log_reads_back_with_the_same_counts() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("run.hlog");
    let mut w = HdrLogWriter::create(&path, "shm loopback 32 B").expect("log created");
    // Three one-second intervals of one-way, one of send-completion.
    let mut expected: Vec<(String, u64, u64, LatencyHistogram)> = Vec::new();
    for sec in 0..3u64 {
        let mut h = LatencyHistogram::new();
        for i in 0..(1000 + sec * 500) {
            h.record(600 + (i * 31 + sec * 7) % 900);
        }
        h.record(20_000 + sec);
        let (start, end) = (sec * 1_000_000_000, (sec + 1) * 1_000_000_000);
        w.write_interval("one_way", &h, start, end)
            .expect("interval written");
        expected.push(("one_way".into(), start, end, h));
    }
    let mut sd = LatencyHistogram::new();
    for i in 0..777u64 {
        sd.record(300 + i);
    }
    w.write_interval("send_completion", &sd, 0, 3_000_000_000)
        .expect("interval written");
    expected.push(("send_completion".into(), 0, 3_000_000_000, sd));
    w.finish().expect("flushed");

    let bytes = std::fs::read(&path).expect("log readable");
    let text = String::from_utf8_lossy(&bytes);
    assert!(text.contains("#shm loopback 32 B"));
    assert!(text.contains("#[StartTime: "));
    assert!(text.contains("#[BaseTime: "));
    let mut got = Vec::new();
    for entry in IntervalLogIterator::new(&bytes) {
        match entry.expect("log parses") {
            LogEntry::Interval(ilh) => {
                let raw = base64_decode(ilh.encoded_histogram());
                let h: Histogram<u64> = Deserializer::new()
                    .deserialize(&mut &raw[..])
                    .expect("histogram decodes");
                got.push((
                    ilh.tag()
                        .map(|t| t.as_str().to_string())
                        .unwrap_or_default(),
                    ilh.start_timestamp(),
                    ilh.duration(),
                    ilh.max(),
                    h,
                ));
            }
            LogEntry::StartTime(_) | LogEntry::BaseTime(_) => {}
        }
    }
    assert_eq!(got.len(), expected.len());
    for ((tag, start, len, max, h), (etag, estart, eend, eh)) in got.iter().zip(&expected) {
        assert_eq!(tag, etag);
        assert_eq!(*start, Duration::from_nanos(*estart));
        assert_eq!(*len, Duration::from_nanos(eend - estart));
        assert_eq!(h.len(), eh.len());
        assert_eq!(*max, eh.to_hdr().max() as f64);
        // Bucket by bucket, the same counts.
        let a: Vec<(u64, u64)> = h
            .iter_recorded()
            .map(|v| (v.value_iterated_to(), v.count_at_value()))
            .collect();
        let b: Vec<(u64, u64)> = eh
            .to_hdr()
            .iter_recorded()
            .map(|v| (v.value_iterated_to(), v.count_at_value()))
            .collect();
        assert_eq!(a, b, "interval {tag} at {start:?}");
        assert_eq!(
            h.value_at_quantile(0.99),
            eh.to_hdr().value_at_quantile(0.99)
        );
    }
}

#[test]
fn hdr_log_rejects_a_bad_tag_with_a_reason() {
    let mut w = HdrLogWriter::new(Vec::new(), "", SystemTime::now()).expect("in memory");
    let err = w
        .write_interval("one way", &LatencyHistogram::new(), 0, 1)
        .expect_err("a space is not allowed in a tag");
    assert!(err.to_string().contains("one way"), "{err}");
}
