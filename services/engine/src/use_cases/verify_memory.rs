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
    /// Only while the memory is at this version (the one the reviewer read).
    pub expected_version: Option<i64>,
}

impl MemoryEngine {
    pub async fn verify_memory_for(
        &self,
        principal: &Principal,
        request: VerifyMemoryRequest,
    ) -> Result<Memory, EngineError> {
        principal.authorize(Operation::VerifyMemory)?;
        let reason = request.reason.trim();
        // Counted as sent (the published limit), and not blank.
        let characters = request.reason.chars().count();
        if reason.is_empty() || characters > engram_core::limits::MAX_REASON_CHARS {
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
        // A conclusion is vouched for by someone else than who wrote it.
        if request.verified {
            let history = self
                .storage
                .memory_history(principal.memory_scope(), request.memory_id)
                .await?;
            let last_writer = history
                .iter()
                .rev()
                .find(|entry| matches!(entry.event.as_str(), "created" | "updated"))
                .map(|entry| entry.actor.as_str());
            if last_writer == Some(principal.actor().label().as_str()) {
                return Err(EngineError::Forbidden(
                    "this credential wrote the memory's current words: a conclusion is verified by someone else".to_string(),
                ));
            }
        }
        let memory = self
            .storage
            .set_memory_verification(
                principal.scope(),
                request.memory_id,
                request.verified,
                request.expected_version,
                reason,
                principal.actor(),
            )
            .await?;
        self.index_after_write(principal.scope(), &[memory.id], true)
            .await;
        Ok(principal.shown(Operation::VerifyMemory, memory))
    }
}
