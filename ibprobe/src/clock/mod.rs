//! The probe's clock: latency is a difference of two timestamps, so every
//! timestamp of a run comes from one [`Clock`], read cheaply (the read is
//! inside the measurement) and converted to nanoseconds in fixed point
//! (`ns = ticks * mult >> 32`: no division in the hot path) with a factor
//! calibrated against CLOCK_MONOTONIC_RAW, never /proc/cpuinfo's MHz
//! (perftest's flaw). How `auto` ([`Clock::calibrate`]) chooses the TSC or
//! CLOCK_MONOTONIC_RAW and says why: `ibprobe/docs/methods.md`, "The
//! clock". Every clock also knows its resolution; a latency within
//! [`RESOLUTION_TICKS`] steps of it is barely resolved: reports warn there.

pub mod hca;
pub mod hwts;

use crate::sys::tsc;
use serde::Serialize;

/// Number of calibration windows; the median frequency is kept.
pub const CALIBRATION_WINDOWS: usize = 5;
/// Length of one calibration window, ms (5 x 20 ms = about 0.1 s at start-up).
pub const CALIBRATION_WINDOW_MS: u64 = 20;
/// Largest spread (max - min over median) of the per-window frequencies
/// accepted, in parts per million (1000 ppm = 0.1%).
pub const CALIBRATION_MAX_SPREAD_PPM: f64 = 1000.0;

/// Back-to-back reads that measure a clock's resolution (about 20 us with
/// the TSC, a few ms where clock_gettime is a system call).
pub const RESOLUTION_READS: usize = 1000;
/// A latency at most this many resolution steps is "at the clock's
/// resolution": its last step alone is 10% of it or more.
pub const RESOLUTION_TICKS: f64 = 10.0;

/// Fixed-point shift of the tick/ns conversion factors.
const SHIFT: u32 = 32;

/// Which clock a run used, for the report.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ClockKind {
    /// rdtsc at its measured frequency, calibrated against
    /// CLOCK_MONOTONIC_RAW.
    Tsc { hz: f64 },
    /// clock_gettime(CLOCK_MONOTONIC_RAW).
    MonotonicRaw,
}

/// How the TSC frequency was measured, so a report can state the clock's
/// own uncertainty next to the latencies it produced.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Calibration {
    /// Median of the per-window frequencies, Hz.
    pub hz: f64,
    pub windows: u32,
    /// Length of each window, ns (by CLOCK_MONOTONIC_RAW).
    pub window_ns: u64,
    /// Spread of the per-window frequencies, (max - min) / median, in ppm:
    /// the calibration error estimate a report prints.
    pub spread_ppm: f64,
}

ibhost::vocabulary! {
    no_from_str
    /// Why [`Clock::calibrate`] did not use the TSC, for the report's
    /// warnings: its name in JSON, and one sentence naming what was wrong
    /// and what the user can do (`help`).
    Fallback {
        NoTsc = "no_tsc", "no TSC on this architecture; timestamps use clock_gettime(CLOCK_MONOTONIC_RAW) (~20-30 ns per read)";
        NoCpuinfo = "no_cpuinfo", "/proc/cpuinfo is unreadable, so the TSC cannot be checked; using clock_gettime(CLOCK_MONOTONIC_RAW)";
        NoConstantTsc = "no_constant_tsc", "CPU flags lack constant_tsc (TSC rate follows frequency scaling); using clock_gettime(CLOCK_MONOTONIC_RAW)";
        NoNonstopTsc = "no_nonstop_tsc", "CPU flags lack nonstop_tsc (TSC may stop in deep C-states); using clock_gettime(CLOCK_MONOTONIC_RAW)";
        UnstableCalibration = "unstable_calibration", "TSC calibration windows disagreed by more than 0.1% (VM or throttling?); using clock_gettime(CLOCK_MONOTONIC_RAW)";
    }
}

/// What one read of each clock costs on this host, and whether
/// clock_gettime is a system call here, measured by [`ReadCosts::measure`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ReadCosts {
    /// ns per rdtsc (None without a TSC).
    pub tsc_ns: Option<f64>,
    /// ns per clock_gettime(CLOCK_MONOTONIC_RAW).
    pub monotonic_ns: f64,
    /// The kernel's current clocksource, "other" when not one this module
    /// knows, "?" when unreadable.
    pub clocksource: &'static str,
    /// clock_gettime enters the kernel here (see [`ReadCosts::classify`]).
    pub monotonic_is_syscall: bool,
}

