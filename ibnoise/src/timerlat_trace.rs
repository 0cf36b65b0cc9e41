//! Pure reading of the kernel's timerlat tracer output: one trace line ->
//! one [`TraceEvent`], and per CPU ([`TimerlatAccumulator`]) the IRQ and
//! thread latency distributions, the interference sources (osnoise
//! events) and what ran while the worst thread wake-up waited. Apart from
//! `timerlat.rs` (tracefs, root only) so that it is tested on lines copied
//! from a real PREEMPT_RT kernel: the kernel's `trace_osnoise.c` and
//! `include/trace/events/osnoise.h` formats, after the usual
//! `TASK-PID [CPU] FLAGS TIMESTAMP:` prefix:
//! ```text
//! <idle>-0     [000] d..h1..  11.711089: #4     context    irq timer_latency     39200 ns
//! timerlat/0-200 [000] ....... 11.711530: #4     context thread timer_latency    720670 ns
//! <idle>-0     [001] dn.h2..  15.562259: irq_noise: local_timer:236 start 15.562137318 duration 81631 ns
//! kworker/1:1-30 [001] d..2.  15.6: thread_noise: kworker/1:1:30 start 15.5 duration 2100 ns
//! CPU:1 [LOST 120 EVENTS]
//! ```

use std::collections::VecDeque;

use ibstats::latency::LatencyHistogram;

ibhost::vocabulary! {
    no_from_str
    /// Which part of one timer activation a latency line measures, as the
    /// line's `context` word names it.
    Context {
        Irq = "irq", "From the timer's expiry to its IRQ handler.";
        Thread = "thread", "From the timer's expiry to the timerlat thread running (the IRQ part included).";
        UserRet = "user-ret", "To the return to user space (kernels with timerlat's user-space mode); read and ignored.";
    }
}

ibhost::vocabulary! {
    no_from_str
    /// The kind of an interference (osnoise) event; its name is the word
    /// the reports use and, with `_noise`, the trace event's.
    NoiseKind {
        Irq = "irq", "A hardware interrupt handler.";
        Softirq = "softirq", "A softirq.";
        Thread = "thread", "Another thread ran on the CPU.";
        Nmi = "nmi", "A non-maskable interrupt.";
    }
}

/// One parsed trace line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceEvent<'a> {
    /// A timerlat latency sample, at the line's trace timestamp; `seq` is
    /// the activation number on that CPU (`#N`), which pairs IRQ and thread.
    Latency {
        cpu: usize,
        ts_ns: u64,
        seq: u64,
        context: Context,
        latency_ns: u64,
    },
    /// An interference event (the `osnoise:*` trace events): what it was
    /// (`local_timer:236`, `kworker/1:1:30`, `TIMER:1`), when it started
    /// (trace clock), how long.
    Noise {
        cpu: usize,
        kind: NoiseKind,
        source: &'a str,
        start_ns: u64,
        duration_ns: u64,
    },
    /// The kernel dropped events of a CPU's buffer (the reader was late).
    Lost { cpu: usize, events: u64 },
}

/// "12.345678" (seconds, any number of decimals up to 9) -> ns.
fn seconds_to_ns(s: &str) -> Option<u64> {
    let (sec, frac) = s.split_once('.').unwrap_or((s, ""));
    if frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let sec: u64 = sec.parse().ok()?;
    // At most 9 digits (checked above): the parse fails only when empty.
    let ns = frac.parse::<u64>().unwrap_or(0) * 10u64.pow(9 - frac.len() as u32);
    sec.checked_mul(1_000_000_000)?.checked_add(ns)
}

/// Splits the `TASK-PID [CPU] FLAGS TIMESTAMP: ` prefix off a line: the
/// CPU, the timestamp (ns) and the rest. The task name may hold spaces
/// and brackets, so the CPU is the first `[digits]` followed by a space.
fn split_prefix(line: &str) -> Option<(usize, u64, &str)> {
    let mut from = 0;
    let (cpu, after) = loop {
        let open = from + line[from..].find('[')?;
        let close = open + line[open..].find(']')?;
        let inner = &line[open + 1..close];
        if !inner.is_empty()
            && inner.bytes().all(|b| b.is_ascii_digit())
            && line[close + 1..].starts_with(' ')
        {
            break (inner.parse().ok()?, &line[close + 1..]);
        }
        from = open + 1;
    };
    let [_flags, ts] = words(after);
    let ts = ts.strip_suffix(':')?;
    let ts_ns = seconds_to_ns(ts)?;
    let rest_at = after.find(ts)? + ts.len() + 1;
    Some((cpu, ts_ns, after[rest_at..].trim()))
}

