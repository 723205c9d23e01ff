//! The authenticated caller of a use case: the project scope its credential proved, what it
//! may do, the end-user a token confines it to, and who it is for history and audit.
//! Only authentication builds one; every engine use case takes one.

use crate::access::ApiScopes;
use crate::audit::{Actor, ActorKind};
use crate::ids::ApiKeyId;
use crate::memory::Memory;
use crate::permissions::{
    AnswerContent, Operation, Permission, PermissionDenied, PrincipalKind, authorize,
};
use crate::scope::{AgentRestriction, MemoryScope, ProjectScope};
use crate::usage::UsageAttribution;
use crate::validation::ExternalId;

/// What authenticated the caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Credential {
    ApiKey {
        key_id: ApiKeyId,
        /// The first key of its roll line: the same before and after a roll.
        lineage_id: ApiKeyId,
    },
    /// An end-user token: every call is confined to this end-user's data. `minted_by` is
    /// the project key that minted it, which its usage is billed to.
    EndUserToken {
        user_id: ExternalId,
        minted_by: ApiKeyId,
    },
    /// A console member's session.
    ConsoleAccount { account_id: String },
    /// The operator at the command line.
    Operator,
}

/// An authenticated caller inside one project.
#[derive(Clone, Debug)]
pub struct Principal {
    /// The project, and for an end-user token its end-user: what storage confines to.
    memory_scope: MemoryScope,
    kind: PrincipalKind,
    credential: Credential,
    actor: Actor,
}

/// The deployment's operator at the command line, before any project is in question
/// (creating organizations, projects, console accounts, prices). An architecture test lists
/// the only place that makes one: the CLI's admin commands.
#[derive(Clone, Debug)]
pub struct DeploymentOperator {
    actor: Actor,
}

impl DeploymentOperator {
    /// The operator running `command` (`admin create-project`, …), named so in the audit log.
    pub fn at_the_command_line(command: &str) -> Self {
        Self {
            actor: Actor::command_line(command),
        }
    }

    pub fn actor(&self) -> &Actor {
        &self.actor
    }

    /// `Ok` when the permission table lets the operator perform `operation`.
    pub fn authorize(&self, operation: Operation) -> Result<(), PermissionDenied> {
        authorize(&PrincipalKind::Operator, operation)
    }
}

/// An agent a request names that its credential is not bound to, or a write that names no
/// agent from a credential bound to several.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OutsideAgents {
    #[error("`{field}`: {agent:?} is not an agent of this credential, which is bound to {agents}")]
    Other {
        field: String,
        agent: String,
        agents: String,
    },
    #[error("`{field}`: required, this credential is bound to agents {agents}; name one of them")]
    Unnamed { field: String, agents: String },
}

/// A `user_id` named by an end-user token's request that is not the token's end-user.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{field}`: this end-user token is confined to user_id {end_user:?}")]
pub struct OutsideEndUser {
    pub field: String,
    pub end_user: String,
}

impl Principal {
    /// A project API key that authentication just verified, with its scopes.
    pub fn api_key(
        scope: ProjectScope,
        key_id: ApiKeyId,
        lineage_id: ApiKeyId,
        scopes: ApiScopes,
        agents: Option<AgentRestriction>,
        origin: Actor,
    ) -> Self {
        Self {
            memory_scope: MemoryScope::project_wide(scope).bound_to_agents(agents),
            kind: PrincipalKind::ApiKey(scopes),
            credential: Credential::ApiKey { key_id, lineage_id },
            actor: Actor {
                kind: ActorKind::ApiKey,
                id: key_id.to_string(),
                ..origin
            },
        }
    }

    /// An end-user token that authentication just verified. History and the audit log name
    /// the end-user by `subject_digest` (a keyed digest of project and user id), never by
    /// the raw id, which is personal data that would outlive an erasure there.
    pub fn end_user_token(
        scope: ProjectScope,
        user_id: ExternalId,
        minted_by: ApiKeyId,
        scopes: ApiScopes,
        agents: Option<AgentRestriction>,
        subject_digest: String,
        origin: Actor,
    ) -> Self {
        Self {
            memory_scope: MemoryScope::confined_to(scope, user_id.clone()).bound_to_agents(agents),
            kind: PrincipalKind::EndUserToken(scopes),
            actor: Actor {
                kind: ActorKind::EndUser,
                id: subject_digest,
                ..origin
            },
            credential: Credential::EndUserToken { user_id, minted_by },
        }
    }

    /// A console member whose session was just verified, in a project of their organization.
    pub fn console_member(
        scope: ProjectScope,
        role: crate::access::ConsoleRole,
        account_id: String,
        origin: Actor,
    ) -> Self {
        Self {
            memory_scope: MemoryScope::project_wide(scope),
            kind: PrincipalKind::ConsoleMember(role),
            actor: Actor {
                kind: ActorKind::ConsoleAccount,
                id: account_id.clone(),
                ..origin
            },
            credential: Credential::ConsoleAccount { account_id },
        }
    }

