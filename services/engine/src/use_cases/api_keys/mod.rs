//! The project's API keys: list, create, revoke and roll. A key never holds more than its
//! caller can exercise — the rule is the same for a key that mints one and for a console
//! member — and a key minted by an expiring key expires no later.

mod create_api_key;
mod list_api_keys;
mod revoke_api_key;
mod roll_api_key;

pub use create_api_key::{CreateApiKeyRequest, MAX_KEY_LABEL_CHARS};
pub use roll_api_key::{
    DEFAULT_ROLL_OVERLAP_SECONDS, MAX_ROLL_OVERLAP_SECONDS, RollApiKeyRequest, RolledApiKey,
};

use crate::EngineError;
use engram_core::{AgentRestriction, ApiScopes, Operation, Principal};
use engram_storage::ApiKeyRecord;

/// Keys belong to someone: revoking or rolling a key someone else made (or one whose maker
/// is not recorded) needs `ManageOthersApiKeys` — owners, admins and `admin` keys, never a
/// console developer, who manages only the keys they made.
fn refuse_unless_own_or_managing_others(
    principal: &Principal,
    key: &ApiKeyRecord,
) -> Result<(), EngineError> {
    if key.created_by.as_deref() == Some(principal.actor().label().as_str()) {
        return Ok(());
    }
    principal.authorize(Operation::ManageOthersApiKeys)?;
    Ok(())
}

/// `ScopeNotGrantable` naming the first scope of `scopes` the caller cannot exercise itself.
/// Also refuses, for a caller bound to agents, a key bound to an agent not its own or to
/// none (a key of every agent).
fn refuse_wider_than_caller(
    principal: &Principal,
    scopes: &ApiScopes,
    agents: Option<&AgentRestriction>,
) -> Result<(), EngineError> {
    if let Some(missing) = principal.grantable_scopes().missing_from(scopes).first() {
        return Err(EngineError::ScopeNotGrantable {
            missing: *missing,
            caller: principal.kind().clone(),
        });
    }
    if let Some(own) = principal.agents() {
        match agents {
            Some(agents) if own.covers(agents) => {}
            Some(_) => {
                principal.grantable_agents(agents.cloned())?;
            }
            None => {
                return Err(EngineError::Forbidden(format!(
                    "a credential bound to agents {} cannot manage a key of every agent",
                    own.describe()
                )));
            }
        }
    }
    Ok(())
}
