//! `ibexporter`: probe RDMA latency continuously and serve it, with HCA
//! port counters and tuning drift, to Prometheus.

use ibhost::exit::Exit;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use ibexporter::config::{self, check_size, Config, ProbeSettings, Transport};
use ibexporter::daemon::{self, DaemonOptions};

/// The top-level `--help` epilogue: examples, then the toolkit's exit code
/// table (`ibhost::exit`).
fn after_help() -> String {
    let examples = "\
Examples:
  ibexporter               # probe this host, serve :9427 (runs until stopped)
  ibexporter --check-config ibexporter/examples/ibexporter.toml
      # validate only: exit 0, or 2 naming the line
  ibexporter --config ibexporter/examples/ibexporter.toml
      # runs until stopped
  ibexporter --listen 127.0.0.1:9427 --profile profiles/thesis-2hca.toml
      # also export drift from an ibtune profile (runs until stopped)
  ibexporter --interval 1s --sizes 32,4096
      # probe faster, two message sizes (runs until stopped)
  ibexporter mesh --simulate --hosts 1000 --racks 25
      # a cluster's probe plan and failure simulation
  ibexporter localize --snapshot ibexporter/tests/fixtures/localize/slow-host.json
      # ranked suspects of a saved mesh: a slow rack pair and a slow host (exits 1)
  curl -s localhost:9427/metrics | grep ibprobe_latency_window
      # what it serves (asks a running exporter)

Options given on the command line override the config file (installed:
/etc/ibexporter/ibexporter.toml, from ibexporter/examples/ibexporter.toml).";
    format!("{examples}\n\n{}", ibhost::exit::help())
}

/// Prometheus exporter for RDMA hosts: continuous latency probing with
/// true percentiles, HCA port counters, and ibtune drift.
///
/// With no options it probes verbs loopback on every active HCA port, the
/// shm and udp reference transports and each CPU's wake-up latency, reads
/// the HCA port counters, and serves everything on
/// http://0.0.0.0:9427/metrics. A host with no RDMA device says so once
/// and serves the rest.
///
/// It also answers other exporters' probes (the responder) on port 18515
/// of the --listen IP: every address by default, loopback only with
/// --listen 127.0.0.1:9427. --secret-file limits it to mesh members; see
/// ibexporter/docs/security-notes.md for who can reach what.
#[derive(Parser, Debug)]
#[command(
    version,
    args_conflicts_with_subcommands = true,
    after_help = after_help()
)]
struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    /// Config file (TOML; every key: config.md, installed in /usr/share/doc/ibexporter/).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Validate FILE and the files it names (web config, TLS files, mesh secret) as a run would, and exit: 0 valid, 2 invalid (one line naming file:line:col, never the contents).
    #[arg(long, value_name = "FILE")]
    check_config: Option<PathBuf>,
    /// Address and port to listen on [default: 0.0.0.0:9427, every address].
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// Web config file (exporter-toolkit style): TLS and basic auth.
    #[arg(long = "web.config.file", value_name = "FILE")]
    web_config: Option<PathBuf>,
    /// Concurrent HTTP requests served; more get 503 at once (0: no limit) [default: 40].
    #[arg(long = "web.max-requests", value_name = "N")]
    max_requests: Option<usize>,
    /// Mesh secret key file (same on every member, mode 600): the responder serves only peers that prove it, and --target peers are probed with it.
    #[arg(long, value_name = "FILE")]
    secret_file: Option<PathBuf>,
    /// Watch this ibtune profile and export its drift.
    #[arg(long, value_name = "PROFILE")]
    profile: Option<PathBuf>,
    /// Read /sys, /proc and /dev under DIR (a captured snapshot, for tests).
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// Time between two rounds of every probe [default: 10s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    interval: Option<Duration>,
    /// Messages per probe round [default: 100].
    #[arg(long = "count", short = 'n', alias = "probes", value_name = "N")]
    probes: Option<u64>,
    /// Message sizes of the local probes: a list (32,4096) and/or doubling ranges between powers of two (8..64), as ibprobe's [default: 32].
    #[arg(long, value_name = "SIZES")]
    sizes: Option<String>,
    /// busy | event: how probes wait for an answer (event costs far less CPU) [default: event].
    #[arg(long, value_name = "POLL")]
    poll: Option<String>,
    /// Overhead budget: probing CPU as a share of one core [default: 0.01].
    #[arg(long, value_name = "FRACTION")]
    budget: Option<f64>,
    /// Sliding window of the percentile summary [default: 5m].
    #[arg(long = "summary-window", alias = "window", value_name = "DURATION", value_parser = parse_duration)]
    window: Option<Duration>,
    /// Do not probe these: any of hca, shm, udp, wakeup (comma separated).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    no_probe: Vec<String>,
    /// This exporter's name in the `source` label (default: the hostname).
    #[arg(long, value_name = "NAME")]
    source: Option<String>,
    /// Responder address (IP:PORT), or "off" [default: the IP of --listen, port 18515; so 0.0.0.0:18515, every address, unless --listen names one].
    #[arg(long, value_name = "ADDR")]
    responder: Option<String>,
    /// Probe this peer's responder (HOST:PORT; repeatable); adds to the config's targets.
    #[arg(long = "target", value_name = "HOST:PORT")]
    targets: Vec<String>,
    /// Transport for --target peers: udp | rc | uc | ud [default: the config's probe.transport].
    #[arg(long, value_name = "T")]
    target_transport: Option<String>,
}

