//! What `deploy/` ships, checked with the real tools: the systemd unit
//! (`systemd-analyze verify`), the Prometheus configuration (Debian 12's
//! `promtool check config`, as shipped and with its commented second job
//! enabled) and the Kubernetes manifest (its cross-references, then the
//! exporter started with the DaemonSet's own arguments and ConfigMap).

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{get, sample, scrape_until, start};
use serde::Deserialize;
use serde_json::Value;

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

fn exporter() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_ibexporter"))
}

/// Runs the exporter with `args` and says whether it exited 0.
fn exits_0(args: &[&str]) -> Result<(), String> {
    let out = Command::new(exporter()).args(args).output().unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ibexporter {args:?}: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

#[test]
fn the_systemd_unit_verifies_and_its_command_line_is_valid() {
    let unit = repo("deploy/systemd/ibexporter.service");
    ibtools_tests::systemd::verify_unit(&unit, &[("ibexporter", &exporter())], "")
        .unwrap_or_else(|e| panic!("{e}"));
    // Its flags parse (an unknown one fails before --help)...
    let mut args = ibtools_tests::systemd::exec_start_args(&unit, "ibexporter", "")
        .unwrap_or_else(|e| panic!("{e}"));
    args.push("--help".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    exits_0(&args).unwrap();
    // ...and the config the unit's header installs there is valid.
    let text = fs::read_to_string(&unit).unwrap();
    assert!(
        text.contains(
            "install -m 0644 ibexporter/examples/ibexporter.toml /etc/ibexporter/ibexporter.toml"
        ),
        "the unit's install steps changed; update this test"
    );
    let example = repo("ibexporter/examples/ibexporter.toml");
    exits_0(&["--check-config", example.to_str().unwrap()]).unwrap();
}

/// The shipped file with its pinglist path pointed at the repository's
/// copy (promtool warns about a missing file_sd file).
fn prometheus_config(dir: &Path, enable_second_job: bool) -> PathBuf {
    let shipped = fs::read_to_string(repo("deploy/prometheus/prometheus.yml")).unwrap();
    let pinglist = repo("deploy/prometheus/pinglist.json");
    // Its rule_files glob, pointed at the repository's rules: promtool
    // checks every rule file it matches.
    let rules = repo("deploy/prometheus/rules/");
    let mut text = shipped
        .replace("/etc/ibexporter/pinglist.json", pinglist.to_str().unwrap())
        .replace("/etc/prometheus/rules/", rules.to_str().unwrap());
    if enable_second_job {
        let marker = "  # - job_name: ibexporter-classic";
        let start = text.find(marker).expect("the commented second job");
        let (head, tail) = text.split_at(start);
        let mut out = head.to_string();
        let mut lines = tail.lines();
        for l in lines.by_ref() {
            match l.strip_prefix("  # ") {
                Some(rest) => out.push_str(&format!("  {rest}\n")),
                None => {
                    out.push_str(l);
                    out.push('\n');
                    break;
                }
            }
        }
        for l in lines {
            out.push_str(l);
            out.push('\n');
        }
        assert!(
            out.contains("\n  - job_name: ibexporter-classic\n"),
            "{out}"
        );
        text = out;
    }
    let p = dir.join(if enable_second_job {
        "two-jobs.yml"
    } else {
        "prometheus.yml"
    });
    fs::write(&p, text).unwrap();
    p
}

#[test]
fn the_prometheus_config_loads_in_debians_prometheus() {
    let dir = tempfile::tempdir().unwrap();
    for second in [false, true] {
        let p = prometheus_config(dir.path(), second);
        ibtools_tests::prom::promtool_check_config(&p)
            .unwrap_or_else(|e| panic!("{e}\n{}", fs::read_to_string(&p).unwrap_or_default()));
    }
    // The same pinglist feeds the exporter (`[[targets.file_sd]]`): with
    // its example.org names made resolvable (127.0.0.N), its 4 hosts and
    // their meta labels (__transport, __sizes) become 4 targets.
    let text = fs::read_to_string(repo("deploy/prometheus/pinglist.json")).unwrap();
    let mut local = text.clone();
    for n in 1..=4 {
        local = local.replace(
            &format!("rdma-node-0{n}.example.org"),
            &format!("127.0.0.{n}"),
        );
    }
    assert_ne!(
        local, text,
        "the pinglist's hosts changed; update this test"
    );
    let pinglist = dir.path().join("pinglist.json");
    fs::write(&pinglist, local).unwrap();
    let cfg = dir.path().join("ibexporter.toml");
    fs::write(
        &cfg,
        format!(
            "[local]\nhca_loopback = false\nreference = []\nhost_wakeup = false\n\n\
             [[targets.file_sd]]\npath = {:?}\nport = 18515\n",
            pinglist.display()
        ),
    )
    .unwrap();
    let s = start(&["--config", cfg.to_str().unwrap()]);
    scrape_until(&s.addr, 20, "4 file_sd targets", |m| {
        sample(m, "ibexporter_targets{", &["origin=\"file_sd\""]) == Some(4.0)
    });
}

/// Every document of the manifest, as JSON values.
fn manifest() -> Vec<Value> {
    let text = fs::read_to_string(repo("deploy/kubernetes/ibexporter-daemonset.yaml")).unwrap();
    serde_norway::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).expect("valid YAML"))
        .filter(|v| !v.is_null())
        .collect()
}

