//! The counters of a run (`ibnoise::counters`) as every command that measures
//! shows them: the table's context lines, the JSON `counters` object, the
//! CSV columns, and the sentence that names the likely cause of an outlier.

use serde_json::{json, Map, Value};

use ibnoise::counters::{Counter, CounterReport};

/// Thousands separators: 1204 -> "1,204".
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// "cpu 1" or "cpus 0,1,2,3".
fn cpus_phrase(cpus: &[usize]) -> String {
    let list: Vec<String> = cpus.iter().map(|c| c.to_string()).collect();
    let s = if cpus.len() == 1 { "" } else { "s" };
    format!("cpu{s} {}", list.join(","))
}

fn val(r: &CounterReport, c: Counter) -> String {
    r.counts.get(c).map_or("n/a".into(), thousands)
}

/// The table's context lines (`counters: ...`, `interrupts: ...`,
/// `counters missing: ...`, `attribution: ...`), without newlines.
pub fn table_lines(r: &CounterReport) -> Vec<String> {
    let mut out = vec![format!(
        "counters: {} context switches ({} involuntary), {} migrations, {} page faults minor, {} major, {} SMIs",
        val(r, Counter::ContextSwitches),
        val(r, Counter::InvoluntaryContextSwitches),
        val(r, Counter::CpuMigrations),
        val(r, Counter::PageFaultsMinor),
        val(r, Counter::PageFaultsMajor),
        val(r, Counter::Smis),
    )];
    if r.counts.get(Counter::Cycles).is_some() {
        out.push(format!(
            "counters: {} cycles, {} instructions, {} cache misses",
            val(r, Counter::Cycles),
            val(r, Counter::Instructions),
            val(r, Counter::CacheMisses)
        ));
    }
    if let Some(n) = r.counts.get(Counter::Interrupts) {
        let top: Vec<String> = r
            .interrupts_by_source
            .iter()
            .take(4)
            .map(|s| format!("{} {}", s.source, thousands(s.count)))
            .collect();
        out.push(format!(
            "interrupts on {}: {}{}",
            cpus_phrase(&r.cpus),
            thousands(n),
            if top.is_empty() {
                String::new()
            } else {
                format!(" ({})", top.join(", "))
            }
        ));
    }
    // One line for every missing counter, each group with its reason:
    // the same groups go missing on every run of a host, so they are said
    // once, not once per source.
    if !r.missing.is_empty() {
        let groups: Vec<String> = r
            .missing
            .iter()
            .map(|m| format!("{}: {}", m.counters.join(", "), m.why))
            .collect();
        out.push(format!("counters missing: {}", groups.join("; ")));
    }
    let causes = r.attribution.iter().flat_map(|a| &a.causes);
    let seen = causes.filter(|c| c.with.intervals > 0 && c.without.intervals > 0);
    out.extend(seen.map(|c| format!("attribution: {}", c.sentence())));
    out
}

/// The JSON `counters` object: every counter by name (null where not
/// counted), `cpus`, `interrupts_by_source`, `missing`, `attribution`.
pub fn json(r: &CounterReport) -> Value {
    let mut m = Map::new();
    for &c in Counter::ALL {
        m.insert(c.name().into(), json!(r.counts.get(c)));
    }
    m.insert("cpus".into(), json!(r.cpus));
    m.insert("interrupts_by_source".into(), json!(r.interrupts_by_source));
    m.insert("missing".into(), json!(r.missing));
    let attribution = r.attribution.as_ref().map(|a| {
        let mut v = json!(a);
        v["likely_cause"] = json!(a.likely().map(|c| c.cause));
        v
    });
    m.insert("attribution".into(), json!(attribution));
    Value::Object(m)
}

/// The CSV header cells of the counters (one per counter).
pub fn csv_header() -> String {
    Counter::ALL
        .iter()
        .map(|c| c.name())
        .collect::<Vec<_>>()
        .join(",")
}

