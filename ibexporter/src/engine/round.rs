//! One round of one probe, through the ibprobe library.
//!
//! Why it exists: the engine loop stays a loop; what a round of each kind
//! of probe means (which channel, which distribution is the sample, what
//! counts as a timeout or an error) is decided here, in one place.
//!
//! Channels are built per round: a round is short (100 messages at 1 kHz
//! by default) and an interval long (10 s), so setup costs little, and a
//! device that went away or came back is picked up at the next round.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use clap::Parser;
use ibprobe::clock::Clock;
use ibprobe::probe::config::{Length, Mode, Poll, ProbeConfig};
use ibprobe::probe::runner;
use ibprobe::probe::wakeup::{self, WakeupConfig, WakeupLength};
use ibprobe::transport::shm::ShmChannel;
use ibprobe::transport::udp::UdpChannel;
use ibprobe::transport::{Channel, TransportError};
use ibprobe::verbs::args::VerbsArgs;
use ibprobe::verbs::{QpType, VerbsConfig};

use super::{EngineConfig, ProbeKind, ProbeSpec};
use crate::collect::latency::Round;

/// Wake-up probes: the same priority cyclictest's usual runs use.
const WAKEUP_PRIORITY: i32 = 80;
/// Wake-up probes: one deadline per millisecond.
const WAKEUP_PERIOD: Duration = Duration::from_millis(1);

/// The verbs knobs, parsed by ibprobe's own option parser so the exporter
/// accepts exactly what `ibprobe loopback` does.
#[derive(Parser)]
struct VerbsOnly {
    #[command(flatten)]
    verbs: VerbsArgs,
}

/// Runs one round of `p`; returns the messages sent and what came back.
pub(super) fn run(
    p: &ProbeSpec,
    cfg: &EngineConfig,
    clock: &Clock,
    stop: &AtomicBool,
) -> (u64, Round) {
    match &p.kind {
        ProbeKind::Wakeup { cpu } => wakeup_round(*cpu, cfg, stop),
        kind => match channel(kind, p.size, cfg.event_poll) {
            Ok(mut ch) => message_round(ch.as_mut(), p.size, cfg, clock, stop),
            Err((reason, e)) => {
                tracing::debug!("probe {}: {e}", p.key.target);
                (
                    0,
                    Round {
                        error: Some(reason.into()),
                        ..Round::default()
                    },
                )
            }
        },
    }
}

type SetupError = (&'static str, String);

fn channel(kind: &ProbeKind, size: usize, event: bool) -> Result<Box<dyn Channel>, SetupError> {
    let setup = |e: TransportError| ("setup", e.to_string());
    match kind {
        ProbeKind::Shm => Ok(Box::new(ShmChannel::loopback(size).map_err(setup)?)),
        ProbeKind::Udp => {
            let mut u =
                UdpChannel::loopback(IpAddr::V4(Ipv4Addr::LOCALHOST), size).map_err(setup)?;
            u.set_event_poll(event);
            Ok(Box::new(u))
        }
        ProbeKind::Verbs { dev, port, qp, op } => {
            let port = port.to_string();
            let poll = if event { "event" } else { "busy" };
            let argv = [
                "verbs", "--dev", dev, "--port", &port, "--op", op, "--poll", poll,
            ];
            let a = VerbsOnly::try_parse_from(argv)
                .map_err(|e| ("config", e.to_string()))?
                .verbs;
            let qp = QpType::parse(qp).ok_or(("config", format!("unknown QP type {qp}")))?;
            let size = u32::try_from(size).map_err(|_| ("config", format!("size {size}")))?;
            let vcfg =
                VerbsConfig::from_args(&a, qp, size).map_err(|e| ("config", e.to_string()))?;
            let ch = ibprobe::verbs::loopback(&vcfg).map_err(|e| ("setup", e.to_string()))?;
            Ok(Box::new(ch))
        }
        ProbeKind::Wakeup { .. } => unreachable!("wake-ups have no channel"),
    }
}

fn message_round(
    ch: &mut dyn Channel,
    size: usize,
    cfg: &EngineConfig,
    clock: &Clock,
    stop: &AtomicBool,
) -> (u64, Round) {
    let pc = ProbeConfig {
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
        ..ProbeConfig::default()
    };
    match runner::run(&pc, ch, clock, stop, None) {
        Ok(o) => (
            o.sent,
            Round {
                samples: o.one_way,
                timeouts: o.lost,
                error: None,
            },
        ),
        Err(e) => {
            let reason = match e.error {
                TransportError::PeerLost(_) => "peer_lost",
                TransportError::Completion(_) => "completion",
                TransportError::Unsupported(_) => "config",
                TransportError::Io { .. } => "transport",
            };
            let o = *e.outcome;
            (
                o.sent,
                Round {
                    samples: o.one_way,
                    timeouts: o.lost,
                    error: Some(reason.into()),
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
