//! Placement and counting of the measuring thread and its peer: which CPU
//! each runs on, memory locked and pre-faulted, the counters' span.
//!
//! Why it exists: every workload runs placed the same way; the choices
//! (and the notes and errors they give) are made here once.

use crate::counters::{self, Span};
use crate::probe::config::ProbeConfig;
use crate::sys::host;
use crate::transport::TransportError;

/// Pins this thread to `cpu`; `what` names it in the error.
pub fn pin(cpu: usize, what: &'static str) -> Result<(), TransportError> {
    host::pin_to_cpu(cpu).map_err(|source| TransportError::Io { what, source })
}

/// Pins to `cfg.cpu`, locks memory and pre-faults the stack. A pin failure
/// is an error (the user asked for that CPU); an mlockall failure is a note
/// (it needs CAP_IPC_LOCK; the run is still valid, with a warning).
pub fn place(cfg: &ProbeConfig) -> Result<Vec<String>, TransportError> {
    let mut notes = Vec::new();
    if let Some(cpu) = cfg.cpu {
        pin(cpu, "pin to --cpu (sched_setaffinity)")?;
        notes.push(format!("pinned to cpu {cpu}"));
    }
    if cfg.lock_memory {
        match host::lock_memory() {
            Ok(()) => notes.push("memory locked (mlockall)".into()),
            Err(e) => notes.push(format!(
                "warning: mlockall failed ({e}); page faults may show in the maxima (run as root or raise RLIMIT_MEMLOCK)"
            )),
        }
    }
    host::prefault_stack(256 * 1024);
    Ok(notes)
}

/// Where the two threads of a loopback run go: `(measuring, peer)`.
/// Asked CPUs win; otherwise, when this process may use two or more
/// CPUs, the measuring thread takes the last but one allowed and the peer
/// the last (away from CPU 0's housekeeping when there are three or
/// more), or the next allowed after the measuring thread's. `None`:
/// unpinned (one CPU only).
pub fn placement(sender: Option<usize>, receiver: Option<usize>) -> (Option<usize>, Option<usize>) {
    let allowed = host::allowed_cpus();
    let n = allowed.len();
    let sender = sender.or_else(|| (n >= 2).then(|| allowed[n - 2]));
    let receiver = receiver.or_else(|| {
        let after = sender.map_or(0, |s| s + 1);
        allowed
            .iter()
            .copied()
            .find(|&c| Some(c) != sender && c >= after)
            .or_else(|| allowed.iter().copied().find(|&c| Some(c) != sender))
    });
    (sender, receiver)
}

/// The measuring thread's counters (`counters/`), opened on this thread
/// when `cfg.counters`.
pub fn span(cfg: &ProbeConfig) -> Option<Span> {
    cfg.counters
        .then(|| Span::start(&counters::measuring_cpus(cfg.cpu), cfg.perf_counters))
}
