//! ibtune against the live kernel of the machine running the tests.
//!
//! These change this host (a cgroup v1 cpuset, an IRQ's affinity, a sysctl,
//! a held /dev/cpu_dma_latency) and restore it, so they need root and are
//! `#[ignore]`d with the reason; `scripts/test-all` runs them with
//! `--include-ignored`. Each one checks its preconditions and FAILS with
//! the reason if they are missing: it never passes by skipping.

use ibtune::host::{discover, CgroupMode, CpuSet, HostRoot};
use ibtune::tune::engine::{apply, revert, ApplyOptions};
use ibtune::tune::item::{Action, Cmp, Item, Status};
use ibtune::tune::journal::Journal;
use ibtune::tune::plan::{Plan, PlannedItem, Summary};
use std::path::{Path, PathBuf};
use std::process::Command;

fn ibtune() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ibtune"))
}

fn require_root() {
    assert!(
        ibtools_tests::is_root(),
        "this test changes the live kernel and needs root: run it as root (scripts/test-all does)"
    );
}

fn run_ok(cmd: &mut Command) -> String {
    let what = format!("{cmd:?}");
    String::from_utf8_lossy(&ibtools_tests::run_ok(&what, cmd).stdout).into_owned()
}

/// Runs `ibtune revert` on drop, so a failing assertion leaves no cgroup,
/// sysctl or holder behind on the host.
struct RevertOnDrop(PathBuf);

impl Drop for RevertOnDrop {
    fn drop(&mut self) {
        let _ = ibtune()
            .arg("--state-dir")
            .arg(&self.0)
            .arg("revert")
            .output();
    }
}

fn dma_latency() -> i64 {
    ibtune::host::kernel::read_cpu_dma_latency(&HostRoot::live())
        .expect("/dev/cpu_dma_latency readable")
}

/// A profile on the live cpuset hierarchy (v1 here, v2 where the kernel
/// offers it): an exclusive, isolated cpuset on the last CPU, a sysctl and
/// a held cpu_dma_latency. Applied, verified, used by `ibtune run`, reverted.
#[test]
#[ignore = "needs root: creates a cpuset cgroup, sets vm.swappiness and holds /dev/cpu_dma_latency on this host"]
fn live_cpuset_sysctl_hold_apply_run_revert() {
    require_root();
    let root = HostRoot::live();
    let host = discover(&root).unwrap();
    assert_ne!(
        host.cgroup.mode,
        CgroupMode::None,
        "no cpuset cgroup controller mounted on this host"
    );
    let last = host.cpus.online.iter().next_back().unwrap();
    assert!(last > 0, "needs at least 2 CPUs");
    let tmp = tempfile::tempdir().unwrap();
    let name = format!("t{}", std::process::id());
    let swappiness_before = std::fs::read_to_string("/proc/sys/vm/swappiness").unwrap();
    let want_swappiness = if swappiness_before.trim() == "13" {
        14
    } else {
        13
    };
    let dma_before = dma_latency();
    let profile = tmp.path().join("live.toml");
    std::fs::write(
        &profile,
        format!(
            "[profile]\nname = \"{name}\"\n[[cpuset]]\nname = \"{name}\"\ncpus = [{last}]\nexclusive = true\nisolated = true\n[numa]\npolicy = \"bind\"\n[sysctl]\n\"vm.swappiness\" = {want_swappiness}\n[dma_latency]\nus = 3\n"
        ),
    )
    .unwrap();
    let state = tmp.path().join("state");
    // Whatever happens below, the host is put back.
    let _guard = RevertOnDrop(state.clone());
    let base = |c: &mut Command| {
        c.arg("--state-dir").arg(&state);
    };

    let mut c = ibtune();
    base(&mut c);
    let out = run_ok(c.arg("apply").arg(&profile));
    assert!(out.contains("applied profile"), "{out}");

    let mount = match host.cgroup.mode {
        CgroupMode::V2 => host.cgroup.v2_mount.clone().unwrap(),
        _ => host.cgroup.v1_cpuset_mount.clone().unwrap(),
    };
    let dir = PathBuf::from(&mount).join(format!("ibtune-{name}"));
    assert!(dir.is_dir(), "{} missing after apply", dir.display());
    let cpus_file = if dir.join("cpuset.cpus").exists() {
        "cpuset.cpus"
    } else {
        "cpus"
    };
    let cpus = std::fs::read_to_string(dir.join(cpus_file)).unwrap();
    assert_eq!(
        CpuSet::parse_list(&cpus).unwrap(),
        CpuSet::from_iter_u32([last])
    );
    assert_eq!(
        std::fs::read_to_string("/proc/sys/vm/swappiness")
            .unwrap()
            .trim(),
        want_swappiness.to_string()
    );
    assert_eq!(dma_latency(), 3, "cpu_dma_latency not held at 3 us");

    let mut c = ibtune();
    base(&mut c);
    run_ok(c.arg("verify").arg(&profile));

    // The command runs in the cpuset, on its CPU, with memory bound to its node.
    let mut c = ibtune();
    base(&mut c);
    let status = run_ok(c.arg("run").arg(&profile).args([
        "--cpuset",
        &name,
        "--",
        "sh",
        "-c",
        "cat /proc/self/status /proc/self/cgroup",
    ]));
    let allowed = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .expect("Cpus_allowed_list");
    assert_eq!(allowed.trim(), last.to_string(), "{status}");
    assert!(
        status.contains(&format!("ibtune-{name}")),
        "not in the cgroup:\n{status}"
    );

    // Drift: change the sysctl behind ibtune's back.
    std::fs::write("/proc/sys/vm/swappiness", swappiness_before.as_bytes()).unwrap();
    let mut c = ibtune();
    base(&mut c);
    let out = c.arg("verify").arg(&profile).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "verify should report drift");
    assert!(String::from_utf8_lossy(&out.stdout).contains("vm.swappiness"));

    let mut c = ibtune();
    base(&mut c);
    let out = run_ok(c.arg("revert"));
    assert!(out.contains("reverted profile"), "{out}");
    assert!(!dir.exists(), "{} left after revert", dir.display());
    assert_eq!(
        std::fs::read_to_string("/proc/sys/vm/swappiness").unwrap(),
        swappiness_before
    );
    assert_eq!(dma_latency(), dma_before, "cpu_dma_latency not released");
}

