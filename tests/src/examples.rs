//! The examples a user reads: every command of a Markdown `sh`, `bash` or
//! `console` block and of an `Examples:` or `Workflow:` section of a
//! `--help`, with the comment that explains (and marks) it.
//!
//! Why it exists: an example that does not run as written is worse than
//! none. `tests/tests/examples.rs` runs every example this module finds,
//! as its mark says (below), so a renamed flag or a moved file fails a test
//! instead of a reader.
//!
//! One grammar for both sources, a shell's:
//! - a command may go on over several lines, each but the last ending in `\`;
//! - ` # ...` after a command is its comment; a line that is only a comment
//!   continues the comment of the command right above it (an explanation
//!   too long for one line goes on the line below);
//! - in a `console` block only the lines after a `$ ` prompt are commands,
//!   every other line is output and ignored;
//! - in Markdown, a line `<!-- examples: MARK -->` right above a fence
//!   adds MARK to the comment of every example of that block.
//!
//! The marks, read from the comment: an example runs here as written and
//! must exit 0, unless its comment says
//! - `exits N`: it must exit N;
//! - `runs until stopped` (or the command ends in `&`): it is started,
//!   given until its first output, the rest of its block runs, and then it
//!   is stopped with SIGTERM and must exit 0 or 130 (the exit
//!   table's "interrupted");
//! - `needs root`: it runs here only as root (CI is root);
//! - `runs in the lab`: it needs an RDMA device, a peer or a real host;
//!   the Soft-RoCE lab runs it after [`LAB_SUBSTITUTIONS`];
//! - or a reason [`NOT_RUNNABLE`] lists: not runnable by design.

use std::path::{Path, PathBuf};
use std::process::Command;

/// One example command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Example {
    /// The command as a shell reads it (continuations joined, comment and
    /// prompt removed).
    pub command: String,
    /// Its comment, without `#` (the lines of a continued comment joined
    /// by a space); empty when it has none.
    pub comment: String,
}

/// The examples of one place: a fenced block of a Markdown file, or one
/// example of a `--help` text. A block's commands run in order, in one
/// folder: a later one may use what an earlier one wrote or started (the
/// blocks of one Markdown file share that folder, with its [`files`], as a
/// reader following the file does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// Where it is: `FILE:LINE` of the fence, or `TOOL SUBCOMMAND --help`.
    pub at: String,
    /// Its examples, in order.
    pub examples: Vec<Example>,
}

/// How an example is run, from the marks of its comment (module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Runs here and must exit with this status.
    Here(i32),
    /// Runs here in the background until its block is done, then SIGTERM.
    UntilStopped,
    /// Runs here as root only, and must exit with this status.
    Root(i32),
    /// Needs an RDMA device, a peer or a real host: runs in the lab.
    Lab,
}

/// The lab's names for what an example names on a real cluster: device
/// names and peers become the Soft-RoCE lab's device and its own address
/// (the lab's examples run against a server on the same guest).
pub const LAB_SUBSTITUTIONS: &[(&str, &str)] = &[
    ("mlx5_0", "rxe0"),
    ("mlx5_1", "rxe0"),
    ("hostA", "10.77.0.1"),
    ("hostB", "10.77.0.1"),
    ("node2", "10.77.0.1"),
    ("10.0.0.2", "10.77.0.1"),
];

/// Examples that cannot run by design: (how the command starts, the
/// reason, which the example's comment says to its reader). An entry no
/// example starts with fails the test.
pub const NOT_RUNNABLE: &[(&str, &str)] = &[
    ("scripts/run-exporter", "installs packages"),
    ("scripts/setup", "installs packages"),
    ("apt install", "installs packages"),
    ("man ", "installs packages"),
    ("scripts/test-all", "the whole test suite"),
    ("cargo build --release", "a release build"),
    (
        "ibexporter mesh --simulate --hosts 10000 --racks 500 --faults",
        "a benchmark",
    ),
    ("install ", "changes this host"),
    ("promtool check rules /etc/", "changes this host"),
    ("systemctl ", "changes this host"),
    ("sudo ibtune ", "changes this host"),
    ("editor ", "opens an editor"),
    ("ibtune plan thesis-2hca", "needs the profile's HCAs"),
    ("ibtune verify thesis-2hca", "needs the profile's HCAs"),
    ("ibtune plan ./my.toml", "needs the profile's HCAs"),
    ("ibtune --root node7 plan", "needs the profile's HCAs"),
    ("tests/lab/", "boots the lab"),
    ("/path/to/target/", "boots the lab"),
    (
        "sudo taskset -c 0 ibprobe host --trace",
        "a kernel with the timerlat tracer",
    ),
    (
        "ibprobe server --dev mlx5_0",
        "needs an HCA that stamps completions",
    ),
    (
        "ibprobe client node2 --dev mlx5_0 --hw-timestamps",
        "needs an HCA that stamps completions",
    ),
    ("LAB=$(tests/lab/lab", "boots the lab"),
    ("curl -s localhost:9427", "asks a running exporter"),
    (
        "ibexporter localize --prometheus",
        "needs a Prometheus scraping the exporters",
    ),
    ("sbatch ", "needs a Slurm cluster"),
    ("srun ", "needs a Slurm cluster"),
    ("sinfo ", "needs a Slurm cluster"),
    ("scontrol ", "needs a Slurm cluster"),
    ("squeue", "needs a Slurm cluster"),
    ("ibtune plan my-profile", "needs your profile"),
];

