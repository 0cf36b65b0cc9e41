//! `report::counters`.

use ibnoise::counters::Counter;
use ibprobe::report::counters::*;

#[test]
fn the_stream_csv_header_ends_with_the_counters() {
    let h = ibprobe::report::stream::CSV_HEADER;
    assert!(h.ends_with(&format!(",{}", csv_header())), "{h}");
}

#[test]
fn thousands_groups_digits() {
    assert_eq!(thousands(1204), "1,204");
    assert_eq!(thousands(12), "12");
    assert_eq!(thousands(1_000_000), "1,000,000");
}

#[test]
fn table_lines_say_counts_sources_and_what_is_missing() {
    let l = table_lines(&fixture()).join("\n");
    assert!(l.contains("3 context switches (2 involuntary)"), "{l}");
    assert!(l.contains("n/a migrations"), "{l}");
    assert!(l.contains("interrupts on cpu 3: 1,204 (LOC 1,204)"), "{l}");
    assert!(l.contains("counters missing: cycles: no CPU PMU"), "{l}");
}

/// Every missing group is said on one line, each with its reason.
#[test]
fn missing_counters_are_one_line() {
    let mut r = fixture();
    r.missing.push(ibnoise::counters::Missing {
        counters: vec!["smis"],
        why: "no msr module".into(),
    });
    let l = table_lines(&r);
    let missing: Vec<&String> = l.iter().filter(|x| x.contains("missing")).collect();
    assert_eq!(
        missing,
        ["counters missing: cycles: no CPU PMU; smis: no msr module"],
        "{l:?}"
    );
}

#[test]
fn json_has_every_counter_null_when_missing() {
    let v = json(&fixture());
    assert_eq!(v["context_switches"], 3);
    assert!(v["cycles"].is_null());
    assert_eq!(v["interrupts_by_source"][0]["source"], "LOC");
    assert_eq!(v["missing"][0]["counters"][0], "cycles");
}

#[test]
fn the_likely_cause_names_preemption_from_run_counts() {
    let s = likely_cause(&fixture());
    assert!(
        s.contains("2 involuntary context switches (preemption)"),
        "{s}"
    );
    let mut quiet = fixture();
    quiet.counts.set(Counter::ContextSwitches, Some(0));
    quiet
        .counts
        .set(Counter::InvoluntaryContextSwitches, Some(0));
    let s = likely_cause(&quiet);
    assert!(
        s.contains("1,204 interrupts hit cpu 3 (most from LOC)"),
        "{s}"
    );
}

#[test]
fn csv_cells_are_empty_where_not_counted() {
    let cells = csv_cells(Some(&fixture())).join(",");
    assert_eq!(cells.split(',').count(), csv_header().split(',').count());
    assert!(cells.starts_with("3,2,,"), "{cells}");
    assert_eq!(
        csv_cells(None).join(","),
        ",".repeat(ibnoise::counters::N - 1)
    );
}
