//! Markdown, for issues and wikis: a bold title, pipe tables, lists,
//! quoted warnings, the `--fail-if` lines as list items.

use crate::report::model::{fail_if_text, Block, Document, Quote, Spacing, Table};

word!(4, "A Markdown table, for issues and wikis.");

/// `doc` as Markdown.
pub(super) fn render(doc: &dyn Document) -> Option<String> {
    let mut out = String::new();
    let mut after_table = false;
    for b in doc.blocks() {
        block(&mut out, &b, &mut after_table);
    }
    Some(out + &fail_if_text(doc, "- "))
}

fn block(out: &mut String, b: &Block, after_table: &mut bool) {
    match b {
        Block::Title { bold, rest } => out.push_str(&format!("**{bold}**{rest}\n\n")),
        Block::Table(t) => {
            // Two tables in a row would read as one.
            if *after_table {
                out.push('\n');
            }
            table(out, t);
        }
        Block::List(items, spacing) => {
            if *spacing == Spacing::Before && !items.is_empty() {
                out.push('\n');
            }
            let gap = if *spacing == Spacing::Each { "\n" } else { "" };
            out.extend(items.iter().map(|i| format!("{gap}- {i}\n")));
        }
        Block::Heading(h) => out.push_str(&format!("### {h}\n\n")),
        Block::Warnings { list, style, .. } => {
            if *style == Quote::Together && !list.is_empty() {
                out.push('\n');
            }
            for w in list {
                let m = &w.message;
                out.push_str(&match style {
                    Quote::Apart => format!("\n> warning: {m}\n"),
                    Quote::Paragraphs => format!("\n**Warning:** {m}\n"),
                    Quote::Together if w.code.is_empty() => format!("> **warning**: {m}\n"),
                    Quote::Together => format!("> **warning** ({}): {m}\n", w.code),
                });
            }
        }
        Block::Notes(notes) => out.extend(notes.iter().map(|n| format!("\n*Note:* {n}\n"))),
        Block::OnlyMarkdown(b) => return block(out, b, after_table),
        Block::Context(_) | Block::OnlyText(_) => return,
    }
    *after_table = matches!(b, Block::Table(_));
}

fn table(out: &mut String, t: &Table) {
    let titles: Vec<&str> = t.columns.iter().map(|c| c.markdown.as_str()).collect();
    let aligns: Vec<&str> = t.columns.iter().map(|c| c.align.markdown).collect();
    out.push_str(&format!(
        "| {} |\n|{}|\n",
        titles.join(" | "),
        aligns.join("|")
    ));
    out.extend(t.rows.iter().map(|r| format!("| {} |\n", r.join(" | "))));
}
