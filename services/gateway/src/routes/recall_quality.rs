//! Recall quality routes: one recall event (`GET /v1/recalls/{id}`), the project's live
//! recall metrics, retrieval profiles (named search tunings with a traffic share), and
//! evaluation sets with their cases (JSON or JSONL import) and runs (`202` + task).

use crate::auth::{Authorized, MemoriesRead, ProjectAdmin};
use crate::extract::{JsonBody, OptionalJsonBody, QueryParams};
use crate::problem::{ApiError, ProblemDocument};
use crate::state::AppState;
use crate::views::TaskView;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use chrono::{DateTime, Duration, Utc};
use engram_core::FieldError;
use engram_core::NotFoundKind;
use engram_engine::MemoryEngine;
// Evaluation cases are parsed in engram-core (and fuzzed there).
use engram_core::recall::{
    EvalCaseRecord, EvalRunRecord, EvalSetRecord, NewEvalCase, RecallEventRecord,
    RetrievalProfileRecord,
};
pub use engram_core::request_bodies::{EvalCaseBody, parse_cases, parse_jsonl_cases};
use engram_engine::recall_metrics::{MetricsBucket, MetricsWindow, RecallMetrics};
use engram_engine::{
    CreateEvaluationSetRequest, PutRetrievalProfileRequest, StartEvaluationRunRequest,
};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/recalls/{recall_id}", get(get_recall_event))
        .route("/v1/recall-metrics", get(get_recall_metrics))
        .route("/v1/retrieval-profiles", get(list_profiles))
        .route(
            "/v1/retrieval-profiles/{name}",
            get(get_profile).put(put_profile).delete(delete_profile),
        )
        .route("/v1/eval-sets", post(create_eval_set).get(list_eval_sets))
        .route("/v1/eval-sets/{set_id}", get(get_eval_set))
        .route(
            "/v1/eval-sets/{set_id}/cases",
            post(add_eval_cases).get(list_eval_cases),
        )
        .route(
            "/v1/eval-sets/{set_id}/cases/import",
            post(import_eval_cases),
        )
        .route(
            "/v1/eval-sets/{set_id}/runs",
            post(start_eval_run).get(list_eval_runs),
        )
        .route("/v1/eval-sets/{set_id}/runs/{run_id}", get(get_eval_run))
}

// --- recall events ---

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RecallEventView {
    pub recall_id: String,
    pub created_at: DateTime<Utc>,
    pub user_id: Option<String>,
    pub agent_id: Option<String>,
    pub session_id: Option<String>,
    /// `null` when the project keeps no query text (`recall_events: no_text`).
    pub query: Option<String>,
    /// The retrieval profile that served it (`default`: none).
    pub profile: String,
    pub retrieval: String,
    /// Kinds, metadata, categories, time filters and the ranking parameters used.
    #[schema(value_type = Object)]
    pub filters: serde_json::Value,
    /// `[{memory_id, version, rank, score}]`, best first: what the answer returned (a
    /// context: what it packed).
    #[schema(value_type = Vec<Object>)]
    pub results: serde_json::Value,
    pub result_count: u32,
    pub top_score: Option<f64>,
    pub total_ms: f64,
    /// Microseconds per stage: embed, dense, keyword, hydrate, rank, total.
    #[schema(value_type = Object)]
    pub timings: serde_json::Value,
    /// From the caller's W3C `traceparent`.
    pub trace_id: Option<String>,
    /// The credential that searched: `key:<id>` (for an end-user token, the key that minted
    /// it) or `console:<account id>`.
    pub credential: String,
    /// The door the search came through: `http`, `console`, `cli`, `mem0` or `mcp`; absent
    /// for searches recorded before channels were.
    pub channel: Option<String>,
    /// The agent run the search or context was linked to.
    pub run_id: Option<String>,
    /// `search`, or `context` for the memories part of an assembled context (its
    /// `context_id` is this recall's id, and `results` are the memories it packed).
    pub purpose: String,
}

