//! CPU lists as the kernel writes them (`0-3,8,10-11`) and hex masks
//! (`ff,00000001`), parsed into one ordered set type.
//!
//! Why it exists: every cpuset, IRQ affinity, NUMA node and irqbalance ban
//! list is a CPU set, and comparing them as strings gives false drift
//! (`16,18` vs `16,18\n`). Everything compares [`CpuSet`]s instead. Callers
//! that must see the list as written (to refuse a CPU given twice, or to
//! keep the user's order) use [`parse_list_ordered`], which follows the same
//! rules. Both are bounded by [`MAX_CPU`], so no input makes them allocate
//! more than about a megabyte.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

/// An ordered set of CPU (or NUMA node) numbers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CpuSet(BTreeSet<u32>);

/// Why a CPU list did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid CPU list {input:?}: {reason} (expected e.g. \"0-3,8,10-11\")")]
pub struct CpuListError {
    /// The text given.
    pub input: String,
    /// What was wrong with it.
    pub reason: String,
}

/// The largest CPU number we accept; guards against `0-4294967295` eating
/// memory. Sixteen times the largest `NR_CPUS` Linux builds (8192), so any
/// real CPU number passes (and can be refused later with a better reason,
/// such as "not one this process may run on"), while a whole expanded list
/// stays around a megabyte.
pub const MAX_CPU: u32 = 1 << 17;

/// The elements of a kernel cpulist as inclusive ranges, in the order
/// written: the one place the list syntax is read.
fn ranges(s: &str) -> impl Iterator<Item = Result<(u32, u32), CpuListError>> + '_ {
    let err = move |reason: String| CpuListError {
        input: s.to_string(),
        reason,
    };
    let t = s.trim();
    // An empty list has no elements (split would give one empty one).
    let parts = if t.is_empty() {
        None
    } else {
        Some(t.split(','))
    };
    parts.into_iter().flatten().map(move |part| {
        let part = part.trim();
        if part.is_empty() {
            return Err(err("empty element".into()));
        }
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (part, part),
        };
        let a: u32 = a
            .parse()
            .map_err(|_| err(format!("{a:?} is not a CPU number")))?;
        let b: u32 = b
            .parse()
            .map_err(|_| err(format!("{b:?} is not a CPU number")))?;
        if a > b {
            return Err(err(format!("range {a}-{b} runs backwards")));
        }
        if b > MAX_CPU {
            return Err(err(format!(
                "CPU {b} is beyond the supported maximum {MAX_CPU}"
            )));
        }
        Ok((a, b))
    })
}

/// Parses a kernel cpulist such as `0-3,8,10-11` into CPU numbers in the
/// order written, duplicates kept (`3,1,1` gives `[3, 1, 1]`); same syntax
/// and bound as [`CpuSet::parse_list`].
///
/// Why it exists: a command line check such as "CPU 2 is listed twice"
/// needs the list as the user wrote it, which a set has forgotten.
pub fn parse_list_ordered(s: &str) -> Result<Vec<usize>, CpuListError> {
    let mut out = Vec::new();
    for r in bounded_ranges(s) {
        let (a, b) = r?;
        out.extend((a..=b).map(|c| c as usize));
    }
    Ok(out)
}

/// The most CPU numbers one list may expand to, counting repeats: one more
/// than there can be distinct CPUs, so a list above it repeats CPUs. Each
/// range is bounded by [`MAX_CPU`]; without this total, `0-131072` written
/// ten thousand times would still expand to ten GB.
pub const MAX_EXPANDED: u64 = MAX_CPU as u64 + 1;

/// [`ranges`], refusing a list whose ranges add up to more than
/// [`MAX_EXPANDED`] CPU numbers before anything is expanded.
fn bounded_ranges(s: &str) -> impl Iterator<Item = Result<(u32, u32), CpuListError>> + '_ {
    let mut total = 0u64;
    ranges(s).map(move |r| {
        let (a, b) = r?;
        total += u64::from(b - a) + 1;
        if total > MAX_EXPANDED {
            return Err(CpuListError {
                input: s.to_string(),
                reason: format!("it names more than {MAX_EXPANDED} CPUs, so some more than once"),
            });
        }
        Ok((a, b))
    })
}

impl CpuSet {
    /// The empty set.
    pub fn new() -> Self {
        CpuSet(BTreeSet::new())
    }

