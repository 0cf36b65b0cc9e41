//! Placement of the measuring thread and its peer (CPUs, memory locked
//! and pre-faulted) and the counters' span, the same for every workload.

use crate::probe::config::ProbeConfig;
use crate::sys::host;
use crate::transport::TransportError;
use ibnoise::counters::{self, Span};

/// `what` names the pin in the error.
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

/// Where the two threads of a loopback run go, among this process's
/// allowed CPUs ([`placement_among`]).
pub fn placement(
    sender: Option<usize>,
    receiver: Option<usize>,
    verbs: Option<&[usize]>,
) -> (Option<usize>, Option<usize>) {
    placement_among(&host::allowed_cpus(), verbs, sender, receiver)
}

/// Where the two threads go among `allowed`: `(measuring, peer)`. Asked
/// CPUs win; with one allowed CPU the measuring thread stays unpinned.
/// Otherwise they take the last two (away from CPU 0's housekeeping).
/// Over verbs (`verbs`: the device's interrupt CPUs, passed over while
/// two others remain) the sender takes the last and the busy-polling
/// receiver the one before (fastest in the Soft-RoCE guest; the other
/// way round, half the rounds ran at half the rate); other transports
/// keep the measuring thread on the last but one (where the shm
/// stream's LogGP predictions held).
pub fn placement_among(
    allowed: &[usize],
    verbs: Option<&[usize]>,
    sender: Option<usize>,
    receiver: Option<usize>,
) -> (Option<usize>, Option<usize>) {
    let avoid = verbs.unwrap_or_default();
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
    let n = pool.len();
    let last_but = |taken: Option<usize>| pool.iter().rev().copied().find(|&c| Some(c) != taken);
    if verbs.is_some() {
        let sender = sender.or_else(|| (n >= 2).then(|| last_but(receiver)).flatten());
        return (sender, receiver.or_else(|| last_but(sender)));
    }
    let sender = sender.or_else(|| (n >= 2).then(|| pool[n - 2]));
    let receiver = receiver.or_else(|| {
        let after = sender.map_or(0, |s| s + 1);
        pool.iter()
            .copied()
            .find(|&c| Some(c) != sender && c >= after)
            .or_else(|| pool.iter().copied().find(|&c| Some(c) != sender))
    });
    (sender, receiver)
}

/// The measuring thread's counters, opened on this thread.
pub fn span(cfg: &ProbeConfig) -> Option<Span> {
    cfg.counters
        .then(|| Span::start(&counters::measuring_cpus(cfg.cpu), cfg.perf_counters))
}

#[cfg(test)]
mod tests {
    use super::placement_among;

    type Case = (
        &'static [usize],
        Option<&'static [usize]>,
        Option<usize>,
        Option<usize>,
    );
    type Cpus = (Option<usize>, Option<usize>);
    const VERBS: Option<&[usize]> = Some(&[]);

    fn check(cases: &[(Case, Cpus)]) {
        for &((allowed, verbs, s, r), want) in cases {
            assert_eq!(
                placement_among(allowed, verbs, s, r),
                want,
                "{allowed:?} {verbs:?} {s:?} {r:?}"
            );
        }
    }

    #[test]
    fn over_verbs_the_sender_takes_the_last_cpu_and_the_receiver_the_one_before() {
        check(&[
            ((&[0, 1], VERBS, None, None), (Some(1), Some(0))),
            ((&[0, 1, 2, 3], VERBS, None, None), (Some(3), Some(2))),
            ((&[2, 5, 7], VERBS, None, None), (Some(7), Some(5))),
        ]);
    }

    #[test]
    fn other_transports_keep_the_measuring_thread_on_the_last_but_one() {
        check(&[
            ((&[0, 1], None, None, None), (Some(0), Some(1))),
            ((&[0, 1, 2, 3], None, None, None), (Some(2), Some(3))),
            ((&[0, 1, 2, 3], None, Some(3), None), (Some(3), Some(0))),
        ]);
    }

    #[test]
    fn asked_cpus_win_and_the_other_thread_keeps_away() {
        check(&[
            ((&[0, 1, 2, 3], VERBS, Some(3), None), (Some(3), Some(2))),
            ((&[0, 1, 2, 3], VERBS, Some(2), None), (Some(2), Some(3))),
            ((&[0, 1, 2, 3], VERBS, None, Some(3)), (Some(2), Some(3))),
            ((&[0, 1], None, Some(0), Some(0)), (Some(0), Some(0))),
        ]);
    }

    #[test]
    fn interrupt_cpus_are_passed_over_while_two_others_remain() {
        check(&[
            ((&[0, 1, 2, 3], Some(&[3]), None, None), (Some(2), Some(1))),
            (
                (&[0, 1, 2, 3], Some(&[2, 3]), None, None),
                (Some(1), Some(0)),
            ),
            // Only one quiet CPU: the interrupts' CPUs are used as if none.
            ((&[0, 1], Some(&[1]), None, None), (Some(1), Some(0))),
        ]);
    }

    #[test]
    fn one_cpu_leaves_the_sender_unpinned() {
        check(&[
            ((&[4], VERBS, None, None), (None, Some(4))),
            ((&[4], None, None, None), (None, Some(4))),
            ((&[], None, None, None), (None, None)),
        ]);
    }
}
