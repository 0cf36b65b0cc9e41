//! The latency families as Prometheus text 0.0.4 or OpenMetrics text,
//! written straight from the store's series.
//!
//! Why it exists: with 100 targets x 4 sizes these families are about
//! 17 000 lines and 2.4 MB, and going through prometheus-client's data
//! model took 20-30 ms per encode. Here each line is a copy of the
//! series' pre-escaped labels, a pre-formatted bound and one number
//! (itoa / dtoa, as prometheus-client formats them), so the encode is a
//! few milliseconds. The shapes match prometheus-client's output (tests
//! in `mod.rs` compare them sample by sample).
//!
//! The two formats differ only in family headers (OpenMetrics names a
//! counter family without `_total` and adds `# UNIT`) and in where `le`
//! goes (OpenMetrics: first, as prometheus-client writes it).

use super::{Fam, Kind, State, QUANTILE_LABELS};

/// Appends `v` escaped for a label value (`\`, `"`, newline), which is
/// the same in both text formats.
pub(super) fn escape_label_value(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// Appends a `# HELP` text: `\` and newline escaped (and `"` in
/// OpenMetrics).
fn escape_help(out: &mut Vec<u8>, help: &str, om: bool) {
    for c in help.chars() {
        match c {
            '\\' => out.extend_from_slice(b"\\\\"),
            '\n' => out.extend_from_slice(b"\\n"),
            '"' if om => out.extend_from_slice(b"\\\""),
            c => {
                let mut b = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
            }
        }
    }
}

/// A float as Go and Prometheus parse it.
pub(super) fn float(out: &mut Vec<u8>, v: f64) {
    if v.is_finite() {
        out.extend_from_slice(dtoa::Buffer::new().format(v).as_bytes());
    } else if v.is_nan() {
        out.extend_from_slice(b"NaN");
    } else if v > 0.0 {
        out.extend_from_slice(b"+Inf");
    } else {
        out.extend_from_slice(b"-Inf");
    }
}

fn int(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

fn header(out: &mut Vec<u8>, st: &State, f: Fam, om: bool) {
    let name = if om { f.om_name() } else { f.name() };
    let kind = match f.kind() {
        Kind::Counter => "counter",
        Kind::Gauge => "gauge",
        Kind::Histogram => "histogram",
        Kind::Summary => "summary",
    };
    out.extend_from_slice(b"# HELP ");
    out.extend_from_slice(name.as_bytes());
    out.push(b' ');
    escape_help(out, st.help(f), om);
    out.extend_from_slice(b"\n# TYPE ");
    out.extend_from_slice(name.as_bytes());
    out.push(b' ');
    out.extend_from_slice(kind.as_bytes());
    out.push(b'\n');
    if let (true, Some(unit)) = (om, f.unit()) {
        out.extend_from_slice(b"# UNIT ");
        out.extend_from_slice(name.as_bytes());
        out.push(b' ');
        out.extend_from_slice(unit.as_bytes());
        out.push(b'\n');
    }
}

/// `name{labels[,extra]} ` (the value follows).
fn start(out: &mut Vec<u8>, name: &str, suffix: &str, labels: &str, extra: Option<(&str, &str)>) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(suffix.as_bytes());
    out.push(b'{');
    out.extend_from_slice(labels.as_bytes());
    if let Some((k, v)) = extra {
        out.push(b',');
        out.extend_from_slice(k.as_bytes());
        out.extend_from_slice(b"=\"");
        out.extend_from_slice(v.as_bytes());
        out.push(b'"');
    }
    out.extend_from_slice(b"} ");
}

/// Writes every latency family of `st` in text 0.0.4 (`om` false) or
/// OpenMetrics (`om` true, without `# EOF`).
pub(super) fn write(out: &mut Vec<u8>, st: &State, om: bool) {
    for f in super::FAMILIES {
        header(out, st, f, om);
        let name = f.name();
        match f {
            Fam::Latency => histograms(out, st, name, om),
            Fam::Probes => {
                for s in st.series.values() {
                    for (result, n) in [("ok", s.ok), ("timeout", s.timeout), ("error", s.error)] {
                        start(out, name, "", &s.labels.text, Some(("result", result)));
                        int(out, n);
                        out.push(b'\n');
                    }
                }
            }
            Fam::Errors => {
                for e in st.errors.values() {
                    start(out, name, "", &e.labels.text, None);
                    int(out, e.count);
                    out.push(b'\n');
                }
            }
            Fam::LastSuccess => {
                for s in st.series.values() {
                    if let Some(t) = s.last_ok {
                        start(out, name, "", &s.labels.text, None);
                        float(out, t);
                        out.push(b'\n');
                    }
                }
            }
            Fam::Window => {
                for (s, w) in st.series.values().filter_map(|s| Some((s, s.summary?))) {
                    for (q, v) in QUANTILE_LABELS.iter().zip(w.quantiles) {
                        start(out, name, "", &s.labels.text, Some(("quantile", q)));
                        float(out, v as f64 / 1e9);
                        out.push(b'\n');
                    }
                    start(out, name, "_sum", &s.labels.text, None);
                    float(out, w.sum_ns as f64 / 1e9);
                    out.push(b'\n');
                    start(out, name, "_count", &s.labels.text, None);
                    int(out, w.count);
                    out.push(b'\n');
                }
            }
            Fam::WindowMax => {
                for (s, w) in st.series.values().filter_map(|s| Some((s, s.summary?))) {
                    start(out, name, "", &s.labels.text, None);
                    float(out, w.max_ns as f64 / 1e9);
                    out.push(b'\n');
                }
            }
        }
    }
}

/// `_bucket` lines (cumulative, `+Inf` last), `_sum`, `_count`; in
/// OpenMetrics `_sum` and `_count` first and `le` as the first label.
fn histograms(out: &mut Vec<u8>, st: &State, name: &str, om: bool) {
    for s in st.series.values() {
        let sum_count = |out: &mut Vec<u8>| {
            start(out, name, "_sum", &s.labels.text, None);
            float(out, s.sum);
            out.push(b'\n');
            start(out, name, "_count", &s.labels.text, None);
            int(out, s.count);
            out.push(b'\n');
        };
        if om {
            sum_count(out);
        }
        let mut cumulative = 0;
        for (le, n) in st.le_labels.iter().zip(s.classic) {
            cumulative += n;
            out.extend_from_slice(name.as_bytes());
            if om {
                out.extend_from_slice(b"_bucket{le=\"");
                out.extend_from_slice(le.as_bytes());
                out.extend_from_slice(b"\",");
                out.extend_from_slice(s.labels.text.as_bytes());
                out.extend_from_slice(b"} ");
            } else {
                out.extend_from_slice(b"_bucket{");
                out.extend_from_slice(s.labels.text.as_bytes());
                out.extend_from_slice(b",le=\"");
                out.extend_from_slice(le.as_bytes());
                out.extend_from_slice(b"\"} ");
            }
            int(out, cumulative);
            out.push(b'\n');
        }
        if !om {
            sum_count(out);
        }
    }
}
