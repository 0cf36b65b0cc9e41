//! The steps the probing commands share, written once: CPU placement, the
//! report context, the HDR log sink, measuring and printing one run, error
//! mapping.

use std::fs::File;
use std::io::{BufWriter, Write as _};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use super::args::{MeasureArgs, TransportArgs};
use super::error::{CliError, EXIT_INTERRUPTED, EXIT_THRESHOLD};
use crate::clock::Clock;
use crate::probe::config::{Length, Mode, ProbeConfig};
use crate::probe::executor::{self, placement};
use crate::probe::open::{OpenError, OpenErrorKind};
use crate::probe::session::SessionError;
use crate::probe::workload::{Interval, Sink};
use crate::probe::Outcome;
use crate::report::counters as report_counters;
use crate::report::format::{render, Format};
use crate::report::hdrlog::HdrLogWriter;
use crate::report::progress::{phase_message, run_bar};
use crate::report::threshold::{FailIf, Threshold};
use crate::report::{Document, Report, ReportContext, ReportError};
use crate::sys::host;
use crate::transport::{Channel, TransportInfo};
use crate::verbs;
use crate::verbs::NO_DEVICE_ELSE;

/// Progress lines on stderr; a closed stderr must not kill a server.
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}
pub(crate) use say;

/// With `--transport model` in real time: a warning when a parameter is
/// below about 1 us, where busy-waits on a clock that costs tens of ns
/// to read are off by that much.
pub fn model_resolution_warning(t: &TransportArgs) -> Option<String> {
    let m = t
        .model
        .filter(|_| t.transport == crate::spec::Transport::Model)?;
    let small = m.smallest_ns();
    (small < 1000.0).then(|| format!(
        "--model has a parameter of {small:.1} ns: the real-time emulation busy-waits on a clock whose reads cost tens of ns, so below about 1 us its errors are of that order (`ibprobe loggp --simulate` is exact at any scale)"
    ))
}

pub fn warn_model_resolution(t: &TransportArgs) {
    if let Some(w) = model_resolution_warning(t) {
        say!("warning: {w}");
    }
}

/// Said before a run whose measuring thread and busy-polling `peer` can
/// only share one CPU (the process's affinity allows one): each then waits
/// a scheduler tick for the other, and the run measures the scheduler.
pub fn warn_shared_cpu(peer: &str) {
    let [only] = ibhost::rt::allowed_cpus()[..] else {
        return;
    };
    let other = if only == 0 { 1 } else { only - 1 };
    say!(
        "warning: this process may run on CPU {only} only (its affinity: a cpuset, a container or taskset), so the measuring thread and the {peer} share it and each waits a scheduler tick for the other (a stream measured about 7x slower so); allow a second CPU (e.g. taskset -c {lo},{hi}, or two CPUs in the cpuset) to measure the transport",
        lo = other.min(only),
        hi = other.max(only),
    );
}

/// The CPUs of a stream's two loops (sending, then receiving), chosen
/// before this thread is pinned (which narrows what it may use); in
/// `loopback`, a warning when they can only share one CPU.
pub fn stream_placement(
    t: &TransportArgs,
    rx_cpu: Option<usize>,
    loopback: bool,
) -> (Option<usize>, Option<usize>) {
    if loopback {
        warn_shared_cpu("receiving thread");
    }
    placement(default_cpu(t), rx_cpu, hca_irq_cpus(t).as_deref())
}

/// `--stamp-thread`: the warning when no allowed CPU is left for the
/// stamping thread beside the loops on `taken` (it then shares one with a
/// spinning loop).
pub fn stamp_cpu_warning(allowed: &[usize], taken: &[Option<usize>]) -> Option<String> {
    if crate::probe::executor::stamp::free_cpu_in(allowed, taken).is_some() {
        return None;
    }
    let on: Vec<String> = taken.iter().flatten().map(|c| c.to_string()).collect();
    Some(format!(
        "--stamp-thread: no CPU is left for the stamping thread (this process may run on {}; the loops are on {}), so it shares a CPU with a spinning loop and each waits a scheduler tick for the other: stamps go stale and fewer messages are split; allow one more CPU (taskset, the cpuset) than the loops take",
        ibhost::CpuSet::from_iter_u32(allowed.iter().map(|&c| c as u32)).to_list(),
        if on.is_empty() { "unpinned CPUs".to_string() } else { format!("CPU {}", on.join(" and ")) }
    ))
}

