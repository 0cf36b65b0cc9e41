//! `spec`.

use ibprobe::spec::*;

#[test]
fn byte_counts_parse_with_binary_units_and_say_what_is_wrong() {
    assert_eq!(parse_bytes("4096").unwrap(), 4096);
    assert_eq!(parse_bytes("64KiB").unwrap(), 64 << 10);
    assert_eq!(parse_bytes(" 256MiB ").unwrap(), 256 << 20);
    assert_eq!(parse_bytes("2G").unwrap(), 2 << 30);
    assert_eq!(parse_bytes("1 TiB").unwrap(), 1 << 40);
    for (s, says) in [
        ("lots", "unknown unit"),
        ("5MB", "unknown unit"),
        ("-1MiB", "unknown unit"),
        ("99999999999TiB", "does not fit"),
        ("", "not a byte count"),
    ] {
        let e = parse_bytes(s).unwrap_err().0;
        assert!(e.contains(says), "{s}: {e}");
    }
    assert_eq!(show_bytes(256 << 20), "256.0 MiB");
    assert_eq!(show_bytes(1000), "1000 B");
}

#[test]
fn session_memory_counts_every_transport_and_saturates() {
    let mut huge = StreamSpec {
        slots: u32::MAX,
        window: u32::MAX,
        slot_size: usize::MAX,
        ..StreamSpec::default()
    };
    for t in Transport::ALL {
        let ch = ChannelSpec::new(*t, usize::MAX);
        assert_eq!(session_memory(&ch, Some(&huge)), u64::MAX, "{t}");
        assert_eq!(session_memory(&ch, None), u64::MAX, "{t}");
    }
    huge.slot_size = 1 << 20;
    huge.slots = 4096;
    huge.window = 4096;
    // The shm ring: 4096 x 1 MiB both ways, and the queue.
    let shm = session_memory(&ChannelSpec::new(Transport::Shm, 32), Some(&huge));
    assert!(shm >= 12 << 30, "{shm}");
    let d = StreamSpec::default();
    for t in Transport::ALL {
        let m = session_memory(&ChannelSpec::new(*t, 32), Some(&d));
        assert!(m < peer::DEFAULT_MAX_SESSION_MEMORY, "{t}: {m}");
    }
}

#[test]
fn model_params_parse_units_presets_and_refusals() {
    let p: ModelParams = "L=5us,os=1us,or=1.5us,g=2us,G=1ns".parse().unwrap();
    assert_eq!(p.ns(), [5000.0, 1000.0, 1500.0, 2000.0, 1.0]);
    let s: ModelParams = "spin".parse().unwrap();
    assert_eq!(s, SPIN_PRESET);
    assert_eq!(s.ns()[4], 0.02);
    let s: ModelParams = "spin,G=2.5ps".parse().unwrap();
    assert_eq!(s.big_g_fs, 2500);
    for bad in [
        "L=5us",
        "L=5us,os=1us,or=1us,g=1us,G=1ns,x=1ns",
        "spin,os=-1ns",
        "spin,os=5",
        "spin,os=abcns",
    ] {
        let e = bad.parse::<ModelParams>().unwrap_err();
        assert!(e.0.starts_with("--model"), "{bad}: {e}");
    }
}

fn refusal(spec: ChannelSpec) -> String {
    spec.check().unwrap_err().0
}

fn verbs(t: Transport, size: usize, f: impl FnOnce(&mut VerbsKnobs)) -> ChannelSpec {
    let mut s = ChannelSpec::new(t, size);
    f(&mut s.verbs);
    s
}

