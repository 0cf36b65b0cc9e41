//! The toolkit's one grammar, as ibprobe applies it: every duration flag
//! goes through the one parser (`ibhost::duration`), which refuses a bare
//! number with the question of its unit instead of guessing seconds.

mod common;
use common::ibprobe;

/// `--pause 10` used to busy-wait 10 s per message; every duration flag of
/// every command now asks which unit was meant, before anything runs.
#[test]
fn a_bare_number_is_not_a_duration() {
    for (args, n) in [
        (&["loopback", "-t", "shm", "--pause", "10"][..], "10"),
        (&["loopback", "-t", "shm", "--duration", "2"], "2"),
        (&["loopback", "-t", "shm", "--timeout", "5"], "5"),
        (&["loopback", "-t", "shm", "--log-interval", "1.5"], "1.5"),
        (
            &["client", "-t", "udp", "--connect-timeout", "3", "127.0.0.1"],
            "3",
        ),
        (&["stream", "-t", "shm", "--flush", "10"], "10"),
        (&["host", "--period", "1"], "1"),
        (&["server", "-t", "udp", "--handshake-timeout", "2"], "2"),
    ] {
        let (code, out, err) = ibprobe(args);
        // clap's usage error: exit 2, the hint, nothing run.
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(out, "", "{args:?}");
        assert!(
            err.contains(&format!("{n} what? write {n}s, {n}ms or {n}us")),
            "{args:?}: {err}"
        );
    }
    // Zero needs no unit, and a unit is taken as always.
    for pause in ["0", "1us"] {
        let (code, _, err) = ibprobe(&[
            "loopback",
            "-t",
            "shm",
            "-n",
            "10",
            "--pause",
            pause,
            "--no-mlock",
        ]);
        assert_eq!(code, 0, "--pause {pause}: {err}");
    }
}

/// `ibprobe --help` ends with the toolkit's one exit code table, the same
/// lines ibtune and ibexporter print.
#[test]
fn help_ends_with_the_one_exit_code_table() {
    let (code, out, _) = ibprobe(&["--help"]);
    assert_eq!(code, 0);
    assert!(
        out.trim_end().ends_with(&ibhost::exit::help()),
        "--help does not end with the exit code table:\n{out}"
    );
}

/// `host --interval` is now `--period` (ibexporter's `--interval` is the
/// round period): the old spelling still runs and says the new name once.
#[test]
fn host_interval_is_now_period() {
    let (code, _, err) = ibprobe(&[
        "host",
        "--cpus",
        "0",
        "-n",
        "5",
        "--interval",
        "1ms",
        "--format",
        "json",
    ]);
    assert!(
        err.contains("`ibprobe host --interval` is now `ibprobe host --period`"),
        "{err}"
    );
    let (code2, _, err2) = ibprobe(&[
        "host", "--cpus", "0", "-n", "5", "--period", "1ms", "--format", "json",
    ]);
    assert_eq!(code, code2, "{err} / {err2}");
    assert!(!err2.contains("is now"), "{err2}");
}

/// The stream's header agrees with itself: with a window of 8 the shm
/// ring holds 16 slots, and the knobs line says so beside `--slots 64`;
/// the row of the wait before a post names both of its causes.
#[test]
fn the_stream_header_agrees_with_the_transport_line() {
    let (code, out, err) = ibprobe(&["stream", "-t", "shm", "-n", "200", "--window", "8"]);
    assert_eq!(code, 0, "{err}");
    let mut lines = out.lines();
    let transport = lines.next().unwrap();
    let knobs = lines.next().unwrap();
    assert!(
        transport.contains("16 slots of 64 B per direction"),
        "{out}"
    );
    assert!(
        knobs.contains("64 slots of 64 B (the shm ring holds 16"),
        "{out}"
    );
    assert!(out.contains("hand-over -> post (batch, credits)"), "{out}");
    assert!(!out.contains("time in batch"), "{out}");
}
