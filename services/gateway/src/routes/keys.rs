//! `/v1/keys`: a project's API keys, managed with a key that holds the `admin` scope. The
//! secret of a new key is in the creating response only; lists never carry secrets.

use crate::auth::{Authorized, ProjectAdmin, ProjectPrincipal};
use crate::extract::JsonBody;
use crate::problem::{ApiError, ProblemDocument, ProblemKind};
use crate::state::{AppState, CredentialVerifier};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use engram_core::ids::ApiKeyId;
use engram_core::{ApiScope, ApiScopes, FieldError, KeyEnvironment};
use engram_storage::{ApiKeyRecord, NewApiKey, StorageError};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Longest overlap a rolled key may keep working: 7 days.
pub const MAX_ROLL_OVERLAP_SECONDS: u64 = 7 * 24 * 60 * 60;
const DEFAULT_ROLL_OVERLAP_SECONDS: u64 = 24 * 60 * 60;
const MAX_LABEL_CHARS: usize = 100;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/keys", get(list_keys).post(create_key))
        .route("/v1/keys/{key_id}/revoke", post(revoke_key))
        .route("/v1/keys/{key_id}/roll", post(roll_key))
}

/// An API key as the API shows it (never its secret).
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct ApiKeyView {
    pub id: String,
    pub label: String,
    /// The public start of the key, `egk_<environment>_<public id>_`, to recognise it.
    pub prefix: String,
    /// `live | test`
    pub environment: String,
    /// Of `memories:read`, `memories:write`, `memories:delete`, `admin`.
    pub scopes: Vec<String>,
    /// `active | expired | revoked`
    pub state: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
}

impl From<&ApiKeyRecord> for ApiKeyView {
    fn from(record: &ApiKeyRecord) -> Self {
        let now = Utc::now();
        let state = if record.revoked_at.is_some() {
            "revoked"
        } else if record
            .expires_at
            .is_some_and(|expires_at| expires_at <= now)
        {
            "expired"
        } else {
            "active"
        };
        Self {
            id: record.id.to_string(),
            label: record.label.clone(),
            prefix: format!("egk_{}_{}_", record.environment.as_str(), record.public_id),
            environment: record.environment.as_str().to_string(),
            scopes: record.scopes.names(),
            state: state.to_string(),
            created_at: record.created_at,
            expires_at: record.expires_at,
            last_used_at: record.last_used_at,
            revoked_at: record.revoked_at,
        }
    }
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

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateApiKeyBody {
    /// 1–100 characters.
    pub label: String,
    /// At least one of `memories:read`, `memories:write`, `memories:delete`, `admin`.
    pub scopes: Vec<String>,
    /// `live` (default) or `test`.
    pub environment: Option<String>,
    /// When the key stops working; must be in the future.
    pub expires_at: Option<DateTime<Utc>>,
}

impl CreateApiKeyBody {
    fn into_new_key(self) -> Result<NewApiKey, Vec<FieldError>> {
        let mut errors = Vec::new();
        let label = self.label.trim().to_string();
        if label.is_empty() || label.chars().count() > MAX_LABEL_CHARS {
            errors.push(FieldError::new(
                "label",
                format!("must be 1–{MAX_LABEL_CHARS} characters"),
            ));
        } else if label.chars().any(char::is_control) {
            errors.push(FieldError::new(
                "label",
                "must not contain control characters",
            ));
        }
        let mut scopes = Vec::with_capacity(self.scopes.len());
        for (position, name) in self.scopes.iter().enumerate() {
            match ApiScope::parse(name) {
                Some(scope) => scopes.push(scope),
                None => errors.push(FieldError::new(
                    format!("scopes[{position}]"),
                    format!(
                        "unknown scope {name:?}; use {}",
                        ApiScope::ALL.map(ApiScope::as_str).join(", ")
                    ),
                )),
            }
        }
        if self.scopes.is_empty() {
            errors.push(FieldError::new("scopes", "name at least one scope"));
        }
        let environment = match self.environment.as_deref() {
            None => KeyEnvironment::Live,
            Some(text) => KeyEnvironment::parse(text).unwrap_or_else(|| {
                errors.push(FieldError::new("environment", "must be `live` or `test`"));
                KeyEnvironment::Live
            }),
        };
        if let Some(expires_at) = self.expires_at
            && expires_at <= Utc::now()
        {
            errors.push(FieldError::new("expires_at", "must be in the future"));
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(NewApiKey {
            label,
            scopes: ApiScopes::from_scopes(scopes),
            environment,
            expires_at: self.expires_at,
        })
    }
}

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RollApiKeyBody {
    /// How long the old key keeps working, 0–604800 seconds (default 86400); 0 revokes it
    /// at once.
    pub overlap_seconds: Option<u64>,
}

fn parse_key_id(text: &str) -> Result<ApiKeyId, ApiError> {
    text.parse().map_err(|_| key_not_found())
}

fn key_not_found() -> ApiError {
    ApiError::not_found("api key", "no API key with this id in the project")
}

fn key_error(error: StorageError) -> ApiError {
    match error {
        StorageError::NotFound => key_not_found(),
        other => ApiError::from(engram_engine::EngineError::from(other)),
    }
}

/// List the project's API keys (no secrets).
#[utoipa::path(get, path = "/v1/keys", tag = "keys",
    responses((status = 200, body = ApiKeyListView),
        (status = 401, body = ProblemDocument, content_type = "application/problem+json"),
        (status = 403, description = "The API key lacks the `admin` scope", body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["admin"])))]
