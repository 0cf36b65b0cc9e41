//! `ibprobe loopback`, `server` and `client`: options -> transport ->
//! runner -> report.
//!
//! Why it exists: the glue between the command line and the library, kept
//! apart from the parser so each step (build the config, open the
//! transport, run, print) reads in order.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::json;

use super::{
    CliError, ClientArgs, LoopbackArgs, MeasureArgs, ServerArgs, TransportArgs, TransportKind,
    EXIT_INTERRUPTED,
};
use crate::clock::Clock;
use crate::probe::config::{Length, Mode, Poll, ProbeConfig};
use crate::probe::oob::{Closing, Done, Hello, Oob, OobError, Reply, DEFAULT_PORT};
use crate::probe::runner::{self, EchoThread};
use crate::probe::workload::{Interval, Sink};
use crate::probe::Outcome;
use crate::report::hdrlog::HdrLogWriter;
use crate::report::{Format, Report, ReportContext, ReportError};
use crate::sys::host;
use crate::transport::shm::{ShmChannel, Side};
use crate::transport::udp::UdpChannel;
use crate::transport::{Channel, TransportError, TransportInfo};
use crate::verbs::{self, VerbsConfig, VerbsError, VerbsErrorKind};

/// Progress lines on stderr; a closed stderr must not kill a server.
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

/// Builds and validates the probe configuration from the options.
fn probe_config(m: &MeasureArgs, t: &TransportArgs, mode: Mode) -> Result<ProbeConfig, CliError> {
    let poll = poll_mode(t)?;
    let mut cfg = ProbeConfig {
        size: m.size,
        length: match m.duration {
            Some(d) => Length::Duration(d),
            None => Length::Count(m.count.unwrap_or(10_000)),
        },
        warmup: m.warmup,
        rate_hz: m.rate,
        burst: m.burst,
        pause: m.pause,
        cpu: t.cpu,
        timeout: m.timeout,
        max_consecutive_lost: 3,
        mode,
        poll,
        lock_memory: !m.no_mlock,
        interval: m.hdr_log.as_ref().map(|_| m.log_interval),
    };
    cfg.cpu = default_cpu(t);
    cfg.validate().map_err(|e| CliError::input(e.0))?;
    Ok(cfg)
}

/// `--poll` as a [`Poll`]: event polling needs something to sleep on (a
/// verbs completion channel, or poll(2) on the UDP socket), so it is
/// refused with shm (exit 2).
pub(super) fn poll_mode(t: &TransportArgs) -> Result<Poll, CliError> {
    let can_sleep = t.transport.qp_type().is_some() || t.transport == TransportKind::Udp;
    match (t.verbs.poll.as_str(), can_sleep) {
        ("busy", _) => Ok(Poll::Busy),
        ("event", true) => Ok(Poll::Event),
        ("event", false) => Err(CliError::input(format!(
            "--poll event with --transport {}: the shared-memory ring has nothing to sleep on; use --transport udp|rc|uc|ud, or drop --poll",
            t.transport.name()
        ))),
        (p, _) => Err(CliError::input(format!(
            "--poll {p}: unknown polling mode; use busy or event"
        ))),
    }
}

/// The CPU to pin to: `--cpu` when given, else for verbs one local to the
/// device ([`hca_local_cpu`]), else none.
pub(super) fn default_cpu(t: &TransportArgs) -> Option<usize> {
    match (t.cpu, t.transport.qp_type()) {
        (None, Some(_)) => hca_local_cpu(t.verbs.dev.as_deref()),
        (c, _) => c,
    }
}

