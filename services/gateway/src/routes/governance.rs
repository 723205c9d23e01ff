//! Compliance routes (all need the `admin` scope): project settings (PII redaction,
//! retention per kind), memory flags (immutable, legal hold), subject erasure as a task with
//! a receipt, subject export as NDJSON, the retention dry run, and task status.

use crate::auth::{Authorized, ProjectAdmin, ProjectPrincipal};
use crate::extract::JsonBody;
use crate::problem::{ApiError, ProblemDocument};
use crate::state::AppState;
use crate::subject_export::subject_export_ndjson;
use crate::views::MemoryView;
use crate::views::TaskView;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use engram_core::NotFoundKind;
use engram_core::{ExternalId, FieldError, MemoryId};
use engram_engine::{
    MemoryEngine, ProjectSettingsChange, ProjectSettingsReport, SetMemoryFlagsRequest,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use utoipa::ToSchema;

/// Longest retention a kind can be given (100 years).
/// Memory ids the retention dry run lists at most.
const RETENTION_PREVIEW_IDS: u64 = 100;

pub fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/v1/project/settings",
            get(get_project_settings).patch(update_project_settings),
        )
        .route("/v1/memories/{memory_id}/flags", put(set_memory_flags))
        .route(
            "/v1/subjects/{user_id}/erasure",
            post(request_subject_erasure),
        )
        .route("/v1/subjects/{user_id}/export", get(export_subject))
        .route(
            "/v1/organization/subjects/{user_id}/erasure",
            post(request_organization_subject_erasure),
        )
        .route("/v1/tasks/{task_id}", get(get_task))
        .route("/v1/consolidations", post(request_consolidation))
        .route("/v1/retention/preview", get(retention_preview))
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ProjectSettingsView {
    /// `off | mask | reject`: what happens to e-mail addresses, phone numbers, card numbers
    /// and national ids in memory content before it is stored or embedded.
    pub pii_redaction: String,
    /// Days a memory of a kind is kept after its creation (kinds not listed: until deleted).
    #[schema(value_type = Object)]
    pub retention_days: BTreeMap<String, u32>,
    /// Whether `POST /v1/sessions/{id}/messages` derives memories when the request does not
    /// say (`derive_memories`). Default true.
    pub derive_memories: bool,
    /// Where the project's vectors come from.
    pub embedding: ProjectEmbeddingView,
    /// What each search records: `full` (default), `no_text` (everything but the query
    /// text) or `off`.
    pub recall_events: String,
    /// Days recall events are kept (default 30).
    pub recall_event_retention_days: u32,
    /// Days each store beside memories keeps a record before the retention sweep removes
    /// it: `messages`, `session_state` (since its last change), `feedback`, `files` (once
    /// ingested or failed) and `recall_events` (the same value as
    /// `recall_event_retention_days`); `null`: until deleted or erased.
    #[schema(value_type = Object)]
    pub store_retention_days: BTreeMap<String, Option<u32>>,
    /// What run steps keep of prompts, completions, tool arguments and results: `digests`
    /// (default: SHA-256 only) or `full` (the texts).
    pub run_capture: String,
    /// Whether an ended run's tool steps become a `trajectory` memory unless the end says
    /// otherwise (default false).
    pub keep_trajectories: bool,
    /// The relevance floor searches apply when they set no `min_score` (0: none): results
    /// whose `relevance` is below it are left out (a memory of the time the query names
    /// excepted, unless the query names someone no memory mentions), and an answer left
    /// empty says `"abstained": true`.
    pub relevance_floor: f32,
    /// The higher floor a search applies instead when its query names someone or something
    /// (a capitalised word inside a sentence) that no memory within reach mentions: asked of
    /// the wrong person, a question is about someone these memories do not know. 0 when the
    /// project set a number (that number is its one floor) or its model has no measured
    /// floors.
    pub relevance_floor_for_unmentioned_names: f32,
    /// Where the floor comes from: `"model"` (what new projects get: the floors measured
    /// for the embedding model — all-MiniLM-L6-v2 0.15, and 0.45 for unmentioned names;
    /// multilingual-e5-small 0.74 and 0.84; none for client vectors; see the engine's
    /// reference) or the number the project set (projects created before floors existed: 0).
    #[schema(schema_with = engram_core::openapi_schemas::relevance_floor_setting)]
    pub relevance_floor_setting: serde_json::Value,
    /// The visibility among the project's agents of a new memory that names none: `shared`
    /// (every agent reads it; the default) or `private` (its own agent only).
    #[schema(example = "shared")]
    pub default_visibility: String,
    /// Whether an agent's searches (with `agent_id`, or by a credential bound to agents)
    /// take other agents' memories only once verified; a search's `verified_only` wins.
    pub verified_only_from_other_agents: bool,
    /// Named teams of agents (team → its agents): a memory `shared_with` a team is read by
    /// its own agent and the team's, not by the project's other agents.
    #[schema(schema_with = engram_core::openapi_schemas::agent_teams)]
    pub agent_teams: std::collections::BTreeMap<String, Vec<String>>,
    /// The move to another embedding under way (`null`: none): set when the embedding of a
    /// project with memories is changed. Searches use `embedding` until the task has
    /// embedded every memory into the new space, then switch at once; a failed task leaves
    /// `embedding` as it was. Setting the embedding back to the one in use cancels it.
    #[schema(schema_with = embedding_change_schema)]
    pub embedding_change: Option<EmbeddingChangeView>,
}

