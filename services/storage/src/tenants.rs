//! Organizations, projects, console accounts and project API keys; the credential checks
//! that turn a presented API key (or a verified console session) into a `ProjectScope`.

use crate::entities::{api_keys, console_accounts, organizations, projects};
use crate::{Storage, StorageError};
use chrono::Utc;
use engram_core::ids::ConsoleAccountId;
use engram_core::{OrganizationId, ProjectId, ProjectScope};
use hmac::{Hmac, Mac};
use rand::Rng;
use rand::distributions::Alphanumeric;
use sea_orm::{
    ActiveValue::Set, ColumnTrait, EntityTrait, QueryFilter, QueryOrder, TransactionTrait,
};
use sha2::Sha256;
use subtle::ConstantTimeEq;
use uuid::Uuid;

/// Prefix of every project API key: `egk_<public id>_<secret>`.
pub const API_KEY_PREFIX: &str = "egk_";
const PUBLIC_ID_LENGTH: usize = 16;
const SECRET_LENGTH: usize = 40;

/// Server-side secret mixed into API key hashes (HMAC-SHA-256), so a leaked database alone
/// does not allow offline guessing of key secrets.
#[derive(Clone)]
pub struct ApiKeyPepper(Vec<u8>);

impl ApiKeyPepper {
    pub fn new(secret_bytes: Vec<u8>) -> Self {
        Self(secret_bytes)
    }

    fn hash_secret(&self, secret: &str) -> String {
        // HMAC accepts keys of any length, so this cannot fail.
        let mut mac =
            <Hmac<Sha256> as Mac>::new_from_slice(&self.0).unwrap_or_else(|_| unreachable!());
        mac.update(secret.as_bytes());
        hex::encode(mac.finalize().into_bytes())
    }
}

impl std::fmt::Debug for ApiKeyPepper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKeyPepper(***)")
    }
}

/// What a first start creates, returned once so it can be shown to the operator.
#[derive(Clone, Debug)]
pub struct BootstrapRecord {
    pub organization_id: OrganizationId,
    pub project_id: ProjectId,
    pub api_key: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProjectRecord {
    pub id: ProjectId,
    pub organization_id: OrganizationId,
    pub name: String,
}

#[derive(Clone, Debug)]
pub struct ConsoleAccountRecord {
    pub id: ConsoleAccountId,
    pub organization_id: OrganizationId,
    pub email: String,
    pub password_hash: String,
    pub role: String,
}

fn random_text(length: usize) -> String {
    rand::thread_rng()
        .sample_iter(&Alphanumeric)
        .take(length)
        .map(char::from)
        .collect()
}

fn mint_api_key() -> (String, String, String) {
    let public_id = random_text(PUBLIC_ID_LENGTH).to_lowercase();
    let secret = random_text(SECRET_LENGTH);
    let presented = format!("{API_KEY_PREFIX}{public_id}_{secret}");
    (presented, public_id, secret)
}

/// Split `egk_<public id>_<secret>`; `None` for anything else.
fn parse_presented_key(presented: &str) -> Option<(&str, &str)> {
    let rest = presented.strip_prefix(API_KEY_PREFIX)?;
    let (public_id, secret) = rest.split_once('_')?;
    if public_id.len() != PUBLIC_ID_LENGTH || secret.len() != SECRET_LENGTH {
        return None;
    }
    Some((public_id, secret))
}

impl Storage {
    pub async fn organization_count(&self) -> Result<u64, StorageError> {
        use sea_orm::PaginatorTrait;
        organizations::Entity::find()
            .count(&self.connection)
            .await
            .map_err(StorageError::from_db)
    }

