//! The built-in local probes: what ibexporter probes with no config.
//!
//! Why it exists: the README's main job is `ibexporter` with no options,
//! and on a host with an HCA that must already show tail latency: verbs
//! loopback on every active port, the shm and udp references beside it
//! (the floor and the kernel path), and the CPUs' wake-up latency (what
//! ibtune's isolation buys). A host with no RDMA device says so once and
//! probes the rest.

use ibnoise::wakeup;
use ibprobe::spec::{ChannelSpec, Op, Transport, VerbsKnobs};

use super::spec::{ProbeKind, ProbeSpec};
use crate::collect::latency::SeriesKey;

/// Which local probes to run.
#[derive(Clone, Debug)]
pub struct LocalOptions {
    /// This exporter's name (the `source` label).
    pub source: String,
    /// Verbs loopback on every active port of every local HCA.
    pub hca_loopback: bool,
    /// QP type (rc, uc or ud) and operation for the HCA loopback probes.
    pub qp: Transport,
    /// See `qp`.
    pub op: Op,
    /// Reference transports: "shm", "udp".
    pub reference: Vec<Transport>,
    /// SCHED_FIFO wake-up latency per CPU (needs CAP_SYS_NICE).
    pub host_wakeup: bool,
    /// CPUs for the wake-up probe; `None`: every CPU this process may use.
    pub wakeup_cpus: Option<Vec<usize>>,
    /// Message sizes.
    pub sizes: Vec<usize>,
}

impl Default for LocalOptions {
    fn default() -> Self {
        LocalOptions {
            source: String::new(),
            hca_loopback: true,
            qp: Transport::Rc,
            op: Op::Send,
            reference: vec![Transport::Shm, Transport::Udp],
            host_wakeup: true,
            wakeup_cpus: None,
            sizes: vec![32],
        }
    }
}

fn key(o: &LocalOptions, target: &str, transport: &str, op: &str, size: usize) -> SeriesKey {
    SeriesKey {
        source: o.source.clone(),
        target: target.into(),
        transport: transport.into(),
        op: op.into(),
        size_bytes: size.to_string(),
    }
}

/// The local probes `o` asks for on this host, and one line per thing
/// that was skipped and why (logged once at start by the caller).
pub fn discover_local(o: &LocalOptions) -> (Vec<ProbeSpec>, Vec<String>) {
    let mut specs = Vec::new();
    let mut notes = Vec::new();
    if o.hca_loopback {
        match ibprobe::verbs::devices() {
            Ok(devs) if !devs.is_empty() => {
                for d in devs {
                    for p in d.ports.iter().filter(|p| p.state == "active") {
                        for &size in &o.sizes {
                            specs.push(ProbeSpec {
                                key: key(
                                    o,
                                    &format!("{}:{}", d.name, p.port),
                                    o.qp.name(),
                                    o.op.name(),
                                    size,
                                ),
                                kind: ProbeKind::Loopback(ChannelSpec {
                                    verbs: VerbsKnobs {
                                        dev: Some(d.name.clone()),
                                        port: p.port,
                                        op: o.op,
                                        ..VerbsKnobs::default()
                                    },
                                    ..ChannelSpec::new(o.qp, size)
                                }),
                            });
                        }
                    }
                    let down = d.ports.iter().filter(|p| p.state != "active").count();
                    if down > 0 {
                        notes.push(format!(
                            "{}: {down} port(s) not active, not probed (they are probed once active after a restart)",
                            d.name
                        ));
                    }
                }
            }
            Ok(_) => notes.push(no_device("no RDMA device (the device list is empty)")),
            Err(e) => notes.push(no_device(&e.to_string())),
        }
    }
    for &r in &o.reference {
        for &size in &o.sizes {
            specs.push(ProbeSpec {
                key: key(o, "loopback", r.name(), "send", size),
                kind: ProbeKind::Loopback(ChannelSpec::new(r, size)),
            });
        }
    }
    if o.host_wakeup {
        match wakeup::check_fifo(super::round::WAKEUP_PRIORITY) {
            Ok(()) => {
                let cpus = o
                    .wakeup_cpus
                    .clone()
                    .unwrap_or_else(ibprobe::sys::host::allowed_cpus);
                for cpu in cpus {
                    specs.push(ProbeSpec {
                        key: key(o, &format!("cpu{cpu}"), "host", "wakeup", 0),
                        kind: ProbeKind::Wakeup { cpu },
                    });
                }
            }
            Err(e) => notes.push(format!(
                "host wake-up probe off: {e} (run as root or grant CAP_SYS_NICE, or set local.host_wakeup = false)"
            )),
        }
    }
    (specs, notes)
}

/// Without a verbs device list (no libibverbs, or no device) only the
/// loopback probes stop: the port counters come from sysfs
/// (`collect/hca.rs`) and are exported whenever sysfs lists ports.
fn no_device(why: &str) -> String {
    format!(
        "{why}; HCA loopback probes are off (port counters are still read from sysfs where it \
         lists ports); the shm/udp reference probes and the wake-up probe still run"
    )
}