/// A channel that could not be opened: exit 2 for refusals (bad input,
/// no device), 3 for failures.
pub fn open_err(e: OpenError) -> CliError {
    if e.kind == OpenErrorKind::NoDevice {
        return CliError::input(format!("{}; {NO_DEVICE_ELSE}", e.message));
    }
    CliError::input_if(e.is_input(), e.message)
}

/// A handshake that failed: exit 2 when the input was at fault (the peer
/// or this end refused the configuration), 3 otherwise.
pub fn session_err(e: SessionError) -> CliError {
    CliError::input_if(e.is_input(), e.detail)
}

/// The CPU to pin to: `--cpu` when given, else for verbs one local to the
/// device ([`hca_local_cpu`]), else none.
pub fn default_cpu(t: &TransportArgs) -> Option<usize> {
    match (t.cpu, t.transport.qp_type()) {
        (None, Some(_)) => hca_local_cpu(t.verbs.dev.as_deref()),
        (c, _) => c,
    }
}

/// The default `--cpu` for verbs: one of the device's NUMA node, CPU 0
/// (housekeeping) last; `None` when the device does not say (e.g. rxe).
pub fn hca_local_cpu(dev: Option<&str>) -> Option<usize> {
    let d = device(dev)?;
    let allowed = host::allowed_cpus();
    let local: Vec<usize> = ibhost::cpulist::parse_list_ordered(d.local_cpus.as_deref()?)
        .ok()?
        .into_iter()
        .filter(|c| allowed.contains(c))
        .collect();
    local.iter().find(|&&c| c != 0).or(local.first()).copied()
}

/// The device `dev` names, else the first with an active port.
fn device(dev: Option<&str>) -> Option<verbs::DeviceInfo> {
    let list = verbs::devices().ok()?;
    match dev {
        Some(n) => list.into_iter().find(|d| d.name == n),
        None => list
            .into_iter()
            .find(|d| d.ports.iter().any(|p| p.state == "active")),
    }
}

/// The CPUs that take the interrupts of the verbs device of `t` (its MSI
/// vectors' affinity in /proc/irq): where a stream's default placement
/// keeps its busy-polling threads away from. `None` when not verbs; empty
/// when the device has none of its own (rxe) or they cannot be read.
fn hca_irq_cpus(t: &TransportArgs) -> Option<Vec<usize>> {
    t.transport.qp_type()?;
    let irqs = device(t.verbs.dev.as_deref()).and_then(|d| {
        std::fs::read_dir(format!("/sys/class/infiniband/{}/device/msi_irqs", d.name)).ok()
    });
    let Some(irqs) = irqs else {
        return Some(Vec::new());
    };
    let mut cpus: Vec<usize> = irqs
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|irq| {
            let read = |f: &str| {
                ibhost::file::read_pseudo(format!("/proc/irq/{irq}/{f}"), 4096)
                    .ok()
                    .filter(|s| !s.trim().is_empty())
            };
            let list = read("effective_affinity_list").or_else(|| read("smp_affinity_list"))?;
            ibhost::cpulist::parse_list_ordered(list.trim()).ok()
        })
        .flatten()
        .collect();
    cpus.sort_unstable();
    cpus.dedup();
    Some(cpus)
}

/// Writes every interval to an HDR log (off the fast path: between messages).
struct HdrSink {
    log: HdrLogWriter<BufWriter<File>>,
    tag: &'static str,
    error: Option<ReportError>,
    /// `FILE.counters.csv`: the counters of each interval (opened at the
    /// first interval that has them).
    counters_path: PathBuf,
    counters: Option<BufWriter<File>>,
}

impl HdrSink {
    fn create(m: &MeasureArgs, mode: Mode, comment: &str) -> Result<Option<HdrSink>, CliError> {
        let Some(path) = &m.hdr_log else {
            return Ok(None);
        };
        let log = HdrLogWriter::create(path, comment)
            .map_err(|e| CliError::input(format!("--hdr-log {}: {e}", path.display())))?;
        let mut counters_path = path.as_os_str().to_owned();
        counters_path.push(".counters.csv");
        let one_way = mode == Mode::OneWay;
        Ok(Some(HdrSink {
            log,
            tag: if one_way { "one_way" } else { "rtt" },
            error: None,
            counters_path: counters_path.into(),
            counters: None,
        }))
    }

