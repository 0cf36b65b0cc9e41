//! `ibexporter localize` without clap: where the rounds come from (a
//! Prometheus URL, or saved snapshots), what to save, how to print, and
//! the exit code (`main.rs` maps the flags to [`LocalizeRequest`]).
//!
//! Exit codes (`ibhost::exit`): 0 no suspect named; 1 suspects named (the
//! report printed); 2 bad options (a --save folder that cannot be
//! written too) or an unreadable, malformed or oversized snapshot; 3 Prometheus unreachable or its answer refused;
//! 130 interrupted by SIGINT/SIGTERM while fetching.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use ibhost::exit::Exit;

use super::prom::{self, Client, FetchError};
use super::report::{self, Format};
use super::snapshot::Snapshot;
use crate::limits::MAX_ROUNDS;

/// Where the rounds come from.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// A Prometheus server's HTTP API.
    Prometheus {
        /// `http://HOST:PORT[/PREFIX]`.
        url: String,
        /// The last window's end, unix seconds.
        at: f64,
        /// Windows to fetch.
        rounds: usize,
        /// One window.
        window: Duration,
    },
    /// Snapshot files, replayed in order.
    Snapshots(Vec<PathBuf>),
}

/// `ibexporter localize`'s settings.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalizeRequest {
    /// The rounds.
    pub source: Source,
    /// Write the fetched rounds here as a snapshot.
    pub save: Option<PathBuf>,
    /// How to print.
    pub format: Format,
}

/// What the command ends with: text for stdout, a note for stderr, the
/// exit code.
#[derive(Debug)]
pub struct Outcome {
    /// The report (empty on an error).
    pub stdout: String,
    /// The error or note (empty when none).
    pub stderr: String,
    /// The exit code.
    pub exit: Exit,
}

/// Runs the command; `stop` is the SIGINT/SIGTERM flag of fetching.
pub fn run(req: &LocalizeRequest, stop: Option<&'static AtomicBool>) -> Outcome {
    let err = |exit: Exit, msg: String| Outcome {
        stdout: String::new(),
        stderr: msg,
        exit,
    };
    let snap = match &req.source {
        Source::Prometheus {
            url,
            at,
            rounds,
            window,
        } => {
            if !(1..=MAX_ROUNDS).contains(rounds) {
                return err(
                    Exit::Input,
                    format!("--rounds {rounds}: give 1 to {MAX_ROUNDS}"),
                );
            }
            let client = match Client::new(url, stop) {
                Ok(c) => c,
                Err(e) => return err(Exit::Input, e),
            };
            match prom::fetch(&client, *at, *rounds, *window) {
                Ok(s) => s,
                Err(FetchError::Interrupted) => {
                    return err(
                        Exit::Interrupted,
                        "interrupted while querying Prometheus; nothing printed".into(),
                    )
                }
                Err(FetchError::Failed(m)) => return err(Exit::Failed, m),
            }
        }
        Source::Snapshots(files) => {
            let mut parts = Vec::with_capacity(files.len());
            for f in files {
                match Snapshot::read(f) {
                    Ok(s) => parts.push(s),
                    Err(e) => return err(Exit::Input, format!("--snapshot {e}")),
                }
            }
            match Snapshot::merge(parts) {
                Ok(s) => s,
                Err(e) => return err(Exit::Input, format!("--snapshot: {e}")),
            }
        }
    };
    let mut stderr = String::new();
    if let Some(dir) = &req.save {
        match snap.save(dir) {
            Ok(p) => stderr = format!("saved the rounds to {}", p.display()),
            Err(e) => return err(Exit::Input, e),
        }
    }
    let r = report::localize(&snap);
    Outcome {
        stdout: report::render(&r, req.format),
        stderr,
        exit: if r.suspects.is_empty() {
            Exit::Ok
        } else {
            Exit::Check
        },
    }
}

/// Reads `--at`: unix seconds (`1764325200`, `1764325200.5`), an RFC 3339
/// UTC time (`2026-11-28T11:00:00Z`), `now`, or `now-DURATION`
/// (`now-1h`); `now` is `now_unix`.
pub fn parse_at(s: &str, now_unix: f64) -> Result<f64, String> {
    let bad = || {
        format!(
            "--at {s:?}: write unix seconds (1764325200), an RFC 3339 UTC time (2026-11-28T11:00:00Z), now, or now-DURATION (now-1h)"
        )
    };
    if s == "now" {
        return Ok(now_unix);
    }
    if let Some(d) = s.strip_prefix("now-") {
        let d = ibhost::duration::parse(d).map_err(|e| format!("--at {s:?}: {e}"))?;
        return Ok(now_unix - d.as_secs_f64());
    }
    if let Ok(v) = s.parse::<f64>() {
        return if v.is_finite() && v >= 0.0 {
            Ok(v)
        } else {
            Err(bad())
        };
    }
    rfc3339_utc(s).ok_or_else(bad)
}

/// `YYYY-MM-DDTHH:MM:SS[.frac]Z` as unix seconds.
fn rfc3339_utc(s: &str) -> Option<f64> {
    let s = s.strip_suffix('Z').or_else(|| s.strip_suffix('z'))?;
    let (date, time) = s.split_once(['T', 't', ' '])?;
    let d: Vec<&str> = date.split('-').collect();
    let t: Vec<&str> = time.split(':').collect();
    if d.len() != 3 || t.len() != 3 || d[0].len() != 4 {
        return None;
    }
    let (y, m, day): (i64, i64, i64) = (d[0].parse().ok()?, d[1].parse().ok()?, d[2].parse().ok()?);
    let (h, min): (i64, i64) = (t[0].parse().ok()?, t[1].parse().ok()?);
    let sec: f64 = t[2].parse().ok()?;
    if !(1..=12).contains(&m)
        || !(1..=31).contains(&day)
        || h > 23
        || min > 59
        || !(0.0..61.0).contains(&sec)
    {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let v = (days * 86_400 + h * 3600 + min * 60) as f64 + sec;
    (v >= 0.0).then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_takes_unix_seconds_rfc3339_and_now_minus() {
        assert_eq!(parse_at("1764325200", 0.0), Ok(1_764_325_200.0));
        assert_eq!(parse_at("1970-01-01T00:00:00Z", 0.0), Ok(0.0));
        assert_eq!(parse_at("2026-11-28T11:00:00Z", 0.0), Ok(1_795_863_600.0));
        assert_eq!(parse_at("2000-03-01T00:00:01.5Z", 0.0), Ok(951_868_801.5));
        assert_eq!(parse_at("now", 500.0), Ok(500.0));
        assert_eq!(parse_at("now-1m", 500.0), Ok(440.0));
        for bad in [
            "yesterday",
            "2026-13-01T00:00:00Z",
            "2026-11-28T11:00:00+01:00",
            "-5",
            "NaN",
        ] {
            assert!(parse_at(bad, 0.0).unwrap_err().contains("--at"), "{bad}");
        }
    }
}
