//! One latency series: everything the store keeps for one
//! (source, target, transport, op, size) and what a round adds to it.
//!
//! Why it exists: the exporter's families are written straight from these
//! fields (see `text.rs` and `protobuf.rs`), so a series holds plain counts, its labels
//! already escaped for each format, and its window summary already
//! computed; a scrape only formats numbers.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use super::families::{classic_bounds_ns, Round, SeriesKey, WINDOW_SLICES};
use super::native;
use super::window::{Summary, Window};
use crate::expo::text::label_pairs;

/// Classic buckets, +Inf included.
pub(super) const CLASSIC: usize = 30;

/// The label pairs of a series, in every encoding a scrape needs.
#[derive(Debug)]
pub(super) struct Labels {
    /// `source="..",target="..",...` escaped for the text formats.
    pub text: String,
    /// The same pairs as protobuf `Metric.label` fields (field 1).
    pub protobuf: Vec<u8>,
}

impl Labels {
    pub fn new(pairs: &[(&str, &str)]) -> Labels {
        let mut text = String::new();
        let mut protobuf = Vec::new();
        label_pairs(&mut text, pairs.iter().copied());
        for (k, v) in pairs {
            super::wire::label_pair(&mut protobuf, k, v);
        }
        Labels { text, protobuf }
    }
}

/// Everything kept for one series.
#[derive(Debug)]
pub(super) struct Series {
    pub labels: Labels,
    /// Non-cumulative classic bucket counts; the last is the +Inf bucket.
    pub classic: [u64; CLASSIC],
    /// Samples and their sum (seconds) since the series was declared.
    pub count: u64,
    pub sum: f64,
    /// Native buckets (schema 3) and the zero bucket.
    pub native: native::Buckets,
    pub zero_count: u64,
    /// Probes by result.
    pub ok: u64,
    pub timeout: u64,
    pub error: u64,
    /// Unix time of the last round with an answer.
    pub last_ok: Option<f64>,
    pub window: Window,
    /// The window's summary, computed when it changed.
    pub summary: Option<Summary>,
}

impl Series {
    pub fn new(key: &SeriesKey, window: std::time::Duration) -> Series {
        Series {
            labels: Labels::new(&key.pairs()),
            classic: [0; CLASSIC],
            count: 0,
            sum: 0.0,
            native: Vec::new(),
            zero_count: 0,
            ok: 0,
            timeout: 0,
            error: 0,
            last_ok: None,
            window: Window::new(window, WINDOW_SLICES),
            summary: None,
        }
    }

    /// Adds a round in which `sent` messages went out.
    pub fn record(&mut self, sent: u64, round: &Round, now: Instant) {
        let ok = round.samples.as_ref().map_or(0, |h| h.len());
        self.ok += ok;
        self.timeout += round.timeouts;
        let errored = sent.saturating_sub(ok + round.timeouts);
        if round.error.is_some() || errored > 0 {
            self.error += errored.max(1);
        }
        let Some(h) = round.samples.as_ref().filter(|h| !h.is_empty()) else {
            self.expire(now);
            return;
        };
        let bounds = classic_bounds_ns();
        for (ns, n) in h.buckets() {
            let b = bounds.partition_point(|&le| le < ns);
            self.classic[b] += n;
            // ns / 1e9, as the classic bounds are made: the same double
            // for the same value everywhere.
            let secs = ns as f64 / 1e9;
            if secs <= native::ZERO_THRESHOLD {
                self.zero_count += n;
            } else {
                native::add(&mut self.native, native::index(secs), n);
            }
        }
        self.count += h.len();
        self.sum += h.sum_ns() as f64 / 1e9;
        self.last_ok = Some(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
        );
        self.window.add(now, h.buckets(), h.sum_ns(), h.max_ns());
        self.summary = self.window.summary();
    }

    /// Drops expired window slices; true when the summary changed.
    pub fn expire(&mut self, now: Instant) -> bool {
        if self.window.expire(now) {
            self.summary = self.window.summary();
            true
        } else {
            false
        }
    }
}
