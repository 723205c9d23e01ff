//! What is known about a project's API key as readers see it, never its secret, and
//! whether it still authenticates.

use crate::access::{ApiScopes, KeyEnvironment};
use crate::ids::ApiKeyId;
use chrono::{DateTime, Utc};

/// What is known about a key, never its secret.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiKeyRecord {
    pub id: ApiKeyId,
    pub label: String,
    /// The key's public part (`egk_live_<public id>_…`), safe to show.
    pub public_id: String,
    pub environment: KeyEnvironment,
    pub scopes: ApiScopes,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
    /// Who made it, as an actor label (`console_account:<id>`, `api_key:<id>`,
    /// `system:<command>`); a rolled key keeps its line's maker. `None` for keys made before
    /// makers were recorded.
    pub created_by: Option<String>,
    /// The agents the key is bound to; `None` for every agent.
    pub agents: Option<crate::AgentRestriction>,
}

impl ApiKeyRecord {
    /// `revoked`, `expired` or `active` at `now`: whether it still authenticates.
    pub fn state_at(&self, now: DateTime<Utc>) -> &'static str {
        if self.revoked_at.is_some() {
            "revoked"
        } else if self.expires_at.is_some_and(|expires_at| expires_at <= now) {
            "expired"
        } else {
            "active"
        }
    }
}
