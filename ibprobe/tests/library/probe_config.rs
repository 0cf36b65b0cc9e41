//! `probe::config`.

use ibprobe::clock::Clock;
use ibprobe::probe::config::*;
use std::time::Duration;

fn err(c: ProbeConfig) -> String {
    c.validate().unwrap_err().0
}

#[test]
fn default_is_valid() {
    ProbeConfig::default().validate().unwrap();
}

#[test]
fn bad_values_name_the_option_and_the_fix() {
    let d = ProbeConfig::default;
    assert!(err(ProbeConfig { size: 0, ..d() }).starts_with("--size 0:"));
    assert!(err(ProbeConfig {
        length: Length::Count(0),
        ..d()
    })
    .starts_with("--count 0:"));
    assert!(err(ProbeConfig {
        length: Length::Duration(Duration::ZERO),
        ..d()
    })
    .starts_with("--duration 0:"));
    for r in [0.0, -5.0, f64::NAN, f64::INFINITY, 2e7] {
        assert!(
            err(ProbeConfig {
                rate_hz: Some(r),
                ..d()
            })
            .starts_with("--rate "),
            "{r}"
        );
    }
    assert!(err(ProbeConfig {
        burst: Some(4),
        ..d()
    })
    .contains("--pause"));
    assert!(err(ProbeConfig {
        burst: Some(0),
        pause: Some(Duration::from_millis(1)),
        ..d()
    })
    .starts_with("--burst 0"));
    assert!(err(ProbeConfig {
        timeout: Duration::ZERO,
        ..d()
    })
    .starts_with("--timeout 0"));
    assert!(err(ProbeConfig {
        cpu: Some(100_000),
        ..d()
    })
    .starts_with("--cpu 100000"));
}

#[test]
fn plan_converts_to_ticks() {
    let clock = Clock::monotonic();
    let cfg = ProbeConfig {
        rate_hz: Some(1000.0),
        pause: Some(Duration::from_micros(5)),
        length: Length::Duration(Duration::from_secs(2)),
        ..ProbeConfig::default()
    };
    let p = Plan::measured(&cfg, &clock);
    assert_eq!(p.period_ticks, 1_000_000);
    assert_eq!(
        p.burst, 1,
        "a pause without --burst pauses after every message"
    );
    assert_eq!(p.pause_ticks, 5_000);
    assert_eq!(p.duration_ticks, 2_000_000_000);
    assert_eq!(p.count, u64::MAX);
    let w = Plan::warmup(&cfg, &clock);
    assert_eq!((w.count, w.period_ticks, w.pause_ticks), (100, 0, 0));
}