#[derive(clap::Subcommand, Debug)]
enum Command {
    #[command(name = "mesh", alias = "plan")]
    Plan(PlanArgs),
    Localize(LocalizeArgs),
}

/// Old spellings still accepted, with a warning (`ibhost::renamed`).
const RENAMED: &[ibhost::renamed::Renamed] = &[
    ibhost::renamed::Renamed {
        old: "plan",
        new: "mesh",
        command: "ibexporter",
    },
    ibhost::renamed::Renamed {
        old: "--window",
        new: "--summary-window",
        command: "ibexporter",
    },
    ibhost::renamed::Renamed {
        old: "--probes",
        new: "--count",
        command: "ibexporter",
    },
    ibhost::renamed::Renamed {
        old: "--rate-hz",
        new: "--rate",
        command: "ibexporter mesh",
    },
];

/// Show a cluster's probe plan: what each exporter probes each round, what
/// it costs, how fast failures are seen (simulated on a virtual clock).
///
/// The cluster is a file_sd pinglist (every member, racks from a label) or
/// a synthetic one (--simulate). Every exporter with the same list derives
/// the same plan; this prints it without probing anything. Where a round
/// cannot hold every rack pair, the rack pairs rotate: each is probed
/// within K rounds (the coverage time printed). It also prints the series
/// the fleet sends to Prometheus, per exporter and in total. --faults
/// injects faults into the simulated mesh and measures how well they are
/// localized (top-1 precision, recall, rounds; ibexporter/docs/localization.md).
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  ibexporter mesh --simulate --hosts 1000 --racks 25  # figures and detection times\n  ibexporter mesh --file-sd deploy/prometheus/pinglist.json --node rdma-node-03.example.org\n      # that member's round now\n  ibexporter mesh --file-sd deploy/prometheus/pinglist.json --all --epoch 5 --json\n      # every member's round in epoch 5\n\nExit codes: 0 printed, 2 bad options or list."
)]
struct PlanArgs {
    /// The cluster: a Prometheus file_sd JSON pinglist naming every member.
    #[arg(long, value_name = "FILE", conflicts_with = "simulate")]
    file_sd: Option<PathBuf>,
    /// A synthetic cluster of --hosts hosts in --racks racks.
    #[arg(long, requires_all = ["hosts", "racks"])]
    simulate: bool,
    /// Hosts of the synthetic cluster.
    #[arg(long, value_name = "N")]
    hosts: Option<usize>,
    /// Racks of the synthetic cluster (sizes differ by at most one).
    #[arg(long, value_name = "R")]
    racks: Option<usize>,
    /// auto | full | rack-mesh (auto: full while one round holds every other member, else rack-mesh).
    #[arg(long, value_name = "PLAN", default_value = "auto")]
    plan: String,
    /// The target label naming a member's rack.
    #[arg(long, value_name = "LABEL", default_value = "rack")]
    rack_label: String,
    /// rack-mesh: probes per ordered rack pair per round.
    #[arg(long, value_name = "K", default_value_t = 1)]
    rack_peers: usize,
    /// The probe interval (one round; one epoch of the plan).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "10s")]
    interval: Duration,
    /// Messages per target per round.
    #[arg(
        long = "count",
        short = 'n',
        alias = "probes",
        value_name = "N",
        default_value_t = 100
    )]
    probes: u32,
    /// Messages per second inside a round.
    #[arg(
        long = "rate",
        alias = "rate-hz",
        value_name = "RATE",
        default_value_t = 1000.0
    )]
    rate_hz: f64,
    /// What a probe of a dead target costs (the probe timeout).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "1s")]
    timeout: Duration,
    /// Print this member's round (its target name as written in the list).
    #[arg(long, value_name = "NAME", conflicts_with = "all")]
    node: Option<String>,
    /// Print every member's round.
    #[arg(long)]
    all: bool,
    /// The epoch of --node/--all [default: now, unix seconds / interval].
    #[arg(long, value_name = "E")]
    epoch: Option<u64>,
    /// Simulated failures of each kind (dead host, dead rack uplink, slow path; with --faults also the trials of each fault scenario and of the fault-free run) [default: 1000; with --faults 20]; 0: none.
    #[arg(long, value_name = "N")]
    trials: Option<usize>,
    /// Inject faults into the simulated mesh and measure how well they are localized: slow-host, dead-host, slow-nic-tx, slow-rack-pair, lossy-link, flapping-link, or all; comma-separated, a+b for two at once.
    #[arg(long, value_name = "LIST", value_parser = parse_faults)]
    faults: Option<FaultList>,
    /// With --faults: every simulated probe also carries a synthetic hardware-timestamp split (prober delay, responder delay, network), as NICs that stamp completions would give, and the localizer reads it.
    #[arg(long, requires = "faults")]
    simulate_hw_timestamps: bool,
    /// Seed of the simulation (same seed, same numbers).
    #[arg(long, value_name = "N", default_value_t = 1)]
    seed: u64,
    /// Output format: table, or json.
    #[arg(short = 'f', long, value_enum, default_value_t = MeshFormat::Table)]
    format: MeshFormat,
    /// Same as --format json.
    #[arg(long)]
    json: bool,
}

