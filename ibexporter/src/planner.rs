//! `ibexporter mesh`: a cluster's probe plan, its figures and a failure
//! simulation, from a pinglist or a synthetic cluster (the command's typed
//! settings; `main.rs` maps the flags to [`PlanRequest`]).
//!
//! Why it exists: an operator sizing a mesh asks "what does each node
//! probe, what does it cost, how fast is a dead host seen" before
//! deploying; and a test asks two processes for the same plan.

use std::fmt::Write as _;
use std::path::PathBuf;

use crate::config::PlanConfig;
use crate::localize::sim::{self, Localization, Scenario, SimOptions};
use crate::targets::file_sd::plan_members;
use crate::targets::plan::{epoch_at, ClusterPlan, Figures, Timing};
use crate::targets::simulate::{report, synthetic, Report};

/// Where the cluster comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// A file_sd JSON pinglist (every member, with rack labels).
    FileSd(PathBuf),
    /// `hosts` synthetic hosts in `racks` racks.
    Simulate {
        /// Hosts.
        hosts: usize,
        /// Racks.
        racks: usize,
    },
}

/// What to print.
#[derive(Debug, Clone, PartialEq)]
pub enum View {
    /// The cluster's figures and the failure simulation.
    Cluster,
    /// One member's round in the epoch.
    Node(String),
    /// Every member's round in the epoch.
    All,
}

/// `ibexporter mesh`'s settings.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanRequest {
    /// The cluster.
    pub input: Input,
    /// Plan, rack label, k.
    pub plan: PlanConfig,
    /// Interval, probes, rate, timeout.
    pub timing: Timing,
    /// What to print.
    pub view: View,
    /// The epoch of `Node`/`All` views (None: the current one, from the clock).
    pub epoch: Option<u64>,
    /// Simulated failures of each kind (0: none); with faults, also the
    /// trials of each fault scenario and of the fault-free run.
    pub trials: usize,
    /// Fault scenarios whose localization to measure (None: none).
    pub faults: Option<Vec<Scenario>>,
    /// How the simulated mesh reports (hardware timestamps or not).
    pub sim: SimOptions,
    /// The simulation's seed.
    pub seed: u64,
    /// JSON instead of a table.
    pub json: bool,
}

/// The current epoch for `interval`.
pub fn current_epoch(interval: std::time::Duration) -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    epoch_at(now, interval)
}

/// Runs the command: the text to print, or one line saying what was wrong.
pub fn run(req: &PlanRequest) -> Result<String, String> {
    let members = match &req.input {
        Input::FileSd(p) => {
            let text = crate::targets::file_sd::read_pinglist(p)?;
            plan_members(p, &text, &req.plan.rack_label)?
        }
        Input::Simulate { hosts, racks } => {
            if *hosts < 2 || *racks < 1 || racks > hosts {
                return Err(format!(
                    "--simulate --hosts {hosts} --racks {racks}: give at least 2 hosts and 1..=hosts racks, e.g. --hosts 10000 --racks 333"
                ));
            }
            synthetic(*hosts, *racks)
        }
    };
    let plan = ClusterPlan::configured(members, &req.plan, req.timing.full_max());
    let interval = std::time::Duration::from_secs_f64(req.timing.interval);
    let epoch = req.epoch.unwrap_or_else(|| current_epoch(interval));
    match &req.view {
        View::Cluster => {
            if let Some(f) = &req.faults {
                sim::check(&plan, f)?;
            }
            let r = report(&plan, req.timing, req.trials, req.seed);
            let loc = req
                .faults
                .as_ref()
                .map(|f| sim::measure_with(&plan, req.timing, f, req.trials, req.seed, req.sim));
            if req.json {
                let mut v = serde_json::to_value(&r).map_err(|e| e.to_string())?;
                if let (Some(l), Some(map)) = (&loc, v.as_object_mut()) {
                    let serde_json::Value::Object(extra) =
                        serde_json::to_value(l).map_err(|e| e.to_string())?
                    else {
                        unreachable!("a struct serializes to an object")
                    };
                    map.extend(extra);
                }
                serde_json::to_string_pretty(&v).map_err(|e| e.to_string())
            } else {
                let mut s = table(&r, &req.timing);
                if let Some(l) = &loc {
                    s.push_str(&localization_table(l, req.trials));
                }
                Ok(s)
            }
        }
        View::Node(name) => {
            let m = plan.member(name).ok_or_else(|| {
                format!("--node {name:?}: not a member of the list ({} members); give a target name as written in the list", plan.len())
            })?;
            let mut out = Vec::new();
            plan.targets_of(m, epoch, &mut out);
            let targets: Vec<serde_json::Value> = out
                .iter()
                .map(|&t| serde_json::json!({"target": plan.name(t), "rack": plan.rack_name_of(t)}))
                .collect();
            if req.json {
                let v = serde_json::json!({
                    "node": name, "rack": plan.rack_name_of(m), "plan": plan.kind().name(),
                    "epoch": epoch, "targets": targets,
                });
                serde_json::to_string_pretty(&v).map_err(|e| e.to_string())
            } else {
                let mut s = format!(
                    "{name} (rack {:?}), plan {}, epoch {epoch}: {} targets\n",
                    plan.rack_name_of(m),
                    plan.kind().name(),
                    out.len()
                );
                for &t in &out {
                    let _ = writeln!(s, "  {:<32} rack {:?}", plan.name(t), plan.rack_name_of(t));
                }
                Ok(s)
            }
        }
        View::All => {
            let mut out = Vec::new();
            let mut rounds = serde_json::Map::new();
            let mut s = String::new();
            for m in 0..plan.len() as u32 {
                plan.targets_of(m, epoch, &mut out);
                let names: Vec<&str> = out.iter().map(|&t| plan.name(t)).collect();
                let _ = writeln!(s, "{}: {}", plan.name(m), names.join(" "));
                rounds.insert(plan.name(m).to_string(), serde_json::json!(names));
            }
            if req.json {
                let v = serde_json::json!({
                    "plan": plan.kind().name(), "epoch": epoch, "rounds": rounds,
                });
                serde_json::to_string_pretty(&v).map_err(|e| e.to_string())
            } else {
                Ok(s)
            }
        }
    }
}

