//! The lab's own tests: it boots, it has real verbs, perftest runs on it in
//! every transport, both kernels and both topologies work, and it stays
//! bounded (timeouts, cleanup, side-by-side labs, one-line failures).
//!
//! Runs with `--include-ignored` (scripts/test-all does); see
//! `ibtools_tests::lab::harness` for why this is not libtest.

use ibtools_tests::lab::harness::{self, Group};
use ibtools_tests::lab::perftest::{parse_lat, run_pair};
use ibtools_tests::lab::{qemu_processes, script, Lab, LabConfig, LabError, Node};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::Mutex;
use std::time::{Duration, Instant};

fn main() -> ExitCode {
    harness::run(vec![
        script_checks(),
        standard_loopback(),
        failures(),
        retried(),
        rt_loopback(),
        pair(),
    ])
}

/// Counter of port 1 of rxe0, read in the guest.
fn counter(lab: &Lab, node: Node, name: &str) -> u64 {
    let o = lab
        .sh_on(
            node,
            &format!("cat /sys/class/infiniband/rxe0/ports/1/hw_counters/{name}"),
        )
        .success();
    o.stdout
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("counter {name} unreadable: {o}"))
}

/// One perftest latency run on the loopback device; checks both sides and the row.
fn loopback_lat(lab: &Lab, tool: &str, conn: &str) {
    let sent = counter(lab, Node::A, "sent_pkts");
    let iters = 500;
    let run = run_pair(
        lab,
        Node::A,
        Node::A,
        tool,
        &format!("-d rxe0 -x 1 -c {conn} -n {iters}"),
        conn,
    );
    let client = run.client.success();
    run.server.success();
    let row = parse_lat(&client.stdout).unwrap_or_else(|| panic!("no result row: {client}"));
    assert_eq!(row.iterations, iters, "{client}");
    assert!(
        row.t_min_us > 0.0 && row.t_min_us <= row.t_typical_us && row.t_typical_us <= row.t_max_us,
        "implausible row {row:?}"
    );
    // The packets really went through rxe0: both sides sent `iters` messages.
    let delta = counter(lab, Node::A, "sent_pkts") - sent;
    assert!(
        delta >= 2 * iters,
        "rxe0 sent_pkts grew by {delta}, expected at least {}",
        2 * iters
    );
}

