//! The one rule set for what a profile may say: names, and the characters
//! of every value that ends up in a host file.
//!
//! Why it exists: profile values are written to the host (cgroup folder
//! names, tuned.conf lines, sysctl and governor files). A newline inside a
//! `[tuned.settings]` value would add sections to the generated tuned.conf,
//! a `tuned.base` of `../../x` would be written as `include=../../x`, a
//! 5,000-character cpuset name passes `plan` and fails `apply`. [`check`]
//! refuses all of these when the profile is loaded ([`super::Profile::parse`]),
//! at `file:line:column`, so `plan`, `apply` and `verify` see the same
//! verdict.

use super::error::ProfileError;
use super::schema::{CpuField, Profile, ScalarValue};
use std::ops::Range;
use toml::Spanned;

/// The longest profile or cpuset name: the cgroup folder is
/// `ibtune-<name>` and the tuned profile `ibtune-<name>`, well inside the
/// 255-byte file name limit.
pub const MAX_NAME: usize = 64;

/// The longest value of any other text field.
pub const MAX_VALUE: usize = 4096;

/// Why `s` is not a usable name (profile or cpuset): 1 to [`MAX_NAME`]
/// characters of `A-Z a-z 0-9 _ -`.
pub fn name_problem(s: &str) -> Option<String> {
    short_word_problem(s, &['-', '_'])
}

/// 1 to [`MAX_NAME`] characters, each ASCII alphanumeric or in `extra`.
fn short_word_problem(s: &str, extra: &[char]) -> Option<String> {
    if s.is_empty() {
        return Some("is empty".into());
    }
    let n = s.chars().count();
    if n > MAX_NAME {
        return Some(format!("is {n} characters long (at most {MAX_NAME})"));
    }
    s.chars()
        .find(|c| !(c.is_ascii_alphanumeric() || extra.contains(c)))
        .map(|c| format!("contains {c:?}"))
}

/// Why a value is refused: a control character (newline, NUL, ...) or more
/// than [`MAX_VALUE`] characters.
pub fn value_problem(s: &str) -> Option<String> {
    if let Some(c) = s.chars().find(|c| c.is_control()) {
        return Some(format!("contains the control character {c:?}"));
    }
    if s.chars().count() > MAX_VALUE {
        return Some(format!(
            "is {} characters long (at most {MAX_VALUE})",
            s.chars().count()
        ));
    }
    None
}

/// Why a word that is joined into a file name or a tuned.conf key is
/// refused: 1 to [`MAX_NAME`] characters of `A-Z a-z 0-9 _ - .`, and not
/// `.` nor containing `..`.
pub fn word_problem(s: &str) -> Option<String> {
    short_word_problem(s, &['-', '_', '.'])
        .or_else(|| (s.contains("..") || s == ".").then(|| "contains '..' or is '.'".to_string()))
}

/// Checks every rule; the first broken one is the error.
pub fn check(p: &Profile) -> Result<(), ProfileError> {
    let fail = |span: Range<usize>, what: String, why: String, fix: &str| {
        Err(p.err(span, format!("{what} {why}"), fix))
    };
    const NAME_FIX: &str = "use 1 to 64 letters, digits, '-' and '_'";
    const VALUE_FIX: &str =
        "write the value on one line without control characters (no newline, tab or NUL)";

    let name = &p.profile.name;
    if let Some(why) = name_problem(name.get_ref()) {
        return fail(
            name.span(),
            format!("profile name {:?}", short(name.get_ref())),
            why,
            NAME_FIX,
        );
    }
    // The description is only printed: multi-line text is fine there.
    if let Some(c) = p
        .profile
        .description
        .chars()
        .find(|c| c.is_control() && !matches!(c, '\n' | '\t'))
    {
        return fail(
            name.span(),
            "the profile description".into(),
            format!("contains the control character {c:?}"),
            "remove it from [profile] description",
        );
    }
    for cs in &p.cpuset {
        if let Some(why) = name_problem(cs.name.get_ref()) {
            return fail(
                cs.name.span(),
                format!("cpuset name {:?}", short(cs.name.get_ref())),
                why,
                NAME_FIX,
            );
        }
        cpu_field(p, &cs.cpus, "cpuset cpus")?;
        if let Some(m) = &cs.mems {
            cpu_field(p, m, "cpuset mems")?;
        }
    }
    for irq in &p.irq {
        if let Some(why) = value_problem(irq.device.get_ref()) {
            return fail(irq.device.span(), "irq device".into(), why, VALUE_FIX);
        }
        cpu_field(p, &irq.cpus, "irq cpus")?;
    }
    if let Some(t) = &p.tuned {
        if let Some(why) = word_problem(t.base.get_ref()) {
            return fail(
                t.base.span(),
                format!("tuned.base {:?}", short(t.base.get_ref())),
                why,
                "name an installed tuned profile (letters, digits, '-', '_', '.'; no '/' or '..')",
            );
        }
        for d in &t.drop {
            if let Some(why) = word_problem(d.get_ref()) {
                return fail(
                    d.span(),
                    format!("tuned.drop entry {:?}", short(d.get_ref())),
                    why,
                    "write section.option, e.g. \"cpu.force_latency\"",
                );
            }
        }
        for (k, v) in &t.settings {
            if let Some(why) = word_problem(k) {
                return fail(
                    v.span(),
                    format!("tuned.settings key {:?}", short(k)),
                    why,
                    "write section.option, e.g. \"sysctl.kernel.timer_migration\"",
                );
            }
            scalar(p, v, &format!("tuned.settings {k}"))?;
        }
    }
    for (k, v) in &p.sysctl {
        scalar(p, v, &format!("sysctl {}", short(k)))?;
    }
    if let Some(dl) = &p.dma_latency {
        scalar(p, &dl.us, "dma_latency.us")?;
    }
    if let Some(cpu) = &p.cpu {
        if let Some(g) = &cpu.governor {
            if let Some(why) = name_problem(g.get_ref()) {
                return fail(
                    g.span(),
                    format!("cpu.governor {:?}", short(g.get_ref())),
                    why,
                    "name a cpufreq governor, e.g. \"performance\"",
                );
            }
        }
        if let Some(t) = &cpu.thp {
            if let Some(why) = value_problem(t.get_ref()) {
                return fail(
                    t.span(),
                    "cpu.thp".into(),
                    why,
                    "use always, madvise or never",
                );
            }
        }
    }
    Ok(())
}

