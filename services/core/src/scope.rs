//! Tenant scope: the (organization, project) a request is allowed to touch, and the
//! caller-chosen subject filters inside it. Every storage and index call takes a scope.

use crate::ids::{OrganizationId, ProjectId};
use crate::validation::ExternalId;
use serde::Serialize;

/// The organization and project a verified credential grants access to.
///
/// Storage and index functions take `&ProjectScope` and add its project to every query, so
/// a query without a tenant filter cannot be written. The only constructor is
/// [`ProjectScope::from_verified_credential`]; an architecture test (`tests/architecture.rs`)
/// fails the build if it is called anywhere but in credential verification and in the code
/// that creates a project (whose creator is entitled to it by construction).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProjectScope {
    organization_id: OrganizationId,
    project_id: ProjectId,
}

impl ProjectScope {
    /// Build a scope for a project whose credential has just been verified.
    pub fn from_verified_credential(
        organization_id: OrganizationId,
        project_id: ProjectId,
    ) -> Self {
        Self {
            organization_id,
            project_id,
        }
    }

    pub fn organization_id(&self) -> OrganizationId {
        self.organization_id
    }

    pub fn project_id(&self) -> ProjectId {
        self.project_id
    }
}

/// Optional narrowing inside a project to one end-user, agent and/or session.
/// These are filters chosen by the caller, not isolation boundaries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SubjectFilter {
    pub user_id: Option<ExternalId>,
    pub agent_id: Option<ExternalId>,
    pub session_id: Option<ExternalId>,
}

/// A project scope and, when the caller holds an end-user token, the one end-user whose data
/// exists for it.
///
/// Storage reads and writes of data that belongs to end-users (memories, messages, session
/// state, files, feedback, recall events) take this type and add its end-user to every query,
/// so no use case can forget an end-user token's confinement. It is built from a verified
/// [`crate::Principal`] (`Principal::memory_scope`) or, for the engine's own work over a whole
/// project (indexing, derivation, evaluation runs, sweeps), by [`MemoryScope::project_wide`];
/// an architecture test lists the files allowed to call the latter.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MemoryScope {
    project: ProjectScope,
    end_user: Option<ExternalId>,
    agents: Option<AgentRestriction>,
}

/// The agents a credential is bound to: it writes only as them and reads only their memories
/// and what is shared with them (a `shared` memory, or other rows without an agent). Never
/// empty; sorted and without repeats, so two equal sets compare equal. Serialized as the
/// list of agents.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AgentRestriction {
    agents: Vec<ExternalId>,
    /// Whether memories shared by other agents count: yes for reading, no for what a change
    /// or deletion may reach ([`MemoryScope::for_changes`]).
    with_shared: bool,
    /// The project's named teams these agents belong to (sorted): memories shared with one
    /// of them count as shared; those shared with another team do not.
    teams: Vec<String>,
}

impl Serialize for AgentRestriction {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.agents.serialize(serializer)
    }
}

/// The most agents one credential may be bound to.
pub const MAX_BOUND_AGENTS: usize = 64;

impl AgentRestriction {
    /// The restriction to `agents`: `Err` says what is wrong (none, too many).
    pub fn new(agents: impl IntoIterator<Item = ExternalId>) -> Result<Self, String> {
        let mut agents: Vec<ExternalId> = agents.into_iter().collect();
        agents.sort();
        agents.dedup();
        if agents.is_empty() {
            return Err(
                "must name at least one agent (leave it out for a key of every agent)".to_string(),
            );
        }
        if agents.len() > MAX_BOUND_AGENTS {
            return Err(format!(
                "may name at most {MAX_BOUND_AGENTS} agents, got {}",
                agents.len()
            ));
        }
        Ok(Self {
            agents,
            with_shared: true,
            teams: Vec::new(),
        })
    }

    /// What two disjoint restrictions leave: no agent, nothing shared (fails closed).
    fn no_agent_at_all() -> Self {
        Self {
            agents: Vec::new(),
            with_shared: false,
            teams: Vec::new(),
        }
    }

    /// The named teams of the project these agents belong to.
    pub fn teams(&self) -> &[String] {
        &self.teams
    }

    /// Whether memories shared by other agents are within: false in a scope for changes.
    pub fn with_shared(&self) -> bool {
        self.with_shared
    }

    /// Parse a request's `agents` field (`None`: bound to no agent), recording each problem
    /// under `field` or `field[i]`.
    pub fn parse_field(
        names: Option<&[String]>,
        field: &str,
        errors: &mut Vec<crate::FieldError>,
    ) -> Option<Self> {
        let names = names?;
        // Counted as sent: a list past the limit is refused even when it repeats names.
        if names.len() > MAX_BOUND_AGENTS {
            errors.push(crate::FieldError::new(
                field,
                format!(
                    "may name at most {MAX_BOUND_AGENTS} agents, got {}",
                    names.len()
                ),
            ));
            return None;
        }
        let mut agents = Vec::with_capacity(names.len());
        for (position, name) in names.iter().enumerate() {
            match ExternalId::parse(name) {
                Ok(agent) => agents.push(agent),
                Err(message) => errors.push(crate::FieldError::new(
                    format!("{field}[{position}]"),
                    message,
                )),
            }
        }
        match Self::new(agents) {
            Ok(agents) => Some(agents),
            Err(message) => {
                errors.push(crate::FieldError::new(field, message));
                None
            }
        }
    }

