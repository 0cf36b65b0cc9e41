//! The recipes of `docs/recipes/`, run from their own text.
//!
//! A recipe is a page a new user follows top-down; its commands are its
//! ```` ```sh ```` blocks, in order. The tests that run a recipe
//! (`ibexporter/tests/recipes.rs`, the `guest_v2` lab group of
//! `ibtune/tests/lab.rs`) take those blocks from the page with
//! [`blocks`], rewrite them through one [`Mapping`] (what differs between
//! the test and a real site: a host is a network namespace, the HCA is
//! the lab's `rxe0`, `systemctl start` is the unit's `ExecStart` run by
//! hand ...), print that mapping, and run each block with
//! `bash -euo pipefail` where its title says. So a recipe whose commands
//! stop working fails its test, and the only liberties a test takes are
//! the rows of its printed mapping.
//!
//! Where a block runs is its title in the info string, which renderers
//! that show titles print above the block and the prose beside it says
//! too: ```` ```sh title="on each host" ````. A block without a title runs
//! on the one host of the recipe. Blocks in other languages (`text` for
//! expected output, `toml`, `yaml`) are for reading only.
//!
//! Other tests that run documentation examples leave `docs/recipes/*.md`
//! to these tests.

use std::path::{Path, PathBuf};

/// One ```` ```sh ```` block of a recipe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// 1-based line of its opening fence, for messages.
    pub line: usize,
    /// Its `title="..."`: where it runs; `None` for the recipe's one host.
    pub place: Option<String>,
    /// Its commands, as written.
    pub code: String,
}

impl Block {
    /// Where it runs, for messages and matching (`"the host"` without a title).
    pub fn place(&self) -> &str {
        self.place.as_deref().unwrap_or("the host")
    }
}

/// The path of `docs/recipes/<name>.md`.
pub fn path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../docs/recipes")
        .join(format!("{name}.md"))
}

/// The text of `docs/recipes/<name>.md`; panics naming the file.
pub fn text(name: &str) -> String {
    let p = path(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()))
}

/// Every ```` ```sh ```` block of a Markdown text, in order. Panics on an
/// unclosed fence: a recipe cut short must not run half its steps.
pub fn blocks(markdown: &str) -> Vec<Block> {
    /// A fenced block being read: its first line, its place when it is
    /// `sh` (`None` for other languages), its lines.
    struct Open<'a> {
        line: usize,
        sh: Option<Option<String>>,
        code: Vec<&'a str>,
    }
    let mut out = Vec::new();
    let mut open: Option<Open> = None;
    for (i, line) in markdown.lines().enumerate() {
        let fence = line.trim_start().starts_with("```");
        match open.as_mut() {
            None if fence => {
                let info = line.trim_start().trim_start_matches('`').trim();
                let (lang, rest) = info.split_once(' ').unwrap_or((info, ""));
                open = Some(Open {
                    line: i + 1,
                    sh: (lang == "sh").then(|| title(rest)),
                    code: Vec::new(),
                });
            }
            None => {}
            Some(_) if fence => {
                let b = open.take().expect("an open block");
                if let Some(place) = b.sh {
                    out.push(Block {
                        line: b.line,
                        place,
                        code: b.code.join("\n") + "\n",
                    });
                }
            }
            Some(b) => b.code.push(line),
        }
    }
    if let Some(b) = open {
        panic!("the code block opened on line {} is never closed", b.line);
    }
    out
}

/// The value of `title="..."` in the rest of an info string.
fn title(rest: &str) -> Option<String> {
    let v = rest.split("title=\"").nth(1)?;
    Some(v.split('"').next()?.to_string())
}

/// What differs between a test run and a real site, as text
/// replacements applied in order to every block (and to the repository
/// files a test says it rewrites), with why; printed once per run.
#[derive(Debug, Clone, Default)]
pub struct Mapping {
    rows: Vec<(String, String, String)>,
    notes: Vec<(String, String, String)>,
}

impl Mapping {
    /// An empty mapping.
    pub fn new() -> Mapping {
        Mapping::default()
    }

    /// Adds a row: `site` (as the recipe writes it) becomes `here`, because `why`.
    pub fn row(mut self, site: &str, here: &str, why: &str) -> Mapping {
        self.rows
            .push((site.to_string(), here.to_string(), why.to_string()));
        self
    }

