//! The engine's named entry points for the operator: each background job's work on a claimed
//! task (run as `Principal::operator` through the permission table), and the process's start,
//! stop and bench hooks. Besides the `*_for` use cases, this is all a job or a CLI may call.

mod consolidation;
mod evaluation;
mod file_ingest;
mod message_derivation;
mod reembedding;

use crate::consolidation::ConsolidationLimits;
use crate::{DataGovernance, EngineError, IndexApplier, MemoryEngine};
use engram_core::{Operation, Principal};
use engram_storage::tasks::ClaimedTask;
use std::sync::Arc;
use std::time::Duration;

/// How long a claimed task of each job stays with its runner without a progress write.
pub const FILE_INGEST_LEASE: Duration = Duration::from_secs(120);
pub const MESSAGE_DERIVATION_LEASE: Duration = Duration::from_secs(300);
pub const CONSOLIDATION_LEASE: Duration = Duration::from_secs(600);
pub const EVALUATION_LEASE: Duration = Duration::from_secs(600);
pub const REEMBEDDING_LEASE: Duration = Duration::from_secs(300);

/// The operator in the claimed task's project, acting for the request that queued it.
fn operator_for(task: &ClaimedTask, job: &str) -> Principal {
    Principal::operator(task.scope, job).for_request(task.request_id.clone())
}

/// Attempts at a job's write while the project keeps switching embedding models under it.
const ATTEMPTS_ACROSS_SPACE_SWITCHES: usize = 3;

/// Runs `write` again when a switch of the project's embedding model refused it (the space
/// was forgotten then, so the next attempt embeds in the new one): work a request handed to
/// a job is not lost to a move.
async fn again_after_space_switch<T, Attempt>(
    mut write: impl FnMut() -> Attempt,
) -> Result<T, crate::EngineError>
where
    Attempt: std::future::Future<Output = Result<T, crate::EngineError>>,
{
    let mut attempt = 1;
    loop {
        match write().await {
            Err(crate::EngineError::EmbeddingSpaceChanged)
                if attempt < ATTEMPTS_ACROSS_SPACE_SWITCHES =>
            {
                attempt += 1;
                tracing::info!(
                    attempt,
                    "the project switched embedding models under a job's write; writing again"
                );
            }
            outcome => return outcome,
        }
    }
}

/// `Err` (the task's error text) when the table does not let the job's principal do it.
fn authorized(principal: &Principal, operation: Operation) -> Result<(), String> {
    principal
        .authorize(operation)
        .map_err(|denied| denied.to_string())
}

impl MemoryEngine {
    /// The file-ingest job: store the claimed file's chunks as memories.
    pub async fn run_file_ingest_task(
        &self,
        task: &ClaimedTask,
    ) -> Result<serde_json::Value, String> {
        let principal = operator_for(task, "file-ingest");
        authorized(&principal, Operation::IngestFile)?;
        file_ingest::ingest_claimed_file(self, &principal, task).await
    }

    /// The message-derivation job: derive memories from the claimed batch of messages.
    pub async fn run_message_derivation_task(
        &self,
        task: &ClaimedTask,
    ) -> Result<serde_json::Value, String> {
        let principal = operator_for(task, "message-derivation");
        authorized(&principal, Operation::DeriveFromMessages)?;
        message_derivation::derive_claimed_batch(self, &principal, task).await
    }

    /// The consolidation job: merge the claimed project's near-duplicates within `limits`.
    pub async fn run_consolidation_task(
        &self,
        task: &ClaimedTask,
        limits: ConsolidationLimits,
    ) -> Result<serde_json::Value, String> {
        let principal = operator_for(task, "consolidation");
        authorized(&principal, Operation::ConsolidateMemories)?;
        consolidation::consolidate_claimed(self, &principal, task, limits).await
    }

    /// The re-embedding job: move the claimed project's memories to the embedding it is
    /// changing to, then switch its searches there at once.
    pub async fn run_reembedding_task(
        &self,
        task: &ClaimedTask,
    ) -> Result<serde_json::Value, String> {
        let principal = operator_for(task, "reembedding-runner");
        authorized(&principal, Operation::ReembedProject)?;
        reembedding::reembed_claimed(self, &principal, task).await
    }

    /// The evaluation job: run the claimed evaluation run and record its figures.
    pub async fn run_evaluation_task(
        &self,
        task: &ClaimedTask,
    ) -> Result<serde_json::Value, String> {
        let principal = operator_for(task, "evaluation");
        authorized(&principal, Operation::RunEvaluation)?;
        evaluation::evaluate_claimed(self, task).await
    }

    /// The store of work across projects (task claims, sweeps, the outbox) the jobs of this
    /// process run on. Front doors never call it (an architecture test).
    pub fn maintenance_store(&self) -> &engram_storage::MaintenanceStore {
        self.applier.maintenance_store()
    }

    /// Notified when a use case queues a task, so runners need not wait for their poll.
    pub fn task_queued(&self) -> Arc<tokio::sync::Notify> {
        self.governance.task_queued.clone()
    }

    /// The indexer's and reconciler's handle on the outbox and the vector index.
    pub fn applier(&self) -> Arc<IndexApplier> {
        self.applier.clone()
    }

    /// The erasure runner's and retention sweeper's handle.
    pub fn data_governance(&self) -> Arc<DataGovernance> {
        self.governance.clone()
    }

    /// Before the process exits: recall events of answered searches written, the index
    /// flushed.
    pub async fn flush_before_exit(&self) -> Result<(), EngineError> {
        self.recall_events.flush().await;
        self.index.flush().await?;
        Ok(())
    }

    /// Benches: forget cached query embeddings, to time cold queries.
    pub fn clear_query_cache(&self) {
        self.query_embeddings.clear();
    }
}
