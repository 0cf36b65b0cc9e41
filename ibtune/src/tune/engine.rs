//! Apply, roll back and revert: the only code that changes the host.
//!
//! Why it exists: the promise "every change is journalled before it is
//! made, so it can be reverted exactly" lives here. [`apply`] journals a
//! record, then makes the change, item by item; on an error it undoes what
//! it did, newest first. [`revert`] undoes a whole journal, also one left by
//! a crash. Each `Action` has exactly one `change_*` and one undo path.

use super::hold;
use super::item::{bracketed, Action, Cmp, Status};
use super::journal::{now, revert_command, Journal, Record, Restore};
use super::plan::Plan;
use crate::host::HostRoot;
use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where to inject a fault, for the crash-safety tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Change number `n` (from 0) fails after its record was journalled;
    /// apply must roll back.
    FailAt(usize),
    /// The process "dies" right after journalling change `n`: apply
    /// returns at once, leaving host and journal as a crash would.
    CrashAfterJournal(usize),
    /// The process "dies" right after making change `n`.
    CrashAfterChange(usize),
    /// The kernel grants only this many pages of every page count written
    /// (as a node with fragmented memory does): a fixture tree has no
    /// kernel, so the number is written back after the change.
    ShortGrant(u64),
}

/// Options for [`apply`].
#[derive(Debug, Clone)]
pub struct ApplyOptions {
    /// The `ibtune` executable, used to start the cpu_dma_latency holder.
    pub exe: PathBuf,
    /// Fault injection (tests only).
    pub fault: Option<Fault>,
}

/// What an apply did.
#[derive(Debug, Clone, Serialize)]
pub struct ApplyReport {
    /// Keys of the items changed, in order.
    pub changed: Vec<String>,
    /// Items that already matched.
    pub unchanged: usize,
    /// Boot parameters the profile advises: never applied at run time
    /// (`ibtune plan` prints the kernel command line to add).
    pub advice: usize,
    /// Page counts the kernel granted only in part, read back after the
    /// write: what is missing and what to do (apply exits 1).
    pub short: Vec<String>,
    /// The journal file.
    pub journal: String,
}

/// Why apply stopped.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The plan has items that cannot be applied on this host; nothing was changed.
    #[error("cannot apply: {0}; nothing was changed")]
    Blocked(String),
    /// Another profile is applied; nothing was changed. The profile's
    /// name, and the command that reverts it.
    #[error("profile {0:?} is applied; run `{1}` first; nothing was changed")]
    OtherProfile(String, String),
    /// A change failed and everything this run did was undone.
    #[error("{key}: {cause:#}; rolled back the {undone} change(s) made by this run")]
    RolledBack {
        /// Item that failed.
        key: String,
        /// Why.
        cause: anyhow::Error,
        /// Changes undone.
        undone: usize,
    },
    /// A change failed and the rollback failed too: the journal stays for `revert`.
    #[error("{key}: {cause:#}; rollback also failed ({rollback:#}); the journal is kept: fix that, then run `{revert}`")]
    RollbackFailed {
        /// Item that failed.
        key: String,
        /// Why.
        cause: anyhow::Error,
        /// Why the rollback failed.
        rollback: anyhow::Error,
        /// The command that reverts the journal.
        revert: String,
    },
    /// Injected crash (tests).
    #[error("injected crash at change {0}")]
    Crashed(usize),
    /// Anything else (journal I/O before any change).
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

