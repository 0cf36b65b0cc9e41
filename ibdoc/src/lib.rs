//! Man pages and shell completions of a command, generated from its clap
//! definition.
//!
//! Why it exists: what `man ibprobe-loopback` and a shell's Tab show must
//! be what `ibprobe loopback --help` says, so both are generated from the
//! same `clap::Command` and never written by hand. Each tool's binary
//! answers one undocumented command line, `ibprobe --generate-docs DIR`
//! (likewise ibtune, ibexporter; [`requested`]), parsed apart from the
//! tool's own: no extra binary lands in a user's path, nothing hidden sits
//! in the tool's clap tree, and the generator sees exactly the command the
//! binary parses. `scripts/package` calls it.
//!
//! Layout written under DIR (the folders Debian installs them to):
//!
//! | under DIR | installed to |
//! |---|---|
//! | `man1/NAME.1`, `man1/NAME-SUB.1` (every visible subcommand, recursively) | `/usr/share/man/man1/` (gzipped) |
//! | `bash/NAME` | `/usr/share/bash-completion/completions/` |
//! | `zsh/_NAME` | `/usr/share/zsh/vendor-completions/` |
//! | `fish/NAME.fish` | `/usr/share/fish/vendor_completions.d/` |
//! | `flags.tsv` | not installed: every visible option of every command ([`flag_table`]), for the grammar check (`tests/tests/grammar.rs`) |
//!
//! Hidden subcommands get no man page (clap_mangen); note that
//! clap_complete's bash and zsh scripts would still offer them on Tab, one
//! more reason the generator's entry is not a hidden subcommand.

use std::fs;
use std::path::{Path, PathBuf};

use clap_complete::Shell;

/// The generator's own command line, `NAME --generate-docs DIR`, parsed
/// apart from the tool's: it is no part of the tool's clap tree, so it
/// shows in no `--help`, man page or completion, and changes no snapshot.
#[derive(clap::Parser, Debug)]
#[command(disable_help_flag = true, disable_version_flag = true)]
struct Entry {
    /// Folder to write man1/, bash/, zsh/ and fish/ into (created).
    #[arg(long, value_name = "DIR")]
    generate_docs: PathBuf,
}

/// The folder when this process's command line is exactly
/// `NAME --generate-docs DIR`; `None` for every other command line, which
/// the tool then parses as usual.
pub fn requested() -> Option<PathBuf> {
    use clap::Parser;
    Entry::try_parse().ok().map(|e| e.generate_docs)
}

/// What [`generate`] wrote.
#[derive(Debug, Default)]
pub struct Written {
    /// Every man page, `DIR/man1/*.1`.
    pub man_pages: Vec<PathBuf>,
    /// The bash, zsh and fish completion files.
    pub completions: Vec<PathBuf>,
    /// The option table, `DIR/flags.tsv` ([`flag_table`]).
    pub flags: PathBuf,
}

/// Writes the man pages of `cmd` and each visible subcommand, and its
/// bash, zsh and fish completions, under `dir` (layout in the module doc).
///
/// Errors name the file that could not be written.
pub fn generate(cmd: clap::Command, dir: &Path) -> Result<Written, String> {
    let name = cmd.get_name().to_string();
    let man1 = dir.join("man1");
    create(&man1)?;
    clap_mangen::generate_to(cmd.clone(), &man1)
        .map_err(|e| format!("writing man pages into {}: {e}", man1.display()))?;
    let mut written = Written {
        man_pages: listing(&man1, &name)?,
        ..Written::default()
    };
    for (shell, sub, file) in [
        (Shell::Bash, "bash", name.clone()),
        (Shell::Zsh, "zsh", format!("_{name}")),
        (Shell::Fish, "fish", format!("{name}.fish")),
    ] {
        let path = dir.join(sub).join(file);
        create(&dir.join(sub))?;
        let mut text = Vec::new();
        clap_complete::generate(shell, &mut cmd.clone(), &name, &mut text);
        fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
        written.completions.push(path);
    }
    written.flags = dir.join("flags.tsv");
    fs::write(&written.flags, flag_table(&cmd))
        .map_err(|e| format!("writing {}: {e}", written.flags.display()))?;
    Ok(written)
}

/// The columns of [`flag_table`], its first line.
pub const FLAG_TABLE_HEADER: &str = "command\tlong\tshort\tvalue\taliases\thelp";

