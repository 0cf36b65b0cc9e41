//! The localizer's Prometheus twin: recording rules and the alerts
//! `IBHostSuspect` and `IBRackPairSuspect`, written from the constants of
//! [`super`] so that the thresholds exist once.
//!
//! Why generated: the method ([`super`]'s module doc) runs twice, here in
//! Rust on rounds, in Prometheus on the exporters' series. A rules file
//! written by hand would copy `SLOW_RATIO`, `SIDE_FRAC` and the others and
//! drift from them. [`text`] returns the file; the shipped
//! `deploy/prometheus/rules/ibexporter-localize.rules.yml` must equal it
//! (`ibexporter/tests/localize_rules.rs` compares them and rewrites the
//! file with `RULES_UPDATE=1`).
//!
//! What PromQL keeps of the method, and what it cannot (the file's header
//! says it to the operator):
//!
//! - a **probe** is an ordered pair (`instance`, `target`) over [`WINDOW`],
//!   every size and transport of it merged; its p50 and p10 come from the
//!   latency histogram (native, else the classic buckets) and it is slow
//!   when both are above [`SLOW_RATIO`] times its class's median;
//! - a **host** is the address without its port: the `instance` label of
//!   its exporter and the `target` label its peers probe it under name the
//!   same host when they differ only in the port (`node7:9427`,
//!   `node7:18515`), as the shipped `prometheus.yml` and pinglist make them;
//! - host sides, the peers' background, loss and rack pairs are computed
//!   as in Rust, per evaluation instead of per round, on the probes whose
//!   counter existed a window ago (a mesh that just started is not
//!   judged on one or two rounds);
//! - where the hardware-timestamp split is served, a slow probe is counted
//!   on the side its moved part names, as in Rust (the per-probe medians
//!   of the three `ibprobe_hw_*_seconds` histograms against their class
//!   medians);
//! - the alert says which side is bad (`prober`, `target`, `both`); host
//!   vs NIC is evidence in its description (the host's own wake-up p99
//!   against the mesh's median and [`SELF_RATIO`]), not a label, since a
//!   label that changed with a noisy reading would restart its `for:`;
//!   dead vs link and the single-path suspect are not told apart; the
//!   host's HCA port error events are evidence too, as in Rust;
//! - a rack pair is judged over both directions but PromQL cannot order
//!   two label values, so a pair fires once per direction whose own cross
//!   probes are bad (`source_rack`, `target_rack`): a fault both ways gives
//!   two alerts for one pair;
//! - naming: an alert fires once its accusation has held for
//!   [`CONFIRM_ROUNDS`] probe intervals (`for:`); loss waits as long as
//!   slowness (the Rust localizer names loss from one round).

use super::{
    CONFIRM_ROUNDS, HW_PART_RATIO, LOSS_BACKGROUND_FACTOR, LOSS_FLOOR, MIN_OBS, MIN_PEERS,
    PEER_BACKGROUND_MAX, RACK_INSIDE_MAX, RACK_PAIR_FRAC, RACK_PAIR_MIN, RACK_PAIR_PROBERS,
    SELF_RATIO, SIDE_FRAC, SLOW_RATIO,
};
use std::fmt::Write as _;
use std::time::Duration;

/// The range of every `rate`/`increase` of the rules: the shortest that
/// holds 4 scrapes at the shipped 15 s scrape interval (what `rate`
/// needs to be steady). A fault shows in the p50 once it covers half of
/// the window and in the p10 once it covers 90% of it: about 55 s after it
/// starts with 1m, 4.5 minutes with 5m.
pub const WINDOW: &str = "1m";

/// Where the alerts' runbook sections are (the repository's base URL is
/// replaced by the operator, see the alerts file's header).
const RUNBOOK: &str = "https://example.invalid/ibtools/blob/main/deploy/prometheus/RUNBOOK.md";

/// The labels of every probe-level series.
const PROBE_LABELS: &str = "class, prober_host, source_rack, target_host, target_rack";

/// The address of a label without its port, as a label_replace regex:
/// `node7:9427` -> `node7`, `[fe80::1]:18515` -> `[fe80::1]`.
const HOST_RE: &str = "(.+?)(?::[0-9]+)?";

/// `for:` of both alerts: [`CONFIRM_ROUNDS`] probe intervals.
pub fn confirm_for(interval: Duration) -> String {
    dur(interval * CONFIRM_ROUNDS as u32)
}

