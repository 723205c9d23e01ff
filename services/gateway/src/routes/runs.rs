//! Agent-run routes: the context to inject (`POST /v1/context`), runs with their steps and
//! timeline, a memory's impact (the recalls, contexts and runs that used it), and browsing
//! recorded recalls. Each parses its syntax and calls one use case.

use crate::auth::{Authorized, MemoriesRead, MemoriesWrite};
use crate::extract::{JsonBody, QueryParams, RunLinkHeader};
use crate::problem::{ApiError, ProblemDocument};
use crate::routes::recall_quality::RecallEventView;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use engram_core::runs::{
    ContextPart, DEFAULT_RUN_PAGE, EndRunBody, RecallFilter, RunFilter, RunRecord, RunStatus,
    RunStepBody, RunStepRecord, StartRunBody,
};
use engram_core::{ExternalId, FieldError, MemoryId, NotFoundKind};
use engram_engine::{
    AssembleContextRequest, AssembledContext, ListRecallEventsRequest, ListRunsRequest,
    MemoryEngine, MemoryImpactRequest, RunTimeline, source_json,
};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/context", post(assemble_context))
        .route("/v1/runs", post(start_run).get(list_runs))
        .route("/v1/runs/{agent_run_id}", get(get_run))
        .route("/v1/runs/{agent_run_id}/steps", post(add_run_step))
        .route("/v1/runs/{agent_run_id}/end", post(end_run))
        .route("/v1/memories/{memory_id}/impact", get(memory_impact))
        .route("/v1/recalls", get(list_recalls))
}

/// A run id that is not a UUID cannot exist, so it is simply not found.
pub(crate) fn parse_run_id(text: &str) -> Result<Uuid, ApiError> {
    text.parse()
        .map_err(|_| ApiError::not_found(NotFoundKind::Run))
}

fn optional_external_id(
    text: Option<&str>,
    field: &str,
    errors: &mut Vec<FieldError>,
) -> Option<ExternalId> {
    ExternalId::parse_field(text, field, errors)
}

fn optional_cursor(text: Option<&str>, field: &str, errors: &mut Vec<FieldError>) -> Option<Uuid> {
    text.and_then(|text| {
        text.parse()
            .map_err(|_| errors.push(FieldError::new(field, "must be a cursor this API answered")))
            .ok()
    })
}

fn refuse_if_any(errors: Vec<FieldError>) -> Result<(), ApiError> {
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(errors))
    }
}

// --- context ---

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextBody {
    /// Whose context: an end-user token's own; a project key names it (as the state routes).
    #[schema(schema_with = engram_core::openapi_schemas::optional_external_id)]
    pub user_id: Option<String>,
    #[schema(schema_with = engram_core::openapi_schemas::optional_external_id)]
    pub agent_id: Option<String>,
    /// The session whose state and recent messages are included.
    #[schema(schema_with = engram_core::openapi_schemas::optional_external_id)]
    pub session_id: Option<String>,
    /// What to recall memories for (at most 8 KiB); the task when absent.
    #[schema(max_length = 8192)]
    pub query: Option<String>,
    /// The step's task (at most 8 KiB).
    #[schema(max_length = 8192)]
    pub task: Option<String>,
    /// 1–32,768 tokens (the embedding model's tokenizer).
    #[schema(minimum = 1, maximum = 32768)]
    #[serde(deserialize_with = "engram_core::json_integers::whole")]
    pub token_budget: i64,
    /// The agent run this assembly belongs to; or the `Engram-Run-Id` header.
    pub run_id: Option<Uuid>,
    /// The parts to build, of `procedures`, `state`, `memories`, `recent_messages`,
    /// `summary`; default: every part that can be built.
    #[schema(max_items = 5)]
    pub include: Option<Vec<String>>,
    /// Add `timings_ms`: latency by stage.
    pub explain: Option<bool>,
}

