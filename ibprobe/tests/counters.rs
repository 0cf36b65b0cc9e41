//! The measuring thread's counters (issue 18), through the real CLI on
//! this machine's kernel: a competing busy thread on the probe's CPU shows
//! context switches and the attribution names them; a run alone shows far
//! fewer; buffers that are not pre-faulted show page faults and the
//! default (mlocked) run none; a default run opens no perf event;
//! `--perf-counters` refused (a real refusal: an unprivileged user,
//! kernel.perf_event_paranoid >= 2) leaves the run going on the kernel's
//! accounting, with the missing counters named, exit 0.
//!
//! Each run is its own process: mlockall in one must not pre-fault
//! another.

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The runs of this file use the same CPU: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn ibprobe() -> Command {
    Command::new(assert_cmd::cargo::cargo_bin("ibprobe"))
}

/// Runs ibprobe with `args` and `--json`; the report, after checking exit 0.
fn run_json(cmd: &mut Command) -> Value {
    let out = cmd.arg("--json").output().expect("ibprobe runs");
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("a JSON report")
}

fn count(v: &Value, name: &str) -> u64 {
    v["counters"][name]
        .as_u64()
        .unwrap_or_else(|| panic!("counters.{name} missing in {}", v["counters"]))
}

/// The CPU both the probe and the competitor use: the last one allowed.
fn shared_cpu() -> usize {
    *ibhost::rt::allowed_cpus().last().expect("some CPU")
}

/// A pinned shm round trip for `dur`, with `interval`s for attribution,
/// as SCHED_FIFO 50 (`chrt`, util-linux): on this shared machine the
/// other sessions' load would preempt a SCHED_OTHER probe a hundred times
/// a second; a real-time one only the competitor (at 60) can preempt. A
/// run under 950 ms stays inside the kernel's real-time budget.
fn pinned_run(cpu: usize, dur: &str, interval: &str, dir: &std::path::Path) -> Value {
    let mut cmd = Command::new("chrt");
    cmd.args(["-f", "50"])
        .arg(assert_cmd::cargo::cargo_bin("ibprobe"))
        .args([
            "loopback",
            "-t",
            "shm",
            "--round-trip",
            "--cpu",
            &cpu.to_string(),
            "-D",
            dur,
            "--hdr-log",
            dir.join("log.hlog").to_str().unwrap(),
            "--log-interval",
            interval,
        ]);
    run_json(&mut cmd)
}

/// On `cpu` until the flag is set: busy for 1 ms, asleep for 99 ms, as
/// SCHED_FIFO 60, so each wake-up preempts the probe (FIFO 50) for 1 ms.
/// About 8 preemptions in an 800 ms run of 16 intervals: about half the
/// intervals have one. Some land between messages (an interval's end, in
/// this debug build a few ms of every 50: harmless, and counted in the next
/// interval), most on a round trip. The probe's real-time 800 ms stay
/// inside the kernel's 950 ms budget.
fn competitor(cpu: usize, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        ibhost::rt::pin_to_cpu(cpu).expect("pin the competitor");
        ibhost::rt::set_fifo(60).expect("SCHED_FIFO for the competitor (root)");
        let mut x = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let t = Instant::now();
            while t.elapsed() < Duration::from_millis(1) {
                x = std::hint::black_box(x.wrapping_add(1));
            }
            std::thread::sleep(Duration::from_millis(99));
        }
    })
}

