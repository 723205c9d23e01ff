//! Consolidation in the background: a scheduler queues one `consolidation` task per project
//! every interval (none while one is still open), and a runner — where the engine is — merges
//! each project's near-duplicate memories, bounded per run, reporting what it did as the
//! task's result.

use crate::periodic::{FirstRun, Schedule, run_periodic};
use engram_core::TaskKind;
use engram_engine::MemoryEngine;
use engram_engine::consolidation::ConsolidationLimits;
use engram_engine::jobs::CONSOLIDATION_LEASE;
use engram_storage::MaintenanceStore;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, watch};

pub async fn run_consolidation_runner(
    engine: Arc<MemoryEngine>,
    limits: ConsolidationLimits,
    shutdown: watch::Receiver<bool>,
) {
    crate::tasks::serve_tasks(
        engine.maintenance_store().clone(),
        engine.task_queued(),
        &[TaskKind::Consolidation],
        CONSOLIDATION_LEASE,
        shutdown,
        |task| {
            let engine = engine.clone();
            async move { engine.run_consolidation_task(&task, limits).await }
        },
    )
    .await;
}

/// Queue a consolidation for every project each `interval` (the first one interval after
/// start), unless the project has one queued or running.
pub async fn run_consolidation_scheduler(
    storage: MaintenanceStore,
    wake: Arc<Notify>,
    interval: Duration,
    shutdown: watch::Receiver<bool>,
) {
    let schedule = Schedule {
        name: "consolidation scheduler",
        interval,
        first_run: FirstRun::AfterInterval,
    };
    let (storage, wake) = (&storage, &wake);
    run_periodic(schedule, shutdown, move || async move {
        match queue_consolidations(storage).await {
            Ok(0) => {}
            Ok(queued) => {
                tracing::info!(queued, "consolidation tasks queued");
                wake.notify_one();
            }
            Err(error) => {
                tracing::warn!(%error, "cannot queue consolidations; retrying next period")
            }
        }
    })
    .await;
}

async fn queue_consolidations(
    storage: &MaintenanceStore,
) -> Result<usize, engram_storage::StorageError> {
    let mut queued = 0;
    for scope in storage.all_project_scopes().await? {
        if storage
            .open_task_exists(&scope, TaskKind::Consolidation)
            .await?
        {
            continue;
        }
        storage
            .create_task(&scope, TaskKind::Consolidation, None, None)
            .await?;
        queued += 1;
    }
    Ok(queued)
}