impl ContextBody {
    /// The context use case's request (the body's `run_id`; a door with a header of its own
    /// replaces it), every problem named by its field.
    pub fn into_request(self) -> Result<AssembleContextRequest, Vec<FieldError>> {
        let body = self;
        let mut errors = Vec::new();
        let user_id = optional_external_id(body.user_id.as_deref(), "user_id", &mut errors);
        let agent_id = optional_external_id(body.agent_id.as_deref(), "agent_id", &mut errors);
        let session_id =
            optional_external_id(body.session_id.as_deref(), "session_id", &mut errors);
        let include = body.include.map(|parts| {
            parts
                .iter()
                .enumerate()
                .filter_map(|(position, part)| {
                    part.parse::<ContextPart>()
                        .map_err(|message| {
                            errors.push(FieldError::new(format!("include[{position}]"), message))
                        })
                        .ok()
                })
                .collect::<Vec<_>>()
        });
        let request = AssembleContextRequest {
            user_id,
            agent_id,
            session_id,
            query: body.query,
            task: body.task,
            token_budget: u64::try_from(body.token_budget).unwrap_or(0),
            run_id: body.run_id,
            include,
            trace_id: None,
        };
        errors.extend(request.limit_errors());
        if errors.is_empty() {
            Ok(request)
        } else {
            Err(errors)
        }
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ContextPartView {
    /// `procedures`, `state`, `memories`, `recent_messages` or `summary`.
    pub part: String,
    pub tokens: u64,
    /// Where each line came from, in reading order: `{memory_id, version, score?}`,
    /// `{message_id}` or `{key, version}`.
    #[schema(value_type = Vec<Object>)]
    pub items: Vec<serde_json::Value>,
    /// Lines of the part that did not fit the budget.
    pub omitted: usize,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct OmittedPartView {
    pub part: String,
    pub reason: String,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ContextView {
    /// Name this assembly in a run's model-call step (`context_id`); when the project records
    /// recall events, it is also the recall id of the memories it packed.
    pub context_id: String,
    /// The text to inject.
    pub context: String,
    pub tokens: u64,
    pub token_budget: u64,
    /// The parts built, in priority order.
    pub parts: Vec<ContextPartView>,
    /// Parts asked for (or wanted by default) that could not be built, with why.
    pub omitted_parts: Vec<OmittedPartView>,
    /// The retrieval profile of the memories part.
    pub profile: Option<String>,
    /// Milliseconds by stage (with `explain`).
    #[schema(value_type = Option<Object>)]
    pub timings_ms: Option<serde_json::Value>,
}

impl ContextView {
    pub fn of(context: AssembledContext, explain: bool) -> Self {
        Self {
            context_id: context.context_id.to_string(),
            context: context.text,
            tokens: context.tokens,
            token_budget: context.token_budget,
            parts: context
                .parts
                .into_iter()
                .map(|part| ContextPartView {
                    part: part.part.as_str().to_string(),
                    tokens: part.tokens,
                    items: part.sources.iter().map(source_json).collect(),
                    omitted: part.omitted,
                })
                .collect(),
            omitted_parts: context
                .omitted_parts
                .into_iter()
                .map(|(part, reason)| OmittedPartView {
                    part: part.as_str().to_string(),
                    reason,
                })
                .collect(),
            profile: context.profile,
            timings_ms: explain.then(|| {
                serde_json::Value::Object(
                    context
                        .timings
                        .iter()
                        .map(|(stage, micros)| {
                            (
                                stage.to_string(),
                                serde_json::json!(*micros as f64 / 1000.0),
                            )
                        })
                        .collect(),
                )
            }),
        }
    }
}

/// The context to inject for one step: `always` procedures, session state, the memories
/// relevant to the query (or task) and the recent messages, packed into `token_budget` in
/// that order, each line with its provenance.
#[utoipa::path(post, path = "/v1/context", tag = "runs", request_body = ContextBody,
    params(("Engram-Run-Id" = Option<String>, Header, description = "The agent run this call belongs to (as the body's `run_id`)")),
    responses((status = 200, body = ContextView),
        (status = 404, description = "The named run does not exist", body = ProblemDocument, content_type = "application/problem+json"),
        (status = 409, description = "The named run is ended or expired", body = ProblemDocument, content_type = "application/problem+json"),
        (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["memories:read"])))]
pub async fn assemble_context(
    principal: Authorized<MemoriesRead>,
    State(engine): State<Arc<MemoryEngine>>,
    run_link: RunLinkHeader,
    body: JsonBody<ContextBody>,
) -> Result<Json<ContextView>, ApiError> {
    let body = body.value;
    let explain = body.explain.unwrap_or(false);
    let run_id = run_link.with_body(body.run_id)?;
    let request = body.into_request().map_err(ApiError::invalid)?;
    let request = AssembleContextRequest { run_id, ..request };
    let context = engine
        .assemble_context_for(principal.principal(), request)
        .await?;
    Ok(Json(ContextView::of(context, explain)))
}

// --- runs ---

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RunView {
    pub run_id: String,
    pub task: String,
    pub user_id: Option<String>,
    pub agent_id: Option<String>,
    pub session_id: Option<String>,
    pub parent_run_id: Option<String>,
    #[schema(value_type = Object)]
    pub metadata: serde_json::Value,
    /// `open`, `ended`, or `expired` (open and idle past the expiry).
    pub status: String,
    pub outcome: Option<String>,
    pub created_at: DateTime<Utc>,
    pub last_activity_at: DateTime<Utc>,
    pub ended_at: Option<DateTime<Utc>>,
    pub step_count: u32,
    /// The credential that opened it (`key:<id>`, or the key that minted a token).
    pub credential: String,
    pub channel: String,
    /// The `trajectory` memory its end kept.
    pub trajectory_memory_id: Option<String>,
}

impl RunView {
    pub fn of(run: RunRecord, status: RunStatus) -> Self {
        Self {
            run_id: run.id.to_string(),
            task: run.task,
            user_id: run.user_id,
            agent_id: run.agent_id,
            session_id: run.session_id,
            parent_run_id: run.parent_run_id.map(|id| id.to_string()),
            metadata: run.metadata,
            status: status.as_str().to_string(),
            outcome: run.outcome,
            created_at: run.created_at,
            last_activity_at: run.last_activity_at,
            ended_at: run.ended_at,
            step_count: run.step_count,
            credential: run.credential,
            channel: run.channel,
            trajectory_memory_id: run.trajectory_memory_id.map(|id| id.to_string()),
        }
    }

    pub fn now(run: RunRecord) -> Self {
        let status = run.status_at(Utc::now());
        Self::of(run, status)
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RunStepView {
    pub step_id: String,
    /// 1, 2, … in the order the run took them.
    pub seq: u32,
    /// `model_call`, `tool_call`, `note`, or a linked memory operation: `memory_write`,
    /// `search`, `context`, `feedback`.
    #[serde(rename = "type")]
    pub step_type: String,
    pub created_at: DateTime<Utc>,
    /// What the step records: ids, versions, tokens, digests, and texts only where the
    /// project's `run_capture` is `full`. In a timeline each `{memory_id, version}` is
    /// hydrated: `content_then`, `now: {state, version, content}`, or `deleted: true`.
    #[schema(value_type = Object)]
    pub detail: serde_json::Value,
}

impl From<RunStepRecord> for RunStepView {
    fn from(step: RunStepRecord) -> Self {
        Self {
            step_id: step.id.to_string(),
            seq: step.seq,
            step_type: step.step_type.as_str().to_string(),
            created_at: step.created_at,
            detail: step.detail,
        }
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RunTimelineView {
    pub run: RunView,
    pub steps: Vec<RunStepView>,
}

impl From<RunTimeline> for RunTimelineView {
    fn from(timeline: RunTimeline) -> Self {
        Self {
            run: RunView::of(timeline.run, timeline.status),
            steps: timeline.steps.into_iter().map(RunStepView::from).collect(),
        }
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RunPageView {
    pub runs: Vec<RunView>,
    /// Pass as `before` for the next (older) page; absent on the last page.
    pub next_cursor: Option<String>,
}

/// Open a run for a task; link calls to it with `run_id` or `Engram-Run-Id`.
#[utoipa::path(post, path = "/v1/runs", tag = "runs", request_body = StartRunBody,
    responses((status = 201, body = RunView),
        (status = 404, description = "The parent run does not exist", body = ProblemDocument, content_type = "application/problem+json"),
        (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["memories:write"])))]
pub async fn start_run(
    principal: Authorized<MemoriesWrite>,
    State(engine): State<Arc<MemoryEngine>>,
    body: JsonBody<StartRunBody>,
) -> Result<Response, ApiError> {
    let request = body.value.into_request()?;
    let run = engine.start_run_for(principal.principal(), request).await?;
    Ok((StatusCode::CREATED, Json(RunView::now(run))).into_response())
}

/// Record a step: a model call (with the memories injected into it), a tool call or a note.
#[utoipa::path(post, path = "/v1/runs/{agent_run_id}/steps", tag = "runs", request_body = RunStepBody,
    params(("agent_run_id" = String, Path, description = "The run's id")),
    responses((status = 201, body = RunStepView),
        (status = 404, body = ProblemDocument, content_type = "application/problem+json"),
        (status = 409, description = "The run is ended, expired or full", body = ProblemDocument, content_type = "application/problem+json"),
        (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["memories:write"])))]
pub async fn add_run_step(
    principal: Authorized<MemoriesWrite>,
    State(engine): State<Arc<MemoryEngine>>,
    Path(run_id): Path<String>,
    body: JsonBody<RunStepBody>,
) -> Result<Response, ApiError> {
    let run_id = parse_run_id(&run_id)?;
    let step = body.value.into_step()?;
    let step = engine
        .add_run_step_for(principal.principal(), run_id, step)
        .await?;
    Ok((StatusCode::CREATED, Json(RunStepView::from(step))).into_response())
}

/// End a run with its outcome; `keep_trajectory` keeps its tool steps as a memory.
#[utoipa::path(post, path = "/v1/runs/{agent_run_id}/end", tag = "runs", request_body = EndRunBody,
    params(("agent_run_id" = String, Path, description = "The run's id")),
    responses((status = 200, body = RunView),
        (status = 404, body = ProblemDocument, content_type = "application/problem+json"),
        (status = 409, description = "The run is ended or expired already", body = ProblemDocument, content_type = "application/problem+json"),
        (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["memories:write"])))]
pub async fn end_run(
    principal: Authorized<MemoriesWrite>,
    State(engine): State<Arc<MemoryEngine>>,
    Path(run_id): Path<String>,
    body: JsonBody<EndRunBody>,
) -> Result<Json<RunView>, ApiError> {
    let run_id = parse_run_id(&run_id)?;
    let request = body.value.into_request()?;
    let run = engine
        .end_run_for(principal.principal(), run_id, request)
        .await?;
    Ok(Json(RunView::now(run)))
}

/// A run and its timeline, every memory hydrated from what exists now.
#[utoipa::path(get, path = "/v1/runs/{agent_run_id}", tag = "runs",
    params(("agent_run_id" = String, Path, description = "The run's id")),
    responses((status = 200, body = RunTimelineView),
        (status = 404, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["memories:read"])))]
