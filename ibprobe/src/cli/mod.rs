//! The command line: `ibprobe devices | loopback | server | client | sweep | host`.
//!
//! Why it exists: a thin layer over the library: it parses options into a
//! [`crate::probe::ProbeConfig`] and a transport, runs the probe, prints a
//! [`crate::report::Report`], and maps failures to exit codes:
//! 0 ok, 2 bad input (one line on stderr: what, with what input, what to
//! do), 3 the run failed (peer lost, transport error), 130 interrupted by
//! Ctrl-C after printing the statistics collected so far.

mod devices;
mod host;
mod run;
mod sweep;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::report::Format;
use crate::verbs::args::VerbsArgs;

/// Exit code: bad input.
pub const EXIT_INPUT: u8 = 2;
/// Exit code: the run failed.
pub const EXIT_RUN: u8 = 3;
/// Exit code: interrupted by Ctrl-C (after printing the statistics).
pub const EXIT_INTERRUPTED: u8 = 130;

const AFTER_HELP: &str = "\
Examples:
  ibprobe devices                                   RDMA devices, ports, GIDs, NUMA node
  ibprobe loopback --transport shm --count 100000   the zero-latency reference (shared memory)
  ibprobe loopback --transport udp --size 64        kernel UDP one-way latency in one process
  ibprobe loopback --transport uc --inline auto --signal auto --cpu 2
                                                    the thesis's best case: UC, inline, unsignaled
  ibprobe server --transport rc                     on host A (listens on TCP 18515)
  ibprobe client hostA --transport rc --duration 10s --format perftest
                                                    on host B: round trip, perftest's columns
  ibprobe client hostA --transport udp --rate 10000 --json > run.json
  ibprobe sweep --transport shm --sizes 8..4096 --rates 0,10k --plot grid.svg
                                                    one-way p50 / p99 over a size x rate grid
  ibprobe host --cpus 2-3 --duration 60s            SCHED_FIFO wake-up latency of CPUs 2 and 3

Exit codes: 0 ok, 2 bad input, 3 run failed (peer lost, transport error),
130 interrupted by Ctrl-C (the statistics so far are printed).";

/// `ibprobe`: a latency probe with true percentiles over verbs (RC, UC,
/// UD) and two reference transports (shared memory, UDP).
#[derive(Parser, Debug)]
#[command(name = "ibprobe", version, about, long_about = None, after_help = AFTER_HELP)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// List RDMA devices: ports, state, link layer, GIDs, NUMA node, local CPUs.
    #[command(
        after_help = "Examples:\n  ibprobe devices\n  ibprobe devices --json | jq '.[].name'"
    )]
    Devices {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// One process owns both ends: one-way latency (t_recv - t_subm) and
    /// send-completion latency on one clock.
    #[command(
        after_help = "Examples:\n  ibprobe loopback --transport shm\n  ibprobe loopback --transport udp --count 100000 --format csv\n  ibprobe loopback --transport rc --dev rxe0 --op write-imm --inline off\n  ibprobe loopback --transport udp --round-trip     (RTT through an echo thread)"
    )]
    Loopback(LoopbackArgs),
    /// Echo side of a round trip: waits for a client over TCP, echoes its messages.
    #[command(
        after_help = "Examples:\n  ibprobe server --transport rc\n  ibprobe server --transport udp --bind 10.0.0.1:18515 --forever"
    )]
    Server(ServerArgs),
    /// Measuring side of a round trip against `ibprobe server` (RTT and RTT/2).
    #[command(
        after_help = "Examples:\n  ibprobe client hostA --transport rc --count 100000\n  ibprobe client 10.0.0.1:18515 --transport udp --duration 30s --rate 1000 --json"
    )]
    Client(ClientArgs),
    /// One-way loopback over a grid of sizes x rates: table/CSV/JSON and an SVG heatmap.
    #[command(
        after_help = "Examples:\n  ibprobe sweep --transport shm --sizes 8..4096 --rates 0,1000,10000\n  ibprobe sweep --transport udp --sizes 8,64,512 --rates 0,10k --count 2000 --format csv\n  ibprobe sweep --transport rc --dev rxe0 --sizes 8,64,512 --rates 0,1000 --plot grid.svg"
    )]
    Sweep(sweep::SweepArgs),
    /// Wake-up latency of a SCHED_FIFO thread per CPU (cyclictest's method), per-CPU percentiles.
    #[command(after_help = host::AFTER_HELP)]
    Host(host::HostArgs),
}

