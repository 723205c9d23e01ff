//! `/v1/memories…`: add, get, list, edit, delete, history and search, each scoped to the
//! project of the presented API key.

use crate::auth::{Authorized, MemoriesDelete, MemoriesRead, MemoriesVerify, MemoriesWrite};
use crate::extract::{
    IdempotencyKey, IfMatchVersion, JsonBody, QueryParams, RunLinkHeader, request_fingerprint,
};
use crate::problem::{ApiError, ProblemDocument};
use crate::state::AppState;
use crate::views::RecallBudgetView;
use crate::views::{
    AddMemoriesBody, EditMemoryBody, HistoryView, MemoriesEnvelope, MemoryListView, MemoryView,
    RankingSignalsView, SearchBody, SearchContextView, SearchResponseView, SearchResultView,
    SearchTimingsView,
};
use crate::views::{
    BulkDeleteBody, BulkDeleteView, EntitiesView, EntityView, QueriedMemoriesView,
    QueryMemoriesBody,
};
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use engram_core::NotFoundKind;
use engram_core::limits::DEFAULT_LIST_LIMIT;
use engram_core::memory::MemoryListFilter;
use engram_core::{ExternalId, FieldError, MemoryId, MemoryKind, MemoryState};
use engram_engine::{
    AddMemoriesRequest, AddOutcome, ClientIdempotencyKey, DeleteMemoryRequest, EditMemoryRequest,
    ListMemoriesRequest, MemoryEngine, SearchMemoriesRequest,
};
use serde::Deserialize;
use std::sync::Arc;
use utoipa::IntoParams;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/memories", post(add_memories).get(list_memories))
        .route("/v1/memories/search", post(search_memories))
        .route("/v1/memories/query", post(query_memories))
        .route("/v1/memories/bulk-delete", post(bulk_delete_memories))
        .route("/v1/entities", get(list_entities))
        .route(
            "/v1/memories/{memory_id}",
            get(get_memory).patch(edit_memory).delete(delete_memory),
        )
        .route("/v1/memories/{memory_id}/history", get(memory_history))
        .route("/v1/memories/{memory_id}/verify", post(verify_memory))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VerifyMemoryBody {
    /// `true` (default) verifies; `false` withdraws a verification.
    pub verified: Option<bool>,
    /// Why, in the verifier's words (1–1,024 characters, not blank): kept in the memory's
    /// history.
    #[schema(min_length = 1, max_length = 1024, pattern = "\\S")]
    pub reason: String,
    /// Only while the memory is at this version (the one the reviewer read): `409` otherwise.
    #[serde(
        default,
        deserialize_with = "engram_core::json_integers::optional_whole"
    )]
    #[schema(minimum = 1)]
    pub expected_version: Option<i64>,
}

/// Verify a memory — a reviewer's or a supervisor's word that an agent's conclusion holds —
/// or withdraw it; who and why are kept in its history. Searches can then ask for verified
/// memories only (`verified_only`), and a project can take other agents' memories only once
/// verified (`verified_only_from_other_agents`).
#[utoipa::path(post, path = "/v1/memories/{memory_id}/verify", tag = "memories", request_body = VerifyMemoryBody,
    params(("memory_id" = String, Path)),
    responses((status = 200, body = MemoryView),
        (status = 403, description = "The API key lacks the `memories:verify` scope, or the memory is another agent's", body = ProblemDocument, content_type = "application/problem+json"),
        (status = 404, body = ProblemDocument, content_type = "application/problem+json"),
        (status = 409, description = "The memory changed since `expected_version`", body = ProblemDocument, content_type = "application/problem+json"),
        (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["memories:verify", "memories:read"])))]
pub async fn verify_memory(
    principal: Authorized<MemoriesVerify>,
    State(engine): State<Arc<MemoryEngine>>,
    Path(memory_id): Path<String>,
    body: JsonBody<VerifyMemoryBody>,
) -> Result<Json<MemoryView>, ApiError> {
    let memory_id = parse_memory_id(&memory_id)?;
    let body = body.value;
    let memory = engine
        .verify_memory_for(
            principal.principal(),
            engram_engine::VerifyMemoryRequest {
                memory_id,
                verified: body.verified.unwrap_or(true),
                reason: body.reason,
                expected_version: body.expected_version,
            },
        )
        .await?;
    Ok(Json(MemoryView::from(&memory)))
}

