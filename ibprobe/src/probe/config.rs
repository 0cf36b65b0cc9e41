//! The typed probe configuration, with one `validate` for the CLI,
//! ibexporter and the tests, and [`Plan`], the same in clock ticks,
//! converted once before the loop.

use std::time::Duration;

use crate::clock::Clock;
use crate::spec::Poll;

/// One process owns both ends (t_recv - t_subm on one clock), or waits
/// for the peer's echo.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    OneWay,
    RoundTrip,
}

/// When the measured part ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Length {
    Count(u64),
    Duration(Duration),
}

/// Highest `--rate`: 10 MHz (a 100 ns period; no transport here is faster).
pub const MAX_RATE_HZ: f64 = 10_000_000.0;

/// A probe's configuration: build it, [`ProbeConfig::validate`] it, hand
/// it to [`crate::probe::executor::run`].
#[derive(Clone, Debug, serde::Serialize)]
pub struct ProbeConfig {
    /// Bytes.
    pub size: usize,
    pub length: Length,
    /// Messages sent before the measured part (excluded, max kept).
    pub warmup: u64,
    /// Messages per second; `None`: back to back.
    pub rate_hz: Option<f64>,
    /// Messages per burst (a pause follows each burst).
    pub burst: Option<u64>,
    /// Pause after each burst (or after each message without `burst`).
    pub pause: Option<Duration>,
    /// CPU to pin the measuring thread to.
    pub cpu: Option<usize>,
    /// A message with no arrival after this long is counted lost.
    pub timeout: Duration,
    /// This many losses in a row fail the run.
    pub max_consecutive_lost: u32,
    pub mode: Mode,
    pub poll: Poll,
    /// mlockall before the run (a failure is a note).
    pub lock_memory: bool,
    /// How often an interval histogram goes to the sink.
    pub interval: Option<Duration>,
    /// The receiver's time on each message (a slow consumer): the
    /// measuring thread's in one-way loopback, the echo's in a round trip.
    pub consume_delay: Duration,
    /// `--stamp-thread`: split one-way latency at the HCA's read of the
    /// send buffer (verbs, no inline).
    pub stamp_thread: bool,
    /// `--hw-timestamps`: keep each probe's T2 and T5 (`clock/hwts.rs`).
    pub hw_timestamps: bool,
    /// Read the measuring thread's counters (`ibnoise::counters`) around the
    /// measured part and at each interval's end.
    pub counters: bool,
    /// `--perf-counters`: perf events even without a CPU PMU.
    pub perf_counters: bool,
    /// Correlate the counters with each interval's tail
    /// (`counters::attribution`, about 2 MiB of histograms). Off by
    /// default: interval ends every 100 ms raised the p99 in the
    /// Soft-RoCE lab (ibprobe/README.md, counters "Cost").
    pub attribution: bool,
}

impl Default for ProbeConfig {
    fn default() -> Self {
        ProbeConfig {
            size: 32,
            length: Length::Count(10_000),
            warmup: 100,
            rate_hz: None,
            burst: None,
            pause: None,
            cpu: None,
            timeout: Duration::from_secs(1),
            max_consecutive_lost: 3,
            mode: Mode::OneWay,
            poll: Poll::Busy,
            lock_memory: true,
            interval: None,
            consume_delay: Duration::ZERO,
            stamp_thread: false,
            hw_timestamps: false,
            counters: true,
            perf_counters: false,
            attribution: false,
        }
    }
}

/// A configuration value that cannot work: what, which input, what to do.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

impl ProbeConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        let cpu_off = self.cpu.and_then(|c| {
            let allowed = crate::sys::host::allowed_cpus();
            (!allowed.is_empty() && !allowed.contains(&c)).then_some((c, allowed))
        });
        let bad_rate = self.rate_hz.filter(|r| !r.is_finite() || *r <= 0.0);
        let high_rate = self.rate_hz.filter(|r| *r > MAX_RATE_HZ);
        let why = if self.size == 0 {
            "--size 0: a message needs at least 1 byte; pass --size N with N >= 1 (e.g. 32)".into()
        } else if self.length == Length::Count(0) {
            "--count 0: nothing to measure; pass --count N with N >= 1, or --duration".into()
        } else if self.length == Length::Duration(Duration::ZERO) {
            "--duration 0: nothing to measure; pass a positive duration such as 10s".into()
        } else if let Some(r) = bad_rate {
            format!("--rate {r}: a rate must be a positive number of messages per second; e.g. --rate 10000, or omit it to send back to back")
        } else if let Some(r) = high_rate {
            format!("--rate {r}: above the highest supported rate {MAX_RATE_HZ} Hz (a 100 ns period); lower it, or omit --rate to send back to back")
        } else if self.burst == Some(0) {
            "--burst 0: a burst needs at least 1 message; pass --burst N with N >= 1".into()
        } else if self.burst.is_some() && self.pause.is_none() {
            "--burst without --pause: bursts are separated by pauses; add --pause DUR (e.g. --pause 1ms)".into()
        } else if self.timeout.is_zero() {
            "--timeout 0: every message would be lost; pass a positive timeout such as 1s".into()
        } else if self.max_consecutive_lost == 0 {
            "max_consecutive_lost 0: the first loss would end the run; use 1 or more".into()
        } else if let Some((c, allowed)) = cpu_off {
            let list: Vec<String> = allowed.iter().map(|c| c.to_string()).collect();
            format!(
                "--cpu {c}: this process may only run on CPUs {}; pick one of them",
                list.join(",")
            )
        } else if self.consume_delay >= self.timeout {
            format!("--consume-delay {:?} is not below --timeout {:?}: every message would count as lost; shorten it or raise --timeout", self.consume_delay, self.timeout)
        } else if let Some(i) = self.interval.filter(|i| *i < Duration::from_millis(1)) {
            format!("interval {i:?}: shorter than 1 ms; use 1 ms or more")
        } else {
            return Ok(());
        };
        Err(ConfigError(why))
    }
}

