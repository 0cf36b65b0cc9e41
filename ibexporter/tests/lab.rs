//! ibexporter in the Soft-RoCE lab (being written).
use ibtools_tests::lab::harness;
fn main() -> std::process::ExitCode {
    harness::run(vec![])
}
