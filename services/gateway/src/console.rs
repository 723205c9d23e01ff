//! The console's backend: verifies console logins and sessions against storage and serves
//! the console pages (Leptos, from `engram-console`) with scoped reads of memories.

use crate::auth::{ConsoleSessionKeys, verify_password};
use crate::state::AppState;
use axum::Router;
use engram_console::model::{
    AuditChainStatus, AuditListing, AuditQuery, AuditRow, INVITATION_LIFETIME_DAYS,
    InvitationPreview, InvitationRow, KeyListing, KeyRow, MemberListing, MemberRow, NewInvitation,
    NewKeyRequest, NewKeySecret, SessionTokens,
};
use engram_console::{
    ConsoleAccount, ConsoleAssets, ConsoleBackend, ConsoleCaller, ConsoleError,
    ConsoleRequestOrigin, MemoryListQuery, MemoryPage, MemoryRow, ProjectSummary,
};
use engram_core::ConsoleRole;
use engram_core::audit::{Actor, ActorKind, AuditAction, AuditOutcome, NewAuditEvent};
use engram_core::{MemoryKind, ProjectId};
use engram_storage::{
    AuditFilter, ConsoleAccountRecord, MemoryListFilter, RefreshOutcome, Storage,
};
use std::path::Path;
use std::sync::Arc;

/// Verifying against this when the e-mail is unknown keeps the answer time the same, so
/// timing does not reveal which accounts exist.
static UNKNOWN_ACCOUNT_HASH: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    crate::auth::hash_password("no account has this password").unwrap_or_default()
});

pub struct GatewayConsoleBackend {
    storage: Storage,
    api_key_pepper: engram_storage::ApiKeyPepper,
    sessions: ConsoleSessionKeys,
    login_throttle: crate::login_throttle::LoginThrottle,
}

impl GatewayConsoleBackend {
    pub fn new(
        storage: Storage,
        api_key_pepper: engram_storage::ApiKeyPepper,
        sessions: ConsoleSessionKeys,
    ) -> Self {
        Self {
            storage,
            api_key_pepper,
            sessions,
            login_throttle: Default::default(),
        }
    }

    async fn account_for(
        &self,
        caller: &ConsoleCaller,
    ) -> Result<ConsoleAccountRecord, ConsoleError> {
        let claim = self
            .sessions
            .verify(&caller.session_token)
            .ok_or(ConsoleError::Unauthorized)?;
        // Every request checks the session, so logout (or a detected replay) ends it at once.
        if !self
            .storage
            .console_session_is_live(claim.session_id)
            .await
            .map_err(internal)?
        {
            return Err(ConsoleError::Unauthorized);
        }
        match self.storage.console_account(claim.account_id).await {
            Ok(Some(account)) => Ok(account),
            Ok(None) => Err(ConsoleError::Unauthorized),
            Err(error) => Err(internal(error)),
        }
    }
}

fn console_actor(account: &ConsoleAccountRecord, origin: &ConsoleRequestOrigin) -> Actor {
    Actor {
        kind: ActorKind::ConsoleAccount,
        id: account.id.to_string(),
        ip: origin.ip.clone(),
        user_agent: origin.user_agent.clone(),
        request_id: origin.request_id.clone(),
    }
}

fn key_row(record: &engram_storage::ApiKeyRecord) -> KeyRow {
    let view = crate::routes::keys::ApiKeyView::from(record);
    KeyRow {
        id: view.id,
        label: view.label,
        prefix: view.prefix,
        scopes: view.scopes,
        state: view.state,
        created_at: view.created_at.to_rfc3339(),
        expires_at: view.expires_at.map(|at| at.to_rfc3339()),
        last_used_at: view.last_used_at.map(|at| at.to_rfc3339()),
    }
}