/// How the receiving end behaves (the measuring thread in one-way
/// loopback, else the echo). Its knobs are the client's to choose (part
/// of what is measured): it travels in the handshake, so a server needs
/// no flags for them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Receiver {
    pub poll: Poll,
    #[serde(default)]
    pub consume_delay: Duration,
}

impl Default for Receiver {
    fn default() -> Self {
        ProbeConfig::default().receiver()
    }
}

impl ProbeConfig {
    pub fn receiver(&self) -> Receiver {
        Receiver {
            poll: self.poll,
            consume_delay: self.consume_delay,
        }
    }
}

/// The configuration in clock ticks, computed once before the loop (a
/// tick count of 0: none).
#[derive(Clone, Copy, Debug, Default)]
pub struct Plan {
    /// Measured messages, or `u64::MAX` in duration mode.
    pub count: u64,
    /// The measured part in duration mode, else `u64::MAX`.
    pub duration_ticks: u64,
    pub period_ticks: u64,
    /// Messages per burst; 0: no pauses.
    pub burst: u64,
    pub pause_ticks: u64,
    pub timeout_ticks: u64,
    pub timeout_ns: u64,
    pub max_consecutive_lost: u32,
    pub event: bool,
    pub interval_ticks: u64,
    pub consume_ticks: u64,
    /// `--stamp-thread`.
    pub stamp: bool,
    /// `--hw-timestamps`.
    pub hw_ts: bool,
}

/// Saturated.
pub fn dur_ns(d: Duration) -> u64 {
    d.as_nanos().min(u64::MAX as u128) as u64
}

pub fn ticks(clock: &Clock, d: Duration) -> u64 {
    clock.ns_to_ticks(dur_ns(d))
}

impl Plan {
    pub fn measured(cfg: &ProbeConfig, clock: &Clock) -> Plan {
        let t = |d: Duration| ticks(clock, d);
        let (count, duration_ticks) = match cfg.length {
            Length::Count(n) => (n, u64::MAX),
            Length::Duration(d) => (u64::MAX, t(d)),
        };
        Plan {
            count,
            duration_ticks,
            period_ticks: cfg
                .rate_hz
                .map_or(0, |r| clock.ns_to_ticks((1e9 / r) as u64).max(1)),
            burst: cfg.pause.map_or(0, |_| cfg.burst.unwrap_or(1)),
            pause_ticks: cfg.pause.map_or(0, t),
            timeout_ticks: t(cfg.timeout),
            timeout_ns: dur_ns(cfg.timeout),
            max_consecutive_lost: cfg.max_consecutive_lost,
            event: cfg.poll == Poll::Event,
            interval_ticks: cfg.interval.map_or(0, t),
            // In a round trip the echo consumes (its own Plan::echo).
            consume_ticks: match cfg.mode {
                Mode::OneWay => t(cfg.consume_delay),
                Mode::RoundTrip => 0,
            },
            stamp: cfg.stamp_thread,
            hw_ts: cfg.hw_timestamps,
        }
    }

    /// The receive side alone, for an echo.
    pub fn echo(r: &Receiver, clock: &Clock) -> Plan {
        Plan {
            event: r.poll == Poll::Event,
            consume_ticks: ticks(clock, r.consume_delay),
            ..Plan::default()
        }
    }

    /// The warm-up: `cfg.warmup` messages back to back, same timeout.
    pub fn warmup(cfg: &ProbeConfig, clock: &Clock) -> Plan {
        Plan {
            count: cfg.warmup,
            duration_ticks: u64::MAX,
            period_ticks: 0,
            burst: 0,
            pause_ticks: 0,
            interval_ticks: 0,
            ..Plan::measured(cfg, clock)
        }
    }
}
