//! Feedback on recall: `POST /v1/memories/{id}/feedback` and
//! `POST /v1/recalls/{recall_id}/feedback` (`relevant`, `not_relevant`, `wrong`, optional
//! text); a `wrong` rating with a correction in words is applied by the LLM when one is
//! configured. `GET` on either lists the feedback given.

use crate::auth::{Authorized, MemoriesRead, MemoriesWrite, ProjectPrincipal};
use crate::extract::JsonBody;
use crate::problem::{ApiError, ProblemDocument};
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use engram_core::limits::MAX_REASON_CHARS;
use engram_core::usage::{PlannedSpend, UsageUnit};
use engram_core::{FieldError, Memory, MemoryId};
use engram_engine::MemoryEngine;
use engram_engine::SpendGuard;
use engram_engine::UsageMeter;
use engram_storage::feedback::{FeedbackRecord, NewFeedback};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use utoipa::ToSchema;

const RATINGS: [&str; 3] = ["relevant", "not_relevant", "wrong"];

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

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryFeedbackBody {
    /// `relevant | not_relevant | wrong`
    pub rating: String,
    /// A comment or, with `wrong`, the correction in words (at most 1,024 characters).
    pub text: Option<String>,
    /// The search (`recall_id` of its answer) that returned the memory.
    pub recall_id: Option<String>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RecallFeedbackBody {
    /// `relevant | not_relevant | wrong`
    pub rating: String,
    pub text: Option<String>,
    /// The result the rating is about; absent: the recall as a whole.
    pub memory_id: Option<String>,
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

fn parse_rating_and_text(
    rating: &str,
    text: Option<String>,
    errors: &mut Vec<FieldError>,
) -> Option<String> {
    if !RATINGS.contains(&rating) {
        errors.push(FieldError::new(
            "rating",
            format!("must be one of: {}", RATINGS.join(", ")),
        ));
    }
    let text = text
        .map(|text| text.trim().to_string())
        .filter(|text| !text.is_empty());
    if let Some(text) = &text
        && text.chars().count() > MAX_REASON_CHARS
    {
        errors.push(FieldError::new(
            "text",
            format!("at most {MAX_REASON_CHARS} characters"),
        ));
    }
    text
}

fn not_found(what: &str) -> ApiError {
    ApiError::not_found(
        what,
        format!("no {what} with this id exists in this project"),
    )
}

/// The recall event of `recall_id`, if the project records them: unknown ids are refused
/// (404), as are another end-user's recalls for an end-user token. `None` when the project
/// records no recall events (nothing to check against).
async fn known_recall(
    principal: &ProjectPrincipal,
    engine: &MemoryEngine,
    recall_id: uuid::Uuid,
) -> Result<Option<engram_storage::recall_quality::RecallEventRecord>, ApiError> {
    let settings = engine.recall_events().settings_of(&principal.scope).await;
    if settings.capture == engram_core::recall::RecallEventCapture::Off {
        return Ok(None);
    }
    let storage = engine.storage();
    let mut found = storage
        .recall_event(&principal.scope, recall_id)
        .await
        .map_err(|error| ApiError::from(engram_engine::EngineError::from(error)))?;
    if found.is_none() {
        // Feedback may follow its search faster than the event is written.
        engine.recall_events().flush().await;
        found = storage
            .recall_event(&principal.scope, recall_id)
            .await
            .map_err(|error| ApiError::from(engram_engine::EngineError::from(error)))?;
    }
    let event = found.ok_or_else(|| not_found("recall"))?;
    let user_id = event
        .user_id
        .as_deref()
        .and_then(|user_id| engram_core::ExternalId::parse(user_id).ok());
    principal
        .confine_to_end_user(user_id.as_ref())
        .map_err(|_| not_found("recall"))?;
    Ok(Some(event))
}

/// The memory, if it is this project's (and this end-user's, for an end-user token).
async fn visible_memory(
    principal: &ProjectPrincipal,
    engine: &MemoryEngine,
    memory_id: &str,
) -> Result<Memory, ApiError> {
    let memory_id: MemoryId = memory_id.parse().map_err(|_| not_found("memory"))?;
    let memory = engine
        .get_memory(&principal.scope, memory_id)
        .await
        .map_err(ApiError::from)?;
    principal.confine_to_end_user(memory.user_id.as_ref())?;
    Ok(memory)
}

struct FeedbackRequest {
    memory: Option<Memory>,
    recall_id: Option<uuid::Uuid>,
    rating: String,
    text: Option<String>,
}

/// Apply the correction (a `wrong` rating with text, an LLM configured), then store the
/// feedback with what it changed.
async fn record(
    principal: &ProjectPrincipal,
    engine: &MemoryEngine,
    spend_guard: &SpendGuard,
    meter: &UsageMeter,
    request: FeedbackRequest,
) -> Result<Response, ApiError> {
    let credential = principal.usage_credential();
    let mut correction = None;
    if let (Some(memory), Some(text), "wrong", true) = (
        &request.memory,
        &request.text,
        request.rating.as_str(),
        engine.llm_model().is_some(),
    ) {
        spend_guard
            .admit(
                &principal.scope,
                &[
                    PlannedSpend {
                        unit: UsageUnit::LlmTokensIn,
                        quantity: 1,
                    },
                    PlannedSpend {
                        unit: UsageUnit::TokensEmbedded,
                        quantity: 1,
                    },
                ],
            )
            .await?;
        if let Some((change, tokens_embedded)) = engine
            .correct_memory(
                &principal.scope,
                memory,
                text,
                &credential,
                principal
                    .scopes
                    .contains(engram_core::ApiScope::MemoriesDelete),
                &principal.actor(),
            )
            .await?
        {
            meter.record(
                &principal.scope,
                &credential,
                UsageUnit::TokensEmbedded,
                tokens_embedded,
            );
            correction = Some(CorrectionView {
                action: change.action.as_str().to_string(),
                memory_id: change.memory_id.map(|id| id.to_string()),
                content: change.content,
                reason: change.reason,
            });
        }
    }
    let stored = engine
        .storage()
        .record_feedback(
            &principal.scope,
            NewFeedback {
                memory_id: request.memory.as_ref().map(|memory| memory.id),
                recall_id: request.recall_id,
                user_id: request
                    .memory
                    .as_ref()
                    .and_then(|memory| memory.user_id.as_ref())
                    .map(|user_id| user_id.as_str().to_string())
                    .or_else(|| principal.end_user().map(|user| user.as_str().to_string())),
                rating: request.rating,
                text: request.text,
                credential,
                correction: correction
                    .as_ref()
                    .and_then(|correction| serde_json::to_value(correction).ok()),
            },
        )
        .await
        .map_err(|error| ApiError::from(engram_engine::EngineError::from(error)))?;
    Ok((StatusCode::CREATED, Json(FeedbackView::from(stored))).into_response())
}

/// Rate a memory a search returned. `wrong` with a correction in `text` rewrites or deletes
/// the memory through the LLM when one is configured (reason `correction from feedback: …`
/// in its history); otherwise the feedback is kept for the recall-quality figures.
#[utoipa::path(post, path = "/v1/memories/{memory_id}/feedback", tag = "memories",
    params(("memory_id" = String, Path)),
    request_body = MemoryFeedbackBody,
    responses((status = 201, body = FeedbackView),
        (status = 404, body = ProblemDocument, content_type = "application/problem+json"),
        (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["memories:write"])))]
