//! `/proc/interrupts` for some CPUs: the total (without allocating, for
//! per-interval reads) and the counts by source (before and after a run).
//!
//! Why it exists: an interrupt on the measuring CPU stalls the loop for
//! its handler's time, and which device sent it (the NIC, a timer, a
//! rescheduling IPI) says what to move away. The parsing is pure
//! ([`parse_sources`], [`total_of`]) so ibtune reads the same table from
//! its `--root` tree.

use std::fs::File;
use std::io;

use super::counts::{read_proc, SourceCount};

/// One line of `/proc/interrupts`, summed over the CPUs asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceLine {
    /// `LOC`, or `29:virtio0-input.0` (IRQ number and action names).
    pub source: String,
    /// The description of a named line, or the chip of an IRQ.
    pub what: String,
    /// The sum of the counts of the CPUs asked for.
    pub count: u64,
}

/// The column of each CPU in `cpus` (from the `CPU0 CPU1 ...` header of
/// `text`); CPUs the header does not list are left out.
pub fn columns(text: &str, cpus: &[usize]) -> Vec<usize> {
    let Some(header) = text.lines().find(|l| !l.trim().is_empty()) else {
        return Vec::new();
    };
    let names: Vec<Option<usize>> = header
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
    let (label, rest) = line.split_once(':')?;
    let label = label.trim();
    if label.is_empty() {
        return None;
    }
    let mut sum = 0u64;
    let mut rest_start = rest;
    let mut i = 0usize;
    let mut s = rest;
    loop {
        let t = s.trim_start();
        let end = t.find(char::is_whitespace).unwrap_or(t.len());
        let tok = &t[..end];
        match tok.parse::<u64>() {
            Ok(v) if !tok.is_empty() => {
                if cols.contains(&i) {
                    sum = sum.saturating_add(v);
                }
                i += 1;
                s = &t[end..];
                rest_start = s;
            }
            _ => break,
        }
    }
    Some((label, sum, rest_start.trim()))
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
pub fn parse_sources(text: &str, cols: &[usize]) -> Vec<SourceLine> {
    text.lines()
        .skip(1)
        .filter_map(|l| split_line(l, cols))
        .map(|(label, count, rest)| {
            if label.chars().all(|c| c.is_ascii_digit()) {
                // "PCI-MSIX-0000:00:03.0 1-edge virtio1-input.0": the chip,
                // a hwirq/trigger word, then the action names.
                let mut words = rest.split_whitespace();
                let chip = words.next().unwrap_or_default().to_string();
                let names: Vec<&str> = words
                    .filter(|w| {
                        !(w.ends_with("-edge")
                            || w.ends_with("-level")
                            || *w == "edge"
                            || *w == "level"
                            || w.ends_with("-fasteoi"))
                    })
                    .collect();
                let source = if names.is_empty() {
                    label.to_string()
                } else {
                    format!("{label}:{}", names.join(" "))
                };
                SourceLine {
                    source,
                    what: chip,
                    count,
                }
            } else {
                SourceLine {
                    source: label.to_string(),
                    what: rest.to_string(),
                    count,
                }
            }
        })
        .collect()
}

/// Interrupts per source between two readings, largest first; sources
/// with none left out.
pub fn delta(before: &[SourceLine], after: &[SourceLine]) -> Vec<SourceCount> {
    let mut out: Vec<SourceCount> = after
        .iter()
        .filter_map(|a| {
            let b = before
                .iter()
                .find(|b| b.source == a.source)
                .map_or(0, |b| b.count);
            let n = a.count.saturating_sub(b);
            (n > 0).then(|| SourceCount {
                source: a.source.clone(),
                what: a.what.clone(),
                count: n,
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
    /// Opens `/proc/interrupts` for `cpus`.
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

    /// Reads the table into the buffer; the text read (cut at the
    /// buffer's end, which only loses lines past twice the size at open).
    fn fill(&mut self) -> Option<&str> {
        let n = read_proc(&self.file, &mut self.buf)?;
        let text = &self.buf[..n];
        // Whole lines only.
        let end = text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        std::str::from_utf8(&text[..end]).ok()
    }

    /// The total of the CPUs' columns now; no allocation.
    pub fn total(&mut self) -> Option<u64> {
        let cols = std::mem::take(&mut self.cols);
        let r = self.fill().map(|t| total_of(t, &cols));
        self.cols = cols;
        r
    }

    /// The lines now, by source (allocates).
    pub fn sources(&mut self) -> Vec<SourceLine> {
        let cols = self.cols.clone();
        self.fill()
            .map(|t| parse_sources(t, &cols))
            .unwrap_or_default()
    }
}