/// Name the slow host, NIC, link, dead host, rack pair or path of a mesh,
/// ranked, with a confidence and the counts that accuse each.
///
/// Reads rounds from a Prometheus that scrapes the exporters (each round:
/// per ordered prober/target pair over one --round-window, messages sent
/// and lost, median and 10th percentile latency, the racks from the
/// plan's series), or from snapshots saved with --save. Feeds them to the
/// same localizer as `ibexporter mesh --faults` and prints the suspects it
/// names after the last round: accused for slowness in 2 of the last 3
/// rounds, for loss in 1. Confidence (0..1): how far the suspect's probes
/// stand out from what its peers see with others, summed over the last 3
/// rounds, divided by 3. The method: ibexporter/docs/localization.md.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  ibexporter localize --snapshot ibexporter/tests/fixtures/localize/slow-host.json\n      # a saved mesh with a slow host and a slow rack pair: both named (exits 1)\n  ibexporter localize --snapshot ibexporter/tests/fixtures/localize/slow-host.json -f markdown\n      # the same, as a Markdown table for a ticket (exits 1)\n  ibexporter localize --prometheus http://localhost:9090 --save /var/tmp/localize\n      # the last 3 windows of 5m, kept for later (needs a Prometheus scraping the exporters)\n  ibexporter localize --prometheus http://localhost:9090 --at now-2h --round-window 1m --json\n      # two hours ago, in 1m windows, as JSON (needs a Prometheus scraping the exporters)\n\nExit codes: 0 no suspect, 1 suspects named, 2 bad options or snapshot, 3 Prometheus unreachable or its answer refused, 130 interrupted."
)]
struct LocalizeArgs {
    /// Read the rounds from this Prometheus (http://HOST:PORT[/PREFIX]).
    #[arg(
        long,
        value_name = "URL",
        required_unless_present = "snapshot",
        conflicts_with = "snapshot"
    )]
    prometheus: Option<String>,
    /// Replay snapshots saved with --save instead (several: their rounds in order).
    #[arg(long, value_name = "FILE", num_args = 1..)]
    snapshot: Vec<PathBuf>,
    /// --prometheus: the end of the last round: unix seconds, an RFC 3339 UTC time (2026-11-28T11:00:00Z), now, or now-DURATION [default: now].
    #[arg(long, value_name = "TIME", requires = "prometheus")]
    at: Option<String>,
    /// --prometheus: consecutive windows to fetch, the last ending at --at (the localizer's window of rounds).
    #[arg(short = 'r', long, value_name = "N", default_value_t = ibexporter::localize::WINDOW_ROUNDS, requires = "prometheus")]
    rounds: usize,
    /// --prometheus: one round's window: counts and quantiles are taken over it [default: 5m].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "prometheus")]
    round_window: Option<Duration>,
    /// Also write the rounds read as a snapshot, DIR/localize-<unix time>.json, for --snapshot.
    #[arg(long, value_name = "DIR")]
    save: Option<PathBuf>,
    /// Output format: table, json, or markdown.
    #[arg(short = 'f', long, value_enum, default_value_t = LocalizeFormat::Table)]
    format: LocalizeFormat,
    /// Same as --format json.
    #[arg(long)]
    json: bool,
}