fn standard_loopback() -> Group {
    Group::with_lab("standard_loopback", LabConfig::loopback())
        .test("ibv_devices_lists_rxe0", |lab| {
            let o = lab.sh("ibv_devices").success();
            assert!(o.stdout.lines().any(|l| l.split_whitespace().next() == Some("rxe0")), "{o}");
        })
        .test("rxe0_port_is_active_roce", |lab| {
            let o = lab.sh("ibv_devinfo -d rxe0").success();
            assert!(o.stdout.contains("PORT_ACTIVE"), "{o}");
            assert!(o.stdout.contains("link_layer:\t\tEthernet") || o.stdout.contains("Ethernet"), "{o}");
            let gid = lab.sh("cat /sys/class/infiniband/rxe0/ports/1/gids/1").success();
            // GID index 1 is the IPv4-mapped RoCE v2 GID of the dummy's 10.77.0.1.
            assert_eq!(gid.stdout.trim(), "0000:0000:0000:0000:0000:ffff:0a4d:0001", "{gid}");
        })
        .test("kernel_is_debian_standard", |lab| {
            let o = lab.sh("uname -r; uname -v").success();
            assert!(o.stdout.lines().next().unwrap_or("").ends_with("-amd64"), "{o}");
            assert!(!o.stdout.contains("PREEMPT_RT"), "{o}");
        })
        .test("ib_send_lat_rc_loopback", |lab| loopback_lat(lab, "ib_send_lat", "RC"))
        .test("ib_send_lat_uc_loopback", |lab| loopback_lat(lab, "ib_send_lat", "UC"))
        .test("ib_send_lat_ud_loopback", |lab| loopback_lat(lab, "ib_send_lat", "UD"))
        .test("ib_write_lat_uc_loopback", |lab| loopback_lat(lab, "ib_write_lat", "UC"))
        .test("host_tuning_interfaces_are_real", |lab| {
            // What ibtune touches exists in the guest's own kernel: cgroup v2
            // with cpuset, /proc/irq, /dev/cpu_dma_latency.
            let o = lab
                .sh("cat /sys/fs/cgroup/cgroup.controllers; ls /proc/irq | grep -c '^[0-9]'; test -c /dev/cpu_dma_latency && echo dma")
                .success();
            let lines: Vec<&str> = o.stdout.lines().collect();
            assert!(lines[0].split_whitespace().any(|c| c == "cpuset"), "{o}");
            assert!(lines[1].parse::<u32>().unwrap_or(0) > 0, "{o}");
            assert_eq!(lines[2], "dma", "{o}");
        })
        .test("kernel_autoloads_its_modules", |lab| {
            // veth and sch_netem are modules of the guest kernel that nothing
            // loads up front: the kernel's autoloader must find them.
            lab.sh("ip link add iblab-x type veth peer name iblab-y && tc qdisc add dev iblab-x root netem delay 1ms && ip link del iblab-x")
                .success();
        })
        .test("status_stdout_stderr_pass_through", |lab| {
            let o = lab.sh("echo out; echo err >&2; exit 7");
            assert_eq!((o.status, o.stdout.as_str(), o.stderr.as_str()), (7, "out\n", "err\n"));
        })
        .test("results_folder_comes_back", |lab| {
            lab.sh("echo \"from $(hostname)\" > \"$LAB_RESULTS/hello.txt\"").success();
            let got = std::fs::read_to_string(lab.results(Node::A).join("hello.txt")).unwrap();
            assert_eq!(got, "from iblab-a\n");
        })
        .test("examples_in_the_lab", examples_in_the_lab)
        .test("guest_timeout_kills_a_hung_command", |lab| {
            let t0 = Instant::now();
            let o = lab
                .exec(Node::A, "sleep 600", Duration::from_secs(2))
                .unwrap_or_else(|e| std::panic::panic_any(e));
            assert_eq!(o.status, 124, "timeout(1) status expected: {o}");
            assert!(t0.elapsed() < Duration::from_secs(30), "took {:?}", t0.elapsed());
            lab.sh("true").success(); // the lab still answers
        })
        .test("second_lab_runs_beside_this_one", |lab| {
            // Two labs at once: separate folders, sockets and QEMUs.
            let other = Lab::start(&LabConfig::loopback()).unwrap_or_else(|e| std::panic::panic_any(e));
            assert_ne!(other.dir(), lab.dir());
            lab.sh("echo one > \"$LAB_RESULTS/which\"").success();
            other.sh("echo two > \"$LAB_RESULTS/which\"").success();
            other.sh("ibv_devices | grep -q rxe0").success();
            assert_eq!(std::fs::read_to_string(lab.results(Node::A).join("which")).unwrap(), "one\n");
            assert_eq!(std::fs::read_to_string(other.results(Node::A).join("which")).unwrap(), "two\n");
            let dir = other.dir().to_string_lossy().to_string();
            assert!(!qemu_processes(&dir).is_empty());
            other.stop().unwrap();
            assert!(qemu_processes(&dir).is_empty(), "QEMU left running for {dir}");
            assert!(!Path::new(&dir).exists(), "lab folder {dir} left behind");
            lab.sh("ibv_devices | grep -q rxe0").success();
        })
        .test("hung_guest_is_killed_and_reported", |lab| {
            // Freeze the guest (SIGSTOP its QEMU): the host-side hard timeout
            // must kill QEMU and name the command. Last: it ends this lab.
            let dir = lab.dir().to_string_lossy().to_string();
            let pids = qemu_processes(&dir);
            assert_eq!(pids.len(), 1, "{pids:?}");
            let st = Command::new("kill").args(["-STOP", &pids[0].to_string()]).status().unwrap();
            assert!(st.success());
            let out = Command::new(script())
                .args(["exec", &dir, "--timeout", "1", "--", "echo", "never"])
                .env("IBLAB_HANG_GRACE", "2")
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(5), "{stderr}");
            assert!(stderr.contains("did not answer within 3s while running: echo never"), "{stderr}");
            assert!(qemu_processes(&dir).is_empty(), "QEMU still running after the hard timeout");
            assert!(!Path::new(&dir).exists(), "lab folder left behind");
        })
}

