//! `probe::session::hello`.

use ibprobe::probe::session::oob::Hello;
use ibprobe::probe::session::*;
use ibprobe::spec::{StreamSpec, SLOT_FORMAT};
use serde_json::{json, Value};
use std::time::Duration;

fn stream_hello(transport: &str, slots: u32, slot_size: usize) -> Hello {
    let sh = StreamHello {
        spec: StreamSpec {
            slots,
            window: slots,
            slot_size,
            ..StreamSpec::default()
        },
        warmup: 0,
        consume_delay: Duration::ZERO,
        timeout: Duration::from_secs(1),
        workload: None,
    };
    Hello {
        transport: transport.into(),
        size: 32,
        params: json!({ "op": "send", "stream": sh, "slot_format": SLOT_FORMAT }),
        endpoint: Value::Null,
    }
}

/// The verbs transports cannot run here (no RDMA device outside the
/// lab): their slot pools and echo buffers are bounded by the same
/// check, before `verbs::prepare` would register anything.
#[test]
fn verbs_sessions_are_bounded_by_the_same_check() {
    let cap = MemoryCap::default_with("--max-session-memory");
    for t in ["rc", "uc"] {
        let h = stream_hello(t, 4096, 1 << 20);
        let spec = requested(&h, None).unwrap();
        let e = admit(&h, &spec, cap).unwrap_err();
        assert!(
            e.contains("12.0 GiB") && e.contains("--max-session-memory"),
            "{e}"
        );
        let h = stream_hello(t, 64, 4096);
        let a = admit(&h, &requested(&h, None).unwrap(), cap).unwrap();
        // Two pools of 64 slots of 4 KiB (+ a cache line each) and the
        // receiving queue: about 0.8 MiB.
        assert!((512 << 10..1 << 20).contains(&a.memory), "{}", a.memory);
    }
    let h = stream_hello("rc", 1 << 20, 64);
    let e = admit(&h, &requested(&h, None).unwrap(), cap).unwrap_err();
    assert!(e.contains("at most 4096 slots"), "{e}");
    // A round trip of 1 GiB messages over rc: its send and receive
    // rings would take many GiB.
    let mut h = stream_hello("rc", 64, 4096);
    h.params = json!({ "op": "send" });
    h.size = 1 << 30;
    let e = admit(&h, &requested(&h, None).unwrap(), cap).unwrap_err();
    assert!(
        e.contains("--size 1073741824 B") && e.contains("smaller --size"),
        "{e}"
    );
}

#[test]
fn a_model_hello_is_checked_with_its_slot_size() {
    let cap = MemoryCap::default_with("--max-session-memory");
    let mut h = stream_hello("model", 64, 65_536);
    h.params["model"] = json!("L=1us,os=1us,or=1us,g=1us,G=1us");
    let spec = requested(&h, None).unwrap();
    // 64 KiB x 1 us per byte: 65 ms per slot.
    let e = admit(&h, &spec, cap).unwrap_err();
    assert!(
        e.contains("65536 B messages") && e.contains("at most 50ms"),
        "{e}"
    );
    h.params["model"] = json!("L=1us,os=1us,or=1us,g=1us,G=1ps");
    assert!(admit(&h, &spec, cap).is_ok());
    h.params["model"] = json!("L=1us");
    assert!(admit(&h, &spec, cap).unwrap_err().contains("missing"));
}

/// A client whose Hello names another stream slot layout, or none (an
/// ibprobe from before the compact slot), is refused before anything is
/// opened, with the layouts named and what to do.
#[test]
fn a_client_of_another_slot_layout_is_refused() {
    let cap = MemoryCap::default_with("--max-session-memory");
    let mut h = stream_hello("udp", 64, 4096);
    assert!(admit(&h, &requested(&h, None).unwrap(), cap).is_ok());
    for (said, names) in [
        (None, "an older layout"),
        (Some(json!(1)), "layout 1"),
        (Some(json!("2")), "layout \"2\""),
    ] {
        match said {
            None => {
                h.params.as_object_mut().unwrap().remove("slot_format");
            }
            Some(v) => h.params["slot_format"] = v,
        }
        let e = admit(&h, &requested(&h, None).unwrap(), cap).unwrap_err();
        assert!(
            e.contains(names)
                && e.contains(&format!("this ibprobe in layout {SLOT_FORMAT}"))
                && e.contains("run the same ibprobe version on both ends"),
            "{e}"
        );
    }
}
