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

/// Where the two threads of a loopback run go: `(measuring, peer)`, among
/// this process's allowed CPUs (see [`placement_among`]); `avoid`: the
/// CPUs that take the device's interrupts, where known.
pub fn placement(
    sender: Option<usize>,
    receiver: Option<usize>,
    avoid: &[usize],
) -> (Option<usize>, Option<usize>) {
    placement_among(&host::allowed_cpus(), avoid, sender, receiver)
}

/// Where the two threads go among `allowed` (pure). Asked CPUs win.
/// Otherwise the measuring (sending) thread takes the last allowed CPU
/// and its peer (the busy-polling receiver) the one before it: two CPUs,
/// away from CPU 0's housekeeping when there are three or more. In the
/// Soft-RoCE guest (2 CPUs; CPU 0 takes the timer and most of the
/// kernel's work) a stream ran fastest so, with the sender on CPU 1 and
/// the receiver on CPU 0 (the other way round, half its rounds ran at
/// about half the rate). CPUs in `avoid` (the device's interrupt CPUs)
/// are passed over while at least two others are allowed: a busy-polling
/// thread needs no interrupt, and an interrupt on its CPU is a stall.
/// `None`: unpinned (one CPU only).
pub fn placement_among(
    allowed: &[usize],
    avoid: &[usize],
    sender: Option<usize>,
    receiver: Option<usize>,
) -> (Option<usize>, Option<usize>) {
    let quiet: Vec<usize> = allowed
        .iter()
        .copied()
        .filter(|c| !avoid.contains(c))
        .collect();
    let pool = if quiet.len() >= 2 {
        &quiet[..]
    } else {
        allowed
    };
    let last_but = |taken: Option<usize>| pool.iter().rev().copied().find(|&c| Some(c) != taken);
    let sender = sender.or_else(|| (pool.len() >= 2).then(|| last_but(receiver)).flatten());
    let receiver = receiver.or_else(|| last_but(sender));
    (sender, receiver)
}

/// The measuring thread's counters (`counters/`), opened on this thread
/// when `cfg.counters`.
pub fn span(cfg: &ProbeConfig) -> Option<Span> {
    cfg.counters
        .then(|| Span::start(&counters::measuring_cpus(cfg.cpu), cfg.perf_counters))
}

#[cfg(test)]
mod tests {
    use super::placement_among;

    #[test]
    fn the_sender_takes_the_last_cpu_and_the_receiver_the_one_before() {
        assert_eq!(
            placement_among(&[0, 1], &[], None, None),
            (Some(1), Some(0))
        );
        assert_eq!(
            placement_among(&[0, 1, 2, 3], &[], None, None),
            (Some(3), Some(2))
        );
        assert_eq!(
            placement_among(&[2, 5, 7], &[], None, None),
            (Some(7), Some(5))
        );
    }

    #[test]
    fn asked_cpus_win_and_the_other_thread_keeps_away() {
        assert_eq!(
            placement_among(&[0, 1, 2, 3], &[], Some(3), None),
            (Some(3), Some(2))
        );
        assert_eq!(
            placement_among(&[0, 1, 2, 3], &[], Some(2), None),
            (Some(2), Some(3))
        );
        assert_eq!(
            placement_among(&[0, 1, 2, 3], &[], None, Some(3)),
            (Some(2), Some(3))
        );
        assert_eq!(
            placement_among(&[0, 1], &[], Some(0), Some(0)),
            (Some(0), Some(0))
        );
    }

    #[test]
    fn interrupt_cpus_are_passed_over_while_two_others_remain() {
        assert_eq!(
            placement_among(&[0, 1, 2, 3], &[3], None, None),
            (Some(2), Some(1))
        );
        assert_eq!(
            placement_among(&[0, 1, 2, 3], &[2, 3], None, None),
            (Some(1), Some(0))
        );
        // Only one quiet CPU: the interrupts' CPUs are used as if none.
        assert_eq!(
            placement_among(&[0, 1], &[1], None, None),
            (Some(1), Some(0))
        );
    }

    #[test]
    fn one_cpu_leaves_the_sender_unpinned() {
        assert_eq!(placement_among(&[4], &[], None, None), (None, Some(4)));
        assert_eq!(placement_among(&[], &[], None, None), (None, None));
    }
}
