//! Every value of a session in the caller's namespace, in key order.

use super::namespace;
use crate::{EngineError, MemoryEngine};
use engram_core::{ExternalId, Operation, Principal};
use engram_storage::session_state::SessionStateEntry;

impl MemoryEngine {
    pub async fn list_session_state_for(
        &self,
        principal: &Principal,
        session_id: ExternalId,
        user_id: Option<ExternalId>,
    ) -> Result<Vec<SessionStateEntry>, EngineError> {
        principal.authorize(Operation::ListSessionState)?;
        let end_user = namespace(principal, user_id)?;
        Ok(self
            .storage
            .session_state_entries(
                principal.memory_scope(),
                session_id.as_str(),
                end_user.as_ref().map(ExternalId::as_str),
            )
            .await?)
    }
}
