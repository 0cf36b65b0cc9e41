//! Old spellings of renamed options and commands: still accepted (each
//! tool's clap definition keeps the old name as a hidden alias), and
//! answered with one warning line naming the new one.
//!
//! Why it exists: the three tools now give each option name one meaning
//! (`docs/options.md`); scripts written against an old name keep working
//! while they are told what to write instead. clap does not say which
//! spelling matched an alias, so the command line is scanned here, once,
//! before clap parses it.

/// One rename: the old spelling, the new one, and where it applies (the
/// command path, e.g. `ibtune verify`, or the tool alone).
#[derive(Clone, Copy, Debug)]
pub struct Renamed {
    /// As the user may still write it: `--window` or a subcommand `plan`.
    pub old: &'static str,
    /// What to write instead.
    pub new: &'static str,
    /// The command whose option (or subcommand) it is.
    pub command: &'static str,
}

/// The warnings `args` (the process's arguments, program name first)
/// deserve: one line per old spelling used. An option matches as `--old`
/// or `--old=VALUE`, a subcommand as the word right after the program
/// name (where the tools that rename one take it); nothing after `--` is
/// looked at (it belongs to a measured
/// command).
pub fn warnings<S: AsRef<str>>(args: &[S], table: &[Renamed]) -> Vec<String> {
    let mut out = Vec::new();
    let words: Vec<&str> = args
        .iter()
        .skip(1)
        .map(AsRef::as_ref)
        .take_while(|a| *a != "--")
        .collect();
    for r in table {
        let used = if r.old.starts_with('-') {
            words
                .iter()
                .any(|w| *w == r.old || w.strip_prefix(r.old).is_some_and(|v| v.starts_with('=')))
        } else {
            words.first() == Some(&r.old)
        };
        if used {
            out.push(format!(
                "warning: `{} {}` is now `{} {}`; the old name still works for now",
                r.command, r.old, r.command, r.new
            ));
        }
    }
    out
}

/// Prints [`warnings`] for this process's command line on stderr.
pub fn warn(table: &[Renamed]) {
    let args: Vec<String> = std::env::args().collect();
    for w in warnings(&args, table) {
        eprintln!("{w}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &[Renamed] = &[
        Renamed {
            old: "--window",
            new: "--watch",
            command: "ibtune verify",
        },
        Renamed {
            old: "plan",
            new: "mesh",
            command: "ibexporter",
        },
    ];

    #[test]
    fn old_spellings_are_named_once_each() {
        let w = warnings(&["ibtune", "verify", "p", "--window", "1s"], T);
        assert_eq!(w, ["warning: `ibtune verify --window` is now `ibtune verify --watch`; the old name still works for now"]);
        assert_eq!(
            warnings(&["ibtune", "verify", "p", "--window=1s"], T).len(),
            1
        );
        assert_eq!(warnings(&["ibexporter", "plan", "--simulate"], T).len(), 1);
    }

    #[test]
    fn new_spellings_and_lookalikes_are_left_alone() {
        for args in [
            &["ibtune", "verify", "p", "--watch", "1s"][..],
            &["ibtune", "verify", "p", "--windows", "1s"],
            &["ibexporter", "mesh", "--simulate"],
            &["ibexporter", "--config", "plan"],
            &["ibtune", "experiment", "p", "--", "x", "--window", "4"],
        ] {
            assert!(warnings(args, T).is_empty(), "{args:?}");
        }
    }
}
