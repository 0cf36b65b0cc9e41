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
    Ok(written)
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