pub async fn get_run(
    principal: Authorized<MemoriesRead>,
    State(engine): State<Arc<MemoryEngine>>,
    Path(run_id): Path<String>,
) -> Result<Json<RunTimelineView>, ApiError> {
    let run_id = parse_run_id(&run_id)?;
    let timeline = engine.get_run_for(principal.principal(), run_id).await?;
    Ok(Json(RunTimelineView::from(timeline)))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListRunsQuery {
    #[param(schema_with = engram_core::openapi_schemas::external_id)]
    pub user_id: Option<String>,
    #[param(schema_with = engram_core::openapi_schemas::external_id)]
    pub agent_id: Option<String>,
    #[param(schema_with = engram_core::openapi_schemas::external_id)]
    pub session_id: Option<String>,
    /// `open`, `ended` or `expired`.
    #[param(pattern = "^(open|ended|expired)$")]
    pub status: Option<String>,
    /// Runs created from here (RFC 3339).
    pub from: Option<DateTime<Utc>>,
    /// Runs created before here (RFC 3339).
    pub to: Option<DateTime<Utc>>,
    /// The page starts after (older than) this cursor.
    #[param(format = Uuid)]
    pub before: Option<String>,
    /// 1–200, default 50.
    #[param(minimum = 1, maximum = 200)]
    pub limit: Option<u64>,
}

/// Runs, newest first.
#[utoipa::path(get, path = "/v1/runs", tag = "runs", params(ListRunsQuery),
    responses((status = 200, body = RunPageView),
        (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["memories:read"])))]
