//! `ibprobe host --trace`: the kernel's timerlat tracer, driven through
//! tracefs, which splits a wake-up into IRQ latency and thread latency
//! and, with the `osnoise:*` events, names what ran on the CPU instead:
//! `rtla timerlat`'s split in ibprobe's formats, without rtla
//! (`ibprobe/docs/methods.md`, "Wake-up split").
//!
//! How: a private tracefs instance with the `timerlat` tracer and the
//! osnoise events; the global `osnoise/cpus` and
//! `osnoise/timerlat_period_us` are written back after the run (also on
//! error and Ctrl-C: [`Session`]'s drop); each line of the instance's
//! `trace_pipe` goes to the pure [`TimerlatAccumulator`].

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::timerlat_trace::{CpuTimerlat, TimerlatAccumulator};
use super::wakeup::WakeupLength;

/// Where tracefs is looked for, in order.
pub const TRACEFS_PATHS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// How often the trace is read when it has nothing new: rarely, since the
/// kernel's formatting of it shows in the latencies measured on a host
/// short of cores (it keeps about 1.4 MB per CPU meanwhile).
pub const READ_EVERY: Duration = Duration::from_millis(250);

/// timerlat's period limits (the kernel refuses others).
pub const MIN_PERIOD: Duration = Duration::from_micros(100);
pub const MAX_PERIOD: Duration = Duration::from_secs(1);

/// What to trace.
#[derive(Clone, Debug)]
pub struct TimerlatConfig {
    /// CPUs to measure (timerlat starts one kernel thread on each).
    pub cpus: Vec<usize>,
    /// Timer period (`osnoise/timerlat_period_us`).
    pub period: Duration,
    /// Thread samples per CPU, or a duration.
    pub length: WakeupLength,
    /// `None`: the first of [`TRACEFS_PATHS`] that is mounted.
    pub tracefs: Option<PathBuf>,
    /// Trace the interference (the `osnoise:*` events) for the top sources
    /// and the worst wake-up's causes (each traced interrupt and context
    /// switch costs the kernel an event).
    pub interference: bool,
}

/// The result of a traced run.
#[derive(Clone, Debug)]
pub struct TimerlatOutcome {
    /// One entry per CPU, in the order of [`TimerlatConfig::cpus`].
    pub cpus: Vec<CpuTimerlat>,
    pub tracefs: PathBuf,
    /// Wall time of the run.
    pub elapsed_ns: u64,
    /// The stop flag (Ctrl-C) ended the run early.
    pub interrupted: bool,
    /// Trace lines that were neither comments nor known events.
    pub unparsed_lines: u64,
    /// How the run was set up.
    pub notes: Vec<String>,
}

/// Why a traced run could not start or finish.
#[derive(Debug, thiserror::Error)]
pub enum TimerlatError {
    #[error("tracefs is not mounted (looked at {}); mount it as root: `mount -t tracefs nodev /sys/kernel/tracing`", TRACEFS_PATHS.join(", "))]
    NoTracefs,
    #[error("kernel {release} has no timerlat tracer ({path} lists: {tracers}); it needs CONFIG_TIMERLAT_TRACER, which Debian's PREEMPT_RT kernels (linux-image-rt-amd64) have and its standard ones do not; `ibprobe host` without --trace measures thread wake-up latency on any kernel")]
    NoTimerlat {
        release: String,
        path: String,
        tracers: String,
    },
    #[error("cannot use tracefs at {path} ({source}); timerlat needs root: run `sudo ibprobe host --trace`")]
    Permission { path: String, source: io::Error },
    /// Someone else runs an osnoise-family tracer (`path`: its current_tracer).
    #[error("{what} already runs the {tracer} tracer (rtla or another ibprobe?); only one osnoise/timerlat user at a time: wait for it or stop it (`echo nop > {path}`)")]
    Busy {
        what: String,
        tracer: String,
        path: String,
    },
    #[error("tracefs: {path}: {source}")]
    Io { path: String, source: io::Error },
    #[error("timerlat produced no sample on cpu {cpu} in {secs:.1} s; check `{tracefs}/osnoise/cpus` and dmesg")]
    NoSamples {
        cpu: usize,
        secs: f64,
        tracefs: String,
    },
}