/// `Forbidden` naming the role unless the account's role passes `allowed`.
fn require_role(
    account: &ConsoleAccountRecord,
    allowed: fn(ConsoleRole) -> bool,
) -> Result<(), ConsoleError> {
    let role = ConsoleRole::from_stored(&account.role);
    if allowed(role) {
        return Ok(());
    }
    Err(ConsoleError::Forbidden {
        role: role.as_str().to_string(),
    })
}

fn internal(error: impl std::fmt::Display) -> ConsoleError {
    tracing::error!(%error, "console backend failure");
    ConsoleError::Internal("the service could not complete the request".to_string())
}

/// How long a console session lasts without a new login (its refresh token keeps being
/// rotated within it; the access token lives 15 minutes).
pub const CONSOLE_SESSION_LIFETIME: chrono::Duration = chrono::Duration::hours(12);

/// 256 random bits, hex: cookie-safe and stored only as a SHA-256.
fn new_refresh_token() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

impl GatewayConsoleBackend {
    async fn start_session(
        &self,
        account: &ConsoleAccountRecord,
    ) -> Result<SessionTokens, ConsoleError> {
        let refresh = new_refresh_token();
        let session_id = self
            .storage
            .create_console_session(
                account.id,
                account.organization_id,
                &refresh,
                chrono::Utc::now() + CONSOLE_SESSION_LIFETIME,
            )
            .await
            .map_err(internal)?;
        let access = self
            .sessions
            .issue(account.id, session_id)
            .map_err(internal)?;
        Ok(SessionTokens { access, refresh })
    }

    async fn audit_account_event(
        &self,
        account: &ConsoleAccountRecord,
        origin: &ConsoleRequestOrigin,
        action: AuditAction,
        outcome: AuditOutcome,
    ) -> Result<(), ConsoleError> {
        let event = NewAuditEvent {
            action,
            outcome,
            target_ids: vec![account.id.to_string()],
            details: serde_json::json!({}),
        };
        self.storage
            .record_audit_event(
                account.organization_id,
                None,
                &console_actor(account, origin),
                &event,
            )
            .await
            .map_err(internal)
    }
}

#[async_trait::async_trait]
impl ConsoleBackend for GatewayConsoleBackend {
    async fn login(
        &self,
        email: String,
        password: String,
        origin: &ConsoleRequestOrigin,
    ) -> Result<SessionTokens, ConsoleError> {
        // Checked before the password, so a locked e-mail cannot be probed at all.
        if let Some(remaining) = self.login_throttle.locked_for(&email) {
            tracing::warn!("console login refused: too many failed attempts");
            return Err(ConsoleError::TooManyAttempts {
                retry_after_seconds: remaining.as_secs().max(1),
            });
        }
        let account = self
            .storage
            .find_console_account(email.trim())
            .await
            .map_err(internal)?;
        let stored_hash = account
            .as_ref()
            .map_or(UNKNOWN_ACCOUNT_HASH.clone(), |account| {
                account.password_hash.clone()
            });
        // argon2 takes tens of milliseconds of CPU: keep it off the async workers.
        let password_matches =
            tokio::task::spawn_blocking(move || verify_password(&password, &stored_hash))
                .await
                .unwrap_or(false);
        match account {
            Some(account) if password_matches => {
                tracing::info!(account_id = %account.id, "console login succeeded");
                self.login_throttle.record_success(&email);
                self.audit_account_event(
                    &account,
                    origin,
                    AuditAction::ConsoleLogin,
                    AuditOutcome::Success,
                )
                .await?;
                self.start_session(&account).await
            }
            Some(account) => {
                tracing::info!(account_id = %account.id, "console login failed: wrong password");
                self.login_throttle.record_failure(&email);
                self.audit_account_event(
                    &account,
                    origin,
                    AuditAction::ConsoleLoginFailed,
                    AuditOutcome::Failure,
                )
                .await?;
                Err(ConsoleError::InvalidCredentials)
            }
            None => {
                // No organization to file it under; the log line and the throttle remain.
                tracing::info!("console login failed: unknown account");
                self.login_throttle.record_failure(&email);
                Err(ConsoleError::InvalidCredentials)
            }
        }
    }

