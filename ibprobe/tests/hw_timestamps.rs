//! `--hw-timestamps` (issue 19 point 6) where no HCA is needed: every
//! combination that cannot carry hardware completion timestamps is refused
//! before anything opens, with one line and exit 2. The refusal of a
//! device whose completion_timestamp_mask is 0 is in `lab.rs` (rxe0); the
//! conversion and the split are unit-tested in `clock/hca.rs` and
//! `clock/hwts.rs`. Nothing here runs on a ConnectX: `tests/hw/` does.

mod common;

use common::{ibprobe, one_line_exit_2};

#[test]
fn reference_transports_are_refused() {
    for t in ["shm", "udp"] {
        for rt in [false, true] {
            let mut args = vec!["loopback", "--transport", t, "--hw-timestamps", "-n", "10"];
            if rt {
                args.push("--round-trip");
            }
            let (code, out, err) = ibprobe(&args);
            one_line_exit_2(
                code,
                &out,
                &err,
                &[
                    &format!("--hw-timestamps with --transport {t}"),
                    "completion timestamps are taken by an RDMA device",
                    "run without --hw-timestamps",
                ],
            );
        }
    }
    let (code, out, err) = ibprobe(&[
        "loopback",
        "--transport",
        "model",
        "--model",
        "spin",
        "--hw-timestamps",
    ]);
    one_line_exit_2(code, &out, &err, &["--transport model"]);
}

#[test]
fn client_refuses_before_connecting() {
    // Nothing listens on port 1: a refusal that waited for the connection
    // would say "connect" instead.
    let (code, out, err) = ibprobe(&[
        "client",
        "127.0.0.1:1",
        "--transport",
        "udp",
        "--hw-timestamps",
    ]);
    one_line_exit_2(code, &out, &err, &["--hw-timestamps with --transport udp"]);
}

#[test]
fn verbs_combinations_without_a_split_are_refused() {
    for (args, want) in [
        (
            &[
                "loopback",
                "--transport",
                "ud",
                "--hw-timestamps",
                "--signal",
                "4",
            ][..],
            "--hw-timestamps with --signal 4: the split needs the send completion of every probe",
        ),
        (
            &[
                "client",
                "127.0.0.1:1",
                "--transport",
                "rc",
                "--hw-timestamps",
                "--signal",
                "auto",
            ][..],
            "--hw-timestamps with --signal auto",
        ),
        (
            &["loopback", "--transport", "rc", "--hw-timestamps"][..],
            "one-way loopback over rc: an RC send completes after the ACK",
        ),
        (
            &[
                "loopback",
                "--transport",
                "uc",
                "--dev",
                "a",
                "--peer-dev",
                "b",
                "--hw-timestamps",
            ][..],
            "--hw-timestamps with --peer-dev: the two devices' clocks differ",
        ),
    ] {
        let (code, out, err) = ibprobe(args);
        one_line_exit_2(code, &out, &err, &[want]);
    }
}

/// A client outcome with known stamps: 100 round trips of 1000..1099 ns on
/// the host; the prober's HCA sees T5 - T2 = 700 ns, the responder T4 - T3
/// = 300 ns; 3 messages lack the responder's report, 2 are invalid (an
/// HCA part longer than the host RTT), 1 lacks T2.
fn split_report() -> ibprobe::report::Report {
    use ibprobe::clock::hca::{Calibration, HcaClock};
    use ibprobe::clock::hwts::{ProberLog, ProberStamp, ResponderReport, ResponderStamp};
    use ibprobe::probe::outcome::Outcome;
    use ibprobe::report::{Mode, Report, ReportContext};
    use ibstats::latency::LatencyHistogram;

    let c = HcaClock::new("mlx5_0", u64::MAX, 1_000_000).unwrap();
    let (mut stamps, mut rs, mut rtt) = (Vec::new(), Vec::new(), LatencyHistogram::new());
    for seq in 0..106u64 {
        let host = 1000 + seq % 100;
        rtt.record(host);
        let t2 = 5_000 + seq * 10_000;
        let t5 = t2
            + if (100..102).contains(&seq) {
                5_000
            } else {
                700
            };
        stamps.push(ProberStamp {
            seq,
            t1_ns: 0,
            t2: (seq != 105).then_some(t2),
            t5: Some(t5),
            t6_ns: host,
        });
        if !(102..105).contains(&seq) {
            let t3 = 77 + seq * 9_000;
            rs.push(ResponderStamp {
                seq,
                t3: Some(t3),
                t4: Some(t3 + 300),
            });
        }
    }
    rs.reverse();
    let log = ProberLog {
        clock: c,
        calibration: Calibration::Measured { drift_ppm: -12.0 },
        stamps,
        overflow: 0,
    };
    let split = log.split_with(&ResponderReport::new(&c, &rs, 0)).unwrap();
    let outcome = Outcome {
        rtt: Some(rtt),
        sent: 106,
        hw: Some(log),
        hw_split: Some(split),
        ..Outcome::default()
    };
    let info = ibprobe::transport::TransportInfo::default();
    let ctx = ReportContext::new(Mode::Client, info, ibprobe::clock::Clock::monotonic(), 32);
    Report::new(&outcome, ctx)
}

#[test]
fn every_format_shows_the_split() {
    use ibprobe::report::Format;
    let r = split_report();
    let json: serde_json::Value = serde_json::from_str(&r.render(Format::Json)).unwrap();
    let dist = |name: &str| {
        json["distributions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {json}"))
            .clone()
    };
    let net = dist("network_rtt");
    assert_eq!(net["count"], 100, "{net}");
    assert_eq!(net["p50_ns"], 400);
    assert_eq!(dist("responder_delay")["max_ns"], 300);
    let pd = dist("prober_delay");
    assert_eq!(
        (pd["min_ns"].as_u64(), pd["max_ns"].as_u64()),
        (Some(300), Some(399))
    );
    let warnings = json["warnings"].to_string();
    for w in [
        "1 answered messages had no send or receive completion timestamp",
        "no timestamps for 3 messages",
        "2 messages had a negative part",
    ] {
        assert!(warnings.contains(w), "{w}: {warnings}");
    }
    let notes = json["notes"].to_string();
    assert!(notes.contains("-12.0 ppm"), "{notes}");
    let csv = r.render(Format::Csv);
    for n in ["network_rtt", "prober_delay", "responder_delay"] {
        assert!(csv.lines().any(|l| l.contains(n)), "{n}: {csv}");
    }
    let table = r.render(Format::Table);
    let md = r.render(Format::Markdown);
    for l in [
        "network RTT (hw)",
        "prober delay (hw)",
        "responder delay (hw)",
    ] {
        assert!(table.contains(l), "{l}: {table}");
        assert!(md.contains(l), "{l}: {md}");
    }
}
