//! Every clap type of ibprobe and its conversion into the library's typed
//! settings, done once, here (as ripgrep's `lowargs.rs` -> `hiargs.rs`): a
//! [`crate::spec::ChannelSpec`], a [`crate::probe::ProbeConfig`] and the
//! output choices. The only file that knows clap (besides the error
//! rendering in `mod.rs`); the words are `crate::spec`'s types, parsed
//! with their `FromStr`. A new knob is a field here, a field in the
//! settings type it feeds, and the code that uses it.

use std::path::PathBuf;
use std::time::Duration;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Args, Parser, Subcommand, ValueEnum};

use super::error::CliError;
use crate::clock::ClockChoice;
use crate::probe::config::{Length, Mode, ProbeConfig, MAX_RATE_HZ};
use crate::probe::session::auth::Secret;
use crate::report::stream_sweep::Axes;
use crate::report::threshold::{RunKind, Threshold};
use crate::report::Format;
use crate::spec::{
    ChannelSpec, CreditReturn, InlineMode, ModelParams, Op, Poll, SignalMode, StreamSpec,
    Transport, VerbsKnobs, RECORD_HEADER, SLOT_HEADER,
};
pub use ibhost::list::{parse_list, parse_sizes};

pub const AFTER_HELP: &str = "\
Examples:
  ibprobe loopback --transport shm --count 100000
      # the zero-latency reference (shared memory)
  ibprobe loopback --transport udp --size 64
      # kernel UDP one-way latency in one process
  ibprobe sweep --transport shm --sizes 8..4096 --rates 0,10k --count 500 \\
       --plot grid.svg
      # one-way p50 / p99 over a size x rate grid, and its heatmap
  ibprobe host --cpus 1 --duration 2s
      # SCHED_FIFO wake-up latency of CPU 1 (needs root)
  ibprobe devices           # RDMA devices, ports, GIDs, NUMA node
  ibprobe loopback --transport uc --inline auto --signal auto --cpu 1
      # the thesis's best case: UC, inline, unsignaled
      # (needs an RDMA device: runs in the lab)
  ibprobe server --transport rc
      # on host A: listens on TCP 18515 for one client
      # (needs an RDMA device: runs in the lab)
  ibprobe client hostA --transport rc --duration 2s --format perftest
      # on host B: round trip, perftest's columns
      # (needs a peer: runs in the lab)
  ibprobe client hostA --transport udp --rate 10000 --count 5000 --json \\
       > run.json
      # the same over UDP, saved for `ibprobe compare`
      # (needs a peer: runs in the lab)";

/// The top-level `--help` epilogue: the examples, then `ibhost::exit`'s table.
fn after_help() -> String {
    format!("{AFTER_HELP}\n\n{}", ibhost::exit::help())
}

/// `ibprobe`: a latency probe with true percentiles over verbs (RC, UC,
/// UD) and two reference transports (shared memory, UDP).
#[derive(Parser, Debug)]
#[command(name = "ibprobe", version, about, long_about = None, after_help = after_help())]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// List RDMA devices: ports, state, link layer, GIDs, NUMA node, local CPUs.
    #[command(
        after_help = "Examples:\n  ibprobe devices         # a table, or what to do when there is none\n  ibprobe devices --json  # a JSON list (empty when there is none)"
    )]
    Devices {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// One process owns both ends: one-way latency (t_recv - t_subm) and
    /// send-completion latency on one clock.
    #[command(
        after_help = "Examples:\n  ibprobe loopback --transport shm\n  ibprobe loopback --transport udp --count 100000 --format csv\n  ibprobe loopback --transport udp --round-trip --count 5000\n      # RTT through an echo thread\n  ibprobe loopback --transport rc --dev rxe0 --op write-imm --inline off\n      # needs an RDMA device: runs in the lab"
    )]
    Loopback(LoopbackArgs),
    /// Echo side of a round trip: waits for a client over TCP, echoes its messages.
    #[command(
        after_help = "Examples:\n  ibprobe server --transport udp --bind 127.0.0.1:18515 --forever\n      # runs until stopped\n  ibprobe server --transport rc\n      # one client, then exits; needs an RDMA device: runs in the lab"
    )]
    Server(ServerArgs),
    /// Measuring side of a round trip against `ibprobe server` (RTT and RTT/2).
    #[command(
        after_help = "Examples:\n  ibprobe client hostA --transport rc --count 20000\n      # against `ibprobe server -t rc` on hostA (needs a peer: runs in the lab)\n  ibprobe client hostA:18515 --transport udp --duration 2s --rate 1000 --json\n      # 2000 round trips at 1000/s (needs a peer: runs in the lab)"
    )]
    Client(ClientArgs),
    /// Messages streaming through a credit window, batches with a flush timer,
    /// pipelined acks: messages/s and the per-message latency tail side by side.
    #[command(after_help = STREAM_AFTER_HELP)]
    Stream(StreamArgs),
    /// One-way loopback over a grid of sizes x rates: table/CSV/JSON and an SVG heatmap.
    #[command(
        after_help = "Examples:\n  ibprobe sweep --transport shm --sizes 8..512 --rates 0,1000,10000 --count 200\n  ibprobe sweep --transport udp --sizes 8,64,512 --rates 0,10k --count 2000 --format csv\n  ibprobe sweep --transport rc --dev rxe0 --sizes 8,64,512 --rates 0,1000 \\\n       --count 500 --plot grid.svg\n      # needs an RDMA device: runs in the lab"
    )]
    Sweep(SweepArgs),
    /// Wake-up latency of a SCHED_FIFO thread per CPU (cyclictest's method), per-CPU percentiles.
    #[command(after_help = HOST_AFTER_HELP)]
    Host(HostArgs),
    /// Did it help? Runs one ibprobe command with each value of one option, in
    /// interleaved rounds, and gives each value's effect on p50/p99/p99.9/max
    /// (and messages/s) against the first, with a 95% interval and a verdict.
    #[command(after_help = COMPARE_AFTER_HELP)]
    Compare(CompareArgs),
    /// LogGP parameters (L, o_s, o_r, g, G) of a transport with 95% intervals,
    /// by Netgauge's PRTT(n, d, s) round trips; --predict: stream workloads.
    #[command(after_help = LOGGP_AFTER_HELP)]
    Loggp(LoggpArgs),
}

