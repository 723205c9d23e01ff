//! Session state (run memory): `GET | PUT | DELETE /v1/sessions/{session_id}/state/{key}`
//! and `GET /v1/sessions/{session_id}/state`. Values are JSON with a version; `If-Match`
//! makes a write or delete conditional, `If-None-Match: *` makes a write create-only, so a
//! long task resumes from its last checkpoint and two writers never silently overwrite.
//! Each end-user of a session has a namespace of its own: an end-user token addresses its
//! user's, a project key the `user_id` it names (query, or the body of a write), and without
//! one the values of no end-user.

use crate::auth::{Authorized, MemoriesDelete, MemoriesRead, MemoriesWrite};
use crate::extract::{IfMatchVersion, JsonBody, QueryParams};
use crate::problem::{ApiError, ProblemDocument, ProblemKind};
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use engram_core::NotFoundKind;
use engram_core::session_state::{MAX_KEYS_PER_SESSION, SessionStateEntry, StateWriteRefused};
use engram_core::{ExternalId, FieldError};
use engram_engine::{MemoryEngine, PutSessionStateRequest, SessionStateAddress};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use utoipa::ToSchema;

/// Largest value, as JSON text.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/sessions/{session_id}/state", get(list_session_state))
        .route(
            "/v1/sessions/{session_id}/state/{key}",
            get(get_session_state)
                .put(put_session_state)
                .delete(delete_session_state),
        )
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SessionStateView {
    pub session_id: String,
    pub key: String,
    #[schema(schema_with = engram_core::openapi_schemas::any_json_value)]
    pub value: serde_json::Value,
    /// Raised by every write; send it back as `If-Match` to write only over this version.
    pub version: i64,
    pub user_id: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<SessionStateEntry> for SessionStateView {
    fn from(entry: SessionStateEntry) -> Self {
        Self {
            session_id: entry.session_id,
            key: entry.key,
            value: entry.value,
            version: entry.version,
            user_id: entry.user_id,
            created_at: entry.created_at,
            updated_at: entry.updated_at,
        }
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SessionStateListView {
    pub state: Vec<SessionStateView>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PutSessionStateBody {
    /// Any JSON value, at most 64 KiB as JSON text.
    #[schema(schema_with = engram_core::openapi_schemas::any_json_value)]
    pub value: serde_json::Value,
    /// The end-user the value belongs to (subject erasure removes it); an end-user token
    /// sets its own.
    #[schema(schema_with = engram_core::openapi_schemas::optional_external_id)]
    pub user_id: Option<String>,
    /// The agent writing it (a new value is kept as that agent's: credentials bound to other
    /// agents do not see it). A credential bound to one agent writes as it.
    #[schema(schema_with = engram_core::openapi_schemas::optional_external_id)]
    pub agent_id: Option<String>,
}

/// `?user_id=`: whose namespace of the session a project key addresses.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct SessionStateQuery {
    /// The end-user whose values to address (an end-user token addresses its own); without
    /// it, the values of no end-user.
    #[param(schema_with = engram_core::openapi_schemas::external_id)]
    pub user_id: Option<String>,
}

/// The namespace a request addresses: the token's end-user, or the one a project key names
/// (`field` says where, for errors), or none.
/// The `user_id` the request names, parsed (the use case decides what it may address).
/// An id the request names in `field` (`user_id`, `agent_id`), parsed.
fn requested_id(requested: Option<&str>, field: &str) -> Result<Option<ExternalId>, ApiError> {
    requested
        .map(|id| {
            ExternalId::parse(id)
                .map_err(|message| ApiError::invalid(vec![FieldError::new(field, message)]))
        })
        .transpose()
}

fn parse_path(
    session_id: &str,
    key: Option<&str>,
) -> Result<(ExternalId, Option<ExternalId>), ApiError> {
    let mut errors = Vec::new();
    let session_id = ExternalId::parse(session_id)
        .map_err(|message| errors.push(FieldError::new("path.session_id", message)))
        .ok();
    let key = key.and_then(|key| {
        ExternalId::parse(key)
            .map_err(|message| errors.push(FieldError::new("path.key", message)))
            .ok()
    });
    match session_id {
        Some(session_id) if errors.is_empty() => Ok((session_id, key)),
        _ => Err(ApiError::invalid(errors)),
    }
}

fn not_found() -> ApiError {
    ApiError::not_found(NotFoundKind::SessionState)
}

fn with_etag(mut response: Response, version: i64) -> Response {
    if let Ok(value) = HeaderValue::from_str(&format!("\"{version}\"")) {
        response.headers_mut().insert(header::ETAG, value);
    }
    response
}

fn refused(refusal: StateWriteRefused) -> ApiError {
    match refusal {
        StateWriteRefused::VersionMismatch {
            current: Some(version),
        } => ApiError::new(
            ProblemKind::VersionConflict,
            format!(
                "the value is at version {version}; read it again and retry with If-Match: \"{version}\""
            ),
        ),
        StateWriteRefused::VersionMismatch { current: None } => ApiError::new(
            ProblemKind::VersionConflict,
            "there is no value with this key; write without If-Match to create it",
        ),
        StateWriteRefused::TooManyKeys => ApiError::invalid(vec![FieldError::new(
            "path.key",
            format!("a session holds at most {MAX_KEYS_PER_SESSION} keys"),
        )]),
    }
}

/// One value of a session, with its version (also as `ETag`).
#[utoipa::path(get, path = "/v1/sessions/{session_id}/state/{key}", tag = "sessions",
    params(("session_id" = String, Path), ("key" = String, Path), SessionStateQuery),
    responses((status = 200, body = SessionStateView),
        (status = 403, description = "An end-user token names another user_id", body = ProblemDocument, content_type = "application/problem+json"),
        (status = 404, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["memories:read"])))]
pub async fn get_session_state(
    principal: Authorized<MemoriesRead>,
    State(engine): State<Arc<MemoryEngine>>,
    Path((session_id, key)): Path<(String, String)>,
    QueryParams(query): QueryParams<SessionStateQuery>,
) -> Result<Response, ApiError> {
    let (session_id, key) = parse_path(&session_id, Some(&key))?;
    let key = key.ok_or_else(not_found)?;
    let address = SessionStateAddress {
        session_id,
        key,
        user_id: requested_id(query.user_id.as_deref(), "user_id")?,
    };
    let entry = engine
        .get_session_state_for(principal.principal(), address)
        .await?;
    let version = entry.version;
    Ok(with_etag(
        Json(SessionStateView::from(entry)).into_response(),
        version,
    ))
}

/// Every value of a session, in key order.
#[utoipa::path(get, path = "/v1/sessions/{session_id}/state", tag = "sessions",
    params(("session_id" = String, Path), SessionStateQuery),
    responses((status = 200, body = SessionStateListView),
        (status = 403, description = "An end-user token names another user_id", body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["memories:read"])))]
