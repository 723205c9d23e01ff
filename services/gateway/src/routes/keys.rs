//! `/v1/keys`: a project's API keys, managed with a key that holds the `admin` scope. The
//! secret of a new key is in the creating response only; lists never carry secrets.

use crate::auth::{Authorized, ProjectAdmin};
use crate::extract::{JsonBody, OptionalJsonBody};
use crate::problem::{ApiError, ProblemDocument};
use crate::state::AppState;
use crate::views::ApiKeyView;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use engram_core::NotFoundKind;
use engram_core::ids::ApiKeyId;
use engram_engine::{CreateApiKeyRequest, MemoryEngine, RollApiKeyRequest};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use utoipa::ToSchema;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/keys", get(list_keys).post(create_key))
        .route("/v1/keys/{key_id}/revoke", post(revoke_key))
        .route("/v1/keys/{key_id}/roll", post(roll_key))
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ApiKeyListView {
    pub keys: Vec<ApiKeyView>,
}

/// A new key: the only time its secret is shown.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CreatedApiKeyView {
    pub key: ApiKeyView,
    /// The full key (`egk_…`). Store it now: it cannot be shown again.
    pub secret: String,
    /// For a roll: the replaced key, with the end of its overlap window as `expires_at`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous: Option<ApiKeyView>,
}

/// (For an `Option` field: `null` is `live`.)
fn key_environment() -> utoipa::openapi::schema::Object {
    use engram_core::openapi_schemas::Nullable;
    engram_core::openapi_schemas::one_of(["live", "test"]).nullable()
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateApiKeyBody {
    /// 1–100 characters.
    #[schema(min_length = 1, max_length = 100)]
    pub label: String,
    /// At least one of `memories:read`, `memories:write`, `memories:delete`, `admin`.
    #[schema(schema_with = engram_core::openapi_schemas::key_scopes)]
    pub scopes: Vec<String>,
    /// `live` (default) or `test`.
    #[schema(schema_with = key_environment)]
    pub environment: Option<String>,
    /// When the key stops working; must be in the future.
    pub expires_at: Option<DateTime<Utc>>,
    /// Bind the key to these agents (1–64 agent ids): it writes only as them (a write naming
    /// another agent is a 403; one naming none writes as the key's only agent, or is a 422
    /// when it has several) and reads only their memories and those shared with them. A key
    /// bound to agents mints only within them. Absent: every agent.
    #[schema(example = json!(["support"]), min_items = 1, max_items = 64)]
    pub agents: Option<Vec<String>>,
}

impl CreateApiKeyBody {
    fn into_request(self) -> CreateApiKeyRequest {
        CreateApiKeyRequest {
            label: self.label,
            scopes: self.scopes,
            environment: self.environment,
            expires_at: self.expires_at,
            agents: self.agents,
        }
    }
}

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RollApiKeyBody {
    /// How long the old key keeps working, 0–604800 seconds (default 86400); 0 revokes it
    /// at once.
    #[schema(minimum = 0, maximum = 604800)]
    #[serde(
        default,
        deserialize_with = "engram_core::json_integers::optional_whole"
    )]
    pub overlap_seconds: Option<u64>,
}

fn parse_key_id(text: &str) -> Result<ApiKeyId, ApiError> {
    text.parse().map_err(|_| key_not_found())
}

fn key_not_found() -> ApiError {
    ApiError::not_found(NotFoundKind::ApiKey)
}

/// List the project's API keys (no secrets).
#[utoipa::path(get, path = "/v1/keys", tag = "keys",
    responses((status = 200, body = ApiKeyListView),
        (status = 401, body = ProblemDocument, content_type = "application/problem+json"),
        (status = 403, description = "The API key lacks the `admin` scope", body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["admin"])))]
pub async fn list_keys(
    principal: Authorized<ProjectAdmin>,
    State(engine): State<Arc<MemoryEngine>>,
) -> Result<Json<ApiKeyListView>, ApiError> {
    let keys = engine.list_api_keys_for(principal.principal()).await?;
    Ok(Json(ApiKeyListView {
        keys: keys.iter().map(ApiKeyView::from).collect(),
    }))
}

/// Create an API key for the project; the response holds its secret, shown only once.
#[utoipa::path(post, path = "/v1/keys", tag = "keys", request_body = CreateApiKeyBody,
    responses((status = 201, body = CreatedApiKeyView),
        (status = 403, description = "The API key lacks the `admin` scope", body = ProblemDocument, content_type = "application/problem+json"),
        (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["admin"])))]
pub async fn create_key(
    principal: Authorized<ProjectAdmin>,
    State(engine): State<Arc<MemoryEngine>>,
    body: JsonBody<CreateApiKeyBody>,
) -> Result<(StatusCode, Json<CreatedApiKeyView>), ApiError> {
    let (record, secret) = engine
        .create_api_key_for(principal.principal(), body.value.into_request())
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(CreatedApiKeyView {
            key: ApiKeyView::from(&record),
            secret,
            previous: None,
        }),
    ))
}

/// Revoke an API key at once (idempotent).
#[utoipa::path(post, path = "/v1/keys/{key_id}/revoke", tag = "keys", params(("key_id" = String, Path)),
    responses((status = 200, body = ApiKeyView),
        (status = 403, description = "The API key lacks the `admin` scope", body = ProblemDocument, content_type = "application/problem+json"),
        (status = 404, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["admin"])))]
pub async fn revoke_key(
    principal: Authorized<ProjectAdmin>,
    State(engine): State<Arc<MemoryEngine>>,
    Path(key_id): Path<String>,
) -> Result<Json<ApiKeyView>, ApiError> {
    let key_id = parse_key_id(&key_id)?;
    let record = engine
        .revoke_api_key_for(principal.principal(), key_id)
        .await?;
    Ok(Json(ApiKeyView::from(&record)))
}

/// Replace an API key by a new one with the same label, scopes and environment; the old
/// one keeps working for `overlap_seconds`.
#[utoipa::path(post, path = "/v1/keys/{key_id}/roll", tag = "keys", params(("key_id" = String, Path)),
    request_body(content = Option<RollApiKeyBody>, description = "Optional: no body rolls with the default overlap"),
    responses((status = 201, body = CreatedApiKeyView),
        (status = 403, description = "The API key lacks the `admin` scope", body = ProblemDocument, content_type = "application/problem+json"),
        (status = 404, description = "Unknown, revoked or expired key", body = ProblemDocument, content_type = "application/problem+json"),
        (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["admin"])))]
pub async fn roll_key(
    principal: Authorized<ProjectAdmin>,
    State(engine): State<Arc<MemoryEngine>>,
    Path(key_id): Path<String>,
    OptionalJsonBody(roll): OptionalJsonBody<RollApiKeyBody>,
) -> Result<(StatusCode, Json<CreatedApiKeyView>), ApiError> {
    let key_id = parse_key_id(&key_id)?;
    let request = RollApiKeyRequest {
        key_id,
        overlap_seconds: roll.overlap_seconds,
    };
    let rolled = engine
        .roll_api_key_for(principal.principal(), request)
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(CreatedApiKeyView {
            key: ApiKeyView::from(&rolled.key),
            secret: rolled.secret,
            previous: Some(ApiKeyView::from(&rolled.previous)),
        }),
    ))
}