impl From<RecallEventRecord> for RecallEventView {
    fn from(event: RecallEventRecord) -> Self {
        Self {
            recall_id: event.id.to_string(),
            created_at: event.created_at,
            user_id: event.user_id,
            agent_id: event.agent_id,
            session_id: event.session_id,
            query: event.query_text,
            profile: event.profile,
            retrieval: event.retrieval,
            filters: event.filters,
            results: event.results,
            result_count: event.result_count,
            top_score: event.top_score,
            total_ms: event.total_micros as f64 / 1000.0,
            timings: event.timings,
            trace_id: event.trace_id,
            credential: event.credential,
            channel: event.channel,
            run_id: event.run_id.map(|id| id.to_string()),
            purpose: event.purpose,
        }
    }
}

/// One search as it was recorded: query, filters, results with scores and ranks, latency
/// per stage, profile and trace id. An end-user token sees only its own.
#[utoipa::path(get, path = "/v1/recalls/{recall_id}", tag = "recall quality",
    params(("recall_id" = String, Path)),
    responses((status = 200, body = RecallEventView),
        (status = 404, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["memories:read"])))]
pub async fn get_recall_event(
    principal: Authorized<MemoriesRead>,
    State(engine): State<Arc<MemoryEngine>>,
    Path(recall_id): Path<String>,
) -> Result<Json<RecallEventView>, ApiError> {
    let recall_id: Uuid = recall_id
        .parse()
        .map_err(|_| ApiError::not_found(NotFoundKind::Recall))?;
    let event = engine
        .get_recall_event_for(principal.principal(), recall_id)
        .await?;
    Ok(Json(RecallEventView::from(event)))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RecallMetricsQuery {
    /// RFC 3339; default: 7 days before `to`.
    pub from: Option<DateTime<Utc>>,
    /// RFC 3339; default: now.
    pub to: Option<DateTime<Utc>>,
    /// `hour` or `day` (default: hour for windows up to 2 days, else day).
    #[param(pattern = "^(hour|day)$")]
    pub bucket: Option<String>,
    /// Only the searches this profile served.
    pub profile: Option<String>,
}

/// The project's recall quality over a window: volume, latency percentiles, empty-recall
/// rate, top-score distribution, precision from feedback, recalled memories later
/// superseded or corrected, queries that found nothing, per bucket and per profile.
#[utoipa::path(get, path = "/v1/recall-metrics", tag = "recall quality", params(RecallMetricsQuery),
    responses((status = 200, description = "The figures (see services/engine/README.md, \"Recall quality\")", body = Object),
        (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["admin"])))]
pub async fn get_recall_metrics(
    principal: Authorized<ProjectAdmin>,
    State(engine): State<Arc<MemoryEngine>>,
    QueryParams(query): QueryParams<RecallMetricsQuery>,
) -> Result<Json<RecallMetrics>, ApiError> {
    let window = metrics_window(&query).map_err(ApiError::invalid)?;
    Ok(Json(
        engine
            .recall_metrics_for(principal.principal(), &window)
            .await?,
    ))
}