    /// Parses a kernel cpulist such as `0-3,8,10-11` (whitespace and a
    /// trailing newline allowed; empty means the empty set). Also accepts
    /// strides as the kernel does: `0-15:2/4` is not used by us, so it is
    /// rejected with a clear error rather than misread.
    pub fn parse_list(s: &str) -> Result<Self, CpuListError> {
        let mut set = BTreeSet::new();
        for r in bounded_ranges(s) {
            let (a, b) = r?;
            set.extend(a..=b);
        }
        Ok(CpuSet(set))
    }

    /// Parses a kernel hex mask such as `/proc/irq/N/smp_affinity`
    /// (`00000000,0000000f`): comma-separated 32-bit words, most significant first.
    pub fn parse_mask(s: &str) -> Result<Self, CpuListError> {
        let err = |reason: &str| CpuListError {
            input: s.to_string(),
            reason: reason.to_string(),
        };
        let t = s.trim().trim_start_matches("0x");
        let mut set = BTreeSet::new();
        let digits: String = t.chars().filter(|c| *c != ',').collect();
        if digits.is_empty() {
            return Ok(CpuSet(set));
        }
        if digits.len() as u64 * 4 > MAX_CPU as u64 {
            return Err(err("mask is too long"));
        }
        for (i, c) in digits.chars().rev().enumerate() {
            let v = c
                .to_digit(16)
                .ok_or_else(|| err(&format!("{c:?} is not a hex digit")))?;
            for bit in 0..4 {
                if v & (1 << bit) != 0 {
                    set.insert(i as u32 * 4 + bit);
                }
            }
        }
        Ok(CpuSet(set))
    }

    /// Builds a set from numbers.
    pub fn from_iter_u32(it: impl IntoIterator<Item = u32>) -> Self {
        CpuSet(it.into_iter().collect())
    }

    /// Formats as a compact kernel cpulist (`0-3,8`); empty set gives "".
    pub fn to_list(&self) -> String {
        let mut out = String::new();
        let mut it = self.0.iter().copied().peekable();
        while let Some(start) = it.next() {
            let mut end = start;
            while end.checked_add(1).is_some_and(|n| it.peek() == Some(&n)) {
                end = it.next().unwrap_or(end);
            }
            if !out.is_empty() {
                out.push(',');
            }
            if start == end {
                out.push_str(&start.to_string());
            } else {
                out.push_str(&format!("{start}-{end}"));
            }
        }
        out
    }

    /// Formats as a kernel hex mask with 32-bit comma-separated words.
    pub fn to_mask(&self) -> String {
        let max = self.0.iter().next_back().copied().unwrap_or(0);
        let words = (max / 32 + 1) as usize;
        let mut w = vec![0u32; words];
        for &c in &self.0 {
            w[(c / 32) as usize] |= 1 << (c % 32);
        }
        w.iter()
            .rev()
            .map(|x| format!("{x:08x}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Membership test.
    pub fn contains(&self, cpu: u32) -> bool {
        self.0.contains(&cpu)
    }

    /// Adds a member.
    pub fn insert(&mut self, cpu: u32) {
        self.0.insert(cpu);
    }

    /// Members in ascending order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = u32> + '_ {
        self.0.iter().copied()
    }

    /// The lowest member.
    pub fn first(&self) -> Option<u32> {
        self.0.iter().next().copied()
    }

    /// Set union.
    pub fn union(&self, o: &CpuSet) -> CpuSet {
        CpuSet(self.0.union(&o.0).copied().collect())
    }

    /// Set intersection.
    pub fn intersection(&self, o: &CpuSet) -> CpuSet {
        CpuSet(self.0.intersection(&o.0).copied().collect())
    }

    /// Members of `self` not in `o`.
    pub fn difference(&self, o: &CpuSet) -> CpuSet {
        CpuSet(self.0.difference(&o.0).copied().collect())
    }

    /// True when every member of `self` is in `o`.
    pub fn is_subset(&self, o: &CpuSet) -> bool {
        self.0.is_subset(&o.0)
    }

    /// True when the sets share a member.
    pub fn intersects(&self, o: &CpuSet) -> bool {
        !self.0.is_disjoint(&o.0)
    }
}

impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_list())
    }
}

impl FromStr for CpuSet {
    type Err = CpuListError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CpuSet::parse_list(s)
    }
}

impl Serialize for CpuSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_list())
    }
}

impl<'de> Deserialize<'de> for CpuSet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        CpuSet::parse_list(&s).map_err(serde::de::Error::custom)
    }
}