pub async fn give_memory_feedback(
    principal: Authorized<MemoriesWrite>,
    State(engine): State<Arc<MemoryEngine>>,
    State(spend_guard): State<Arc<SpendGuard>>,
    State(meter): State<UsageMeter>,
    Path(memory_id): Path<String>,
    body: JsonBody<MemoryFeedbackBody>,
) -> Result<Response, ApiError> {
    let body = body.value;
    let mut errors = Vec::new();
    let text = parse_rating_and_text(&body.rating, body.text, &mut errors);
    let recall_id = body.recall_id.as_deref().and_then(|text| {
        text.parse::<uuid::Uuid>()
            .map_err(|_| {
                errors.push(FieldError::new(
                    "recall_id",
                    "expected the recall_id of a search answer",
                ))
            })
            .ok()
    });
    if !errors.is_empty() {
        return Err(ApiError::invalid(errors));
    }
    let memory = visible_memory(&principal, &engine, &memory_id).await?;
    if let Some(recall_id) = recall_id {
        // The recall must be the caller's and must have returned this memory: otherwise the
        // feedback would carry another search's id to whoever reads the memory's feedback.
        if let Some(recall) = known_recall(&principal, &engine, recall_id).await?
            && !engram_engine::recall_metrics::recalled_ids(&recall).contains(&memory.id)
        {
            return Err(ApiError::invalid(vec![FieldError::new(
                "recall_id",
                "this memory was not among the results of that recall",
            )]));
        }
    }
    record(
        &principal,
        &engine,
        &spend_guard,
        &meter,
        FeedbackRequest {
            memory: Some(memory),
            recall_id,
            rating: body.rating,
            text,
        },
    )
    .await
}