/// The window a metrics query asks for, checked.
pub fn metrics_window(query: &RecallMetricsQuery) -> Result<MetricsWindow, Vec<FieldError>> {
    let mut errors = Vec::new();
    // Checked before any arithmetic: a time near chrono's limits would overflow it.
    for (field, at) in [("query.from", query.from), ("query.to", query.to)] {
        if let Some(at) = at
            && let Err(error) = engram_core::validation::check_report_day(field, at.date_naive())
        {
            errors.push(error);
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let to = query.to.unwrap_or_else(Utc::now);
    let from = query.from.unwrap_or(to - Duration::days(7));
    // The window's rules (from before to, at most 366 days, hourly buckets for at most
    // 1,000 hours) are the use case's; an unnamed bucket is its choice too.
    let bucket = match query.bucket.as_deref() {
        None => MetricsBucket::fitting(from, to),
        Some(text) => MetricsBucket::parse(text).unwrap_or_else(|| {
            errors.push(FieldError::new("query.bucket", "must be hour or day"));
            MetricsBucket::Day
        }),
    };
    if errors.is_empty() {
        Ok(MetricsWindow {
            from,
            to,
            bucket,
            profile: query.profile.clone(),
        })
    } else {
        Err(errors)
    }
}

// --- retrieval profiles ---

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RetrievalProfileView {
    pub name: String,
    /// `{retrieval, fusion, keyword_weight, recency_weight, neighbour_weight, diversify,
    /// min_score}`, each optional.
    #[schema(value_type = Object)]
    pub parameters: serde_json::Value,
    /// 0–1: the share of searches naming no profile (and setting no tuning) it serves.
    pub traffic_share: f64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<RetrievalProfileRecord> for RetrievalProfileView {
    fn from(profile: RetrievalProfileRecord) -> Self {
        Self {
            name: profile.name,
            parameters: profile.parameters,
            traffic_share: profile.traffic_share,
            created_at: profile.created_at,
            updated_at: profile.updated_at,
        }
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RetrievalProfileListView {
    pub profiles: Vec<RetrievalProfileView>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PutProfileBody {
    /// Any of `retrieval`, `fusion`, `keyword_weight`, `recency_weight`, `neighbour_weight`,
    /// `min_score`, `diversify`.
    #[schema(schema_with = engram_core::openapi_schemas::search_tuning)]
    pub parameters: serde_json::Value,
    /// 0–1, default 0. The shares of all profiles add up to 1 at most.
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub traffic_share: Option<f64>,
}

/// The project's retrieval profiles.
#[utoipa::path(get, path = "/v1/retrieval-profiles", tag = "recall quality",
    responses((status = 200, body = RetrievalProfileListView)), security(("api_key" = ["admin"])))]
pub async fn list_profiles(
    principal: Authorized<ProjectAdmin>,
    State(engine): State<Arc<MemoryEngine>>,
) -> Result<Json<RetrievalProfileListView>, ApiError> {
    let profiles = engine
        .list_retrieval_profiles_for(principal.principal())
        .await?;
    Ok(Json(RetrievalProfileListView {
        profiles: profiles.into_iter().map(Into::into).collect(),
    }))
}

#[utoipa::path(get, path = "/v1/retrieval-profiles/{name}", tag = "recall quality",
    params(("name" = String, Path)),
    responses((status = 200, body = RetrievalProfileView),
        (status = 404, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["admin"])))]
pub async fn get_profile(
    principal: Authorized<ProjectAdmin>,
    State(engine): State<Arc<MemoryEngine>>,
    Path(name): Path<String>,
) -> Result<Json<RetrievalProfileView>, ApiError> {
    let profile = engine
        .get_retrieval_profile_for(principal.principal(), &name)
        .await?;
    Ok(Json(profile.into()))
}

/// Create or replace a profile. `409 conflict` when the traffic shares would pass 1.
#[utoipa::path(put, path = "/v1/retrieval-profiles/{name}", tag = "recall quality",
    params(("name" = String, Path)), request_body = PutProfileBody,
    responses((status = 200, body = RetrievalProfileView),
        (status = 409, body = ProblemDocument, content_type = "application/problem+json"),
        (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["admin"])))]
pub async fn put_profile(
    principal: Authorized<ProjectAdmin>,
    State(engine): State<Arc<MemoryEngine>>,
    Path(name): Path<String>,
    body: JsonBody<PutProfileBody>,
) -> Result<Json<RetrievalProfileView>, ApiError> {
    let body = body.value;
    let request = PutRetrievalProfileRequest {
        name,
        parameters: body.parameters,
        traffic_share: body.traffic_share,
    };
    let saved = engine
        .put_retrieval_profile_for(principal.principal(), request)
        .await?;
    Ok(Json(saved.into()))
}