/// The CSV cells of `r`, one per counter (empty where not counted, or
/// counters off).
pub fn csv_cells(r: Option<&CounterReport>) -> Vec<String> {
    cells(r.map(|r| &r.counts))
}

fn cells(c: Option<&ibnoise::counters::Counts>) -> Vec<String> {
    let cell = |k| {
        c.and_then(|c| c.get(k))
            .map_or(String::new(), |v| v.to_string())
    };
    Counter::ALL.iter().map(|&k| cell(k)).collect()
}

/// The header of the per-interval side file of `--hdr-log FILE`
/// (`FILE.counters.csv`): the interval in seconds since the run's start,
/// its samples, p99.9 and max, then one column per counter.
pub fn interval_csv_header() -> String {
    format!("start_s,end_s,samples,p999_ns,max_ns,{}", csv_header())
}

pub fn interval_csv_row(
    start_ns: u64,
    end_ns: u64,
    h: &ibstats::latency::LatencyHistogram,
    c: &ibnoise::counters::Counts,
) -> String {
    let cells = cells(Some(c)).join(",");
    format!(
        "{:.6},{:.6},{},{},{},{cells}",
        start_ns as f64 / 1e9,
        end_ns as f64 / 1e9,
        h.len(),
        h.summary().p999_ns,
        h.max_ns()
    )
}

/// What the counters say about an outlier: the cause whose intervals hold
/// the tail, else the run's counts that could explain it, else that none
/// of them moved.
pub fn likely_cause(r: &CounterReport) -> String {
    if let Some(c) = r.attribution.as_ref().and_then(|a| a.likely()) {
        return format!("likely {}: {}", cause_word(c.cause), c.sentence());
    }
    let n = |c| r.counts.get(c).unwrap_or(0);
    let switches = match n(Counter::InvoluntaryContextSwitches) {
        0 => (n(Counter::ContextSwitches), "context switches"),
        i => (i, "involuntary context switches (preemption)"),
    };
    let seen: Vec<String> = [
        switches,
        (
            n(Counter::PageFaultsMinor) + n(Counter::PageFaultsMajor),
            "page faults",
        ),
        (n(Counter::CpuMigrations), "CPU migrations"),
        (n(Counter::Smis), "SMIs"),
    ]
    .into_iter()
    .filter(|&(k, _)| k > 0)
    .map(|(k, what)| format!("{} {what}", thousands(k)))
    .collect();
    if !seen.is_empty() {
        return format!("the counters saw {} during the run", seen.join(", "));
    }
    match (r.counts.get(Counter::Interrupts), r.top_source()) {
        (Some(i), Some(top)) if i > 0 => format!(
            "no context switch, page fault or migration was counted; {} interrupts hit {} (most from {}): likely an interrupt",
            thousands(i),
            cpus_phrase(&r.cpus),
            top.source
        ),
        _ => "no context switch, page fault, migration or interrupt was counted: look outside the thread (hypervisor steal time, SMIs, the peer)".into(),
    }
}

fn cause_word(cause: &str) -> &'static str {
    match cause {
        "context_switch" => "preemption",
        "page_fault" => "a page fault",
        "cpu_migration" => "a migration",
        "smi" => "an SMI",
        _ => "an interrupt",
    }
}

/// A fixed report (three counters, one interrupt source, one missing
/// counter), the one the unit tests here and `tests/report_golden.rs`
/// render. Not for library users.
#[doc(hidden)]
pub fn fixture() -> CounterReport {
    let mut c = ibnoise::counters::Counts::default();
    c.set(Counter::ContextSwitches, Some(3));
    c.set(Counter::InvoluntaryContextSwitches, Some(2));
    c.set(Counter::Interrupts, Some(1204));
    CounterReport {
        counts: c,
        cpus: vec![3],
        interrupts_by_source: vec![ibnoise::counters::SourceCount {
            source: "LOC".into(),
            what: "Local timer interrupts".into(),
            count: 1204,
        }],
        missing: vec![ibnoise::counters::Missing {
            counters: vec!["cycles"],
            why: "no CPU PMU".into(),
        }],
        attribution: None,
    }
}
