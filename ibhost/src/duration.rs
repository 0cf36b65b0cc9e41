//! Durations as people write them on command lines and in config files
//! (`10s`, `500ms`, `1.5`, `2min`, `1m30s`, `1d`), parsed by one parser and
//! written back by one formatter.
//!
//! Why it exists: ibprobe's flags and ibexporter's config each had their
//! own parser, with different units and syntaxes. This module accepts the
//! union of both; [`parse_strict`] is the same parser restricted to what a
//! config file allows (whole numbers, a unit on every part, Prometheus
//! style), and [`format()`] writes that strict form, so its output always
//! parses back to the same [`Duration`] with either function.
//!
//! Syntax: one or more parts, each a number and a unit, that add up
//! (`1m30s`). Units: `ns`, `us` (or `µs`), `ms`, `s`, `m` (or `min`), `h`,
//! `d`. [`parse`] also takes decimals (`1.5s`, `0.25ms`). A number without
//! a unit is refused by both with a hint (`10 what? write 10s, 10ms or
//! 10us`): on a latency tool `--pause 10` could mean any of them, and
//! guessing seconds once made a run busy-wait 10 s per message. Only `0`
//! needs no unit. Leading and trailing whitespace is
//! ignored; whitespace inside is not. Values are exact to the nanosecond
//! (digits below a nanosecond are dropped) and at most [`MAX`].

use std::fmt::Write as _;
use std::time::Duration;

/// The longest duration accepted: about 31,700 years. Far beyond any run or
/// interval, and small enough that `Instant::now() + d` cannot overflow.
pub const MAX: Duration = Duration::from_secs(1_000_000_000_000);

/// Units and their length in nanoseconds. The first spelling of each length
/// is the one [`format()`] writes.
const UNITS: &[(&str, u128)] = &[
    ("d", 86_400_000_000_000),
    ("h", 3_600_000_000_000),
    ("m", 60_000_000_000),
    ("min", 60_000_000_000),
    ("s", 1_000_000_000),
    ("ms", 1_000_000),
    ("us", 1_000),
    ("µs", 1_000),
    ("ns", 1),
];

/// The unit list as error messages give it.
const UNIT_LIST: &str = "ns, us, ms, s, m, h or d";

/// Why a duration did not parse. The message says what was wrong (quoting
/// the offending part) and how to write it; callers put the flag or key in
/// front.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Nothing but whitespace.
    #[error("empty duration; write a number with a unit, e.g. \"10s\"")]
    Empty,
    /// The text does not start with a number.
    #[error("not a duration; write a number and a unit, e.g. 10s, 500ms, 200us or 1m30s")]
    NotANumber,
    /// A later part does not start with a number (`10s-5ms`).
    #[error("not a duration at {rest:?}; write a number with a unit (ms, s, m, h), e.g. \"250ms\" or \"1m30s\"")]
    NotANumberAt {
        /// The text from the bad part on.
        rest: String,
    },
    /// A number with a unit that is none of ns, us, µs, ms, s, m, min, h, d.
    #[error("unknown unit {unit:?}; use {UNIT_LIST}")]
    UnknownUnit {
        /// The unit as written.
        unit: String,
    },
    /// A lone number without a unit (`10`): which unit was meant?
    #[error("{number} what? write {number}s, {number}ms or {number}us (units: {UNIT_LIST})")]
    BareNumber {
        /// The number as written.
        number: String,
    },
    /// A number without a unit after another part (`10s5`).
    #[error("{number} has no unit; add one of ns, us, ms, s, m, h, d (e.g. \"{number}s\")")]
    NoUnit {
        /// The number as written.
        number: String,
    },
    /// A decimal in [`parse_strict`].
    #[error("{number} is not a whole number; use a smaller unit instead (e.g. \"1s500ms\", not \"1.5s\")")]
    NotWhole {
        /// The number as written.
        number: String,
    },
    /// More than [`MAX`].
    #[error("duration too long; use at most a few years")]
    TooLong,
}

/// Parses a duration in the full syntax: `10s`, `500ms`, `200us`, `100ns`,
/// `2m`, `2min`, `1h`, `1d`, `1m30s`, decimals such as `1.5s`, and `0`.
/// A bare number other than zero is [`DurationError::BareNumber`].
///
/// Why it exists: command-line flags (ibprobe's `--duration`, `--timeout`,
/// `--interval`) take every form people try.
pub fn parse(s: &str) -> Result<Duration, DurationError> {
    parse_as(s, false)
}