/// A duration as Prometheus writes it (`20s`, `1500ms`).
fn dur(d: Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// A number as PromQL and YAML read it (`0.5`, `4`, `1.5`).
fn num(v: f64) -> String {
    format!("{v}")
}

/// One side's sum by host: `agg` (sum, count) of `metric` by the host of
/// the prober and by the host of the target, as `{host, side}` series.
fn by_side(agg: &str, metric: &str) -> String {
    by_sides(agg, metric, metric)
}

/// As [`by_side`], with what counts on each side per probe: `as_prober`
/// by the prober's host, `as_target` by the target's.
fn by_sides(agg: &str, as_prober: &str, as_target: &str) -> String {
    let one = |side: &str, key: &str, metric: &str| {
        format!(
            "label_replace(sum by (host) (label_replace({agg} by ({key}) ({metric}), \"host\", \"$1\", \"{key}\", \"(.*)\")), \"side\", \"{side}\", \"\", \"\")"
        )
    };
    format!(
        "{}\nor\n{}",
        one("prober", "prober_host", as_prober),
        one("target", "target_host", as_target)
    )
}

/// The peers' background of each side: over the side's probes, the
/// peer's opposite side less this probe (`side_metric` the `{host, side}`
/// sums; per probe, what it counted on the target's side, `as_target`,
/// and on the prober's, `as_prober`).
fn background(side_metric: &str, as_prober: &str, as_target: &str) -> String {
    // As prober: each probe's target, seen as target by everyone.
    // As target: each probe's prober, as prober to everyone.
    let one = |side: &str, key: &str, peer_key: &str, peer_side: &str, probe_metric: &str| {
        format!(
            "label_replace(sum by (host) (label_replace(sum by ({key}) (\n  {probe_metric} * -1\n  + on ({peer_key}) group_left ()\n  sum by ({peer_key}) (label_replace({side_metric}{{side=\"{peer_side}\"}}, \"{peer_key}\", \"$1\", \"host\", \"(.*)\"))\n), \"host\", \"$1\", \"{key}\", \"(.*)\")), \"side\", \"{side}\", \"\", \"\")"
        )
    };
    format!(
        "{}\nor\n{}",
        one("prober", "prober_host", "target_host", "target", as_target),
        one("target", "target_host", "prober_host", "prober", as_prober)
    )
}

/// Both directions of a rack pair: `expr` by (source_rack, target_rack)
/// plus the same with the two racks swapped, summed.
fn both_ways(expr: &str) -> String {
    format!(
        "sum by (source_rack, target_rack) (\n  label_replace({expr}, \"direction\", \"forward\", \"\", \"\")\n  or\n  label_replace(label_replace(label_replace(label_replace({expr}, \"direction\", \"$1\", \"source_rack\", \"(.*)\"), \"source_rack\", \"$1\", \"target_rack\", \"(.*)\"), \"target_rack\", \"$1\", \"direction\", \"(.*)\"), \"direction\", \"reverse\", \"\", \"\")\n)"
    )
}

/// Indents every line of `expr` by `n` spaces (a YAML block scalar).
fn block(expr: &str, n: usize) -> String {
    let pad = " ".repeat(n);
    expr.lines().map(|l| format!("{pad}{l}\n")).collect()
}

/// A recording rule, with a comment above it.
fn record(out: &mut String, why: &str, name: &str, expr: &str) {
    for l in why.lines() {
        let _ = writeln!(out, "      # {l}");
    }
    let _ = writeln!(out, "      - record: {name}");
    let _ = writeln!(out, "        expr: |");
    out.push_str(&block(expr, 10));
}

/// A template reading one `{host, side}` series of the alert's host,
/// formatted by `fmt` (a template pipeline stage), `-` when absent.
fn side_value(metric: &str, side: &str, fmt: &str) -> String {
    format!(
        "{{{{ with printf `{metric}{{host=%q,side=\"{side}\"}}` $labels.host | query }}}}{{{{ . | first | value | {fmt} }}}}{{{{ else }}}}-{{{{ end }}}}"
    )
}

/// A template giving the alert host's bad side (`prober`, `target` or
/// `both`) from the suspect record, `-` when absent. The side is an
/// annotation, not a label: as a label it would be part of the alert's
/// identity, and a suspect going from one side to both would become a new
/// alert whose `for` starts again.
fn suspect_side(suspect: &str) -> String {
    format!(
        "{{{{ with printf `{suspect}{{host=%q}}` $labels.host | query }}}}{{{{ . | first | label `side` }}}}{{{{ else }}}}-{{{{ end }}}}"
    )
}

/// A template reading one `{source_rack, target_rack}` series of the
/// alert's pair (or `rack` series of `which` rack).
fn pair_value(metric: &str, fmt: &str) -> String {
    format!(
        "{{{{ with printf `{metric}{{source_rack=%q,target_rack=%q}}` $labels.source_rack $labels.target_rack | query }}}}{{{{ . | first | value | {fmt} }}}}{{{{ else }}}}-{{{{ end }}}}"
    )
}

fn rack_value(metric: &str, which: &str, fmt: &str) -> String {
    format!(
        "{{{{ with printf `{metric}{{rack=%q}}` $labels.{which} | query }}}}{{{{ . | first | value | {fmt} }}}}{{{{ else }}}}-{{{{ end }}}}"
    )
}

const COUNT: &str = "printf \"%.0f\"";
const PCT: &str = "humanizePercentage";

/// The evidence of one side of a host, as a sentence; where the hardware
/// split put slow probes on this side, how many and what moved (as the
/// Rust localizer's evidence says it).
fn side_evidence(side: &str) -> String {
    let part = if side == "prober" {
        "prober"
    } else {
        "responder"
    };
    let hw = format!(
        "{{{{ with printf `host_side:ibexporter_localize_hw_slow:sum{w}{{host=%q,side=\"{side}\"}} > 0` $labels.host | query }}}} (by hardware timestamps, {{{{ . | first | value | {COUNT} }}}} of them: {part} delay {} vs {} class median){{{{ end }}}}",
        side_value(&format!("host_side:ibexporter_localize_hw_part:avg{WINDOW}"), side, "humanizeDuration"),
        side_value(&format!("host_side:ibexporter_localize_hw_median:avg{WINDOW}"), side, "humanizeDuration"),
        w = WINDOW,
    );
    format!(
        "as {side}: {} of {} answered probes slow (each a different peer) while its peers see {} slow with others; {} of messages lost over {} probes while its peers lose {} with others{hw}",
        side_value("host_side:ibexporter_localize_slow:sum1m", side, COUNT),
        side_value("host_side:ibexporter_localize_answered:sum1m", side, COUNT),
        side_value("host_side:ibexporter_localize_background_slow:ratio1m", side, PCT),
        side_value("host_side:ibprobe_probes_lost:ratio1m", side, PCT),
        side_value("host_side:ibexporter_localize_probes:count1m", side, COUNT),
        side_value("host_side:ibexporter_localize_background_lost:ratio1m", side, PCT),
    )
}

/// The host's own wake-up p99 against the mesh's median: above
/// [`SELF_RATIO`] times it the CPU side is slow too (the Rust localizer's
/// `host`), else the NIC (`nic`). Evidence, not a label: a label that
/// changed with a noisy reading would restart the alert's `for:`.
fn wakeup_evidence() -> String {
    let own = format!(
        "{{{{ with printf `{WAKEUP_P99}{{host=%q}}` $labels.host | query }}}}{{{{ . | first | value | humanizeDuration }}}}{{{{ else }}}}unknown{{{{ end }}}}"
    );
    let median = format!(
        "{{{{ with query `{WAKEUP_MEDIAN}` }}}}{{{{ . | first | value | humanizeDuration }}}}{{{{ else }}}}unknown{{{{ end }}}}"
    );
    format!(
        "own wake-up p99 {own} against the mesh's median {median} (above {}x: its CPU side, else its NIC)",
        num(SELF_RATIO),
    )
}

/// The three parts of the hardware-timestamp split (`part` label, the
/// histogram the exporters serve with `[probe] hw_timestamps = true`).
const HW_PARTS: [(&str, &str); 3] = [
    ("prober", "ibprobe_hw_prober_delay_seconds"),
    ("responder", "ibprobe_hw_responder_delay_seconds"),
    ("network", "ibprobe_hw_network_rtt_seconds"),
];

/// The records of the hardware-timestamp split (the Rust localizer's
/// `hw_blame` in PromQL): per probe the median of each part; per class the median of
/// each part over the probes with all three; a slow probe's blame, the
/// moved part (above [`HW_PART_RATIO`] x its class median) with the
/// largest excess (on a tie network, then responder, as Rust's `max_by`
/// keeps the last). Returns the names of: the slow probes as counted on
/// the prober's side and on the target's side (a probe blamed on the other
/// host or the network counts 0 there), the blame (value: the part,
/// seconds; label `part`) and the blamed part's class median.
fn hw_split(out: &mut String, slow: &str, info: &str) -> (String, String, String, String) {
    let w = WINDOW;
    let part = format!("probe:ibprobe_hw_split_seconds:p50_{w}");
    let split = format!("probe:ibexporter_localize_hw_split:{w}");
    let median = format!("class:ibprobe_hw_split_seconds:p50_{w}_median");
    let excess = format!("probe:ibexporter_localize_hw_excess:{w}");
    let blame = format!("probe:ibexporter_localize_hw_blame:{w}");
    let blame_median = format!("probe:ibexporter_localize_hw_blame_median:{w}");
    let parts: Vec<String> = HW_PARTS
        .iter()
        .map(|(name, m)| {
            format!("label_replace(\n  (histogram_quantile(0.5, sum by (instance, target, le) (rate({m}_bucket[{w}]))) >= 0)\n    * on (instance, target) group_left ({PROBE_LABELS})\n  {info},\n\"part\", \"{name}\", \"\", \"\")")
        })
        .collect();
    record(
        out,
        &format!("The hardware-timestamp split of each probe over {w}, where served: the\nmedian of each part (part: prober, responder, network), seconds."),
        &part,
        &parts.join("\nor\n"),
    );
    record(
        out,
        "The probes whose split has all three parts (value: 3).",
        &split,
        &format!("count by (instance, target) ({part}) == 3"),
    );
    record(
        out,
        "The median of each part over the split probes of each class.",
        &median,
        &format!("quantile by (class, part) (0.5, {part} and on (instance, target) {split})"),
    );
    record(
        out,
        &format!("A slow split probe's moved parts (above {} x their class median):\nhow far above it (seconds).", num(HW_PART_RATIO)),
        &excess,
        &format!("({part} - on (class, part) group_left () {median})\n  and ({part} > on (class, part) group_left () ({ratio} * {median}))\n  and on (instance, target) {split}\n  and on (instance, target) ({slow} == 1)", ratio = num(HW_PART_RATIO)),
    );
    let e = |p: &str| format!("{excess}{{part=\"{p}\"}}");
    let beaten = |p: &str, by: &str, op: &str| {
        format!(
            "unless on (instance, target) ({} {op} on (instance, target) {})",
            e(by),
            e(p)
        )
    };
    let winners = [
        ("prober", [("responder", ">="), ("network", ">=")]),
        ("responder", [("prober", ">"), ("network", ">=")]),
        ("network", [("prober", ">"), ("responder", ">")]),
    ]
    .map(|(p, [a, b])| {
        format!(
            "{}\n  {}\n  {}",
            e(p),
            beaten(p, a.0, a.1),
            beaten(p, b.0, b.1)
        )
    });
    record(
        out,
        "The part a slow split probe is blamed on: its moved part with the largest\nexcess (value: the part, seconds).",
        &blame,
        &format!("{part}\n  and on (instance, target, part) (\n{})", block(&winners.join("\nor\n"), 2)),
    );
    record(
        out,
        "The blamed part's class median (seconds), for the evidence.",
        &blame_median,
        &format!("{blame} * 0 + on (class, part) group_left () {median}"),
    );
    let moved_elsewhere = |not: &str| {
        format!("({slow} * 0 and on (instance, target) {blame}{{part!=\"{not}\"}})\nor\n{slow}")
    };
    let as_prober = format!("probe:ibexporter_localize_slow_as_prober:{w}");
    let as_target = format!("probe:ibexporter_localize_slow_as_target:{w}");
    record(
        out,
        "1 when a probe is slow on its prober's side: slow, and not blamed by the\nsplit on the responder or the network.",
        &as_prober,
        &moved_elsewhere("prober"),
    );
    record(
        out,
        "1 when a probe is slow on its target's side: slow, and not blamed by the\nsplit on the prober or the network.",
        &as_target,
        &moved_elsewhere("responder"),
    );
    (as_prober, as_target, blame, blame_median)
}

/// Each host's HCA port error events over the window.
const PORT_ERRORS: &str = "host:ibexporter_hca_port_errors:increase1m";

/// The host's HCA port error events over the window, where its exporter
/// serves port counters: a link or NIC fault counts there, a slow CPU
/// does not.
fn port_errors_evidence() -> String {
    format!(
        "{{{{ with printf `{PORT_ERRORS}{{host=%q}}` $labels.host | query }}}}; its HCA ports counted {{{{ . | first | value | {COUNT} }}}} error events (symbol, receive, link){{{{ end }}}}"
    )
}

/// Each host's worst wake-up p99 (ibexporter's host probe, any CPU).
const WAKEUP_P99: &str = "host:ibprobe_latency_window_seconds:wakeup_p99_max";
/// Its median over the hosts.
const WAKEUP_MEDIAN: &str = "ibexporter:localize_wakeup_p99:median";

/// The rules file for exporters probing every `interval`.
pub fn text(interval: Duration) -> String {
    let w = WINDOW;
    let wait = confirm_for(interval);
    let info = "probe:ibexporter_localize_probe:info";
    let sent = format!("probe:ibprobe_probes:increase{w}");
    let lost = format!("probe:ibprobe_probes_lost:increase{w}");
    let p50 = format!("probe:ibprobe_latency_seconds:p50_{w}");
    let p10 = format!("probe:ibprobe_latency_seconds:p10_{w}");
    let slow = format!("probe:ibexporter_localize_slow:{w}");
    let answered = format!("probe:ibexporter_localize_answered:{w}");
    let threshold = format!("ibexporter:localize_loss_threshold:ratio{w}");
    let bad = format!("probe:ibexporter_localize_bad:{w}");
    let suspect = format!("host:ibexporter_localize_suspect:{w}");
    let clean = format!("probe:ibexporter_localize_unexplained_bad:{w}");
    let hs = |m: &str, op: &str| format!("host_side:{m}:{op}{w}");

    let mut out = String::new();
    let _ = write!(
        out,
        r#"# GENERATED by ibexporter (src/localize/rules.rs) from the localizer's
# constants; do not edit: change the constants and run
#   RULES_UPDATE=1 cargo test -p ibexporter --test localize_rules
# (the test fails while this file differs from what they give).
#
# The localizer (ibexporter/docs/localization.md) in PromQL: which host or
# rack pair makes the mesh's probes slow or lossy, by voting against the
# background the peers see. It reads what the exporters serve: the latency
# histogram, ibprobe_probes_total, the host probe's wake-up window, and the
# racks of the plan (ibexporter_plan{{source_rack}}, ibexporter_plan_peer_rack
# {{target, target_rack}}: targets.plan = "rack-mesh", or any rack labels).
#
# Over a {w} window (the shortest that holds 4 scrapes at 15 s; a fault shows
# in the p10 once it covers 90% of the window), per probe (instance ->
# target, every size merged; judged once its counter existed a window ago): p50 and p10 from ibprobe_latency_seconds
# (native histogram, else the classic buckets), slow when both are above
# {slow_ratio} x the median of its class (same rack, cross rack). Per host
# side (as prober, as target; a host is its address without the port, so
# "node7:9427" and "node7:18515" are the host "node7"): slow when at least
# {min_obs} probes were answered, at least {side_frac} of them (and {min_peers}, distinct
# peers) slow, while the same peers are slow with others in at most
# {peer_bg} of cases; lossy when it has {min_obs} probes and loses at least
# max({loss_floor}, {loss_factor} x the mesh's loss ratio) while its peers lose less.
# IBHostSuspect names a host (label host) with a bad side (annotation side:
# prober, target or both; not a label, so the alert holds as a side joins). Rack pairs: among the cross probes of hosts not suspected, a pair
# whose probes (both directions) are bad (slow, or lossy at least 2
# messages and the loss threshold) at least {rp_min} times, from {rp_probers} probers,
# at least {rp_frac} of them, while each rack's inside probes are bad at most
# {inside_max}: IBRackPairSuspect, once per direction with bad probes.
# Both fire after the accusation held for {confirm} probe intervals of {interval_s}
# (for: {wait}; with another probe.interval set both for: to {confirm} times it).
#
# Where the exporters serve the hardware-timestamp split of a probe
# (ibprobe_hw_{{prober_delay,responder_delay,network_rtt}}_seconds, [probe]
# hw_timestamps = true on NICs that stamp completions), a slow probe counts on
# one side only: the part that moved most above {hw_ratio} x its class's median
# decides (prober delay: the prober's side; responder delay: the target's;
# network: neither, still bad for rack pairs); no part moved: both, as without
# a split. Unverified on hardware (tested on synthetic series).
#
# Host or NIC is evidence, not a label: the description gives the host's own
# wake-up p99 (the host probe) against the mesh's median; above {self_ratio}x its CPU
# side is slow too, else its NIC; and the error events its HCA ports counted
# over the window (symbol, receive, link), where served. What PromQL does not tell (ibexporter
# localize and the simulation do): a dead host from a bad link (a dead
# host fires IBExporterDown and, here, a lossy target side), a single bad
# path, and the ranking by confidence.
#
# Tested: ibexporter/tests/rules.rs (promtool check rules; promtool test
# rules on tests/localize.test.yml) and ibexporter/tests/localize_rules.rs
# (this file and the test file are what the code writes, and the Rust
# localizer names the same suspects on the test's data).
groups:
  - name: ibexporter-localize
    rules:
"#,
        slow_ratio = num(SLOW_RATIO),
        hw_ratio = num(HW_PART_RATIO),
        self_ratio = num(SELF_RATIO),
        min_obs = MIN_OBS,
        side_frac = num(SIDE_FRAC),
        min_peers = MIN_PEERS,
        peer_bg = num(PEER_BACKGROUND_MAX),
        loss_floor = num(LOSS_FLOOR),
        loss_factor = num(LOSS_BACKGROUND_FACTOR),
        rp_min = RACK_PAIR_MIN,
        rp_probers = RACK_PAIR_PROBERS,
        rp_frac = num(RACK_PAIR_FRAC),
        inside_max = num(RACK_INSIDE_MAX),
        confirm = CONFIRM_ROUNDS,
        interval_s = dur(interval),
    );

    // The probes and their racks.
    let base = "(\n      max by (instance, target, target_rack) (ibexporter_plan_peer_rack)\n        * on (instance) group_left (source_rack)\n      max by (instance, source_rack) (ibexporter_plan)\n    )";
    let same = "label_replace(max by (instance, target, target_rack) (ibexporter_plan_peer_rack), \"source_rack\", \"$1\", \"target_rack\", \"(.*)\")";
    record(
        &mut out,
        "Every probe of the mesh with a full window behind it (value 1): its racks,\nits class (inside: same rack, cross), the hosts of prober and target\n(addresses without the port). PromQL compares no two labels: a probe is\ninside when its source_rack matches a copy of it whose source_rack is its\ntarget_rack. A probe is judged once its counter existed a window ago: a\nmesh (or a new peer) that started less than a window ago would be judged\non one or two rounds.",
        info,
        &format!(
            "label_replace(label_replace(\n  label_replace(\n    {base}\n    and on (instance, target, source_rack) {same},\n    \"class\", \"inside\", \"\", \"\")\n  or\n  label_replace(\n    {base}\n    unless on (instance, target, source_rack) {same},\n    \"class\", \"cross\", \"\", \"\"),\n\"prober_host\", \"$1\", \"instance\", \"{HOST_RE}\"), \"target_host\", \"$1\", \"target\", \"{HOST_RE}\")\n  and on (instance, target) sum by (instance, target) (ibprobe_probes_total offset {w})"
        ),
    );
    record(
        &mut out,
        &format!("Messages sent per probe over {w} (probes that sent any)."),
        &sent,
        &format!("(sum by (instance, target) (increase(ibprobe_probes_total[{w}])) > 0)\n  * on (instance, target) group_left ({PROBE_LABELS})\n{info}"),
    );
    record(
        &mut out,
        &format!("Messages lost per probe over {w} (timeout or failed round)."),
        &lost,
        &format!("(\n  {sent} * 0\n  + on (instance, target) group_left ()\n  sum by (instance, target) (increase(ibprobe_probes_total{{result!=\"ok\"}}[{w}]))\n)\nor\n{sent} * 0"),
    );
    for (q, name) in [("0.5", &p50), ("0.1", &p10)] {
        record(
            &mut out,
            &format!("Quantile {q} of each answered probe over {w}: native histogram, else classic buckets."),
            name,
            &format!("(\n  (\n    histogram_quantile({q}, sum by (instance, target) (rate(ibprobe_latency_seconds[{w}])))\n    or\n    histogram_quantile({q}, sum by (instance, target, le) (rate(ibprobe_latency_seconds_bucket[{w}])))\n  ) >= 0\n)\n  * on (instance, target) group_left ({PROBE_LABELS})\n{info}"),
        );
    }
    let med50 = format!("class:ibprobe_latency_seconds:p50_{w}_median");
    let med10 = format!("class:ibprobe_latency_seconds:p10_{w}_median");
    for (m, of) in [(&med50, &p50), (&med10, &p10)] {
        record(
            &mut out,
            "The median of the probes of each class (inside, cross).",
            m,
            &format!("quantile by (class) (0.5, {of})"),
        );
    }
    record(
        &mut out,
        &format!("1 when a probe is slow: p50 and p10 above {} x its class's median; 0\nwhen it is not or nothing was answered.", num(SLOW_RATIO)),
        &slow,
        &format!("(\n  ({p50} > bool on (class) group_left () ({slow_ratio} * {med50}))\n  *\n  ({p10} > bool on (class) group_left () ({slow_ratio} * {med10}))\n)\nor\n{sent} * 0", slow_ratio = num(SLOW_RATIO)),
    );
    record(
        &mut out,
        "1 when a probe got any answer, else 0.",
        &answered,
        &format!("{p50} * 0 + 1\nor\n{sent} * 0"),
    );

    // The hardware-timestamp split, where the exporters serve it.
    let (slow_as_prober, slow_as_target, blame, blame_median) = hw_split(&mut out, &slow, info);
    record(
        &mut out,
        &format!(
            "The loss ratio from which a side is lossy: {} x the mesh's, at least {}.",
            num(LOSS_BACKGROUND_FACTOR),
            num(LOSS_FLOOR)
        ),
        &threshold,
        &format!(
            "clamp_min({} * sum({lost}) / sum({sent}), {})",
            num(LOSS_BACKGROUND_FACTOR),
            num(LOSS_FLOOR)
        ),
    );

    // Host sides.
    for (why, name, agg, of) in [
        (
            "Probes of each host side (side: prober, target).",
            hs("ibexporter_localize_probes", "count"),
            "count",
            &sent,
        ),
        (
            "Answered probes of each host side.",
            hs("ibexporter_localize_answered", "sum"),
            "sum",
            &answered,
        ),
        (
            "Messages sent by each host side's probes.",
            hs("ibprobe_probes", "increase"),
            "sum",
            &sent,
        ),
        (
            "Messages lost by each host side's probes.",
            hs("ibprobe_probes_lost", "increase"),
            "sum",
            &lost,
        ),
    ] {
        record(&mut out, why, &name, &by_side(agg, of));
    }
    record(
        &mut out,
        "Slow probes of each host side: its distinct slow peers (one probe a pair),\nwithout those the hardware split puts on the other host or the network.",
        &hs("ibexporter_localize_slow", "sum"),
        &by_sides("sum", &slow_as_prober, &slow_as_target),
    );
    for (why, name, agg, part) in [
        (
            "Slow probes the hardware split puts on each host side (its own delay moved).",
            hs("ibexporter_localize_hw_slow", "sum"),
            "count",
            &blame,
        ),
        (
            "The mean moved part of those probes (seconds).",
            hs("ibexporter_localize_hw_part", "avg"),
            "avg",
            &blame,
        ),
        (
            "The mean class median of that part over those probes (seconds).",
            hs("ibexporter_localize_hw_median", "avg"),
            "avg",
            &blame_median,
        ),
    ] {
        record(
            &mut out,
            why,
            &name,
            &by_sides(
                agg,
                &format!("{part}{{part=\"prober\"}}"),
                &format!("{part}{{part=\"responder\"}}"),
            ),
        );
    }
    for (what, side_m, as_prober, as_target) in [
        (
            "answered",
            hs("ibexporter_localize_answered", "sum"),
            &answered,
            &answered,
        ),
        (
            "slow",
            hs("ibexporter_localize_slow", "sum"),
            &slow_as_prober,
            &slow_as_target,
        ),
        ("sent", hs("ibprobe_probes", "increase"), &sent, &sent),
        ("lost", hs("ibprobe_probes_lost", "increase"), &lost, &lost),
    ] {
        record(
            &mut out,
            &format!("The peers' background, {what}: over a side's probes, what the peer's\nopposite side counted with everyone else (less this probe)."),
            &hs(&format!("ibexporter_localize_background_{what}"), "sum"),
            &background(&side_m, as_prober, as_target),
        );
    }
    let ratio = |name: String, a: String, b: String| (name, format!("{a} / {b}"));
    for (name, expr) in [
        ratio(
            hs("ibexporter_localize_slow", "ratio"),
            hs("ibexporter_localize_slow", "sum"),
            hs("ibexporter_localize_answered", "sum"),
        ),
        ratio(
            hs("ibexporter_localize_background_slow", "ratio"),
            hs("ibexporter_localize_background_slow", "sum"),
            hs("ibexporter_localize_background_answered", "sum"),
        ),
        ratio(
            hs("ibprobe_probes_lost", "ratio"),
            hs("ibprobe_probes_lost", "increase"),
            hs("ibprobe_probes", "increase"),
        ),
        ratio(
            hs("ibexporter_localize_background_lost", "ratio"),
            hs("ibexporter_localize_background_lost", "sum"),
            hs("ibexporter_localize_background_sent", "sum"),
        ),
    ] {
        record(&mut out, "A share of the sums above.", &name, &expr);
    }
    let lossy = format!("host_side:ibexporter_localize_lossy:{w}");
    let slow_side = format!("host_side:ibexporter_localize_slow:{w}");
    let loss_r = hs("ibprobe_probes_lost", "ratio");
    let bg_loss_r = hs("ibexporter_localize_background_lost", "ratio");
    record(
        &mut out,
        &format!("A lossy side (value: 1 - the peers' loss / its own): at least {MIN_OBS} probes,\nits loss at the threshold, its peers' below."),
        &lossy,
        &format!("(1 - {bg_loss_r} / {loss_r})\n  and ({loss_r} >= on () group_left () {threshold})\n  and ({} >= {MIN_OBS})\n  and ({bg_loss_r} < on () group_left () {threshold})", hs("ibexporter_localize_probes", "count")),
    );
    let slow_r = hs("ibexporter_localize_slow", "ratio");
    let bg_slow_r = hs("ibexporter_localize_background_slow", "ratio");
    record(
        &mut out,
        &format!("A slow side that is not lossy (value: its slow share - its peers'):\nat least {MIN_OBS} answered, {MIN_PEERS} slow and {} of them, peers slow at most {}.", num(SIDE_FRAC), num(PEER_BACKGROUND_MAX)),
        &slow_side,
        &format!("(({slow_r} - {bg_slow_r})\n  and ({} >= {MIN_OBS})\n  and ({} >= {MIN_PEERS})\n  and ({slow_r} >= {})\n  and ({bg_slow_r} <= {}))\nunless {lossy}", hs("ibexporter_localize_answered", "sum"), hs("ibexporter_localize_slow", "sum"), num(SIDE_FRAC), num(PEER_BACKGROUND_MAX)),
    );
    let bad_side = format!("host_side:ibexporter_localize_bad:{w}");
    record(
        &mut out,
        "Every bad side, with its cause (lossy, slow).",
        &bad_side,
        &format!("label_replace({lossy}, \"cause\", \"lossy\", \"\", \"\")\nor\nlabel_replace({slow_side}, \"cause\", \"slow\", \"\", \"\")"),
    );
    record(
        &mut out,
        "The host suspects (side: prober, target or both; value: the larger strength).",
        &suspect,
        &format!("label_replace(max by (host) ({bad_side}) and on (host) (count by (host) ({bad_side}) >= 2), \"side\", \"both\", \"\", \"\")\nor\n(max by (host, side) ({bad_side}) and on (host) (count by (host) ({bad_side}) == 1))"),
    );

    record(
        &mut out,
        "Each host's worst own wake-up p99 (the host probe), the evidence\nthat tells its CPU side from its NIC.",
        WAKEUP_P99,
        &format!("max by (host) (label_replace(ibprobe_latency_window_seconds{{transport=\"host\",op=\"wakeup\",quantile=\"0.99\"}}, \"host\", \"$1\", \"instance\", \"{HOST_RE}\"))"),
    );
    record(
        &mut out,
        "Its median over the hosts.",
        WAKEUP_MEDIAN,
        &format!("quantile(0.5, {WAKEUP_P99})"),
    );
    record(
        &mut out,
        &format!("Each host's HCA port error events over {w} (symbol, receive, link\ncounters summed over its ports), the evidence for a link or NIC."),
        PORT_ERRORS,
        &format!(
            "sum by (host) (label_replace(\n  {},\n\"host\", \"$1\", \"instance\", \"{HOST_RE}\"))",
            super::port_errors_increase(w, "
  or ")
        ),
    );

    // Rack pairs.
    record(
        &mut out,
        "1 when a probe is bad (slow, or at least 2 messages lost and the loss\nthreshold), 0 when not.",
        &bad,
        &format!("clamp_max(\n  {slow}\n  +\n  (\n    ({lost} >= bool 2)\n    *\n    ({lost} / {sent} >= bool on () group_left () {threshold})\n  ),\n1)"),
    );
    record(
        &mut out,
        "The same, for the probes that involve no host suspect.",
        &clean,
        &format!("{bad}\n  unless on (prober_host) label_replace({suspect}, \"prober_host\", \"$1\", \"host\", \"(.*)\")\n  unless on (target_host) label_replace({suspect}, \"target_host\", \"$1\", \"host\", \"(.*)\")"),
    );
    let inside = format!("rack:ibexporter_localize_inside_bad:ratio{w}");
    record(
        &mut out,
        "Each rack's share of bad inside probes.",
        &inside,
        &format!("sum by (rack) (label_replace(\n  sum by (source_rack) ({clean}{{class=\"inside\"}}) / count by (source_rack) ({clean}{{class=\"inside\"}}),\n\"rack\", \"$1\", \"source_rack\", \"(.*)\"))"),
    );
    let cross_n = format!("rack_pair:ibexporter_localize_cross_probes:count{w}");
    let cross_bad = format!("rack_pair:ibexporter_localize_cross_bad:sum{w}");
    let cross_probers = format!("rack_pair:ibexporter_localize_bad_probers:count{w}");
    record(
        &mut out,
        "Cross probes of each direction of a rack pair.",
        &cross_n,
        &format!("count by (source_rack, target_rack) ({clean}{{class=\"cross\"}})"),
    );
    record(
        &mut out,
        "Bad cross probes of each direction.",
        &cross_bad,
        &format!("sum by (source_rack, target_rack) ({clean}{{class=\"cross\"}})"),
    );
    record(
        &mut out,
        "Distinct probers with a bad cross probe, each direction.",
        &cross_probers,
        &format!("count by (source_rack, target_rack) (count by (source_rack, target_rack, instance) ({clean}{{class=\"cross\"}} == 1))"),
    );
    let both = |m: &str| format!("{m}_both_ways");
    for m in [&cross_n, &cross_bad, &cross_probers] {
        record(
            &mut out,
            "The same over both directions of the pair (A -> B and B -> A).",
            &both(m),
            &both_ways(m),
        );
    }
    let pair_ratio = format!("rack_pair:ibexporter_localize_cross_bad:ratio{w}");
    record(
        &mut out,
        "The pair's share of bad cross probes, both directions.",
        &pair_ratio,
        &format!("{} / {}", both(&cross_bad), both(&cross_n)),
    );
    let pair_inside = format!("rack_pair:ibexporter_localize_inside_bad:max_ratio{w}");
    let end = |which: &str| {
        format!("({} * 0 + on ({which}) group_left () sum by ({which}) (label_replace({inside}, \"{which}\", \"$1\", \"rack\", \"(.*)\")))", both(&cross_n))
    };
    record(
        &mut out,
        "The larger of the two racks' inside shares.",
        &pair_inside,
        &format!(
            "({a} > {b})\nor\n{b}",
            a = end("source_rack"),
            b = end("target_rack")
        ),
    );

    // The alerts, in the same group: a group's rules run in order, so they
    // read this evaluation's records (two groups run apart, an alert then
    // reads the records of an evaluation before, or not, by chance).
    let _ = write!(
        out,
        r#"
      - alert: IBHostSuspect
        expr: max by (host) ({suspect})
        for: {wait}
        labels:
          severity: warning
        annotations:
          side: "{side}"
          summary: "{{{{ $labels.host }}}} makes the mesh's probes bad (as {side}) while its peers are fine with others"
          description: >-
            {prober}; {target}; {wakeup}{errors}. Held for {wait} ({confirm} probe intervals), over {w}.
          runbook_url: {RUNBOOK}#ibhostsuspect

      - alert: IBRackPairSuspect
        expr: |
{pair_expr}        for: {wait}
        labels:
          severity: warning
        annotations:
          summary: "The path between racks {{{{ $labels.source_rack }}}} and {{{{ $labels.target_rack }}}} is slow or lossy while both racks are fine inside"
          description: >-
            {bad_n} of {all_n} cross probes between racks {{{{ $labels.source_rack }}}} and {{{{ $labels.target_rack }}}}
            (both directions, hosts not suspected) are bad ({share}), from {probers} probers, while
            {inside_a} of rack {{{{ $labels.source_rack }}}}'s and {inside_b} of rack {{{{ $labels.target_rack }}}}'s
            inside probes are. Held for {wait} ({confirm} probe intervals), over {w}.
          runbook_url: {RUNBOOK}#ibrackpairsuspect
"#,
        side = suspect_side(&suspect),
        prober = side_evidence("prober"),
        wakeup = wakeup_evidence(),
        errors = port_errors_evidence(),
        target = side_evidence("target"),
        confirm = CONFIRM_ROUNDS,
        pair_expr = block(
            &format!(
                "({pair_ratio} - {pair_inside})\n  and ({} >= {RACK_PAIR_MIN})\n  and ({} >= {RACK_PAIR_PROBERS})\n  and ({pair_ratio} >= {})\n  and ({pair_inside} <= {})\n  and ({cross_bad} > 0)",
                both(&cross_bad),
                both(&cross_probers),
                num(RACK_PAIR_FRAC),
                num(RACK_INSIDE_MAX)
            ),
            10
        ),
        bad_n = pair_value(&both(&cross_bad), COUNT),
        all_n = pair_value(&both(&cross_n), COUNT),
        share = pair_value(&pair_ratio, PCT),
        probers = pair_value(&both(&cross_probers), COUNT),
        inside_a = rack_value(&inside, "source_rack", PCT),
        inside_b = rack_value(&inside, "target_rack", PCT),
    );
    out
}
