//! The reports of every command and their formats.
//!
//! The runner fills a [`crate::probe::outcome::Outcome`]; [`Report::new`]
//! turns it and the run's context into the one [`Report`] every format
//! prints (so they never disagree), with the warnings a reader needs.
//! Every command's report is a [`Document`] (`model.rs`): data that the
//! one renderer per format in [`format`] prints. Every field of every
//! format is documented in `report/README.md`.
//!
//! ```no_run
//! # use ibprobe::{clock::Clock, probe::outcome::Outcome, transport::TransportInfo};
//! # use ibprobe::report::{Report, ReportContext, Mode, Format};
//! # let outcome = Outcome::default();
//! let ctx = ReportContext::new(Mode::Loopback, TransportInfo::default(), Clock::calibrate(), 32);
//! let report = Report::new(&outcome, ctx);
//! print!("{}", report.render(Format::Table));
//! ```

pub mod compare;
pub mod counters;
pub mod effects_plot;
pub mod format;
pub mod hdrlog;
pub mod heatmap;
pub mod host;
pub mod loggp;
mod model;
pub mod plot;
pub mod progress;
pub mod run;
pub mod stream;
pub mod stream_sweep;
pub mod sweep;
pub mod threshold;
pub mod timerlat;

use crate::probe::outcome::Outcome;
use ibstats::latency::LatencyHistogram;

pub use format::Format;
pub use model::*;

impl threshold::Measured for Report {
    /// Latencies from the first distribution (one-way in loopback, the
    /// round trip with --round-trip and in client); `lost` from the run.
    fn value(&self, m: threshold::Metric) -> Option<f64> {
        match m {
            threshold::Metric::Lost => Some(self.run.lost as f64),
            _ => threshold::from_summary(&self.distributions.first()?.summary, m),
        }
    }
}

