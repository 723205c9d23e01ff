//! Edit one memory: new content is re-embedded (and paid for), an expiry schedules a
//! deletion, `expected_version` guards against overwriting someone else's change.

use crate::{EditedMemory, EngineError, MemoryEdit, MemoryEngine};
use engram_core::principal::Credential;
use engram_core::usage::{PlannedSpend, UsageUnit};
use engram_core::{FieldError, InvalidInput, MemoryId, Operation, Principal};

#[derive(Clone, Debug)]
pub struct EditMemoryRequest {
    pub memory_id: MemoryId,
    pub edit: MemoryEdit,
    /// The new content's vector, for a project that sends its own.
    pub client_vector: Option<Vec<f32>>,
    pub expected_version: Option<i64>,
}

impl MemoryEngine {
    pub async fn edit_memory_for(
        &self,
        principal: &Principal,
        request: EditMemoryRequest,
    ) -> Result<EditedMemory, EngineError> {
        principal.authorize(Operation::EditMemory)?;
        let mut request = request;
        request.edit.reason = crate::use_cases::reason_of(principal, request.edit.reason.take())?;
        // Setting an expiry on a stored memory schedules its deletion, however far ahead: a
        // deletion decision, so it needs what deleting needs (clearing one does not).
        if matches!(request.edit.expires_at, Some(Some(_)))
            && !principal.may(Operation::DeleteMemory)
        {
            return Err(InvalidInput(vec![FieldError::new(
                "expires_at",
                "setting an expiry on a stored memory schedules its deletion: that needs the `memories:delete` scope",
            )])
            .into());
        }
        self.visible_memory(principal, request.memory_id).await?;
        let reembeds = request.edit.content.is_some();
        // A console member's correction is rectification, a duty no spend limit may block:
        // metered, never refused.
        let rectification = matches!(principal.credential(), Credential::ConsoleAccount { .. });
        if reembeds && !rectification {
            self.spend_guard
                .admit(
                    principal.scope(),
                    &[PlannedSpend {
                        unit: UsageUnit::TokensEmbedded,
                        quantity: 1,
                    }],
                )
                .await?;
        }
        let edited = self
            .edit_memory_with_vector(
                principal.scope(),
                request.memory_id,
                request.edit,
                request.client_vector,
                request.expected_version,
                principal.actor(),
            )
            .await?;
        if reembeds {
            self.meter.record(
                principal.scope(),
                &principal.usage_credential(),
                UsageUnit::TokensEmbedded,
                edited.tokens_embedded,
            );
        }
        Ok(edited)
    }
}