#[test]
fn a_busy_thread_on_the_cpu_shows_context_switches_and_is_named() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !ibtools_tests::chrt_fifo_allowed(60)
        && ibtools_tests::skip(
            "a_busy_thread_on_the_cpu_shows_context_switches_and_is_named",
            "chrt -f 60 is not allowed here (needs root or CAP_SYS_NICE): no preempting competitor",
        )
    {
        return;
    }
    let cpu = shared_cpu();
    let dir = tempfile::tempdir().unwrap();
    // Alone first (the machine's other load is there in both runs).
    let alone = pinned_run(cpu, "800ms", "50ms", dir.path());
    let stop = Arc::new(AtomicBool::new(false));
    let t = competitor(cpu, stop.clone());
    std::thread::sleep(Duration::from_millis(50));
    let busy = pinned_run(cpu, "800ms", "50ms", dir.path());
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();

    let (a, b) = (
        count(&alone, "involuntary_context_switches"),
        count(&busy, "involuntary_context_switches"),
    );
    // Alone: (close to) none. With the competitor: about 8.
    assert!(a <= 2, "alone on cpu {cpu}: {a} involuntary switches");
    assert!(b >= 5, "with a competitor: {b} involuntary switches");
    assert!(count(&busy, "context_switches") >= b);
    // The attribution sees them: the intervals with a switch hold a
    // preempted (1 ms) round trip.
    let attr = &busy["counters"]["attribution"];
    let cs = attr["causes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["cause"] == "context_switch")
        .unwrap_or_else(|| panic!("{attr}"));
    assert!(cs["with"]["intervals"].as_u64().unwrap() >= 2, "{cs}");
    assert!(cs["with"]["max_ns"].as_u64().unwrap() >= 1_000_000, "{cs}");
    // And the outlier warning names preemption instead of guessing: from
    // the attribution when the intervals without a switch stayed clean
    // ("likely preemption: intervals with a context switch ..."), else
    // from the run's count. (On this shared VM the hypervisor now and then
    // stalls a round trip for a millisecond with no counter moving: then
    // the intervals without a switch have a max as bad, and only the count
    // can speak.)
    let w: Vec<&str> = busy["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["code"] == "max_outlier")
        .filter_map(|w| w["message"].as_str())
        .collect();
    let named_by_attribution = attr["likely_cause"] == "context_switch";
    assert!(
        w.iter().any(|m| if named_by_attribution {
            m.contains("likely preemption: intervals with a context switch")
        } else {
            m.contains("involuntary context switches (preemption)")
        }),
        "{w:?} {attr}"
    );
}

#[test]
fn page_faults_show_without_prefaulting_and_not_by_default() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cpu = shared_cpu().to_string();
    let args = ["loopback", "-t", "shm", "--cpu", &cpu, "-n", "200000"];
    let locked = run_json(ibprobe().args(args));
    let unlocked = run_json(ibprobe().args(args).arg("--no-mlock"));
    let faults = |v: &Value| count(v, "page_faults_minor") + count(v, "page_faults_major");
    // Without mlockall the histogram's buckets are first touched when a
    // latency first lands in them: in the measured part.
    assert!(faults(&unlocked) > 0, "{}", unlocked["counters"]);
    // The default run says so where mlockall is refused (RLIMIT_MEMLOCK):
    // then it is not locked, and its faults prove nothing.
    if locked.to_string().contains("mlockall failed")
        && ibtools_tests::skip(
            "page_faults_show_without_prefaulting_and_not_by_default (the locked run)",
            "mlockall is refused here (needs root, CAP_IPC_LOCK or a larger RLIMIT_MEMLOCK)",
        )
    {
        return;
    }
    assert_eq!(faults(&locked), 0, "{}", locked["counters"]);
}

#[test]
fn table_and_csv_carry_the_counters() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cpu = shared_cpu().to_string();
    let out = ibprobe()
        .args(["loopback", "-t", "shm", "--cpu", &cpu, "-n", "5000"])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("context switches ("), "{table}");
    assert!(
        table.contains(&format!("interrupts on cpu {cpu}: ")),
        "{table}"
    );
    let out = ibprobe()
        .args(["loopback", "-t", "shm", "-n", "5000", "-f", "csv"])
        .output()
        .unwrap();
    let csv = String::from_utf8_lossy(&out.stdout);
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let row: Vec<&str> = lines.next().unwrap().split(',').collect();
    let i = head.iter().position(|h| *h == "context_switches").unwrap();
    assert!(row[i].parse::<u64>().is_ok(), "{csv}");
    // --no-counters: the object is null and the cells empty.
    let off = run_json(ibprobe().args(["loopback", "-t", "shm", "-n", "2000", "--no-counters"]));
    assert!(off["counters"].is_null());
}

/// Sets kernel.perf_event_paranoid and puts the old value back on drop.
struct Paranoid(Option<String>);
const PARANOID: &str = "/proc/sys/kernel/perf_event_paranoid";
impl Paranoid {
    fn set(v: &str) -> Paranoid {
        let old = std::fs::read_to_string(PARANOID).ok();
        if std::fs::write(PARANOID, v).is_err() {
            return Paranoid(None);
        }
        Paranoid(old)
    }
}
impl Drop for Paranoid {
    fn drop(&mut self) {
        if let Some(v) = &self.0 {
            let _ = std::fs::write(PARANOID, v.trim());
        }
    }
}

/// The run `perf_counters_refused_*` make: `--perf-counters` asked.
const REFUSED_RUN: [&str; 7] = [
    "loopback",
    "-t",
    "shm",
    "-n",
    "3000",
    "--perf-counters",
    "--json",
];

