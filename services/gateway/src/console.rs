//! The console's backend: a thin adapter from the console's server functions to the
//! engine — sign-in, sessions, members and invitations through [`ConsoleAccess`], and every
//! project page through the same use cases as the HTTP API, as a console-member principal.

use crate::state::AppState;
use axum::Router;
use engram_console::model::{
    AuditChainStatus, AuditListing, AuditQuery, AuditRow, BulkDeleteOutcome, BulkDeletePreview,
    ErasureStatus, GovernanceSettings, HistoryRow, InvitationPreview, InvitationRow, KeyListing,
    KeyRow, MemberListing, MemberRow, MemoryDetail, NewInvitation, NewKeyRequest, NewKeySecret,
    RetentionPreview, SessionTokens, SubjectSummary,
};
use engram_console::{
    ConsoleAccount, ConsoleAssets, ConsoleBackend, ConsoleCaller, ConsoleError,
    ConsoleRequestOrigin, MemoryListQuery, MemoryPage, MemoryRow, ProjectSummary,
};
use engram_core::audit::AuditFilter;
use engram_core::audit::{Actor, ActorKind, AuditAction};
use engram_core::memory::MemoryListFilter;
use engram_core::permissions::PrincipalKind;
use engram_core::{MemoryKind, Operation, Principal};
use engram_engine::{
    ConsoleAccess, ConsoleMember, ConsoleSessionTokens, EngineError, MemoryEngine,
};
use std::path::Path;
use std::sync::Arc;

mod prices;
mod recall;
mod runs;
mod usage;

pub struct GatewayConsoleBackend {
    access: Arc<ConsoleAccess>,
    /// For every project page: the same use cases as the HTTP API.
    engine: Option<Arc<MemoryEngine>>,
}

impl GatewayConsoleBackend {
    pub fn new(access: ConsoleAccess) -> Self {
        Self {
            access: Arc::new(access),
            engine: None,
        }
    }

    /// The engine whose use cases the project pages call.
    pub fn with_engine(mut self, engine: Arc<MemoryEngine>) -> Self {
        self.engine = Some(engine);
        self
    }

    fn engine(&self) -> Result<&MemoryEngine, ConsoleError> {
        self.engine
            .as_deref()
            .ok_or_else(|| ConsoleError::Internal("this console has no memory engine".to_string()))
    }

    /// The signed-in member of `caller`'s session; `Unauthorized` when there is none.
    async fn member_for(&self, caller: &ConsoleCaller) -> Result<ConsoleMember, ConsoleError> {
        self.access
            .authenticate_member(&caller.session_token, &origin_actor(&caller.origin))
            .await
            .map_err(engine_error)
    }

    /// The signed-in member and the member at work in `project_id`, when the member's role
    /// passes `operation` (`Forbidden` naming the role otherwise) and the project is its
    /// organization's (`NotFound` otherwise). The use case checks the table again.
    async fn authorized_project(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        operation: Operation,
    ) -> Result<(ConsoleMember, Principal), ConsoleError> {
        let member = self.member_for(caller).await?;
        require_role(&member, operation)?;
        let principal = self
            .access
            .principal_in_project(&member, project_id)
            .await
            .map_err(engine_error)?;
        Ok((member, principal))
    }
}

/// Where a console request came from, as the audit log records it (the account is filled
/// in by the engine once known).
fn origin_actor(origin: &ConsoleRequestOrigin) -> Actor {
    Actor {
        kind: ActorKind::ConsoleAccount,
        id: String::new(),
        ip: origin.ip.clone(),
        user_agent: origin.user_agent.clone(),
        request_id: origin.request_id.clone(),
        channel: engram_core::audit::Channel::Console,
    }
}

fn session_tokens(tokens: ConsoleSessionTokens) -> SessionTokens {
    SessionTokens {
        access: tokens.access,
        refresh: tokens.refresh,
        device: tokens.device,
    }
}

/// A key as the console lists it to `viewer`: who made it ("you" for the viewer's own), and
/// whether the viewer may roll or revoke it (a hint for the buttons; the use case decides).
fn key_row(
    record: &engram_core::api_keys::ApiKeyRecord,
    viewer: &engram_core::Principal,
) -> KeyRow {
    let view = crate::views::ApiKeyView::from(record);
    let own = record.created_by.as_deref() == Some(viewer.actor().label().as_str());
    KeyRow {
        created_by: if own {
            Some("you".to_string())
        } else {
            view.created_by.clone()
        },
        manageable: own || viewer.may(Operation::ManageOthersApiKeys),
        id: view.id,
        label: view.label,
        prefix: view.prefix,
        scopes: view.scopes,
        state: view.state,
        created_at: readable_time(view.created_at),
        expires_at: view.expires_at.map(readable_time),
        last_used_at: view.last_used_at.map(readable_time),
        agents: view.agents.unwrap_or_default(),
    }
}

/// `Forbidden` naming the role unless the permission table lets the member's role perform
/// `operation`: the console's own wording of the refusal the use case would give.
fn require_role(member: &ConsoleMember, operation: Operation) -> Result<(), ConsoleError> {
    member
        .authorize(operation)
        .map_err(|_| ConsoleError::Forbidden {
            role: member.role().as_str().to_string(),
        })
}

/// A member-management refusal: one the role explains names the role.
fn member_error(member: &ConsoleMember, error: EngineError) -> ConsoleError {
    match error {
        EngineError::Forbidden(_) => ConsoleError::Forbidden {
            role: member.role().as_str().to_string(),
        },
        other => engine_error(other),
    }
}

fn internal(error: impl std::fmt::Display) -> ConsoleError {
    tracing::error!(%error, "console backend failure");
    ConsoleError::Internal("the service could not complete the request".to_string())
}