    /// Appends the interval's counters to the side file.
    fn counters_row(&mut self, iv: &Interval<'_>) -> Result<(), ReportError> {
        let Some(c) = iv.counters else {
            return Ok(());
        };
        let io = |source| ReportError::Io {
            path: self.counters_path.display().to_string(),
            source,
        };
        let f = match &mut self.counters {
            Some(f) => f,
            None => {
                let mut f = BufWriter::new(File::create(&self.counters_path).map_err(io)?);
                writeln!(f, "{}", report_counters::interval_csv_header()).map_err(io)?;
                self.counters.insert(f)
            }
        };
        let row = report_counters::interval_csv_row(iv.start_ns, iv.end_ns, iv.primary, c);
        writeln!(f, "{row}").map_err(io)
    }

    /// Ends the log and the side file; the first error of the run's, if any.
    fn finish(self) -> Result<(), CliError> {
        let failed = |e| CliError::run(format!("--hdr-log: {e}"));
        if let Some(e) = self.error {
            return Err(failed(e));
        }
        self.log.finish().map_err(failed)?;
        let path = self.counters_path.display();
        let flush = self.counters.map_or(Ok(()), |mut f| f.flush());
        flush.map_err(|e| CliError::run(format!("--hdr-log {path}: {e}")))
    }
}

impl Sink for HdrSink {
    fn interval(&mut self, iv: &Interval<'_>) {
        if self.error.is_some() {
            return;
        }
        let log = &mut self.log;
        let mut r = log.write_interval(self.tag, iv.primary, iv.start_ns, iv.end_ns);
        if r.is_ok() && !iv.send_done.is_empty() {
            r = log.write_interval("send_completion", iv.send_done, iv.start_ns, iv.end_ns);
        }
        if let Err(e) = r.and_then(|_| self.counters_row(iv)) {
            self.error = Some(e);
        }
    }
}

/// What a measured run's intervals feed: the `--hdr-log` sink and the
/// progress bar, if shown (a hidden one is not touched: no lock for nothing).
struct RunSink<'a> {
    hdr: Option<&'a mut HdrSink>,
    bar: Option<&'a indicatif::ProgressBar>,
    /// The bar counts ms of a `--duration` (else messages).
    by_time: bool,
    /// Messages of the intervals so far.
    sent: u64,
}

impl Sink for RunSink<'_> {
    fn interval(&mut self, iv: &Interval<'_>) {
        if let Some(h) = self.hdr.as_deref_mut() {
            h.interval(iv);
        }
        self.sent += iv.sent;
        if let Some(b) = self.bar {
            b.set_position(if self.by_time {
                iv.end_ns / 1_000_000
            } else {
                self.sent
            });
        }
    }

    fn measuring(&mut self) {
        if let Some(b) = self.bar {
            b.set_message(phase_message(None));
        }
    }
}

