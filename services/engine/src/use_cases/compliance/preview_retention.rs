//! What the next retention sweep would delete: memories (counted up to `limit`, by kind)
//! and, per store kept for a number of days, how many records are past it.

use crate::{EngineError, MemoryEngine};
use engram_core::{MemoryId, MemoryKind, Operation, Principal};

/// What the next sweep of a project removes.
pub struct RetentionPreview {
    /// Memories due, oldest first, at most the limit asked for.
    pub memories: Vec<(MemoryId, MemoryKind)>,
    /// Each store swept by age: its name, its days (`None`: kept until deleted) and how
    /// many of its records are due.
    pub stores: Vec<(&'static str, Option<u32>, u64)>,
}

impl MemoryEngine {
    pub async fn preview_retention_for(
        &self,
        principal: &Principal,
        limit: u64,
    ) -> Result<RetentionPreview, EngineError> {
        principal.authorize(Operation::PreviewRetention)?;
        let memories = self
            .governance
            .retention_preview(principal.scope(), limit)
            .await?;
        let stores = self
            .governance
            .retention_preview_of_stores(principal.scope())
            .await?;
        Ok(RetentionPreview { memories, stores })
    }
}
