//! The text table: context lines, tables padded to their columns,
//! `warning:` lines, the `--fail-if` lines.

use crate::report::model::{fail_if_text, Block, Document, Table};

word!(1, "Human-readable table (hyperfine-like), with warnings.");

/// `doc` as the text table.
pub(super) fn render(doc: &dyn Document) -> Option<String> {
    let mut out = String::new();
    for b in doc.blocks() {
        block(&mut out, &b);
    }
    Some(out + &fail_if_text(doc, ""))
}

fn block(out: &mut String, b: &Block) {
    match b {
        Block::Context(lines) => out.extend(lines.iter().map(|l| format!("{l}\n"))),
        Block::Table(t) => table(out, t),
        Block::Warnings { list, gap, .. } => {
            if *gap && !list.is_empty() {
                out.push('\n');
            }
            out.extend(list.iter().map(|w| format!("warning: {}\n", w.message)));
        }
        Block::Notes(notes) => out.extend(notes.iter().map(|n| format!("note: {n}\n"))),
        Block::OnlyText(b) => block(out, b),
        Block::Title { .. } | Block::Heading(_) | Block::List(..) | Block::OnlyMarkdown(_) => {}
    }
}

fn table(out: &mut String, t: &Table) {
    let widths: Vec<usize> = t
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| match c.width {
            0 => t
                .rows
                .iter()
                .map(|r| r[i].chars().count())
                .chain([c.title.chars().count()])
                .max()
                .unwrap_or(0),
            w => w,
        })
        .collect();
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = t
            .columns
            .iter()
            .zip(&widths)
            .zip(cells)
            .map(|((c, &w), s)| {
                if c.align.left {
                    format!("{s:<w$}")
                } else {
                    format!("{s:>w$}")
                }
            })
            .collect();
        // A left-aligned last column pads nothing onto the line's end.
        padded.join(t.sep).trim_end().to_string()
    };
    out.push_str(&line(t.columns.iter().map(|c| c.title.as_str()).collect()));
    if !t.unit.is_empty() {
        out.push_str("   ");
        out.push_str(t.unit);
    }
    out.push('\n');
    for r in &t.rows {
        out.push_str(&(line(r.iter().map(String::as_str).collect()) + "\n"));
    }
}
