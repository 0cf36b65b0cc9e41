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

use super::{ProbeKind, ProbeSpec, RemoteProbes};
use crate::collect::latency::SeriesKey;
use crate::config::{CardinalityConfig, TargetsConfig};
use crate::targets::cardinality::series_labels;
use crate::targets::{Origin, Target, TargetSet};
use ibprobe::spec::{ChannelSpec, VerbsKnobs};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OriginLabel {
    origin: &'static str,
}

/// The target sources' self metrics.
#[derive(Clone, Debug, Default)]
pub struct TargetMetrics {
    targets: Family<OriginLabel, Gauge>,
    errors: Family<OriginLabel, Counter>,
    aggregated: Gauge,
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
    }
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
    pub fn start(
        targets: &TargetsConfig,
        self_port: Option<u16>,
        source: &str,
        card: &CardinalityConfig,
        remote: RemoteProbes,
        m: TargetMetrics,
    ) -> anyhow::Result<TargetsThread> {
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
                        tracing::info!(
                            "targets: {} peers, {} remote probes",
                            peers.len(),
                            specs.len()
                        );
                        *remote.lock().unwrap_or_else(|p| p.into_inner()) = specs;
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
