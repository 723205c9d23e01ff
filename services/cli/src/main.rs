//! Entry point of the `engram` binary; all logic lives in the library so tests and the
//! benchmark can drive the same code.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    engram_cli::run_from_command_line().await
}