pub async fn list_keys(
    principal: Authorized<ProjectAdmin>,
    State(credentials): State<CredentialVerifier>,
) -> Result<Json<ApiKeyListView>, ApiError> {
    let keys = credentials
        .storage
        .list_api_keys(&principal.scope)
        .await
        .map_err(key_error)?;
    Ok(Json(ApiKeyListView {
        keys: keys.iter().map(ApiKeyView::from).collect(),
    }))
}

/// `403 forbidden` naming the first scope of `scopes` the calling key does not hold itself: a
/// key never mints (or rolls into) a key with more power than its own.
fn refuse_wider_than_minter(
    principal: &ProjectPrincipal,
    scopes: &engram_core::ApiScopes,
) -> Result<(), ApiError> {
    match principal.scopes.missing_from(scopes).first() {
        None => Ok(()),
        Some(missing) => Err(ApiError::new(
            ProblemKind::Forbidden,
            format!(
                "a key never holds more than the key that mints or rolls it: this API key lacks the `{missing}` scope; it holds: {}",
                principal.scopes.names().join(", ")
            ),
        )),
    }
}

/// Create an API key for the project; the response holds its secret, shown only once.
#[utoipa::path(post, path = "/v1/keys", tag = "keys", request_body = CreateApiKeyBody,
    responses((status = 201, body = CreatedApiKeyView),
        (status = 403, description = "The API key lacks the `admin` scope", body = ProblemDocument, content_type = "application/problem+json"),
        (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["admin"])))]