pub async fn list_session_state(
    principal: Authorized<MemoriesRead>,
    State(engine): State<Arc<MemoryEngine>>,
    Path(session_id): Path<String>,
    QueryParams(query): QueryParams<SessionStateQuery>,
) -> Result<Json<SessionStateListView>, ApiError> {
    let (session_id, _) = parse_path(&session_id, None)?;
    let entries = engine
        .list_session_state_for(
            principal.principal(),
            session_id,
            requested_id(query.user_id.as_deref(), "user_id")?,
        )
        .await?;
    Ok(Json(SessionStateListView {
        state: entries.into_iter().map(SessionStateView::from).collect(),
    }))
}

/// Write a value: `201` when created, `200` when replaced. `If-Match: "3"` writes only over
/// version 3 and `If-None-Match: *` only when there is no value (`409 version-conflict`
/// otherwise, naming the current version).
#[utoipa::path(put, path = "/v1/sessions/{session_id}/state/{key}", tag = "sessions",
    params(("session_id" = String, Path), ("key" = String, Path), SessionStateQuery,
        ("If-Match" = Option<String>, Header, description = "Expected version"),
        ("If-None-Match" = Option<String>, Header, description = "`*`: create only")),
    request_body = PutSessionStateBody,
    responses((status = 200, body = SessionStateView), (status = 201, body = SessionStateView),
        (status = 403, description = "An end-user token names another user_id", body = ProblemDocument, content_type = "application/problem+json"),
        (status = 409, body = ProblemDocument, content_type = "application/problem+json"),
        (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["memories:write"])))]