/// Applies `plan` to `root`, journalling under `journal`.
pub fn apply(
    plan: &Plan,
    root: &HostRoot,
    journal: &Journal,
    opts: &ApplyOptions,
) -> Result<ApplyReport, ApplyError> {
    let blocked = plan.blocked();
    if !blocked.is_empty() {
        return Err(ApplyError::Blocked(blocked.join("; ")));
    }
    // A journal of another root is refused: one state folder, one root.
    let existing = journal.records_for(root)?;
    if let Some(Record::Begin { profile, .. }) = existing.first() {
        if *profile != plan.profile {
            return Err(ApplyError::OtherProfile(
                profile.clone(),
                revert_command(root.dir(), journal.dir()),
            ));
        }
    }
    // Keys already journalled keep their first (pre-apply) original.
    let journalled: BTreeSet<String> = existing
        .iter()
        .filter_map(|r| r.key().map(String::from))
        .collect();
    // Boot parameters are never changed at run time (a reboot is); a page
    // count the kernel granted in part is written again.
    let todo: Vec<_> = plan
        .items
        .iter()
        .filter(|i| matches!(i.observed.status, Status::Change | Status::Short))
        .filter(|i| !matches!(i.item.action, Action::Boot { .. }))
        .collect();
    let mut report = ApplyReport {
        changed: Vec::new(),
        unchanged: plan
            .items
            .iter()
            .filter(|i| i.observed.status == Status::Ok)
            .count(),
        advice: plan
            .items
            .iter()
            .filter(|i| matches!(i.item.action, Action::Boot { .. }))
            .filter(|i| i.observed.status != Status::Ok)
            .count(),
        short: Vec::new(),
        journal: journal.path().display().to_string(),
    };
    if todo.is_empty() {
        return Ok(report);
    }
    if existing.is_empty() {
        journal.append(&Record::Begin {
            profile: plan.profile.clone(),
            profile_path: plan.profile_path.clone(),
            root: plan.root.clone(),
            time: now(),
        })?;
    }
    let mut done: Vec<Record> = Vec::new();
    let fresh = existing.is_empty();
    let fail =
        |done: &[Record], key: String, cause| rollback(root, journal, done, fresh, key, cause);
    for (n, it) in todo.iter().enumerate() {
        let key = it.item.key.clone();
        let record = match pre_image(&it.item.action, &key, root, journal.dir()) {
            Ok(r) => r,
            Err(cause) => return Err(fail(&done, key, cause)),
        };
        if !journalled.contains(&key) {
            journal.append(&record)?;
        }
        if opts.fault == Some(Fault::CrashAfterJournal(n)) {
            return Err(ApplyError::Crashed(n));
        }
        let res = if opts.fault == Some(Fault::FailAt(n)) {
            Err(anyhow!("injected failure"))
        } else {
            change(&it.item.action, root, journal.dir(), opts)
        };
        // Undo this record too if the change failed half way.
        done.push(record);
        if let Err(cause) = res {
            return Err(fail(&done, key, cause));
        }
        if opts.fault == Some(Fault::CrashAfterChange(n)) {
            return Err(ApplyError::Crashed(n));
        }
        if let (
            Some(Fault::ShortGrant(granted)),
            Action::File {
                path,
                cmp: Cmp::Pages,
                ..
            },
        ) = (opts.fault, &it.item.action)
        {
            if let Err(cause) = root.write(path, format!("{granted}\n").as_bytes()) {
                return Err(fail(&done, key, cause.into()));
            }
        }
        report.changed.push(key);
        // The kernel may grant fewer huge pages than written, silently.
        if let Action::File { path, .. } = &it.item.action {
            if let Some(m) = root.read_opt(path).and_then(|now| it.item.shortfall(&now)) {
                report.short.push(m);
            }
        }
    }
    journal.append(&Record::Commit { time: now() })?;
    Ok(report)
}

fn rollback(
    root: &HostRoot,
    journal: &Journal,
    done: &[Record],
    fresh: bool,
    key: String,
    cause: anyhow::Error,
) -> ApplyError {
    let undone = done.len();
    match undo_all(root, done) {
        Ok(()) => {
            if fresh {
                // The host is as before this run: the journal has nothing left to revert.
                let _ = journal.discard();
            }
            ApplyError::RolledBack { key, cause, undone }
        }
        Err(rollback) => ApplyError::RollbackFailed {
            key,
            cause,
            rollback,
            revert: revert_command(root.dir(), journal.dir()),
        },
    }
}

/// What revert did.
#[derive(Debug, Clone, Serialize)]
pub struct RevertReport {
    /// Profile that was reverted, if a journal was open.
    pub profile: Option<String>,
    /// Records undone.
    pub undone: usize,
    /// Where the journal was archived.
    pub archived: Option<String>,
    /// True when the journal had no commit (apply crashed or was killed).
    pub incomplete_apply: bool,
}

