//! Set or lift a memory's immutable flag and legal hold, with the reason kept in history.
//! A person (a console member) must say why; a key may. A reason is never cut: one that is
//! too long is refused.

use crate::{EngineError, MemoryEngine};
use engram_core::principal::Credential;
use engram_core::{FieldError, InvalidInput, Memory, MemoryId, Operation, Principal};

pub const MAX_FLAG_REASON_CHARS: usize = 1_000;

#[derive(Clone, Debug)]
pub struct SetMemoryFlagsRequest {
    pub memory_id: MemoryId,
    pub immutable: Option<bool>,
    pub legal_hold: Option<bool>,
    pub reason: Option<String>,
}

impl MemoryEngine {
    /// The memory with its flags as they now are.
    pub async fn set_memory_flags_for(
        &self,
        principal: &Principal,
        request: SetMemoryFlagsRequest,
    ) -> Result<Memory, EngineError> {
        principal.authorize(Operation::SetMemoryFlags)?;
        let field_error = |message: &str| -> EngineError {
            InvalidInput(vec![FieldError::new("reason", message)]).into()
        };
        // Counted as sent (the published `maxLength`), before surrounding space is trimmed.
        if request
            .reason
            .as_ref()
            .is_some_and(|reason| reason.chars().count() > MAX_FLAG_REASON_CHARS)
        {
            return Err(field_error("at most 1,000 characters"));
        }
        let reason = request
            .reason
            .map(|reason| reason.trim().to_string())
            .filter(|reason| !reason.is_empty());
        if reason.is_none() && matches!(principal.credential(), Credential::ConsoleAccount { .. }) {
            return Err(field_error("give a reason"));
        }
        let scope = principal.scope();
        self.storage
            .set_memory_flags(
                scope,
                request.memory_id,
                request.immutable,
                request.legal_hold,
                reason.as_deref(),
                principal.actor(),
            )
            .await?;
        let memory = self
            .storage
            .get_memory(principal.memory_scope(), request.memory_id)
            .await?;
        Ok(principal.shown(Operation::SetMemoryFlags, memory))
    }
}