impl Example {
    /// The reason it is in [`NOT_RUNNABLE`], if it is.
    pub fn not_runnable(&self) -> Option<&'static str> {
        NOT_RUNNABLE
            .iter()
            .find(|(c, _)| self.command.starts_with(c))
            .map(|(_, why)| *why)
    }

    /// Its class, from its comment's marks.
    pub fn class(&self) -> Class {
        let c = &self.comment;
        let exit = exit_mark(c).unwrap_or(0);
        if c.contains("runs in the lab") {
            Class::Lab
        } else if c.contains("runs until stopped") || self.command.ends_with('&') {
            Class::UntilStopped
        } else if c.contains("needs root") {
            Class::Root(exit)
        } else {
            Class::Here(exit)
        }
    }

    /// The command as the lab runs it: [`LAB_SUBSTITUTIONS`] applied.
    pub fn in_lab(&self) -> String {
        LAB_SUBSTITUTIONS
            .iter()
            .fold(self.command.clone(), |c, (from, to)| c.replace(from, to))
    }
}

/// `N` of an `exits N` mark.
fn exit_mark(comment: &str) -> Option<i32> {
    let at = comment.find("exits ")?;
    let n: String = comment[at + 6..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    n.parse().ok()
}

/// The example blocks of a Markdown file (`file` names it in `at`):
/// fenced blocks tagged `sh`, `bash`, `shell` or `console`.
pub fn markdown(file: &str, text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    // The open fence: its line, whether it is a console block (`None`:
    // not a shell block, read past up to its closing fence), its lines.
    let mut open: Option<(usize, Option<bool>, Vec<&str>)> = None;
    let mut mark = "";
    let mut block_mark = "";
    for (i, line) in text.lines().enumerate() {
        let before = std::mem::replace(&mut mark, block_mark_of(line));
        let fence = line.trim_start().strip_prefix("```");
        match (fence, open.take()) {
            (Some(tag), None) => {
                let console = match tag.trim() {
                    "sh" | "bash" | "shell" => Some(false),
                    "console" => Some(true),
                    _ => None,
                };
                open = Some((i + 1, console, Vec::new()));
                block_mark = before;
            }
            (Some(_), Some((at, Some(console), body))) => out.push(Block {
                at: format!("{file}:{at}"),
                examples: commands(&body, console)
                    .into_iter()
                    .map(|mut e| {
                        if !block_mark.is_empty() {
                            e.comment = format!("{} ({block_mark})", e.comment).trim().into();
                        }
                        e
                    })
                    .collect(),
            }),
            (Some(_), Some((_, None, _))) => {}
            (None, Some((at, console, mut body))) => {
                body.push(line);
                open = Some((at, console, body));
            }
            (None, None) => {}
        }
    }
    out
}

/// The files a Markdown file shows for its examples to use: each fenced
/// block whose first line is a comment naming it, `# NAME.EXT` or
/// `# NAME.EXT: what it is`, as (NAME.EXT, the block's text).
pub fn files(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if !line.trim_start().starts_with("```") {
            continue;
        }
        let body: Vec<&str> = lines
            .by_ref()
            .take_while(|l| !l.trim_start().starts_with("```"))
            .collect();
        let name = body
            .first()
            .and_then(|l| l.strip_prefix("# "))
            .map(|l| l.split(':').next().unwrap_or(l).trim());
        if let Some(name) =
            name.filter(|n| n.contains('.') && !n.contains(char::is_whitespace) && !n.contains('/'))
        {
            out.push((name.to_string(), body.join("\n") + "\n"));
        }
    }
    out
}

/// The mark of a `<!-- examples: MARK -->` line (empty for any other
/// line): said right above a fence, it is every example's of that block.
fn block_mark_of(line: &str) -> &str {
    line.trim()
        .strip_prefix("<!-- examples:")
        .and_then(|m| m.strip_suffix("-->"))
        .map_or("", str::trim)
}