/// Every example of a doc or `--help` marked `runs in the lab`
/// (`ibtools_tests::examples`), run on rxe0 as one script after the lab's
/// substitutions. An example that names a peer runs against `ibprobe
/// server -t T --forever` on this guest (T: the example's transport); an
/// `ibprobe server` example answers one `ibprobe client`. Each must exit
/// 0; one with `--fail-if` may exit 1 (its threshold's verdict on an
/// emulated HCA), never anything else. A command that several docs show
/// alike runs once, for all of them.
fn examples_in_the_lab(lab: &Lab) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let bin = ibtools_tests::workspace_bin("ibprobe");
    let bin = bin.parent().expect("the target folder");
    let examples = ibtools_tests::examples::lab_examples(&root, bin);
    assert!(
        !examples.is_empty(),
        "no example is marked `runs in the lab`"
    );
    eprintln!(
        "lab substitutions: {:?}",
        ibtools_tests::examples::LAB_SUBSTITUTIONS
    );
    // Each command once, with every place that shows it.
    let mut unique: Vec<(String, Vec<&str>)> = Vec::new();
    for (at, e) in &examples {
        let cmd = e.in_lab();
        match unique.iter_mut().find(|(c, _)| *c == cmd) {
            Some((_, ats)) => ats.push(at),
            None => unique.push((cmd, vec![at])),
        }
    }
    let mut script = format!(
        "export PATH={}:$PATH\nmkdir -p /run/examples && cd /run/examples\n\
         up() {{ for i in $(seq 100); do ss -ltn | grep -q ':18515 ' && return; sleep 0.1; done; }}\n",
        bin.display()
    );
    for (i, (cmd, _)) in unique.iter().enumerate() {
        let cmd = cmd.strip_prefix("sudo ").unwrap_or(cmd).to_string();
        let words: Vec<&str> = cmd.split_whitespace().collect();
        let t = words
            .windows(2)
            .find(|w| w[0] == "-t" || w[0] == "--transport")
            .map_or("rc", |w| w[1]);
        let run = if cmd.starts_with("ibprobe server") {
            format!(
                "{cmd} & s=$!; up; ibprobe client 127.0.0.1 -t {t} --count 100 >/dev/null; wait $s"
            )
        } else if cmd.contains("10.77.0.1") {
            format!(
                "ibprobe server -t {t} --forever >/dev/null 2>&1 & s=$!; up; {cmd}; rc=$?; kill $s; wait $s; exit $rc"
            )
        } else {
            cmd.clone()
        };
        script.push_str(&format!(
            "t=$(date +%s%N); ( {run} ) > $LAB_RESULTS/example-{i}.log 2>&1 </dev/null; \
             echo \"example {i} exit $? in $((($(date +%s%N) - t) / 1000000)) ms\"\n"
        ));
    }
    std::fs::write(lab.results(Node::A).join("examples.sh"), &script).unwrap();
    let o = lab
        .exec(
            Node::A,
            "sh $LAB_RESULTS/examples.sh",
            Duration::from_secs(900),
        )
        .unwrap_or_else(|e| std::panic::panic_any(e));
    let mut failed = Vec::new();
    for (i, (cmd, ats)) in unique.iter().enumerate() {
        let at = ats.join(", ");
        let line = o
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("example {i} exit ")));
        let ms = line
            .and_then(|l| l.split_once(" in "))
            .map(|(_, t)| t.trim());
        let code = line
            .and_then(|l| l.split_whitespace().next())
            .and_then(|c| c.parse::<i32>().ok());
        let ok = code == Some(0) || (code == Some(1) && cmd.contains("--fail-if"));
        eprintln!(
            "{} in the lab: exit {code:?} in {}: {cmd} ({at})",
            if ok { "ok" } else { "FAILED" },
            ms.unwrap_or("?"),
        );
        if !ok {
            let log =
                std::fs::read_to_string(lab.results(Node::A).join(format!("example-{i}.log")))
                    .unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(8).collect();
            failed.push(format!(
                "{at}: `{cmd}` exited {code:?}:\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            ));
        }
    }
    assert!(
        failed.is_empty(),
        "lab examples that fail:\n{}\n{o}",
        failed.join("\n\n")
    );
}

/// The lab directories of `retried`'s first test: the guest it froze,
/// and the one the harness booted instead.
static RETRIED_DIRS: Mutex<(Option<PathBuf>, Option<PathBuf>)> = Mutex::new((None, None));

