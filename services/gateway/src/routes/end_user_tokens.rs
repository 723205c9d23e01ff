//! `/v1/end-user-tokens`: a project key mints a short-lived token confined to one end-user
//! and to a subset of its own memory scopes; an admin key rotates the project's signing key,
//! which voids every token minted before.

use crate::auth::{Authorized, PrincipalCredential, ProjectAdmin, ProjectPrincipal};
use crate::end_user_tokens::{DEFAULT_END_USER_TOKEN_LIFETIME, MAX_END_USER_TOKEN_LIFETIME};
use crate::extract::JsonBody;
use crate::problem::{ApiError, ProblemDocument, ProblemKind};
use crate::state::{AppState, CredentialVerifier};
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use engram_core::{ApiScope, ApiScopes, ExternalId, FieldError};
use serde::{Deserialize, Serialize};
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
    pub user_id: String,
    /// Of `memories:read`, `memories:write`, `memories:delete`; never more than the minting
    /// key holds, never `admin`. Default: read and write (as far as the key holds them).
    pub scopes: Option<Vec<String>>,
    /// 1–86400 seconds, default 3600.
    pub ttl_seconds: Option<u64>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EndUserTokenView {
    /// Send as `Authorization: Bearer <token>`.
    pub token: String,
    pub token_type: String,
    pub user_id: String,
    pub scopes: Vec<String>,
    pub expires_at: DateTime<Utc>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SigningKeyView {
    /// The new key generation; tokens of earlier generations no longer work.
    pub generation: i64,
}

fn storage_error(error: engram_storage::StorageError) -> ApiError {
    ApiError::from(engram_engine::EngineError::from(error))
}

/// Mint a token for one end-user of the project (for browser and mobile apps).
#[utoipa::path(post, path = "/v1/end-user-tokens", tag = "end-user tokens", request_body = MintEndUserTokenBody,
    responses((status = 201, body = EndUserTokenView),
        (status = 403, description = "An end-user token cannot mint, and a token never exceeds the minting key's scopes", body = ProblemDocument, content_type = "application/problem+json"),
        (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = [])))]
pub async fn mint_end_user_token(
    principal: ProjectPrincipal,
    State(credentials): State<CredentialVerifier>,
    body: JsonBody<MintEndUserTokenBody>,
) -> Result<(StatusCode, Json<EndUserTokenView>), ApiError> {
    let PrincipalCredential::ApiKey {
        key_id: minting_key_id,
        ..
    } = principal.credential.clone()
    else {
        return Err(ApiError::new(
            ProblemKind::Forbidden,
            "end-user tokens cannot mint tokens; use a project API key",
        ));
    };
    let body = body.value;
    let mut errors = Vec::new();
    let user_id = ExternalId::parse(&body.user_id)
        .map_err(|message| errors.push(FieldError::new("user_id", message)))
        .ok();
    let ttl_seconds = body
        .ttl_seconds
        .unwrap_or(DEFAULT_END_USER_TOKEN_LIFETIME.as_secs());
    if !(1..=MAX_END_USER_TOKEN_LIFETIME.as_secs()).contains(&ttl_seconds) {
        errors.push(FieldError::new(
            "ttl_seconds",
            format!("must be 1–{}", MAX_END_USER_TOKEN_LIFETIME.as_secs()),
        ));
    }
    let requested: Vec<ApiScope> = match &body.scopes {
        None => [ApiScope::MemoriesRead, ApiScope::MemoriesWrite]
            .into_iter()
            .filter(|scope| principal.scopes.contains(*scope))
            .collect(),
        Some(names) => {
            let mut scopes = Vec::new();
            for (position, name) in names.iter().enumerate() {
                match ApiScope::parse(name) {
                    Some(ApiScope::Admin) => errors.push(FieldError::new(
                        format!("scopes[{position}]"),
                        "`admin` cannot be given to an end-user token",
                    )),
                    Some(scope) => scopes.push(scope),
                    None => errors.push(FieldError::new(
                        format!("scopes[{position}]"),
                        format!("unknown scope {name:?}"),
                    )),
                }
            }
            scopes
        }
    };
    if requested.is_empty() && errors.is_empty() {
        errors.push(FieldError::new(
            "scopes",
            "the token would hold no scope the minting key has",
        ));
    }
    if !errors.is_empty() {
        return Err(ApiError::invalid(errors));
    }
    let scopes = ApiScopes::from_scopes(requested);
    if !principal.scopes.covers(&scopes) {
        return Err(ApiError::new(
            ProblemKind::Forbidden,
            format!(
                "a token never exceeds its parent: the minting key holds only {}",
                principal.scopes.names().join(", ")
            ),
        ));
    }
    let Some(user_id) = user_id else {
        return Err(ApiError::invalid(vec![FieldError::new(
            "user_id",
            "is required",
        )]));
    };
    let generation = credentials
        .storage
        .end_user_key_generation(&principal.scope)
        .await
        .map_err(storage_error)?;
    let (token, expires_at) = credentials
        .end_user_tokens
        .mint(
            principal.scope.project_id(),
            generation,
            &user_id,
            &scopes,
            minting_key_id,
            std::time::Duration::from_secs(ttl_seconds),
        )
        .map_err(|message| ApiError::new(ProblemKind::Internal, message))?;
    Ok((
        StatusCode::CREATED,
        Json(EndUserTokenView {
            token,
            token_type: "Bearer".to_string(),
            user_id: user_id.into_string(),
            scopes: scopes.names(),
            expires_at,
        }),
    ))
}

/// Replace the project's end-user token signing key: every token minted before stops
/// working at once.
#[utoipa::path(post, path = "/v1/end-user-tokens/rotate-signing-key", tag = "end-user tokens",
    responses((status = 200, body = SigningKeyView),
        (status = 403, description = "The API key lacks the `admin` scope", body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["admin"])))]
pub async fn rotate_signing_key(
    principal: Authorized<ProjectAdmin>,
    State(credentials): State<CredentialVerifier>,
) -> Result<Json<SigningKeyView>, ApiError> {
    let generation = credentials
        .storage
        .rotate_end_user_signing_key(&principal.scope, &principal.actor())
        .await
        .map_err(storage_error)?;
    Ok(Json(SigningKeyView { generation }))
}
