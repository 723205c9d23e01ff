//! Evaluation in the background: a runner — where the engine is, since it searches —
//! executes queued `evaluation_run` tasks and records each run's figures; a scheduler queues
//! the next run of every scheduled set once its interval has passed.

use crate::periodic::{FirstRun, Schedule, run_periodic};
use chrono::Utc;
use engram_core::TaskKind;
use engram_core::recall::EvalTrigger;
use engram_engine::MemoryEngine;
use engram_storage::MaintenanceStore;
use engram_storage::tasks::ClaimedTask;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, watch};

const TASK_LEASE: Duration = Duration::from_secs(600);

pub async fn run_evaluation_runner(engine: Arc<MemoryEngine>, shutdown: watch::Receiver<bool>) {
    crate::tasks::serve_tasks(
        engine.maintenance_store().clone(),
        engine.governance().task_queued.clone(),
        &[TaskKind::EvaluationRun],
        TASK_LEASE,
        shutdown,
        |task| {
            let engine = engine.clone();
            async move { evaluate_claimed(&engine, &task).await }
        },
    )
    .await;
}

async fn evaluate_claimed(
    engine: &MemoryEngine,
    task: &ClaimedTask,
) -> Result<serde_json::Value, String> {
    let run_id = task
        .subject
        .as_deref()
        .and_then(|subject| subject.parse::<uuid::Uuid>().ok())
        .ok_or_else(|| "the task names no evaluation run".to_string())?;
    let outcome = evaluate_run(engine, task, run_id).await;
    if let Err(error) = &outcome {
        // A run whose task failed ends failed too: never left queued or running for a
        // caller to wait on.
        let storage = engine.maintenance_store();
        if let Ok(Some(run)) = storage.eval_run(&task.scope, run_id).await
            && run.status.is_open()
            && let Err(failure) = storage
                .finish_eval_run(&task.scope, run_id, Err(error.clone()))
                .await
        {
            tracing::warn!(%run_id, %failure, "could not mark a failed evaluation run failed");
        }
    }
    outcome
}

async fn evaluate_run(
    engine: &MemoryEngine,
    task: &ClaimedTask,
    run_id: uuid::Uuid,
) -> Result<serde_json::Value, String> {
    let storage = engine.maintenance_store();
    let run = storage
        .eval_run(&task.scope, run_id)
        .await
        .map_err(|error| error.to_string())?
        .ok_or_else(|| format!("evaluation run {run_id} does not exist"))?;
    storage
        .start_eval_run(&task.scope, run_id)
        .await
        .map_err(|error| error.to_string())?;
    let (progress_sender, mut progress_receiver) = watch::channel((0usize, 0usize));
    // Progress is written by a side task so the evaluation never waits for the database.
    let progress_writer = {
        let storage = storage.clone();
        let task_id = task.id;
        tokio::spawn(async move {
            while progress_receiver.changed().await.is_ok() {
                let (done, total) = *progress_receiver.borrow_and_update();
                let _ = storage
                    .task_progress(task_id, done as i64, total as i64, TASK_LEASE)
                    .await;
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        })
    };
    let outcome = engine
        .run_evaluation(&task.scope, &run, |done, total| {
            let _ = progress_sender.send((done, total));
        })
        .await
        .map_err(|error| error.to_string());
    drop(progress_sender);
    let _ = progress_writer.await;
    storage
        .finish_eval_run(&task.scope, run_id, outcome.clone())
        .await
        .map_err(|error| error.to_string())?;
    let outcome = outcome?;
    if outcome.regression {
        tracing::warn!(
            run_id = %run_id,
            reasons = ?outcome.regression_reasons,
            "evaluation run flagged a regression"
        );
    }
    Ok(serde_json::json!({
        "run_id": run_id.to_string(),
        "metrics": outcome.metrics,
        "comparison": outcome.comparison,
        "regression": outcome.regression,
        "regression_reasons": outcome.regression_reasons,
    }))
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