/// Rate a search's answer as a whole, or one of its results (`memory_id`).
#[utoipa::path(post, path = "/v1/recalls/{recall_id}/feedback", tag = "memories",
    params(("recall_id" = String, Path)),
    request_body = RecallFeedbackBody,
    responses((status = 201, body = FeedbackView),
        (status = 404, body = ProblemDocument, content_type = "application/problem+json"),
        (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["memories:write"])))]
pub async fn give_recall_feedback(
    principal: Authorized<MemoriesWrite>,
    State(engine): State<Arc<MemoryEngine>>,
    State(spend_guard): State<Arc<SpendGuard>>,
    State(meter): State<UsageMeter>,
    Path(recall_id): Path<String>,
    body: JsonBody<RecallFeedbackBody>,
) -> Result<Response, ApiError> {
    let recall_id: uuid::Uuid = recall_id.parse().map_err(|_| not_found("recall"))?;
    let body = body.value;
    let mut errors = Vec::new();
    let text = parse_rating_and_text(&body.rating, body.text, &mut errors);
    if !errors.is_empty() {
        return Err(ApiError::invalid(errors));
    }
    let recall = known_recall(&principal, &engine, recall_id).await?;
    let memory = match body.memory_id.as_deref() {
        Some(memory_id) => Some(visible_memory(&principal, &engine, memory_id).await?),
        None => None,
    };
    // A rating of one result must be about a memory that search returned.
    if let (Some(recall), Some(memory)) = (&recall, &memory) {
        let returned = engram_engine::recall_metrics::recalled_ids(recall);
        if !returned.contains(&memory.id) {
            return Err(ApiError::invalid(vec![FieldError::new(
                "memory_id",
                "this memory was not among the results of that recall",
            )]));
        }
    }
    record(
        &principal,
        &engine,
        &spend_guard,
        &meter,
        FeedbackRequest {
            memory,
            recall_id: Some(recall_id),
            rating: body.rating,
            text,
        },
    )
    .await
}

/// Feedback given on a memory, oldest first.
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
    let memory = visible_memory(&principal, &engine, &memory_id).await?;
    let feedback = engine
        .storage()
        .feedback_on_memory(&principal.scope, memory.id)
        .await
        .map_err(|error| ApiError::from(engram_engine::EngineError::from(error)))?;
    Ok(Json(FeedbackListView {
        feedback: feedback.into_iter().map(FeedbackView::from).collect(),
    }))
}

/// Feedback given on a recall, oldest first (an end-user token sees its own).
#[utoipa::path(get, path = "/v1/recalls/{recall_id}/feedback", tag = "memories",
    params(("recall_id" = String, Path)),
    responses((status = 200, body = FeedbackListView)),
    security(("api_key" = ["memories:read"])))]
pub async fn list_recall_feedback(
    principal: Authorized<MemoriesRead>,
    State(engine): State<Arc<MemoryEngine>>,
    Path(recall_id): Path<String>,
) -> Result<Json<FeedbackListView>, ApiError> {
    let recall_id: uuid::Uuid = recall_id.parse().map_err(|_| not_found("recall"))?;
    // Only a recall the caller may see (an end-user token: its own user's).
    known_recall(&principal, &engine, recall_id).await?;
    let feedback = engine
        .storage()
        .feedback_on_recall(&principal.scope, recall_id)
        .await
        .map_err(|error| ApiError::from(engram_engine::EngineError::from(error)))?;
    let end_user = principal.end_user().map(|user| user.as_str().to_string());
    Ok(Json(FeedbackListView {
        feedback: feedback
            .into_iter()
            .filter(|record| end_user.is_none() || record.user_id == end_user)
            .map(FeedbackView::from)
            .collect(),
    }))
}