#[async_trait::async_trait]
impl ConsoleBackend for GatewayConsoleBackend {
    async fn login(
        &self,
        email: String,
        password: String,
        device_token: Option<String>,
        origin: &ConsoleRequestOrigin,
    ) -> Result<SessionTokens, ConsoleError> {
        self.access
            .sign_in(
                &email,
                password,
                device_token.as_deref(),
                &origin_actor(origin),
            )
            .await
            .map(session_tokens)
            .map_err(engine_error)
    }

    async fn logout(&self, caller: &ConsoleCaller) {
        self.access.sign_out(&caller.session_token).await;
    }

    async fn refresh(&self, refresh_token: &str) -> Option<SessionTokens> {
        self.access
            .refresh_session(refresh_token)
            .await
            .map(session_tokens)
    }

    async fn current_account(&self, caller: &ConsoleCaller) -> Option<ConsoleAccount> {
        let member = self.member_for(caller).await.ok()?;
        let organization_name = self.access.organization_name(&member).await.ok()?;
        Some(ConsoleAccount {
            role: member.role().as_str().to_string(),
            email: member.email().to_string(),
            organization_name,
            functions: engram_core::permissions::console_functions_for(member.role())
                .into_iter()
                .map(str::to_string)
                .collect(),
            language: member
                .language()
                .map(|language| language.as_str().to_string()),
        })
    }

    async fn choose_language(
        &self,
        caller: &ConsoleCaller,
        language: &str,
    ) -> Result<(), ConsoleError> {
        let member = self.member_for(caller).await?;
        self.access
            .choose_console_language(&member, language)
            .await
            .map_err(engine_error)?;
        Ok(())
    }

    async fn list_projects(
        &self,
        caller: &ConsoleCaller,
    ) -> Result<Vec<ProjectSummary>, ConsoleError> {
        let member = self.member_for(caller).await?;
        let projects = self
            .access
            .organization_projects(&member)
            .await
            .map_err(engine_error)?;
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
        let (_, principal) = self
            .authorized_project(caller, &query.project_id, Operation::ListMemories)
            .await?;
        // Counted for a list; a search by meaning shows the nearest only.
        let mut total_matching = None;
        let (memories, next_cursor): (Vec<MemoryRow>, Option<engram_core::MemoryId>) = match query
            .meaning
            .as_deref()
            .filter(|text| !text.trim().is_empty())
        {
            Some(meaning) => {
                let engine = self.engine()?;
                let filter = memory_filter(&query, u64::from(query.limit.clamp(1, 100)))?;
                // The use case narrows this to words in a project that sends its own vectors.
                let retrieval = engram_engine::RetrievalMode::Hybrid;
                // The console's session field is a filter, like its other fields.
                let session_only = filter.subject.session_id.is_some();
                let tree = filter.search_tree();
                // The relevance cut-off a person sets: what scores below it is left out.
                let min_score = match query
                    .min_score
                    .as_deref()
                    .map(str::trim)
                    .filter(|text| !text.is_empty())
                {
                    None => None,
                    Some(text) => match text.parse::<f32>() {
                        Ok(score) if (0.0..=1.0).contains(&score) => Some(score),
                        _ => return Err(invalid("min_score", "a number from 0 to 1")),
                    },
                };
                let request = engram_engine::SearchRequest {
                    retrieval,
                    min_score: min_score.unwrap_or(0.0),
                    query: meaning.chars().take(2_000).collect(),
                    subject: filter.subject,
                    kinds: filter.kind.into_iter().collect(),
                    filters: tree,
                    top_k: query.limit.clamp(1, 100) as usize,
                    session_only,
                    ..engram_engine::SearchRequest::default()
                };
                // The console chose its retrieval itself: no profile is drawn for it.
                let search = engram_engine::SearchMemoriesRequest {
                    request,
                    caller_tuning: engram_engine::profiles::SearchTuning {
                        retrieval: Some(retrieval),
                        min_score,
                        ..Default::default()
                    },
                    profile: None,
                    context_tokens: None,
                    trace_id: None,
                    run_id: None,
                };
                let outcome = engine
                    .search_memories_for(&principal, search)
                    .await
                    .map_err(engine_error)?
                    .outcome;
                let rows = outcome
                    .results
                    .iter()
                    .map(|hit| memory_row(&hit.memory, Some(hit.score)))
                    .collect();
                (rows, None)
            }
            None => {
                let filter = memory_filter(&query, u64::from(query.limit.clamp(1, 500)))?;
                let request = engram_engine::ListMemoriesRequest {
                    filter,
                    user_id_field: "user_id",
                };
                let engine = self.engine()?;
                total_matching = Some(
                    engine
                        .count_listed_memories_for(&principal, request.clone())
                        .await
                        .map_err(engine_error)?,
                );
                let page = engine
                    .list_memories_for(&principal, request)
                    .await
                    .map_err(engine_error)?;
                let rows = page
                    .memories
                    .iter()
                    .map(|memory| memory_row(memory, None))
                    .collect();
                (rows, page.next_cursor)
            }
        };
        let total_shown = memories.len();
        let next_cursor = next_cursor.map(|cursor| cursor.to_string());
        // Compliance must know who saw what: the page is shown only once its read is logged.
        if total_shown > 0 {
            self.engine()?
                .record_content_view_for(
                    &principal,
                    memories.iter().map(|memory| memory.id.clone()).collect(),
                    "memories",
                )
                .await
                .map_err(engine_error)?;
        }
        Ok(MemoryPage {
            memories,
            total_shown,
            total_matching,
            next_cursor,
        })
    }

