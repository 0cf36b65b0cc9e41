//! `clock`.

use ibprobe::clock::*;
use ibprobe::sys::tsc;

#[test]
fn choice_monotonic_and_tsc() {
    assert_eq!(
        Clock::choose(ClockChoice::Monotonic).kind(),
        ClockKind::MonotonicRaw
    );
    let c = Clock::choose(ClockChoice::Tsc);
    // Forced TSC: either a calibrated TSC, or a fallback that says why.
    match c.kind() {
        ClockKind::Tsc { hz } => assert!(hz > 1e6 && c.fallback().is_none()),
        ClockKind::MonotonicRaw => assert!(c.fallback().is_some()),
    }
}

const CPUINFO_OK: &str =
    "processor\t: 0\ncpu MHz\t\t: 1200.000\nflags\t\t: fpu tsc constant_tsc rep_good nonstop_tsc\n";

#[test]
fn read_costs_name_the_system_call() {
    let c = ReadCosts::classify("hpet", 1400.0, Some(20.0));
    assert!(c.monotonic_is_syscall);
    assert_eq!(c.clocksource, "hpet");
    assert!(
        c.describe()
            .contains("clock_gettime 1400 ns (a system call: clocksource hpet)"),
        "{}",
        c.describe()
    );
    // A vDSO clocksource is never a system call, however slow a read.
    assert!(!ReadCosts::classify("kvm-clock", 400.0, Some(20.0)).monotonic_is_syscall);
    // An unknown one: by cost against the TSC.
    let u = ReadCosts::classify("xen", 900.0, Some(30.0));
    assert!(u.monotonic_is_syscall && u.clocksource == "other");
    assert!(!ReadCosts::classify("xen", 90.0, Some(30.0)).monotonic_is_syscall);
    assert!(!ReadCosts::classify("", 900.0, None).monotonic_is_syscall);
    assert_eq!(ReadCosts::classify("", 900.0, None).clocksource, "?");
    // This host: both clocks cost something and the reading is one line.
    let here = ReadCosts::measure();
    assert!(here.monotonic_ns > 0.0, "{here:?}");
    assert!(!Clock::calibrate().describe().contains('\n'));
    assert!(Clock::calibrate().describe().contains("per read:"));
    let r = AutoReason::FallbackIsSyscall {
        missing: Fallback::NoConstantTsc,
    };
    assert!(r.explain().contains("system call"), "{}", r.explain());
}

#[test]
fn auto_takes_the_tsc_where_the_flags_the_syscall_or_the_kernel_vouch_for_it() {
    let hidden = Err(Fallback::NoConstantTsc);
    // The flags vouch: the TSC, no reason needed.
    let kvm = ReadCosts::classify("kvm-clock", 25.0, Some(9.0));
    assert_eq!(auto_decision(Ok(()), &kvm), Ok(None));
    // Hidden flags, clock_gettime a system call (the Soft-RoCE guest: hpet).
    let hpet = ReadCosts::classify("hpet", 1000.0, Some(120.0));
    assert_eq!(
        auto_decision(hidden, &hpet),
        Ok(Some(AutoReason::FallbackIsSyscall {
            missing: Fallback::NoConstantTsc
        }))
    );
    // Hidden flags, the kernel's own clocksource is the TSC.
    let tsc = ReadCosts::classify("tsc", 25.0, Some(9.0));
    let r = auto_decision(Err(Fallback::NoNonstopTsc), &tsc);
    assert_eq!(
        r,
        Ok(Some(AutoReason::KernelClockIsTsc {
            missing: Fallback::NoNonstopTsc
        }))
    );
    let said = r.unwrap().unwrap().explain();
    assert!(
        said.contains("kernel's clocksource is the TSC") && said.contains("nonstop_tsc"),
        "{said}"
    );
    // Hidden flags, a cheap vDSO clock that is not the TSC: clock_gettime.
    assert_eq!(auto_decision(hidden, &kvm), Err(Fallback::NoConstantTsc));
}

#[test]
fn flags_decide_not_mhz() {
    assert_eq!(tsc_flags_ok(CPUINFO_OK), Ok(()));
    assert_eq!(
        tsc_flags_ok("flags\t: fpu tsc nonstop_tsc\n"),
        Err(Fallback::NoConstantTsc)
    );
    assert_eq!(
        tsc_flags_ok("flags\t: fpu tsc constant_tsc\n"),
        Err(Fallback::NoNonstopTsc)
    );
    // A flag that merely contains the name does not count.
    assert_eq!(
        tsc_flags_ok("flags\t: constant_tsc_x nonstop_tsc\n"),
        Err(Fallback::NoConstantTsc)
    );
    assert_eq!(
        tsc_flags_ok("cpu MHz : 3000\n"),
        Err(Fallback::NoConstantTsc)
    );
}

#[test]
fn now_is_monotonic_non_decreasing() {
    for c in [Clock::calibrate(), Clock::monotonic()] {
        let mut prev = c.now();
        for _ in 0..200_000 {
            let t = c.now();
            assert!(t >= prev, "{} went backwards: {prev} -> {t}", c.describe());
            prev = t;
        }
    }
}