/// What `ibexporter localize` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LocalizeFormat {
    /// Aligned text for a terminal.
    Table,
    /// JSON (stable field names, ibexporter.localize/1).
    Json,
    /// A Markdown table (for a ticket).
    Markdown,
}

fn localize_request(
    a: &LocalizeArgs,
) -> Result<ibexporter::localize::command::LocalizeRequest, String> {
    use ibexporter::localize::command::{parse_at, LocalizeRequest, Source};
    use ibexporter::localize::report::Format;
    let source = match &a.prometheus {
        Some(url) => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs_f64();
            Source::Prometheus {
                url: url.clone(),
                at: parse_at(a.at.as_deref().unwrap_or("now"), now)?,
                rounds: a.rounds,
                window: a.round_window.unwrap_or(Duration::from_secs(300)),
            }
        }
        None => Source::Snapshots(a.snapshot.clone()),
    };
    Ok(LocalizeRequest {
        source,
        save: a.save.clone(),
        format: match (a.json, a.format) {
            (true, _) | (_, LocalizeFormat::Json) => Format::Json,
            (_, LocalizeFormat::Table) => Format::Table,
            (_, LocalizeFormat::Markdown) => Format::Markdown,
        },
    })
}

/// `ibexporter localize`: the report on stdout, a note or the error on
/// stderr, the exit code of `localize::command`.
fn localize(a: &LocalizeArgs) -> ExitCode {
    let req = match localize_request(a) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("ibexporter localize: {e}");
            return Exit::Input.into();
        }
    };
    // Ctrl-C or SIGTERM wakes a wait on Prometheus (reads poll the flag).
    let stop = ibhost::child::stop_signal_flag().ok();
    let out = ibexporter::localize::command::run(&req, stop);
    print!("{}", out.stdout);
    if !out.stderr.is_empty() {
        eprintln!("ibexporter localize: {}", out.stderr);
    }
    out.exit.into()
}

/// What `ibexporter mesh` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum MeshFormat {
    /// Aligned text for a terminal.
    Table,
    /// JSON (stable field names).
    Json,
}

fn plan_request(a: &PlanArgs) -> Result<ibexporter::planner::PlanRequest, String> {
    use ibexporter::planner::{Input, PlanRequest, View};
    use ibexporter::targets::plan::Timing;
    let input = match (&a.file_sd, a.simulate, a.hosts, a.racks) {
        (Some(p), _, _, _) => Input::FileSd(p.clone()),
        (None, true, Some(hosts), Some(racks)) => Input::Simulate { hosts, racks },
        _ => {
            return Err(
                "plan: give the cluster: --file-sd FILE, or --simulate --hosts N --racks R".into(),
            )
        }
    };
    let choice = a.plan.parse().map_err(|e| format!("--plan {e}"))?;
    if !(1..=64).contains(&a.rack_peers) {
        return Err(format!("--rack-peers {}: give 1..=64", a.rack_peers));
    }
    if a.rate_hz.is_nan() || a.rate_hz <= 0.0 || a.probes == 0 {
        return Err("--rate and --count must be more than zero".into());
    }
    Ok(PlanRequest {
        input,
        plan: config::PlanConfig {
            choice,
            rack_label: a.rack_label.clone(),
            rack_peers: a.rack_peers,
        },
        timing: Timing {
            interval: a.interval.as_secs_f64(),
            probes: f64::from(a.probes),
            rate_hz: a.rate_hz,
            timeout: a.timeout.as_secs_f64(),
        },
        view: match (&a.node, a.all) {
            (Some(n), _) => View::Node(n.clone()),
            (None, true) => View::All,
            (None, false) => View::Cluster,
        },
        epoch: a.epoch,
        trials: a
            .trials
            .unwrap_or(if a.faults.is_some() { 20 } else { 1000 }),
        faults: a.faults.clone().map(|f| f.0),
        sim: ibexporter::localize::sim::SimOptions {
            hw_timestamps: a.simulate_hw_timestamps,
        },
        seed: a.seed,
        json: a.json || a.format == MeshFormat::Json,
    })
}