    async fn audit_log(
        &self,
        caller: &ConsoleCaller,
        query: AuditQuery,
    ) -> Result<AuditListing, ConsoleError> {
        let (_, principal) = self
            .authorized_project(caller, &query.project_id, Operation::ListAuditEvents)
            .await?;
        let engine = self.engine()?;
        let names = engine
            .audit_names_for(&principal)
            .await
            .map_err(engine_error)?;
        let limit = u64::from(query.limit.clamp(1, 499));
        // One more than the page: whether an older page exists is known, not guessed.
        let filter = AuditFilter {
            after_id: query.before,
            limit: limit + 1,
            newest_first: true,
            include_organization_events: true,
            ..audit_filter(&query, &names.actors)?
        };
        let mut events = engine
            .list_audit_events_for(&principal, filter)
            .await
            .map_err(engine_error)?;
        let more = events.len() as u64 > limit;
        events.truncate(limit as usize);
        let next_before = more.then(|| events.last().map(|event| event.id)).flatten();
        let start = if query.full {
            engram_core::audit::VerificationStart::Genesis
        } else {
            engram_core::audit::VerificationStart::LastCheckpoint
        };
        let verification = engine
            .verify_audit_chain_for(&principal, start)
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
                    actor_name: names.actors.get(&event.actor_id).cloned(),
                    // Keys, members and projects by name; memories, end-users' digests and
                    // tasks are their ids.
                    target_names: event
                        .target_ids
                        .iter()
                        .filter_map(|id| names.name_of(id).map(|name| (id.clone(), name.clone())))
                        .collect(),
                    reason: event
                        .details
                        .get("reason")
                        .and_then(serde_json::Value::as_str)
                        .map(str::to_string)
                        .or_else(|| {
                            // A correction's reason is kept with the memory's history (it may
                            // name the person), not in the chain: say where it is.
                            (event.details.get("reason_given") == Some(&serde_json::json!(true)))
                                .then(|| "given: in the memory's history".to_string())
                        }),
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
            next_before,
            chain: AuditChainStatus {
                verified: verification.verified,
                events_checked: verification.events_checked,
                broken_at_event: verification
                    .first_broken
                    .as_ref()
                    .and_then(|broken| broken.event_id),
                broken_reason: verification.first_broken.map(|broken| broken.reason),
                recomputed_from_sequence: verification.recomputed_from_sequence,
            },
        })
    }

    async fn list_keys(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
    ) -> Result<KeyListing, ConsoleError> {
        let (_, principal) = self
            .authorized_project(caller, project_id, Operation::ListApiKeys)
            .await?;
        let keys = self
            .engine()?
            .list_api_keys_for(&principal)
            .await
            .map_err(engine_error)?;
        Ok(KeyListing {
            project_id: Some(project_id.to_string()),
            keys: keys.iter().map(|key| key_row(key, &principal)).collect(),
        })
    }

    async fn create_key(
        &self,
        caller: &ConsoleCaller,
        request: NewKeyRequest,
    ) -> Result<NewKeySecret, ConsoleError> {
        let (_, principal) = self
            .authorized_project(caller, &request.project_id, Operation::CreateApiKey)
            .await?;
        // The last day given is included: the key stops at the next day's start (UTC).
        let expires_at = request
            .expires_on
            .as_deref()
            .map(|day| {
                chrono::NaiveDate::parse_from_str(day.trim(), "%Y-%m-%d")
                    .map_err(|_| {
                        ConsoleError::InvalidInput(format!(
                            "expires: {day:?} is not a day such as 2027-01-31"
                        ))
                    })
                    .and_then(|date| {
                        next_day(date.and_time(chrono::NaiveTime::MIN).and_utc(), "expires")
                    })
            })
            .transpose()?;
        let create = engram_engine::CreateApiKeyRequest {
            label: request.label,
            scopes: request.scopes,
            environment: request.environment,
            expires_at,
            agents: request.agents,
        };
        let (record, secret) = self
            .engine()?
            .create_api_key_for(&principal, create)
            .await
            .map_err(engine_error)?;
        Ok(NewKeySecret {
            key: key_row(&record, &principal),
            secret,
        })
    }

    async fn revoke_key(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        key_id: &str,
    ) -> Result<(), ConsoleError> {
        let (_, principal) = self
            .authorized_project(caller, project_id, Operation::RevokeApiKey)
            .await?;
        let key_id: engram_core::ids::ApiKeyId =
            key_id.parse().map_err(|_| ConsoleError::NotFound)?;
        self.engine()?
            .revoke_api_key_for(&principal, key_id)
            .await
            .map(|_| ())
            .map_err(engine_error)
    }

    async fn roll_key(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        key_id: &str,
    ) -> Result<NewKeySecret, ConsoleError> {
        let (_, principal) = self
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
            .roll_api_key_for(&principal, roll)
            .await
            .map_err(engine_error)?;
        Ok(NewKeySecret {
            key: key_row(&rolled.key, &principal),
            secret: rolled.secret,
        })
    }

    async fn export_audit_csv(
        &self,
        caller: &ConsoleCaller,
        query: AuditQuery,
    ) -> Result<String, ConsoleError> {
        let (_, principal) = self
            .authorized_project(caller, &query.project_id, Operation::ExportAuditEvents)
            .await?;
        let engine = self.engine()?;
        let names = engine
            .audit_names_for(&principal)
            .await
            .map_err(engine_error)?;
        // The export follows the page's filter (every page of it).
        let filter = AuditFilter {
            include_organization_events: true,
            ..audit_filter(&query, &names.actors)?
        };
        let events: Vec<crate::views::AuditEventView> = engine
            .export_audit_events_for(&principal, filter)
            .await
            .map_err(engine_error)?
            .into_iter()
            .map(Into::into)
            .collect();
        Ok(crate::views::events_as_csv(&events))
    }

    async fn list_members(&self, caller: &ConsoleCaller) -> Result<MemberListing, ConsoleError> {
        let member = self.member_for(caller).await?;
        let listing = self
            .access
            .list_members(&member)
            .await
            .map_err(|error| member_error(&member, error))?;
        Ok(MemberListing {
            members: listing
                .members
                .into_iter()
                .map(|other| MemberRow {
                    is_you: other.id == member.account_id(),
                    id: other.id.to_string(),
                    email: other.email,
                    role: other.role.as_str().to_string(),
                    joined_at: readable_time(other.created_at),
                })
                .collect(),
            invitations: listing.invitations.iter().map(invitation_row).collect(),
            assignable_roles: listing
                .assignable_roles
                .into_iter()
                .map(|role| role.as_str().to_string())
                .collect(),
        })
    }

    async fn invite_member(
        &self,
        caller: &ConsoleCaller,
        email: &str,
        role: &str,
    ) -> Result<NewInvitation, ConsoleError> {
        let member = self.member_for(caller).await?;
        let (invitation, token) = self
            .access
            .invite_member(&member, email, role)
            .await
            .map_err(|error| member_error(&member, error))?;
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
        let member = self.member_for(caller).await?;
        self.access
            .revoke_invitation(&member, invitation_id)
            .await
            .map_err(|error| member_error(&member, error))
    }

    async fn change_member_role(
        &self,
        caller: &ConsoleCaller,
        member_id: &str,
        role: &str,
    ) -> Result<(), ConsoleError> {
        let member = self.member_for(caller).await?;
        self.access
            .change_member_role(&member, member_id, role)
            .await
            .map_err(|error| member_error(&member, error))
    }

    async fn remove_member(
        &self,
        caller: &ConsoleCaller,
        member_id: &str,
    ) -> Result<(), ConsoleError> {
        let member = self.member_for(caller).await?;
        self.access
            .remove_member(&member, member_id)
            .await
            .map_err(|error| member_error(&member, error))
    }

    async fn preview_invitation(&self, token: &str) -> Result<InvitationPreview, ConsoleError> {
        let offer = self
            .access
            .preview_invitation(token)
            .await
            .map_err(engine_error)?;
        Ok(InvitationPreview {
            email: offer.email,
            organization_name: offer.organization_name,
            role: offer.role.as_str().to_string(),
        })
    }

    async fn accept_invitation(
        &self,
        token: &str,
        password: String,
        origin: &ConsoleRequestOrigin,
    ) -> Result<SessionTokens, ConsoleError> {
        self.access
            .accept_invitation(token, password, &origin_actor(origin))
            .await
            .map(session_tokens)
            .map_err(engine_error)
    }

    async fn memory_detail(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        memory_id: &str,
    ) -> Result<MemoryDetail, ConsoleError> {
        let (_, principal) = self
            .authorized_project(caller, project_id, Operation::GetMemory)
            .await?;
        let memory_id = parse_memory_id(memory_id)?;
        let engine = self.engine()?;
        let memory = engine
            .get_memory_for(&principal, memory_id)
            .await
            .map_err(engine_error)?;
        let history = engine
            .memory_history_for(&principal, memory_id)
            .await
            .map_err(engine_error)?;
        engine
            .record_content_view_for(&principal, vec![memory_id.to_string()], "memory")
            .await
            .map_err(engine_error)?;
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
            occurred_at: memory
                .occurred_at
                .format("%Y-%m-%d %H:%M:%S UTC")
                .to_string(),
            metadata_json: serde_json::to_string_pretty(&memory.metadata).unwrap_or_default(),
            expires_at: memory.expires_at.map(|at| at.to_rfc3339()),
            memory: memory_row(&memory, None),
            history: rows,
            impact: self.memory_impact_summary(&principal, memory_id).await?,
        })
    }

    async fn correct_memory(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        memory_id: &str,
        correction: engram_console::model::MemoryCorrection,
    ) -> Result<(), ConsoleError> {
        let (_, principal) = self
            .authorized_project(caller, project_id, Operation::EditMemory)
            .await?;
        let memory_id = parse_memory_id(memory_id)?;
        // The content's size is the edit use case's rule.
        let content = correction.content.trim().to_string();
        let metadata = match correction.metadata_json.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(text) => match serde_json::from_str::<serde_json::Value>(text) {
                Ok(serde_json::Value::Object(object)) => Some(object),
                _ => {
                    return Err(ConsoleError::InvalidInput(
                        "metadata: must be a JSON object, such as {\"status\": \"done\"}".into(),
                    ));
                }
            },
        };
        let categories = correction.categories.map(|text| {
            text.split(',')
                .map(str::trim)
                .filter(|category| !category.is_empty())
                .map(str::to_string)
                .collect::<Vec<_>>()
        });
        let request = engram_engine::EditMemoryRequest {
            memory_id,
            edit: engram_engine::MemoryEdit {
                content: Some(content),
                metadata,
                categories,
                reason: Some(correction.reason),
                ..Default::default()
            },
            client_vector: None,
            expected_version: correction.expected_version,
        };
        self.engine()?
            .edit_memory_for(&principal, request)
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
        let (_, principal) = self
            .authorized_project(caller, project_id, Operation::DeleteMemory)
            .await?;
        let memory_id = parse_memory_id(memory_id)?;
        let request = engram_engine::DeleteMemoryRequest {
            memory_id,
            reason: Some(reason),
        };
        self.engine()?
            .delete_memory_for(&principal, request)
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
        let (_, principal) = self
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
            .set_memory_flags_for(&principal, request)
            .await
            .map(|_| ())
            .map_err(engine_error)
    }

    async fn set_memory_visibility(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        memory_id: &str,
        visibility: String,
        reason: String,
    ) -> Result<(), ConsoleError> {
        let (_, principal) = self
            .authorized_project(caller, project_id, Operation::EditMemory)
            .await?;
        let memory_id = parse_memory_id(memory_id)?;
        let visibility = visibility
            .parse()
            .map_err(|message| invalid("visibility", message))?;
        let request = engram_engine::EditMemoryRequest {
            memory_id,
            edit: engram_engine::MemoryEdit {
                visibility: Some(visibility),
                reason: Some(reason),
                ..Default::default()
            },
            client_vector: None,
            expected_version: None,
        };
        self.engine()?
            .edit_memory_for(&principal, request)
            .await
            .map(|_| ())
            .map_err(engine_error)
    }

    async fn verify_memory(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        memory_id: &str,
        verified: bool,
        reason: String,
    ) -> Result<(), ConsoleError> {
        let (_, principal) = self
            .authorized_project(caller, project_id, Operation::VerifyMemory)
            .await?;
        let memory_id = parse_memory_id(memory_id)?;
        let request = engram_engine::VerifyMemoryRequest {
            memory_id,
            verified,
            reason,
            expected_version: None,
        };
        self.engine()?
            .verify_memory_for(&principal, request)
            .await
            .map(|_| ())
            .map_err(engine_error)
    }

    async fn preview_bulk_delete(
        &self,
        caller: &ConsoleCaller,
        query: MemoryListQuery,
    ) -> Result<BulkDeletePreview, ConsoleError> {
        let (_, principal) = self
            .authorized_project(caller, &query.project_id, Operation::BulkDeleteMemories)
            .await?;
        let filter = memory_filter(&query, 500)?;
        let preview = self
            .engine()?
            .preview_bulk_delete_for(&principal, filter)
            .await
            .map_err(engine_error)?;
        Ok(BulkDeletePreview {
            matching: preview.matching,
            locked: preview.locked,
        })
    }

    async fn bulk_delete(
        &self,
        caller: &ConsoleCaller,
        query: MemoryListQuery,
        expected: u64,
        reason: String,
    ) -> Result<BulkDeleteOutcome, ConsoleError> {
        let (_, principal) = self
            .authorized_project(caller, &query.project_id, Operation::BulkDeleteMemories)
            .await?;
        let filter = memory_filter(&query, 500)?;
        let outcome = self
            .engine()?
            .bulk_delete_memories_for(&principal, filter, expected, &reason)
            .await
            .map_err(engine_error)?;
        Ok(BulkDeleteOutcome {
            deleted: outcome.deleted,
            skipped_locked: outcome.skipped_locked,
        })
    }

    async fn subject_summary(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        user_id: &str,
    ) -> Result<SubjectSummary, ConsoleError> {
        let (_, principal) = self
            .authorized_project(caller, project_id, Operation::SummarizeSubject)
            .await?;
        let user_id = parse_subject(user_id)?;
        let summary = self
            .engine()?
            .summarize_subject_for(&principal, &user_id)
            .await
            .map_err(engine_error)?;
        Ok(SubjectSummary {
            project_id: project_id.to_string(),
            user_id: user_id.into_string(),
            memories: summary.memories,
            held_memory_ids: summary
                .held_memory_ids
                .iter()
                .map(ToString::to_string)
                .collect(),
            stores: summary
                .stores
                .iter()
                .map(|(store, records)| engram_console::model::StoreCount {
                    store: store.to_string(),
                    records: *records,
                })
                .collect(),
            erasures: summary
                .erasures
                .into_iter()
                .map(|erasure| engram_console::model::PastErasureRow {
                    erased_at: readable_time(erasure.erased_at),
                    receipt: erasure.receipt.to_string(),
                })
                .collect(),
        })
    }

    async fn find_subjects(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        id_prefix: Option<String>,
        metadata: Option<String>,
    ) -> Result<Vec<engram_console::model::SubjectMatchRow>, ConsoleError> {
        let (_, principal) = self
            .authorized_project(caller, project_id, Operation::SummarizeSubject)
            .await?;
        let metadata = match metadata
            .as_deref()
            .map(str::trim)
            .filter(|text| !text.is_empty())
        {
            None => None,
            Some(pair) => {
                let Some((key, value)) = pair.split_once('=') else {
                    return Err(invalid("metadata", "write the condition as key=value"));
                };
                Some((key.trim().to_string(), metadata_value(value)))
            }
        };
        let found = self
            .engine()?
            .find_subjects_for(
                &principal,
                engram_engine::FindSubjectsRequest {
                    id_prefix,
                    metadata,
                    limit: engram_engine::MAX_SUBJECT_MATCHES,
                },
            )
            .await
            .map_err(engine_error)?;
        Ok(found
            .into_iter()
            .map(|found| engram_console::model::SubjectMatchRow {
                user_id: found.user_id,
                memories: found.memories,
            })
            .collect())
    }

    async fn request_erasure(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        user_id: &str,
        confirm: &str,
    ) -> Result<ErasureStatus, ConsoleError> {
        let (_, principal) = self
            .authorized_project(caller, project_id, Operation::RequestSubjectErasure)
            .await?;
        let user_id = parse_subject(user_id)?;
        let task = self
            .engine()?
            .request_subject_erasure_for(&principal, &user_id, Some(confirm))
            .await
            .map_err(engine_error)?;
        Ok(erasure_status(project_id, task))
    }

    async fn request_organization_erasure(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        user_id: &str,
        confirm: &str,
    ) -> Result<ErasureStatus, ConsoleError> {
        let (_, principal) = self
            .authorized_project(
                caller,
                project_id,
                Operation::RequestOrganizationSubjectErasure,
            )
            .await?;
        let user_id = parse_subject(user_id)?;
        let task = self
            .engine()?
            .request_organization_subject_erasure_for(&principal, &user_id, Some(confirm))
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
        let (_, principal) = self
            .authorized_project(caller, project_id, Operation::GetTask)
            .await?;
        let task_id: uuid::Uuid = task_id.parse().map_err(|_| ConsoleError::NotFound)?;
        let task = self
            .engine()?
            .get_task_for(&principal, task_id)
            .await
            .map_err(engine_error)?;
        // The subjects page follows erasures only.
        if !matches!(
            task.kind,
            engram_core::TaskKind::SubjectErasure
                | engram_core::TaskKind::OrganizationSubjectErasure
        ) {
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
        let (_, principal) = self
            .authorized_project(caller, project_id, Operation::ExportSubject)
            .await?;
        let user_id = parse_subject(user_id)?;
        let exported = self
            .engine()?
            .export_subject_for(&principal, &user_id)
            .await
            .map_err(engine_error)?;
        Ok(crate::subject_export::subject_export_ndjson(
            user_id.as_str(),
            &exported,
        ))
    }

    async fn governance_settings(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
    ) -> Result<GovernanceSettings, ConsoleError> {
        let (_, principal) = self
            .authorized_project(caller, project_id, Operation::GetProjectSettings)
            .await?;
        let engine = self.engine()?;
        let report = engine
            .project_settings_for(&principal)
            .await
            .map_err(engine_error)?;
        let settings = report.settings;
        let due = engine
            .preview_retention_for(&principal, 100_000)
            .await
            .map_err(engine_error)?
            .memories;
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
            relevance_floor: match settings.relevance_floor.to_json() {
                serde_json::Value::String(text) => text,
                number => number.to_string(),
            },
            relevance_floor_in_effect: format!("{:.3}", report.relevance_floor),
            relevance_floor_for_unmentioned_names: (report.unmentioned_name_floor
                > report.relevance_floor)
                .then(|| format!("{:.3}", report.unmentioned_name_floor)),
            embedding_model: report.embedding_model,
            embedding_change: report.embedding_change.map(|change| {
                engram_console::model::EmbeddingMove {
                    to_model: change.model,
                    task_id: change.task_id.to_string(),
                    memories_embedded: change.memories_embedded,
                    memories: change.memories,
                }
            }),
        })
    }

    async fn save_governance_settings(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        pii_redaction: &str,
        retention_days: Vec<(String, Option<u32>)>,
        relevance_floor: &str,
    ) -> Result<(), ConsoleError> {
        let (_, principal) = self
            .authorized_project(caller, project_id, Operation::UpdateProjectSettings)
            .await?;
        // The form's text as the API's value: what it accepts is the use case's rule.
        let relevance_floor = match relevance_floor.trim() {
            "" | "model" => serde_json::Value::String("model".to_string()),
            text => match text
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
            {
                Some(number) => serde_json::Value::Number(number),
                None => serde_json::Value::String(text.to_string()),
            },
        };
        let change = engram_engine::ProjectSettingsChange {
            pii_redaction: Some(pii_redaction.to_string()),
            retention_days: Some(retention_days.into_iter().collect()),
            relevance_floor: Some(relevance_floor),
            ..Default::default()
        };
        self.engine()?
            .update_project_settings_for(&principal, change)
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

    async fn run_list(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        user_id: Option<String>,
        status: Option<String>,
        before: Option<String>,
    ) -> Result<engram_console::model::RunListing, ConsoleError> {
        self.build_run_list(caller, project_id, user_id, status, before)
            .await
    }

    async fn run_timeline(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        run_id: &str,
    ) -> Result<engram_console::model::RunTimelineDetail, ConsoleError> {
        self.build_run_timeline(caller, project_id, run_id).await
    }

    async fn recall_list(
        &self,
        caller: &ConsoleCaller,
        query: engram_console::model::RecallListQuery,
    ) -> Result<engram_console::model::RecallListing, ConsoleError> {
        self.build_recall_list(caller, query).await
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

    async fn price_book(
        &self,
        caller: &ConsoleCaller,
    ) -> Result<engram_console::model::PriceBook, ConsoleError> {
        self.build_price_book(caller).await
    }

    async fn add_organization_price(
        &self,
        caller: &ConsoleCaller,
        form: engram_console::model::NewPriceForm,
    ) -> Result<String, ConsoleError> {
        self.add_price(caller, form).await
    }

    async fn withdraw_organization_price(
        &self,
        caller: &ConsoleCaller,
        price_id: &str,
    ) -> Result<(), ConsoleError> {
        self.withdraw_price(caller, price_id).await
    }

    async fn organization_statement(
        &self,
        caller: &ConsoleCaller,
        month: &str,
    ) -> Result<engram_console::model::StatementPage, ConsoleError> {
        self.statement_page(caller, month).await
    }

    async fn organization_statement_csv(
        &self,
        caller: &ConsoleCaller,
        month: &str,
    ) -> Result<String, ConsoleError> {
        let statement = self.statement(caller, month).await?;
        Ok(crate::routes::prices::statement_csv(&statement))
    }

    async fn sweep_retention_now(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
    ) -> Result<u64, ConsoleError> {
        let (_, principal) = self
            .authorized_project(caller, project_id, Operation::SweepRetention)
            .await?;
        self.engine()?
            .sweep_retention_for(&principal)
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
        visibility: memory.visibility.as_str().to_string(),
        shared_with: memory
            .shared_with
            .as_ref()
            .map(|team| team.as_str().to_string()),
        verified_by: memory.verified_by.clone(),
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
        after: match non_empty(&query.after) {
            Some(cursor) => Some(
                cursor
                    .parse::<engram_core::MemoryId>()
                    .map_err(|_| invalid("after", "not a page cursor of this list"))?,
            ),
            None => None,
        },
        limit,
        source,
        category: non_empty(&query.category).map(|category| category.chars().take(64).collect()),
        created_from: optional_date(&query.created_from, "from", false)?,
        created_to: optional_date(&query.created_to, "to", true)?,
        tree: console_filter_tree(query)?,
    })
}

