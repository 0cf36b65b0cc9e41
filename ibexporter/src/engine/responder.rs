//! The responder: every ibexporter answers probes, so a set of exporters
//! is a mesh with no extra daemon.
//!
//! Why it exists: Pingmesh's agents both probe and answer. One thread
//! accepts on the responder port (ibprobe's out-of-band protocol, so
//! `ibprobe client` can probe it too); each client gets its own thread
//! running `ibprobe::probe::session::respond`, up to a cap, so a slow or
//! stuck client never blocks another.

use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use ibprobe::probe::oob::Oob;
use ibprobe::probe::session::{respond, ResponderOptions};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// Clients served at once; more wait in the listen backlog.
pub const MAX_SESSIONS: usize = 64;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: String,
}

/// `ibexporter_responder_sessions_total{result}`.
#[derive(Clone, Debug, Default)]
pub struct ResponderMetrics {
    sessions: Family<ResultLabel, Counter>,
}

impl ResponderMetrics {
    /// Registers the responder's counter.
    pub fn register(&self, reg: &mut Registry) {
        reg.register(
            "ibexporter_responder_sessions",
            "Probe sessions this exporter answered, by result (ok, or the failure reason: refused, protocol, setup, peer_lost)",
            self.sessions.clone(),
        );
    }

    fn count(&self, result: &str) {
        self.sessions
            .get_or_create(&ResultLabel {
                result: result.into(),
            })
            .inc();
    }
}

/// The running responder; stops on drop.
pub struct Responder {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
    addr: SocketAddr,
}

impl Responder {
    /// Listens on `bind` and answers probes until dropped.
    pub fn start(
        bind: SocketAddr,
        opts: ResponderOptions,
        metrics: ResponderMetrics,
    ) -> std::io::Result<Responder> {
        let listener = TcpListener::bind(bind)?;
        let addr = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let handle = std::thread::Builder::new()
            .name("ibexporter-responder".into())
            .spawn(move || accept_loop(listener, opts, metrics, s))?;
        Ok(Responder {
            stop,
            handle: Some(handle),
            addr,
        })
    }

    /// Where it listens (the port is real when `bind` asked for 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn accept_loop(
    listener: TcpListener,
    opts: ResponderOptions,
    metrics: ResponderMetrics,
    stop: Arc<AtomicBool>,
) {
    let active = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::Relaxed) {
        if active.load(Ordering::Relaxed) >= MAX_SESSIONS {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            Err(e) => {
                tracing::warn!("responder: accept failed: {e}");
                std::thread::sleep(Duration::from_millis(200));
                continue;
            }
        };
        let _ = stream.set_nonblocking(false);
        let oob = match Oob::from_stream(stream, opts.handshake_timeout) {
            Ok(o) => o,
            Err(e) => {
                tracing::debug!("responder: {e}");
                metrics.count("protocol");
                continue;
            }
        };
        active.fetch_add(1, Ordering::Relaxed);
        let (o, m, s, a) = (opts.clone(), metrics.clone(), stop.clone(), active.clone());
        let spawned = std::thread::Builder::new()
            .name("ibexporter-respond".into())
            .spawn(move || {
                match respond(oob, &o, &s) {
                    Ok(_) => m.count("ok"),
                    Err(e) => {
                        tracing::debug!("responder: {e}");
                        m.count(e.reason);
                    }
                }
                a.fetch_sub(1, Ordering::Relaxed);
            });
        if spawned.is_err() {
            active.fetch_sub(1, Ordering::Relaxed);
            metrics.count("setup");
        }
    }
}
