//! "No panic on any input" for profile parsing and resolving.
//!
//! Three generators: (a) arbitrary strings (Unicode and TOML-ish
//! characters), (b) structured profiles built from a grammar of the real
//! section names, keys and values, so that many parse and reach
//! [`ibtune::profile::resolve`], and (c) byte-level mutations of the
//! shipped profiles. Every parsed profile is resolved against the thesis
//! fixture host; parse and resolve must return `Ok` or `Err`, never panic.

use ibtune::host::{self, Host, HostRoot};
use ibtune::profile::{self, Profile, ProfileError};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use std::cell::Cell;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
        .join(name)
}

fn thesis() -> (HostRoot, Host) {
    let root = HostRoot::new(fixture("thesis-2s-mlx5")).unwrap();
    let host = host::discover(&root).unwrap();
    (root, host)
}

/// Outcome of one input, for the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reached {
    ParseErr,
    ResolveErr,
    ResolveOk,
}

/// Parses and resolves `text`; checks that errors carry a position inside
/// the text and a non-empty message.
fn check(text: &str, root: &HostRoot, host: &Host) -> Result<Reached, TestCaseError> {
    let path = Path::new("fuzz.toml");
    let lines = text.split('\n').count();
    let check_err = |e: &ProfileError| -> Result<(), TestCaseError> {
        let s = e.to_string();
        prop_assert!(s.starts_with("fuzz.toml:"), "{s}");
        if let ProfileError::At { pos, message, .. } = e {
            prop_assert!(
                pos.line >= 1 && pos.line <= lines,
                "line {} of {lines}: {s}",
                pos.line
            );
            prop_assert!(pos.column >= 1, "{s}");
            prop_assert!(!message.is_empty(), "{s}");
        }
        Ok(())
    };
    let p = match Profile::parse(path, text) {
        Ok(p) => p,
        Err(e) => {
            check_err(&e)?;
            return Ok(Reached::ParseErr);
        }
    };
    match profile::resolve(&p, host, root) {
        Ok(r) => {
            prop_assert_eq!(&r.name, p.name());
            // Every cpuset's CPUs exist on the host.
            for cs in &r.cpusets {
                prop_assert!(!cs.cpus.is_empty());
                prop_assert!(cs.cpus.is_subset(&host.cpus.online), "{}", cs.cpus);
            }
            Ok(Reached::ResolveOk)
        }
        Err(e) => {
            if std::env::var("FD").is_ok() { eprintln!("RE {:?}", e.to_string()); }
            check_err(&e)?;
            Ok(Reached::ResolveErr)
        }
    }
}

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    })
}

// ---------------------------------------------------------------- (a) arbitrary strings

#[test]
fn arbitrary_strings_never_panic() {
    let (root, host) = thesis();
    let strategy = prop_oneof![
        any::<String>(),
        // Characters TOML cares about, so some inputs get past the lexer.
        "[\\[\\]a-z_=\"'{}0-9 ,.\\-\n#]{0,200}",
        // A valid header followed by noise.
        "[\\[\\]a-z_=\"0-9 ,\\-\n]{0,120}".prop_map(|s| format!("[profile]\nname = \"x\"\n{s}")),
    ];
    runner(256)
        .run(&strategy, |s| check(&s, &root, &host).map(|_| ()))
        .unwrap();
}

// ---------------------------------------------------------------- (b) structured profiles

/// Values of any type, used now and then in place of a well-typed one.
const ANY: &[&str] = &[
    "0",
    "-1",
    "-5",
    "7",
    "99",
    "2147483648",
    "9223372036854775807",
    "true",
    "false",
    "\"\"",
    "\"off\"",
    "\"local\"",
    "\"x y\"",
    "[]",
    "[0]",
    "[99]",
    "[\"a\"]",
    "{ a = 1 }",
    "1.5",
];

