//! `ibtune experiment`: did this profile, or each of its knobs, help?
//!
//! The profile's variants ([`experiment::variants`]) are run in
//! interleaved blocks ([`ibstats::schedule`]); in each round the variant is
//! applied through the journal, COMMAND runs and prints an
//! `ibprobe.report/1` or `ibprobe.stream/1` JSON report on stdout, and the
//! variant is reverted ([`experiment::round`]). The rounds are compared by
//! `ibstats` and printed as ibprobe compare's report
//! ([`ibprobe::report::compare`]), plus the knob-by-knob attribution.
//!
//! The host is left as found: on success, on a failed COMMAND (the round
//! is left out), on a failed apply (rolled back; exit 3) and on SIGINT,
//! SIGTERM or SIGHUP (forwarded to COMMAND's own process group, which is
//! killed after [`ibhost::child::GRACE`]; the round in progress is
//! reverted; exit 130). `--round-timeout` stops a round the same way. COMMAND's
//! output is read bounded ([`MAX_REPORT`]). Only
//! SIGKILL or a power cut can stop it between apply and revert, and then
//! the journal is there for `ibtune revert`, as after any apply.

use super::exit;
use crate::host::{self, HostRoot};
use crate::tune::engine::{ApplyError, ApplyOptions};
use crate::tune::experiment::{self, RoundError, Variant};
use crate::tune::item::Knob;
use crate::tune::journal::{revert_command, Journal};
use crate::tune::plan::Plan;
use anyhow::{anyhow, bail, Context, Result};
use ibhost::child::{self, Ending};
use ibprobe::report::compare::{
    coarser, round_resolution, round_values, CompareReport, RoundValues, METRICS, ROUND_SCHEMAS,
};
use ibprobe::report::format::{self as text, render};
use ibstats::Better;
use serde::Serialize;
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// How the report is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// An aligned table.
    Table,
    /// `ibtune.experiment/1` (documented in ibtune/README.md).
    Json,
    /// A Markdown table.
    Markdown,
}

/// Everything `ibtune experiment` was asked, as typed settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The profile file or name.
    pub profile: PathBuf,
    /// Blocks of rounds (each variant once per block).
    pub rounds: usize,
    /// Each knob alone, and the profile without each knob.
    pub each_knob: bool,
    /// Seed of the run order.
    pub seed: Option<u64>,
    /// Output format.
    pub format: Format,
    /// An SVG of the effects.
    pub plot: Option<PathBuf>,
    /// No progress bar.
    pub quiet: bool,
    /// A round whose COMMAND runs longer is stopped and left out.
    pub timeout: Option<Duration>,
    /// The command and its arguments.
    pub command: Vec<String>,
}

/// Exit code: COMMAND failed in every round of some variant.
pub const EXIT_NO_ROUNDS: i32 = exit::COMMAND_FAILED;
/// Exit code: stopped by SIGINT, SIGTERM or SIGHUP (host restored).
pub const EXIT_INTERRUPTED: i32 = exit::INTERRUPTED;

/// The most bytes of COMMAND's stdout kept: a report with its histograms
/// is a few tens of KiB; more is read and dropped, and the round has no
/// report.
pub const MAX_REPORT: usize = 16 << 20;

/// Bytes of COMMAND's stderr kept at its start and at its end, for the
/// line quoted when a round fails.
const STDERR_KEEP: usize = 4096;

/// What one run of COMMAND gave.
enum Outcome {
    /// Its figures, and its clock's resolution (ns) when its report says.
    Values(RoundValues, Option<f64>),
    /// Non-zero exit, or stopped by --round-timeout: the round is left out.
    Failed(String),
    /// Exit 0 but no report: the COMMAND is wrong for an experiment (why).
    NoReport(String),
    /// ibtune was stopped by a signal while COMMAND ran (it was forwarded).
    Stopped,
}