#[utoipa::path(delete, path = "/v1/retrieval-profiles/{name}", tag = "recall quality",
    params(("name" = String, Path)),
    responses((status = 204, description = "Deleted"),
        (status = 404, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["admin"])))]
pub async fn delete_profile(
    principal: Authorized<ProjectAdmin>,
    State(engine): State<Arc<MemoryEngine>>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    engine
        .delete_retrieval_profile_for(principal.principal(), &name)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

// --- evaluation sets ---

fn eval_set_name() -> utoipa::openapi::schema::Object {
    engram_core::openapi_schemas::non_blank_text(128).build()
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateEvalSetBody {
    /// 1–128 characters, not only white space, unique in the project.
    #[schema(schema_with = eval_set_name)]
    pub name: String,
    /// 1–100, default 10: the depth hit@k, recall@k, MRR and nDCG are computed at.
    #[schema(minimum = 1, maximum = 100)]
    #[serde(
        default,
        deserialize_with = "engram_core::json_integers::optional_whole"
    )]
    pub k: Option<i64>,
    /// 0–1, default 0.05: a run whose hit@k, recall@k, MRR or nDCG@k fell by more than this
    /// since the previous run of its profile is flagged as a regression.
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub regression_threshold: Option<f64>,
    /// Run every this many seconds (300 – 2,592,000); absent: on request only.
    #[schema(minimum = 300, maximum = 2592000)]
    #[serde(
        default,
        deserialize_with = "engram_core::json_integers::optional_whole"
    )]
    pub schedule_interval_secs: Option<u64>,
    /// The profile scheduled runs use (default: `default`).
    #[schema(schema_with = engram_core::openapi_schemas::optional_profile_name)]
    pub profile: Option<String>,
    /// Up to 1,000 cases now (more with `POST …/cases`).
    #[serde(
        default,
        deserialize_with = "engram_core::json_objects::optional_object_list"
    )]
    pub cases: Option<Vec<EvalCaseBody>>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EvalSetView {
    pub id: String,
    pub name: String,
    pub k: u32,
    pub regression_threshold: f64,
    pub schedule_interval_secs: Option<u64>,
    pub profile: Option<String>,
    pub cases: u64,
    pub created_at: DateTime<Utc>,
}

impl From<EvalSetRecord> for EvalSetView {
    fn from(set: EvalSetRecord) -> Self {
        Self {
            id: set.id.to_string(),
            name: set.name,
            k: set.k,
            regression_threshold: set.regression_threshold,
            schedule_interval_secs: set.schedule_interval_secs,
            profile: set.profile,
            cases: set.cases,
            created_at: set.created_at,
        }
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EvalSetListView {
    pub sets: Vec<EvalSetView>,
}

/// Create an evaluation set, with its first cases.
#[utoipa::path(post, path = "/v1/eval-sets", tag = "recall quality", request_body = CreateEvalSetBody,
    responses((status = 201, body = EvalSetView),
        (status = 409, body = ProblemDocument, content_type = "application/problem+json"),
        (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["admin"])))]
pub async fn create_eval_set(
    principal: Authorized<ProjectAdmin>,
    State(engine): State<Arc<MemoryEngine>>,
    body: JsonBody<CreateEvalSetBody>,
) -> Result<(StatusCode, Json<EvalSetView>), ApiError> {
    let body = body.value;
    let mut errors = Vec::new();
    let cases = parse_cases(body.cases.unwrap_or_default(), &mut errors);
    if !errors.is_empty() {
        return Err(ApiError::invalid(errors));
    }
    let request = CreateEvaluationSetRequest {
        name: body.name,
        k: body.k,
        regression_threshold: body.regression_threshold,
        schedule_interval_secs: body.schedule_interval_secs,
        profile: body.profile,
        cases,
    };
    let set = engine
        .create_evaluation_set_for(principal.principal(), request)
        .await?;
    Ok((StatusCode::CREATED, Json(set.into())))
}