pub async fn put_session_state(
    principal: Authorized<MemoriesWrite>,
    State(engine): State<Arc<MemoryEngine>>,
    Path((session_id, key)): Path<(String, String)>,
    QueryParams(query): QueryParams<SessionStateQuery>,
    IfMatchVersion(expected): IfMatchVersion,
    headers: HeaderMap,
    body: JsonBody<PutSessionStateBody>,
) -> Result<Response, ApiError> {
    let (session_id, key) = parse_path(&session_id, Some(&key))?;
    let key = key.ok_or_else(not_found)?;
    let create_only = match headers.get(header::IF_NONE_MATCH) {
        None => false,
        Some(value) if value.as_bytes() == b"*" => true,
        Some(_) => {
            return Err(ApiError::invalid(vec![FieldError::new(
                "header.If-None-Match",
                "only * (create only) is supported",
            )]));
        }
    };
    let body = body.value;
    // The end-user is addressed as GET and DELETE address it (`?user_id=`), or in the body
    // as before; both may be given only when they agree.
    let user_id = match (query.user_id, body.user_id) {
        (Some(in_query), Some(in_body)) if in_query != in_body => {
            return Err(ApiError::invalid(vec![FieldError::new(
                "user_id",
                format!(
                    "the query names user_id `{in_query}` and the body `{in_body}`; give one, or the same in both"
                ),
            )]));
        }
        (in_query, in_body) => in_query.or(in_body),
    };
    let request = PutSessionStateRequest {
        address: SessionStateAddress {
            session_id,
            key,
            user_id: requested_id(user_id.as_deref(), "user_id")?,
        },
        value: body.value,
        expected,
        create_only,
        agent_id: requested_id(body.agent_id.as_deref(), "agent_id")?,
    };
    let (entry, created) = engine
        .put_session_state_for(principal.principal(), request)
        .await?
        .map_err(refused)?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let version = entry.version;
    Ok(with_etag(
        (status, Json(SessionStateView::from(entry))).into_response(),
        version,
    ))
}

/// Remove a value (`If-Match` makes it conditional).
#[utoipa::path(delete, path = "/v1/sessions/{session_id}/state/{key}", tag = "sessions",
    params(("session_id" = String, Path), ("key" = String, Path), SessionStateQuery,
        ("If-Match" = Option<String>, Header, description = "Expected version")),
    responses((status = 204, description = "Removed"),
        (status = 403, description = "An end-user token names another user_id", body = ProblemDocument, content_type = "application/problem+json"),
        (status = 404, body = ProblemDocument, content_type = "application/problem+json"),
        (status = 409, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["memories:delete"])))]
pub async fn delete_session_state(
    principal: Authorized<MemoriesDelete>,
    State(engine): State<Arc<MemoryEngine>>,
    Path((session_id, key)): Path<(String, String)>,
    QueryParams(query): QueryParams<SessionStateQuery>,
    IfMatchVersion(expected): IfMatchVersion,
) -> Result<StatusCode, ApiError> {
    let (session_id, key) = parse_path(&session_id, Some(&key))?;
    let key = key.ok_or_else(not_found)?;
    let address = SessionStateAddress {
        session_id,
        key,
        user_id: requested_id(query.user_id.as_deref(), "user_id")?,
    };
    match engine
        .delete_session_state_for(principal.principal(), address, expected)
        .await?
    {
        Ok(()) => Ok(StatusCode::NO_CONTENT),
        Err(refusal) => Err(refused(refusal)),
    }
}
