//! `probe::open`.

use ibprobe::clock::Clock;
use ibprobe::probe::config::Receiver;
use ibprobe::probe::open::*;
use ibprobe::spec::{ChannelSpec, Transport};

#[test]
fn loopback_opens_the_references_and_refuses_bad_specs() {
    for t in [Transport::Shm, Transport::Udp] {
        let mut ch = loopback(&ChannelSpec::new(t, 64)).unwrap();
        ch.post(0).unwrap();
        let mut got = None;
        for _ in 0..1_000_000 {
            got = ch.poll_recv().unwrap();
            if got.is_some() {
                break;
            }
        }
        assert_eq!(got, Some(0), "{t}");
    }
    let e = loopback(&ChannelSpec::new(Transport::Udp, 4))
        .err()
        .unwrap();
    assert_eq!((e.kind, e.reason()), (OpenErrorKind::Refused, "config"));
    assert!(e.message.contains("udp message size 4 B"), "{e}");
}

#[test]
fn echo_pair_is_for_the_references_only() {
    let e = echo_pair(
        &ChannelSpec::new(Transport::Rc, 32),
        Receiver::default(),
        Clock::monotonic(),
        None,
    )
    .err()
    .unwrap();
    assert!(
        e.is_input() && e.message.contains("shm and udp only"),
        "{e}"
    );
    let (mut c, echo) = echo_pair(
        &ChannelSpec::new(Transport::Udp, 32),
        Receiver::default(),
        Clock::monotonic(),
        None,
    )
    .unwrap();
    c.post(7).unwrap();
    let got = (0..10_000_000).find_map(|_| c.poll_recv().unwrap());
    assert_eq!(got, Some(7));
    assert_eq!(echo.finish().unwrap(), 1);
}