pub async fn list_runs(
    principal: Authorized<MemoriesRead>,
    State(engine): State<Arc<MemoryEngine>>,
    QueryParams(query): QueryParams<ListRunsQuery>,
) -> Result<Json<RunPageView>, ApiError> {
    let mut errors = Vec::new();
    let user_id = optional_external_id(query.user_id.as_deref(), "user_id", &mut errors);
    let agent_id = optional_external_id(query.agent_id.as_deref(), "agent_id", &mut errors);
    let session_id = optional_external_id(query.session_id.as_deref(), "session_id", &mut errors);
    let status = query.status.as_deref().and_then(|status| {
        status
            .parse::<RunStatus>()
            .map_err(|message| errors.push(FieldError::new("status", message)))
            .ok()
    });
    let before = optional_cursor(query.before.as_deref(), "before", &mut errors);
    refuse_if_any(errors)?;
    let (runs, next) = engine
        .list_runs_for(
            principal.principal(),
            ListRunsRequest {
                filter: RunFilter {
                    user_id: None,
                    agent_id: agent_id.map(|id| id.as_str().to_string()),
                    session_id: session_id.map(|id| id.as_str().to_string()),
                    status,
                    from: query.from,
                    to: query.to,
                },
                user_id,
                before,
                limit: query.limit.unwrap_or(DEFAULT_RUN_PAGE),
            },
        )
        .await?;
    Ok(Json(RunPageView {
        runs: runs.into_iter().map(RunView::now).collect(),
        next_cursor: next.map(|id| id.to_string()),
    }))
}