/// The default `--cpu` for verbs: a CPU local to the device (its NUMA
/// node's CPUs, from sysfs), as the thesis pinned each loop next to its
/// HCA; CPU 0 (where housekeeping lands) only when nothing else is local.
/// `None` when the device does not say (e.g. rxe) or cannot be listed.
fn hca_local_cpu(dev: Option<&str>) -> Option<usize> {
    let list = verbs::devices().ok()?;
    let d = match dev {
        Some(n) => list.iter().find(|d| d.name == n)?,
        None => list
            .iter()
            .find(|d| d.ports.iter().any(|p| p.state == "active"))?,
    };
    let allowed = host::allowed_cpus();
    let local: Vec<usize> = parse_cpulist(d.local_cpus.as_deref()?)?
        .into_iter()
        .filter(|c| allowed.contains(c))
        .collect();
    local
        .iter()
        .copied()
        .find(|&c| c != 0)
        .or(local.first().copied())
}

/// Parses a kernel CPU list such as "0-3,8,10-11".
pub fn parse_cpulist(s: &str) -> Option<Vec<usize>> {
    let mut v = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                v.extend(a.trim().parse::<usize>().ok()?..=b.trim().parse::<usize>().ok()?)
            }
            None => v.push(part.trim().parse().ok()?),
        }
    }
    Some(v)
}

pub(super) fn transport_err(e: TransportError) -> CliError {
    match e {
        TransportError::Unsupported(m) => CliError::input(m),
        other => CliError::run(other.to_string()),
    }
}

pub(super) fn verbs_err(e: VerbsError) -> CliError {
    match e.kind {
        VerbsErrorKind::Config | VerbsErrorKind::NoDevice => CliError::input(e.message),
        VerbsErrorKind::Verbs => CliError::run(e.message),
    }
}

pub(super) fn verbs_config(t: &TransportArgs, size: usize) -> Result<VerbsConfig, CliError> {
    let qp = t.transport.qp_type().expect("called for rc/uc/ud only");
    let size = u32::try_from(size).map_err(|_| {
        CliError::input(format!(
            "--size {size}: above the verbs limit of {} bytes; pick a smaller --size",
            u32::MAX
        ))
    })?;
    VerbsConfig::from_args(&t.verbs, qp, size).map_err(verbs_err)
}

fn format_of(m: &MeasureArgs) -> Format {
    if m.json {
        Format::Json
    } else {
        m.format
    }
}

/// Writes every interval to an HDR log (off the fast path: between messages).
struct HdrSink {
    log: Option<HdrLogWriter<std::io::BufWriter<std::fs::File>>>,
    tag: &'static str,
    error: Option<ReportError>,
}

impl Sink for HdrSink {
    fn interval(&mut self, iv: &Interval<'_>) {
        let (Some(log), None) = (self.log.as_mut(), self.error.as_ref()) else {
            return;
        };
        let mut r = log.write_interval(self.tag, iv.primary, iv.start_ns, iv.end_ns);
        if r.is_ok() && !iv.send_done.is_empty() {
            r = log.write_interval("send_completion", iv.send_done, iv.start_ns, iv.end_ns);
        }
        if let Err(e) = r {
            self.error = Some(e);
        }
    }
}

fn hdr_sink(m: &MeasureArgs, mode: Mode, comment: &str) -> Result<Option<HdrSink>, CliError> {
    let Some(path) = &m.hdr_log else {
        return Ok(None);
    };
    let log = HdrLogWriter::create(path, comment)
        .map_err(|e| CliError::input(format!("--hdr-log {}: {e}", path.display())))?;
    Ok(Some(HdrSink {
        log: Some(log),
        tag: if mode == Mode::OneWay {
            "one_way"
        } else {
            "rtt"
        },
        error: None,
    }))
}

/// The run's settings as the report's `config` pairs.
pub(super) fn config_echo(cfg: &ProbeConfig, t: &TransportArgs) -> Vec<(String, String)> {
    let mut v = vec![
        ("transport".to_string(), t.transport.name().to_string()),
        ("size".into(), cfg.size.to_string()),
    ];
    match cfg.length {
        Length::Count(n) => v.push(("count".into(), n.to_string())),
        Length::Duration(d) => v.push(("duration".into(), format!("{d:?}"))),
    }
    v.push(("warmup".into(), cfg.warmup.to_string()));
    if let Some(r) = cfg.rate_hz {
        v.push(("rate_hz".into(), r.to_string()));
    }
    if let Some(b) = cfg.burst {
        v.push(("burst".into(), b.to_string()));
    }
    if let Some(p) = cfg.pause {
        v.push(("pause".into(), format!("{p:?}")));
    }
    v.push((
        "cpu".into(),
        cfg.cpu
            .map(|c| c.to_string())
            .unwrap_or_else(|| "unpinned".into()),
    ));
    v.push(("timeout".into(), format!("{:?}", cfg.timeout)));
    v
}

