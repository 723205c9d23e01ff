//! The retention sweeper: every interval, each project's memories past their `expires_at` or
//! their kind's retention are hard-deleted from the database and the index (immutable and
//! held ones are exempt), and so are the records of every store the project keeps for a
//! number of days (messages, session state, feedback, files, recall events). Every worker
//! may run it: removing a record twice is a no-op.

use crate::periodic::{FirstRun, Schedule, run_periodic};
use engram_engine::DataGovernance;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// One sweep over every project; returns how many records were removed.
pub async fn sweep_all_projects(
    engine: &DataGovernance,
) -> Result<u64, engram_engine::EngineError> {
    let mut removed = 0;
    for scope in engine.maintenance_store().all_project_scopes().await? {
        removed += engine.run_retention_sweep(&scope).await?;
    }
    Ok(removed)
}

pub async fn run_retention_sweeper(
    engine: Arc<DataGovernance>,
    interval: Duration,
    shutdown: watch::Receiver<bool>,
) {
    for store in engram_storage::subject_data::SubjectStore::ALL {
        if !matches!(
            store.declaration().retention,
            engram_storage::subject_data::StoreRetention::WithItsSource(_)
                | engram_storage::subject_data::StoreRetention::UntilDeleted(_)
        ) {
            metrics::counter!("engram_retention_deleted_total", "store" => store.declaration().name)
                .increment(0);
        }
    }
    let schedule = Schedule {
        name: "retention sweeper",
        interval,
        first_run: FirstRun::AtStart,
    };
    let engine = &engine;
    run_periodic(schedule, shutdown, move || async move {
        match sweep_all_projects(engine).await {
            Ok(0) => {}
            Ok(removed) => tracing::info!(removed, "retention sweep finished"),
            Err(error) => tracing::warn!(%error, "retention sweep failed; retrying next period"),
        }
    })
    .await;
}
