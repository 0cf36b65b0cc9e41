//! What users and dashboards read from `ibexporter`, snapshotted (insta,
//! in `tests/snapshots/`): its `--help` text and the name, type and help
//! text of every metric family it serves on a fixture host (two mlx5
//! HCAs with counters, an ibtune profile for drift, the shm and udp
//! probes). A reshaping of the code must leave these files as they are;
//! a new metric or option updates them in the same, reviewed commit.

mod common;

use common::{scrape_until, start};

#[test]
fn help_text_is_as_snapshotted() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ibexporter"))
        .arg("--help")
        .env("COLUMNS", "100")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    // The toolkit's one exit code table, as ibtune and ibprobe print it.
    assert!(text.trim_end().ends_with(&ibhost::exit::help()), "{text}");
    insta::assert_snapshot!("ibexporter-help", text);
    for (sub, name) in [
        ("mesh", "ibexporter-mesh-help"),
        ("localize", "ibexporter-localize-help"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_ibexporter"))
            .args([sub, "--help"])
            .env("COLUMNS", "100")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        insta::assert_snapshot!(name, String::from_utf8(out.stdout).unwrap());
    }
}

#[test]
fn metric_families_are_as_snapshotted() {
    let root = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/thesis-2s-mlx5"
    );
    let profile = concat!(env!("CARGO_MANIFEST_DIR"), "/../profiles/thesis-2hca.toml");
    let server = start(&[
        "--interval",
        "1s",
        "--count",
        "20",
        "--no-probe",
        "wakeup",
        "--root",
        root,
        "--profile",
        profile,
    ]);
    // The probe counters' families appear with the first round's counters.
    let body = scrape_until(&server.addr, 30, "udp and shm rounds", |m| {
        m.contains("ibprobe_probe_context_switches_total{")
            && m.contains("ibprobe_probes_total{")
            && m.contains("transport=\"udp\"")
            && m.contains("transport=\"shm\"")
    });
    let mut families: Vec<&str> = body
        .lines()
        .filter(|l| l.starts_with("# HELP ") || l.starts_with("# TYPE "))
        // Families only a PMU or a readable MSR gives (absent in CI's VM,
        // present on bare metal): left out so the snapshot holds anywhere.
        .filter(|l| {
            !["cycles", "instructions", "cache_misses", "smis"]
                .iter()
                .any(|c| l.contains(&format!("ibprobe_probe_{c}_total")))
        })
        .collect();
    families.sort_unstable();
    families.dedup();
    assert!(families.len() > 20, "{body}");
    insta::assert_snapshot!("ibexporter-metric-families", families.join("\n"));
}
