//! Create an API key: a label of 1–100 characters, known scopes no wider than the caller's,
//! `live` or `test`, an expiry in the future and no later than the minting key's.

use super::refuse_wider_than_caller;
use crate::{EngineError, MemoryEngine};
use chrono::{DateTime, Utc};
use engram_core::principal::Credential;
use engram_core::{
    AgentRestriction, ApiScope, ApiScopes, FieldError, InvalidInput, KeyEnvironment, Operation,
    Principal,
};
use engram_storage::{ApiKeyRecord, NewApiKey};

pub const MAX_KEY_LABEL_CHARS: usize = 100;

/// A create request as the caller sent it; the use case validates every field.
#[derive(Clone, Debug, Default)]
pub struct CreateApiKeyRequest {
    pub label: String,
    /// Scope names: `memories:read`, `memories:write`, `memories:delete`, `admin`.
    pub scopes: Vec<String>,
    /// `live` (default) or `test`.
    pub environment: Option<String>,
    pub expires_at: Option<DateTime<Utc>>,
    /// The agents the key acts as; `None`: every agent (for a caller bound to agents, its
    /// own).
    pub agents: Option<Vec<String>>,
}

impl CreateApiKeyRequest {
    fn into_new_key(self) -> Result<NewApiKey, InvalidInput> {
        let mut errors = Vec::new();
        let label = self.label.trim().to_string();
        if label.is_empty() || label.chars().count() > MAX_KEY_LABEL_CHARS {
            errors.push(FieldError::new(
                "label",
                format!("must be 1–{MAX_KEY_LABEL_CHARS} characters"),
            ));
        } else if label.chars().any(char::is_control) {
            errors.push(FieldError::new(
                "label",
                "must not contain control characters",
            ));
        }
        let mut scopes = Vec::with_capacity(self.scopes.len());
        for (position, name) in self.scopes.iter().enumerate() {
            match ApiScope::parse(name) {
                Some(scope) if scopes.contains(&scope) => errors.push(FieldError::new(
                    format!("scopes[{position}]"),
                    format!("{name:?} is named twice"),
                )),
                Some(scope) => scopes.push(scope),
                None => errors.push(FieldError::new(
                    format!("scopes[{position}]"),
                    format!(
                        "unknown scope {name:?}; use {}",
                        ApiScope::ALL.map(ApiScope::as_str).join(", ")
                    ),
                )),
            }
        }
        if self.scopes.is_empty() {
            errors.push(FieldError::new("scopes", "name at least one scope"));
        }
        let environment = match self.environment.as_deref() {
            None => KeyEnvironment::Live,
            Some(text) => KeyEnvironment::parse(text).unwrap_or_else(|| {
                errors.push(FieldError::new("environment", "must be `live` or `test`"));
                KeyEnvironment::Live
            }),
        };
        if let Some(expires_at) = self.expires_at
            && expires_at <= Utc::now()
        {
            errors.push(FieldError::new("expires_at", "must be in the future"));
        }
        let agents = AgentRestriction::parse_field(self.agents.as_deref(), "agents", &mut errors);
        if !errors.is_empty() {
            return Err(InvalidInput(errors));
        }
        Ok(NewApiKey {
            label,
            scopes: ApiScopes::from_scopes(scopes),
            environment,
            expires_at: self.expires_at,
            agents,
        })
    }
}

impl MemoryEngine {
    /// The new key and its secret, shown once.
    pub async fn create_api_key_for(
        &self,
        principal: &Principal,
        request: CreateApiKeyRequest,
    ) -> Result<(ApiKeyRecord, String), EngineError> {
        principal.authorize(Operation::CreateApiKey)?;
        let mut new_key = request.into_new_key()?;
        // A caller bound to agents mints within them: its own when the request names none.
        new_key.agents = principal.grantable_agents(new_key.agents.take())?;
        refuse_wider_than_caller(principal, &new_key.scopes, new_key.agents.as_ref())?;
        // Nor longer: a key that expires (or is rolled away, its overlap running) cannot
        // mint one that outlives it.
        if let Credential::ApiKey { key_id, .. } = principal.credential()
            && let Some(minter_expires_at) = self
                .storage
                .api_key(principal.scope(), *key_id)
                .await?
                .and_then(|minter| minter.expires_at)
        {
            new_key.expires_at = Some(
                new_key
                    .expires_at
                    .map_or(minter_expires_at, |asked| asked.min(minter_expires_at)),
            );
        }
        let (record, secret) = self
            .storage
            .create_api_key(
                principal.scope(),
                &new_key,
                self.api_key_pepper()?,
                principal.actor(),
            )
            .await?;
        tracing::info!(key_id = %record.id, created_by = %principal.actor().id, "api key created");
        Ok((record, secret))
    }
}