const NAMES: &[&str] = &[
    "\"rt\"",
    "\"rt0\"",
    "\"a\"",
    "\"b\"",
    "\"x y\"",
    "\"\"",
    "\"real-time-0\"",
    "\"é\"",
];
const CPUS: &[&str] = &[
    "[16, 18, 20, 22]",
    "[1]",
    "[0]",
    "[]",
    "[99]",
    "[23, 23]",

    "\"0-23\"",
    "\"0-11\"",
    "\"12-23\"",
    "\"2-5\"",
    "\"4-7\"",
    "\"16,18,20,22\"",
    "\"5-3\"",
    "\"0-65536\"",
    "\"0-99999999\"",
    "\",\"",
    "\"\"",
    "\"local\"",
    "\"cpuset:rt\"",
    "\"cpuset:a\"",
    "\"cpuset:nope\"",
    "\"2 cores local to mlx5_0\"",
    "\"4 cores local to mlx5_1\"",
    "\"1 core local to mlx5_0\"",
    "\"0 cores local to mlx5_0\"",
    "\"12 cores local to mlx5_0\"",
    "\"99 cores local to mlx5_1\"",
    "\"18446744073709551615 cores local to mlx5_0\"",
    "\"2 cores local to mlx5_9\"",
    "\"2 cores near mlx5_0\"",
];
const MEMS: &[&str] = &[
    "\"local\"",
    "\"0\"",
    "\"1\"",
    "\"0-1\"",
    "[0]",
    "[1]",
    "[7]",
    "[]",
    "\"\"",
    "\"0-9\"",
];
const BOOL: &[&str] = &["true", "false"];
const DEVICES: &[&str] = &["\"mlx5_0\"", "\"mlx5_1\"", "\"mlx5_9\"", "\"\"", "\"rxe0\""];
const MODES: &[&str] = &[
    "\"spread\"",
    "\"single\"",
    "\"spread\"",
    "\"single\"",
    "\"spread\"",
    "\"single\"",
    "\"Spread\"",
];
const POLICIES: &[&str] = &[
    "\"bind\"",
    "\"preferred\"",
    "\"interleave\"",
    "\"default\"",
    "\"local\"",
    "\"bind\"",
    "\"nope\"",
];
const TUNED_BASES: &[&str] = &["\"latency-performance\"", "\"network-latency\"", "\"\""];
const DROPS: &[&str] = &[
    "[\"force_latency\"]",
    "[\"cpu.force_latency\", \"vm.transparent_hugepages\"]",
    "[]",
    "[\"\"]",
    "[\".\"]",
];
const DMA_US: &[&str] = &[
    "0",
    "2",
    "-5",
    "\"off\"",
    "\"on\"",
    "2147483647",
    "2147483648",
    "-9223372036854775808",
];
const GOVERNORS: &[&str] = &["\"performance\"", "\"powersave\"", "\"\""];
const CSTATE: &[&str] = &["0", "1", "10", "133", "2", "18446744073709551615", "-1"];
const THP: &[&str] = &[
    "\"never\"",
    "\"always\"",
    "\"madvise\"",
    "\"sometimes\"",
    "\"\"",
];
const SYSCTL_KEYS: &[&str] = &[
    "\"kernel.sched_rt_runtime_us\"",
    "\"kernel.timer_migration\"",
    "\"vm.swappiness\"",
    "\"vm.stat_interval\"",
    "\"net.core.busy_poll\"",
    "\"kernel.no_such_thing\"",
    "\"../../etc/passwd\"",
    "\"a..b\"",
    "\"\"",
    "\".\"",
    "\"kernel/sched_rt_runtime_us\"",
];
const SYSCTL_VALUES: &[&str] = &["-1", "0", "10", "true", "\"50\"", "\"\""];
const SETTING_KEYS: &[&str] = &[
    "\"sysctl.kernel.timer_migration\"",
    "\"cpu.governor\"",
    "\"main\"",
    "\"\"",
    "\"a.b.c\"",
];

