//! `ibprobe host`: wake-up latency of a SCHED_FIFO thread per CPU
//! (cyclictest's measurement, [`ibnoise::wakeup`]) or the kernel's
//! timerlat tracer: what `ibtune apply` did to the cores the probe runs on,
//! in the probe's percentiles, without rt-tests.

use std::time::Duration;

use ibhost::cpulist::{parse_list_ordered, CpuSet};
use ibhost::file::{read_pseudo, MAX_PSEUDO_FILE};

use super::args::HostArgs;
use super::common::stop_flag;
use super::error::{CliError, EXIT_INTERRUPTED};
use crate::report::host::HostReport;
use crate::report::progress::progress_bar;
use crate::report::timerlat::TimerlatReport;
use crate::report::Document;
use crate::sys::host;
use ibnoise::timerlat::{self, TimerlatConfig, TimerlatError};
use ibnoise::wakeup::{self, WakeupConfig, WakeupError, WakeupLength};

/// Wake-ups per CPU when neither --count nor --duration is given.
pub const DEFAULT_COUNT: u64 = 10_000;

/// A CPU list in the kernel's notation ("0-3,8").
fn cpulist_string(cpus: &[usize]) -> String {
    CpuSet::from_iter_u32(cpus.iter().map(|&c| c as u32)).to_list()
}

/// The CPUs the kernel has online (`--trace` measures any of them: the
/// kernel's threads run there, not this process).
fn online_cpus() -> Vec<usize> {
    let online = read_pseudo("/sys/devices/system/cpu/online", MAX_PSEUDO_FILE).ok();
    online
        .and_then(|s| parse_list_ordered(s.trim()).ok())
        .unwrap_or_default()
}

/// Parses and checks `--cpus` against the CPUs that may be measured
/// (`allowed`, described by `which`).
fn pick_cpus(list: Option<&str>, allowed: &[usize], which: &str) -> Result<Vec<usize>, CliError> {
    let Some(s) = list else {
        if allowed.is_empty() {
            return Err(CliError::run(
                "cannot read this process's CPU affinity (sched_getaffinity); pass --cpus",
            ));
        }
        return Ok(allowed.to_vec());
    };
    // Bounded (`ibhost::cpulist`), in the order written: duplicates are
    // kept, so they can be reported.
    let cpus = match parse_list_ordered(s) {
        Ok(v) if !v.is_empty() => v,
        Ok(_) => {
            return Err(CliError::input(
                "--cpus \"\": not a CPU list (it is empty); write e.g. 0, 2-3 or 0,2,4-7",
            ))
        }
        Err(e) => {
            return Err(CliError::input(format!(
                "--cpus {s:?}: not a CPU list ({}); write e.g. 0, 2-3 or 0,2,4-7",
                e.reason
            )))
        }
    };
    for (i, c) in cpus.iter().enumerate() {
        if cpus[..i].contains(c) {
            return Err(CliError::input(format!(
                "--cpus {s}: CPU {c} is listed twice; list each CPU once"
            )));
        }
        if !allowed.contains(c) {
            return Err(CliError::input(format!(
                "--cpus {s}: CPU {c} is not {which} (allowed: {}); pick from those",
                cpulist_string(allowed)
            )));
        }
    }
    Ok(cpus)
}