    /// First start: an organization, its first project with an API key, and an owner
    /// console account, all in one transaction.
    pub async fn bootstrap_organization(
        &self,
        organization_name: &str,
        project_name: &str,
        console_email: &str,
        console_password_hash: &str,
        pepper: &ApiKeyPepper,
    ) -> Result<BootstrapRecord, StorageError> {
        let _permit = self.write_permit().await;
        let now = Utc::now();
        let organization_id = OrganizationId::generate();
        let transaction = self
            .connection
            .begin()
            .await
            .map_err(StorageError::from_db)?;
        organizations::Entity::insert(organizations::ActiveModel {
            id: Set(organization_id.as_uuid()),
            name: Set(organization_name.to_string()),
            created_at: Set(now),
        })
        .exec(&transaction)
        .await
        .map_err(StorageError::from_db)?;
        console_accounts::Entity::insert(console_accounts::ActiveModel {
            id: Set(ConsoleAccountId::generate().as_uuid()),
            organization_id: Set(organization_id.as_uuid()),
            email: Set(console_email.to_lowercase()),
            password_hash: Set(console_password_hash.to_string()),
            role: Set("owner".to_string()),
            created_at: Set(now),
        })
        .exec(&transaction)
        .await
        .map_err(StorageError::from_db)?;
        let (project, api_key) =
            insert_project_with_key(&transaction, organization_id, project_name, pepper).await?;
        transaction.commit().await.map_err(StorageError::from_db)?;
        Ok(BootstrapRecord {
            organization_id,
            project_id: project.id,
            api_key,
        })
    }

    /// A new project in an existing organization, with its first API key (shown once).
    pub async fn create_project(
        &self,
        organization_id: OrganizationId,
        name: &str,
        pepper: &ApiKeyPepper,
    ) -> Result<(ProjectRecord, String), StorageError> {
        let _permit = self.write_permit().await;
        let transaction = self
            .connection
            .begin()
            .await
            .map_err(StorageError::from_db)?;
        let exists = organizations::Entity::find_by_id(organization_id.as_uuid())
            .one(&transaction)
            .await
            .map_err(StorageError::from_db)?;
        if exists.is_none() {
            return Err(StorageError::NotFound);
        }
        let created = insert_project_with_key(&transaction, organization_id, name, pepper).await?;
        transaction.commit().await.map_err(StorageError::from_db)?;
        Ok(created)
    }

    /// Every project's scope, for system work that spans tenants one project at a time (the
    /// index reconciler). Never reachable from a request: no credential is involved.
    pub async fn all_project_scopes_for_maintenance(
        &self,
    ) -> Result<Vec<ProjectScope>, StorageError> {
        let all_projects = projects::Entity::find()
            .order_by_asc(projects::Column::Id)
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(all_projects
            .into_iter()
            .map(|project| {
                // The system itself is the verified actor here.
                ProjectScope::from_verified_credential(
                    OrganizationId::from_uuid(project.organization_id),
                    ProjectId::from_uuid(project.id),
                )
            })
            .collect())
    }