/// Any user: the refusal through the test hook (`REFUSE_ENV`), which makes
/// every perf_event_open fail as an unprivileged user's would.
#[test]
fn perf_counters_refused_leave_the_run_going_with_the_kernels_accounting() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let out = ibprobe()
        .args(REFUSED_RUN)
        .env(ibnoise::counters::perf::REFUSE_ENV, "1")
        .output()
        .unwrap();
    refused_run_goes_on(&out);
}

/// A real refusal: the kernel's, for nobody at paranoid 3 (root would
/// pass any level).
#[test]
#[ignore = "needs root: sets kernel.perf_event_paranoid of this host to 3 and restores it"]
fn perf_counters_refused_as_nobody_at_paranoid_3() {
    const TEST: &str = "perf_counters_refused_as_nobody_at_paranoid_3";
    if !ibtools_tests::root_or_skip(TEST, "writes kernel.perf_event_paranoid, runs as nobody") {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let p = Paranoid::set("3");
    if p.0.is_none() {
        ibtools_tests::skip(
            TEST,
            &format!("{PARANOID} may not be written here (read-only /proc/sys)"),
        );
        return;
    }
    let bin = assert_cmd::cargo::cargo_bin("ibprobe");
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&bin)
        .args(REFUSED_RUN)
        .current_dir("/")
        .output()
        .expect("setpriv runs (util-linux)");
    drop(p);
    if out.status.code() == Some(126) || out.status.code() == Some(127) {
        let why = format!(
            "nobody cannot execute {} (a folder on its path is closed to it)",
            bin.display()
        );
        ibtools_tests::skip(TEST, &why);
        return;
    }
    refused_run_goes_on(&out);
}

/// A run whose perf events were refused: exit 0, the kernel's accounting
/// in their place, the missing counters named with why.
fn refused_run_goes_on(out: &std::process::Output) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["distributions"][0]["count"], 3000);
    // The kernel's accounting gives the switches and faults ...
    assert!(v["counters"]["context_switches"].is_u64());
    assert!(v["counters"]["page_faults_minor"].is_u64());
    // ... and the migrations where /proc/thread-self/sched exists; where
    // it does not, they are named missing with both reasons.
    let sched = std::fs::read_to_string("/proc/thread-self/sched")
        .is_ok_and(|t| t.contains("se.nr_migrations"));
    let missing = v["counters"]["missing"].as_array().unwrap();
    if sched {
        assert!(
            v["counters"]["cpu_migrations"].is_u64(),
            "{}",
            v["counters"]
        );
    } else {
        let m = missing
            .iter()
            .find(|m| m["counters"][0] == "cpu_migrations")
            .unwrap_or_else(|| panic!("cpu_migrations not named in {missing:?}"));
        assert!(m["why"]
            .as_str()
            .unwrap()
            .contains("perf_event_open refused"));
    }
    // The PMU's counters are named missing with why (no PMU, or refused).
    let hw = missing
        .iter()
        .find(|m| m["counters"][0] == "cycles")
        .unwrap_or_else(|| panic!("cycles not named in {missing:?}"));
    let why = hw["why"].as_str().unwrap();
    assert!(
        why.contains("no CPU PMU") || why.contains("perf_event_open refused"),
        "{why}"
    );
}

/// The perf events open in process `pid` (its descriptors that are
/// `anon_inode:[perf_event]`).
fn perf_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter(|l| l.to_string_lossy() == "anon_inode:[perf_event]")
                .count()
        })
        .unwrap_or(0)
}