fn of_kind<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in the manifest"))
}

#[test]
fn the_daemonset_runs_the_exporter_it_describes() {
    let docs = manifest();
    let ns = of_kind(&docs, "Namespace")["metadata"]["name"]
        .as_str()
        .unwrap();
    let cm = of_kind(&docs, "ConfigMap");
    let svc = of_kind(&docs, "Service");
    let ds = of_kind(&docs, "DaemonSet");
    for d in [cm, svc, ds] {
        assert_eq!(d["metadata"]["namespace"], ns, "{d}");
    }
    let pod = &ds["spec"]["template"];
    let spec = &pod["spec"];
    assert_eq!(spec["hostNetwork"], true);
    assert_eq!(spec["dnsPolicy"], "ClusterFirstWithHostNet");
    assert_eq!(spec["securityContext"]["runAsNonRoot"], true);
    assert_eq!(svc["spec"]["selector"], pod["metadata"]["labels"]);
    assert_eq!(
        ds["spec"]["selector"]["matchLabels"],
        pod["metadata"]["labels"]
    );
    assert_eq!(
        svc["spec"]["clusterIP"], "None",
        "headless, for DNS discovery"
    );

    let c = &spec["containers"][0];
    let caps = &c["securityContext"]["capabilities"];
    assert_eq!(caps["drop"], serde_json::json!(["ALL"]));
    assert_eq!(caps["add"], serde_json::json!(["IPC_LOCK", "SYS_NICE"]));
    let mount = |name: &str| {
        c["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == name)
            .unwrap_or_else(|| panic!("no mount {name}"))["mountPath"]
            .clone()
    };
    let host_path = |name: &str| {
        spec["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("no volume {name}"))["hostPath"]["path"]
            .clone()
    };
    assert_eq!(host_path("infiniband"), "/dev/infiniband");
    assert_eq!(mount("infiniband"), "/dev/infiniband");
    for (vol, host) in [
        ("host-sys", "/sys"),
        ("host-proc", "/proc"),
        ("host-etc", "/etc"),
    ] {
        assert_eq!(host_path(vol), host);
        assert_eq!(
            mount(vol),
            format!("/host{host}"),
            "--root=/host sees the host's {host}"
        );
    }

    // The ConfigMap's config, and what the other objects assume of it.
    let toml_text = cm["data"]["ibexporter.toml"].as_str().unwrap();
    let cfg: toml::Value = toml::from_str(toml_text).unwrap();
    let port_of = |s: &str| s.rsplit(':').next().unwrap().parse::<u64>().unwrap();
    let listen = port_of(cfg["listen"].as_str().unwrap());
    let responder = port_of(cfg["responder"]["bind"].as_str().unwrap());
    let port_named = |ports: &Value, name: &str, key: &str| {
        ports
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("no port {name}"))[key]
            .as_u64()
            .unwrap()
    };
    assert_eq!(port_named(&c["ports"], "metrics", "containerPort"), listen);
    assert_eq!(
        port_named(&c["ports"], "responder-tcp", "containerPort"),
        responder
    );
    assert_eq!(port_named(&svc["spec"]["ports"], "metrics", "port"), listen);
    assert_eq!(
        port_named(&svc["spec"]["ports"], "responder-tcp", "port"),
        responder
    );
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["readinessProbe"]["httpGet"]["port"], "metrics");
    let dns = &cfg["targets"]["dns"][0];
    assert_eq!(
        dns["name"].as_str().unwrap(),
        format!(
            "{}.{ns}.svc.cluster.local",
            svc["metadata"]["name"].as_str().unwrap()
        ),
        "the DNS target is the headless Service"
    );
    assert_eq!(dns["port"].as_integer().unwrap() as u64, responder);

    // The exporter with the container's own arguments: the config from
    // the ConfigMap, $(NODE_NAME) filled in, the host root at / here
    // (the pod sees it at /host), and only the listen and responder
    // addresses moved to free loopback ports.
    let dir = tempfile::tempdir().unwrap();
    let cfg_path = dir.path().join("ibexporter.toml");
    fs::write(&cfg_path, toml_text).unwrap();
    exits_0(&["--check-config", cfg_path.to_str().unwrap()]).unwrap();
    let args: Vec<String> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            a.as_str()
                .unwrap()
                .replace(
                    "/etc/ibexporter/ibexporter.toml",
                    cfg_path.to_str().unwrap(),
                )
                .replace("$(NODE_NAME)", "node-a")
                .replace("--root=/host", "--root=/")
        })
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let s = start(&args);
    let m = scrape_until(&s.addr, 40, "node-a's local probes", |m| {
        sample(
            m,
            "ibprobe_probes_total{",
            &["source=\"node-a\"", "result=\"ok\""],
        )
        .unwrap_or(0.0)
            > 0.0
    });
    assert!(m.contains("ibexporter_targets{origin=\"dns\"}"), "{m}");
    assert!(get(&s.addr, "/healthz").unwrap().contains("200"));
}