#[test]
fn words_round_trip_through_their_spellings() {
    for t in Transport::ALL {
        assert_eq!(t.name().parse::<Transport>().unwrap(), *t);
        let json = serde_json::to_string(t).unwrap();
        assert_eq!(serde_json::from_str::<Transport>(&json).unwrap(), *t);
    }
    for o in Op::ALL {
        assert_eq!(o.to_string().parse::<Op>().unwrap(), *o);
    }
    assert_eq!("SEND_IMM".parse::<Op>().unwrap(), Op::SendImm);
    assert_eq!("Event".parse::<Poll>().unwrap(), Poll::Event);
    assert!("read"
        .parse::<Op>()
        .unwrap_err()
        .0
        .contains("unknown op \"read\": send | send-imm | write-imm | write"));
    assert!("x"
        .parse::<Poll>()
        .unwrap_err()
        .0
        .contains("unknown polling mode"));
    assert_eq!("64".parse::<InlineMode>().unwrap(), InlineMode::Bytes(64));
    assert!("lots"
        .parse::<InlineMode>()
        .unwrap_err()
        .0
        .contains("--inline"));
    assert_eq!("auto".parse::<SignalMode>().unwrap(), SignalMode::Auto);
}

#[test]
fn defaults_are_valid() {
    for t in Transport::ALL {
        let mut s = ChannelSpec::new(*t, 32);
        if *t == Transport::Model {
            assert!(s.check().unwrap_err().0.contains("needs its parameters"));
            s.model = Some(SPIN_PRESET);
        }
        s.check().unwrap();
    }
    let v = VerbsKnobs::default();
    assert_eq!(v.rq_prepost(), 128);
    assert_eq!(
        VerbsKnobs {
            rq_prepost: Some(4),
            ..v
        }
        .rq_prepost(),
        4
    );
}

#[test]
fn refusals_name_the_limit() {
    use Transport::*;
    let op = |o| move |v: &mut VerbsKnobs| v.op = o;
    assert!(refusal(verbs(Ud, 32, op(Op::Write))).contains("on UD: UD has no RDMA write"));
    assert!(refusal(verbs(Ud, 32, op(Op::WriteImm))).contains("UD"));
    assert!(refusal(verbs(Udp, 32, op(Op::Write))).contains("only sends"));
    assert!(
        refusal(verbs(Rc, 32, |v| v.signal = Some(SignalMode::Period(200))))
            .contains("signal period 200 > SQ depth 128")
    );
    let mut s = verbs(Rc, 32, op(Op::Write));
    s.poll = Poll::Event;
    assert!(refusal(s).contains("poll event"));
    let mut s = ChannelSpec::new(Shm, 32);
    s.poll = Poll::Event;
    assert!(refusal(s).contains("nothing to sleep on"));
    assert!(refusal(verbs(Rc, 32, |v| v.rq_prepost = Some(200)))
        .contains("rq prepost 200 > RQ depth 128"));
    assert!(refusal(verbs(Rc, 32, |v| v.mtu = Some(1000))).contains("mtu 1000"));
    assert!(refusal(verbs(Rc, 0, op(Op::Write))).contains("size 0"));
    assert!(refusal(ChannelSpec::new(Ud, 8192)).contains("UD message"));
    assert!(refusal(ChannelSpec::new(Udp, 4))
        .contains("udp message size 4 B is out of range 8..=65507 B"));
    assert!(refusal(ChannelSpec::new(Shm, SHM_MAX_SIZE + 1)).contains("shm"));
    assert!(refusal(ChannelSpec::new(Udp, 0)).contains("udp"));
}

#[test]
fn an_shm_ring_holds_twice_what_can_be_in_flight_within_the_pool() {
    let s = |slots, window, pipeline| StreamSpec {
        slots,
        window,
        pipeline,
        ..StreamSpec::default()
    };
    // Stop-and-wait: one slot in flight, the floor of 8.
    assert_eq!(s(64, 64, Some(1)).shm_ring_slots(), SHM_RING_MIN);
    // The pipeline or the window, whichever is smaller, bounds it.
    assert_eq!(s(64, 64, Some(16)).shm_ring_slots(), 32);
    assert_eq!(s(64, 12, Some(16)).shm_ring_slots(), 24);
    // A full window keeps the whole pool (no shorter than --slots allows).
    assert_eq!(s(64, 64, None).shm_ring_slots(), 64);
    assert_eq!(s(4, 4, Some(1)).shm_ring_slots(), 4);
    assert_eq!(s(u32::MAX, u32::MAX, None).shm_ring_slots(), u32::MAX);
}

