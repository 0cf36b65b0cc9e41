//! Comma-separated lists as the three tools take them on command lines:
//! message sizes with doubling ranges (`8,64,512`, `2..4096`) and the
//! generic list every sweep axis uses, parsed once so that `ibprobe sweep
//! --sizes` and `ibexporter --sizes` read the same text the same way.

/// A comma-separated list for a sweep axis (`--sizes`, `--rates`, ...):
/// the items in the order given, each expanded by `item` (one value, or
/// several for a range), no empty list or item, no value twice. Every
/// error is one line that starts with the flag and the list as given.
pub fn parse_list<T: PartialEq>(
    flag: &str,
    s: &str,
    hint: &str,
    item: impl Fn(&str) -> Result<Vec<T>, String>,
    show: impl Fn(&T) -> String,
) -> Result<Vec<T>, String> {
    if s.trim().is_empty() {
        return Err(format!("{flag} {s:?}: the list is empty; {hint}"));
    }
    let mut out: Vec<T> = Vec::new();
    for it in s.split(',').map(str::trim) {
        if it.is_empty() {
            return Err(format!("{flag} {s:?}: an empty item; {hint}"));
        }
        for v in item(it).map_err(|e| format!("{flag} {s:?}: {e}"))? {
            if out.contains(&v) {
                return Err(format!(
                    "{flag} {s:?}: {} is listed twice; list each once",
                    show(&v)
                ));
            }
            out.push(v);
        }
    }
    Ok(out)
}

/// The `--sizes` list: numbers and doubling ranges `A..B` (A and B powers
/// of two), comma-separated, in the order given, without repeats. Public
/// so its rules (and errors) are testable without running a sweep.
pub fn parse_sizes(s: &str) -> Result<Vec<usize>, String> {
    let hint = "pass sizes in bytes, e.g. --sizes 8,64,512 or --sizes 2..4096 (powers of two)";
    parse_list(
        "--sizes",
        s,
        hint,
        |item| {
            let num = |x: &str| {
                x.trim()
                    .parse::<usize>()
                    .map_err(|_| format!("{x:?} is not a size in bytes; {hint}"))
            };
            let sizes: Vec<usize> = match item.split_once("..") {
                Some((a, b)) => {
                    let (a, b) = (num(a)?, num(b)?);
                    if !a.is_power_of_two() || !b.is_power_of_two() {
                        return Err(format!(
                        "the range {item} doubles from a power of two to a power of two; use e.g. 2..4096, or list the sizes"
                    ));
                    }
                    if a > b {
                        return Err(format!(
                        "the range {item} runs backwards; write the smaller size first, e.g. {b}..{a}"
                    ));
                    }
                    std::iter::successors(Some(a), |&x| x.checked_mul(2))
                        .take_while(|&x| x <= b)
                        .collect()
                }
                None => vec![num(item)?],
            };
            match sizes.contains(&0) {
                true => Err(format!("size 0: a message needs at least 1 byte; {hint}")),
                false => Ok(sizes),
            }
        },
        |n| format!("{n} B"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_as_lists_and_doubling_ranges() {
        assert_eq!(parse_sizes("8,64,512").unwrap(), vec![8, 64, 512]);
        assert_eq!(parse_sizes("2..16").unwrap(), vec![2, 4, 8, 16]);
        assert_eq!(
            parse_sizes(" 100, 1024..4096").unwrap(),
            vec![100, 1024, 2048, 4096]
        );
        assert_eq!(parse_sizes("64..64").unwrap(), vec![64]);
    }

    #[test]
    fn bad_size_lists_say_what_and_how() {
        for (s, part) in [
            ("", "empty"),
            ("8,,16", "empty item"),
            ("8,x", "not a size"),
            ("3..100", "power of two"),
            ("4096..8", "backwards"),
            ("0", "size 0"),
            ("8,8..16", "twice"),
            ("-8", "not a size"),
        ] {
            let e = parse_sizes(s).unwrap_err();
            assert!(e.starts_with("--sizes "), "{e}");
            assert!(e.contains(part), "{s:?}: {e}");
        }
    }
}
