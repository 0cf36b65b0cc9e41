//! Shared-memory reference transport: single-producer/single-consumer rings
//! of cache-line-aligned slots in a shared mapping.
//!
//! Why it exists: the thesis used a shared-memory node as the zero-latency
//! reference (about 0.3 us); it shows what the probe itself costs (clock
//! reads, histogram, loop) with no network at all, on any machine.
//!
//! Layout of the mapping, in 64-byte lines:
//! - line 0: header: magic, slots per ring, words per slot, and one
//!   "closed" word per side (set on drop, so the peer stops waiting);
//! - ring 0 (client -> server, or the loopback ring), then ring 1
//!   (server -> client): `SLOTS` slots of `slot_words` 8-byte words each.
//!
//! A slot's first word is its stamp: 0 when empty, `seq + 1` when full. The
//! producer writes the payload words, then the stamp (Release); the
//! consumer reads the stamp (Acquire), the payload, then stores 0
//! (Release). A per-slot stamp means producer and consumer never share a
//! head/tail line. Every access is an atomic, so the same code runs between
//! two threads (anonymous mapping) and two processes (a /dev/shm file).
//!
//! The file between two processes is the server's ([`RingFile`]): checked
//! against the free space of its filesystem, created 0600 and fully
//! allocated (a full tmpfs is an error, never a SIGBUS), and unlinked at
//! the client's first message or when the server's end drops (a refusal,
//! an error, SIGINT/SIGTERM, a panic): only a SIGKILL in between leaves it.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::Arc;

use serde_json::{json, Value};

use super::channel::{check_size, io, Channel, TransportError, TransportInfo};
use super::open::{Ask, Carry, End, EndError, Opened, Opens, Pending, StreamEnds};
use super::stream::SlotEnd;
use crate::spec::{ChannelSpec, StreamSpec};
use crate::sys::host::{round_to_page, SharedMap};
use crate::sys::mem::{self, FsSpace};

/// Slots per ring: twice what the probe can have in flight (one message,
/// and up to 3 lost ones before `max_consecutive_lost` ends the run), so a
/// full ring means the peer stopped. No longer than that: every message
/// takes the next slot, and a slot not touched for many messages has to
/// come back from the other core's cache (with 64 slots the round trip
/// was ~8% slower than with 8; the stream's rings are sized the same way,
/// `StreamSpec::shm_ring_slots`, so that stop-and-wait and the round trip
/// compare like with like).
pub const SLOTS: usize = 8;

const MAGIC: u64 = 0x4942_5052_4f42_4531; // "IBPROBE1"
const H_MAGIC: usize = 0;
const H_SLOTS: usize = 1;
const H_SLOT_WORDS: usize = 2;
const H_CLOSED: [usize; 2] = [3, 4];
const LINE_WORDS: usize = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// Sends on ring 0, receives on ring 1.
    Client,
    /// Sends on ring 1, receives on ring 0 (the echo side).
    Server,
}

/// One end of a ring pair (or both ends of one ring, in one-way loopback).
pub struct ShmChannel {
    map: Arc<SharedMap>,
    size: usize,
    slot_words: usize,
    tx_base: usize,
    rx_base: usize,
    head: u64,
    tail: u64,
    my_closed: Option<usize>,
    peer_closed: Option<usize>,
    file: RingFile,
    label: &'static str,
}

fn slot_words_for(size: usize) -> usize {
    // stamp word + payload words, rounded up to whole cache lines.
    (1 + size.div_ceil(8)).div_ceil(LINE_WORDS) * LINE_WORDS
}

fn map_bytes(slot_words: usize) -> usize {
    (LINE_WORDS + 2 * SLOTS * slot_words) * 8
}

/// The server's ring file, owned by the end that created it: unlinked at
/// the first [`RingFile::peer_mapped`] (the client's first message proves
/// it has the ring mapped, and a mapping outlives its name) or on drop.
struct RingFile(Option<PathBuf>);

impl RingFile {
    const NONE: RingFile = RingFile(None);

