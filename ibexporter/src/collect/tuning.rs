//! Tuning drift: the host checked against an ibtune profile, the way
//! `ibtune verify` does, at most once per `min_interval` (default 10 s).
//!
//! Why it exists: an applied latency profile decays silently (irqbalance
//! or a driver reload moves an IRQ back, someone re-enables a C-state, a
//! tuned profile switch). A dashboard should show *which* setting drifted,
//! before it shows up as a latency tail.
//!
//! # Metric families
//!
//! | family | type | labels | meaning |
//! |---|---|---|---|
//! | `ibexporter_tuning_verify_ran` | gauge | `profile` | 1 when the last verification ran (profile loaded and resolved, host readable), whatever it found (drift is `drifted_items`); 0 when it could not run (the reason is logged once). While it is 0, only it and the two `verify_*_seconds` families are exported |
//! | `ibexporter_tuning_drift` | gauge | `profile`, `item`, `kind` | per setting of the profile: 1 when it differs from the profile (what `ibtune verify` lists as drift), else 0. `item` is ibtune's stable item key (`irq/41/affinity`, `sysctl/vm.swappiness`, `cpuset/real-time-0/partition`), `kind` its first segment (`irq`, `cpuset`, `sysctl`, `cpu`, `thp`, `tuned`, `irqbalance`, `cgroup`, `dma_latency`, `boot`) |
//! | `ibexporter_tuning_drifted_items` | gauge | `profile` | number of drifted settings (`ibtune verify` exits 1 when it is above 0) |
//! | `ibexporter_tuning_items` | gauge | `profile`, `status` | settings by status: `ok`, `change` (drifted), `blocked` (cannot be applied on this host, e.g. tuned not installed), `advice` (optional boot parameter missing) |
//! | `ibexporter_tuning_irq_placed` | gauge | `profile`, `device`, `irq` | per HCA IRQ the profile places: 1 when its `smp_affinity_list` is the profile's CPUs, else 0 |
//! | `ibexporter_tuning_dma_latency_holder_up` | gauge | `profile` | only for profiles with `[dma_latency]`: 1 when the holder `ibtune apply` started (pidfile `<state_dir>/hold.pid`) is a running `ibtune hold` process. A holder run by `ibtune-hold@.service` has no pidfile there and shows 0; `cpu_dma_latency_seconds` shows the effect of either |
//! | `ibexporter_tuning_cpu_dma_latency_seconds` | gauge | | the effective CPU wake-up latency limit (PM QoS), in seconds; 2000 means no limit. Only when readable (root) |
//! | `ibexporter_tuning_verify_timestamp_seconds` | gauge | `profile` | Unix time the values above were taken (they are cached for `min_interval`) |
//! | `ibexporter_tuning_verify_duration_seconds` | gauge | `profile` | how long that verification took |
//!
//! # What reading `/dev/cpu_dma_latency` does
//!
//! There is no sysfs file with the global CPU latency limit
//! (`.../cpuN/power/pm_qos_resume_latency_us` is a different, per-device
//! constraint), so ibtune's discovery opens `/dev/cpu_dma_latency`
//! read-only, reads 4 bytes and closes it, as `ibtune verify` does. Opening
//! the device does add a PM QoS request, but at `PM_QOS_DEFAULT_VALUE`, which
//! the kernel stores as the "no constraint" default; the effective limit is
//! the minimum over all requests, so this request can neither lower nor
//! raise it, and it is removed at close. The value read is the effective
//! limit (from any holder: `ibtune hold`, tuned's `force_latency`, an
//! application). This collector adds no open of its own: it exports the
//! value ibtune's discovery read. Without root the open fails and the gauge
//! is left out.

use ibtune::host::{discover, HostRoot};
use ibtune::profile::{resolve, Profile};
use ibtune::tune::hold::holder_alive;
use ibtune::tune::item::Status;
use ibtune::tune::plan::Plan;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Unit;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Default minimum time between two verifications.
///
/// Why it exists: verify reads a few hundred files (ms); scrapes may come
/// from several Prometheus servers at once.
pub const DEFAULT_MIN_INTERVAL: Duration = Duration::from_secs(10);

