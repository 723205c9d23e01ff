//! The feedback given on one memory.

use crate::{EngineError, MemoryEngine};
use engram_core::{MemoryId, Operation, Principal};
use engram_storage::feedback::FeedbackRecord;

impl MemoryEngine {
    pub async fn list_memory_feedback_for(
        &self,
        principal: &Principal,
        memory_id: MemoryId,
    ) -> Result<Vec<FeedbackRecord>, EngineError> {
        principal.authorize(Operation::ListMemoryFeedback)?;
        let memory = self.feedback_memory(principal, memory_id).await?;
        Ok(self
            .storage
            .feedback_on_memory(principal.memory_scope(), memory.id)
            .await?)
    }
}
