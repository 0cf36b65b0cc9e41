//! Prints `ibprobe::verbs::devices()` as JSON (what `ibprobe devices --json`
//! builds on), or the "no RDMA device" error with exit status 1.
//!
//! Why it exists: checks device listing (ports, GIDs, max inline, NUMA)
//! on a real verbs stack and on a host without one.

fn main() {
    match ibprobe::verbs::devices() {
        Ok(d) => println!(
            "{}",
            serde_json::to_string_pretty(&d).expect("serializable")
        ),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(e.exit_code());
        }
    }
}
