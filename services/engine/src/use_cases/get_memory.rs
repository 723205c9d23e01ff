//! Read one memory.

use crate::{EngineError, MemoryEngine};
use engram_core::{Memory, MemoryId, Operation, Principal};

impl MemoryEngine {
    pub async fn get_memory_for(
        &self,
        principal: &Principal,
        memory_id: MemoryId,
    ) -> Result<Memory, EngineError> {
        principal.authorize(Operation::GetMemory)?;
        self.visible_memory(principal, memory_id).await
    }
}
