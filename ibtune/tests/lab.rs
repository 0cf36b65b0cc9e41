//! ibtune against a real RDMA stack and a real cgroup v2 kernel: the
//! Soft-RoCE lab guest (tests/lab). `ibtune show` must find rxe0 with its
//! netdev, port and GIDs; a profile with an isolated cpuset must become a
//! real cgroup v2 partition, verify clean, run a command inside it, report
//! drift, and revert to exactly what was there.
//!
//! The same guest runs the recipe `docs/recipes/tune-before-runs.md` from
//! its own text (`ibtools_tests::recipe`): show, plan, apply and verify,
//! run, revert, and the boot unit's start and stop, through a printed
//! mapping (the lab's profile for `busy-poll-1hca`, `rxe0` for `mlx5_0`,
//! the unit's commands for `systemctl`).
//!
//! Runs with `--include-ignored` (scripts/test-all does); see
//! `ibtools_tests::lab::harness`.

use ibtools_tests::lab::harness::{self, Group};
use ibtools_tests::lab::{Lab, LabConfig, Node};
use ibtools_tests::recipe::{self, Mapping};
use std::process::ExitCode;
use std::time::Duration;

const IBTUNE: &str = env!("CARGO_BIN_EXE_ibtune");
const STATE: &str = "--state-dir /run/ibtune";
const CG: &str = "/sys/fs/cgroup/ibtune-rt";

/// The cpuset both lab profiles make: CPU 1 of the 2-vCPU guest as an
/// isolated partition named `rt` (a macro, so `concat!` can take it).
macro_rules! rt_cpuset {
    () => {
        r#"
[[cpuset]]
name = "rt"
cpus = "1"
mems = "0"
exclusive = true
isolated = true
"#
    };
}

/// A profile for the 2-vCPU guest: CPU 1 as an isolated partition.
const PROFILE: &str = concat!(
    r#"[profile]
name = "lab-partition"
description = "lab: CPU 1 as an isolated cgroup v2 partition"
"#,
    rt_cpuset!(),
    r#"
[numa]
policy = "bind"
"#
);

/// The experiment's profile: the three knobs a 2-vCPU guest with rxe0 can
/// have. rxe is software and has no IRQs (ibtune refuses an `[[irq]]` for
/// it, saying so), so IRQ affinity cannot be part of it here.
const EXPERIMENT_PROFILE: &str = concat!(
    r#"[profile]
name = "lab-rt"
description = "lab: CPU 1 an isolated partition, cpu_dma_latency held at 0, vmstat timer slowed"
"#,
    rt_cpuset!(),
    r#"
[sysctl]
"vm.stat_interval" = 120

[dma_latency]
us = 0
"#
);

/// The measurement: the application joins the real-time cpuset when the
/// profile made it (as a real one would), then probes rxe0.
const EXPERIMENT_PROBE: &str = r#"#!/bin/sh
if [ -d /sys/fs/cgroup/ibtune-rt ]; then echo $$ > /sys/fs/cgroup/ibtune-rt/cgroup.procs; fi
exec "$IBPROBE" loopback -t rc --dev rxe0 --size 32 --count 1000 --json
"#;

fn main() -> ExitCode {
    harness::run(vec![guest()])
}

/// Puts the profile where the guest sees it and returns its guest path.
fn profile(lab: &Lab) -> &'static str {
    std::fs::write(lab.results(Node::A).join("lab-partition.toml"), PROFILE).unwrap();
    "/run/lab/results/lab-partition.toml"
}

/// The root cgroup's files that apply changes and revert must restore.
fn root_cgroup_state(lab: &Lab) -> String {
    lab.sh("cd /sys/fs/cgroup && for f in cgroup.subtree_control cpuset.cpus.effective cpuset.mems.effective; do echo \"$f=$(cat $f)\"; done; ls -d */ 2>/dev/null || true")
        .success()
        .stdout
}

