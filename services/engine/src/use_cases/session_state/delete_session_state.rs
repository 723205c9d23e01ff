//! Remove one value, conditionally on its version when `expected` is given.

use super::{SessionStateAddress, namespace};
use crate::{EngineError, MemoryEngine};
use engram_core::{ExternalId, NotFoundKind, Operation, Principal};
use engram_storage::session_state::StateWriteRefused;

impl MemoryEngine {
    /// `Ok(())` when a value was removed; `NotFound(SessionState)` when there was none.
    pub async fn delete_session_state_for(
        &self,
        principal: &Principal,
        address: SessionStateAddress,
        expected: Option<i64>,
    ) -> Result<Result<(), StateWriteRefused>, EngineError> {
        principal.authorize(Operation::DeleteSessionState)?;
        let end_user = namespace(principal, address.user_id)?;
        let removed = self
            .storage
            .delete_session_state(
                principal.memory_scope(),
                address.session_id.as_str(),
                end_user.as_ref().map(ExternalId::as_str),
                address.key.as_str(),
                expected,
            )
            .await?;
        match removed {
            Ok(Some(_)) => Ok(Ok(())),
            Ok(None) => Err(EngineError::NotFound(NotFoundKind::SessionState)),
            Err(refused) => Ok(Err(refused)),
        }
    }
}
