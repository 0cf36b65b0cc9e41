//! HTTP serving: the routes (`/metrics` with content negotiation,
//! `/healthz`, `/`), the shared [`Metrics`] handle they read, and a hardened
//! server ([`serve`]) with optional TLS and basic auth ([`webconfig`]).
//!
//! Why it exists: one place decides what a scrape gets back and how a slow
//! or hostile client is kept from stalling the exporter, so `main` and the
//! tests serve exactly the same thing.
//!
//! # Formats served on `GET /metrics`
//!
//! | the `Accept` header prefers | answer `Content-Type` |
//! |---|---|
//! | `application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited` (Prometheus with native histograms) | [`PROTOBUF_CONTENT_TYPE`] |
//! | `application/openmetrics-text` (Prometheus' default) | [`OPENMETRICS_CONTENT_TYPE`] |
//! | anything else, or no `Accept` (curl, browsers, `promtool`) | [`TEXT_CONTENT_TYPE`] |
//!
//! q-values are honoured; on a tie the range listed first wins.
//! `/metrics?format=text|openmetrics|protobuf` overrides the negotiation:
//! for looking at a format in a browser, and for Prometheus 2.42 to 2.44,
//! which with native histograms enabled keeps only the native series of a
//! histogram scraped as protobuf and has no `scrape_classic_histograms`
//! yet: a second job with `params: {format: [openmetrics]}` keeps the
//! classic buckets too.
//! prometheus-client only writes OpenMetrics text, which is not valid
//! Prometheus text 0.0.4 (`# TYPE x info`, counter families named without
//! `_total`, `# EOF`, `# UNIT`), so the 0.0.4 text is rendered here from the
//! same data model the protobuf encoder produces
//! ([`crate::expo::text::encode_text_004`]).
//! Native histograms only exist in the protobuf format; the text formats
//! carry their classic buckets.
//!
//! # Self metric
//!
//! `ibexporter_scrape_duration_seconds{format="text|openmetrics|protobuf"}`
//! is a classic **histogram** (not a last-value gauge) of the time spent
//! collecting and encoding one `/metrics` answer: several Prometheus servers
//! may scrape at once and a gauge would show only whichever came last,
//! hiding the slow ones. A scrape's own duration shows up in the next
//! scrape. Prometheus' `scrape_duration_seconds` still measures the whole
//! round trip, network included.
//!
//! # Read-only
//!
//! Every route is `GET` (axum answers `HEAD` for it too, without a body);
//! other methods get 405 with an `Allow` header, unknown paths 404. No
//! endpoint changes anything.

mod server;
pub mod webconfig;

pub use crate::expo::{
    EncodeError, Encoded, FamilySource, Format, OPENMETRICS_CONTENT_TYPE, PROTOBUF_CONTENT_TYPE,
    TEXT_CONTENT_TYPE,
};
pub use server::{listen, serve, serve_with, ServeOptions, DEFAULT_MAX_REQUESTS};
pub use webconfig::{WebConfig, WebConfigError};

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use prometheus_client::encoding::prometheus_protobuf;
use prometheus_client::encoding::text as om_text;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};
use prost::Message;

use crate::expo::text::encode_text_004;
use crate::limits::MAX_CONCURRENT_ENCODES;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::Semaphore;

/// Name of the self metric recording how long each `/metrics` answer took.
pub const SCRAPE_DURATION_METRIC: &str = "ibexporter_scrape_duration_seconds";

/// Label set of the self metric.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FormatLabel {
    format: &'static str,
}

struct Inner {
    registries: Vec<Arc<Registry>>,
    sources: Vec<FamilySource>,
    own: Registry,
    scrape_duration: Family<FormatLabel, Histogram>,
    encode_slots: Arc<Semaphore>,
}

/// The shared, cheaply cloned handle the HTTP routes read metrics from:
/// any number of prometheus-client registries plus the server's own
/// self metrics.
///
/// Why it exists: the exporter will have several sources (probe
/// histograms, HCA counters, tuning drift) that are built separately;
/// `Metrics` gathers them behind one handle the router can clone into each
/// request. Registries are immutable once added (their metrics and
/// collectors update themselves), so no lock is held while encoding.
/// Families in different registries must have different names.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("registries", &self.inner.registries.len())
            .finish_non_exhaustive()
    }
}