/// An id that is not a UUID cannot exist, so it is simply not found.
pub(crate) fn parse_memory_id(text: &str) -> Result<MemoryId, ApiError> {
    text.parse()
        .map_err(|_| ApiError::not_found(NotFoundKind::Memory))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AddMemoriesQuery {
    /// Wait until the memories are searchable (default true). `false` answers 202 at once.
    pub wait: Option<bool>,
}

fn json_response(status: StatusCode, body: String) -> Response {
    let mut response = (status, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// Add 1–100 memories.
#[utoipa::path(post, path = "/v1/memories", tag = "memories",
    params(AddMemoriesQuery, ("Idempotency-Key" = Option<String>, Header, description = "Makes a retried write safe"),
        ("Engram-Run-Id" = Option<String>, Header, description = "The agent run this call belongs to (as the body's `run_id`)")),
    request_body = AddMemoriesBody,
    responses((status = 403, description = "The API key lacks the `memories:write` scope", body = ProblemDocument, content_type = "application/problem+json"), 
        (status = 201, description = "Stored and searchable", body = MemoriesEnvelope),
        (status = 202, description = "Stored; the index will make them searchable shortly", body = MemoriesEnvelope),
        (status = 400, body = ProblemDocument, content_type = "application/problem+json"),
        (status = 401, body = ProblemDocument, content_type = "application/problem+json"),
        (status = 404, description = "The named run does not exist", body = ProblemDocument, content_type = "application/problem+json"),
        (status = 409, description = "`idempotent-result-erased`: a retry whose first answer named a memory deleted since; nothing written. `conflict`: the named run is ended or expired", body = ProblemDocument, content_type = "application/problem+json"),
        (status = 413, body = ProblemDocument, content_type = "application/problem+json"),
        (status = 422, body = ProblemDocument, content_type = "application/problem+json"),
        (status = 503, body = ProblemDocument, content_type = "application/problem+json"),
    ),
    security(("api_key" = ["memories:write"])))]
pub async fn add_memories(
    principal: Authorized<MemoriesWrite>,
    State(engine): State<Arc<MemoryEngine>>,
    IdempotencyKey(idempotency_key): IdempotencyKey,
    run_link: RunLinkHeader,
    QueryParams(query): QueryParams<AddMemoriesQuery>,
    body: JsonBody<AddMemoriesBody>,
) -> Result<Response, ApiError> {
    let parsed = body.value.into_new_memories().map_err(ApiError::invalid)?;
    let request = AddMemoriesRequest {
        run_id: run_link.with_body(parsed.run_id)?,
        memories: parsed.memories,
        client_vectors: parsed.client_vectors,
        idempotency: idempotency_key.map(|key| ClientIdempotencyKey {
            key,
            request_fingerprint: request_fingerprint("POST /v1/memories", "", &body.raw),
        }),
        wait_for_index: query.wait.unwrap_or(true),
    };
    let render = |memories: &[engram_core::Memory]| {
        let envelope = MemoriesEnvelope {
            memories: memories.iter().map(MemoryView::from).collect(),
        };
        (201, serde_json::to_string(&envelope).unwrap_or_default())
    };
    let outcome = engine
        .add_memories_for(principal.principal(), request, render)
        .await?;
    Ok(match outcome {
        AddOutcome::Replayed { status, body } => json_response(
            StatusCode::from_u16(status).unwrap_or(StatusCode::CREATED),
            body,
        ),
        // The use case answers this with its error; kept for exhaustiveness.
        AddOutcome::AnswerErased => {
            return Err(engram_engine::EngineError::IdempotentResultErased.into());
        }
        AddOutcome::Stored {
            memories, indexed, ..
        } => {
            let status = if indexed {
                StatusCode::CREATED
            } else {
                StatusCode::ACCEPTED
            };
            let envelope = MemoriesEnvelope {
                memories: memories.iter().map(MemoryView::from).collect(),
            };
            (status, Json(envelope)).into_response()
        }
    })
}

/// Get one memory.
#[utoipa::path(get, path = "/v1/memories/{memory_id}", tag = "memories",
    params(("memory_id" = String, Path, description = "Memory id (UUIDv7)")),
    responses((status = 403, description = "The API key lacks the `memories:read` scope", body = ProblemDocument, content_type = "application/problem+json"), (status = 200, body = MemoryView), (status = 404, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["memories:read"])))]
