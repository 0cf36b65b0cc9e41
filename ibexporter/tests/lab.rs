//! ibexporter on a real verbs stack: the Soft-RoCE lab (tests/lab), rxe0.
//! Runs with `--include-ignored` (scripts/test-all does); see
//! `ibtools_tests::lab::harness` for why this is not libtest.
//!
//! - `exporter_loopback` (one guest): the exporter probes rxe0 in loopback
//!   and a real Prometheus, run inside the guest (the guest network is not
//!   reachable from the host), scrapes it as protobuf with native histograms
//!   and answers `histogram_quantile` on the native series; the rxe port's
//!   driver counters, info and state are exported with their real values.
//! - `exporter_mesh` (two guests): each exporter probes the other's
//!   responder over RC; killing one shows up on the other as failed probes
//!   within 30 s while it keeps serving.
//!
//! Emulation (QEMU TCG, 2 vCPUs on a shared 2-core host, debug build) makes
//! everything slow: one probe round of 50 messages costs the better part of
//! a vCPU second and one scrape takes seconds. Hence `--budget 0.5` (with
//! the default 1 % budget the throttle stretches the interval to 64 s, as
//! designed), a Prometheus scrape interval and timeout of 10 s instead of
//! 1 s, and generous but bounded waits everywhere.

use ibtools_tests::lab::harness::{self, Group};
use ibtools_tests::lab::{GuestOutput, Lab, LabConfig, Node, Topology};
use std::process::ExitCode;
use std::time::{Duration, Instant};

const EXPORTER: &str = env!("CARGO_BIN_EXE_ibexporter");

/// Where the exporter under test listens, in every guest.
const LISTEN: &str = "127.0.0.1:9427";

/// Per-guest flags shared by every test: keep probing at full rate under
/// emulation (see the module docs).
const BUDGET: &str = "--budget 0.5";

fn main() -> ExitCode {
    harness::run(vec![loopback_group(), mesh_group()])
}

fn loopback_group() -> Group {
    Group::with_lab("exporter_loopback", LabConfig::loopback())
        .test(
            "rxe_loopback_probing_shows_up_in_prometheus",
            rxe_loopback_probing_shows_up_in_prometheus,
        )
        .test("rxe_hw_counters_are_exported", rxe_hw_counters_are_exported)
}

fn mesh_group() -> Group {
    Group::with_lab("exporter_mesh", LabConfig::pair()).test(
        "two_guests_probe_each_other_over_rc",
        two_guests_probe_each_other_over_rc,
    )
}

// ---------------------------------------------------------------------------
// Helpers

/// [`Lab::exec`] with a chosen limit; a lab failure panics with the
/// [`ibtools_tests::lab::LabError`] so the harness reports it as the lab's.
#[track_caller]
fn exec(lab: &Lab, node: Node, snippet: &str, secs: u64) -> GuestOutput {
    lab.exec(node, snippet, Duration::from_secs(secs))
        .unwrap_or_else(|e| std::panic::panic_any(e))
}

fn nodes(lab: &Lab) -> &'static [Node] {
    match lab.config().topology {
        Topology::Loopback => &[Node::A],
        Topology::Pair => &[Node::A, Node::B],
    }
}

/// Kills what a test started (exporters, Prometheus) on every guest when
/// dropped, also when the test panics, and waits until they are gone so the
/// next test of the group finds its ports free.
struct Cleanup<'a>(&'a Lab);

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        for &node in nodes(self.0) {
            // Errors are ignored: this may run while unwinding.
            let _ = self.0.exec(
                node,
                "pkill -x ibexporter; pkill -x prometheus; \
                 for i in $(seq 100); do pgrep -x ibexporter >/dev/null || pgrep -x prometheus >/dev/null || exit 0; sleep 0.2; done; \
                 pkill -KILL -x ibexporter; pkill -KILL -x prometheus; true",
                Duration::from_secs(60),
            );
        }
    }
}

/// The last `n` lines of a file the guest wrote into `$LAB_RESULTS`.
fn tail(lab: &Lab, node: Node, file: &str, n: usize) -> String {
    let path = lab.results(node).join(file);
    match std::fs::read_to_string(&path) {
        Ok(s) => {
            let lines: Vec<&str> = s.lines().collect();
            let from = lines.len().saturating_sub(n);
            format!(
                "--- last {} lines of $LAB_RESULTS/{file} on {node:?}\n{}\n",
                lines.len() - from,
                lines[from..].join("\n")
            )
        }
        Err(e) => format!("--- $LAB_RESULTS/{file} on {node:?}: unreadable: {e}\n"),
    }
}