    async fn logout(&self, caller: &ConsoleCaller) {
        let Some(claim) = self.sessions.verify(&caller.session_token) else {
            return;
        };
        if let Err(error) = self.storage.revoke_console_session(claim.session_id).await {
            tracing::error!(%error, "console logout could not revoke the session");
        }
    }

    async fn refresh(&self, refresh_token: &str) -> Option<SessionTokens> {
        let replacement = new_refresh_token();
        let outcome = self
            .storage
            .rotate_console_refresh_token(refresh_token, &replacement)
            .await
            .map_err(|error| tracing::error!(%error, "console refresh failed"))
            .ok()?;
        match outcome {
            RefreshOutcome::Rotated {
                session_id,
                account_id,
            } => {
                let access = self.sessions.issue(account_id, session_id).ok()?;
                Some(SessionTokens {
                    access,
                    refresh: replacement,
                })
            }
            RefreshOutcome::ReplayDetected | RefreshOutcome::Refused => None,
        }
    }

    async fn current_account(&self, caller: &ConsoleCaller) -> Option<ConsoleAccount> {
        let account = self.account_for(caller).await.ok()?;
        let organization_name = self
            .storage
            .organization_name(account.organization_id)
            .await
            .ok()
            .flatten()?;
        Some(ConsoleAccount {
            role: ConsoleRole::from_stored(&account.role).as_str().to_string(),
            email: account.email,
            organization_name,
        })
    }

    async fn list_projects(
        &self,
        caller: &ConsoleCaller,
    ) -> Result<Vec<ProjectSummary>, ConsoleError> {
        let account = self.account_for(caller).await?;
        let projects = self
            .storage
            .list_projects(account.organization_id)
            .await
            .map_err(internal)?;
        Ok(projects
            .into_iter()
            .map(|project| ProjectSummary {
                id: project.id.to_string(),
                name: project.name,
            })
            .collect())
    }

    async fn list_memories(
        &self,
        caller: &ConsoleCaller,
        query: MemoryListQuery,
    ) -> Result<MemoryPage, ConsoleError> {
        let (account, scope) = self
            .authorized_project(
                caller,
                &query.project_id,
                ConsoleRole::can_read_memory_content,
            )
            .await?;
        let kind = match query.kind.as_deref().filter(|kind| !kind.is_empty()) {
            Some(kind) => Some(
                kind.parse::<MemoryKind>()
                    .map_err(|_| ConsoleError::InvalidInput(format!("unknown kind {kind:?}")))?,
            ),
            None => None,
        };
        let user_id = match query
            .user_id
            .as_deref()
            .filter(|user_id| !user_id.is_empty())
        {
            Some(user_id) => {
                Some(engram_core::ExternalId::parse(user_id).map_err(ConsoleError::Internal)?)
            }
            None => None,
        };
        let filter = MemoryListFilter {
            subject: engram_core::SubjectFilter {
                user_id,
                agent_id: None,
                session_id: None,
            },
            kind,
            state: None,
            text_contains: query.text.filter(|text| !text.trim().is_empty()),
            after: None,
            limit: u64::from(query.limit.clamp(1, 500)),
        };
        let page = self
            .storage
            .list_memories(&scope, &filter)
            .await
            .map_err(internal)?;
        let memories: Vec<MemoryRow> = page
            .memories
            .into_iter()
            .map(|memory| MemoryRow {
                id: memory.id.to_string(),
                user_id: memory.user_id.map(|id| id.into_string()),
                agent_id: memory.agent_id.map(|id| id.into_string()),
                session_id: memory.session_id.map(|id| id.into_string()),
                kind: memory.kind.to_string(),
                key: memory.key.map(|id| id.into_string()),
                content: memory.content,
                state: memory.state.to_string(),
                version: memory.version,
                updated_at: memory.updated_at.to_rfc3339(),
            })
            .collect();
        let total_shown = memories.len();
        // Compliance must know who saw what: the page is shown only once its read is logged.
        if total_shown > 0 {
            self.storage
                .record_audit_event(
                    account.organization_id,
                    Some(&scope),
                    &console_actor(&account, &caller.origin),
                    &NewAuditEvent::success(
                        AuditAction::MemoryContentViewed,
                        memories.iter().map(|memory| memory.id.clone()).collect(),
                        serde_json::json!({ "page": "memories" }),
                    ),
                )
                .await
                .map_err(internal)?;
        }
        Ok(MemoryPage {
            memories,
            total_shown,
        })
    }

