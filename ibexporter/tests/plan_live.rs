//! The probe plan in a running exporter (issue 17): a file_sd list that
//! names this exporter (its responder) and 59 others in three racks puts
//! it on `rack-mesh`, probing its own rack plus its share of rack pairs;
//! a host added to or removed from the list reshapes the plan within one
//! refresh, and no round ever probes more than the plan allows (no storm).

mod common;

use common::{free_port, sample, scrape_until, start};

fn write_list(path: &std::path::Path, me: u16, extra: &[u16], missing: &[u16]) {
    // 60 members: this exporter and 59 dead ports, 20 per rack.
    let mut racks: Vec<Vec<String>> = vec![Vec::new(); 3];
    racks[0].push(format!("127.0.0.1:{me}"));
    for i in 1..60u16 {
        let port = 30000 + i;
        if !missing.contains(&port) {
            racks[usize::from(i / 20)].push(format!("127.0.0.1:{port}"));
        }
    }
    for &p in extra {
        racks[0].push(format!("127.0.0.1:{p}"));
    }
    let groups: Vec<serde_json::Value> = racks
        .iter()
        .enumerate()
        .map(|(r, t)| serde_json::json!({"targets": t, "labels": {"rack": format!("r{r}")}}))
        .collect();
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_string(&groups).unwrap()).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn value(m: &str, name: &str) -> f64 {
    sample(m, name, &[]).unwrap_or(-1.0)
}

#[test]
fn a_list_change_reshapes_the_plan_within_one_refresh_without_a_storm() {
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("pinglist.json");
    let me = free_port();
    write_list(&list, me, &[], &[]);
    let cfg = dir.path().join("ibexporter.toml");
    std::fs::write(
        &cfg,
        format!(
            "[local]\nhca_loopback = false\nreference = []\nhost_wakeup = false\n\n\
             [probe]\ninterval = \"1s\"\nprobes_per_interval = 5\ntimeout = \"100ms\"\ntransport = \"udp\"\n\n\
             [targets]\nplan = \"rack-mesh\"\n\n\
             [[targets.file_sd]]\npath = {:?}\nrefresh = \"1s\"\n",
            list.display().to_string()
        ),
    )
    .unwrap();
    let responder = format!("127.0.0.1:{me}");
    let a = start(&["--config", cfg.to_str().unwrap(), "--responder", &responder]);
    let m = scrape_until(&a.addr, 30, "the rack-mesh plan in force", |m| {
        value(m, "ibexporter_plan_members ") == 60.0
            && value(m, "ibexporter_plan_round_targets ") > 0.0
    });
    assert!(
        m.contains("ibexporter_plan{plan=\"rack-mesh\",source_rack=\"r0\"} 1"),
        "{m}"
    );
    assert_eq!(value(&m, "ibexporter_plan_racks "), 3.0);
    assert_eq!(value(&m, "ibexporter_plan_rack_pairs "), 6.0);
    assert_eq!(value(&m, "ibexporter_plan_rack_pairs_covered "), 6.0);
    assert!(
        m.contains("ibexporter_plan_peer_rack{target=\"127.0.0.1:30045\",target_rack=\"r2\"} 1"),
        "{m}"
    );
    // Own rack (19) plus at most one of the 2 rack pairs dealt over 20 members.
    let in_round = |m: &str| value(m, "ibexporter_plan_round_targets ");
    let t = in_round(&m);
    assert!((19.0..=20.0).contains(&t), "{t}");

    // A host joins rack r0: the plan has 61 members after one refresh
    // (1 s) and a round; this exporter gains one target, nobody probes all.
    write_list(&list, me, &[30100], &[]);
    let most = std::cell::Cell::new(0.0f64);
    let m = scrape_until(&a.addr, 10, "the new member in the plan", |m| {
        most.set(most.get().max(in_round(m)));
        value(m, "ibexporter_plan_members ") == 61.0 && in_round(m) >= 20.0
    });
    assert!(in_round(&m) <= 21.0, "{m}");
    assert!(most.get() <= 21.0, "a round probed {} targets", most.get());
    // A host of r1 leaves: 60 members again, the round is unchanged in size.
    write_list(&list, me, &[30100], &[30025]);
    // Its series go at the next round.
    let m = scrape_until(&a.addr, 10, "the member and its series gone", |m| {
        value(m, "ibexporter_plan_members ") == 60.0 && !m.contains("127.0.0.1:30025\"")
    });
    assert!((20.0..=21.0).contains(&in_round(&m)), "{m}");
}
