//! Conversation ingest: `POST /v1/sessions/{session_id}/messages` stores a batch of
//! messages and (unless asked not to) derives memories from them in a background task it
//! waits for; `GET` pages through the session's history in order.

use crate::auth::{Authorized, MemoriesRead, MemoriesWrite};
use crate::extract::{JsonBody, QueryParams};
use crate::problem::{ApiError, ProblemDocument};
use crate::state::AppState;
use crate::views::TaskView;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use engram_core::conversation::MessageRole;
use engram_core::conversation::{NewMessage, SessionMessage};
use engram_core::limits::DEFAULT_LIST_LIMIT;
use engram_core::{ExternalId, FieldError};
use engram_engine::{AddMessagesRequest, ListMessagesRequest, MemoryEngine};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use utoipa::{IntoParams, ToSchema};

pub fn router() -> Router<AppState> {
    Router::new().route(
        "/v1/sessions/{session_id}/messages",
        post(add_messages).get(list_messages),
    )
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageBody {
    /// `user | assistant | system | tool`
    #[schema(schema_with = engram_core::openapi_schemas::message_role)]
    pub role: String,
    /// At most 32 KiB of UTF-8.
    #[schema(schema_with = engram_core::openapi_schemas::memory_content)]
    pub content: String,
    /// Who spoke (a person's or a tool's name), 1–255 characters.
    #[schema(schema_with = engram_core::openapi_schemas::optional_external_id)]
    pub name: Option<String>,
    /// When it was said (RFC 3339); default: when it arrived.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub timestamp: Option<String>,
    /// Without an LLM, the memory this message becomes gets this key: a later message with
    /// the same key (same user and agent) supersedes it.
    #[schema(schema_with = engram_core::openapi_schemas::optional_external_id)]
    pub key: Option<String>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddMessagesBody {
    /// 1–100 messages, oldest first.
    #[schema(min_items = 1, max_items = 100)]
    #[serde(deserialize_with = "engram_core::json_objects::object_list")]
    pub messages: Vec<MessageBody>,
    /// The end-user the conversation is with (subject erasure removes the messages); an
    /// end-user token sets its own.
    #[schema(schema_with = engram_core::openapi_schemas::optional_external_id)]
    pub user_id: Option<String>,
    #[schema(schema_with = engram_core::openapi_schemas::optional_external_id)]
    pub agent_id: Option<String>,
    /// Derive memories from the messages (default: the project's `derive_memories` setting,
    /// itself true unless changed): with an LLM configured, extracted and reconciled facts;
    /// without one, each non-system message verbatim as an episodic memory, duplicates
    /// skipped.
    pub derive_memories: Option<bool>,
    /// Wait for the derivation (default true, at most 20 s); `false` answers 202 at once.
    pub wait: Option<bool>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MessageView {
    pub id: String,
    pub session_id: String,
    pub user_id: Option<String>,
    pub agent_id: Option<String>,
    pub role: String,
    pub name: Option<String>,
    pub content: String,
    pub key: Option<String>,
    pub timestamp: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
}

impl From<SessionMessage> for MessageView {
    fn from(message: SessionMessage) -> Self {
        Self {
            id: message.id.to_string(),
            session_id: message.session_id,
            user_id: message.user_id,
            agent_id: message.agent_id,
            role: message.role,
            name: message.name,
            content: message.content,
            key: message.memory_key,
            timestamp: message.sent_at,
            created_at: message.created_at,
        }
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AddedMessagesView {
    pub messages: Vec<MessageView>,
    /// The derivation task (absent with `derive_memories: false`). When it has finished, its
    /// `result` lists each decision: `{action: ADD|UPDATE|SUPERSEDE|DELETE|NOOP, memory_id,
    /// replaces, content, reason}`, with the method (`llm` or `verbatim`) and LLM tokens.
    pub derivation: Option<TaskView>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MessagePageView {
    pub messages: Vec<MessageView>,
    /// Pass as `after` for the next page; absent on the last page.
    pub next_cursor: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListMessagesQuery {
    /// Whose messages of the session: an end-user token reads its own; a project key the
    /// end-user it names here, or without it the messages of no end-user.
    #[param(schema_with = engram_core::openapi_schemas::external_id)]
    pub user_id: Option<String>,
    /// The page starts after this message id.
    #[param(format = Uuid)]
    pub after: Option<String>,
    /// 1–500, default 50.
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u64>,
}

fn optional_id(
    value: Option<&str>,
    field: &str,
    errors: &mut Vec<FieldError>,
) -> Option<ExternalId> {
    value.and_then(|text| {
        ExternalId::parse(text)
            .map_err(|message| errors.push(FieldError::new(field, message)))
            .ok()
    })
}

fn parse_messages(
    bodies: Vec<MessageBody>,
    now: DateTime<Utc>,
    errors: &mut Vec<FieldError>,
) -> Vec<NewMessage> {
    // The batch's limits are the use case's; checked here too only so one answer names
    // every bad field.
    let contents: Vec<&str> = bodies.iter().map(|body| body.content.as_str()).collect();
    let limit_errors = engram_core::conversation::message_batch_errors(&contents);
    if limit_errors.iter().any(|error| error.field == "messages") {
        errors.extend(limit_errors);
        return Vec::new();
    }
    errors.extend(limit_errors);
    let mut messages = Vec::with_capacity(bodies.len());
    for (index, body) in bodies.into_iter().enumerate() {
        let field = |name: &str| format!("messages[{index}].{name}");
        let role = body
            .role
            .parse::<MessageRole>()
            .map_err(|message| errors.push(FieldError::new(field("role"), message)))
            .ok();
        let name = optional_id(body.name.as_deref(), &field("name"), errors);
        let memory_key = optional_id(body.key.as_deref(), &field("key"), errors);
        let sent_at = match body.timestamp.as_deref() {
            None => Some(now),
            Some(text) => DateTime::parse_from_rfc3339(text.trim())
                .map(|at| at.with_timezone(&Utc))
                .map_err(|_| {
                    errors.push(FieldError::new(
                        field("timestamp"),
                        "expected an RFC 3339 time such as 2026-11-30T09:15:00Z",
                    ))
                })
                .ok(),
        };
        if let (Some(role), Some(sent_at)) = (role, sent_at) {
            messages.push(NewMessage {
                role,
                name: name.map(ExternalId::into_string),
                content: body.content,
                memory_key,
                sent_at,
            });
        }
    }
    messages
}

/// Store messages of a session; derive memories from them. `201` with the finished
/// derivation (or none), `202` with its task when it is still running (poll
/// `GET /v1/tasks/{id}`). A failed derivation (the LLM down) keeps the messages: the task
/// says why.
#[utoipa::path(post, path = "/v1/sessions/{session_id}/messages", tag = "sessions",
    params(("session_id" = String, Path)),
    request_body = AddMessagesBody,
    responses((status = 201, body = AddedMessagesView), (status = 202, body = AddedMessagesView),
        (status = 403, description = "The API key lacks the `memories:write` scope", body = ProblemDocument, content_type = "application/problem+json"),
        (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["memories:write"])))]
pub async fn add_messages(
    principal: Authorized<MemoriesWrite>,
    State(engine): State<Arc<MemoryEngine>>,
    Path(session_id): Path<String>,
    body: JsonBody<AddMessagesBody>,
) -> Result<Response, ApiError> {
    let body = body.value;
    let mut errors = Vec::new();
    let session_id = ExternalId::parse(&session_id)
        .map_err(|message| errors.push(FieldError::new("path.session_id", message)))
        .ok();
    let user_id = optional_id(body.user_id.as_deref(), "user_id", &mut errors);
    let agent_id = optional_id(body.agent_id.as_deref(), "agent_id", &mut errors);
    let messages = parse_messages(body.messages, Utc::now(), &mut errors);
    let (Some(session_id), true) = (session_id, errors.is_empty()) else {
        return Err(ApiError::invalid(errors));
    };
    let request = AddMessagesRequest {
        session_id,
        user_id,
        agent_id,
        messages,
        derive_memories: body.derive_memories,
        wait: body.wait.unwrap_or(true),
    };
    let (stored, task) = engine
        .add_messages_for(principal.principal(), request)
        .await?;
    let finished = task.as_ref().is_none_or(|task| task.status.is_finished());
    let status = if finished {
        StatusCode::CREATED
    } else {
        StatusCode::ACCEPTED
    };
    let location = task.as_ref().map(|task| format!("/v1/tasks/{}", task.id));
    let mut response = (
        status,
        Json(AddedMessagesView {
            messages: stored.into_iter().map(MessageView::from).collect(),
            derivation: task.map(TaskView::from),
        }),
    )
        .into_response();
    if let Some(location) = location
        && let Ok(value) = HeaderValue::from_str(&location)
    {
        response.headers_mut().insert(header::LOCATION, value);
    }
    Ok(response)
}

/// A session's messages, oldest first, one page at a time.
#[utoipa::path(get, path = "/v1/sessions/{session_id}/messages", tag = "sessions",
    params(("session_id" = String, Path), ListMessagesQuery),
    responses((status = 200, body = MessagePageView),
        (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["memories:read"])))]
pub async fn list_messages(
    principal: Authorized<MemoriesRead>,
    State(engine): State<Arc<MemoryEngine>>,
    Path(session_id): Path<String>,
    QueryParams(query): QueryParams<ListMessagesQuery>,
) -> Result<Json<MessagePageView>, ApiError> {
    let mut errors = Vec::new();
    let session_id = ExternalId::parse(&session_id)
        .map_err(|message| errors.push(FieldError::new("path.session_id", message)))
        .ok();
    let after = query.after.as_deref().and_then(|text| {
        engram_core::cursors::parse_message_cursor(text, "after")
            .map_err(|error| errors.push(error))
            .ok()
    });
    let limit = query.limit.unwrap_or(DEFAULT_LIST_LIMIT);
    errors.extend(engram_core::conversation::message_page_errors(limit));
    let requested_user = optional_id(query.user_id.as_deref(), "user_id", &mut errors);
    let (Some(session_id), true) = (session_id, errors.is_empty()) else {
        return Err(ApiError::invalid(errors));
    };
    let request = ListMessagesRequest {
        session_id,
        user_id: requested_user,
        after,
        limit,
    };
    let (page, cursor) = engine
        .list_messages_for(principal.principal(), request)
        .await?;
    Ok(Json(MessagePageView {
        messages: page.into_iter().map(MessageView::from).collect(),
        next_cursor: cursor.map(|id| id.to_string()),
    }))
}
