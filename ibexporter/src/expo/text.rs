//! The Prometheus text writer: text format 0.0.4 and OpenMetrics text,
//! the escaping, the `# HELP` / `# TYPE` / `# UNIT` lines, label pairs,
//! numbers, and [`encode_text_004`] for prometheus-client's data model.
//!
//! Why it exists: prometheus-client writes only OpenMetrics text, so this
//! crate writes 0.0.4 itself (for the registries) and both text formats
//! for the latency families (directly from the store, for speed). Every
//! text byte the exporter writes comes through here.
//!
//! The two formats differ in escaping only in `# HELP`, where OpenMetrics
//! also escapes `"`. Numbers are written two ways, each matching the
//! reference its output is compared with: [`float`] / [`int`] as
//! prometheus-client's text encoder writes them (dtoa / itoa), used by the
//! latency families; [`go_float`], Rust's shortest round-trip form, used by
//! [`encode_text_004`] as it always has been. Both parse back exactly in Go.

use prometheus_client::encoding::prometheus_protobuf::prometheus_data_model as pb;

/// A buffer text is appended to: the `String` of pre-rendered labels or
/// the byte buffer of a response.
pub trait Sink {
    /// Appends `s`.
    fn put(&mut self, s: &str);
}

impl Sink for String {
    fn put(&mut self, s: &str) {
        self.push_str(s);
    }
}

impl Sink for Vec<u8> {
    fn put(&mut self, s: &str) {
        self.extend_from_slice(s.as_bytes());
    }
}

/// Appends `s` with `\` and newline escaped, and `"` too when `quote`.
fn escape(out: &mut impl Sink, s: &str, quote: bool) {
    let mut plain = 0;
    // The escaped characters are ASCII, so byte positions are char boundaries.
    for (i, b) in s.bytes().enumerate() {
        let esc = match b {
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'"' if quote => "\\\"",
            _ => continue,
        };
        out.put(&s[plain..i]);
        out.put(esc);
        plain = i + 1;
    }
    out.put(&s[plain..]);
}

/// Appends `v` escaped for a label value (`\`, `"`, newline): the same in
/// both formats.
pub fn escape_label_value(out: &mut impl Sink, v: &str) {
    escape(out, v, true);
}

/// Appends `k="v",k="v"` (values escaped), the inside of `{...}`.
pub fn label_pairs<'a>(out: &mut impl Sink, pairs: impl IntoIterator<Item = (&'a str, &'a str)>) {
    for (i, (k, v)) in pairs.into_iter().enumerate() {
        if i > 0 {
            out.put(",");
        }
        out.put(k);
        out.put("=\"");
        escape_label_value(out, v);
        out.put("\"");
    }
}

/// `# HELP name text` (`\` and newline escaped; `"` too in OpenMetrics).
pub fn help_line(out: &mut Vec<u8>, name: &str, help: &str, om: bool) {
    out.put("# HELP ");
    out.put(name);
    out.put(" ");
    escape(out, help, om);
    out.put("\n");
}

/// `# TYPE name kind` (`counter`, `gauge`, `histogram`, `summary`, ...).
pub fn type_line(out: &mut Vec<u8>, name: &str, kind: &str) {
    out.put("# TYPE ");
    out.put(name);
    out.put(" ");
    out.put(kind);
    out.put("\n");
}

/// `# UNIT name unit` (OpenMetrics only).
pub fn unit_line(out: &mut Vec<u8>, name: &str, unit: &str) {
    out.put("# UNIT ");
    out.put(name);
    out.put(" ");
    out.put(unit);
    out.put("\n");
}

/// `name_suffix{labels[,k="v"]} ` (the value follows): `labels` is already
/// escaped, `extra` is written as given (a bound or a result name).
pub fn series_start(
    out: &mut Vec<u8>,
    name: &str,
    suffix: &str,
    labels: &str,
    extra: Option<(&str, &str)>,
) {
    out.put(name);
    out.put(suffix);
    out.put("{");
    out.put(labels);
    if let Some((k, v)) = extra {
        out.put(",");
        out.put(k);
        out.put("=\"");
        out.put(v);
        out.put("\"");
    }
    out.put("} ");
}

/// A float as prometheus-client's text encoder writes it (dtoa; `NaN`,
/// `+Inf`, `-Inf`).
pub fn float(out: &mut Vec<u8>, v: f64) {
    if v.is_finite() {
        out.put(dtoa::Buffer::new().format(v));
    } else if v.is_nan() {
        out.put("NaN");
    } else if v > 0.0 {
        out.put("+Inf");
    } else {
        out.put("-Inf");
    }
}

/// An integer (itoa).
pub fn int(out: &mut Vec<u8>, v: u64) {
    out.put(itoa::Buffer::new().format(v));
}

/// Go-parseable float: `+Inf`, `-Inf`, `NaN`, else Rust's shortest
/// round-trip representation (`1e-7` style for very small or large values).
pub fn go_float(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        let plain = format!("{v}");
        if plain.len() > 21 {
            format!("{v:e}")
        } else {
            plain
        }
    }
}

