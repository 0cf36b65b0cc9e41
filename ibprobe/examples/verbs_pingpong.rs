//! Round trip through the public client/server API, in one process:
//! `verbs::prepare` twice, each `Endpoint` serialized to JSON and parsed
//! back (what the out-of-band TCP exchange carries), `Prepared::connect`,
//! then ping-pong: the client posts, the server echoes what arrives, the
//! client times the round trip.
//!
//! Why it exists: proves the `prepare -> Endpoint -> connect` path the
//! client/server commands build on, on a real verbs stack (the lab).

mod common;

use clap::Parser;
use common::VerbsChannel;
use ibprobe::clock::Clock;
use ibprobe::spec::ChannelSpec;
use ibprobe::transport::Channel;
use ibprobe::verbs::{prepare, Endpoint, VerbsConfig};
use ibstats::latency::LatencyHistogram;

/// Flags: the library's verbs options plus transport, size and count.
#[derive(Parser, Debug)]
struct Cli {
    #[command(flatten)]
    channel: VerbsChannel,
}

fn main() {
    let cli = Cli::parse();
    let spec = cli.channel.spec();
    if let Err(e) = run(&cli, &spec) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run(cli: &Cli, spec: &ChannelSpec) -> Result<(), Box<dyn std::error::Error>> {
    let cfg = VerbsConfig::new(spec)?;
    let (client_prep, client_ep) = prepare(&cfg)?;
    let (server_prep, server_ep) = prepare(&cfg)?;
    let client_json = serde_json::to_string(&client_ep)?;
    let server_json = serde_json::to_string(&server_ep)?;
    println!("client endpoint: {client_json}");
    println!("server endpoint: {server_json}");
    let server_seen: Endpoint = serde_json::from_str(&client_json)?;
    let client_seen: Endpoint = serde_json::from_str(&server_json)?;
    let mut server = server_prep.connect(&server_seen)?;
    let mut client = client_prep.connect(&client_seen)?;
    let clock = Clock::calibrate();
    let timeout = 1_000_000_000;
    let mut rtt = LatencyHistogram::new();
    let mut lost = 0u64;
    for seq in 0..cli.channel.count {
        let t0 = clock.now();
        client.post(seq)?;
        match server.wait_recv(&clock, timeout)? {
            Some(s) => server.post(s)?,
            None => {
                lost += 1;
                continue;
            }
        }
        match client.wait_recv(&clock, timeout)? {
            Some(s) if s == seq => rtt.record(clock.ticks_to_ns(clock.now().wrapping_sub(t0))),
            _ => lost += 1,
        }
        while client.poll_send_done()?.is_some() {}
        while server.poll_send_done()?.is_some() {}
    }
    let s = rtt.summary();
    println!("{}", client.info().detail);
    println!(
        "round trips {} lost {} rtt p50 {:.2} us min {:.2} max {:.2} (half: {:.2} us)",
        s.count,
        lost,
        s.p50_ns as f64 / 1e3,
        s.min_ns as f64 / 1e3,
        s.max_ns as f64 / 1e3,
        s.p50_ns as f64 / 2e3
    );
    Ok(())
}
