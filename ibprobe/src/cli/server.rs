//! `ibprobe server`: the echo side of a round trip. Waits for clients on
//! TCP, agrees on the channel through the one handshake of
//! `probe/session/` (refusing a client that asks for another transport
//! than the server's), echoes until the client is done; or, for a client
//! of a paired workload (`ibprobe stream`, `ibprobe loggp`), answers it
//! with the workload its Hello names (`probe/executor/served.rs`).

use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::args::ServerArgs;
use super::common::{default_cpu, say, session_err, stop_flag};
use super::error::{CliError, EXIT_INTERRUPTED};
use crate::clock::Clock;
use crate::probe::config::Receiver;
use crate::probe::executor::serve_paired;
use crate::probe::session::oob::{Hello, Oob, OobError};
use crate::probe::session::{self, MemoryCap, OneMessage, ServeEnd, StreamHello};
use crate::probe::workload::{Asked, ReplyTo};
use crate::spec::StreamWorkload;

pub fn run(a: &ServerArgs) -> Result<u8, CliError> {
    let t = &a.transport;
    // The size comes with each client; everything else is refused now.
    crate::spec::check_combo(t.transport, t.verbs.op, t.verbs.poll)?;
    let stop = stop_flag()?;
    let secret = a.secret.secret()?;
    let listener = TcpListener::bind(&a.bind).map_err(|e| {
        CliError::input(format!("--bind {}: cannot listen there ({e}); pick a free local address, e.g. --bind 0.0.0.0:18516", a.bind))
    })?;
    let local = listener
        .local_addr()
        .map_err(|e| CliError::run(format!("getsockname: {e}")))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| CliError::run(format!("listener: {e}")))?;
    say!(
        "ibprobe server: listening on {local} for {} clients; Ctrl-C to stop",
        a.transport.transport
    );
    loop {
        // Poll accept, so Ctrl-C is seen while no client is connected.
        let oob = loop {
            if stop.load(Ordering::Relaxed) {
                say!("ibprobe server: interrupted");
                return Ok(EXIT_INTERRUPTED);
            }
            match listener.accept() {
                Ok((s, _)) => {
                    let _ = s.set_nonblocking(false);
                    break Oob::from_stream(s, a.handshake_timeout)
                        .map(|o| o.with_secret(secret.clone()).watch_stop(stop));
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Err(e) => return Err(CliError::run(format!("accept on {local}: {e}"))),
            }
        };
        let r = oob
            .map_err(|e| CliError::run(e.to_string()))
            .and_then(|o| one_client(a, o, stop));
        match r {
            Ok(code) if code == EXIT_INTERRUPTED => return Ok(code),
            Ok(_) if !a.forever => return Ok(0),
            Ok(_) => {}
            Err(e) if !a.forever => return Err(e),
            Err(e) => say!("ibprobe server: {}", e.message),
        }
    }
}