    async fn audit_log(
        &self,
        caller: &ConsoleCaller,
        query: AuditQuery,
    ) -> Result<AuditListing, ConsoleError> {
        let (_, scope) = self
            .authorized_project(caller, &query.project_id, ConsoleRole::can_read_audit_log)
            .await?;
        if let Some(action) = &query.action
            && AuditAction::parse(action).is_none()
        {
            return Err(ConsoleError::InvalidInput(format!(
                "unknown action {action:?}"
            )));
        }
        let events = self
            .storage
            .audit_events(
                &scope,
                &AuditFilter {
                    action: query.action.clone(),
                    limit: u64::from(query.limit.clamp(1, 500)),
                    newest_first: true,
                    include_organization_events: true,
                    ..Default::default()
                },
            )
            .await
            .map_err(internal)?;
        let verification = self
            .storage
            .verify_audit_chain(&scope)
            .await
            .map_err(internal)?;
        Ok(AuditListing {
            project_id: Some(query.project_id),
            events: events
                .into_iter()
                .map(|event| AuditRow {
                    id: event.id,
                    sequence: event.sequence,
                    at: event.at.to_rfc3339(),
                    actor_type: event.actor_type,
                    actor_id: event.actor_id,
                    action: event.action,
                    target_ids: event.target_ids,
                    outcome: event.outcome,
                    ip: event.ip,
                    user_agent: event.user_agent,
                    request_id: event.request_id,
                })
                .collect(),
            chain: AuditChainStatus {
                verified: verification.first_broken.is_none(),
                events_checked: verification.events_checked,
                broken_at_event: verification
                    .first_broken
                    .as_ref()
                    .map(|broken| broken.event_id)
                    .filter(|event_id| *event_id > 0),
                broken_reason: verification.first_broken.map(|broken| broken.reason),
            },
        })
    }

    async fn list_keys(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
    ) -> Result<KeyListing, ConsoleError> {
        let (_, scope) = self
            .authorized_project(caller, project_id, ConsoleRole::can_manage_api_keys)
            .await?;
        let keys = self.storage.list_api_keys(&scope).await.map_err(internal)?;
        Ok(KeyListing {
            project_id: Some(project_id.to_string()),
            keys: keys.iter().map(key_row).collect(),
        })
    }

    async fn create_key(
        &self,
        caller: &ConsoleCaller,
        request: NewKeyRequest,
    ) -> Result<NewKeySecret, ConsoleError> {
        let (account, scope) = self
            .authorized_project(
                caller,
                &request.project_id,
                ConsoleRole::can_manage_api_keys,
            )
            .await?;
        let scopes: Vec<engram_core::ApiScope> = request
            .scopes
            .iter()
            .filter_map(|name| engram_core::ApiScope::parse(name))
            .collect();
        if request.label.trim().is_empty() || scopes.is_empty() {
            return Err(ConsoleError::InvalidInput(
                "give the key a label and at least one scope".to_string(),
            ));
        }
        let (record, secret) = self
            .storage
            .create_api_key(
                &scope,
                &engram_storage::NewApiKey {
                    label: request.label,
                    scopes: engram_core::ApiScopes::from_scopes(scopes),
                    environment: engram_core::KeyEnvironment::Live,
                    expires_at: None,
                },
                &self.api_key_pepper,
                &console_actor(&account, &caller.origin),
            )
            .await
            .map_err(internal)?;
        Ok(NewKeySecret {
            key: key_row(&record),
            secret,
        })
    }

