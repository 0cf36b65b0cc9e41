//! The accept loop: HTTP/1.1 over plain TCP or TLS, with a header-read
//! timeout, a per-request timeout, a connection cap, a maximum connection
//! age, basic auth and graceful shutdown.
//!
//! Why not `axum::serve`: it offers none of the timeouts, no TLS and no
//! connection cap, and a client that connects and sends nothing would hold
//! its connection for ever.

use super::webconfig::WebConfig;
use axum::body::Body;
use axum::http::{header, HeaderValue, Request, Response, StatusCode};
use axum::Router;
use base64::Engine as _;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::collections::{BTreeMap, HashSet};
use std::convert::Infallible;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tower::ServiceExt as _;

/// Limits that keep slow or hostile clients from stalling the exporter.
///
/// Why it exists: the defaults suit a Prometheus scrape; tests shorten them.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// A client must send a complete request head within this time after
    /// connecting or after the previous response (so idle keep-alive
    /// connections also close after it). Default 10 s.
    pub header_read_timeout: Duration,
    /// A TLS handshake must finish within this time. Default 10 s.
    pub tls_handshake_timeout: Duration,
    /// Producing a response (auth, collection, encoding) may take this
    /// long; after it the client gets 503. Default 30 s.
    pub request_timeout: Duration,
    /// At most this many connections are served at once; further clients
    /// wait in the listen backlog. Default 1024 (keep-alive clients hold a slot: wrk -c200 must all be served).
    pub max_connections: usize,
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
            header_read_timeout: Duration::from_secs(10),
            tls_handshake_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            max_connections: 1024,
            max_connection_age: Duration::from_secs(300),
            grace: Duration::from_secs(10),
        }
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
    let max = opts.max_connections.clamp(1, Semaphore::MAX_PERMITS);
    let slots = Arc::new(Semaphore::new(max));
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
        let permit = tokio::select! {
            p = Arc::clone(&slots).acquire_owned() => p.expect("connection semaphore never closed"),
            () = &mut shutdown => break,
        };
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
        let _ = stream.set_nodelay(true);
        let router = router.clone();
        let auth = auth.clone();
        let tls = tls.clone();
        let opts = Arc::clone(&opts);
        let stop = stop_rx.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let request_timeout = opts.request_timeout;
            let svc = hyper::service::service_fn(move |req| {
                handle(req, router.clone(), auth.clone(), request_timeout)
            });
            match tls {
                None => drive(TokioIo::new(stream), svc, &opts, stop).await,
                Some(acceptor) => {
                    match tokio::time::timeout(opts.tls_handshake_timeout, acceptor.accept(stream))
                        .await
                    {
                        Ok(Ok(s)) => drive(TokioIo::new(s), svc, &opts, stop).await,
                        Ok(Err(e)) => tracing::debug!("TLS handshake failed: {e}"),
                        Err(_) => tracing::debug!("TLS handshake timed out"),
                    }
                }
            }
        });
    }

    drop(listener);
    let _ = stop_tx.send(true);
    // Every connection task holds a permit; all permits back = all done.
    let grace = opts.grace + Duration::from_secs(1);
    let all = u32::try_from(max).unwrap_or(u32::MAX);
    if tokio::time::timeout(grace, slots.acquire_many(all))
        .await
        .is_err()
    {
        tracing::warn!(
            "shutdown: {} connection(s) still open after {grace:?}, dropping them",
            max - slots.available_permits()
        );
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
    timeout: Duration,
) -> Result<Response<Body>, Infallible> {
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

const AUTH_CACHE_MAX: usize = 64;

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
