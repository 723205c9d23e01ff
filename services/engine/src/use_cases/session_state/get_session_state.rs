//! Read one value of a session.

use super::{SessionStateAddress, namespace};
use crate::{EngineError, MemoryEngine};
use engram_core::NotFoundKind;
use engram_core::{ExternalId, Operation, Principal};
use engram_storage::session_state::SessionStateEntry;

impl MemoryEngine {
    pub async fn get_session_state_for(
        &self,
        principal: &Principal,
        address: SessionStateAddress,
    ) -> Result<SessionStateEntry, EngineError> {
        principal.authorize(Operation::GetSessionState)?;
        let end_user = namespace(principal, address.user_id)?;
        self.storage
            .session_state(
                principal.memory_scope(),
                address.session_id.as_str(),
                end_user.as_ref().map(ExternalId::as_str),
                address.key.as_str(),
            )
            .await?
            .ok_or(EngineError::NotFound(NotFoundKind::SessionState))
    }
}
