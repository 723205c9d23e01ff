//! Queue a consolidation of the project's episodes (the LLM compacts old ones).

use crate::{EngineError, MemoryEngine};
use engram_core::{Operation, Principal};
use engram_storage::tasks::TaskRecord;

impl MemoryEngine {
    pub async fn request_consolidation_for(
        &self,
        principal: &Principal,
    ) -> Result<TaskRecord, EngineError> {
        principal.authorize(Operation::RequestConsolidation)?;
        let task = self
            .storage
            .create_task(
                principal.scope(),
                engram_core::TaskKind::Consolidation,
                None,
                principal.actor().request_id.as_deref(),
            )
            .await?;
        self.governance.task_queued.notify_one();
        Ok(task)
    }
}