/// The first `N` words of `s` ("" past its end).
fn words<const N: usize>(s: &str) -> [&str; N] {
    let mut w = s.split_whitespace();
    std::array::from_fn(|_| w.next().unwrap_or(""))
}

/// `#4     context    irq timer_latency     39200 ns`
fn parse_latency(cpu: usize, ts_ns: u64, rest: &str) -> Option<TraceEvent<'_>> {
    let [seq, "context", context, "timer_latency", latency, "ns"] = words(rest) else {
        return None;
    };
    Some(TraceEvent::Latency {
        cpu,
        ts_ns,
        seq: seq.strip_prefix('#')?.parse().ok()?,
        context: *Context::ALL.iter().find(|c| c.name() == context)?,
        latency_ns: latency.parse().ok()?,
    })
}

/// `irq_noise: local_timer:236 start 15.562137318 duration 81631 ns`
fn parse_noise(cpu: usize, rest: &str) -> Option<TraceEvent<'_>> {
    let (event, body) = rest.split_once(": ")?;
    let event = event.strip_suffix("_noise")?;
    let kind = *NoiseKind::ALL.iter().find(|k| k.name() == event)?;
    // nmi_noise has no source: "start X duration Y ns".
    let (source, tail) = match body.find(" start ") {
        Some(i) => (body[..i].trim(), &body[i + 1..]),
        None if body.starts_with("start ") => ("nmi", body),
        None => return None,
    };
    let ["start", start, "duration", duration, "ns"] = words(tail) else {
        return None;
    };
    Some(TraceEvent::Noise {
        cpu,
        kind,
        source,
        start_ns: seconds_to_ns(start)?,
        duration_ns: duration.parse().ok()?,
    })
}

/// `CPU:1 [LOST 120 EVENTS]`
fn parse_lost(line: &str) -> Option<TraceEvent<'_>> {
    let (cpu, rest) = line.trim().strip_prefix("CPU:")?.split_once(' ')?;
    let n = rest.trim().strip_prefix("[LOST ")?;
    let events = n.strip_suffix(" EVENTS]")?.parse().ok()?;
    let cpu = cpu.parse().ok()?;
    Some(TraceEvent::Lost { cpu, events })
}

/// Reads one trace line; `None` for comments, other events and anything
/// that does not parse (the reader counts those).
pub fn parse_line(line: &str) -> Option<TraceEvent<'_>> {
    if line.starts_with('#') || line.trim().is_empty() {
        return None;
    }
    parse_lost(line).or_else(|| {
        let (cpu, ts_ns, rest) = split_prefix(line)?;
        parse_latency(cpu, ts_ns, rest).or_else(|| parse_noise(cpu, rest))
    })
}

/// One interference source on a CPU, summed over a run (or over one
/// sample's window).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct NoiseSource {
    pub kind: NoiseKind,
    /// What it was (the trace event's own words: `local_timer:236`).
    pub source: String,
    /// How many times it ran, its total and its longest time on the CPU.
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    /// It is ibprobe's own trace reader (a thread of this process): the
    /// measurement's cost, to be kept off the measured CPUs.
    pub ours: bool,
}

/// The worst thread wake-up of a CPU and what ran on the CPU while it
/// waited (the interference whose run overlaps the window from the timer's
/// expiry to the thread's wake-up).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct WorstWakeup {
    pub thread_ns: u64,
    /// IRQ latency of the same activation (None when its line was lost).
    pub irq_ns: Option<u64>,
    /// Trace timestamp of the thread's wake-up.
    pub at_ns: u64,
    /// Interference inside the window, longest first; the time of each
    /// counts only the part inside the window.
    pub blocking: Vec<NoiseSource>,
}