/// Starts the exporter in the background on `node` with `args` (plus
/// `--listen` [`LISTEN`]), logging to `$LAB_RESULTS/<log>`, and waits up
/// to 90 s until its `/healthz` answers.
fn start_exporter(lab: &Lab, node: Node, args: &str, log: &str) {
    let o = exec(
        lab,
        node,
        &format!(
            "({EXPORTER} --listen {LISTEN} {args} > $LAB_RESULTS/{log} 2>&1 &)
             end=$((SECONDS + 90))
             until curl -sf -o /dev/null --max-time 10 http://{LISTEN}/healthz; do
               pgrep -x ibexporter > /dev/null || {{ echo 'ibexporter exited'; exit 1; }}
               [ $SECONDS -ge $end ] && {{ echo 'no /healthz answer after 90 s'; exit 1; }}
               sleep 0.5
             done"
        ),
        150,
    );
    assert_eq!(
        o.status,
        0,
        "starting ibexporter {args} on {node:?}: {o}\n{}",
        tail(lab, node, log, 40)
    );
}

/// One `/metrics` scrape (text format) of the exporter on `node`.
fn scrape(lab: &Lab, node: Node, log: &str) -> String {
    let o = exec(
        lab,
        node,
        &format!("curl -sf --max-time 60 http://{LISTEN}/metrics"),
        90,
    );
    assert_eq!(
        o.status,
        0,
        "scraping {LISTEN} on {node:?}: {o}\n{}",
        tail(lab, node, log, 40)
    );
    o.stdout
}

/// One sample's labels, in exposition order.
type Labels = Vec<(String, String)>;

/// Parses `name{k="v",...} value` (or `name value`); None for comments
/// and lines it cannot read.
fn parse_line(line: &str) -> Option<(&str, Labels, f64)> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let name_end = line.find(['{', ' '])?;
    let name = &line[..name_end];
    let mut labels = Vec::new();
    let mut rest = &line[name_end..];
    if let Some(body) = rest.strip_prefix('{') {
        let mut chars = body.char_indices();
        let mut close = None;
        let mut key = String::new();
        while let Some((i, c)) = chars.next() {
            match c {
                '}' => {
                    close = Some(i);
                    break;
                }
                ',' | ' ' => {}
                '=' => {
                    if chars.next()?.1 != '"' {
                        return None;
                    }
                    let mut value = String::new();
                    loop {
                        match chars.next()?.1 {
                            '\\' => match chars.next()?.1 {
                                'n' => value.push('\n'),
                                other => value.push(other),
                            },
                            '"' => break,
                            c => value.push(c),
                        }
                    }
                    labels.push((std::mem::take(&mut key), value));
                }
                c => key.push(c),
            }
        }
        rest = &body[close? + 1..];
    }
    let value = match rest.split_whitespace().next()? {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    Some((name, labels, value))
}

/// The value of the first sample of `name` carrying every label of `want`.
fn sample(text: &str, name: &str, want: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter_map(parse_line)
        .find_map(|(n, labels, v)| {
            let all = want
                .iter()
                .all(|(k, wv)| labels.iter().any(|(lk, lv)| lk == k && lv == wv));
            (n == name && all).then_some(v)
        })
}

/// The lines of `text` naming `name`, for failure messages.
fn lines_of(text: &str, name: &str) -> String {
    let v: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .collect();
    if v.is_empty() {
        format!("(no {name} lines in the scrape)")
    } else {
        v.join("\n")
    }
}

/// The value of a Prometheus instant-query answer with one float sample.
fn query_value(v: &serde_json::Value) -> Option<f64> {
    let r = v["data"]["result"].as_array()?;
    r.first()?["value"][1].as_str()?.parse().ok()
}

/// Splits `TAG json` lines printed by a guest script.
fn tagged<'a>(out: &'a str, tag: &str) -> Option<&'a str> {
    out.lines()
        .find_map(|l| l.strip_prefix(tag)?.strip_prefix(' '))
}

// ---------------------------------------------------------------------------
// exporter_loopback

const LOOPBACK_ARGS: &str = "--interval 1s --count 50 --no-probe wakeup --responder off";

