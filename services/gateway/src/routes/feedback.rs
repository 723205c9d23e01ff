//! Feedback on recall: `POST /v1/memories/{id}/feedback` and
//! `POST /v1/recalls/{recall_id}/feedback` (`relevant`, `not_relevant`, `wrong`, optional
//! text); a `wrong` rating with a correction in words is applied by the LLM when one is
//! configured. `GET` on either lists the feedback given.

use crate::auth::{Authorized, MemoriesRead, MemoriesWrite};
use crate::extract::{JsonBody, RunLinkHeader};
use crate::problem::{ApiError, ProblemDocument};
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use engram_core::MemoryId;
use engram_core::NotFoundKind;
use engram_core::feedback::FeedbackRecord;
use engram_engine::FEEDBACK_RATINGS;
use engram_engine::{FeedbackRequest, MemoryEngine};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use utoipa::ToSchema;

pub fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/v1/memories/{memory_id}/feedback",
            post(give_memory_feedback).get(list_memory_feedback),
        )
        .route(
            "/v1/recalls/{recall_id}/feedback",
            post(give_recall_feedback).get(list_recall_feedback),
        )
}

/// The published schema of a rating: the ratings the feedback use case accepts.
fn feedback_rating() -> utoipa::openapi::schema::Object {
    engram_core::openapi_schemas::one_of(FEEDBACK_RATINGS)
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryFeedbackBody {
    /// `relevant | not_relevant | wrong`
    #[schema(schema_with = feedback_rating)]
    pub rating: String,
    /// A comment or, with `wrong`, the correction in words (at most 1,024 characters).
    #[schema(max_length = 1024)]
    pub text: Option<String>,
    /// The search (`recall_id` of its answer) that returned the memory.
    #[schema(schema_with = engram_core::openapi_schemas::optional_issued_id)]
    pub recall_id: Option<String>,
    /// The agent run this feedback belongs to; or the `Engram-Run-Id` header.
    pub run_id: Option<uuid::Uuid>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RecallFeedbackBody {
    /// `relevant | not_relevant | wrong`
    #[schema(schema_with = feedback_rating)]
    pub rating: String,
    #[schema(max_length = 1024)]
    pub text: Option<String>,
    /// The result the rating is about; absent: the recall as a whole.
    #[schema(schema_with = engram_core::openapi_schemas::optional_issued_id)]
    pub memory_id: Option<String>,
    /// The agent run this feedback belongs to; or the `Engram-Run-Id` header.
    pub run_id: Option<uuid::Uuid>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CorrectionView {
    /// `UPDATE | DELETE | NOOP`
    pub action: String,
    pub memory_id: Option<String>,
    pub content: Option<String>,
    pub reason: String,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct FeedbackView {
    pub id: String,
    pub memory_id: Option<String>,
    pub recall_id: Option<String>,
    pub rating: String,
    pub text: Option<String>,
    /// What a correction changed (with an LLM configured), else absent.
    pub correction: Option<CorrectionView>,
    pub created_at: DateTime<Utc>,
}

impl From<FeedbackRecord> for FeedbackView {
    fn from(record: FeedbackRecord) -> Self {
        Self {
            id: record.id.to_string(),
            memory_id: record.memory_id.map(|id| id.to_string()),
            recall_id: record.recall_id.map(|id| id.to_string()),
            rating: record.rating,
            text: record.text,
            correction: record
                .correction
                .and_then(|correction| serde_json::from_value(correction).ok()),
            created_at: record.created_at,
        }
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct FeedbackListView {
    pub feedback: Vec<FeedbackView>,
}

fn parse_memory_id(memory_id: &str) -> Result<MemoryId, ApiError> {
    memory_id
        .parse()
        .map_err(|_| ApiError::not_found(NotFoundKind::Memory))
}

fn parse_recall_id(recall_id: &str) -> Result<uuid::Uuid, ApiError> {
    recall_id
        .parse()
        .map_err(|_| ApiError::not_found(NotFoundKind::Recall))
}

#[utoipa::path(post, path = "/v1/memories/{memory_id}/feedback", tag = "memories",
    params(("memory_id" = String, Path), ("Engram-Run-Id" = Option<String>, Header, description = "The agent run this call belongs to (as the body's `run_id`)")),
    request_body = MemoryFeedbackBody,
    responses((status = 201, body = FeedbackView),
        (status = 409, description = "The named run is ended or expired", body = ProblemDocument, content_type = "application/problem+json"),
        (status = 404, body = ProblemDocument, content_type = "application/problem+json"),
        (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["memories:write"])))]
pub async fn give_memory_feedback(
    principal: Authorized<MemoriesWrite>,
    State(engine): State<Arc<MemoryEngine>>,
    Path(memory_id): Path<String>,
    run_link: RunLinkHeader,
    body: JsonBody<MemoryFeedbackBody>,
) -> Result<Response, ApiError> {
    let body = body.value;
    let memory_id = parse_memory_id(&memory_id)?;
    let feedback = FeedbackRequest {
        rating: body.rating,
        text: body.text,
        run_id: run_link.with_body(body.run_id)?,
    };
    let stored = engine
        .give_memory_feedback_for(principal.principal(), memory_id, body.recall_id, feedback)
        .await?;
    Ok((StatusCode::CREATED, Json(FeedbackView::from(stored))).into_response())
}

#[utoipa::path(post, path = "/v1/recalls/{recall_id}/feedback", tag = "memories",
    params(("recall_id" = String, Path), ("Engram-Run-Id" = Option<String>, Header, description = "The agent run this call belongs to (as the body's `run_id`)")),
    request_body = RecallFeedbackBody,
    responses((status = 201, body = FeedbackView),
        (status = 409, description = "The named run is ended or expired", body = ProblemDocument, content_type = "application/problem+json"),
        (status = 404, body = ProblemDocument, content_type = "application/problem+json"),
        (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["memories:write"])))]
pub async fn give_recall_feedback(
    principal: Authorized<MemoriesWrite>,
    State(engine): State<Arc<MemoryEngine>>,
    Path(recall_id): Path<String>,
    run_link: RunLinkHeader,
    body: JsonBody<RecallFeedbackBody>,
) -> Result<Response, ApiError> {
    let recall_id = parse_recall_id(&recall_id)?;
    let body = body.value;
    let feedback = FeedbackRequest {
        rating: body.rating,
        text: body.text,
        run_id: run_link.with_body(body.run_id)?,
    };
    let stored = engine
        .give_recall_feedback_for(principal.principal(), recall_id, body.memory_id, feedback)
        .await?;
    Ok((StatusCode::CREATED, Json(FeedbackView::from(stored))).into_response())
}

#[utoipa::path(get, path = "/v1/memories/{memory_id}/feedback", tag = "memories",
    params(("memory_id" = String, Path)),
    responses((status = 200, body = FeedbackListView),
        (status = 404, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["memories:read"])))]
pub async fn list_memory_feedback(
    principal: Authorized<MemoriesRead>,
    State(engine): State<Arc<MemoryEngine>>,
    Path(memory_id): Path<String>,
) -> Result<Json<FeedbackListView>, ApiError> {
    let feedback = engine
        .list_memory_feedback_for(principal.principal(), parse_memory_id(&memory_id)?)
        .await?;
    Ok(Json(FeedbackListView {
        feedback: feedback.into_iter().map(FeedbackView::from).collect(),
    }))
}

#[utoipa::path(get, path = "/v1/recalls/{recall_id}/feedback", tag = "memories",
    params(("recall_id" = String, Path)),
    responses((status = 200, body = FeedbackListView)),
    security(("api_key" = ["memories:read"])))]
pub async fn list_recall_feedback(
    principal: Authorized<MemoriesRead>,
    State(engine): State<Arc<MemoryEngine>>,
    Path(recall_id): Path<String>,
) -> Result<Json<FeedbackListView>, ApiError> {
    let feedback = engine
        .list_recall_feedback_for(principal.principal(), parse_recall_id(&recall_id)?)
        .await?;
    Ok(Json(FeedbackListView {
        feedback: feedback.into_iter().map(FeedbackView::from).collect(),
    }))
}