/// Which transport carries the messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TransportKind {
    /// Shared-memory ring (same host): the zero-latency reference.
    Shm,
    /// Kernel UDP sockets: the Ethernet reference.
    Udp,
    /// Verbs reliable connection.
    Rc,
    /// Verbs unreliable connection.
    Uc,
    /// Verbs unreliable datagram.
    Ud,
}

impl TransportKind {
    /// "shm", "udp", "rc", "uc", "ud".
    pub fn name(self) -> &'static str {
        match self {
            TransportKind::Shm => "shm",
            TransportKind::Udp => "udp",
            TransportKind::Rc => "rc",
            TransportKind::Uc => "uc",
            TransportKind::Ud => "ud",
        }
    }

    /// The verbs QP type, for rc/uc/ud.
    pub fn qp_type(self) -> Option<crate::verbs::QpType> {
        match self {
            TransportKind::Rc => crate::verbs::QpType::parse("rc"),
            TransportKind::Uc => crate::verbs::QpType::parse("uc"),
            TransportKind::Ud => crate::verbs::QpType::parse("ud"),
            _ => None,
        }
    }
}

/// Options every probing subcommand shares.
#[derive(Args, Debug, Clone)]
pub struct TransportArgs {
    /// Transport: shm | udp (reference transports, any host) | rc | uc | ud (verbs).
    #[arg(long, short = 't', value_enum, default_value = "rc")]
    pub transport: TransportKind,
    /// Pin the measuring (or echoing) thread to this CPU.
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Timestamp clock: auto (TSC if the CPU flags vouch for it), tsc (TSC
    /// whenever its calibration is stable, e.g. in VMs that hide the flags),
    /// monotonic (clock_gettime). The report says which was used.
    #[arg(long, value_enum, default_value = "auto")]
    pub clock: crate::clock::ClockChoice,
    /// Verbs options (ignored by shm and udp).
    #[command(flatten)]
    pub verbs: VerbsArgs,
}

/// Options of a measurement (loopback and client).
#[derive(Args, Debug, Clone)]
pub struct MeasureArgs {
    /// Message size in bytes (udp: at least 8, it carries the sequence number).
    #[arg(long, short = 's', default_value_t = 32)]
    pub size: usize,
    /// Measured messages [default: 10000, unless --duration].
    #[arg(long, short = 'n', conflicts_with = "duration")]
    pub count: Option<u64>,
    /// Measure for this long instead of a count, e.g. 10s, 500ms, 1h.
    #[arg(long, short = 'D', value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Warm-up messages before the measured part (excluded, their max is reported).
    #[arg(long, default_value_t = 100)]
    pub warmup: u64,
    /// Messages per second, paced on the probe's clock; missed steps are counted.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Messages per burst; each burst is followed by --pause.
    #[arg(long, requires = "pause")]
    pub burst: Option<u64>,
    /// Pause after each burst (or after each message without --burst), e.g. 100us.
    #[arg(long, value_parser = parse_duration)]
    pub pause: Option<Duration>,
    /// A message without an answer after this long is lost; 3 in a row end the run.
    #[arg(long, value_parser = parse_duration, default_value = "1s")]
    pub timeout: Duration,
    /// Do not mlockall (by default all memory is locked when allowed).
    #[arg(long)]
    pub no_mlock: bool,
    /// Output format.
    #[arg(long, short = 'f', value_enum, default_value = "table")]
    pub format: Format,
    /// Same as --format json.
    #[arg(long)]
    pub json: bool,
    /// Write an HdrHistogram interval log (one interval per --log-interval).
    #[arg(long, value_name = "FILE")]
    pub hdr_log: Option<PathBuf>,
    /// Interval of --hdr-log.
    #[arg(long, value_parser = parse_duration, default_value = "1s")]
    pub log_interval: Duration,
    /// Draw the latency histogram with median and percentile markers as SVG.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
}

/// `ibprobe loopback`.
#[derive(Args, Debug, Clone)]
pub struct LoopbackArgs {
    /// Transport and placement.
    #[command(flatten)]
    pub transport: TransportArgs,
    /// Measurement.
    #[command(flatten)]
    pub measure: MeasureArgs,
    /// shm/udp: measure the round trip through an echo thread instead of one-way.
    #[arg(long)]
    pub round_trip: bool,
}

/// `ibprobe server`.
#[derive(Args, Debug, Clone)]
pub struct ServerArgs {
    /// Transport and placement.
    #[command(flatten)]
    pub transport: TransportArgs,
    /// TCP address to listen on for clients (the out-of-band exchange).
    #[arg(long, default_value = "0.0.0.0:18515")]
    pub bind: String,
    /// Serve clients one after another until Ctrl-C (default: exit after one).
    #[arg(long)]
    pub forever: bool,
    /// Give up on a client that stays silent this long during the handshake.
    #[arg(long, value_parser = parse_duration, default_value = "5s")]
    pub handshake_timeout: Duration,
}

/// `ibprobe client`.
#[derive(Args, Debug, Clone)]
pub struct ClientArgs {
    /// The server: HOST, HOST:PORT or an IP address (port 18515 by default).
    pub host: String,
    /// Transport and placement.
    #[command(flatten)]
    pub transport: TransportArgs,
    /// Measurement.
    #[command(flatten)]
    pub measure: MeasureArgs,
    /// Give up connecting (and on each handshake read) after this long.
    #[arg(long, value_parser = parse_duration, default_value = "5s")]
    pub connect_timeout: Duration,
}

/// Parses "10s", "500ms", "200us", "100ns", "2m", "1h" or plain seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    ibhost::duration::parse(s).map_err(|e| format!("{s:?}: {e}"))
}