/// A project's move to another embedding.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EmbeddingChangeView {
    /// The embedding it moves to.
    pub to: ProjectEmbeddingView,
    /// The task moving it (`GET /v1/tasks/{task_id}`).
    pub task_id: uuid::Uuid,
    /// Memories embedded into the new space so far (some twice, when they change during
    /// the move), of `memories`.
    pub memories_embedded: i64,
    /// Searchable memories the project held when the move started.
    pub memories: i64,
}

fn embedding_change_schema() -> utoipa::openapi::schema::Schema {
    engram_core::openapi_schemas::component_or_null("EmbeddingChangeView")
}

/// A project's embedding space.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ProjectEmbeddingView {
    /// `deployment` (default: the deployment's model), `local` (a built-in model),
    /// `provider` (the deployment's OpenAI-compatible provider) or `client` (the client
    /// sends a vector with every memory and query).
    pub source: String,
    /// The model id stored with each memory: `all-MiniLM-L6-v2` or `multilingual-e5-small`
    /// for the local models, `client-vectors-<dimension>` for client vectors.
    pub model: String,
    /// Length of every vector.
    pub dimension: usize,
}

impl ProjectSettingsView {
    fn new(report: &ProjectSettingsReport) -> Result<Self, ApiError> {
        let settings = &report.settings;
        let (model, dimension) = (report.embedding_model.clone(), report.embedding_dimension);
        Ok(Self {
            pii_redaction: settings.pii_redaction.as_str().to_string(),
            retention_days: settings
                .retention_days
                .iter()
                .map(|(kind, days)| (kind.as_str().to_string(), *days))
                .collect(),
            derive_memories: settings.derive_memories,
            embedding: ProjectEmbeddingView {
                source: settings.embedding.source().to_string(),
                model,
                dimension,
            },
            recall_events: settings.recall_events.as_str().to_string(),
            recall_event_retention_days: settings.recall_event_retention_days,
            store_retention_days: engram_engine::store_retention_days_of(settings),
            run_capture: settings.run_capture.as_str().to_string(),
            keep_trajectories: settings.keep_trajectories,
            relevance_floor: report.relevance_floor,
            relevance_floor_for_unmentioned_names: report.unmentioned_name_floor,
            relevance_floor_setting: settings.relevance_floor.to_json(),
            default_visibility: settings.default_visibility.as_str().to_string(),
            verified_only_from_other_agents: settings.verified_only_from_other_agents,
            agent_teams: settings.agent_teams.teams().clone(),
            embedding_change: report
                .embedding_change
                .as_ref()
                .map(|change| EmbeddingChangeView {
                    to: ProjectEmbeddingView {
                        source: change.to.source().to_string(),
                        model: change.model.clone(),
                        dimension: change.dimension,
                    },
                    task_id: change.task_id,
                    memories_embedded: change.memories_embedded,
                    memories: change.memories,
                }),
        })
    }
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateProjectSettingsBody {
    /// `off`, `mask` or `reject`.
    #[schema(schema_with = engram_core::openapi_schemas::optional_pii_redaction)]
    pub pii_redaction: Option<String>,
    /// Replaces the whole map; days per kind (1–36,500), `null` for a kind removes its limit.
    #[schema(schema_with = retention_days_schema)]
    #[serde(
        default,
        deserialize_with = "engram_core::json_integers::optional_map_of_optional_whole"
    )]
    pub retention_days: Option<BTreeMap<String, Option<u32>>>,
    pub derive_memories: Option<bool>,
    /// Change where the project's vectors come from. An empty project changes at once; one
    /// with memories starts a task that re-embeds them (see `embedding_change`), and
    /// cannot move to `client` vectors (`409 conflict`).
    #[serde(
        default,
        deserialize_with = "engram_core::json_objects::optional_object"
    )]
    pub embedding: Option<ProjectEmbeddingBody>,
    /// `full`, `no_text` or `off`.
    #[schema(schema_with = engram_core::openapi_schemas::optional_recall_event_capture)]
    pub recall_events: Option<String>,
    /// 1–3650.
    #[schema(minimum = 1, maximum = 3650)]
    #[serde(
        default,
        deserialize_with = "engram_core::json_integers::optional_whole"
    )]
    pub recall_event_retention_days: Option<i64>,
    /// Days per store (`messages`, `session_state`, `feedback`, `files`: 1–36,500;
    /// `recall_events`: 1–3,650); `null` for a store removes its limit (recall events: back
    /// to 30). Only the stores named change.
    #[schema(schema_with = store_retention_days_schema)]
    #[serde(
        default,
        deserialize_with = "engram_core::json_integers::optional_map_of_optional_whole"
    )]
    pub store_retention_days: Option<BTreeMap<String, Option<u32>>>,
    /// `digests` or `full`.
    #[schema(pattern = "^(digests|full)$")]
    pub run_capture: Option<String>,
    pub keep_trajectories: Option<bool>,
    /// `"model"` (the embedding model's measured floor) or a number 0–1 (0: none).
    #[schema(schema_with = engram_core::openapi_schemas::optional_relevance_floor_setting)]
    pub relevance_floor: Option<serde_json::Value>,
    /// `shared` or `private`: the visibility of a new memory that names none.
    pub default_visibility: Option<String>,
    /// Whether an agent's searches take other agents' memories only once verified.
    pub verified_only_from_other_agents: Option<bool>,
    /// Replaces the project's named teams of agents (team → 1–64 agent ids; at most 32
    /// teams; `{}` removes them all). A memory shared with a team that is removed is read by
    /// its own agent only until it is shared again.
    #[schema(schema_with = engram_core::openapi_schemas::optional_agent_teams)]
    pub agent_teams: Option<std::collections::BTreeMap<String, Vec<String>>>,
}