/// Clocksources this module knows, and whether clock_gettime reads them
/// by a system call (no vDSO mode since Linux 5.6) or in user space (the
/// vDSO).
const CLOCKSOURCES: [(&str, bool); 9] = [
    ("tsc", false),
    ("kvm-clock", false),
    ("hyperv_clocksource_tsc_page", false),
    ("arch_sys_counter", false),
    ("hpet", true),
    ("acpi_pm", true),
    ("jiffies", true),
    ("refined-jiffies", true),
    ("pit", true),
];

impl ReadCosts {
    /// Times each clock: the cheapest of 5 batches of 1000 reads (a few ms
    /// where a read is a system call).
    pub fn measure() -> ReadCosts {
        let per_read = |f: &dyn Fn() -> u64| {
            let batch = |_| {
                let m0 = tsc::monotonic_raw_ns();
                let mut sink = 0u64;
                for _ in 0..1000 {
                    sink = sink.wrapping_add(f());
                }
                std::hint::black_box(sink);
                tsc::monotonic_raw_ns().saturating_sub(m0) as f64 / 1000.0
            };
            (0..5).map(batch).fold(f64::INFINITY, f64::min)
        };
        let monotonic_ns = per_read(&tsc::monotonic_raw_ns);
        let tsc_ns = tsc::TSC_AVAILABLE.then(|| per_read(&tsc::rdtsc));
        let name = ibhost::file::read_pseudo(
            "/sys/devices/system/clocksource/clocksource0/current_clocksource",
            ibhost::file::MAX_PSEUDO_FILE,
        )
        .unwrap_or_default();
        ReadCosts::classify(name.trim(), monotonic_ns, tsc_ns)
    }

    /// The costs with the clocksource named and the system-call verdict:
    /// none for a vDSO clocksource, a system call for one without a vDSO
    /// mode, else a read over 100 ns and over 4 TSC reads (pure).
    pub fn classify(clocksource: &str, monotonic_ns: f64, tsc_ns: Option<f64>) -> ReadCosts {
        let known = CLOCKSOURCES.iter().find(|k| k.0 == clocksource);
        let slow = monotonic_ns > 100.0 && tsc_ns.is_some_and(|t| monotonic_ns > 4.0 * t);
        let unknown = if clocksource.is_empty() { "?" } else { "other" };
        ReadCosts {
            tsc_ns,
            monotonic_ns,
            clocksource: known.map_or(unknown, |k| k.0),
            monotonic_is_syscall: known.map_or(slow, |k| k.1),
        }
    }

    /// "TSC 21 ns, clock_gettime 1420 ns (a system call: clocksource hpet)".
    pub fn describe(&self) -> String {
        let tsc = self
            .tsc_ns
            .map_or(String::new(), |t| format!("TSC {t:.0} ns, "));
        let how = ["vDSO", "a system call"][usize::from(self.monotonic_is_syscall)];
        let (ns, source) = (self.monotonic_ns, self.clocksource);
        format!("per read: {tsc}clock_gettime {ns:.0} ns ({how}: clocksource {source})")
    }
}

/// Why `--clock auto` chose the TSC although the CPU flags do not vouch
/// for it (`missing`: the flag that was missing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AutoReason {
    FallbackIsSyscall { missing: Fallback },
    KernelClockIsTsc { missing: Fallback },
}

impl AutoReason {
    /// One sentence for the report.
    pub fn explain(&self) -> String {
        let (missing, why) = match self {
            AutoReason::FallbackIsSyscall { missing } => {
                (missing, "clock_gettime is a system call here")
            }
            AutoReason::KernelClockIsTsc { missing } => (
                missing,
                "the kernel's clocksource is the TSC (clock_gettime reads it with more work)",
            ),
        };
        let flag = ["constant_tsc", "nonstop_tsc"][usize::from(*missing == Fallback::NoNonstopTsc)];
        format!("auto chose the TSC although the CPU flags lack {flag}: {why} and the TSC calibrated stably")
    }
}

/// A calibrated clock. `now()` returns ticks; `ticks_to_ns` converts a
/// difference of ticks. Copy it freely: it is a few words.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    kind: ClockKind,
    /// True: `now()` reads the TSC; false: CLOCK_MONOTONIC_RAW.
    tsc: bool,
    /// ns = ticks * to_ns_mult >> SHIFT.
    to_ns_mult: u64,
    /// ticks = ns * to_ticks_mult >> SHIFT.
    to_ticks_mult: u64,
    calibration: Option<Calibration>,
    fallback: Option<Fallback>,
    costs: Option<ReadCosts>,
    auto_reason: Option<AutoReason>,
    /// One tick until measured by [`Clock::choose`] or [`Clock::calibrate`].
    resolution_ns: f64,
}

