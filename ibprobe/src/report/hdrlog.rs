//! `--hdr-log FILE`: an HdrHistogram interval log of the run, one
//! histogram per interval in the standard format (`HistogramLogProcessor`,
//! `hdr-plot`, the hdrhistogram crate read it), since one summary hides how
//! latency moved during a run (a burst at second 37, a drift); layout in
//! `report/README.md`. Also a whole histogram as one string for the JSON
//! reports, and its decoding, bounded before anything is allocated.

use super::model::ReportError;
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::{
    Deserializer, Serializer as _, V2DeflateSerializer, V2Serializer,
};
use hdrhistogram::Histogram;
use ibstats::latency::LatencyHistogram;
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
///
/// What it decodes is bounded before anything is allocated: the header's
/// range (lowest, highest, significant digits) gives the length of the
/// counts array, which may not exceed what ibprobe's own histograms use
/// ([`ibstats::latency::COUNTS_LEN`]); the payload it claims may not exceed 9
/// bytes per count (one varint each) nor the bytes actually there; a
/// compressed encoding is inflated only that far. (The hdrhistogram
/// crate sizes its buffer from the header's claimed payload length: a
/// 2 KB string claiming 4 GiB would otherwise allocate 4 GiB.)
pub fn decode(s: &str) -> Result<Histogram<u64>, String> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(s.trim())
        .map_err(|e| format!("not base64 ({e})"))?;
    let v2 = match be_u32(&bytes, 0) {
        Some(V2_COOKIE) => {
            v2_payload_len(&bytes, bytes.len())?;
            bytes
        }
        Some(V2_DEFLATE_COOKIE) => inflate_v2(&bytes)?,
        _ => return Err("not an HdrHistogram V2 encoding (unknown cookie)".into()),
    };
    Deserializer::new()
        .deserialize(&mut std::io::Cursor::new(v2))
        .map_err(|e| format!("not an HdrHistogram V2 encoding ({e:?})"))
}

/// The V2 encoding's first 4 bytes, plain and compressed.
const V2_COOKIE: u32 = 0x1c84_9313;
const V2_DEFLATE_COOKIE: u32 = 0x1c84_9314;
/// A V2 header: cookie, payload length, normalizing offset, significant
/// digits (4 bytes each), lowest and highest value, integer-to-double
/// ratio (8 bytes each).
const V2_HEADER: usize = 40;
/// The most bytes one count takes in a V2 payload (a LEB128 varint).
const MAX_VARINT: usize = 9;

fn be_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn be_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// The payload length a V2 header (`header`, at least its first
/// [`V2_HEADER`] bytes) claims, once checked against the counts its range
/// implies and against `total`, the bytes the encoding has (header
/// included).
fn v2_payload_len(header: &[u8], total: usize) -> Result<usize, String> {
    let short = || "not an HdrHistogram V2 encoding (header cut short)".to_string();
    let claimed = be_u32(header, 4).ok_or_else(short)? as usize;
    let digits = be_u32(header, 12).ok_or_else(short)?;
    let low = be_u64(header, 16).ok_or_else(short)?;
    let high = be_u64(header, 24).ok_or_else(short)?;
    let counts = counts_len(low, high, digits).ok_or_else(|| {
        format!(
            "an HdrHistogram whose range ({low}..{high}, {digits} significant digits) is not one ibprobe writes"
        )
    })?;
    if counts > ibstats::latency::COUNTS_LEN {
        return Err(format!(
            "an HdrHistogram of {counts} counts ({low}..{high}, {digits} significant digits), more than the {} of an ibprobe histogram; save the report again with ibprobe",
            ibstats::latency::COUNTS_LEN
        ));
    }
    let there = total.saturating_sub(V2_HEADER);
    if claimed > counts * MAX_VARINT || claimed > there {
        return Err(format!(
            "a damaged HdrHistogram: its header claims {claimed} payload bytes, but {counts} counts take at most {} and {there} are there",
            counts * MAX_VARINT
        ));
    }
    Ok(claimed)
}