/// One property per store the registry sweeps by age, each 1–its maximum days or `null`.
fn store_retention_days_schema() -> utoipa::openapi::schema::Object {
    use engram_core::openapi_schemas::Nullable;
    use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, SchemaType, Type};
    let mut schema = ObjectBuilder::new()
        .schema_type(Type::Object)
        .additional_properties(Some(AdditionalProperties::FreeForm(false)));
    for (name, most_days) in engram_engine::stores_with_retention_days() {
        schema = schema.property(
            name,
            ObjectBuilder::new()
                .schema_type(SchemaType::Array(vec![Type::Integer, Type::Null]))
                .minimum(Some(1u64))
                .maximum(Some(u64::from(most_days))),
        );
    }
    schema.build().nullable()
}

/// (For an `Option` field: `null` leaves the retention as it is.)
fn retention_days_schema() -> utoipa::openapi::schema::Object {
    use engram_core::openapi_schemas::Nullable;
    engram_core::openapi_schemas::retention_days_per_kind(u64::from(
        engram_engine::MAX_RETENTION_DAYS,
    ))
    .nullable()
}

/// `{"source": "client", "dimension": 768}`, `{"source": "local", "model": "multilingual"}`, …
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProjectEmbeddingBody {
    /// `deployment`, `local`, `provider` or `client`.
    #[schema(schema_with = engram_core::openapi_schemas::embedding_source)]
    pub source: String,
    /// With `local` only: `minilm` (all-MiniLM-L6-v2, English; the default) or
    /// `multilingual` (multilingual-e5-small: Chinese, English and about 100 other languages
    /// in one space).
    #[schema(schema_with = engram_core::openapi_schemas::optional_local_model)]
    #[serde(default)]
    pub model: Option<String>,
    /// With `client` only: 1–4096.
    #[schema(minimum = 1, maximum = 4096)]
    #[serde(
        default,
        deserialize_with = "engram_core::json_integers::optional_whole"
    )]
    pub dimension: Option<i64>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryFlagsBody {
    pub immutable: Option<bool>,
    pub legal_hold: Option<bool>,
    /// Why (kept in the audit log as "reason given"; up to 1,000 characters).
    #[schema(max_length = 1000)]
    pub reason: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RetentionPreviewView {
    /// How many memories the next sweep removes (at most the listed ids' limit is counted
    /// exactly; see `more`).
    pub would_delete: u64,
    #[schema(value_type = Object)]
    pub by_kind: BTreeMap<String, u64>,
    /// The first ids it would remove, oldest first.
    pub memory_ids: Vec<String>,
    /// More than `would_delete` are due.
    pub more: bool,
    /// Each store kept for a number of days (see `store_retention_days`) and how many of
    /// its records the next sweep removes.
    pub stores: Vec<StoreRetentionPreviewView>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct StoreRetentionPreviewView {
    /// `messages`, `session_state`, `feedback`, `files` or `recall_events`.
    pub store: String,
    /// Days its records are kept; null: until deleted or erased.
    pub retention_days: Option<u32>,
    /// Records past that the next sweep removes.
    pub would_delete: u64,
}

fn parse_user_id(text: &str) -> Result<ExternalId, ApiError> {
    ExternalId::parse(text)
        .map_err(|message| ApiError::invalid(vec![FieldError::new("user_id", message)]))
}

/// The project's governance settings.
#[utoipa::path(get, path = "/v1/project/settings", tag = "compliance",
    responses((status = 200, body = ProjectSettingsView)), security(("api_key" = [])))]