/// Runs the experiment; the exit code.
pub fn run(s: &Settings, root: &HostRoot, state_dir: &Path) -> Result<i32> {
    if s.rounds < 2 {
        bail!(
            "--rounds {}: an experiment needs at least 2 rounds (6 or more for a verdict, 10 recommended)",
            s.rounds
        );
    }
    if s.command.is_empty() {
        bail!("give the command to measure after --, e.g. ibtune experiment PROFILE -- ibprobe loopback -t shm --json");
    }
    if root.is_live() && !nix::unistd::geteuid().is_root() {
        bail!("ibtune experiment needs root: it applies and reverts the profile in every round (with --root DIR it changes a snapshot instead)");
    }
    let host = host::discover(root)?;
    let resolved =
        crate::profile::resolve(&crate::profile::Profile::load(&s.profile)?, &host, root)?;
    let before = Plan::observe(&resolved, &host, root);
    let blocked = before.blocked();
    if !blocked.is_empty() {
        bail!(
            "profile {} cannot be applied here: {}; nothing was changed",
            before.profile,
            blocked.join("; ")
        );
    }
    let journal = Journal::open(state_dir)?;
    if !journal.records_for(root)?.is_empty() {
        bail!(
            "a profile is applied (journal {}): the experiment compares against the host without it; run `{}` first",
            journal.path().display(),
            revert_command(root.dir(), journal.dir())
        );
    }
    let (knobs, as_wanted) = experiment::knobs_of(&before);
    if knobs.is_empty() {
        bail!(
            "profile {} changes nothing on this host (every setting is already as wanted): there is nothing to compare",
            before.profile
        );
    }
    let variants = experiment::variants(&before.profile, &knobs, s.each_knob);
    let seed = s.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let order = ibstats::schedule(variants.len(), s.rounds, seed);
    let opts = ApplyOptions {
        exe: std::env::current_exe().context("cannot find the ibtune executable")?,
        fault: None,
    };
    child::stop_on_signals().context("cannot install the Ctrl-C handler")?;

    let bar = ibprobe::report::progress::progress_bar(
        s.quiet,
        (variants.len() * order.len()) as u64,
        "rounds",
    );
    let mut values: Vec<Vec<RoundValues>> = vec![Vec::new(); variants.len()];
    let mut resolution: Vec<Option<f64>> = vec![None; variants.len()];
    let mut failures: Vec<String> = Vec::new();
    let mut done = 0;
    let mut stopped: Option<(i32, String)> = None;
    'blocks: for block in &order {
        let mut this: Vec<Option<RoundValues>> = vec![None; variants.len()];
        for &v in block {
            if child::stop_signal().is_some() {
                stopped = Some((EXIT_INTERRUPTED, "interrupted".into()));
                break 'blocks;
            }
            bar.set_message(variants[v].label.clone());
            let r = experiment::round(&before, &variants[v], root, &journal, &opts, || {
                run_command(&s.command, s.timeout)
            });
            match r {
                Ok(Ok(Outcome::Values(x, r))) => {
                    this[v] = Some(x);
                    resolution[v] = coarser(resolution[v], r);
                }
                Ok(Ok(Outcome::Failed(why))) => {
                    failures.push(format!("{}: {why}", variants[v].label))
                }
                Ok(Ok(Outcome::NoReport(why))) => {
                    stopped = Some((
                        exit::COMMAND_FAILED,
                        format!(
                            "{} printed no {ROUND_SCHEMAS} JSON on stdout (expected e.g. `ibprobe loopback ... --json`): {why}",
                            s.command[0]
                        ),
                    ));
                    break 'blocks;
                }
                // The round was reverted; the check at the next round stops.
                Ok(Ok(Outcome::Stopped)) => {}
                Ok(Err(e)) => {
                    stopped = Some((exit::ERROR, format!("{e:#}")));
                    break 'blocks;
                }
                Err(e) => {
                    let code = match &e {
                        RoundError::Apply {
                            error: ApplyError::RollbackFailed { .. },
                            ..
                        }
                        | RoundError::Revert { .. } => exit::INCOMPLETE,
                        RoundError::Apply {
                            error: ApplyError::RolledBack { .. },
                            ..
                        } => exit::ROLLED_BACK,
                        RoundError::Apply { .. } => exit::ERROR,
                    };
                    stopped = Some((code, e.to_string()));
                    break 'blocks;
                }
            }
            bar.inc(1);
        }
        for (v, x) in this.into_iter().enumerate() {
            values[v].push(x.unwrap_or([None; METRICS.len()]));
        }
        done += 1;
    }
    bar.finish_and_clear();

    // The host as found? Every item's current value, read again.
    let host_after = host::discover(root)?;
    let after = Plan::observe(&resolved, &host_after, root);
    let differences = before.differences(&after);
    let journal_left = !journal.records()?.is_empty();

    let report = Report::new(
        s,
        &before,
        &variants,
        &as_wanted,
        seed,
        order[..done].to_vec(),
        &values,
        Restored {
            host_as_found: differences.is_empty() && !journal_left,
            differences: differences.clone(),
        },
    );
    let mut report = report;
    report.compare.mark_clock_resolution(&resolution);
    report.compare.warnings.extend(
        failures
            .iter()
            .take(5)
            .map(|f| format!("COMMAND failed in a round (left out): {f}")),
    );
    if let Some((code, why)) = &stopped {
        if *code == EXIT_INTERRUPTED {
            report.compare.warnings.push(format!(
                "interrupted after {done} of {} rounds; the host was restored",
                order.len()
            ));
        } else {
            eprintln!("ibtune experiment: {why}");
        }
    }
    if done > 0 {
        if let Some(p) = &s.plot {
            ibprobe::report::effects_plot::write_svg(p, &report.compare)
                .map_err(|e| anyhow!("{e}"))?;
        }
        print!("{}", report.render(s.format));
    }
    if !differences.is_empty() || journal_left {
        eprintln!(
            "ibtune experiment: the host is NOT as found: {}{}",
            differences.join("; "),
            if journal_left {
                format!(
                    "; journal kept at {}: run `{}`",
                    journal.path().display(),
                    revert_command(root.dir(), journal.dir())
                )
            } else {
                String::new()
            }
        );
        return Ok(exit::INCOMPLETE);
    }
    if let Some((code, _)) = stopped {
        return Ok(code);
    }
    if let Some(v) = report.compare.variants.iter().find(|v| v.rounds_ok == 0) {
        eprintln!(
            "ibtune experiment: COMMAND failed in every round of {:?} (first: {}); nothing to compare",
            v.value,
            failures.first().map_or("", String::as_str)
        );
        return Ok(EXIT_NO_ROUNDS);
    }
    Ok(exit::OK)
}

