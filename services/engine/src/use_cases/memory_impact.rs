//! The blast radius of a memory: every recall that returned it, context that packed it and
//! run it was injected into, newest first, with counts since a moment — what a person sees
//! before correcting, deleting or rating a memory `wrong`.

use crate::{EngineError, MemoryEngine};
use chrono::{DateTime, Utc};
use engram_core::runs::{MemoryImpactCounts, MemoryUseRecord, run_page_errors};
use engram_core::{InvalidInput, MemoryId, Operation, Principal};

/// Default window of the counts: the last 30 days.
pub const DEFAULT_IMPACT_DAYS: i64 = 30;

pub struct MemoryImpactRequest {
    pub memory_id: MemoryId,
    /// Counts from here; default 30 days ago.
    pub since: Option<DateTime<Utc>>,
    /// Exclusive: the page starts after (older than) this use.
    pub before: Option<uuid::Uuid>,
    pub limit: u64,
}

#[derive(Clone, Debug)]
pub struct MemoryImpact {
    pub memory_id: MemoryId,
    pub since: DateTime<Utc>,
    pub counts: MemoryImpactCounts,
    pub uses: Vec<MemoryUseRecord>,
    pub next_cursor: Option<uuid::Uuid>,
}

impl MemoryEngine {
    pub async fn memory_impact_for(
        &self,
        principal: &Principal,
        request: MemoryImpactRequest,
    ) -> Result<MemoryImpact, EngineError> {
        principal.authorize(Operation::MemoryImpact)?;
        let errors = run_page_errors(request.limit);
        if !errors.is_empty() {
            return Err(InvalidInput(errors).into());
        }
        // The memory must be one the caller sees (a deleted one keeps its uses: ids only).
        let memory_scope = principal.memory_scope();
        if !self
            .storage
            .memories_by_id(memory_scope, &[request.memory_id])
            .await?
            .contains_key(&request.memory_id)
        {
            return Err(EngineError::NotFound(engram_core::NotFoundKind::Memory));
        }
        // Uses still queued with their recall events are counted too.
        self.recall_events.flush().await;
        let since = request
            .since
            .unwrap_or_else(|| Utc::now() - chrono::Duration::days(DEFAULT_IMPACT_DAYS));
        let counts = self
            .storage
            .memory_impact_counts(memory_scope, request.memory_id, since)
            .await?;
        let (uses, next_cursor) = self
            .storage
            .memory_uses(
                memory_scope,
                request.memory_id,
                request.before,
                request.limit,
            )
            .await?;
        Ok(MemoryImpact {
            memory_id: request.memory_id,
            since,
            counts,
            uses,
            next_cursor,
        })
    }
}
