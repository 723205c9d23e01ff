//! Authentication: a presented bearer credential becomes the [`Principal`] every use case
//! takes, or nothing. A project API key is checked against its stored hash (with the server
//! pepper); an end-user token by its signature first (no database work for a forged one),
//! then by whether its project is still on that signing-key generation and its minting key
//! still in force.

use crate::{EngineError, MemoryEngine};
use engram_core::audit::Actor;
use engram_core::{Principal, ProjectId};

/// Who a verified end-user token speaks for, for the per-end-user rate limit.
#[derive(Clone, Debug)]
pub struct AuthenticatedEndUser {
    pub project_id: ProjectId,
    pub user_id: String,
}

impl MemoryEngine {
    /// The principal of `presented` (an `egk_…` key or an end-user token), with `origin`'s
    /// address, user agent and request id; `None` when it proves nothing.
    pub async fn authenticate(
        &self,
        presented: &str,
        origin: Actor,
    ) -> Result<Option<(Principal, Option<AuthenticatedEndUser>)>, EngineError> {
        if presented.starts_with(engram_core::access::API_KEY_PREFIX) {
            let pepper = self.api_key_pepper()?;
            let presented_hash = pepper.hash_secret(presented);
            let verified = match self.verified_api_keys.get(&presented_hash) {
                Some(verified) => Some(verified),
                None => {
                    let read_at = self.verified_api_keys.generation();
                    let verified = self.storage.verify_api_key(presented, pepper).await?;
                    if let Some(verified) = &verified {
                        self.verified_api_keys
                            .remember(presented_hash, verified.clone(), read_at);
                    }
                    verified
                }
            };
            return Ok(verified.map(|verified| {
                let principal = Principal::api_key(
                    verified.scope,
                    verified.key_id,
                    verified.lineage_id,
                    verified.scopes,
                    origin,
                );
                (principal, None)
            }));
        }
        let Some(keys) = &self.end_user_tokens else {
            return Ok(None);
        };
        let Some((project_id, generation)) = crate::end_user_tokens::claimed_key(presented) else {
            return Ok(None);
        };
        let Some(verified) = keys.verify(presented, project_id, generation) else {
            return Ok(None);
        };
        let Some(scope) = self
            .storage
            .scope_for_end_user_token(project_id, generation, verified.minted_by)
            .await?
        else {
            return Ok(None);
        };
        let end_user = AuthenticatedEndUser {
            project_id: scope.project_id(),
            user_id: verified.user_id.as_str().to_string(),
        };
        let subject_digest = self
            .governance
            .subject_digest(&scope, verified.user_id.as_str());
        let principal = Principal::end_user_token(
            scope,
            verified.user_id,
            verified.scopes,
            subject_digest,
            origin,
        );
        Ok(Some((principal, Some(end_user))))
    }
}
