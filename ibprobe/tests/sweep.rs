//! `ibprobe sweep` end to end over the reference transports (shm, udp):
//! the grid has one result per size x rate cell in every format, the
//! heatmap is written, and bad lists are refused with exit 2 and one line
//! before anything runs.

mod common;

use common::{ibprobe, one_line_exit_2};

fn sweep_ok(args: &[&str]) -> String {
    let mut a = vec!["sweep", "--no-mlock", "--warmup", "20"];
    a.extend_from_slice(args);
    let (code, out, err) = ibprobe(&a);
    assert_eq!(code, 0, "{a:?}: stderr {err}");
    assert_eq!(err, "", "{a:?}: the progress bar is hidden off a terminal");
    out
}

#[test]
fn a_3x2_grid_gives_6_csv_rows_with_their_sizes_rates_and_counts() {
    for transport in ["shm", "udp"] {
        let out = sweep_ok(&[
            "--transport",
            transport,
            "--sizes",
            "8,64,512",
            "--rates",
            "0,20k",
            "--count",
            "300",
            "--format",
            "csv",
        ]);
        let mut lines = out.lines();
        let header: Vec<&str> = lines.next().expect("header").split(',').collect();
        assert_eq!(
            header,
            [
                "transport",
                "bytes",
                "rate_hz",
                "count",
                "min_ns",
                "p50_ns",
                "p90_ns",
                "p99_ns",
                "p999_ns",
                "max_ns",
                "mean_ns",
                "stdev_ns",
                "steps",
                "missed_steps",
                "sent",
                "lost",
                "context_switches",
                "involuntary_context_switches",
                "cpu_migrations",
                "page_faults_minor",
                "page_faults_major",
                "cycles",
                "instructions",
                "cache_misses",
                "interrupts",
                "smis"
            ]
        );
        let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
        let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
        assert_eq!(rows.len(), 6, "{out}");
        let cells: Vec<(&str, &str)> = rows
            .iter()
            .map(|r| (r[col("bytes")], r[col("rate_hz")]))
            .collect();
        assert_eq!(
            cells,
            [
                ("8", "0"),
                ("8", "20000"),
                ("64", "0"),
                ("64", "20000"),
                ("512", "0"),
                ("512", "20000")
            ]
        );
        for r in &rows {
            assert_eq!(r[col("transport")], transport);
            assert_eq!(r.len(), header.len());
            let n = |c: &str| r[col(c)].parse::<f64>().unwrap();
            // UDP over loopback may drop; every arrival is a sample.
            assert_eq!(n("count") + n("lost"), 300.0, "{r:?}");
            assert_eq!(n("sent"), 300.0);
            assert!(n("min_ns") <= n("p50_ns") && n("p50_ns") <= n("p99_ns"));
            assert!(n("p99_ns") <= n("p999_ns") && n("p999_ns") <= n("max_ns"));
            if r[col("rate_hz")] == "0" {
                assert_eq!((n("steps"), n("missed_steps")), (0.0, 0.0));
            } else {
                assert_eq!(n("steps"), 300.0 + n("missed_steps"), "{r:?}");
            }
        }
    }
}

