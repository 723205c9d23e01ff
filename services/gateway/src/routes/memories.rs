//! `/v1/memories…`: add, get, list, edit, delete, history and search, each scoped to the
//! project of the presented API key.

use crate::auth::{Authorized, MemoriesDelete, MemoriesRead, MemoriesWrite, ProjectPrincipal};
use crate::extract::{IdempotencyKey, IfMatchVersion, JsonBody, QueryParams, request_fingerprint};
use crate::problem::{ApiError, ProblemDocument};
use crate::spend_guard::SpendGuard;
use crate::state::AppState;
use crate::views::RecallBudgetView;
use crate::views::{
    AddMemoriesBody, EditMemoryBody, HistoryView, MemoriesEnvelope, MemoryListView, MemoryView,
    RankingSignalsView, SearchBody, SearchContextView, SearchResponseView, SearchResultView,
    SearchTimingsView,
};
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use engram_core::limits::{DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT};
use engram_core::recall::RecallEventCapture;
use engram_core::usage::{PlannedSpend, UsageUnit};
use engram_core::{ExternalId, FieldError, MemoryId, MemoryKind, MemoryState};
use engram_engine::{AddOutcome, MemoryEngine};
use engram_storage::{IdempotencyClaim, MemoryListFilter};
use serde::Deserialize;
use std::sync::Arc;
use utoipa::IntoParams;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/memories", post(add_memories).get(list_memories))
        .route("/v1/memories/search", post(search_memories))
        .route(
            "/v1/memories/{memory_id}",
            get(get_memory).patch(edit_memory).delete(delete_memory),
        )
        .route("/v1/memories/{memory_id}/history", get(memory_history))
}

/// For an end-user token, a memory of another end-user does not exist (404).
async fn confine_existing_memory(
    principal: &ProjectPrincipal,
    engine: &MemoryEngine,
    memory_id: MemoryId,
) -> Result<(), ApiError> {
    if principal.end_user().is_none() {
        return Ok(());
    }
    let memory = engine.get_memory(&principal.scope, memory_id).await?;
    principal.confine_to_end_user(memory.user_id.as_ref())
}

/// An id that is not a UUID cannot exist, so it is simply not found.
fn parse_memory_id(text: &str) -> Result<MemoryId, ApiError> {
    text.parse().map_err(|_| ApiError::memory_not_found())
}

#[derive(Debug, Deserialize, IntoParams)]
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
/// An `expires_at` already past asks for the memory to be deleted at the next sweep: a
/// deletion, so it needs `memories:delete` (`422` naming the field otherwise, and nothing is
/// written). Deletes by project policy (retention) are the policy setter's, not the writer's.
fn refuse_past_expiry_without_delete(
    principal: &crate::auth::ProjectPrincipal,
    expiries: impl IntoIterator<Item = (String, Option<chrono::DateTime<chrono::Utc>>)>,
) -> Result<(), ApiError> {
    if principal
        .scopes
        .contains(engram_core::ApiScope::MemoriesDelete)
    {
        return Ok(());
    }
    let now = chrono::Utc::now();
    let errors: Vec<engram_core::FieldError> = expiries
        .into_iter()
        .filter(|(_, expires_at)| expires_at.is_some_and(|expires_at| expires_at <= now))
        .map(|(field, _)| {
            engram_core::FieldError::new(
                field,
                "is in the past, which would delete the memory: that needs the `memories:delete` scope",
            )
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(errors))
    }
}

#[utoipa::path(post, path = "/v1/memories", tag = "memories",
    params(AddMemoriesQuery, ("Idempotency-Key" = Option<String>, Header, description = "Makes a retried write safe")),
    request_body = AddMemoriesBody,
    responses((status = 403, description = "The API key lacks the `memories:write` scope", body = ProblemDocument, content_type = "application/problem+json"), 
        (status = 201, description = "Stored and searchable", body = MemoriesEnvelope),
        (status = 202, description = "Stored; the index will make them searchable shortly", body = MemoriesEnvelope),
        (status = 400, body = ProblemDocument, content_type = "application/problem+json"),
        (status = 401, body = ProblemDocument, content_type = "application/problem+json"),
        (status = 413, body = ProblemDocument, content_type = "application/problem+json"),
        (status = 422, body = ProblemDocument, content_type = "application/problem+json"),
        (status = 503, body = ProblemDocument, content_type = "application/problem+json"),
    ),
    security(("api_key" = ["memories:write"])))]
