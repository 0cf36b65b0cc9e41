//! `transport::shm`.

use ibprobe::sys::mem::FsSpace;
use ibprobe::transport::shm::*;
use ibprobe::transport::stream::SlotEnd;
use ibprobe::transport::{Channel, TransportError};

#[test]
fn loopback_delivers_in_order_and_wraps() {
    let mut ch = ShmChannel::loopback(100).unwrap();
    assert_eq!(ch.poll_recv().unwrap(), None);
    for seq in 0..(3 * SLOTS as u64) {
        ch.post(seq).unwrap();
        assert_eq!(ch.poll_recv().unwrap(), Some(seq));
        assert_eq!(ch.poll_recv().unwrap(), None);
    }
}

#[test]
fn full_ring_is_an_error_not_an_overwrite() {
    let mut ch = ShmChannel::loopback(8).unwrap();
    for seq in 0..SLOTS as u64 {
        ch.post(seq).unwrap();
    }
    assert!(matches!(ch.post(99), Err(TransportError::PeerLost(_))));
    assert_eq!(ch.poll_recv().unwrap(), Some(0));
}

#[test]
fn pair_carries_both_ways_and_reports_a_closed_peer() {
    let (mut c, mut s) = ShmChannel::pair(32).unwrap();
    c.post(5).unwrap();
    assert_eq!(
        c.poll_recv().unwrap(),
        None,
        "client must not see its own message"
    );
    assert_eq!(s.poll_recv().unwrap(), Some(5));
    s.post(5).unwrap();
    assert_eq!(c.poll_recv().unwrap(), Some(5));
    drop(c);
    assert!(matches!(s.poll_recv(), Err(TransportError::PeerLost(_))));
}

/// A slot of `len` bytes as the stream writes one: its length first.
fn slot_of(len: usize, fill: u8) -> Vec<u8> {
    let mut b = vec![fill; len];
    b[..4].copy_from_slice(&(len as u32).to_le_bytes());
    b
}

#[test]
fn stream_slots_carry_bytes_both_ways_and_fill_up() {
    let (mut a, mut b) = ShmSlots::pair(4, 100).unwrap();
    let mut buf = [0u8; 100];
    assert_eq!(b.recv(&mut buf).unwrap(), None);
    let mut msg: Vec<u8> = (0..37u8).collect();
    msg[..4].copy_from_slice(&37u32.to_le_bytes());
    for _ in 0..4 {
        assert!(a.send(&msg).unwrap());
    }
    assert!(!a.send(&msg).unwrap(), "a full ring has no room");
    assert_eq!(b.recv(&mut buf).unwrap(), Some(37));
    assert_eq!(&buf[..37], &msg[..]);
    assert!(
        a.send(&slot_of(100, 9)).unwrap(),
        "a consumed slot is free again"
    );
    assert_eq!(a.recv(&mut buf).unwrap(), None, "own slots are not echoed");
    for len in [8, 9, 15, 16, 17, 64, 65] {
        b.send(&slot_of(len, len as u8)).unwrap();
        assert_eq!(a.recv(&mut buf).unwrap(), Some(len));
        assert_eq!(&buf[..len], &slot_of(len, len as u8)[..], "{len} B");
    }
    drop(a);
    for _ in 0..4 {
        b.recv(&mut buf).unwrap();
    }
    assert!(matches!(b.recv(&mut buf), Err(TransportError::PeerLost(_))));
}

#[test]
fn a_stream_slot_must_begin_with_its_length() {
    let (mut a, mut b) = ShmSlots::pair(4, 64).unwrap();
    for bad in [vec![7u8; 3], vec![0u8; 16], slot_of(65, 1)] {
        let e = a.send(&bad).unwrap_err().to_string();
        assert!(e.contains("begin with its length"), "{e}");
    }
    let mut buf = [0u8; 64];
    assert_eq!(b.recv(&mut buf).unwrap(), None, "nothing was sent");
}

#[test]
fn a_ring_fits_only_the_free_space_of_a_limited_filesystem() {
    let space = |total, free| FsSpace { total, free };
    assert!(ring_fits(4096, space(1 << 20, 4096)));
    assert!(!ring_fits(4097, space(1 << 20, 4096)));
    assert!(!ring_fits(1, space(1 << 20, 0)), "a full filesystem");
    assert!(
        !ring_fits(u64::MAX, space(u64::MAX - 1, u64::MAX - 1)),
        "no overflow at the top"
    );
    assert!(ring_fits(8 << 30, space(0, 0)), "size=0: no limit");
}

#[test]
fn the_server_file_is_private_and_unlinked_at_the_first_message() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("r");
    let mut s = ShmChannel::create(&p, 64, Side::Server).unwrap();
    let mode = std::fs::metadata(&p).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    let mut c = ShmChannel::open(&p, 64, Side::Client).unwrap();
    assert_eq!(s.poll_recv().unwrap(), None);
    assert!(
        p.exists(),
        "no message yet: the client may not have mapped it"
    );
    c.post(7).unwrap();
    assert_eq!(s.poll_recv().unwrap(), Some(7));
    assert!(!p.exists(), "the client has it mapped: the name goes");
    s.post(7).unwrap();
    assert_eq!(c.poll_recv().unwrap(), Some(7), "the mapping lives on");
    drop(s);
    assert!(matches!(c.poll_recv(), Err(TransportError::PeerLost(_))));
}

#[test]
fn the_stream_server_file_is_unlinked_at_the_first_slot_or_on_drop() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("s");
    let mut s = ShmSlots::create(&p, 4, 64, Side::Server).unwrap();
    let mut c = ShmSlots::open(&p, 4, 64, Side::Client).unwrap();
    assert!(c.send(&slot_of(16, 1)).unwrap());
    let mut buf = [0u8; 64];
    assert_eq!(s.recv(&mut buf).unwrap(), Some(16));
    assert!(!p.exists());
    let q = dir.path().join("never-mapped");
    drop(ShmSlots::create(&q, 4, 64, Side::Server).unwrap());
    assert!(!q.exists(), "dropped before any message");
}

#[test]
fn the_default_path_skips_a_leftover_of_the_same_pid() {
    let first = default_path();
    let n: u64 = first
        .to_string_lossy()
        .rsplit('-')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let next = first.with_file_name(format!("ibprobe-{}-{}", std::process::id(), n + 1));
    std::fs::write(&next, b"left by a SIGKILLed process").unwrap();
    let chosen = default_path();
    let _ = std::fs::remove_file(&next);
    assert_ne!(chosen, next);
    assert!(!chosen.exists());
}
