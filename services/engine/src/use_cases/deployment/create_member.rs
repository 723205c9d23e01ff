//! A console account an operator adds to an organization with a role; its initial password
//! is shown once.

use super::{DeploymentAdmin, account_email, new_console_password};
use crate::EngineError;
use engram_core::ids::ConsoleAccountId;
use engram_core::{ConsoleRole, DeploymentOperator, FieldError, InvalidInput, Operation};

pub struct CreateMemberRequest {
    /// The organization by id or exact name; `None`: the one made at bootstrap.
    pub organization: Option<String>,
    pub email: String,
    /// owner, admin, compliance, analyst or developer.
    pub role: String,
}

pub struct CreatedMember {
    pub account_id: ConsoleAccountId,
    pub email: String,
    pub role: ConsoleRole,
    pub password: String,
}

impl DeploymentAdmin {
    pub async fn create_member_for(
        &self,
        operator: &DeploymentOperator,
        request: CreateMemberRequest,
    ) -> Result<CreatedMember, EngineError> {
        operator.authorize(Operation::CreateMember)?;
        let mut errors = Vec::new();
        let role = ConsoleRole::parse(request.role.trim());
        if role.is_none() {
            errors.push(FieldError::new(
                "role",
                format!(
                    "must be one of owner, admin, compliance, analyst, developer (got {:?})",
                    request.role
                ),
            ));
        }
        let email = account_email(&request.email, "email")
            .map_err(|error| {
                if let EngineError::Invalid(InvalidInput(invalid)) = error {
                    errors.extend(invalid);
                }
            })
            .ok();
        let (Some(role), Some(email), true) = (role, email, errors.is_empty()) else {
            return Err(InvalidInput(errors).into());
        };
        let organization_id = self
            .organization(request.organization.as_deref(), "organization")
            .await?;
        let password = new_console_password();
        let password_hash = super::hash_new_password(&password).await?;
        let account_id = self
            .while_locked("creating the member", || {
                self.storage
                    .create_console_account(organization_id, &email, &password_hash, role)
            })
            .await?;
        Ok(CreatedMember {
            account_id,
            email,
            role,
            password,
        })
    }
}