fn io_err(path: &Path, source: io::Error) -> TimerlatError {
    let path = path.display().to_string();
    if source.kind() == io::ErrorKind::PermissionDenied {
        TimerlatError::Permission { path, source }
    } else {
        TimerlatError::Io { path, source }
    }
}

/// Reads a small tracefs file in 4 KiB reads (osnoise/cpus on 6.1 answers
/// EINVAL to a larger first read).
fn read(path: &Path) -> Result<String, TimerlatError> {
    ibhost::file::read_pseudo(path, ibhost::file::MAX_PSEUDO_FILE).map_err(|e| io_err(path, e))
}

fn write(path: &Path, value: &str) -> Result<(), TimerlatError> {
    fs::write(path, value).map_err(|e| io_err(path, e))
}

/// The tracefs mount to use: the one given, or the first mounted one.
pub fn find_tracefs(given: Option<&Path>) -> Result<PathBuf, TimerlatError> {
    let candidates = given.map_or(TRACEFS_PATHS.map(Path::new).to_vec(), |p| vec![p]);
    let mounted = candidates
        .into_iter()
        .find(|p| p.join("available_tracers").exists());
    mounted
        .map(Path::to_path_buf)
        .ok_or(TimerlatError::NoTracefs)
}

pub fn check_timerlat(tracefs: &Path) -> Result<(), TimerlatError> {
    let path = tracefs.join("available_tracers");
    let tracers = read(&path)?;
    if tracers.split_whitespace().any(|t| t == "timerlat") {
        return Ok(());
    }
    Err(TimerlatError::NoTimerlat {
        release: ibhost::file::read_pseudo(
            "/proc/sys/kernel/osrelease",
            ibhost::file::MAX_PSEUDO_FILE,
        )
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into()),
        path: path.display().to_string(),
        tracers: tracers.trim().to_string(),
    })
}

/// Refuses when the top-level trace or another instance runs an
/// osnoise-family tracer (they share the osnoise settings).
fn check_not_busy(tracefs: &Path) -> Result<(), TimerlatError> {
    let instances = fs::read_dir(tracefs.join("instances"))
        .into_iter()
        .flatten()
        .flatten();
    let instances = instances.map(|e| {
        let what = format!("tracefs instance {}", e.file_name().to_string_lossy());
        (what, e.path())
    });
    let top = ("the top-level trace".to_string(), tracefs.to_path_buf());
    for (what, dir) in std::iter::once(top).chain(instances) {
        let path = dir.join("current_tracer");
        let tracer = read(&path)
            .map(|t| t.trim().to_string())
            .unwrap_or_default();
        if matches!(tracer.as_str(), "timerlat" | "osnoise") {
            let path = path.display().to_string();
            return Err(TimerlatError::Busy { what, tracer, path });
        }
    }
    Ok(())
}

/// The instance and the global settings of one run; dropping it stops the
/// tracer, removes the instance and writes the settings back.
struct Session {
    instance: PathBuf,
    saved: Vec<(PathBuf, String)>,
    tracer_set: bool,
}

