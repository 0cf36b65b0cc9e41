//! The decode-and-check path of a server, under random and mutated
//! Hellos: a frame's JSON body is decoded as `ibprobe server` and the
//! responder decode it, then goes through the one check
//! (`session::admit`) that decides what the server opens and how much
//! memory it takes. Extreme numbers, wrong types, missing fields and deep
//! nesting: no panic, and whatever is admitted stays within every bound
//! of `spec::peer` and the memory cap.
//!
//! `IBPROBE_HELLO_CASES` sets the number of cases (default 100,000).

use std::cell::Cell;
use std::time::{Duration, Instant};

use ibprobe::probe::session::oob::{Hello, MAX_BODY};
use ibprobe::probe::session::{admit, MemoryCap};
use ibprobe::spec::{peer, session_memory, ChannelSpec, Transport, SLOT_FORMAT};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{json, Value};

/// Valid Hellos of each kind a client sends: round trips over each
/// transport, a stream, a loggp stream, a model stream.
fn bases() -> Vec<Value> {
    let stream = json!({
        "spec": { "slots": 64, "slot_size": 4096, "window": 64, "batch": 1, "flush": null,
                  "pipeline": null, "credit_return": "piggyback", "credit_batch": 1 },
        "warmup": 100, "consume_delay": { "secs": 0, "nanos": 0 },
        "timeout": { "secs": 1, "nanos": 0 },
    });
    let receiver = json!({ "poll": "busy", "consume_delay": { "secs": 0, "nanos": 20000 } });
    let mut v = Vec::new();
    for t in ["udp", "shm", "rc", "uc", "ud", "model"] {
        let mut params = json!({ "op": "send", "poll": "busy", "receiver": receiver });
        if t == "model" {
            params["model"] = json!("L=5us,os=1us,or=1.5us,g=2us,G=1ns");
        }
        v.push(json!({ "transport": t, "size": 32, "params": params,
                       "endpoint": { "port": 9 } }));
        let mut params =
            json!({ "op": "send", "poll": "busy", "stream": stream, "slot_format": SLOT_FORMAT });
        if t == "model" {
            params["model"] = json!("L=5us,os=1us,or=1.5us,g=2us,G=1ns");
        }
        v.push(json!({ "transport": t, "size": 32, "params": params,
                       "endpoint": { "port": 9 } }));
    }
    let mut loggp = v[1].clone();
    loggp["params"]["stream"]["workload"] = json!("loggp");
    v.push(loggp);
    v
}

/// Where a mutation lands (JSON pointers into a Hello).
const PATHS: &[&str] = &[
    "",
    "/transport",
    "/size",
    "/params",
    "/params/op",
    "/params/poll",
    "/params/model",
    "/params/hw_timestamps",
    "/params/receiver",
    "/params/receiver/poll",
    "/params/receiver/consume_delay",
    "/params/receiver/consume_delay/secs",
    "/params/receiver/consume_delay/nanos",
    "/params/stream",
    "/params/stream/spec",
    "/params/stream/spec/slots",
    "/params/stream/spec/slot_size",
    "/params/stream/spec/window",
    "/params/stream/spec/batch",
    "/params/stream/spec/flush",
    "/params/stream/spec/pipeline",
    "/params/stream/spec/credit_return",
    "/params/stream/spec/credit_batch",
    "/params/stream/warmup",
    "/params/stream/consume_delay",
    "/params/stream/timeout",
    "/params/stream/timeout/secs",
    "/params/stream/timeout/nanos",
    "/params/stream/workload",
    "/params/slot_format",
    "/endpoint",
    "/endpoint/port",
];

