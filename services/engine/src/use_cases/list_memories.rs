//! List memories newest first, one page at a time.

use crate::{EngineError, MemoryEngine};
use engram_core::{Operation, Principal};
use engram_storage::{MemoryListFilter, MemoryPage};

/// A parsed list request; `filter.subject.user_id` is the caller's choice, which an
/// end-user token may only narrow to its own end-user.
#[derive(Clone, Debug)]
pub struct ListMemoriesRequest {
    pub filter: MemoryListFilter,
    /// Where the `user_id` filter came from in the caller's request, for a refusal.
    pub user_id_field: &'static str,
}

impl MemoryEngine {
    pub async fn list_memories_for(
        &self,
        principal: &Principal,
        request: ListMemoriesRequest,
    ) -> Result<MemoryPage, EngineError> {
        principal.authorize(Operation::ListMemories)?;
        let limit = i64::try_from(request.filter.limit).unwrap_or(i64::MAX);
        let limit_errors = engram_core::limits::list_limit_errors("limit", limit);
        if !limit_errors.is_empty() {
            return Err(engram_core::InvalidInput(limit_errors).into());
        }
        let filter = confined_filter(principal, request)?;
        Ok(self
            .storage
            .list_memories(principal.memory_scope(), &filter)
            .await?)
    }

    /// How many memories the list's filter matches in all (every page, its cursor and
    /// limit aside), under the same confinement as the list.
    pub async fn count_listed_memories_for(
        &self,
        principal: &Principal,
        request: ListMemoriesRequest,
    ) -> Result<u64, EngineError> {
        principal.authorize(Operation::ListMemories)?;
        let mut filter = confined_filter(principal, request)?;
        filter.after = None;
        Ok(self
            .storage
            .count_memories(principal.memory_scope(), &filter)
            .await?)
    }
}

/// The request's filter with its `user_id` as this principal may ask for it: an end-user
/// token only ever its own.
fn confined_filter(
    principal: &Principal,
    request: ListMemoriesRequest,
) -> Result<MemoryListFilter, EngineError> {
    let mut filter = request.filter;
    filter.subject.user_id =
        principal.end_user_subject(filter.subject.user_id.take(), request.user_id_field)?;
    Ok(filter)
}