/// Parses a duration as config files write it: whole numbers, each with a
/// unit, that add up (`250ms`, `10s`, `1h30m`, `1d`), or `0`. Rejects
/// `1.5s`, which [`parse`] takes.
///
/// Why it exists: a config file follows Prometheus' duration syntax, and a
/// bare `10` there is more likely a mistake than ten seconds.
pub fn parse_strict(s: &str) -> Result<Duration, DurationError> {
    parse_as(s, true)
}

/// The one parser behind [`parse`] and [`parse_strict`].
fn parse_as(s: &str, strict: bool) -> Result<Duration, DurationError> {
    let t = s.trim();
    if t.is_empty() {
        return Err(DurationError::Empty);
    }
    let mut total: u128 = 0;
    let mut rest = t;
    while !rest.is_empty() {
        let num_len = rest
            .bytes()
            .take_while(|b| b.is_ascii_digit() || *b == b'.')
            .count();
        let number = &rest[..num_len];
        if !number.bytes().any(|b| b.is_ascii_digit()) || number.matches('.').count() > 1 {
            return Err(if rest.len() == t.len() {
                DurationError::NotANumber
            } else {
                DurationError::NotANumberAt { rest: rest.into() }
            });
        }
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let scale = if unit.is_empty() {
            // A lone number: zero is zero in every unit; any other number
            // could mean seconds or microseconds, so ask.
            if num_len == t.len() {
                if number.bytes().all(|b| b == b'0' || b == b'.') {
                    return Ok(Duration::ZERO);
                }
                return Err(DurationError::BareNumber {
                    number: number.into(),
                });
            }
            return Err(DurationError::NoUnit {
                number: number.into(),
            });
        } else {
            UNITS
                .iter()
                .find(|(u, _)| *u == unit)
                .map(|&(_, ns)| ns)
                .ok_or_else(|| DurationError::UnknownUnit { unit: unit.into() })?
        };
        if strict && number.contains('.') {
            return Err(DurationError::NotWhole {
                number: number.into(),
            });
        }
        total = scaled(number, scale)
            .and_then(|v| total.checked_add(v))
            .ok_or(DurationError::TooLong)?;
    }
    if total > MAX.as_nanos() {
        return Err(DurationError::TooLong);
    }
    let secs = (total / 1_000_000_000) as u64;
    Ok(Duration::new(secs, (total % 1_000_000_000) as u32))
}

/// `number` (digits with at most one `.`) times `scale` nanoseconds,
/// exactly, dropping what is below a nanosecond; `None` on overflow.
fn scaled(number: &str, scale: u128) -> Option<u128> {
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    let whole: u128 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let mut v = whole.checked_mul(scale)?;
    // Each fractional digit is worth a tenth of the one before; digits past
    // the 30th cannot add a nanosecond to any unit here.
    let mut place = scale;
    for d in frac.bytes().take(30) {
        place /= 10;
        v = v.checked_add(u128::from(d - b'0') * place)?;
    }
    Some(v)
}

