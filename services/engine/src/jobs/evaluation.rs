//! The evaluation job's work on one claimed run: its profile (and the one it is compared
//! with), the comparison and the regression check, with progress written as it goes.

use super::EVALUATION_LEASE;
use crate::MemoryEngine;
use engram_storage::tasks::ClaimedTask;
use std::time::Duration;
use tokio::sync::watch;

pub(super) async fn evaluate_claimed(
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
        let storage = &engine.storage;
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
    let storage = &engine.storage;
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
        let tasks = engine.maintenance_store().clone();
        let task_id = task.id;
        tokio::spawn(async move {
            while progress_receiver.changed().await.is_ok() {
                let (done, total) = *progress_receiver.borrow_and_update();
                let _ = tasks
                    .task_progress(task_id, done as i64, total as i64, EVALUATION_LEASE)
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
