//! List the project's API keys, newest first, never their secrets.

use crate::{EngineError, MemoryEngine};
use engram_core::{Operation, Principal};
use engram_storage::ApiKeyRecord;

impl MemoryEngine {
    pub async fn list_api_keys_for(
        &self,
        principal: &Principal,
    ) -> Result<Vec<ApiKeyRecord>, EngineError> {
        principal.authorize(Operation::ListApiKeys)?;
        Ok(self.storage.list_api_keys(principal.scope()).await?)
    }
}
