//! Protobuf wire-format primitives (varints, tags, scalar and
//! length-delimited fields, a label pair) that `protobuf.rs` writes the
//! families with and `series.rs` pre-encodes a series' labels with. Its own
//! file so that neither imports the other.

pub(super) const VARINT: u8 = 0;

pub(super) const FIXED64: u8 = 1;

pub(super) const LEN: u8 = 2;

pub(super) fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub(super) fn tag(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, u64::from(field << 3 | u32::from(wire)));
}

pub(super) fn uint(out: &mut Vec<u8>, field: u32, v: u64) {
    if v != 0 {
        tag(out, field, VARINT);
        varint(out, v);
    }
}

pub(super) fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

pub(super) fn sint(out: &mut Vec<u8>, field: u32, v: i64) {
    if v != 0 {
        tag(out, field, VARINT);
        varint(out, zigzag(v));
    }
}

pub(super) fn double(out: &mut Vec<u8>, field: u32, v: f64) {
    if v.to_bits() != 0 {
        tag(out, field, FIXED64);
        out.extend_from_slice(&v.to_le_bytes());
    }
}

/// A length-delimited field: a string, bytes or an encoded message.
pub(super) fn bytes(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    tag(out, field, LEN);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// Appends one `Metric.label` field: a `LabelPair { name, value }`.
pub(super) fn label_pair(out: &mut Vec<u8>, name: &str, value: &str) {
    let len = 1 + varint_len(name.len()) + name.len() + 1 + varint_len(value.len()) + value.len();
    tag(out, 1, LEN);
    varint(out, len as u64);
    bytes(out, 1, name.as_bytes());
    bytes(out, 2, value.as_bytes());
}

pub(super) fn varint_len(v: usize) -> usize {
    let mut n = 1;
    let mut v = v >> 7;
    while v > 0 {
        n += 1;
        v >>= 7;
    }
    n
}