    /// Checks that `bytes` fit the free space where `path` would be,
    /// creates it (0600, allocated) and maps it: the ring and its owner.
    fn create(path: &Path, bytes: usize) -> Result<(SharedMap, RingFile), TransportError> {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let asked = round_to_page(bytes) as u64;
        let space = mem::fs_space(dir).map_err(|e| {
            TransportError::Unsupported(format!(
                "shm ring directory {}: cannot read its free space (statvfs: {e}); check it exists and is a mounted filesystem",
                dir.display()
            ))
        })?;
        if !ring_fits(asked, space) {
            return Err(TransportError::Unsupported(format!(
                "shm ring of {asked} B does not fit in {}: {} B free of {} B there; ask for a smaller ring (fewer or smaller slots, a smaller --size) or free space in {}",
                dir.display(),
                space.free,
                space.total,
                dir.display()
            )));
        }
        let map = SharedMap::file(path, bytes, true).map_err(|e| {
            TransportError::Unsupported(format!(
                "cannot create the shm ring {} of {asked} B: {e}; free space in {} or ask for a smaller ring",
                path.display(),
                dir.display()
            ))
        })?;
        Ok((map, RingFile(Some(path.to_path_buf()))))
    }

    /// Called on every message received: unlinks the file at the first.
    #[inline(always)]
    fn peer_mapped(&mut self) {
        if self.0.is_some() {
            self.unlink();
        }
    }

