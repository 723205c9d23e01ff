//! Delete one memory and all its content, history included.

use crate::{EngineError, MemoryEngine};
use engram_core::{MemoryId, Operation, Principal};

#[derive(Clone, Debug)]
pub struct DeleteMemoryRequest {
    pub memory_id: MemoryId,
    /// Why, in the person's words (required of a console member); kept in history.
    pub reason: Option<String>,
}

impl MemoryEngine {
    pub async fn delete_memory_for(
        &self,
        principal: &Principal,
        request: DeleteMemoryRequest,
    ) -> Result<(), EngineError> {
        principal.authorize(Operation::DeleteMemory)?;
        let reason = crate::use_cases::reason_of(principal, request.reason)?;
        self.changeable_memory(principal, request.memory_id).await?;
        self.delete_memory_with_reason(
            principal.scope(),
            request.memory_id,
            reason.as_deref(),
            principal.actor(),
        )
        .await
    }
}
