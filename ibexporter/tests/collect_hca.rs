//! The HCA collector against fixture hosts, through a prometheus-client
//! registry and the OpenMetrics text it encodes.
//!
//! The promises under test:
//! - exact counter values, with data counters in bytes (kernel words * 4);
//! - labels `{device,port}`, the info gauges and the port state / rate;
//! - Soft-RoCE `hw_counters/` (and device-level ones with `port=""`);
//! - a missing `counters/`, a garbage file or an unreadable file lose only
//!   their own samples, failures are counted per file and logged once;
//! - the PCIe link's width and down-training, per device;
//! - one collector reads counters, states and rates at every scrape and a
//!   device's identity once per `IDENTITY_TTL`; a new device shows at once;
//! - the files it keeps open between scrapes give the value of now, are
//!   let go when replaced or gone (no stale value, no descriptor left
//!   open), and past the budget every file is still read.

mod common;

use common::{assert_sample, exact_sample, with_logs};
use ibexporter::collect::hca::{read_hcas, HcaCollector, PORT_COUNTERS};
use ibexporter::limits::MAX_KEPT_FILES;
use ibtools_tests::{copy_tree, fixture};
use ibtune::host::HostRoot;
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// This crate's own fixture (an rxe and a fully-countered mlx5).
fn mixed() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hca-mixed")
}

/// Encodes one scrape of `c` as OpenMetrics text.
fn scrape(c: &Arc<HcaCollector>) -> String {
    let mut reg = Registry::default();
    reg.register_collector(Box::new(Arc::clone(c)));
    let mut out = String::new();
    encode(&mut out, &reg).expect("encode");
    out
}

fn scrape_root(root: &Path) -> String {
    scrape(&Arc::new(HcaCollector::new(root).expect("root exists")))
}