    async fn revoke_key(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        key_id: &str,
    ) -> Result<(), ConsoleError> {
        let (account, scope) = self
            .authorized_project(caller, project_id, ConsoleRole::can_manage_api_keys)
            .await?;
        let key_id: engram_core::ids::ApiKeyId =
            key_id.parse().map_err(|_| ConsoleError::NotFound)?;
        match self
            .storage
            .revoke_api_key(&scope, key_id, &console_actor(&account, &caller.origin))
            .await
        {
            Ok(_) => Ok(()),
            Err(engram_storage::StorageError::NotFound) => Err(ConsoleError::NotFound),
            Err(error) => Err(internal(error)),
        }
    }

    async fn roll_key(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        key_id: &str,
    ) -> Result<NewKeySecret, ConsoleError> {
        let (account, scope) = self
            .authorized_project(caller, project_id, ConsoleRole::can_manage_api_keys)
            .await?;
        let key_id: engram_core::ids::ApiKeyId =
            key_id.parse().map_err(|_| ConsoleError::NotFound)?;
        match self
            .storage
            .roll_api_key(
                &scope,
                key_id,
                std::time::Duration::from_secs(24 * 60 * 60),
                &self.api_key_pepper,
                &console_actor(&account, &caller.origin),
            )
            .await
        {
            Ok((record, secret, _previous)) => Ok(NewKeySecret {
                key: key_row(&record),
                secret,
            }),
            Err(engram_storage::StorageError::NotFound) => Err(ConsoleError::NotFound),
            Err(error) => Err(internal(error)),
        }
    }

    async fn export_audit_csv(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
    ) -> Result<String, ConsoleError> {
        let (_, scope) = self
            .authorized_project(caller, project_id, ConsoleRole::can_read_audit_log)
            .await?;
        let events = crate::routes::audit::events_for_export(
            &self.storage,
            &scope,
            AuditFilter {
                include_organization_events: true,
                ..Default::default()
            },
        )
        .await
        .map_err(internal)?;
        Ok(crate::routes::audit::events_as_csv(&events))
    }

    async fn list_members(&self, caller: &ConsoleCaller) -> Result<MemberListing, ConsoleError> {
        let account = self.account_for(caller).await?;
        require_role(&account, ConsoleRole::can_manage_members)?;
        let role = ConsoleRole::from_stored(&account.role);
        let members = self
            .storage
            .list_console_members(account.organization_id)
            .await
            .map_err(internal)?;
        let invitations = self
            .storage
            .list_pending_console_invitations(account.organization_id)
            .await
            .map_err(internal)?;
        Ok(MemberListing {
            members: members
                .into_iter()
                .map(|member| MemberRow {
                    is_you: member.id == account.id,
                    id: member.id.to_string(),
                    email: member.email,
                    role: member.role.as_str().to_string(),
                    joined_at: member.created_at.format("%Y-%m-%d %H:%M UTC").to_string(),
                })
                .collect(),
            invitations: invitations.iter().map(invitation_row).collect(),
            assignable_roles: ConsoleRole::ALL
                .into_iter()
                .filter(|candidate| role.can_assign(*candidate))
                .map(|candidate| candidate.as_str().to_string())
                .collect(),
        })
    }

    async fn invite_member(
        &self,
        caller: &ConsoleCaller,
        email: &str,
        role: &str,
    ) -> Result<NewInvitation, ConsoleError> {
        let account = self.account_for(caller).await?;
        let role = self.assignable_role(&account, role)?;
        let token = new_refresh_token();
        let invitation = self
            .storage
            .create_console_invitation(
                account.organization_id,
                email,
                role,
                &token,
                chrono::Utc::now() + chrono::Duration::days(INVITATION_LIFETIME_DAYS),
                &console_actor(&account, &caller.origin),
                account.id,
            )
            .await
            .map_err(|error| match error {
                engram_storage::StorageError::WriteConflict(message) => {
                    ConsoleError::Refused(message)
                }
                other => internal(other),
            })?;
        Ok(NewInvitation {
            invitation: invitation_row(&invitation),
            link_path: format!("/console/invite?token={token}"),
        })
    }

