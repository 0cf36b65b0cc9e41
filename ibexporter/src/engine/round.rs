//! One round of one probe, through the ibprobe library.
//!
//! Why it exists: the engine loop stays a loop; what a round of each kind
//! of probe means (which channel, which distribution is the sample, what
//! counts as a timeout or an error) is decided here, in one place.
//!
//! Channels are opened per round through `ibprobe::probe::open` (local
//! probes) or the one handshake of `ibprobe::probe::session` (remote
//! probes): a round is short (100 messages at 1 kHz
//! by default) and an interval long (10 s), so setup costs little, and a
//! device that went away or came back is picked up at the next round.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use ibnoise::wakeup::{self, WakeupConfig, WakeupLength};
use ibprobe::clock::Clock;
use ibprobe::probe::config::{Length, Mode, ProbeConfig};
use ibprobe::probe::executor;
use ibprobe::probe::open;
use ibprobe::probe::outcome::Outcome;
use ibprobe::probe::session::ClientSession;
use ibprobe::spec::{ChannelSpec, Poll};
use ibprobe::transport::{Channel, TransportError};

use super::spec::{EngineConfig, ProbeKind, ProbeSpec};
use crate::collect::latency::Round;

/// Wake-up probes: the same priority cyclictest's usual runs use.
pub(super) const WAKEUP_PRIORITY: i32 = 80;
/// Wake-up probes: one deadline per millisecond.
const WAKEUP_PERIOD: Duration = Duration::from_millis(1);

/// Runs one round of `p`; returns the messages sent and what came back.
pub(super) fn run(
    p: &ProbeSpec,
    cfg: &EngineConfig,
    clock: &Clock,
    stop: &AtomicBool,
) -> (u64, Round) {
    match &p.kind {
        ProbeKind::Wakeup { cpu } => wakeup_round(*cpu, cfg, stop),
        ProbeKind::Remote { addr, spec } => {
            let mut spec = polled(spec, cfg);
            spec.verbs.hw_timestamps = cfg.hw_timestamps && spec.transport.qp_type().is_some();
            remote_round(*addr, &spec, cfg, clock, stop)
        }
        ProbeKind::Loopback(spec) => match open::loopback(&polled(spec, cfg)) {
            Ok(mut ch) => message_round(ch.as_mut(), spec.size, cfg, clock, stop),
            Err(e) => {
                tracing::debug!("probe {}: {e}", p.key.target);
                (0, failed(e.reason()))
            }
        },
    }
}

/// `spec` with the engine's polling: event polling sleeps in the
/// transport (a verbs completion channel, poll(2) on udp); the shm ring
/// has nothing to sleep on and polls busy while a message is in flight
/// (the loop still sleeps between paced messages, see [`probe_config`]).
fn polled(spec: &ChannelSpec, cfg: &EngineConfig) -> ChannelSpec {
    let mut s = spec.clone();
    // Only remote verbs probes split (a local loopback has no responder).
    s.verbs.hw_timestamps = false;
    s.poll = if cfg.event_poll && s.transport.can_sleep() {
        Poll::Event
    } else {
        Poll::Busy
    };
    s
}

/// A round that failed before a message was sent, for `reason`.
fn failed(reason: &str) -> Round {
    Round {
        error: Some(reason.into()),
        ..Round::default()
    }
}

/// The probe parameters of one round.
fn probe_config(size: usize, cfg: &EngineConfig) -> ProbeConfig {
    ProbeConfig {
        size,
        length: Length::Count(cfg.probes_per_round),
        warmup: 5,
        rate_hz: Some(cfg.rate_hz),
        timeout: cfg.timeout,
        max_consecutive_lost: 3,
        mode: Mode::OneWay,
        // Event mode also sleeps between paced messages; the shm ring
        // (nothing to sleep on) spins only while a message is in flight.
        poll: if cfg.event_poll {
            Poll::Event
        } else {
            Poll::Busy
        },
        lock_memory: false,
        // Counters per round (`ibprobe_probe_*_total`); a round is one
        // short interval: no per-interval attribution.
        counters: true,
        perf_counters: cfg.perf_counters,
        attribution: false,
        ..ProbeConfig::default()
    }
}