impl Metrics {
    /// A handle serving one registry (plus the self metrics).
    pub fn new(registry: impl Into<Arc<Registry>>) -> Self {
        Self::with_registries([registry.into()])
    }

    /// A handle serving several registries, encoded in the given order
    /// (plus the self metrics, last).
    pub fn with_registries(registries: impl IntoIterator<Item = Arc<Registry>>) -> Self {
        Self::with_registries_and_sources(registries, Vec::new())
    }

    /// Registries plus [`FamilySource`]s: families prometheus-client has no
    /// type for (the latency summary), encoded after the registries.
    pub fn with_registries_and_sources(
        registries: impl IntoIterator<Item = Arc<Registry>>,
        sources: Vec<FamilySource>,
    ) -> Self {
        let scrape_duration = Family::<FormatLabel, Histogram>::new_with_constructor(|| {
            // 50 µs .. ~1.6 s, doubling.
            Histogram::new(exponential_buckets(50e-6, 2.0, 16))
        });
        let mut own = Registry::default();
        own.register_with_unit(
            "ibexporter_scrape_duration",
            "Time spent collecting and encoding one /metrics answer, by format",
            Unit::Seconds,
            scrape_duration.clone(),
        );
        for f in [Format::Text, Format::OpenMetrics, Format::Protobuf] {
            // Present from the start, so rate() has a zero to begin with.
            let _ = scrape_duration.get_or_create(&FormatLabel { format: f.label() });
        }
        Metrics {
            inner: Arc::new(Inner {
                registries: registries.into_iter().collect(),
                sources,
                own,
                scrape_duration,
                encode_slots: Arc::new(Semaphore::new(MAX_CONCURRENT_ENCODES)),
            }),
        }
    }

    fn all(&self) -> impl Iterator<Item = &Registry> {
        self.inner
            .registries
            .iter()
            .map(|r| r.as_ref())
            .chain(std::iter::once(&self.inner.own))
    }

    /// Encodes everything in `format` as one buffer (tests, benchmarks).
    /// Blocking: collectors run here.
    pub fn encode(&self, format: Format) -> Result<Vec<u8>, EncodeError> {
        Ok(self.encode_chunks(format)?.concat())
    }

    /// Encodes everything in `format` as the chunks of one answer, and
    /// records how long it took in `ibexporter_scrape_duration_seconds`:
    /// the registries (encoded now), then each [`FamilySource`]'s shared
    /// bytes (no copy), then `# EOF` for OpenMetrics. Blocking: collectors
    /// run here, so async callers use [`Metrics::encode_off_executor`].
    pub fn encode_chunks(&self, format: Format) -> Result<Vec<Bytes>, EncodeError> {
        let start = Instant::now();
        let out = self.encode_untimed(format);
        self.inner
            .scrape_duration
            .get_or_create(&FormatLabel {
                format: format.label(),
            })
            .observe(start.elapsed().as_secs_f64());
        out
    }

    fn encode_untimed(&self, format: Format) -> Result<Vec<Bytes>, EncodeError> {
        let fmt_err = |source| EncodeError::Fmt { format, source };
        let head = match format {
            Format::OpenMetrics => {
                let mut s = String::with_capacity(16 * 1024);
                for r in self.all() {
                    om_text::encode_registry(&mut s, r).map_err(fmt_err)?;
                }
                s.into_bytes()
            }
            Format::Protobuf => {
                let mut out = Vec::with_capacity(16 * 1024);
                for r in self.all() {
                    for fam in prometheus_protobuf::encode(r).map_err(fmt_err)? {
                        fam.encode_length_delimited(&mut out)?;
                    }
                }
                out
            }
            Format::Text => {
                let mut out = Vec::with_capacity(16 * 1024);
                for r in self.all() {
                    let fams = prometheus_protobuf::encode(r).map_err(fmt_err)?;
                    encode_text_004(&mut out, &fams);
                }
                out
            }
        };
        let mut chunks = vec![Bytes::from(head)];
        for src in &self.inner.sources {
            chunks.push(src.encoded(format)?);
        }
        if format == Format::OpenMetrics {
            let mut eof = String::new();
            om_text::encode_eof(&mut eof).map_err(fmt_err)?;
            chunks.push(Bytes::from(eof));
        }
        Ok(chunks)
    }

