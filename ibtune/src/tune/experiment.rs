//! `ibtune experiment`: which states of the host to compare, and one round
//! in one of them, run so that the host is as found afterwards.
//!
//! Why it exists: "did this profile, or this one knob, help?" needs the
//! profile applied and reverted many times, interleaved with the
//! measurement. Every change still goes through [`engine::apply`] (journal
//! first) and back through [`engine::revert`], so a crash at any point
//! leaves a journal that `ibtune revert` undoes, exactly as for a plain
//! apply. The command run in each round and the statistics live in the
//! CLI (`cli/experiment.rs`) and in `ibstats`.

use super::engine::{self, ApplyError, ApplyOptions};
use super::item::{Knob, Status};
use super::journal::{revert_command, Journal};
use super::plan::{Plan, Summary};
use crate::host::HostRoot;
use serde::Serialize;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

/// One state of the host the experiment compares: the knobs of the
/// profile applied in it (none: the host as found, the baseline).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Variant {
    /// How reports name it: `as found`, the profile's name, `only irq`,
    /// `without irq`.
    pub label: String,
    /// The knobs applied, in plan order.
    pub knobs: Vec<Knob>,
}

/// The knobs of `plan` that an experiment can turn on and off (some item
/// would change), and those whose items all already match the host
/// (part of the host as found: they cannot be tested here).
pub fn knobs_of(plan: &Plan) -> (Vec<Knob>, Vec<Knob>) {
    let mut testable = Vec::new();
    let mut as_wanted = Vec::new();
    for k in Knob::ALL {
        let items: Vec<_> = plan
            .items
            .iter()
            .filter(|i| i.item.knob() == Some(k))
            .collect();
        if items.iter().any(|i| i.observed.status == Status::Change) {
            testable.push(k);
        } else if !items.is_empty() {
            as_wanted.push(k);
        }
    }
    (testable, as_wanted)
}

/// The variants to run, the baseline (the host as found) first, then the
/// whole profile; with `each_knob` (the thesis's method) also each knob
/// alone and the profile without each knob. A knob set already listed is
/// not listed twice (with two knobs, "without a" is "only b").
pub fn variants(profile: &str, knobs: &[Knob], each_knob: bool) -> Vec<Variant> {
    let mut out = vec![
        Variant {
            label: "as found".into(),
            knobs: vec![],
        },
        Variant {
            label: profile.to_string(),
            knobs: knobs.to_vec(),
        },
    ];
    if each_knob && knobs.len() > 1 {
        let only = knobs.iter().map(|&k| Variant {
            label: format!("only {}", k.name()),
            knobs: vec![k],
        });
        let without = knobs.iter().map(|&k| Variant {
            label: format!("without {}", k.name()),
            knobs: knobs.iter().copied().filter(|&x| x != k).collect(),
        });
        for v in only.chain(without) {
            if !out.iter().any(|o| o.knobs == v.knobs) {
                out.push(v);
            }
        }
    }
    out
}

impl Plan {
    /// The items of `knobs` that would change, in plan order: what applying
    /// only those knobs does.
    pub fn with_knobs(&self, knobs: &[Knob]) -> Plan {
        let items: Vec<_> = self
            .items
            .iter()
            .filter(|i| i.observed.status == Status::Change)
            .filter(|i| i.item.knob().is_some_and(|k| knobs.contains(&k)))
            .cloned()
            .collect();
        Plan {
            summary: Summary {
                change: items.len(),
                ..Summary::default()
            },
            items,
            ..self.clone()
        }
    }

    /// Items whose current value differs between `self` (observed before)
    /// and `after`: empty when the host is as it was found.
    pub fn differences(&self, after: &Plan) -> Vec<String> {
        self.items
            .iter()
            .zip(&after.items)
            .filter(|(a, b)| a.item.key != b.item.key || a.observed.current != b.observed.current)
            .map(|(a, b)| {
                format!(
                    "{}: {} before, {} now",
                    a.item.key, a.observed.current, b.observed.current
                )
            })
            .collect()
    }
}

/// Why a round could not leave the host as found, or could not start.
#[derive(Debug, thiserror::Error)]
pub enum RoundError {
    /// Applying the variant failed; apply's own rollback ran (see the
    /// inner error for whether it restored everything).
    #[error("applying {variant}: {error}")]
    Apply {
        /// The variant's label.
        variant: String,
        /// What apply said.
        error: ApplyError,
    },
    /// Reverting after the command failed: the journal is kept.
    #[error(
        "reverting {variant} after the round: {error:#}; the journal is kept: fix that, then run `{revert}`"
    )]
    Revert {
        /// The variant's label.
        variant: String,
        /// What revert said.
        error: anyhow::Error,
        /// The command that reverts the journal.
        revert: String,
    },
}

/// One round: applies `variant`'s knobs of `plan` (journal first), runs
/// `probe`, and reverts through the journal, also when `probe` panics.
/// When this returns `Ok`, or `Err(Apply)` with a completed rollback, the
/// host is as found; after `Err(Revert)` the journal is kept for
/// `ibtune revert`.
pub fn round<T>(
    plan: &Plan,
    variant: &Variant,
    root: &HostRoot,
    journal: &Journal,
    opts: &ApplyOptions,
    probe: impl FnOnce() -> T,
) -> Result<T, RoundError> {
    let sub = plan.with_knobs(&variant.knobs);
    let applied = !sub.items.is_empty();
    if applied {
        engine::apply(&sub, root, journal, opts).map_err(|error| RoundError::Apply {
            variant: variant.label.clone(),
            error,
        })?;
    }
    let out = catch_unwind(AssertUnwindSafe(probe));
    if applied {
        engine::revert(root, journal).map_err(|error| RoundError::Revert {
            variant: variant.label.clone(),
            error,
            revert: revert_command(root.dir(), journal.dir()),
        })?;
    }
    match out {
        Ok(t) => Ok(t),
        Err(panic) => resume_unwind(panic),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_knob_gives_alone_and_without_once_each() {
        let v = variants("p", &[Knob::Cpusets, Knob::Irq, Knob::Tuned], true);
        let labels: Vec<&str> = v.iter().map(|v| v.label.as_str()).collect();
        // As found, the profile, then each knob alone, then the profile
        // without each knob, in the order given.
        let each = |how: &str| ["cpusets", "irq", "tuned"].map(|k| format!("{how} {k}"));
        let mut want = vec!["as found".to_string(), "p".to_string()];
        want.extend(each("only").into_iter().chain(each("without")));
        assert_eq!(labels, want);
        assert_eq!(v[6].knobs, [Knob::Cpusets, Knob::Tuned]);
        // Two knobs: "without irq" is "only cpusets", listed once.
        let two = variants("p", &[Knob::Cpusets, Knob::Irq], true);
        assert_eq!(two.len(), 4, "{two:?}");
        // One knob: the profile is the knob alone.
        assert_eq!(variants("p", &[Knob::Irq], true).len(), 2);
        assert_eq!(variants("p", &[Knob::Irq, Knob::Cpu], false).len(), 2);
    }
}
