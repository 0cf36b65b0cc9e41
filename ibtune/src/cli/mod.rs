//! The `ibtune` command line: argument definitions and one function per
//! subcommand. Output formatting lives in [`output`].
//!
//! Why it exists: the binary (`main.rs`) stays a few lines; everything a
//! user can type is defined and documented here, and tests can call
//! [`main_with`] without spawning a process.

pub mod exit;
pub mod experiment;
pub mod output;
pub mod suggest;

use crate::host::{self, HostRoot};
use crate::profile::{self, Profile};
use crate::tune::boot::BootFragment;
use crate::tune::engine::{self, ApplyError, ApplyOptions};
use crate::tune::journal::{self, revert_command, Journal};
use crate::tune::plan::{self, Plan};
use crate::tune::{hold, run};
use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::time::Duration;

/// `--lock-wait`: the one duration syntax of the workspace.
fn parse_lock_wait(s: &str) -> Result<Duration, String> {
    ibhost::duration::parse(s).map_err(|e| e.to_string())
}

/// Takes the host lock for apply or revert; `Err(code)` when it could not.
fn host_lock(root: &HostRoot, wait: Duration) -> Result<host::HostLock, i32> {
    root.lock(wait).map_err(|e| {
        eprintln!("ibtune: {e}");
        match e {
            host::LockError::Busy { .. } => exit::LOCKED,
            host::LockError::Io { .. } => exit::ERROR,
        }
    })
}

const AFTER_HELP: &str = "\
Workflow:
  ibtune show                     # what the host is, with warnings
  ibtune plan thesis-2hca         # what would change (no root needed)
      # needs the profile's HCAs
  sudo ibtune apply thesis-2hca   # journal originals, then change
      # changes this host
  ibtune verify thesis-2hca       # exit 0 = matches, 1 = drift, 2 = error
      # needs the profile's HCAs
  sudo ibtune run thesis-2hca --cpuset real-time-0 -- ./my-rt-app
      # your program on the isolated CPUs (changes this host)
  sudo ibtune revert              # restore every journalled value
      # changes this host
  sudo ibtune experiment thesis-2hca --rounds 10 --each-knob -- \\
       ibprobe loopback -t rc --json
      # did the profile, or each knob, help? (changes this host)

