//! The console's backend: verifies console logins and sessions against storage and serves
//! the console pages (Leptos, from `engram-console`) with scoped reads of memories.

use crate::auth::{ConsoleSessionKeys, verify_password};
use crate::state::AppState;
use axum::Router;
use engram_console::model::{
    AuditChainStatus, AuditListing, AuditQuery, AuditRow, BulkDeleteOutcome, BulkDeletePreview,
    ErasureStatus, GovernanceSettings, HistoryRow, INVITATION_LIFETIME_DAYS, InvitationPreview,
    InvitationRow, KeyListing, KeyRow, MemberListing, MemberRow, MemoryDetail, NewInvitation,
    NewKeyRequest, NewKeySecret, RetentionPreview, SessionTokens, SubjectSummary,
};
use engram_console::{
    ConsoleAccount, ConsoleAssets, ConsoleBackend, ConsoleCaller, ConsoleError,
    ConsoleRequestOrigin, MemoryListQuery, MemoryPage, MemoryRow, ProjectSummary,
};
use engram_core::audit::{Actor, ActorKind, AuditAction, AuditOutcome, NewAuditEvent};
use engram_core::{ConsoleRole, Operation};
use engram_core::{MemoryKind, ProjectId};
use engram_storage::{
    AuditFilter, ConsoleAccountRecord, MemoryListFilter, RefreshOutcome, Storage,
};
use std::path::Path;
use std::sync::Arc;

mod recall;
mod usage;

/// Verifying against this when the e-mail is unknown keeps the answer time the same, so
/// timing does not reveal which accounts exist.
static UNKNOWN_ACCOUNT_HASH: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    crate::auth::hash_password("no account has this password").unwrap_or_default()
});

pub struct GatewayConsoleBackend {
    storage: Storage,
    /// For corrections (re-embedding), search by meaning, bulk deletes and erasure.
    engine: Option<Arc<engram_engine::MemoryEngine>>,
    sessions: ConsoleSessionKeys,
    login_throttle: crate::login_throttle::LoginThrottle,
}

impl GatewayConsoleBackend {
    pub fn new(storage: Storage, sessions: ConsoleSessionKeys) -> Self {
        Self {
            storage,
            engine: None,
            sessions,
            login_throttle: Default::default(),
        }
    }

    /// The engine that corrections, searches by meaning and erasures go through.
    pub fn with_engine(mut self, engine: Arc<engram_engine::MemoryEngine>) -> Self {
        self.engine = Some(engine);
        self
    }

    fn engine(&self) -> Result<&engram_engine::MemoryEngine, ConsoleError> {
        self.engine
            .as_deref()
            .ok_or_else(|| ConsoleError::Internal("this console has no memory engine".to_string()))
    }

