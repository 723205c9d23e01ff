//! Verify a memory, or withdraw its verification: a reviewer's or a supervisor's word that an
//! agent's conclusion holds, with the reason kept in the memory's history. A credential bound
//! to agents verifies only its agents' memories.

use crate::{EngineError, MemoryEngine};
use engram_core::{FieldError, InvalidInput, Memory, MemoryId, Operation, Principal};

#[derive(Clone, Debug)]
pub struct VerifyMemoryRequest {
    pub memory_id: MemoryId,
    /// `true` verifies, `false` withdraws a verification.
    pub verified: bool,
    /// Why, in the verifier's words (1–1,024 characters): kept in the history.
    pub reason: String,
}

impl MemoryEngine {
    pub async fn verify_memory_for(
        &self,
        principal: &Principal,
        request: VerifyMemoryRequest,
    ) -> Result<Memory, EngineError> {
        principal.authorize(Operation::VerifyMemory)?;
        let reason = request.reason.trim();
        let characters = reason.chars().count();
        if !(1..=engram_core::limits::MAX_REASON_CHARS).contains(&characters) {
            return Err(InvalidInput(vec![FieldError::new(
                "reason",
                format!(
                    "say why in 1–{} characters: it is kept in the memory's history",
                    engram_core::limits::MAX_REASON_CHARS
                ),
            )])
            .into());
        }
        self.changeable_memory(principal, request.memory_id).await?;
        let memory = self
            .storage
            .set_memory_verification(
                principal.scope(),
                request.memory_id,
                request.verified,
                reason,
                principal.actor(),
            )
            .await?;
        self.index_after_write(principal.scope(), &[memory.id], true)
            .await;
        Ok(principal.shown(Operation::VerifyMemory, memory))
    }
}