    async fn revoke_invitation(
        &self,
        caller: &ConsoleCaller,
        invitation_id: &str,
    ) -> Result<(), ConsoleError> {
        let account = self.account_for(caller).await?;
        require_role(&account, ConsoleRole::can_manage_members)?;
        let invitation_id: uuid::Uuid =
            invitation_id.parse().map_err(|_| ConsoleError::NotFound)?;
        self.storage
            .revoke_console_invitation(
                account.organization_id,
                invitation_id,
                &console_actor(&account, &caller.origin),
            )
            .await
            .map_err(member_change_error)
    }

    async fn change_member_role(
        &self,
        caller: &ConsoleCaller,
        member_id: &str,
        role: &str,
    ) -> Result<(), ConsoleError> {
        let account = self.account_for(caller).await?;
        let new_role = self.assignable_role(&account, role)?;
        let member = self.member_to_manage(&account, member_id).await?;
        self.storage
            .change_console_member_role(
                account.organization_id,
                member.id,
                new_role,
                &console_actor(&account, &caller.origin),
            )
            .await
            .map(|_| ())
            .map_err(member_change_error)
    }

    async fn remove_member(
        &self,
        caller: &ConsoleCaller,
        member_id: &str,
    ) -> Result<(), ConsoleError> {
        let account = self.account_for(caller).await?;
        require_role(&account, ConsoleRole::can_manage_members)?;
        let member = self.member_to_manage(&account, member_id).await?;
        self.storage
            .remove_console_member(
                account.organization_id,
                member.id,
                &console_actor(&account, &caller.origin),
            )
            .await
            .map_err(member_change_error)
    }

    async fn preview_invitation(&self, token: &str) -> Result<InvitationPreview, ConsoleError> {
        let (invitation, organization_id) = self
            .storage
            .pending_console_invitation(token)
            .await
            .map_err(internal)?
            .ok_or(ConsoleError::NotFound)?;
        let organization_name = self
            .storage
            .organization_name(organization_id)
            .await
            .map_err(internal)?
            .unwrap_or_default();
        Ok(InvitationPreview {
            email: invitation.email,
            organization_name,
            role: invitation.role.as_str().to_string(),
        })
    }

    async fn accept_invitation(
        &self,
        token: &str,
        password: String,
        origin: &ConsoleRequestOrigin,
    ) -> Result<SessionTokens, ConsoleError> {
        // argon2 takes tens of milliseconds of CPU: keep it off the async workers.
        let password_hash =
            tokio::task::spawn_blocking(move || crate::auth::hash_password(&password))
                .await
                .map_err(internal)?
                .map_err(internal)?;
        let origin_actor = Actor {
            kind: ActorKind::ConsoleAccount,
            id: String::new(),
            ip: origin.ip.clone(),
            user_agent: origin.user_agent.clone(),
            request_id: origin.request_id.clone(),
        };
        let account = self
            .storage
            .accept_console_invitation(token, &password_hash, &origin_actor)
            .await
            .map_err(|error| match error {
                engram_storage::StorageError::NotFound => ConsoleError::NotFound,
                engram_storage::StorageError::WriteConflict(message) => {
                    ConsoleError::Refused(message)
                }
                other => internal(other),
            })?;
        tracing::info!(account_id = %account.id, "console invitation accepted");
        self.start_session(&account).await
    }
}

