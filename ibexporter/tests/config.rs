//! The exporter config: the example parses, the defaults, and every
//! refusal is one line with file:line:col and the key.

use ibexporter::collect::tuning::TuningConfig;
use ibexporter::config::{
    self, format_duration, parse_duration, CpuSelection, Op, Poll, Transport,
};
use proptest::prelude::*;
use std::path::PathBuf;
use std::time::Duration;

fn example_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/ibexporter.toml")
}

#[test]
fn example_file_parses() {
    let c = config::load(example_path()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.listen, "0.0.0.0:9427".parse().unwrap());
    assert_eq!(c.source, "hostA");
    assert_eq!(c.web_config, None);
    assert_eq!(c.probe.interval, Duration::from_secs(10));
    assert_eq!(c.probe.timeout, Duration::from_secs(1));
    assert_eq!(c.probe.poll, Poll::Event);
    assert_eq!(c.probe.window, Duration::from_secs(300));
    assert_eq!(c.probe.rate_hz, 1000.0);
    assert_eq!(c.budget.max_interval, Duration::from_secs(300));
    assert_eq!(c.targets.static_targets.len(), 2);
    let s0 = &c.targets.static_targets[0];
    assert_eq!(s0.host, "10.0.0.2");
    assert_eq!(s0.port, 18515);
    assert_eq!(s0.probe.transport, Transport::Udp);
    assert_eq!(s0.probe.op, Op::Send);
    assert_eq!(s0.probe.sizes, vec![32, 4096]);
    assert_eq!(s0.labels.get("rack").map(String::as_str), Some("r1"));
    let s1 = &c.targets.static_targets[1];
    assert_eq!(s1.probe.transport, Transport::Rc);
    assert_eq!(s1.probe.sizes, vec![32]);
    assert_eq!(c.targets.file_sd.len(), 1);
    assert_eq!(c.targets.file_sd[0].refresh, Duration::from_secs(30));
    assert_eq!(
        c.targets.file_sd[0]
            .labels
            .get("pinglist")
            .map(String::as_str),
        Some("main")
    );
    assert_eq!(c.targets.dns[0].name, "ibexporter.rdma.svc.cluster.local");
    assert_eq!(c.cardinality.max_peer_series, 200);
    assert_eq!(c.cardinality.group_label, "rack");
    assert_eq!(c.targets.plan, ibexporter::config::PlanConfig::default());
    let p = config::parse(
        "[targets]\nplan = \"rack-mesh\"\nplan_rack_label = \"row\"\nplan_rack_peers = 3\n",
        "t.toml",
    )
    .unwrap();
    assert_eq!(
        p.targets.plan.choice,
        ibexporter::config::PlanChoice::RackMesh
    );
    assert_eq!(p.targets.plan.rack_label, "row");
    assert_eq!(p.targets.plan.rack_peers, 3);
    assert_eq!(
        c.tuning.profile,
        Some(PathBuf::from("/etc/ibtune/latency.toml"))
    );
    let t = TuningConfig::from_settings(&c.tuning).expect("profile set");
    assert_eq!(t.min_interval, Duration::from_secs(10));
}

/// Every key of the example is documented by a comment just above it
/// (or on a section header), so the file is the reference.
#[test]
fn example_has_a_comment_for_every_section() {
    let text = std::fs::read_to_string(example_path()).unwrap();
    for section in [
        "[local]",
        "[probe]",
        "[budget]",
        "[responder]",
        "[targets]",
        "[[targets.static]]",
        "[[targets.file_sd]]",
        "[[targets.dns]]",
        "[cardinality]",
        "[tuning]",
    ] {
        assert!(text.contains(section), "{section} missing");
    }
    let lines: Vec<&str> = text.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        let l = l.trim();
        if l.is_empty() || l.starts_with('#') || l.starts_with('[') {
            continue;
        }
        // A key line: within the last 12 lines there is a comment.
        let lo = i.saturating_sub(12);
        assert!(
            lines[lo..i].iter().any(|p| p.trim_start().starts_with('#')),
            "line {}: {l:?} has no comment above it",
            i + 1
        );
    }
}

