//! Remove one value, conditionally on its version when `expected` is given.

use super::{SessionStateAddress, namespace};
use crate::{EngineError, MemoryEngine};
use engram_core::{ExternalId, Operation, Principal};
use engram_storage::session_state::StateWriteRefused;

impl MemoryEngine {
    /// `Ok(true)` when a value was removed, `Ok(false)` when there was none.
    pub async fn delete_session_state_for(
        &self,
        principal: &Principal,
        address: SessionStateAddress,
        expected: Option<i64>,
    ) -> Result<Result<bool, StateWriteRefused>, EngineError> {
        principal.authorize(Operation::DeleteSessionState)?;
        let end_user = namespace(principal, address.user_id)?;
        let removed = self
            .storage
            .delete_session_state(
                principal.scope(),
                address.session_id.as_str(),
                end_user.as_ref().map(ExternalId::as_str),
                address.key.as_str(),
                expected,
            )
            .await?;
        Ok(removed.map(|version| version.is_some()))
    }
}