#[test]
fn stream_refusals_name_the_knob_and_what_fits() {
    let ch = |t, size| ChannelSpec::new(t, size);
    let st = StreamSpec::default;
    let refused = |s: StreamSpec, c: ChannelSpec| s.check(&c).unwrap_err().0;
    st().check(&ch(Transport::Shm, 32)).unwrap();
    assert_eq!(st().per_slot(32), (4096 - 16) / 48);
    assert!(
        refused(StreamSpec { window: 0, ..st() }, ch(Transport::Shm, 32)).starts_with("--window 0")
    );
    assert!(
        refused(StreamSpec { batch: 0, ..st() }, ch(Transport::Shm, 32)).starts_with("--batch 0")
    );
    let e = refused(
        StreamSpec {
            batch: 16,
            slot_size: 256,
            ..st()
        },
        ch(Transport::Udp, 32),
    );
    assert!(e.contains("at most --batch 5 fits"), "{e}");
    let e = refused(
        StreamSpec {
            pipeline: Some(8),
            window: 4,
            ..st()
        },
        ch(Transport::Rc, 32),
    );
    assert!(e.starts_with("--pipeline 8 > --window 4"), "{e}");
    let e = refused(
        StreamSpec {
            credit_return: CreditReturn::Write,
            ..st()
        },
        ch(Transport::Uc, 32),
    );
    assert!(e.contains("needs rc"), "{e}");
    StreamSpec {
        credit_return: CreditReturn::Write,
        ..st()
    }
    .check(&ch(Transport::Rc, 32))
    .unwrap();
    let e = refused(
        StreamSpec {
            slot_size: 8192,
            ..st()
        },
        ch(Transport::Ud, 32),
    );
    assert!(e.contains("UD sends one packet"), "{e}");
    assert_eq!(
        "MESSAGE".parse::<CreditReturn>().unwrap(),
        CreditReturn::Message
    );
}

#[test]
fn a_slot_is_bounded_by_the_message_size_table() {
    use Transport::*;
    for t in [Rc, Uc, Ud, Udp, Shm, Model] {
        let largest = *t.size_range(Op::Send).0.end();
        let with = |slot_size| {
            StreamSpec {
                slot_size,
                ..StreamSpec::default()
            }
            .check(&ChannelSpec::new(t, 8))
        };
        with(largest).unwrap();
        with(SLOT_HEADER + RECORD_HEADER + 1).unwrap();
        assert!(with(SLOT_HEADER + RECORD_HEADER).is_err(), "{t}");
        if largest < usize::MAX {
            let e = with(largest + 1).unwrap_err().0;
            assert!(e.contains(&format!("..={largest} B")), "{t}: {e}");
        }
    }
}