#[utoipa::path(get, path = "/v1/eval-sets", tag = "recall quality",
    responses((status = 200, body = EvalSetListView)), security(("api_key" = ["admin"])))]
pub async fn list_eval_sets(
    principal: Authorized<ProjectAdmin>,
    State(engine): State<Arc<MemoryEngine>>,
) -> Result<Json<EvalSetListView>, ApiError> {
    let sets = engine
        .list_evaluation_sets_for(principal.principal())
        .await?;
    Ok(Json(EvalSetListView {
        sets: sets.into_iter().map(Into::into).collect(),
    }))
}

fn parse_set_id(set_id: &str) -> Result<Uuid, ApiError> {
    set_id
        .parse()
        .map_err(|_| ApiError::not_found(NotFoundKind::EvaluationSet))
}

#[utoipa::path(get, path = "/v1/eval-sets/{set_id}", tag = "recall quality",
    params(("set_id" = String, Path)),
    responses((status = 200, body = EvalSetView),
        (status = 404, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["admin"])))]
pub async fn get_eval_set(
    principal: Authorized<ProjectAdmin>,
    State(engine): State<Arc<MemoryEngine>>,
    Path(set_id): Path<String>,
) -> Result<Json<EvalSetView>, ApiError> {
    let set = engine
        .get_evaluation_set_for(principal.principal(), parse_set_id(&set_id)?)
        .await?;
    Ok(Json(set.into()))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddEvalCasesBody {
    /// Up to 1,000 cases.
    #[serde(deserialize_with = "engram_core::json_objects::object_list")]
    pub cases: Vec<EvalCaseBody>,
}

async fn store_cases(
    engine: &MemoryEngine,
    principal: &crate::auth::ProjectPrincipal,
    set_id: Uuid,
    cases: Vec<NewEvalCase>,
) -> Result<(StatusCode, Json<EvalSetView>), ApiError> {
    let set = engine
        .add_evaluation_cases_for(principal.principal(), set_id, cases)
        .await?;
    Ok((StatusCode::CREATED, Json(set.into())))
}

/// Add labelled queries to a set (JSON).
#[utoipa::path(post, path = "/v1/eval-sets/{set_id}/cases", tag = "recall quality",
    params(("set_id" = String, Path)), request_body = AddEvalCasesBody,
    responses((status = 201, body = EvalSetView),
        (status = 404, body = ProblemDocument, content_type = "application/problem+json"),
        (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["admin"])))]
pub async fn add_eval_cases(
    principal: Authorized<ProjectAdmin>,
    State(engine): State<Arc<MemoryEngine>>,
    Path(set_id): Path<String>,
    body: JsonBody<AddEvalCasesBody>,
) -> Result<(StatusCode, Json<EvalSetView>), ApiError> {
    let set_id = parse_set_id(&set_id)?;
    let mut errors = Vec::new();
    let cases = parse_cases(body.value.cases, &mut errors);
    if !errors.is_empty() {
        return Err(ApiError::invalid(errors));
    }
    store_cases(&engine, &principal, set_id, cases).await
}

/// The published schema of a JSONL import: its lines, each an `EvalCaseBody` (1–1,000).
pub struct EvalCaseLines;

impl utoipa::PartialSchema for EvalCaseLines {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::schema::ArrayBuilder::new()
            .items(utoipa::openapi::Ref::from_schema_name("EvalCaseBody"))
            .min_items(Some(1))
            .max_items(Some(engram_core::request_bodies::MAX_CASES_PER_REQUEST))
            .description(Some("One case object per line (blank lines are skipped)"))
            .build()
            .into()
    }
}

impl utoipa::ToSchema for EvalCaseLines {}

/// Import labelled queries as JSONL: one case object per line (blank lines skipped). Any bad
/// line refuses the whole import, naming `line N`.
#[utoipa::path(post, path = "/v1/eval-sets/{set_id}/cases/import", tag = "recall quality",
    params(("set_id" = String, Path)),
    request_body(content = inline(EvalCaseLines), content_type = "application/x-ndjson"),
    responses((status = 201, body = EvalSetView),
        (status = 404, body = ProblemDocument, content_type = "application/problem+json"),
        (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["admin"])))]