    /// The restriction as stored (a JSON array of agent ids); `None` when the text is not one.
    pub fn from_stored_text(text: &str) -> Option<Self> {
        let agents: Vec<String> = serde_json::from_str(text).ok()?;
        let agents = agents
            .iter()
            .map(|agent| ExternalId::parse(agent))
            .collect::<Result<Vec<_>, _>>()
            .ok()?;
        Self::new(agents).ok()
    }

    pub fn to_stored_text(&self) -> String {
        serde_json::to_string(&self.agents).unwrap_or_else(|_| "[]".to_string())
    }

    pub fn agents(&self) -> &[ExternalId] {
        &self.agents
    }

    /// A short fixed-length name of this set of agents (the first 16 hex characters of the
    /// SHA-256 of its stored form), for keys that must differ per set.
    pub fn stored_digest(&self) -> String {
        use sha2::{Digest, Sha256};
        let digest = Sha256::digest(self.to_stored_text().as_bytes());
        digest[..8]
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect()
    }

    /// The agents for a message: `["billing", "support"]` (the stored form reads so).
    pub fn describe(&self) -> String {
        self.to_stored_text()
    }

    pub fn contains(&self, agent_id: &str) -> bool {
        self.agents.iter().any(|agent| agent.as_str() == agent_id)
    }

    /// Whether every agent of `other` is one of these: what a credential bound to these
    /// agents may hand on.
    pub fn covers(&self, other: &AgentRestriction) -> bool {
        other
            .agents
            .iter()
            .all(|agent| self.contains(agent.as_str()))
    }

    /// The agents of both; `None` when they share none.
    pub fn intersection(&self, other: &AgentRestriction) -> Option<AgentRestriction> {
        let mut both = Self::new(
            self.agents
                .iter()
                .filter(|agent| other.contains(agent.as_str()))
                .cloned(),
        )
        .ok()?;
        both.with_shared = self.with_shared && other.with_shared;
        Some(both)
    }
}

impl MemoryScope {
    /// Every end-user's data of the project: for the engine's own background work.
    pub fn project_wide(project: ProjectScope) -> Self {
        Self {
            project,
            end_user: None,
            agents: None,
        }
    }

    /// Only `end_user`'s data: the scope of a verified end-user token.
    pub(crate) fn confined_to(project: ProjectScope, end_user: ExternalId) -> Self {
        Self {
            project,
            end_user: Some(end_user),
            agents: None,
        }
    }

    /// This scope narrowed to what a credential bound to `agents` may see (`None` leaves it
    /// as it is). It only ever narrows: a scope already bound keeps the agents of both, and
    /// two sets with no agent in common leave it seeing no agent's rows at all.
    pub fn bound_to_agents(mut self, agents: Option<AgentRestriction>) -> Self {
        self.agents = match (self.agents.take(), agents) {
            (Some(bound), Some(more)) => Some(
                bound
                    .intersection(&more)
                    .unwrap_or_else(AgentRestriction::no_agent_at_all),
            ),
            (bound, more) => bound.or(more),
        };
        self
    }

    /// This scope knowing which of the project's `teams` its agents belong to (a scope bound
    /// to no agent sees every team's memories already).
    pub fn in_agent_teams(mut self, teams: &crate::agent_teams::AgentTeams) -> Self {
        if let Some(agents) = self.agents.as_mut() {
            agents.teams = teams.teams_of(agents.agents.iter().map(ExternalId::as_str));
        }
        self
    }

    /// The agents this scope is bound to; `None` for every agent.
    pub fn agents(&self) -> Option<&AgentRestriction> {
        self.agents.as_ref()
    }

    /// Whether a change through this scope may touch a row (a memory, a run, a file, a state
    /// value) of `agent_id`: any row for a scope bound to no agent, else only its agents'
    /// (rows of other agents, and of no agent, are read, not owned).
    pub fn changes_rows_of(&self, agent_id: Option<&str>) -> bool {
        self.agents
            .as_ref()
            .is_none_or(|agents| agent_id.is_some_and(|agent| agents.contains(agent)))
    }

    /// What a change or deletion through this scope may reach: for a scope bound to agents,
    /// their own memories only (those shared by other agents are read, not owned).
    pub fn for_changes(&self) -> Self {
        let mut scope = self.clone();
        if let Some(agents) = scope.agents.as_mut() {
            agents.with_shared = false;
        }
        scope
    }

    pub fn project(&self) -> &ProjectScope {
        &self.project
    }

    /// The end-user this scope is confined to; `None` for the whole project.
    pub fn end_user(&self) -> Option<&ExternalId> {
        self.end_user.as_ref()
    }

    /// The end-user namespace a request may address (session messages and state are kept per
    /// end-user, `None` being no end-user's): the requested one, but for a scope confined to
    /// an end-user only that end-user's. `None` when the requested one does not exist for it.
    pub fn owner_within<'a>(&'a self, requested: Option<&'a str>) -> Option<Option<&'a str>> {
        match &self.end_user {
            None => Some(requested),
            Some(end_user) if requested.is_none_or(|requested| requested == end_user.as_str()) => {
                Some(Some(end_user.as_str()))
            }
            Some(_) => None,
        }
    }
}
