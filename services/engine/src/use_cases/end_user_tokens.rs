//! End-user tokens: a project API key mints short-lived tokens confined to one end-user,
//! never wider than itself and never with `admin`; an admin rotates the signing key, which
//! ends every token signed with the old one.

use crate::end_user_tokens::{DEFAULT_END_USER_TOKEN_LIFETIME, MAX_END_USER_TOKEN_LIFETIME};
use crate::{EngineError, MemoryEngine};
use chrono::{DateTime, Utc};
use engram_core::principal::Credential;
use engram_core::{
    AgentRestriction, ApiScope, ApiScopes, ExternalId, FieldError, InvalidInput, Operation,
    Principal,
};

/// A mint request as the caller sent it.
#[derive(Clone, Debug, Default)]
pub struct MintEndUserTokenRequest {
    pub user_id: String,
    /// Scope names; `None`: the minting key's `memories:read` and `memories:write`.
    pub scopes: Option<Vec<String>>,
    pub ttl_seconds: Option<u64>,
    /// The agents the token acts as; `None`: those of the minting key (every agent for a key
    /// bound to none).
    pub agents: Option<Vec<String>>,
}

pub struct MintedEndUserToken {
    pub token: String,
    pub user_id: ExternalId,
    pub scopes: ApiScopes,
    /// The agents the token is bound to; `None` for every agent.
    pub agents: Option<AgentRestriction>,
    pub expires_at: DateTime<Utc>,
}

impl MemoryEngine {
    pub async fn mint_end_user_token_for(
        &self,
        principal: &Principal,
        request: MintEndUserTokenRequest,
    ) -> Result<MintedEndUserToken, EngineError> {
        principal.authorize(Operation::MintEndUserToken)?;
        let Credential::ApiKey {
            key_id: minting_key_id,
            ..
        } = principal.credential()
        else {
            return Err(EngineError::Forbidden(
                "end-user tokens cannot mint tokens; use a project API key".to_string(),
            ));
        };
        let minter_scopes = principal.grantable_scopes();
        let mut errors = Vec::new();
        let user_id = ExternalId::parse(&request.user_id)
            .map_err(|message| errors.push(FieldError::new("user_id", message)))
            .ok();
        let ttl_seconds = request
            .ttl_seconds
            .unwrap_or(DEFAULT_END_USER_TOKEN_LIFETIME.as_secs());
        if !(1..=MAX_END_USER_TOKEN_LIFETIME.as_secs()).contains(&ttl_seconds) {
            errors.push(FieldError::new(
                "ttl_seconds",
                format!("must be 1–{}", MAX_END_USER_TOKEN_LIFETIME.as_secs()),
            ));
        }
        let requested: Vec<ApiScope> = match &request.scopes {
            None => [ApiScope::MemoriesRead, ApiScope::MemoriesWrite]
                .into_iter()
                .filter(|scope| minter_scopes.contains(*scope))
                .collect(),
            Some(names) => {
                let mut scopes = Vec::new();
                for (position, name) in names.iter().enumerate() {
                    match ApiScope::parse(name) {
                        Some(scope @ (ApiScope::Admin | ApiScope::MemoriesVerify)) => {
                            errors.push(FieldError::new(
                                format!("scopes[{position}]"),
                                format!("`{scope}` cannot be given to an end-user token"),
                            ))
                        }
                        Some(scope) if scopes.contains(&scope) => errors.push(FieldError::new(
                            format!("scopes[{position}]"),
                            format!("{name:?} is named twice"),
                        )),
                        Some(scope) => scopes.push(scope),
                        None => errors.push(FieldError::new(
                            format!("scopes[{position}]"),
                            format!("unknown scope {name:?}"),
                        )),
                    }
                }
                scopes
            }
        };
        if requested.is_empty() && errors.is_empty() {
            errors.push(FieldError::new(
                "scopes",
                "the token would hold no scope the minting key has",
            ));
        }
        let requested_agents =
            AgentRestriction::parse_field(request.agents.as_deref(), "agents", &mut errors);
        let (Some(user_id), true) = (user_id, errors.is_empty()) else {
            return Err(InvalidInput(errors).into());
        };
        let agents = principal.grantable_agents(requested_agents)?;
        let scopes = ApiScopes::from_scopes(requested);
        if !minter_scopes.covers(&scopes) {
            return Err(EngineError::Forbidden(format!(
                "a token never exceeds its parent: the minting key holds only {}",
                minter_scopes.names().join(", ")
            )));
        }
        let keys = self
            .end_user_tokens
            .as_ref()
            .ok_or_else(|| EngineError::Internal("no end-user token key configured".to_string()))?;
        let generation = self
            .storage
            .end_user_key_generation(principal.scope())
            .await?;
        let (token, expires_at) = keys
            .mint(
                principal.scope().project_id(),
                generation,
                &crate::end_user_tokens::EndUserGrant {
                    user_id: &user_id,
                    scopes: &scopes,
                    agents: agents.as_ref(),
                    minted_by: *minting_key_id,
                },
                std::time::Duration::from_secs(ttl_seconds),
            )
            .map_err(EngineError::Internal)?;
        Ok(MintedEndUserToken {
            token,
            user_id,
            scopes,
            agents,
            expires_at,
        })
    }

    /// The new signing-key generation: every token signed before stops working.
    pub async fn rotate_end_user_signing_key_for(
        &self,
        principal: &Principal,
    ) -> Result<i64, EngineError> {
        principal.authorize(Operation::RotateEndUserSigningKey)?;
        Ok(self
            .storage
            .rotate_end_user_signing_key(principal.scope(), principal.actor())
            .await?)
    }
}
