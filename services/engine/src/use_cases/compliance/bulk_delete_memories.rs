//! Deleting every memory a filter matches, with a reason: counted first, and carried out
//! only while the count is still what the caller confirmed. Immutable and held memories
//! are skipped and counted, never deleted.

use crate::{EngineError, MemoryEngine};
use engram_core::{Memory, Operation, Principal};
use engram_storage::MemoryListFilter;

/// Most memories one bulk deletion covers; a filter matching more is refused (narrow it).
pub const MAX_BULK_DELETE: u64 = 10_000;

/// What a bulk deletion would do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BulkDeletePreview {
    pub matching: u64,
    /// Immutable or under legal hold: these would be skipped.
    pub locked: u64,
}

/// What a bulk deletion did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BulkDeleteOutcome {
    pub deleted: u64,
    pub skipped_locked: u64,
}

impl MemoryEngine {
    pub async fn preview_bulk_delete_for(
        &self,
        principal: &Principal,
        filter: MemoryListFilter,
    ) -> Result<BulkDeletePreview, EngineError> {
        principal.authorize(Operation::BulkDeleteMemories)?;
        let matching = self.memories_matching(principal, filter).await?;
        Ok(BulkDeletePreview {
            matching: matching.len() as u64,
            locked: matching
                .iter()
                .filter(|memory| memory.immutable || memory.legal_hold)
                .count() as u64,
        })
    }

    /// Deletes what `filter` matches when that is still `expected` memories (`Conflict`
    /// otherwise: something changed since the caller counted).
    pub async fn bulk_delete_memories_for(
        &self,
        principal: &Principal,
        filter: MemoryListFilter,
        expected: u64,
        reason: &str,
    ) -> Result<BulkDeleteOutcome, EngineError> {
        principal.authorize(Operation::BulkDeleteMemories)?;
        let reason = crate::use_cases::required_reason(reason)?;
        let matching = self.memories_matching(principal, filter).await?;
        if matching.len() as u64 != expected {
            return Err(EngineError::Conflict(format!(
                "{} memories match now, not {expected}: count again before deleting",
                matching.len()
            )));
        }
        let ids: Vec<engram_core::MemoryId> = matching.iter().map(|memory| memory.id).collect();
        let (deleted, skipped_locked) = self
            .governance
            .delete_memories_in_bulk(principal.scope(), &ids, &reason, principal.actor())
            .await?;
        Ok(BulkDeleteOutcome {
            deleted,
            skipped_locked,
        })
    }

    /// Every memory `filter` matches for this caller (an end-user token: its own only), up
    /// to [`MAX_BULK_DELETE`]; more is refused.
    async fn memories_matching(
        &self,
        principal: &Principal,
        mut filter: MemoryListFilter,
    ) -> Result<Vec<Memory>, EngineError> {
        filter.limit = 500;
        filter.after = None;
        let mut matching = Vec::new();
        loop {
            let page = self
                .storage
                .list_memories(principal.memory_scope(), &filter)
                .await?;
            // An end-user token's scope lists only its own end-user's memories.
            matching.extend(page.memories);
            if matching.len() as u64 > MAX_BULK_DELETE {
                return Err(EngineError::Conflict(format!(
                    "more than {MAX_BULK_DELETE} memories match: narrow the filter"
                )));
            }
            match page.next_cursor {
                Some(cursor) => filter.after = Some(cursor),
                None => return Ok(matching),
            }
        }
    }
}
