//! Browse recorded recalls, newest first, by end-user, session, memory, run, profile and time;
//! an end-user token sees only its own end-user's.

use crate::{EngineError, MemoryEngine};
use engram_core::runs::{RecallFilter, run_page_errors};
use engram_core::{ExternalId, InvalidInput, Operation, Principal};
use engram_storage::recall_quality::RecallEventRecord;

pub struct ListRecallEventsRequest {
    pub filter: RecallFilter,
    pub user_id: Option<ExternalId>,
    /// Exclusive: the page starts after (older than) this recall.
    pub before: Option<uuid::Uuid>,
    pub limit: u64,
}

impl MemoryEngine {
    pub async fn list_recall_events_for(
        &self,
        principal: &Principal,
        request: ListRecallEventsRequest,
    ) -> Result<(Vec<RecallEventRecord>, Option<uuid::Uuid>), EngineError> {
        principal.authorize(Operation::ListRecallEvents)?;
        let errors = run_page_errors(request.limit);
        if !errors.is_empty() {
            return Err(InvalidInput(errors).into());
        }
        let mut filter = request.filter;
        filter.user_id = principal
            .end_user_subject(request.user_id, "user_id")?
            .map(|id| id.as_str().to_string());
        self.recall_events.flush().await;
        Ok(self
            .storage
            .recall_events_page(
                principal.memory_scope(),
                &filter,
                request.before,
                request.limit,
            )
            .await?)
    }
}