/// One client: handshake (all of it within `--handshake-timeout`), the
/// one check of its Hello ([`session::admit`]), then echo until the
/// client says Done (or vanishes), or its stream.
fn one_client(a: &ServerArgs, mut oob: Oob, stop: &AtomicBool) -> Result<u8, CliError> {
    let t = &a.transport;
    let peer = oob.peer_addr();
    oob.start_deadline(a.handshake_timeout);
    let hello = match oob.read_hello() {
        Ok(h) => h,
        Err(OobError::Interrupted { .. }) => {
            say!("ibprobe server: interrupted during a handshake");
            return Ok(EXIT_INTERRUPTED);
        }
        Err(e) => return Err(CliError::run(format!("client {peer}: {e}"))),
    };
    oob.end_deadline();
    let theirs = hello.transport.as_str();
    if theirs != t.transport.name() {
        let mine = t.transport;
        return Err(refused(session::refuse(&mut oob, format!(
            "the server runs --transport {mine}, the client asked for {theirs}; pass --transport {mine} to the client (or restart the server with --transport {theirs})"
        ))));
    }
    // Both directions of a stream use the client's operation (its
    // control slots come back the way its data goes); the rest of the
    // channel is this server's (device, port, GID, inline, depths).
    let mut spec = t.channel_spec(hello.size);
    if hello.params.get("stream").is_some() {
        match session::requested(&hello, None) {
            Ok(asked) => spec.verbs.op = asked.verbs.op,
            Err(e) => return Err(refused(session::refuse(&mut oob, e))),
        }
    }
    let cap = MemoryCap {
        bytes: a.max_session_memory,
        raise: "--max-session-memory",
    };
    let admitted =
        session::admit(&hello, &spec, cap).map_err(|e| refused(session::refuse(&mut oob, e)))?;
    if let Some(sh) = &admitted.stream {
        return serve_stream(a, oob, &hello, &admitted.spec, sh, stop);
    }
    let spec = admitted.spec;
    // The client's receive-side knobs (--consume-delay), with this
    // server's own polling (its --poll built the channel).
    let receiver = Receiver {
        poll: spec.poll,
        ..admitted.receiver
    };
    let mut ch = session::open_server(&mut oob, &hello, &spec, &OneMessage::default())
        .map_err(open_failed)?;
    say!(
        "ibprobe server: client {peer}: {} B over {}",
        hello.size,
        ch.info().detail
    );
    let clock = Clock::choose(t.clock);
    // The echo loop's counters over the session, opened as any
    // measurement's (perf events only where a CPU PMU exists).
    let cpu = default_cpu(t);
    let span = ibnoise::counters::Span::start(&ibnoise::counters::measuring_cpus(cpu), false);
    let served = session::serve(
        &mut oob,
        ch.as_mut(),
        &clock,
        stop,
        cpu,
        &receiver,
        a.handshake_timeout,
    )
    .map_err(|e| CliError::run(e.detail))?;
    for l in crate::report::counters::table_lines(&span.finish()) {
        say!("ibprobe server: echo thread {l}");
    }
    let echoed = served.echoed;
    match served.end {
        ServeEnd::Interrupted => {
            say!("ibprobe server: interrupted after echoing {echoed} messages");
            return Ok(EXIT_INTERRUPTED);
        }
        ServeEnd::Done { sent } if echoed == 0 => {
            say!("ibprobe server: client {peer} done: {sent} messages sent")
        }
        ServeEnd::Done { sent } => {
            say!("ibprobe server: client {peer} done: echoed {echoed} of its {sent} messages")
        }
        ServeEnd::Closed => {}
    }
    Ok(0)
}

/// A refusal (told to the client) as the server's error.
fn refused(e: session::SessionError) -> CliError {
    CliError::run(format!("refused {}", e.detail))
}

/// A server end that could not be opened: a refusal, or a failed handshake.
fn open_failed(e: session::SessionError) -> CliError {
    match e.reason {
        "refused" => refused(e),
        _ => session_err(e),
    }
}

/// One client of a paired workload (its Hello admitted for `spec`): opens
/// its stream and answers with the workload its Hello names (`served.rs`).
fn serve_stream(
    a: &ServerArgs,
    mut oob: Oob,
    hello: &Hello,
    spec: &crate::spec::ChannelSpec,
    sh: &StreamHello,
    stop: &AtomicBool,
) -> Result<u8, CliError> {
    let t = &a.transport;
    let peer = oob.peer_addr();
    // The clock before the end opens: calibrating a TSC takes ~100 ms,
    // which after the handshake the client's first slots would wait out
    // (a credit stall inside its measured run).
    let clock = Clock::choose(t.clock);
    let mut end = session::open_server(&mut oob, hello, spec, sh).map_err(open_failed)?;
    say!(
        "ibprobe server: client {peer}: stream of {} B messages over {}",
        hello.size,
        end.info().detail
    );
    // `admit` refused a word this server does not serve.
    let word = sh.served().unwrap_or(StreamWorkload::Stream);
    let asked = Asked {
        spec: &sh.spec,
        cfg: &sh.receiver_config(hello.size),
        clock: &clock,
        stop,
    };
    let done = serve_paired(word, end.as_mut(), &asked, default_cpu(t), &mut oob)
        .map_err(|e| CliError::run(format!("client {peer}: {e}")))?;
    say!(
        "ibprobe server: client {peer} {} done: {}",
        done.word,
        done.said
    );
    Ok(super::common::exit_code(done.interrupted, false))
}

/// A served workload's reply goes to its client on the out-of-band connection.
impl ReplyTo for Oob {
    type Error = OobError;

    fn reply<T: serde::Serialize>(&mut self, msg: &T) -> Result<(), OobError> {
        self.send(msg)
    }
}
