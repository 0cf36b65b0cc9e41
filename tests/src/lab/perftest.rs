//! Running and reading perftest (`ib_send_lat`, `ib_write_lat`) in the lab.
//!
//! Why it exists: perftest is the peer our probe is measured against, so
//! tests need one way to run a server/client pair and one parser for its
//! result row, not a regex per test.

use super::{GuestOutput, Lab, Node};
use std::time::Duration;

/// The result row perftest prints under its `#bytes #iterations ...` header.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LatRow {
    /// Message size in bytes.
    pub bytes: u64,
    /// Iterations measured.
    pub iterations: u64,
    /// Smallest latency, microseconds.
    pub t_min_us: f64,
    /// Largest latency, microseconds.
    pub t_max_us: f64,
    /// perftest's "typical" (median) latency, microseconds.
    pub t_typical_us: f64,
    /// Mean latency, microseconds.
    pub t_avg_us: f64,
}

/// Finds the latency result row in perftest's output.
pub fn parse_lat(stdout: &str) -> Option<LatRow> {
    let mut lines = stdout.lines();
    lines.find(|l| l.contains("#bytes") && l.contains("t_typical"))?;
    let row = lines.next()?;
    let f: Vec<&str> = row.split_whitespace().collect();
    if f.len() < 6 {
        return None;
    }
    Some(LatRow {
        bytes: f[0].parse().ok()?,
        iterations: f[1].parse().ok()?,
        t_min_us: f[2].parse().ok()?,
        t_max_us: f[3].parse().ok()?,
        t_typical_us: f[4].parse().ok()?,
        t_avg_us: f[5].parse().ok()?,
    })
}

/// A finished server/client run.
pub struct PairRun {
    /// The server side (its output was kept in the guest and read back).
    pub server: GuestOutput,
    /// The client side, which prints the result row.
    pub client: GuestOutput,
}

/// The snippet that starts a perftest server in the background, waits
/// until it listens on its TCP port, and leaves its output in
/// `$LAB_RESULTS/<tag>.server.{out,rc}`.
fn server_snippet(cmd: &str, tag: &str) -> String {
    format!(
        "({cmd} > \"$LAB_RESULTS/{tag}.server.out\" 2>&1; echo $? > \"$LAB_RESULTS/{tag}.server.rc\") &\n\
         for i in $(seq 100); do ss -ltn | grep -q ':18515 ' && exit 0; sleep 0.1; done\n\
         echo 'perftest server did not listen on 18515 within 10 s' >&2; exit 1"
    )
}

/// The snippet that waits for the server's exit status and prints its output.
fn server_result_snippet(tag: &str) -> String {
    format!(
        "for i in $(seq 100); do [ -f \"$LAB_RESULTS/{tag}.server.rc\" ] && break; sleep 0.1; done\n\
         cat \"$LAB_RESULTS/{tag}.server.out\"; exit $(cat \"$LAB_RESULTS/{tag}.server.rc\" 2>/dev/null || echo 99)"
    )
}

/// Runs `tool ARGS` as server on `server` and as client on `client` against
/// the server's address. `args` must not name the address.
pub fn run_pair(
    lab: &Lab,
    server: Node,
    client: Node,
    tool: &str,
    args: &str,
    tag: &str,
) -> PairRun {
    let cmd = format!("{tool} {args}");
    lab.sh_on(server, &server_snippet(&cmd, tag)).success();
    let addr = if server == client {
        "$LAB_IP"
    } else {
        "$LAB_PEER_IP"
    };
    let client_out = match lab.exec(client, &format!("{cmd} {addr}"), Duration::from_secs(120)) {
        Ok(o) => o,
        Err(e) => std::panic::panic_any(e),
    };
    let server_out = lab.sh_on(server, &server_result_snippet(tag));
    PairRun {
        server: server_out,
        client: client_out,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_row_under_the_header() {
        let out = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n \
                   2       1000          29.44          1118.89      36.82    \t       44.54       \t47.14  \t\t254.90  \t\t1118.89\n";
        let r = parse_lat(out).unwrap();
        assert_eq!((r.bytes, r.iterations), (2, 1000));
        assert_eq!(
            (r.t_min_us, r.t_max_us, r.t_typical_us, r.t_avg_us),
            (29.44, 1118.89, 36.82, 44.54)
        );
    }

    #[test]
    fn no_header_no_row() {
        assert_eq!(parse_lat("Couldn't connect to 10.0.0.1:18515\n"), None);
        assert_eq!(
            parse_lat(" #bytes #iterations t_min t_max t_typical\n garbage\n"),
            None
        );
    }
}
