//! Offline maintenance: `engram migrate`, and `engram admin reconcile`, which repairs the
//! vector index from the database while the data dir is locked.

use crate::data_dir_lock::DataDirLock;
use anyhow::{Context, Result, bail};
use clap::Args;
use engram_engine::IndexApplier;
use engram_index::VectorIndex;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Debug, Args)]
pub struct ReconcileArgs {
    #[arg(long, env = "ENGRAM_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,
    #[arg(long, env = "ENGRAM_DATABASE_URL", hide_env_values = true, value_parser = crate::config::secret)]
    pub database_url: Option<secrecy::SecretString>,
    /// Use the database even if it could lose acknowledged writes (as `serve` would).
    #[arg(long, env = "ENGRAM_ALLOW_UNSAFE_DURABILITY", default_value_t = false)]
    pub allow_unsafe_durability: bool,
    /// The deployment's embedding provider, if any: projects on the deployment default keep
    /// their points in its index.
    #[command(flatten)]
    pub embedding: crate::config::EmbeddingArgs,
}

/// `engram admin reconcile`: with the server stopped, compare every project's memories with
/// the index and repair missing, stale and orphaned points, showing progress per project.
pub async fn reconcile_command(arguments: ReconcileArgs) -> Result<()> {
    let _lock = DataDirLock::acquire(&arguments.data_dir)?;
    let database_url = crate::config::database_url_for(
        crate::config::exposed(&arguments.database_url).as_deref(),
        &arguments.data_dir,
    );
    let storage =
        crate::config::open_storage(&database_url, arguments.allow_unsafe_durability).await?;
    // Every project's points go to the index of its embedding space; nothing is embedded here.
    let models = crate::server::embedding_models(
        arguments.embedding.provider().as_ref(),
        &crate::server::LocalModelDirs {
            minilm: arguments.data_dir.clone(),
            multilingual: arguments.data_dir.clone(),
        },
        &engram_embed::LocalModelOptions::for_runtime(std::path::PathBuf::new()),
        false,
    )?;
    let spaces = Arc::new(engram_engine::EmbeddingSpaces::new(
        storage.clone(),
        models,
        crate::server::index_opener(&crate::config::IndexBackend::Embedded {
            index_dir: arguments.data_dir.join("index"),
            tuning: engram_index::EdgeIndexTuning::default(),
        }),
    ));
    spaces
        .open_deployment_index()
        .await
        .context("cannot open the vector index")?;
    spaces
        .check_stored_vectors(&engram_storage::MaintenanceStore::new(storage.clone()))
        .await?;
    let index: Arc<dyn VectorIndex> = Arc::new(
        engram_engine::embedding_spaces::RoutedVectorIndex::new(spaces),
    );
    let applier = IndexApplier::new(storage, index);
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{msg:>10} [{bar:30}] {pos}/{len} projects ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_message("reconcile");
    let report = applier
        .reconcile_all_projects(|done, total| {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        })
        .await?;
    bar.finish_and_clear();
    println!(
        "reconciled {} projects, {} active memories: missing {} / stale {} / orphaned {} points repaired",
        report.projects_checked,
        report.memories_checked,
        report.points_missing,
        report.points_stale,
        report.points_orphaned
    );
    Ok(())
}

#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// The database to bring up to date (`postgres://…` or `sqlite://…`).
    #[arg(long, env = "ENGRAM_DATABASE_URL", hide_env_values = true, value_parser = crate::config::secret)]
    pub database_url: secrecy::SecretString,
    /// Migrate even if the database could lose acknowledged writes.
    #[arg(long, env = "ENGRAM_ALLOW_UNSAFE_DURABILITY", default_value_t = false)]
    pub allow_unsafe_durability: bool,
    /// On an empty database, also create the first organization, project, owner account and
    /// API key, and write their credentials once to this file (mode 0600). Needs the
    /// deployment's ENGRAM_SERVER_SECRET, so the gateways accept the key.
    #[arg(long, env = "ENGRAM_BOOTSTRAP_FILE")]
    pub bootstrap_file: Option<PathBuf>,
    #[arg(long, env = "ENGRAM_SERVER_SECRET", hide_env_values = true, value_parser = crate::config::secret)]
    pub server_secret: Option<secrecy::SecretString>,
}

/// `engram migrate`: apply pending schema migrations and exit (the deployment's migration
/// step; `engram serve` also migrates at start). Safe to run again: nothing left to apply.
pub async fn migrate_command(arguments: MigrateArgs) -> Result<()> {
    let storage = crate::config::open_storage(
        secrecy::ExposeSecret::expose_secret(&arguments.database_url),
        arguments.allow_unsafe_durability,
    )
    .await
    .context("cannot migrate the database")?;
    println!(
        "{} schema is up to date ({} migrations applied in all)",
        storage.backend_name(),
        storage.applied_migration_count().await?
    );
    if let Some(bootstrap_file) = &arguments.bootstrap_file {
        let Some(server_secret) = arguments.server_secret.as_ref() else {
            bail!("--bootstrap-file needs ENGRAM_SERVER_SECRET (the gateways' secret)");
        };
        let secrets = crate::bootstrap::ServerSecrets::from_hex(
            secrecy::ExposeSecret::expose_secret(server_secret),
        )
        .context("ENGRAM_SERVER_SECRET must be 64 hex characters")?;
        match crate::bootstrap::bootstrap_if_empty(&storage, bootstrap_file, &secrets).await? {
            Some(_) => println!(
                "created the first organization; its credentials are in {} (shown nowhere else)",
                bootstrap_file.display()
            ),
            None => println!("the database already has an organization; nothing bootstrapped"),
        }
    }
    Ok(())
}