/// Runs COMMAND once (its own process group, output bounded, stopped by
/// `timeout` or by a stop signal to ibtune); its report's figures, or why
/// there are none.
/// The comparison in ibprobe's text table or Markdown (it has both).
fn compare_text(compare: &CompareReport, format: text::Format) -> String {
    render(compare, format).expect("a comparison has a table and Markdown")
}

fn run_command(command: &[String], timeout: Option<Duration>) -> Result<Outcome> {
    let limits = child::Limits {
        stdout_max: MAX_REPORT,
        stderr_keep: STDERR_KEEP,
        timeout,
        grace: child::GRACE,
    };
    let out = child::run(
        Command::new(&command[0]).args(&command[1..]),
        &limits,
        &child::stop_signal,
    )
    .with_context(|| format!("cannot run {}", command[0]))?;
    match out.ending {
        Ending::Stopped(_) => return Ok(Outcome::Stopped),
        Ending::TimedOut => {
            return Ok(Outcome::Failed(format!(
                "stopped by --round-timeout {} (killed); its last stderr line: {:?}",
                ibhost::duration::format(timeout.unwrap_or_default()),
                out.stderr.last_line()
            )))
        }
        Ending::Exited => {}
    }
    if !out.status.success() {
        return Ok(Outcome::Failed(format!(
            "{}: {:?}",
            out.status,
            out.stderr.last_line()
        )));
    }
    let Some(bytes) = out.stdout.all() else {
        return Ok(Outcome::NoReport(format!(
            "it printed {} bytes, more than the {} MiB a report may have (the rest was not kept)",
            out.stdout.total(),
            MAX_REPORT >> 20
        )));
    };
    let stdout = String::from_utf8_lossy(bytes);
    // The whole stdout, else its last line that is a report (a user's
    // benchmark may print other lines first).
    let figures = |d: Value| Some((round_values(&d)?, round_resolution(&d)));
    let doc = serde_json::from_str::<Value>(&stdout)
        .ok()
        .and_then(figures)
        .or_else(|| {
            stdout
                .lines()
                .rev()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .find_map(figures)
        });
    Ok(match doc {
        Some((v, r)) => Outcome::Values(v, r),
        None => Outcome::NoReport(format!("its first line: {:?}", out.stdout.first_line())),
    })
}

/// Whether the host was left as found, checked after the last round.
#[derive(Debug, Clone, Serialize)]
struct Restored {
    host_as_found: bool,
    differences: Vec<String>,
}

/// Knob `k`'s attribution on one metric.
#[derive(Debug, Clone, Serialize)]
struct KnobEffect {
    /// Only this knob, against the host as found.
    alone: Option<ibprobe::report::compare::EffectReport>,
    /// The whole profile against the profile without this knob: below 1
    /// for a latency (above 1 for a rate) when the knob helps inside the
    /// profile.
    in_profile: Option<ibprobe::report::compare::EffectReport>,
}