/// IRQ affinity through the engine on the live /proc/irq: this host has no
/// HCA, so the item is built by hand for a writable IRQ, the way the plan
/// builds it for an HCA's IRQs.
#[test]
#[ignore = "needs root: changes an IRQ's smp_affinity_list on this host"]
fn live_irq_affinity_apply_revert() {
    require_root();
    let root = HostRoot::live();
    let host = discover(&root).unwrap();
    assert!(host.cpus.online.len() >= 2, "needs at least 2 CPUs");
    let lines =
        ibtune::host::irq::parse_interrupts(&std::fs::read_to_string("/proc/interrupts").unwrap());
    // An IRQ the kernel lets us move: writing its own value back succeeds.
    let (irq, before) = lines
        .iter()
        .find_map(|l| {
            let p = format!("/proc/irq/{}/smp_affinity_list", l.irq);
            let v = std::fs::read_to_string(&p).ok()?;
            std::fs::write(&p, v.as_bytes()).ok()?;
            Some((l.irq, v))
        })
        .expect("no IRQ with a writable smp_affinity_list on this host");
    let cur = CpuSet::parse_list(&before).unwrap();
    let target = if cur == CpuSet::from_iter_u32([1]) {
        0
    } else {
        1
    };
    let path = format!("/proc/irq/{irq}/smp_affinity_list");
    let item = Item {
        key: format!("irq/{irq}/affinity"),
        what: format!("IRQ {irq} smp_affinity_list"),
        action: Action::File {
            path: path.clone(),
            value: format!("{target}\n"),
            cmp: Cmp::CpuList,
        },
        blocked: None,
    };
    let observed = item.observe(&root);
    assert_eq!(observed.status, Status::Change);
    let plan = Plan {
        profile: "live-irq".into(),
        profile_path: "-".into(),
        root: "/".into(),
        cgroup_mode: host.cgroup.mode,
        items: vec![PlannedItem {
            item: item.clone(),
            observed,
        }],
        summary: Summary::default(),
    };
    let tmp = tempfile::tempdir().unwrap();
    let j = Journal::open(tmp.path()).unwrap();
    let opts = ApplyOptions {
        exe: PathBuf::from(env!("CARGO_BIN_EXE_ibtune")),
        fault: None,
    };
    let rep = apply(&plan, &root, &j, &opts).unwrap();
    assert_eq!(rep.changed, [format!("irq/{irq}/affinity")]);
    let now = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        CpuSet::parse_list(&now).unwrap(),
        CpuSet::from_iter_u32([target])
    );
    assert_eq!(item.observe(&root).status, Status::Ok);
    revert(&root, &j).unwrap();
    assert_eq!(
        std::fs::read_to_string(Path::new(&path)).unwrap(),
        before,
        "IRQ {irq} not restored"
    );
}