ibhost::vocabulary! {
    /// Which clock a run asks for (`--clock`).
    ClockChoice, "clock" {
        Auto = "auto", "The TSC when it calibrates stably and the CPU flags vouch for it, or clock_gettime is a system call, or the kernel's own clocksource is the TSC; else clock_gettime(CLOCK_MONOTONIC_RAW). The report says which and why.";
        Tsc = "tsc", "The TSC even without constant_tsc/nonstop_tsc in the flags (VMs and emulators often hide them while their TSC is constant); calibration must still be stable, or the run falls back and says why.";
        Monotonic = "monotonic", "clock_gettime(CLOCK_MONOTONIC_RAW).";
    }
}

impl Clock {
    /// The clock `choice` asks for (see [`ClockChoice`]).
    pub fn choose(choice: ClockChoice) -> Clock {
        let clock = match choice {
            ClockChoice::Auto => return Clock::calibrate(),
            ClockChoice::Monotonic => Clock::monotonic(),
            ClockChoice::Tsc if !tsc::TSC_AVAILABLE => Clock::monotonic_because(Fallback::NoTsc),
            ClockChoice::Tsc => Clock::calibrated_tsc(),
        };
        clock.with_measured_resolution()
    }

    /// This clock with its resolution measured: the smallest positive
    /// difference of [`RESOLUTION_READS`] back-to-back reads, in ns.
    pub fn with_measured_resolution(self) -> Clock {
        let mut prev = self.now();
        let step = (0..RESOLUTION_READS)
            .filter_map(|_| {
                let t = self.now();
                let d = t.wrapping_sub(prev);
                prev = t;
                (d > 0).then_some(d)
            })
            .min();
        // Never moved: keep the nominal tick.
        step.map_or(self, |s| self.with_resolution_ticks(s))
    }

    /// This clock with a resolution of `ticks` ticks (tests and replays:
    /// a known step instead of a measured one).
    pub fn with_resolution_ticks(self, ticks: u64) -> Clock {
        Clock {
            resolution_ns: self.ticks_as_ns_f64(ticks),
            ..self
        }
    }

    /// `ticks` in ns, unrounded (one TSC tick is a fraction of a ns).
    fn ticks_as_ns_f64(&self, ticks: u64) -> f64 {
        match self.kind {
            ClockKind::Tsc { hz } if hz > 0.0 => ticks as f64 * 1e9 / hz,
            _ => ticks as f64,
        }
    }

    /// The smallest non-zero step between two reads of this clock, ns.
    pub fn resolution_ns(&self) -> f64 {
        self.resolution_ns
    }

    /// Whether a latency of `ns` is within [`RESOLUTION_TICKS`] steps of
    /// this clock's resolution (see [`near_resolution`]).
    pub fn near_resolution(&self, ns: f64) -> bool {
        near_resolution(ns, self.resolution_ns)
    }

    /// The TSC if its calibration is stable, else CLOCK_MONOTONIC_RAW.
    fn calibrated_tsc() -> Clock {
        // One retry: a single preemption during a window can spoil it.
        for _ in 0..2 {
            let cal = measure_tsc_hz(CALIBRATION_WINDOWS, CALIBRATION_WINDOW_MS);
            if cal.spread_ppm <= CALIBRATION_MAX_SPREAD_PPM && cal.hz > 1e6 {
                return Clock::tsc_with(cal);
            }
        }
        Clock::monotonic_because(Fallback::UnstableCalibration)
    }

    /// The best clock this machine offers (`auto`): the TSC when the CPU
    /// flags vouch for it, or clock_gettime is a system call, or the
    /// kernel's clocksource is the TSC, and it calibrates stably; else
    /// CLOCK_MONOTONIC_RAW, saying why. With the read costs of both
    /// clocks. Takes about 0.1 s.
    pub fn calibrate() -> Clock {
        let costs = ReadCosts::measure();
        let decision = if tsc::TSC_AVAILABLE {
            ibhost::file::read_pseudo("/proc/cpuinfo", ibhost::file::MAX_PROC_TABLE)
                .map_err(|_| Fallback::NoCpuinfo)
                .and_then(|cpuinfo| auto_decision(tsc_flags_ok(&cpuinfo), &costs))
        } else {
            Err(Fallback::NoTsc)
        };
        let c = match decision {
            Ok(reason) => {
                let c = Clock::calibrated_tsc();
                let auto_reason = reason.filter(|_| c.fallback.is_none());
                Clock { auto_reason, ..c }
            }
            Err(why) => Clock::monotonic_because(why),
        };
        Clock {
            costs: Some(costs),
            ..c
        }
        .with_measured_resolution()
    }