// --- impact ---

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MemoryUseView {
    pub use_id: String,
    /// `returned` (by a search), `packed` (into a context) or `injected` (into a run's
    /// model call).
    pub kind: String,
    /// The memory's version at the time.
    pub version: i64,
    pub used_at: DateTime<Utc>,
    /// The recall (or context) that returned or packed it.
    pub recall_id: Option<String>,
    pub run_id: Option<String>,
    pub user_id: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ImpactCountsView {
    pub recalls: u64,
    pub contexts: u64,
    /// Distinct runs the memory reached.
    pub runs: u64,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MemoryImpactView {
    pub memory_id: String,
    /// The counts are of uses from here.
    pub since: DateTime<Utc>,
    pub counts: ImpactCountsView,
    /// Newest first.
    pub uses: Vec<MemoryUseView>,
    /// Pass as `before` for the next (older) page; absent on the last page.
    pub next_cursor: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct MemoryImpactQuery {
    /// Count uses from here (RFC 3339); default 30 days ago.
    pub since: Option<DateTime<Utc>>,
    /// The page starts after (older than) this cursor.
    #[param(format = Uuid)]
    pub before: Option<String>,
    /// 1–200, default 50.
    #[param(minimum = 1, maximum = 200)]
    pub limit: Option<u64>,
}

/// The recalls, contexts and runs that returned or injected a memory, newest first, with
/// counts since a date: what a correction or deletion would affect.
#[utoipa::path(get, path = "/v1/memories/{memory_id}/impact", tag = "runs",
    params(("memory_id" = String, Path), MemoryImpactQuery),
    responses((status = 200, body = MemoryImpactView),
        (status = 404, body = ProblemDocument, content_type = "application/problem+json"),
        (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["memories:read"])))]
pub async fn memory_impact(
    principal: Authorized<MemoriesRead>,
    State(engine): State<Arc<MemoryEngine>>,
    Path(memory_id): Path<String>,
    QueryParams(query): QueryParams<MemoryImpactQuery>,
) -> Result<Json<MemoryImpactView>, ApiError> {
    let memory_id: MemoryId = memory_id
        .parse()
        .map_err(|_| ApiError::not_found(NotFoundKind::Memory))?;
    let mut errors = Vec::new();
    let before = optional_cursor(query.before.as_deref(), "before", &mut errors);
    refuse_if_any(errors)?;
    let impact = engine
        .memory_impact_for(
            principal.principal(),
            MemoryImpactRequest {
                memory_id,
                since: query.since,
                before,
                limit: query.limit.unwrap_or(DEFAULT_RUN_PAGE),
            },
        )
        .await?;
    Ok(Json(MemoryImpactView {
        memory_id: impact.memory_id.to_string(),
        since: impact.since,
        counts: ImpactCountsView {
            recalls: impact.counts.recalls,
            contexts: impact.counts.contexts,
            runs: impact.counts.runs,
        },
        uses: impact
            .uses
            .into_iter()
            .map(|used| MemoryUseView {
                use_id: used.id.to_string(),
                kind: used.kind.as_str().to_string(),
                version: used.version,
                used_at: used.used_at,
                recall_id: used.recall_id.map(|id| id.to_string()),
                run_id: used.run_id.map(|id| id.to_string()),
                user_id: used.user_id,
            })
            .collect(),
        next_cursor: impact.next_cursor.map(|id| id.to_string()),
    }))
}

// --- recalls ---

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RecallPageView {
    pub recalls: Vec<RecallEventView>,
    /// Pass as `before` for the next (older) page; absent on the last page.
    pub next_cursor: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListRecallsQuery {
    #[param(schema_with = engram_core::openapi_schemas::external_id)]
    pub user_id: Option<String>,
    #[param(schema_with = engram_core::openapi_schemas::external_id)]
    pub session_id: Option<String>,
    /// Recalls that returned (or contexts that packed) this memory.
    #[param(format = Uuid)]
    pub memory_id: Option<String>,
    /// Recalls linked to this agent run.
    #[param(format = Uuid)]
    pub run_id: Option<String>,
    /// Recalls a retrieval profile served (`default`: none).
    #[param(schema_with = engram_core::openapi_schemas::profile_name)]
    pub profile: Option<String>,
    /// From here (RFC 3339).
    pub from: Option<DateTime<Utc>>,
    /// Before here (RFC 3339).
    pub to: Option<DateTime<Utc>>,
    /// The page starts after (older than) this cursor.
    #[param(format = Uuid)]
    pub before: Option<String>,
    /// 1–200, default 50.
    #[param(minimum = 1, maximum = 200)]
    pub limit: Option<u64>,
}

/// Recorded recalls (searches and contexts), newest first.
#[utoipa::path(get, path = "/v1/recalls", tag = "recall quality", params(ListRecallsQuery),
    responses((status = 200, body = RecallPageView),
        (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["memories:read"])))]