/// The fenced blocks of a Markdown file that are not tagged at all but
/// hold a command a reader would copy (a `$ ` prompt, or a line that
/// starts with a tool's name or `sudo`): examples the test would not see.
/// A usage synopsis is tagged `text`.
pub fn untagged_examples(text: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let mut open: Option<(usize, bool)> = None;
    for (i, line) in text.lines().enumerate() {
        if let Some(tag) = line.trim_start().strip_prefix("```") {
            open = match open {
                None => Some((i + 1, tag.trim().is_empty())),
                Some(_) => None,
            };
        } else if let Some((at, true)) = open {
            let command = line.starts_with("$ ")
                || ["ibprobe ", "ibtune ", "ibexporter ", "sudo "]
                    .iter()
                    .any(|t| line.starts_with(t));
            if command && out.last() != Some(&at) {
                out.push(at);
            }
        }
    }
    out
}

/// The examples of a `--help` text (`at` names it): each example of each
/// `Examples:` or `Workflow:` section (a line of its own, then indented
/// lines up to a blank or unindented line) is a block of its own.
pub fn help(at: &str, text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if line != "Examples:" && line != "Workflow:" {
            continue;
        }
        let mut body = Vec::new();
        while let Some(l) = lines.next_if(|l| l.starts_with("  ")) {
            body.push(l);
        }
        out.extend(commands(&body, false).into_iter().map(|e| Block {
            at: at.to_string(),
            examples: vec![e],
        }));
    }
    out
}

/// The commands of a block's lines (module doc: continuations, comments,
/// prompts and output).
fn commands(lines: &[&str], console: bool) -> Vec<Example> {
    let mut out: Vec<Example> = Vec::new();
    let mut pending: Option<String> = None;
    // Whether a comment line continues the command above (no blank between).
    let mut attached = false;
    for raw in lines {
        let line = raw.trim();
        let follows = std::mem::replace(&mut attached, !line.is_empty());
        let text = match pending.take() {
            Some(p) => format!("{p} {line}"),
            None if console => match line.strip_prefix("$ ") {
                Some(cmd) => cmd.trim().to_string(),
                None => continue,
            },
            None if line.starts_with('#') => {
                if let Some(last) = out.last_mut().filter(|_| follows) {
                    let more = line.trim_start_matches('#').trim();
                    if last.comment.is_empty() {
                        last.comment = more.to_string();
                    } else {
                        last.comment = format!("{} {more}", last.comment);
                    }
                }
                continue;
            }
            None if line.is_empty() => continue,
            None => line.to_string(),
        };
        let (command, comment) = split_comment(&text);
        if let Some(head) = command.strip_suffix('\\') {
            pending = Some(head.trim_end().to_string());
            continue;
        }
        out.push(Example {
            command: command.to_string(),
            comment: comment.to_string(),
        });
    }
    if let Some(p) = pending {
        out.push(Example {
            command: p,
            comment: String::new(),
        });
    }
    out
}

/// A line split at its comment: a `#` at the start or after a blank,
/// outside quotes. Both parts trimmed.
fn split_comment(line: &str) -> (&str, &str) {
    let mut quote = None;
    let mut prev = ' ';
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), _) if c == q => quote = None,
            (None, '#') if prev.is_whitespace() => {
                return (line[..i].trim(), line[i + 1..].trim());
            }
            _ => {}
        }
        prev = c;
    }
    (line.trim(), "")
}

/// The tools whose `--help` texts hold examples.
pub const TOOLS: [&str; 3] = ["ibprobe", "ibtune", "ibexporter"];

/// The Markdown files a user reads, sorted: every `*.md` under `root` but
/// the golden outputs, the recipes (`docs/recipes/`, run end to end by
/// their own test) and what is not ours (target, node_modules, dot folders).
pub fn doc_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    docs(root, &mut out);
    out.sort();
    out
}

fn docs(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().to_string();
        let ft = e.file_type().unwrap();
        if ft.is_dir() {
            let skip = name.starts_with('.')
                || ["target", "node_modules", "golden"].contains(&name.as_str())
                || p.ends_with("docs/recipes");
            if !skip {
                docs(&p, out);
            }
        } else if ft.is_file() && name.ends_with(".md") {
            out.push(p);
        }
    }
}

/// Every example of every `--help` of every (sub)command of the tools.
pub fn help_blocks(bin: &Path) -> Vec<Block> {
    let mut blocks = Vec::new();
    for t in TOOLS {
        let mut todo = vec![vec![t.to_string()]];
        while let Some(path) = todo.pop() {
            let out = Command::new(bin.join(t))
                .args(&path[1..])
                .arg("--help")
                .output()
                .unwrap();
            assert!(out.status.success(), "{} --help: {out:?}", path.join(" "));
            let text = String::from_utf8(out.stdout).unwrap();
            blocks.extend(help(&format!("{} --help", path.join(" ")), &text));
            todo.extend(subcommands(&text).into_iter().map(|s| {
                let mut p = path.clone();
                p.push(s);
                p
            }));
        }
    }
    blocks
}