    pub fn read_costs(&self) -> Option<ReadCosts> {
        self.costs
    }

    pub fn auto_reason(&self) -> Option<AutoReason> {
        self.auto_reason
    }

    /// clock_gettime(CLOCK_MONOTONIC_RAW), one tick per nanosecond.
    pub fn monotonic() -> Clock {
        Clock {
            kind: ClockKind::MonotonicRaw,
            tsc: false,
            to_ns_mult: 1 << SHIFT,
            to_ticks_mult: 1 << SHIFT,
            calibration: None,
            fallback: None,
            costs: None,
            auto_reason: None,
            resolution_ns: 1.0,
        }
    }

    /// CLOCK_MONOTONIC_RAW, recording why the TSC was not used.
    pub fn monotonic_because(why: Fallback) -> Clock {
        Clock {
            fallback: Some(why),
            ..Clock::monotonic()
        }
    }

    /// A TSC clock from a given calibration (tests and replays).
    pub fn tsc_with(cal: Calibration) -> Clock {
        // Scaling by 2^SHIFT is exact: one rounding, as a single division.
        let mult = |x: f64| {
            (x * (1u64 << SHIFT) as f64)
                .round()
                .clamp(1.0, u64::MAX as f64) as u64
        };
        Clock {
            kind: ClockKind::Tsc { hz: cal.hz },
            tsc: true,
            to_ns_mult: mult(1e9 / cal.hz),
            to_ticks_mult: mult(cal.hz / 1e9),
            calibration: Some(cal),
            resolution_ns: 1e9 / cal.hz.max(1.0),
            ..Clock::monotonic()
        }
    }

    pub fn kind(&self) -> ClockKind {
        self.kind
    }

    /// Calibration error estimate in ppm (0 for CLOCK_MONOTONIC_RAW, which
    /// is the reference itself).
    pub fn calibration_error_ppm(&self) -> f64 {
        self.calibration.map_or(0.0, |c| c.spread_ppm)
    }

    pub fn fallback(&self) -> Option<Fallback> {
        self.fallback
    }

    /// One line for the report, e.g. "TSC 2.995 GHz (calibrated against
    /// CLOCK_MONOTONIC_RAW, 5 x 20 ms, spread 12 ppm)".
    pub fn describe(&self) -> String {
        let reason = self.auto_reason.map(|r| format!("; {}", r.explain()));
        let costs = self.costs.map(|c| format!("; {}", c.describe()));
        let (reason, costs) = (reason.unwrap_or_default(), costs.unwrap_or_default());
        format!("{}{reason}{costs}", self.describe_kind())
    }

    fn describe_kind(&self) -> String {
        match (self.kind, self.calibration) {
            (ClockKind::Tsc { hz }, Some(c)) => {
                let (ghz, n, ms, ppm) =
                    (hz / 1e9, c.windows, c.window_ns / 1_000_000, c.spread_ppm);
                format!("TSC {ghz:.3} GHz (calibrated against CLOCK_MONOTONIC_RAW, {n} x {ms} ms, spread {ppm:.1} ppm)")
            }
            (ClockKind::Tsc { hz }, None) => format!("TSC {:.3} GHz", hz / 1e9),
            (ClockKind::MonotonicRaw, _) => {
                self.fallback.map_or("CLOCK_MONOTONIC_RAW".into(), |f| {
                    format!("CLOCK_MONOTONIC_RAW (fallback: {})", f.help())
                })
            }
        }
    }

    #[inline(always)]
    pub fn now(&self) -> u64 {
        if self.tsc {
            tsc::rdtsc()
        } else {
            tsc::monotonic_raw_ns()
        }
    }

    /// Ns in a difference of ticks (fixed point, saturating).
    #[inline(always)]
    pub fn ticks_to_ns(&self, ticks: u64) -> u64 {
        mul_shift(ticks, self.to_ns_mult)
    }

    /// Ticks in a number of nanoseconds (for pacing deadlines).
    #[inline(always)]
    pub fn ns_to_ticks(&self, ns: u64) -> u64 {
        mul_shift(ns, self.to_ticks_mult)
    }