    /// Encodes on tokio's blocking pool, at most two at a time, so slow
    /// collectors never hold an executor thread and a burst of scrapes does
    /// not become a burst of collection.
    pub async fn encode_off_executor(&self, format: Format) -> Result<Vec<Bytes>, EncodeError> {
        let permit = Arc::clone(&self.inner.encode_slots)
            .acquire_owned()
            .await
            .expect("the encode semaphore is never closed");
        let me = self.clone();
        // The permit moves into the task: a scrape that times out and is
        // dropped still holds its slot until its encoding really ends.
        let task = move || {
            let _permit = permit;
            me.encode_chunks(format)
        };
        match tokio::task::spawn_blocking(task).await {
            Ok(r) => r,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => panic!("metrics encoding task was cancelled: {e}"),
        }
    }
}

/// A response body made of shared chunks, sent one after the other with
/// an exact `Content-Length`.
///
/// Why it exists: the latency families are one cached buffer that every
/// concurrent scrape shares; concatenating them with the rest would copy
/// megabytes per answer (200 answers in flight held 150 MB before).
struct Chunks {
    chunks: std::collections::VecDeque<Bytes>,
    remaining: u64,
}

impl Chunks {
    fn new(chunks: Vec<Bytes>) -> Chunks {
        let remaining = chunks.iter().map(|c| c.len() as u64).sum();
        Chunks {
            chunks: chunks.into_iter().filter(|c| !c.is_empty()).collect(),
            remaining,
        }
    }
}

impl http_body::Body for Chunks {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        let next = self.chunks.pop_front();
        if let Some(c) = &next {
            self.remaining -= c.len() as u64;
        }
        std::task::Poll::Ready(next.map(|c| Ok(http_body::Frame::data(c))))
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.is_empty()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.remaining)
    }
}

/// Writes protobuf-model metric families as Prometheus text format 0.0.4.
///
/// Why it exists: prometheus-client writes only OpenMetrics text, which the
/// 0.0.4 parsers (`promtool check metrics`, older scrapers) reject or
/// misread. Counters keep their `_total` family name, info metrics become
/// gauges, histograms get `_bucket` (with `+Inf`), `_sum` and `_count`;
/// native buckets are left out (text cannot carry them).
/// Builds the exporter's routes on `metrics`: `GET /metrics` (negotiated
/// format, see the module docs), `GET /healthz` (`ok`), `GET /` (a landing
/// page with the version and links), 404 for other paths, 405 for other
/// methods.
///
/// Why it exists: `main` and the tests serve the same routes; the server
/// around them ([`serve`]) adds timeouts, TLS and basic auth.
pub fn router(metrics: Metrics) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/metrics", get(scrape))
        .fallback(not_found)
        .with_state(metrics)
}

async fn index() -> Html<String> {
    Html(format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>ibexporter</title></head>\n\
         <body><h1>ibexporter {version}</h1>\n\
         <p>Prometheus exporter for RDMA real-time hosts.</p>\n\
         <ul>\n<li><a href=\"/metrics\">/metrics</a>: metrics (Prometheus text, OpenMetrics or protobuf, by <code>Accept</code>)</li>\n\
         <li><a href=\"/healthz\">/healthz</a>: liveness</li>\n</ul>\n</body></html>\n",
        version = crate::VERSION
    ))
}

async fn not_found(uri: Uri) -> (StatusCode, String) {
    (
        StatusCode::NOT_FOUND,
        format!(
            "not found: {}; try /metrics, /healthz or /\n",
            uri.path().escape_debug()
        ),
    )
}