/// A CLI failure: the exit code and one line for stderr.
#[derive(Debug)]
pub struct CliError {
    /// 2 (bad input) or 3 (run failed).
    pub code: u8,
    /// One line: what, with what input, what to do.
    pub message: String,
}

impl CliError {
    /// Bad input (exit 2).
    pub fn input(m: impl Into<String>) -> CliError {
        CliError {
            code: EXIT_INPUT,
            message: m.into(),
        }
    }
    /// The run failed (exit 3).
    pub fn run(m: impl Into<String>) -> CliError {
        CliError {
            code: EXIT_RUN,
            message: m.into(),
        }
    }
}

/// Turns clap's multi-line error into the one line this tool promises.
fn one_line(e: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue};
    let get = |k| e.get(k).map(|v: &ContextValue| v.to_string());
    let arg =
        get(ContextKind::InvalidArg).map(|a| a.split_whitespace().next().unwrap_or("").to_string());
    let value = get(ContextKind::InvalidValue);
    let valid = get(ContextKind::ValidValue);
    let rendered = e.render().to_string();
    // The first paragraph (clap puts details such as the missing argument
    // on the following lines), joined into one line.
    let first = rendered
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ")
        .trim_start_matches("error: ")
        .to_string();
    match (arg, value, valid) {
        (Some(a), Some(v), Some(ok)) => {
            format!("invalid value {v:?} for {a}: use one of {ok} (see ibprobe --help)")
        }
        _ => format!("{first} (see ibprobe --help)"),
    }
}

/// Entry point of the `ibprobe` binary.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind::*;
            if matches!(
                e.kind(),
                DisplayHelp | DisplayVersion | DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                let _ = e.print();
                return ExitCode::from(if e.kind() == DisplayHelpOnMissingArgumentOrSubcommand {
                    EXIT_INPUT
                } else {
                    0
                });
            }
            eprintln!("ibprobe: {}", one_line(&e));
            return ExitCode::from(EXIT_INPUT);
        }
    };
    let result = match cli.command {
        Command::Devices { json } => devices::run(json),
        Command::Loopback(a) => run::loopback(&a),
        Command::Server(a) => run::server(&a),
        Command::Client(a) => run::client(&a),
        Command::Sweep(a) => sweep::sweep(&a),
        Command::Host(a) => host::run(&a),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("ibprobe: {}", e.message.replace('\n', " "));
            ExitCode::from(e.code)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("200us").unwrap(), Duration::from_micros(200));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("10x").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("fast")
            .unwrap_err()
            .contains("not a duration"));
    }

    #[test]
    fn the_parser_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