    /// Busy-waits until `now() >= deadline` (ticks of this clock) and
    /// returns the `now()` that ended the wait (`--rate` pacing; a deadline
    /// already past returns at once).
    #[inline]
    pub fn spin_until(&self, deadline: u64) -> u64 {
        loop {
            let t = self.now();
            if t >= deadline {
                return t;
            }
            core::hint::spin_loop();
        }
    }
}

/// Whether a latency of `ns` is within [`RESOLUTION_TICKS`] steps of a
/// clock whose resolution is `resolution_ns` (pure: reports of saved runs
/// ask it with the resolution their JSON carries).
pub fn near_resolution(ns: f64, resolution_ns: f64) -> bool {
    resolution_ns > 0.0 && ns <= RESOLUTION_TICKS * resolution_ns
}

#[inline(always)]
fn mul_shift(x: u64, mult: u64) -> u64 {
    ((x as u128 * mult as u128) >> SHIFT).min(u64::MAX as u128) as u64
}

/// What `auto` tries (pure: the CPU flags' verdict and the measured read
/// costs in): `Ok(None)` the TSC, vouched for by the flags; `Ok(Some(r))`
/// the TSC although the flags do not vouch for it, for reason `r`;
/// `Err(why)` CLOCK_MONOTONIC_RAW. The TSC must then still calibrate
/// stably ([`Clock::calibrate`] falls back, saying so, when it does not).
pub fn auto_decision(
    flags: Result<(), Fallback>,
    costs: &ReadCosts,
) -> Result<Option<AutoReason>, Fallback> {
    match flags {
        Ok(()) => Ok(None),
        Err(missing) if costs.monotonic_is_syscall => {
            Ok(Some(AutoReason::FallbackIsSyscall { missing }))
        }
        Err(missing) if costs.clocksource == "tsc" => {
            Ok(Some(AutoReason::KernelClockIsTsc { missing }))
        }
        Err(why) => Err(why),
    }
}

/// Checks the first `flags` line of /proc/cpuinfo text for `constant_tsc`
/// and `nonstop_tsc` (never `cpu MHz`, the scaled core frequency).
pub fn tsc_flags_ok(cpuinfo: &str) -> Result<(), Fallback> {
    let flags = cpuinfo
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == "flags").then_some(v)
        })
        .ok_or(Fallback::NoConstantTsc)?;
    let has = |f: &str| flags.split_whitespace().any(|x| x == f);
    match (has("constant_tsc"), has("nonstop_tsc")) {
        (false, _) => Err(Fallback::NoConstantTsc),
        (_, false) => Err(Fallback::NoNonstopTsc),
        _ => Ok(()),
    }
}

/// Reads (tsc, monotonic ns) as close together as possible: the pair with
/// the shortest TSC bracket around the clock_gettime of a few tries.
fn paired_read() -> (u64, u64) {
    let read = |_| {
        let a = tsc::rdtsc();
        let m = tsc::monotonic_raw_ns();
        let width = tsc::rdtsc().wrapping_sub(a);
        (width, a.wrapping_add(width / 2), m)
    };
    // The first of equal widths.
    let best = (0..8)
        .map(read)
        .reduce(|b, x| if x.0 < b.0 { x } else { b });
    best.map_or((0, 0), |(_, t, m)| (t, m))
}

/// Measures the TSC frequency against CLOCK_MONOTONIC_RAW over `windows`
/// windows of `window_ms` ms; returns the median and the spread.
fn measure_tsc_hz(windows: usize, window_ms: u64) -> Calibration {
    let mut hz: Vec<f64> = Vec::with_capacity(windows);
    for _ in 0..windows {
        let (t0, m0) = paired_read();
        std::thread::sleep(std::time::Duration::from_millis(window_ms));
        let (t1, m1) = paired_read();
        let dm = m1.saturating_sub(m0);
        if dm > 0 {
            hz.push(t1.wrapping_sub(t0) as f64 * 1e9 / dm as f64);
        }
    }
    hz.sort_by(|a, b| a.total_cmp(b));
    let (median, spread_ppm) = match (hz.first(), hz.get(hz.len() / 2), hz.last()) {
        (Some(lo), Some(&m), Some(hi)) => (m, (hi - lo) / m * 1e6),
        _ => (0.0, f64::INFINITY),
    };
    Calibration {
        hz: median,
        windows: hz.len() as u32,
        window_ns: window_ms * 1_000_000,
        spread_ppm,
    }
}
