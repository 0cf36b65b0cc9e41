//! The tuning-drift collector on copies of fixture hosts, with profiles
//! applied by ibtune's own engine, through a prometheus-client registry.
//!
//! The promises under test:
//! - before apply every setting the profile changes is reported as drift;
//! - after apply nothing drifts and every HCA IRQ is placed;
//! - perturbing one setting makes exactly that item drift;
//! - results are cached for `min_interval`, and concurrent scrapes share one
//!   verification;
//! - a profile that cannot be verified gives `verify_ran 0`, logged once.

mod common;

use common::{assert_sample, exact_sample, with_logs};
use ibexporter::collect::tuning::{verify, TuningCollector, TuningConfig};
use ibtools_tests::{fixture_copy, profile, FixtureCopy};
use ibtune::host::{discover, HostRoot};
use ibtune::profile::{resolve, Profile};
use ibtune::tune::engine::{apply, ApplyOptions};
use ibtune::tune::journal::Journal;
use ibtune::tune::plan::Plan;
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// A collector on `fc` for `profile_file`, verifying at every scrape.
fn collector(
    fc: &FixtureCopy,
    profile_file: &Path,
    min_interval: Duration,
) -> Arc<TuningCollector> {
    let mut cfg = TuningConfig::new(profile_file);
    cfg.root = fc.root.clone();
    cfg.state_dir = Some(fc.state.clone());
    cfg.min_interval = min_interval;
    Arc::new(TuningCollector::new(cfg))
}

fn scrape(c: &Arc<TuningCollector>) -> String {
    let mut reg = Registry::default();
    reg.register_collector(Box::new(Arc::clone(c)));
    let mut out = String::new();
    encode(&mut out, &reg).expect("encode");
    out
}

/// `item` labels of the `ibexporter_tuning_drift` samples with value `v`.
fn drift_items(text: &str, v: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with("ibexporter_tuning_drift{") && l.ends_with(&format!("}} {v}")))
        .map(|l| {
            let rest = &l[l.find("item=\"").expect("item label") + 6..];
            rest[..rest.find('"').unwrap()].to_string()
        })
        .collect()
}

/// (device, irq, value) of the `ibexporter_tuning_irq_placed` samples.
fn irq_placed(text: &str) -> Vec<(String, u32, String)> {
    let label = |l: &str, k: &str| {
        let rest = &l[l.find(&format!("{k}=\"")).unwrap() + k.len() + 2..];
        rest[..rest.find('"').unwrap()].to_string()
    };
    text.lines()
        .filter(|l| l.starts_with("ibexporter_tuning_irq_placed{"))
        .map(|l| {
            (
                label(l, "device"),
                label(l, "irq").parse().unwrap(),
                l.rsplit(' ').next().unwrap().to_string(),
            )
        })
        .collect()
}

/// Applies `profile_file` to the copy with ibtune's engine, as
/// `ibtune apply` does (journal in the copy's state dir).
fn apply_profile(fc: &FixtureCopy, profile_file: &Path) -> Vec<String> {
    let root = HostRoot::new(&fc.root).unwrap();
    let host = discover(&root).unwrap();
    let p = Profile::load(profile_file).unwrap();
    let r = resolve(&p, &host, &root).unwrap();
    let plan = Plan::observe(&r, &host, &root);
    let j = Journal::open(&fc.state).unwrap();
    // The profiles applied here hold no cpu_dma_latency, so the holder
    // executable is never started.
    let opts = ApplyOptions {
        exe: PathBuf::from("/nonexistent/ibtune"),
        fault: None,
    };
    apply(&plan, &root, &j, &opts).expect("apply").changed
}