pub async fn get_memory(
    principal: Authorized<MemoriesRead>,
    State(engine): State<Arc<MemoryEngine>>,
    Path(memory_id): Path<String>,
) -> Result<Json<MemoryView>, ApiError> {
    let memory_id = parse_memory_id(&memory_id)?;
    let memory = engine
        .get_memory_for(principal.principal(), memory_id)
        .await?;
    Ok(Json(MemoryView::from(&memory)))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListMemoriesQuery {
    #[param(schema_with = engram_core::openapi_schemas::external_id)]
    pub user_id: Option<String>,
    #[param(schema_with = engram_core::openapi_schemas::external_id)]
    pub agent_id: Option<String>,
    #[param(schema_with = engram_core::openapi_schemas::external_id)]
    pub session_id: Option<String>,
    #[param(schema_with = engram_core::openapi_schemas::memory_kind)]
    pub kind: Option<String>,
    /// `active` (default) or `superseded`.
    #[param(pattern = "^(active|superseded)$")]
    pub state: Option<String>,
    /// 1–500, default 50.
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<i64>,
    #[param(format = Uuid)]
    pub cursor: Option<String>,
}

/// Where a door names the list's parameters: `query.user_id` on the HTTP API, `user_id` in
/// an MCP tool's arguments.
pub struct ListFieldNames {
    pub user_id: &'static str,
    pub agent_id: &'static str,
    pub session_id: &'static str,
    pub kind: &'static str,
    pub state: &'static str,
    pub limit: &'static str,
    pub cursor: &'static str,
}

const QUERY_FIELDS: ListFieldNames = ListFieldNames {
    user_id: "query.user_id",
    agent_id: "query.agent_id",
    session_id: "query.session_id",
    kind: "query.kind",
    state: "query.state",
    limit: "query.limit",
    cursor: "query.cursor",
};

impl ListMemoriesQuery {
    /// The list use case's request; every problem named with the door's field names.
    pub fn into_request(
        self,
        fields: ListFieldNames,
    ) -> Result<ListMemoriesRequest, Vec<FieldError>> {
        let query = self;
        let mut errors = Vec::new();
        let subject = engram_core::SubjectFilter {
            user_id: ExternalId::parse_field(query.user_id.as_deref(), fields.user_id, &mut errors),
            agent_id: ExternalId::parse_field(
                query.agent_id.as_deref(),
                fields.agent_id,
                &mut errors,
            ),
            session_id: ExternalId::parse_field(
                query.session_id.as_deref(),
                fields.session_id,
                &mut errors,
            ),
        };
        let kind = match query.kind.as_deref() {
            None => None,
            Some(text) => text
                .parse::<MemoryKind>()
                .map_err(|message| errors.push(FieldError::new(fields.kind, message)))
                .ok(),
        };
        let state = match query.state.as_deref() {
            None | Some("active") => Some(MemoryState::Active),
            Some("superseded") => Some(MemoryState::Superseded),
            Some(other) => {
                errors.push(FieldError::new(
                    fields.state,
                    format!("unknown value {other:?}; expected one of: active, superseded"),
                ));
                None
            }
        };
        let limit = query.limit.unwrap_or(DEFAULT_LIST_LIMIT as i64);
        // The use case's rule, named with this door's field names.
        errors.extend(engram_core::limits::list_limit_errors(fields.limit, limit));
        let after = query.cursor.as_deref().and_then(|text| {
            engram_core::cursors::parse_memory_cursor(text, fields.cursor)
                .map_err(|error| errors.push(error))
                .ok()
        });
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(ListMemoriesRequest {
            filter: MemoryListFilter {
                subject,
                kind,
                state,
                text_contains: None,
                after,
                limit: limit as u64,
                ..Default::default()
            },
            user_id_field: fields.user_id,
        })
    }
}

/// List memories, newest first, with cursor pagination.
#[utoipa::path(get, path = "/v1/memories", tag = "memories", params(ListMemoriesQuery),
    responses((status = 403, description = "The API key lacks the `memories:read` scope", body = ProblemDocument, content_type = "application/problem+json"), (status = 200, body = MemoryListView), (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["memories:read"])))]
