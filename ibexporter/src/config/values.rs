//! The value syntaxes of the config that are not TOML types: durations
//! (`"250ms"`, `"1m30s"`) and kernel-style CPU lists (`"0-3,8"`).
//!
//! Why it exists: the same syntaxes are read on the command line
//! (`--interval`, `--window`) and in the file, with the same messages.
//! Both are the workspace's one syntax from `ibhost`: durations in its
//! strict form (whole numbers, a unit on every part, as Prometheus
//! writes them), CPU lists bounded, then held to the kernel's NR_CPUS.

use crate::limits::MAX_CPU;
use std::time::Duration;

/// Parses a duration such as `"250ms"`, `"10s"`, `"5m"`, `"1h"` or
/// `"1m30s"` (units `ns`, `us` (`µs`), `ms`, `s`, `m`, `h`, `d`; whole
/// numbers; several parts add up). The error says what was wrong, for
/// the caller to put after the key.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    ibhost::duration::parse_strict(s).map_err(|e| e.to_string())
}

/// Formats a duration so that [`parse_duration`] reads it back exactly
/// (`1h30m`, `250ms`, `1s500ms`, `0s`): config values in logs and on `/`
/// read like the file.
pub fn format_duration(d: Duration) -> String {
    ibhost::duration::format(d)
}

/// Parses a kernel-style CPU list (`"0-3,8,10-11"`) into sorted, unique
/// CPUs, at most [`MAX_CPU`]; the error says which part is wrong.
pub fn parse_cpulist(s: &str) -> Result<Vec<usize>, String> {
    if s.trim().is_empty() {
        return Err("empty CPU list; write \"all\" or CPUs such as \"2-3,6\"".into());
    }
    let set = ibhost::cpulist::CpuSet::parse_list(s).map_err(|e| e.to_string())?;
    let cpus: Vec<usize> = set.iter().map(|c| c as usize).collect();
    match cpus.last() {
        Some(&c) if c > MAX_CPU => Err(format!(
            "CPU {c} is above the kernel's limit of {MAX_CPU}; use a CPU this host has"
        )),
        _ => Ok(cpus),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_compose() {
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(format_duration(Duration::from_millis(1500)), "1s500ms");
        assert!(parse_duration("10")
            .unwrap_err()
            .contains("10 what? write 10s"));
    }
}
