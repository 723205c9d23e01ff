//! Rate one memory, optionally naming the recall it came from (which must have returned it).

use super::{FeedbackRequest, refuse_if_any};
use crate::{EngineError, MemoryEngine};
use engram_core::{FieldError, MemoryId, Operation, Principal};
use engram_storage::feedback::FeedbackRecord;

impl MemoryEngine {
    pub async fn give_memory_feedback_for(
        &self,
        principal: &Principal,
        memory_id: MemoryId,
        recall_id: Option<String>,
        feedback: FeedbackRequest,
    ) -> Result<FeedbackRecord, EngineError> {
        principal.authorize(Operation::GiveMemoryFeedback)?;
        let mut errors = Vec::new();
        let run_id = feedback.run_id;
        let (rating, text) = feedback.parse(&mut errors);
        let recall_id = recall_id.and_then(|text| {
            text.parse::<uuid::Uuid>()
                .map_err(|_| {
                    errors.push(FieldError::new(
                        "recall_id",
                        "expected the recall_id of a search answer",
                    ))
                })
                .ok()
        });
        refuse_if_any(errors)?;
        let memory = self.feedback_memory(principal, memory_id).await?;
        if let Some(recall_id) = recall_id {
            // The recall must be the caller's and must have returned this memory: otherwise
            // the feedback would carry another search's id to whoever reads the memory's
            // feedback.
            if let Some(recall) = self.known_recall(principal, recall_id).await?
                && !crate::recall_metrics::recalled_ids(&recall).contains(&memory.id)
            {
                return Err(engram_core::InvalidInput(vec![FieldError::new(
                    "recall_id",
                    "this memory was not among the results of that recall",
                )])
                .into());
            }
        }
        self.record_feedback(
            principal,
            Some(memory),
            recall_id,
            None,
            rating,
            text,
            run_id,
        )
        .await
    }
}