#[test]
fn default_is_the_built_in() {
    let c = config::Config::default();
    assert_eq!(c.listen.to_string(), ibexporter::DEFAULT_LISTEN);
    assert!(!c.source.is_empty());
    assert!(c.local.hca_loopback);
    assert_eq!(c.local.reference, vec![Transport::Shm, Transport::Udp]);
    assert!(c.local.host_wakeup);
    assert_eq!(c.local.wakeup_cpus, CpuSelection::All);
    assert_eq!(c.probe.interval, Duration::from_secs(10));
    assert_eq!(c.probe.probes_per_interval, 100);
    assert_eq!(c.probe.timeout, Duration::from_secs(1));
    assert_eq!(c.probe.poll, Poll::Event);
    assert_eq!(c.probe.sizes, vec![32]);
    assert_eq!(c.probe.transport, Transport::Rc);
    assert_eq!(c.probe.op, Op::Send);
    assert_eq!(c.budget.max_core_fraction, 0.01);
    assert_eq!(c.budget.min_interval, Duration::from_secs(10));
    assert!(c.responder.enabled);
    assert_eq!(c.responder.bind.to_string(), "0.0.0.0:18515");
    assert!(!c.responder.bind_given && c.secret_file.is_none());
    // The responder follows listen's address unless bind is given.
    let l = config::parse("listen = \"127.0.0.1:9427\"\n", "x.toml").unwrap();
    assert_eq!(l.responder.bind.to_string(), "127.0.0.1:18515");
    let b = "listen = \"127.0.0.1:9427\"\n[responder]\nbind = \"0.0.0.0:18600\"\n";
    let b = config::parse(b, "x.toml").unwrap();
    assert_eq!(b.responder.bind.to_string(), "0.0.0.0:18600");
    assert!(b.responder.bind_given);
    assert!(c.targets.skip_self);
    assert!(c.targets.static_targets.is_empty());
    assert!(c.targets.file_sd.is_empty() && c.targets.dns.is_empty());
    assert_eq!(c.tuning.profile, None);
    assert!(TuningConfig::from_settings(&c.tuning).is_none());
    // An empty file is the default.
    assert_eq!(config::parse("", "x.toml").unwrap(), c);
}

#[test]
fn missing_file_names_it() {
    let e = config::load("/nonexistent/ibexporter.toml").unwrap_err();
    let s = e.to_string();
    assert!(s.starts_with("/nonexistent/ibexporter.toml: "), "{s}");
    assert!(s.contains("cannot read"), "{s}");
    assert!(!s.contains('\n'));
}

#[test]
fn short_interval_shrinks_default_timeout() {
    let c = config::parse(
        "[probe]\ninterval = \"1s\"\nprobes_per_interval = 10\n",
        "x.toml",
    )
    .unwrap();
    assert_eq!(c.probe.timeout, Duration::from_millis(500));
    assert_eq!(c.budget.min_interval, Duration::from_secs(1));
}

#[test]
fn cpulist_and_udp_op_inherit() {
    let c = config::parse(
        "[local]\nwakeup_cpus = \"4-5, 2\"\n[probe]\nop = \"write\"\n[[targets.static]]\nhost = \"10.0.0.9\"\ntransport = \"udp\"\nsizes = [8]\n",
        "x.toml",
    )
    .unwrap();
    assert_eq!(c.local.wakeup_cpus, CpuSelection::List(vec![2, 4, 5]));
    // udp does not inherit the verbs op.
    assert_eq!(c.targets.static_targets[0].probe.op, Op::Send);
}