impl Session {
    fn start(tracefs: &Path, cfg: &TimerlatConfig) -> Result<Session, TimerlatError> {
        let instance = tracefs
            .join("instances")
            .join(format!("ibprobe-timerlat-{}", std::process::id()));
        fs::create_dir(&instance).map_err(|e| io_err(&instance, e))?;
        let mut s = Session {
            instance,
            saved: Vec::new(),
            tracer_set: false,
        };
        let cpus = ibhost::cpulist::CpuSet::from_iter_u32(cfg.cpus.iter().map(|&c| c as u32));
        let period = cfg.period.as_micros().to_string();
        for (file, value) in [
            ("osnoise/cpus", cpus.to_list()),
            ("osnoise/timerlat_period_us", period),
        ] {
            let path = tracefs.join(file);
            let old = read(&path)?;
            write(&path, &value)?;
            s.saved.push((path, old.trim().to_string()));
        }
        write(&s.instance.join("tracing_on"), "0")?;
        if cfg.interference {
            write(&s.instance.join("events/osnoise/enable"), "1")?;
        }
        let tracer = s.instance.join("current_tracer");
        fs::write(&tracer, "timerlat").map_err(|e| match e.raw_os_error() {
            Some(libc::EBUSY) => TimerlatError::Busy {
                what: "another tracefs instance".into(),
                tracer: "timerlat".into(),
                path: tracer.display().to_string(),
            },
            _ => io_err(&tracer, e),
        })?;
        s.tracer_set = true;
        Ok(s)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if self.tracer_set {
            let _ = fs::write(self.instance.join("tracing_on"), "0");
            let _ = fs::write(self.instance.join("current_tracer"), "nop");
        }
        let _ = fs::write(self.instance.join("events/osnoise/enable"), "0");
        let _ = fs::remove_dir(&self.instance);
        for (path, old) in self.saved.iter().rev() {
            let _ = fs::write(path, old);
        }
    }
}

/// Runs timerlat on the CPUs of `cfg` until the count or duration is
/// reached or `stop` is set.
pub fn run(cfg: &TimerlatConfig, stop: &AtomicBool) -> Result<TimerlatOutcome, TimerlatError> {
    let tracefs = find_tracefs(cfg.tracefs.as_deref())?;
    check_timerlat(&tracefs)?;
    check_not_busy(&tracefs)?;
    let session = Session::start(&tracefs, cfg)?;
    let pipe_path = session.instance.join("trace_pipe");
    let mut pipe: File = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&pipe_path)
        .map_err(|e| io_err(&pipe_path, e))?;
    let limit = match cfg.length {
        WakeupLength::Count(n) => Some(n),
        WakeupLength::Duration(_) => None,
    };
    let mut acc = TimerlatAccumulator::new(&cfg.cpus, limit, std::process::id());
    write(&session.instance.join("tracing_on"), "1")?;
    let t0 = Instant::now();
    // A silent CPU after this long is an error, not a wait forever.
    let silence = Duration::from_secs(5).max(cfg.period * 50);
    let mut buf = vec![0u8; 256 * 1024];
    let mut pending: Vec<u8> = Vec::new();
    let interrupted = loop {
        match pipe.read(&mut buf) {
            Ok(0) => std::thread::sleep(READ_EVERY),
            Ok(n) => {
                pending.extend_from_slice(&buf[..n]);
                if let Some(end) = pending.iter().rposition(|&b| b == b'\n') {
                    for line in String::from_utf8_lossy(&pending[..end]).lines() {
                        acc.line(line);
                    }
                    pending.drain(..=end);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(READ_EVERY),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_err(&pipe_path, e)),
        }
        if acc.complete() || matches!(cfg.length, WakeupLength::Duration(d) if t0.elapsed() >= d) {
            break false;
        }
        if stop.load(Ordering::Relaxed) {
            break true;
        }
        if let Some(cpu) = acc.silent_cpu().filter(|_| t0.elapsed() > silence) {
            return Err(TimerlatError::NoSamples {
                cpu,
                secs: t0.elapsed().as_secs_f64(),
                tracefs: tracefs.display().to_string(),
            });
        }
    };
    let elapsed_ns = t0.elapsed().as_nanos() as u64;
    // The instance cannot be removed while its trace_pipe is open.
    drop(pipe);
    drop(session);
    let unparsed_lines = acc.unparsed;
    Ok(TimerlatOutcome {
        cpus: acc.finish(),
        notes: vec![format!(
            "kernel timerlat tracer through {} (a private instance; osnoise/cpus and timerlat_period_us restored after the run); timer period {:?}; the kernel's timerlat threads wake at their own SCHED_FIFO priority; {}",
            tracefs.display(),
            cfg.period,
            if cfg.interference {
                "interference traced (osnoise events; each costs the kernel a trace event: --no-interference for the lowest tracing cost)"
            } else {
                "interference not traced (--no-interference)"
            }
        )],
        tracefs,
        elapsed_ns,
        interrupted,
        unparsed_lines,
    })
}
