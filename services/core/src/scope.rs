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