/// A copy of a tree in a temp dir (removed on drop).
struct Copy {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

fn copy_of(from: &Path) -> Copy {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    copy_tree(from, &root).unwrap();
    Copy { _dir: dir, root }
}

#[test]
fn roce_host_values_units_and_labels() {
    let t = scrape_root(&fixture("roce-1s"));
    let dp = r#"{device="mlx5_0",port="1"}"#;
    // Data counters: the kernel's 4-byte words times 4.
    assert_sample(
        &t,
        &format!("ibexporter_hca_port_transmit_bytes_total{dp}"),
        &(790_414_338_837u64 * 4).to_string(),
    );
    assert_sample(
        &t,
        &format!("ibexporter_hca_port_receive_bytes_total{dp}"),
        "3250946224516",
    );
    assert!(t.contains("# TYPE ibexporter_hca_port_transmit_bytes counter\n"));
    assert!(t.contains("# UNIT ibexporter_hca_port_transmit_bytes bytes\n"));
    // Packets and errors as read.
    assert_sample(
        &t,
        &format!("ibexporter_hca_port_transmit_packets_total{dp}"),
        "3498135886",
    );
    assert_sample(
        &t,
        &format!("ibexporter_hca_port_receive_packets_total{dp}"),
        "3521903248",
    );
    assert_sample(
        &t,
        &format!("ibexporter_hca_port_link_downed_total{dp}"),
        "1",
    );
    assert_sample(
        &t,
        &format!("ibexporter_hca_port_symbol_errors_total{dp}"),
        "0",
    );
    assert_sample(
        &t,
        &format!("ibexporter_hca_port_receive_errors_total{dp}"),
        "0",
    );
    // Counters the device does not have are absent, not zero.
    assert!(
        !t.contains("ibexporter_hca_port_multicast_transmit_packets"),
        "{t}"
    );
    assert!(
        !t.contains("ibexporter_hca_port_transmit_wait_ticks"),
        "{t}"
    );
    // State, rate (100 Gb/s = 12.5e9 B/s), identity.
    assert_sample(&t, &format!("ibexporter_hca_port_state_id{dp}"), "4");
    assert_sample(
        &t,
        &format!("ibexporter_hca_port_physical_state_id{dp}"),
        "5",
    );
    assert_sample(
        &t,
        &format!("ibexporter_hca_port_rate_bytes_per_second{dp}"),
        "12500000000",
    );
    assert!(t.contains("# UNIT ibexporter_hca_port_rate_bytes_per_second bytes_per_second\n"));
    assert_sample(
        &t,
        r#"ibexporter_hca_info{device="mlx5_0",fw_ver="22.39.1002",board_id="MT_0000000359",hca_type="MT4125",node_guid="0c42:a103:005e:7b20",numa_node="0"}"#,
        "1",
    );
    assert!(t.contains("# TYPE ibexporter_hca info\n"), "{t}");
    assert_sample(
        &t,
        r#"ibexporter_hca_port_info{device="mlx5_0",port="1",link_layer="Ethernet",netdev="enp65s0f0np0"}"#,
        "1",
    );
    // Nothing failed, and a healthy host has no error samples.
    assert!(!t.contains("ibexporter_hca_read_errors_total{"), "{t}");
    assert!(t.ends_with("# EOF\n"));
}

#[test]
fn two_infiniband_hcas() {
    let t = scrape_root(&fixture("thesis-2s-mlx5"));
    for (dev, words, numa) in [
        ("mlx5_0", 790_412_338_871u64, "0"),
        ("mlx5_1", 790_413_338_854, "1"),
    ] {
        let dp = format!(r#"{{device="{dev}",port="1"}}"#);
        assert_sample(
            &t,
            &format!("ibexporter_hca_port_transmit_bytes_total{dp}"),
            &(words * 4).to_string(),
        );
        assert_sample(
            &t,
            &format!(
                r#"ibexporter_hca_port_info{{device="{dev}",port="1",link_layer="InfiniBand",netdev=""}}"#
            ),
            "1",
        );
        assert!(
            t.contains(&format!(r#"ibexporter_hca_info{{device="{dev}",fw_ver="12.28.2006",board_id="MT_2180110032",hca_type="MT4115","#))
                && t.contains(&format!(r#"numa_node="{numa}"}} 1"#)),
            "{t}"
        );
    }
    // One descriptor per family, whatever the number of devices.
    assert_eq!(
        t.matches("# TYPE ibexporter_hca_port_transmit_bytes counter")
            .count(),
        1
    );
}

#[test]
fn pcie_link_width_and_down_training() {
    // The thesis host as captured: both links x16 at 8 GT/s, as wide and
    // fast as they can be.
    let t = scrape_root(&fixture("thesis-2s-mlx5"));
    for dev in ["mlx5_0", "mlx5_1"] {
        let d = format!(r#"{{device="{dev}"}}"#);
        assert_sample(&t, &format!("ibexporter_hca_pcie_link_downtrained{d}"), "0");
        assert_sample(&t, &format!("ibexporter_hca_pcie_link_width{d}"), "16");
        assert_sample(&t, &format!("ibexporter_hca_pcie_link_max_width{d}"), "16");
    }
    // mlx5_1 retrained to x8; mlx5_0 to a lower speed at full width.
    let c = copy_of(&fixture("thesis-2s-mlx5"));
    let ib = c.root.join("sys/class/infiniband");
    fs::write(ib.join("mlx5_1/device/current_link_width"), "8\n").unwrap();
    fs::write(
        ib.join("mlx5_0/device/current_link_speed"),
        "5.0 GT/s PCIe\n",
    )
    .unwrap();
    let t = scrape_root(&c.root);
    assert_sample(
        &t,
        r#"ibexporter_hca_pcie_link_downtrained{device="mlx5_1"}"#,
        "1",
    );
    assert_sample(
        &t,
        r#"ibexporter_hca_pcie_link_width{device="mlx5_1"}"#,
        "8",
    );
    assert_sample(
        &t,
        r#"ibexporter_hca_pcie_link_max_width{device="mlx5_1"}"#,
        "16",
    );
    assert_sample(
        &t,
        r#"ibexporter_hca_pcie_link_downtrained{device="mlx5_0"}"#,
        "1",
    );
    assert_sample(
        &t,
        r#"ibexporter_hca_pcie_link_width{device="mlx5_0"}"#,
        "16",
    );
    // Soft-RoCE has no PCIe link of its own: no sample, not a 0.
    let t = scrape_root(&mixed());
    assert!(
        !t.contains(r#"ibexporter_hca_pcie_link_downtrained{device="rxe0"}"#),
        "{t}"
    );
}

#[test]
fn host_without_rdma_has_no_hca_metrics() {
    let t = scrape_root(&fixture("this-host"));
    assert!(!t.contains("ibexporter_hca"), "{t}");
    assert_eq!(
        read_hcas(&HostRoot::new(fixture("this-host")).unwrap()),
        Default::default()
    );
}

#[test]
fn soft_roce_and_full_counter_set() {
    let scan = read_hcas(&HostRoot::new(mixed()).unwrap());
    assert!(scan.failures.is_empty(), "{:?}", scan.failures);
    let names: Vec<&str> = scan.hcas.iter().map(|h| h.name.as_str()).collect();
    assert_eq!(names, ["mlx5_2", "rxe0"]);
    // The plain data keeps the kernel's units.
    assert_eq!(scan.hcas[0].ports[0].counters["port_xmit_data"], 101);
    assert_eq!(scan.hcas[0].ports[0].counters.len(), PORT_COUNTERS.len());
    assert!(
        scan.hcas[1].ports[0].counters.is_empty(),
        "rxe has no counters/"
    );
    assert_eq!(
        scan.hcas[1].ports[0].hw_counters.len(),
        15,
        "lifespan is no counter"
    );

    let t = scrape_root(&mixed());
    // Every node_exporter counter, the k-th holding k*101 (bytes: *4).
    let dp = r#"{device="mlx5_2",port="1"}"#;
    for (k, c) in PORT_COUNTERS.iter().enumerate() {
        let raw = (k as u64 + 1) * 101;
        let (name, want) = if c.bytes {
            (format!("{}_bytes_total", c.name), raw * 4)
        } else {
            (format!("{}_total", c.name), raw)
        };
        assert_sample(&t, &format!("{name}{dp}"), &want.to_string());
    }
    assert_sample(
        &t,
        &format!("ibexporter_hca_port_transmit_bytes_total{dp}"),
        "404",
    );
    assert_sample(
        &t,
        &format!("ibexporter_hca_port_receive_bytes_total{dp}"),
        "808",
    );
    assert_sample(
        &t,
        &format!("ibexporter_hca_port_vl15_dropped_packets_total{dp}"),
        "1919",
    );
    assert_sample(
        &t,
        &format!("ibexporter_hca_port_transmit_wait_ticks_total{dp}"),
        "2222",
    );
    let hw = |dev: &str, port: &str, counter: &str| {
        format!(
            r#"ibexporter_hca_hw_counter_total{{device="{dev}",port="{port}",counter="{counter}"}}"#
        )
    };
    assert_sample(&t, &hw("mlx5_2", "1", "np_cnp_sent"), "17");
    assert_sample(&t, &hw("mlx5_2", "1", "rp_cnp_handled"), "23");
    assert_sample(&t, &hw("mlx5_2", "1", "np_ecn_marked_roce_packets"), "31");
    assert_sample(&t, &hw("mlx5_2", "1", "out_of_buffer"), "2");
    assert_sample(&t, &hw("mlx5_2", "", "num_cqovf"), "7");
    assert_sample(&t, &hw("rxe0", "1", "sent_pkts"), "1200");
    assert_sample(&t, &hw("rxe0", "1", "rcvd_seq_err"), "4");
    assert_sample(&t, &hw("rxe0", "1", "completer_retry_err"), "5");
    assert_sample(&t, &hw("rxe0", "1", "rdma_recvs"), "590");
    assert!(!t.contains(r#"counter="lifespan""#), "{t}");
    // rxe: no PMA counters, but state, rate (2.5 Gb/s) and identity.
    assert!(!t.contains(r#"_bytes_total{device="rxe0""#), "{t}");
    assert_sample(
        &t,
        r#"ibexporter_hca_port_rate_bytes_per_second{device="rxe0",port="1"}"#,
        "312500000",
    );
    assert_sample(
        &t,
        r#"ibexporter_hca_port_info{device="rxe0",port="1",link_layer="Ethernet",netdev="eth0"}"#,
        "1",
    );
    assert_sample(
        &t,
        r#"ibexporter_hca_info{device="rxe0",fw_ver="",board_id="",hca_type="software RoCE (rxe)",node_guid="5054:00ff:fe12:3456",numa_node=""}"#,
        "1",
    );
    assert_sample(
        &t,
        r#"ibexporter_hca_port_info{device="mlx5_2",port="1",link_layer="Ethernet",netdev="ens1f0np0"}"#,
        "1",
    );
    assert_sample(
        &t,
        r#"ibexporter_hca_info{device="mlx5_2",fw_ver="28.39.1002",board_id="MT_0000000838",hca_type="MT4129",node_guid="a088:c203:0045:be10",numa_node="1"}"#,
        "1",
    );
}

#[test]
fn bad_files_lose_only_their_metric_and_are_counted_and_logged_once() {
    let cp = copy_of(&fixture("thesis-2s-mlx5"));
    let ib = cp.root.join("sys/class/infiniband");
    let m0 = ib.join("mlx5_0/ports/1");
    // mlx5_0: a garbage counter, an unreadable state (a directory), a
    // counter the kernel cannot read from its PMA.
    fs::write(m0.join("counters/symbol_error"), "banana\n").unwrap();
    fs::remove_file(m0.join("state")).unwrap();
    fs::create_dir(m0.join("state")).unwrap();
    fs::write(m0.join("counters/port_rcv_errors"), "N/A (no PMA)\n").unwrap();
    // mlx5_1: no counters/ at all (as on Soft-RoCE): not an error.
    fs::remove_dir_all(ib.join("mlx5_1/ports/1/counters")).unwrap();

    let c = Arc::new(HcaCollector::new(&cp.root).unwrap());
    let ((t1, t2), log) = with_logs(|| (scrape(&c), scrape(&c)));

    let dp0 = r#"{device="mlx5_0",port="1"}"#;
    let dp1 = r#"{device="mlx5_1",port="1"}"#;
    // Only the bad samples are gone.
    assert_eq!(
        exact_sample(
            &t1,
            &format!("ibexporter_hca_port_symbol_errors_total{dp0}")
        ),
        None
    );
    assert_eq!(
        exact_sample(&t1, &format!("ibexporter_hca_port_state_id{dp0}")),
        None
    );
    assert_eq!(
        exact_sample(
            &t1,
            &format!("ibexporter_hca_port_receive_errors_total{dp0}")
        ),
        None
    );
    assert_sample(
        &t1,
        &format!("ibexporter_hca_port_transmit_bytes_total{dp0}"),
        "3161649355484",
    );
    assert_sample(
        &t1,
        &format!("ibexporter_hca_port_physical_state_id{dp0}"),
        "5",
    );
    assert_sample(
        &t1,
        &format!("ibexporter_hca_port_link_downed_total{dp0}"),
        "1",
    );
    // mlx5_1 lost its counters but nothing else.
    assert_eq!(
        exact_sample(
            &t1,
            &format!("ibexporter_hca_port_transmit_bytes_total{dp1}")
        ),
        None
    );
    assert_sample(&t1, &format!("ibexporter_hca_port_state_id{dp1}"), "4");
    assert!(
        t1.contains(r#"ibexporter_hca_info{device="mlx5_1","#),
        "{t1}"
    );

    // Counted per file and scrape; N/A and a missing counters/ are not errors.
    let err = |t: &str, dev: &str, file: &str| {
        exact_sample(
            t,
            &format!(
                r#"ibexporter_hca_read_errors_total{{device="{dev}",port="1",file="{file}"}}"#
            ),
        )
    };
    assert_eq!(
        err(&t1, "mlx5_0", "counters/symbol_error").as_deref(),
        Some("1")
    );
    assert_eq!(err(&t1, "mlx5_0", "state").as_deref(), Some("1"));
    assert_eq!(
        err(&t2, "mlx5_0", "counters/symbol_error").as_deref(),
        Some("2")
    );
    assert_eq!(
        t2.matches("ibexporter_hca_read_errors_total{").count(),
        2,
        "{t2}"
    );
    assert!(!t2.contains(r#"read_errors_total{device="mlx5_1""#), "{t2}");

    // Logged once for two scrapes, saying what and where.
    assert_eq!(
        log.matches("cannot read counters/symbol_error").count(),
        1,
        "{log}"
    );
    assert_eq!(log.matches("cannot read state").count(), 1, "{log}");
    assert!(log.contains("not a counter value: \"banana\""), "{log}");
    assert!(log.contains("WARN"), "{log}");

    // The file recovers: its sample is back, the count stays, and breaking
    // it again logs again.
    fs::write(m0.join("counters/symbol_error"), "3\n").unwrap();
    let ((t3, t4), log2) = with_logs(|| {
        let t3 = scrape(&c);
        fs::write(m0.join("counters/symbol_error"), "x\n").unwrap();
        (t3, scrape(&c))
    });
    assert_sample(
        &t3,
        &format!("ibexporter_hca_port_symbol_errors_total{dp0}"),
        "3",
    );
    assert_eq!(
        err(&t3, "mlx5_0", "counters/symbol_error").as_deref(),
        Some("2")
    );
    assert_eq!(
        err(&t4, "mlx5_0", "counters/symbol_error").as_deref(),
        Some("3")
    );
    assert!(log2.contains("counters/symbol_error reads again"), "{log2}");
    assert_eq!(
        log2.matches("cannot read counters/symbol_error").count(),
        1,
        "{log2}"
    );
    assert_eq!(
        log2.matches("cannot read state").count(),
        0,
        "still failing: not logged again\n{log2}"
    );
}

#[test]
fn garbage_rate_and_hw_counter() {
    let cp = copy_of(&mixed());
    let rxe = cp.root.join("sys/class/infiniband/rxe0/ports/1");
    fs::write(rxe.join("rate"), "fast\n").unwrap();
    fs::write(rxe.join("hw_counters/send_err"), "-1\n").unwrap();
    let scan = read_hcas(&HostRoot::new(&cp.root).unwrap());
    let failed: Vec<(&str, &str, &str)> = scan
        .failures
        .iter()
        .map(|f| (f.device.as_str(), f.port.as_str(), f.file.as_str()))
        .collect();
    assert_eq!(
        failed,
        [("rxe0", "1", "rate"), ("rxe0", "1", "hw_counters/send_err")]
    );
    let port = &scan.hcas[1].ports[0];
    assert_eq!(port.rate_bytes_per_second, None);
    assert_eq!(port.hw_counters.get("send_err"), None);
    assert_eq!(port.hw_counters["sent_pkts"], 1200);
    assert_eq!(port.state, Some(4));
}

#[test]
fn counters_are_read_at_every_scrape_identity_once_per_ttl() {
    let cp = copy_of(&fixture("thesis-2s-mlx5"));
    let ib = cp.root.join("sys/class/infiniband");
    let m0 = ib.join("mlx5_0");
    let c = Arc::new(HcaCollector::new(&cp.root).unwrap());
    let dp0 = r#"{device="mlx5_0",port="1"}"#;
    let t1 = scrape(&c);
    assert!(t1.contains(r#"fw_ver="12.28.2006""#), "{t1}");
    assert_sample(&t1, &format!("ibexporter_hca_port_state_id{dp0}"), "4");

    // Counters, states and rates change between two scrapes; so does the
    // firmware, which the collector re-reads only after IDENTITY_TTL.
    fs::write(m0.join("ports/1/counters/symbol_error"), "42\n").unwrap();
    fs::write(m0.join("ports/1/state"), "1: DOWN\n").unwrap();
    fs::write(m0.join("ports/1/rate"), "25 Gb/sec (1X EDR)\n").unwrap();
    fs::write(m0.join("fw_ver"), "99.99.9999\n").unwrap();
    // A counter file that vanished: no sample (not a stale value).
    fs::remove_file(m0.join("ports/1/counters/link_downed")).unwrap();
    let t2 = scrape(&c);
    assert_sample(
        &t2,
        &format!("ibexporter_hca_port_symbol_errors_total{dp0}"),
        "42",
    );
    assert_sample(&t2, &format!("ibexporter_hca_port_state_id{dp0}"), "1");
    assert_sample(
        &t2,
        &format!("ibexporter_hca_port_rate_bytes_per_second{dp0}"),
        "3125000000",
    );
    assert!(
        !t2.contains(&format!("ibexporter_hca_port_link_downed_total{dp0}")),
        "{t2}"
    );
    assert!(
        t2.contains(r#"fw_ver="12.28.2006""#),
        "identity kept within the TTL\n{t2}"
    );
    // A fresh collector (as after IDENTITY_TTL) reads the new firmware.
    let t3 = scrape_root(&cp.root);
    assert!(t3.contains(r#"fw_ver="99.99.9999""#), "{t3}");

    // A device that appears is listed at the next scrape, identity and all.
    copy_tree(&m0, &ib.join("mlx5_9")).unwrap();
    let t4 = scrape(&c);
    assert!(
        t4.contains(r#"device="mlx5_9",fw_ver="99.99.9999""#),
        "{t4}"
    );
    assert_sample(
        &t4,
        r#"ibexporter_hca_port_symbol_errors_total{device="mlx5_9",port="1"}"#,
        "42",
    );
}

/// This process's open descriptors of files under `root` (other tests of
/// this binary run in parallel; only this test's tree is counted; the
/// collector's own handle of `root` is not). A file removed while open
/// still counts (`... (deleted)`).
fn fds_under(root: &Path) -> Vec<String> {
    let mut out: Vec<String> = fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| fs::read_link(e.ok()?.path()).ok())
        .filter(|t| t.starts_with(root) && t != root)
        .map(|t| t.display().to_string())
        .collect();
    out.sort();
    out
}

#[test]
fn kept_files_give_the_value_of_now_and_are_let_go_when_replaced_or_gone() {
    let cp = copy_of(&fixture("thesis-2s-mlx5"));
    let ib = cp.root.join("sys/class/infiniband");
    let m0 = ib.join("mlx5_0/ports/1");
    let c = Arc::new(HcaCollector::new(&cp.root).unwrap());
    let dp0 = r#"{device="mlx5_0",port="1"}"#;
    let t1 = scrape(&c);
    assert_sample(&t1, &format!("ibexporter_hca_port_state_id{dp0}"), "4");
    // 2 ports: 7 counters, state, phys_state and rate each, all kept.
    assert_eq!(c.kept_files(), 20);
    assert_eq!(fds_under(&cp.root).len(), 20, "{:?}", fds_under(&cp.root));

    // Rewritten in place, longer then shorter: each scrape reads at offset
    // 0 and nothing of an earlier, longer value is left.
    let sym = format!("ibexporter_hca_port_symbol_errors_total{dp0}");
    for v in ["123456789012", "7", "0"] {
        fs::write(m0.join("counters/symbol_error"), format!("{v}\n")).unwrap();
        fs::write(m0.join("rate"), "25 Gb/sec (1X EDR)\n").unwrap();
        let t = scrape(&c);
        assert_sample(&t, &sym, v);
        assert_sample(
            &t,
            &format!("ibexporter_hca_port_rate_bytes_per_second{dp0}"),
            "3125000000",
        );
    }

    // Replaced by a new file (new inode) under the same name: the new one
    // is read and the old one's descriptor closed.
    let new = m0.join("counters/port_xmit_data.new");
    fs::write(&new, "1000\n").unwrap();
    fs::rename(&new, m0.join("counters/port_xmit_data")).unwrap();
    // Removed: no sample (not the last value) and no descriptor.
    fs::remove_file(m0.join("counters/link_downed")).unwrap();
    let t2 = scrape(&c);
    assert_sample(
        &t2,
        &format!("ibexporter_hca_port_transmit_bytes_total{dp0}"),
        "4000",
    );
    assert_eq!(
        exact_sample(&t2, &format!("ibexporter_hca_port_link_downed_total{dp0}")),
        None
    );
    let fds = fds_under(&cp.root);
    assert!(!fds.iter().any(|f| f.contains("(deleted)")), "{fds:?}");
    assert_eq!(fds.len(), 19, "{fds:?}");
    assert_eq!(c.kept_files(), 19);

    // A device unplugged: its samples and its descriptors go at once.
    fs::remove_dir_all(ib.join("mlx5_1")).unwrap();
    let t3 = scrape(&c);
    assert!(!t3.contains(r#"device="mlx5_1""#), "{t3}");
    let fds = fds_under(&cp.root);
    assert_eq!(fds.len(), 9, "{fds:?}");
    assert!(!fds.iter().any(|f| f.contains("mlx5_1")), "{fds:?}");

    // Steady scrapes open nothing more, and no read error was counted.
    for _ in 0..3 {
        let t = scrape(&c);
        assert!(!t.contains("ibexporter_hca_read_errors_total{"), "{t}");
    }
    assert_eq!(fds_under(&cp.root).len(), 9);
    drop(c);
    assert_eq!(fds_under(&cp.root), Vec::<String>::new());
}

#[test]
fn past_the_file_budget_every_file_is_still_read() {
    // The fixture's 20 files fit the default budget.
    const _: () = assert!(MAX_KEPT_FILES >= 20);
    let cp = copy_of(&fixture("thesis-2s-mlx5"));
    let m1 = cp.root.join("sys/class/infiniband/mlx5_1/ports/1");
    let root = HostRoot::new(&cp.root).unwrap();
    let few = Arc::new(HcaCollector::with_file_budget(root.clone(), 5));
    let none = Arc::new(HcaCollector::with_file_budget(root, 0));
    let all = Arc::new(HcaCollector::new(&cp.root).unwrap());
    let scrape_each = || [scrape(&few), scrape(&none), scrape(&all)];
    let [a, b, full] = scrape_each();
    assert_eq!(a, full);
    assert_eq!(b, full);
    assert_eq!((few.kept_files(), none.kept_files()), (5, 0));
    assert_eq!(fds_under(&cp.root).len(), 5 + 20);

    // Files past the budget (mlx5_1 is read after mlx5_0's first 5) change
    // between scrapes: every collector shows the new values.
    fs::write(m1.join("counters/port_rcv_data"), "25\n").unwrap();
    fs::write(m1.join("state"), "1: DOWN\n").unwrap();
    let [a, b, full] = scrape_each();
    let dp1 = r#"{device="mlx5_1",port="1"}"#;
    assert_sample(
        &full,
        &format!("ibexporter_hca_port_receive_bytes_total{dp1}"),
        "100",
    );
    assert_sample(&full, &format!("ibexporter_hca_port_state_id{dp1}"), "1");
    assert_eq!(a, full);
    assert_eq!(b, full);
    assert_eq!(fds_under(&cp.root).len(), 5 + 20);
}