    /// Every memory a console filter matches, up to the bulk-delete limit (more is refused).
    async fn memories_matching(
        &self,
        scope: &engram_core::ProjectScope,
        query: &MemoryListQuery,
    ) -> Result<Vec<engram_core::Memory>, ConsoleError> {
        let limit = engram_console::model::BULK_DELETE_LIMIT;
        let mut filter = memory_filter(query, 500)?;
        let mut matching = Vec::new();
        loop {
            let page = self
                .storage
                .list_memories(scope, &filter)
                .await
                .map_err(internal)?;
            matching.extend(page.memories);
            if matching.len() as u64 > limit {
                return Err(ConsoleError::Refused(format!(
                    "more than {limit} memories match: narrow the filter"
                )));
            }
            match page.next_cursor {
                Some(cursor) => filter.after = Some(cursor),
                None => return Ok(matching),
            }
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

/// The signed-in member, in one project of their organization, as the engine's use cases
/// take a caller.
fn console_principal(
    account: &ConsoleAccountRecord,
    scope: engram_core::ProjectScope,
    origin: &ConsoleRequestOrigin,
) -> engram_core::Principal {
    engram_core::Principal::console_member(
        scope,
        ConsoleRole::from_stored(&account.role),
        account.id.to_string(),
        console_actor(account, origin),
    )
}

fn key_row(record: &engram_engine::ApiKeyRecord) -> KeyRow {
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

/// `Forbidden` naming the role unless the permission table lets the account's role perform
/// `operation`.
fn require_role(account: &ConsoleAccountRecord, operation: Operation) -> Result<(), ConsoleError> {
    let role = ConsoleRole::from_stored(&account.role);
    if operation.required_permission().granted_to_role(role) {
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
            .authorized_project(caller, &query.project_id, Operation::ListMemories)
            .await?;
        let memories: Vec<MemoryRow> = match query
            .meaning
            .as_deref()
            .filter(|text| !text.trim().is_empty())
        {
            Some(meaning) => {
                let engine = self.engine()?;
                let filter = memory_filter(&query, u64::from(query.limit.clamp(1, 100)))?;
                // A project that sends its own vectors has no query vector here: words only.
                let retrieval = match engine.embedding_spaces().space_for(&scope).await {
                    Ok(space) if space.client_dimension().is_some() => {
                        engram_engine::RetrievalMode::Keyword
                    }
                    _ => engram_engine::RetrievalMode::Hybrid,
                };
                let request = engram_engine::SearchRequest {
                    retrieval,
                    query: meaning.chars().take(2_000).collect(),
                    subject: filter.subject,
                    kinds: filter.kind.into_iter().collect(),
                    filters: engram_engine::SearchFilters {
                        created_after: filter.created_from,
                        created_before: filter.created_to,
                        categories_any: filter.category.into_iter().collect(),
                        ..Default::default()
                    },
                    top_k: query.limit.clamp(1, 100) as usize,
                    // The console's session field is a filter, like its other fields.
                    session_only: true,
                    ..engram_engine::SearchRequest::default()
                };
                // The console chose its retrieval itself: no profile is drawn for it.
                let search = engram_engine::SearchMemoriesRequest {
                    request,
                    caller_tuning: engram_engine::profiles::SearchTuning {
                        retrieval: Some(retrieval),
                        ..Default::default()
                    },
                    profile: None,
                    context_tokens: None,
                    trace_id: None,
                };
                let principal = console_principal(&account, scope, &caller.origin);
                let outcome = engine
                    .search_memories_for(&principal, search)
                    .await
                    .map_err(engine_error)?
                    .outcome;
                outcome
                    .results
                    .iter()
                    .map(|hit| memory_row(&hit.memory, Some(hit.score)))
                    .collect()
            }
            None => {
                let filter = memory_filter(&query, u64::from(query.limit.clamp(1, 500)))?;
                let principal = console_principal(&account, scope, &caller.origin);
                let request = engram_engine::ListMemoriesRequest {
                    filter,
                    user_id_field: "user_id",
                };
                let page = self
                    .engine()?
                    .list_memories_for(&principal, request)
                    .await
                    .map_err(engine_error)?;
                page.memories
                    .iter()
                    .map(|memory| memory_row(memory, None))
                    .collect()
            }
        };
        let total_shown = memories.len();
        // Compliance must know who saw what: the page is shown only once its read is logged.
        if total_shown > 0 {
            self.audit_content_view(
                &account,
                &scope,
                caller,
                memories.iter().map(|memory| memory.id.clone()).collect(),
                "memories",
            )
            .await?;
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
        let (account, scope) = self
            .authorized_project(caller, &query.project_id, Operation::ListAuditEvents)
            .await?;
        let principal = console_principal(&account, scope, &caller.origin);
        let engine = self.engine()?;
        if let Some(action) = &query.action
            && AuditAction::parse(action).is_none()
        {
            return Err(ConsoleError::InvalidInput(format!(
                "unknown action {action:?}"
            )));
        }
        let events = engine
            .list_audit_events_for(
                &principal,
                AuditFilter {
                    action: query.action.clone(),
                    limit: u64::from(query.limit.clamp(1, 500)),
                    newest_first: true,
                    include_organization_events: true,
                    ..Default::default()
                },
            )
            .await
            .map_err(engine_error)?;
        let verification = engine
            .verify_audit_chain_for(&principal)
            .await
            .map_err(engine_error)?;
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
                verified: verification.verified,
                events_checked: verification.events_checked,
                broken_at_event: verification
                    .first_broken
                    .as_ref()
                    .and_then(|broken| broken.event_id),
                broken_reason: verification.first_broken.map(|broken| broken.reason),
            },
        })
    }

    async fn list_keys(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
    ) -> Result<KeyListing, ConsoleError> {
        let (account, scope) = self
            .authorized_project(caller, project_id, Operation::ListApiKeys)
            .await?;
        let keys = self
            .engine()?
            .list_api_keys_for(&console_principal(&account, scope, &caller.origin))
            .await
            .map_err(|error| key_error(&account, error))?;
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
            .authorized_project(caller, &request.project_id, Operation::CreateApiKey)
            .await?;
        let create = engram_engine::CreateApiKeyRequest {
            label: request.label,
            scopes: request.scopes,
            ..Default::default()
        };
        let (record, secret) = self
            .engine()?
            .create_api_key_for(&console_principal(&account, scope, &caller.origin), create)
            .await
            .map_err(|error| key_error(&account, error))?;
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
            .authorized_project(caller, project_id, Operation::RevokeApiKey)
            .await?;
        let key_id: engram_core::ids::ApiKeyId =
            key_id.parse().map_err(|_| ConsoleError::NotFound)?;
        self.engine()?
            .revoke_api_key_for(&console_principal(&account, scope, &caller.origin), key_id)
            .await
            .map(|_| ())
            .map_err(|error| key_error(&account, error))
    }

    async fn roll_key(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        key_id: &str,
    ) -> Result<NewKeySecret, ConsoleError> {
        let (account, scope) = self
            .authorized_project(caller, project_id, Operation::RollApiKey)
            .await?;
        let key_id: engram_core::ids::ApiKeyId =
            key_id.parse().map_err(|_| ConsoleError::NotFound)?;
        let roll = engram_engine::RollApiKeyRequest {
            key_id,
            overlap_seconds: None,
        };
        let rolled = self
            .engine()?
            .roll_api_key_for(&console_principal(&account, scope, &caller.origin), roll)
            .await
            .map_err(|error| key_error(&account, error))?;
        Ok(NewKeySecret {
            key: key_row(&rolled.key),
            secret: rolled.secret,
        })
    }

    async fn export_audit_csv(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
    ) -> Result<String, ConsoleError> {
        let (account, scope) = self
            .authorized_project(caller, project_id, Operation::ExportAuditEvents)
            .await?;
        let events: Vec<crate::routes::audit::AuditEventView> = self
            .engine()?
            .export_audit_events_for(
                &console_principal(&account, scope, &caller.origin),
                AuditFilter {
                    include_organization_events: true,
                    ..Default::default()
                },
            )
            .await
            .map_err(engine_error)?
            .into_iter()
            .map(Into::into)
            .collect();
        Ok(crate::routes::audit::events_as_csv(&events))
    }

    async fn list_members(&self, caller: &ConsoleCaller) -> Result<MemberListing, ConsoleError> {
        let account = self.account_for(caller).await?;
        require_role(&account, Operation::ListMembers)?;
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
        require_role(&account, Operation::RemoveMember)?;
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
        require_role(&account, Operation::RemoveMember)?;
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

    async fn memory_detail(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        memory_id: &str,
    ) -> Result<MemoryDetail, ConsoleError> {
        let (account, scope) = self
            .authorized_project(caller, project_id, Operation::GetMemory)
            .await?;
        let memory_id = parse_memory_id(memory_id)?;
        let principal = console_principal(&account, scope, &caller.origin);
        let engine = self.engine()?;
        let memory = engine
            .get_memory_for(&principal, memory_id)
            .await
            .map_err(engine_error)?;
        let history = engine
            .memory_history_for(&principal, memory_id)
            .await
            .map_err(engine_error)?;
        self.audit_content_view(
            &account,
            &scope,
            caller,
            vec![memory_id.to_string()],
            "memory",
        )
        .await?;
        let mut previous_content: Option<String> = None;
        let mut rows = Vec::with_capacity(history.len());
        for entry in &history {
            let diff = match (&previous_content, &entry.content) {
                (Some(before), Some(after)) if before != after => {
                    engram_console::diff::word_diff(before, after)
                }
                (None, Some(after)) => engram_console::diff::word_diff("", after),
                _ => Vec::new(),
            };
            if entry.content.is_some() {
                previous_content = entry.content.clone();
            }
            rows.push(HistoryRow {
                version: entry.version,
                event: entry.event.clone(),
                content: entry.content.clone(),
                actor: entry.actor.clone(),
                reason: entry.reason.clone(),
                at: entry.at.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
                diff,
            });
        }
        Ok(MemoryDetail {
            project_id: project_id.to_string(),
            created_by: history.first().map(|entry| entry.actor.clone()),
            confidence: memory.confidence,
            created_at: memory
                .created_at
                .format("%Y-%m-%d %H:%M:%S UTC")
                .to_string(),
            metadata_json: serde_json::to_string_pretty(&memory.metadata).unwrap_or_default(),
            expires_at: memory.expires_at.map(|at| at.to_rfc3339()),
            memory: memory_row(&memory, None),
            history: rows,
        })
    }

    async fn correct_memory(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        memory_id: &str,
        content: String,
        reason: String,
    ) -> Result<(), ConsoleError> {
        let (account, scope) = self
            .authorized_project(caller, project_id, Operation::EditMemory)
            .await?;
        let memory_id = parse_memory_id(memory_id)?;
        let reason = required_reason(reason)?;
        let content = content.trim().to_string();
        if content.is_empty() || content.len() > engram_core::limits::MAX_CONTENT_BYTES {
            return Err(ConsoleError::InvalidInput(format!(
                "the content must be 1 byte to {} KiB",
                engram_core::limits::MAX_CONTENT_BYTES / 1024
            )));
        }
        let request = engram_engine::EditMemoryRequest {
            memory_id,
            edit: engram_engine::MemoryEdit {
                content: Some(content),
                reason: Some(reason),
                ..Default::default()
            },
            client_vector: None,
            expected_version: None,
        };
        self.engine()?
            .edit_memory_for(&console_principal(&account, scope, &caller.origin), request)
            .await
            .map(|_| ())
            .map_err(engine_error)
    }

    async fn delete_memory(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        memory_id: &str,
        reason: String,
    ) -> Result<(), ConsoleError> {
        let (account, scope) = self
            .authorized_project(caller, project_id, Operation::DeleteMemory)
            .await?;
        let memory_id = parse_memory_id(memory_id)?;
        let reason = required_reason(reason)?;
        let request = engram_engine::DeleteMemoryRequest {
            memory_id,
            reason: Some(reason),
        };
        self.engine()?
            .delete_memory_for(&console_principal(&account, scope, &caller.origin), request)
            .await
            .map_err(engine_error)
    }

    async fn set_memory_flags(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        memory_id: &str,
        immutable: Option<bool>,
        legal_hold: Option<bool>,
        reason: String,
    ) -> Result<(), ConsoleError> {
        let (account, scope) = self
            .authorized_project(caller, project_id, Operation::SetMemoryFlags)
            .await?;
        let memory_id = parse_memory_id(memory_id)?;
        let request = engram_engine::SetMemoryFlagsRequest {
            memory_id,
            immutable,
            legal_hold,
            reason: Some(reason),
        };
        self.engine()?
            .set_memory_flags_for(&console_principal(&account, scope, &caller.origin), request)
            .await
            .map(|_| ())
            .map_err(engine_error)
    }

    async fn preview_bulk_delete(
        &self,
        caller: &ConsoleCaller,
        query: MemoryListQuery,
    ) -> Result<BulkDeletePreview, ConsoleError> {
        let (_, scope) = self
            .authorized_project(caller, &query.project_id, Operation::BulkDeleteMemories)
            .await?;
        let matching = self.memories_matching(&scope, &query).await?;
        Ok(BulkDeletePreview {
            matching: matching.len() as u64,
            locked: matching
                .iter()
                .filter(|memory| memory.immutable || memory.legal_hold)
                .count() as u64,
        })
    }

    async fn bulk_delete(
        &self,
        caller: &ConsoleCaller,
        query: MemoryListQuery,
        expected: u64,
        reason: String,
    ) -> Result<BulkDeleteOutcome, ConsoleError> {
        let (account, scope) = self
            .authorized_project(caller, &query.project_id, Operation::BulkDeleteMemories)
            .await?;
        let reason = required_reason(reason)?;
        let matching = self.memories_matching(&scope, &query).await?;
        if matching.len() as u64 != expected {
            return Err(ConsoleError::Refused(format!(
                "{} memories match now, not {expected}: count again before deleting",
                matching.len()
            )));
        }
        let ids: Vec<engram_core::MemoryId> = matching.iter().map(|memory| memory.id).collect();
        let (deleted, skipped_locked) = self
            .engine()?
            .governance()
            .delete_memories_in_bulk(
                &scope,
                &ids,
                &reason,
                &console_actor(&account, &caller.origin),
            )
            .await
            .map_err(engine_error)?;
        Ok(BulkDeleteOutcome {
            deleted,
            skipped_locked,
        })
    }

    async fn subject_summary(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        user_id: &str,
    ) -> Result<SubjectSummary, ConsoleError> {
        let (_, scope) = self
            .authorized_project(caller, project_id, Operation::SummarizeSubject)
            .await?;
        let user_id = parse_subject(user_id)?;
        let memories = self
            .storage
            .count_subject_memories(&scope, user_id.as_str())
            .await
            .map_err(internal)?;
        let held = self
            .storage
            .held_memories_of_subject(&scope, user_id.as_str())
            .await
            .map_err(internal)?;
        Ok(SubjectSummary {
            project_id: project_id.to_string(),
            user_id: user_id.into_string(),
            memories,
            held_memory_ids: held.iter().map(ToString::to_string).collect(),
        })
    }

    async fn request_erasure(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        user_id: &str,
    ) -> Result<ErasureStatus, ConsoleError> {
        let (account, scope) = self
            .authorized_project(caller, project_id, Operation::RequestSubjectErasure)
            .await?;
        let user_id = parse_subject(user_id)?;
        let task = self
            .engine()?
            .request_subject_erasure_for(
                &console_principal(&account, scope, &caller.origin),
                &user_id,
            )
            .await
            .map_err(engine_error)?;
        Ok(erasure_status(project_id, task))
    }

    async fn erasure_status(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        task_id: &str,
    ) -> Result<ErasureStatus, ConsoleError> {
        let (account, scope) = self
            .authorized_project(caller, project_id, Operation::GetTask)
            .await?;
        let task_id: uuid::Uuid = task_id.parse().map_err(|_| ConsoleError::NotFound)?;
        let task = self
            .engine()?
            .get_task_for(&console_principal(&account, scope, &caller.origin), task_id)
            .await
            .map_err(engine_error)?;
        // The subjects page follows erasures only.
        if task.kind != "subject_erasure" {
            return Err(ConsoleError::NotFound);
        }
        Ok(erasure_status(project_id, task))
    }

    async fn export_subject(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        user_id: &str,
    ) -> Result<String, ConsoleError> {
        let (account, scope) = self
            .authorized_project(caller, project_id, Operation::ExportSubject)
            .await?;
        let user_id = parse_subject(user_id)?;
        let exported = self
            .engine()?
            .export_subject_for(
                &console_principal(&account, scope, &caller.origin),
                &user_id,
            )
            .await
            .map_err(engine_error)?;
        Ok(crate::routes::governance::subject_export_ndjson(
            user_id.as_str(),
            &exported,
        ))
    }

    async fn governance_settings(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
    ) -> Result<GovernanceSettings, ConsoleError> {
        let (account, scope) = self
            .authorized_project(caller, project_id, Operation::GetProjectSettings)
            .await?;
        let engine = self.engine()?;
        let governance = engine.governance();
        let settings = engine
            .project_settings_for(&console_principal(&account, scope, &caller.origin))
            .await
            .map_err(engine_error)?;
        let due = governance
            .retention_preview(&scope, 100_000)
            .await
            .map_err(engine_error)?;
        let mut by_kind: std::collections::BTreeMap<String, u64> = Default::default();
        for (_, kind) in &due {
            *by_kind.entry(kind.as_str().to_string()).or_default() += 1;
        }
        Ok(GovernanceSettings {
            project_id: project_id.to_string(),
            pii_redaction: settings.pii_redaction.as_str().to_string(),
            retention_days: MemoryKind::ALL
                .iter()
                .map(|kind| {
                    (
                        kind.as_str().to_string(),
                        settings.retention_days.get(kind).copied(),
                    )
                })
                .collect(),
            preview: RetentionPreview {
                would_delete: due.len() as u64,
                by_kind: by_kind.into_iter().collect(),
                memory_ids: due.iter().take(20).map(|(id, _)| id.to_string()).collect(),
            },
        })
    }

    async fn save_governance_settings(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        pii_redaction: &str,
        retention_days: Vec<(String, Option<u32>)>,
    ) -> Result<(), ConsoleError> {
        let (account, scope) = self
            .authorized_project(caller, project_id, Operation::UpdateProjectSettings)
            .await?;
        let change = engram_engine::ProjectSettingsChange {
            pii_redaction: Some(pii_redaction.to_string()),
            retention_days: Some(retention_days.into_iter().collect()),
            ..Default::default()
        };
        self.engine()?
            .update_project_settings_for(
                &console_principal(&account, scope, &caller.origin),
                change,
            )
            .await
            .map(|_| ())
            .map_err(engine_error)
    }

    async fn recall_dashboard(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        from: &str,
        to: &str,
    ) -> Result<engram_console::model::RecallDashboard, ConsoleError> {
        self.build_recall_dashboard(caller, project_id, from, to)
            .await
    }

    async fn create_evaluation_set(
        &self,
        caller: &ConsoleCaller,
        form: engram_console::model::NewEvaluationSetForm,
    ) -> Result<(), ConsoleError> {
        self.store_evaluation_set(caller, form).await
    }

    async fn run_evaluation_set(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        set_id: &str,
    ) -> Result<(), ConsoleError> {
        self.queue_evaluation_run(caller, project_id, set_id).await
    }

    async fn recall_event(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        recall_id: &str,
    ) -> Result<engram_console::model::RecallEventDetail, ConsoleError> {
        self.build_recall_event(caller, project_id, recall_id).await
    }

    async fn usage_overview(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        days: u32,
    ) -> Result<engram_console::model::UsageOverview, ConsoleError> {
        self.build_usage_overview(caller, project_id, days).await
    }

    async fn save_spend_limits(
        &self,
        caller: &ConsoleCaller,
        form: engram_console::model::SpendLimitsForm,
    ) -> Result<(), ConsoleError> {
        self.store_spend_limits(caller, form).await
    }

    async fn sweep_retention_now(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
    ) -> Result<u64, ConsoleError> {
        let (_, scope) = self
            .authorized_project(caller, project_id, Operation::SweepRetention)
            .await?;
        self.engine()?
            .governance()
            .sweep_retention(&scope)
            .await
            .map_err(engine_error)
    }
}

fn memory_row(memory: &engram_core::Memory, score: Option<f32>) -> MemoryRow {
    MemoryRow {
        id: memory.id.to_string(),
        user_id: memory.user_id.as_ref().map(|id| id.as_str().to_string()),
        agent_id: memory.agent_id.as_ref().map(|id| id.as_str().to_string()),
        session_id: memory.session_id.as_ref().map(|id| id.as_str().to_string()),
        kind: memory.kind.to_string(),
        key: memory.key.as_ref().map(|id| id.as_str().to_string()),
        content: memory.content.clone(),
        state: memory.state.to_string(),
        version: memory.version,
        updated_at: memory.updated_at.to_rfc3339(),
        source: memory.source.to_string(),
        categories: memory.categories.clone(),
        immutable: memory.immutable,
        legal_hold: memory.legal_hold,
        score,
    }
}

fn invalid(field: &str, message: impl std::fmt::Display) -> ConsoleError {
    ConsoleError::InvalidInput(format!("{field}: {message}"))
}

fn optional_id(
    value: &Option<String>,
    field: &str,
) -> Result<Option<engram_core::ExternalId>, ConsoleError> {
    match value
        .as_deref()
        .map(str::trim)
        .filter(|text| !text.is_empty())
    {
        Some(text) => engram_core::ExternalId::parse(text)
            .map(Some)
            .map_err(|message| invalid(field, message)),
        None => Ok(None),
    }
}

fn optional_date(
    value: &Option<String>,
    field: &str,
    next_day: bool,
) -> Result<Option<chrono::DateTime<chrono::Utc>>, ConsoleError> {
    let Some(text) = value
        .as_deref()
        .map(str::trim)
        .filter(|text| !text.is_empty())
    else {
        return Ok(None);
    };
    let date = chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .map_err(|_| invalid(field, "expected a date as YYYY-MM-DD"))?;
    let date = if next_day {
        date.succ_opt().unwrap_or(date)
    } else {
        date
    };
    Ok(date.and_hms_opt(0, 0, 0).map(|midnight| midnight.and_utc()))
}

/// The storage filter a console query asks for (every field checked, none trusted).
fn memory_filter(query: &MemoryListQuery, limit: u64) -> Result<MemoryListFilter, ConsoleError> {
    let non_empty = |value: &Option<String>| {
        value
            .as_deref()
            .map(str::trim)
            .filter(|text| !text.is_empty())
            .map(str::to_string)
    };
    let kind = match non_empty(&query.kind) {
        Some(kind) => Some(
            kind.parse::<MemoryKind>()
                .map_err(|_| invalid("kind", "unknown kind"))?,
        ),
        None => None,
    };
    let state = match non_empty(&query.state) {
        Some(state) => Some(
            state
                .parse::<engram_core::MemoryState>()
                .map_err(|_| invalid("state", "unknown state"))?,
        ),
        None => None,
    };
    let source = match non_empty(&query.source) {
        Some(source) => Some(
            source
                .parse::<engram_core::MemorySource>()
                .map_err(|_| invalid("source", "unknown source"))?,
        ),
        None => None,
    };
    Ok(MemoryListFilter {
        subject: engram_core::SubjectFilter {
            user_id: optional_id(&query.user_id, "user")?,
            agent_id: optional_id(&query.agent_id, "agent")?,
            session_id: optional_id(&query.session_id, "session")?,
        },
        kind,
        state,
        text_contains: non_empty(&query.text).map(|text| text.chars().take(500).collect()),
        after: None,
        limit,
        source,
        category: non_empty(&query.category).map(|category| category.chars().take(64).collect()),
        created_from: optional_date(&query.created_from, "from", false)?,
        created_to: optional_date(&query.created_to, "to", true)?,
    })
}

fn parse_memory_id(text: &str) -> Result<engram_core::MemoryId, ConsoleError> {
    text.trim().parse().map_err(|_| ConsoleError::NotFound)
}

fn parse_subject(text: &str) -> Result<engram_core::ExternalId, ConsoleError> {
    engram_core::ExternalId::parse(text.trim()).map_err(|message| invalid("user", message))
}

/// Corrections, deletions and flag changes need a reason (1–500 characters).
fn required_reason(reason: String) -> Result<String, ConsoleError> {
    let reason = reason.trim().to_string();
    if reason.is_empty() {
        return Err(ConsoleError::InvalidInput("give a reason".to_string()));
    }
    Ok(reason.chars().take(500).collect())
}

/// A key use case's refusal in the console's terms: a scope the role cannot give names the
/// role and the scope.
fn key_error(account: &ConsoleAccountRecord, error: engram_engine::EngineError) -> ConsoleError {
    match error {
        engram_engine::EngineError::ScopeNotGrantable { missing } => {
            ConsoleError::MissingPermission {
                role: ConsoleRole::from_stored(&account.role).as_str().to_string(),
                permission: missing.as_str().to_string(),
            }
        }
        other => engine_error(other),
    }
}

fn engine_error(error: engram_engine::EngineError) -> ConsoleError {
    match error {
        engram_engine::EngineError::NotFound | engram_engine::EngineError::Missing(_) => {
            ConsoleError::NotFound
        }
        engram_engine::EngineError::Locked(message)
        | engram_engine::EngineError::EmbeddingUnavailable(message) => {
            ConsoleError::Refused(message)
        }
        engram_engine::EngineError::SubjectHeld { memory_ids } => ConsoleError::Refused(format!(
            "{} memories of this end-user are under legal hold: {}",
            memory_ids.len(),
            memory_ids
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )),
        engram_engine::EngineError::Invalid(invalid) => {
            ConsoleError::InvalidInput(invalid.to_string())
        }
        engram_engine::EngineError::VersionConflict { .. } => {
            ConsoleError::Refused("the memory changed meanwhile: reload and try again".to_string())
        }
        // The role checks before the use case say `Forbidden` naming the role; what the use
        // case still refuses (an expiry without delete rights) is a refusal it explains.
        engram_engine::EngineError::Forbidden(message)
        | engram_engine::EngineError::Conflict(message)
        | engram_engine::EngineError::InProgress(message) => ConsoleError::Refused(message),
        error @ engram_engine::EngineError::ScopeNotGrantable { .. } => {
            ConsoleError::Refused(error.to_string())
        }
        error @ engram_engine::EngineError::LimitReached { .. } => ConsoleError::Refused(format!(
            "{error}; raise the limit on the Usage page or wait for it to reset"
        )),
        other => internal(other),
    }
}

fn erasure_status(project_id: &str, task: engram_engine::TaskRecord) -> ErasureStatus {
    let receipt = task.result.as_ref();
    ErasureStatus {
        project_id: project_id.to_string(),
        task_id: task.id.to_string(),
        status: task.status.clone(),
        done: task.progress_done,
        total: task.progress_total,
        verified: receipt.and_then(|receipt| receipt["verification"]["verified"].as_bool()),
        removed_memories: receipt.and_then(|receipt| receipt["removed"]["memories"].as_u64()),
        digest: receipt.and_then(|receipt| receipt["digest"].as_str().map(str::to_string)),
        receipt: receipt.map(|receipt| serde_json::to_string_pretty(receipt).unwrap_or_default()),
        error: task.error,
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
    /// `operation` (`Forbidden` otherwise) and the project is visible to it (`NotFound`).
    async fn authorized_project(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        operation: Operation,
    ) -> Result<(ConsoleAccountRecord, engram_core::ProjectScope), ConsoleError> {
        let account = self.account_for(caller).await?;
        require_role(&account, operation)?;
        let scope = self.project_scope(&account, project_id).await?;
        Ok((account, scope))
    }

    /// The role named `role` when the account may hand it out (`Forbidden` otherwise).
    fn assignable_role(
        &self,
        account: &ConsoleAccountRecord,
        role: &str,
    ) -> Result<ConsoleRole, ConsoleError> {
        require_role(account, Operation::InviteMember)?;
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

    /// Log that the account was shown the content of `memory_ids` (before it is shown).
    async fn audit_content_view(
        &self,
        account: &ConsoleAccountRecord,
        scope: &engram_core::ProjectScope,
        caller: &ConsoleCaller,
        memory_ids: Vec<String>,
        page: &str,
    ) -> Result<(), ConsoleError> {
        self.storage
            .record_audit_event(
                account.organization_id,
                Some(scope),
                &console_actor(account, &caller.origin),
                &NewAuditEvent::success(
                    AuditAction::MemoryContentViewed,
                    memory_ids,
                    serde_json::json!({ "page": page }),
                ),
            )
            .await
            .map_err(internal)
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
    let backend: Arc<dyn ConsoleBackend> = Arc::new(
        GatewayConsoleBackend::new(
            state.engine.storage().clone(),
            state.credentials.console_sessions.clone(),
        )
        .with_engine(state.engine.clone()),
    );
    engram_console::console_router(backend, ConsoleAssets::new(assets_dir))
}