/// What to watch, and how often to look.
///
/// Why it exists: the exporter's options for this collector, in one value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TuningConfig {
    /// Profile file, or a name ibtune finds in `./profiles` or
    /// `/etc/ibtune/profiles` (as for `ibtune verify`).
    pub profile: PathBuf,
    /// Host root: `/`, or a snapshot directory.
    pub root: PathBuf,
    /// ibtune's state directory (for the holder's pidfile); `None`:
    /// ibtune's own default for `root` (one folder per root, so a
    /// snapshot is never checked against this machine's holder).
    pub state_dir: Option<PathBuf>,
    /// Scrapes within this time of the last verification reuse its result.
    pub min_interval: Duration,
}

impl TuningConfig {
    /// The collector's configuration for the config file's `[tuning]`
    /// settings, or `None` when no profile is set (nothing to watch).
    pub fn from_settings(t: &crate::config::TuningSettings) -> Option<TuningConfig> {
        let mut c = TuningConfig::new(t.profile.clone()?);
        c.root = t.root.clone();
        c.state_dir = t.state_dir.clone();
        c.min_interval = t.min_interval;
        Some(c)
    }

    /// Watches `profile` on this machine with ibtune's defaults.
    pub fn new(profile: impl Into<PathBuf>) -> Self {
        TuningConfig {
            profile: profile.into(),
            root: PathBuf::from("/"),
            state_dir: None,
            min_interval: DEFAULT_MIN_INTERVAL,
        }
    }
}

/// One setting of the profile as observed on the host.
///
/// Why it exists: the row behind one `ibexporter_tuning_drift` sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemState {
    /// ibtune's stable item key (`irq/41/affinity`).
    pub key: String,
    /// The key's first segment (`irq`).
    pub kind: String,
    /// What it is, for people (`IRQ 41 (mlx5_comp0@pci:...) smp_affinity_list`).
    pub what: String,
    /// ibtune's verdict.
    pub status: Status,
    /// Current value, for display.
    pub current: String,
    /// Wanted value, for display.
    pub wanted: String,
}

impl ItemState {
    /// True when `ibtune verify` counts this item as drift.
    pub fn drifted(&self) -> bool {
        self.status == Status::Change
    }
}

/// Whether one HCA IRQ sits where the profile wants it.
///
/// Why it exists: the row behind one `ibexporter_tuning_irq_placed` sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IrqPlacement {
    /// RDMA device the IRQ belongs to.
    pub device: String,
    /// IRQ number.
    pub irq: u32,
    /// True when its `smp_affinity_list` matches the profile.
    pub placed: bool,
}

/// The result of one verification.
///
/// Why it exists: plain data from [`verify`], testable apart from encoding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TuningReport {
    /// Profile name (from the file).
    pub profile: String,
    /// Every setting, in apply order.
    pub items: Vec<ItemState>,
    /// HCA IRQs the profile places, in profile order.
    pub irqs: Vec<IrqPlacement>,
    /// Effective `/dev/cpu_dma_latency` limit in µs, when it was readable.
    pub cpu_dma_latency_us: Option<i64>,
    /// For profiles with `[dma_latency]`: whether the holder started by
    /// `ibtune apply` is running. `None` when the profile holds nothing.
    pub holder_alive: Option<bool>,
}

impl TuningReport {
    /// The drifted items.
    pub fn drifted(&self) -> impl Iterator<Item = &ItemState> {
        self.items.iter().filter(|i| i.drifted())
    }
}