/// One CPU's accumulated run: its IRQ and thread latencies.
#[derive(Clone, Debug, Default)]
pub struct CpuTimerlat {
    pub cpu: usize,
    pub irq: LatencyHistogram,
    pub thread: LatencyHistogram,
    /// Interference on this CPU during the run, most total time first
    /// (after [`TimerlatAccumulator::finish`]).
    pub sources: Vec<NoiseSource>,
    pub worst: Option<WorstWakeup>,
    pub lost_events: u64,
}

/// Interference events kept per CPU for the worst-sample window (a
/// wake-up later than this many events' worth is attributed to the last
/// ones only).
const RECENT_NOISE: usize = 256;

/// A noise event remembered for the window of a later thread sample.
#[derive(Debug)]
struct RecentNoise {
    ours: bool,
    kind: NoiseKind,
    source: String,
    start_ns: u64,
    duration_ns: u64,
}

/// Per-CPU state while lines stream in.
#[derive(Debug)]
struct CpuState {
    run: CpuTimerlat,
    /// (sequence number, latency) of the last IRQ sample.
    last_irq: Option<(u64, u64)>,
    recent: VecDeque<RecentNoise>,
}

/// Builds each measured CPU's [`CpuTimerlat`] from trace lines: samples of
/// other CPUs are ignored, and each CPU stops recording after `limit`
/// thread samples (the `--count` of a run). A CPU's thread samples count
/// from its first IRQ sample on: the tracer runs before tracing is
/// switched on, so the first activation traced may be a thread event
/// whose IRQ event came while tracing was still off, and both
/// distributions must cover the same activations.
#[derive(Debug)]
pub struct TimerlatAccumulator {
    cpus: Vec<CpuState>,
    limit: Option<u64>,
    own_pid: u32,
    pub unparsed: u64,
}

/// The thread id at the end of a thread noise source (`comm:pid`).
fn thread_pid(source: &str) -> Option<u32> {
    source.rsplit_once(':')?.1.parse().ok()
}

fn add_source(list: &mut Vec<NoiseSource>, kind: NoiseKind, source: &str, ns: u64, ours: bool) {
    match list
        .iter_mut()
        .find(|s| s.kind == kind && s.source == source)
    {
        Some(s) => {
            s.count += 1;
            s.total_ns += ns;
            s.max_ns = s.max_ns.max(ns);
        }
        None => list.push(NoiseSource {
            kind,
            source: source.to_string(),
            count: 1,
            total_ns: ns,
            max_ns: ns,
            ours,
        }),
    }
}

/// Whether thread `tid` belongs to process `pid` (/proc/PID/task/TID).
fn is_thread_of(tid: u32, pid: u32) -> bool {
    pid != 0 && std::path::Path::new(&format!("/proc/{pid}/task/{tid}")).exists()
}

fn by_total_time(list: &mut [NoiseSource]) {
    list.sort_by(|a, b| (b.total_ns, &a.source).cmp(&(a.total_ns, &b.source)));
}

impl TimerlatAccumulator {
    /// An accumulator for these CPUs; `limit` thread samples per CPU;
    /// thread noise of process `own_pid` is marked as ours.
    pub fn new(cpus: &[usize], limit: Option<u64>, own_pid: u32) -> Self {
        TimerlatAccumulator {
            cpus: cpus
                .iter()
                .map(|&cpu| CpuState {
                    run: CpuTimerlat {
                        cpu,
                        ..Default::default()
                    },
                    last_irq: None,
                    recent: VecDeque::with_capacity(RECENT_NOISE),
                })
                .collect(),
            limit,
            own_pid,
            unparsed: 0,
        }
    }

    fn state(&mut self, cpu: usize) -> Option<&mut CpuState> {
        let limit = self.limit;
        self.cpus
            .iter_mut()
            .find(|s| s.run.cpu == cpu)
            .filter(|s| limit.is_none_or(|n| s.run.thread.len() < n))
    }

    pub fn line(&mut self, line: &str) {
        match parse_line(line) {
            Some(e) => self.event(e),
            None if !line.starts_with('#') && !line.trim().is_empty() => self.unparsed += 1,
            None => {}
        }
    }