pub async fn import_eval_cases(
    principal: Authorized<ProjectAdmin>,
    State(engine): State<Arc<MemoryEngine>>,
    Path(set_id): Path<String>,
    body: Bytes,
) -> Result<(StatusCode, Json<EvalSetView>), ApiError> {
    let set_id = parse_set_id(&set_id)?;
    let text = std::str::from_utf8(&body)
        .map_err(|_| ApiError::invalid(vec![FieldError::new("body", "must be UTF-8 text")]))?;
    let cases = parse_jsonl_cases(text).map_err(ApiError::invalid)?;
    store_cases(&engine, &principal, set_id, cases).await
}

/// A stored case: its id beside the fields it was added with (the same names as
/// `EvalCaseBody`, spelled out so the published schema allows the `id`).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EvalCaseView {
    pub id: String,
    pub query: String,
    pub user_id: Option<String>,
    pub agent_id: Option<String>,
    #[schema(value_type = Object)]
    pub filters: serde_json::Value,
    pub expected_memory_ids: Vec<String>,
    pub expected_contents: Vec<String>,
    pub query_vector: Option<Vec<f32>>,
}

impl From<EvalCaseRecord> for EvalCaseView {
    fn from(record: EvalCaseRecord) -> Self {
        Self {
            id: record.id.to_string(),
            query: record.case.query,
            user_id: record.case.user_id,
            agent_id: record.case.agent_id,
            filters: record.case.filters,
            expected_memory_ids: record.case.expected_memory_ids,
            expected_contents: record.case.expected_contents,
            query_vector: record.case.query_vector,
        }
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EvalCaseListView {
    pub cases: Vec<EvalCaseView>,
}

#[utoipa::path(get, path = "/v1/eval-sets/{set_id}/cases", tag = "recall quality",
    params(("set_id" = String, Path)),
    responses((status = 200, body = EvalCaseListView),
        (status = 403, description = "The key lacks `admin`, or `memories:read` (cases hold queries and contents)", body = ProblemDocument, content_type = "application/problem+json"),
        (status = 404, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["admin", "memories:read"])))]