fn fraction(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// The messages the hardware-timestamp split left out, as context
/// warnings (each starts with "hw timestamps:"): one per reason.
fn hw_left_out(sp: &crate::clock::hwts::Split) -> Vec<String> {
    let mut w = Vec::new();
    if sp.missing_prober > 0 {
        w.push(format!("hw timestamps: {} answered messages had no send or receive completion timestamp on this end and are not in the split", sp.missing_prober));
    }
    if sp.missing_responder > 0 {
        w.push(format!("hw timestamps: the responder reported no timestamps for {} messages; they are not in the split", sp.missing_responder));
    }
    if sp.invalid > 0 {
        w.push(format!("hw timestamps: {} messages had a negative part (stamps out of order or a clock step) and are counted invalid, not split", sp.invalid));
    }
    w
}

impl Report {
    /// Builds the report of `outcome` (RTT/2 is derived from RTT here).
    pub fn new(outcome: &Outcome, context: ReportContext) -> Report {
        let mut distributions = Vec::new();
        let mut push = |kind, h: &LatencyHistogram| {
            distributions.push(Distribution {
                kind,
                summary: h.summary(),
                clamped: h.clamped(),
                hdr: hdrlog::encode(h),
            })
        };
        if let Some(h) = &outcome.one_way {
            push(DistKind::OneWay, h);
        }
        if let Some(h) = &outcome.send_done {
            push(DistKind::SendCompletion, h);
        }
        if let Some(h) = &outcome.rtt {
            push(DistKind::Rtt, h);
            push(DistKind::RttHalf, &h.halved());
        }
        if let Some((before, after)) = &outcome.t_send_split {
            push(DistKind::SendBeforeRead, before);
            push(DistKind::SendAfterRead, after);
        }
        if let Some(hw) = &outcome.hw_split {
            let sp = &hw.split;
            if hw.one_way {
                push(DistKind::HwOneWay, &sp.network_rtt);
                push(DistKind::HwProberDelay, &sp.prober_delay);
            } else {
                push(DistKind::HwNetworkRtt, &sp.network_rtt);
                push(DistKind::HwProberDelay, &sp.prober_delay);
                push(DistKind::HwResponderDelay, &sp.responder_delay);
            }
        }
        let run = RunCounters {
            sent: outcome.sent,
            lost: outcome.lost,
            lost_fraction: fraction(outcome.lost, outcome.sent),
            warmup_count: outcome.warmup_count,
            warmup_max_ns: outcome.warmup_max_ns,
            steps: outcome.steps,
            missed_steps: outcome.missed_steps,
            missed_fraction: fraction(outcome.missed_steps, outcome.steps),
            elapsed_ns: outcome.elapsed_ns,
            interrupted: outcome.interrupted,
        };
        let mut report = Report {
            context,
            run,
            distributions,
            warnings: Vec::new(),
            notes: outcome
                .notes
                .iter()
                .chain(outcome.hw_split.iter().flat_map(|h| &h.notes))
                .cloned()
                .collect(),
            fail_if: None,
            counters: outcome.counters.clone(),
        };
        if let Some(hw) = &outcome.hw_split {
            report.context.warnings.extend(hw_left_out(&hw.split));
        }
        report.warnings = report.compute_warnings();
        report
    }

    /// The distribution a one-line (perftest) output shows: RTT/2 in client
    /// mode (perftest's own number), else one-way, else send-completion.
    pub fn headline(&self) -> Option<&Distribution> {
        use DistKind::{OneWay, RttHalf, SendCompletion};
        [RttHalf, OneWay, SendCompletion]
            .iter()
            .find_map(|k| self.distributions.iter().find(|d| d.kind == *k))
    }

    /// Renders one output format (every format ends with a newline).
    pub fn render(&self, format: Format) -> String {
        format::render(self, format).expect("a run report has every format")
    }

    fn compute_warnings(&self) -> Vec<Warning> {
        let mut w = Vec::new();
        let mut warn = |code, message| w.push(Warning { code, message });
        for m in &self.context.warnings {
            warn("context", m.clone());
        }
        if let Some(f) = self.context.clock.fallback() {
            warn("clock_fallback", f.help().to_string());
        }
        let run = &self.run;
        if run.interrupted {
            warn("interrupted", format!(
                "interrupted (Ctrl-C) after {:.3} s: the statistics cover the {} messages sent so far",
                run.elapsed_ns as f64 / 1e9,
                run.sent
            ));
        }
        if run.lost > 0 {
            warn("lost", format!(
                "{} of {} messages lost ({:.3}%): they are not in the distributions; on UC/UD/UDP check receive-queue depth and drops (`ethtool -S`, port counters)",
                run.lost,
                run.sent,
                run.lost_fraction * 100.0
            ));
        }
        if run.missed_steps > 0 {
            warn("missed_steps", format!(
                "{} of {} paced steps missed ({:.3}%): the previous message was still in flight; lower --rate or look at the tail",
                run.missed_steps,
                run.steps,
                run.missed_fraction * 100.0
            ));
        }
        // RTT/2 is RTT halved: RTT's warnings already cover it.
        let measured = || {
            self.distributions
                .iter()
                .filter(|d| d.kind != DistKind::RttHalf)
        };
        let max = measured()
            .filter(|d| d.summary.count > 0)
            .map(|d| d.summary.max_ns)
            .max();
        if let Some(max) = max.filter(|&m| run.warmup_max_ns > m) {
            warn("warmup_max", format!(
                "warm-up max {} us exceeds the measured max {} us: first-touch effects (page faults, cold caches, connection setup) were real and the warm-up kept them out of the statistics; keep --warmup at least this long",
                us(run.warmup_max_ns),
                us(max)
            ));
        }
        for d in measured() {
            let (s, label) = (&d.summary, d.kind.label());
            if s.count == 0 {
                warn("no_samples", format!("{label}: no samples"));
                continue;
            }
            if s.p50_ns > 0 && s.max_ns > s.p50_ns.saturating_mul(OUTLIER_FACTOR) {
                warn("max_outlier", format!(
                    "{label}: max {} us is {:.0}x the median {} us: a statistical outlier ({}); pin the loop to an isolated core and pre-fault memory, and read p99.9/p99.99 for the typical tail",
                    us(s.max_ns),
                    s.max_ns as f64 / s.p50_ns as f64,
                    us(s.p50_ns),
                    self.counters.as_ref().map_or_else(
                        || "interrupt, preemption, page fault, SMI? counters were off".to_string(),
                        counters::likely_cause
                    )
                ));
            }
            if s.count < FEW_SAMPLES {
                warn("few_samples", format!(
                    "{label}: only {} samples, so p99.99 is the max (and p99.9 too below 1000): run longer (-n or -D) for a tail",
                    s.count
                ));
            }
            if let Some(m) = clock_resolution_warning(label, s, &self.context.clock) {
                warn("clock_resolution", m);
            }
            if d.clamped > 0 {
                let n = d.clamped;
                let m = format!(
                    "{label}: {n} samples above 100 s were recorded as 100 s (max is still exact)"
                );
                warn("clamped", m);
            }
        }
        w
    }
}