    pub fn event(&mut self, e: TraceEvent<'_>) {
        match e {
            TraceEvent::Lost { cpu, events } => {
                if let Some(s) = self.cpus.iter_mut().find(|s| s.run.cpu == cpu) {
                    s.run.lost_events += events;
                }
            }
            TraceEvent::Noise {
                cpu,
                kind,
                source,
                start_ns,
                duration_ns,
            } => {
                let pid = thread_pid(source).filter(|_| kind == NoiseKind::Thread);
                // The idle task (pid 0) is reported as thread noise by
                // some kernels; an idle CPU is not interference.
                if pid == Some(0) {
                    return;
                }
                // Threads of this process carry their thread id, not the
                // process id: compare with the process's thread group.
                let ours = pid.is_some_and(|p| p == self.own_pid || is_thread_of(p, self.own_pid));
                let Some(s) = self.state(cpu) else { return };
                add_source(&mut s.run.sources, kind, source, duration_ns, ours);
                if s.recent.len() == RECENT_NOISE {
                    s.recent.pop_front();
                }
                s.recent.push_back(RecentNoise {
                    kind,
                    source: source.to_string(),
                    start_ns,
                    duration_ns,
                    ours,
                });
            }
            TraceEvent::Latency {
                cpu,
                ts_ns,
                seq,
                context,
                latency_ns,
            } => {
                let Some(s) = self.state(cpu) else { return };
                match context {
                    Context::Irq => {
                        s.run.irq.record(latency_ns);
                        s.last_irq = Some((seq, latency_ns));
                    }
                    // Before this CPU's first IRQ sample: its IRQ was not traced.
                    Context::Thread if s.last_irq.is_none() => {}
                    Context::Thread => {
                        s.run.thread.record(latency_ns);
                        let worst = s.run.worst.as_ref();
                        if worst.is_none_or(|w| latency_ns > w.thread_ns) {
                            let irq_ns = s.last_irq.filter(|&(q, _)| q == seq).map(|(_, v)| v);
                            s.run.worst = Some(WorstWakeup {
                                thread_ns: latency_ns,
                                irq_ns,
                                at_ns: ts_ns,
                                blocking: blocking(&s.recent, ts_ns, latency_ns),
                            });
                        }
                    }
                    Context::UserRet => {}
                }
            }
        }
    }

    /// Whether every CPU has its `limit` thread samples (never without one).
    pub fn complete(&self) -> bool {
        self.limit
            .is_some_and(|n| self.cpus.iter().all(|s| s.run.thread.len() >= n))
    }

    /// The first CPU without a thread sample yet, if any.
    pub fn silent_cpu(&self) -> Option<usize> {
        self.cpus
            .iter()
            .find(|s| s.run.thread.is_empty())
            .map(|s| s.run.cpu)
    }

    /// The per-CPU results, in the order the CPUs were given.
    pub fn finish(self) -> Vec<CpuTimerlat> {
        let finished = |mut s: CpuState| {
            by_total_time(&mut s.run.sources);
            s.run
        };
        self.cpus.into_iter().map(finished).collect()
    }
}

/// The interference overlapping `[at - latency, at]`, each counted for its
/// part inside that window, longest first. The trace's line timestamps
/// have microsecond resolution, so the window is widened by 1 us each side.
fn blocking(recent: &VecDeque<RecentNoise>, at_ns: u64, latency_ns: u64) -> Vec<NoiseSource> {
    let from = at_ns.saturating_sub(latency_ns).saturating_sub(1_000);
    let to = at_ns + 1_000;
    let mut out = Vec::new();
    for n in recent {
        let (a, b) = (n.start_ns, n.start_ns.saturating_add(n.duration_ns));
        let overlap = b.min(to).saturating_sub(a.max(from));
        if overlap > 0 {
            add_source(&mut out, n.kind, &n.source, overlap, n.ours);
        }
    }
    by_total_time(&mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_convert_exactly() {
        assert_eq!(seconds_to_ns("1.5"), Some(1_500_000_000));
        assert_eq!(seconds_to_ns("0.000000001"), Some(1));
        assert_eq!(seconds_to_ns("12"), Some(12_000_000_000));
        assert_eq!(seconds_to_ns("1.0000000001"), None);
        assert_eq!(seconds_to_ns("1.-5"), None);
    }
}
