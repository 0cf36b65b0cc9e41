//! perftest's output: its `RESULT_LINE`, its latency header byte for
//! byte, one row in its printf layout, so scripts that parse
//! `ib_send_lat` read ours; then the `--fail-if` lines.

use crate::report::model::{fail_if_text, Distribution, Document};

/// perftest's separator line (`RESULT_LINE` in perftest_parameters.h).
pub const PERFTEST_LINE: &str =
    "---------------------------------------------------------------------------------------";

/// perftest's latency header, byte for byte (`RESULT_FMT_LAT`, with its
/// leading and trailing space).
pub const PERFTEST_HEADER: &str = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ";

/// One result line in perftest's `REPORT_FMT_LAT` layout
/// (`" %-7lu %" PRIu64 "          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f"`),
/// with our values: t_max is the TRUE max, t_typical the median.
pub fn perftest_row(bytes: u64, d: &Distribution) -> String {
    let s = &d.summary;
    let u = |ns: u64| ns as f64 / 1000.0;
    format!(
        " {:<7} {}          {:<7.2}        {:<7.2}      {:<7.2}  \t       {:<7.2}     \t{:<7.2}\t\t{:<7.2} \t\t{:<7.2}",
        bytes,
        s.count,
        u(s.min_ns),
        u(s.max_ns),
        u(s.p50_ns),
        s.mean_ns / 1000.0,
        s.stdev_ns / 1000.0,
        u(s.p99_ns),
        u(s.p999_ns),
    )
}

word!(
    5,
    "perftest's (ib_send_lat) header and result line, for its parsers."
);

/// `doc` as perftest's lines (None: it has no perftest row).
pub(super) fn render(doc: &dyn Document) -> Option<String> {
    let (bytes, headline) = doc.perftest()?;
    let mut out = format!("{PERFTEST_LINE}\n{PERFTEST_HEADER}\n");
    if let Some(d) = headline {
        out.push_str(&perftest_row(bytes, d));
        out.push('\n');
    }
    out.push_str(PERFTEST_LINE);
    out.push('\n');
    Some(out + &fail_if_text(doc, ""))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::model::DistKind;

    #[test]
    fn perftest_row_matches_printf_layout() {
        // What perftest's printf gives for these numbers (%-7.2f pads to 7).
        let d = Distribution {
            kind: DistKind::RttHalf,
            summary: ibstats::latency::Summary {
                count: 1000,
                min_ns: 1050,
                p50_ns: 1090,
                p90_ns: 1100,
                p99_ns: 1240,
                p999_ns: 3270,
                p9999_ns: 3270,
                max_ns: 3270,
                mean_ns: 1100.0,
                stdev_ns: 40.0,
                over_10us: 0.0,
                over_10us_count: 0,
            },
            clamped: 0,
            hdr: String::new(),
        };
        assert_eq!(
            perftest_row(2, &d),
            " 2       1000          1.05           3.27         1.09     \t       1.10        \t0.04   \t\t1.24    \t\t3.27   "
        );
    }
}
