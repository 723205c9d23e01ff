//! The names a reader of the audit log sees beside the ids of who acted: API keys' labels
//! (with their public prefix) and, for console members, the members' e-mail addresses.

use crate::{EngineError, MemoryEngine};
use engram_core::Principal;
use engram_core::permissions::Operation;
use engram_core::principal::Credential;
use std::collections::BTreeMap;

impl MemoryEngine {
    /// Actor id → name, for the audit log of the principal's project. Naming who acted is
    /// what the log is for: every console reader of the log (owners, admins, compliance) gets
    /// the members' e-mail addresses beside their ids, though compliance may not manage
    /// members; an API key reading the log sees key labels only.
    pub async fn audit_actor_names_for(
        &self,
        principal: &Principal,
    ) -> Result<BTreeMap<String, String>, EngineError> {
        principal.authorize(Operation::ListAuditEvents)?;
        let scope = principal.scope();
        let mut names = BTreeMap::new();
        for key in self.storage.list_api_keys(scope).await? {
            names.insert(
                key.id.to_string(),
                format!("key “{}” ({}…)", key.label, key.public_id),
            );
        }
        if matches!(principal.credential(), Credential::ConsoleAccount { .. }) {
            for member in self
                .storage
                .list_console_members(scope.organization_id())
                .await?
            {
                names.insert(member.id.to_string(), member.email);
            }
        }
        Ok(names)
    }
}