    #[cold]
    fn unlink(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

impl Drop for RingFile {
    fn drop(&mut self) {
        self.unlink();
    }
}

/// Whether a ring of `asked` bytes fits a filesystem with `space`: it
/// must not take more than is free (a filesystem of total size 0 sets
/// no limit: a tmpfs mounted with size=0).
pub fn ring_fits(asked: u64, space: FsSpace) -> bool {
    space.total == 0 || asked <= space.free
}

impl ShmChannel {
    /// One-way loopback in one process: `post` writes ring 0 and
    /// `poll_recv` reads it (one thread, one clock: the probe's floor).
    pub fn loopback(size: usize) -> Result<ShmChannel, TransportError> {
        let mut ch = ShmChannel::at(At::Anonymous, size, Side::Client)?;
        // Ring 0 both ways, and no peer to tell of a close.
        (ch.rx_base, ch.my_closed, ch.peer_closed, ch.label) = (ch.tx_base, None, None, "loopback");
        Ok(ch)
    }

    /// A connected pair in one process (client end, server end), for a
    /// round trip with an echo thread.
    pub fn pair(size: usize) -> Result<(ShmChannel, ShmChannel), TransportError> {
        let a = ShmChannel::at(At::Anonymous, size, Side::Client)?;
        let b = ShmChannel::on_side(a.map.clone(), size, Side::Server, RingFile::NONE);
        Ok((a, b))
    }

    /// Creates the shared file at `path` (server side of a two-process
    /// run), refused when it does not fit the free space there.
    pub fn create(path: &Path, size: usize, side: Side) -> Result<ShmChannel, TransportError> {
        ShmChannel::at(At::Create(path), size, side)
    }

    /// Opens the shared file a peer created at `path` (client side).
    pub fn open(path: &Path, size: usize, side: Side) -> Result<ShmChannel, TransportError> {
        ShmChannel::at(At::Open(path), size, side)
    }

    fn at(at: At, size: usize, side: Side) -> Result<ShmChannel, TransportError> {
        check_size(crate::spec::Transport::Shm, size)?;
        let sw = slot_words_for(size);
        let header = [MAGIC, SLOTS as u64, sw as u64];
        let what = || (format!("shm ring for size {size}"), " words");
        let (map, file) = map_rings(at, map_bytes(sw), header, what)?;
        Ok(ShmChannel::on_side(map, size, side, file))
    }

    fn on_side(map: Arc<SharedMap>, size: usize, side: Side, file: RingFile) -> ShmChannel {
        let sw = slot_words_for(size);
        let rings = [LINE_WORDS, LINE_WORDS + SLOTS * sw];
        let (tx, rx, label) = ends(side);
        ShmChannel {
            map,
            size,
            slot_words: sw,
            tx_base: rings[tx],
            rx_base: rings[rx],
            head: 0,
            tail: 0,
            my_closed: Some(H_CLOSED[tx]),
            peer_closed: Some(H_CLOSED[rx]),
            file,
            label,
        }
    }

    fn payload_words(&self) -> usize {
        self.size.div_ceil(8)
    }
}

/// Where a mapping of rings comes from: anonymous (this process's
/// threads), the server's ring file created here, or the one a peer made.
#[derive(Clone, Copy)]
enum At<'a> {
    Anonymous,
    Create(&'a Path),
    Open(&'a Path),
}

/// Maps `bytes` of rings as `at` says, with their header `want` (magic,
/// slot count, slot length): written into a new mapping (the magic last),
/// checked in an opened one, refused as not the ring `what` names (with
/// the unit of its slot length).
fn map_rings(
    at: At,
    bytes: usize,
    want: [u64; 3],
    what: impl FnOnce() -> (String, &'static str),
) -> Result<(Arc<SharedMap>, RingFile), TransportError> {
    let (map, file) = match at {
        At::Anonymous => (
            SharedMap::anonymous(bytes).map_err(io("mmap (anonymous shared)"))?,
            RingFile::NONE,
        ),
        At::Create(path) => RingFile::create(path, bytes)?,
        At::Open(path) => {
            let map = SharedMap::file(path, bytes, false).map_err(io("open shm file"))?;
            let w = map.words();
            let (magic, slots, len) = (
                w[H_MAGIC].load(Acquire),
                w[H_SLOTS].load(Relaxed),
                w[H_SLOT_WORDS].load(Relaxed),
            );
            if [magic, slots, len] != want {
                let (what, unit) = what();
                return Err(TransportError::Unsupported(format!(
                    "{}: not an ibprobe {what} (magic {magic:#x}, {slots} slots of {len}{unit}); \
                     are client and server the same ibprobe version?",
                    path.display()
                )));
            }
            return Ok((Arc::new(map), RingFile::NONE));
        }
    };
    let w = map.words();
    w[H_SLOTS].store(want[1], Relaxed);
    w[H_SLOT_WORDS].store(want[2], Relaxed);
    w[H_MAGIC].store(want[0], Release);
    Ok((Arc::new(map), file))
}

/// The ring a side writes and the ring it reads (ring 0 is the client's),
/// and its label.
fn ends(side: Side) -> (usize, usize, &'static str) {
    match side {
        Side::Client => (0, 1, "client"),
        Side::Server => (1, 0, "server"),
    }
}

impl Channel for ShmChannel {
    #[inline]
    fn post(&mut self, seq: u64) -> Result<(), TransportError> {
        let w = self.map.words();
        let slot = self.tx_base + (self.head as usize % SLOTS) * self.slot_words;
        if w[slot].load(Acquire) != 0 {
            return Err(TransportError::PeerLost(format!(
                "shm ring full ({SLOTS} messages unread): the {} peer stopped reading",
                if self.label == "server" {
                    "client"
                } else {
                    "server"
                }
            )));
        }
        for p in &w[slot + 1..slot + 1 + self.payload_words()] {
            p.store(seq, Relaxed);
        }
        w[slot].store(seq + 1, Release);
        self.head += 1;
        Ok(())
    }

    #[inline]
    fn poll_recv(&mut self) -> Result<Option<u64>, TransportError> {
        let w = self.map.words();
        let slot = self.rx_base + (self.tail as usize % SLOTS) * self.slot_words;
        let stamp = w[slot].load(Acquire);
        if stamp == 0 {
            if let Some(pc) = self.peer_closed {
                if w[pc].load(Relaxed) != 0 {
                    return Err(TransportError::PeerLost(
                        "the peer closed the shm ring".into(),
                    ));
                }
            }
            return Ok(None);
        }
        let seq = stamp - 1;
        // Read the payload as a receiver would (and check it).
        let mut acc = 0u64;
        for p in &w[slot + 1..slot + 1 + self.payload_words()] {
            acc |= p.load(Relaxed) ^ seq;
        }
        w[slot].store(0, Release);
        self.tail += 1;
        self.file.peer_mapped();
        if acc != 0 {
            return Err(TransportError::Completion(format!(
                "shm payload of message {seq} is corrupt"
            )));
        }
        Ok(Some(seq))
    }

    fn info(&self) -> TransportInfo {
        TransportInfo {
            name: "shm".into(),
            detail: format!(
                "shared-memory SPSC ring ({}), {SLOTS} slots of {} B, message {} B",
                self.label,
                self.slot_words * 8,
                self.size
            ),
            facts: vec![
                ("slots".into(), SLOTS.to_string()),
                ("slot_bytes".into(), (self.slot_words * 8).to_string()),
                ("end".into(), self.label.into()),
            ],
        }
    }
}

impl Drop for ShmChannel {
    fn drop(&mut self) {
        if let Some(c) = self.my_closed {
            self.map.words()[c].store(1, Release);
        }
    }
}

/// "IBPSTRM1".
const STREAM_MAGIC: u64 = 0x4942_5053_5452_4d31;

/// One end of a streaming slot pool over shared memory: two rings of
/// `slots` slots, one per direction. A slot's first word is its flag: every
/// slot begins with its length as a u32 (the [`SlotEnd`] contract), so 0
/// means empty. The producer copies words 1.., then stores word 0
/// (Release); the consumer reads word 0 (Acquire), copies the bytes out and
/// stores 0 (Release): the slot is free again, which is what a credit
/// counts. Aligned to 128 B, like every [`SlotEnd`]: the two ends of a
/// loopback pair are boxed one after the other, and each writes its ring
/// indexes on every operation; unaligned, they could share a cache line.
#[repr(align(128))]
pub struct ShmSlots {
    map: Arc<SharedMap>,
    slots: usize,
    slot_size: usize,
    slot_words: usize,
    tx_base: usize,
    rx_base: usize,
    /// The next slot to write and to read, as indexes (wrapped by a
    /// compare: a `%` by a run-time count is a division on every poll).
    head: usize,
    tail: usize,
    my_closed: usize,
    peer_closed: usize,
    file: RingFile,
    label: &'static str,
}

#[inline(always)]
fn next_slot(i: usize, n: usize) -> usize {
    if i + 1 == n {
        0
    } else {
        i + 1
    }
}

/// Words of one stream slot: its bytes rounded up to a pair of cache lines
/// (128 B). A pair, not a line: the CPU's adjacent-line prefetcher pulls
/// lines in 128 B pairs, and with one-line slots the receiver reading
/// slot i also pulls slot i + 1 away from the sender about to write it
/// (on this project's 2-core VM, stop-and-wait 32 B: 5.0 M msg/s with
/// 64 B slots, 5.5 M with 128 B, medians of 7 alternated runs).
fn stream_slot_words(slot_size: usize) -> usize {
    slot_size.div_ceil(8).div_ceil(2 * LINE_WORDS) * 2 * LINE_WORDS
}

fn stream_map_bytes(slots: usize, slot_size: usize) -> usize {
    (LINE_WORDS + 2 * slots * stream_slot_words(slot_size)) * 8
}

impl ShmSlots {
    /// Both ends in one process (sender end, receiver end), for a
    /// loopback stream whose two loops run on two threads.
    pub fn pair(slots: u32, slot_size: usize) -> Result<(ShmSlots, ShmSlots), TransportError> {
        let a = ShmSlots::at(At::Anonymous, slots, slot_size, Side::Client)?;
        let map = a.map.clone();
        let b = ShmSlots::on_side(map, slots, slot_size, Side::Server, RingFile::NONE);
        Ok((a, b))
    }

    /// As [`ShmChannel::create`], for a stream's end.
    pub fn create(
        path: &Path,
        slots: u32,
        slot_size: usize,
        side: Side,
    ) -> Result<ShmSlots, TransportError> {
        ShmSlots::at(At::Create(path), slots, slot_size, side)
    }

    /// As [`ShmChannel::open`], for a stream's end.
    pub fn open(
        path: &Path,
        slots: u32,
        slot_size: usize,
        side: Side,
    ) -> Result<ShmSlots, TransportError> {
        ShmSlots::at(At::Open(path), slots, slot_size, side)
    }

    fn at(at: At, slots: u32, slot_size: usize, side: Side) -> Result<ShmSlots, TransportError> {
        let bytes = stream_map_bytes(slots as usize, slot_size);
        let header = [STREAM_MAGIC, u64::from(slots), slot_size as u64];
        let what = || {
            (
                format!("stream ring of {slots} slots of {slot_size} B"),
                " B",
            )
        };
        let (map, file) = map_rings(at, bytes, header, what)?;
        Ok(ShmSlots::on_side(map, slots, slot_size, side, file))
    }

    fn on_side(
        map: Arc<SharedMap>,
        slots: u32,
        slot_size: usize,
        side: Side,
        file: RingFile,
    ) -> ShmSlots {
        let slots = slots as usize;
        let sw = stream_slot_words(slot_size);
        let rings = [LINE_WORDS, LINE_WORDS + slots * sw];
        let (tx, rx, label) = ends(side);
        ShmSlots {
            map,
            slots,
            slot_size,
            slot_words: sw,
            tx_base: rings[tx],
            rx_base: rings[rx],
            head: 0,
            tail: 0,
            my_closed: H_CLOSED[tx],
            peer_closed: H_CLOSED[rx],
            file,
            label,
        }
    }
}

impl SlotEnd for ShmSlots {
    fn slot_size(&self) -> usize {
        self.slot_size
    }

    #[inline]
    fn send(&mut self, bytes: &[u8]) -> Result<bool, TransportError> {
        let len = bytes.len();
        let mut first = [0u8; 8];
        first.copy_from_slice(bytes.get(..8).unwrap_or(&[0; 8]));
        let first = u64::from_le_bytes(first);
        if len > self.slot_size || first as u32 as usize != len {
            return Err(TransportError::Unsupported(format!(
                "shm stream slot of {len} B does not begin with its length as a u32 \
                 (or exceeds the {} B slot): every slot begins with its header",
                self.slot_size
            )));
        }
        let w = self.map.words();
        let slot = self.tx_base + self.head * self.slot_words;
        if w[slot].load(Acquire) != 0 {
            // The peer has not consumed this slot yet: no room.
            return Ok(false);
        }
        let words = &w[slot + 1..slot + len.div_ceil(8)];
        let mut chunks = bytes[8..].chunks_exact(8);
        for (word, c) in words.iter().zip(&mut chunks) {
            word.store(u64::from_le_bytes(c.try_into().unwrap_or([0; 8])), Relaxed);
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            words[words.len() - 1].store(u64::from_le_bytes(last), Relaxed);
        }
        w[slot].store(first, Release);
        self.head = next_slot(self.head, self.slots);
        Ok(true)
    }

    #[inline]
    fn recv(&mut self, into: &mut [u8]) -> Result<Option<usize>, TransportError> {
        let w = self.map.words();
        let slot = self.rx_base + self.tail * self.slot_words;
        let first = w[slot].load(Acquire);
        if first == 0 {
            if w[self.peer_closed].load(Relaxed) != 0 {
                return Err(TransportError::PeerLost(
                    "the peer closed the shm stream".into(),
                ));
            }
            return Ok(None);
        }
        let len = first as u32 as usize;
        if len < 8 || len > self.slot_size || len > into.len() {
            return Err(TransportError::Completion(format!(
                "shm stream slot says {len} B: not within 8..={} B (the slot) and {} B (the buffer)",
                self.slot_size,
                into.len()
            )));
        }
        into[..8].copy_from_slice(&first.to_le_bytes());
        let words = &w[slot + 1..slot + len.div_ceil(8)];
        let mut chunks = into[8..len].chunks_exact_mut(8);
        for (word, c) in words.iter().zip(&mut chunks) {
            c.copy_from_slice(&word.load(Relaxed).to_le_bytes());
        }
        let rest = chunks.into_remainder();
        if !rest.is_empty() {
            let n = rest.len();
            rest.copy_from_slice(&words[words.len() - 1].load(Relaxed).to_le_bytes()[..n]);
        }
        w[slot].store(0, Release);
        self.tail = next_slot(self.tail, self.slots);
        self.file.peer_mapped();
        Ok(Some(len))
    }

    fn lossy(&self) -> bool {
        false
    }

    fn info(&self) -> TransportInfo {
        TransportInfo {
            name: "shm".into(),
            detail: format!(
                "shared-memory slot rings ({}), {} slots of {} B per direction",
                self.label, self.slots, self.slot_size
            ),
            facts: vec![
                ("slots".into(), self.slots.to_string()),
                ("slot_bytes".into(), self.slot_size.to_string()),
                ("end".into(), self.label.into()),
            ],
        }
    }
}

impl Drop for ShmSlots {
    fn drop(&mut self) {
        self.map.words()[self.my_closed].store(1, Release);
    }
}

/// Where a server puts its shared file: /dev/shm when it exists, else the
/// temp dir. Unique per process and call, and not a name that exists
/// already (a SIGKILLed process of the same pid left it; the create is
/// exclusive).
pub fn default_path() -> PathBuf {
    use std::sync::atomic::AtomicU64;
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = if Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let name = || {
        dir.join(format!(
            "ibprobe-{}-{}",
            std::process::id(),
            N.fetch_add(1, Relaxed)
        ))
    };
    // Bounded: past that many leftovers the exclusive create says so.
    let mut path = name();
    for _ in 0..64 {
        if std::fs::symlink_metadata(&path).is_err() {
            break;
        }
        path = name();
    }
    path
}

/// How shm opens: an anonymous mapping in one process, or the server's
/// ring file, whose path the handshake hands the client.
pub struct Opener;

impl Opens for Opener {
    fn loopback(&self, spec: &ChannelSpec) -> Opened<Box<dyn Channel>> {
        Ok(Box::new(ShmChannel::loopback(spec.size)?))
    }

    fn stream_pair(&self, _: &ChannelSpec, st: &StreamSpec) -> Opened<StreamEnds> {
        let (a, b) = ShmSlots::pair(st.shm_ring_slots(), st.slot_size)?;
        Ok((Box::new(a), Box::new(b)))
    }

    fn client<'a>(&self, ask: Ask<'a>) -> Result<(Pending<'a>, Value), EndError> {
        let finish = move |theirs: &Value| {
            let path = theirs
                .get("path")
                .and_then(|p| p.as_str())
                .map(Path::new)
                .ok_or(EndError::Malformed("shm"))?;
            ring_end(path, ask, Side::Client).map_err(|e| {
                EndError::Setup(format!(
                    "{e}; the shm transport needs client and server on the same host (server {}), use --transport udp or verbs across hosts",
                    ask.peer
                ))
            })
        };
        Ok((Box::new(finish), Value::Null))
    }

    fn server(&self, ask: Ask, _: &Value) -> Result<(End, Value), EndError> {
        let path = default_path();
        match ring_end(&path, ask, Side::Server) {
            Ok(end) => Ok((end, json!({ "path": path.display().to_string() }))),
            Err(e) => Err(EndError::Refused(e.to_string())),
        }
    }
}

/// A session's end over the ring file at `path`: the server creates it,
/// the client opens it.
fn ring_end(path: &Path, ask: Ask, side: Side) -> Result<End, TransportError> {
    let at = match side {
        Side::Server => At::Create(path),
        Side::Client => At::Open(path),
    };
    Ok(match ask.carry {
        Carry::Messages => End::Messages(Box::new(ShmChannel::at(at, ask.spec.size, side)?)),
        Carry::Slots(st) => {
            let (n, slot) = (st.shm_ring_slots(), st.slot_size);
            End::Slots(Box::new(ShmSlots::at(at, n, slot, side)?))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_slot_is_a_pair_of_cache_lines() {
        assert_eq!(stream_slot_words(8), 2 * LINE_WORDS);
        assert_eq!(stream_slot_words(128), 2 * LINE_WORDS);
        assert_eq!(stream_slot_words(129), 4 * LINE_WORDS);
    }

    #[test]
    fn size_zero_and_mismatched_file_are_refused() {
        assert!(ShmChannel::loopback(0).is_err());
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r");
        let _s = ShmChannel::create(&p, 64, Side::Server).unwrap();
        assert!(ShmChannel::open(&p, 4096, Side::Client).is_err());
        let big = dir.path().join("big");
        let _b = ShmChannel::create(&big, 4096, Side::Server).unwrap();
        let e = ShmChannel::open(&big, 64, Side::Client).err().unwrap();
        let e = e.to_string();
        let held = format!(
            "(magic {MAGIC:#x}, 8 slots of {} words)",
            slot_words_for(4096)
        );
        let want = format!("big: not an ibprobe shm ring for size 64 {held}; are client and server the same ibprobe version?");
        assert!(e.contains(&want), "{e}");
        let q = dir.path().join("q");
        let _t = ShmSlots::create(&q, 16, 64, Side::Server).unwrap();
        let e = ShmSlots::open(&q, 8, 64, Side::Client).err().unwrap();
        let e = e.to_string();
        let held = format!("(magic {STREAM_MAGIC:#x}, 16 slots of 64 B)");
        let want = format!("q: not an ibprobe stream ring of 8 slots of 64 B {held}; are client");
        assert!(e.contains(&want), "{e}");
        let mut c = ShmChannel::open(&p, 64, Side::Client).unwrap();
        c.post(1).unwrap();
    }
}