/// The harness's answer to a guest that stops answering during a test
/// (`harness`'s docs): a new guest, the test run again in it, and the
/// group's later tests in the new guest too.
fn retried() -> Group {
    Group::with_lab("lab_failure_retried", LabConfig::loopback())
        .test(
            "a_guest_that_stops_answering_is_replaced_and_the_test_run_again",
            |lab| {
                let mut dirs = RETRIED_DIRS.lock().unwrap_or_else(|p| p.into_inner());
                match dirs.0.clone() {
                    None => {
                        // First run: freeze the guest (SIGSTOP its QEMU) and ask
                        // it something: the lab gives up after 1 + 2 s and kills it.
                        dirs.0 = Some(lab.dir().to_path_buf());
                        drop(dirs);
                        let pids = qemu_processes(&lab.dir().to_string_lossy());
                        assert_eq!(pids.len(), 1, "{pids:?}");
                        let st = Command::new("kill")
                            .args(["-STOP", &pids[0].to_string()])
                            .status()
                            .unwrap();
                        assert!(st.success());
                        std::env::set_var("IBLAB_HANG_GRACE", "2");
                        let e = lab.exec(Node::A, "echo never", Duration::from_secs(1));
                        std::env::remove_var("IBLAB_HANG_GRACE");
                        let e = e.expect_err("a frozen guest answered");
                        std::panic::panic_any(e);
                    }
                    Some(frozen) => {
                        // Second run, in the guest booted instead.
                        assert_ne!(frozen, lab.dir(), "run again in the same (dead) guest");
                        assert!(
                            !frozen.exists(),
                            "the dead guest's folder {} is left",
                            frozen.display()
                        );
                        assert!(
                            qemu_processes(&frozen.to_string_lossy()).is_empty(),
                            "the dead guest's QEMU runs"
                        );
                        lab.sh("ibv_devices | grep -q rxe0").success();
                        dirs.1 = Some(lab.dir().to_path_buf());
                    }
                }
            },
        )
        .test("the_tests_after_it_run_in_the_new_guest", |lab| {
            let dirs = RETRIED_DIRS.lock().unwrap_or_else(|p| p.into_inner());
            assert_eq!(dirs.1.as_deref(), Some(lab.dir()), "{dirs:?}");
            lab.sh("true").success();
        })
}

/// Failures of the lab itself are one line that names the thing.
fn failures() -> Group {
    Group::standalone("lab_failures")
        .check("boot_timeout_names_the_hung_step", || {
            let before = qemu_processes("iblab.node=").len();
            let cfg = LabConfig {
                boot_timeout: Duration::from_secs(3),
                ..LabConfig::loopback()
            };
            let err = match Lab::start(&cfg) {
                Ok(_) => panic!("a guest cannot boot in 3 s under TCG"),
                Err(e) => e,
            };
            // A hang while booting has its own status (6), which the
            // harness retries once; other boot failures are 4.
            assert_eq!(err.status, Some(LabError::BOOT_HUNG), "{err}");
            assert!(err.is_boot_hang());
            let first = err.message.lines().next().unwrap();
            assert!(first.starts_with("guest a not ready after 3s; hung at: "), "{first}");
            assert_eq!(qemu_processes("iblab.node=").len(), before, "QEMU left running");
        })
        .check("module_that_fails_to_load_is_named", || {
            // A cache whose kernel lacks rdma_rxe: the same kernel and
            // initramfs (symlinks), its module tree without rdma_rxe.ko.
            let real = Path::new("/var/cache/iblab/std");
            let ver = std::fs::read_to_string(real.join("version")).expect("run tests/lab/lab setup first");
            let ver = ver.trim();
            let cache = tempfile::tempdir().unwrap();
            let std_dir = cache.path().join("std");
            std::fs::create_dir_all(std_dir.join("lib/modules")).unwrap();
            for f in ["vmlinuz", "initramfs.cpio.gz", "initramfs.stamp", "version", "config"] {
                std::os::unix::fs::symlink(real.join(f), std_dir.join(f)).unwrap();
            }
            let mods = std_dir.join("lib/modules").join(ver);
            let sh = format!(
                "cp -rs {src} {dst} && find {dst} -name rdma_rxe.ko -delete && depmod -b {base} {ver}",
                src = real.join("lib/modules").join(ver).display(),
                dst = mods.display(),
                base = std_dir.display(),
            );
            assert!(Command::new("sh").args(["-c", &sh]).status().unwrap().success(), "{sh}");
            let out = Command::new(script())
                .args(["start", "--owner", &std::process::id().to_string()])
                .env("IBLAB_CACHE", cache.path())
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(4), "{stderr}");
            let last = stderr.lines().last().unwrap();
            assert!(
                last.starts_with("iblab: error: guest a (std kernel) failed: modprobe rdma_rxe failed: modprobe: FATAL: Module rdma_rxe not found"),
                "{last}"
            );
        })
}

/// Asserts that the lab script exited with `code` and said exactly `line`
/// on stderr.
fn exits_saying(out: &std::process::Output, code: i32, line: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{stderr}");
    assert_eq!(stderr.trim(), line);
}

