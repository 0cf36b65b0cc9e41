//! `--hdr-log FILE`: an HdrHistogram interval log of the run.
//!
//! Why it exists: one summary hides how latency moved during a run (a
//! burst at second 37, a slow drift). The interval log keeps one histogram
//! per interval (e.g. per second) in the standard format that
//! HdrHistogram's `HistogramLogProcessor`, `hdr-plot` and the hdrhistogram
//! crate's `IntervalLogIterator` read, so the tail of any window can be
//! recomputed later.
//!
//! Format: comment lines (tool, context), `#[StartTime: ...]` and
//! `#[BaseTime: ...]` (both the run's start, so interval timestamps are
//! seconds since the start), the legend line, then one line per interval
//! and distribution: `Tag=<name>,<start s>,<length s>,<max ns>,<base64 V2
//! histogram>`. Values are nanoseconds; tags are the JSON distribution
//! names (`one_way`, `send_completion`, `rtt`).

use super::ReportError;
use crate::stats::LatencyHistogram;
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::{
    Deserializer, Serializer as _, V2DeflateSerializer, V2Serializer,
};
use hdrhistogram::Histogram;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::{Duration, SystemTime};

/// A whole histogram as one string: base64 of its compressed V2 encoding,
/// the payload of an interval log line, which every HdrHistogram
/// implementation reads (`HISTFAAA...`). Reports carry it (`hdr` in
/// `ibprobe.report/1`, `latency_hdr` in `ibprobe.stream/1`), so a saved
/// report keeps its whole distribution (`ibprobe compare A.json B.json`).
pub fn encode(h: &LatencyHistogram) -> String {
    use base64::Engine as _;
    let mut bytes = Vec::new();
    // Writing into a Vec cannot fail; an empty string would say so.
    if V2DeflateSerializer::new()
        .serialize(&h.to_hdr(), &mut bytes)
        .is_err()
    {
        return String::new();
    }
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The histogram of an [`encode`]d string (or any base64 V2 payload);
/// the error says what is wrong with it.
pub fn decode(s: &str) -> Result<Histogram<u64>, String> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(s.trim())
        .map_err(|e| format!("not base64 ({e})"))?;
    Deserializer::new()
        .deserialize(&mut std::io::Cursor::new(bytes))
        .map_err(|e| format!("not an HdrHistogram V2 encoding ({e:?})"))
}

/// The legend line Java's HistogramLogWriter writes (readers skip it).
const LEGEND: &str =
    "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"";

/// Writes an HDR interval log; call [`HdrLogWriter::write_interval`] once
/// per interval and distribution (off the hot path: it serializes and
/// allocates), then [`HdrLogWriter::finish`].
pub struct HdrLogWriter<W: Write> {
    out: W,
    serializer: V2Serializer,
    path: String,
}

impl HdrLogWriter<BufWriter<std::fs::File>> {
    /// Creates (truncates) `path` and writes the header; `comment` (e.g.
    /// the transport and size) becomes comment lines.
    pub fn create(path: &Path, comment: &str) -> Result<Self, ReportError> {
        let io = |source| ReportError::Io {
            path: path.display().to_string(),
            source,
        };
        let file = std::fs::File::create(path).map_err(io)?;
        HdrLogWriter::new(BufWriter::new(file), comment, SystemTime::now())
            .map(|mut w| {
                w.path = path.display().to_string();
                w
            })
            .map_err(|e| match e {
                ReportError::Io { source, .. } => io(source),
                other => other,
            })
    }
}

impl<W: Write> HdrLogWriter<W> {
    /// Starts a log on any writer; `start` is the run's start (StartTime
    /// and BaseTime of the log).
    pub fn new(mut out: W, comment: &str, start: SystemTime) -> Result<Self, ReportError> {
        let mut serializer = V2Serializer::new();
        let mut builder = IntervalLogWriterBuilder::new();
        builder.add_comment(&format!(
            "ibprobe {} interval log, values in ns",
            env!("CARGO_PKG_VERSION")
        ));
        if !comment.is_empty() {
            builder.add_comment(comment);
        }
        builder.with_start_time(start).with_base_time(start);
        let path = String::from("<writer>");
        let io = |source| ReportError::Io {
            path: path.clone(),
            source,
        };
        builder
            .begin_log_with(&mut out, &mut serializer)
            .map_err(io)?;
        writeln!(out, "{LEGEND}").map_err(io)?;
        Ok(HdrLogWriter {
            out,
            serializer,
            path,
        })
    }

    /// Writes one interval of one distribution: `tag` names it (no commas,
    /// spaces or newlines), `start_ns`..`end_ns` is the interval in ns
    /// since the run's start (as the probe's `Interval` gives it).
    pub fn write_interval(
        &mut self,
        tag: &str,
        hist: &LatencyHistogram,
        start_ns: u64,
        end_ns: u64,
    ) -> Result<(), ReportError> {
        let tag = Tag::new(tag).ok_or_else(|| {
            ReportError::HdrLog(format!(
                "tag {tag:?} contains a comma, space or newline; use a plain name such as one_way"
            ))
        })?;
        // An empty builder writes no header: it only wraps our writer.
        let mut w = IntervalLogWriterBuilder::new()
            .begin_log_with(&mut self.out, &mut self.serializer)
            .map_err(|source| ReportError::Io {
                path: self.path.clone(),
                source,
            })?;
        w.write_histogram(
            &hist.to_hdr(),
            Duration::from_nanos(start_ns),
            Duration::from_nanos(end_ns.saturating_sub(start_ns)),
            Some(tag),
        )
        .map_err(|e| ReportError::HdrLog(format!("writing interval to {}: {e}", self.path)))
    }

    /// Flushes and returns the writer.
    pub fn finish(mut self) -> Result<W, ReportError> {
        self.out.flush().map_err(|source| ReportError::Io {
            path: self.path.clone(),
            source,
        })?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod encode_tests {
    use super::*;

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
}
