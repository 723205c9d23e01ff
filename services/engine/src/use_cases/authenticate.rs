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

/// API keys looked up in the database (not answered from the verified-key cache).
pub const API_KEY_LOOKUPS_TOTAL: &str = "engram_api_key_lookups_total";

impl MemoryEngine {
    /// Whether `presented` names a key this process knows: verified a moment ago (answered
    /// from memory, no database work), or a key id that verified here before. A door lets
    /// its client pay for the lookup of any other key first, so a flood of made-up key ids
    /// is throttled before the database, while guesses at a real key's id never use up the
    /// budget of the real key's other users behind the same address.
    pub async fn knows_api_key(&self, presented: &str) -> bool {
        let remembered = self.api_key_pepper().is_ok_and(|pepper| {
            self.verified_api_keys
                .get(&pepper.hash_secret(presented))
                .is_some()
        });
        if remembered {
            return true;
        }
        let Some(public_id) = engram_core::access::api_key_public_id(presented) else {
            return false;
        };
        if let Some(known) = self.verified_api_keys.knows_public_id(public_id) {
            return known;
        }
        // One read of the key ids for every request of the next KNOWN_IDS_TTL, by one
        // request at a time; the others meanwhile pay for their lookup up front.
        let Ok(_reading) = self.verified_api_keys.reloading_public_ids.try_lock() else {
            return false;
        };
        match self.storage.api_key_public_ids().await {
            Ok(public_ids) => {
                self.verified_api_keys.replace_public_ids(public_ids);
                self.verified_api_keys
                    .knows_public_id(public_id)
                    .unwrap_or(false)
            }
            Err(error) => {
                tracing::warn!(%error, "could not read the key ids; treating the key as unknown");
                false
            }
        }
    }

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
                    metrics::counter!(API_KEY_LOOKUPS_TOTAL).increment(1);
                    let read_at = self.verified_api_keys.generation();
                    let verified = self.storage.verify_api_key(presented, pepper).await?;
                    if let Some(verified) = &verified {
                        self.verified_api_keys
                            .remember(presented_hash, verified.clone(), read_at);
                        if let Some(public_id) = engram_core::access::api_key_public_id(presented) {
                            self.verified_api_keys.know_public_id(public_id);
                        }
                    }
                    verified
                }
            };
            let Some(verified) = verified else {
                return Ok(None);
            };
            let principal = Principal::api_key(
                verified.scope,
                verified.key_id,
                verified.lineage_id,
                verified.scopes,
                verified.agents,
                origin,
            );
            return Ok(Some((self.in_agent_teams(principal).await?, None)));
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
        let Some((scope, key_agents)) = self
            .storage
            .scope_for_end_user_token(project_id, generation, verified.minted_by)
            .await?
        else {
            return Ok(None);
        };
        // The token's agents within its key's; a token naming none of them proves nothing.
        let agents = match (key_agents, verified.agents) {
            (Some(key_agents), Some(token_agents)) => {
                match key_agents.intersection(&token_agents) {
                    Some(both) => Some(both),
                    None => return Ok(None),
                }
            }
            (key_agents, token_agents) => key_agents.or(token_agents),
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
            verified.minted_by,
            verified.scopes,
            agents,
            subject_digest,
            origin,
        );
        Ok(Some((
            self.in_agent_teams(principal).await?,
            Some(end_user),
        )))
    }

    /// A principal bound to agents with the project's teams they belong to, so what is
    /// shared with those teams is shared with it (read per request: a team changed is seen
    /// at once).
    async fn in_agent_teams(&self, principal: Principal) -> Result<Principal, EngineError> {
        if principal.memory_scope().agents().is_none() {
            return Ok(principal);
        }
        let settings = self.spaces.settings_cache().of(principal.scope()).await?;
        Ok(principal.in_agent_teams(&settings.settings.agent_teams))
    }
}
