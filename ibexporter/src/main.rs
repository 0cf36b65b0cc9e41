//! `ibexporter`: probe RDMA latency continuously and serve it, with HCA
//! port counters and tuning drift, to Prometheus.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use ibexporter::daemon::{self, DaemonOptions};

/// Prometheus exporter for RDMA hosts: continuous latency probing with
/// true percentiles, HCA port counters, and ibtune drift.
///
/// With no options it probes verbs loopback on every active HCA port, the
/// shm and udp reference transports and each CPU's wake-up latency, reads
/// the HCA port counters, and serves everything on
/// http://0.0.0.0:9427/metrics. A host with no RDMA device says so once
/// and serves the rest.
#[derive(Parser, Debug)]
#[command(
    version,
    after_help = "Examples:\n  ibexporter                                   probe this host, serve :9427\n  ibexporter --listen 127.0.0.1:9427 --profile profiles/thesis-2hca.toml\n                                               also export drift from an ibtune profile\n  ibexporter --interval 1s --sizes 32,4096     probe faster, two message sizes\n  curl -s localhost:9427/metrics | grep ibprobe_latency_window\n\nExit codes: 0 stopped by SIGINT/SIGTERM, 2 bad options or config, 3 could not start\n(listen address taken, unreadable host root)."
)]
struct Args {
    /// Address and port to listen on.
    #[arg(long, value_name = "ADDR", default_value = ibexporter::DEFAULT_LISTEN)]
    listen: String,
    /// Web config file (exporter-toolkit style): TLS and basic auth.
    #[arg(long = "web.config.file", value_name = "FILE")]
    web_config: Option<PathBuf>,
    /// Watch this ibtune profile and export its drift.
    #[arg(long, value_name = "FILE")]
    profile: Option<PathBuf>,
    /// Read /sys, /proc and /dev under DIR (a captured snapshot, for tests).
    #[arg(long, value_name = "DIR", default_value = "/")]
    root: PathBuf,
    /// Time between two rounds of every probe (the throttle may stretch it).
    #[arg(long, value_name = "DUR", default_value = "10s", value_parser = parse_duration)]
    interval: Duration,
    /// Messages per probe round.
    #[arg(long, value_name = "N", default_value_t = 100)]
    probes: u64,
    /// Message sizes of the local probes, comma separated.
    #[arg(long, value_name = "LIST", default_value = "32", value_delimiter = ',')]
    sizes: Vec<usize>,
    /// busy | event: how probes wait for an answer (event costs far less CPU).
    #[arg(long, value_name = "MODE", default_value = "event")]
    poll: String,
    /// Overhead budget: probing CPU as a share of one core.
    #[arg(long, value_name = "FRACTION", default_value_t = 0.01)]
    budget: f64,
    /// Sliding window of the percentile summary.
    #[arg(long, value_name = "DUR", default_value = "5m", value_parser = parse_duration)]
    window: Duration,
    /// Do not probe these: any of hca, shm, udp, wakeup (comma separated).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    no_probe: Vec<String>,
    /// This exporter's name in the `source` label (default: the hostname).
    #[arg(long, value_name = "NAME")]
    source: Option<String>,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let (num, unit) = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .map_or((s, "s"), |i| s.split_at(i));
    let v: f64 = num
        .parse()
        .map_err(|_| format!("{s:?}: not a duration; write e.g. 250ms, 10s, 5m, 1h"))?;
    let secs = match unit {
        "ns" => v * 1e-9,
        "us" => v * 1e-6,
        "ms" => v * 1e-3,
        "s" => v,
        "m" => v * 60.0,
        "h" => v * 3600.0,
        u => {
            return Err(format!(
                "{s:?}: unknown unit {u:?}; use ns, us, ms, s, m or h"
            ))
        }
    };
    if !(secs > 0.0 && secs.is_finite()) {
        return Err(format!("{s:?}: must be more than zero"));
    }
    Ok(Duration::from_secs_f64(secs))
}

fn options(a: &Args) -> Result<DaemonOptions, String> {
    let mut o = DaemonOptions {
        listen: a.listen.clone(),
        web_config: a.web_config.clone(),
        root: a.root.clone(),
        profile: a.profile.clone(),
        window: a.window,
        ..DaemonOptions::default()
    };
    if let Some(s) = &a.source {
        o.local.source = s.clone();
    }
    o.engine.interval = a.interval;
    o.engine.max_interval = o.engine.max_interval.max(a.interval);
    o.engine.probes_per_round = a.probes;
    o.engine.event_poll = match a.poll.as_str() {
        "event" => true,
        "busy" => false,
        p => {
            return Err(format!(
                "--poll {p}: unknown polling mode; use busy or event"
            ))
        }
    };
    if !(a.budget > 0.0 && a.budget <= 1.0) {
        return Err(format!(
            "--budget {}: must be a share of one core in (0, 1], e.g. 0.01",
            a.budget
        ));
    }
    o.engine.max_core_fraction = a.budget;
    if a.sizes.is_empty() || a.sizes.iter().any(|&s| !(8..=65_507).contains(&s)) {
        return Err(format!(
            "--sizes {:?}: each size must be 8..=65507 bytes (udp carries an 8-byte sequence number)",
            a.sizes
        ));
    }
    o.local.sizes = a.sizes.clone();
    for p in &a.no_probe {
        match p.as_str() {
            "hca" => o.local.hca_loopback = false,
            "wakeup" => o.local.host_wakeup = false,
            "shm" | "udp" => o.local.reference.retain(|r| r != p),
            other => {
                return Err(format!(
                    "--no-probe {other}: unknown probe; use hca, shm, udp or wakeup"
                ))
            }
        }
    }
    Ok(o)
}

fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
    let o = match options(&args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("ibexporter: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ibexporter: cannot start the async runtime: {e}");
            return ExitCode::from(3);
        }
    };
    match rt.block_on(daemon::run(o, ibexporter::shutdown_signal())) {
        Ok(()) => {
            tracing::info!("shut down");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ibexporter: {e:#}");
            ExitCode::from(3)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("ten").is_err());
        assert!(parse_duration("3d").is_err());
    }
}
