//! `transport::model`.

use ibprobe::clock::Clock;
use ibprobe::spec::ModelParams;
use ibprobe::transport::channel::Channel;
use ibprobe::transport::model::*;
use ibprobe::transport::stream::SlotEnd;

fn p() -> ModelParams {
    "L=5us,os=1us,or=1.5us,g=2us,G=1ns".parse().unwrap()
}

#[test]
fn the_link_spaces_messages_by_the_gap_and_adds_latency() {
    let mut l = ModelLink::new(&p());
    let (ret, a0) = l.send(0.0, 100);
    assert_eq!((ret, a0), (1000.0, 1000.0 + 100.0 + 5000.0));
    // Back to back: the next enters when the link is free (g + G*b).
    let (_, a1) = l.send(ret, 100);
    assert_eq!(a1 - a0, 2000.0 + 100.0);
    assert_eq!(l.recv(a0, 0.0), a0 + 1500.0);
}

#[test]
fn real_time_slots_deliver_no_earlier_than_the_model_says() {
    let clock = Clock::monotonic();
    let (mut a, mut b) = ModelSlots::pair(p(), 8, 64, clock).unwrap();
    let mut msg = [0u8; 32];
    msg[..4].copy_from_slice(&32u32.to_le_bytes());
    msg[31] = 7;
    let t0 = clock.now();
    assert!(a.send(&msg).unwrap());
    let mut into = [0u8; 64];
    let n = loop {
        if let Some(n) = b.recv(&mut into).unwrap() {
            break n;
        }
    };
    let took = clock.ticks_to_ns(clock.now() - t0);
    assert_eq!((n, into[31]), (32, 7));
    // o_s + G*b + L + o_r = 1000 + 32 + 5000 + 1500 ns.
    assert!(took >= 7532, "{took} ns");
}

#[test]
fn the_loopback_channel_carries_sequence_numbers_in_order() {
    let mut c = ModelChannel::loopback(p(), 8, Clock::monotonic());
    c.post(1).unwrap();
    c.post(2).unwrap();
    let mut got = Vec::new();
    while got.len() < 2 {
        if let Some(s) = c.poll_recv().unwrap() {
            got.push(s);
        }
    }
    assert_eq!(got, [1, 2]);
}