/// The run's settings as the report's `config` pairs.
fn config_echo(cfg: &ProbeConfig, t: &TransportArgs) -> Vec<(String, String)> {
    let length = match cfg.length {
        Length::Count(n) => ("count", n.to_string()),
        Length::Duration(d) => ("duration", format!("{d:?}")),
    };
    let delay = Some(cfg.consume_delay).filter(|d| !d.is_zero());
    [
        Some(("transport", t.transport.name().to_string())),
        Some(("size", cfg.size.to_string())),
        Some(length),
        Some(("warmup", cfg.warmup.to_string())),
        cfg.rate_hz.map(|r| ("rate_hz", r.to_string())),
        cfg.burst.map(|b| ("burst", b.to_string())),
        cfg.pause.map(|p| ("pause", format!("{p:?}"))),
        Some(("cpu", cfg.cpu.map_or("unpinned".into(), |c| c.to_string()))),
        Some(("timeout", format!("{:?}", cfg.timeout))),
        delay.map(|d| ("consume_delay", format!("{d:?}"))),
    ]
    .into_iter()
    .flatten()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The report context of one run: its settings echoed, and a warning when
/// the probe is not pinned to a CPU.
pub fn report_context(
    cfg: &ProbeConfig,
    t: &TransportArgs,
    mode: crate::report::Mode,
    info: TransportInfo,
    clock: Clock,
) -> ReportContext {
    let mut ctx = ReportContext::new(mode, info, clock, cfg.size as u64);
    ctx.config = config_echo(cfg, t);
    if cfg.cpu.is_none() {
        ctx.warnings
            .push("not pinned to a CPU (--cpu): migrations may show in the tail".into());
    }
    ctx
}

/// What runs between the probe and its report (the client's
/// `--hw-timestamps` exchange with the server: `session::hw_finish`).
pub type AfterRun<'a> = &'a mut dyn FnMut(&mut Outcome) -> Result<(), CliError>;

/// Runs the probe on `ch`, then `after_run` on its outcome, and prints its
/// report; the exit code or error.
#[allow(clippy::too_many_arguments)]
pub fn measure_and_print(
    cfg: &ProbeConfig,
    m: &MeasureArgs,
    t: &TransportArgs,
    ch: &mut dyn Channel,
    report_mode: crate::report::Mode,
    stop: &AtomicBool,
    clock: Clock,
    fail_if: &[Threshold],
    after_run: Option<AfterRun<'_>>,
) -> Result<(Outcome, u8), CliError> {
    let info = ch.info();
    let mut sink = HdrSink::create(m, cfg.mode, &format!("{} {} B", info.detail, cfg.size))?;
    let (bar, by_time) = run_bar(m.quiet, cfg.length, cfg.warmup);
    let mut run_sink = RunSink {
        hdr: sink.as_mut(),
        bar: (!bar.is_hidden()).then_some(&bar),
        by_time,
        sent: 0,
    };
    let result = executor::run(cfg, ch, &clock, stop, Some(&mut run_sink));
    bar.finish_and_clear();
    let mut outcome =
        result.map_err(|e| CliError::run(format!("{} probe failed: {e}", t.transport.name())))?;
    if let Some(f) = after_run {
        f(&mut outcome)?;
    }
    let ctx = report_context(cfg, t, report_mode, info, clock);
    let mut report = Report::new(&outcome, ctx);
    if !fail_if.is_empty() {
        report.fail_if = Some(FailIf::check(fail_if, &report));
    }
    print!("{}", report.render(m.format()));
    if let Some(s) = sink {
        s.finish()?;
    }
    let hist = outcome.one_way.as_ref().or(outcome.rtt.as_ref());
    if let (Some(path), Some(h)) = (&m.plot, hist) {
        let title = format!("ibprobe {} {} B", t.transport.name(), cfg.size);
        crate::report::plot::write_svg(path, &title, h)
            .map_err(|e| CliError::run(format!("--plot: {e}")))?;
    }
    let failed = report.fail_if.as_ref().is_some_and(FailIf::failed);
    let code = exit_code(outcome.interrupted, failed);
    Ok((outcome, code))
}

/// The exit code of a run that printed its report: Ctrl-C (130) before a
/// threshold that holds (4): an interrupted run's figures are partial.
pub fn exit_code(interrupted: bool, threshold_holds: bool) -> u8 {
    if interrupted {
        EXIT_INTERRUPTED
    } else if threshold_holds {
        EXIT_THRESHOLD
    } else {
        0
    }
}

/// Every pair of `a` x `b`, `a` outer (nested, for the axes of a grid).
pub fn product<'b, A: Copy + 'b, B: Copy>(
    a: impl IntoIterator<Item = A> + 'b,
    b: &'b [B],
) -> impl Iterator<Item = (A, B)> + 'b {
    a.into_iter()
        .flat_map(move |x| b.iter().map(move |&y| (x, y)))
}

/// The flag SIGINT (Ctrl-C) and SIGTERM set: every loop checks it and
/// leaves through the orderly path, so what the command made (a server's
/// shm ring file) is undone by its owner's Drop.
pub fn stop_flag() -> Result<&'static AtomicBool, CliError> {
    host::stop_signal_flag().map_err(|e| {
        CliError::run(format!(
            "cannot install the SIGINT/SIGTERM handler (sigaction: {e}); without it a signal would end the run without cleaning up, so it does not start"
        ))
    })
}

/// Prints a command's report in `format`; a format the report has no
/// data for is bad input (exit 2), said in one line.
pub fn print_report(report: &dyn Document, format: Format) -> Result<(), CliError> {
    print!(
        "{}",
        render(report, format).map_err(|e| CliError::input(e.to_string()))?
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::stamp_cpu_warning;

    /// `--stamp-thread` warns only when the loops leave no allowed CPU,
    /// naming the CPUs and what to do.
    #[test]
    fn the_stamping_thread_is_warned_of_when_no_cpu_is_left() {
        assert_eq!(stamp_cpu_warning(&[0, 1, 2], &[Some(1), Some(2)]), None);
        assert_eq!(stamp_cpu_warning(&[4, 5], &[Some(5), None]), None);
        let w = stamp_cpu_warning(&[0, 1], &[Some(0), Some(1)]).unwrap();
        assert!(
            w.contains("may run on 0-1") && w.contains("CPU 0 and 1") && w.contains("one more CPU"),
            "{w}"
        );
        let w = stamp_cpu_warning(&[3], &[None, Some(3)]).unwrap();
        assert!(w.contains("may run on 3") && w.contains("CPU 3"), "{w}");
    }
}
