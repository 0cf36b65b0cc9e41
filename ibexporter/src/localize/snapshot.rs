//! The saved form of localization's input: a versioned JSON snapshot of
//! rounds (`ibexporter localize --save DIR` writes one, `--snapshot FILE`
//! replays it without Prometheus), its bounds, and its conversion into
//! the [`Topology`] and [`Round`]s the localizer reads.
//!
//! Why it exists: a localization must be reproducible after the fact (an
//! incident review, a bug report, a test) from exactly what Prometheus
//! said at the time; and both readers (a Prometheus answer, a file) hand
//! the method the same checked type, so neither can feed it a NaN, a
//! negative count or a host it does not know.
//!
//! # The format (`ibexporter.localize-snapshot/1`)
//!
//! ```text
//! {"schema": "ibexporter.localize-snapshot/1",
//!  "source": "http://prometheus:9090",          where it came from
//!  "window_seconds": 300,                        one round's window
//!  "hosts": [{"name": "h07", "rack": "r2"}, ...],
//!  "rounds": [{"at": 1764325200,                 window end, unix seconds
//!              "probes": [{"prober": "h07", "target": "h11", "sent": 3000,
//!                          "lost": 0, "p50_us": 2.1, "p10_us": 1.8,
//!                          "hw_us": {"prober": 0.6, "responder": 0.4,
//!                                    "network": 1.1}}, ...],
//!              "wakeup_p99_us": {"h07": 11.5, ...},
//!              "port_errors": {"h07": 0, ...}}, ...]}
//! ```
//!
//! Names are host names of `hosts`; `p50_us`/`p10_us` may be null (no
//! answered message, or no histogram); `wakeup_p99_us` may be empty;
//! `port_errors` (each host's HCA port error events over the window) is
//! absent where the exporters serve no port counters (optional, like
//! `hw_us`);
//! `hw_us` (the hardware-timestamp split's medians: prober delay,
//! responder delay, network) is absent where the NICs do not stamp
//! completions, and in snapshots written before it existed (they load
//! as before: the field is optional, so the schema stays `/1`).
//! Every number is finite and not negative, `lost <= sent`; limits:
//! [`MAX_SNAPSHOT_BYTES`], [`MAX_HOSTS`], [`MAX_ROUNDS`],
//! [`MAX_PROBES`] per round, [`MAX_NAME`].

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::model::{HostId, HwSplit, PairObs, Round, Topology};
use crate::limits::{MAX_HOSTS, MAX_NAME, MAX_PROBES, MAX_ROUNDS, MAX_SNAPSHOT_BYTES};

/// The schema this version writes and reads.
pub const SCHEMA: &str = "ibexporter.localize-snapshot/1";

/// One host: its name and its rack.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Host {
    /// The host's name (an exporter's `source`, else its target name).
    pub name: String,
    /// Its rack.
    pub rack: String,
}

/// One probe of a round: an ordered host pair over the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Probe {
    /// Who probed.
    pub prober: String,
    /// Whom.
    pub target: String,
    /// Messages sent in the window.
    pub sent: u64,
    /// Messages without an answer (timeout or error).
    pub lost: u64,
    /// Median round trip of the answered ones, microseconds.
    pub p50_us: Option<f64>,
    /// Their 10th percentile, microseconds.
    pub p10_us: Option<f64>,
    /// The hardware-timestamp split's medians, where present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hw_us: Option<HwUs>,
}

/// A probe's hardware-timestamp split over the window: medians in
/// microseconds ([`super::HwSplit`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HwUs {
    /// Delay on the prober's host.
    pub prober: f64,
    /// Delay on the responder's host.
    pub responder: f64,
    /// Network round trip, wire to wire.
    pub network: f64,
}

