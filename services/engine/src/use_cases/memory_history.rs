//! The change history of one memory, oldest first.

use crate::{EngineError, MemoryEngine};
use engram_core::{MemoryId, Operation, Principal};
use engram_storage::HistoryEntry;

impl MemoryEngine {
    pub async fn memory_history_for(
        &self,
        principal: &Principal,
        memory_id: MemoryId,
    ) -> Result<Vec<HistoryEntry>, EngineError> {
        principal.authorize(Operation::MemoryHistory)?;
        self.visible_memory(principal, memory_id).await?;
        Ok(self
            .storage
            .memory_history(principal.memory_scope(), memory_id)
            .await?)
    }
}