/// The mapping of the tune-before-runs recipe onto the guest: the boot
/// unit's commands (from the unit file) for `systemctl`, the lab's
/// profile for the shipped one, rxe0 for the HCA.
fn tune_recipe_mapping(guest_profile: &str) -> Mapping {
    Mapping::new()
        .unit(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("systemd/ibtune-profile@.service"),
            "ibtune",
            "busy-poll-1hca",
            "systemctl enable --now ibtune-profile@busy-poll-1hca",
            "systemctl disable --now ibtune-profile@busy-poll-1hca",
        )
        .row(
            "busy-poll-1hca",
            guest_profile,
            "the lab's profile: the 2-vCPU guest's CPU 1 as the isolated cpuset `rt`, memory \
             bound; busy-poll-1hca's IRQ pinning, tuned, C-states and boot line do not apply \
             to rxe0 (software, no IRQs) in a guest without tuned",
        )
        .row("mlx5_0", "rxe0", "the HCA is the lab's Soft-RoCE device")
        .note(
            "ibtune, ibprobe installed",
            &format!(
                "{} and {} first on PATH; ibtune keeps its journal in /run/ibtune \
                 (`--state-dir`, a shell function)",
                IBTUNE,
                ibtools_tests::workspace_bin("ibprobe").display()
            ),
            "the binaries under test; the guest's /var/lib is the host's, read-only",
        )
}