    /// The deployment's operator in one project: a background job (`job` names it in history
    /// and the audit log) or an admin command at the command line. It holds every
    /// permission; an architecture test lists the only places that build one (the engine's
    /// jobs and the CLI's admin commands), so no front door can.
    pub fn operator(scope: ProjectScope, job: &str) -> Self {
        Self {
            memory_scope: MemoryScope::project_wide(scope),
            kind: PrincipalKind::Operator,
            credential: Credential::Operator,
            actor: Actor::system(job),
        }
    }

    /// This principal calling through `channel`: a door that learns which operation it
    /// serves only after authenticating (the MCP tool a call names) says so here.
    pub fn through(mut self, channel: crate::audit::Channel) -> Self {
        self.actor.channel = channel;
        self
    }

    /// This principal acting for the request `request_id` (a job continues a request).
    pub fn for_request(mut self, request_id: Option<String>) -> Self {
        self.actor.request_id = request_id;
        self
    }

    pub fn scope(&self) -> &ProjectScope {
        self.memory_scope.project()
    }

    /// The scope storage confines this caller's reads and writes of end-user data to.
    /// This principal knowing which of the project's named teams its agents belong to.
    pub fn in_agent_teams(mut self, teams: &crate::agent_teams::AgentTeams) -> Self {
        self.memory_scope = self.memory_scope.in_agent_teams(teams);
        self
    }

    pub fn memory_scope(&self) -> &MemoryScope {
        &self.memory_scope
    }

    pub fn kind(&self) -> &PrincipalKind {
        &self.kind
    }

    pub fn credential(&self) -> &Credential {
        &self.credential
    }

    /// Who is recorded in memory history and the audit log for changes made by this caller.
    pub fn actor(&self) -> &Actor {
        &self.actor
    }

    /// `Ok` when the permission table lets this caller perform `operation`. A credential
    /// bound to agents holds only what stays within them: reading, writing and deleting their
    /// memories, minting and managing credentials of their agents; project administration
    /// spans every agent and needs a credential bound to none.
    pub fn authorize(&self, operation: Operation) -> Result<(), PermissionDenied> {
        authorize(&self.kind, operation)?;
        let Some(agents) = self.agents() else {
            return Ok(());
        };
        // Rotating the signing key ends every agent's end-user tokens.
        let spanning = match operation {
            Operation::RotateEndUserSigningKey => Some(operation.required_permission()),
            _ => operation
                .required_permissions()
                .iter()
                .copied()
                .find(|permission| !permission.stays_within_agents()),
        };
        match spanning {
            None => Ok(()),
            Some(permission) => Err(PermissionDenied {
                operation,
                permission,
                message: format!(
                    "a credential bound to agents {} cannot {}: that spans every agent of the project and needs a credential bound to none",
                    agents.describe(),
                    operation.summary()
                ),
            }),
        }
    }

    /// The agents this caller's credential is bound to; `None` for every agent.
    pub fn agents(&self) -> Option<&AgentRestriction> {
        self.memory_scope.agents()
    }

    /// The agent a write names, as this caller may write it: a credential bound to agents
    /// writes only as one of them, and as its only agent when the request names none.
    pub fn agent_subject(
        &self,
        requested: Option<ExternalId>,
        field: &str,
    ) -> Result<Option<ExternalId>, OutsideAgents> {
        let Some(agents) = self.agents() else {
            return Ok(requested);
        };
        match requested {
            Some(agent) if agents.contains(agent.as_str()) => Ok(Some(agent)),
            Some(agent) => Err(OutsideAgents::Other {
                field: field.to_string(),
                agent: agent.as_str().to_string(),
                agents: agents.describe(),
            }),
            None => match agents.agents() {
                [only] => Ok(Some(only.clone())),
                _ => Err(OutsideAgents::Unnamed {
                    field: field.to_string(),
                    agents: agents.describe(),
                }),
            },
        }
    }

    /// The agent this caller's own records (feedback, recall events) are filed under: for a
    /// credential bound to agents, the first of them, so they stay within its agents;
    /// `None` for a credential bound to none.
    pub fn acting_agent(&self) -> Option<&ExternalId> {
        self.agents().and_then(|agents| agents.agents().first())
    }

    /// Whether this caller may change or delete a memory (or another row) of `agent_id`: a
    /// credential bound to agents changes only its agents' (reading shared ones is not
    /// owning them).
    pub fn may_change_agents_row(&self, agent_id: Option<&str>) -> bool {
        self.memory_scope.changes_rows_of(agent_id)
    }

    /// The most agents a key or token this caller mints may be bound to: its own, or any for
    /// a caller bound to none. `Err` names what the request asked beyond them.
    pub fn grantable_agents(
        &self,
        requested: Option<AgentRestriction>,
    ) -> Result<Option<AgentRestriction>, OutsideAgents> {
        match (self.agents(), requested) {
            (None, requested) => Ok(requested),
            (Some(own), None) => Ok(Some(own.clone())),
            (Some(own), Some(requested)) if own.covers(&requested) => Ok(Some(requested)),
            (Some(own), Some(requested)) => Err(OutsideAgents::Other {
                field: "agents".to_string(),
                agent: requested
                    .agents()
                    .iter()
                    .find(|agent| !own.contains(agent.as_str()))
                    .map(|agent| agent.as_str().to_string())
                    .unwrap_or_default(),
                agents: own.describe(),
            }),
        }
    }

