//! The `engram` command as the end-to-end suites run it: the same entry point, built by
//! `cargo test` for this package so the suites always spawn the code under test.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    engram_cli::run_from_command_line().await
}