PROFILE is a file, or a name from ./profiles, /etc/ibtune/profiles or
/usr/share/ibtune/profiles (the Debian package installs the shipped ones there).
Every host file is read and written under --root, so the same commands
work on a captured snapshot (tests/fixtures/*); `run` alone refuses --root
(it starts a process on this machine). --root is a jail: links in the
tree resolve inside it, only regular files are read or written (at most
16 MiB each), and apply/revert lock the root folder so two ibtune
processes never change one host at once (--lock-wait). A state folder
holds one root's journal: a journal of another root is refused, and the
default --state-dir is one per root.";

/// The top-level `--help` epilogue: the workflow, then the toolkit's exit
/// code table (`ibhost::exit`).
fn after_help() -> String {
    format!("{AFTER_HELP}\n\n{}", ibhost::exit::help())
}

const EXPERIMENT_HELP: &str = "\
Each round applies the variant through the journal (as `apply` does), runs
COMMAND, and reverts; the variants run in randomised blocks (ABBA...) so
drift cancels. Variants: the host as found (the baseline) and the whole
profile; with --each-knob also each knob alone and the profile without
each knob, so the report attributes the effect knob by knob. Effects are
ratios to the baseline with 95% intervals (Hodges-Lehmann, exact Wilcoxon
signed-rank) and verdicts at 5% after Holm: see the ibstats crate.

The host is left as found on success, on a failed COMMAND (that round is
left out), on a failed apply (exit 3) and on Ctrl-C, SIGTERM or SIGHUP
(exit 130): COMMAND runs in its own process group, the signal is
forwarded to it, and it is killed if it has not ended 5 s later.
--round-timeout stops a round that runs longer the same way (left out as
failed). COMMAND's stdout is kept up to 16 MiB, its stderr as a short
excerpt. After kill -9 the journal is there for `ibtune revert`, as
after any apply.

Examples:
  sudo ibtune experiment thesis-2hca --rounds 10 -- \\
       ibprobe loopback -t rc --dev mlx5_0 --json
      # changes this host
  sudo ibtune experiment thesis-2hca --each-knob --format markdown -- \\
       ibprobe stream -t rc --batch 16 --count 100000 --json
      # changes this host
  cp -a tests/fixtures/thesis-2s-mlx5 fixture-copy && \\
  ibtune experiment --root fixture-copy --state-dir exp-state \\
       profiles/thesis-2hca.toml --rounds 6 --json -- \\
       ibprobe loopback -t shm --count 2000 --json
      # on a copy of a captured host, from a checkout

Exit codes (the toolkit's table, `ibtune --help`): 0 done; 2 bad input
(nothing changed); 3 an apply failed and was rolled back; 4 the host could
not be restored (journal kept: run the revert command given); 5 another
ibtune held the host lock for all of --lock-wait (nothing changed); 6 COMMAND
failed in every round of a variant, or printed no report (host restored);
130 interrupted (host restored).";

/// Apply, verify, hold and revert a host latency profile for RDMA real-time work.
#[derive(Debug, Parser)]
#[command(name = "ibtune", version, about, after_help = after_help())]
pub struct Cli {
    /// Host root: `/` for this machine, or a snapshot directory.
    #[arg(long, global = true, default_value = "/", value_name = "DIR")]
    pub root: PathBuf,
    /// Where the journal and holder pidfile live; one folder per root: a
    /// journal written for another --root is refused [default:
    /// /var/lib/ibtune for this machine, /var/lib/ibtune/roots/NAME for
    /// --root DIR, NAME being DIR's canonical path as `systemd-escape
    /// --path` writes it].
    #[arg(long, global = true, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// How long apply and revert wait for another ibtune that is changing
    /// the same --root (whatever its --state-dir) before giving up with
    /// exit code 5: e.g. 30s, 500ms, 2m; 0 = do not wait.
    #[arg(
        long,
        global = true,
        default_value = "30s",
        value_name = "DURATION",
        value_parser = parse_lock_wait
    )]
    pub lock_wait: Duration,
    /// The subcommand.
    #[command(subcommand)]
    pub cmd: Cmd,
}

/// Output choice shared by the reporting commands.
#[derive(Debug, Args, Clone, Copy)]
pub struct JsonFlag {
    /// Output format: table, or json (stable field names).
    #[arg(short = 'f', long, value_enum, default_value_t = OutputFormat::Table)]
    pub format: OutputFormat,
    /// Same as --format json.
    #[arg(long)]
    pub json: bool,
}

/// What `show`, `plan`, `apply`, `verify` and `revert` print (`experiment`
/// adds Markdown: its own `Format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// Aligned text for a terminal.
    Table,
    /// JSON with stable field names.
    Json,
}

impl JsonFlag {
    /// Whether JSON was asked for, by `--json` or `--format json`.
    pub fn is_json(&self) -> bool {
        self.json || self.format == OutputFormat::Json
    }
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Show the host as discovered: CPUs, NUMA, RDMA devices, IRQs, cgroups,
    /// irqbalance, tuned, cpu_dma_latency, and warnings (mlnx_tune style).
    Show {
        #[command(flatten)]
        json: JsonFlag,
        /// Check NUMA locality against this profile's cpusets.
        #[arg(long, value_name = "PROFILE")]
        profile: Option<PathBuf>,
    },
    /// Print every setting of PROFILE as current -> wanted; changes nothing.
    Plan {
        /// Profile file or name.
        profile: PathBuf,
        /// Print only the kernel parameters of the profile's [boot] section,
        /// as a line for /etc/default/grub or a file in /etc/default/grub.d/:
        /// GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX ...".
        #[arg(long)]
        boot_fragment: bool,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Apply PROFILE: journal each original value durably, then change it.
    /// On any failure, roll back what this run did. Idempotent. Exit 1 when
    /// the kernel granted fewer huge pages than asked (each node says how
    /// many, and what to do).
    Apply {
        /// Profile file or name.
        profile: PathBuf,
        /// Also write the [boot] kernel parameters as a GRUB fragment to
        /// FILE (e.g. /etc/default/grub.d/ibtune.cfg), journalled: revert
        /// removes a file it created and restores one it changed. ibtune
        /// touches the boot loader only here, and never runs update-grub.
        #[arg(long, value_name = "FILE")]
        boot_file: Option<String>,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Check the host against PROFILE: exit 0 if it matches, 1 on drift.
    ///
    /// Then watches the profile's isolated CPUs (or, with none isolated, its cpuset CPUs) for
    /// --watch and lists what still reached them: interrupts by source, busy time, and
    /// scheduling where /proc/schedstat exists. That is evidence, not a setting: the exit code
    /// stays that of the settings.
    Verify {
        /// Profile file or name.
        profile: PathBuf,
        /// How long to watch the isolated CPUs, e.g. 1s, 200ms; 0 skips it [default: 1s on the
        /// live host, 0 under --root, whose files do not move].
        #[arg(long = "watch", alias = "window", value_name = "DURATION", value_parser = parse_window)]
        window: Option<std::time::Duration>,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Print a starting profile for this host: isolated whole cores on each
    /// HCA's NUMA node, its IRQs on that node's housekeeping CPUs, and the
    /// busy-poll settings, with a comment on every choice. Changes nothing.
    ///
    /// Save it, check it with `plan`, then `apply` it. A host that cannot be
    /// tuned as asked (one CPU, no HCA unless --hca none, no cpuset
    /// controller, a node without cores to spare) gets the reason and exit 3.
    #[command(after_help = suggest::SUGGEST_HELP)]
    Suggest(suggest::SuggestArgs),
    /// Restore every journalled value, newest first (also after a crash in apply).
    Revert {
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Did PROFILE, or each of its knobs, help? Alternates "applied" and
    /// "reverted" in randomised blocks, runs COMMAND in every round, and
    /// compares the latency figures of its JSON report with confidence
    /// intervals and verdicts.
    #[command(after_help = EXPERIMENT_HELP)]
    Experiment {
        /// Profile file or name.
        profile: PathBuf,
        /// Rounds per variant (blocks); 6 or more for a verdict, 10 or
        /// more recommended.
        #[arg(long, default_value_t = 10, value_name = "N")]
        rounds: usize,
        /// Also each knob alone and the profile without each knob (knobs:
        /// cpusets, irq, sysctl, cpu, thp, tuned, dma_latency, hugepages).
        #[arg(long)]
        each_knob: bool,
        /// Seed of the run order (printed in the report), to repeat one.
        #[arg(long, value_name = "N")]
        seed: Option<u64>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = experiment::Format::Table)]
        format: experiment::Format,
        /// Same as --format json.
        #[arg(long)]
        json: bool,
        /// Also write the effects with their intervals as an SVG.
        #[arg(long, value_name = "FILE.svg")]
        plot: Option<PathBuf>,
        /// No progress bar.
        #[arg(short, long)]
        quiet: bool,
        /// Stop a round whose COMMAND runs longer than this (SIGTERM to its
        /// process group, SIGKILL 5 s later); the round is left out as a
        /// failed one, e.g. 90s, 5m [default: no limit].
        #[arg(long = "round-timeout", alias = "timeout", value_name = "DURATION", value_parser = parse_timeout)]
        timeout: Option<Duration>,
        /// The measurement: a command that prints an ibprobe.report/1 or
        /// ibprobe.stream/1 JSON report on stdout (ibprobe ... --json).
        #[arg(last = true, required = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Hold /dev/cpu_dma_latency at N microseconds until SIGTERM or Ctrl-C.
    /// The kernel drops the request when the holder exits, so it must keep
    /// running; see systemd/ibtune-hold@.service.
    Hold {
        /// Maximum wake-up latency to request, in microseconds (0 = no deep C-states).
        #[arg(long, value_name = "N")]
        us: i32,
        /// Write the holder's pid here once the value is in place.
        #[arg(long, value_name = "FILE")]
        pidfile: Option<PathBuf>,
    },
    /// Run CMD inside a cpuset of PROFILE, with its CPU affinity and NUMA
    /// memory policy (and SCHED_FIFO with --fifo). This machine only: it
    /// refuses --root, whose cgroups and CPUs are not where CMD would run.
    Run {
        /// Profile file or name.
        profile: PathBuf,
        /// Name of the [[cpuset]] to run in.
        #[arg(long, value_name = "NAME")]
        cpuset: String,
        /// Run under SCHED_FIFO at this priority (1-99).
        #[arg(long, value_name = "PRIO", value_parser = clap::value_parser!(i32).range(1..=99))]
        fifo: Option<i32>,
        /// Command and its arguments.
        #[arg(last = true, required = true, value_name = "CMD")]
        cmd: Vec<String>,
    },
}

/// Runs the CLI and returns the process exit code.
pub fn main_with(cli: Cli) -> i32 {
    match dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ibtune: {e:#}");
            exit::ERROR
        }
    }
}

fn dispatch(cli: Cli) -> Result<i32> {
    let root = HostRoot::new(&cli.root)?;
    let state_dir = cli
        .state_dir
        .clone()
        .unwrap_or_else(|| journal::default_state_dir(&root));
    match cli.cmd {
        Cmd::Show { json, profile } => {
            let host = host::discover(&root)?;
            let rt = match profile {
                Some(p) => Some(load(&p, &host, &root)?.cpuset_cpus()),
                None => (!host.cpus.isolated.is_empty()).then(|| host.cpus.isolated.clone()),
            };
            let warnings = host::warnings::host_warnings(&host, rt.as_ref());
            if json.is_json() {
                output::json(&serde_json::json!({ "host": host, "warnings": warnings }))?;
            } else {
                print!("{}", output::show_text(&host, &warnings));
            }
            Ok(exit::OK)
        }
        Cmd::Plan {
            profile,
            boot_fragment: true,
            json,
        } => {
            let (r, _) = plan_for(&profile, &root)?;
            let Some(f) = BootFragment::of(&r) else {
                bail!(
                    "profile {} asks for no kernel parameter: its [boot] section is missing, or it has no isolated cpuset for isolcpus, nohz_full, rcu_nocbs and irqaffinity (see profiles/README.md)",
                    r.name
                );
            };
            if json.is_json() {
                output::json(&f)?;
            } else {
                println!("{}", f.fragment);
            }
            Ok(exit::OK)
        }
        Cmd::Plan { profile, json, .. } => {
            let (_, plan) = plan_for(&profile, &root)?;
            if json.is_json() {
                output::json(&plan)?;
            } else {
                print!("{}", output::plan_text(&plan, "plan"));
            }
            Ok(exit::OK)
        }
        Cmd::Verify {
            profile,
            window,
            json,
        } => {
            let (resolved, mut plan) = plan_for(&profile, &root)?;
            // What an apply set and the kernel granted in part is told apart
            // from what was never applied: the open journal names the former.
            plan.mark_short(&Journal::applied_keys(&state_dir, &root));
            let drift = plan.summary.change + plan.summary.short > 0;
            let window = window.unwrap_or(if root.is_live() {
                std::time::Duration::from_secs(1)
            } else {
                std::time::Duration::ZERO
            });
            let (watched, what) = watched_cpus(&resolved);
            let activity = (!window.is_zero() && !watched.is_empty())
                .then(|| host::activity::observe(&root, &watched, window));
            if json.is_json() {
                output::json(&serde_json::json!({
                    "matches": !drift,
                    "drifted": plan.items.iter().filter(|i| matches!(i.observed.status, crate::tune::item::Status::Change | crate::tune::item::Status::Short)).collect::<Vec<_>>(),
                    "plan": plan,
                    "activity": activity,
                }))?;
            } else {
                print!("{}", output::plan_text(&plan, "verify"));
                if let Some(a) = &activity {
                    for l in a.lines(what) {
                        println!("evidence: {l}");
                    }
                    for n in &a.notes {
                        println!("note: {n}");
                    }
                }
                for m in plan.short() {
                    println!("short: {m}");
                }
                if drift {
                    println!(
                        "drift: {} setting(s) differ from profile {}",
                        plan.summary.change + plan.summary.short,
                        plan.profile
                    );
                } else {
                    println!("ok: host matches profile {}", plan.profile);
                }
            }
            Ok(if drift { exit::DRIFT } else { exit::OK })
        }
        Cmd::Apply {
            profile,
            boot_file,
            json,
        } => {
            need_root(
                &root,
                "apply",
                "it writes /proc/irq, cgroups, sysctls and /etc",
            )?;
            // Lock before planning: a plan read while another apply runs
            // would journal that run's values as originals.
            let _lock = match host_lock(&root, cli.lock_wait) {
                Ok(l) => l,
                Err(code) => return Ok(code),
            };
            let (r, mut plan) = plan_for(&profile, &root)?;
            if let Some(path) = &boot_file {
                let Some(f) = BootFragment::of(&r) else {
                    bail!(
                        "--boot-file {path}: profile {} asks for no kernel parameter, so there is nothing to write; nothing was changed",
                        r.name
                    );
                };
                plan.push(f.file_item(path, &root), &root);
            }
            let journal = Journal::open(&state_dir)?;
            let opts = ApplyOptions {
                exe: std::env::current_exe().context("cannot find the ibtune executable")?,
                fault: None,
            };
            match engine::apply(&plan, &root, &journal, &opts) {
                Ok(rep) => {
                    if json.is_json() {
                        output::json(&rep)?;
                    } else {
                        // Boot parameters are advice: say so in the words
                        // `plan` uses, never as "as wanted".
                        let advice = if rep.advice > 0 {
                            format!(
                                "; {} boot advice not applied at run time (`ibtune plan` prints the kernel command line to add)",
                                rep.advice
                            )
                        } else {
                            String::new()
                        };
                        if rep.changed.is_empty() {
                            println!(
                                "nothing to change: host already matches profile {}{advice}",
                                plan.profile
                            );
                        } else {
                            for k in &rep.changed {
                                let what = plan.items.iter().find(|i| &i.item.key == k);
                                println!(
                                    "changed {}",
                                    what.map_or(k.as_str(), |i| i.item.what.as_str())
                                );
                            }
                            println!(
                                "applied profile {}: {} changed, {} already as wanted{advice}; journal {}",
                                plan.profile,
                                rep.changed.len(),
                                rep.unchanged,
                                rep.journal
                            );
                        }
                        for m in &rep.short {
                            eprintln!("ibtune apply: short: {m}");
                        }
                    }
                    // Not a silent success: the host holds less than the profile asks.
                    Ok(exit::of_apply(&rep))
                }
                Err(e) => {
                    eprintln!("ibtune apply: {e}");
                    Ok(match e {
                        ApplyError::RolledBack { .. } => exit::ROLLED_BACK,
                        ApplyError::RollbackFailed { .. } => exit::INCOMPLETE,
                        _ => exit::ERROR,
                    })
                }
            }
        }
        Cmd::Revert { json } => {
            need_root(
                &root,
                "revert",
                "it writes /proc/irq, cgroups, sysctls and /etc",
            )?;
            let _lock = match host_lock(&root, cli.lock_wait) {
                Ok(l) => l,
                Err(code) => return Ok(code),
            };
            let journal = Journal::open(&state_dir)?;
            // A damaged or edited journal, or one of another root, is bad
            // input (exit 2): nothing is undone from it.
            journal.records_for(&root)?;
            match engine::revert(&root, &journal) {
                Ok(rep) => {
                    if json.is_json() {
                        output::json(&rep)?;
                    } else if let Some(p) = &rep.profile {
                        println!(
                            "reverted profile {p}: {} value(s) restored{}; journal archived at {}",
                            rep.undone,
                            if rep.incomplete_apply {
                                " (from an apply that did not finish)"
                            } else {
                                ""
                            },
                            rep.archived.as_deref().unwrap_or("-")
                        );
                    } else {
                        println!("nothing to revert: no journal in {}", state_dir.display());
                    }
                    Ok(exit::OK)
                }
                Err(e) => {
                    eprintln!(
                        "ibtune revert: {e:#}; the journal is kept: fix that, then run `{}` again",
                        revert_command(root.dir(), &state_dir)
                    );
                    Ok(exit::INCOMPLETE)
                }
            }
        }
        Cmd::Experiment {
            profile,
            rounds,
            each_knob,
            seed,
            format,
            json,
            plot,
            quiet,
            timeout,
            command,
        } => {
            let settings = experiment::Settings {
                profile,
                rounds,
                each_knob,
                seed,
                format: if json {
                    experiment::Format::Json
                } else {
                    format
                },
                plot,
                quiet,
                timeout,
                command,
            };
            // One lock for the whole experiment: no other ibtune may change
            // the host between a round's apply and its revert.
            let _lock = match host_lock(&root, cli.lock_wait) {
                Ok(l) => l,
                Err(code) => return Ok(code),
            };
            experiment::run(&settings, &root, &state_dir)
        }
        Cmd::Suggest(args) => suggest::run(&args, &root),
        Cmd::Hold { us, pidfile } => {
            hold::hold(&root, us, pidfile.as_deref())?;
            Ok(exit::OK)
        }
        Cmd::Run {
            profile,
            cpuset,
            fifo,
            cmd,
        } => {
            if !root.is_live() {
                bail!(
                    "ibtune run starts {} on this machine, and --root {} is a tree, not this machine: its cgroups and CPUs are not where the process would run, so nothing was done. Run it without --root on the host the tree was taken from; `ibtune --root {} plan {}` shows the tree's cpuset {cpuset}",
                    cmd.first().map_or("the command", String::as_str),
                    root.dir().display(),
                    root.dir().display(),
                    profile.display()
                );
            }
            let host = host::discover(&root)?;
            let r = load(&profile, &host, &root)?;
            let cs = r.cpuset(&cpuset).ok_or_else(|| {
                let names: Vec<&str> = r.cpusets.iter().map(|c| c.name.as_str()).collect();
                anyhow!(
                    "no cpuset {cpuset:?} in profile {}; cpusets: {}",
                    r.name,
                    names.join(", ")
                )
            })?;
            let procs = plan::cgroup_procs_file(&host, cs);
            let dir = plan::cgroup_dir(&host, cs);
            let cgroup_procs = match (&procs, &dir) {
                (Some(p), Some(d)) if root.is_dir(d) => Some(p.clone()),
                _ => bail!(
                    "cpuset {cpuset} is not applied on this host (no cgroup {}); run `ibtune apply {}` first",
                    dir.unwrap_or_else(|| "-".into()),
                    profile.display()
                ),
            };
            if root.is_live() && !nix::unistd::geteuid().is_root() {
                bail!(
                    "ibtune run needs root: it joins a cgroup{}",
                    if fifo.is_some() {
                        " and sets SCHED_FIFO"
                    } else {
                        ""
                    }
                );
            }
            let spec = run::RunSpec {
                cgroup_procs,
                cpus: cs.cpus.clone(),
                mems: cs.mems.clone(),
                mem_policy: r.mem_policy.unwrap_or(crate::sys::MemPolicy::Default),
                fifo,
            };
            Err(run::exec(&root, &spec, &cmd))
        }
    }
}

fn need_root(root: &HostRoot, cmd: &str, why: &str) -> Result<()> {
    if root.is_live() && !nix::unistd::geteuid().is_root() {
        bail!("ibtune {cmd} needs root: {why} (run it with sudo; `ibtune plan` shows the changes without root)");
    }
    Ok(())
}

fn load(path: &std::path::Path, host: &host::Host, root: &HostRoot) -> Result<profile::Resolved> {
    let p = Profile::load(path)?;
    Ok(profile::resolve(&p, host, root)?)
}

/// The CPUs `verify` watches: the isolated cpusets' CPUs, else every
/// cpuset CPU; and the word for them ("isolated", "in a cpuset").
fn watched_cpus(r: &profile::Resolved) -> (Vec<usize>, &'static str) {
    let isolated: Vec<usize> = r
        .cpusets
        .iter()
        .filter(|c| c.isolated)
        .flat_map(|c| c.cpus.iter().map(|x| x as usize))
        .collect();
    if !isolated.is_empty() {
        return (isolated, "isolated");
    }
    (
        r.cpuset_cpus().iter().map(|x| x as usize).collect(),
        "in a real-time cpuset",
    )
}

/// `experiment --round-timeout`: the workspace's duration syntax, above zero.
fn parse_timeout(s: &str) -> Result<Duration, String> {
    match ibhost::duration::parse(s) {
        Ok(d) if !d.is_zero() => Ok(d),
        Ok(_) => Err(format!(
            "{s:?}: a round needs some time; leave --round-timeout out for no limit"
        )),
        Err(e) => Err(format!("{s:?}: {e}; e.g. --round-timeout 90s or 5m")),
    }
}

/// Old spellings still accepted, with a warning (`ibhost::renamed`).
pub const RENAMED: &[ibhost::renamed::Renamed] = &[
    ibhost::renamed::Renamed {
        old: "--window",
        new: "--watch",
        command: "ibtune verify",
    },
    ibhost::renamed::Renamed {
        old: "--timeout",
        new: "--round-timeout",
        command: "ibtune experiment",
    },
];

/// `--watch`: the workspace's duration syntax.
fn parse_window(s: &str) -> Result<std::time::Duration, String> {
    ibhost::duration::parse(s).map_err(|e| format!("{s:?}: {e}; e.g. --watch 1s or 200ms"))
}

fn plan_for(path: &std::path::Path, root: &HostRoot) -> Result<(profile::Resolved, Plan)> {
    let host = host::discover(root)?;
    // On stderr, so JSON on stdout stays clean: `show` lists them too.
    for p in &host.read_problems {
        eprintln!("ibtune: warning: {p}");
    }
    let r = load(path, &host, root)?;
    let placements: Vec<(&str, &ibhost::CpuSet)> = r
        .irqs
        .iter()
        .map(|i| (i.device.as_str(), &i.targets))
        .collect();
    for w in host::warnings::irq_placement_warnings(&host, &placements) {
        eprintln!("ibtune: warning: {}", w.message);
    }
    let plan = Plan::observe(&r, &host, root);
    Ok((r, plan))
}