/// A round trip round: connect, handshake, probe, say Done. A dead peer
/// costs the connect timeout or `max_consecutive_lost` message timeouts.
fn remote_round(
    addr: std::net::SocketAddr,
    spec: &ChannelSpec,
    cfg: &EngineConfig,
    clock: &Clock,
    stop: &AtomicBool,
) -> (u64, Round) {
    let mut s = match ClientSession::connect(addr, spec, cfg.timeout, cfg.secret.as_ref()) {
        Ok(s) => s,
        Err(e) => {
            tracing::debug!("probe {addr} ({}): {e}", spec.transport);
            return (0, failed(e.reason));
        }
    };
    let pc = ProbeConfig {
        hw_timestamps: spec.verbs.hw_timestamps,
        ..probe_config(spec.size, cfg)
    };
    let r = s.round(&pc, clock, stop);
    let r = match r {
        Ok(mut o) => {
            // --hw-timestamps: Done, then the peer's T3/T4, then the split.
            if let Err(e) = s.finish_split(&mut o) {
                tracing::debug!("probe {addr}: hardware timestamps: {e}");
            }
            Ok(o)
        }
        Err(e) => {
            s.finish();
            Err((e.error, *e.outcome))
        }
    };
    let hw = r.as_ref().ok().and_then(|o| {
        o.hw.as_ref().map(|_| match &o.hw_split {
            Some(s) => Ok(s.clone()),
            None => Err(o.sent - o.lost),
        })
    });
    let (sent, mut round) = outcome_round(r, |o| o.rtt);
    round.hw = hw;
    (sent, round)
}

fn message_round(
    ch: &mut dyn Channel,
    size: usize,
    cfg: &EngineConfig,
    clock: &Clock,
    stop: &AtomicBool,
) -> (u64, Round) {
    let pc = probe_config(size, cfg);
    let r = executor::run(&pc, ch, clock, stop, None).map_err(|e| (e.error, *e.outcome));
    outcome_round(r, |o| o.one_way)
}

/// A round from what the executor returned; `samples` picks the
/// distribution (one-way for loopback, RTT for remote).
fn outcome_round(
    r: Result<Outcome, (TransportError, Outcome)>,
    samples: impl Fn(Outcome) -> Option<ibstats::latency::LatencyHistogram>,
) -> (u64, Round) {
    match r {
        Ok(o) => (
            o.sent,
            Round {
                timeouts: o.lost,
                counters: o.counters.as_ref().map(|c| c.counts),
                samples: samples(o),
                error: None,
                hw: None,
            },
        ),
        Err((e, o)) => {
            let reason = match e {
                TransportError::PeerLost(_) => "peer_lost",
                TransportError::Completion(_) => "completion",
                TransportError::Unsupported(_) => "config",
                TransportError::Io { .. } => "transport",
            };
            (
                o.sent,
                Round {
                    timeouts: o.lost,
                    counters: o.counters.as_ref().map(|c| c.counts),
                    samples: samples(o),
                    error: Some(reason.into()),
                    hw: None,
                },
            )
        }
    }
}

fn wakeup_round(cpu: usize, cfg: &EngineConfig, stop: &AtomicBool) -> (u64, Round) {
    let wc = WakeupConfig {
        cpus: vec![cpu],
        priority: WAKEUP_PRIORITY,
        interval: WAKEUP_PERIOD,
        length: WakeupLength::Count(cfg.probes_per_round),
        lock_memory: false,
    };
    match wakeup::run(&wc, stop) {
        Ok(mut o) => match o.cpus.pop() {
            Some(c) => (
                c.latency.len(),
                Round {
                    counters: c.counters.as_ref().map(|r| r.counts),
                    samples: Some(c.latency),
                    ..Round::default()
                },
            ),
            None => (
                0,
                Round {
                    error: Some("setup".into()),
                    ..Round::default()
                },
            ),
        },
        Err(e) => {
            tracing::debug!("wake-up probe on cpu {cpu}: {e}");
            (
                0,
                Round {
                    error: Some("setup".into()),
                    ..Round::default()
                },
            )
        }
    }
}