/// Values a mutation writes: extremes, wrong types, nesting.
fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        prop_oneof![
            Just(0u64),
            Just(1),
            Just(u64::from(u32::MAX)),
            Just(u64::MAX),
            Just(1 << 62),
            Just(4096),
            Just(65507),
            Just(1 << 20),
            any::<u64>(),
            0u64..10_000,
        ]
        .prop_map(|n| json!(n)),
        any::<i64>().prop_map(|n| json!(n)),
        prop_oneof![Just(f64::MAX), Just(-1.5), Just(1e-300), any::<f64>()]
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        prop_oneof![
            Just("udp".to_string()),
            Just("model".into()),
            Just("loggp".into()),
            Just("spin".into()),
            Just("L=9999ms,os=9999ms,or=1us,g=1us,G=9999ms".into()),
            Just("send".into()),
            Just("event".into()),
            "\\PC{0,12}",
        ]
        .prop_map(Value::String),
        (any::<u64>(), any::<u32>()).prop_map(|(s, n)| json!({ "secs": s, "nanos": n })),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// One mutation: replace the value at a path, remove it, or nest it deep.
#[derive(Clone, Debug)]
enum Mutation {
    Set(usize, Value),
    Remove(usize),
    Nest(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let path = 0..PATHS.len();
    prop_oneof![
        6 => (path.clone(), value()).prop_map(|(p, v)| Mutation::Set(p, v)),
        2 => path.clone().prop_map(Mutation::Remove),
        1 => (path, 1usize..400).prop_map(|(p, d)| Mutation::Nest(p, d)),
    ]
}

/// The pointer's parent and last key.
fn split(ptr: &str) -> Option<(&str, &str)> {
    ptr.rsplit_once('/')
}

fn apply(v: &mut Value, m: &Mutation) {
    match m {
        Mutation::Set(p, x) => match v.pointer_mut(PATHS[*p]) {
            Some(slot) => *slot = x.clone(),
            None => {
                if let Some((parent, key)) = split(PATHS[*p]) {
                    if let Some(Value::Object(o)) = v.pointer_mut(parent) {
                        o.insert(key.to_string(), x.clone());
                    }
                }
            }
        },
        Mutation::Remove(p) => {
            if let Some((parent, key)) = split(PATHS[*p]) {
                if let Some(Value::Object(o)) = v.pointer_mut(parent) {
                    o.remove(key);
                }
            }
        }
        Mutation::Nest(p, depth) => {
            if let Some(slot) = v.pointer_mut(PATHS[*p]) {
                let mut x = slot.take();
                for _ in 0..*depth {
                    x = Value::Array(vec![x]);
                }
                *slot = x;
            }
        }
    }
}

/// The body bytes: the mutated JSON, or (sometimes) raw text: a deep
/// nest of brackets, a truncation, or the JSON with a byte flipped.
#[derive(Clone, Debug)]
enum Body {
    Json,
    Deep(usize),
    Cut(usize),
    Flip(usize, u8),
}

fn body() -> impl Strategy<Value = Body> {
    prop_oneof![
        12 => Just(Body::Json),
        1 => (1usize..20_000).prop_map(Body::Deep),
        1 => any::<usize>().prop_map(Body::Cut),
        2 => (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Body::Flip(i, b)),
    ]
}

fn bytes(v: &Value, b: &Body) -> Vec<u8> {
    let mut s = serde_json::to_vec(v).unwrap();
    match *b {
        Body::Json => {}
        Body::Deep(d) => {
            s = format!(
                r#"{{"transport":"udp","size":32,"endpoint":null,"params":{}{}}}"#,
                "[".repeat(d),
                "]".repeat(d)
            )
            .into_bytes()
        }
        Body::Cut(i) => s.truncate(i % (s.len() + 1)),
        Body::Flip(i, x) => {
            let n = s.len();
            s[i % n] = x;
        }
    }
    s
}

/// What a server would open for `hello`: its channel for the client's
/// transport and size (the server's own knobs are the defaults here).
fn server_spec(hello: &Hello) -> ChannelSpec {
    let t = hello.transport.parse().unwrap_or(Transport::Udp);
    ChannelSpec::new(t, hello.size)
}

#[test]
fn random_and_mutated_hellos_never_panic_and_what_is_admitted_is_bounded() {
    let cases: u32 = std::env::var("IBPROBE_HELLO_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let cap = MemoryCap {
        bytes: peer::DEFAULT_MAX_SESSION_MEMORY,
        raise: "--max-session-memory",
    };
    let bases = bases();
    let n = bases.len();
    let strategy = (0..n, prop::collection::vec(mutation(), 0..4), body());
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let (decoded, admitted, ran) = (Cell::new(0u64), Cell::new(0u64), Cell::new(0u64));
    let t = Instant::now();
    runner
        .run(&strategy, |(base, muts, b)| {
            ran.set(ran.get() + 1);
            let mut v = bases[base].clone();
            for m in &muts {
                apply(&mut v, m);
            }
            let body = bytes(&v, &b);
            prop_assert!(body.len() <= MAX_BODY as usize || matches!(b, Body::Deep(_)));
            let Ok(hello) = serde_json::from_slice::<Hello>(&body) else {
                return Ok(());
            };
            decoded.set(decoded.get() + 1);
            let spec = server_spec(&hello);
            let Ok(a) = admit(&hello, &spec, cap) else {
                return Ok(());
            };
            admitted.set(admitted.get() + 1);
            prop_assert!(a.memory <= cap.bytes, "{} > cap: {v}", a.memory);
            prop_assert_eq!(
                a.memory,
                session_memory(&a.spec, a.stream.as_ref().map(|s| &s.spec))
            );
            prop_assert!(a.spec.check().is_ok());
            prop_assert!(a.receiver.consume_delay <= peer::MAX_CONSUME_DELAY);
            if let Some(s) = &a.stream {
                prop_assert!(s.spec.check(&a.spec).is_ok());
                prop_assert!(s.spec.slots <= peer::MAX_SLOTS && s.spec.window <= s.spec.slots);
                prop_assert!(s.spec.batch <= peer::MAX_BATCH);
                prop_assert!(s.timeout <= peer::MAX_TIMEOUT);
                prop_assert!(s.consume_delay <= peer::MAX_CONSUME_DELAY);
                prop_assert!(s.spec.flush.unwrap_or_default() <= peer::MAX_FLUSH);
                prop_assert!(s.warmup <= peer::MAX_WARMUP);
            }
            if let Some(m) = a
                .spec
                .model
                .filter(|_| a.spec.transport == Transport::Model)
            {
                let bytes = a.stream.as_ref().map_or(a.spec.size, |s| s.spec.slot_size);
                let max_fs = peer::MAX_MODEL_WAIT.as_nanos() as u64 * 1_000_000;
                prop_assert!(m.message_fs(bytes) <= max_fs);
            }
            Ok(())
        })
        .unwrap();
    let took = t.elapsed();
    let (ran, decoded, admitted) = (ran.get(), decoded.get(), admitted.get());
    let hwm_kib: u64 = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    eprintln!(
        "{ran} Hellos ({decoded} decoded, {admitted} admitted) through decode and admit in {took:?}, VmHWM {hwm_kib} KiB"
    );
    // Nothing a Hello says is allocated on its word: the test's own
    // strings (a 40 KB nest at most) are all the memory there is.
    assert!(hwm_kib < 128 << 10, "VmHWM {hwm_kib} KiB");
    assert_eq!(ran, u64::from(cases));
    // Not vacuous: some mutated Hellos are still good, many are not.
    assert!(admitted > u64::from(cases) / 100, "{admitted} admitted");
    assert!(
        decoded - admitted > u64::from(cases) / 10,
        "{decoded} decoded"
    );
    assert!(took < Duration::from_secs(600));
}

/// serde_json's recursion limit (128) holds for a Hello's free-form
/// `params` and `endpoint`: nesting far deeper is an error, not a stack
/// overflow.
#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    for d in [129usize, 10_000, 500_000] {
        let body = format!(
            r#"{{"transport":"udp","size":32,"endpoint":{}1{},"params":{{}}}}"#,
            "[".repeat(d),
            "]".repeat(d)
        );
        let e = serde_json::from_str::<Hello>(&body).unwrap_err();
        assert!(e.to_string().contains("recursion limit"), "{d}: {e}");
    }
    let ok = format!(
        r#"{{"transport":"udp","size":32,"endpoint":{}1{},"params":{{}}}}"#,
        "[".repeat(100),
        "]".repeat(100)
    );
    assert!(serde_json::from_str::<Hello>(&ok).is_ok());
}
