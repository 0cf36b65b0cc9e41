//! Hardware completion timestamps (`--hw-timestamps`): the R-Pingmesh
//! split of a round trip (SIGCOMM'24; `shared/ANCHORS.md`) into network
//! RTT = (T5 - T2) - (T4 - T3), prober delay = (T6 - T1) - (T5 - T2) and
//! responder delay = T4 - T3, where T1/T6 are the prober's post and sight
//! of the echo (host clock), T2/T5 its send and receive completions and
//! T3/T4 the responder's (each on its own HCA's [`HcaClock`]): only
//! timestamps of one clock are subtracted (`ibprobe/docs/methods.md`,
//! "Where the time goes"). Pure computation: `verbs/` reads the stamps,
//! the responder reports its (T3, T4) after the run (`session/serve.rs`).
//! Unverified on hardware here (rxe's `completion_timestamp_mask` is 0):
//! tested on synthetic completion streams.

use crate::clock::hca::{Calibration, HcaClock};
use ibstats::latency::LatencyHistogram;

/// The prober's times of one message: T1 and T6 on the host clock (ns),
/// T2 and T5 raw HCA ticks (None: the completion carried no stamp, e.g.
/// an unsignaled send).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProberStamp {
    pub seq: u64,
    pub t1_ns: u64,
    pub t2: Option<u64>,
    pub t5: Option<u64>,
    pub t6_ns: u64,
}

/// The responder's times of one message (T3, T4), raw HCA ticks of its
/// device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResponderStamp {
    pub seq: u64,
    pub t3: Option<u64>,
    pub t4: Option<u64>,
}

/// The split of a run's round trips into the three distributions (the
/// module doc's), and why the messages left out were left out.
#[derive(Clone, Debug, Default)]
pub struct Split {
    pub network_rtt: LatencyHistogram,
    pub prober_delay: LatencyHistogram,
    pub responder_delay: LatencyHistogram,
    /// Messages without T2 or T5.
    pub missing_prober: u64,
    /// Messages the responder reported no (or an incomplete) T3/T4 for.
    pub missing_responder: u64,
    /// Messages with a negative part (stamps out of order, a clock step):
    /// R-Pingmesh's invalid_rtt.
    pub invalid: u64,
}

impl Split {
    /// Messages split (each distribution has this many samples).
    pub fn len(&self) -> u64 {
        self.network_rtt.len()
    }

    pub fn is_empty(&self) -> bool {
        self.network_rtt.is_empty()
    }

    /// Records one message's parts from its host round trip (None: T6
    /// before T1), its prober HCA time T5 - T2 and its responder delay
    /// (None: one-way, no responder), ns; counts it invalid when a part is
    /// negative.
    fn record(&mut self, host_rtt: Option<u64>, prober_hca: f64, responder: Option<f64>) {
        let network = prober_hca - responder.unwrap_or(0.0);
        match host_rtt.map(|h| h as f64 - prober_hca) {
            Some(prober) if network >= 0.0 && prober >= 0.0 => {
                self.network_rtt.record(network.round() as u64);
                self.prober_delay.record(prober.round() as u64);
                if let Some(r) = responder {
                    self.responder_delay.record(r.round() as u64);
                }
            }
            _ => self.invalid += 1,
        }
    }
}

/// Splits every prober record for which the responder reported its
/// stamps. `responder` is sorted by sequence number here (the report may
/// come in any order, some stamps may be missing; a repeated sequence
/// number keeps its first report). A message whose parts come out
/// negative is counted as invalid (R-Pingmesh's `invalid_rtt`).
pub fn split(
    prober: &[ProberStamp],
    pc: &HcaClock,
    responder: &mut [ResponderStamp],
    rc: &HcaClock,
) -> Split {
    responder.sort_by_key(|r| r.seq);
    let mut out = Split::default();
    for p in prober {
        let (Some(t2), Some(t5)) = (p.t2, p.t5) else {
            out.missing_prober += 1;
            continue;
        };
        // The first of equal keys (the sort is stable: the first report).
        let r = responder
            .get(responder.partition_point(|r| r.seq < p.seq))
            .filter(|r| r.seq == p.seq);
        let Some((Some(t3), Some(t4))) = r.map(|r| (r.t3, r.t4)) else {
            out.missing_responder += 1;
            continue;
        };
        let (prober_hca, responder) = (pc.ns(pc.elapsed(t2, t5)), rc.ns(rc.elapsed(t3, t4)));
        out.record(p.t6_ns.checked_sub(p.t1_ns), prober_hca, Some(responder));
    }
    out
}

/// Most prober stamps one run keeps (56 B each, allocated before the
/// run): a longer run is split over its first this many messages.
pub const LOG_MAX: usize = 1 << 18;

/// The prober's side of a run with `--hw-timestamps`, as the runner
/// leaves it.
#[derive(Clone, Debug)]
pub struct ProberLog {
    pub clock: HcaClock,
    pub calibration: Calibration,
    /// One record per answered message, in order.
    pub stamps: Vec<ProberStamp>,
    /// Answered messages past [`LOG_MAX`], not kept.
    pub overflow: u64,
}

