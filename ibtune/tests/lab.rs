//! ibtune against a real RDMA stack and a real cgroup v2 kernel: the
//! Soft-RoCE lab guest (tests/lab). `ibtune show` must find rxe0 with its
//! netdev, port and GIDs; a profile with an isolated cpuset must become a
//! real cgroup v2 partition, verify clean, run a command inside it, report
//! drift, and revert to exactly what was there.
//!
//! Runs with `--include-ignored` (scripts/test-all does); see
//! `ibtools_tests::lab::harness`.

use ibtools_tests::lab::harness::{self, Group};
use ibtools_tests::lab::{Lab, LabConfig, Node};
use std::process::ExitCode;

const IBTUNE: &str = env!("CARGO_BIN_EXE_ibtune");
const STATE: &str = "--state-dir /run/ibtune";
const CG: &str = "/sys/fs/cgroup/ibtune-rt";

/// A profile for the 2-vCPU guest: CPU 1 as an isolated partition.
const PROFILE: &str = r#"[profile]
name = "lab-partition"
description = "lab: CPU 1 as an isolated cgroup v2 partition"

[[cpuset]]
name = "rt"
cpus = "1"
mems = "0"
exclusive = true
isolated = true

[numa]
policy = "bind"
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
}