/// The most perf events a running `ibprobe loopback ARGS` had open,
/// looked at every 20 ms while it ran; and its report.
fn perf_fds_while_running(extra: &[&str]) -> (usize, Value) {
    let mut child = ibprobe()
        .args(["loopback", "-t", "shm", "-D", "1500ms", "--json"])
        .args(extra)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut most = 0;
    while child.try_wait().unwrap().is_none() {
        most = most.max(perf_fds(child.id()));
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    (most, serde_json::from_slice(&out.stdout).unwrap())
}

#[test]
fn without_a_pmu_no_perf_event_is_open_by_default_and_the_counts_are_there() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (default_fds, v) = perf_fds_while_running(&[]);
    let allowed = nix::unistd::Uid::effective().is_root()
        || std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
            .is_ok_and(|l| l.trim().parse::<i32>().is_ok_and(|l| l <= 1));
    if !ibnoise::counters::perf::pmu_present() {
        assert_eq!(default_fds, 0, "perf events open in a default run");
    } else if allowed {
        // Where a PMU exists the default opens perf events for it.
        assert!(default_fds >= 3, "a PMU, {default_fds} perf events");
    }
    assert!(
        v["counters"]["context_switches"].is_u64(),
        "{}",
        v["counters"]
    );
    assert!(v["counters"]["page_faults_minor"].is_u64());
    if std::fs::read_to_string("/proc/thread-self/sched")
        .is_ok_and(|t| t.contains("se.nr_migrations"))
    {
        assert!(
            v["counters"]["cpu_migrations"].is_u64(),
            "{}",
            v["counters"]
        );
    }
    // --perf-counters opens them where perf_event_open is allowed (the
    // check that the looking above can see them at all).
    if allowed {
        let (asked_fds, _) = perf_fds_while_running(&["--perf-counters"]);
        assert!(
            asked_fds >= 4,
            "--perf-counters: {asked_fds} perf events seen"
        );
    }
}

#[test]
fn the_hdr_log_has_a_side_file_with_each_intervals_counters() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.hlog");
    let v = run_json(ibprobe().args([
        "loopback",
        "-t",
        "shm",
        "-D",
        "300ms",
        "--hdr-log",
        log.to_str().unwrap(),
        "--log-interval",
        "50ms",
    ]));
    let side = std::fs::read_to_string(dir.path().join("run.hlog.counters.csv")).unwrap();
    let mut lines = side.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(head[..3], ["start_s", "end_s", "samples"]);
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    // 300 ms in 50 ms intervals: several rows, fewer when this loaded
    // machine stalls the (unpinned, not real-time) probe for a while.
    assert!(rows.len() >= 2, "{side}");
    // The intervals' samples add up to the run's, and their switches to
    // at most the run's (the run also counts the last reads).
    let col = |name: &str| head.iter().position(|h| *h == name).unwrap();
    let sum = |name: &str| -> u64 {
        rows.iter()
            .map(|r| r[col(name)].parse::<u64>().unwrap())
            .sum()
    };
    assert_eq!(
        sum("samples"),
        v["distributions"][0]["count"].as_u64().unwrap()
    );
    assert!(sum("context_switches") <= count(&v, "context_switches"));
    assert!(rows.iter().all(|r| r.len() == head.len()));
    // Intervals the user asked for read every counter: the interrupts
    // too, so the attribution weighs them.
    assert!(
        rows.iter().all(|r| !r[col("interrupts")].is_empty()),
        "{side}"
    );
    assert!(
        causes(&v).contains(&"interrupt".to_string()),
        "{}",
        v["counters"]
    );
}

/// The causes the attribution weighed.
fn causes(v: &Value) -> Vec<String> {
    v["counters"]["attribution"]["causes"]
        .as_array()
        .unwrap_or_else(|| panic!("no attribution: {}", v["counters"]))
        .iter()
        .map(|c| c["cause"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn by_default_the_run_has_counters_and_no_attribution() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let v = run_json(ibprobe().args(["loopback", "-t", "shm", "-D", "300ms"]));
    assert!(
        v["counters"]["context_switches"].is_u64(),
        "{}",
        v["counters"]
    );
    assert!(v["counters"]["attribution"].is_null(), "{}", v["counters"]);
}

#[test]
fn without_an_hdr_log_the_attributions_intervals_leave_the_interrupts_out() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let v = run_json(ibprobe().args(["loopback", "-t", "shm", "-D", "400ms", "--attribution"]));
    // Every 100 ms every counter but the interrupts
    // (`Meter::read_without_interrupts`): the thread's causes are weighed,
    // the interrupts are not ...
    let c = causes(&v);
    assert!(c.contains(&"context_switch".to_string()), "{c:?}");
    assert!(c.contains(&"page_fault".to_string()), "{c:?}");
    if v["counters"]["cpu_migrations"].is_u64() {
        // /proc/thread-self/sched counts migrations here.
        assert!(c.contains(&"cpu_migration".to_string()), "{c:?}");
    }
    assert!(!c.contains(&"interrupt".to_string()), "{c:?}");
    assert!(v["counters"]["attribution"]["intervals"].as_u64().unwrap() >= 2);
    // ... while the run as a whole still counts them, by source.
    assert!(v["counters"]["interrupts"].is_u64(), "{}", v["counters"]);
    assert!(!v["counters"]["interrupts_by_source"]
        .as_array()
        .unwrap()
        .is_empty());
}