/// One round: every probe over one window ending at `at`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapRound {
    /// The window's end, unix seconds.
    pub at: f64,
    /// The probes.
    pub probes: Vec<Probe>,
    /// Each host's own wake-up latency p99 over the window, microseconds.
    #[serde(default)]
    pub wakeup_p99_us: BTreeMap<String, f64>,
    /// Each host's HCA port error events over the window (the counters of
    /// [`super::PORT_ERROR_FILES`], summed); absent where not served.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub port_errors: BTreeMap<String, f64>,
}

/// A snapshot: hosts, racks and rounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Snapshot {
    /// [`SCHEMA`].
    pub schema: String,
    /// Where the rounds came from (a Prometheus URL, a simulation).
    pub source: String,
    /// One round's window, seconds.
    pub window_seconds: f64,
    /// Every host named by a round.
    pub hosts: Vec<Host>,
    /// The rounds, oldest first.
    pub rounds: Vec<SnapRound>,
}

/// What the localizer reads, with the names to print.
#[derive(Debug, Clone, PartialEq)]
pub struct Input {
    /// Racks by index (sorted names).
    pub topology: Topology,
    /// Host names by [`HostId`].
    pub hosts: Vec<String>,
    /// Rack names by index.
    pub racks: Vec<String>,
    /// The rounds, oldest first.
    pub rounds: Vec<Round>,
    /// Answered probes without a median (no histogram): left out.
    pub skipped: usize,
}

fn finite_non_negative(v: f64) -> bool {
    v.is_finite() && v >= 0.0
}

fn check_name(what: &str, n: &str) -> Result<(), String> {
    if n.is_empty() || n.len() > MAX_NAME || n.chars().any(char::is_control) {
        return Err(format!(
            "a {what} name is empty, longer than {MAX_NAME} bytes or has control characters"
        ));
    }
    Ok(())
}

