//! `/proc/interrupts` for some CPUs: the total (without allocating, for
//! per-interval reads) and the counts by source (before and after a run):
//! an interrupt on the measuring CPU stalls the loop for its handler's
//! time, and which device sent it (the NIC, a timer, a rescheduling IPI)
//! says what to move away. The parsing is pure ([`parse_sources`],
//! [`total_of`]) so ibtune reads the same table from its `--root` tree.

use std::fs::File;
use std::io;

use super::counts::{read_proc, SourceCount};

/// The column of each CPU in `cpus` (from the `CPU0 CPU1 ...` header of
/// `text`); CPUs the header does not list are left out.
pub fn columns(text: &str, cpus: &[usize]) -> Vec<usize> {
    let header = text.lines().find(|l| !l.trim().is_empty());
    let names: Vec<Option<usize>> = header
        .unwrap_or_default()
        .split_whitespace()
        .map(|t| t.strip_prefix("CPU").and_then(|n| n.parse().ok()))
        .collect();
    cpus.iter()
        .filter_map(|c| names.iter().position(|n| *n == Some(*c)))
        .collect()
}

/// Splits a line after its header into (label, counts at `cols` summed,
/// the rest of the line after the count columns). None for the header and
/// lines without `label:`.
fn split_line<'a>(line: &'a str, cols: &[usize]) -> Option<(&'a str, u64, &'a str)> {
    let (label, mut rest) = line.split_once(':')?;
    let label = label.trim();
    if label.is_empty() {
        return None;
    }
    let mut sum = 0u64;
    for i in 0.. {
        let t = rest.trim_start();
        let end = t.find(char::is_whitespace).unwrap_or(t.len());
        let Ok(v) = t[..end].parse::<u64>() else {
            break;
        };
        if cols.contains(&i) {
            sum = sum.saturating_add(v);
        }
        rest = &t[end..];
    }
    Some((label, sum, rest.trim()))
}

/// The total of the `cols` columns over every line of `text`.
pub fn total_of(text: &str, cols: &[usize]) -> u64 {
    text.lines()
        .skip(1)
        .filter_map(|l| split_line(l, cols))
        .map(|(_, n, _)| n)
        .fold(0u64, |a, b| a.saturating_add(b))
}

/// Every line of `text`, summed over the `cols` columns.
pub fn parse_sources(text: &str, cols: &[usize]) -> Vec<SourceCount> {
    text.lines()
        .skip(1)
        .filter_map(|l| split_line(l, cols))
        .map(|(label, count, rest)| {
            let (source, what) = if label.chars().all(|c| c.is_ascii_digit()) {
                irq_source(label, rest)
            } else {
                (label.to_string(), rest.to_string())
            };
            SourceCount {
                source,
                what,
                count,
            }
        })
        .collect()
}

/// An IRQ line's source and chip: "PCI-MSIX-0000:00:03.0 1-edge
/// virtio1-input.0" is the chip, a hwirq/trigger word, then the action
/// names.
fn irq_source(label: &str, rest: &str) -> (String, String) {
    let mut words = rest.split_whitespace();
    let what = words.next().unwrap_or_default().to_string();
    let trigger = |w: &str| {
        ["edge", "level"].contains(&w)
            || ["-edge", "-level", "-fasteoi"]
                .iter()
                .any(|t| w.ends_with(t))
    };
    let names: Vec<&str> = words.filter(|w| !trigger(w)).collect();
    let source = if names.is_empty() {
        label.to_string()
    } else {
        format!("{label}:{}", names.join(" "))
    };
    (source, what)
}

/// Interrupts per source between two readings, largest first; sources
/// with none left out.
pub fn delta(before: &[SourceCount], after: &[SourceCount]) -> Vec<SourceCount> {
    let mut out: Vec<SourceCount> = after
        .iter()
        .filter_map(|a| {
            let b = before
                .iter()
                .find(|b| b.source == a.source)
                .map_or(0, |b| b.count);
            let n = a.count.saturating_sub(b);
            (n > 0).then(|| SourceCount {
                count: n,
                ..a.clone()
            })
        })
        .collect();
    out.sort_by(|a, b| b.count.cmp(&a.count).then(a.source.cmp(&b.source)));
    out
}

/// `/proc/interrupts`, kept open with a buffer sized at open, and the
/// columns of the CPUs asked for.
pub struct InterruptTable {
    file: File,
    buf: Vec<u8>,
    cols: Vec<usize>,
}

impl InterruptTable {
    pub fn open(cpus: &[usize]) -> io::Result<InterruptTable> {
        let text = ibhost::file::read_pseudo("/proc/interrupts", ibhost::file::MAX_PROC_TABLE)?;
        let cols = columns(&text, cpus);
        if cols.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("its header lists none of the CPUs {cpus:?}"),
            ));
        }
        Ok(InterruptTable {
            file: File::open("/proc/interrupts")?,
            // Room for the table to grow (new IRQs) without reallocating.
            buf: vec![0u8; text.len() * 2 + 16 * 1024],
            cols,
        })
    }

    /// Reads the table into the buffer: the text read (whole lines, cut at
    /// the buffer's end, which only loses lines past twice the size at
    /// open) and the columns.
    fn fill(&mut self) -> Option<(&str, &[usize])> {
        let n = read_proc(&self.file, &mut self.buf)?;
        let text = &self.buf[..n];
        let end = text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        Some((std::str::from_utf8(&text[..end]).ok()?, &self.cols))
    }

    /// The total of the CPUs' columns now; no allocation.
    pub fn total(&mut self) -> Option<u64> {
        self.fill().map(|(t, cols)| total_of(t, cols))
    }

    /// The lines now, by source (allocates).
    pub fn sources(&mut self) -> Vec<SourceCount> {
        let lines = self.fill().map(|(t, cols)| parse_sources(t, cols));
        lines.unwrap_or_default()
    }
}
