//! List the memories a filter tree matches, newest first, a page at a time, with how many
//! match in all when asked (the filter language's list and count).

use crate::{EngineError, MemoryEngine};
use engram_core::memory::{MemoryListFilter, MemoryPage};
use engram_core::{MemoryFilter, MemoryId, Operation, Principal};

#[derive(Clone, Debug)]
pub struct QueryMemoriesRequest {
    /// For an end-user token, only its own end-user's memories are ever considered.
    pub filter: MemoryFilter,
    /// Exclusive: the page starts after this memory.
    pub after: Option<MemoryId>,
    pub limit: u64,
    /// Also count every memory the filter matches.
    pub include_total: bool,
}

pub struct QueriedMemories {
    pub page: MemoryPage,
    pub total: Option<u64>,
}

impl MemoryEngine {
    pub async fn query_memories_for(
        &self,
        principal: &Principal,
        request: QueryMemoriesRequest,
    ) -> Result<QueriedMemories, EngineError> {
        principal.authorize(Operation::ListMemories)?;
        let limit = i64::try_from(request.limit).unwrap_or(i64::MAX);
        let limit_errors = engram_core::limits::list_limit_errors("limit", limit);
        if !limit_errors.is_empty() {
            return Err(engram_core::InvalidInput(limit_errors).into());
        }
        // The scope confines an end-user token to its own memories, whatever the tree says.
        let scope = principal.memory_scope();
        let listing = MemoryListFilter {
            tree: request.filter,
            after: request.after,
            limit: request.limit,
            ..Default::default()
        };
        let page = self.storage.list_memories(scope, &listing).await?;
        let total = if request.include_total {
            Some(self.storage.count_memories(scope, &listing).await?)
        } else {
            None
        };
        Ok(QueriedMemories { page, total })
    }
}
