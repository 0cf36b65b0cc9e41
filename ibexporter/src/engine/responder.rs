//! The responder: every ibexporter answers probes, so a set of exporters
//! is a mesh with no extra daemon.
//!
//! Why it exists: Pingmesh's agents both probe and answer. One thread
//! accepts on the responder port (ibprobe's out-of-band protocol, so
//! `ibprobe client` can probe it too); each client gets its own thread
//! running `ibprobe::probe::session::respond`, so a slow or stuck client
//! never blocks another.
//!
//! Nobody can lock peers out by holding connections:
//! - accepting never waits for a session: the accept thread only accepts,
//!   spawns and watches;
//! - a session must finish its handshake within [`Limits::handshake`]
//!   (however slowly its bytes trickle in) and is closed once no message
//!   arrived for [`Limits::idle`];
//! - at most [`Limits::per_source`] sessions per source address and
//!   [`Limits::sessions`] in all; a new peer over either limit does not
//!   wait or get refused: the stalest session (of that source, or of all)
//!   is closed to make room, and a live session is never the stalest;
//! - each such close is counted in
//!   `ibexporter_responder_sessions_refused_total{reason}`.

use std::collections::HashMap;
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::limits::{MAX_PER_SOURCE, MAX_SESSIONS};
use ibprobe::probe::session::oob::Oob;
use ibprobe::probe::session::{respond, Liveness, ResponderOptions};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// The responder's bounds; [`Limits::default`] is what the daemon uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Sessions at once, all sources.
    pub sessions: usize,
    /// Sessions at once from one address.
    pub per_source: usize,
    /// From accept to Welcome, at most.
    pub handshake: Duration,
    /// A welcomed session with no message for this long is closed.
    pub idle: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            sessions: MAX_SESSIONS,
            per_source: MAX_PER_SOURCE,
            handshake: Duration::from_secs(5),
            idle: Duration::from_secs(10),
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

/// `ibexporter_responder_sessions_total{result}` and
/// `ibexporter_responder_sessions_refused_total{reason}`.
#[derive(Clone, Debug, Default)]
pub struct ResponderMetrics {
    sessions: Family<ResultLabel, Counter>,
    refused: Family<ReasonLabel, Counter>,
}

/// Why the responder closed or refused a session itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cut {
    HandshakeTimeout,
    Idle,
    PerSource,
    Evicted,
    Auth,
}

impl Cut {
    fn name(self) -> &'static str {
        match self {
            Cut::HandshakeTimeout => "handshake_timeout",
            Cut::Idle => "idle",
            Cut::PerSource => "per_source_limit",
            Cut::Evicted => "evicted",
            Cut::Auth => "auth",
        }
    }
}

impl ResponderMetrics {
    /// Registers the responder's counters.
    pub fn register(&self, reg: &mut Registry) {
        reg.register(
            "ibexporter_responder_sessions",
            "Probe sessions this exporter answered, by result (ok, or the failure reason: refused, protocol, setup, peer_lost)",
            self.sessions.clone(),
        );
        reg.register(
            "ibexporter_responder_sessions_refused",
            "Responder sessions closed or refused by the responder's limits, by reason: handshake_timeout (no complete handshake within 5 s), idle (no message for 10 s), per_source_limit (the stalest of a source's 8 sessions made room), evicted (the stalest of all 64 made room), auth (no or a wrong mesh secret)",
            self.refused.clone(),
        );
    }

    fn count(&self, result: &str) {
        self.sessions
            .get_or_create(&ResultLabel {
                result: result.into(),
            })
            .inc();
    }

