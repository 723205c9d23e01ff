//! Service endpoints: liveness, readiness, the OpenAPI document and its human-readable view.

use crate::openapi;
use crate::problem::{ApiError, ProblemKind};
use crate::state::AppState;
use axum::extract::State;
use axum::response::{Html, IntoResponse};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/openapi.json", get(openapi_document))
        .route("/docs", get(docs_page))
}

async fn healthz() -> impl IntoResponse {
    Json(json!({"status": "ok"}))
}

async fn readyz(State(state): State<AppState>) -> Result<Json<serde_json::Value>, ApiError> {
    match state.engine.readiness().await {
        (Ok(()), Ok(())) => Ok(Json(
            json!({"status": "ready", "database": "ok", "index": "ok"}),
        )),
        (storage, index) => {
            let mut problem = ApiError::new(
                ProblemKind::DependencyUnavailable,
                format!(
                    "database: {}; index: {}",
                    storage.err().unwrap_or_else(|| "ok".to_string()),
                    index.err().unwrap_or_else(|| "ok".to_string())
                ),
            );
            problem.retry_after_seconds = Some(5);
            Err(problem)
        }
    }
}

async fn openapi_document() -> impl IntoResponse {
    Json(openapi::document_json())
}

async fn docs_page() -> Html<String> {
    Html(openapi::render_docs_html())
}