/// `--faults LIST`, parsed whole (a `Vec` field would make clap take
/// several values).
#[derive(Debug, Clone)]
struct FaultList(Vec<ibexporter::localize::sim::Scenario>);

fn parse_faults(s: &str) -> Result<FaultList, String> {
    ibexporter::localize::sim::parse_scenarios(s).map(FaultList)
}

/// The config file's duration syntax (`250ms`, `10s`, `1m30s`), more than zero.
fn parse_duration(s: &str) -> Result<Duration, String> {
    match config::parse_duration(s) {
        Ok(d) if d.is_zero() => Err(format!("{s:?}: must be more than zero")),
        Ok(d) => Ok(d),
        Err(e) => Err(format!("{s:?}: {e}")),
    }
}

fn options(a: &Args) -> Result<DaemonOptions, String> {
    let file = match &a.config {
        Some(p) => config::load(p).map_err(|e| e.to_string())?,
        None => Config::default(),
    };
    let mut o = DaemonOptions::from_config(&file);
    if let Some(v) = &a.listen {
        o.listen = v.clone();
        // The responder follows the listen address unless told otherwise.
        if !file.responder.bind_given && a.responder.is_none() {
            if let Some(r) = &mut o.responder {
                r.set_ip(listen_ip(v)?);
            }
        }
    }
    if let Some(v) = &a.web_config {
        o.web_config = Some(v.clone());
    }
    if let Some(v) = &a.secret_file {
        o.secret_file = Some(v.clone());
    }
    if let Some(n) = a.max_requests {
        o.max_requests = n;
    }
    if let Some(v) = &a.root {
        o.root = v.clone();
    }
    if let Some(v) = &a.profile {
        o.profile = Some(v.clone());
    }
    if let Some(v) = a.window {
        o.window = v;
    }
    if let Some(s) = &a.source {
        o.local.source = s.clone();
    }
    if let Some(v) = a.interval {
        o.engine.interval = v;
        o.engine.max_interval = o.engine.max_interval.max(v);
    }
    if let Some(v) = a.probes {
        o.engine.probes_per_round = v;
    }
    match a.poll.as_deref() {
        None => {}
        Some("event") => o.engine.event_poll = true,
        Some("busy") => o.engine.event_poll = false,
        Some(p) => {
            return Err(format!(
                "--poll {p}: unknown polling mode; use busy or event"
            ))
        }
    }
    if let Some(b) = a.budget {
        if !(b > 0.0 && b <= 1.0) {
            return Err(format!(
                "--budget {b}: must be a share of one core in (0, 1], e.g. 0.01"
            ));
        }
        o.engine.max_core_fraction = b;
    }
    if let Some(text) = &a.sizes {
        let sizes = &ibhost::list::parse_sizes(text)?;
        // The local probes include the udp reference: udp's limits bind.
        for &s in sizes {
            check_size(Transport::Udp, i64::try_from(s).unwrap_or(i64::MAX))
                .map_err(|e| format!("--sizes {sizes:?}: {e}"))?;
        }
        o.local.sizes = sizes.clone();
    }
    for p in &a.no_probe {
        match p.as_str() {
            "hca" => o.local.hca_loopback = false,
            "wakeup" => o.local.host_wakeup = false,
            "shm" | "udp" => o.local.reference.retain(|r| r.name() != p),
            other => {
                return Err(format!(
                    "--no-probe {other}: unknown probe; use hca, shm, udp or wakeup"
                ))
            }
        }
    }
    match a.responder.as_deref() {
        None => {}
        Some("off") => o.responder = None,
        Some(addr) => {
            o.responder = Some(addr.parse().map_err(|_| {
                format!("--responder {addr}: not an IP:PORT; e.g. 0.0.0.0:18515, or off")
            })?)
        }
    }
    if !a.targets.is_empty() {
        // Checked by the same code as the config file's [targets] static
        // list. The peers take --target-transport (else the config's
        // probe.transport) and the built-in [probe] defaults for op and sizes.
        let transport = match &a.target_transport {
            Some(t) => config::target_transport(t).ok_or_else(|| {
                format!("--target-transport {t}: unknown transport; use rc, uc, ud or udp")
            })?,
            None => file.probe.transport,
        };
        let mut entries = Vec::new();
        for t in &a.targets {
            let bad = || format!("--target {t}: write HOST:PORT, e.g. 10.0.0.2:18515");
            let (host, port) = t.rsplit_once(':').ok_or_else(bad)?;
            entries.push((host.to_string(), port.parse::<i64>().map_err(|_| bad())?));
        }
        let probe = ProbeSettings {
            transport,
            ..Config::default().probe
        };
        let extra =
            config::static_targets("--target", &entries, &probe).map_err(|e| e.to_string())?;
        o.targets.static_targets.extend(extra);
    }
    daemon::check_files(&o)?;
    Ok(o)
}

