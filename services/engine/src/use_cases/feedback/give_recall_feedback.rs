//! Rate a search answer, or one memory it returned.

use super::{FeedbackRequest, refuse_if_any};
use crate::{EngineError, MemoryEngine};
use engram_core::NotFoundKind;
use engram_core::{FieldError, MemoryId, Operation, Principal};
use engram_storage::feedback::FeedbackRecord;

impl MemoryEngine {
    pub async fn give_recall_feedback_for(
        &self,
        principal: &Principal,
        recall_id: uuid::Uuid,
        memory_id: Option<String>,
        feedback: FeedbackRequest,
    ) -> Result<FeedbackRecord, EngineError> {
        principal.authorize(Operation::GiveRecallFeedback)?;
        let mut errors = Vec::new();
        let run_id = feedback.run_id;
        let (rating, text) = feedback.parse(&mut errors);
        refuse_if_any(errors)?;
        let recall = self.known_recall(principal, recall_id).await?;
        let memory = match memory_id {
            // An id that is not a memory id names no memory.
            Some(memory_id) => {
                let memory_id: MemoryId = memory_id
                    .parse()
                    .map_err(|_| EngineError::NotFound(NotFoundKind::Memory))?;
                Some(self.feedback_memory(principal, memory_id).await?)
            }
            None => None,
        };
        // A rating of one result must be about a memory that search returned.
        if let (Some(recall), Some(memory)) = (&recall, &memory)
            && !crate::recall_metrics::recalled_ids(recall).contains(&memory.id)
        {
            return Err(engram_core::InvalidInput(vec![FieldError::new(
                "memory_id",
                "this memory was not among the results of that recall",
            )])
            .into());
        }
        let recall_user = recall.and_then(|recall| recall.user_id);
        self.record_feedback(
            principal,
            memory,
            Some(recall_id),
            recall_user,
            rating,
            text,
            run_id,
        )
        .await
    }
}
