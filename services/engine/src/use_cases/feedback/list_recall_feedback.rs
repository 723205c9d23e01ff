//! The feedback given on one search answer: for an end-user token, only its own user's.

use crate::{EngineError, MemoryEngine};
use engram_core::{Operation, Principal};
use engram_storage::feedback::FeedbackRecord;

impl MemoryEngine {
    pub async fn list_recall_feedback_for(
        &self,
        principal: &Principal,
        recall_id: uuid::Uuid,
    ) -> Result<Vec<FeedbackRecord>, EngineError> {
        principal.authorize(Operation::ListRecallFeedback)?;
        self.known_recall(principal, recall_id).await?;
        let feedback = self
            .storage
            .feedback_on_recall(principal.memory_scope(), recall_id)
            .await?;
        Ok(feedback)
    }
}