pub async fn get_project_settings(
    principal: Authorized<ProjectAdmin>,
    State(engine): State<Arc<MemoryEngine>>,
) -> Result<Json<ProjectSettingsView>, ApiError> {
    let settings = engine.project_settings_for(principal.principal()).await?;
    Ok(Json(ProjectSettingsView::new(&settings)?))
}

/// Change PII redaction, retention, the derive-memories default or the embedding space;
/// audited with old and new values.
#[utoipa::path(patch, path = "/v1/project/settings", tag = "compliance", request_body = UpdateProjectSettingsBody,
    responses((status = 200, body = ProjectSettingsView),
        (status = 409, description = "The embedding cannot change while the project holds memories, or this deployment does not offer the model", body = ProblemDocument, content_type = "application/problem+json"),
        (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = [])))]
pub async fn update_project_settings(
    principal: Authorized<ProjectAdmin>,
    State(engine): State<Arc<MemoryEngine>>,
    body: JsonBody<UpdateProjectSettingsBody>,
) -> Result<Json<ProjectSettingsView>, ApiError> {
    let body = body.value;
    let change = ProjectSettingsChange {
        pii_redaction: body.pii_redaction,
        retention_days: body.retention_days,
        derive_memories: body.derive_memories,
        recall_events: body.recall_events,
        recall_event_retention_days: body.recall_event_retention_days,
        store_retention_days: body.store_retention_days,
        run_capture: body.run_capture,
        keep_trajectories: body.keep_trajectories,
        relevance_floor: body.relevance_floor,
        default_visibility: body.default_visibility,
        verified_only_from_other_agents: body.verified_only_from_other_agents,
        agent_teams: body.agent_teams,
        embedding: body
            .embedding
            .map(|embedding| engram_engine::EmbeddingChoice {
                source: embedding.source,
                model: embedding.model,
                dimension: embedding.dimension,
            }),
    };
    let saved = engine
        .update_project_settings_for(principal.principal(), change)
        .await?;
    Ok(Json(ProjectSettingsView::new(&saved)?))
}