impl FromIterator<u32> for CpuSet {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        CpuSet(iter.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_kernel_lists() {
        let s = CpuSet::parse_list("0-3,8,10-11\n").unwrap();
        assert_eq!(s.iter().collect::<Vec<_>>(), [0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(s.to_list(), "0-3,8,10-11");
        assert!(CpuSet::parse_list("").unwrap().is_empty());
        assert_eq!(
            CpuSet::parse_list("16,18,20,22").unwrap().to_list(),
            "16,18,20,22"
        );
    }

    #[test]
    fn rejects_garbage_with_reason() {
        for bad in ["a", "3-1", "1,,2", "1-", "99999999"] {
            let e = CpuSet::parse_list(bad).unwrap_err();
            assert_eq!(e.input, bad);
        }
    }

    #[test]
    fn repeated_ranges_are_refused_before_they_expand() {
        // 10,000 maximal ranges would be 10 GB as a Vec<usize>.
        let huge = vec![format!("0-{MAX_CPU}"); 10_000].join(",");
        let e = parse_list_ordered(&huge).unwrap_err();
        assert!(e.reason.contains("more than"), "{e}");
        assert!(CpuSet::parse_list(&huge).is_err());
        // The whole range once, and a few repeats, still parse.
        assert_eq!(
            parse_list_ordered(&format!("0-{MAX_CPU}")).unwrap().len() as u64,
            MAX_EXPANDED
        );
        assert_eq!(CpuSet::parse_list("0-3,0-3,2").unwrap().to_list(), "0-3");
    }

    #[test]
    fn ordered_lists_keep_order_and_duplicates() {
        assert_eq!(
            parse_list_ordered("0-3,8,10-11\n").unwrap(),
            [0, 1, 2, 3, 8, 10, 11]
        );
        assert_eq!(parse_list_ordered("3,1,1").unwrap(), [3, 1, 1]);
        assert_eq!(parse_list_ordered("5").unwrap(), [5]);
        assert!(parse_list_ordered("").unwrap().is_empty());
        assert!(parse_list_ordered("a-b").is_err());
        assert!(parse_list_ordered("3-1").is_err());
        // Real CPU numbers pass, however large a host is.
        assert_eq!(parse_list_ordered("0,100000").unwrap(), [0, 100000]);
    }

    #[test]
    fn huge_ranges_are_an_error_not_an_allocation() {
        for bad in ["0-4000000000", "0-4294967295", "4294967295"] {
            let e = parse_list_ordered(bad).unwrap_err();
            assert!(e.to_string().contains("supported maximum"), "{e}");
            assert!(CpuSet::parse_list(bad).is_err());
        }
        assert!(parse_list_ordered("99999999999").is_err());
    }

    #[test]
    fn formats_the_top_of_u32_without_overflow() {
        let s = CpuSet::from_iter_u32([u32::MAX - 1, u32::MAX]);
        assert_eq!(s.to_list(), format!("{}-{}", u32::MAX - 1, u32::MAX));
    }

    #[test]
    fn masks() {
        let s = CpuSet::parse_mask("00000000,0000000f\n").unwrap();
        assert_eq!(s.to_list(), "0-3");
        assert_eq!(CpuSet::parse_mask("1,00000000").unwrap().to_list(), "32");
        assert_eq!(
            CpuSet::parse_list("0-3,33").unwrap().to_mask(),
            "00000002,0000000f"
        );
        assert!(CpuSet::parse_mask("xyz").is_err());
    }

    proptest! {
        #[test]
        fn list_never_panics(s in "\\PC{0,40}") {
            let _ = CpuSet::parse_list(&s);
            let _ = CpuSet::parse_mask(&s);
        }

        #[test]
        fn list_roundtrips(v in proptest::collection::btree_set(0u32..512, 0..64)) {
            let s = CpuSet(v);
            prop_assert_eq!(CpuSet::parse_list(&s.to_list()).unwrap(), s.clone());
            prop_assert_eq!(CpuSet::parse_mask(&s.to_mask()).unwrap(), s);
        }

        #[test]
        fn list_like_inputs(s in "[0-9,\\- ]{0,30}") {
            if let Ok(set) = CpuSet::parse_list(&s) {
                // Whatever parsed must re-parse to itself from its canonical form.
                prop_assert_eq!(CpuSet::parse_list(&set.to_list()).unwrap(), set.clone());
                // The ordered parse accepts the same lists, with the same members.
                let v = parse_list_ordered(&s).unwrap();
                prop_assert_eq!(v.iter().map(|&c| c as u32).collect::<CpuSet>(), set);
            } else {
                prop_assert!(parse_list_ordered(&s).is_err());
            }
        }
    }
}
