//! The value syntaxes of the config that are not TOML types: durations
//! (`"250ms"`, `"1m30s"`) and kernel-style CPU lists (`"0-3,8"`).
//!
//! Why it exists: the same syntaxes are read on the command line
//! (`--interval`, `--window`) and in the file, with the same messages.
//! (The workspace will share these through one host-utilities crate; until
//! then they live here, unchanged.)

use std::fmt::Write as _;
use std::time::Duration;

/// The highest CPU number a CPU list may name (the kernel's NR_CPUS limit is 8192).
pub const MAX_CPU: usize = 8191;

const UNITS: &[(&str, u128)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
    ("d", 86_400_000_000_000),
];

/// Parses a duration such as `"250ms"`, `"10s"`, `"5m"`, `"1h"` or `"1m30s"`.
///
/// Why it exists: durations are written the way Prometheus writes them;
/// no duration crate is in the workspace. Units: `ns`, `us` (`µs`), `ms`,
/// `s`, `m`, `h`, `d`; whole numbers only; several parts add up. The error
/// says what was wrong, for the caller to put after the key.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if t.is_empty() {
        return Err("empty duration; write a number with a unit, e.g. \"10s\"".into());
    }
    let mut total: u128 = 0;
    let mut rest = t;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 {
            return Err(format!(
                "not a duration at {rest:?}; write a whole number with a unit (ms, s, m, h), e.g. \"250ms\" or \"1m30s\""
            ));
        }
        let n: u128 = rest[..digits]
            .parse()
            .map_err(|_| "number too large; use a larger unit".to_string())?;
        rest = &rest[digits..];
        let unit_len = rest
            .char_indices()
            .find(|(_, c)| c.is_ascii_digit())
            .map(|(i, _)| i)
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        let Some(&(_, mult)) = UNITS.iter().find(|(u, _)| *u == unit) else {
            return Err(if unit.is_empty() {
                format!("{n} has no unit; add one of ns, us, ms, s, m, h, d (e.g. \"{n}s\")")
            } else {
                format!("unknown unit {unit:?}; use ns, us, ms, s, m, h or d")
            });
        };
        total = n
            .checked_mul(mult)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(|| "duration too long; use at most a few years".to_string())?;
        rest = &rest[unit_len..];
    }
    let secs = u64::try_from(total / 1_000_000_000)
        .map_err(|_| "duration too long; use at most a few years".to_string())?;
    Ok(Duration::new(secs, (total % 1_000_000_000) as u32))
}

/// Formats a duration so that [`parse_duration`] reads it back exactly
/// (`1h30m`, `250ms`, `1s500ms`, `0s`).
///
/// Why it exists: config values in logs and on `/` read like the file.
pub fn format_duration(d: Duration) -> String {
    let mut n = d.as_nanos();
    if n == 0 {
        return "0s".into();
    }
    let mut out = String::new();
    for (unit, mult) in [
        ("d", 86_400_000_000_000u128),
        ("h", 3_600_000_000_000),
        ("m", 60_000_000_000),
        ("s", 1_000_000_000),
        ("ms", 1_000_000),
        ("us", 1_000),
        ("ns", 1),
    ] {
        if n >= mult {
            let _ = write!(out, "{}{unit}", n / mult);
            n %= mult;
        }
    }
    out
}

/// Parses a kernel-style CPU list (`"0-3,8,10-11"`) into sorted, unique CPUs.
///
/// Why it exists: `wakeup_cpus` is written as the kernel writes CPU lists;
/// the error says which part is wrong.
pub fn parse_cpulist(s: &str) -> Result<Vec<usize>, String> {
    let mut v = Vec::new();
    if s.trim().is_empty() {
        return Err("empty CPU list; write \"all\" or CPUs such as \"2-3,6\"".into());
    }
    for part in s.split(',') {
        let p = part.trim();
        let num = |x: &str| -> Result<usize, String> {
            let x = x.trim();
            let c: usize = x.parse().map_err(|_| {
                format!("{p:?} is not a CPU or a range; write CPUs as \"2\" or \"2-5\" separated by commas")
            })?;
            if c > MAX_CPU {
                return Err(format!(
                    "CPU {c} is above the kernel's limit of {MAX_CPU}; use a CPU this host has"
                ));
            }
            Ok(c)
        };
        match p.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b {
                    return Err(format!(
                        "range {p:?} runs backwards; write it low to high, \"{b}-{a}\""
                    ));
                }
                v.extend(a..=b);
            }
            None => v.push(num(p)?),
        }
    }
    v.sort_unstable();
    v.dedup();
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_compose() {
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(format_duration(Duration::from_millis(1500)), "1s500ms");
        assert!(parse_duration("10").unwrap_err().contains("no unit"));
    }
}