/// The report context of one run: its settings echoed, and a warning when
/// the probe is not pinned to a CPU.
pub(super) fn report_context(
    cfg: &ProbeConfig,
    t: &TransportArgs,
    mode: crate::report::Mode,
    info: TransportInfo,
    clock: Clock,
) -> ReportContext {
    let mut ctx = ReportContext::new(mode, info, clock, cfg.size as u64);
    ctx.config = config_echo(cfg, t);
    if cfg.cpu.is_none() {
        ctx.warnings
            .push("not pinned to a CPU (--cpu): migrations may show in the tail".into());
    }
    ctx
}

/// Runs the probe on `ch` and prints its report; the exit code or error.
fn measure_and_print(
    cfg: &ProbeConfig,
    m: &MeasureArgs,
    t: &TransportArgs,
    ch: &mut dyn Channel,
    report_mode: crate::report::Mode,
    stop: &AtomicBool,
    clock: Clock,
) -> Result<(Outcome, u8), CliError> {
    let info = ch.info();
    let mut sink = hdr_sink(m, cfg.mode, &format!("{} {} B", info.detail, cfg.size))?;
    let result = runner::run(
        cfg,
        ch,
        &clock,
        stop,
        sink.as_mut().map(|s| s as &mut dyn Sink),
    );
    let outcome =
        result.map_err(|e| CliError::run(format!("{} probe failed: {e}", t.transport.name())))?;
    let ctx = report_context(cfg, t, report_mode, info, clock);
    let report = Report::new(&outcome, ctx);
    print!("{}", report.render(format_of(m)));
    if let Some(mut s) = sink {
        if let Some(e) = s.error.take() {
            return Err(CliError::run(format!("--hdr-log: {e}")));
        }
        if let Some(log) = s.log.take() {
            log.finish()
                .map_err(|e| CliError::run(format!("--hdr-log: {e}")))?;
        }
    }
    if let Some(path) = &m.plot {
        let hist = outcome.one_way.as_ref().or(outcome.rtt.as_ref());
        if let Some(h) = hist {
            let title = format!("ibprobe {} {} B", t.transport.name(), cfg.size);
            crate::report::plot::write_svg(path, &title, h)
                .map_err(|e| CliError::run(format!("--plot: {e}")))?;
        }
    }
    let code = if outcome.interrupted {
        EXIT_INTERRUPTED
    } else {
        0
    };
    Ok((outcome, code))
}

pub(super) fn stop_flag() -> Result<&'static AtomicBool, CliError> {
    host::sigint_flag()
        .map_err(|e| CliError::run(format!("cannot install the Ctrl-C handler: {e}")))
}