pub async fn create_key(
    principal: Authorized<ProjectAdmin>,
    State(credentials): State<CredentialVerifier>,
    body: JsonBody<CreateApiKeyBody>,
) -> Result<(StatusCode, Json<CreatedApiKeyView>), ApiError> {
    let mut new_key = body.value.into_new_key().map_err(ApiError::invalid)?;
    refuse_wider_than_minter(&principal, &new_key.scopes)?;
    // Nor longer: a key that expires (or is rolled away, its overlap running) cannot mint one
    // that outlives it.
    let minter = match principal.credential_key_id() {
        Some(minter_id) => credentials
            .storage
            .api_key(&principal.scope, minter_id)
            .await
            .map_err(key_error)?,
        None => None,
    };
    if let Some(minter_expires_at) = minter.and_then(|key| key.expires_at) {
        new_key.expires_at = Some(
            new_key
                .expires_at
                .map_or(minter_expires_at, |asked| asked.min(minter_expires_at)),
        );
    }
    let (record, secret) = credentials
        .storage
        .create_api_key(
            &principal.scope,
            &new_key,
            &credentials.api_key_pepper,
            &principal.actor(),
        )
        .await
        .map_err(key_error)?;
    tracing::info!(key_id = %record.id, created_by = %principal.actor().id, "api key created");
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
    State(credentials): State<CredentialVerifier>,
    Path(key_id): Path<String>,
) -> Result<Json<ApiKeyView>, ApiError> {
    let key_id = parse_key_id(&key_id)?;
    // Revoking cuts off whoever uses the key: only keys within the caller's own scopes.
    let revoked = credentials
        .storage
        .api_key(&principal.scope, key_id)
        .await
        .map_err(key_error)?
        .ok_or_else(key_not_found)?;
    refuse_wider_than_minter(&principal, &revoked.scopes)?;
    let record = credentials
        .storage
        .revoke_api_key(&principal.scope, key_id, &principal.actor())
        .await
        .map_err(key_error)?;
    tracing::info!(key_id = %record.id, revoked_by = %principal.actor().id, "api key revoked");
    Ok(Json(ApiKeyView::from(&record)))
}

/// Replace an API key by a new one with the same label, scopes and environment; the old
/// one keeps working for `overlap_seconds`.
#[utoipa::path(post, path = "/v1/keys/{key_id}/roll", tag = "keys", params(("key_id" = String, Path)),
    request_body = RollApiKeyBody,
    responses((status = 201, body = CreatedApiKeyView),
        (status = 403, description = "The API key lacks the `admin` scope", body = ProblemDocument, content_type = "application/problem+json"),
        (status = 404, description = "Unknown, revoked or expired key", body = ProblemDocument, content_type = "application/problem+json"),
        (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["admin"])))]
pub async fn roll_key(
    principal: Authorized<ProjectAdmin>,
    State(credentials): State<CredentialVerifier>,
    Path(key_id): Path<String>,
    body: axum::body::Bytes,
) -> Result<(StatusCode, Json<CreatedApiKeyView>), ApiError> {
    let key_id = parse_key_id(&key_id)?;
    // The body is optional: an empty POST rolls with the default overlap.
    let roll: RollApiKeyBody = if body.iter().all(u8::is_ascii_whitespace) {
        RollApiKeyBody::default()
    } else {
        serde_json::from_slice(&body).map_err(|error| {
            ApiError::new(
                ProblemKind::MalformedBody,
                format!("the body must be {{\"overlap_seconds\": <0–{MAX_ROLL_OVERLAP_SECONDS}>}} or empty: {error}"),
            )
        })?
    };
    let overlap_seconds = roll.overlap_seconds.unwrap_or(DEFAULT_ROLL_OVERLAP_SECONDS);
    // A roll hands out a new secret with the old key's scopes: the same rule as minting.
    let rolled = credentials
        .storage
        .api_key(&principal.scope, key_id)
        .await
        .map_err(key_error)?
        .ok_or_else(key_not_found)?;
    refuse_wider_than_minter(&principal, &rolled.scopes)?;
    if overlap_seconds > MAX_ROLL_OVERLAP_SECONDS {
        return Err(ApiError::invalid(vec![FieldError::new(
            "overlap_seconds",
            format!("must be 0–{MAX_ROLL_OVERLAP_SECONDS}"),
        )]));
    }
    let (new_record, secret, old_record) = credentials
        .storage
        .roll_api_key(
            &principal.scope,
            key_id,
            std::time::Duration::from_secs(overlap_seconds),
            &credentials.api_key_pepper,
            &principal.actor(),
        )
        .await
        .map_err(key_error)?;
    tracing::info!(old_key_id = %old_record.id, new_key_id = %new_record.id, overlap_seconds, "api key rolled");
    Ok((
        StatusCode::CREATED,
        Json(CreatedApiKeyView {
            key: ApiKeyView::from(&new_record),
            secret,
            previous: Some(ApiKeyView::from(&old_record)),
        }),
    ))
}
