//! The huge page and boot parameter knobs on copies of fixture hosts:
//! plan, apply, verify and revert through the command line, the kernel
//! granting fewer pages than asked, the kernel command line matching,
//! missing or half there, the GRUB fragment and its journalled file, and
//! hostile files in their place.

use ibtools_tests::{diff, fixture_copy, snapshot, FixtureCopy};
use ibtune::host::{discover, HostRoot};
use ibtune::profile::{resolve, Profile};
use ibtune::tune::engine::{apply, ApplyOptions, Fault};
use ibtune::tune::journal::Journal;
use ibtune::tune::plan::Plan;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const NODE: &str = "sys/devices/system/node";

/// Runs ibtune on the fixture copy: (exit code, stdout, stderr).
fn ibtune(fc: &FixtureCopy, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ibtune"))
        .arg("--root")
        .arg(&fc.root)
        .arg("--state-dir")
        .arg(&fc.state)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn write_profile(fc: &FixtureCopy, text: &str) -> String {
    let p = fc.root.parent().unwrap().join("p.toml");
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

fn pages(fc: &FixtureCopy, node: u32, kb: u64) -> PathBuf {
    fc.root.join(format!(
        "{NODE}/node{node}/hugepages/hugepages-{kb}kB/nr_hugepages"
    ))
}

/// 512 2M pages on the cpuset's node (0, "local"), 2 1G pages on both.
const HUGE: &str = r#"
[profile]
name = "huge"
[[cpuset]]
name = "rt"
cpus = [4, 6]
[[hugepages]]
size = "2M"
count = 512
[[hugepages]]
size = "1G"
count = 2
nodes = [0, 1]
"#;

#[test]
fn hugepages_plan_apply_verify_revert_byte_identical() {
    let fc = fixture_copy("thesis-2s-mlx5");
    let p = write_profile(&fc, HUGE);
    let pristine = snapshot(&fc.root);
    let (code, out, err) = ibtune(&fc, &["plan", &p]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("~ node 0: 2M hugepages"), "{out}");
    assert!(out.contains("~ node 1: 1G hugepages"), "{out}");
    assert!(
        !out.contains("node 1: 2M"),
        "2M pages only on the local node 0: {out}"
    );
    assert_eq!(diff(&pristine, &snapshot(&fc.root)), Vec::<String>::new());

    let (code, out, err) = ibtune(&fc, &["apply", &p]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        std::fs::read_to_string(pages(&fc, 0, 2048)).unwrap(),
        "512\n"
    );
    assert_eq!(
        std::fs::read_to_string(pages(&fc, 1, 1048576)).unwrap(),
        "2\n"
    );
    assert_eq!(std::fs::read_to_string(pages(&fc, 1, 2048)).unwrap(), "0\n");
    let journal = std::fs::read_to_string(fc.state.join("journal.jsonl")).unwrap();
    assert!(journal.contains("hugepages/node0/2M"), "{journal}");

    let (code, out, err) = ibtune(&fc, &["verify", &p]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, _) = ibtune(&fc, &["apply", &p]);
    assert_eq!(code, 0);
    assert!(out.contains("nothing to change"), "{out}");

    let (code, out, err) = ibtune(&fc, &["revert"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(diff(&pristine, &snapshot(&fc.root)), Vec::<String>::new());
}

#[test]
fn the_kernel_granting_fewer_pages_is_reported_by_apply_and_verify() {
    let fc = fixture_copy("thesis-2s-mlx5");
    let p = write_profile(&fc, HUGE);
    let pristine = snapshot(&fc.root);
    // apply reads back: the fault plays a kernel that grants 300 pages.
    let root = HostRoot::new(&fc.root).unwrap();
    let host = discover(&root).unwrap();
    let prof = Profile::parse(Path::new("p.toml"), HUGE).unwrap();
    let plan = Plan::observe(&resolve(&prof, &host, &root).unwrap(), &host, &root);
    let rep = {
        let j = Journal::open(&fc.state).unwrap();
        let opts = ApplyOptions {
            exe: PathBuf::from(env!("CARGO_BIN_EXE_ibtune")),
            fault: Some(Fault::ShortGrant(1)),
        };
        apply(&plan, &root, &j, &opts).unwrap()
    };
    assert_eq!(rep.short.len(), 3, "{:?}", rep.short);
    assert!(
        rep.short[0].starts_with("node 0: 2M hugepages: 1 of 512 allocated: "),
        "{:?}",
        rep.short
    );
    // A node that later loses pages (or a kernel that granted 300): verify.
    std::fs::write(pages(&fc, 0, 2048), "300\n").unwrap();
    let (code, out, err) = ibtune(&fc, &["verify", &p]);
    assert_eq!(code, 1, "a shortfall is drift: {out}{err}");
    assert!(
        out.contains("short: node 0: 2M hugepages: 300 of 512 allocated: the kernel found too little free contiguous memory"),
        "{out}"
    );
    assert!(out.contains("< node 0: 2M hugepages"), "{out}");
    let (code, out, _) = ibtune(&fc, &["verify", &p, "--json"]);
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["plan"]["summary"]["short"], 3, "{out}");
    assert_eq!(v["drifted"][0]["status"], "short", "{out}");
    assert_eq!(v["drifted"][0]["current"], "300", "{out}");
    // Apply writes the count again; revert restores the first original.
    let (code, out, err) = ibtune(&fc, &["apply", &p]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        std::fs::read_to_string(pages(&fc, 0, 2048)).unwrap(),
        "512\n"
    );
    let (code, _, _) = ibtune(&fc, &["revert"]);
    assert_eq!(code, 0);
    assert_eq!(diff(&pristine, &snapshot(&fc.root)), Vec::<String>::new());
}

#[test]
fn hugepages_that_cannot_be_refused_with_the_valid_values() {
    let fc = fixture_copy("thesis-2s-mlx5");
    for (text, needles) in [
        (
            HUGE.replace("\"1G\"", "\"4M\""),
            &["\"4M\" is not a huge page size", "\"2M\" or \"1G\""][..],
        ),
        (
            HUGE.replace("count = 2\n", "count = 100000\n"),
            &["more than node 0's", "fewer pages"][..],
        ),
        (
            HUGE.replace("nodes = [0, 1]", "nodes = [7]"),
            &["NUMA nodes 7 do not exist"][..],
        ),
        (
            "[profile]\nname = \"x\"\n[[hugepages]]\nsize = \"2M\"\ncount = 8\n".to_string(),
            &["\"local\"", "nodes = [0]"][..],
        ),
    ] {
        let p = write_profile(&fc, &text);
        let (code, out, err) = ibtune(&fc, &["plan", &p]);
        assert_eq!(code, 2, "{out}{err}");
        for n in needles {
            assert!(err.contains(n), "{n:?} missing: {err}");
        }
    }
    // A kernel without the size: blocked, nothing changed.
    std::fs::remove_dir_all(
        fc.root
            .join(format!("{NODE}/node1/hugepages/hugepages-1048576kB")),
    )
    .unwrap();
    let p = write_profile(&fc, HUGE);
    let before = snapshot(&fc.root);
    let (code, out, err) = ibtune(&fc, &["apply", &p]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("no 1G huge pages on node 1"), "{err}");
    assert_eq!(diff(&before, &snapshot(&fc.root)), Vec::<String>::new());
}

#[test]
fn hostile_page_counts_and_command_lines_give_clear_errors() {
    let fc = fixture_copy("thesis-2s-mlx5");
    let p = write_profile(
        &fc,
        &format!("{HUGE}[cpu]\nmax_cstate_latency_us = 10\n{BOOT_TAIL}"),
    );
    // 17 MiB where a count and the command line should be.
    let f = std::fs::File::create(pages(&fc, 0, 2048)).unwrap();
    f.set_len(17 << 20).unwrap();
    let c = std::fs::File::create(fc.root.join("proc/cmdline")).unwrap();
    c.set_len(17 << 20).unwrap();
    let (code, out, err) = ibtune(&fc, &["verify", &p]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("(unreadable: read /sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages: is larger than 16 MiB"),
        "{out}"
    );
    assert!(
        out.contains("(unreadable: read /proc/cmdline: is larger than 16 MiB"),
        "{out}"
    );
    let before = snapshot(&fc.root);
    let (code, out, err) = ibtune(&fc, &["apply", &p]);
    assert!(code == 3 || code == 2, "{code}: {out}{err}");
    assert!(
        err.contains("nr_hugepages") && err.contains("16 MiB"),
        "{err}"
    );
    assert_eq!(diff(&before, &snapshot(&fc.root)), Vec::<String>::new());
    // Garbage text in the count: shown as is, journalled and restored.
    std::fs::write(pages(&fc, 0, 2048), "lots\n").unwrap();
    let before = snapshot(&fc.root);
    let (code, out, err) = ibtune(&fc, &["apply", &p]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, _, _) = ibtune(&fc, &["revert"]);
    assert_eq!(code, 0);
    assert_eq!(diff(&before, &snapshot(&fc.root)), Vec::<String>::new());
}

/// An isolated cpuset on CPUs 4 and 6 and every boot parameter, required.
const BOOT: &str = r#"
[profile]
name = "boot"
[[cpuset]]
name = "rt"
cpus = [4, 6]
exclusive = true
isolated = true
[cpu]
max_cstate_latency_us = 10
"#;
const BOOT_TAIL: &str = r#"
[boot]
isolcpus = true
nohz_full = true
rcu_nocbs = true
irqaffinity = true
max_cstate = true
required = true
"#;
const PARAMS: &str = "isolcpus=managed_irq,domain,4,6 nohz_full=4,6 rcu_nocbs=4,6 irqaffinity=0-3,5,7-23 intel_idle.max_cstate=2 processor.max_cstate=2";

fn boot_profile(fc: &FixtureCopy) -> String {
    write_profile(fc, &format!("{BOOT}{BOOT_TAIL}"))
}

fn drifted(fc: &FixtureCopy, p: &str) -> (i32, Vec<String>) {
    let (code, out, err) = ibtune(fc, &["verify", p, "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    let keys = v["drifted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["key"].as_str().unwrap().to_string())
        .collect();
    (code, keys)
}

#[test]
fn boot_parameters_against_the_command_line_missing_partial_matching() {
    let fc = fixture_copy("thesis-2s-mlx5");
    let p = boot_profile(&fc);
    let (code, out, err) = ibtune(&fc, &["apply", &p]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("6 boot advice not applied at run time"),
        "{out}"
    );
    // Missing: reboot needed, every parameter, exit 1.
    let (code, out, _) = ibtune(&fc, &["verify", &p]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!(
            "reboot needed: the kernel command line must have: {PARAMS} "
        )),
        "{out}"
    );
    let cmdline = fc.root.join("proc/cmdline");
    let original = std::fs::read_to_string(&cmdline).unwrap();
    // Half there, one with another value: only those are named.
    std::fs::write(
        &cmdline,
        format!(
            "{} isolcpus=managed_irq,domain,2-7 nohz_full=4,6 irqaffinity=0-23\n",
            original.trim()
        ),
    )
    .unwrap();
    let (code, keys) = drifted(&fc, &p);
    assert_eq!(code, 1);
    assert_eq!(
        keys,
        [
            "boot/rcu_nocbs",
            "boot/irqaffinity",
            "boot/intel_idle.max_cstate",
            "boot/processor.max_cstate"
        ]
    );
    let (_, out, _) = ibtune(&fc, &["verify", &p]);
    assert!(
        out.lines()
            .any(|l| l.starts_with("! kernel command line irqaffinity")
                && l.contains("irqaffinity=0-23 ")
                && l.ends_with("-> irqaffinity=0-3,5,7-23")),
        "{out}"
    );
    // All there (quoted, after other parameters): matches.
    std::fs::write(
        &cmdline,
        format!("{} \"{}\"\n", original.trim(), PARAMS.replace(' ', "\" \"")),
    )
    .unwrap();
    let (code, keys) = drifted(&fc, &p);
    assert_eq!((code, keys), (0, Vec::<String>::new()));
    // Words after `--` go to init, not the kernel.
    std::fs::write(&cmdline, format!("{} -- {PARAMS}\n", original.trim())).unwrap();
    assert_eq!(drifted(&fc, &p).1.len(), 6);
}

#[test]
fn boot_fragment_is_a_grub_line_and_json() {
    let fc = fixture_copy("thesis-2s-mlx5");
    let p = boot_profile(&fc);
    let (code, out, err) = ibtune(&fc, &["plan", &p, "--boot-fragment"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        format!("GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX {PARAMS}\"\n")
    );
    let (code, out, _) = ibtune(&fc, &["plan", &p, "--boot-fragment", "-f", "json"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["parameters"].as_array().unwrap().len(), 6);
    assert_eq!(v["profile"], "boot");
    let none = write_profile(&fc, BOOT);
    let (code, _, err) = ibtune(&fc, &["plan", &none, "--boot-fragment"]);
    assert_eq!(code, 2);
    assert!(err.contains("asks for no kernel parameter"), "{err}");
}

#[test]
fn boot_file_is_written_journalled_and_reverted_byte_identical() {
    let fc = fixture_copy("thesis-2s-mlx5");
    let p = boot_profile(&fc);
    std::fs::create_dir_all(fc.root.join("etc/default/grub.d")).unwrap();
    let file = "/etc/default/grub.d/ibtune.cfg";
    let at = fc.root.join("etc/default/grub.d/ibtune.cfg");
    for existing in [
        None,
        Some("GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX mine=1\"\n"),
    ] {
        if let Some(text) = existing {
            std::fs::write(&at, text).unwrap();
        }
        let pristine = snapshot(&fc.root);
        let (code, out, err) = ibtune(&fc, &["apply", &p, "--boot-file", file]);
        assert_eq!(code, 0, "{out}{err}");
        assert!(
            out.contains(&format!("changed boot loader fragment {file}")),
            "{out}"
        );
        let written = std::fs::read_to_string(&at).unwrap();
        assert!(
            written.ends_with(&format!(
                "\nGRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX {PARAMS}\"\n"
            )),
            "{written}"
        );
        let (code, out, err) = ibtune(&fc, &["revert"]);
        assert_eq!(code, 0, "{out}{err}");
        assert_eq!(diff(&pristine, &snapshot(&fc.root)), Vec::<String>::new());
        assert_eq!(at.exists(), existing.is_some());
    }
    // Without --boot-file nothing of the boot loader is touched.
    let pristine = snapshot(&fc.root);
    ibtune(&fc, &["apply", &p]);
    let d = diff(&pristine, &snapshot(&fc.root));
    assert!(d.iter().all(|l| !l.contains("etc/default")), "{d:?}");
    ibtune(&fc, &["revert"]);
    let (code, _, err) = ibtune(&fc, &["apply", &p, "--boot-file", "etc/x.cfg"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("is not an absolute path"), "{err}");
}
