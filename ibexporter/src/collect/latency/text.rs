//! The latency families as Prometheus text 0.0.4 or OpenMetrics text,
//! written straight from the store's series through the shared text
//! writer ([`crate::expo::text`]).
//!
//! Why it exists: with 100 targets x 4 sizes these families are about
//! 17 000 lines and 2.4 MB, too many to build through prometheus-client's
//! data model at every scrape. Here each line is a copy of the series'
//! pre-escaped labels, a pre-formatted bound and one number (itoa / dtoa,
//! as prometheus-client formats them); `benches/README.md` has the render
//! times and the command that measures them. The shapes match
//! prometheus-client's output (tests in `mod.rs` compare them sample by
//! sample).
//!
//! The two formats differ only in family headers (OpenMetrics names a
//! counter family without `_total` and adds `# UNIT`) and in where `le`
//! goes (OpenMetrics: first, as prometheus-client writes it).

use super::families::{Fam, Kind, FAMILIES, QUANTILE_LABELS};
use super::state::State;
use crate::expo::text::{float, help_line, int, series_start as start, type_line, unit_line};

fn header(out: &mut Vec<u8>, st: &State, f: Fam, om: bool) {
    let name = if om { f.om_name() } else { f.name() };
    let kind = match f.kind() {
        Kind::Counter => "counter",
        Kind::Gauge => "gauge",
        Kind::Histogram => "histogram",
        Kind::Summary => "summary",
    };
    help_line(out, name, st.help(f), om);
    type_line(out, name, kind);
    if let (true, Some(unit)) = (om, f.unit()) {
        unit_line(out, name, unit);
    }
}

/// Writes every latency family of `st` in text 0.0.4 (`om` false) or
/// OpenMetrics (`om` true, without `# EOF`).
pub(super) fn write(out: &mut Vec<u8>, st: &State, om: bool) {
    for f in FAMILIES {
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
