//! The accept loop: HTTP/1.1 over plain TCP or TLS, with a header-read
//! timeout, a per-request timeout, a connection cap where the oldest idle
//! connection makes room, a limit on concurrent requests (503 above it, as
//! exporter-toolkit's `--web.max-requests`), a maximum connection age,
//! basic auth and graceful shutdown.
//!
//! Why not `axum::serve`: it offers none of the timeouts, no TLS and no
//! connection cap, and a client that connects and sends nothing would hold
//! its connection for ever.
//!
//! Why slow clients cannot delay a scrape: accepting never
//! waits. A connection that has not sent a whole request head within
//! [`ServeOptions::header_read_timeout`] (3 s) is closed; when
//! [`ServeOptions::max_connections`] are open, the connection idle for
//! longest (no request in progress: slowloris heads, idle keep-alives) is
//! closed to make room for the new one; the listen backlog holds 4,096.

use super::webconfig::WebConfig;
use crate::limits::{AUTH_CACHE_MAX, LISTEN_BACKLOG};
use axum::body::Body;
use axum::http::{header, HeaderValue, Request, Response, StatusCode};
use axum::Router;
use base64::Engine as _;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::convert::Infallible;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::{watch, Notify, Semaphore};
use tower::ServiceExt as _;

/// Limits that keep slow or hostile clients from stalling the exporter.
///
/// Why it exists: the defaults suit a Prometheus scrape; tests shorten them.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// A client must send a complete request head within this time after
    /// connecting or after the previous response (so idle keep-alive
    /// connections also close after it). Default 3 s.
    pub header_read_timeout: Duration,
    /// A TLS handshake must finish within this time. Default 10 s.
    pub tls_handshake_timeout: Duration,
    /// Producing a response (auth, collection, encoding) may take this
    /// long; after it the client gets 503. Default 30 s.
    pub request_timeout: Duration,
    /// At most this many connections are open at once; a new one past it
    /// closes the connection idle for longest (none in a request), or is
    /// closed itself when every connection is in a request. Default 4096
    /// (keep-alive clients hold a slot: wrk -c200 must all be served); the
    /// daemon lowers it to what the open-files limit allows.
    pub max_connections: usize,
    /// Requests being answered at once; more get 503 at once (0: no
    /// limit). Default [`DEFAULT_MAX_REQUESTS`], as exporter-toolkit's
    /// `--web.max-requests`.
    pub max_requests: usize,
    /// A connection is asked to close (after its current response) once
    /// this old, so a client that stops reading cannot hold its slot for
    /// ever. Default 5 min.
    pub max_connection_age: Duration,
    /// After shutdown, or past `max_connection_age`, in-flight requests get
    /// this long to finish before their connections are dropped. Default 10 s.
    pub grace: Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            header_read_timeout: Duration::from_secs(3),
            tls_handshake_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            max_connections: 4096,
            max_requests: DEFAULT_MAX_REQUESTS,
            max_connection_age: Duration::from_secs(300),
            grace: Duration::from_secs(10),
        }
    }
}

/// `--web.max-requests`' default (exporter-toolkit's).
pub const DEFAULT_MAX_REQUESTS: usize = 40;

/// Binds `addr` (IP:PORT, or HOST:PORT resolved) with a backlog of
/// [`LISTEN_BACKLOG`] (the kernel caps it at `net.core.somaxconn`).
///
/// Why it exists: tokio's `TcpListener::bind` uses a backlog of 1,024;
/// a burst of connections past it would wait for SYN retries (1 s, 3 s).
pub async fn listen(addr: &str) -> std::io::Result<TcpListener> {
    let mut last = None;
    for a in tokio::net::lookup_host(addr).await? {
        let socket = if a.is_ipv4() {
            TcpSocket::new_v4()?
        } else {
            TcpSocket::new_v6()?
        };
        socket.set_reuseaddr(true)?;
        match socket.bind(a).and_then(|()| socket.listen(LISTEN_BACKLOG)) {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "the address resolved to nothing",
        )
    }))
}

/// One open connection as the accept loop sees it.
struct Conn {
    /// Requests in progress on it.
    busy: AtomicUsize,
    /// When it was accepted or last finished a response.
    idle_since: Mutex<Instant>,
    /// Told when the accept loop closes it to make room.
    kill: Notify,
}

/// The open connections, for closing the one idle for longest.
#[derive(Default)]
struct Conns {
    map: Mutex<HashMap<u64, Arc<Conn>>>,
    next: AtomicUsize,
}

impl Conns {
    /// Registers a new connection, first closing the one idle for
    /// longest if `max` are open; None when all `max` are in a request.
    fn admit(&self, max: usize) -> Option<(u64, Arc<Conn>)> {
        let mut map = self.map.lock().expect("connection table");
        if map.len() >= max {
            let oldest = map
                .iter()
                .filter(|(_, c)| c.busy.load(Ordering::Relaxed) == 0)
                .min_by_key(|(_, c)| *c.idle_since.lock().expect("idle time"))
                .map(|(k, _)| *k)?;
            if let Some(c) = map.remove(&oldest) {
                c.kill.notify_one();
            }
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed) as u64;
        let c = Arc::new(Conn {
            busy: AtomicUsize::new(0),
            idle_since: Mutex::new(Instant::now()),
            kill: Notify::new(),
        });
        map.insert(id, c.clone());
        Some((id, c))
    }

