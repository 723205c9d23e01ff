//! A new project in an organization, with its first API key (shown once).

use super::DeploymentAdmin;
use crate::EngineError;
use engram_core::{
    DeploymentOperator, FieldError, InvalidInput, Operation, OrganizationId, ProjectId,
};

pub const MAX_PROJECT_NAME_CHARS: usize = 200;

pub struct CreateProjectRequest {
    pub name: String,
    /// The organization by id or exact name; `None`: the one made at bootstrap.
    pub organization: Option<String>,
}

pub struct CreatedProject {
    pub project_id: ProjectId,
    pub organization_id: OrganizationId,
    /// The project's first key, `egk_…`: its only appearance.
    pub api_key: String,
}

/// A project name: 1–200 characters once trimmed.
pub(super) fn project_name(name: &str, field: &str) -> Result<String, EngineError> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > MAX_PROJECT_NAME_CHARS {
        return Err(InvalidInput(vec![FieldError::new(
            field,
            format!("must be 1–{MAX_PROJECT_NAME_CHARS} characters"),
        )])
        .into());
    }
    Ok(name.to_string())
}

impl DeploymentAdmin {
    pub async fn create_project_for(
        &self,
        operator: &DeploymentOperator,
        request: CreateProjectRequest,
    ) -> Result<CreatedProject, EngineError> {
        operator.authorize(Operation::CreateProject)?;
        let name = project_name(&request.name, "name")?;
        let organization_id = self
            .organization(request.organization.as_deref(), "organization")
            .await?;
        let (project, api_key) = self
            .while_locked("creating the project", || {
                self.storage.create_project_as(
                    operator.actor(),
                    organization_id,
                    &name,
                    &self.pepper,
                )
            })
            .await?;
        Ok(CreatedProject {
            project_id: project.id,
            organization_id,
            api_key,
        })
    }
}