/// `ibprobe host`: checks the options, measures, prints; the exit code.
pub fn run(a: &HostArgs) -> Result<u8, CliError> {
    let cpus = if a.trace {
        pick_cpus(a.cpus.as_deref(), &online_cpus(), "online")?
    } else {
        pick_cpus(
            a.cpus.as_deref(),
            &host::allowed_cpus(),
            "one this process may run on",
        )?
    };
    if a.interval < Duration::from_micros(1) {
        return Err(CliError::input(format!(
            "--period {:?}: too short for a timer; use at least 1us (cyclictest's default is 1ms)",
            a.interval
        )));
    }
    if a.count == Some(0) {
        return Err(CliError::input(
            "--count 0: measure at least 1 wake-up per CPU",
        ));
    }
    let length = match (a.duration, a.count) {
        (Some(d), _) => WakeupLength::Duration(d),
        (None, n) => WakeupLength::Count(n.unwrap_or(DEFAULT_COUNT)),
    };
    // Drawn at the start and cleared at the end: the measuring threads
    // run on the CPUs measured, and a redraw would run beside them.
    let total = match length {
        WakeupLength::Count(n) => a.interval.saturating_mul(n.min(u32::MAX as u64) as u32),
        WakeupLength::Duration(d) => d,
    };
    let bar = progress_bar(a.quiet, total.as_millis() as u64, "ms");
    bar.set_message(format!("measuring {} CPUs", cpus.len()));
    let r = if a.trace {
        run_timerlat(a, cpus, length)
    } else {
        run_wakeup(a, cpus, length)
    };
    // Cleared before the report: a terminal shows both.
    bar.finish_and_clear();
    let (report, interrupted) = r?;
    super::common::print_report(report.as_ref(), super::args::json_or(a.json, a.format))?;
    Ok(if interrupted { EXIT_INTERRUPTED } else { 0 })
}

/// A host report, and whether Ctrl-C cut its run short.
type Measured = Result<(Box<dyn Document>, bool), CliError>;

/// `ibprobe host` with its own SCHED_FIFO threads.
fn run_wakeup(a: &HostArgs, cpus: Vec<usize>, length: WakeupLength) -> Measured {
    let cfg = WakeupConfig {
        cpus,
        priority: a.fifo,
        interval: a.interval,
        length,
        lock_memory: !a.no_mlock,
    };
    let outcome = wakeup::run(&cfg, stop_flag()?).map_err(|e| match e {
        WakeupError::Fifo { .. } | WakeupError::Pin { .. } => CliError::input(e.to_string()),
        _ => CliError::run(e.to_string()),
    })?;
    Ok((
        Box::new(HostReport::new(&cfg, &outcome)),
        outcome.interrupted,
    ))
}

/// `ibprobe host --trace`: the kernel's timerlat tracer on the CPUs.
fn run_timerlat(a: &HostArgs, cpus: Vec<usize>, length: WakeupLength) -> Measured {
    if !(timerlat::MIN_PERIOD..=timerlat::MAX_PERIOD).contains(&a.interval) {
        return Err(CliError::input(format!(
            "--period {:?} with --trace: timerlat's period is 100us to 1s; pick one in that range",
            a.interval
        )));
    }
    let cfg = TimerlatConfig {
        cpus,
        period: a.interval,
        length,
        tracefs: a.tracefs.clone(),
        interference: !a.no_interference,
    };
    let outcome = timerlat::run(&cfg, stop_flag()?).map_err(|e| match e {
        TimerlatError::Io { .. } | TimerlatError::NoSamples { .. } => CliError::run(e.to_string()),
        _ => CliError::input(e.to_string()),
    })?;
    let report = TimerlatReport::new(&cfg, &outcome);
    Ok((Box::new(report), outcome.interrupted))
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: &str = "one this process may run on";

    #[test]
    fn cpu_lists_are_checked() {
        let allowed = [0, 1, 2, 3, 8];
        assert_eq!(
            pick_cpus(Some("0,2-3"), &allowed, W).unwrap(),
            vec![0, 2, 3]
        );
        assert_eq!(pick_cpus(None, &allowed, W).unwrap(), allowed.to_vec());
        let e = pick_cpus(Some("0,9"), &allowed, W).unwrap_err();
        assert_eq!(e.code, 2);
        assert!(
            e.message.contains("CPU 9") && e.message.contains("allowed: 0-3,8"),
            "{}",
            e.message
        );
        for bad in ["", "x", "1-", "0;1"] {
            let e = pick_cpus(Some(bad), &allowed, W).unwrap_err();
            assert!(
                e.message.contains("not a CPU list"),
                "{bad:?}: {}",
                e.message
            );
        }
        assert!(pick_cpus(Some("1,1"), &allowed, W)
            .unwrap_err()
            .message
            .contains("listed twice"));
    }
}