    fn remove(&self, id: u64) {
        self.map.lock().expect("connection table").remove(&id);
    }
}

/// Marks a connection busy for the life of one request.
struct Busy(Arc<Conn>);

impl Busy {
    fn new(c: Arc<Conn>) -> Busy {
        c.busy.fetch_add(1, Ordering::Relaxed);
        Busy(c)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        *self.0.idle_since.lock().expect("idle time") = Instant::now();
        self.0.busy.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Serves `router` on `listener` with [`ServeOptions::default`], over TLS
/// and/or behind basic auth when `web_config` says so, until `shutdown`
/// completes; then stops accepting and lets in-flight requests finish.
///
/// Why it exists: the single entry point `main` uses to serve HTTP.
pub async fn serve(
    listener: TcpListener,
    web_config: Option<WebConfig>,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with(
        listener,
        web_config,
        router,
        shutdown,
        ServeOptions::default(),
    )
    .await
}

/// [`serve`] with explicit limits.
///
/// Why it exists: tests need short timeouts; deployments may tune them.
pub async fn serve_with(
    listener: TcpListener,
    web_config: Option<WebConfig>,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
    opts: ServeOptions,
) -> std::io::Result<()> {
    let max = opts.max_connections.max(1);
    let conns = Arc::new(Conns::default());
    let running = Arc::new(AtomicUsize::new(0));
    let requests = (opts.max_requests > 0).then(|| Arc::new(Semaphore::new(opts.max_requests)));
    let (stop_tx, stop_rx) = watch::channel(false);
    let tls = web_config
        .as_ref()
        .and_then(|c| c.tls.clone())
        .map(tokio_rustls::TlsAcceptor::from);
    let auth = web_config
        .as_ref()
        .filter(|c| c.basic_auth_enabled())
        .map(|c| Arc::new(BasicAuth::new(Arc::clone(&c.users))));
    let opts = Arc::new(opts);
    tokio::pin!(shutdown);

    loop {
        let stream = tokio::select! {
            r = listener.accept() => match r {
                Ok((s, _peer)) => s,
                Err(e) => {
                    // Out of file descriptors or a connection reset before
                    // accept: wait a little instead of spinning, keep serving.
                    tracing::warn!("accepting a connection failed: {e}; retrying in 100 ms");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // Every connection is in a request: this one waits no turn.
        let Some((id, conn)) = conns.admit(max) else {
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let router = router.clone();
        let auth = auth.clone();
        let tls = tls.clone();
        let requests = requests.clone();
        let opts = Arc::clone(&opts);
        let stop = stop_rx.clone();
        let conns = Arc::clone(&conns);
        running.fetch_add(1, Ordering::Relaxed);
        let running = Arc::clone(&running);
        tokio::spawn(async move {
            let request_timeout = opts.request_timeout;
            let c = conn.clone();
            let svc = hyper::service::service_fn(move |req| {
                let busy = Busy::new(c.clone());
                handle(
                    req,
                    router.clone(),
                    auth.clone(),
                    requests.clone(),
                    request_timeout,
                    busy,
                )
            });
            let kill = conn.kill.notified();
            tokio::pin!(kill);
            let serve = async {
                match tls {
                    None => drive(TokioIo::new(stream), svc, &opts, stop).await,
                    Some(acceptor) => {
                        match tokio::time::timeout(
                            opts.tls_handshake_timeout,
                            acceptor.accept(stream),
                        )
                        .await
                        {
                            Ok(Ok(s)) => drive(TokioIo::new(s), svc, &opts, stop).await,
                            Ok(Err(e)) => tracing::debug!("TLS handshake failed: {e}"),
                            Err(_) => tracing::debug!("TLS handshake timed out"),
                        }
                    }
                }
            };
            tokio::select! {
                () = serve => {}
                () = &mut kill => tracing::debug!("closed an idle connection to make room"),
            }
            conns.remove(id);
            running.fetch_sub(1, Ordering::Relaxed);
        });
    }

    drop(listener);
    let _ = stop_tx.send(true);
    let grace = opts.grace + Duration::from_secs(1);
    let t0 = Instant::now();
    while running.load(Ordering::Relaxed) > 0 && t0.elapsed() < grace {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let left = running.load(Ordering::Relaxed);
    if left > 0 {
        tracing::warn!("shutdown: {left} connection(s) still open after {grace:?}, dropping them");
    }
    Ok(())
}

async fn drive<I, S>(io: I, svc: S, opts: &ServeOptions, mut stop: watch::Receiver<bool>)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    S: hyper::service::HttpService<Incoming, ResBody = Body> + Send,
    S::Future: Send,
{
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(opts.header_read_timeout)
        // A client that half-closes after its request still gets the answer.
        .half_close(true)
        .max_buf_size(64 * 1024);
    let conn = builder.serve_connection(io, svc);
    tokio::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => {
            if let Err(e) = r {
                tracing::debug!("connection ended: {e}");
            }
            return;
        }
        () = tokio::time::sleep(opts.max_connection_age) => {}
        _ = stop.wait_for(|s| *s) => {}
    }
    conn.as_mut().graceful_shutdown();
    let _ = tokio::time::timeout(opts.grace, conn).await;
}

async fn handle(
    req: Request<Incoming>,
    router: Router,
    auth: Option<Arc<BasicAuth>>,
    requests: Option<Arc<Semaphore>>,
    timeout: Duration,
    busy: Busy,
) -> Result<Response<Body>, Infallible> {
    let _busy = busy;
    let _slot = match requests.map(Semaphore::try_acquire_owned) {
        Some(Err(_)) => return Ok(too_many()),
        Some(Ok(p)) => Some(p),
        None => None,
    };
    let work = async move {
        if let Some(auth) = auth {
            if !auth.allows(req.headers().get(header::AUTHORIZATION)).await {
                return unauthorized();
            }
        }
        match router.oneshot(req).await {
            Ok(r) => r,
            Err(never) => match never {},
        }
    };
    Ok(match tokio::time::timeout(timeout, work).await {
        Ok(r) => r,
        Err(_) => {
            let mut r = Response::new(Body::from(format!(
                "request took longer than {timeout:?}; a collector is slow, see the exporter's log\n"
            )));
            *r.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
            r
        }
    })
}

fn too_many() -> Response<Body> {
    let mut r = Response::new(Body::from(
        "503 Service Unavailable: too many concurrent requests (--web.max-requests); retry\n",
    ));
    *r.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

fn unauthorized() -> Response<Body> {
    let mut r = Response::new(Body::from("401 Unauthorized: basic auth required\n"));
    *r.status_mut() = StatusCode::UNAUTHORIZED;
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"ibexporter\", charset=\"UTF-8\""),
    );
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// Checks `Authorization: Basic` against bcrypt hashes.
///
/// bcrypt is deliberately slow (tens of ms at cost 10), so verification
/// runs on the blocking pool, at most two at a time, and successful
/// (user, password, hash) triples are cached so each scrape does not pay
/// for it. Unknown users are checked against a dummy hash so the answer
/// time does not reveal which user names exist.
struct BasicAuth {
    users: Arc<BTreeMap<String, String>>,
    ok_cache: Mutex<HashSet<(String, String)>>,
    verify_slots: Semaphore,
    dummy_hash: String,
}

impl BasicAuth {
    fn new(users: Arc<BTreeMap<String, String>>) -> Self {
        // The cost of a real hash, so a miss costs the same as a hit.
        let cost = users
            .values()
            .filter_map(|h| h.parse::<bcrypt::HashParts>().ok())
            .map(|p| p.get_cost())
            .max()
            .unwrap_or(bcrypt::DEFAULT_COST);
        let dummy_hash = bcrypt::hash("ibexporter-no-such-user", cost)
            .unwrap_or_else(|_| users.values().next().cloned().unwrap_or_default());
        BasicAuth {
            users,
            ok_cache: Mutex::new(HashSet::new()),
            verify_slots: Semaphore::new(2),
            dummy_hash,
        }
    }

    async fn allows(&self, value: Option<&HeaderValue>) -> bool {
        let Some((user, pass)) = value.and_then(parse_basic) else {
            return false;
        };
        let key = (user.clone(), pass.clone());
        if self.ok_cache.lock().expect("auth cache").contains(&key) {
            return true;
        }
        let (hash, known) = match self.users.get(&user) {
            Some(h) => (h.clone(), true),
            None => (self.dummy_hash.clone(), false),
        };
        let Ok(_permit) = self.verify_slots.acquire().await else {
            return false;
        };
        let ok = tokio::task::spawn_blocking(move || bcrypt::verify(pass, &hash).unwrap_or(false))
            .await
            .unwrap_or(false)
            && known;
        if ok {
            let mut cache = self.ok_cache.lock().expect("auth cache");
            if cache.len() >= AUTH_CACHE_MAX {
                cache.clear();
            }
            cache.insert(key);
        }
        ok
    }
}

fn parse_basic(v: &HeaderValue) -> Option<(String, String)> {
    let s = v.to_str().ok()?;
    let (scheme, rest) = s.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let raw = base64::engine::general_purpose::STANDARD
        .decode(rest.trim())
        .ok()?;
    let raw = String::from_utf8(raw).ok()?;
    let (u, p) = raw.split_once(':')?;
    Some((u.to_string(), p.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_header_parsing() {
        let h = |s: &str| HeaderValue::from_str(s).unwrap();
        // "alice:pa:ss"
        assert_eq!(
            parse_basic(&h("Basic YWxpY2U6cGE6c3M=")),
            Some(("alice".into(), "pa:ss".into()))
        );
        assert_eq!(parse_basic(&h("Bearer YWxpY2U6cGE6c3M=")), None);
        assert_eq!(parse_basic(&h("Basic !!!")), None);
        // "alice" (no colon)
        assert_eq!(parse_basic(&h("Basic YWxpY2U=")), None);
    }
}
