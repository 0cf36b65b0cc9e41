fn main() -> std::process::ExitCode {
    ibprobe::cli::main()
}
