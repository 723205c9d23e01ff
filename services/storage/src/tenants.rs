//! Organizations, projects, console accounts and project API keys; the credential checks
//! that turn a presented API key (or a verified console session) into a `ProjectScope`.

use crate::MaintenanceStore;
use crate::api_keys::ApiKeyPepper;
use crate::entities::{console_accounts, organizations, projects};
use crate::{Storage, StorageError};
use chrono::Utc;
use engram_core::NotFoundKind;
use engram_core::ids::ConsoleAccountId;
pub use engram_core::tenants::ProjectRecord;
use engram_core::{OrganizationId, ProjectId, ProjectScope};
use sea_orm::{ActiveValue::Set, ColumnTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect};

/// What a first start creates, returned once so it can be shown to the operator.
#[derive(Clone, Debug)]
pub struct BootstrapRecord {
    pub organization_id: OrganizationId,
    pub project_id: ProjectId,
    pub api_key: String,
}

/// A console account as stored. Its `Debug` leaves the password hash out.
#[derive(Clone)]
pub struct ConsoleAccountRecord {
    pub id: ConsoleAccountId,
    pub organization_id: OrganizationId,
    pub email: String,
    pub password_hash: String,
    pub role: engram_core::ConsoleRole,
    /// The language the console speaks to the account; none: the browser's.
    pub language: Option<engram_core::ConsoleLanguage>,
}