    /// Whether the caller holds what `operation` needs (for optional parts of an answer).
    pub fn may(&self, operation: Operation) -> bool {
        self.authorize(operation).is_ok()
    }

    /// Whether answers may carry content to this caller: memory, query, message, state and
    /// file text, derivation and feedback results. The one content rule of the table.
    pub fn reads_content(&self) -> bool {
        self.kind.holds(Permission::ReadMemories)
    }

    /// Whether the answer of `operation` goes to this caller in its content-free form.
    pub fn answers_without_content(&self, operation: Operation) -> bool {
        match operation.content() {
            AnswerContent::None => false,
            AnswerContent::ForReaders | AnswerContent::Content => !self.reads_content(),
        }
    }

    /// `memory` as the answer of `operation` may show it to this caller: whole to a reader of
    /// content, else its content-free form.
    pub fn shown(&self, operation: Operation, memory: Memory) -> Memory {
        if self.answers_without_content(operation) {
            memory.without_content()
        } else {
            memory
        }
    }

    /// The most a key this caller mints, rolls or revokes may hold: only what the caller can
    /// exercise itself, so no one reaches through a key a power they do not hold.
    pub fn grantable_scopes(&self) -> ApiScopes {
        match &self.kind {
            PrincipalKind::ApiKey(scopes) => scopes.clone(),
            PrincipalKind::EndUserToken(_) => ApiScopes::default(),
            PrincipalKind::ConsoleMember(role) => role.grantable_api_scopes(),
            PrincipalKind::Operator => ApiScopes::all(),
        }
    }

    /// The end-user an end-user token confines this caller to; `None` otherwise.
    pub fn end_user(&self) -> Option<&ExternalId> {
        match &self.credential {
            Credential::EndUserToken { user_id, .. } => Some(user_id),
            _ => None,
        }
    }

    /// The door this caller came through.
    pub fn channel(&self) -> &crate::audit::Channel {
        &self.actor.channel
    }

    /// Who usage is billed to: `key:<id>` for an API key and for an end-user token (the key
    /// that minted it), `console:<account>` for a console member, `operator` otherwise.
    pub fn usage_credential(&self) -> String {
        match &self.credential {
            Credential::ApiKey { key_id, .. } => format!("key:{key_id}"),
            Credential::EndUserToken { minted_by, .. } => format!("key:{minted_by}"),
            Credential::ConsoleAccount { account_id } => format!("console:{account_id}"),
            Credential::Operator => "operator".to_string(),
        }
    }

    /// Who a call's usage is attributed to: the billed credential, the door, and for an
    /// end-user token its end-user. A use case adds the end-user and agent its request
    /// names ([`UsageAttribution::for_subject`]).
    pub fn usage_attribution(&self) -> UsageAttribution {
        UsageAttribution {
            credential: self.usage_credential(),
            channel: self.channel().as_str().to_string(),
            end_user: self.end_user().map(|user| user.as_str().to_string()),
            agent_id: None,
        }
    }

    /// The stored form of a client's `Idempotency-Key`: namespaced by the credential (a key's
    /// roll line, so a retry after a roll still replays) or by the end-user of a token, so one
    /// caller can never replay — and so read — another's answer. The `client:` prefix keeps
    /// client keys apart from the engine's own (`derive:…`, `file-ingest:…`); an end-user is
    /// named by its subject digest (64 hex characters), never by its raw id.
    pub fn idempotency_key(&self, client_key: &str) -> String {
        match &self.credential {
            Credential::ApiKey { lineage_id, .. } => {
                format!("client:key:{lineage_id}:{client_key}")
            }
            // The end-user by its subject digest (fixed length, keyed), never the raw id:
            // a stored key outlives an erasure of its answer.
            // And by the token's agents: two tokens of one end-user bound to different
            // agents never replay each other's answers.
            Credential::EndUserToken { .. } => match self.agents() {
                None => format!("client:user:{}:{client_key}", self.actor.id),
                Some(agents) => format!(
                    "client:user:{}:agents:{}:{client_key}",
                    self.actor.id,
                    agents.stored_digest()
                ),
            },
            Credential::ConsoleAccount { account_id } => {
                format!("client:console:{account_id}:{client_key}")
            }
            Credential::Operator => format!("client:operator:{client_key}"),
        }
    }

    /// For an end-user token: a `user_id` filter or field must name that end-user, and an
    /// absent one becomes it. Other callers' choices pass unchanged.
    pub fn end_user_subject(
        &self,
        requested: Option<ExternalId>,
        field: &str,
    ) -> Result<Option<ExternalId>, OutsideEndUser> {
        let Some(end_user) = self.end_user() else {
            return Ok(requested);
        };
        match requested {
            Some(requested) if &requested != end_user => Err(OutsideEndUser {
                field: field.to_string(),
                end_user: end_user.as_str().to_string(),
            }),
            _ => Ok(Some(end_user.clone())),
        }
    }
}