#[test]
fn drift_before_apply_none_after_then_exactly_the_perturbed_item() {
    let fc = fixture_copy("thesis-2s-mlx5");
    let prof = profile("thesis-2hca");
    let c = collector(&fc, &prof, Duration::ZERO);

    // Before apply: drift everywhere the profile changes something.
    let before = scrape(&c);
    assert_sample(
        &before,
        r#"ibexporter_tuning_verify_ran{profile="thesis-2hca"}"#,
        "1",
    );
    let drifted = drift_items(&before, "1");
    for key in [
        "irqbalance/banned_cpulist",
        "cgroup/subtree_control/cpuset",
        "cpuset/real-time-0/partition",
        "cpuset/real-time-1/cpus",
        "irq/41/affinity",
        "irq/97/affinity",
        "tuned/active",
    ] {
        assert!(
            drifted.iter().any(|d| d == key),
            "{key} not drifted:\n{before}"
        );
    }
    assert_sample(
        &before,
        r#"ibexporter_tuning_drifted_items{profile="thesis-2hca"}"#,
        &drifted.len().to_string(),
    );
    // Optional boot parameters are advice, not drift.
    assert_sample(
        &before,
        r#"ibexporter_tuning_drift{profile="thesis-2hca",item="boot/isolcpus",kind="boot"}"#,
        "0",
    );
    assert_sample(
        &before,
        r#"ibexporter_tuning_items{profile="thesis-2hca",status="advice"}"#,
        "3",
    );
    assert_sample(
        &before,
        r#"ibexporter_tuning_drift{profile="thesis-2hca",item="irq/41/affinity",kind="irq"}"#,
        "1",
    );
    // Comp IRQs 41-47 (mlx5_0) and 91-97 (mlx5_1), none placed yet.
    let irqs = irq_placed(&before);
    let expect: Vec<(String, u32)> = (41..=47)
        .map(|n| ("mlx5_0".to_string(), n))
        .chain((91..=97).map(|n| ("mlx5_1".to_string(), n)))
        .collect();
    assert_eq!(
        irqs.iter()
            .map(|(d, n, _)| (d.clone(), *n))
            .collect::<Vec<_>>(),
        expect
    );
    assert!(irqs.iter().all(|(_, _, v)| v == "0"), "{irqs:?}");

    // The drift agrees with ibtune's own verify of the same tree.
    let report = verify(&fc.root, &prof, Some(&fc.state)).unwrap();
    assert_eq!(
        report.drifted().map(|i| i.key.clone()).collect::<Vec<_>>(),
        drifted
    );

    // After apply: nothing drifts, every IRQ is placed.
    let changed = apply_profile(&fc, &prof);
    assert_eq!(
        changed.len(),
        drifted.len(),
        "apply changed what was drifted"
    );
    let after = scrape(&c);
    assert_eq!(drift_items(&after, "1"), Vec::<String>::new(), "{after}");
    assert_sample(
        &after,
        r#"ibexporter_tuning_drifted_items{profile="thesis-2hca"}"#,
        "0",
    );
    assert_sample(
        &after,
        r#"ibexporter_tuning_items{profile="thesis-2hca",status="ok"}"#,
        &drifted.len().to_string(),
    );
    let irqs = irq_placed(&after);
    assert_eq!(irqs.len(), 14);
    assert!(irqs.iter().all(|(_, _, v)| v == "1"), "{irqs:?}");

    // Perturb one setting (irqbalance or a driver moved IRQ 43 back).
    let irq43 = fc.root.join("proc/irq/43/smp_affinity_list");
    let placed43 = fs::read_to_string(&irq43).unwrap();
    fs::write(&irq43, "0-23\n").unwrap();
    let perturbed = scrape(&c);
    assert_eq!(
        drift_items(&perturbed, "1"),
        ["irq/43/affinity"],
        "{perturbed}"
    );
    assert_sample(
        &perturbed,
        r#"ibexporter_tuning_drifted_items{profile="thesis-2hca"}"#,
        "1",
    );
    let unplaced: Vec<u32> = irq_placed(&perturbed)
        .into_iter()
        .filter(|(_, _, v)| v == "0")
        .map(|(_, n, _)| n)
        .collect();
    assert_eq!(unplaced, [43]);

    // Put it back and perturb a cpuset instead: only that item, with its kind.
    fs::write(&irq43, placed43).unwrap();
    let cpus = fc.root.join("sys/fs/cgroup/ibtune-real-time-1/cpuset.cpus");
    assert!(cpus.is_file(), "apply made the cpuset");
    fs::write(&cpus, "1\n").unwrap();
    let t = scrape(&c);
    let drifted_now = drift_items(&t, "1");
    assert_eq!(drifted_now, ["cpuset/real-time-1/cpus"], "{t}");
    assert_sample(
        &t,
        r#"ibexporter_tuning_drift{profile="thesis-2hca",item="cpuset/real-time-1/cpus",kind="cpuset"}"#,
        "1",
    );
}

