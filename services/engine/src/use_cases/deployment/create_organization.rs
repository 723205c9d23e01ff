//! A new tenant organization with its owner's console account and its first projects, each
//! with its first API key (the password and keys are shown once).

use super::create_project::CreatedProject;
use super::{DeploymentAdmin, account_email, new_console_password};
use crate::EngineError;
use engram_core::{DeploymentOperator, FieldError, InvalidInput, Operation, OrganizationId};

/// Most projects one command creates with a new organization.
pub const MAX_NEW_PROJECTS: u8 = 20;

pub struct CreateOrganizationRequest {
    pub name: String,
    pub owner_email: String,
    /// 1–[`MAX_NEW_PROJECTS`], named `project 1`, `project 2`, …
    pub projects: u8,
}

pub struct CreatedOrganization {
    pub organization_id: OrganizationId,
    pub console_email: String,
    pub console_password: String,
    pub projects: Vec<CreatedProject>,
}

impl DeploymentAdmin {
    pub async fn create_organization_for(
        &self,
        operator: &DeploymentOperator,
        request: CreateOrganizationRequest,
    ) -> Result<CreatedOrganization, EngineError> {
        operator.authorize(Operation::CreateOrganization)?;
        let name = super::create_project::project_name(&request.name, "name")?;
        if !(1..=MAX_NEW_PROJECTS).contains(&request.projects) {
            return Err(InvalidInput(vec![FieldError::new(
                "projects",
                format!("must be 1–{MAX_NEW_PROJECTS}"),
            )])
            .into());
        }
        let console_email = account_email(&request.owner_email, "owner_email")?;
        let console_password = new_console_password();
        let password_hash = super::hash_new_password(&console_password).await?;
        let record = self
            .while_locked("creating the organization", || {
                self.storage.bootstrap_organization(
                    &name,
                    "project 1",
                    &console_email,
                    &password_hash,
                    &self.pepper,
                )
            })
            .await?;
        let mut projects = vec![CreatedProject {
            project_id: record.project_id,
            organization_id: record.organization_id,
            api_key: record.api_key,
        }];
        for number in 2..=request.projects {
            let project_name = format!("project {number}");
            let (project, api_key) = self
                .while_locked("creating a project", || {
                    self.storage.create_project_as(
                        operator.actor(),
                        record.organization_id,
                        &project_name,
                        &self.pepper,
                    )
                })
                .await?;
            projects.push(CreatedProject {
                project_id: project.id,
                organization_id: record.organization_id,
                api_key,
            });
        }
        Ok(CreatedOrganization {
            organization_id: record.organization_id,
            console_email,
            console_password,
            projects,
        })
    }
}
