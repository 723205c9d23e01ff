//! What the next retention sweep would delete, counted up to `limit`.

use crate::{EngineError, MemoryEngine};
use engram_core::{MemoryId, MemoryKind, Operation, Principal};

impl MemoryEngine {
    pub async fn preview_retention_for(
        &self,
        principal: &Principal,
        limit: u64,
    ) -> Result<Vec<(MemoryId, MemoryKind)>, EngineError> {
        principal.authorize(Operation::PreviewRetention)?;
        self.governance
            .retention_preview(principal.scope(), limit)
            .await
    }
}