/// Mark a memory immutable or put it under legal hold (or lift either).
#[utoipa::path(put, path = "/v1/memories/{memory_id}/flags", tag = "compliance", request_body = MemoryFlagsBody,
    params(("memory_id" = String, Path)),
    responses((status = 200, body = MemoryView),
        (status = 404, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = [])))]
pub async fn set_memory_flags(
    principal: Authorized<ProjectAdmin>,
    State(engine): State<Arc<MemoryEngine>>,
    Path(memory_id): Path<String>,
    body: JsonBody<MemoryFlagsBody>,
) -> Result<Json<MemoryView>, ApiError> {
    let memory_id: MemoryId = memory_id
        .parse()
        .map_err(|_| ApiError::not_found(NotFoundKind::Memory))?;
    let body = body.value;
    let request = SetMemoryFlagsRequest {
        memory_id,
        immutable: body.immutable,
        legal_hold: body.legal_hold,
        reason: body.reason,
    };
    let memory = engine
        .set_memory_flags_for(principal.principal(), request)
        .await?;
    Ok(Json(MemoryView::from(&memory)))
}

/// `202` with the queued task and `Location: /v1/tasks/{id}` to follow it.
fn task_accepted(task: engram_core::tasks::TaskRecord) -> Response {
    let location = format!("/v1/tasks/{}", task.id);
    let mut response = (StatusCode::ACCEPTED, Json(TaskView::from(task))).into_response();
    if let Ok(value) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}

/// Erase everything about one end-user of the project: `202` with a task to follow
/// (`GET /v1/tasks/{id}`), whose result is the receipt. `409 legal-hold` lists held memories.
#[utoipa::path(post, path = "/v1/subjects/{user_id}/erasure", tag = "compliance",
    params(("user_id" = String, Path)),
    responses((status = 202, body = TaskView),
        (status = 409, description = "Memories of the subject are under legal hold (listed in `errors`)", body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = [])))]
pub async fn request_subject_erasure(
    principal: Authorized<ProjectAdmin>,
    State(engine): State<Arc<MemoryEngine>>,
    Path(user_id): Path<String>,
) -> Result<Response, ApiError> {
    let user_id = parse_user_id(&user_id)?;
    let task = engine
        .request_subject_erasure_for(principal.principal(), &user_id, None)
        .await?;
    Ok(task_accepted(task))
}

/// Erase everything about one end-user in every project of the organization: `202` with one
/// task whose result is one receipt (each project's subject digest and per-store counts, and
/// an independent count of what is left across the organization). Needs an
/// organization-level credential: a console owner, admin or compliance member (the console's
/// Subjects page) or the operator; a project API key, even with `admin`, gets `403`.
#[utoipa::path(post, path = "/v1/organization/subjects/{user_id}/erasure", tag = "compliance",
    params(("user_id" = String, Path)),
    responses((status = 202, body = TaskView),
        (status = 403, description = "The credential is not organization-level (every project API key)", body = ProblemDocument, content_type = "application/problem+json"),
        (status = 409, description = "Memories of the subject are under legal hold in some project (listed in `errors`)", body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = [])))]
pub async fn request_organization_subject_erasure(
    principal: ProjectPrincipal,
    State(engine): State<Arc<MemoryEngine>>,
    Path(user_id): Path<String>,
) -> Result<Response, ApiError> {
    let user_id = parse_user_id(&user_id)?;
    let task = engine
        .request_organization_subject_erasure_for(principal.principal(), &user_id, None)
        .await?;
    Ok(task_accepted(task))
}