/// The human report of a cluster.
pub fn table(r: &Report, t: &Timing) -> String {
    let f: &Figures = &r.figures;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "plan {}: {} hosts in {} racks, {} probe(s) per rack pair per round\n  (interval {}s, {} messages per target at {} Hz, timeout {}s)",
        f.plan, f.hosts, f.racks, f.rack_peers, t.interval, t.probes, t.rate_hz, t.timeout
    );
    let _ = writeln!(
        s,
        "targets per node per round   {} at most (one round: min {}, mean {:.1}, max {}; most probers of one host {})",
        f.max_targets_per_round,
        r.round.min_targets,
        r.round.mean_targets,
        r.round.max_targets,
        r.round.max_inbound
    );
    let _ = writeln!(
        s,
        "probes per node per second   {:.0}{}",
        f.probes_per_node_per_second,
        if f.round_fits {
            ""
        } else {
            " (a round does not fit the interval: rounds stretch)"
        }
    );
    let _ = writeln!(
        s,
        "rack pairs covered           {} of {} in one round; every rack pair within {} round(s), {:.0}s{}",
        r.round.rack_pairs_covered,
        r.round.rack_pairs,
        f.rack_pair_cover_rounds,
        f.rack_pair_cover_seconds,
        if f.rack_pair_cover_rounds > 1 {
            " (rack pairs rotate so that a round fits)"
        } else {
            ""
        }
    );
    let _ = writeln!(
        s,
        "every host pair within       {:.0}s ({} rounds)",
        f.host_pair_cover_seconds,
        (f.host_pair_cover_seconds / (f.rack_pair_cover_seconds / f.rack_pair_cover_rounds as f64))
            .round()
    );
    let _ = writeln!(
        s,
        "series (remote probes)       {} per exporter ({} target values x ({} size(s) x {} + {})), {} in total",
        r.series.per_exporter,
        r.series.target_values_per_exporter,
        r.series.sizes,
        crate::targets::cardinality::SERIES_PER_VALUE_SIZE,
        crate::targets::cardinality::SERIES_PER_VALUE,
        r.series.total
    );
    if !r.detection.is_empty() {
        let _ = writeln!(
            s,
            "detection (seconds)          {:>8} {:>8} {:>8} {:>8} {:>8}  trials",
            "p50", "p99", "max", "bound", "within"
        );
        for d in &r.detection {
            let _ = writeln!(
                s,
                "  {:<26} {:>8.1} {:>8.1} {:>8.1} {:>8.1} {:>7.1}%  {}",
                d.failure,
                d.p50,
                d.p99,
                d.max,
                d.bound,
                d.within_bound * 100.0,
                d.trials
            );
        }
    }
    s
}

/// The human table of a localization measurement.
pub fn localization_table(l: &Localization, trials: usize) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "localization after {} rounds ({trials} trials each; named when accused in {} of the last {} rounds, loss in 1",
        l.horizon_rounds, l.confirm_rounds, l.window_rounds
    );
    if l.rack_pair_window_rounds > l.window_rounds {
        let _ = write!(
            s,
            "; a rotating rack pair in {} of its last {} turns ({} rounds)",
            l.confirm_rounds, l.window_rounds, l.rack_pair_window_rounds
        );
    }
    s.push_str(")\n");
    let _ = writeln!(
        s,
        "  {:<30} {:>9} {:>9} {:>7} {:>16}  goal",
        "fault", "top1-prec", "top3-rec", "recall", "rounds p50/p95"
    );
    let opt = |v: Option<usize>| v.map_or_else(|| format!(">{}", l.max_rounds), |r| r.to_string());
    for f in &l.localization {
        let _ = writeln!(
            s,
            "  {:<30} {:>9} {:>9.3} {:>7.3} {:>16}  {}",
            f.fault,
            f.top1_precision
                .map_or_else(|| "-".to_string(), |p| format!("{p:.3}")),
            f.top3_recall,
            f.recall,
            format!(
                "{} / {}",
                opt(f.rounds_to_localize),
                opt(f.rounds_to_localize_p95)
            ),
            if f.meets_goal { "met" } else { "NOT met" }
        );
    }
    let kinds: Vec<String> = l
        .false_suspects_by_kind
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    let _ = writeln!(
        s,
        "false suspects per healthy hour  {:.2} (fault-free: {:.2} cluster-hours simulated; {})",
        l.false_suspects_per_healthy_hour,
        l.healthy_hours,
        if kinds.is_empty() {
            "none named".to_string()
        } else {
            kinds.join(", ")
        }
    );
    let _ = writeln!(
        s,
        "  (goal: top-1 precision and recall >= 0.95 within {} rounds)",
        l.horizon_rounds
    );
    s
}