/// Keys that are not in the schema, or a duplicate key.
const UNKNOWN: &[&str] = &["bogus = 1\n", "cpu = 2\n"];

/// A value from `pool` almost always, otherwise from [`ANY`].
fn value(pool: &'static [&'static str]) -> BoxedStrategy<String> {
    prop_oneof![
        60 => prop::sample::select(pool).prop_map(String::from),
        1 => prop::sample::select(ANY).prop_map(String::from),
    ]
    .boxed()
}

/// A key, its values, and the probability that it is written.
type Key = (&'static str, &'static [&'static str], f64);

/// `header` and each key with its probability, plus now and then an unknown key.
fn table(header: &'static str, keys: &'static [Key]) -> BoxedStrategy<String> {
    let lines: Vec<BoxedStrategy<String>> = keys
        .iter()
        .map(|&(k, pool, p)| {
            prop::option::weighted(p, value(pool))
                .prop_map(move |v| v.map(|v| format!("{k} = {v}\n")).unwrap_or_default())
                .boxed()
        })
        .collect();
    let unknown = prop::option::weighted(0.02, prop::sample::select(UNKNOWN));
    (lines, unknown)
        .prop_map(move |(lines, unknown)| {
            format!("{header}\n{}{}\n", lines.concat(), unknown.unwrap_or(""))
        })
        .boxed()
}

fn optional(p: f64, s: BoxedStrategy<String>) -> BoxedStrategy<String> {
    prop::option::weighted(p, s)
        .prop_map(Option::unwrap_or_default)
        .boxed()
}

const PROFILE_NAMES: &[&str] = &[
    "\"x\"", "\"fuzz-1\"", "\"ok_2\"", "\"x\"", "\"fuzz-1\"", "\"ok_2\"", "\"x\"", "\"a b\"", "\"\"",
];
const DESCRIPTIONS: &[&str] = &["\"d\"", "\"\""];

fn structured_profile() -> impl Strategy<Value = String> {
    let meta = table(
        "[profile]",
        &[
            ("name", PROFILE_NAMES, 0.98),
            ("description", DESCRIPTIONS, 0.5),
        ],
    );
    let cpuset = table(
        "[[cpuset]]",
        &[
            ("name", NAMES, 0.98),
            ("cpus", CPUS, 0.98),
            ("mems", MEMS, 0.5),
            ("exclusive", BOOL, 0.5),
            ("isolated", BOOL, 0.5),
        ],
    );
    let irq = table(
        "[[irq]]",
        &[
            ("device", DEVICES, 0.98),
            ("cpus", CPUS, 0.98),
            ("mode", MODES, 0.5),
            ("ban_irqbalance", BOOL, 0.5),
            ("include_async", BOOL, 0.3),
        ],
    );
    let numa = table("[numa]", &[("policy", POLICIES, 0.98)]);
    let tuned = (
        table(
            "[tuned]",
            &[("base", TUNED_BASES, 0.98), ("drop", DROPS, 0.6)],
        ),
        optional(
            0.4,
            prop::collection::vec(
                (prop::sample::select(SETTING_KEYS), value(SYSCTL_VALUES))
                    .prop_map(|(k, v)| format!("{k} = {v}\n")),
                0..3,
            )
            .prop_map(|l| format!("[tuned.settings]\n{}\n", l.concat()))
            .boxed(),
        ),
    )
        .prop_map(|(t, s)| t + &s)
        .boxed();
    let dma = table("[dma_latency]", &[("us", DMA_US, 0.98)]);
    let sysctl = prop::collection::btree_map(
        prop::sample::select(SYSCTL_KEYS),
        value(SYSCTL_VALUES),
        0..4,
    )
    .prop_map(|m| {
        let body: String = m.iter().map(|(k, v)| format!("{k} = {v}\n")).collect();
        format!("[sysctl]\n{body}\n")
    })
    .boxed();
    let cpu = table(
        "[cpu]",
        &[
            ("governor", GOVERNORS, 0.5),
            ("max_cstate_latency_us", CSTATE, 0.5),
            ("thp", THP, 0.5),
        ],
    );
    let boot = table(
        "[boot]",
        &[
            ("isolcpus", BOOL, 0.6),
            ("nohz_full", BOOL, 0.6),
            ("rcu_nocbs", BOOL, 0.6),
            ("required", BOOL, 0.6),
        ],
    );
    (
        optional(0.98, meta),
        prop::collection::vec(cpuset, 0..4),
        prop::collection::vec(irq, 0..3),
        optional(0.3, numa),
        optional(0.3, tuned),
        optional(0.3, dma),
        optional(0.3, sysctl),
        optional(0.3, cpu),
        optional(0.3, boot),
    )
        .prop_map(
            |(meta, cpusets, irqs, numa, tuned, dma, sysctl, cpu, boot)| {
                let mut s = meta;
                s.push_str(&cpusets.concat());
                s.push_str(&irqs.concat());
                for t in [numa, tuned, dma, sysctl, cpu, boot] {
                    s.push_str(&t);
                }
                s
            },
        )
}

#[test]
fn structured_profiles_never_panic_and_reach_resolve() {
    let (root, host) = thesis();
    let counts = [Cell::new(0u32), Cell::new(0u32), Cell::new(0u32)];
    runner(128)
        .run(&structured_profile(), |s| {
            let r = check(&s, &root, &host)?;
            let i = match r {
                Reached::ParseErr => 0,
                Reached::ResolveErr => 1,
                Reached::ResolveOk => 2,
            };
            counts[i].set(counts[i].get() + 1);
            Ok(())
        })
        .unwrap();
    let [parse_err, resolve_err, resolve_ok] = counts.map(Cell::into_inner);
    eprintln!("parse errors {parse_err}, resolve errors {resolve_err}, resolved {resolve_ok}");
    // The grammar is there to get past the parser: most inputs must reach
    // resolve, and both of its outcomes must be exercised.
    assert!(
        resolve_err + resolve_ok >= 128 / 4,
        "only {} of 128 reached resolve",
        resolve_err + resolve_ok
    );
    assert!(
        resolve_err > 0 && resolve_ok > 0,
        "{resolve_err} / {resolve_ok}"
    );
}

// ---------------------------------------------------------------- (c) mutated real profiles

#[test]
fn mutated_shipped_profiles_never_panic() {
    let (root, host) = thesis();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../profiles");
    let texts: Vec<String> = ["thesis-2hca", "busy-poll-1hca", "event-poll"]
        .iter()
        .map(|n| std::fs::read_to_string(dir.join(format!("{n}.toml"))).unwrap())
        .collect();
    // The unmutated profiles resolve on the thesis host.
    for t in &texts {
        assert_eq!(check(t, &root, &host).unwrap(), Reached::ResolveOk, "{t}");
    }
    let strategy = (
        prop::sample::select(texts),
        prop::collection::vec((any::<prop::sample::Index>(), 0u8..4, any::<char>()), 1..4),
    )
        .prop_map(|(text, edits)| {
            let mut chars: Vec<char> = text.chars().collect();
            for (at, op, c) in edits {
                if chars.is_empty() {
                    break;
                }
                let i = at.index(chars.len());
                match op {
                    0 => chars[i] = c,
                    1 => chars.insert(i, c),
                    2 => {
                        chars.remove(i);
                    }
                    _ => {
                        // Swap a digit for another, to move CPU and node numbers.
                        if chars[i].is_ascii_digit() {
                            chars[i] = char::from(b'0' + (c as u32 % 10) as u8);
                        } else {
                            chars[i] = c;
                        }
                    }
                }
            }
            chars.into_iter().collect::<String>()
        });
    runner(128)
        .run(&strategy, |s| check(&s, &root, &host).map(|_| ()))
        .unwrap();
}