/// The script's own checks, which need no guest: these run under plain `cargo test`.
fn script_checks() -> Group {
    Group::offline("lab_script")
        .check("unusable_cache_is_a_prerequisite_error", || {
            let out = Command::new(script())
                .args(["start"])
                .env("IBLAB_CACHE", "/proc/iblab-cache")
                .output()
                .unwrap();
            exits_saying(
                &out,
                3,
                "iblab: error: cannot create the lab cache /proc/iblab-cache (set IBLAB_CACHE to a writable folder)",
            );
        })
        .check("missing_package_is_named_in_one_line", || {
            // A PATH with every system command but qemu-system-x86_64.
            let d = tempfile::tempdir().unwrap();
            let bin = d.path().join("bin");
            std::fs::create_dir(&bin).unwrap();
            for dir in ["/usr/bin", "/usr/sbin"] {
                for e in std::fs::read_dir(dir).unwrap().flatten() {
                    let name = e.file_name();
                    if name != "qemu-system-x86_64" && !bin.join(&name).exists() {
                        std::os::unix::fs::symlink(e.path(), bin.join(&name)).unwrap();
                    }
                }
            }
            let out = Command::new("/usr/bin/bash")
                .arg(script())
                .args(["setup", "--check"])
                .env("PATH", &bin)
                .output()
                .unwrap();
            exits_saying(
                &out,
                3,
                "iblab: error: missing prerequisite package(s): qemu-system-x86 (setup --check installs nothing; run tests/lab/lab setup as root)",
            );
        })
        .check("bad_option_is_a_usage_error", || {
            let out = Command::new(script()).args(["start", "--topology", "ring"]).output().unwrap();
            exits_saying(&out, 2, "iblab: error: unknown topology 'ring' (loopback|pair)");
        })
}

fn rt_loopback() -> Group {
    Group::with_lab("rt_loopback", LabConfig::loopback().rt())
        .test("kernel_is_preempt_rt", |lab| {
            let o = lab
                .sh("uname -r; uname -v; cat /sys/kernel/realtime")
                .success();
            let lines: Vec<&str> = o.stdout.lines().collect();
            assert!(lines[0].ends_with("-rt-amd64"), "{o}");
            assert!(lines[1].contains("PREEMPT_RT"), "{o}");
            assert_eq!(lines[2], "1", "{o}");
        })
        .test("ib_send_lat_rc_loopback", |lab| {
            loopback_lat(lab, "ib_send_lat", "RC")
        })
        .test("cyclictest_runs_with_fifo_priority", |lab| {
            let o = lab
                .sh("cyclictest -m -p 80 -t 1 -i 1000 -l 300 -q")
                .success();
            let max = o
                .stdout
                .split("Max:")
                .nth(1)
                .and_then(|s| s.split_whitespace().next())
                .and_then(|s| s.parse::<u64>().ok());
            assert!(
                max.is_some_and(|m| m > 0),
                "no Max latency in cyclictest output: {o}"
            );
        })
}

fn pair() -> Group {
    Group::with_lab("pair", LabConfig::pair())
        .test("each_guest_has_its_own_rxe0", |lab| {
            let guid = |n| {
                lab.sh_on(n, "cat /sys/class/infiniband/rxe0/node_guid")
                    .success()
                    .stdout
                    .trim()
                    .to_string()
            };
            let (a, b) = (guid(Node::A), guid(Node::B));
            assert!(!a.is_empty() && a != b, "node GUIDs {a} and {b}");
            let ip = lab
                .sh_on(Node::B, "echo $LAB_IP $LAB_PEER_IP $(hostname)")
                .success();
            assert_eq!(ip.stdout.trim(), "10.77.0.2 10.77.0.1 iblab-b");
        })
        .test("guests_reach_each_other", |lab| {
            lab.sh_on(Node::A, "/run/busybox ping -c 2 -W 5 \"$LAB_PEER_IP\"")
                .success();
        })
        .test("ib_send_lat_rc_between_guests", |lab| {
            let before = counter(lab, Node::B, "rcvd_pkts");
            let run = run_pair(
                lab,
                Node::B,
                Node::A,
                "ib_send_lat",
                "-d rxe0 -x 1 -c RC -n 100",
                "pair-rc",
            );
            let client = run.client.success();
            run.server.success();
            let row =
                parse_lat(&client.stdout).unwrap_or_else(|| panic!("no result row: {client}"));
            assert_eq!(row.iterations, 100);
            let got = counter(lab, Node::B, "rcvd_pkts") - before;
            assert!(
                got >= 100,
                "node b's rxe0 received {got} packets, expected at least 100"
            );
        })
}