/// The console's filters that the filter language answers (event time, a metadata key,
/// confidence), parsed by it so the console and the API hold the same rules.
fn console_filter_tree(query: &MemoryListQuery) -> Result<engram_core::MemoryFilter, ConsoleError> {
    use serde_json::{Value, json};
    let non_empty = |value: &Option<String>| {
        value
            .as_deref()
            .map(str::trim)
            .filter(|text| !text.is_empty())
            .map(str::to_string)
    };
    let mut parts = Vec::new();
    let mut occurred = serde_json::Map::new();
    if let Some(from) = non_empty(&query.occurred_from) {
        occurred.insert("gte".into(), Value::String(from));
    }
    if let Some(to) = non_empty(&query.occurred_to) {
        occurred.insert("lte".into(), Value::String(to));
    }
    if !occurred.is_empty() {
        parts.push(("happened", json!({"occurred_at": occurred})));
    }
    if let Some(pair) = non_empty(&query.metadata) {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(invalid("metadata", "write the condition as key=value"));
        };
        parts.push((
            "metadata",
            json!({"metadata": { key.trim(): metadata_value(value) }}),
        ));
    }
    if let Some(minimum) = non_empty(&query.min_confidence) {
        let Ok(minimum) = minimum.parse::<f64>() else {
            return Err(invalid("min_confidence", "a number from 0 to 1"));
        };
        parts.push(("min_confidence", json!({"confidence": {"gte": minimum}})));
    }
    let mut tree = engram_core::MemoryFilter::everything();
    for (field, part) in parts {
        let parsed =
            engram_core::memory_filter::parse_memory_filter(&part, field).map_err(|errors| {
                let message = errors
                    .first()
                    .map_or_else(String::new, |error| error.message.clone());
                invalid(field, &message)
            })?;
        tree = tree.and(parsed);
    }
    Ok(tree)
}