/// Prometheus (Debian's 2.42 from the shared host root) scraping the
/// exporter inside the guest: negotiated protobuf, native histograms on.
const PROMETHEUS_YML: &str = "global:
  scrape_interval: 10s
  scrape_timeout: 10s
  evaluation_interval: 10s
scrape_configs:
  - job_name: ibexporter
    static_configs:
      - targets: ['127.0.0.1:9427']
";

/// The exporter, probing rxe0 in loopback (RC send, 32 B, 50 messages per
/// round), is scraped by a real Prometheus in the guest with native
/// histograms on: Prometheus stores `ibprobe_latency_seconds{target="rxe0:1"}`
/// as a native histogram (which only the protobuf exposition carries, so
/// content negotiation worked), its sample count is > 0 (`_count` where the
/// classic series is kept, `histogram_count()` of the native one on 2.42,
/// which keeps only the native), `histogram_quantile(0.5, ...)` on the native
/// histogram gives a positive, finite p50 under 1 s, and that p50 agrees
/// within a factor of 2 with the exporter's own HDR window median
/// (`ibprobe_latency_window_seconds{quantile="0.5"}`).
fn rxe_loopback_probing_shows_up_in_prometheus(lab: &Lab) {
    let _cleanup = Cleanup(lab);
    let log = "exporter-prometheus.log";
    start_exporter(lab, Node::A, &format!("{LOOPBACK_ARGS} {BUDGET}"), log);

    let t0 = Instant::now();
    let script = format!(
        r#"P=/tmp/ibexporter-lab-prometheus; rm -rf $P; mkdir -p $P
cat > $P/prometheus.yml <<'EOF'
{PROMETHEUS_YML}EOF
cp $P/prometheus.yml $LAB_RESULTS/prometheus.yml
(prometheus --config.file=$P/prometheus.yml --storage.tsdb.path=$P/data \
   --web.listen-address=127.0.0.1:9090 --enable-feature=native-histograms \
   > $LAB_RESULTS/prometheus.log 2>&1 &)
end=$((SECONDS + 120))
until curl -sf -o /dev/null --max-time 10 http://127.0.0.1:9090/-/ready; do
  pgrep -x prometheus > /dev/null || {{ echo 'FAIL prometheus exited'; exit 1; }}
  [ $SECONDS -ge $end ] && {{ echo 'FAIL prometheus not ready after 120 s'; exit 1; }}
  sleep 1
done
echo "READY $SECONDS"
q() {{ curl -sf --max-time 30 -G http://127.0.0.1:9090/api/v1/query --data-urlencode "query=$1"; }}
SEL='target="rxe0:1",transport="rc"'
end=$((SECONDS + 150))
while :; do
  c=$(q "ibprobe_latency_seconds_count{{$SEL}} > 0 or histogram_count(ibprobe_latency_seconds{{$SEL}}) > 0")
  case "$c" in *'"value"'*) break ;; esac
  [ $SECONDS -ge $end ] && break
  sleep 2
done
echo "COUNT $c"
echo "NATIVE $(q "ibprobe_latency_seconds{{$SEL}}")"
echo "P50 $(q 'histogram_quantile(0.5, ibprobe_latency_seconds{{target="rxe0:1"}})')"
echo "TARGETS $(curl -sf --max-time 30 http://127.0.0.1:9090/api/v1/targets)"
echo "WINDOW $(curl -sf --max-time 60 http://{LISTEN}/metrics | grep '^ibprobe_latency_window_seconds{{' | grep 'target="rxe0:1"' | grep 'quantile="0.5"')"
"#
    );
    let o = exec(lab, Node::A, &script, 330);
    let context = || {
        format!(
            "{o}\n{}{}",
            tail(lab, Node::A, "prometheus.log", 30),
            tail(lab, Node::A, log, 30)
        )
    };
    assert_eq!(o.status, 0, "Prometheus in the guest: {}", context());
    let json = |tag: &str| -> serde_json::Value {
        let s = tagged(&o.stdout, tag)
            .unwrap_or_else(|| panic!("no {tag} line from the guest: {}", context()));
        serde_json::from_str(s)
            .unwrap_or_else(|e| panic!("{tag}: not JSON ({e}): {s}\n{}", context()))
    };

    let count = query_value(&json("COUNT")).unwrap_or_else(|| {
        panic!(
            "Prometheus has no rxe0:1 RC latency samples after 150 s: {}",
            context()
        )
    });
    assert!(count > 0.0, "sample count {count}: {}", context());

    let native = json("NATIVE");
    let series = &native["data"]["result"][0];
    assert!(
        series["histogram"].is_array(),
        "ibprobe_latency_seconds{{target=\"rxe0:1\"}} is not stored as a native histogram \
         (was the scrape protobuf?): {native}\n{}",
        context()
    );
    assert_eq!(series["metric"]["op"], "send", "{native}");
    assert_eq!(series["metric"]["size_bytes"], "32", "{native}");

    let p50 = query_value(&json("P50")).unwrap_or_else(|| {
        panic!(
            "histogram_quantile(0.5) over the native histogram gave no number: {}",
            context()
        )
    });
    assert!(
        p50.is_finite() && p50 > 0.0 && p50 < 1.0,
        "p50 {p50} s is not a plausible latency: {}",
        context()
    );

    let window = tagged(&o.stdout, "WINDOW")
        .and_then(|l| parse_line(l).map(|(_, _, v)| v))
        .unwrap_or_else(|| panic!("no window median in the scrape: {}", context()));
    let ratio = p50 / window;
    assert!(
        (0.5..=2.0).contains(&ratio),
        "Prometheus p50 {p50} s vs the exporter's window median {window} s (ratio {ratio:.2}): {}",
        context()
    );
    eprintln!(
        "prometheus (in the guest): {count} rxe0:1 RC samples, histogram_quantile(0.5) on the native histogram = {:.1} us, exporter window median {:.1} us ({:.0} s after Prometheus started)",
        p50 * 1e6,
        window * 1e6,
        t0.elapsed().as_secs_f64()
    );
}

/// The exporter exports rxe0's port as the kernel shows it:
/// `ibexporter_hca_hw_counter_total{device="rxe0",port="1",counter="sent_pkts"}`
/// is > 0, never above the sysfs file read right after, and grows between
/// two scrapes while the exporter probes (with `ibprobe_probes_total` ok
/// growing too); `rcvd_pkts` is > 0; `ibexporter_hca_port_info` is 1 with
/// `link_layer="Ethernet"` and `netdev="dummy0"`;
/// `ibexporter_hca_port_state_id` is 4 (ACTIVE); and the probe's counters
/// (`ibprobe_probe_context_switches_total`, `..._interrupts_total`) are > 0.
fn rxe_hw_counters_are_exported(lab: &Lab) {
    let _cleanup = Cleanup(lab);
    let log = "exporter-hw.log";
    start_exporter(lab, Node::A, &format!("{LOOPBACK_ARGS} {BUDGET}"), log);
    let port = [("device", "rxe0"), ("port", "1")];
    let sent = [("device", "rxe0"), ("port", "1"), ("counter", "sent_pkts")];
    let rcvd = [("device", "rxe0"), ("port", "1"), ("counter", "rcvd_pkts")];
    let ok = [("target", "rxe0:1"), ("transport", "rc"), ("result", "ok")];
    const HW: &str = "ibexporter_hca_hw_counter_total";
    const PROBES: &str = "ibprobe_probes_total";

    // A first scrape once a probe round has completed.
    let deadline = Instant::now() + Duration::from_secs(90);
    let first = loop {
        let text = scrape(lab, Node::A, log);
        if sample(&text, PROBES, &ok).unwrap_or(0.0) > 0.0 {
            break text;
        }
        assert!(
            Instant::now() < deadline,
            "no completed rxe0:1 probe round within 90 s:\n{}\n{}",
            lines_of(&text, PROBES),
            tail(lab, Node::A, log, 30)
        );
        std::thread::sleep(Duration::from_secs(1));
    };
    let sysfs: f64 = exec(
        lab,
        Node::A,
        "cat /sys/class/infiniband/rxe0/ports/1/hw_counters/sent_pkts",
        60,
    )
    .success()
    .stdout
    .trim()
    .parse()
    .expect("sysfs sent_pkts is a number");
    let sent1 = sample(&first, HW, &sent)
        .unwrap_or_else(|| panic!("no sent_pkts counter:\n{}", lines_of(&first, HW)));
    let ok1 = sample(&first, PROBES, &ok).unwrap_or(0.0);
    assert!(sent1 > 0.0, "sent_pkts {sent1}:\n{}", lines_of(&first, HW));
    assert!(
        sent1 <= sysfs,
        "exported sent_pkts {sent1} is above the sysfs value {sysfs} read after it"
    );
    let rcvd1 = sample(&first, HW, &rcvd).unwrap_or(0.0);
    assert!(rcvd1 > 0.0, "rcvd_pkts {rcvd1}:\n{}", lines_of(&first, HW));

    // The probing thread's counters ride along with the rounds (issue 18):
    // a round under emulation always meets timer interrupts and switches.
    let series = [("target", "rxe0:1"), ("transport", "rc")];
    for family in [
        "ibprobe_probe_context_switches_total",
        "ibprobe_probe_interrupts_total",
    ] {
        let v = sample(&first, family, &series).unwrap_or(0.0);
        assert!(v > 0.0, "{family} {v}:\n{}", lines_of(&first, family));
    }

    let info = sample(
        &first,
        "ibexporter_hca_port_info",
        &[
            ("device", "rxe0"),
            ("port", "1"),
            ("link_layer", "Ethernet"),
            ("netdev", "dummy0"),
        ],
    );
    assert_eq!(
        info,
        Some(1.0),
        "port info:\n{}",
        lines_of(&first, "ibexporter_hca_port_info")
    );
    let state = sample(&first, "ibexporter_hca_port_state_id", &port);
    assert_eq!(
        state,
        Some(4.0),
        "port state (4 = ACTIVE):\n{}",
        lines_of(&first, "ibexporter_hca_port_state_id")
    );

    // Later scrapes: the counter grows while probing goes on.
    let deadline = Instant::now() + Duration::from_secs(90);
    let (sent2, ok2) = loop {
        std::thread::sleep(Duration::from_secs(2));
        let text = scrape(lab, Node::A, log);
        let s = sample(&text, HW, &sent).unwrap_or(0.0);
        let k = sample(&text, PROBES, &ok).unwrap_or(0.0);
        assert!(s >= sent1, "sent_pkts went backwards: {sent1} -> {s}");
        if s > sent1 && k > ok1 {
            break (s, k);
        }
        assert!(
            Instant::now() < deadline,
            "sent_pkts did not grow within 90 s of probing: {sent1} -> {s}, probes ok {ok1} -> {k}\n{}\n{}",
            lines_of(&text, PROBES),
            tail(lab, Node::A, log, 30)
        );
    };
    eprintln!(
        "rxe0 port 1: sent_pkts {sent1} -> {sent2} (sysfs {sysfs} after the first scrape), rcvd_pkts {rcvd1}, probes ok {ok1} -> {ok2}, state_id 4, link_layer Ethernet over dummy0"
    );
}

// ---------------------------------------------------------------------------
// exporter_mesh

const RESPONDER_PORT: u16 = 18515;

/// Each guest's exporter (`--source node-a` / `node-b`) probes the other's
/// responder over RC (`--target <peer>:18515 --target-transport rc`): on
/// each, `ibprobe_latency_window_seconds_count{target="<peer>:18515",
/// transport="rc"}` and `ibprobe_probes_total{...,result="ok"}` become > 0,
/// and `ibexporter_responder_sessions_total{result="ok"}` is > 0 (each
/// answered the other). Then B's exporter is killed: within 30 s A counts
/// failed probes (`result="error"` or `"timeout"`) for B, no more ok ones
/// after that, and A's `/healthz` still answers 200.
fn two_guests_probe_each_other_over_rc(lab: &Lab) {
    let _cleanup = Cleanup(lab);
    let log = "exporter-mesh.log";
    let ip = |node: Node| -> String {
        exec(lab, node, "echo $LAB_IP", 60)
            .success()
            .stdout
            .trim()
            .to_string()
    };
    let (ip_a, ip_b) = (ip(Node::A), ip(Node::B));
    for node in [Node::A, Node::B] {
        start_exporter(
            lab,
            node,
            &format!(
                "--source node-$LAB_NODE --responder 0.0.0.0:{RESPONDER_PORT} --target $LAB_PEER_IP:{RESPONDER_PORT} \
                 --target-transport rc --interval 1s --count 50 --no-probe wakeup,shm,udp {BUDGET}"
            ),
            log,
        );
    }

    let labels = |src: &str, peer: &str| -> Vec<(&'static str, String)> {
        vec![
            ("source", format!("node-{src}")),
            ("target", format!("{peer}:{RESPONDER_PORT}")),
            ("transport", "rc".to_string()),
        ]
    };
    let with = |l: &[(&'static str, String)], extra: Option<(&'static str, &'static str)>| {
        let mut v: Vec<(&str, String)> = l.to_vec();
        if let Some((k, x)) = extra {
            v.push((k, x.to_string()));
        }
        v
    };
    let get = |text: &str, name: &str, l: &[(&str, String)]| -> f64 {
        let want: Vec<(&str, &str)> = l.iter().map(|(k, v)| (*k, v.as_str())).collect();
        sample(text, name, &want).unwrap_or(0.0)
    };

    // Both directions probe and answer.
    for (node, src, peer) in [(Node::A, "a", ip_b.as_str()), (Node::B, "b", ip_a.as_str())] {
        let l = labels(src, peer);
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let text = scrape(lab, node, log);
            let window = get(&text, "ibprobe_latency_window_seconds_count", &l);
            let ok = get(
                &text,
                "ibprobe_probes_total",
                &with(&l, Some(("result", "ok"))),
            );
            let answered = sample(
                &text,
                "ibexporter_responder_sessions_total",
                &[("result", "ok")],
            )
            .unwrap_or(0.0);
            if window > 0.0 && ok > 0.0 && answered > 0.0 {
                let median = get(
                    &text,
                    "ibprobe_latency_window_seconds",
                    &with(&l, Some(("quantile", "0.5"))),
                );
                eprintln!(
                    "node {src} -> {peer}:{RESPONDER_PORT} over RC: window count {window}, probes ok {ok}, round-trip median {:.0} us; node {src} answered {answered} sessions",
                    median * 1e6
                );
                break;
            }
            assert!(
                Instant::now() < deadline,
                "node {src}: after 120 s window count {window}, probes ok {ok}, responder sessions ok {answered}\n{}\n{}\n{}\n{}",
                lines_of(&text, "ibprobe_probes_total"),
                lines_of(&text, "ibprobe_latency_window_seconds_count"),
                lines_of(&text, "ibexporter_responder_sessions_total"),
                tail(lab, node, log, 30)
            );
            std::thread::sleep(Duration::from_secs(2));
        }
    }

    // B dies: A sees failed probes for B within 30 s and stays healthy.
    let l = labels("a", &ip_b);
    let failed = |text: &str| {
        get(
            text,
            "ibprobe_probes_total",
            &with(&l, Some(("result", "error"))),
        ) + get(
            text,
            "ibprobe_probes_total",
            &with(&l, Some(("result", "timeout"))),
        )
    };
    let before = scrape(lab, Node::A, log);
    let failed0 = failed(&before);
    exec(
        lab,
        Node::B,
        "pkill -KILL -x ibexporter; for i in $(seq 50); do pgrep -x ibexporter >/dev/null || exit 0; sleep 0.1; done; exit 1",
        60,
    )
    .success();
    let killed = Instant::now();
    let (failed1, ok_at_detection, took) = loop {
        let text = scrape(lab, Node::A, log);
        let f = failed(&text);
        if f > failed0 {
            let ok = get(
                &text,
                "ibprobe_probes_total",
                &with(&l, Some(("result", "ok"))),
            );
            break (f, ok, killed.elapsed());
        }
        assert!(
            killed.elapsed() < Duration::from_secs(30),
            "node a counted no failed probe for the dead {ip_b} within 30 s ({failed0} -> {f}):\n{}\n{}",
            lines_of(&text, "ibprobe_probes_total"),
            tail(lab, Node::A, log, 30)
        );
        std::thread::sleep(Duration::from_secs(1));
    };
    // Once failures are counted, no probe of the dead peer succeeds any more.
    let health = exec(
        lab,
        Node::A,
        &format!(
            "sleep 3; curl -s -o /dev/null -w '%{{http_code}}' --max-time 30 http://{LISTEN}/healthz"
        ),
        60,
    );
    assert_eq!(
        health.stdout.trim(),
        "200",
        "node a's /healthz after its peer died: {health}\n{}",
        tail(lab, Node::A, log, 30)
    );
    let after = scrape(lab, Node::A, log);
    let ok_later = get(
        &after,
        "ibprobe_probes_total",
        &with(&l, Some(("result", "ok"))),
    );
    assert_eq!(
        ok_later,
        ok_at_detection,
        "probes of the dead peer still succeed:\n{}",
        lines_of(&after, "ibprobe_probes_total")
    );
    let errors = lines_of(&after, "ibprobe_probe_errors_total");
    eprintln!(
        "node b killed: node a counted failed probes {failed0} -> {failed1} after {:.1} s (seen from the host); /healthz 200; {errors}",
        took.as_secs_f64()
    );
}