#[test]
fn results_are_cached_and_shared_by_concurrent_scrapes() {
    let fc = fixture_copy("thesis-2s-mlx5");
    let prof = profile("thesis-2hca");
    apply_profile(&fc, &prof);
    let c = collector(&fc, &prof, Duration::from_secs(3600));
    let first = c.snapshot();
    // Within the interval, a changed host is not looked at again.
    fs::write(fc.root.join("proc/irq/43/smp_affinity_list"), "0-23\n").unwrap();
    let t = scrape(&c);
    assert_eq!(drift_items(&t, "1"), Vec::<String>::new());
    assert!(Arc::ptr_eq(&first, &c.snapshot()));

    // Many scrapes at once on a fresh collector: one verification.
    let c = collector(&fc, &prof, Duration::from_secs(3600));
    let snaps: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..32).map(|_| s.spawn(|| c.snapshot())).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(snaps.iter().all(|s| Arc::ptr_eq(s, &snaps[0])));
    assert_eq!(
        snaps[0]
            .result
            .as_ref()
            .unwrap()
            .drifted()
            .map(|i| i.key.as_str())
            .collect::<Vec<_>>(),
        ["irq/43/affinity"]
    );

    // With no interval, every scrape verifies again.
    let c = collector(&fc, &prof, Duration::ZERO);
    let a = c.snapshot();
    assert!(!Arc::ptr_eq(&a, &c.snapshot()));
}

#[test]
fn cpu_dma_latency_and_holder() {
    let fc = fixture_copy("thesis-2s-mlx5");
    let dir = tempfile::tempdir().unwrap();
    let prof = dir.path().join("hold-10.toml");
    fs::write(
        &prof,
        "[profile]\nname = \"hold-10\"\n\n[dma_latency]\nus = 10\n",
    )
    .unwrap();
    let c = collector(&fc, &prof, Duration::ZERO);

    // The fixture's device reads 2000000000 us: no limit, so the hold drifts.
    let t = scrape(&c);
    assert_sample(&t, "ibexporter_tuning_cpu_dma_latency_seconds", "2000.0");
    assert_sample(
        &t,
        r#"ibexporter_tuning_dma_latency_holder_up{profile="hold-10"}"#,
        "0",
    );
    assert_eq!(drift_items(&t, "1"), ["dma_latency/hold"]);

    // Someone holds 5 us (<= 10): no drift, the value is exported in seconds.
    fs::write(fc.root.join("dev/cpu_dma_latency"), "5\n").unwrap();
    let t = scrape(&c);
    let v: f64 = exact_sample(&t, "ibexporter_tuning_cpu_dma_latency_seconds")
        .unwrap()
        .parse()
        .unwrap();
    assert!((v - 5e-6).abs() < 1e-12, "{v}");
    assert_eq!(drift_items(&t, "1"), Vec::<String>::new());
    // ibtune apply's holder is still not running (its pidfile is absent).
    assert_sample(
        &t,
        r#"ibexporter_tuning_dma_latency_holder_up{profile="hold-10"}"#,
        "0",
    );

    // A profile without [dma_latency] has no holder gauge.
    let c = collector(&fc, &profile("thesis-2hca"), Duration::ZERO);
    assert!(!scrape(&c).contains("holder_up"));
}

#[test]
fn a_profile_that_cannot_be_verified_reports_verify_ran_0_and_logs_once() {
    let fc = fixture_copy("thesis-2s-mlx5");
    let dir = tempfile::tempdir().unwrap();
    let prof = dir.path().join("thesis-2hca.toml");
    fs::write(&prof, "[profile]\nname = \"thesis-2hca\"\nbogus = 1\n").unwrap();
    let c = collector(&fc, &prof, Duration::ZERO);

    let ((t1, t2, t3), log) = with_logs(|| {
        let t1 = scrape(&c);
        let t2 = scrape(&c);
        fs::copy(profile("thesis-2hca"), &prof).unwrap();
        (t1, t2, scrape(&c))
    });
    for t in [&t1, &t2] {
        assert_sample(
            t,
            r#"ibexporter_tuning_verify_ran{profile="thesis-2hca"}"#,
            "0",
        );
        assert!(!t.contains("ibexporter_tuning_drift"), "{t}");
        assert!(!t.contains("ibexporter_tuning_irq_placed"), "{t}");
        assert!(t.contains("ibexporter_tuning_verify_timestamp_seconds{profile=\"thesis-2hca\"}"));
    }
    assert_sample(
        &t3,
        r#"ibexporter_tuning_verify_ran{profile="thesis-2hca"}"#,
        "1",
    );
    assert!(t3.contains("ibexporter_tuning_drift{"), "{t3}");

    assert_eq!(log.matches("cannot verify profile").count(), 1, "{log}");
    assert!(
        log.contains("bogus"),
        "the reason names the bad key:\n{log}"
    );
    assert!(log.contains(&prof.display().to_string()), "{log}");
    assert!(log.contains("verifies again"), "{log}");

    // A root that is not a host at all.
    let empty = tempfile::tempdir().unwrap();
    let e = verify(empty.path(), &profile("thesis-2hca"), Some(empty.path())).unwrap_err();
    assert!(e.to_string().contains("is not a host root"), "{e}");
}