/// A calibration of `hz` (5 windows of 20 ms, 3 ppm apart).
fn tsc_of(hz: f64) -> Calibration {
    Calibration {
        hz,
        windows: 5,
        window_ns: 20_000_000,
        spread_ppm: 3.0,
    }
}

#[test]
fn conversion_round_trip() {
    let cal = tsc_of(2_994_345_678.0);
    let c = Clock::tsc_with(cal);
    for ns in [
        0u64,
        1,
        37,
        786,
        1_000,
        10_000,
        999_999,
        1_000_000_007,
        3_600_000_000_000,
    ] {
        let back = c.ticks_to_ns(c.ns_to_ticks(ns));
        let tol = 1 + ns / 1_000_000; // 1 ns + 1 ppm
        assert!(back.abs_diff(ns) <= tol, "{ns} ns -> ticks -> {back} ns");
    }
    // Exact against the float formula.
    let ticks = 2_994_345_678u64; // one second
    assert!(c.ticks_to_ns(ticks).abs_diff(1_000_000_000) <= 1);
    let m = Clock::monotonic();
    assert_eq!(m.ticks_to_ns(123_456_789), 123_456_789);
    assert_eq!(m.ns_to_ticks(123_456_789), 123_456_789);
    // A slow counter (100 MHz: 10 ns per tick) saturates instead of wrapping.
    let slow = Clock::tsc_with(Calibration { hz: 1e8, ..cal });
    assert_eq!(slow.ticks_to_ns(u64::MAX), u64::MAX);
    assert_eq!(slow.ticks_to_ns(1_000), 10_000);
}

#[test]
fn resolution_is_a_step_in_ns_and_near_means_within_ten() {
    // A 2.5 GHz TSC: one tick is 0.4 ns, 25 ticks 10 ns.
    let tsc = Clock::tsc_with(tsc_of(2.5e9));
    assert!((tsc.resolution_ns() - 0.4).abs() < 1e-9);
    let tsc = tsc.with_resolution_ticks(25);
    assert!((tsc.resolution_ns() - 10.0).abs() < 1e-9);
    assert!(tsc.near_resolution(0.0) && tsc.near_resolution(100.0));
    assert!(!tsc.near_resolution(100.5));
    // clock_gettime: a tick is a ns.
    let m = Clock::monotonic().with_resolution_ticks(30);
    assert_eq!(m.resolution_ns(), 30.0);
    assert!(m.near_resolution(300.0) && !m.near_resolution(301.0));
    // No resolution known: never near.
    assert!(!near_resolution(0.0, 0.0));
}

#[test]
fn measured_resolution_is_a_positive_step_below_a_millisecond() {
    for c in [
        Clock::choose(ClockChoice::Auto),
        Clock::choose(ClockChoice::Monotonic),
        Clock::choose(ClockChoice::Tsc),
    ] {
        let r = c.resolution_ns();
        assert!(r > 0.0 && r < 1e6, "{}: resolution {r} ns", c.describe());
    }
}

#[test]
fn spin_until_waits_for_the_deadline() {
    let c = Clock::calibrate();
    let start = c.now();
    let deadline = start + c.ns_to_ticks(2_000_000);
    let end = c.spin_until(deadline);
    assert!(end >= deadline);
    let waited = c.ticks_to_ns(end - start);
    assert!(
        waited >= 1_900_000,
        "spin_until returned after {waited} ns, wanted 2 ms"
    );
    // A past deadline returns at once.
    let t = c.spin_until(start);
    assert!(t >= start);
}

#[test]
fn calibrated_clock_agrees_with_monotonic_raw_over_100ms() {
    let c = Clock::calibrate();
    eprintln!("clock: {}", c.describe());
    let (t0, m0) = (c.now(), tsc::monotonic_raw_ns());
    std::thread::sleep(std::time::Duration::from_millis(100));
    let (t1, m1) = (c.now(), tsc::monotonic_raw_ns());
    let ns = c.ticks_to_ns(t1 - t0) as f64;
    let reference = (m1 - m0) as f64;
    let err = (ns - reference).abs() / reference;
    assert!(
        err < 0.02,
        "clock {} measured {ns} ns where CLOCK_MONOTONIC_RAW measured {reference} ns ({:.3}% off)",
        c.describe(),
        err * 100.0
    );
}

#[test]
fn tsc_is_used_when_flags_allow_and_calibration_is_tight() {
    let info = ibhost::file::read_pseudo("/proc/cpuinfo", ibhost::file::MAX_PROC_TABLE)
        .unwrap_or_default();
    let c = Clock::calibrate();
    if tsc::TSC_AVAILABLE && tsc_flags_ok(&info).is_ok() {
        match c.kind() {
            ClockKind::Tsc { hz } => {
                assert!(hz > 1e8 && hz < 1e10, "implausible TSC frequency {hz} Hz");
                assert!(c.calibration_error_ppm() <= CALIBRATION_MAX_SPREAD_PPM);
            }
            ClockKind::MonotonicRaw => {
                assert_eq!(c.fallback(), Some(Fallback::UnstableCalibration))
            }
        }
    } else {
        assert_eq!(c.kind(), ClockKind::MonotonicRaw);
        assert!(c.fallback().is_some());
    }
}