impl Snapshot {
    /// Checks every bound and value; one line saying what is wrong and
    /// where (round, prober, target), never more of the input.
    pub fn check(&self) -> Result<(), String> {
        if self.schema != SCHEMA {
            return Err(format!(
                "schema {:?} is not {SCHEMA:?}: not a snapshot this version reads",
                truncate(&self.schema)
            ));
        }
        if !(self.window_seconds.is_finite() && self.window_seconds > 0.0) {
            return Err("window_seconds must be a positive number".into());
        }
        if self.hosts.len() > MAX_HOSTS {
            return Err(format!(
                "{} hosts, more than the limit of {MAX_HOSTS}",
                self.hosts.len()
            ));
        }
        if self.rounds.is_empty() || self.rounds.len() > MAX_ROUNDS {
            return Err(format!(
                "{} rounds; give 1 to {MAX_ROUNDS}",
                self.rounds.len()
            ));
        }
        let mut names = HashSet::with_capacity(self.hosts.len());
        for h in &self.hosts {
            check_name("host", &h.name)?;
            check_name("rack", &h.rack)?;
            if !names.insert(h.name.as_str()) {
                return Err(format!("host {:?} is listed twice", truncate(&h.name)));
            }
        }
        for (i, r) in self.rounds.iter().enumerate() {
            let n = i + 1;
            if !finite_non_negative(r.at) {
                return Err(format!("round {n}: `at` must be unix seconds"));
            }
            if r.probes.len() > MAX_PROBES {
                return Err(format!(
                    "round {n}: {} probes, more than the limit of {MAX_PROBES}",
                    r.probes.len()
                ));
            }
            let mut seen = HashSet::with_capacity(r.probes.len());
            for p in &r.probes {
                let at = || {
                    format!(
                        "round {n}, probe {:?} -> {:?}",
                        truncate(&p.prober),
                        truncate(&p.target)
                    )
                };
                if !names.contains(p.prober.as_str()) || !names.contains(p.target.as_str()) {
                    return Err(format!("{}: a host not in `hosts`", at()));
                }
                if p.prober == p.target {
                    return Err(format!("{}: a host probing itself", at()));
                }
                if !seen.insert((p.prober.as_str(), p.target.as_str())) {
                    return Err(format!("{}: listed twice", at()));
                }
                if p.lost > p.sent || p.sent > u64::from(u32::MAX) {
                    return Err(format!(
                        "{}: lost {} of {} sent (lost must be at most sent, sent below 2^32)",
                        at(),
                        p.lost,
                        p.sent
                    ));
                }
                let hw = p.hw_us.as_ref();
                for (what, v) in [
                    ("p50_us", p.p50_us),
                    ("p10_us", p.p10_us),
                    ("hw_us.prober", hw.map(|h| h.prober)),
                    ("hw_us.responder", hw.map(|h| h.responder)),
                    ("hw_us.network", hw.map(|h| h.network)),
                ] {
                    if v.is_some_and(|v| !finite_non_negative(v)) {
                        return Err(format!("{}: {what} must be a number >= 0", at()));
                    }
                }
            }
            for (field, map) in [
                ("wakeup_p99_us", &r.wakeup_p99_us),
                ("port_errors", &r.port_errors),
            ] {
                for (h, v) in map {
                    if !names.contains(h.as_str()) {
                        return Err(format!(
                            "round {n}: {field} names {:?}, not in `hosts`",
                            truncate(h)
                        ));
                    }
                    if !finite_non_negative(*v) {
                        return Err(format!(
                            "round {n}: {field} of {:?} must be a number >= 0",
                            truncate(h)
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Parses and checks a snapshot's bytes; `Err` is one line without
    /// the input's contents (serde's position and reason).
    pub fn parse(bytes: &[u8]) -> Result<Snapshot, String> {
        // The schema first, so a file of another version is refused as
        // such, not by the first field it no longer has.
        #[derive(Deserialize)]
        struct Head {
            schema: Option<String>,
        }
        let head: Head = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
        match head.schema.as_deref() {
            Some(SCHEMA) => {}
            Some(other) => {
                return Err(format!(
                    "schema {:?} is not {SCHEMA:?}: not a snapshot this version reads",
                    truncate(other)
                ))
            }
            None => return Err(format!("no `schema` field: not a {SCHEMA} snapshot")),
        }
        let s: Snapshot =
            serde_json::from_slice(bytes).map_err(|e| format!("not a {SCHEMA} snapshot: {e}"))?;
        s.check()?;
        Ok(s)
    }

    /// Reads `path` (a regular file of at most [`MAX_SNAPSHOT_BYTES`],
    /// through the workspace's bounded reader) and checks it.
    pub fn read(path: &Path) -> Result<Snapshot, String> {
        let bytes =
            ibhost::file::read_small(path, MAX_SNAPSHOT_BYTES).map_err(|e| e.to_string())?;
        Snapshot::parse(&bytes).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Several snapshots replayed as one: their rounds in the order given,
    /// their hosts merged (a host must keep its rack).
    pub fn merge(parts: Vec<Snapshot>) -> Result<Snapshot, String> {
        let mut it = parts.into_iter();
        let mut all = it.next().ok_or("no snapshot given")?;
        let mut rack: HashMap<String, String> = all
            .hosts
            .iter()
            .map(|h| (h.name.clone(), h.rack.clone()))
            .collect();
        for s in it {
            for h in s.hosts {
                match rack.get(&h.name) {
                    Some(r) if *r != h.rack => {
                        return Err(format!(
                            "host {:?} is in rack {:?} in one snapshot and {:?} in another",
                            truncate(&h.name),
                            truncate(r),
                            truncate(&h.rack)
                        ))
                    }
                    Some(_) => {}
                    None => {
                        rack.insert(h.name.clone(), h.rack.clone());
                        all.hosts.push(h);
                    }
                }
            }
            if s.source != all.source && !all.source.contains(&s.source) {
                all.source = format!("{}, {}", all.source, s.source);
            }
            all.window_seconds = all.window_seconds.max(s.window_seconds);
            all.rounds.extend(s.rounds);
        }
        all.check()?;
        Ok(all)
    }

    /// The localizer's input: hosts by index in the snapshot's order,
    /// racks by sorted name.
    pub fn input(&self) -> Input {
        let racks: Vec<String> = self
            .hosts
            .iter()
            .map(|h| h.rack.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let rack_index: HashMap<&str, u32> = racks
            .iter()
            .enumerate()
            .map(|(i, r)| (r.as_str(), i as u32))
            .collect();
        let index: HashMap<&str, HostId> = self
            .hosts
            .iter()
            .enumerate()
            .map(|(i, h)| (h.name.as_str(), i as HostId))
            .collect();
        let topology = Topology {
            rack_of: self
                .hosts
                .iter()
                .map(|h| rack_index[h.rack.as_str()])
                .collect(),
            racks: racks.len() as u32,
        };
        let mut skipped = 0;
        let rounds = self
            .rounds
            .iter()
            .map(|r| {
                let mut pairs = Vec::with_capacity(r.probes.len());
                for p in &r.probes {
                    let dead = p.sent > 0 && p.lost >= p.sent;
                    if p.sent == 0 || (!dead && p.p50_us.is_none()) {
                        skipped += usize::from(p.sent > 0);
                        continue;
                    }
                    pairs.push(PairObs {
                        prober: index[p.prober.as_str()],
                        target: index[p.target.as_str()],
                        sent: p.sent as u32,
                        lost: p.lost as u32,
                        p50_us: p.p50_us.map_or(f32::NAN, |v| v as f32),
                        p10_us: p.p10_us.map_or(f32::NAN, |v| v as f32),
                        hw: p.hw_us.map(|h| HwSplit {
                            prober_us: h.prober as f32,
                            responder_us: h.responder as f32,
                            network_us: h.network as f32,
                        }),
                    });
                }
                let per_host = |map: &BTreeMap<String, f64>| {
                    let mut v = Vec::new();
                    if !map.is_empty() {
                        v = vec![f32::NAN; self.hosts.len()];
                        for (h, x) in map {
                            v[index[h.as_str()] as usize] = *x as f32;
                        }
                    }
                    v
                };
                Round {
                    pairs,
                    self_health_us: per_host(&r.wakeup_p99_us),
                    port_errors: per_host(&r.port_errors),
                }
            })
            .collect();
        Input {
            topology,
            hosts: self.hosts.iter().map(|h| h.name.clone()).collect(),
            racks,
            rounds,
            skipped,
        }
    }

    /// A snapshot of rounds the simulator made (hosts named `names`, in
    /// racks `rack_names[topology.rack_of[h]]`), one `window_seconds`
    /// apart, the last ending at `last_at`.
    pub fn from_rounds(
        source: &str,
        names: &[String],
        rack_names: &[String],
        topology: &Topology,
        rounds: &[Round],
        window_seconds: f64,
        last_at: f64,
    ) -> Snapshot {
        let n = rounds.len();
        let us = |v: f32| (v.is_finite()).then_some((f64::from(v) * 1000.0).round() / 1000.0);
        Snapshot {
            schema: SCHEMA.into(),
            source: source.into(),
            window_seconds,
            hosts: names
                .iter()
                .enumerate()
                .map(|(h, name)| Host {
                    name: name.clone(),
                    rack: rack_names[topology.rack_of[h] as usize].clone(),
                })
                .collect(),
            rounds: rounds
                .iter()
                .enumerate()
                .map(|(i, r)| SnapRound {
                    at: last_at - (n - 1 - i) as f64 * window_seconds,
                    probes: r
                        .pairs
                        .iter()
                        .map(|o| Probe {
                            prober: names[o.prober as usize].clone(),
                            target: names[o.target as usize].clone(),
                            sent: u64::from(o.sent),
                            lost: u64::from(o.lost),
                            p50_us: us(o.p50_us),
                            p10_us: us(o.p10_us),
                            hw_us: o.hw.filter(HwSplit::valid).map(|h| HwUs {
                                prober: us(h.prober_us).unwrap_or(0.0),
                                responder: us(h.responder_us).unwrap_or(0.0),
                                network: us(h.network_us).unwrap_or(0.0),
                            }),
                        })
                        .collect(),
                    wakeup_p99_us: r
                        .self_health_us
                        .iter()
                        .enumerate()
                        .filter_map(|(h, &v)| us(v).map(|v| (names[h].clone(), v)))
                        .collect(),
                    port_errors: r
                        .port_errors
                        .iter()
                        .enumerate()
                        .filter(|(_, v)| v.is_finite())
                        .map(|(h, &v)| (names[h].clone(), f64::from(v)))
                        .collect(),
                })
                .collect(),
        }
    }

    /// Writes it as `DIR/localize-<unix seconds of the last round>.json`
    /// (DIR made if missing); returns the path.
    pub fn save(&self, dir: &Path) -> Result<std::path::PathBuf, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("--save {}: {e}", dir.display()))?;
        let at = self.rounds.last().map_or(0.0, |r| r.at);
        let path = dir.join(format!("localize-{}.json", at as u64));
        let text = serde_json::to_string(self).map_err(|e| e.to_string())?;
        std::fs::write(&path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(path)
    }
}

/// A name as quoted in a message: at most 64 characters of it.
pub(super) fn truncate(s: &str) -> String {
    match s.char_indices().nth(64) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one() -> Snapshot {
        Snapshot {
            schema: SCHEMA.into(),
            source: "test".into(),
            window_seconds: 60.0,
            hosts: vec![
                Host {
                    name: "a".into(),
                    rack: "r1".into(),
                },
                Host {
                    name: "b".into(),
                    rack: "r0".into(),
                },
            ],
            rounds: vec![SnapRound {
                at: 100.0,
                probes: vec![Probe {
                    prober: "a".into(),
                    target: "b".into(),
                    sent: 10,
                    lost: 0,
                    p50_us: Some(2.0),
                    p10_us: None,
                    hw_us: None,
                }],
                wakeup_p99_us: BTreeMap::from([("b".to_string(), 10.0)]),
                port_errors: BTreeMap::new(),
            }],
        }
    }

    #[test]
    fn port_errors_round_trip_and_hostile_ones_are_refused_by_name() {
        let mut s = one();
        s.rounds[0].port_errors = BTreeMap::from([("a".to_string(), 20.0)]);
        let text = serde_json::to_vec(&s).unwrap();
        assert_eq!(Snapshot::parse(&text).unwrap(), s);
        let r = &s.input().rounds[0];
        assert_eq!(r.port_errors[0], 20.0);
        assert!(r.port_errors[1].is_nan());
        // Without any: not written (snapshots of exporters with no port
        // counters read as before).
        assert!(!String::from_utf8(serde_json::to_vec(&one()).unwrap())
            .unwrap()
            .contains("port_errors"));
        for (host, v, why) in [
            ("a", -1.0, "port_errors of \"a\" must be a number >= 0"),
            (
                "a",
                f64::INFINITY,
                "port_errors of \"a\" must be a number >= 0",
            ),
            ("zz", 1.0, "port_errors names \"zz\", not in `hosts`"),
        ] {
            let mut s = one();
            s.rounds[0].port_errors = BTreeMap::from([(host.to_string(), v)]);
            let err = s.check().unwrap_err();
            assert!(err.contains(why), "{err}");
        }
    }

    #[test]
    fn a_snapshot_round_trips_and_becomes_the_localizers_input() {
        let s = one();
        let text = serde_json::to_vec(&s).unwrap();
        assert_eq!(Snapshot::parse(&text).unwrap(), s);
        let i = s.input();
        assert_eq!(i.racks, ["r0", "r1"]);
        assert_eq!(i.topology.rack_of, [1, 0]);
        assert_eq!(i.rounds[0].pairs[0].prober, 0);
        assert!(i.rounds[0].pairs[0].p10_us.is_nan());
        assert!(i.rounds[0].self_health_us[0].is_nan());
        assert_eq!(i.rounds[0].self_health_us[1], 10.0);
    }

    #[test]
    fn a_split_round_trips_and_a_snapshot_without_one_still_loads() {
        let mut s = one();
        s.rounds[0].probes[0].hw_us = Some(HwUs {
            prober: 0.5,
            responder: 8.5,
            network: 1.0,
        });
        let text = serde_json::to_vec(&s).unwrap();
        assert_eq!(Snapshot::parse(&text).unwrap(), s);
        let hw = s.input().rounds[0].pairs[0].hw.unwrap();
        assert_eq!(hw.responder_us, 8.5);
        // Written before the split existed: no `hw_us` key at all.
        let old = br#"{"schema": "ibexporter.localize-snapshot/1", "source": "old",
            "window_seconds": 60, "hosts": [{"name": "a", "rack": "r0"}, {"name": "b", "rack": "r0"}],
            "rounds": [{"at": 100, "probes": [{"prober": "a", "target": "b", "sent": 10,
            "lost": 0, "p50_us": 2.0, "p10_us": 1.5}]}]}"#;
        let s = Snapshot::parse(old).unwrap();
        assert_eq!(s.rounds[0].probes[0].hw_us, None);
        assert_eq!(s.input().rounds[0].pairs[0].hw, None);
        assert!(!String::from_utf8(serde_json::to_vec(&s).unwrap())
            .unwrap()
            .contains("hw_us"));
    }

    #[test]
    fn a_hostile_split_is_refused_by_name() {
        for (part, v) in [
            ("prober", -1.0),
            ("responder", f64::NAN),
            ("network", f64::INFINITY),
        ] {
            let mut s = one();
            let mut h = HwUs {
                prober: 1.0,
                responder: 1.0,
                network: 1.0,
            };
            match part {
                "prober" => h.prober = v,
                "responder" => h.responder = v,
                _ => h.network = v,
            }
            s.rounds[0].probes[0].hw_us = Some(h);
            let e = s.check().unwrap_err();
            assert!(
                e.contains(&format!("hw_us.{part}")) && e.contains(">= 0"),
                "{e}"
            );
        }
        // In JSON a negative part is refused by parse too.
        let mut s = one();
        s.rounds[0].probes[0].hw_us = Some(HwUs {
            prober: 1.0,
            responder: -3.0,
            network: 1.0,
        });
        let text = serde_json::to_vec(&s).unwrap();
        assert!(Snapshot::parse(&text)
            .unwrap_err()
            .contains("hw_us.responder"));
    }

    #[test]
    fn bad_values_are_refused_by_name() {
        let mut s = one();
        s.rounds[0].probes[0].lost = 11;
        assert!(s.check().unwrap_err().contains("lost 11 of 10"));
        let mut s = one();
        s.rounds[0].probes[0].p50_us = Some(-1.0);
        assert!(s.check().unwrap_err().contains("p50_us"));
        let mut s = one();
        s.rounds[0].probes[0].target = "zz".into();
        assert!(s.check().unwrap_err().contains("not in `hosts`"));
        let mut s = one();
        let twice = s.rounds[0].probes[0].clone();
        s.rounds[0].probes.push(twice);
        assert!(s.check().unwrap_err().contains("listed twice"));
        let mut s = one();
        s.hosts[1].name = "a".into();
        assert!(s.check().unwrap_err().contains("listed twice"));
    }

    #[test]
    fn merged_snapshots_keep_each_hosts_rack() {
        let mut other = one();
        other.rounds[0].at = 160.0;
        let m = Snapshot::merge(vec![one(), other.clone()]).unwrap();
        assert_eq!(m.rounds.len(), 2);
        other.hosts[0].rack = "r9".into();
        let e = Snapshot::merge(vec![one(), other]).unwrap_err();
        assert!(e.contains("\"r1\"") && e.contains("\"r9\""), "{e}");
    }
}
