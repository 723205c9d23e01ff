//! List the project's API keys, newest first, never their secrets; a caller bound to agents
//! sees only the keys within its agents (those it could manage).

use crate::{EngineError, MemoryEngine};
use engram_core::{Operation, Principal};
use engram_storage::ApiKeyRecord;

impl MemoryEngine {
    pub async fn list_api_keys_for(
        &self,
        principal: &Principal,
    ) -> Result<Vec<ApiKeyRecord>, EngineError> {
        principal.authorize(Operation::ListApiKeys)?;
        let keys = self.storage.list_api_keys(principal.scope()).await?;
        Ok(match principal.agents() {
            None => keys,
            Some(own) => keys
                .into_iter()
                .filter(|key| key.agents.as_ref().is_some_and(|agents| own.covers(agents)))
                .collect(),
        })
    }
}