/// A text value of a scalar field.
fn scalar(p: &Profile, v: &Spanned<ScalarValue>, what: &str) -> Result<(), ProfileError> {
    let text = match v.get_ref() {
        ScalarValue::Text(s) => Some(s.as_str()),
        _ => None,
    };
    text_value(
        p,
        text,
        v.span(),
        &format!("{what} value"),
        "write the value on one line without control characters (no newline, tab or NUL)",
    )
}

/// A CPU or node list written as text.
fn cpu_field(p: &Profile, f: &Spanned<CpuField>, what: &str) -> Result<(), ProfileError> {
    let text = match f.get_ref() {
        CpuField::Text(s) => Some(s.as_str()),
        CpuField::List(_) => None,
    };
    text_value(
        p,
        text,
        f.span(),
        what,
        "write a CPU list such as \"16,18,20-22\" on one line",
    )
}

/// Applies [`value_problem`] to a text found at `span`, if there is one.
fn text_value(
    p: &Profile,
    text: Option<&str>,
    span: Range<usize>,
    what: &str,
    fix: &str,
) -> Result<(), ProfileError> {
    match text.and_then(value_problem) {
        Some(why) => Err(p.err(span, format!("{what} {why}"), fix)),
        None => Ok(()),
    }
}

/// A value cut for messages (a 5,000-character name is not echoed whole).
fn short(s: &str) -> String {
    if s.chars().count() <= 40 {
        s.to_string()
    } else {
        format!("{}...", s.chars().take(40).collect::<String>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn load(t: &str) -> Result<Profile, ProfileError> {
        Profile::parse(Path::new("p.toml"), t)
    }

    fn refused(t: &str, pos: &str, words: &str) {
        let e = load(t).unwrap_err().to_string();
        assert!(e.starts_with(&format!("p.toml:{pos}:")), "{e}");
        assert!(e.contains(words), "{e}");
    }

    const HEAD: &str = "[profile]\nname = \"x\"\n";

    #[test]
    fn names() {
        assert!(name_problem("rt-0_a").is_none());
        assert!(name_problem(&"a".repeat(64)).is_none());
        assert!(name_problem(&"a".repeat(65)).is_some());
        assert!(name_problem("").is_some());
        assert!(name_problem("a b").is_some());
        assert!(name_problem("a/b").is_some());
        let long = "a".repeat(5000);
        refused(
            &format!("{HEAD}[[cpuset]]\nname = \"{long}\"\ncpus = [0]\n"),
            "4:8",
            "5000 characters",
        );
    }

    #[test]
    fn control_characters() {
        refused(
            &format!("{HEAD}[tuned]\nbase = \"b\"\n[tuned.settings]\n\"cpu.x\" = \"1\\n[main]\\ninclude=/x\"\n"),
            "6:11",
            "control character",
        );
        refused(
            &format!("{HEAD}[cpu]\ngovernor = \"x\\n\"\n"),
            "4:12",
            "governor",
        );
        refused(
            &format!("{HEAD}[sysctl]\n\"vm.swappiness\" = \"0\\n1\"\n"),
            "4:19",
            "control character",
        );
    }

    #[test]
    fn tuned_base() {
        refused(
            &format!("{HEAD}[tuned]\nbase = \"../../../../outside/x\"\n"),
            "4:8",
            "tuned.base",
        );
        refused(&format!("{HEAD}[tuned]\nbase = \"a/b\"\n"), "4:8", "'/'");
        assert!(load(&format!(
            "{HEAD}[tuned]\nbase = \"latency-performance\"\ndrop = [\"cpu.force_latency\"]\n"
        ))
        .is_ok());
    }
}
