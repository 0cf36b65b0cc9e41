//! `ibexporter localize`'s report: a snapshot's rounds fed to the
//! [`Localizer`], its ranked suspects with host and rack names, the
//! rounds that accused each, and the three ways it is printed (an aligned
//! table, Markdown, JSON `ibexporter.localize/1`).
//!
//! Why it exists: the method ([`super`]) speaks of host and rack indices;
//! an operator reads names, and a script reads stable JSON fields.

use std::fmt::Write as _;

use serde::Serialize;

use super::model::{Entity, Suspect};
use super::snapshot::{Input, Snapshot};
use super::{assess, Localizer};

/// The JSON schema of the report.
pub const SCHEMA: &str = "ibexporter.localize/1";

/// How the report is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Aligned text for a terminal.
    Table,
    /// JSON ([`SCHEMA`]).
    Json,
    /// A Markdown table (an incident ticket).
    Markdown,
}

/// One named suspect, with names.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Named {
    /// 1 = most confident.
    pub rank: usize,
    /// host, nic, prober, target, dead, link, rack-pair, path.
    pub kind: &'static str,
    /// Whom it names, in words: a host name, `RACK_A <-> RACK_B`, `PROBER -> TARGET`.
    pub entity: String,
    /// The hosts it names (one, two for a path, none for a rack pair).
    pub hosts: Vec<String>,
    /// The racks it names (two for a rack pair, else none).
    pub racks: Vec<String>,
    /// 0..=1: the sum of its per-round strengths over the window divided
    /// by the window's rounds ([`super::WINDOW_ROUNDS`]).
    pub confidence: f64,
    /// The rounds (1 = oldest) of the window that accused it.
    pub accused_in: Vec<usize>,
    /// The counts that accuse it, in a sentence.
    pub evidence: String,
}

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// Where the rounds came from.
    pub source: String,
    /// One round's window, seconds.
    pub window_seconds: f64,
    /// The rounds' window ends, unix seconds, oldest first.
    pub rounds_at: Vec<f64>,
    /// Hosts and racks seen.
    pub hosts: usize,
    /// Racks seen.
    pub racks: usize,
    /// Probes per round, oldest first.
    pub probes: Vec<usize>,
    /// Answered probes left out for want of a median (no histogram).
    pub skipped_probes: usize,
    /// The suspects the localizer names after the last round, ranked.
    pub suspects: Vec<Named>,
}

/// Feeds every round of `snap` to a localizer and names its suspects.
pub fn localize(snap: &Snapshot) -> Report {
    let input = snap.input();
    let mut loc = Localizer::new(input.topology.clone());
    let mut named = Vec::new();
    for r in &input.rounds {
        named = loc.push(r);
    }
    // Which rounds of the window accused each named entity.
    let first = input.rounds.len().saturating_sub(super::WINDOW_ROUNDS);
    let accusations: Vec<Vec<Suspect>> = input.rounds[first..]
        .iter()
        .map(|r| assess(&input.topology, r))
        .collect();
    let suspects = named
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let accused_in = accusations
                .iter()
                .enumerate()
                .filter(|(_, a)| a.iter().any(|x| x.entity == s.entity))
                .map(|(j, _)| first + j + 1)
                .collect();
            name(&input, s, i + 1, accused_in)
        })
        .collect();
    Report {
        schema: SCHEMA,
        source: snap.source.clone(),
        window_seconds: snap.window_seconds,
        rounds_at: snap.rounds.iter().map(|r| r.at).collect(),
        hosts: input.hosts.len(),
        racks: input.racks.len(),
        probes: input.rounds.iter().map(|r| r.pairs.len()).collect(),
        skipped_probes: input.skipped,
        suspects,
    }
}