/// `--stamp-thread`'s rules, one definition for loopback and the stream:
/// verbs only, inline off, one clock, 24 bytes; a stream's message in one
/// slot.
#[test]
fn stamp_thread_rules_name_the_flag_and_the_way_out() {
    let ok = |t| check_stamp(t, InlineMode::Off, 64, None);
    for t in [Transport::Rc, Transport::Uc, Transport::Ud] {
        assert!(ok(t).is_ok(), "{t}");
    }
    for t in [Transport::Shm, Transport::Udp, Transport::Model] {
        let e = ok(t).unwrap_err().0;
        assert!(
            e.contains(&format!("--transport {t}")) && e.contains("rc|uc|ud"),
            "{e}"
        );
    }
    for inline in [InlineMode::Auto, InlineMode::Bytes(64)] {
        let e = check_stamp(Transport::Rc, inline, 64, None).unwrap_err().0;
        assert!(
            e.contains(&format!("--inline {inline}")) && e.contains("--inline off"),
            "{e}"
        );
    }
    let e = check_stamp(Transport::Rc, InlineMode::Off, 64, Some("HOST"))
        .unwrap_err()
        .0;
    assert!(e.contains("drop HOST"), "{e}");
    let e = check_stamp(Transport::Rc, InlineMode::Off, 23, None)
        .unwrap_err()
        .0;
    assert!(e.contains("--size 23") && e.contains("24 or more"), "{e}");
    assert!(check_stamp(Transport::Ud, InlineMode::Off, 24, None).is_ok());

    // The stream: the same rules (its HOST), and a message in one slot.
    let st = StreamSpec::default();
    assert!(st
        .check_stamp(Transport::Rc, InlineMode::Off, 64, false)
        .is_ok());
    let e = st
        .check_stamp(Transport::Shm, InlineMode::Off, 64, false)
        .unwrap_err()
        .0;
    assert!(e.contains("--transport shm"), "{e}");
    let e = st
        .check_stamp(Transport::Rc, InlineMode::Off, 8, false)
        .unwrap_err()
        .0;
    assert!(e.contains("--size 8"), "{e}");
    let e = st
        .check_stamp(Transport::Rc, InlineMode::Off, 64, true)
        .unwrap_err()
        .0;
    assert!(e.contains("drop HOST"), "{e}");
    let small = StreamSpec {
        slot_size: 128,
        ..StreamSpec::default()
    };
    let e = small
        .check_stamp(Transport::Rc, InlineMode::Off, 200, false)
        .unwrap_err()
        .0;
    assert!(
        e.contains("--slot-size 128") && e.contains("--slot-size 232"),
        "{e}"
    );
    assert!(small
        .check_stamp(Transport::Rc, InlineMode::Off, 96, false)
        .is_ok());
}

/// The default credit return: an RDMA write on rc without a pipeline,
/// a piggybacked message elsewhere; its default batch (half or a quarter
/// of the window) is at least 1 and never above the window, so a default
/// stream of any window passes the check (no sender waits for a return
/// that needs more slots than it may post), and an explicit batch above
/// the window is refused naming the bound.
#[test]
fn default_credit_returns_fit_every_window() {
    assert_eq!(
        CreditReturn::default_for(Transport::Rc, None),
        CreditReturn::Write
    );
    assert_eq!(
        CreditReturn::default_for(Transport::Rc, Some(2)),
        CreditReturn::Piggyback
    );
    for t in [
        Transport::Shm,
        Transport::Udp,
        Transport::Uc,
        Transport::Ud,
        Transport::Model,
    ] {
        assert_eq!(
            CreditReturn::default_for(t, None),
            CreditReturn::Piggyback,
            "{t}"
        );
    }
    for (ret, window, batch) in [
        (CreditReturn::Write, 128, 64),
        (CreditReturn::Write, 3, 1),
        (CreditReturn::Write, 1, 1),
        (CreditReturn::Piggyback, 128, 32),
        (CreditReturn::Message, 2, 1),
    ] {
        assert_eq!(
            StreamSpec::default_credit_batch(ret, window),
            batch,
            "{ret} {window}"
        );
    }
    for window in 1..=130 {
        let s = StreamSpec {
            slots: window.max(64),
            window,
            credit_return: CreditReturn::Write,
            credit_batch: StreamSpec::default_credit_batch(CreditReturn::Write, window),
            slot_size: 64,
            ..StreamSpec::default()
        };
        s.check(&ChannelSpec::new(Transport::Rc, 32)).unwrap();
    }
    let e = StreamSpec {
        window: 4,
        credit_batch: 8,
        slot_size: 64,
        ..StreamSpec::default()
    }
    .check(&ChannelSpec::new(Transport::Rc, 32))
    .unwrap_err()
    .0;
    assert!(
        e.starts_with("--credit-batch 8: use 1..=4 (the window)"),
        "{e}"
    );
}