/// The IP `--listen` binds (the responder's default follows it).
fn listen_ip(listen: &str) -> Result<std::net::IpAddr, String> {
    use std::net::ToSocketAddrs;
    listen
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .map(|a| a.ip())
        .ok_or_else(|| {
            format!("--listen {listen}: not an address; write IP:PORT, e.g. 127.0.0.1:9427")
        })
}

/// `--check-config FILE`: the file, then every file it names, as a run
/// reads them.
fn check_config(p: &std::path::Path) -> Result<(), String> {
    let c = config::load(p).map_err(|e| e.to_string())?;
    daemon::check_files(&DaemonOptions::from_config(&c))?;
    Ok(())
}

fn main() -> ExitCode {
    // Before any thread exists (see the function's docs).
    let _ = ibexporter::sys::return_large_buffers_to_the_os();
    let _ = ibexporter::sys::raise_open_files_limit();
    // `ibexporter --generate-docs DIR`: man page and completions (scripts/package).
    if let Some(dir) = ibdoc::requested() {
        return ExitCode::from(ibdoc::run(<Args as clap::CommandFactory>::command(), &dir));
    }
    ibhost::renamed::warn(RENAMED);
    let args = Args::parse();
    if let Some(Command::Localize(l)) = &args.command {
        return localize(l);
    }
    if let Some(Command::Plan(p)) = &args.command {
        return match plan_request(p).and_then(|r| ibexporter::planner::run(&r)) {
            Ok(text) => {
                print!("{text}");
                if !text.ends_with('\n') {
                    println!();
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("ibexporter mesh: {e}");
                Exit::Input.into()
            }
        };
    }
    if let Some(p) = &args.check_config {
        return match check_config(p) {
            Ok(()) => {
                println!("{}: valid", p.display());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("ibexporter: {e}");
                Exit::Input.into()
            }
        };
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // Colour only on a terminal: journald and log files get plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .init();
    let o = match options(&args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("ibexporter: {e}");
            return Exit::Input.into();
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
            return Exit::Failed.into();
        }
    };
    // Listening for SIGTERM from here, before anything is served.
    let shutdown = {
        let _in_runtime = rt.enter();
        ibexporter::shutdown_signal()
    };
    match rt.block_on(daemon::run(o, shutdown)) {
        Ok(()) => {
            tracing::info!("shut down");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ibexporter: {e:#}");
            Exit::Failed.into()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(argv: &[&str]) -> Result<DaemonOptions, String> {
        options(&Args::try_parse_from(argv).unwrap())
    }

    #[test]
    fn the_responder_follows_the_listen_address_unless_told() {
        let o = parsed(&["ibexporter", "--listen", "127.0.0.1:9427"]).unwrap();
        assert_eq!(o.responder, Some("127.0.0.1:18515".parse().unwrap()));
        let o = parsed(&["ibexporter"]).unwrap();
        assert_eq!(o.responder, Some("0.0.0.0:18515".parse().unwrap()));
        let o = parsed(&[
            "ibexporter",
            "--listen",
            "127.0.0.1:9427",
            "--responder",
            "0.0.0.0:18600",
        ])
        .unwrap();
        assert_eq!(o.responder, Some("0.0.0.0:18600".parse().unwrap()));
        let o = parsed(&[
            "ibexporter",
            "--listen",
            "[::1]:9427",
            "--web.max-requests",
            "3",
        ])
        .unwrap();
        assert_eq!(o.responder, Some("[::1]:18515".parse().unwrap()));
        assert_eq!(o.max_requests, 3);
        let e = parsed(&["ibexporter", "--secret-file", "/nonexistent/mesh.key"]).unwrap_err();
        assert!(e.contains("/nonexistent/mesh.key"), "{e}");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert!(parse_duration("2").is_err(), "a unit is required");
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("ten").is_err());
        assert!(parse_duration("3w").is_err());
    }
}