/// The counts array length of an HdrHistogram of `low..=high` at `digits`
/// significant digits (hdrhistogram's `new_with_bounds`), or None for a
/// range it refuses.
fn counts_len(low: u64, high: u64, digits: u32) -> Option<usize> {
    if !(1..=u64::MAX / 2).contains(&low) || high < 2 * low || digits > 5 {
        return None;
    }
    let unit_magnitude = 63 - low.leading_zeros();
    // ceil(log2(2 * 10^digits)): single-unit resolution up to there.
    let sub_bucket_magnitude = 64 - (2 * 10u64.pow(digits) - 1).leading_zeros();
    if unit_magnitude + sub_bucket_magnitude > 63 {
        return None;
    }
    let mut smallest_untrackable = 1u64 << (sub_bucket_magnitude + unit_magnitude);
    let mut buckets = 1usize;
    while smallest_untrackable <= high {
        if smallest_untrackable > u64::MAX / 2 {
            buckets += 1;
            break;
        }
        smallest_untrackable <<= 1;
        buckets += 1;
    }
    Some((buckets + 1) << (sub_bucket_magnitude - 1))
}

/// The plain V2 encoding inside a compressed one (`bytes`: cookie,
/// compressed length, zlib stream), inflated no further than its header's
/// checked payload length.
fn inflate_v2(bytes: &[u8]) -> Result<Vec<u8>, String> {
    use std::io::Read as _;
    let compressed_len = be_u32(bytes, 4).ok_or("a compressed HdrHistogram cut short")? as usize;
    let compressed = bytes
        .get(8..8usize.saturating_add(compressed_len))
        .ok_or_else(|| {
            format!(
                "a damaged HdrHistogram: it claims {compressed_len} compressed bytes, {} are there",
                bytes.len().saturating_sub(8)
            )
        })?;
    let damaged = |e: std::io::Error| format!("a damaged compressed HdrHistogram ({e})");
    let mut z = flate2::read::ZlibDecoder::new(compressed);
    let mut v2 = vec![0u8; V2_HEADER];
    z.read_exact(&mut v2).map_err(damaged)?;
    if be_u32(&v2, 0) != Some(V2_COOKIE) {
        return Err("not an HdrHistogram V2 encoding (unknown inner cookie)".into());
    }
    // The payload is checked against the most its counts can take, then
    // inflated up to one byte more than it claims (more is damage).
    let claimed = v2_payload_len(&v2, usize::MAX)?;
    z.take(claimed as u64 + 1)
        .read_to_end(&mut v2)
        .map_err(damaged)?;
    if v2.len() != V2_HEADER + claimed {
        return Err(format!(
            "a damaged HdrHistogram: its header claims {claimed} payload bytes, {} inflate",
            v2.len() - V2_HEADER
        ));
    }
    Ok(v2)
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

/// The error of a write to `path`.
fn io(path: &str) -> impl Fn(std::io::Error) -> ReportError + '_ {
    move |source| ReportError::Io {
        path: path.to_string(),
        source,
    }
}

impl HdrLogWriter<BufWriter<std::fs::File>> {
    /// Creates (truncates) `path` and writes the header; `comment` (e.g.
    /// the transport and size) becomes comment lines.
    pub fn create(path: &Path, comment: &str) -> Result<Self, ReportError> {
        let shown = path.display().to_string();
        let file = std::fs::File::create(path).map_err(io(&shown))?;
        HdrLogWriter::start(BufWriter::new(file), comment, SystemTime::now(), shown)
    }
}

impl<W: Write> HdrLogWriter<W> {
    /// Starts a log on any writer; `start` is the run's start (StartTime
    /// and BaseTime of the log).
    pub fn new(out: W, comment: &str, start: SystemTime) -> Result<Self, ReportError> {
        HdrLogWriter::start(out, comment, start, "<writer>".into())
    }

