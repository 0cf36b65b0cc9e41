//! One-way verbs loopback through `ibprobe::verbs::loopback`: posts
//! `--count` messages on QP A, times each arrival on QP B with the crate's
//! `Clock`, and prints the one-way and send-completion summaries.
//!
//! Why it exists: proves the verbs `Channel` on a real verbs stack (the
//! Soft-RoCE lab) independently of the CLI and the measurement loop:
//! `tests/lab/lab run -- target/debug/examples/verbs_loopback --transport rc --op send`.
//! Exit status: 0 ok, 2 refused configuration, 1 other failure.

mod common;

use clap::Parser;
use common::VerbsChannel;
use ibprobe::clock::Clock;
use ibprobe::spec::Poll;
use ibprobe::transport::Channel;
use ibprobe::verbs::{loopback, VerbsConfig};
use ibstats::latency::{LatencyHistogram, Summary};

/// Flags: the library's verbs options plus transport, size and count.
#[derive(Parser, Debug)]
struct Cli {
    #[command(flatten)]
    channel: VerbsChannel,
    /// Per-message wait before counting it lost, ms.
    #[arg(long, default_value_t = 1000)]
    timeout_ms: u64,
    /// Post all messages back to back (no wait per message), receiving
    /// what has arrived between posts: exercises a full send queue and
    /// the receive queue under load (latencies then include queueing).
    #[arg(long)]
    burst: bool,
    /// Print one line of key=value only (for scripts).
    #[arg(long)]
    brief: bool,
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

fn line(name: &str, s: &Summary) -> String {
    format!(
        "{name}: count {} min {:.2} p50 {:.2} p99 {:.2} max {:.2} mean {:.2} us",
        s.count,
        us(s.min_ns),
        us(s.p50_ns),
        us(s.p99_ns),
        us(s.max_ns),
        s.mean_ns / 1000.0
    )
}

fn main() {
    let cli = Cli::parse();
    let spec = cli.channel.spec();
    let cfg = match VerbsConfig::new(&spec) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(e.exit_code());
        }
    };
    let mut ch = match loopback(&cfg) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(e.exit_code());
        }
    };
    if let Err(e) = run(&cli, &cfg, &mut ch) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run(
    cli: &Cli,
    cfg: &VerbsConfig,
    ch: &mut dyn Channel,
) -> Result<(), Box<dyn std::error::Error>> {
    let clock = Clock::calibrate();
    let info = ch.info();
    let n = cli.channel.count as usize;
    let mut t_sub = vec![0u64; n];
    let mut got = vec![false; n];
    let mut one_way = LatencyHistogram::new();
    let mut send_done = LatencyHistogram::new();
    let timeout = cli.timeout_ms * 1_000_000;
    let mut received = 0u64;
    let mut signaled = 0u64;
    let record_done = |s: u64, t: u64, t_sub: &[u64], h: &mut LatencyHistogram| {
        if (s as usize) < t_sub.len() {
            h.record(clock.ticks_to_ns(t.wrapping_sub(t_sub[s as usize])));
        }
    };
    let mut done = vec![false; n];
    if cli.burst {
        for seq in 0..cli.channel.count {
            if ch.is_signaled(seq) {
                signaled += 1;
            }
            t_sub[seq as usize] = clock.now();
            ch.post(seq)?;
            while let Some(s) = ch.poll_send_done()? {
                if (s as usize) < n && !done[s as usize] {
                    done[s as usize] = true;
                    record_done(s, clock.now(), &t_sub, &mut send_done);
                }
            }
            while let Some(s) = ch.poll_recv()? {
                let now = clock.now();
                if (s as usize) < n && !got[s as usize] {
                    got[s as usize] = true;
                    received += 1;
                    one_way.record(clock.ticks_to_ns(now.wrapping_sub(t_sub[s as usize])));
                }
            }
        }
        let t0 = clock.now();
        while received < cli.channel.count
            && clock.ticks_to_ns(clock.now().wrapping_sub(t0)) < timeout
        {
            if let Some(s) = ch.poll_recv()? {
                let now = clock.now();
                if (s as usize) < n && !got[s as usize] {
                    got[s as usize] = true;
                    received += 1;
                    one_way.record(clock.ticks_to_ns(now.wrapping_sub(t_sub[s as usize])));
                }
            }
        }
    }
    for seq in 0..if cli.burst { 0 } else { cli.channel.count } {
        let want_done = ch.is_signaled(seq);
        if want_done {
            signaled += 1;
        }
        let t0 = clock.now();
        t_sub[seq as usize] = t0;
        ch.post(seq)?;
        // Wait for this message's arrival and, when signaled, its send
        // completion; each is timed when first seen.
        let mut arrived = false;
        loop {
            if !arrived {
                let r = if cfg.poll == Poll::Event {
                    ch.wait_recv(&clock, timeout)?
                } else {
                    ch.poll_recv()?
                };
                let now = clock.now();
                if let Some(s) = r {
                    if std::env::var_os("VERBS_DEBUG").is_some() {
                        eprintln!("posted {seq} got {s}");
                    }
                    if (s as usize) < n && !got[s as usize] {
                        got[s as usize] = true;
                        received += 1;
                        one_way.record(clock.ticks_to_ns(now.wrapping_sub(t_sub[s as usize])));
                    }
                    arrived = s >= seq;
                }
            }
            while let Some(s) = ch.poll_send_done()? {
                if (s as usize) < n && !done[s as usize] {
                    done[s as usize] = true;
                    record_done(s, clock.now(), &t_sub, &mut send_done);
                }
            }
            if arrived && (!want_done || done[seq as usize]) {
                break;
            }
            if clock.ticks_to_ns(clock.now().wrapping_sub(t0)) > timeout {
                break;
            }
        }
    }
    // Drain the send completions still due.
    let t0 = clock.now();
    while send_done.len() < signaled && clock.ticks_to_ns(clock.now().wrapping_sub(t0)) < timeout {
        while let Some(s) = ch.poll_send_done()? {
            if (s as usize) < n && !done[s as usize] {
                done[s as usize] = true;
                record_done(s, clock.now(), &t_sub, &mut send_done);
            }
        }
    }
    let ow = one_way.summary();
    let sd = send_done.summary();
    if cli.brief {
        println!(
            "sent={} received={} lost={} signaled={} send_done={} ow_p50_us={:.2} ow_max_us={:.2} sd_p50_us={:.2} detail=\"{}\"",
            cli.channel.count,
            received,
            cli.channel.count - received,
            signaled,
            sd.count,
            us(ow.p50_ns),
            us(ow.max_ns),
            us(sd.p50_ns),
            info.detail
        );
    } else {
        println!("{}", info.detail);
        println!(
            "sent {} received {} lost {}",
            cli.channel.count,
            received,
            cli.channel.count - received
        );
        println!("{}", line("one-way", &ow));
        println!("{}", line("send-completion", &sd));
    }
    Ok(())
}
