//! Remote probes from the target sources: a thread that refreshes the
//! [`TargetSet`] (static list, file_sd pinglists, DNS) and turns it into
//! the engine's remote probes, applying the cardinality limit.
//!
//! Why it exists: target discovery may block (DNS, a slow disk) and must
//! never delay a probe round or a scrape; the engine only ever reads the
//! latest list.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::spec::{NodePlan, ProbeKind, ProbeSpec, Remote, RemoteProbes};
use crate::collect::latency::SeriesKey;
use crate::config::{CardinalityConfig, PlanConfig, TargetsConfig};
use crate::targets::cardinality::series_labels;
use crate::targets::plan::{ClusterPlan, PlanKind, Timing};
use crate::targets::simulate::rack_pairs_covered;
use crate::targets::{Origin, Target, TargetSet};
use ibprobe::spec::{ChannelSpec, VerbsKnobs};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OriginLabel {
    origin: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PlanLabels {
    plan: String,
    source_rack: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PeerLabels {
    target: String,
    target_rack: String,
}

/// The target sources' and the probe plan's self metrics.
#[derive(Clone, Debug, Default)]
pub struct TargetMetrics {
    targets: Family<OriginLabel, Gauge>,
    errors: Family<OriginLabel, Counter>,
    aggregated: Gauge,
    plan: Family<PlanLabels, Gauge>,
    members: Gauge,
    racks: Gauge,
    rack_pairs: Gauge,
    rack_pairs_covered: Gauge,
    peer_rack: Family<PeerLabels, Gauge>,
}

impl TargetMetrics {
    /// Registers `ibexporter_targets`, `ibexporter_target_source_errors_total`
    /// and `ibexporter_peers_aggregated`.
    pub fn register(&self, reg: &mut Registry) {
        for origin in ["static", "file_sd", "dns"] {
            let _ = self.targets.get_or_create(&OriginLabel { origin });
        }
        reg.register(
            "ibexporter_targets",
            "Remote targets being probed, by where they came from (static, file_sd, dns)",
            self.targets.clone(),
        );
        reg.register(
            "ibexporter_target_source_errors",
            "Failed refreshes of a target source (malformed pinglist, failed DNS lookup); the last good list is kept",
            self.errors.clone(),
        );
        reg.register(
            "ibexporter_peers_aggregated",
            "1 when there are more peers than cardinality.max_peer_series and their series are grouped by cardinality.group_label",
            self.aggregated.clone(),
        );
        let _ = self.plan.get_or_create(&PlanLabels {
            plan: "full".into(),
            source_rack: String::new(),
        });
        reg.register(
            "ibexporter_plan",
            "The probe plan in force (full or rack-mesh, targets.plan) and this exporter's rack in it (source_rack); always 1",
            self.plan.clone(),
        );
        reg.register(
            "ibexporter_plan_members",
            "Members of the cluster plan: this exporter and its targets, by name",
            self.members.clone(),
        );
        reg.register(
            "ibexporter_plan_racks",
            "Racks of the cluster plan (values of targets.plan_rack_label)",
            self.racks.clone(),
        );
        reg.register(
            "ibexporter_plan_rack_pairs",
            "Ordered pairs of different racks in the cluster plan",
            self.rack_pairs.clone(),
        );
        reg.register(
            "ibexporter_plan_rack_pairs_covered",
            "Ordered rack pairs the whole cluster's plan probes within its rack-pair coverage time (one round, or the rounds its rack pairs rotate through; computed by every member alike; equal to ibexporter_plan_rack_pairs when every pair is covered)",
            self.rack_pairs_covered.clone(),
        );
        reg.register(
            "ibexporter_plan_peer_rack",
            "The rack of each target label value (a peer, or a group above cardinality.max_peer_series); always 1, for joining latency by rack pair",
            self.peer_rack.clone(),
        );
    }
}

/// The plan of `set`'s cluster for this exporter, with its rows over
/// `specs` (one per target and size, in `remote_specs`' order), or `None`
/// (and a warning) when the list does not name this exporter under a
/// rack-mesh plan: it then probes every target.
fn node_plan(
    set: &TargetSet,
    specs_targets: &[Target],
    cfg: &PlanConfig,
    timing: Timing,
) -> (Option<NodePlan>, ClusterPlan) {
    let rack = |t: &Target| t.labels.get(&cfg.rack_label).cloned().unwrap_or_default();
    let members: Vec<(String, String)> = specs_targets
        .iter()
        .chain(set.skipped_self())
        .map(|t| (t.name.clone(), rack(t)))
        .collect();
    let cluster = ClusterPlan::configured(members, cfg, timing.full_max());
    let me = set
        .skipped_self()
        .first()
        .and_then(|t| cluster.member(&t.name));
    let Some(me) = me else {
        if cluster.kind() == PlanKind::RackMesh {
            tracing::warn!(
                "targets.plan: {} members need rack-mesh, but the list does not name this exporter (no target is this host's responder); probing every target. List this host's responder address with its rack label, and keep targets.skip_self on",
                cluster.len()
            );
        }
        return (None, cluster);
    };
    let mut rows = vec![Vec::new(); cluster.len()];
    let mut i = 0;
    for t in specs_targets {
        let m = cluster.member(&t.name).map(|m| m as usize);
        for _ in &t.sizes {
            if let Some(m) = m {
                rows[m].push(i);
            }
            i += 1;
        }
    }
    let plan = NodePlan {
        cluster: cluster.clone(),
        me,
        rows,
        epoch: Duration::from_secs_f64(timing.interval),
    };
    (Some(plan), cluster)
}

fn origin_kind(o: &Origin) -> &'static str {
    match o {
        Origin::Static => "static",
        Origin::FileSd(_) => "file_sd",
        Origin::Dns(_) => "dns",
    }
}

/// The remote probes for `targets`: one per target and size, labelled by
/// peer or, above the limit, by peer group.
pub fn remote_specs(source: &str, targets: &[Target], card: &CardinalityConfig) -> Vec<ProbeSpec> {
    let labels: BTreeMap<_, _> = series_labels(targets, card.max_peer_series, &card.group_label)
        .into_iter()
        .collect();
    let mut out = Vec::new();
    for t in targets {
        let target = labels
            .get(&t.key())
            .cloned()
            .unwrap_or_else(|| t.name.clone());
        for &size in &t.sizes {
            out.push(ProbeSpec {
                key: SeriesKey {
                    source: source.into(),
                    target: target.clone(),
                    transport: t.transport.name().into(),
                    op: t.op.name().into(),
                    size_bytes: size.to_string(),
                },
                kind: ProbeKind::Remote {
                    addr: t.addr,
                    spec: ChannelSpec {
                        verbs: VerbsKnobs {
                            op: t.op,
                            ..VerbsKnobs::default()
                        },
                        ..ChannelSpec::new(t.transport, size)
                    },
                },
            });
        }
    }
    out
}

/// Sets the plan's metrics after a change of the target list.
fn publish_plan(
    m: &TargetMetrics,
    cluster: &ClusterPlan,
    plan: Option<&NodePlan>,
    current: &[Target],
    card: &CardinalityConfig,
    cfg: &PlanConfig,
    timing: Timing,
) {
    m.plan.clear();
    let (kind, rack) = match plan {
        Some(p) => (
            cluster.kind().name(),
            cluster.rack_name_of(p.me).to_string(),
        ),
        None => ("full", String::new()),
    };
    m.plan
        .get_or_create(&PlanLabels {
            plan: kind.into(),
            source_rack: rack,
        })
        .set(1);
    m.members.set(cluster.len() as i64);
    m.racks.set(cluster.racks() as i64);
    // The coverage of the cluster's current round, as every member computes it.
    let epoch = crate::targets::plan::epoch_at(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default(),
        Duration::from_secs_f64(timing.interval),
    );
    let r = cluster.racks();
    m.rack_pairs.set((r * r.saturating_sub(1)) as i64);
    let within = cluster.rack_pair_rounds();
    m.rack_pairs_covered
        .set(rack_pairs_covered(cluster, epoch, within) as i64);
    m.peer_rack.clear();
    let labels: BTreeMap<_, _> = series_labels(current, card.max_peer_series, &card.group_label)
        .into_iter()
        .collect();
    for t in current {
        if let Some(v) = labels.get(&t.key()) {
            m.peer_rack
                .get_or_create(&PeerLabels {
                    target: v.clone(),
                    target_rack: t.labels.get(&cfg.rack_label).cloned().unwrap_or_default(),
                })
                .set(1);
        }
    }
}

/// The running targets thread; stops on drop.
pub struct TargetsThread {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl TargetsThread {
    /// Refreshes the target sources of `targets` about once a second (each
    /// source on its own schedule) and publishes the probes to `remote`,
    /// labelled with `source` and limited by `card`. `self_port`: this
    /// host's responder port, whose own addresses are skipped.
    /// `timing`: the probe interval (one plan epoch), messages per target
    /// and rate, which decide how many targets one round holds.
    pub fn start(
        targets: &TargetsConfig,
        self_port: Option<u16>,
        source: &str,
        card: &CardinalityConfig,
        timing: Timing,
        remote: RemoteProbes,
        m: TargetMetrics,
    ) -> anyhow::Result<TargetsThread> {
        let plan_cfg = targets.plan.clone();
        let mut set = TargetSet::from_targets(targets, self_port);
        match crate::targets::sighup_flag() {
            Ok(flag) => set.use_reload_flag(flag),
            Err(e) => tracing::warn!("SIGHUP will not reload pinglists: {e}"),
        }
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let source = source.to_string();
        let card = card.clone();
        let handle = std::thread::Builder::new()
            .name("ibexporter-targets".into())
            .spawn(move || {
                let mut first = true;
                while !s.load(Ordering::Relaxed) {
                    let report = set.refresh();
                    for e in &report.errors {
                        m.errors
                            .get_or_create(&OriginLabel {
                                origin: origin_kind(&e.origin),
                            })
                            .inc();
                    }
                    if first || report.changed() {
                        first = false;
                        let current = set.current();
                        let specs = remote_specs(&source, current, &card);
                        for kind in ["static", "file_sd", "dns"] {
                            let n = current
                                .iter()
                                .filter(|t| origin_kind(&t.origin) == kind)
                                .count();
                            m.targets
                                .get_or_create(&OriginLabel { origin: kind })
                                .set(n as i64);
                        }
                        let peers: std::collections::BTreeSet<&str> =
                            current.iter().map(|t| t.name.as_str()).collect();
                        m.aggregated
                            .set(i64::from(peers.len() > card.max_peer_series));
                        let (plan, cluster) = node_plan(&set, current, &plan_cfg, timing);
                        publish_plan(&m, &cluster, plan.as_ref(), current, &card, &plan_cfg, timing);
                        tracing::info!(
                            "targets: {} peers, {} remote probes; plan {} over {} members in {} racks",
                            peers.len(),
                            specs.len(),
                            if plan.is_some() { cluster.kind().name() } else { "full" },
                            cluster.len(),
                            cluster.racks()
                        );
                        *remote.lock().unwrap_or_else(|p| p.into_inner()) = Remote {
                            probes: specs,
                            plan: plan.map(Arc::new),
                        };
                    }
                    for _ in 0..10 {
                        if s.load(Ordering::Relaxed) {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
            })?;
        Ok(TargetsThread {
            stop,
            handle: Some(handle),
        })
    }
}

impl Drop for TargetsThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