/// (toml, line, col, key, words the message must contain)
const BAD: &[(&str, usize, usize, &str, &str)] = &[
    ("[probe]\npoll = \"evnt\"\n", 2, 8, "probe.poll", "use busy or event"),
    ("[probe]\nsizes = [32, 0]\n", 2, 14, "probe.sizes[1]", "1..="),
    ("[probe]\ntransport = \"udp\"\nsizes = [4]\n", 3, 10, "probe.sizes[0]", "8..=65507"),
    ("[probe]\nsizes = [70000]\ntransport = \"udp\"\n", 2, 10, "probe.sizes[0]", "8..=65507"),
    ("[probe]\nsizes = []\n", 2, 9, "probe.sizes", "at least one"),
    ("[probe]\ninterval = \"0s\"\n", 2, 12, "probe.interval", "longer than zero"),
    ("[probe]\ninterval = \"10s\"\ntimeout = \"10s\"\n", 3, 11, "probe.timeout", "shorter than probe.interval"),
    ("[probe]\ninterval = \"10\"\n", 2, 12, "probe.interval", "10 what?"),
    ("[probe]\nwindow = \"5 minutes\"\n", 2, 10, "probe.window", "unit"),
    ("[probe]\nprobes_per_interval = 20000\n", 2, 23, "probe.probes_per_interval", "round"),
    ("[budget]\nmax_core_fraction = 1.5\n", 2, 21, "budget.max_core_fraction", "(0, 1]"),
    ("[budget]\nmax_core_fraction = 0.0\n", 2, 21, "budget.max_core_fraction", "(0, 1]"),
    ("[local]\nwakeup_cpus = \"3-1\"\n", 2, 15, "local.wakeup_cpus", "backwards"),
    ("[local]\nwakeup_cpus = \"2,x\"\n", 2, 15, "local.wakeup_cpus", "not a CPU"),
    ("[local]\nreference = [\"shm\", \"tcp\"]\n", 2, 21, "local.reference[1]", "use shm or udp"),
    (
        "[[targets.static]]\nhost = \"10.0.0.2\"\n\n[[targets.static]]\nhost = \"10.0.0.2\"\nport = 18515\n",
        5, 8, "targets.static[1].host", "duplicate of targets.static[0] (line 2)",
    ),
    ("[[targets.static]]\nhost = \"10.0.0.2\"\ntransport = \"tcp\"\n", 3, 13, "targets.static[0].transport", "use rc, uc, ud or udp"),
    ("[[targets.static]]\nhost = \"10.0.0.2\"\nop = \"read\"\n", 3, 6, "targets.static[0].op", "use send, send-imm"),
    ("[[targets.static]]\nhost = \"10.0.0.2\"\nport = 70000\n", 3, 8, "targets.static[0].port", "1..=65535"),
    ("[[targets.static]]\nhost = \"10.0.0.2\"\nport = 0\n", 3, 8, "targets.static[0].port", "1..=65535"),
    ("[[targets.static]]\nhost = \"10.0.0.2\"\ntransport = \"ud\"\nop = \"write\"\n", 4, 6, "targets.static[0].op", "UD has no RDMA writes"),
    ("[probe]\nop = \"write-imm\"\n[[targets.static]]\nhost = \"10.0.0.2\"\ntransport = \"ud\"\n", 5, 13, "targets.static[0].transport", "inherited from probe.op"),
    ("[probe]\ntransport = \"ud\"\nop = \"write\"\n", 3, 6, "probe.op", "UD has no RDMA writes"),
    ("[[targets.static]]\nhost = \"bad host!\"\n", 2, 8, "targets.static[0].host", "not an IP address or host name"),
    ("[[targets.static]]\nhost = \"10.0.0.2\"\nlabels = { target = \"x\" }\n", 3, 12, "targets.static[0].labels.target", "sets this label itself"),
    ("[[targets.dns]]\nname = \"10.0.0.1\"\n", 2, 8, "targets.dns[0].name", "not a DNS name"),
    ("[[targets.file_sd]]\npath = \"/p.json\"\nrefresh = \"0ms\"\n", 3, 11, "targets.file_sd[0].refresh", "longer than zero"),
    ("listen = \"localhost:9427\"\n", 1, 10, "listen", "IP:port"),
    ("[responder]\nbind = \"0.0.0.0\"\n", 2, 8, "responder.bind", "IP:port"),
    ("[cardinality]\ngroup_label = \"9rack\"\n", 2, 15, "cardinality.group_label", "not a Prometheus label name"),
    ("[probe]\nbogus = 1\n", 2, 1, "probe", "bogus"),
    ("[probe]\nprobes_per_interval = \"a\"\n", 2, 23, "probe.probes_per_interval", "invalid type"),
    ("[budget]\nmin_interval = \"1m\"\n", 2, 16, "budget.min_interval", "longer than probe.interval"),
    ("[targets]\nplan = \"ring\"\n", 2, 8, "targets.plan", "use auto, full or rack-mesh"),
    ("[targets]\nplan_rack_peers = 0\n", 2, 19, "targets.plan_rack_peers", "1..=64"),
    ("[targets]\nplan_rack_label = \"__rack\"\n", 2, 19, "targets.plan_rack_label", "reserved"),
];