    fn start(
        mut out: W,
        comment: &str,
        start: SystemTime,
        path: String,
    ) -> Result<Self, ReportError> {
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
        builder
            .begin_log_with(&mut out, &mut serializer)
            .map_err(io(&path))?;
        writeln!(out, "{LEGEND}").map_err(io(&path))?;
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
            .map_err(io(&self.path))?;
        w.write_histogram(
            &hist.to_hdr(),
            Duration::from_nanos(start_ns),
            Duration::from_nanos(end_ns.saturating_sub(start_ns)),
            Some(tag),
        )
        .map_err(|e| ReportError::HdrLog(format!("writing interval to {}: {e}", self.path)))
    }

    pub fn finish(mut self) -> Result<W, ReportError> {
        self.out.flush().map_err(io(&self.path))?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_len_is_hdrhistograms() {
        for (low, high, digits) in [
            (1, ibstats::latency::MAX_NS, 3),
            (1, 2, 0),
            (1, u64::MAX, 5),
            (1000, 1 << 40, 2),
            (1 << 40, u64::MAX, 1),
        ] {
            let h = Histogram::<u8>::new_with_bounds(low, high, digits as u8).unwrap();
            assert_eq!(
                counts_len(low, high, digits),
                Some(h.distinct_values()),
                "{low}..{high} at {digits}"
            );
        }
        assert_eq!(
            counts_len(1, ibstats::latency::MAX_NS, 3),
            Some(ibstats::latency::COUNTS_LEN)
        );
        assert_eq!(counts_len(0, 10, 3), None);
        assert_eq!(counts_len(1, 10, 6), None);
        assert_eq!(counts_len(10, 15, 3), None);
    }

    /// A plain V2 header: `claimed` payload bytes, `low..high` at `digits`.
    fn header(claimed: u32, digits: u32, low: u64, high: u64) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(V2_COOKIE.to_be_bytes());
        b.extend(claimed.to_be_bytes());
        b.extend(0u32.to_be_bytes());
        b.extend(digits.to_be_bytes());
        b.extend(low.to_be_bytes());
        b.extend(high.to_be_bytes());
        b.extend(1.0f64.to_be_bytes());
        b
    }

    fn b64(b: &[u8]) -> String {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(b)
    }

    fn deflated(v2: &[u8]) -> Vec<u8> {
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(v2).unwrap();
        let c = z.finish().unwrap();
        let mut b = V2_DEFLATE_COOKIE.to_be_bytes().to_vec();
        b.extend((c.len() as u32).to_be_bytes());
        b.extend(c);
        b
    }

    #[test]
    fn headers_that_claim_more_than_their_range_or_their_bytes_are_refused() {
        let ok = |v2: Vec<u8>| {
            let h = decode(&b64(&v2)).unwrap();
            assert_eq!(decode(&b64(&deflated(&v2))).unwrap(), h);
        };
        // One count of 1 (zigzag 2), then nothing.
        let mut v2 = header(1, 3, 1, ibstats::latency::MAX_NS);
        v2.push(2);
        ok(v2);
        let refused = |v2: Vec<u8>, needle: &str| {
            for s in [b64(&v2), b64(&deflated(&v2))] {
                let e = decode(&s).unwrap_err();
                assert!(e.contains(needle), "{e}");
            }
        };
        let mut claims_4g = header(u32::MAX, 3, 1, ibstats::latency::MAX_NS);
        claims_4g.extend([2u8; 16]);
        refused(claims_4g, "claims 4294967295 payload bytes");
        refused(header(8, 5, 1, u64::MAX), "more than the 28672");
        refused(header(8, 3, 0, 10), "not one ibprobe writes");
        let mut past_its_bytes = header(64, 3, 1, ibstats::latency::MAX_NS);
        past_its_bytes.extend([2u8; 8]);
        assert!(decode(&b64(&past_its_bytes))
            .unwrap_err()
            .contains("8 are there"));
    }
}
