//! Evaluation in the background: a runner — where the engine is, since it searches —
//! executes queued `evaluation_run` tasks and records each run's figures; a scheduler queues
//! the next run of every scheduled set once its interval has passed.

use crate::periodic::{FirstRun, Schedule, run_periodic};
use chrono::Utc;
use engram_core::TaskKind;
use engram_core::recall::EvalTrigger;
use engram_engine::MemoryEngine;
use engram_engine::jobs::EVALUATION_LEASE;
use engram_storage::MaintenanceStore;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, watch};

pub async fn run_evaluation_runner(engine: Arc<MemoryEngine>, shutdown: watch::Receiver<bool>) {
    crate::tasks::serve_tasks(
        engine.maintenance_store().clone(),
        engine.task_queued(),
        &[TaskKind::EvaluationRun],
        EVALUATION_LEASE,
        shutdown,
        |task| {
            let engine = engine.clone();
            async move { engine.run_evaluation_task(&task).await }
        },
    )
    .await;
}

/// Every `interval`: queue the due runs of scheduled sets (recall events past their
/// retention are swept with the other stores by the retention sweeper).
pub async fn run_evaluation_scheduler(
    storage: MaintenanceStore,
    wake: Arc<Notify>,
    interval: Duration,
    shutdown: watch::Receiver<bool>,
) {
    let schedule = Schedule {
        name: "evaluation scheduler",
        interval,
        first_run: FirstRun::AfterInterval,
    };
    let (storage, wake) = (&storage, &wake);
    run_periodic(schedule, shutdown, move || async move {
        match queue_due_runs(storage).await {
            Ok(0) => {}
            Ok(queued) => {
                tracing::info!(queued, "scheduled evaluation runs queued");
                wake.notify_one();
            }
            Err(error) => {
                tracing::warn!(%error, "cannot queue scheduled evaluations; retrying next period")
            }
        }
    })
    .await;
}

/// Queue one run of each set whose schedule is due; returns how many.
pub async fn queue_due_runs(
    storage: &MaintenanceStore,
) -> Result<usize, engram_storage::StorageError> {
    let now = Utc::now();
    let mut queued = 0;
    for scope in storage.all_project_scopes().await? {
        for set in storage.eval_sets_due(&scope, now).await? {
            let profile = set
                .profile
                .clone()
                .unwrap_or_else(|| engram_engine::profiles::DEFAULT_PROFILE.to_string());
            storage
                .queue_eval_run(
                    &scope,
                    set.id,
                    &profile,
                    None,
                    EvalTrigger::Scheduled,
                    TaskKind::EvaluationRun,
                    None,
                )
                .await?;
            queued += 1;
        }
    }
    Ok(queued)
}
