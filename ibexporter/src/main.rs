//! `ibexporter`: serve the exporter's metrics over HTTP.

use anyhow::Context;
use clap::Parser;

/// Prometheus / OpenMetrics exporter for RDMA host tuning state.
///
/// THIS IS A STUB until the exporter issue lands: it serves /metrics with
/// only `ibexporter_build_info{version="..."} 1` and `ibexporter_up 1`, and a
/// page at / that links to it. It checks nothing on the host yet.
#[derive(Parser)]
#[command(version)]
struct Args {
    /// Address and port to listen on.
    #[arg(long, value_name = "ADDR", default_value = ibexporter::DEFAULT_LISTEN)]
    listen: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    let addr = listener
        .local_addr()
        .context("reading the listen address")?;
    eprintln!(
        "ibexporter {} (stub) serving http://{addr}/metrics",
        ibexporter::VERSION
    );
    ibexporter::serve(listener, ibexporter::shutdown_signal())
        .await
        .context("serving HTTP")?;
    eprintln!("ibexporter: shut down");
    Ok(())
}