/// Writes a duration with whole numbers and the largest units first
/// (`1h30m`, `250ms`, `1s500ms`, `0s`), the form [`parse_strict`] (and so
/// [`parse`]) reads back exactly.
///
/// Why it exists: durations in logs, reports and config dumps read like
/// the config file.
pub fn format(d: Duration) -> String {
    let mut n = d.as_nanos();
    if n == 0 {
        return "0s".into();
    }
    let mut out = String::new();
    let mut last = 0;
    for &(unit, len) in UNITS {
        // One spelling per length: skip aliases (`min`, `µs`).
        if len == last {
            continue;
        }
        last = len;
        if n >= len {
            let _ = write!(out, "{}{unit}", n / len);
            n %= len;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn every_unit_and_form() {
        for (s, d) in [
            ("10s", Duration::from_secs(10)),
            ("500ms", ms(500)),
            ("200us", Duration::from_micros(200)),
            ("200µs", Duration::from_micros(200)),
            ("100ns", Duration::from_nanos(100)),
            ("2m", Duration::from_secs(120)),
            ("2min", Duration::from_secs(120)),
            ("1h", Duration::from_secs(3600)),
            ("1d", Duration::from_secs(86_400)),
            ("1h30m", Duration::from_secs(5400)),
            ("1m30s", Duration::from_secs(90)),
            (" 2us ", Duration::from_micros(2)),
            ("0s", Duration::ZERO),
            ("0", Duration::ZERO),
            ("0.0", Duration::ZERO),
            ("1.5s", ms(1500)),
            ("0.25ms", Duration::from_micros(250)),
            (".5s", ms(500)),
            ("1.5m30s", Duration::from_secs(120)),
            ("0.1s", ms(100)),
            ("1.0000000001s", Duration::from_secs(1)),
        ] {
            assert_eq!(parse(s), Ok(d), "{s:?}");
        }
    }

    #[test]
    fn strict_takes_whole_numbers_with_units_only() {
        assert_eq!(parse_strict("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_strict("2min"), Ok(Duration::from_secs(120)));
        let e = parse_strict("10").unwrap_err();
        assert!(e.to_string().contains("10 what?"), "{e}");
        assert_eq!(parse_strict("0"), Ok(Duration::ZERO));
        let e = parse_strict("1.5s").unwrap_err();
        assert!(e.to_string().contains("not a whole number"), "{e}");
        for bad in ["", "s", "10", "1.5s", "-1s", "10 s", "1sec", "10s5"] {
            assert!(parse_strict(bad).is_err(), "{bad:?} accepted");
        }
    }

    /// A bare number could be any unit: refused by both parsers, with the
    /// three likeliest spellings, whatever the number.
    #[test]
    fn a_bare_number_asks_for_its_unit() {
        for n in ["10", "1.5", "5", "0.1", "1000000"] {
            for e in [parse(n).unwrap_err(), parse_strict(n).unwrap_err()] {
                assert_eq!(
                    e.to_string(),
                    format!("{n} what? write {n}s, {n}ms or {n}us (units: {UNIT_LIST})")
                );
            }
        }
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let msg = |s: &str| parse(s).unwrap_err().to_string();
        assert!(msg("10x").contains("unknown unit \"x\""), "{}", msg("10x"));
        assert!(msg("fast").contains("not a duration"));
        assert!(msg("-1s").contains("not a duration"));
        assert!(
            msg("10s.").contains("not a duration at \".\""),
            "{}",
            msg("10s.")
        );
        assert!(msg("10s-5ms").contains("unknown unit \"s-\""));
        assert!(msg("").contains("empty duration"));
        assert!(msg("10s5").contains("5 has no unit"));
        assert!(msg("10 s").contains("unknown unit \" s\""));
        assert!(msg("1.2.3s").contains("not a duration"));
        assert!(msg("99999999999999999999999h").contains("too long"));
        assert!(msg("1000000000001s").contains("too long"));
        assert_eq!(parse("1000000000000s"), Ok(MAX));
        for bad in ["", "s", "1sec", ".", "s10", "1e3"] {
            assert!(parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn formats_largest_units_first() {
        assert_eq!(format(Duration::from_secs(5400)), "1h30m");
        assert_eq!(format(ms(250)), "250ms");
        assert_eq!(format(ms(1500)), "1s500ms");
        assert_eq!(format(Duration::ZERO), "0s");
        assert_eq!(format(Duration::from_secs(90_061)), "1d1h1m1s");
        assert_eq!(format(Duration::new(0, 1_001)), "1us1ns");
    }

    proptest! {
        #[test]
        fn format_round_trips(secs in 0u64..10_000_000_000, nanos in 0u32..1_000_000_000) {
            let d = Duration::new(secs, nanos);
            let s = format(d);
            prop_assert_eq!(parse(&s), Ok(d), "{}", s);
            prop_assert_eq!(parse_strict(&s), Ok(d), "{}", s);
        }

        #[test]
        fn never_panics(s in "\\PC{0,30}") {
            let _ = parse(&s);
            let _ = parse_strict(&s);
        }

        #[test]
        fn number_like_inputs(s in "[0-9.]{1,8}(ns|us|ms|s|m|h|d|x)?") {
            // Whatever parses is within MAX and formats back to itself.
            if let Ok(d) = parse(&s) {
                prop_assert!(d <= MAX);
                prop_assert_eq!(parse(&format(d)), Ok(d));
            }
        }
    }
}