/// Every visible option of `cmd` and of each visible subcommand
/// (recursively) as tab-separated lines under [`FLAG_TABLE_HEADER`]: the
/// command path (`ibprobe stream`), the long name, the short letter (or
/// `-`), the value name (`-` for a switch), the hidden aliases (`,`
/// separated, or `-`) and the first line of its help. What the grammar
/// check reads: one meaning per option name across the three tools.
pub fn flag_table(cmd: &clap::Command) -> String {
    fn walk(cmd: &clap::Command, path: &str, out: &mut String) {
        for a in cmd.get_arguments() {
            let Some(long) = a.get_long() else { continue };
            if a.is_hide_set() || long == "help" || long == "version" {
                continue;
            }
            let value = if a.get_action().takes_values() {
                a.get_value_names()
                    .map(|v| v.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" "))
                    .unwrap_or_else(|| a.get_id().as_str().to_uppercase())
            } else {
                "-".to_string()
            };
            let aliases = a
                .get_all_aliases()
                .map(|v| v.join(","))
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "-".to_string());
            let help = a
                .get_help()
                .map(|h| h.to_string())
                .unwrap_or_default()
                .lines()
                .next()
                .unwrap_or("")
                .replace('\t', " ");
            let short = a.get_short().map_or("-".to_string(), |c| c.to_string());
            out.push_str(&format!(
                "{path}\t{long}\t{short}\t{value}\t{aliases}\t{help}\n"
            ));
        }
        for sub in cmd.get_subcommands() {
            if !sub.is_hide_set() && sub.get_name() != "help" {
                walk(sub, &format!("{path} {}", sub.get_name()), out);
            }
        }
    }
    let mut cmd = cmd.clone();
    cmd.build();
    let mut out = format!("{FLAG_TABLE_HEADER}\n");
    walk(&cmd, cmd.get_name(), &mut out);
    out
}

/// Runs `NAME --generate-docs DIR` (see [`requested`]): writes
/// everything, prints one line, and returns the exit code (0, or 2 with
/// one line on stderr naming what failed).
pub fn run(cmd: clap::Command, dir: &Path) -> u8 {
    let name = cmd.get_name().to_string();
    match generate(cmd, dir) {
        Ok(w) => {
            println!(
                "{name}: {} man pages and {} completion files in {}",
                w.man_pages.len(),
                w.completions.len(),
                dir.display()
            );
            0
        }
        Err(e) => {
            eprintln!("{name}: --generate-docs: {e}; give a writable folder");
            2
        }
    }
}

fn create(dir: &Path) -> Result<(), String> {
    fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))
}

/// The pages of command `name` in `dir` (other tools' may be there too).
fn listing(dir: &Path, name: &str) -> Result<Vec<PathBuf>, String> {
    let mut files = fs::read_dir(dir)
        .and_then(|d| {
            d.map(|e| e.map(|e| e.path()))
                .collect::<Result<Vec<_>, _>>()
        })
        .map_err(|e| format!("listing {}: {e}", dir.display()))?;
    files.retain(|p| {
        p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
            n == format!("{name}.1") || (n.starts_with(&format!("{name}-")) && n.ends_with(".1"))
        })
    });
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Arg, Command};

    fn tool() -> Command {
        Command::new("tool")
            .version("1.0")
            .about("A tool")
            .arg(Arg::new("verbose").long("verbose").num_args(0))
            .subcommand(
                Command::new("run")
                    .about("Run it")
                    .arg(Arg::new("count").long("count"))
                    .subcommand(Command::new("fast").about("Faster")),
            )
            .subcommand(Command::new("secret").hide(true))
    }

    /// Every visible command gets a page (nested ones too), hidden ones
    /// none; every shell gets a file that knows the options.
    #[test]
    fn pages_and_completions_follow_the_command() {
        let dir = tempfile::tempdir().unwrap();
        generate(
            Command::new("other").subcommand(Command::new("x")),
            dir.path(),
        )
        .unwrap();
        let w = generate(tool(), dir.path()).unwrap();
        let names: Vec<String> = w
            .man_pages
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["tool-run-fast.1", "tool-run.1", "tool.1"]);
        let run_page = fs::read_to_string(dir.path().join("man1/tool-run.1")).unwrap();
        assert!(run_page.contains("count"), "{run_page}");
        assert!(
            run_page.starts_with(".ie") || run_page.contains(".TH"),
            "{run_page}"
        );
        assert!(!names.iter().any(|n| n.contains("secret")), "{names:?}");
        let flags = fs::read_to_string(dir.path().join("flags.tsv")).unwrap();
        assert_eq!(
            flags,
            format!(
                "{FLAG_TABLE_HEADER}\ntool\tverbose\t-\t-\t-\t\ntool run\tcount\t-\tCOUNT\t-\t\n"
            )
        );
        for (file, needle) in [
            ("bash/tool", "--verbose"),
            ("zsh/_tool", "--verbose"),
            ("fish/tool.fish", "verbose"),
        ] {
            let text = fs::read_to_string(dir.path().join(file)).unwrap();
            assert!(text.contains(needle), "{file}: {text}");
            assert!(text.contains("run"), "{file}: {text}");
        }
    }

    /// Only the exact generator command line is taken; any other is left
    /// to the tool.
    #[test]
    fn only_the_generator_line_is_taken() {
        use clap::Parser;
        let e = Entry::try_parse_from(["tool", "--generate-docs", "out"]).unwrap();
        assert_eq!(e.generate_docs, PathBuf::from("out"));
        for line in [
            &["tool"][..],
            &["tool", "--help"],
            &["tool", "--version"],
            &["tool", "run", "--generate-docs", "out"],
            &["tool", "--generate-docs", "out", "--verbose"],
        ] {
            assert!(Entry::try_parse_from(line).is_err(), "{line:?} was taken");
        }
    }

    /// A folder that cannot be created is an error naming it.
    #[test]
    fn an_unwritable_folder_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plain");
        fs::write(&file, "x").unwrap();
        let e = generate(tool(), &file.join("out")).unwrap_err();
        assert!(e.contains("plain/out/man1"), "{e}");
    }
}