pub async fn list_eval_cases(
    principal: Authorized<ProjectAdmin>,
    State(engine): State<Arc<MemoryEngine>>,
    Path(set_id): Path<String>,
) -> Result<Json<EvalCaseListView>, ApiError> {
    let cases = engine
        .list_evaluation_cases_for(principal.principal(), parse_set_id(&set_id)?)
        .await?;
    Ok(Json(EvalCaseListView {
        cases: cases.into_iter().map(Into::into).collect(),
    }))
}

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StartEvalRunBody {
    /// Default: the set's profile, else `default`.
    #[schema(schema_with = engram_core::openapi_schemas::optional_profile_name)]
    pub profile: Option<String>,
    /// Also run this profile and compare the two case by case (95 % confidence intervals).
    #[schema(schema_with = engram_core::openapi_schemas::optional_profile_name)]
    pub compare_profile: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EvalRunView {
    pub id: String,
    pub set_id: String,
    pub task_id: String,
    pub profile: String,
    pub compare_profile: Option<String>,
    /// `manual | scheduled`
    pub trigger: String,
    /// `queued | running | succeeded | failed`
    pub status: String,
    /// hit_at_1, hit_at_k, recall_at_k, mrr, ndcg_at_k, latency percentiles, per case.
    #[schema(value_type = Option<Object>)]
    pub metrics: Option<serde_json::Value>,
    /// With `compare_profile`: per figure, both values, the difference and its 95 % interval.
    #[schema(value_type = Option<Object>)]
    pub comparison: Option<serde_json::Value>,
    /// A figure fell by more than the set's threshold since the previous run of the profile.
    pub regression: bool,
    pub regression_reasons: Vec<String>,
    pub error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

impl From<EvalRunRecord> for EvalRunView {
    fn from(run: EvalRunRecord) -> Self {
        Self {
            id: run.id.to_string(),
            set_id: run.set_id.to_string(),
            task_id: run.task_id.to_string(),
            profile: run.profile,
            compare_profile: run.compare_profile,
            trigger: run.trigger.as_str().to_string(),
            status: run.status.as_str().to_string(),
            metrics: run.metrics,
            comparison: run.comparison,
            regression: run.regression,
            regression_reasons: run.regression_reasons,
            error: run.error,
            created_at: run.created_at,
            finished_at: run.finished_at,
        }
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EvalRunStartedView {
    pub run: EvalRunView,
    pub task: TaskView,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EvalRunListView {
    pub runs: Vec<EvalRunView>,
}

/// Run a set against the live project now: `202` with the run and its task.
#[utoipa::path(post, path = "/v1/eval-sets/{set_id}/runs", tag = "recall quality",
    params(("set_id" = String, Path)),
    request_body(content = Option<StartEvalRunBody>, description = "Optional: no body runs the set's own profile"),
    responses((status = 202, body = EvalRunStartedView),
        (status = 404, body = ProblemDocument, content_type = "application/problem+json"),
        (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["admin"])))]
pub async fn start_eval_run(
    principal: Authorized<ProjectAdmin>,
    State(engine): State<Arc<MemoryEngine>>,
    Path(set_id): Path<String>,
    OptionalJsonBody(body): OptionalJsonBody<StartEvalRunBody>,
) -> Result<Response, ApiError> {
    let set_id = parse_set_id(&set_id)?;
    let request = StartEvaluationRunRequest {
        profile: body.profile,
        compare_profile: body.compare_profile,
    };
    let (run, task) = engine
        .start_evaluation_run_for(principal.principal(), set_id, request)
        .await?;
    let location = format!("/v1/tasks/{}", task.id);
    let mut response = (
        StatusCode::ACCEPTED,
        Json(EvalRunStartedView {
            run: run.into(),
            task: task.into(),
        }),
    )
        .into_response();
    if let Ok(value) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    Ok(response)
}

/// The runs of a set, newest first (at most 200): the history charts are drawn from it.
#[utoipa::path(get, path = "/v1/eval-sets/{set_id}/runs", tag = "recall quality",
    params(("set_id" = String, Path)),
    responses((status = 200, body = EvalRunListView),
        (status = 404, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["admin"])))]
pub async fn list_eval_runs(
    principal: Authorized<ProjectAdmin>,
    State(engine): State<Arc<MemoryEngine>>,
    Path(set_id): Path<String>,
) -> Result<Json<EvalRunListView>, ApiError> {
    let runs = engine
        .list_evaluation_runs_for(principal.principal(), parse_set_id(&set_id)?)
        .await?;
    Ok(Json(EvalRunListView {
        runs: runs.into_iter().map(Into::into).collect(),
    }))
}

#[utoipa::path(get, path = "/v1/eval-sets/{set_id}/runs/{run_id}", tag = "recall quality",
    params(("set_id" = String, Path), ("run_id" = String, Path)),
    responses((status = 200, body = EvalRunView),
        (status = 404, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["admin"])))]
pub async fn get_eval_run(
    principal: Authorized<ProjectAdmin>,
    State(engine): State<Arc<MemoryEngine>>,
    Path((set_id, run_id)): Path<(String, String)>,
) -> Result<Json<EvalRunView>, ApiError> {
    let set_id = parse_set_id(&set_id)?;
    let run_id: Uuid = run_id
        .parse()
        .map_err(|_| ApiError::not_found(NotFoundKind::EvaluationRun))?;
    let run = engine
        .get_evaluation_run_for(principal.principal(), set_id, run_id)
        .await?;
    Ok(Json(EvalRunView::from(run)))
}
