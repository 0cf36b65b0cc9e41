//! Exposition formats: how metrics are written on the wire, apart from
//! what they are.
//!
//! Why it exists: two writers produce Prometheus text, the registries'
//! (in [`crate::http`]) and the latency families' (in
//! [`crate::collect::latency`]); both write it through [`text`], so the
//! escaping and the line shapes are defined once. The protobuf format is
//! prometheus-client's own encoder (registries) and
//! `collect/latency/protobuf.rs` (latency families).
//!
//! It also holds what both sides of an answer agree on: the [`Format`]s
//! `/metrics` speaks (content negotiation, `Content-Type`), the
//! [`Encoded`] trait of families that encode themselves (the latency
//! store), and [`EncodeError`].
//!
//! Depends on nothing in this crate; `http` and `collect` depend on it.

pub mod text;

use std::sync::Arc;

use bytes::Bytes;

/// `Content-Type` of the length-delimited protobuf exposition, as Prometheus
/// asks for it when native histograms are enabled.
///
/// Why it exists: the only format that carries native histograms.
pub const PROTOBUF_CONTENT_TYPE: &str =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";

/// `Content-Type` of the OpenMetrics 1.0.0 text exposition.
///
/// Why it exists: what Prometheus asks for first by default.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// `Content-Type` of the Prometheus text exposition format 0.0.4.
///
/// Why it exists: the fallback every scraper, `curl` and `promtool` reads.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The exposition formats `/metrics` can answer in.
///
/// Why it exists: content negotiation picks one, encoding and the
/// `Content-Type` follow from it, and the self metric is labelled with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// Prometheus text exposition format 0.0.4.
    Text,
    /// OpenMetrics 1.0.0 text.
    OpenMetrics,
    /// Length-delimited `io.prometheus.client.MetricFamily` protobuf
    /// messages (the only one with native histograms).
    Protobuf,
}

impl Format {
    /// The `Content-Type` an answer in this format is sent with.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Text => TEXT_CONTENT_TYPE,
            Format::OpenMetrics => OPENMETRICS_CONTENT_TYPE,
            Format::Protobuf => PROTOBUF_CONTENT_TYPE,
        }
    }

    /// The value of the `format` label on the self metric.
    pub fn label(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::OpenMetrics => "openmetrics",
            Format::Protobuf => "protobuf",
        }
    }

    /// The format a [`Format::label`] names (`text`, `openmetrics`,
    /// `protobuf`), as given in `/metrics?format=`.
    pub fn from_label(label: &str) -> Option<Format> {
        [Format::Text, Format::OpenMetrics, Format::Protobuf]
            .into_iter()
            .find(|f| f.label() == label)
    }

    /// Picks the format for an `Accept` header value (`None`: no header).
    ///
    /// Why it exists: Prometheus lists several formats with q-values; the
    /// highest q we can serve wins, the first listed on a tie, and text
    /// 0.0.4 when nothing listed matches. Unparseable parts are ignored.
    pub fn negotiate(accept: Option<&str>) -> Format {
        let Some(accept) = accept else {
            return Format::Text;
        };
        let mut best: Option<(f32, Format)> = None;
        for range in accept.split(',') {
            let mut parts = range.split(';');
            let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let mut q = 1.0f32;
            let mut proto = None;
            let mut encoding = None;
            let mut version = None;
            for p in parts {
                let Some((k, v)) = p.split_once('=') else {
                    continue;
                };
                let v = v.trim().trim_matches('"');
                match k.trim().to_ascii_lowercase().as_str() {
                    "q" => q = v.parse().unwrap_or(0.0),
                    "proto" => proto = Some(v.to_string()),
                    "encoding" => encoding = Some(v.to_ascii_lowercase()),
                    "version" => version = Some(v.to_string()),
                    _ => {}
                }
            }
            let format = match media.as_str() {
                "application/vnd.google.protobuf"
                    if proto.as_deref() == Some("io.prometheus.client.MetricFamily")
                        && encoding.as_deref() == Some("delimited") =>
                {
                    Format::Protobuf
                }
                "application/openmetrics-text" => Format::OpenMetrics,
                "text/plain" if version.as_deref().is_none_or(|v| v == "0.0.4") => Format::Text,
                "text/*" | "*/*" => Format::Text,
                _ => continue,
            };
            if q.is_nan() || q <= 0.0 {
                continue;
            }
            if best.is_none_or(|(bq, _)| q > bq) {
                best = Some((q, format));
            }
        }
        best.map_or(Format::Text, |(_, f)| f)
    }
}

/// Families that encode themselves, in each format, and may cache the
/// bytes between changes.
///
/// Why it exists: the probe latency families are most of a large
/// exporter's output (43 series per target and size) but change only when
/// a probe round ends, every few seconds; re-encoding them at every
/// scrape would cost tens of milliseconds with 100 targets. They also
/// include a summary, a type prometheus-client lacks.
pub trait Encoded: Send + Sync {
    /// The families in `format`: Prometheus text 0.0.4, OpenMetrics
    /// samples (no `# EOF`), or length-delimited protobuf.
    /// The bytes are shared: scrapes served from one encoding hold the
    /// same buffer, never a copy each.
    fn encoded(&self, format: Format) -> Result<Bytes, EncodeError>;
}

/// A shared [`Encoded`] source.
pub type FamilySource = Arc<dyn Encoded>;

/// Why an answer could not be encoded.
///
/// Why it exists: a collector that fails to encode must turn into a 500
/// naming the format, not a panic or a half-written body.
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    /// A metric or collector failed while being written.
    #[error("encoding metrics as {format:?} failed in a metric or collector: {source}")]
    Fmt {
        /// The format being written.
        format: Format,
        /// What prometheus-client reported.
        source: std::fmt::Error,
    },
    /// prost could not serialise a message.
    #[error("serialising protobuf metric families failed: {0}")]
    Protobuf(#[from] prost::EncodeError),
}