pub async fn list_memories(
    principal: Authorized<MemoriesRead>,
    State(engine): State<Arc<MemoryEngine>>,
    QueryParams(query): QueryParams<ListMemoriesQuery>,
) -> Result<Json<MemoryListView>, ApiError> {
    let request = query
        .into_request(QUERY_FIELDS)
        .map_err(ApiError::invalid)?;
    let page = engine
        .list_memories_for(principal.principal(), request)
        .await?;
    Ok(Json(MemoryListView {
        memories: page.memories.iter().map(MemoryView::from).collect(),
        next_cursor: page.next_cursor.map(|cursor| cursor.to_string()),
    }))
}

/// The `filters` of a body as the filter language's tree (absent or null: every memory).
fn filter_of(filters: Option<&serde_json::Value>) -> Result<engram_core::MemoryFilter, ApiError> {
    match filters {
        None => Ok(engram_core::MemoryFilter::everything()),
        Some(value) => engram_core::memory_filter::parse_memory_filter(value, "filters")
            .map_err(ApiError::invalid),
    }
}

/// List the memories a filter tree matches, newest first, with cursor pagination.
#[utoipa::path(post, path = "/v1/memories/query", tag = "memories", request_body = QueryMemoriesBody,
    responses((status = 403, description = "The API key lacks the `memories:read` scope", body = ProblemDocument, content_type = "application/problem+json"), (status = 200, body = QueriedMemoriesView), (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["memories:read"])))]
pub async fn query_memories(
    principal: Authorized<MemoriesRead>,
    State(engine): State<Arc<MemoryEngine>>,
    body: JsonBody<QueryMemoriesBody>,
) -> Result<Json<QueriedMemoriesView>, ApiError> {
    let body = body.value;
    let filter = filter_of(body.filters.as_ref())?;
    let after = body
        .cursor
        .as_deref()
        .map(|text| engram_core::cursors::parse_memory_cursor(text, "cursor"))
        .transpose()
        .map_err(|error| ApiError::invalid(vec![error]))?;
    // The limit's range is the use case's rule.
    let limit = body.limit.unwrap_or(DEFAULT_LIST_LIMIT as i64);
    let request = engram_engine::QueryMemoriesRequest {
        filter,
        after,
        limit: u64::try_from(limit).unwrap_or(0),
        include_total: body.include_total.unwrap_or(false),
    };
    let queried = engine
        .query_memories_for(principal.principal(), request)
        .await?;
    Ok(Json(QueriedMemoriesView {
        memories: queried.page.memories.iter().map(MemoryView::from).collect(),
        next_cursor: queried.page.next_cursor.map(|cursor| cursor.to_string()),
        total: queried.total,
    }))
}

/// Delete every memory a filter tree matches (at most 10,000 per call; `remaining` says how
/// many still match). Immutable and held memories are skipped and counted. One audit event
/// per batch; the index follows as for single deletes.
#[utoipa::path(post, path = "/v1/memories/bulk-delete", tag = "memories", request_body = BulkDeleteBody,
    responses((status = 403, description = "The API key lacks the `memories:delete` scope", body = ProblemDocument, content_type = "application/problem+json"), (status = 200, body = BulkDeleteView), (status = 422, description = "A bad filter, or an empty one without `all: true`", body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["memories:delete"])))]