/// `ibprobe loopback`.
pub fn loopback(a: &LoopbackArgs) -> Result<u8, CliError> {
    let t = &a.transport;
    let mode = if a.round_trip {
        Mode::RoundTrip
    } else {
        Mode::OneWay
    };
    let cfg = probe_config(&a.measure, t, mode)?;
    let stop = stop_flag()?;
    let clock = Clock::choose(t.clock);
    let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let event = cfg.poll == Poll::Event;
    let mut echo = None;
    let mut ch: Box<dyn Channel> = match (t.transport, a.round_trip) {
        (TransportKind::Shm, false) => Box::new(ShmChannel::loopback(cfg.size).map_err(transport_err)?),
        (TransportKind::Shm, true) => {
            let (c, s) = ShmChannel::pair(cfg.size).map_err(transport_err)?;
            echo = Some(EchoThread::spawn(s, clock, None, event));
            Box::new(c)
        }
        (TransportKind::Udp, false) => {
            let mut u = UdpChannel::loopback(lo, cfg.size).map_err(transport_err)?;
            u.set_event_poll(event);
            Box::new(u)
        }
        (TransportKind::Udp, true) => {
            let mut c = UdpChannel::bind(SocketAddr::new(lo, 0), cfg.size).map_err(transport_err)?;
            let mut s = UdpChannel::bind(SocketAddr::new(lo, 0), cfg.size).map_err(transport_err)?;
            c.set_event_poll(event);
            s.set_event_poll(event);
            c.connect(s.local_addr().map_err(transport_err)?).map_err(transport_err)?;
            s.connect(c.local_addr().map_err(transport_err)?).map_err(transport_err)?;
            echo = Some(EchoThread::spawn(s, clock, None, event));
            Box::new(c)
        }
        (_, true) => {
            return Err(CliError::input(format!(
                "--round-trip with --transport {}: an in-process echo exists for shm and udp only; for verbs run `ibprobe server` and `ibprobe client`",
                t.transport.name()
            )))
        }
        (_, false) => Box::new(verbs::loopback(&verbs_config(t, cfg.size)?).map_err(verbs_err)?),
    };
    let r = measure_and_print(
        &cfg,
        &a.measure,
        t,
        ch.as_mut(),
        crate::report::Mode::Loopback,
        stop,
        clock,
    );
    drop(ch);
    if let Some(e) = echo {
        let _ = e.finish();
    }
    r.map(|(_, code)| code)
}

/// `ibprobe client`.
pub fn client(a: &ClientArgs) -> Result<u8, CliError> {
    let t = &a.transport;
    let cfg = probe_config(&a.measure, t, Mode::RoundTrip)?;
    let stop = stop_flag()?;
    let clock = Clock::choose(t.clock);
    let oob_err = |e: OobError| match e {
        OobError::Refused(_) => CliError::input(e.to_string()),
        OobError::Resolve { .. } => CliError::input(e.to_string()),
        _ => CliError::run(e.to_string()),
    };
    let mut oob = Oob::connect(&a.host, DEFAULT_PORT, a.connect_timeout).map_err(oob_err)?;
    let local_ip = oob.local_addr().map_err(oob_err)?.ip();
    let server_ip = oob.peer_addr().ip();
    let hello = |endpoint| Hello {
        transport: t.transport.name().into(),
        size: cfg.size,
        params: serde_json::to_value(&cfg).unwrap_or_default(),
        endpoint,
    };
    let bad_reply = |what: &str, ep: &serde_json::Value| {
        CliError::run(format!("server sent a malformed {what} endpoint {ep}; run the same ibprobe version on both ends"))
    };
    let mut ch: Box<dyn Channel> = match t.transport {
        TransportKind::Udp => {
            let mut u =
                UdpChannel::bind(SocketAddr::new(local_ip, 0), cfg.size).map_err(transport_err)?;
            u.set_event_poll(cfg.poll == Poll::Event);
            let port = u.local_addr().map_err(transport_err)?.port();
            let ep = oob
                .handshake(&hello(json!({ "port": port })))
                .map_err(oob_err)?;
            let sport = ep
                .get("port")
                .and_then(|p| p.as_u64())
                .and_then(|p| u16::try_from(p).ok());
            let sport = sport.ok_or_else(|| bad_reply("udp", &ep))?;
            u.connect(SocketAddr::new(server_ip, sport))
                .map_err(transport_err)?;
            Box::new(u)
        }
        TransportKind::Shm => {
            // Validate the size before asking the server to create a ring.
            crate::transport::shm::ShmChannel::loopback(cfg.size).map_err(transport_err)?;
            let ep = oob
                .handshake(&hello(serde_json::Value::Null))
                .map_err(oob_err)?;
            let path = ep
                .get("path")
                .and_then(|p| p.as_str())
                .ok_or_else(|| bad_reply("shm", &ep))?;
            Box::new(ShmChannel::open(std::path::Path::new(path), cfg.size, Side::Client).map_err(|e| {
                CliError::run(format!(
                    "{e}; the shm transport needs client and server on the same host (server {server_ip}), use --transport udp or verbs across hosts"
                ))
            })?)
        }
        _ => {
            let vcfg = verbs_config(t, cfg.size)?;
            let (prepared, ep) = verbs::prepare(&vcfg).map_err(verbs_err)?;
            let theirs = oob
                .handshake(&hello(serde_json::to_value(&ep).unwrap_or_default()))
                .map_err(oob_err)?;
            let theirs: verbs::Endpoint =
                serde_json::from_value(theirs.clone()).map_err(|_| bad_reply("verbs", &theirs))?;
            Box::new(prepared.connect(&theirs).map_err(verbs_err)?)
        }
    };
    let r = measure_and_print(
        &cfg,
        &a.measure,
        t,
        ch.as_mut(),
        crate::report::Mode::Client,
        stop,
        clock,
    );
    let sent = r
        .as_ref()
        .map(|(o, _)| o.sent + o.warmup_count)
        .unwrap_or(0);
    let interrupted = r.as_ref().map(|(o, _)| o.interrupted).unwrap_or(false);
    let _ = oob.send(&Done { sent, interrupted });
    drop(ch);
    r.map(|(_, code)| code)
}