/// The value of the console's `key=value` metadata syntax: a number or true/false compares
/// as one, anything else as text.
fn metadata_value(value: &str) -> serde_json::Value {
    match serde_json::from_str::<serde_json::Value>(value.trim()) {
        Ok(parsed @ (serde_json::Value::Number(_) | serde_json::Value::Bool(_))) => parsed,
        _ => serde_json::Value::String(value.trim().to_string()),
    }
}

fn parse_memory_id(text: &str) -> Result<engram_core::MemoryId, ConsoleError> {
    text.trim().parse().map_err(|_| ConsoleError::NotFound)
}

fn parse_subject(text: &str) -> Result<engram_core::ExternalId, ConsoleError> {
    engram_core::ExternalId::parse(text.trim()).map_err(|message| invalid("user", message))
}

/// The one conversion from the engine's failures into the console's terms.
fn engine_error(error: EngineError) -> ConsoleError {
    let code = error.code();
    match error {
        EngineError::Unauthenticated(_) => ConsoleError::Unauthorized,
        EngineError::WrongCredentials => ConsoleError::InvalidCredentials,
        EngineError::TooManyAttempts {
            retry_after_seconds,
        }
        | EngineError::Busy {
            retry_after_seconds,
        } => ConsoleError::TooManyAttempts {
            retry_after_seconds,
        },
        EngineError::NotFound(_) => ConsoleError::NotFound,
        EngineError::Locked(message) | EngineError::EmbeddingUnavailable(message) => {
            ConsoleError::refused(code, message)
        }
        EngineError::SubjectHeld { memory_ids } => ConsoleError::refused(
            code,
            format!(
                "{} memories of this end-user are under legal hold: {}",
                memory_ids.len(),
                memory_ids
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
        EngineError::Invalid(invalid) => ConsoleError::InvalidInput(invalid.to_string()),
        EngineError::VersionConflict { .. } => ConsoleError::refused(
            code,
            "the memory changed meanwhile: reload and try again".to_string(),
        ),
        // The role checks before the use case say `Forbidden` naming the role; what the use
        // case still refuses for this object (a key someone else made) is a 403 it explains.
        EngineError::Forbidden(message) => ConsoleError::Denied(message),
        EngineError::Conflict(message)
        | EngineError::InProgress(message)
        | EngineError::MemoryLimitReached(message) => ConsoleError::refused(code, message),
        EngineError::EmbeddingSpaceChanged => {
            ConsoleError::refused(code, EngineError::EmbeddingSpaceChanged.to_string())
        }
        EngineError::ScopeNotGrantable {
            missing,
            caller: PrincipalKind::ConsoleMember(role),
        } => ConsoleError::MissingPermission {
            role: role.as_str().to_string(),
            permission: missing.as_str().to_string(),
        },
        error @ EngineError::ScopeNotGrantable { .. } => {
            ConsoleError::refused(code, error.to_string())
        }
        error @ EngineError::LimitReached { .. } => ConsoleError::refused(
            code,
            format!("{error}; raise the limit on the Usage page or wait for it to reset"),
        ),
        other => internal(other),
    }
}

fn erasure_status(project_id: &str, task: engram_core::tasks::TaskRecord) -> ErasureStatus {
    let receipt = task.result.as_ref();
    ErasureStatus {
        project_id: project_id.to_string(),
        task_id: task.id.to_string(),
        organization_wide: task.kind == engram_core::TaskKind::OrganizationSubjectErasure,
        status: task.status.as_str().to_string(),
        done: task.progress_done,
        total: task.progress_total,
        verified: receipt.and_then(|receipt| receipt["verification"]["verified"].as_bool()),
        removed_memories: receipt.and_then(|receipt| receipt["removed"]["memories"].as_u64()),
        digest: receipt.and_then(|receipt| receipt["digest"].as_str().map(str::to_string)),
        receipt: receipt.map(|receipt| serde_json::to_string_pretty(receipt).unwrap_or_default()),
        error: task.error,
    }
}

fn invitation_row(invitation: &engram_core::tenants::ConsoleInvitationRecord) -> InvitationRow {
    InvitationRow {
        id: invitation.id.to_string(),
        email: invitation.email.clone(),
        role: invitation.role.as_str().to_string(),
        expires_at: readable_time(invitation.expires_at),
    }
}

/// The console's routes, over this gateway's engine and console session keys.
pub fn console_routes(state: &AppState, assets_dir: &Path) -> Router {
    let backend: Arc<dyn ConsoleBackend> = Arc::new(
        GatewayConsoleBackend::new(
            state
                .engine
                .console_access(state.credentials.console_sessions.clone()),
        )
        .with_engine(state.engine.clone()),
    );
    engram_console::console_router(backend, ConsoleAssets::new(assets_dir))
}

/// The start of the day after `start`'s; a day past the calendar's end is refused.
fn next_day(
    start: chrono::DateTime<chrono::Utc>,
    label: &str,
) -> Result<chrono::DateTime<chrono::Utc>, ConsoleError> {
    start
        .checked_add_signed(chrono::Duration::days(1))
        .filter(|next| chrono::Datelike::year(next) <= 9999)
        .ok_or_else(|| ConsoleError::InvalidInput(format!("{label}: the day is out of range")))
}

/// The actor id an audit query names: an id as given, else a member's e-mail, else the one
/// key with that label (several keys with one label must be told apart by id). Anything
/// else is taken as an id (an end-user's digest, a job's name).
fn actor_of(
    actor: &str,
    names: &std::collections::BTreeMap<String, String>,
) -> Result<String, ConsoleError> {
    let actor = actor.trim();
    if names.contains_key(actor) {
        return Ok(actor.to_string());
    }
    let wanted = actor.to_lowercase();
    if let Some((id, _)) = names
        .iter()
        .find(|(_, name)| !name.starts_with("key “") && name.to_lowercase() == wanted)
    {
        return Ok(id.clone());
    }
    let labelled: Vec<&String> = names
        .iter()
        .filter(|(_, name)| name.to_lowercase().starts_with(&format!("key “{wanted}”")))
        .map(|(id, _)| id)
        .collect();
    match labelled.as_slice() {
        [] => Ok(actor.to_string()),
        [id] => Ok((*id).clone()),
        several => Err(ConsoleError::InvalidInput(format!(
            "{} keys are labelled {actor:?}: give the key's id ({})",
            several.len(),
            several
                .iter()
                .map(|id| id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// The audit filter a console query asks for: the action checked, the actor given as an id
/// or by the name the page shows (a member's e-mail, a key's label), days as whole UTC days.
fn audit_filter(
    query: &AuditQuery,
    names: &std::collections::BTreeMap<String, String>,
) -> Result<AuditFilter, ConsoleError> {
    if let Some(action) = &query.action
        && AuditAction::parse(action).is_none()
    {
        return Err(ConsoleError::InvalidInput(format!(
            "unknown action {action:?}"
        )));
    }
    let actor_id = query
        .actor
        .as_deref()
        .map(|actor| actor_of(actor, names))
        .transpose()?;
    let day = |text: &Option<String>,
               label: &str|
     -> Result<Option<chrono::DateTime<chrono::Utc>>, ConsoleError> {
        text.as_deref()
            .map(|text| {
                chrono::NaiveDate::parse_from_str(text.trim(), "%Y-%m-%d")
                    .map(|date| date.and_time(chrono::NaiveTime::MIN).and_utc())
                    .map_err(|_| {
                        ConsoleError::InvalidInput(format!(
                            "{label}: {text:?} is not a day such as 2026-12-01"
                        ))
                    })
            })
            .transpose()
    };
    let since = day(&query.since, "from")?;
    // The last day is included: events before the next day's start.
    let until = day(&query.until, "to")?
        .map(|start| next_day(start, "to"))
        .transpose()?;
    if let (Some(since), Some(until)) = (since, until)
        && since >= until
    {
        return Err(ConsoleError::InvalidInput(
            "the first day must not be after the last".to_string(),
        ));
    }
    Ok(AuditFilter {
        action: query.action.clone(),
        actor_id,
        target_id: query
            .target
            .as_ref()
            .map(|target| target.trim().to_string()),
        since,
        until,
        ..Default::default()
    })
}

/// A time as a person reads it in a table: to the minute, with its zone.
pub(crate) fn readable_time(at: chrono::DateTime<chrono::Utc>) -> String {
    at.format("%Y-%m-%d %H:%M UTC").to_string()
}

#[cfg(test)]
mod tests {
    /// The console's pages state the engine's limits in their own (wasm) crate, which cannot
    /// depend on the engine: the two must agree.
    #[test]
    fn the_console_states_the_engines_limits() {
        assert_eq!(
            engram_console::model::BULK_DELETE_LIMIT,
            engram_engine::MAX_BULK_DELETE
        );
        assert_eq!(
            engram_console::model::INVITATION_LIFETIME_DAYS,
            engram_engine::INVITATION_LIFETIME_DAYS
        );
        assert_eq!(
            engram_console::model::MIN_PASSWORD_CHARS,
            engram_engine::console_credentials::MIN_PASSWORD_CHARS
        );
    }
}
