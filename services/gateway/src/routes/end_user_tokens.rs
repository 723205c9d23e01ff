//! `/v1/end-user-tokens`: a project key mints a short-lived token confined to one end-user
//! and to a subset of its own memory scopes; an admin key rotates the project's signing key,
//! which voids every token minted before.

use crate::auth::{Authorized, ProjectAdmin, ProjectPrincipal};
use crate::extract::JsonBody;
use crate::problem::{ApiError, ProblemDocument};
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use engram_engine::{MemoryEngine, MintEndUserTokenRequest};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use utoipa::ToSchema;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/end-user-tokens", post(mint_end_user_token))
        .route(
            "/v1/end-user-tokens/rotate-signing-key",
            post(rotate_signing_key),
        )
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MintEndUserTokenBody {
    /// The end-user every call of the token is confined to.
    #[schema(schema_with = engram_core::openapi_schemas::external_id)]
    pub user_id: String,
    /// Of `memories:read`, `memories:write`, `memories:delete`; never more than the minting
    /// key holds, never `admin`. Default: read and write (as far as the key holds them).
    #[schema(schema_with = engram_core::openapi_schemas::optional_end_user_token_scopes)]
    pub scopes: Option<Vec<String>>,
    /// 1–86400 seconds, default 3600.
    #[schema(minimum = 1, maximum = 86400)]
    #[serde(
        default,
        deserialize_with = "engram_core::json_integers::optional_whole"
    )]
    pub ttl_seconds: Option<u64>,
    /// Bind the token to these agents, within the minting key's (default: the key's agents;
    /// every agent for a key bound to none).
    #[schema(example = json!(["support"]), min_items = 1, max_items = 64)]
    pub agents: Option<Vec<String>>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EndUserTokenView {
    /// Send as `Authorization: Bearer <token>`.
    pub token: String,
    pub token_type: String,
    pub user_id: String,
    pub scopes: Vec<String>,
    /// The agents the token is bound to (also in its `agents` claim); null: every agent.
    pub agents: Option<Vec<String>>,
    pub expires_at: DateTime<Utc>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SigningKeyView {
    /// The new key generation; tokens of earlier generations no longer work.
    pub generation: i64,
}

#[utoipa::path(post, path = "/v1/end-user-tokens", tag = "end-user tokens", request_body = MintEndUserTokenBody,
    responses((status = 201, body = EndUserTokenView),
        (status = 403, description = "An end-user token cannot mint, and a token never exceeds the minting key's scopes", body = ProblemDocument, content_type = "application/problem+json"),
        (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = [])))]
pub async fn mint_end_user_token(
    principal: ProjectPrincipal,
    State(engine): State<Arc<MemoryEngine>>,
    body: JsonBody<MintEndUserTokenBody>,
) -> Result<(StatusCode, Json<EndUserTokenView>), ApiError> {
    let body = body.value;
    let request = MintEndUserTokenRequest {
        user_id: body.user_id,
        scopes: body.scopes,
        ttl_seconds: body.ttl_seconds,
        agents: body.agents,
    };
    let minted = engine
        .mint_end_user_token_for(principal.principal(), request)
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(EndUserTokenView {
            token: minted.token,
            token_type: "Bearer".to_string(),
            user_id: minted.user_id.into_string(),
            scopes: minted.scopes.names(),
            agents: minted.agents.as_ref().map(crate::views::agent_names),
            expires_at: minted.expires_at,
        }),
    ))
}

#[utoipa::path(post, path = "/v1/end-user-tokens/rotate-signing-key", tag = "end-user tokens",
    responses((status = 200, body = SigningKeyView),
        (status = 403, description = "The API key lacks the `admin` scope", body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["admin"])))]
pub async fn rotate_signing_key(
    principal: Authorized<ProjectAdmin>,
    State(engine): State<Arc<MemoryEngine>>,
) -> Result<Json<SigningKeyView>, ApiError> {
    let generation = engine
        .rotate_end_user_signing_key_for(principal.principal())
        .await?;
    Ok(Json(SigningKeyView { generation }))
}
