//! `verbs`.

use ibprobe::spec::Transport;
use ibprobe::spec::{ChannelSpec, Op, Poll, QpType, SignalMode};
use ibprobe::verbs::VerbsErrorKind;
use ibprobe::verbs::*;

#[test]
fn defaults_resolve() {
    let c = VerbsConfig::new(&ChannelSpec::new(Transport::Rc, 32)).unwrap();
    assert_eq!(
        (c.qp_type, c.knobs.op, c.poll),
        (QpType::Rc, Op::Send, Poll::Busy)
    );
    assert_eq!((c.signal_period(), c.rq_prepost), (1, 128));
    // Unset, a stream signals every SQ depth / 2-th send.
    assert_eq!(c.stream_signal_period(), 64);
    let mut s = ChannelSpec::new(Transport::Uc, 8);
    s.verbs.signal = Some(SignalMode::Auto);
    s.verbs.sq_depth = 64;
    assert_eq!(VerbsConfig::new(&s).unwrap().signal_period(), 32);
    // Given, it holds for streams too.
    s.verbs.signal = Some(SignalMode::Every);
    assert_eq!(VerbsConfig::new(&s).unwrap().stream_signal_period(), 1);
}

#[test]
fn refusals_are_config_errors() {
    let mut s = ChannelSpec::new(Transport::Ud, 32);
    s.verbs.op = Op::Write;
    let e = VerbsConfig::new(&s).unwrap_err();
    assert_eq!((e.kind, e.exit_code()), (VerbsErrorKind::Config, 2));
    assert!(e.message.contains("UD has no RDMA write"), "{e}");
    let e = VerbsConfig::new(&ChannelSpec::new(Transport::Udp, 32)).unwrap_err();
    assert!(e.message.contains("not a verbs transport"), "{e}");
}