/// The experiment's report: ibprobe compare's, plus the profile, its
/// knobs and their attribution.
struct Report {
    compare: CompareReport,
    profile: String,
    root: String,
    variants: Vec<Variant>,
    knobs: Vec<(Knob, Vec<String>)>,
    as_wanted: Vec<Knob>,
    /// Per knob, per metric name.
    attribution: Vec<(Knob, Vec<(&'static str, KnobEffect)>)>,
    restored: Restored,
}

impl Report {
    #[allow(clippy::too_many_arguments)]
    fn new(
        s: &Settings,
        plan: &Plan,
        variants: &[Variant],
        as_wanted: &[Knob],
        seed: u64,
        order: Vec<Vec<usize>>,
        values: &[Vec<RoundValues>],
        restored: Restored,
    ) -> Report {
        let labels: Vec<String> = variants.iter().map(|v| v.label.clone()).collect();
        let mut compare = CompareReport::new(
            s.command.clone(),
            "variant".into(),
            seed,
            order,
            &labels,
            values,
        );
        compare.schema = "ibtune.experiment/1";
        compare.column = Some("variant".into());
        compare.title = Some(format!(
            "ibtune experiment {} -- {}: {} rounds per variant, medians over rounds; effect = ratio to the host as found [95% CI] verdict",
            plan.profile,
            s.command.join(" "),
            compare.rounds
        ));
        let full = &variants[1].knobs;
        let knobs: Vec<(Knob, Vec<String>)> = full
            .iter()
            .map(|&k| {
                let keys = plan
                    .with_knobs(&[k])
                    .items
                    .iter()
                    .map(|i| i.item.key.clone())
                    .collect();
                (k, keys)
            })
            .collect();
        let attribution = attribution(variants, values, full);
        Report {
            compare,
            profile: plan.profile.clone(),
            root: plan.root.clone(),
            variants: variants.to_vec(),
            knobs,
            as_wanted: as_wanted.to_vec(),
            attribution,
            restored,
        }
    }

    fn render(&self, f: Format) -> String {
        match f {
            Format::Json => {
                let mut s = serde_json::to_string_pretty(&self.json()).unwrap_or_default();
                s.push('\n');
                s
            }
            Format::Table => {
                compare_text(&self.compare, text::Format::Table) + &self.attribution_text("")
            }
            Format::Markdown => {
                compare_text(&self.compare, text::Format::Markdown) + &self.attribution_text("md")
            }
        }
    }

    fn json(&self) -> Value {
        let mut v = self.compare.to_value();
        let o = v.as_object_mut().expect("a report is an object");
        o.insert("profile".into(), json!(self.profile));
        o.insert("root".into(), json!(self.root));
        o.insert(
            "knobs".into(),
            json!(self
                .knobs
                .iter()
                .map(|(k, items)| json!({"name": k.name(), "items": items}))
                .collect::<Vec<_>>()),
        );
        o.insert(
            "knobs_already_as_wanted".into(),
            json!(self.as_wanted.iter().map(|k| k.name()).collect::<Vec<_>>()),
        );
        if let Some(vs) = o.get_mut("variants").and_then(Value::as_array_mut) {
            for (jv, var) in vs.iter_mut().zip(&self.variants) {
                jv["knobs"] = json!(var.knobs.iter().map(|k| k.name()).collect::<Vec<_>>());
            }
        }
        o.insert(
            "attribution".into(),
            Value::Object(
                self.attribution
                    .iter()
                    .map(|(k, per)| {
                        let m: serde_json::Map<String, Value> = per
                            .iter()
                            .map(|(name, e)| (name.to_string(), json!(e)))
                            .collect();
                        (k.name().to_string(), Value::Object(m))
                    })
                    .collect(),
            ),
        );
        o.insert("host_as_found".into(), json!(self.restored.host_as_found));
        o.insert("differences".into(), json!(self.restored.differences));
        v
    }

    /// The per-knob table (p99) and the closing line on the host.
    fn attribution_text(&self, style: &str) -> String {
        let mut out = String::new();
        let md = style == "md";
        if !self.attribution.is_empty() {
            out += if md {
                "\n**knob by knob (p99)**\n\n| knob | alone vs as found | its share in the profile (profile / profile without it) |\n|---|---|---|\n"
            } else {
                "\nknob by knob (p99): alone = only this knob vs the host as found; in profile = profile / profile without it\n"
            };
            // A p99 at the clock's resolution in any variant: its ratios
            // compare clock steps (the comparison's warning says so).
            let at_resolution = self
                .compare
                .variants
                .iter()
                .any(|v| v.at_clock_resolution.iter().any(|m| m == "p99"));
            for (k, per) in &self.attribution {
                let Some((_, e)) = per.iter().find(|(n, _)| *n == "p99") else {
                    continue;
                };
                let cell = |x: &Option<ibprobe::report::compare::EffectReport>| match x {
                    Some(_) if at_resolution => "at clock resolution".into(),
                    Some(e) => format!(
                        "x{:.2} [{:.2}, {:.2}] {}",
                        e.ratio,
                        e.ci[0],
                        e.ci[1],
                        if e.verdict == "no_significant_difference" {
                            "n.s."
                        } else {
                            e.verdict
                        }
                    ),
                    None => "-".into(),
                };
                if md {
                    let _ = writeln!(
                        out,
                        "| {} | {} | {} |",
                        k.name(),
                        cell(&e.alone),
                        cell(&e.in_profile)
                    );
                } else {
                    let _ = writeln!(
                        out,
                        "  {:<12} alone {:<32} in profile {}",
                        k.name(),
                        cell(&e.alone),
                        cell(&e.in_profile)
                    );
                }
            }
        }
        if !self.as_wanted.is_empty() {
            let _ = writeln!(
                out,
                "{}not tested (already as wanted on this host): {}",
                if md { "\n" } else { "" },
                self.as_wanted
                    .iter()
                    .map(|k| k.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let _ = writeln!(
            out,
            "{}host: {}",
            if md { "\n" } else { "" },
            if self.restored.host_as_found {
                "left as found (every setting of the profile read back, no journal left)"
                    .to_string()
            } else {
                format!("NOT as found: {}", self.restored.differences.join("; "))
            }
        );
        out
    }
}

/// Per knob and metric: the knob alone (from the variants' effects, one
/// Holm family with the other variants) and the profile against the
/// profile without it (one Holm family over the knobs).
fn attribution(
    variants: &[Variant],
    values: &[Vec<RoundValues>],
    full: &[Knob],
) -> Vec<(Knob, Vec<(&'static str, KnobEffect)>)> {
    if variants.len() <= 2 {
        return Vec::new();
    }
    let index = |knobs: &[Knob]| variants.iter().position(|v| v.knobs == knobs);
    let column =
        |v: usize, m: usize| -> Vec<Option<f64>> { values[v].iter().map(|r| r[m]).collect() };
    let mut out: Vec<(Knob, Vec<(&'static str, KnobEffect)>)> =
        full.iter().map(|&k| (k, Vec::new())).collect();
    for (m, metric) in METRICS.iter().enumerate() {
        let better: Better = metric.better;
        let cols: Vec<Vec<Option<f64>>> = (0..variants.len()).map(|v| column(v, m)).collect();
        // Alone: every "only k" against the baseline, as one family.
        let alone_idx: Vec<Option<usize>> = full.iter().map(|&k| index(&[k])).collect();
        let alone_pairs: Vec<ibstats::Pair> = alone_idx
            .iter()
            .flatten()
            .map(|&i| (cols[0].as_slice(), cols[i].as_slice()))
            .collect();
        let mut alone = ibstats::compare_pairs(&alone_pairs, better).into_iter();
        // In profile: the profile against "without k", as one family.
        let without_idx: Vec<Option<usize>> = full
            .iter()
            .map(|&k| {
                let rest: Vec<Knob> = full.iter().copied().filter(|&x| x != k).collect();
                index(&rest)
            })
            .collect();
        let in_pairs: Vec<ibstats::Pair> = without_idx
            .iter()
            .flatten()
            .map(|&i| (cols[i].as_slice(), cols[1].as_slice()))
            .collect();
        let mut in_profile = ibstats::compare_pairs(&in_pairs, better).into_iter();
        for (k, (a, w)) in alone_idx.iter().zip(&without_idx).enumerate() {
            let a = a.and_then(|_| alone.next().flatten()).map(Into::into);
            let w = w.and_then(|_| in_profile.next().flatten()).map(Into::into);
            if a.is_some() || w.is_some() {
                out[k].1.push((
                    metric.name,
                    KnobEffect {
                        alone: a,
                        in_profile: w,
                    },
                ));
            }
        }
    }
    out
}