#[test]
fn json_is_one_sweep_document_with_a_report_per_cell() {
    let out = sweep_ok(&[
        "-t", "udp", "--sizes", "8..32", "--rates", "0", "-n", "200", "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("valid JSON");
    assert_eq!(v["schema"], "ibprobe.sweep/1");
    assert_eq!(v["transport"], "udp");
    assert_eq!(v["sizes"], serde_json::json!([8, 16, 32]));
    assert_eq!(v["rates_hz"], serde_json::json!([0.0]));
    assert_eq!(v["length"]["count"], 200);
    assert_eq!(v["interrupted"], false);
    let cells = v["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), 3);
    for (c, size) in cells.iter().zip([8, 16, 32]) {
        assert_eq!(c["size"], size);
        assert_eq!(c["rate_hz"], 0.0);
        let r = &c["report"];
        assert_eq!(r["schema"], "ibprobe.report/1");
        assert_eq!(r["mode"], "loopback");
        assert_eq!(r["message_size"], size);
        assert_eq!(r["distributions"][0]["name"], "one_way");
        let count = r["distributions"][0]["count"].as_u64().unwrap();
        assert_eq!(count + r["run"]["lost"].as_u64().unwrap(), 200);
    }
}

#[test]
fn table_and_markdown_have_a_row_per_size_and_a_column_per_rate() {
    let out = sweep_ok(&[
        "-t", "shm", "--sizes", "8,1024", "--rates", "0,5000", "-n", "200",
    ]);
    let header = out
        .lines()
        .find(|l| l.trim_start().starts_with("size [B]"))
        .expect("grid header");
    assert!(
        header.contains("back to back") && header.contains("5000/s"),
        "{out}"
    );
    for size in ["8", "1024"] {
        let row = out
            .lines()
            .find(|l| l.split_whitespace().next() == Some(size))
            .unwrap_or_else(|| panic!("no row for {size}: {out}"));
        assert_eq!(row.matches(" / ").count(), 2, "{row}");
        assert!(row.contains("% missed)"), "{row}");
    }
    let md = sweep_ok(&[
        "-t", "shm", "--sizes", "8,1024", "--rates", "0,5000", "-n", "100", "-f", "markdown",
    ]);
    assert!(md.contains("| size [B] | back to back | 5000/s |"), "{md}");
    assert!(md.lines().any(|l| l.starts_with("| 1024 | ")), "{md}");
}

#[test]
fn plot_writes_a_heatmap_with_axis_labels_and_cell_values() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("grid.svg");
    let p = path.to_str().unwrap();
    let out = sweep_ok(&[
        "-t", "shm", "--sizes", "8,64,512", "--rates", "0,10k", "-n", "200", "-f", "csv", "--plot",
        p,
    ]);
    let svg = std::fs::read_to_string(&path).expect("svg written");
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    for label in [
        "rate [messages/s]",
        "message size [B]",
        "back to back",
        "10000/s",
        "512",
        "p50 [us]",
    ] {
        assert!(svg.contains(label), "missing {label:?}");
    }
    // Every cell is labelled with its p50 from the CSV, in us.
    for row in out.lines().skip(1) {
        let p50: u64 = row.split(',').nth(5).unwrap().parse().unwrap();
        let label = format!("{:.3}", p50 as f64 / 1000.0);
        assert!(svg.contains(&label), "missing cell label {label}");
    }
}

/// Asserts exit 2, nothing on stdout, one line on stderr with every `parts`.
fn refused(args: &[&str], parts: &[&str]) {
    let mut a = vec!["sweep"];
    a.extend_from_slice(args);
    let (code, out, err) = ibprobe(&a);
    one_line_exit_2(code, &out, &err, parts);
}

#[test]
fn bad_lists_are_refused_with_one_line() {
    let shm = ["-t", "shm"];
    let with = |extra: &[&'static str]| [&shm[..], extra].concat();
    refused(&with(&["--sizes", ""]), &["--sizes", "empty"]);
    refused(&with(&["--sizes", "8,,64"]), &["--sizes", "empty item"]);
    refused(
        &with(&["--sizes", "8,big"]),
        &["--sizes", "\"big\" is not a size"],
    );
    refused(&with(&["--sizes", "3..100"]), &["--sizes", "power of two"]);
    refused(&with(&["--sizes", "4096..8"]), &["--sizes", "backwards"]);
    refused(&with(&["--sizes", "8,0"]), &["--sizes", "size 0"]);
    refused(&with(&["--sizes", "8,8..16"]), &["--sizes", "twice"]);
    refused(&with(&["--rates", ""]), &["--rates", "empty"]);
    refused(&with(&["--rates", "-5"]), &["--rates", "not a rate"]);
    refused(&with(&["--rates", "0,fast"]), &["--rates", "not a rate"]);
    refused(
        &with(&["--rates", "20M"]),
        &["--rates", "highest supported rate"],
    );
    refused(&with(&["--count", "0"]), &["--count 0"]);
    refused(
        &with(&["--format", "perftest"]),
        &["--format", "table, csv, json, markdown"],
    );
}

#[test]
fn sizes_the_transport_cannot_carry_are_refused_before_running() {
    refused(
        &["-t", "udp", "--sizes", "4,64"],
        &["--sizes", "udp", "4 B", "8..=65507"],
    );
    refused(&["-t", "udp", "--sizes", "8..65536"], &["65536 B"]);
    refused(
        &["-t", "shm", "--sizes", "8,2097152"],
        &["2097152 B", "shm"],
    );
    // UD sends one packet: refused from the configuration alone (no device needed).
    refused(
        &["-t", "ud", "--sizes", "8,8192"],
        &["--sizes", "ud", "4096"],
    );
}
