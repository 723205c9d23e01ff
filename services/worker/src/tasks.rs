//! The task runner: claims queued background tasks (subject erasure) one at a time with a
//! lease, writes their progress as they go and their receipt or error at the end. A runner
//! that dies leaves its task to whichever runner claims it after the lease.

use engram_core::{TaskKind, TaskStatus};
use engram_engine::DataGovernance;
use engram_storage::MaintenanceStore;
use engram_storage::tasks::ClaimedTask;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, watch};

/// How long a claimed task stays with its runner without a progress write.
const TASK_LEASE: Duration = Duration::from_secs(60);
const IDLE_POLL: Duration = Duration::from_secs(1);
/// Progress is written at most this often.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

pub const TASKS_FINISHED_TOTAL: &str = "engram_tasks_finished_total";

/// Claim and run tasks of `kinds` one at a time until `shutdown` turns true, recording
/// each one's result or error. Wakes when `wake` is notified (a task queued in this
/// process), and once a second for tasks queued by other processes.
pub async fn serve_tasks<Run, Running>(
    storage: MaintenanceStore,
    wake: Arc<Notify>,
    kinds: &'static [TaskKind],
    lease: Duration,
    mut shutdown: watch::Receiver<bool>,
    run: Run,
) where
    Run: Fn(ClaimedTask) -> Running,
    Running: Future<Output = Result<serde_json::Value, String>>,
{
    loop {
        if *shutdown.borrow() {
            break;
        }
        match storage.claim_next_task(kinds, lease).await {
            Ok(Some(task)) => {
                tracing::info!(task_id = %task.id, kind = %task.kind, "task started");
                let task_id = task.id;
                let kind = task.kind;
                let outcome = run(task).await;
                let status = if outcome.is_ok() {
                    TaskStatus::Succeeded
                } else {
                    TaskStatus::Failed
                };
                if let Err(error) = &outcome {
                    tracing::warn!(%task_id, %error, "task failed");
                }
                metrics::counter!(TASKS_FINISHED_TOTAL, "kind" => kind.as_str(), "status" => status.as_str())
                    .increment(1);
                if let Err(error) = storage.finish_task(task_id, outcome).await {
                    // The lease runs out and another claim runs the (idempotent) task again.
                    tracing::error!(%task_id, %error, "cannot record the end of a task");
                }
            }
            Ok(None) => {
                tokio::select! {
                    _ = wake.notified() => {}
                    _ = tokio::time::sleep(IDLE_POLL) => {}
                    _ = shutdown.changed() => {}
                }
            }
            Err(error) => {
                tracing::warn!(%error, "cannot claim a task; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(IDLE_POLL * 5) => {}
                    _ = shutdown.changed() => {}
                }
            }
        }
    }
    tracing::info!(?kinds, "task runner stopped");
}

/// Run queued subject erasures (of one project, or of every project of an organization)
/// until `shutdown` turns true.
pub async fn run_task_runner(engine: Arc<DataGovernance>, shutdown: watch::Receiver<bool>) {
    serve_tasks(
        engine.maintenance_store().clone(),
        engine.task_queued.clone(),
        &[
            TaskKind::SubjectErasure,
            TaskKind::OrganizationSubjectErasure,
        ],
        TASK_LEASE,
        shutdown,
        |task| {
            let engine = engine.clone();
            async move {
                let Some(user_id) = task.subject.clone() else {
                    return Err("the erasure task names no subject".to_string());
                };
                if task.kind == TaskKind::OrganizationSubjectErasure {
                    run_organization_erasure(&engine, &task, &user_id).await
                } else {
                    run_erasure(&engine, &task, &user_id).await
                }
            }
        },
    )
    .await;
}

/// Progress an erasure reports, written to its task by a side task (at most every
/// `PROGRESS_EVERY`), so the erasure never waits for the database to record it.
struct ProgressWriter {
    sender: watch::Sender<(u64, u64)>,
    writer: tokio::task::JoinHandle<()>,
}

impl ProgressWriter {
    fn spawn(engine: &DataGovernance, task_id: uuid::Uuid) -> Self {
        let storage = engine.maintenance_store().clone();
        let (sender, mut receiver) = watch::channel((0u64, 0u64));
        let writer = tokio::spawn(async move {
            while receiver.changed().await.is_ok() {
                let (done, total) = *receiver.borrow_and_update();
                if let Err(error) = storage
                    .task_progress(task_id, done as i64, total as i64, TASK_LEASE)
                    .await
                {
                    tracing::warn!(%error, "cannot record task progress");
                }
                tokio::time::sleep(PROGRESS_EVERY).await;
            }
        });
        Self { sender, writer }
    }

    fn report(&self, done: u64, total: u64) {
        self.sender.send_replace((done, total));
    }

    /// Waits for the last report to be written, then, for a finished erasure, records
    /// `total` of `total` done.
    async fn finish(self, engine: &DataGovernance, task_id: uuid::Uuid, total: Option<u64>) {
        drop(self.sender);
        let _ = self.writer.await;
        let Some(total) = total else {
            return;
        };
        let total = total as i64;
        if let Err(error) = engine
            .maintenance_store()
            .task_progress(task_id, total, total, TASK_LEASE)
            .await
        {
            tracing::warn!(%error, "cannot record final task progress");
        }
    }
}

/// Every project of the task's organization, one after the other; progress counts projects.
async fn run_organization_erasure(
    engine: &Arc<DataGovernance>,
    task: &engram_storage::tasks::ClaimedTask,
    user_id: &str,
) -> Result<serde_json::Value, String> {
    let progress = ProgressWriter::spawn(engine, task.id);
    let receipt = engine
        .run_organization_erasure_task(task, user_id, |done, total| progress.report(done, total))
        .await;
    let projects = receipt
        .as_ref()
        .ok()
        .map(|receipt| receipt.projects.len() as u64);
    progress.finish(engine, task.id, projects).await;
    let receipt = receipt.map_err(|error| error.to_string())?;
    serde_json::to_value(&receipt).map_err(|error| error.to_string())
}

async fn run_erasure(
    engine: &Arc<DataGovernance>,
    task: &engram_storage::tasks::ClaimedTask,
    user_id: &str,
) -> Result<serde_json::Value, String> {
    let progress = ProgressWriter::spawn(engine, task.id);
    let receipt = engine
        .run_subject_erasure_task(task, user_id, |done, total| progress.report(done, total))
        .await;
    let memories = receipt
        .as_ref()
        .ok()
        .map(|receipt| receipt.removed.memories);
    progress.finish(engine, task.id, memories).await;
    let receipt = receipt.map_err(|error| error.to_string())?;
    serde_json::to_value(&receipt).map_err(|error| error.to_string())
}