    /// The organization created at bootstrap (the embedded default has exactly one).
    pub async fn first_organization_id(&self) -> Result<Option<OrganizationId>, StorageError> {
        let first = organizations::Entity::find()
            .order_by_asc(organizations::Column::CreatedAt)
            .one(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(first.map(|organization| OrganizationId::from_uuid(organization.id)))
    }

    pub async fn organization_name(
        &self,
        organization_id: OrganizationId,
    ) -> Result<Option<String>, StorageError> {
        let found = organizations::Entity::find_by_id(organization_id.as_uuid())
            .one(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(found.map(|organization| organization.name))
    }

    /// Verify a presented API key; the scope of its project when it is valid and not revoked.
    /// Unknown ids and wrong secrets are indistinguishable to the caller.
    pub async fn authenticate_api_key(
        &self,
        presented: &str,
        pepper: &ApiKeyPepper,
    ) -> Result<Option<ProjectScope>, StorageError> {
        let Some((public_id, secret)) = parse_presented_key(presented) else {
            return Ok(None);
        };
        let stored = api_keys::Entity::find()
            .filter(api_keys::Column::PublicId.eq(public_id))
            .one(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        let presented_hash = pepper.hash_secret(secret);
        let Some(stored) = stored else {
            return Ok(None);
        };
        let hashes_match: bool = stored
            .secret_hash
            .as_bytes()
            .ct_eq(presented_hash.as_bytes())
            .into();
        if !hashes_match || stored.revoked_at.is_some() {
            return Ok(None);
        }
        Ok(Some(ProjectScope::from_verified_credential(
            OrganizationId::from_uuid(stored.organization_id),
            ProjectId::from_uuid(stored.project_id),
        )))
    }

    pub async fn find_console_account(
        &self,
        email: &str,
    ) -> Result<Option<ConsoleAccountRecord>, StorageError> {
        let found = console_accounts::Entity::find()
            .filter(console_accounts::Column::Email.eq(email.to_lowercase()))
            .one(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(found.map(account_record))
    }

    pub async fn console_account(
        &self,
        id: ConsoleAccountId,
    ) -> Result<Option<ConsoleAccountRecord>, StorageError> {
        let found = console_accounts::Entity::find_by_id(id.as_uuid())
            .one(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(found.map(account_record))
    }

    pub async fn list_projects(
        &self,
        organization_id: OrganizationId,
    ) -> Result<Vec<ProjectRecord>, StorageError> {
        let found = projects::Entity::find()
            .filter(projects::Column::OrganizationId.eq(organization_id.as_uuid()))
            .order_by_asc(projects::Column::CreatedAt)
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(found.into_iter().map(project_record).collect())
    }

    /// The scope of `project_id` for a console account of `organization_id` whose session was
    /// verified; `None` when the project belongs to another organization.
    pub async fn project_scope_for_console_account(
        &self,
        verified_account: &ConsoleAccountRecord,
        project_id: ProjectId,
    ) -> Result<Option<ProjectScope>, StorageError> {
        let found = projects::Entity::find_by_id(project_id.as_uuid())
            .filter(projects::Column::OrganizationId.eq(verified_account.organization_id.as_uuid()))
            .one(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(found.map(|project| {
            ProjectScope::from_verified_credential(
                OrganizationId::from_uuid(project.organization_id),
                ProjectId::from_uuid(project.id),
            )
        }))
    }
}

async fn insert_project_with_key<C: sea_orm::ConnectionTrait>(
    connection: &C,
    organization_id: OrganizationId,
    name: &str,
    pepper: &ApiKeyPepper,
) -> Result<(ProjectRecord, String), StorageError> {
    let now = Utc::now();
    let project_id = ProjectId::generate();
    projects::Entity::insert(projects::ActiveModel {
        id: Set(project_id.as_uuid()),
        organization_id: Set(organization_id.as_uuid()),
        name: Set(name.to_string()),
        created_at: Set(now),
    })
    .exec(connection)
    .await
    .map_err(StorageError::from_db)?;
    let (presented, public_id, secret) = mint_api_key();
    api_keys::Entity::insert(api_keys::ActiveModel {
        id: Set(Uuid::now_v7()),
        organization_id: Set(organization_id.as_uuid()),
        project_id: Set(project_id.as_uuid()),
        public_id: Set(public_id),
        secret_hash: Set(pepper.hash_secret(&secret)),
        label: Set("default".to_string()),
        created_at: Set(now),
        revoked_at: Set(None),
    })
    .exec(connection)
    .await
    .map_err(StorageError::from_db)?;
    Ok((
        ProjectRecord {
            id: project_id,
            organization_id,
            name: name.to_string(),
        },
        presented,
    ))
}

fn account_record(model: console_accounts::Model) -> ConsoleAccountRecord {
    ConsoleAccountRecord {
        id: ConsoleAccountId::from_uuid(model.id),
        organization_id: OrganizationId::from_uuid(model.organization_id),
        email: model.email,
        password_hash: model.password_hash,
        role: model.role,
    }
}

fn project_record(model: projects::Model) -> ProjectRecord {
    ProjectRecord {
        id: ProjectId::from_uuid(model.id),
        organization_id: OrganizationId::from_uuid(model.organization_id),
        name: model.name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_keys_parse_and_malformed_ones_do_not() {
        let (presented, public_id, secret) = mint_api_key();
        assert_eq!(
            parse_presented_key(&presented),
            Some((public_id.as_str(), secret.as_str()))
        );
        assert_eq!(parse_presented_key("egk_short_secret"), None);
        assert_eq!(
            parse_presented_key(&presented.replacen("egk_", "xyz_", 1)),
            None
        );
    }
}