/// `ibprobe server`.
pub fn server(a: &ServerArgs) -> Result<u8, CliError> {
    let stop = stop_flag()?;
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
        a.transport.transport.name()
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
                    let l2 = s;
                    break Oob::from_stream(l2, a.handshake_timeout);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Err(e) => return Err(CliError::run(format!("accept on {local}: {e}"))),
            }
        };
        let r = oob
            .map_err(|e| CliError::run(e.to_string()))
            .and_then(|o| session(a, o, stop));
        match r {
            Ok(code) if code == EXIT_INTERRUPTED => return Ok(code),
            Ok(_) if !a.forever => return Ok(0),
            Ok(_) => {}
            Err(e) if !a.forever => return Err(e),
            Err(e) => say!("ibprobe server: {}", e.message),
        }
    }
}

/// Tells the client why it is refused; the server's error for the same.
fn refuse(oob: &mut Oob, reason: String) -> CliError {
    let _ = oob.send(&Reply::Refuse {
        reason: reason.clone(),
    });
    CliError::run(format!("refused client {}: {reason}", oob.peer_addr()))
}

/// One client: handshake, echo until the client says Done (or vanishes).
fn session(a: &ServerArgs, mut oob: Oob, stop: &AtomicBool) -> Result<u8, CliError> {
    let t = &a.transport;
    let peer = oob.peer_addr();
    let run_err = |e: OobError| CliError::run(format!("client {peer}: {e}"));
    let hello = oob.read_hello().map_err(run_err)?;
    if hello.transport != t.transport.name() {
        return Err(refuse(&mut oob, format!(
            "the server runs --transport {}, the client asked for {}; pass --transport {} to the client (or restart the server with --transport {})",
            t.transport.name(),
            hello.transport,
            t.transport.name(),
            hello.transport
        )));
    }
    let clock = Clock::choose(t.clock);
    let event = poll_mode(t)? == Poll::Event;
    let local_ip = oob.local_addr().map_err(run_err)?.ip();
    let (mut ch, endpoint): (Box<dyn Channel>, serde_json::Value) = match t.transport {
        TransportKind::Udp => {
            let cport = hello
                .endpoint
                .get("port")
                .and_then(|p| p.as_u64())
                .and_then(|p| u16::try_from(p).ok());
            let Some(cport) = cport else {
                return Err(refuse(
                    &mut oob,
                    format!(
                        "malformed udp endpoint {}; run the same ibprobe version on both ends",
                        hello.endpoint
                    ),
                ));
            };
            let mut u = match UdpChannel::bind(SocketAddr::new(local_ip, 0), hello.size) {
                Ok(u) => u,
                Err(e) => return Err(refuse(&mut oob, e.to_string())),
            };
            u.connect(SocketAddr::new(peer.ip(), cport))
                .map_err(transport_err)?;
            u.set_event_poll(event);
            let port = u.local_addr().map_err(transport_err)?.port();
            (Box::new(u), json!({ "port": port }))
        }
        TransportKind::Shm => {
            let path = crate::transport::shm::default_path();
            match ShmChannel::create(&path, hello.size, Side::Server) {
                Ok(s) => (Box::new(s), json!({ "path": path.display().to_string() })),
                Err(e) => return Err(refuse(&mut oob, e.to_string())),
            }
        }
        _ => {
            let vcfg = match verbs_config(t, hello.size) {
                Ok(v) => v,
                Err(e) => return Err(refuse(&mut oob, e.message)),
            };
            let theirs: verbs::Endpoint = match serde_json::from_value(hello.endpoint.clone()) {
                Ok(e) => e,
                Err(e) => {
                    return Err(refuse(
                        &mut oob,
                        format!(
                        "malformed verbs endpoint ({e}); run the same ibprobe version on both ends"
                    ),
                    ))
                }
            };
            let (prepared, ours) = match verbs::prepare(&vcfg) {
                Ok(p) => p,
                Err(e) => return Err(refuse(&mut oob, e.message)),
            };
            let ch = prepared.connect(&theirs).map_err(verbs_err)?;
            (
                Box::new(ch),
                serde_json::to_value(&ours).unwrap_or_default(),
            )
        }
    };
    oob.send(&Reply::Welcome { endpoint }).map_err(run_err)?;
    say!(
        "ibprobe server: client {peer}: {} B over {}",
        hello.size,
        ch.info().detail
    );
    let mut closing = None;
    let cpu = default_cpu(t);
    let r = runner::serve(ch.as_mut(), &clock, stop, cpu, event, || {
        match oob.poll_closing() {
            Closing::Open => true,
            other => {
                closing = Some(other);
                false
            }
        }
    });
    let (echoed, end) = match r {
        Ok(x) => x,
        // A client that finished may close its end of the transport before
        // the server looks at the out-of-band connection: ask it first.
        Err(TransportError::PeerLost(why)) => {
            let t0 = std::time::Instant::now();
            loop {
                match oob.poll_closing() {
                    Closing::Open if t0.elapsed() < a.handshake_timeout => {
                        std::thread::sleep(Duration::from_millis(5))
                    }
                    Closing::Done(d) => {
                        say!(
                            "ibprobe server: client {peer} done: {} messages sent",
                            d.sent
                        );
                        return Ok(0);
                    }
                    _ => return Err(CliError::run(format!("client {peer} lost mid-run: {why}"))),
                }
            }
        }
        Err(e) => return Err(CliError::run(format!("client {peer}: {e}"))),
    };
    match (end, closing) {
        (crate::probe::workload::EchoEnd::Interrupted, _) => {
            say!("ibprobe server: interrupted after echoing {echoed} messages");
            Ok(EXIT_INTERRUPTED)
        }
        (_, Some(Closing::Done(d))) => {
            say!(
                "ibprobe server: client {peer} done: echoed {echoed} of its {} messages",
                d.sent
            );
            Ok(0)
        }
        (_, Some(Closing::Gone(e))) => Err(CliError::run(format!(
            "client {peer} vanished after {echoed} messages: {e}"
        ))),
        _ => Ok(0),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_cpulist;

    #[test]
    fn cpulists_parse() {
        assert_eq!(
            parse_cpulist("0-3,8,10-11\n"),
            Some(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpulist("5"), Some(vec![5]));
        assert_eq!(parse_cpulist(""), Some(vec![]));
        assert_eq!(parse_cpulist("a-b"), None);
    }
}