pub async fn bulk_delete_memories(
    principal: Authorized<MemoriesDelete>,
    State(engine): State<Arc<MemoryEngine>>,
    body: JsonBody<BulkDeleteBody>,
) -> Result<Json<BulkDeleteView>, ApiError> {
    let body = body.value;
    let dry_run = body.dry_run.unwrap_or(false);
    let request = engram_engine::DeleteMatchingRequest {
        filter: filter_of(body.filters.as_ref())?,
        all: body.all.unwrap_or(false),
        reason: body.reason,
        dry_run,
    };
    let outcome = engine
        .delete_memories_matching_for(principal.principal(), request)
        .await?;
    Ok(Json(BulkDeleteView {
        matched: outcome.matched,
        deleted: outcome.deleted,
        skipped_locked: outcome.skipped_locked,
        remaining: outcome.remaining,
        dry_run,
    }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListEntitiesQuery {
    /// `user` (default), `agent`, `session` or `app` (the values of `metadata.app_id`).
    #[serde(rename = "type")]
    #[param(rename = "type", value_type = Option<String>, pattern = "^(user|agent|session|app)$")]
    pub entity_type: Option<String>,
    /// 1–500, default 100.
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<i64>,
    /// The previous page's `next_cursor`.
    pub cursor: Option<String>,
}

const ENTITY_TYPES: [(&str, engram_core::memory_filter::EntityField); 4] = [
    ("user", engram_core::memory_filter::EntityField::UserId),
    ("agent", engram_core::memory_filter::EntityField::AgentId),
    (
        "session",
        engram_core::memory_filter::EntityField::SessionId,
    ),
    ("app", engram_core::memory_filter::EntityField::AppId),
];

/// Which end-users, agents, sessions or applications the project's active memories name,
/// each with its count, in id order. An end-user token sees only itself.
#[utoipa::path(get, path = "/v1/entities", tag = "memories", params(ListEntitiesQuery),
    responses((status = 403, description = "The API key lacks the `memories:read` scope", body = ProblemDocument, content_type = "application/problem+json"), (status = 200, body = EntitiesView), (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["memories:read"])))]
pub async fn list_entities(
    principal: Authorized<MemoriesRead>,
    State(engine): State<Arc<MemoryEngine>>,
    QueryParams(query): QueryParams<ListEntitiesQuery>,
) -> Result<Json<EntitiesView>, ApiError> {
    let wanted = query.entity_type.as_deref().unwrap_or("user");
    let Some(field) = ENTITY_TYPES
        .iter()
        .find(|(name, _)| *name == wanted)
        .map(|(_, field)| *field)
    else {
        return Err(ApiError::invalid(vec![FieldError::new(
            "query.type",
            format!("unknown value {wanted:?}; expected one of: user, agent, session, app"),
        )]));
    };
    // The page size's range is the use case's rule.
    let limit = u64::try_from(query.limit.unwrap_or(100)).unwrap_or(0);
    let request = engram_engine::ListEntitiesRequest {
        field,
        after: query.cursor,
        limit,
    };
    let page = engine
        .list_entities_for(principal.principal(), request)
        .await?;
    Ok(Json(EntitiesView {
        entities: page
            .entities
            .into_iter()
            .map(|entity| EntityView {
                entity_type: wanted.to_string(),
                id: entity.id,
                memories: entity.memories,
            })
            .collect(),
        next_cursor: page.next_cursor,
    }))
}

/// Edit a memory. `If-Match: <version>` makes the edit conditional.
#[utoipa::path(patch, path = "/v1/memories/{memory_id}", tag = "memories",
    params(("memory_id" = String, Path), ("If-Match" = Option<String>, Header, description = "Expected version, e.g. 3 or \"3\"")),
    request_body = EditMemoryBody,
    responses((status = 403, description = "The API key lacks the `memories:write` scope", body = ProblemDocument, content_type = "application/problem+json"), (status = 200, body = MemoryView), (status = 404, body = ProblemDocument, content_type = "application/problem+json"),
        (status = 409, body = ProblemDocument, content_type = "application/problem+json"),
        (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["memories:write"])))]
pub async fn edit_memory(
    principal: Authorized<MemoriesWrite>,
    State(engine): State<Arc<MemoryEngine>>,
    Path(memory_id): Path<String>,
    IfMatchVersion(expected_version): IfMatchVersion,
    body: JsonBody<EditMemoryBody>,
) -> Result<Json<MemoryView>, ApiError> {
    let memory_id = parse_memory_id(&memory_id)?;
    let (edit, client_vector) = body.value.into_edit().map_err(ApiError::invalid)?;
    let request = EditMemoryRequest {
        memory_id,
        edit,
        client_vector,
        expected_version,
    };
    let edited = engine
        .edit_memory_for(principal.principal(), request)
        .await?;
    Ok(Json(MemoryView::from(&edited.memory)))
}

/// Delete a memory and all its content, history included.
#[utoipa::path(delete, path = "/v1/memories/{memory_id}", tag = "memories", params(("memory_id" = String, Path)),
    responses((status = 403, description = "The API key lacks the `memories:delete` scope", body = ProblemDocument, content_type = "application/problem+json"), (status = 204, description = "Deleted"), (status = 404, body = ProblemDocument, content_type = "application/problem+json"),
        (status = 409, description = "`memory-locked`: the memory is immutable or under legal hold, and stays active", body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["memories:delete"])))]