/// A suspect with names; a rack pair's evidence names its racks.
fn name(input: &Input, s: &Suspect, rank: usize, accused_in: Vec<usize>) -> Named {
    let host = |h: u32| input.hosts[h as usize].clone();
    let rack = |r: u32| input.racks[r as usize].clone();
    let (entity, hosts, racks, evidence) = match s.entity {
        Entity::Host(h) => (host(h), vec![host(h)], vec![], s.evidence.clone()),
        Entity::Pair(p, t) => (
            format!("{} -> {}", host(p), host(t)),
            vec![host(p), host(t)],
            vec![],
            s.evidence.clone(),
        ),
        Entity::Racks(a, b) => {
            let (ra, rb) = (rack(a), rack(b));
            let evidence = s
                .evidence
                .replace(
                    &format!("racks {a} and {b}"),
                    &format!("racks {ra} and {rb}"),
                )
                .replace(&format!("rack {a}'s"), &format!("rack {ra}'s"))
                .replace(&format!("rack {b}'s"), &format!("rack {rb}'s"));
            (format!("{ra} <-> {rb}"), vec![], vec![ra, rb], evidence)
        }
    };
    Named {
        rank,
        kind: s.kind.name(),
        entity,
        hosts,
        racks,
        confidence: (s.confidence * 1000.0).round() / 1000.0,
        accused_in,
        evidence,
    }
}

fn rounds_list(v: &[usize]) -> String {
    v.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
}

/// The line above the suspects: what was read.
fn summary(r: &Report) -> String {
    let mut s = format!(
        "{} hosts in {} racks, {} rounds of {} s from {}",
        r.hosts,
        r.racks,
        r.rounds_at.len(),
        r.window_seconds,
        r.source
    );
    if r.skipped_probes > 0 {
        let _ = write!(
            s,
            " ({} answered probes without a latency histogram left out)",
            r.skipped_probes
        );
    }
    s
}

/// Prints `r` as `format` asks.
pub fn render(r: &Report, format: Format) -> String {
    match format {
        Format::Json => serde_json::to_string_pretty(r).unwrap_or_default() + "\n",
        Format::Table => table(r),
        Format::Markdown => markdown(r),
    }
}

fn table(r: &Report) -> String {
    let mut out = summary(r) + "\n";
    if r.suspects.is_empty() {
        out.push_str("no suspect: nothing is accused in enough rounds of the window\n");
        return out;
    }
    let rows: Vec<[String; 5]> = r
        .suspects
        .iter()
        .map(|s| {
            [
                s.rank.to_string(),
                s.kind.to_string(),
                s.entity.clone(),
                format!("{:.2}", s.confidence),
                rounds_list(&s.accused_in),
            ]
        })
        .collect();
    let head = ["rank", "kind", "entity", "confidence", "rounds"];
    let mut width = head.map(str::len);
    for row in &rows {
        for (w, c) in width.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: [&str; 5]| {
        let mut l = String::new();
        for (i, (c, w)) in cells.iter().zip(width).enumerate() {
            if i > 0 {
                l.push_str("  ");
            }
            let _ = write!(l, "{c:<w$}");
        }
        l.trim_end().to_string() + "\n"
    };
    out.push('\n');
    out.push_str(&line(head));
    for row in &rows {
        out.push_str(&line([&row[0], &row[1], &row[2], &row[3], &row[4]]));
    }
    out.push_str("\nevidence:\n");
    for s in &r.suspects {
        let _ = writeln!(out, "  {}. {}", s.rank, s.evidence);
    }
    out
}

/// A Markdown cell: pipes escaped, one line.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn markdown(r: &Report) -> String {
    let mut out = format!("**Localization**: {}\n\n", cell(&summary(r)));
    if r.suspects.is_empty() {
        out.push_str("No suspect: nothing is accused in enough rounds of the window.\n");
        return out;
    }
    out.push_str("| rank | kind | entity | confidence | rounds | evidence |\n");
    out.push_str("|---:|---|---|---:|---|---|\n");
    for s in &r.suspects {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.2} | {} | {} |",
            s.rank,
            s.kind,
            cell(&s.entity),
            s.confidence,
            rounds_list(&s.accused_in),
            cell(&s.evidence)
        );
    }
    out
}
