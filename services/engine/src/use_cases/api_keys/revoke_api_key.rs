//! Revoke an API key at once (idempotent). Revoking cuts off whoever uses the key, so a
//! caller may revoke only keys it could have minted.

use super::{refuse_unless_own_or_managing_others, refuse_wider_than_caller};
use crate::{EngineError, MemoryEngine};
use engram_core::NotFoundKind;
use engram_core::ids::ApiKeyId;
use engram_core::{Operation, Principal};
use engram_storage::ApiKeyRecord;

impl MemoryEngine {
    pub async fn revoke_api_key_for(
        &self,
        principal: &Principal,
        key_id: ApiKeyId,
    ) -> Result<ApiKeyRecord, EngineError> {
        principal.authorize(Operation::RevokeApiKey)?;
        let revoked = self
            .storage
            .api_key(principal.scope(), key_id)
            .await?
            .ok_or(EngineError::NotFound(NotFoundKind::ApiKey))?;
        refuse_unless_own_or_managing_others(principal, &revoked)?;
        refuse_wider_than_caller(principal, &revoked.scopes, revoked.agents.as_ref())?;
        let record = self
            .storage
            .revoke_api_key(principal.scope(), key_id, principal.actor())
            .await?;
        // This process stops accepting it at once; other replicas within the cache's TTL.
        self.verified_api_keys.forget(key_id);
        tracing::info!(key_id = %record.id, revoked_by = %principal.actor().id, "api key revoked");
        Ok(record)
    }
}
