//! One search as it was recorded. An end-user token sees only its own user's.

use crate::{EngineError, MemoryEngine};
use engram_core::NotFoundKind;
use engram_core::{Operation, Principal};
use engram_storage::recall_quality::RecallEventRecord;

impl MemoryEngine {
    pub async fn get_recall_event_for(
        &self,
        principal: &Principal,
        recall_id: uuid::Uuid,
    ) -> Result<RecallEventRecord, EngineError> {
        principal.authorize(Operation::GetRecallEvent)?;
        self.visible_recall_event(principal, recall_id).await
    }

    /// The recorded search, once everything queued before this request is written; another
    /// project's, or for an end-user token another end-user's, is missing.
    pub(crate) async fn visible_recall_event(
        &self,
        principal: &Principal,
        recall_id: uuid::Uuid,
    ) -> Result<RecallEventRecord, EngineError> {
        self.recall_events.flush().await;
        let event = self
            .storage
            .recall_event(principal.memory_scope(), recall_id)
            .await?
            .ok_or(EngineError::NotFound(NotFoundKind::Recall))?;
        Ok(event)
    }
}