/// Verifies the host under `root` against `profile`, as `ibtune verify`
/// does, reading only (nothing on the host is changed).
///
/// Why it exists: the pure half of [`TuningCollector`]. Fails when the
/// root is not a host, or the profile cannot be read or resolved there.
pub fn verify(
    root: &Path,
    profile: &Path,
    state_dir: Option<&Path>,
) -> anyhow::Result<TuningReport> {
    let root = HostRoot::new(root)?;
    let state_dir = match state_dir {
        Some(d) => d.to_path_buf(),
        None => ibtune::tune::journal::default_state_dir(&root),
    };
    let host = discover(&root)?;
    let p = Profile::load(profile)?;
    let r = resolve(&p, &host, &root)?;
    let plan = Plan::observe(&r, &host, &root);

    let items: Vec<ItemState> = plan
        .items
        .iter()
        .map(|i| ItemState {
            key: i.item.key.clone(),
            kind: i.item.key.split('/').next().unwrap_or_default().to_string(),
            what: i.item.what.clone(),
            status: i.observed.status,
            current: i.observed.current.clone(),
            wanted: i.observed.wanted.clone(),
        })
        .collect();
    let mut irqs: Vec<IrqPlacement> = Vec::new();
    for ri in &r.irqs {
        for (n, _) in &ri.assignments {
            if irqs.iter().any(|p| p.irq == *n) {
                continue;
            }
            let key = format!("irq/{n}/affinity");
            let placed = items
                .iter()
                .find(|i| i.key == key)
                .is_some_and(|i| i.status == Status::Ok);
            irqs.push(IrqPlacement {
                device: ri.device.clone(),
                irq: *n,
                placed,
            });
        }
    }
    Ok(TuningReport {
        profile: r.name.clone(),
        items,
        irqs,
        cpu_dma_latency_us: host.cpu_dma_latency_us,
        holder_alive: r
            .dma_latency_us
            .map(|_| holder_alive(&state_dir.join("hold.pid"))),
    })
}

/// One cached verification.
///
/// Why it exists: what scrapes within `min_interval` share.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The `profile` label: the profile's name, or while it cannot be read,
    /// the last name seen (else the file stem).
    pub profile: String,
    /// When it was taken (monotonic, for the cache).
    pub taken: Instant,
    /// When it was taken (wall clock, for the timestamp gauge).
    pub taken_unix: Duration,
    /// How long verification took.
    pub duration: Duration,
    /// The report, or why verification failed.
    pub result: Result<TuningReport, String>,
}

/// The Prometheus collector for tuning drift (see the module docs for the
/// families).
///
/// Why it exists: runs [`verify`] when Prometheus scrapes, at most once per
/// `min_interval`: concurrent scrapes wait for the one verification in
/// flight and share its result.
#[derive(Debug)]
pub struct TuningCollector {
    cfg: TuningConfig,
    cache: Mutex<Option<Arc<Snapshot>>>,
}

impl TuningCollector {
    /// A collector for `cfg`; verifies nothing until the first scrape.
    pub fn new(cfg: TuningConfig) -> Self {
        TuningCollector {
            cfg,
            cache: Mutex::new(None),
        }
    }

    /// The configuration it runs with.
    pub fn config(&self) -> &TuningConfig {
        &self.cfg
    }

    /// The current verification: the cached one if younger than
    /// `min_interval`, else a fresh one.
    ///
    /// Why it exists: [`Collector::encode`] and tests share it. A failure
    /// is logged when its reason first appears (not at every scrape), and
    /// the recovery once.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = cache.as_ref() {
            if s.taken.elapsed() < self.cfg.min_interval {
                return Arc::clone(s);
            }
        }
        let start = Instant::now();
        let result = verify(
            &self.cfg.root,
            &self.cfg.profile,
            self.cfg.state_dir.as_deref(),
        )
        .map_err(|e| format!("{e:#}"));
        let duration = start.elapsed();
        let previous = cache.as_ref();
        let profile = match &result {
            Ok(r) => r.profile.clone(),
            Err(_) => previous.map(|s| s.profile.clone()).unwrap_or_else(|| {
                self.cfg
                    .profile
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default()
            }),
        };
        let previous_error = previous.and_then(|s| s.result.as_ref().err());
        match (&result, previous_error) {
            (Err(e), Some(prev)) if e == prev => {}
            (Err(e), _) => tracing::warn!(
                "tuning drift: cannot verify profile {} on root {}: {e}; \
                 ibexporter_tuning_verify_ran is 0 until it verifies again (fix the profile \
                 or the path; `ibtune --root {} verify {}` shows the same error); logged once",
                self.cfg.profile.display(),
                self.cfg.root.display(),
                self.cfg.root.display(),
                self.cfg.profile.display(),
            ),
            (Ok(_), Some(_)) => tracing::info!(
                "tuning drift: profile {} verifies again",
                self.cfg.profile.display()
            ),
            (Ok(_), None) => {}
        }
        let snap = Arc::new(Snapshot {
            profile,
            taken: Instant::now(),
            taken_unix: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default(),
            duration,
            result,
        });
        *cache = Some(Arc::clone(&snap));
        snap
    }
}