impl std::fmt::Debug for ConsoleAccountRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsoleAccountRecord")
            .field("id", &self.id)
            .field("organization_id", &self.organization_id)
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
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
        let transaction = self.begin_write().await?;
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
            role: Set(engram_core::ConsoleRole::Owner.as_str().to_string()),
            created_at: Set(now),
            language: Set(None),
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

    /// A new project in an existing organization, with its first API key (shown once),
    /// audited as `project.created` by `actor` in the same transaction: the operator's
    /// commands create projects only this way.
    pub async fn create_project_as(
        &self,
        actor: &engram_core::audit::Actor,
        organization_id: OrganizationId,
        name: &str,
        pepper: &ApiKeyPepper,
    ) -> Result<(ProjectRecord, String), StorageError> {
        self.insert_project(Some(actor), organization_id, name, pepper)
            .await
    }

    /// A new project with its first API key, unaudited: for fixtures of tests and benches
    /// that build a deployment without an operator (an audit event would shift the chain
    /// sequences they assert). Product paths use [`Storage::create_project_as`].
    pub async fn create_project(
        &self,
        organization_id: OrganizationId,
        name: &str,
        pepper: &ApiKeyPepper,
    ) -> Result<(ProjectRecord, String), StorageError> {
        self.insert_project(None, organization_id, name, pepper)
            .await
    }

    async fn insert_project(
        &self,
        actor: Option<&engram_core::audit::Actor>,
        organization_id: OrganizationId,
        name: &str,
        pepper: &ApiKeyPepper,
    ) -> Result<(ProjectRecord, String), StorageError> {
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        let exists = organizations::Entity::find_by_id(organization_id.as_uuid())
            .one(&transaction)
            .await
            .map_err(StorageError::from_db)?;
        if exists.is_none() {
            return Err(StorageError::NotFound(NotFoundKind::Organization));
        }
        let created = insert_project_with_key(&transaction, organization_id, name, pepper).await?;
        // In the creation's transaction: the project and its audit event commit together.
        if let Some(actor) = actor {
            let scope = ProjectScope::from_verified_credential(organization_id, created.0.id);
            crate::audit::append_audit_event(
                &transaction,
                organization_id,
                Some(&scope),
                actor,
                &engram_core::audit::NewAuditEvent::success(
                    engram_core::audit::AuditAction::ProjectCreated,
                    vec![created.0.id.to_string()],
                    serde_json::json!({"name": name}),
                ),
            )
            .await?;
        }
        transaction.commit().await.map_err(StorageError::from_db)?;
        Ok(created)
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

    /// The organization `id_or_name` names: its id, or its exact name (refused when two
    /// organizations share it, so a command never picks one by chance).
    pub async fn organization_named(
        &self,
        id_or_name: &str,
    ) -> Result<Result<OrganizationId, String>, StorageError> {
        let text = id_or_name.trim();
        if let Ok(organization_id) = text.parse::<OrganizationId>() {
            let found = organizations::Entity::find_by_id(organization_id.as_uuid())
                .one(&self.connection)
                .await
                .map_err(StorageError::from_db)?;
            return Ok(match found {
                Some(_) => Ok(organization_id),
                None => Err(format!("no organization has the id {text}")),
            });
        }
        let named = organizations::Entity::find()
            .filter(organizations::Column::Name.eq(text))
            .limit(2)
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(match named.as_slice() {
            [only] => Ok(OrganizationId::from_uuid(only.id)),
            [] => Err(format!("no organization is named {text:?}")),
            _ => Err(format!(
                "more than one organization is named {text:?}; give its id instead"
            )),
        })
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

    /// Verify a presented API key; the scope of its project when it is valid, unexpired and
    /// not revoked. Unknown ids and wrong secrets are indistinguishable to the caller.
    pub async fn authenticate_api_key(
        &self,
        presented: &str,
        pepper: &ApiKeyPepper,
    ) -> Result<Option<ProjectScope>, StorageError> {
        Ok(self
            .verify_api_key(presented, pepper)
            .await?
            .map(|verified| verified.scope))
    }

    /// Part of verifying an end-user token whose signature already verified: the scope of
    /// `project_id` when `generation` is its current signing-key generation (a rotated key's
    /// tokens get `None`) and the API key that minted the token is still in force — not
    /// revoked, not expired, not rolled past its overlap — so a token dies with its key.
    pub async fn scope_for_end_user_token(
        &self,
        project_id: ProjectId,
        generation: i64,
        minted_by: engram_core::ids::ApiKeyId,
    ) -> Result<Option<(ProjectScope, Option<engram_core::AgentRestriction>)>, StorageError> {
        let project = projects::Entity::find_by_id(project_id.as_uuid())
            .one(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        let Some(project) = project.filter(|project| project.end_user_key_generation == generation)
        else {
            return Ok(None);
        };
        let now = chrono::Utc::now();
        let Some(minting_key) = super::entities::api_keys::Entity::find_by_id(minted_by.as_uuid())
            .one(&self.connection)
            .await
            .map_err(StorageError::from_db)?
            .filter(|key| {
                key.project_id == project.id
                    && key.revoked_at.is_none()
                    && key.expires_at.is_none_or(|expires_at| expires_at > now)
            })
        else {
            return Ok(None);
        };
        // The minting key's agents bound every token it minted; a stored list that does not
        // parse proves nothing.
        let Ok(key_agents) = crate::api_keys::stored_agents(minting_key.agents.as_deref()) else {
            return Ok(None);
        };
        Ok(Some((
            ProjectScope::from_verified_credential(
                OrganizationId::from_uuid(project.organization_id),
                ProjectId::from_uuid(project.id),
            ),
            key_agents,
        )))
    }

    /// The generation of the project's current end-user signing key.
    pub async fn end_user_key_generation(&self, scope: &ProjectScope) -> Result<i64, StorageError> {
        projects::Entity::find()
            .filter(crate::tenancy::in_project::<projects::Entity>(scope))
            .one(&self.connection)
            .await
            .map_err(StorageError::from_db)?
            .map(|project| project.end_user_key_generation)
            .ok_or(StorageError::NotFound(NotFoundKind::Project))
    }

    /// Replace the project's end-user signing key (every token signed before stops working),
    /// audited; returns the new generation.
    pub async fn rotate_end_user_signing_key(
        &self,
        scope: &ProjectScope,
        actor: &engram_core::audit::Actor,
    ) -> Result<i64, StorageError> {
        use sea_orm::sea_query::Expr;
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        projects::Entity::update_many()
            .col_expr(
                projects::Column::EndUserKeyGeneration,
                Expr::col(projects::Column::EndUserKeyGeneration).add(1),
            )
            .filter(crate::tenancy::in_project::<projects::Entity>(scope))
            .exec(&transaction)
            .await
            .map_err(StorageError::from_db)?;
        let generation = projects::Entity::find()
            .filter(crate::tenancy::in_project::<projects::Entity>(scope))
            .one(&transaction)
            .await
            .map_err(StorageError::from_db)?
            .map(|project| project.end_user_key_generation)
            .ok_or(StorageError::NotFound(NotFoundKind::Project))?;
        crate::audit::append_audit_event(
            &transaction,
            scope.organization_id(),
            Some(scope),
            actor,
            &engram_core::audit::NewAuditEvent::success(
                engram_core::audit::AuditAction::EndUserSigningKeyRotated,
                vec![scope.project_id().to_string()],
                serde_json::json!({ "generation": generation }),
            ),
        )
        .await?;
        transaction.commit().await.map_err(StorageError::from_db)?;
        Ok(generation)
    }

    /// A new console member of an existing organization with `role` (admin-created; the
    /// password is chosen by the caller and shown once). A taken e-mail is `WriteConflict`.
    pub async fn create_console_account(
        &self,
        organization_id: OrganizationId,
        email: &str,
        password_hash: &str,
        role: engram_core::ConsoleRole,
    ) -> Result<ConsoleAccountId, StorageError> {
        let _permit = self.write_permit().await;
        let exists = organizations::Entity::find_by_id(organization_id.as_uuid())
            .one(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        if exists.is_none() {
            return Err(StorageError::NotFound(NotFoundKind::Organization));
        }
        let account_id = ConsoleAccountId::generate();
        console_accounts::Entity::insert(console_accounts::ActiveModel {
            id: Set(account_id.as_uuid()),
            organization_id: Set(organization_id.as_uuid()),
            email: Set(email.trim().to_lowercase()),
            password_hash: Set(password_hash.to_string()),
            role: Set(role.as_str().to_string()),
            created_at: Set(Utc::now()),
            language: Set(None),
        })
        .exec_without_returning(&self.connection)
        .await
        .map_err(|error| {
            if crate::error::is_unique_violation(&error) {
                StorageError::WriteConflict(format!(
                    "a console account with e-mail {email:?} exists"
                ))
            } else {
                StorageError::from_db(error)
            }
        })?;
        Ok(account_id)
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

    /// Speak `language` to the account in the console from now on (none: the browser's
    /// language). `NotFound` when the account is gone or not of `organization_id`.
    pub async fn set_console_account_language(
        &self,
        organization_id: OrganizationId,
        id: ConsoleAccountId,
        language: Option<engram_core::ConsoleLanguage>,
    ) -> Result<(), StorageError> {
        let _permit = self.write_permit().await;
        let updated = console_accounts::Entity::update_many()
            .col_expr(
                console_accounts::Column::Language,
                sea_orm::sea_query::Expr::value(language.map(|language| language.as_str())),
            )
            .filter(console_accounts::Column::Id.eq(id.as_uuid()))
            .filter(console_accounts::Column::OrganizationId.eq(organization_id.as_uuid()))
            .exec(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        if updated.rows_affected == 0 {
            return Err(StorageError::NotFound(NotFoundKind::Member));
        }
        Ok(())
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
        self.project_scope_in_organization(verified_account.organization_id, project_id)
            .await
    }

    /// The scope of `project_id` when it belongs to `organization_id`: the one query behind
    /// a console member's project and an erasure ledger line's.
    pub(crate) async fn project_scope_in_organization(
        &self,
        organization_id: OrganizationId,
        project_id: ProjectId,
    ) -> Result<Option<ProjectScope>, StorageError> {
        let found = projects::Entity::find_by_id(project_id.as_uuid())
            .filter(projects::Column::OrganizationId.eq(organization_id.as_uuid()))
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
        end_user_key_generation: Set(1),
        pii_redaction: Set(engram_core::pii::PiiRedaction::Off.as_str().to_string()),
        retention_days: Set(serde_json::json!({})),
        store_retention_days: Set(serde_json::json!({})),
        spend_limits: Set(serde_json::json!({})),
        query_cache_epoch: Set(0),
        derive_memories: Set(true),
        embedding_source: Set(engram_core::ProjectEmbedding::Deployment
            .stored_source()
            .to_string()),
        embedding_dimension: Set(None),
        recall_events: Set(engram_core::recall::RecallEventCapture::default()
            .as_str()
            .to_string()),
        recall_event_retention_days: Set(
            engram_core::recall::DEFAULT_RECALL_EVENT_RETENTION_DAYS as i32
        ),
        run_capture: Set(engram_core::runs::RunCapture::Digests.as_str().to_string()),
        keep_trajectories: Set(false),
        // The embedding model's measured floor.
        relevance_floor: Set(None),
        default_visibility: Set(engram_core::Visibility::Shared.as_str().to_string()),
        verified_only_from_other_agents: Set(false),
        agent_teams: Set(serde_json::json!({})),
        embedding_generation: Set(0),
        embedding_target_source: Set(None),
        embedding_target_task: Set(None),
    })
    .exec(connection)
    .await
    .map_err(StorageError::from_db)?;
    let project_scope = ProjectScope::from_verified_credential(organization_id, project_id);
    let (_, presented) = crate::api_keys::insert_api_key(
        connection,
        &project_scope,
        &crate::api_keys::NewApiKey {
            label: "default".to_string(),
            scopes: engram_core::ApiScopes::all(),
            environment: engram_core::KeyEnvironment::Live,
            expires_at: None,
            agents: None,
        },
        None,
        // The project's first key is the operator's, who created the project.
        Some(engram_core::audit::Actor::system("operator").label()),
        pepper,
    )
    .await?;
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
        role: engram_core::ConsoleRole::from_stored(&model.role),
        language: model
            .language
            .as_deref()
            // A stored tag this version does not know: none chosen.
            .and_then(engram_core::ConsoleLanguage::parse),
    }
}

fn project_record(model: projects::Model) -> ProjectRecord {
    ProjectRecord {
        id: ProjectId::from_uuid(model.id),
        organization_id: OrganizationId::from_uuid(model.organization_id),
        name: model.name,
    }
}

impl MaintenanceStore {
    /// Every project's scope, for system work that spans tenants one project at a time (the
    /// index reconciler). Never reachable from a request: no credential is involved.
    pub async fn all_project_scopes(&self) -> Result<Vec<ProjectScope>, StorageError> {
        let all_projects = projects::Entity::find()
            .order_by_asc(projects::Column::Id)
            .all(&self.storage.connection)
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

    /// Every project of one organization, for an organization-wide erasure that a verified
    /// principal of that organization queued (the task records which organization).
    pub async fn project_scopes_of_organization(
        &self,
        organization_id: OrganizationId,
    ) -> Result<Vec<ProjectScope>, StorageError> {
        let projects = projects::Entity::find()
            .filter(projects::Column::OrganizationId.eq(organization_id.as_uuid()))
            .order_by_asc(projects::Column::CreatedAt)
            .all(&self.storage.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(projects
            .into_iter()
            .map(|project| {
                ProjectScope::from_verified_credential(
                    organization_id,
                    ProjectId::from_uuid(project.id),
                )
            })
            .collect())
    }

    /// The scope of a project named by an erasure ledger line (written under a verified
    /// scope, read back after a restore); `None` when no such project is in the organization.
    pub async fn project_scope_for_erasure_ledger(
        &self,
        organization_id: OrganizationId,
        project_id: ProjectId,
    ) -> Result<Option<ProjectScope>, StorageError> {
        self.storage
            .project_scope_in_organization(organization_id, project_id)
            .await
    }
}