    /// A difference that is no text replacement (the environment a block
    /// runs in: `PATH`, a namespace), printed with the rows.
    pub fn note(mut self, site: &str, here: &str, why: &str) -> Mapping {
        self.notes
            .push((site.to_string(), here.to_string(), why.to_string()));
        self
    }

    /// Two rows for a oneshot unit run by hand: `start` (`systemctl
    /// enable --now UNIT@INSTANCE`) becomes the unit's `ExecStart` and
    /// `stop` its `ExecStop`, read from the unit file (`bin` is the
    /// program they name under /usr/local/bin), `%i` as `instance`.
    pub fn unit(self, unit: &Path, bin: &str, instance: &str, start: &str, stop: &str) -> Mapping {
        let exec = |key: &str| {
            let args = crate::systemd::exec_args(unit, key, bin, instance)
                .unwrap_or_else(|e| panic!("{e}"));
            format!("{bin} {}", args.join(" "))
        };
        let name = unit
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        self.row(
            start,
            &exec("ExecStart"),
            &format!("no systemd here: {name}'s ExecStart with %i = {instance}"),
        )
        .row(stop, &exec("ExecStop"), &format!("{name}'s ExecStop"))
    }

    /// The text with every row applied, in order.
    pub fn apply(&self, text: &str) -> String {
        self.rows
            .iter()
            .fold(text.to_string(), |t, (site, here, _)| t.replace(site, here))
    }

    /// The mapping as a table, headed by the recipe's name.
    pub fn table(&self, recipe: &str) -> String {
        let mut s = format!(
            "recipe {recipe}: what this run changes from a real site \
             (applied in order to every command block):\n"
        );
        for (site, here, why) in &self.rows {
            s += &format!("  {site:?}\n    -> {here:?}\n       ({why})\n");
        }
        for (site, here, why) in &self.notes {
            s += &format!("  {site}\n    -> {here}\n       ({why})\n");
        }
        s
    }

    /// The rows whose site text appears in none of `texts`.
    pub fn unused(&self, texts: &[&str]) -> Vec<String> {
        self.rows
            .iter()
            .filter(|(site, _, _)| !texts.iter().any(|t| t.contains(site.as_str())))
            .map(|(site, _, _)| site.clone())
            .collect()
    }

    /// Fails naming each row whose site text appears in none of `texts`:
    /// a row that matches nothing means the recipe changed under the test.
    pub fn assert_each_row_used(&self, recipe: &str, texts: &[&str]) {
        let unused = self.unused(texts);
        assert!(
            unused.is_empty(),
            "recipe {recipe}: the mapping's rows {unused:?} match no command: \
             the recipe changed; update its test's mapping"
        );
    }

    /// `set -euo pipefail`, then the block with the mapping applied: the
    /// script to give `bash -c`.
    pub fn script(&self, block: &Block) -> String {
        format!("set -euo pipefail\n{}", self.apply(&block.code))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sh_blocks_in_order_with_their_place() {
        let md = "# R\n\n```sh\na\nb\n```\n\n```text\nout\n```\n\n\
                  ```sh title=\"on each host\"\nc\n```\n```toml\nx = 1\n```\n";
        let b = blocks(md);
        assert_eq!(
            b,
            vec![
                Block {
                    line: 3,
                    place: None,
                    code: "a\nb\n".into()
                },
                Block {
                    line: 12,
                    place: Some("on each host".into()),
                    code: "c\n".into()
                },
            ]
        );
        assert_eq!(b[0].place(), "the host");
    }

    #[test]
    #[should_panic(expected = "line 1 is never closed")]
    fn an_unclosed_block_is_refused() {
        blocks("```sh\nrm -rf x\n");
    }

    #[test]
    fn the_mapping_applies_in_order_and_finds_stale_rows() {
        let m = Mapping::new()
            .row("systemctl start x", "x --config /etc/x", "no systemd")
            .row("/etc/", "/tmp/h1/etc/", "a host's files");
        assert_eq!(
            m.script(&Block {
                line: 1,
                place: None,
                code: "systemctl start x\n".into()
            }),
            "set -euo pipefail\nx --config /tmp/h1/etc/x\n"
        );
        assert!(m.table("r").contains("no systemd"));
        m.assert_each_row_used("r", &["systemctl start x; cat /etc/y"]);
        let stale = std::panic::catch_unwind(|| m.assert_each_row_used("r", &["/etc/y"]));
        assert!(stale.is_err(), "a row matching nothing must fail");
    }
}
