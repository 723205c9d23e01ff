//! Write one value: created or replaced, conditionally on the version the caller read
//! (`expected`) or only when there is none (`create_only`).

use super::{SessionStateAddress, namespace};
use crate::{EngineError, MemoryEngine};
use engram_core::{ExternalId, FieldError, InvalidInput, Operation, Principal};
use engram_storage::session_state::{SessionStateEntry, StateWrite, StateWriteRefused};

/// Largest value, as JSON.
pub const MAX_STATE_VALUE_BYTES: usize = 64 * 1024;

#[derive(Clone, Debug)]
pub struct PutSessionStateRequest {
    pub address: SessionStateAddress,
    pub value: serde_json::Value,
    /// Write only over this version.
    pub expected: Option<i64>,
    /// Write only when there is no value yet.
    pub create_only: bool,
    /// The agent writing (a credential bound to one agent writes as it when this is `None`).
    pub agent_id: Option<ExternalId>,
}

impl MemoryEngine {
    /// The stored entry and whether it was created; or why the write was refused.
    pub async fn put_session_state_for(
        &self,
        principal: &Principal,
        request: PutSessionStateRequest,
    ) -> Result<Result<(SessionStateEntry, bool), StateWriteRefused>, EngineError> {
        principal.authorize(Operation::PutSessionState)?;
        let value_bytes = serde_json::to_vec(&request.value)
            .map(|json| json.len())
            .unwrap_or(0);
        if value_bytes > MAX_STATE_VALUE_BYTES {
            return Err(InvalidInput(vec![FieldError::new(
                "value",
                format!("at most {MAX_STATE_VALUE_BYTES} bytes as JSON, got {value_bytes}"),
            )])
            .into());
        }
        let address = request.address;
        let end_user = namespace(principal, address.user_id)?;
        let agent_id = principal.agent_subject(request.agent_id, "agent_id")?;
        Ok(self
            .storage
            .put_session_state(
                principal.memory_scope(),
                address.session_id.as_str(),
                end_user.as_ref().map(ExternalId::as_str),
                address.key.as_str(),
                StateWrite {
                    value: request.value,
                    expected: request.expected,
                    create_only: request.create_only,
                    agent_id: agent_id.map(|agent| agent.as_str().to_string()),
                },
            )
            .await?)
    }
}
