//! Tenant scope: the (organization, project) a request is allowed to touch, and the
//! caller-chosen subject filters inside it. Every storage and index call takes a scope.

use crate::ids::{OrganizationId, ProjectId};
use crate::validation::ExternalId;

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
}

impl MemoryScope {
    /// Every end-user's data of the project: for the engine's own background work.
    pub fn project_wide(project: ProjectScope) -> Self {
        Self {
            project,
            end_user: None,
        }
    }

    /// Only `end_user`'s data: the scope of a verified end-user token.
    pub(crate) fn confined_to(project: ProjectScope, end_user: ExternalId) -> Self {
        Self {
            project,
            end_user: Some(end_user),
        }
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