pub async fn delete_memory(
    principal: Authorized<MemoriesDelete>,
    State(engine): State<Arc<MemoryEngine>>,
    Path(memory_id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let memory_id = parse_memory_id(&memory_id)?;
    let request = DeleteMemoryRequest {
        memory_id,
        reason: None,
    };
    engine
        .delete_memory_for(principal.principal(), request)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The change history of a memory, oldest first.
#[utoipa::path(get, path = "/v1/memories/{memory_id}/history", tag = "memories", params(("memory_id" = String, Path)),
    responses((status = 403, description = "The API key lacks the `memories:read` scope", body = ProblemDocument, content_type = "application/problem+json"), (status = 200, body = HistoryView), (status = 404, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["memories:read"])))]
pub async fn memory_history(
    principal: Authorized<MemoriesRead>,
    State(engine): State<Arc<MemoryEngine>>,
    Path(memory_id): Path<String>,
) -> Result<Json<HistoryView>, ApiError> {
    let memory_id = parse_memory_id(&memory_id)?;
    let history = engine
        .memory_history_for(principal.principal(), memory_id)
        .await?;
    Ok(Json(HistoryView {
        history: history.into_iter().map(Into::into).collect(),
    }))
}

/// Find the memories that best match a query.
#[utoipa::path(post, path = "/v1/memories/search", tag = "memories", request_body = SearchBody,
    params(("Engram-Run-Id" = Option<String>, Header, description = "The agent run this call belongs to (as the body's `run_id`)")),
    responses((status = 404, description = "The named run does not exist", body = ProblemDocument, content_type = "application/problem+json"), (status = 409, description = "The named run is ended or expired", body = ProblemDocument, content_type = "application/problem+json"), (status = 403, description = "The API key lacks the `memories:read` scope", body = ProblemDocument, content_type = "application/problem+json"), (status = 200, body = SearchResponseView), (status = 422, body = ProblemDocument, content_type = "application/problem+json"),
        (status = 503, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["memories:read"])))]
pub async fn search_memories(
    principal: Authorized<MemoriesRead>,
    State(engine): State<Arc<MemoryEngine>>,
    headers: axum::http::HeaderMap,
    run_link: RunLinkHeader,
    body: JsonBody<SearchBody>,
) -> Result<Json<SearchResponseView>, ApiError> {
    let parsed = body.value.into_request().map_err(ApiError::invalid)?;
    let explain = parsed.explain;
    let include_always = parsed.search.request.include_always;
    let run_id = run_link.with_body(parsed.search.run_id)?;
    let request = SearchMemoriesRequest {
        trace_id: trace_id_of(&headers),
        run_id,
        ..parsed.search
    };
    let answer = engine
        .search_memories_for(principal.principal(), request)
        .await?;
    let outcome = &answer.outcome;
    Ok(Json(SearchResponseView {
        results: outcome
            .results
            .iter()
            .map(|hit| SearchResultView {
                memory: MemoryView::from(&hit.memory),
                score: hit.score,
                relevance: hit.relevance,
                signals: explain.then(|| RankingSignalsView::from(&hit.signals)),
            })
            .collect(),
        recall_id: outcome.recall_id.to_string(),
        always: include_always.then(|| outcome.always.iter().map(MemoryView::from).collect()),
        context: answer.context.map(|packed| SearchContextView {
            text: packed.text,
            tokens: packed.tokens,
            memory_ids: packed.memory_ids.iter().map(ToString::to_string).collect(),
            omitted: packed.omitted,
        }),
        timings_ms: explain.then(|| SearchTimingsView::from(&outcome.timings)),
        recall_budget: answer.recall_budget.map(|cut| RecallBudgetView {
            max_results: cut.max_results,
            max_tokens: cut.max_tokens,
            omitted: cut.omitted,
        }),
        relevance_floor: outcome.relevance_floor,
        abstained: outcome.abstained,
        understood_time: outcome
            .understood_time
            .as_ref()
            .filter(|_| explain)
            .map(crate::views::UnderstoodTimeView::from),
        unmentioned_names: (explain && !outcome.unmentioned_names.is_empty())
            .then(|| outcome.unmentioned_names.clone()),
    }))
}

/// The trace id of the caller's W3C `traceparent` (`00-<32 hex>-<16 hex>-<2 hex>`).
fn trace_id_of(headers: &axum::http::HeaderMap) -> Option<String> {
    let value = headers.get("traceparent")?.to_str().ok()?;
    let trace_id = value.split('-').nth(1)?;
    (trace_id.len() == 32
        && trace_id
            .chars()
            .all(|character| character.is_ascii_hexdigit())
        && trace_id.chars().any(|character| character != '0'))
    .then(|| trace_id.to_ascii_lowercase())
}
