//! Consolidation in the background: a scheduler queues one `consolidation` task per project
//! every interval (none while one is still open), and a runner — where the engine is — merges
//! each project's near-duplicate memories, bounded per run, reporting what it did as the
//! task's result.

use crate::periodic::{FirstRun, Schedule, run_periodic};
use chrono::Utc;
use engram_core::TaskKind;
use engram_core::usage::UsageUnit;
use engram_engine::MemoryEngine;
use engram_engine::consolidation::ConsolidationLimits;
use engram_storage::MaintenanceStore;
use engram_storage::tasks::ClaimedTask;
use engram_storage::usage::UsageIncrement;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, watch};

const TASK_LEASE: Duration = Duration::from_secs(600);

pub async fn run_consolidation_runner(
    engine: Arc<MemoryEngine>,
    limits: ConsolidationLimits,
    shutdown: watch::Receiver<bool>,
) {
    crate::tasks::serve_tasks(
        engine.maintenance_store().clone(),
        engine.governance().task_queued.clone(),
        &[TaskKind::Consolidation],
        TASK_LEASE,
        shutdown,
        |task| {
            let engine = engine.clone();
            async move { consolidate_claimed(&engine, &task, limits).await }
        },
    )
    .await;
}

async fn consolidate_claimed(
    engine: &MemoryEngine,
    task: &ClaimedTask,
    limits: ConsolidationLimits,
) -> Result<serde_json::Value, String> {
    let mut actor = engram_core::audit::Actor::system("consolidation");
    actor.request_id = task.request_id.clone();
    let report = engine
        .consolidate_project(&task.scope, limits, &actor)
        .await
        .map_err(|error| error.to_string())?;
    // LLM tokens were billed with each call's record; summaries written and embedded here.
    let scope = &task.scope;
    let increments: Vec<UsageIncrement> = [
        (UsageUnit::MemoriesWritten, report.memories_written),
        (UsageUnit::TokensEmbedded, report.tokens_embedded),
    ]
    .into_iter()
    .filter(|(_, quantity)| *quantity > 0)
    .map(|(unit, quantity)| UsageIncrement {
        organization_id: scope.organization_id(),
        project_id: scope.project_id(),
        credential: "consolidation".to_string(),
        unit,
        at: Utc::now(),
        quantity: i64::try_from(quantity).unwrap_or(i64::MAX),
    })
    .collect();
    engine
        .maintenance_store()
        .add_usage(&increments)
        .await
        .map_err(|error| error.to_string())?;
    let examined = i64::try_from(report.examined).unwrap_or(i64::MAX);
    engine
        .maintenance_store()
        .task_progress(task.id, examined, examined, TASK_LEASE)
        .await
        .map_err(|error| error.to_string())?;
    serde_json::to_value(&report).map_err(|error| error.to_string())
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
