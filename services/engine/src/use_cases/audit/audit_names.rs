//! The names a reader of the audit log sees beside the ids of who acted and what was acted
//! on: API keys' labels (with their public prefix), projects' names and, for console members,
//! the members' e-mail addresses.

use crate::{EngineError, MemoryEngine};
use engram_core::Principal;
use engram_core::permissions::Operation;
use engram_core::principal::Credential;
use std::collections::BTreeMap;

/// Id → name, kept apart by what the id names: the actor filter matches people and keys
/// only, never a project that happens to share a name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuditNames {
    /// Keys and (for console readers) members.
    pub actors: BTreeMap<String, String>,
    /// The principal's project and, for console readers, every project of the organization
    /// (members see every project of theirs in the project picker already).
    pub projects: BTreeMap<String, String>,
}

impl AuditNames {
    /// The name of any id the log shows: an actor's or a project's.
    pub fn name_of(&self, id: &str) -> Option<&String> {
        self.actors.get(id).or_else(|| self.projects.get(id))
    }
}

impl MemoryEngine {
    /// The names for the audit log of the principal's project. Naming who acted is what the
    /// log is for: every console reader of the log (owners, admins, compliance) gets the
    /// members' e-mail addresses beside their ids, though compliance may not manage members;
    /// an API key reading the log sees key labels and its own project's name only.
    pub async fn audit_names_for(&self, principal: &Principal) -> Result<AuditNames, EngineError> {
        principal.authorize(Operation::ListAuditEvents)?;
        let scope = principal.scope();
        let mut names = AuditNames::default();
        for key in self.storage.list_api_keys(scope).await? {
            names.actors.insert(
                key.id.to_string(),
                format!("key “{}” ({}…)", key.label, key.public_id),
            );
        }
        let console_reader = matches!(principal.credential(), Credential::ConsoleAccount { .. });
        for project in self.storage.list_projects(scope.organization_id()).await? {
            if console_reader || project.id == scope.project_id() {
                names.projects.insert(
                    project.id.to_string(),
                    format!("project “{}”", project.name),
                );
            }
        }
        if console_reader {
            for member in self
                .storage
                .list_console_members(scope.organization_id())
                .await?
            {
                names.actors.insert(member.id.to_string(), member.email);
            }
        }
        Ok(names)
    }
}
