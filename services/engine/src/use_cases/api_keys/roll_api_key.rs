//! Replace an API key by a new one with the same label, scopes and environment; the old
//! one keeps working for the overlap. A roll hands out a new secret with the old key's
//! scopes: the same rule as minting.

use super::{refuse_unless_own_or_managing_others, refuse_wider_than_caller};
use crate::{EngineError, MemoryEngine};
use engram_core::NotFoundKind;
use engram_core::ids::ApiKeyId;
use engram_core::{FieldError, InvalidInput, Operation, Principal};
use engram_storage::ApiKeyRecord;

/// Longest overlap a rolled key may keep working: 7 days.
pub const MAX_ROLL_OVERLAP_SECONDS: u64 = 7 * 24 * 60 * 60;
/// The overlap when none is asked for: a day.
pub const DEFAULT_ROLL_OVERLAP_SECONDS: u64 = 24 * 60 * 60;

#[derive(Clone, Debug)]
pub struct RollApiKeyRequest {
    pub key_id: ApiKeyId,
    /// 0–[`MAX_ROLL_OVERLAP_SECONDS`]; `None` for [`DEFAULT_ROLL_OVERLAP_SECONDS`]; 0 revokes
    /// the old key at once.
    pub overlap_seconds: Option<u64>,
}

pub struct RolledApiKey {
    pub key: ApiKeyRecord,
    /// Shown once.
    pub secret: String,
    pub previous: ApiKeyRecord,
}

impl MemoryEngine {
    pub async fn roll_api_key_for(
        &self,
        principal: &Principal,
        request: RollApiKeyRequest,
    ) -> Result<RolledApiKey, EngineError> {
        principal.authorize(Operation::RollApiKey)?;
        let rolled = self
            .storage
            .api_key(principal.scope(), request.key_id)
            .await?
            .ok_or(EngineError::NotFound(NotFoundKind::ApiKey))?;
        // Who may roll this key at all comes before what the roll asks for.
        refuse_unless_own_or_managing_others(principal, &rolled)?;
        refuse_wider_than_caller(principal, &rolled.scopes, rolled.agents.as_ref())?;
        let overlap_seconds = request
            .overlap_seconds
            .unwrap_or(DEFAULT_ROLL_OVERLAP_SECONDS);
        if overlap_seconds > MAX_ROLL_OVERLAP_SECONDS {
            return Err(InvalidInput(vec![FieldError::new(
                "overlap_seconds",
                format!("must be 0–{MAX_ROLL_OVERLAP_SECONDS}"),
            )])
            .into());
        }
        let (key, secret, previous) = self
            .storage
            .roll_api_key(
                principal.scope(),
                request.key_id,
                std::time::Duration::from_secs(overlap_seconds),
                self.api_key_pepper()?,
                principal.actor(),
            )
            .await?;
        // The old key's expiry changed: its next use reads it (here at once, elsewhere
        // within the cache's TTL).
        self.verified_api_keys.forget(previous.id);
        tracing::info!(old_key_id = %previous.id, new_key_id = %key.id, overlap_seconds, "api key rolled");
        Ok(RolledApiKey {
            key,
            secret,
            previous,
        })
    }
}