pub async fn add_memories(
    principal: Authorized<MemoriesWrite>,
    State(engine): State<Arc<MemoryEngine>>,
    State(meter): State<crate::metering::UsageMeter>,
    State(spend_guard): State<Arc<SpendGuard>>,
    IdempotencyKey(idempotency_key): IdempotencyKey,
    QueryParams(query): QueryParams<AddMemoriesQuery>,
    body: JsonBody<AddMemoriesBody>,
) -> Result<Response, ApiError> {
    let parsed = body.value.into_new_memories().map_err(ApiError::invalid)?;
    let client_vectors = parsed.client_vectors;
    let mut new_memories = parsed.memories;
    refuse_past_expiry_without_delete(
        &principal,
        new_memories.iter().enumerate().map(|(position, memory)| {
            (
                format!("memories[{position}].expires_at"),
                memory.expires_at,
            )
        }),
    )?;
    for (position, memory) in new_memories.iter_mut().enumerate() {
        memory.user_id = principal.end_user_subject(
            memory.user_id.take(),
            &format!("memories[{position}].user_id"),
        )?;
    }
    spend_guard
        .admit(
            &principal.scope,
            &[
                PlannedSpend {
                    unit: UsageUnit::MemoriesWritten,
                    quantity: new_memories.len() as u64,
                },
                // At least one token is embedded: refused once the token quota is used up.
                PlannedSpend {
                    unit: UsageUnit::TokensEmbedded,
                    quantity: 1,
                },
            ],
        )
        .await?;
    let wait_for_index = query.wait.unwrap_or(true);
    let claim = idempotency_key.map(|key| IdempotencyClaim {
        key: principal.idempotency_key(&key),
        request_fingerprint: request_fingerprint("POST /v1/memories", "", &body.raw),
    });
    let render = |memories: &[engram_core::Memory]| {
        let envelope = MemoriesEnvelope {
            memories: memories.iter().map(MemoryView::from).collect(),
        };
        (201, serde_json::to_string(&envelope).unwrap_or_default())
    };
    let outcome = engine
        .add_memories_with_vectors(
            &principal.scope,
            new_memories,
            client_vectors,
            &principal.actor(),
            claim,
            wait_for_index,
            render,
        )
        .await?;
    Ok(match outcome {
        AddOutcome::Replayed { status, body } => json_response(
            StatusCode::from_u16(status).unwrap_or(StatusCode::CREATED),
            body,
        ),
        AddOutcome::Stored {
            memories,
            indexed,
            tokens_embedded,
        } => {
            // Only what was stored is billed: a replay above stored nothing.
            let credential = principal.usage_credential();
            meter.record(
                &principal.scope,
                &credential,
                UsageUnit::MemoriesWritten,
                memories.len() as u64,
            );
            // What the project's model embedded (after PII masking); nothing for client
            // vectors.
            meter.record(
                &principal.scope,
                &credential,
                UsageUnit::TokensEmbedded,
                tokens_embedded,
            );
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
    let memory = engine.get_memory(&principal.scope, memory_id).await?;
    principal.confine_to_end_user(memory.user_id.as_ref())?;
    Ok(Json(MemoryView::from(&memory)))
}

#[derive(Debug, Deserialize, IntoParams)]
pub struct ListMemoriesQuery {
    pub user_id: Option<String>,
    pub agent_id: Option<String>,
    pub session_id: Option<String>,
    pub kind: Option<String>,
    /// `active` (default) or `superseded`.
    pub state: Option<String>,
    /// 1–500, default 50.
    pub limit: Option<i64>,
    pub cursor: Option<String>,
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
    let mut errors = Vec::new();
    let subject = engram_core::SubjectFilter {
        user_id: ExternalId::parse_field(query.user_id.as_deref(), "query.user_id", &mut errors),
        agent_id: ExternalId::parse_field(query.agent_id.as_deref(), "query.agent_id", &mut errors),
        session_id: ExternalId::parse_field(
            query.session_id.as_deref(),
            "query.session_id",
            &mut errors,
        ),
    };
    let kind = match query.kind.as_deref() {
        None => None,
        Some(text) => text
            .parse::<MemoryKind>()
            .map_err(|message| errors.push(FieldError::new("query.kind", message)))
            .ok(),
    };
    let state = match query.state.as_deref() {
        None | Some("active") => Some(MemoryState::Active),
        Some("superseded") => Some(MemoryState::Superseded),
        Some(other) => {
            errors.push(FieldError::new(
                "query.state",
                format!("unknown value {other:?}; expected one of: active, superseded"),
            ));
            None
        }
    };
    let limit = query.limit.unwrap_or(DEFAULT_LIST_LIMIT as i64);
    if !(1..=MAX_LIST_LIMIT as i64).contains(&limit) {
        errors.push(FieldError::new(
            "query.limit",
            format!("must be between 1 and {MAX_LIST_LIMIT}, got {limit}"),
        ));
    }
    let after = match query.cursor.as_deref() {
        None => None,
        Some(text) => text
            .parse::<MemoryId>()
            .map_err(|_| {
                errors.push(FieldError::new(
                    "query.cursor",
                    "is not a cursor returned by this API",
                ))
            })
            .ok(),
    };
    if !errors.is_empty() {
        return Err(ApiError::invalid(errors));
    }
    let mut subject = subject;
    subject.user_id = principal.end_user_subject(subject.user_id, "query.user_id")?;
    let filter = MemoryListFilter {
        subject,
        kind,
        state,
        text_contains: None,
        after,
        limit: limit as u64,
        ..Default::default()
    };
    let page = engine.list_memories(&principal.scope, &filter).await?;
    Ok(Json(MemoryListView {
        memories: page.memories.iter().map(MemoryView::from).collect(),
        next_cursor: page.next_cursor.map(|cursor| cursor.to_string()),
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
    State(meter): State<crate::metering::UsageMeter>,
    State(spend_guard): State<Arc<SpendGuard>>,
    Path(memory_id): Path<String>,
    IfMatchVersion(expected_version): IfMatchVersion,
    body: JsonBody<EditMemoryBody>,
) -> Result<Json<MemoryView>, ApiError> {
    let memory_id = parse_memory_id(&memory_id)?;
    let (edit, client_vector) = body.value.into_edit().map_err(ApiError::invalid)?;
    // Setting an expiry on a stored memory schedules its deletion, however far ahead: a
    // deletion decision, so it needs `memories:delete` (clearing one does not).
    if matches!(edit.expires_at, Some(Some(_)))
        && !principal
            .scopes
            .contains(engram_core::ApiScope::MemoriesDelete)
    {
        return Err(ApiError::invalid(vec![engram_core::FieldError::new(
            "expires_at",
            "setting an expiry on a stored memory schedules its deletion: that needs the `memories:delete` scope",
        )]));
    }
    confine_existing_memory(&principal, &engine, memory_id).await?;
    let reembeds = edit.content.is_some();
    if reembeds {
        spend_guard
            .admit(
                &principal.scope,
                &[PlannedSpend {
                    unit: UsageUnit::TokensEmbedded,
                    quantity: 1,
                }],
            )
            .await?;
    }
    let edited = engine
        .edit_memory_with_vector(
            &principal.scope,
            memory_id,
            edit,
            client_vector,
            expected_version,
            &principal.actor(),
        )
        .await?;
    if reembeds {
        meter.record(
            &principal.scope,
            &principal.usage_credential(),
            UsageUnit::TokensEmbedded,
            edited.tokens_embedded,
        );
    }
    Ok(Json(MemoryView::from(&edited.memory)))
}

/// Delete a memory and all its content, history included.
#[utoipa::path(delete, path = "/v1/memories/{memory_id}", tag = "memories", params(("memory_id" = String, Path)),
    responses((status = 403, description = "The API key lacks the `memories:delete` scope", body = ProblemDocument, content_type = "application/problem+json"), (status = 204, description = "Deleted"), (status = 404, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["memories:delete"])))]
pub async fn delete_memory(
    principal: Authorized<MemoriesDelete>,
    State(engine): State<Arc<MemoryEngine>>,
    Path(memory_id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let memory_id = parse_memory_id(&memory_id)?;
    confine_existing_memory(&principal, &engine, memory_id).await?;
    engine
        .delete_memory(&principal.scope, memory_id, &principal.actor())
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
    confine_existing_memory(&principal, &engine, memory_id).await?;
    let history = engine.memory_history(&principal.scope, memory_id).await?;
    Ok(Json(HistoryView {
        history: history.into_iter().map(Into::into).collect(),
    }))
}

/// Find the memories that best match a query.
#[utoipa::path(post, path = "/v1/memories/search", tag = "memories", request_body = SearchBody,
    responses((status = 403, description = "The API key lacks the `memories:read` scope", body = ProblemDocument, content_type = "application/problem+json"), (status = 200, body = SearchResponseView), (status = 422, body = ProblemDocument, content_type = "application/problem+json"),
        (status = 503, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["memories:read"])))]
pub async fn search_memories(
    principal: Authorized<MemoriesRead>,
    State(engine): State<Arc<MemoryEngine>>,
    State(meter): State<crate::metering::UsageMeter>,
    State(spend_guard): State<Arc<SpendGuard>>,
    headers: axum::http::HeaderMap,
    body: JsonBody<SearchBody>,
) -> Result<Json<SearchResponseView>, ApiError> {
    let mut body = body.value;
    let recall_settings = engine.recall_events().settings_of(&principal.scope).await;
    // The profile: the one named, or one drawn by traffic share for a search that tunes
    // nothing itself, or none ("default").
    let profile = match body.profile.take() {
        Some(name) => {
            let tuning = engine.profile_tuning(&principal.scope, &name).await?;
            body.fill_from(&tuning);
            name
        }
        None if !body.sets_tuning() => {
            let shares: Vec<(String, f64)> = recall_settings
                .traffic
                .iter()
                .map(|(name, _, share)| (name.clone(), *share))
                .collect();
            let draw: f64 = rand::random();
            match engram_engine::profiles::profile_for_draw(&shares, draw).and_then(|name| {
                recall_settings
                    .traffic
                    .iter()
                    .find(|(candidate, ..)| candidate == name)
            }) {
                Some((name, tuning, _)) => {
                    body.fill_from(tuning);
                    name.clone()
                }
                None => engram_engine::profiles::DEFAULT_PROFILE.to_string(),
            }
        }
        None => engram_engine::profiles::DEFAULT_PROFILE.to_string(),
    };
    let mut parsed = body.into_request().map_err(ApiError::invalid)?;
    parsed.request.subject.user_id =
        principal.end_user_subject(parsed.request.subject.user_id.take(), "user_id")?;
    let limits = spend_guard
        .admit(
            &principal.scope,
            &[
                PlannedSpend {
                    unit: UsageUnit::Searches,
                    quantity: 1,
                },
                PlannedSpend {
                    unit: UsageUnit::TokensEmbedded,
                    quantity: 1,
                },
            ],
        )
        .await?;
    let recall = limits.recall.clone();
    let requested = parsed.request.top_k;
    if let Some(max_results) = recall.max_results {
        parsed.request.top_k = parsed.request.top_k.min(max_results.max(1) as usize);
    }
    let context_tokens = parsed.context_tokens;
    let explain = parsed.explain;
    let include_always = parsed.request.include_always;
    let recorded_request = (recall_settings.capture != RecallEventCapture::Off)
        .then(|| RecordedSearch::of(&parsed.request));
    let outcome = engine.search(&principal.scope, parsed.request).await?;
    let credential = principal.usage_credential();
    meter.record(&principal.scope, &credential, UsageUnit::Searches, 1);
    meter.record(
        &principal.scope,
        &credential,
        UsageUnit::TokensEmbedded,
        outcome.tokens_embedded,
    );
    let found = outcome.results.len();
    let mut results = Vec::with_capacity(found);
    let mut tokens_returned: u64 = 0;
    for hit in &outcome.results {
        if let Some(max_tokens) = recall.max_tokens {
            let tokens = engine.embedder().count_tokens(&hit.memory.content);
            // Ranked order is kept: a memory that does not fit ends the list.
            if tokens_returned + tokens > u64::from(max_tokens) {
                break;
            }
            tokens_returned += tokens;
        }
        results.push(SearchResultView {
            memory: MemoryView::from(&hit.memory),
            score: hit.score,
            signals: explain.then(|| RankingSignalsView::from(&hit.signals)),
        });
    }
    let cut_by_count = recall.max_results.is_some_and(|max_results| {
        (max_results as usize) < requested && found >= max_results as usize
    });
    let omitted = found - results.len();
    let recall_budget = (cut_by_count || omitted > 0).then_some(RecallBudgetView {
        max_results: recall.max_results,
        max_tokens: recall.max_tokens,
        omitted: omitted as u32,
    });
    // The context holds what the response returns: the recall budget applies to it too.
    let context = context_tokens.map(|token_budget| {
        let packed = engram_engine::pack_context(
            &outcome.always,
            &outcome.results[..results.len()],
            token_budget,
            |text| engine.embedder().count_tokens(text),
        );
        SearchContextView {
            text: packed.text,
            tokens: packed.tokens,
            memory_ids: packed.memory_ids.iter().map(ToString::to_string).collect(),
            omitted: packed.omitted,
        }
    });
    if let Some(recorded) = recorded_request {
        let event = recorded.into_event(
            &outcome,
            &results,
            recall_settings.capture,
            profile,
            trace_id_of(&headers),
            credential,
        );
        engine.recall_events().record(&principal.scope, event);
    }
    Ok(Json(SearchResponseView {
        results,
        recall_id: outcome.recall_id.to_string(),
        always: include_always.then(|| outcome.always.iter().map(MemoryView::from).collect()),
        context,
        timings_ms: explain.then(|| SearchTimingsView::from(&outcome.timings)),
        recall_budget,
    }))
}

/// What a recall event keeps of the request, taken before the search consumes it.
struct RecordedSearch {
    query: String,
    user_id: Option<String>,
    agent_id: Option<String>,
    session_id: Option<String>,
    retrieval: &'static str,
    filters: serde_json::Value,
}

impl RecordedSearch {
    fn of(request: &engram_engine::SearchRequest) -> Self {
        let text = |id: &Option<engram_core::ExternalId>| id.as_ref().map(ToString::to_string);
        Self {
            query: request.query.clone(),
            user_id: text(&request.subject.user_id),
            agent_id: text(&request.subject.agent_id),
            session_id: text(&request.subject.session_id),
            retrieval: request.retrieval.as_str(),
            filters: serde_json::json!({
                "kinds": request.kinds.iter().map(|kind| kind.as_str()).collect::<Vec<_>>(),
                "metadata": request.filters.metadata_equals,
                "categories": request.filters.categories_any,
                "created_after": request.filters.created_after,
                "created_before": request.filters.created_before,
                "session_only": request.session_only,
                "as_of": request.as_of,
                "top_k": request.top_k,
                "min_score": request.min_score,
                "fusion": request.fusion.as_str(),
                "keyword_weight": request.keyword_weight,
                "recency_weight": request.recency_weight,
                "diversify": request.diversify,
            }),
        }
    }

    fn into_event(
        self,
        outcome: &engram_engine::SearchOutcome,
        returned: &[SearchResultView],
        capture: RecallEventCapture,
        profile: String,
        trace_id: Option<String>,
        credential: String,
    ) -> engram_storage::recall_quality::NewRecallEvent {
        let results: Vec<serde_json::Value> = returned
            .iter()
            .enumerate()
            .map(|(position, result)| {
                serde_json::json!({
                    "memory_id": result.memory.id,
                    "rank": position + 1,
                    "score": result.score,
                })
            })
            .collect();
        let timings = &outcome.timings;
        engram_storage::recall_quality::NewRecallEvent {
            id: outcome.recall_id,
            created_at: chrono::Utc::now(),
            user_id: self.user_id,
            agent_id: self.agent_id,
            session_id: self.session_id,
            query_text: (capture == RecallEventCapture::Full).then_some(self.query),
            profile,
            retrieval: self.retrieval.to_string(),
            filters: self.filters,
            result_count: results.len() as u32,
            top_score: returned.first().map(|result| f64::from(result.score)),
            results: serde_json::Value::Array(results),
            total_micros: timings.total_micros,
            timings: serde_json::json!({
                "embed_micros": timings.embed_micros,
                "dense_micros": timings.dense_micros,
                "keyword_micros": timings.keyword_micros,
                "hydrate_micros": timings.hydrate_micros,
                "rank_micros": timings.rank_micros,
                "total_micros": timings.total_micros,
            }),
            trace_id,
            credential,
        }
    }
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