/// Writes protobuf-model metric families as Prometheus text format 0.0.4.
///
/// Why it exists: prometheus-client writes only OpenMetrics text, which the
/// 0.0.4 parsers (`promtool check metrics`, older scrapers) reject or
/// misread. Counters keep their `_total` family name, info metrics become
/// gauges, histograms get `_bucket` (with `+Inf`), `_sum` and `_count`;
/// native buckets are left out (text cannot carry them).
pub fn encode_text_004(out: &mut Vec<u8>, families: &[pb::MetricFamily]) {
    for fam in families {
        let ty = pb::MetricType::try_from(fam.r#type).unwrap_or(pb::MetricType::Untyped);
        let ty_name = match ty {
            pb::MetricType::Counter => "counter",
            pb::MetricType::Gauge => "gauge",
            pb::MetricType::Summary => "summary",
            pb::MetricType::Histogram => "histogram",
            // 0.0.4 has no gauge histogram; its samples look like a histogram's.
            pb::MetricType::GaugeHistogram => "histogram",
            pb::MetricType::Untyped => "untyped",
        };
        let name = fam.name.as_str();
        if !fam.help.is_empty() {
            help_line(out, name, &fam.help, false);
        }
        type_line(out, name, ty_name);
        for m in &fam.metric {
            let ts = m.timestamp_ms;
            if let Some(c) = &m.counter {
                sample(out, name, "", &m.label, None, c.value, ts);
            } else if let Some(g) = &m.gauge {
                sample(out, name, "", &m.label, None, g.value, ts);
            } else if let Some(u) = &m.untyped {
                sample(out, name, "", &m.label, None, u.value, ts);
            } else if let Some(s) = &m.summary {
                for q in &s.quantile {
                    let qs = go_float(q.quantile);
                    sample(
                        out,
                        name,
                        "",
                        &m.label,
                        Some(("quantile", &qs)),
                        q.value,
                        ts,
                    );
                }
                sample(out, name, "_sum", &m.label, None, s.sample_sum, ts);
                sample(
                    out,
                    name,
                    "_count",
                    &m.label,
                    None,
                    s.sample_count as f64,
                    ts,
                );
            } else if let Some(h) = &m.histogram {
                let count = if h.sample_count_float > 0.0 {
                    h.sample_count_float
                } else {
                    h.sample_count as f64
                };
                let mut saw_inf = false;
                for b in &h.bucket {
                    saw_inf |= b.upper_bound == f64::INFINITY;
                    let le = go_float(b.upper_bound);
                    let c = if b.cumulative_count_float > 0.0 {
                        b.cumulative_count_float
                    } else {
                        b.cumulative_count as f64
                    };
                    sample(out, name, "_bucket", &m.label, Some(("le", &le)), c, ts);
                }
                if !saw_inf {
                    sample(
                        out,
                        name,
                        "_bucket",
                        &m.label,
                        Some(("le", "+Inf")),
                        count,
                        ts,
                    );
                }
                sample(out, name, "_sum", &m.label, None, h.sample_sum, ts);
                sample(out, name, "_count", &m.label, None, count, ts);
            }
        }
    }
}

fn sample(
    out: &mut Vec<u8>,
    name: &str,
    suffix: &str,
    labels: &[pb::LabelPair],
    extra: Option<(&str, &str)>,
    value: f64,
    timestamp_ms: i64,
) {
    out.put(name);
    out.put(suffix);
    if !labels.is_empty() || extra.is_some() {
        out.put("{");
        let pairs = labels
            .iter()
            .map(|l| (l.name.as_str(), l.value.as_str()))
            .chain(extra);
        label_pairs(out, pairs);
        out.put("}");
    }
    out.put(" ");
    out.put(&go_float(value));
    if timestamp_ms != 0 {
        out.put(" ");
        out.put(&timestamp_ms.to_string());
    }
    out.put("\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_parse_back() {
        for v in [0.0, 1.0, 2.5e-7, 0.01, 1e300, -3.5, 123456789.0] {
            assert_eq!(go_float(v).parse::<f64>().unwrap(), v, "{}", go_float(v));
        }
        assert_eq!(go_float(f64::INFINITY), "+Inf");
        assert_eq!(go_float(f64::NAN), "NaN");
    }

    #[test]
    fn escaping() {
        let mut s = String::new();
        escape_label_value(&mut s, "a\\b\"c\nd é");
        assert_eq!(s, "a\\\\b\\\"c\\nd é");
        let mut b = Vec::new();
        help_line(&mut b, "x", "say \"hi\"\\\n", false);
        help_line(&mut b, "x", "say \"hi\"", true);
        assert_eq!(
            String::from_utf8(b).unwrap(),
            "# HELP x say \"hi\"\\\\\\n\n# HELP x say \\\"hi\\\"\n"
        );
    }
}
