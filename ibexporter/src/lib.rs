//! ibexporter: a Prometheus / OpenMetrics exporter for the tuning state of
//! RDMA real-time hosts.
//!
//! Why it exists: drift from an applied ibtune profile (an IRQ moved back,
//! a dropped latency request) should show up on a dashboard, not in a
//! latency histogram. **This is a stub** until the exporter issue lands: it
//! serves only `ibexporter_build_info{version="..."} 1` and
//! `ibexporter_up 1`, so deployment, scraping and dashboards can be wired up
//! now.

pub mod collect;
pub mod http;

use axum::http::header;
use axum::response::{Html, IntoResponse};
use axum::routing::get;
use axum::Router;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;
use std::future::Future;
use std::sync::Arc;

/// The default listen address; 9427 is unassigned on the Prometheus
/// exporter port list.
pub const DEFAULT_LISTEN: &str = "0.0.0.0:9427";

/// The OpenMetrics text content type that `/metrics` is served with.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// This crate's version, as reported in `ibexporter_build_info`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Builds the registry of everything the exporter reports.
///
/// Why it exists: one place that defines the metric set, shared by the
/// server and tests.
pub fn registry() -> Registry {
    let mut reg = Registry::default();
    // An OpenMetrics info metric: encoded as `ibexporter_build_info{...} 1`.
    reg.register(
        "ibexporter_build",
        "ibexporter build information",
        Info::new(vec![("version".to_string(), VERSION.to_string())]),
    );
    let up: Gauge = Gauge::default();
    up.set(1);
    reg.register(
        "ibexporter_up",
        "1 while the exporter is serving (stub: no host checks yet)",
        up,
    );
    reg
}

/// Renders a registry in the OpenMetrics text format (ending in `# EOF`).
///
/// Why it exists: the `/metrics` body, testable without a server.
pub fn render(reg: &Registry) -> Result<String, std::fmt::Error> {
    let mut out = String::new();
    encode(&mut out, reg)?;
    Ok(out)
}

const INDEX: &str = "<!doctype html>\n<html><head><title>ibexporter</title></head>\n<body><h1>ibexporter</h1>\n<p>Stub exporter: build info and liveness only, until the exporter issue lands.</p>\n<p><a href=\"/metrics\">/metrics</a></p>\n</body></html>\n";

/// The HTTP routes: `/` (a page linking `/metrics`) and `/metrics`.
///
/// Why it exists: the server in `main` and tests serve the same router.
pub fn router() -> Router {
    let reg = Arc::new(registry());
    Router::new()
        .route("/", get(|| async { Html(INDEX) }))
        .route(
            "/metrics",
            get(move || {
                let reg = Arc::clone(&reg);
                async move {
                    match render(&reg) {
                        Ok(body) => ([(header::CONTENT_TYPE, OPENMETRICS_CONTENT_TYPE)], body)
                            .into_response(),
                        Err(_) => (
                            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                            "encoding metrics failed\n",
                        )
                            .into_response(),
                    }
                }
            }),
        )
}

/// Serves [`router`] on `listener` until `shutdown` completes, then lets
/// in-flight requests finish.
///
/// Why it exists: `main` passes a Ctrl-C / SIGTERM future; tests can pass
/// their own.
pub async fn serve(
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router())
        .with_graceful_shutdown(shutdown)
        .await
}

/// Completes on Ctrl-C (SIGINT) or SIGTERM.
///
/// Why it exists: systemd stops services with SIGTERM, terminals with
/// Ctrl-C; both must shut the server down cleanly.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        // If the handler cannot be installed, only SIGTERM stops us.
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_both_metrics() {
        let text = render(&registry()).unwrap();
        assert!(
            text.contains(&format!(
                "ibexporter_build_info{{version=\"{VERSION}\"}} 1\n"
            )),
            "{text}"
        );
        assert!(text.contains("ibexporter_up 1\n"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