/// The responder's side, as it reports it to the prober after the run.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct ResponderReport {
    /// Format of this report ([`REPORT_VERSION`]).
    pub version: u32,
    /// The responder's [`HcaClock`], as calibrated.
    pub mask: u64,
    pub nominal_khz: u64,
    pub ns_per_tick: f64,
    /// (seq, T3, T4) per echoed message; a missing stamp is absent.
    pub stamps: Vec<(u64, Option<u64>, Option<u64>)>,
    /// Echoed messages past [`LOG_MAX`], not reported.
    pub overflow: u64,
}

/// The version of [`ResponderReport`] this build writes and reads.
pub const REPORT_VERSION: u32 = 1;

/// A run's split as the report shows it.
#[derive(Clone, Debug)]
pub struct HwSplit {
    /// One-way loopback ([`ProberLog::split_one_way`]): no responder.
    pub one_way: bool,
    pub split: Split,
    /// Sentences for the report (calibration, overflow).
    pub notes: Vec<String>,
}

impl ProberLog {
    /// The one-way split of a loopback run (both completions on one HCA):
    /// "network" = T5 - T2 (send completion to receive completion),
    /// prober delay = (T6 - T1) - (T5 - T2).
    pub fn split_one_way(&self) -> HwSplit {
        let mut split = Split::default();
        for p in &self.stamps {
            let (Some(t2), Some(t5)) = (p.t2, p.t5) else {
                split.missing_prober += 1;
                continue;
            };
            let hca = self.clock.ns(self.clock.elapsed(t2, t5));
            split.record(Some(p.t6_ns.saturating_sub(p.t1_ns)), hca, None);
        }
        HwSplit {
            one_way: true,
            split,
            notes: self.notes(),
        }
    }

    /// The round-trip split with the responder's report.
    pub fn split_with(&self, r: &ResponderReport) -> Result<HwSplit, String> {
        if r.version != REPORT_VERSION {
            let v = r.version;
            return Err(format!(
                "the responder's timestamp report is version {v}, this ibprobe reads {REPORT_VERSION}; run the same ibprobe version on both ends"
            ));
        }
        let mut rc = HcaClock::new("the responder's device", r.mask, r.nominal_khz)
            .map_err(|e| e.to_string())?;
        if r.ns_per_tick.is_finite() && r.ns_per_tick > 0.0 {
            rc.ns_per_tick = r.ns_per_tick;
        }
        let mut rs: Vec<ResponderStamp> = r
            .stamps
            .iter()
            .map(|&(seq, t3, t4)| ResponderStamp { seq, t3, t4 })
            .collect();
        let mut notes = self.notes();
        if r.overflow > 0 {
            let more = r.overflow;
            notes.push(format!(
                "hw timestamps: the responder kept the first {LOG_MAX} messages' stamps ({more} more not reported)"
            ));
        }
        Ok(HwSplit {
            one_way: false,
            split: split(&self.stamps, &self.clock, &mut rs, &rc),
            notes,
        })
    }

    fn notes(&self) -> Vec<String> {
        let khz = self.clock.nominal_khz;
        let mut n = vec![match &self.calibration {
            Calibration::Measured { drift_ppm } => format!(
                "hw timestamps: prober HCA clock {khz} kHz nominal, {drift_ppm:+.1} ppm measured against the host clock over the run"
            ),
            Calibration::Nominal(why) => {
                format!("hw timestamps: prober HCA clock at its nominal {khz} kHz ({why})")
            }
        }];
        if self.overflow > 0 {
            let more = self.overflow;
            n.push(format!(
                "hw timestamps: the split covers the first {LOG_MAX} messages ({more} more not kept)"
            ));
        }
        n
    }
}

/// The responder's stamps of a session, into room reserved before it
/// (recording never allocates: past the capacity only a count grows).
#[derive(Clone, Debug, Default)]
pub struct ResponderLog {
    /// In echo order.
    pub stamps: Vec<ResponderStamp>,
    /// Echoed messages that did not fit.
    pub overflow: u64,
}

impl ResponderLog {
    /// A log with room for [`LOG_MAX`] messages.
    pub fn new() -> ResponderLog {
        ResponderLog {
            stamps: Vec::with_capacity(LOG_MAX),
            overflow: 0,
        }
    }

    /// Keeps `r` if there is room.
    #[inline(always)]
    pub fn push(&mut self, r: ResponderStamp) {
        if self.stamps.len() < self.stamps.capacity() {
            self.stamps.push(r);
        } else {
            self.overflow += 1;
        }
    }
}

impl ResponderReport {
    /// The report of a responder whose clock is `clock` (calibrated).
    pub fn new(clock: &HcaClock, stamps: &[ResponderStamp], overflow: u64) -> ResponderReport {
        ResponderReport {
            version: REPORT_VERSION,
            mask: clock.mask,
            nominal_khz: clock.nominal_khz,
            ns_per_tick: clock.ns_per_tick,
            stamps: stamps.iter().map(|r| (r.seq, r.t3, r.t4)).collect(),
            overflow,
        }
    }
}