/// The subcommands a `--help` lists under `Commands:` (not `help`).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        // A name at two spaces; a wrapped description is indented further.
        .filter(|l| !l[2..].starts_with(' '))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|s| *s != "help")
        .map(str::to_string)
        .collect()
}

/// Every example of the docs under `root` and of the `--help` texts of
/// the tools in `bin` that runs in the lab, with where it is.
pub fn lab_examples(root: &Path, bin: &Path) -> Vec<(String, Example)> {
    let mut blocks = help_blocks(bin);
    for f in doc_files(root) {
        let rel = f.strip_prefix(root).unwrap_or(&f).display().to_string();
        let text = std::fs::read_to_string(&f).expect("a doc");
        blocks.extend(markdown(&rel, &text));
    }
    blocks
        .into_iter()
        .flat_map(|b| {
            let at = b.at;
            b.examples
                .into_iter()
                .filter(|e| e.class() == Class::Lab && e.not_runnable().is_none())
                .map(move |e| (at.clone(), e))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(command: &str, comment: &str) -> Example {
        Example {
            command: command.into(),
            comment: comment.into(),
        }
    }

    #[test]
    fn sh_block_joins_continuations_and_keeps_comments() {
        let md = "text\n```sh\nibprobe loopback -t shm \\\n     --count 10   # short\n\n# not a command\nibtune show\n    # what the host is,\n    # with warnings\n```\n";
        let b = markdown("R.md", md);
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].at, "R.md:2");
        assert_eq!(
            b[0].examples,
            vec![
                ex("ibprobe loopback -t shm --count 10", "short"),
                ex("ibtune show", "what the host is, with warnings"),
            ]
        );
    }

    #[test]
    fn console_block_strips_prompts_and_ignores_output() {
        let md = "```console\n$ ibprobe client 127.0.0.1 -t udp \\\n    --count 20  # exits 1\nRTT  20  4.2 # not a comment of anything\n...\n$ echo 'a # b' \"c # d\"\n# output, too\n```\n";
        let b = markdown("R.md", md);
        assert_eq!(
            b[0].examples,
            vec![
                ex("ibprobe client 127.0.0.1 -t udp --count 20", "exits 1"),
                ex("echo 'a # b' \"c # d\"", ""),
            ]
        );
        assert_eq!(b[0].examples[0].class(), Class::Here(1));
    }

    #[test]
    fn other_blocks_are_not_examples_and_untagged_ones_are_found() {
        let md = "```toml\n[a]\n```\n```\n$ ibprobe devices\nout\n```\n```\nibtune show\n```\n```text\nibtune <COMMAND>\n```\n<!-- examples: runs in the lab -->\n```sh\nls # here\n```\n";
        let b = markdown("R.md", md);
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].at, "R.md:15");
        assert_eq!(b[0].examples, vec![ex("ls", "here (runs in the lab)")]);
        assert_eq!(b[0].examples[0].class(), Class::Lab);
        assert_eq!(untagged_examples(md), vec![4, 8]);
    }

    #[test]
    fn help_sections_give_one_block_per_example() {
        let h = "Usage: x\n\nExamples:\n  ibprobe devices              # list them\n  ibprobe server -t rc         # on host A\n      # needs an RDMA device: runs in the lab\n  ibexporter   # runs until stopped\n\nExit codes: 0 ok\n  ibprobe not-an-example\n";
        let b = help("ibprobe --help", h);
        assert_eq!(b.len(), 3);
        assert_eq!(
            b[1].examples[0].comment,
            "on host A needs an RDMA device: runs in the lab"
        );
        assert_eq!(b[1].examples[0].class(), Class::Lab);
        assert_eq!(b[2].examples[0].class(), Class::UntilStopped);
        assert_eq!(b[0].examples[0].class(), Class::Here(0));
    }

    #[test]
    fn files_are_blocks_that_name_themselves() {
        let md =
            "```toml\n# a.toml: answers\nx = 1\n```\n```toml\n# a comment\n```\n```sh\nls\n```\n";
        assert_eq!(
            files(md),
            vec![(
                "a.toml".to_string(),
                "# a.toml: answers\nx = 1\n".to_string()
            )]
        );
    }

    #[test]
    fn marks_and_lab_substitutions() {
        let e = ex("ibprobe client hostA -t rc --dev mlx5_0 &", "");
        assert_eq!(e.class(), Class::UntilStopped);
        assert_eq!(e.in_lab(), "ibprobe client 10.77.0.1 -t rc --dev rxe0 &");
        assert_eq!(ex("ibprobe host", "needs root").class(), Class::Root(0));
        assert_eq!(
            ex("x", "drift: exits 1, needs root").class(),
            Class::Root(1)
        );
        // `#` inside a word or quotes is not a comment.
        assert_eq!(split_comment("echo a#b '#' # c"), ("echo a#b '#'", "c"));
    }
}