/// Runs `docs/recipes/tune-before-runs.md` in the guest, block by block,
/// checking the kernel's view after each step.
fn tune_recipe(lab: &Lab) {
    let name = "tune-before-runs";
    let text = recipe::text(name);
    let blocks = recipe::blocks(&text);
    assert_eq!(
        blocks.len(),
        7,
        "{name}: show, plan, apply+verify, run, revert, enable+verify, disable; \
         its blocks changed: update this test"
    );
    let map = tune_recipe_mapping(profile(lab));
    eprintln!("{}", map.table(name));
    let texts: Vec<&str> = blocks.iter().map(|b| b.code.as_str()).collect();
    map.assert_each_row_used(name, &texts);
    let bin_dir = |p: &std::path::Path| p.parent().expect("a bin dir").display().to_string();
    let prelude = format!(
        "export PATH={}:{}:$PATH\nibtune() {{ command ibtune {STATE} \"$@\"; }}\n",
        bin_dir(std::path::Path::new(IBTUNE)),
        bin_dir(&ibtools_tests::workspace_bin("ibprobe"))
    );
    let run = |i: usize| {
        let o = lab.sh(&format!("{prelude}{}", map.script(&blocks[i])));
        eprintln!("-- line {}:\n{}{}", blocks[i].line, o.stdout, o.stderr);
        o.success()
    };
    let partition = || {
        lab.sh(&format!(
            "cat {CG}/cpuset.cpus.partition 2>/dev/null || echo none"
        ))
        .success()
        .stdout
    };

    let before = root_cgroup_state(lab);
    assert!(
        !before.contains("ibtune-rt/"),
        "left over from an earlier run: {before}"
    );
    let show = run(0);
    assert!(show.stdout.contains("rxe0"), "{show}");
    let plan = run(1);
    assert!(plan.stdout.contains("cpuset.cpus.partition"), "{plan}");
    assert_eq!(root_cgroup_state(lab), before, "plan changed the host");
    run(2); // apply, then verify: `set -e` fails the block unless verify exits 0
    assert_eq!(partition(), "isolated\n");
    let probe = run(3);
    assert!(
        probe.stdout.contains("latency [us]") && probe.stdout.contains("10000    "),
        "no latency table of 10000 probes: {probe}"
    );
    run(4);
    assert_eq!(partition(), "none\n", "revert left {CG}");
    assert_eq!(
        root_cgroup_state(lab),
        before,
        "revert did not restore the root cgroup"
    );
    run(5); // the unit's start (apply), then verify
    assert_eq!(partition(), "isolated\n");
    run(6);
    assert_eq!(partition(), "none\n", "the unit's stop left {CG}");
    assert_eq!(
        root_cgroup_state(lab),
        before,
        "the unit's stop did not restore the root cgroup"
    );

    // The unit as systemd reads it, with the recipe's instance and the
    // man pages it names (generated: this tool is not installed).
    let unit =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("systemd/ibtune-profile@.service");
    let man = tempfile::tempdir().unwrap();
    ibtools_tests::run_ok(
        "ibtune --generate-docs",
        std::process::Command::new(IBTUNE)
            .arg("--generate-docs")
            .arg(man.path()),
    );
    ibtools_tests::systemd::verify_unit_with_man(
        &unit,
        &[("ibtune", std::path::Path::new(IBTUNE))],
        "busy-poll-1hca",
        man.path(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

fn guest() -> Group {
    Group::with_lab("guest_v2", LabConfig::loopback())
        .test("show_json_finds_rxe0_with_netdev_ports_and_gids", |lab| {
            let o = lab.sh(&format!("{IBTUNE} show --json")).success();
            let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("{e}: {o}"));
            let host = &v["host"];
            assert_eq!(host["cgroup"]["mode"], "v2", "{o}");
            let devs = host["rdma_devices"].as_array().unwrap();
            let rxe = devs.iter().find(|d| d["name"] == "rxe0").unwrap_or_else(|| panic!("no rxe0: {o}"));
            assert_eq!(rxe["netdevs"], serde_json::json!(["dummy0"]));
            assert!(rxe["pci_addr"].is_null(), "rxe0 has no PCI function");
            let port = &rxe["ports"][0];
            assert_eq!(port["port"], 1);
            assert_eq!(port["state"], "4: ACTIVE");
            assert_eq!(port["link_layer"], "Ethernet");
            assert_eq!(port["netdev"], "dummy0");
            let gids = port["gids"].as_array().unwrap();
            let v4 = gids.iter().find(|g| g["index"] == 1).unwrap_or_else(|| panic!("no GID 1: {o}"));
            assert_eq!(v4["gid"], "0000:0000:0000:0000:0000:ffff:0a4d:0001"); // 10.77.0.1
            assert_eq!(v4["gid_type"], "RoCE v2");
            assert_eq!(v4["netdev"], "dummy0");
            // The text view says the same.
            let t = lab.sh(&format!("{IBTUNE} show")).success();
            assert!(t.stdout.contains("RDMA rxe0: software RoCE (rxe)"), "{t}");
            assert!(t.stdout.contains("netdev dummy0"), "{t}");
        })
        .test("plan_shows_a_v2_isolated_partition", |lab| {
            let p = profile(lab);
            let o = lab.sh(&format!("{IBTUNE} plan {p}")).success();
            assert!(o.stdout.contains("cgroup v2"), "{o}");
            assert!(o.stdout.contains("cpuset.cpus.partition"), "{o}");
            assert!(o.stdout.contains("isolated"), "{o}");
        })
        .test("partition_apply_verify_run_drift_revert", |lab| {
            let p = profile(lab);
            let before = root_cgroup_state(lab);
            assert!(!before.contains("ibtune-rt/"), "left over from an earlier run: {before}");

            let apply = lab.sh(&format!("{IBTUNE} {STATE} apply {p}"));
            assert_eq!(apply.status, 0, "{apply}");
            // The kernel's own view of the partition.
            let cg = lab
                .sh(&format!("cd {CG} && cat cpuset.cpus.partition cpuset.cpus.effective cpuset.mems.effective"))
                .success();
            assert_eq!(cg.stdout, "isolated\n1\n0\n", "{cg}");
            let subtree = lab.sh("cat /sys/fs/cgroup/cgroup.subtree_control").success();
            assert!(subtree.stdout.split_whitespace().any(|c| c == "cpuset"), "{subtree}");

            let verify = lab.sh(&format!("{IBTUNE} {STATE} verify {p}"));
            assert_eq!(verify.status, 0, "verify after apply: {verify}");
            let again = lab.sh(&format!("{IBTUNE} {STATE} apply {p}"));
            assert_eq!(again.status, 0, "second apply must be a no-op: {again}");

            // A command run in the cpuset lands in the cgroup, on CPU 1 only.
            let run = lab
                .sh(&format!(
                    "{IBTUNE} {STATE} run {p} --cpuset rt -- sh -c 'cat /proc/self/cgroup; grep -E \"^(Cpus|Mems)_allowed_list\" /proc/self/status'"
                ))
                .success();
            assert!(run.stdout.contains("0::/ibtune-rt\n"), "{run}");
            assert!(run.stdout.contains("Cpus_allowed_list:\t1\n"), "{run}");
            assert!(run.stdout.contains("Mems_allowed_list:\t0\n"), "{run}");

            // Drift: someone turns the partition back into a member.
            lab.sh(&format!("echo member > {CG}/cpuset.cpus.partition")).success();
            let drift = lab.sh(&format!("{IBTUNE} {STATE} verify {p}"));
            assert_eq!(drift.status, 1, "verify must report drift: {drift}");
            assert!(drift.stdout.contains("cpuset.cpus.partition"), "{drift}");

            let revert = lab.sh(&format!("{IBTUNE} {STATE} revert"));
            assert_eq!(revert.status, 0, "{revert}");
            let gone = lab.sh(&format!("test -e {CG}")).status;
            assert_ne!(gone, 0, "{CG} still exists after revert");
            assert_eq!(root_cgroup_state(lab), before, "root cgroup not restored");
            let twice = lab.sh(&format!("{IBTUNE} {STATE} revert"));
            assert_eq!(twice.status, 0, "second revert is a no-op: {twice}");
        })
        .test("experiment_each_knob_on_rxe0_under_noise_leaves_the_guest_as_found", |lab| {
            let dir = lab.results(Node::A);
            std::fs::write(dir.join("lab-rt.toml"), EXPERIMENT_PROFILE).unwrap();
            std::fs::write(dir.join("probe-in-rt.sh"), EXPERIMENT_PROBE).unwrap();
            let ibprobe = ibtools_tests::workspace_bin("ibprobe");
            let before = lab
                .sh("cat /sys/fs/cgroup/cgroup.subtree_control; ls /sys/fs/cgroup; sysctl -n vm.stat_interval")
                .success()
                .stdout;
            // Noise on the other CPU for the whole experiment; 10 blocks of
            // 8 variants, so Holm over 7 variants can reach 5%. About 60 s
            // on a quiet host; on 2026-11-26 this VM ran slow all day and
            // the 120 s of `Lab::sh` cut it (exit 124), so it has 600 s.
            let o = lab
                .exec(Node::A, &format!(
                "taskset -c 0 sh -c 'while :; do :; done' & noise=$!; \
                 IBPROBE={} {IBTUNE} --state-dir /run/ibtune-exp experiment /run/lab/results/lab-rt.toml \
                   --rounds 10 --each-knob --seed 16 --json -- sh /run/lab/results/probe-in-rt.sh \
                   > /run/lab/results/experiment.json; rc=$?; kill $noise; exit $rc",
                ibprobe.display()
            ), Duration::from_secs(600))
                // As `Lab::sh`: a lab failure is reported as the lab's, not the code's.
                .unwrap_or_else(|e| std::panic::panic_any(e));
            assert_eq!(o.status, 0, "{o}");
            let text = std::fs::read_to_string(dir.join("experiment.json")).unwrap();
            let j: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
            assert_eq!(j["schema"], "ibtune.experiment/1");
            assert_eq!(j["host_as_found"], true, "{text}");
            let vs = j["variants"].as_array().unwrap();
            assert_eq!(vs.len(), 8, "{text}");
            for v in vs {
                assert_eq!(v["rounds_ok"], 10, "{v}");
            }
            for k in ["cpusets", "sysctl", "dma_latency"] {
                let e = &j["attribution"][k]["p99"];
                assert!(e["alone"]["ratio"].as_f64().is_some(), "{k}: {e}");
                assert!(e["in_profile"]["ratio"].as_f64().is_some(), "{k}: {e}");
            }
            // As found: the cgroup tree, the sysctl, and no holder left.
            let after = lab
                .sh("cat /sys/fs/cgroup/cgroup.subtree_control; ls /sys/fs/cgroup; sysctl -n vm.stat_interval")
                .success()
                .stdout;
            assert_eq!(before, after, "guest not as found");
            let holders = lab.sh("pgrep -af '[i]btune.* hold --us' || true").success().stdout;
            assert!(holders.trim().is_empty(), "a cpu_dma_latency holder is left: {holders}");
            let journal = lab.sh("test -e /run/ibtune-exp/journal.jsonl").status;
            assert_ne!(journal, 0, "an open journal is left");
            // The figures, for the notes.
            eprintln!(
                "experiment on rxe0: p99 per variant: {}",
                vs.iter()
                    .map(|v| format!(
                        "{}={:.1}us(x{:.2} [{:.2}, {:.2}] {})",
                        v["value"].as_str().unwrap_or("?"),
                        v["p99"].as_f64().unwrap_or(f64::NAN) / 1000.0,
                        v["effects"]["p99"]["ratio"].as_f64().unwrap_or(1.0),
                        v["effects"]["p99"]["ci"][0].as_f64().unwrap_or(f64::NAN),
                        v["effects"]["p99"]["ci"][1].as_f64().unwrap_or(f64::NAN),
                        v["effects"]["p99"]["verdict"].as_str().unwrap_or("baseline")
                    ))
                    .collect::<Vec<_>>()
                    .join(" ")
            );
        })
        .test("suggest_for_rxe0_plans_clean_applies_verifies_and_reverts", |lab| {
            // A host no fixture describes: the guest's real kernel, cgroup
            // v2, sysctls and THP, and rxe0 (no IRQs, no NUMA node).
            let toml = "/run/lab/results/suggested.toml";
            let o = lab.sh(&format!("{IBTUNE} suggest --hca rxe0 > {toml}"));
            assert_eq!(o.status, 0, "{o}");
            assert!(o.stderr.is_empty(), "suggest warned: {o}");
            // CPU 0's core stays housekeeping; the other vCPU is isolated.
            let t = lab.sh(&format!("grep -A1 'whole core' {toml}")).success();
            assert!(t.stdout.contains("cpus = \"1\""), "{t}");
            let before = lab
                .sh("cat /sys/fs/cgroup/cgroup.subtree_control; ls /sys/fs/cgroup; sysctl -n kernel.sched_rt_runtime_us kernel.timer_migration vm.stat_interval; cat /sys/kernel/mm/transparent_hugepage/enabled")
                .success()
                .stdout;
            for step in [format!("plan {toml}"), format!("apply {toml}"), format!("verify {toml}"), "revert".to_string()] {
                let o = lab.sh(&format!("{IBTUNE} {STATE} {step}"));
                assert_eq!(o.status, 0, "{step}: {o}");
                assert!(o.stderr.is_empty(), "{step} warned: {o}");
                if step.starts_with("apply") {
                    assert!(o.stdout.contains("applied profile suggested: "), "{o}");
                }
            }
            let after = lab
                .sh("cat /sys/fs/cgroup/cgroup.subtree_control; ls /sys/fs/cgroup; sysctl -n kernel.sched_rt_runtime_us kernel.timer_migration vm.stat_interval; cat /sys/kernel/mm/transparent_hugepage/enabled")
                .success()
                .stdout;
            assert_eq!(before, after, "guest not as found");
        })
        // Last: it applies and reverts the same cpuset as the tests above.
        .test("recipe_tune_before_runs_from_its_text", tune_recipe)
}
