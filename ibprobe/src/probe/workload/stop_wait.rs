//! Stop-and-wait: THE measurement loop, short enough to check in one
//! sitting. `t_subm = now; post(seq)`, then poll until the arrival of
//! `seq` (`t_recv`) and, for a signaled send, its completion (`t_comp`);
//! record `t_recv - t_subm` (one-way, or the RTT when the arrival is the
//! echo) and `t_comp - t_subm`. An older arrival (already counted lost)
//! is skipped; none within the timeout is a loss, and
//! `max_consecutive_lost` in a row end the run. Between messages: Ctrl-C,
//! the end, pacing ([`super::pace`]), intervals to a [`Sink`]. Event
//! polling waits for the arrival first, so `t_comp` is no earlier.

use std::sync::atomic::{AtomicBool, Ordering};

use super::pace::{consume, Gate, Pacer};
use super::record::{Histos, Recorder, Sink, Tally};
use super::seam::{Ctx, Workload};
use crate::clock::Clock;
use crate::probe::config::Plan;
use crate::transport::{Channel, TransportError};

/// The stop-and-wait workload: post, wait for the arrival, record, next.
#[derive(Clone, Copy, Debug, Default)]
pub struct StopWait;

enum Msg {
    Arrived {
        recv: u64,
        comp: Option<u64>,
        /// `--stamp-thread`: (post to HCA read, HCA read to arrival), ns.
        split: Option<(u64, u64)>,
        /// `--hw-timestamps`: (T2, T5), the HCA's completion timestamps.
        hw: (Option<u64>, Option<u64>),
    },
    Lost,
}

/// Sends one message and waits for its arrival (and send completion).
#[inline(always)]
fn one<C: Channel + ?Sized>(
    ch: &mut C,
    clock: &Clock,
    plan: &Plan,
    seq: u64,
) -> Result<Msg, TransportError> {
    let want_comp = ch.has_send_completions() && ch.is_signaled(seq);
    let t_subm = clock.now();
    ch.post(seq)?;
    let (mut t_recv, mut t_comp, mut stamp) = (None, None, 0);
    let (mut t2, mut t5) = (None, None);
    loop {
        if t_recv.is_none() {
            let got = if plan.event {
                ch.wait_recv(clock, plan.timeout_ns)?
            } else {
                ch.poll_recv()?
            };
            if let Some(s) = got {
                let t = clock.now();
                if s == seq {
                    t_recv = Some(t);
                    if plan.stamp {
                        stamp = ch.arrived_stamp();
                    }
                    if plan.hw_ts {
                        t5 = ch.hw_recv_ts();
                    }
                }
            }
        }
        if want_comp && t_comp.is_none() {
            if let Some(s) = ch.poll_send_done()? {
                let t = clock.now();
                if s == seq {
                    t_comp = Some(t);
                    if plan.hw_ts {
                        t2 = ch.hw_send_ts();
                    }
                }
            }
        }
        if t_recv.is_some() && (!want_comp || t_comp.is_some()) {
            break;
        }
        if clock.now().wrapping_sub(t_subm) > plan.timeout_ticks {
            break;
        }
    }
    Ok(match t_recv {
        Some(r) => Msg::Arrived {
            recv: clock.ticks_to_ns(r.wrapping_sub(t_subm)),
            comp: t_comp.map(|c| clock.ticks_to_ns(c.wrapping_sub(t_subm))),
            // A stamp from before the post (the stamping thread was not
            // running then) or after the arrival cannot split it.
            split: (plan.stamp && stamp >= t_subm && stamp <= r).then(|| {
                (
                    clock.ticks_to_ns(stamp - t_subm),
                    clock.ticks_to_ns(r - stamp),
                )
            }),
            hw: (t2, t5),
        },
        None => Msg::Lost,
    })
}

impl Workload for StopWait {
    fn run<C: Channel + ?Sized>(
        &mut self,
        ch: &mut C,
        cx: &Ctx<'_>,
        rec: &mut Recorder<'_>,
    ) -> Result<Tally, TransportError> {
        let Ctx {
            clock, plan, stop, ..
        } = *cx;
        let mut seq = cx.first_seq;
        let mut interrupted = false;
        let mut in_a_row = 0u32;
        let start = clock.now();
        rec.begin(start);
        let mut pace = Pacer::new(plan, start);
        loop {
            if stop.load(Ordering::Relaxed) {
                interrupted = true;
                break;
            }
            if rec.sent() >= plan.count {
                break;
            }
            match pace.before_post(clock, stop) {
                Gate::Go { .. } => {}
                Gate::Stopped => continue, // seen at the top of the loop
                Gate::End { missed } => {
                    rec.missed(missed);
                    break;
                }
            }
            let msg = one(ch, clock, plan, seq)?;
            rec.posted();
            match msg {
                Msg::Arrived {
                    recv,
                    comp,
                    split,
                    hw,
                } => {
                    in_a_row = 0;
                    rec.arrived(recv, comp);
                    if plan.hw_ts {
                        rec.hw(seq, recv, hw.0, hw.1);
                    }
                    if let Some((before, after)) = split {
                        rec.split(before, after);
                    }
                    consume(clock, plan, stop);
                }
                Msg::Lost => {
                    rec.lost();
                    in_a_row += 1;
                    if in_a_row >= plan.max_consecutive_lost {
                        rec.keep_partial();
                        return Err(TransportError::PeerLost(format!(
                            "{in_a_row} messages in a row got no answer within {} ms each (last seq {seq})",
                            plan.timeout_ns / 1_000_000
                        )));
                    }
                }
            }
            seq += 1;
            let now = clock.now();
            rec.missed(pace.after_message(clock, now, rec.sent(), stop));
            rec.tick(now);
        }
        Ok(rec.finish(clock.now(), seq, interrupted))
    }
}

/// Runs `plan` stop-and-wait on `ch` from `first_seq`.
#[allow(clippy::too_many_arguments)]
pub fn measure<C: Channel + ?Sized>(
    ch: &mut C,
    clock: &Clock,
    plan: &Plan,
    first_seq: u64,
    stop: &AtomicBool,
    cur: &mut Histos,
    total: &mut Histos,
    sink: Option<&mut dyn Sink>,
) -> Result<Tally, TransportError> {
    let cx = Ctx {
        clock,
        plan,
        stop,
        first_seq,
    };
    let mut rec = Recorder::new(clock, plan.interval_ticks, cur, total, sink);
    StopWait.run(ch, &cx, &mut rec)
}
