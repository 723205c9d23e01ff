//! The `engram` command line: `serve` runs the all-in-one service, `gateway` and `worker` the
//! roles of a cluster deployment, `migrate` its schema step, `admin` manages tenants and the
//! index, `bench` prints performance figures.

mod bench;
pub mod bootstrap;
pub mod config;
pub mod data_dir_lock;
pub mod maintenance;
pub mod pricing;
mod recall_bench;
pub mod roles;
mod scale_bench;
pub mod secrets;
pub mod server;
mod speed_bench;
pub mod telemetry;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "engram",
    version,
    about = "Engram: multi-tenant memory for AI agents"
)]
struct CommandLine {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run everything in one process: API, console, indexer (SQLite + embedded Qdrant + local model).
    Serve(config::ServeArgs),
    /// Run the API and console only, against PostgreSQL and a Qdrant cluster; run as many as
    /// needed behind a load balancer.
    Gateway(config::ServeArgs),
    /// Run the outbox indexer, reconciler and tombstone purge against PostgreSQL and a Qdrant
    /// cluster; any number may run at once.
    Worker(config::ServeArgs),
    /// Administrative commands that work beside a running server.
    Admin {
        #[command(subcommand)]
        command: AdminCommand,
    },
    /// Load synthetic memories and print ingest and search figures.
    Bench(bench::BenchArgs),
    /// Ingest the LoCoMo conversations and print recall (hit@k, all@k) for dense, keyword and
    /// hybrid retrieval side by side.
    BenchRecall(recall_bench::RecallBenchArgs),
    /// The bare embedding model (the floor) and the service through HTTP on the same texts:
    /// ingest rate, search p50/p95/p99 (in rounds taken in turn with the floor on the same
    /// queries), searches/s at 1, 4 and 16 clients.
    BenchSpeed(speed_bench::SpeedBenchArgs),
    /// One project with a million memories (client vectors): search p95 and resident memory.
    BenchScale(scale_bench::ScaleBenchArgs),
    /// Apply pending database migrations and exit (a deployment's migration step).
    Migrate(maintenance::MigrateArgs),
}

#[derive(Debug, Subcommand)]
enum AdminCommand {
    /// Create a project in the data dir's organization and print its first API key.
    CreateProject(bootstrap::CreateProjectArgs),
    /// Create another organization with an owner account and projects; prints JSON once.
    CreateOrganization(bootstrap::CreateOrganizationArgs),
    /// Add a console member with a role to an organization; prints the password once.
    CreateMember(bootstrap::CreateMemberArgs),
    /// Add a unit price to the price book (the deployment's, or an organization's override),
    /// applying from a date on.
    SetPrice(pricing::SetPriceArgs),
    /// With the server stopped: repair the vector index from the database (missing, stale
    /// and orphaned points), with a progress bar. The server also does this at start and
    /// every --reconcile-interval-secs.
    Reconcile(maintenance::ReconcileArgs),
}

pub async fn run_from_command_line() -> ExitCode {
    let command_line = CommandLine::parse();
    let outcome = match command_line.command {
        Command::Serve(arguments) => {
            server::serve_until_signal(arguments, config::Role::AllInOne).await
        }
        Command::Gateway(arguments) => {
            server::serve_until_signal(arguments, config::Role::Gateway).await
        }
        Command::Worker(arguments) => server::work_until_signal(arguments).await,
        Command::Admin {
            command: AdminCommand::CreateProject(arguments),
        } => bootstrap::create_project_command(arguments).await,
        Command::Admin {
            command: AdminCommand::CreateOrganization(arguments),
        } => bootstrap::create_organization_command(arguments).await,
        Command::Admin {
            command: AdminCommand::CreateMember(arguments),
        } => bootstrap::create_member_command(arguments).await,
        Command::Admin {
            command: AdminCommand::Reconcile(arguments),
        } => maintenance::reconcile_command(arguments).await,
        Command::Admin {
            command: AdminCommand::SetPrice(arguments),
        } => pricing::set_price_command(arguments).await,
        Command::Bench(arguments) => bench::run(arguments).await,
        Command::BenchRecall(arguments) => recall_bench::run(arguments).await,
        Command::BenchSpeed(arguments) => speed_bench::run(arguments).await,
        Command::BenchScale(arguments) => scale_bench::run_scale(arguments).await,
        Command::Migrate(arguments) => maintenance::migrate_command(arguments).await,
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) if config::is_database_busy(&error) => {
            eprintln!(
                "error: the database stayed locked by another process (a running `engram serve` \
                 writing?) for {} s, so nothing was changed; try again.\ncause: {error:#}",
                config::admin_lock_patience().as_secs()
            );
            ExitCode::from(3)
        }
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(2)
        }
    }
}
