//! `report::threshold`.

use ibprobe::report::threshold::*;

struct Run(Vec<(Metric, f64)>);
impl Measured for Run {
    fn value(&self, m: Metric) -> Option<f64> {
        self.0.iter().find(|(k, _)| *k == m).map(|(_, v)| *v)
    }
}

fn t(s: &str) -> Threshold {
    s.parse().unwrap()
}

#[test]
fn the_documented_examples_parse() {
    assert_eq!(
        (t("p99>20us").metric, t("p99>20us").cmp, t("p99>20us").value),
        (Metric::P99, Cmp::Gt, 20_000.0)
    );
    assert_eq!(t("p999>100us").value, 100_000.0);
    assert_eq!((t("lost>0").metric, t("lost>0").value), (Metric::Lost, 0.0));
    let m = t("msgs_per_sec<1M");
    assert_eq!(
        (m.metric, m.cmp, m.value),
        (Metric::MsgsPerSec, Cmp::Lt, 1e6)
    );
    assert_eq!(t(" p99.9>=1.5ms ").value, 1_500_000.0);
    assert_eq!(t("p99.99<=800ns").metric, Metric::P9999);
    assert_eq!(t("bytes_per_sec<2.5G").value, 2.5e9);
}

#[test]
fn bad_expressions_say_what_to_write() {
    for (bad, says) in [
        ("p99", "no comparison"),
        ("p98>20us", "unknown metric \"p98\""),
        ("p99>20", "has no unit"),
        ("p99>", "no value"),
        ("p99>20parsecs", "unknown unit"),
        ("lost>-1", "not a count"),
        ("msgs_per_sec<fast", "not a count"),
    ] {
        let e = bad.parse::<Threshold>().unwrap_err();
        assert!(e.contains(says), "{bad}: {e}");
        assert!(e.contains(&format!("{bad:?}")), "names the input: {e}");
    }
}

#[test]
fn stream_metrics_are_refused_on_latency_runs() {
    let ts = [t("p99>20us"), t("msgs_per_sec<1M")];
    assert!(check_applicable(&ts, RunKind::Stream).is_ok());
    let e = check_applicable(&ts, RunKind::Latency).unwrap_err();
    assert!(e.contains("msgs_per_sec"), "{e}");
}

#[test]
fn a_threshold_holds_when_its_comparison_is_true() {
    let run = Run(vec![(Metric::P99, 23_100.0), (Metric::Lost, 0.0)]);
    let f = FailIf::check(&[t("p99>20us"), t("lost>0"), t("p50<1us")], &run);
    assert!(f.failed());
    // p50 was not measured: counted as holding (no pass without data).
    assert_eq!(f.violated(), ["p99>20us", "p50<1us"]);
    assert_eq!(f.csv_cell(), "p99>20us;p50<1us");
    let j = f.json();
    assert_eq!(j["failed"], true);
    assert_eq!(j["thresholds"][0]["measured"], 23_100.0);
    assert_eq!(j["thresholds"][1]["holds"], false);
    let lines = f.lines();
    assert_eq!(
        lines[0],
        "fail-if p99>20us: p99 = 23.100 us (is > 20.000 us): FAILED"
    );
    assert!(lines.last().unwrap().contains("2 of 3"), "{lines:?}");

    let ok = FailIf::check(&[t("p99>30us"), t("lost>0")], &run);
    assert!(!ok.failed());
    assert_eq!(ok.csv_cell(), "");
    assert!(ok.lines().last().unwrap().starts_with("fail-if: passed"));
}

#[test]
fn boundaries_follow_the_operator() {
    let run = Run(vec![(Metric::P99, 20_000.0)]);
    let holds = |e: &str| FailIf::check(&[t(e)], &run).failed();
    assert!(!holds("p99>20us"));
    assert!(holds("p99>=20us"));
    assert!(!holds("p99<20us"));
    assert!(holds("p99<=20us"));
}
