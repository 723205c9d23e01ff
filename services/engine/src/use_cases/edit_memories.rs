//! Edit several memories in one request: every edit is checked — limits, permissions, that
//! its memory exists for this caller and is not locked — before the first is applied.

use crate::use_cases::EditMemoryRequest;
use crate::{EditedMemory, EngineError, MemoryEngine};
use engram_core::{FieldError, InvalidInput, Operation, Principal};

/// Most memories one request edits.
pub const MAX_EDITS_PER_REQUEST: usize = 1_000;

impl MemoryEngine {
    /// The edited memories, in order. A refusal names the item (`memories[3].…`) and
    /// changes nothing; only a memory changed or deleted by someone else between the check
    /// and its edit can stop the batch part way (the answer is then that memory's error).
    pub async fn edit_memories_for(
        &self,
        principal: &Principal,
        requests: Vec<EditMemoryRequest>,
    ) -> Result<Vec<EditedMemory>, EngineError> {
        principal.authorize(Operation::EditMemory)?;
        if requests.is_empty() || requests.len() > MAX_EDITS_PER_REQUEST {
            return Err(InvalidInput::single(
                "memories",
                format!("must name 1–{MAX_EDITS_PER_REQUEST} memories"),
            )
            .into());
        }
        let mut errors = Vec::new();
        for (position, request) in requests.iter().enumerate() {
            for error in request.edit.limit_errors() {
                errors.push(FieldError::new(
                    format!("memories[{position}].{}", error.field),
                    error.message,
                ));
            }
            if request.edit.expires_at.is_some() && !principal.may(Operation::ChangeMemoryExpiry) {
                errors.push(FieldError::new(
                    format!("memories[{position}].expires_at"),
                    "changing an expiry schedules or cancels a deletion: that needs the `memories:delete` scope",
                ));
            }
        }
        if !errors.is_empty() {
            return Err(InvalidInput(errors).into());
        }
        for (position, request) in requests.iter().enumerate() {
            let memory = match self.visible_memory(principal, request.memory_id).await {
                Ok(memory) => memory,
                Err(EngineError::NotFound(_)) => {
                    errors.push(FieldError::new(
                        format!("memories[{position}].memory_id"),
                        "no memory with this id exists in this project",
                    ));
                    continue;
                }
                Err(other) => return Err(other),
            };
            crate::use_cases::refuse_other_agents_memory(principal, &memory)?;
            if memory.immutable || memory.legal_hold {
                return Err(EngineError::Locked(format!(
                    "memories[{position}] is immutable or under legal hold: nothing was changed"
                )));
            }
        }
        if !errors.is_empty() {
            return Err(InvalidInput(errors).into());
        }
        let mut edited = Vec::with_capacity(requests.len());
        for request in requests {
            edited.push(self.edit_memory_for(principal, request).await?);
        }
        Ok(edited)
    }
}