async fn scrape(State(metrics): State<Metrics>, uri: Uri, headers: HeaderMap) -> Response {
    let forced = uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter_map(|kv| kv.strip_prefix("format="))
        .next_back();
    let format = match forced {
        Some(f) => match Format::from_label(f) {
            Some(f) => f,
            None => {
                return (
                    StatusCode::BAD_REQUEST,
                    format!(
                        "unknown format {:?} in ?format=; use text, openmetrics or protobuf, \
                         or leave it out to negotiate by Accept\n",
                        f.escape_debug().to_string()
                    ),
                )
                    .into_response()
            }
        },
        None => {
            let accept = headers
                .get_all(header::ACCEPT)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .collect::<Vec<_>>()
                .join(",");
            Format::negotiate((!accept.is_empty()).then_some(accept.as_str()))
        }
    };
    match metrics.encode_off_executor(format).await {
        Ok(chunks) => (
            [
                (
                    header::CONTENT_TYPE,
                    HeaderValue::from_static(format.content_type()),
                ),
                (header::VARY, HeaderValue::from_static("Accept")),
            ],
            axum::body::Body::new(Chunks::new(chunks)),
        )
            .into_response(),
        Err(e) => {
            tracing::error!("/metrics: {e}");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("{e}; see the exporter's log\n"),
            )
                .into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROM_NATIVE: &str = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited,application/openmetrics-text;version=1.0.0;q=0.8,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    const PROM_DEFAULT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

    #[test]
    fn negotiation() {
        assert_eq!(Format::negotiate(None), Format::Text);
        assert_eq!(Format::negotiate(Some("*/*")), Format::Text);
        assert_eq!(Format::negotiate(Some(PROM_NATIVE)), Format::Protobuf);
        assert_eq!(Format::negotiate(Some(PROM_DEFAULT)), Format::OpenMetrics);
        assert_eq!(
            Format::negotiate(Some(
                "text/plain;version=0.0.4;q=0.9, application/openmetrics-text;q=0.3"
            )),
            Format::Text
        );
        // Protobuf without the delimited encoding is not something we write.
        assert_eq!(
            Format::negotiate(Some("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=text")),
            Format::Text
        );
        assert_eq!(Format::negotiate(Some("application/json")), Format::Text);
        assert_eq!(
            Format::negotiate(Some("application/openmetrics-text;q=0, text/plain")),
            Format::Text
        );
    }

    #[test]
    fn a_chunked_body_has_an_exact_length_and_keeps_the_order() {
        use http_body::Body as _;
        let parts = vec![
            Bytes::from_static(b"head\n"),
            Bytes::new(),
            Bytes::from_static(b"latency\n"),
            Bytes::from_static(b"# EOF\n"),
        ];
        let mut body = Chunks::new(parts);
        assert_eq!(body.size_hint().exact(), Some(19));
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        let mut got = Vec::new();
        while let std::task::Poll::Ready(Some(Ok(frame))) =
            std::pin::Pin::new(&mut body).poll_frame(&mut cx)
        {
            got.extend_from_slice(&frame.into_data().unwrap());
            assert_eq!(body.size_hint().exact(), Some(19 - got.len() as u64));
        }
        assert_eq!(got, b"head\nlatency\n# EOF\n");
        assert!(body.is_end_stream());
    }

    #[test]
    fn text_004_shapes() {
        use prometheus_client::metrics::counter::Counter;
        use prometheus_client::metrics::info::Info;
        let mut reg = Registry::default();
        let c: Counter = Counter::default();
        c.inc_by(3);
        reg.register("requests", "Requests \\ served\nso far", c);
        reg.register(
            "build",
            "build info",
            Info::new(vec![("version".to_string(), "a\"b".to_string())]),
        );
        let text = String::from_utf8(Metrics::new(reg).encode(Format::Text).unwrap()).unwrap();
        assert!(
            text.contains("# HELP requests_total Requests \\\\ served\\nso far.\n"),
            "{text}"
        );
        assert!(
            text.contains("# TYPE requests_total counter\nrequests_total 3\n"),
            "{text}"
        );
        assert!(
            text.contains("# TYPE build_info gauge\nbuild_info{version=\"a\\\"b\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "ibexporter_scrape_duration_seconds_bucket{format=\"text\",le=\"+Inf\"} 0\n"
            ),
            "{text}"
        );
        assert!(!text.contains("# EOF"), "{text}");
    }
}