/// Merge the project's near-duplicate memories now (the worker also does it on a schedule):
/// `202` with a `consolidation` task whose result lists each merge. Nothing is deleted: the
/// merged memories become `superseded`, with the reason in their history.
#[utoipa::path(post, path = "/v1/consolidations", tag = "memories",
    responses((status = 202, body = TaskView),
        (status = 403, description = "The API key lacks the `admin` scope", body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["admin"])))]
pub async fn request_consolidation(
    principal: Authorized<ProjectAdmin>,
    State(engine): State<Arc<MemoryEngine>>,
) -> Result<Response, ApiError> {
    let task = engine
        .request_consolidation_for(principal.principal())
        .await?;
    Ok(task_accepted(task))
}

/// A background task of the project, with progress and, when done, its result.
#[utoipa::path(get, path = "/v1/tasks/{task_id}", tag = "compliance",
    params(("task_id" = String, Path)),
    responses((status = 200, body = TaskView),
        (status = 404, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = [])))]
pub async fn get_task(
    principal: Authorized<ProjectAdmin>,
    State(engine): State<Arc<MemoryEngine>>,
    Path(task_id): Path<String>,
) -> Result<Json<TaskView>, ApiError> {
    let not_found = || ApiError::not_found(NotFoundKind::Task);
    let task_id: uuid::Uuid = task_id.parse().map_err(|_| not_found())?;
    let task = engine.get_task_for(principal.principal(), task_id).await?;
    Ok(Json(TaskView::from(task)))
}

/// Everything live about one end-user as NDJSON: one line per memory (with its history),
/// session message, session state value, file, feedback, recall event, evaluation case and
/// per-case evaluation result, each naming its `type`, then a summary line
/// `{"summary": {...}}` with the count of each.
#[utoipa::path(get, path = "/v1/subjects/{user_id}/export", tag = "compliance",
    params(("user_id" = String, Path)),
    responses((status = 200, content_type = "application/x-ndjson", description = "One object per line, each with its `type`: `memory` (with `memory` and `history`), `message`, `state`, `file`, `feedback`, `recall`, `evaluation_case`, `evaluation_result`; then `{\"summary\"}` with the count of each")),
    security(("api_key" = [])))]
pub async fn export_subject(
    principal: Authorized<ProjectAdmin>,
    State(engine): State<Arc<MemoryEngine>>,
    Path(user_id): Path<String>,
) -> Result<Response, ApiError> {
    let user_id = parse_user_id(&user_id)?;
    let exported = engine
        .export_subject_for(principal.principal(), &user_id)
        .await?;
    let lines = subject_export_ndjson(user_id.as_str(), &exported);
    Ok((
        [
            (header::CONTENT_TYPE, "application/x-ndjson"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"subject-export.ndjson\"",
            ),
        ],
        lines,
    )
        .into_response())
}

/// What the next retention sweep removes, without removing anything.
#[utoipa::path(get, path = "/v1/retention/preview", tag = "compliance",
    responses((status = 200, body = RetentionPreviewView)), security(("api_key" = [])))]
pub async fn retention_preview(
    principal: Authorized<ProjectAdmin>,
    State(engine): State<Arc<MemoryEngine>>,
) -> Result<Json<RetentionPreviewView>, ApiError> {
    // Counted up to a generous bound; the listed ids are the first ones.
    let preview = engine
        .preview_retention_for(principal.principal(), 100_001)
        .await?;
    let due = preview.memories;
    let more = due.len() > 100_000;
    let mut by_kind: BTreeMap<String, u64> = BTreeMap::new();
    for (_, kind) in due.iter().take(100_000) {
        *by_kind.entry(kind.as_str().to_string()).or_default() += 1;
    }
    Ok(Json(RetentionPreviewView {
        would_delete: due.len().min(100_000) as u64,
        by_kind,
        memory_ids: due
            .iter()
            .take(RETENTION_PREVIEW_IDS as usize)
            .map(|(id, _)| id.to_string())
            .collect(),
        more,
        stores: preview
            .stores
            .into_iter()
            .map(
                |(store, retention_days, would_delete)| StoreRetentionPreviewView {
                    store: store.to_string(),
                    retention_days,
                    would_delete,
                },
            )
            .collect(),
    }))
}