/// Restores every journalled value, newest first, then archives the journal.
/// Idempotent: a second run finds no journal and does nothing. A journal of
/// another root is refused before anything is undone or archived.
pub fn revert(root: &HostRoot, journal: &Journal) -> Result<RevertReport> {
    let records = journal.records_for(root)?;
    let profile = records.iter().find_map(|r| match r {
        Record::Begin { profile, .. } => Some(profile.clone()),
        _ => None,
    });
    let incomplete_apply =
        !records.is_empty() && !records.iter().any(|r| matches!(r, Record::Commit { .. }));
    let changes: Vec<Record> = records.into_iter().filter(|r| r.key().is_some()).collect();
    undo_all(root, &changes)?;
    let archived = journal.archive()?.map(|p| p.display().to_string());
    Ok(RevertReport {
        profile,
        undone: changes.len(),
        archived,
        incomplete_apply,
    })
}

/// Undoes records newest first. Keeps going after an error so one stuck
/// item does not leave the rest changed; reports every error.
fn undo_all(root: &HostRoot, records: &[Record]) -> Result<()> {
    let created_cgroups: Vec<&str> = records
        .iter()
        .filter_map(|r| match r {
            Record::Dir {
                path, cgroup: true, ..
            } => Some(path.as_str()),
            _ => None,
        })
        .collect();
    let mut errors = Vec::new();
    for r in records.iter().rev() {
        if let Err(e) = undo(root, r, &created_cgroups) {
            errors.push(format!("{}: {e:#}", r.key().unwrap_or("?")));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        bail!("could not restore: {}", errors.join("; "))
    }
}

/// Reads what must be journalled before `action` changes the host.
fn pre_image(action: &Action, key: &str, root: &HostRoot, state: &Path) -> Result<Record> {
    let key = key.to_string();
    Ok(match action {
        Action::File { path, cmp, .. } => Record::File {
            key,
            path: path.clone(),
            original: read_text(root, path)?,
            restore: if *cmp == Cmp::Bracket {
                Restore::Bracket
            } else {
                Restore::Raw
            },
            restart: None,
        },
        Action::IrqbalanceBan { path, restart, .. } => Record::File {
            key,
            path: path.clone(),
            original: read_text(root, path)?,
            restore: Restore::Raw,
            restart: restart.then(|| "irqbalance".to_string()),
        },
        Action::Dir { path, cgroup } => Record::Dir {
            key,
            path: path.clone(),
            cgroup: *cgroup,
        },
        Action::Controller { path, controller } => Record::Controller {
            key,
            path: path.clone(),
            controller: controller.clone(),
            original: root.read(path)?,
        },
        Action::TunedProfile { .. } => Record::Tuned {
            key,
            active_profile: read_text(root, "/etc/tuned/active_profile")?,
            profile_mode: read_text(root, "/etc/tuned/profile_mode")?,
        },
        Action::Hold { .. } => Record::Hold {
            key,
            pidfile: state.join("hold.pid").display().to_string(),
        },
        Action::Boot { name, .. } => bail!("kernel parameter {name} cannot be set at run time"),
    })
}

/// A file's text, or `None` if it does not exist.
fn read_text(root: &HostRoot, path: &str) -> Result<Option<String>> {
    match root.read_bytes(path) {
        Ok(b) => Ok(Some(String::from_utf8(b).map_err(|_| {
            anyhow!("{path} is not text; refusing to journal it")
        })?)),
        Err(e) if e.source.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Makes one change.
fn change(action: &Action, root: &HostRoot, state: &Path, opts: &ApplyOptions) -> Result<()> {
    match action {
        Action::File { path, value, .. } => root.write(path, value.as_bytes())?,
        Action::Dir { path, cgroup } => {
            if *cgroup {
                root.mkdir(path)?
            } else {
                root.mkdir_all(path)?
            }
        }
        Action::Controller { path, controller } => {
            let v = if root.is_live() {
                format!("+{controller}")
            } else {
                // A snapshot has no kernel to interpret "+cpuset": store the result.
                let cur = root.read(path)?;
                format!("{} {controller}\n", cur.trim())
                    .trim_start()
                    .to_string()
            };
            root.write(path, v.as_bytes())?
        }
        Action::IrqbalanceBan {
            path,
            cpus,
            restart,
        } => {
            let text = root.read(path).unwrap_or_default();
            let new = crate::host::services::set_banned_cpulist(&text, Some(cpus));
            root.write(path, new.as_bytes())?;
            if *restart {
                systemctl(root, "restart", "irqbalance")?;
            }
        }
        Action::TunedProfile { name } => {
            if root.is_live() {
                let adm = root
                    .find_program("tuned-adm")
                    .ok_or_else(|| anyhow!("tuned-adm not found"))?;
                run(Command::new(adm).args(["profile", name]))?;
            } else {
                root.write("/etc/tuned/active_profile", format!("{name}\n").as_bytes())?;
                root.write("/etc/tuned/profile_mode", b"manual\n")?;
            }
        }
        Action::Hold { us } => {
            let pidfile = state.join("hold.pid");
            hold::spawn_holder(&opts.exe, root, *us, &pidfile)?;
        }
        Action::Boot { name, .. } => bail!("kernel parameter {name} cannot be set at run time"),
    }
    Ok(())
}

/// Undoes one record.
fn undo(root: &HostRoot, r: &Record, created_cgroups: &[&str]) -> Result<()> {
    match r {
        Record::File {
            path,
            original,
            restore,
            restart,
            ..
        } => {
            let inside_new_cgroup = created_cgroups.iter().any(|d| {
                path.strip_prefix(d)
                    .is_some_and(|rest| rest.starts_with('/'))
            });
            if inside_new_cgroup && root.is_live() {
                // The kernel made this file with the cgroup; rmdir removes both.
                return Ok(());
            }
            match original {
                None => match root.remove_file(path) {
                    Err(e) if e.source.kind() != std::io::ErrorKind::NotFound => {
                        return Err(e.into())
                    }
                    _ => {}
                },
                // Already the original (the change's own write failed, as
                // a write to /proc/irq does for an IRQ that cannot move):
                // nothing to undo, and writing it again would fail the same
                // way and turn a clean rollback into a stuck one.
                Some(orig)
                    if root
                        .read_opt(path)
                        .is_some_and(|now| now.trim() == orig.trim()) =>
                {
                    return Ok(());
                }
                Some(orig) => {
                    let v = match restore {
                        Restore::Bracket if root.is_live() => bracketed(orig),
                        _ => orig.clone(),
                    };
                    root.write(path, v.as_bytes())?;
                }
            }
            if let Some(svc) = restart {
                systemctl(root, "restart", svc)?;
            }
        }
        Record::Dir { path, .. } => {
            if root.is_dir(path) {
                root.rmdir(path).map_err(|e| {
                    if root.is_live() {
                        anyhow!("{e}; if it is a cgroup, move or stop the processes in it (its cgroup.procs lists them)")
                    } else {
                        // A snapshot's folder holds plain files: name them.
                        let names = root.list(path);
                        anyhow!(
                            "{e}; it holds what this journal did not create, remove that first: {}",
                            names.iter().take(5).map(|n| format!("{}", root.display_path(&format!("{path}/{n}")).display())).collect::<Vec<_>>().join(", ")
                        )
                    }
                })?;
            }
        }
        Record::Controller {
            path,
            controller,
            original,
            ..
        } => {
            let had = original.split_whitespace().any(|c| c == controller);
            if root.is_live() {
                if !had {
                    root.write(path, format!("-{controller}").as_bytes())?;
                }
            } else {
                root.write(path, original.as_bytes())?;
            }
        }
        Record::Tuned {
            active_profile,
            profile_mode,
            ..
        } => {
            if root.is_live() {
                if let Some(adm) = root.find_program("tuned-adm") {
                    let prev = active_profile.as_deref().map(str::trim).unwrap_or("");
                    if prev.is_empty() {
                        run(Command::new(adm).arg("off"))?;
                    } else {
                        run(Command::new(adm).args(["profile", prev]))?;
                    }
                }
            }
            for (p, orig) in [
                ("/etc/tuned/active_profile", active_profile),
                ("/etc/tuned/profile_mode", profile_mode),
            ] {
                match orig {
                    Some(o) => root.write(p, o.as_bytes())?,
                    None => {
                        let _ = root.remove_file(p);
                    }
                }
            }
        }
        Record::Hold { pidfile, .. } => {
            hold::stop_holder(Path::new(pidfile))?;
        }
        Record::Begin { .. } | Record::Commit { .. } => {}
    }
    Ok(())
}

fn systemctl(root: &HostRoot, verb: &str, unit: &str) -> Result<()> {
    let Some(ctl) = root.find_program("systemctl") else {
        bail!("systemctl not found: {verb} {unit} by hand")
    };
    run(Command::new(ctl).args([verb, unit]))
}

fn run(cmd: &mut Command) -> Result<()> {
    let out = cmd
        .output()
        .with_context(|| format!("cannot run {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}