const NODE0_2M: &str = "/sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages";

/// 4 MiB mapped on node 0 as `ibprobe --hugepages` maps its message
/// buffers (`verbs/setup.rs::placed_buffers`: MAP_HUGETLB, bound to the
/// HCA's node): the flag is the verbs transports', and this host has no
/// RDMA device, so the mapping is made through ibprobe's library.
fn ibprobe_hugepage_buffer() -> Result<(), String> {
    use ibprobe::sys::mem::{Placement, Region};
    let p = Placement {
        hugepages: true,
        node: Some(0),
        ..Placement::default()
    };
    let r = Region::new(4 << 20, &p).map_err(|e| e.to_string())?;
    assert!(r.is_huge(), "{}", r.describe());
    Ok(())
}

/// 8 pages of 2 MiB on node 0 through the per-node nr_hugepages: applied,
/// read back, verified, used by ibprobe's `--hugepages` buffers (which
/// fail before: their MAP_HUGETLB mapping draws from the default-size pool
/// the node's pages belong to), reverted to exactly the count found.
#[test]
#[ignore = "needs root: reserves 16 MiB of huge pages on NUMA node 0 of this host"]
fn live_hugepages_per_node_apply_verify_ibprobe_revert() {
    require_root();
    assert!(
        Path::new(NODE0_2M).exists(),
        "{NODE0_2M} missing: this kernel has no 2M huge pages on node 0"
    );
    let before = std::fs::read_to_string(NODE0_2M).unwrap();
    let global = std::fs::read_to_string("/proc/sys/vm/nr_hugepages").unwrap();
    assert_eq!(
        global.trim(),
        "0",
        "this test wants no huge pages reserved on the host before it (found {global})"
    );
    let err = ibprobe_hugepage_buffer().expect_err("huge pages mapped with none reserved");
    assert!(err.contains("huge pages (--hugepages)"), "{err}");

    let tmp = tempfile::tempdir().unwrap();
    let profile = tmp.path().join("huge.toml");
    std::fs::write(
        &profile,
        "[profile]\nname = \"livehuge\"\n[[hugepages]]\nsize = \"2M\"\ncount = 8\nnodes = [0]\n",
    )
    .unwrap();
    let state = tmp.path().join("state");
    let _guard = RevertOnDrop(state.clone());
    let with_state = |args: &[&str]| {
        let mut c = ibtune();
        c.arg("--state-dir").arg(&state).args(args);
        c.output().unwrap()
    };
    let p = profile.to_str().unwrap();
    let out = with_state(&["apply", p]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(std::fs::read_to_string(NODE0_2M).unwrap(), "8\n");
    let out = with_state(&["verify", p, "--watch", "0"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    if let Err(e) = ibprobe_hugepage_buffer() {
        panic!("ibprobe's --hugepages buffer after apply: {e}");
    }

    let out = with_state(&["revert"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(std::fs::read_to_string(NODE0_2M).unwrap(), before);
}

/// The real /proc/cmdline lacks what a required [boot] asks for: verify
/// says "reboot needed" with the parameters, exits 1, and changes nothing.
#[test]
#[ignore = "needs root: reads this host's /proc/cmdline and cpuset tree like apply would (changes nothing)"]
fn live_boot_parameters_verify_reboot_needed_and_changes_nothing() {
    require_root();
    let root = HostRoot::live();
    let host = discover(&root).unwrap();
    let last = host.cpus.online.iter().next_back().unwrap();
    let cmdline = std::fs::read_to_string("/proc/cmdline").unwrap();
    assert!(
        ibtune::host::kernel::cmdline_param(&cmdline, "nohz_full").is_none(),
        "this host already boots with nohz_full: {cmdline}"
    );
    let tmp = tempfile::tempdir().unwrap();
    let profile = tmp.path().join("boot.toml");
    std::fs::write(
        &profile,
        format!("[profile]\nname = \"liveboot\"\n[[cpuset]]\nname = \"rt\"\ncpus = [{last}]\nexclusive = true\nisolated = true\n[boot]\nnohz_full = true\nrequired = true\n"),
    )
    .unwrap();
    let state = tmp.path().join("state");
    let out = ibtune()
        .arg("--state-dir")
        .arg(&state)
        .args(["verify", profile.to_str().unwrap(), "--watch", "0"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "reboot needed: the kernel command line must have: nohz_full={last} "
        )),
        "{stdout}"
    );
    assert!(!state.exists(), "verify created its state folder");
    assert_eq!(std::fs::read_to_string("/proc/cmdline").unwrap(), cmdline);
}
