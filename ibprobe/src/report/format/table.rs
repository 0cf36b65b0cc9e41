//! The text table: context lines, tables padded to their columns,
//! `warning:` lines, the `--fail-if` lines.

use crate::report::model::{fail_if_text, Block, Column, Document, Table};

/// `doc` as the text table.
pub(super) fn render(doc: &dyn Document) -> String {
    let mut out = String::new();
    for b in doc.blocks() {
        block(&mut out, &b);
    }
    out + &fail_if_text(doc, "")
}

fn block(out: &mut String, b: &Block) {
    match b {
        Block::Context(lines) => {
            for l in lines {
                out.push_str(l);
                out.push('\n');
            }
        }
        Block::Table(t) => table(out, t),
        Block::Warnings(w, gap) => {
            if *gap && !w.is_empty() {
                out.push('\n');
            }
            for w in w {
                out.push_str(&format!("warning: {}\n", w.message));
            }
        }
        Block::OnlyText(b) => block(out, b),
        Block::Title { .. } | Block::List(..) | Block::OnlyMarkdown(_) => {}
    }
}

fn table(out: &mut String, t: &Table) {
    out.push_str(&line(&t.columns, t.columns.iter().map(|c| c.title)));
    if !t.unit.is_empty() {
        out.push_str("   ");
        out.push_str(t.unit);
    }
    out.push('\n');
    for r in &t.rows {
        out.push_str(&line(&t.columns, r.iter().map(String::as_str)));
        out.push('\n');
    }
}

/// Cells padded to their columns' widths, one space apart.
fn line<'a>(columns: &[Column], cells: impl Iterator<Item = &'a str>) -> String {
    let padded: Vec<String> = columns
        .iter()
        .zip(cells)
        .map(|(c, s)| {
            let w = c.width;
            if c.align.left {
                format!("{s:<w$}")
            } else {
                format!("{s:>w$}")
            }
        })
        .collect();
    padded.join(" ")
}