#[test]
fn bad_inputs_are_one_line_with_position_and_key() {
    for (text, line, col, key, words) in BAD {
        let e = match config::parse(text, "ibexporter.toml") {
            Ok(_) => panic!("accepted:\n{text}"),
            Err(e) => e,
        };
        let s = e.to_string();
        assert!(!s.contains('\n'), "more than one line: {s}");
        assert!(!s.contains("serde"), "internal names leak: {s}");
        let prefix = format!("ibexporter.toml:{line}:{col}: ");
        assert!(
            s.starts_with(&prefix),
            "want {prefix}... got: {s}\nfor:\n{text}"
        );
        assert!(s.contains(key), "key {key} missing: {s}");
        assert!(s.contains(words), "{words:?} missing: {s}");
        assert_eq!(e.pos, Some((*line, *col)), "{s}");
        assert!(
            e.key.as_deref().is_some_and(|k| k.starts_with(key)),
            "key field {:?} for {s}",
            e.key
        );
    }
}

#[test]
fn the_documented_example_message() {
    let text = "listen = \"0.0.0.0:9427\"\n\n[probe]\npoll = \"evnt\"\n";
    let e = config::parse(text, "ibexporter.toml").unwrap_err();
    assert_eq!(
        e.to_string(),
        "ibexporter.toml:4:8: probe.poll = \"evnt\": unknown polling mode; use busy or event"
    );
}

#[test]
fn toml_syntax_error_has_position() {
    let e = config::parse("[probe\ninterval = \"1s\"\n", "c.toml").unwrap_err();
    let s = e.to_string();
    assert!(s.starts_with("c.toml:1:"), "{s}");
    assert!(!s.contains('\n'), "{s}");
}

#[test]
fn durations() {
    assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
    assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
    assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
    assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
    assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
    assert_eq!(parse_duration(" 2us "), Ok(Duration::from_micros(2)));
    assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
    for bad in ["", "s", "10", "1.5s", "-1s", "10 s", "1sec", "10s5"] {
        assert!(parse_duration(bad).is_err(), "{bad:?} accepted");
    }
    assert!(parse_duration("99999999999999999999999h").is_err());
    assert_eq!(format_duration(Duration::from_secs(5400)), "1h30m");
    assert_eq!(format_duration(Duration::from_millis(250)), "250ms");
    assert_eq!(format_duration(Duration::ZERO), "0s");
}

proptest! {
    #[test]
    fn duration_round_trip(secs in 0u64..10_000_000_000, nanos in 0u32..1_000_000_000) {
        let d = Duration::new(secs, nanos);
        let s = format_duration(d);
        prop_assert_eq!(parse_duration(&s), Ok(d), "{}", s);
    }

    #[test]
    fn duration_single_unit(n in 0u64..1_000_000, unit in prop::sample::select(vec![
        ("ns", 1u64), ("us", 1_000), ("ms", 1_000_000), ("s", 1_000_000_000),
        ("m", 60_000_000_000), ("h", 3_600_000_000_000),
    ])) {
        let d = parse_duration(&format!("{n}{}", unit.0)).unwrap();
        prop_assert_eq!(d.as_nanos(), n as u128 * unit.1 as u128);
    }
}

#[test]
fn perf_counters_is_off_unless_set() {
    assert!(!config::parse("", "x.toml").unwrap().probe.perf_counters);
    assert!(!config::load(example_path()).unwrap().probe.perf_counters);
    let c = config::parse("[probe]\nperf_counters = true\n", "x.toml").unwrap();
    assert!(c.probe.perf_counters);
    let e = config::parse("[probe]\nperf_counters = 1\n", "x.toml").unwrap_err();
    assert!(e.to_string().contains("perf_counters"), "{e}");
}

#[test]
fn hw_timestamps_is_off_unless_set_and_a_bool() {
    assert!(!config::parse("", "x.toml").unwrap().probe.hw_timestamps);
    assert!(!config::load(example_path()).unwrap().probe.hw_timestamps);
    let c = config::parse("[probe]\nhw_timestamps = true\n", "x.toml").unwrap();
    assert!(c.probe.hw_timestamps);
    let e = config::parse("[probe]\nhw_timestamps = \"yes\"\n", "x.toml").unwrap_err();
    let s = e.to_string();
    assert!(s.starts_with("x.toml:2:"), "{s}");
    assert!(!s.contains('\n'), "{s}");
}