use super::encode::{gauges, Labels};

impl Collector for TuningCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let snap = self.snapshot();
        let prof = || vec![("profile", snap.profile.clone())];
        let one = |v: i64| vec![(prof(), v)];

        gauges(
            &mut enc,
            "ibexporter_tuning_verify_ran",
            "1 when the host could be checked against the ibtune profile, 0 when the check could not run (reason in the log); not whether it matches (that is the drifted_items gauge)",
            None,
            &one(i64::from(snap.result.is_ok())),
        )?;
        gauges(
            &mut enc,
            "ibexporter_tuning_verify_timestamp",
            "Unix time of the verification these values come from (cached for the minimum interval)",
            Some(&Unit::Seconds),
            &[(prof(), snap.taken_unix.as_secs_f64())],
        )?;
        gauges(
            &mut enc,
            "ibexporter_tuning_verify_duration",
            "How long that verification took",
            Some(&Unit::Seconds),
            &[(prof(), snap.duration.as_secs_f64())],
        )?;
        let report = match &snap.result {
            Ok(r) => r,
            Err(_) => return Ok(()),
        };

        let drift: Vec<(Labels, i64)> = report
            .items
            .iter()
            .map(|i| {
                let mut l = prof();
                l.push(("item", i.key.clone()));
                l.push(("kind", i.kind.clone()));
                (l, i64::from(i.drifted()))
            })
            .collect();
        gauges(
            &mut enc,
            "ibexporter_tuning_drift",
            "1 when this setting of the profile differs from the host (ibtune verify drift), else 0",
            None,
            &drift,
        )?;
        gauges(
            &mut enc,
            "ibexporter_tuning_drifted_items",
            "Number of settings of the profile that differ from the host",
            None,
            &one(report.drifted().count() as i64),
        )?;
        let by_status: Vec<(Labels, i64)> = [
            (Status::Ok, "ok"),
            (Status::Change, "change"),
            (Status::Blocked, "blocked"),
            (Status::Advice, "advice"),
        ]
        .iter()
        .map(|(st, name)| {
            let mut l = prof();
            l.push(("status", name.to_string()));
            let n = report.items.iter().filter(|i| i.status == *st).count();
            (l, n as i64)
        })
        .collect();
        gauges(
            &mut enc,
            "ibexporter_tuning_items",
            "Settings of the profile by status: ok, change (drifted), blocked (cannot be applied here), advice (optional boot parameter)",
            None,
            &by_status,
        )?;
        let irqs: Vec<(Labels, i64)> = report
            .irqs
            .iter()
            .map(|p| {
                let mut l = prof();
                l.push(("device", p.device.clone()));
                l.push(("irq", p.irq.to_string()));
                (l, i64::from(p.placed))
            })
            .collect();
        gauges(
            &mut enc,
            "ibexporter_tuning_irq_placed",
            "1 when this HCA IRQ's smp_affinity_list is the profile's CPUs, else 0",
            None,
            &irqs,
        )?;
        if let Some(alive) = report.holder_alive {
            gauges(
                &mut enc,
                "ibexporter_tuning_dma_latency_holder_up",
                "1 when the cpu_dma_latency holder started by ibtune apply (pidfile <state_dir>/hold.pid) is running",
                None,
                &one(i64::from(alive)),
            )?;
        }
        if let Some(us) = report.cpu_dma_latency_us {
            gauges(
                &mut enc,
                "ibexporter_tuning_cpu_dma_latency",
                "Effective CPU wake-up latency limit from /dev/cpu_dma_latency (PM QoS); 2000 s means no limit",
                Some(&Unit::Seconds),
                &[(Vec::new(), us as f64 / 1e6)],
            )?;
        }
        Ok(())
    }
}