    fn cut(&self, why: Cut) {
        self.refused
            .get_or_create(&ReasonLabel { reason: why.name() })
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
    /// Listens on `bind` and answers probes until dropped, within
    /// [`Limits::default`].
    pub fn start(
        bind: SocketAddr,
        opts: ResponderOptions,
        metrics: ResponderMetrics,
    ) -> std::io::Result<Responder> {
        Self::serve(TcpListener::bind(bind)?, opts, metrics, Limits::default())
    }

    /// Answers probes on `listener` (the daemon's, with a long backlog)
    /// within `limits` until dropped.
    pub fn serve(
        listener: TcpListener,
        opts: ResponderOptions,
        metrics: ResponderMetrics,
        limits: Limits,
    ) -> std::io::Result<Responder> {
        let addr = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let handle = std::thread::Builder::new()
            .name("ibexporter-responder".into())
            .spawn(move || {
                let mut table = Table {
                    sessions: Arc::new(Mutex::new(HashMap::new())),
                    next: 0,
                    limits,
                    metrics,
                };
                accept_loop(&listener, &opts, &mut table, &s);
                table.close_all();
            })?;
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

/// One session as the accept thread sees it.
struct Entry {
    source: IpAddr,
    live: Arc<Liveness>,
    /// A handle on the session's connection, to unblock its reads.
    sock: TcpStream,
    started: Instant,
    /// `live.arrived` when last looked at, and when it last moved (or
    /// the start): the stalest session is the one with the oldest.
    seen: u64,
    active: Instant,
    /// Closed by the responder (counted once, then left to end).
    cut: bool,
}

impl Entry {
    /// Notes whether messages arrived since the last look.
    fn look(&mut self, now: Instant) {
        let arrived = self.live.arrived.load(Ordering::Relaxed);
        if arrived != self.seen {
            self.seen = arrived;
            self.active = now;
        }
    }
}

struct Table {
    sessions: Arc<Mutex<HashMap<u64, Entry>>>,
    next: u64,
    limits: Limits,
    metrics: ResponderMetrics,
}

impl Table {
    fn close(&self, e: &mut Entry, why: Cut) {
        if !e.cut {
            e.cut = true;
            e.live.stop.store(true, Ordering::Relaxed);
            let _ = e.sock.shutdown(Shutdown::Both);
            self.metrics.cut(why);
        }
    }

    /// Closes sessions past their handshake or idle deadline.
    fn reap(&self, now: Instant) {
        let mut t = self.sessions.lock().expect("responder table");
        for e in t.values_mut() {
            e.look(now);
            if e.cut {
                continue;
            }
            if !e.live.greeted.load(Ordering::Relaxed) {
                if now.duration_since(e.started) > self.limits.handshake {
                    self.close(e, Cut::HandshakeTimeout);
                }
            } else if now.duration_since(e.active) > self.limits.idle {
                self.close(e, Cut::Idle);
            }
        }
    }

    /// Makes room for one more session from `source`: closes the stalest
    /// session of that source if it has its share, then the stalest of
    /// all if every slot is taken.
    fn make_room(&self, source: IpAddr) {
        let mut t = self.sessions.lock().expect("responder table");
        // A session exchanging messages right now is never the stalest.
        let now = Instant::now();
        t.values_mut().for_each(|e| e.look(now));
        let stalest = |t: &mut HashMap<u64, Entry>, of: Option<IpAddr>| -> Option<u64> {
            t.iter()
                .filter(|(_, e)| !e.cut && of.is_none_or(|ip| e.source == ip))
                .min_by_key(|(_, e)| e.active)
                .map(|(k, _)| *k)
        };
        let count = |t: &HashMap<u64, Entry>, of: Option<IpAddr>| {
            t.values()
                .filter(|e| !e.cut && of.is_none_or(|ip| e.source == ip))
                .count()
        };
        if count(&t, Some(source)) >= self.limits.per_source {
            if let Some(k) = stalest(&mut t, Some(source)) {
                let e = t.get_mut(&k).expect("listed");
                self.close(e, Cut::PerSource);
            }
        }
        if count(&t, None) >= self.limits.sessions {
            if let Some(k) = stalest(&mut t, None) {
                let e = t.get_mut(&k).expect("listed");
                self.close(e, Cut::Evicted);
            }
        }
    }

    /// Starts serving `stream` on its own thread.
    fn spawn(&mut self, stream: TcpStream, source: IpAddr, opts: &ResponderOptions) {
        let (Ok(sock), Ok(oob)) = (
            stream.try_clone(),
            // The session's own reads and writes; the accept thread bounds
            // the handshake as a whole.
            Oob::from_stream(stream, opts.handshake_timeout),
        ) else {
            self.metrics.count("protocol");
            return;
        };
        self.make_room(source);
        let live = Arc::new(Liveness::default());
        let id = self.next;
        self.next += 1;
        let now = Instant::now();
        self.sessions.lock().expect("responder table").insert(
            id,
            Entry {
                source,
                live: live.clone(),
                sock,
                started: now,
                seen: 0,
                active: now,
                cut: false,
            },
        );
        let (o, m, t) = (opts.clone(), self.metrics.clone(), self.sessions.clone());
        let spawned = std::thread::Builder::new()
            .name("ibexporter-respond".into())
            .spawn(move || {
                let r = respond(oob, &o, &live);
                let cut = t
                    .lock()
                    .expect("responder table")
                    .remove(&id)
                    .map(|e| e.cut);
                // A session the responder closed was counted by its reason.
                if cut != Some(true) && !live.stop.load(Ordering::Relaxed) {
                    match r {
                        Ok(_) => m.count("ok"),
                        Err(e) if e.reason == "auth" => {
                            tracing::debug!("responder: {e}");
                            m.cut(Cut::Auth);
                        }
                        Err(e) => {
                            tracing::debug!("responder: {e}");
                            m.count(e.reason);
                        }
                    }
                }
            });
        if spawned.is_err() {
            if let Some(e) = self.sessions.lock().expect("responder table").remove(&id) {
                let _ = e.sock.shutdown(Shutdown::Both);
            }
            self.metrics.count("setup");
        }
    }

    fn close_all(&self) {
        let mut t = self.sessions.lock().expect("responder table");
        for e in t.values_mut() {
            e.live.stop.store(true, Ordering::Relaxed);
            let _ = e.sock.shutdown(Shutdown::Both);
        }
    }
}

/// How often deadlines are checked (and how long accept sleeps when no
/// one is connecting).
const TICK: Duration = Duration::from_millis(10);

fn accept_loop(
    listener: &TcpListener,
    opts: &ResponderOptions,
    table: &mut Table,
    stop: &AtomicBool,
) {
    let mut last_reap = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now.duration_since(last_reap) >= TICK {
            table.reap(now);
            last_reap = now;
        }
        match listener.accept() {
            Ok((s, peer)) => {
                let _ = s.set_nonblocking(false);
                table.spawn(s, peer.ip(), opts);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(TICK),
            Err(e) => {
                // Out of file descriptors, or a connection reset before
                // accept: the reaper frees slots; keep going.
                tracing::warn!("responder: accept failed: {e}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}