pub async fn list_recalls(
    principal: Authorized<MemoriesRead>,
    State(engine): State<Arc<MemoryEngine>>,
    QueryParams(query): QueryParams<ListRecallsQuery>,
) -> Result<Json<RecallPageView>, ApiError> {
    let mut errors = Vec::new();
    let user_id = optional_external_id(query.user_id.as_deref(), "user_id", &mut errors);
    let session_id = optional_external_id(query.session_id.as_deref(), "session_id", &mut errors);
    let memory_id = query.memory_id.as_deref().and_then(|text| {
        text.parse::<MemoryId>()
            .map_err(|_| errors.push(FieldError::new("memory_id", "must be a memory id (a UUID)")))
            .ok()
    });
    let run_id = query.run_id.as_deref().and_then(|text| {
        text.parse::<Uuid>()
            .map_err(|_| errors.push(FieldError::new("run_id", "must be a run id (a UUID)")))
            .ok()
    });
    let before = optional_cursor(query.before.as_deref(), "before", &mut errors);
    let is_profile_name = |name: &str| {
        (1..=64).contains(&name.len())
            && name
                .chars()
                .all(|character| character.is_ascii_alphanumeric() || "._-".contains(character))
    };
    if let Some(profile) = &query.profile
        && !is_profile_name(profile)
    {
        errors.push(FieldError::new(
            "profile",
            "a profile name: 1–64 letters, digits, `.`, `_` or `-`",
        ));
    }
    refuse_if_any(errors)?;
    let (recalls, next) = engine
        .list_recall_events_for(
            principal.principal(),
            ListRecallEventsRequest {
                filter: RecallFilter {
                    user_id: None,
                    session_id: session_id.map(|id| id.as_str().to_string()),
                    memory_id,
                    run_id,
                    profile: query.profile,
                    from: query.from,
                    to: query.to,
                },
                user_id,
                before,
                limit: query.limit.unwrap_or(DEFAULT_RUN_PAGE),
            },
        )
        .await?;
    Ok(Json(RecallPageView {
        recalls: recalls.into_iter().map(RecallEventView::from).collect(),
        next_cursor: next.map(|id| id.to_string()),
    }))
}
