//! Page through runs, newest first, filtered by end-user, agent, session, status and time; an
//! end-user token sees only its own end-user's.

use crate::{EngineError, MemoryEngine};
use chrono::Utc;
use engram_core::runs::{RunFilter, RunRecord, run_page_errors};
use engram_core::{ExternalId, InvalidInput, Operation, Principal};

pub struct ListRunsRequest {
    pub filter: RunFilter,
    pub user_id: Option<ExternalId>,
    /// Exclusive: the page starts after (older than) this run.
    pub before: Option<uuid::Uuid>,
    pub limit: u64,
}

impl MemoryEngine {
    pub async fn list_runs_for(
        &self,
        principal: &Principal,
        request: ListRunsRequest,
    ) -> Result<(Vec<RunRecord>, Option<uuid::Uuid>), EngineError> {
        principal.authorize(Operation::ListRuns)?;
        let errors = run_page_errors(request.limit);
        if !errors.is_empty() {
            return Err(InvalidInput(errors).into());
        }
        let mut filter = request.filter;
        filter.user_id = principal
            .end_user_subject(request.user_id, "user_id")?
            .map(|id| id.as_str().to_string());
        Ok(self
            .storage
            .runs(
                principal.memory_scope(),
                &filter,
                request.before,
                request.limit,
                Utc::now(),
            )
            .await?)
    }
}
