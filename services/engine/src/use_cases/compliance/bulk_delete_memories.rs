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
        // Every door's bulk delete names what it takes: a whole project is not one filter away.
        let narrows = filter.subject.user_id.is_some()
            || filter.subject.agent_id.is_some()
            || filter.subject.session_id.is_some()
            || filter.kind.is_some()
            || filter.text_contains.is_some()
            || filter.source.is_some()
            || filter.category.is_some()
            || filter.created_from.is_some()
            || filter.created_to.is_some()
            || !filter.tree.is_everything();
        if !narrows {
            return Err(engram_core::InvalidInput(vec![engram_core::FieldError::new(
                "filters",
                "a bulk delete needs a filter (an end-user, a kind, a date, …)",
            )])
            .into());
        }
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
            // A credential bound to agents deletes only its agents' memories.
            let page = self
                .storage
                .list_memories(&principal.memory_scope().for_changes(), &filter)
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

/// Delete what a filter tree matches (the API's bulk delete): at most [`MAX_BULK_DELETE`]
/// memories per call, newest first; `remaining` says how many still match after it.
#[derive(Clone, Debug)]
pub struct DeleteMatchingRequest {
    pub filter: engram_core::MemoryFilter,
    /// An empty filter deletes every memory only when this says so.
    pub all: bool,
    pub reason: Option<String>,
    /// Count what would be deleted; delete nothing.
    pub dry_run: bool,
}

/// What a deletion by filter did (or, on a dry run, would do).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeleteMatchingOutcome {
    /// Memories the filter matches (for an end-user token: of its own end-user).
    pub matched: u64,
    pub deleted: u64,
    /// Immutable or under legal hold: never deleted (on a dry run: would be skipped).
    pub skipped_locked: u64,
    /// Still matching after this call's cap: call again to delete them.
    pub remaining: u64,
}

/// The reason kept when the caller gives none.
const DEFAULT_BULK_REASON: &str = "deleted in bulk by filter";

impl MemoryEngine {
    pub async fn delete_memories_matching_for(
        &self,
        principal: &Principal,
        request: DeleteMatchingRequest,
    ) -> Result<DeleteMatchingOutcome, EngineError> {
        principal.authorize(Operation::BulkDeleteMemories)?;
        if request.filter.reads_content() {
            principal.authorize(Operation::BulkDeleteMemoriesByContent)?;
        }
        if request.filter.is_everything() && !request.all {
            return Err(engram_core::InvalidInput::single(
                "filters",
                "an empty filter matches every memory: send \"all\": true to delete them all",
            )
            .into());
        }
        let reason = crate::use_cases::reason_of(principal, request.reason)?
            .unwrap_or_else(|| DEFAULT_BULK_REASON.to_string());
        let listing = MemoryListFilter {
            tree: request.filter,
            ..Default::default()
        };
        // A credential bound to agents deletes only its agents' memories.
        let scope = &principal.memory_scope().for_changes();
        let matched = self.storage.count_memories(scope, &listing).await?;
        let mut candidates = Vec::new();
        let mut page_filter = MemoryListFilter {
            limit: 500,
            ..listing
        };
        while (candidates.len() as u64) < MAX_BULK_DELETE.min(matched) {
            let page = self.storage.list_memories(scope, &page_filter).await?;
            candidates.extend(page.memories);
            match page.next_cursor {
                Some(cursor) => page_filter.after = Some(cursor),
                None => break,
            }
        }
        candidates.truncate(MAX_BULK_DELETE as usize);
        let (locked, deletable): (Vec<Memory>, Vec<Memory>) = candidates
            .into_iter()
            .partition(|memory| memory.immutable || memory.legal_hold);
        let considered = (locked.len() + deletable.len()) as u64;
        if request.dry_run {
            return Ok(DeleteMatchingOutcome {
                matched,
                deleted: 0,
                skipped_locked: locked.len() as u64,
                remaining: matched.saturating_sub(considered),
            });
        }
        let ids: Vec<engram_core::MemoryId> = deletable.iter().map(|memory| memory.id).collect();
        // One transaction and one audit event for the batch; the index follows through the
        // outbox as for single deletes. A memory locked meanwhile is skipped, not deleted.
        let (deleted, _) = self
            .governance
            .delete_memories_in_bulk(principal.scope(), &ids, &reason, principal.actor())
            .await?;
        let skipped_locked = considered.saturating_sub(deleted);
        Ok(DeleteMatchingOutcome {
            matched,
            deleted,
            skipped_locked,
            remaining: matched.saturating_sub(considered),
        })
    }
}