pub const COMPARE_AFTER_HELP: &str = "\
How it works: each round runs every value once, as its own `ibprobe
COMMAND --OPTION VALUE --json` process, in a random order that the next
round runs backwards (A B, B A: drift cancels). Each round's p50, p99,
p99.9 and max (and a stream's messages/s) are paired by round; the
effect of a value is the Hodges-Lehmann ratio to the first value with
the exact Wilcoxon signed-rank 95% interval, and the verdict (faster,
slower, no_significant_difference) holds at 5% after Holm's correction
over the values. Fewer than 6 rounds cannot give a verdict; 10 or more
are recommended on a noisy host. A flag without a value is varied with
the values on and off. Exit codes: 0 done, 2 bad input (or a value the
command refused), 3 every round of a value failed, 130 Ctrl-C, SIGTERM
or SIGHUP (forwarded to the round running, which is killed if it has not
ended 5 s later; the rounds so far are compared).

Examples:
  ibprobe compare --rounds 6 --vary transport=shm,udp -- loopback --count 2000
  ibprobe compare --rounds 6 --vary batch=1,16 --plot batch.svg -- \\
       stream -t shm --count 20000
  ibprobe compare --rounds 6 --vary warmup=100,101 --json -- \\
       loopback -t shm --count 2000
      # a null check: no significant difference expected
  ibprobe loopback -t shm --count 2000 --json > before.json && \\
  ibprobe loopback -t shm --count 2000 --json > after.json && \\
  ibprobe compare before.json after.json
      # two saved --json reports: no verdict (see above)
  ibprobe compare --rounds 10 --vary inline=auto,off -- \\
       loopback -t rc --dev rxe0 --size 32
      # needs an RDMA device: runs in the lab

Two saved reports are compared quantile by quantile from the histograms
they carry; the intervals then cover only the sampling noise inside each
run, not the run-to-run noise, so no verdict is given.";

const COMPARE_FORMATS: &[(Format, &str)] = &[
    (
        Format::Table,
        "Per value: medians over rounds, ratio [95% CI] and verdict per metric",
    ),
    (Format::Json, "The `ibprobe.compare/1` document"),
    (Format::Markdown, "The table as Markdown"),
];

/// `ibprobe compare`: rounds of a command (`--vary` and COMMAND), or two
/// saved reports.
#[derive(Args, Debug, Clone)]
#[command(mut_arg("format", |a| a.value_parser(formats(COMPARE_FORMATS))))]
#[command(mut_arg("plot", |a| a.help("Draw each value's effect with its 95% interval, per metric, as SVG")))]
pub struct CompareArgs {
    /// Rounds: each runs every value once (at least 2; 6 or more for a verdict).
    #[arg(long, value_name = "N", short = 'r', default_value_t = 10)]
    pub rounds: u32,
    /// Two saved reports (`--json` output of loopback, client or stream)
    /// to compare instead of running rounds: the first is the baseline.
    #[arg(value_name = "REPORT.json", conflicts_with = "vary")]
    pub reports: Vec<PathBuf>,
    /// The option of COMMAND to vary and its values, the first being the
    /// baseline: OPTION=V1,V2[,...], OPTION as its long name without --
    /// (e.g. transport=shm,udp or inline=auto,off).
    #[arg(long, value_name = "OPTION=V1,V2")]
    pub vary: Option<String>,
    /// Seed of the round order (printed in the report, to repeat an order).
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    // --format, --json, --plot, --quiet, with the formats and plot above.
    #[command(flatten)]
    pub output: Output,
    /// The ibprobe command to run, after `--`: loopback, client or stream
    /// with its options (without --format/--json: compare reads its JSON).
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

pub const STREAM_AFTER_HELP: &str = "\
How it works: the sender appends each message (a 16 B record: sequence
number and hand-over tick, then the payload) to the open slot, and posts
the slot as ONE operation when it holds --batch messages, when --flush
has passed since its first message, or at the end of a burst or of the
run. At --batch 1 a slot is compact: 16 B of header and record before
the payload (32 with --batch 2 or more, or --stamp-thread). Each posted
slot takes a credit (--window); the receiver gives it back once it has
consumed the slot (--credit-return: on rc an RDMA write of its count
every half window, elsewhere a message every quarter). With --pipeline D
every slot also needs the receiver's ack, at most D unacknowledged.
Latency is per message, from hand-over to delivery at the receiver, so
waiting in a batch or for a credit counts. In loopback the receiver runs
on its own thread, pinned to --rx-cpu (default: the next allowed CPU).
Against a server (HOST) the receiver's clock is another machine's, so the
latency is from hand-over to the slot's credit coming back (a round trip
on this host's clock), and the receiver's counters come back at the end.
Over verbs a stream signals every (SQ depth / 2)-th send unless --signal
says otherwise (a send buffer is free again once a later signaled send
completed): signaling every send cost rc on rxe 2.5% of its message rate.
--stamp-thread (verbs, loopback, --inline off) splits each message's
latency at the HCA's read of its slot: a third thread keeps writing the
clock into every send buffer, and a slot arrives with the time it was read.

Examples:
  ibprobe stream -t shm --batch 8 --count 50000 --json
  ibprobe stream -t udp --window 4 --consume-delay 20us --count 2000 --json
  ibprobe stream -t shm --pipeline 2 --count 20000 --format table
  ibprobe sweep -t shm --batches 1,16 --sizes 32,256 --count 500 --json
      # messages/s and latency per batch and size
  ibprobe stream -t rc --dev rxe0 --batch 16 --flush 150us --rate 100k \\
       --count 100000
      # needs an RDMA device: runs in the lab
  ibprobe stream 10.0.0.2 -t rc --window 16 --pipeline 2
      # against `ibprobe server -t rc` on 10.0.0.2 (needs a peer: runs in the lab)

Exit codes: 0 ok, 2 bad input, 3 run failed (the receiver stopped
returning credits within --timeout, peer lost), 130 interrupted.";

pub const HOST_AFTER_HELP: &str = "\
How it measures (cyclictest's method): one thread per CPU, pinned and
SCHED_FIFO, sleeps with clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) to
the next interval and records how late it woke. Unlike cyclictest's
default it does NOT write /dev/cpu_dma_latency: the C-state policy the
host really has (e.g. ibtune's) is what gets measured.

Needs SCHED_FIFO: root or CAP_SYS_NICE (exit 2 otherwise).

Examples:
  ibprobe host --count 2000              # every CPU, 2000 wake-ups each
      # needs root
  ibprobe host --cpus 1 --duration 2s    # the core ibtune isolated, 2 s
      # needs root
  ibprobe host --cpus 0,1 --count 500 --format json      # needs root
  ibprobe host --period 200us --fifo 95 --count 2000 --format markdown
      # needs root";

/// clap's view of an `ibhost::vocabulary!` list: its values with their help
/// (the doc line without its final period, as clap shows doc comments).
macro_rules! value_enum {
    ($($t:ty),+) => {$(
        impl ValueEnum for $t {
            fn value_variants<'a>() -> &'a [Self] {
                <$t>::ALL
            }

            fn to_possible_value(&self) -> Option<PossibleValue> {
                Some(PossibleValue::new(self.name()).help(self.help().trim_end_matches('.')))
            }
        }
    )+};
}

value_enum!(Transport, Format, ClockChoice);

/// A `--format` offering `list` of the [`Format`] words, each with what it
/// prints for this command; clap refuses the others, naming those it has.
fn formats(list: &'static [(Format, &'static str)]) -> impl TypedValueParser<Value = Format> {
    PossibleValuesParser::new(
        list.iter()
            .map(|(f, help)| PossibleValue::new(f.name()).help(*help)),
    )
    .map(|s| s.parse::<Format>().expect("a listed format is a Format"))
}

/// `ibprobe host`'s output formats (no perftest line: there is no
/// perftest equivalent of this measurement).
const HOST_FORMATS: &[(Format, &str)] = &[
    (
        Format::Table,
        "Human-readable table with notes and warnings",
    ),
    (Format::Json, "The `ibprobe.host/1` JSON document"),
    (Format::Csv, "One header row and one row per CPU"),
    (Format::Markdown, "A Markdown table, for issues and wikis"),
];

/// The output format a command prints: `--json` wins over `--format`.
pub fn json_or(json: bool, format: Format) -> Format {
    if json {
        Format::Json
    } else {
        format
    }
}

/// Options every probing subcommand shares.
#[derive(Args, Debug, Clone)]
pub struct TransportArgs {
    /// Transport: shm | udp (reference transports, any host) | rc | uc | ud (verbs)
    /// | model (a LogGP network of --model's parameters, emulated in real time).
    #[arg(long, short = 't', value_enum, default_value = "rc")]
    pub transport: Transport,
    /// LogGP parameters of --transport model: L=5us,os=1us,or=1.5us,g=2us,G=1ns
    /// (units ps, ns, us, ms; G is per BYTE), or the preset `spin` (the sPIN
    /// paper's NIC: o 65ns, g 6.7ns, L 83.4ns, G 20ps/B = its 2.5 ps per bit)
    /// with overrides, e.g. spin,G=2.5ps. Emulated with busy-waits on this
    /// host's clock: honest from about 1 us up; below, use `loggp --simulate`.
    #[arg(long, value_name = "PARAMS")]
    pub model: Option<ModelParams>,
    /// Pin the measuring (or echoing) thread to this CPU.
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Timestamp clock: auto (TSC if it calibrates and the CPU flags, a
    /// system-call clock_gettime or a TSC kernel clocksource vouch for it),
    /// tsc (TSC whenever its calibration is stable), monotonic
    /// (clock_gettime). The report says which was used, and why.
    #[arg(long, value_enum, default_value = "auto")]
    pub clock: ClockChoice,
    /// Verbs options (ignored by shm and udp).
    #[command(flatten)]
    pub verbs: VerbsArgs,
}

/// Verbs options (flattened into `loopback`, `server`, `client`, `sweep`).
/// `--poll` also applies to udp.
#[derive(Args, Clone, Debug)]
pub struct VerbsArgs {
    /// RDMA device, e.g. mlx5_0 or rxe0 (default: the first with an active port).
    #[arg(long)]
    pub dev: Option<String>,
    /// Second device for one-way loopback across two devices or ports.
    #[arg(long)]
    pub peer_dev: Option<String>,
    /// Port number on the device.
    #[arg(long, default_value_t = 1)]
    pub port: u8,
    /// GID index (RoCE v2 needs one; default: the IPv4-mapped RoCE v2 GID, printed).
    #[arg(long)]
    pub gid_index: Option<u32>,
    /// Operation: send | send-imm | write-imm | write (write polls the last byte, as ib_write_lat).
    #[arg(long, default_value = "send")]
    pub op: Op,
    /// Inline data: auto (up to the device's max inline) | off | N bytes.
    #[arg(long, default_value = "auto")]
    pub inline: InlineMode,
    /// Signal every send, every Nth, or auto (SQ depth / 2, the thesis's best)
    /// [default: every; streams: auto].
    #[arg(long)]
    pub signal: Option<SignalMode>,
    /// Completion polling: busy | event (completion channel).
    #[arg(long, default_value = "busy")]
    pub poll: Poll,
    /// Send queue depth.
    #[arg(long, default_value_t = 128)]
    pub sq_depth: u32,
    /// Receive queue depth.
    #[arg(long, default_value_t = 128)]
    pub rq_depth: u32,
    /// Receives pre-posted before the run (default: the RQ depth).
    #[arg(long)]
    pub rq_prepost: Option<u32>,
    /// Path MTU: 256 | 512 | 1024 | 2048 | 4096 (default: the port's active MTU).
    #[arg(long)]
    pub mtu: Option<u32>,
    /// Put the message buffers in huge pages (reserve them first in /proc/sys/vm/nr_hugepages).
    #[arg(long)]
    pub hugepages: bool,
}

/// `--format`, `--json`, `--plot` and `--quiet` of `compare`, `loggp` and
/// `sweep`; each offers its own formats and plot (its `mut_arg`s).
#[derive(Args, Debug, Clone)]
pub struct Output {
    /// Output format.
    #[arg(long, short = 'f', value_enum, default_value = "table")]
    pub format: Format,
    /// Same as --format json.
    #[arg(long)]
    pub json: bool,
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// No progress bar (it is also hidden when stderr is not a terminal).
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

impl Output {
    pub fn format(&self) -> Format {
        json_or(self.json, self.format)
    }
}

/// How much to measure and the warm-up before it, per run or per sweep
/// cell; the flags' help is each command's own (its `mut_arg`s).
#[derive(Args, Debug, Clone)]
pub struct Amount {
    #[arg(long, value_name = "N", short = 'n', conflicts_with = "duration")]
    pub count: Option<u64>,
    #[arg(long, short = 'D', value_name = "DURATION", value_parser = parse_duration)]
    pub duration: Option<Duration>,
    #[arg(long, default_value_t = 100)]
    pub warmup: u64,
}

impl Amount {
    /// The measured part: `--duration` if given, else `--count`
    /// (`default_count` when neither is).
    pub fn length(&self, default_count: u64) -> Length {
        let count = Length::Count(self.count.unwrap_or(default_count));
        self.duration.map_or(count, Length::Duration)
    }
}

/// Options of a measurement (loopback and client).
#[derive(Args, Debug, Clone)]
#[command(mut_arg("count", |a| a.help("Measured messages [default: 10000, unless --duration]")))]
#[command(mut_arg("duration", |a| a.help("Measure for this long instead of a count, e.g. 10s, 500ms, 1h")))]
#[command(mut_arg("warmup", |a| a.help("Warm-up messages before the measured part (excluded, their max is reported)")))]
pub struct MeasureArgs {
    /// Message size in bytes (udp: at least 8, it carries the sequence number).
    #[arg(long, short = 's', default_value_t = 32)]
    pub size: usize,
    // --count, --duration, --warmup, with the help above.
    #[command(flatten)]
    pub amount: Amount,
    /// Messages per second, paced on the probe's clock; missed steps are counted.
    #[arg(long, value_parser = parse_rate)]
    pub rate: Option<f64>,
    /// Messages per burst; each burst is followed by --pause.
    #[arg(long, requires = "pause")]
    pub burst: Option<u64>,
    /// Pause after each burst (or after each message without --burst), e.g. 100us.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub pause: Option<Duration>,
    /// A message without an answer after this long is lost; 3 in a row end the run.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "1s")]
    pub timeout: Duration,
    /// The receiver spends this long on each message (a slow consumer), e.g. 20us:
    /// after each arrival in one-way loopback, before each echo in a round trip.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "0s")]
    pub consume_delay: Duration,
    /// Do not mlockall (by default all memory is locked when allowed).
    #[arg(long)]
    pub no_mlock: bool,
    /// Do not read the measuring thread's counters (context switches, page faults, interrupts).
    ///
    /// By default the measuring thread's context switches (involuntary ones apart), CPU
    /// migrations and page faults (the kernel's own accounting: getrusage,
    /// /proc/thread-self/sched), the interrupts on its CPU by source and SMIs where the MSR is
    /// readable are read before and after the measured part, never per message, and reported
    /// beside the latencies with the likely cause of the tail (see --attribution for the
    /// per-interval one).
    #[arg(long)]
    pub no_counters: bool,
    /// Correlate the counters with the tail per interval: "intervals with a context switch:
    /// p99.9 31 us; without: 2.1 us".
    ///
    /// Every 100 ms the measuring thread's counters are read again between two messages, and the
    /// interval's samples go to a "with" or a "without" histogram per cause; the outlier warning
    /// then names the cause whose intervals hold the tail. On with --hdr-log (its intervals, with
    /// the interrupts too), else off by default: in the Soft-RoCE lab the interval ends went with
    /// a higher p99.
    #[arg(long, conflicts_with = "no_counters")]
    pub attribution: bool,
    /// Count with perf events even where no CPU PMU exists (its software events).
    ///
    /// Where a PMU exists, perf events count cycles, instructions and cache misses by default.
    /// Without one, no perf event is opened by default: it would make the kernel do perf's work
    /// at each context switch of the measuring thread, for the switches, faults and migrations
    /// the kernel's own accounting counts anyway. Needs kernel.perf_event_paranoid <= 1 or
    /// CAP_PERFMON; what cannot be opened is named in the report and the run goes on.
    #[arg(long, conflicts_with = "no_counters")]
    pub perf_counters: bool,
    /// Output format.
    #[arg(long, short = 'f', value_enum, default_value = "table")]
    pub format: Format,
    /// Same as --format json.
    #[arg(long)]
    pub json: bool,
    /// Write an HdrHistogram interval log (one interval per --log-interval).
    ///
    /// With counters on, FILE.counters.csv beside it holds each interval's counters (context
    /// switches, page faults, interrupts, ...) with its samples, p99.9 and max.
    #[arg(long, value_name = "FILE")]
    pub hdr_log: Option<PathBuf>,
    /// Interval of --hdr-log.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "1s")]
    pub log_interval: Duration,
    /// Draw the latency histogram with median and percentile markers as SVG.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// No progress bar (it is also hidden when stderr is not a terminal).
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

/// `--stamp-thread` of `loopback` and `stream` (one-way, one clock; the
/// rules are `spec::check_stamp`'s).
#[derive(Args, Debug, Clone, Default)]
pub struct StampArgs {
    /// Verbs, --inline off: a second thread keeps writing the clock into the
    /// send buffer, splitting one-way latency at the HCA's read of it
    /// (the thesis's t_send split): "before HCA read" and "after".
    #[arg(long)]
    pub stamp_thread: bool,
}

#[derive(Args, Debug, Clone)]
pub struct LoopbackArgs {
    #[command(flatten)]
    pub transport: TransportArgs,
    #[command(flatten)]
    pub measure: MeasureArgs,
    /// shm/udp: measure the round trip through an echo thread instead of one-way.
    #[arg(long)]
    pub round_trip: bool,
    #[command(flatten)]
    pub stamp: StampArgs,
    /// Verbs ud|uc, one device: the HCA stamps each completion; splits
    /// one-way latency into the HCA's part (send to receive completion) and
    /// the host's. Needs a non-zero completion_timestamp_mask (e.g.
    /// ConnectX; rxe is refused). Unverified on hardware by this project.
    #[arg(long)]
    pub hw_timestamps: bool,
    #[command(flatten)]
    pub fail_if: FailIfArgs,
}

/// `--fail-if`: pass/fail thresholds of `loopback`, `client` and `stream`.
#[derive(Args, Debug, Clone, Default)]
pub struct FailIfArgs {
    /// Exit 4 when this holds of the run, e.g. p99>20us, p999>100us, lost>0, msgs_per_sec<1M
    /// (stream). Repeatable: the run fails if any holds; every format lists them (JSON
    /// `fail_if`). METRIC: p50 p90 p99 p999 (p99.9) p9999 (p99.99) max min mean of the first
    /// distribution (one-way; round trip with --round-trip and in client), lost, and for
    /// stream msgs_per_sec bytes_per_sec credit_stalls. OP: > >= < <=. VALUE: a duration with
    /// its unit for latencies (20us, 1.5ms), else a number with an optional k, M or G.
    #[arg(long = "fail-if", value_name = "EXPR")]
    pub fail_if: Vec<Threshold>,
}

impl FailIfArgs {
    /// The thresholds, refused (exit 2) when runs of `kind` cannot answer one.
    pub fn thresholds(&self, kind: RunKind) -> Result<&[Threshold], CliError> {
        crate::report::threshold::check_applicable(&self.fail_if, kind).map_err(CliError::input)?;
        Ok(&self.fail_if)
    }
}

/// The knobs of a stream (`ibprobe stream`, and `sweep`'s stream axes).
#[derive(Args, Debug, Clone, Default)]
pub struct StreamKnobArgs {
    /// Credits: slots the sender may have posted and not yet seen consumed.
    #[arg(long, default_value_t = 64)]
    pub window: u32,
    /// Messages packed into one slot and one operation (1: no batching).
    #[arg(long, default_value_t = 1)]
    pub batch: u32,
    /// Post a partial batch this long after its first message, e.g. 150us
    /// (default: only when full, or at the end of a burst or of the run).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub flush: Option<Duration>,
    /// Every slot needs the receiver's ack; at most D unacknowledged (1: stop-and-wait).
    #[arg(long, value_name = "D")]
    pub pipeline: Option<u32>,
    /// How credits come back: piggyback (on acks) | message | write (RDMA
    /// write, rc only) [default: write on rc without --pipeline (no
    /// receive on the sending side), else piggyback].
    #[arg(long)]
    pub credit_return: Option<CreditReturn>,
    /// One credit message (or counter write) per this many consumed slots
    /// [default: half the window for write, a quarter for piggyback and
    /// message, at least 1: on rxe a credit per slot cost 15% of the
    /// message rate].
    #[arg(long, value_name = "C")]
    pub credit_batch: Option<u32>,
    /// Slots per direction in the registered pool [default: 64, or --window if larger].
    #[arg(long)]
    pub slots: Option<u32>,
    /// Bytes per slot; a message larger than a slot spans several
    /// [default: what one full batch needs, rounded up to 64 B (ud: at least 1024, one packet)].
    #[arg(long)]
    pub slot_size: Option<usize>,
}

impl StreamKnobArgs {
    /// The stream these flags describe for messages of `size` bytes, with
    /// the flags' window, batch and pipeline or a sweep cell's (checked when
    /// it is opened, or by [`StreamSpec::check`]).
    pub fn spec(
        &self,
        t: Transport,
        size: usize,
        window: u32,
        batch: u32,
        pipeline: Option<u32>,
    ) -> StreamSpec {
        let credit_return = self
            .credit_return
            .unwrap_or_else(|| CreditReturn::default_for(t, pipeline));
        StreamSpec {
            slots: self.slots.unwrap_or(window.max(64)),
            // A UD slot is one packet: start from rxe's usual 1024 B MTU.
            slot_size: self.slot_size.unwrap_or_else(|| {
                let batch_needs = SLOT_HEADER + batch as usize * (RECORD_HEADER + size);
                if t == Transport::Ud {
                    batch_needs.max(1024)
                } else {
                    batch_needs.next_multiple_of(64)
                }
            }),
            window,
            batch,
            flush: self.flush,
            pipeline,
            credit_return,
            credit_batch: self
                .credit_batch
                .unwrap_or_else(|| StreamSpec::default_credit_batch(credit_return, window)),
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct StreamArgs {
    /// Stream to `ibprobe server` at HOST, HOST:PORT or an IP address (port
    /// 18515 by default) instead of in loopback; the server learns the
    /// stream in the handshake.
    pub host: Option<String>,
    /// With HOST: give up connecting (and on each handshake read) after this long.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "5s")]
    pub connect_timeout: Duration,
    /// Transport and placement (--cpu pins the sender).
    #[command(flatten)]
    pub transport: TransportArgs,
    #[command(flatten)]
    pub measure: MeasureArgs,
    #[command(flatten)]
    pub stream: StreamKnobArgs,
    /// CPU of the receiving thread [default: the last two allowed CPUs; over
    /// verbs the sender on the last, this thread on the one before, both
    /// away from the device's interrupt CPUs when known].
    #[arg(long)]
    pub rx_cpu: Option<usize>,
    /// The stamping thread (loopback).
    #[command(flatten)]
    pub stamp: StampArgs,
    /// The mesh secret (with HOST).
    #[command(flatten)]
    pub secret: SecretArgs,
    #[command(flatten)]
    pub fail_if: FailIfArgs,
}

/// `--secret-file`: the mesh secret of `client`, `server` and `stream`.
#[derive(Args, Debug, Clone, Default)]
pub struct SecretArgs {
    /// Mesh secret key file (the same file on both ends, mode 600): each end proves it holds the key (HMAC-SHA256 over both ends' nonces) before anything is measured; a peer without it is refused.
    #[arg(long, value_name = "FILE")]
    pub secret_file: Option<PathBuf>,
}

impl SecretArgs {
    /// The key, read and checked (None: no `--secret-file`).
    pub fn secret(&self) -> Result<Option<Secret>, CliError> {
        let load = |p| Secret::load(p).map_err(|e| CliError::input(format!("--secret-file: {e}")));
        self.secret_file.as_deref().map(load).transpose()
    }
}

#[derive(Args, Debug, Clone)]
pub struct ServerArgs {
    #[command(flatten)]
    pub transport: TransportArgs,
    /// TCP address to listen on for clients (the out-of-band exchange).
    #[arg(long, default_value = "0.0.0.0:18515")]
    pub bind: String,
    /// Serve clients one after another until Ctrl-C (default: exit after one).
    #[arg(long)]
    pub forever: bool,
    /// Give up on a client whose whole handshake (hello, mesh secret proof)
    /// takes longer than this.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "5s")]
    pub handshake_timeout: Duration,
    /// Refuse a client whose session would take more memory than this here
    /// (stream slots x slot size, the receiving queue, the shm ring or verbs
    /// slot pools), e.g. 64MiB or 2GiB.
    #[arg(long, value_name = "SIZE", value_parser = crate::spec::parse_bytes, default_value = "256MiB")]
    pub max_session_memory: u64,
    /// The mesh secret clients must prove.
    #[command(flatten)]
    pub secret: SecretArgs,
}

#[derive(Args, Debug, Clone)]
pub struct ClientArgs {
    /// The server: HOST, HOST:PORT or an IP address (port 18515 by default).
    pub host: String,
    #[command(flatten)]
    pub transport: TransportArgs,
    #[command(flatten)]
    pub measure: MeasureArgs,
    /// Give up connecting (and on each handshake read) after this long.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "5s")]
    pub connect_timeout: Duration,
    /// The mesh secret the server must share.
    #[command(flatten)]
    pub secret: SecretArgs,
    /// Verbs: both HCAs stamp each completion; splits every round trip into
    /// network RTT, prober delay and responder delay (R-Pingmesh). Needs a
    /// non-zero completion_timestamp_mask on both ends (e.g. ConnectX; rxe
    /// is refused). Unverified on hardware by this project.
    #[arg(long)]
    pub hw_timestamps: bool,
    #[command(flatten)]
    pub fail_if: FailIfArgs,
}

pub const LOGGP_AFTER_HELP: &str = "\
Method (Netgauge's, Hoefler et al.): PRTT(n, d, s) is the round trip of n
back-to-back messages of s bytes (d = a delay after each send) answered by
one message. gap(b) = (PRTT(n,0) - PRTT(1,0)) / (n-1) = g + G*b, fitted per
size range (a new segment where the slope changes: inline, MTU, protocol);
o_s is the send call's own time in the bursts of PRTT(n, d), whose sends
stand alone (Netgauge's (PRTT(n,d) - PRTT(1,0)) / (n-1) - d, which adds the
measuring loop's cost, is in the JSON); o_r is timed by the answering side
taking n-1 messages that already arrived; L = PRTT(1,0)/2 - o_s - o_r - G*b. Each message carries a 16 B header (b = s + 16). Each round gives
one estimate; the report gives the median of the rounds and its 95%
interval, warns when an interval is wider than 20%, and clamps negative
values to 0 with a note.

--transport model is the ground truth: --model L=5us,os=1us,or=1.5us,g=2us,G=1ns
(G per byte; the sPIN preset `spin` has G = 2.5 ps per bit = 20 ps/B). It
runs in real time (busy-waits: honest from about 1 us) or, with
--simulate, on a virtual clock (exact at any scale, no waiting).

--predict predicts `ibprobe stream` (messages/s, latency) for each
--batches x --windows [x --pipelines] at --predict-size from the
parameters (measured, or --params) and the stream loops' own work per
slot (timed here on free ends), then runs the same streams (in loopback)
and shows predicted, measured and their ratio.

--transport model also runs against `ibprobe server -t model` (on a UDP
carrier whose own costs add to the model's).

Examples:
  ibprobe loggp -t shm --sizes 8,512,4096 --rounds 3 --reps 5 --json
      # a quick estimate (default: 5 sizes, 15 rounds of 21 repetitions)
  ibprobe loggp -t model --model L=5us,os=1us,or=1.5us,g=2us,G=1ns \\
       --sizes 8,4096 --rounds 3 --reps 5 --json
  ibprobe loggp -t udp --sizes 8,64,4096 --rounds 3 --reps 5 --format table
  ibprobe loggp -t model --model spin --simulate
  ibprobe loggp -t udp --rounds 3 --reps 5 --predict --batches 1,16 \\
       --plot loggp.svg
  ibprobe loggp hostB -t rc --dev mlx5_0 --rounds 3 --reps 5
      # against `ibprobe server -t rc` on hostB (needs a peer: runs in the lab)";

const LOGGP_FORMATS: &[(Format, &str)] = &[
    (
        Format::Table,
        "Parameters with intervals, segments, per-size points",
    ),
    (Format::Json, "The `ibprobe.loggp/1` document"),
    (Format::Markdown, "The tables as Markdown"),
];

#[derive(Args, Clone, Debug)]
#[command(mut_arg("format", |a| a.value_parser(formats(LOGGP_FORMATS))))]
#[command(mut_arg("plot", |a| a.help("Draw the gap per message and the fitted segments as an SVG")))]
pub struct LoggpArgs {
    /// HOST[:PORT] of `ibprobe server` to measure against; without it both
    /// ends run in this process (loopback).
    pub host: Option<String>,
    #[command(flatten)]
    pub transport: TransportArgs,
    /// CPU of the answering thread in loopback [default: the last two allowed
    /// CPUs; over verbs the measuring thread on the last, this one on the
    /// one before, both away from the device's interrupt CPUs when known].
    #[arg(long)]
    pub rx_cpu: Option<usize>,
    /// Payload sizes in bytes (a list and/or doubling ranges, as sweep's)
    /// [default: 8,64,512,4096,16384; ud: 8,64,256,1000].
    #[arg(long, value_name = "SIZES", allow_hyphen_values = true)]
    pub sizes: Option<String>,
    /// Messages per burst (n of PRTT(n, d, s)), 2..=1024.
    #[arg(long, default_value_t = 16)]
    pub burst: u16,
    /// Rounds: each gives one estimate of every parameter (the interval
    /// comes from their spread), 3..=1000.
    #[arg(long, value_name = "N", default_value_t = 15)]
    pub rounds: usize,
    /// Repetitions of each round trip within a round (their median counts).
    #[arg(long, default_value_t = 21)]
    pub reps: usize,
    /// Run --transport model on a virtual clock: exact event times, no waiting.
    #[arg(long)]
    pub simulate: bool,
    /// An answer later than this counts as lost (the burst is repeated; 5 in a row end the run).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "1s")]
    pub timeout: Duration,
    /// How long to wait for `ibprobe server` to accept (with HOST).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "5s")]
    pub connect_timeout: Duration,
    // --format, --json, --plot, --quiet, with the formats and plot above.
    #[command(flatten)]
    pub output: Output,
    /// Predict `ibprobe stream` for --batches x --windows (x --pipelines)
    /// and run the same streams: predicted, measured, ratio. With HOST
    /// each runs as `ibprobe stream HOST` does, a session of its own: run
    /// the server with --forever.
    #[arg(long)]
    pub predict: bool,
    /// Predict from these parameters instead of measuring them (same
    /// syntax as --model: L=..,os=..,or=..,g=..,G=..).
    #[arg(long, value_name = "PARAMS", requires = "predict")]
    pub params: Option<ModelParams>,
    /// --predict: batch sizes K.
    #[arg(long, default_value = "1,16", value_name = "LIST")]
    pub batches: String,
    /// --predict: credit windows N (slots).
    #[arg(long, default_value = "64", value_name = "LIST")]
    pub windows: String,
    /// --predict: pipeline depths D (unacknowledged slots); none: no acks.
    #[arg(long, value_name = "LIST")]
    pub pipelines: Option<String>,
    /// --predict: payload bytes per stream message.
    #[arg(long, default_value_t = 32)]
    pub predict_size: usize,
    /// --predict: how long each measured stream runs.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "1s")]
    pub predict_duration: Duration,
}

/// The output formats a grid has (perftest's one-line format has no grid).
const SWEEP_FORMATS: &[(Format, &str)] = &[
    (
        Format::Table,
        "Rows = sizes, columns = rates, cells p50 / p99 [us]",
    ),
    (Format::Csv, "One row per cell"),
    (
        Format::Json,
        "The `ibprobe.sweep/1` document (one `ibprobe.report/1` per cell)",
    ),
    (Format::Markdown, "The table as Markdown"),
];

/// `ibprobe sweep`: the loopback options that make sense once per grid
/// (transport, verbs knobs, length, warm-up) plus the two lists.
#[derive(Args, Debug, Clone)]
#[command(mut_arg("count", |a| a.help("Measured messages per cell [default: 1000, unless --duration]")))]
#[command(mut_arg("duration", |a| a.help("Measure each cell for this long instead of a count, e.g. 1s, 200ms")))]
#[command(mut_arg("warmup", |a| a.help("Warm-up messages before each cell's measured part (excluded)")))]
#[command(mut_arg("format", |a| a.value_parser(formats(SWEEP_FORMATS))))]
#[command(mut_arg("plot", |a| a.help("Draw the grid of p50s as an SVG heatmap (x = rate, y = size)")))]
pub struct SweepArgs {
    #[command(flatten)]
    pub transport: TransportArgs,
    /// Message sizes in bytes: a list (8,64,512) and/or doubling ranges between
    /// powers of two (2..4096 = 2,4,8,...,4096), e.g. 8,100,1024..8192.
    #[arg(
        long,
        value_name = "SIZES",
        default_value = "8..4096",
        allow_hyphen_values = true
    )]
    pub sizes: String,
    /// Message rates per second, 0 = back to back; k and M suffixes, e.g. 0,1k,10k,100k.
    #[arg(
        long,
        default_value = "0,1000,10000,100000",
        allow_hyphen_values = true
    )]
    pub rates: String,
    // --count, --duration, --warmup, with the help above.
    #[command(flatten)]
    pub amount: Amount,
    /// A message without an answer after this long is lost; 3 in a row end the sweep.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "1s")]
    pub timeout: Duration,
    /// Do not mlockall (by default all memory is locked when allowed).
    #[arg(long)]
    pub no_mlock: bool,
    // --format, --json, --plot, --quiet, with the formats and plot above.
    #[command(flatten)]
    pub output: Output,
    /// Stream axis: credit windows, e.g. 1,4,16 (any stream axis makes every
    /// cell an `ibprobe stream` run; see `ibprobe stream --help`).
    #[arg(long, value_name = "LIST")]
    pub windows: Option<String>,
    /// Stream axis: batch sizes, e.g. 1,4,16.
    #[arg(long, value_name = "LIST")]
    pub batches: Option<String>,
    /// Stream axis: pipeline depths, e.g. 1,2,4 (0: no acks).
    #[arg(long, value_name = "LIST")]
    pub pipelines: Option<String>,
    /// What a stream sweep's heatmap shows.
    #[arg(long, value_enum, default_value = "throughput")]
    pub heat: HeatValue,
    /// The stream's other knobs (with a stream axis).
    #[command(flatten)]
    pub stream: StreamKnobArgs,
}

/// What a stream sweep's `--plot` heatmap shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum HeatValue {
    /// Delivered messages per second.
    Throughput,
    /// The per-message latency's 99th percentile.
    P99,
}

impl SweepArgs {
    /// The axes of a stream sweep over `sizes` x `rates`, when any stream
    /// axis (windows, batches, pipelines) is given; an axis not given is
    /// the single value of its `--window`, `--batch`, `--pipeline` flag.
    pub fn stream_axes(&self, sizes: &[usize], rates: &[f64]) -> Result<Option<Axes>, String> {
        if self.windows.is_none() && self.batches.is_none() && self.pipelines.is_none() {
            return Ok(None);
        }
        let k = &self.stream;
        Ok(Some(Axes {
            sizes: sizes.to_vec(),
            rates: rates.to_vec(),
            windows: match &self.windows {
                Some(s) => parse_counts("--windows", s, 1)?,
                None => vec![k.window],
            },
            batches: match &self.batches {
                Some(s) => parse_counts("--batches", s, 1)?,
                None => vec![k.batch],
            },
            pipelines: match &self.pipelines {
                Some(s) => parse_counts("--pipelines", s, 0)?
                    .into_iter()
                    .map(|d| (d > 0).then_some(d))
                    .collect(),
                None => vec![k.pipeline],
            },
        }))
    }
}

/// A list of whole numbers, each at least `min`, e.g. `1,4,16`.
pub fn parse_counts(flag: &str, s: &str, min: u32) -> Result<Vec<u32>, String> {
    let hint = format!("pass whole numbers >= {min}, e.g. {flag} 1,4,16");
    parse_list(
        flag,
        s,
        &hint,
        |item| match item.parse::<u32>() {
            Ok(n) if n >= min => Ok(vec![n]),
            _ => Err(format!("{item:?} is not a whole number >= {min}")),
        },
        |n| n.to_string(),
    )
}

#[derive(Args, Debug, Clone)]
pub struct HostArgs {
    /// CPUs to measure, as a kernel CPU list, e.g. 2-3,6 [default: every CPU this process may use].
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// SCHED_FIFO priority of the measuring threads (1-99).
    #[arg(long, value_name = "PRIO", default_value_t = 80,
          value_parser = clap::value_parser!(i32).range(1..=99))]
    pub fifo: i32,
    /// Time between wake-up deadlines (the timer's period), e.g. 1ms, 200us.
    #[arg(long = "period", alias = "interval", value_name = "DURATION", value_parser = parse_duration, default_value = "1ms")]
    pub interval: Duration,
    /// Wake-ups per CPU [default: 10000, unless --duration].
    #[arg(long, value_name = "N", short = 'n', conflicts_with = "duration")]
    pub count: Option<u64>,
    /// Measure for this long instead of a count, e.g. 10s, 5m.
    #[arg(long, short = 'D', value_name = "DURATION", value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Do not mlockall (by default all memory is locked when allowed).
    #[arg(long)]
    pub no_mlock: bool,
    /// Use the kernel's timerlat tracer instead of ibprobe's own threads: IRQ latency and thread
    /// latency per CPU as two distributions, the top interference sources (interrupts, softirqs,
    /// threads, NMIs) and what ran during the worst wake-up. Needs root, tracefs mounted and a
    /// kernel with CONFIG_TIMERLAT_TRACER (Debian's PREEMPT_RT kernels); --period is the timer
    /// period (100us-1s).
    #[arg(long, conflicts_with_all = ["fifo", "no_mlock"])]
    pub trace: bool,
    /// With --trace: do not trace the interference (osnoise events), for the lowest tracing cost;
    /// no top sources, no causes of the worst wake-up.
    #[arg(long, requires = "trace")]
    pub no_interference: bool,
    /// With --trace: the tracefs mount [default: /sys/kernel/tracing, then /sys/kernel/debug/tracing].
    #[arg(long, value_name = "DIR", requires = "trace")]
    pub tracefs: Option<std::path::PathBuf>,
    /// Output format.
    #[arg(long, short = 'f', value_parser = formats(HOST_FORMATS), default_value = "table")]
    pub format: Format,
    /// Same as --format json.
    #[arg(long)]
    pub json: bool,
    /// No progress bar (it is also hidden when stderr is not a terminal).
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

/// A duration in `ibhost::duration`'s syntax (10s, 500ms, 1m30s, ...).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    ibhost::duration::parse(s).map_err(|e| format!("{s:?}: {e}"))
}

impl VerbsArgs {
    pub fn knobs(&self) -> VerbsKnobs {
        VerbsKnobs {
            dev: self.dev.clone(),
            peer_dev: self.peer_dev.clone(),
            port: self.port,
            gid_index: self.gid_index,
            op: self.op,
            inline: self.inline,
            signal: self.signal,
            sq_depth: self.sq_depth,
            rq_depth: self.rq_depth,
            rq_prepost: self.rq_prepost,
            mtu: self.mtu,
            hugepages: self.hugepages,
            ..VerbsKnobs::default()
        }
    }
}

impl TransportArgs {
    /// The channel these options describe, for messages of `size` bytes
    /// (checked when it is opened, or by [`ChannelSpec::check`]).
    pub fn channel_spec(&self, size: usize) -> ChannelSpec {
        ChannelSpec {
            transport: self.transport,
            size,
            poll: self.verbs.poll,
            verbs: self.verbs.knobs(),
            model: self.model,
        }
    }
}

impl MeasureArgs {
    /// The measurement these options describe, validated. `cpu` is the
    /// CPU to pin to, resolved by the caller (`--cpu`, or one local to
    /// the HCA).
    pub fn probe_config(
        &self,
        t: &TransportArgs,
        mode: Mode,
        cpu: Option<usize>,
    ) -> Result<ProbeConfig, CliError> {
        let cfg = ProbeConfig {
            size: self.size,
            length: self.amount.length(10_000),
            warmup: self.amount.warmup,
            rate_hz: self.rate,
            burst: self.burst,
            pause: self.pause,
            cpu,
            timeout: self.timeout,
            mode,
            poll: t.verbs.poll,
            lock_memory: !self.no_mlock,
            interval: self.hdr_log.as_ref().map(|_| self.log_interval),
            consume_delay: self.consume_delay,
            counters: !self.no_counters,
            perf_counters: self.perf_counters,
            attribution: !self.no_counters && (self.attribution || self.hdr_log.is_some()),
            ..ProbeConfig::default()
        };
        cfg.validate()?;
        Ok(cfg)
    }

    pub fn format(&self) -> Format {
        json_or(self.json, self.format)
    }
}

/// The `--rates` list in messages per second, 0 = back to back, with
/// optional k (x1000) and M (x1 000 000) suffixes, in the order given.
pub fn parse_rates(s: &str) -> Result<Vec<f64>, String> {
    let hint = "pass messages per second, 0 for back to back, e.g. --rates 0,1000,10k,100k";
    parse_list(
        "--rates",
        s,
        hint,
        |item| Ok(vec![rate_value(item, hint)?]),
        |r| format!("{r}"),
    )
}

/// `--rate`: messages per second, with the k and M suffixes of `--rates`
/// (the range is `ProbeConfig::validate`'s to check, with its messages).
pub fn parse_rate(s: &str) -> Result<f64, String> {
    let (num, scale) = rate_suffix(s);
    num.trim().parse::<f64>().map(|r| r * scale).map_err(|_| {
        format!("{s:?} is not a rate; pass messages per second, e.g. --rate 1000 or --rate 10k")
    })
}

/// A rate's number and the scale of its k or M suffix.
fn rate_suffix(item: &str) -> (&str, f64) {
    [("k", 1e3), ("K", 1e3), ("M", 1e6)]
        .into_iter()
        .find_map(|(suffix, scale)| Some((item.strip_suffix(suffix)?, scale)))
        .unwrap_or((item, 1.0))
}

/// One rate: a number >= 0 with an optional k or M suffix, at most
/// [`MAX_RATE_HZ`].
fn rate_value(item: &str, hint: &str) -> Result<f64, String> {
    let (num, scale) = rate_suffix(item);
    let r = num
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|r| r.is_finite() && *r >= 0.0)
        .map(|r| r * scale)
        .ok_or_else(|| format!("{item:?} is not a rate (a number >= 0); {hint}"))?;
    if r > MAX_RATE_HZ {
        return Err(format!(
            "{item} is above the highest supported rate {MAX_RATE_HZ} Hz (a 100 ns period); use 0 for back to back"
        ));
    }
    Ok(r)
}