fn invitation_row(invitation: &engram_storage::ConsoleInvitationRecord) -> InvitationRow {
    InvitationRow {
        id: invitation.id.to_string(),
        email: invitation.email.clone(),
        role: invitation.role.as_str().to_string(),
        expires_at: invitation
            .expires_at
            .format("%Y-%m-%d %H:%M UTC")
            .to_string(),
    }
}

fn member_change_error(error: engram_storage::StorageError) -> ConsoleError {
    match error {
        engram_storage::StorageError::NotFound => ConsoleError::NotFound,
        engram_storage::StorageError::Refused(message) => ConsoleError::Refused(message),
        other => internal(other),
    }
}

impl GatewayConsoleBackend {
    /// The signed-in account and the scope of `project_id`, when the account's role passes
    /// `allowed` (`Forbidden` otherwise) and the project is visible to it (`NotFound`).
    async fn authorized_project(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        allowed: fn(ConsoleRole) -> bool,
    ) -> Result<(ConsoleAccountRecord, engram_core::ProjectScope), ConsoleError> {
        let account = self.account_for(caller).await?;
        require_role(&account, allowed)?;
        let scope = self.project_scope(&account, project_id).await?;
        Ok((account, scope))
    }

    /// The role named `role` when the account may hand it out (`Forbidden` otherwise).
    fn assignable_role(
        &self,
        account: &ConsoleAccountRecord,
        role: &str,
    ) -> Result<ConsoleRole, ConsoleError> {
        require_role(account, ConsoleRole::can_manage_members)?;
        let wanted = ConsoleRole::parse(role).ok_or_else(|| {
            ConsoleError::InvalidInput(format!(
                "unknown role {role:?}; one of owner, admin, compliance, analyst, developer"
            ))
        })?;
        let own_role = ConsoleRole::from_stored(&account.role);
        if !own_role.can_assign(wanted) {
            return Err(ConsoleError::Forbidden {
                role: own_role.as_str().to_string(),
            });
        }
        Ok(wanted)
    }

    /// Another member of the account's organization whom its role may change or remove:
    /// never oneself, and owners only by owners.
    async fn member_to_manage(
        &self,
        account: &ConsoleAccountRecord,
        member_id: &str,
    ) -> Result<ConsoleAccountRecord, ConsoleError> {
        let member_id: engram_core::ids::ConsoleAccountId =
            member_id.parse().map_err(|_| ConsoleError::NotFound)?;
        let member = self
            .storage
            .console_account(member_id)
            .await
            .map_err(internal)?
            .filter(|member| member.organization_id == account.organization_id)
            .ok_or(ConsoleError::NotFound)?;
        if member.id == account.id {
            return Err(ConsoleError::Refused(
                "you cannot change or remove your own membership; ask another owner or admin"
                    .to_string(),
            ));
        }
        let own_role = ConsoleRole::from_stored(&account.role);
        if !own_role.can_assign(ConsoleRole::from_stored(&member.role)) {
            return Err(ConsoleError::Forbidden {
                role: own_role.as_str().to_string(),
            });
        }
        Ok(member)
    }

    /// The scope of a project the account may see; `NotFound` otherwise.
    async fn project_scope(
        &self,
        account: &ConsoleAccountRecord,
        project_id: &str,
    ) -> Result<engram_core::ProjectScope, ConsoleError> {
        let project_id: ProjectId = project_id.parse().map_err(|_| ConsoleError::NotFound)?;
        self.storage
            .project_scope_for_console_account(account, project_id)
            .await
            .map_err(internal)?
            .ok_or(ConsoleError::NotFound)
    }
}

/// The console's routes, backed by this gateway's storage and session keys.
pub fn console_routes(state: &AppState, assets_dir: &Path) -> Router {
    let backend: Arc<dyn ConsoleBackend> = Arc::new(GatewayConsoleBackend::new(
        state.credentials.storage.clone(),
        state.credentials.api_key_pepper.clone(),
        state.credentials.console_sessions.clone(),
    ));
    engram_console::console_router(backend, ConsoleAssets::new(assets_dir))
}
