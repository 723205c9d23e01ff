//! One table of error codes (slug, title, status) behind every error the API returns, and
//! the middleware that turns every error response into RFC 9457 problem+json with the
//! request id — including the ones axum and tower produce themselves.

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use engram_core::permissions::PrincipalKind;
use engram_core::{FieldError, InvalidInput, NotFoundKind};
use engram_engine::EngineError;
use http_body_util::BodyExt;
use serde::Serialize;

pub const PROBLEM_CONTENT_TYPE: &str = "application/problem+json";
const PROBLEM_TYPE_BASE: &str = "https://engram.dev/problems/";

/// Every kind of problem the API can answer with. The slug is the stable part of `type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProblemKind {
    MalformedBody,
    ValidationFailed,
    Unauthorized,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    RequestTimeout,
    VersionConflict,
    PayloadTooLarge,
    UnsupportedMediaType,
    IdempotencyKeyReused,
    /// A retry whose first answer named a memory deleted since (409): nothing written.
    IdempotentResultErased,
    RateLimited,
    DependencyUnavailable,
    MemoryLocked,
    LegalHold,
    /// A monthly quota would be passed (429).
    QuotaExceeded,
    /// The project's hard-capped monthly budget is spent (402).
    BudgetExceeded,
    /// The project's embedding setting rules the request out (409): Engram cannot embed for
    /// a project that sends its own vectors, the setting changes only while the project is
    /// empty, or the deployment does not offer the model.
    EmbeddingUnavailable,
    /// The request conflicts with the project's current state (a name already taken,
    /// traffic shares that would pass 100 %) (409).
    Conflict,
    /// Too much work of this kind is running or queued (password hashing during a storm of
    /// sign-ins) (503, with Retry-After).
    ServerBusy,
    Internal,
}

impl ProblemKind {
    pub const fn slug(self) -> &'static str {
        match self {
            ProblemKind::MalformedBody => "malformed-body",
            ProblemKind::ValidationFailed => "validation-failed",
            ProblemKind::Unauthorized => "unauthorized",
            ProblemKind::Forbidden => "forbidden",
            ProblemKind::NotFound => "not-found",
            ProblemKind::MethodNotAllowed => "method-not-allowed",
            ProblemKind::RequestTimeout => "request-timeout",
            ProblemKind::VersionConflict => "version-conflict",
            ProblemKind::PayloadTooLarge => "payload-too-large",
            ProblemKind::UnsupportedMediaType => "unsupported-media-type",
            ProblemKind::IdempotencyKeyReused => "idempotency-key-reused",
            ProblemKind::IdempotentResultErased => "idempotent-result-erased",
            ProblemKind::RateLimited => "rate-limited",
            ProblemKind::DependencyUnavailable => "dependency-unavailable",
            ProblemKind::MemoryLocked => "memory-locked",
            ProblemKind::LegalHold => "legal-hold",
            ProblemKind::QuotaExceeded => "quota-exceeded",
            ProblemKind::BudgetExceeded => "budget-exceeded",
            ProblemKind::EmbeddingUnavailable => "embedding-unavailable",
            ProblemKind::Conflict => "conflict",
            ProblemKind::ServerBusy => "server-busy",
            ProblemKind::Internal => "internal",
        }
    }

    pub const fn title(self) -> &'static str {
        match self {
            ProblemKind::MalformedBody => {
                "The request body is not valid JSON of the expected shape"
            }
            ProblemKind::ValidationFailed => "The request is semantically invalid",
            ProblemKind::Unauthorized => "Missing or invalid credential",
            ProblemKind::Forbidden => "The credential lacks the required scope",
            ProblemKind::NotFound => "Not found",
            ProblemKind::MethodNotAllowed => "Method not allowed",
            ProblemKind::RequestTimeout => "The request took too long",
            ProblemKind::VersionConflict => "Version conflict",
            ProblemKind::PayloadTooLarge => "Request body too large",
            ProblemKind::UnsupportedMediaType => "Unsupported media type",
            ProblemKind::IdempotencyKeyReused => "Idempotency key reused with a different request",
            ProblemKind::IdempotentResultErased => {
                "The first answer for this idempotency key was erased"
            }
            ProblemKind::RateLimited => "Too many requests",
            ProblemKind::DependencyUnavailable => "A dependency is unavailable",
            ProblemKind::MemoryLocked => "The memory is immutable or under legal hold",
            ProblemKind::LegalHold => "Data of this subject is under legal hold",
            ProblemKind::QuotaExceeded => "A usage quota of the project is used up",
            ProblemKind::BudgetExceeded => "The project's monthly budget is spent",
            ProblemKind::EmbeddingUnavailable => {
                "The project's embedding setting does not allow this"
            }
            ProblemKind::Conflict => "The request conflicts with the project's current state",
            ProblemKind::ServerBusy => "The server is busy; retry shortly",
            ProblemKind::Internal => "Internal error",
        }
    }

    pub const fn status(self) -> StatusCode {
        match self {
            ProblemKind::MalformedBody => StatusCode::BAD_REQUEST,
            ProblemKind::ValidationFailed => StatusCode::UNPROCESSABLE_ENTITY,
            ProblemKind::Unauthorized => StatusCode::UNAUTHORIZED,
            ProblemKind::Forbidden => StatusCode::FORBIDDEN,
            ProblemKind::NotFound => StatusCode::NOT_FOUND,
            ProblemKind::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ProblemKind::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            ProblemKind::VersionConflict => StatusCode::CONFLICT,
            ProblemKind::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ProblemKind::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ProblemKind::IdempotencyKeyReused => StatusCode::UNPROCESSABLE_ENTITY,
            ProblemKind::IdempotentResultErased => StatusCode::CONFLICT,
            ProblemKind::RateLimited => StatusCode::TOO_MANY_REQUESTS,
            ProblemKind::DependencyUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            ProblemKind::MemoryLocked | ProblemKind::LegalHold => StatusCode::CONFLICT,
            ProblemKind::QuotaExceeded => StatusCode::TOO_MANY_REQUESTS,
            ProblemKind::BudgetExceeded => StatusCode::PAYMENT_REQUIRED,
            ProblemKind::EmbeddingUnavailable | ProblemKind::Conflict => StatusCode::CONFLICT,
            ProblemKind::ServerBusy => StatusCode::SERVICE_UNAVAILABLE,
            ProblemKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub(crate) fn for_status(status: StatusCode) -> Self {
        match status {
            StatusCode::BAD_REQUEST => ProblemKind::MalformedBody,
            StatusCode::UNAUTHORIZED => ProblemKind::Unauthorized,
            StatusCode::FORBIDDEN => ProblemKind::Forbidden,
            StatusCode::NOT_FOUND => ProblemKind::NotFound,
            StatusCode::METHOD_NOT_ALLOWED => ProblemKind::MethodNotAllowed,
            StatusCode::REQUEST_TIMEOUT => ProblemKind::RequestTimeout,
            StatusCode::CONFLICT => ProblemKind::VersionConflict,
            StatusCode::PAYLOAD_TOO_LARGE => ProblemKind::PayloadTooLarge,
            StatusCode::UNSUPPORTED_MEDIA_TYPE => ProblemKind::UnsupportedMediaType,
            StatusCode::UNPROCESSABLE_ENTITY => ProblemKind::ValidationFailed,
            StatusCode::TOO_MANY_REQUESTS => ProblemKind::RateLimited,
            StatusCode::SERVICE_UNAVAILABLE => ProblemKind::DependencyUnavailable,
            _ => ProblemKind::Internal,
        }
    }
}

/// The problem document (RFC 9457).
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct ProblemDocument {
    #[serde(rename = "type")]
    pub problem_type: String,
    pub title: String,
    pub status: u16,
    pub detail: String,
    /// What went wrong, more precisely than `type` (`memory-not-found`, `file-not-found`,
    /// …); the `type` slug where there is nothing more to say. Never carries an id.
    #[serde(default)]
    pub code: String,
    #[serde(default)]
    pub request_id: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(value_type = Vec<Object>)]
    pub errors: Vec<FieldError>,
    /// For `quota-exceeded`, `budget-exceeded` and a project's `rate-limited`: which limit,
    /// its value, what was used, the period and when it resets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<LimitProblem>,
}

/// The limit a request ran into.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct LimitProblem {
    /// `monthly_budget`, `monthly_quota.<unit>` or `requests_per_minute`.
    pub name: String,
    /// The limit (millionths of `currency` for the budget).
    pub maximum: i64,
    /// Used in the period so far.
    pub used: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
    /// `month` or `minute`.
    pub period: String,
    pub resets_at: chrono::DateTime<chrono::Utc>,
}

/// An error answer from a handler.
#[derive(Debug)]
pub struct ApiError {
    pub kind: ProblemKind,
    pub detail: String,
    pub errors: Vec<FieldError>,
    pub retry_after_seconds: Option<u64>,
    /// Boxed: rarely present, and it would make every handler's error large.
    pub limit: Option<Box<LimitProblem>>,
    /// The problem's `code`, when it says more than the kind's slug.
    pub code: Option<String>,
}

impl ApiError {
    pub fn new(kind: ProblemKind, detail: impl Into<String>) -> Self {
        Self {
            kind,
            detail: detail.into(),
            errors: Vec::new(),
            retry_after_seconds: None,
            limit: None,
            code: None,
        }
    }

    /// `404` for a kind of thing that does not exist in this project (or for this
    /// end-user): `code` is the kind's (`memory-not-found`, `file-not-found`, …).
    pub fn not_found(kind: NotFoundKind) -> Self {
        let mut problem = Self::new(
            ProblemKind::NotFound,
            format!("no {kind} with this id exists in this project"),
        );
        problem.code = Some(kind.code().to_string());
        problem
    }

    pub fn invalid(errors: Vec<FieldError>) -> Self {
        let detail = errors
            .iter()
            .map(|error| format!("{}: {}", error.field, error.message))
            .collect::<Vec<_>>()
            .join("; ");
        Self {
            kind: ProblemKind::ValidationFailed,
            detail,
            errors,
            retry_after_seconds: None,
            limit: None,
            code: None,
        }
    }

    fn unavailable(detail: String) -> Self {
        Self {
            kind: ProblemKind::DependencyUnavailable,
            detail,
            errors: Vec::new(),
            retry_after_seconds: Some(5),
            limit: None,
            code: None,
        }
    }
}

impl From<InvalidInput> for ApiError {
    fn from(invalid: InvalidInput) -> Self {
        ApiError::invalid(invalid.0)
    }
}

impl From<EngineError> for ApiError {
    /// The one conversion from the engine's failures: the engine's `code()` table gives
    /// `code`, this match only chooses the problem type and words the detail.
    fn from(error: EngineError) -> Self {
        let code = error.code();
        let mut problem = match error {
            EngineError::NotFound(kind) => ApiError::not_found(kind),
            EngineError::VersionConflict { current_version } => ApiError::new(
                ProblemKind::VersionConflict,
                format!("If-Match does not match: the memory is at version {current_version}"),
            ),
            EngineError::IdempotencyKeyReused => ApiError::new(
                ProblemKind::IdempotencyKeyReused,
                "this Idempotency-Key was already used with a different request body; use a new key",
            ),
            EngineError::IdempotentResultErased => ApiError::new(
                ProblemKind::IdempotentResultErased,
                "a memory of this request's first answer was deleted since, and its content with the stored answer; nothing was written. To store it again, send it with a new Idempotency-Key",
            ),
            EngineError::Invalid(invalid) => invalid.into(),
            EngineError::StorageUnavailable(_) | EngineError::DatabaseLocked(_) => {
                ApiError::unavailable("the metadata database is unavailable".to_string())
            }
            EngineError::IndexUnavailable(_) => {
                ApiError::unavailable("the vector index is unavailable".to_string())
            }
            EngineError::EmbedderUnavailable(_) => {
                ApiError::unavailable("the embedding model is unavailable".to_string())
            }
            EngineError::Locked(message) => ApiError::new(ProblemKind::MemoryLocked, message),
            EngineError::EmbeddingUnavailable(message) => {
                ApiError::new(ProblemKind::EmbeddingUnavailable, message)
            }
            EngineError::LlmUnavailable(message) => {
                ApiError::unavailable(format!("the LLM is unavailable: {message}"))
            }
            EngineError::SubjectHeld { memory_ids } => {
                let mut problem = ApiError::new(
                    ProblemKind::LegalHold,
                    format!(
                        "{} memories of this subject are under legal hold; lift the holds (PUT /v1/memories/{{id}}/flags) before erasing",
                        memory_ids.len()
                    ),
                );
                problem.errors = memory_ids
                    .iter()
                    .map(|memory_id| {
                        FieldError::new(format!("memories/{memory_id}"), "under legal hold")
                    })
                    .collect();
                problem
            }
            EngineError::Forbidden(message) => ApiError::new(ProblemKind::Forbidden, message),
            EngineError::Conflict(message) | EngineError::MemoryLimitReached(message) => {
                ApiError::new(ProblemKind::Conflict, message)
            }
            EngineError::EmbeddingSpaceChanged => {
                ApiError::new(ProblemKind::Conflict, error.to_string())
            }
            EngineError::InProgress(message) => {
                ApiError::new(ProblemKind::VersionConflict, message)
            }
            EngineError::ScopeNotGrantable { missing, caller } => ApiError::new(
                ProblemKind::Forbidden,
                scope_not_grantable(missing, &caller),
            ),
            EngineError::LimitReached { reached, currency } => limit_problem(*reached, currency),
            EngineError::Unauthenticated(message) => {
                ApiError::new(ProblemKind::Unauthorized, message)
            }
            EngineError::WrongCredentials => {
                ApiError::new(ProblemKind::Unauthorized, "wrong e-mail or password")
            }
            EngineError::TooManyAttempts {
                retry_after_seconds,
            } => {
                let mut problem = ApiError::new(
                    ProblemKind::RateLimited,
                    format!("too many failed sign-ins; retry in {retry_after_seconds} s"),
                );
                problem.retry_after_seconds = Some(retry_after_seconds);
                problem
            }
            EngineError::Busy {
                retry_after_seconds,
            } => {
                let mut problem = ApiError::new(
                    ProblemKind::ServerBusy,
                    format!("the server is busy; retry in {retry_after_seconds} s"),
                );
                problem.retry_after_seconds = Some(retry_after_seconds);
                problem
            }
            EngineError::Internal(message) => {
                tracing::error!(error = %message, "internal error");
                ApiError::new(
                    ProblemKind::Internal,
                    "an internal error occurred; the request id identifies it in the logs",
                )
            }
        };
        problem.code = Some(code.to_string());
        problem
    }
}

/// Why a key cannot be given a scope, naming what the caller holds.
fn scope_not_grantable(missing: engram_core::ApiScope, caller: &PrincipalKind) -> String {
    match caller {
        PrincipalKind::ApiKey(scopes) | PrincipalKind::EndUserToken(scopes) => format!(
            "a key never holds more than the key that mints or rolls it: this credential lacks the `{missing}` scope; it holds: {}",
            scopes.names().join(", ")
        ),
        PrincipalKind::ConsoleMember(role) => format!(
            "a key never holds more than its maker: the console role `{}` cannot give the `{missing}` scope",
            role.as_str()
        ),
        PrincipalKind::Operator => {
            format!("a key never holds more than its maker: the caller lacks the `{missing}` scope")
        }
    }
}

/// The problem for a reached limit: 402 for the budget, 429 otherwise, with Retry-After.
fn limit_problem(reached: engram_core::usage::LimitReached, currency: Option<String>) -> ApiError {
    use engram_engine::format_micros;
    let (kind, detail) = match reached.limit.as_str() {
        "monthly_budget" => (
            ProblemKind::BudgetExceeded,
            format!(
                "the project's monthly budget of {} is spent ({} so far); it resets at {}",
                format_micros(reached.maximum, currency.as_deref()),
                format_micros(reached.used, currency.as_deref()),
                reached.resets_at.to_rfc3339()
            ),
        ),
        "requests_per_minute" => (
            ProblemKind::RateLimited,
            format!(
                "the project allows {} requests per minute; retry after {}",
                reached.maximum,
                reached.resets_at.to_rfc3339()
            ),
        ),
        quota => (
            ProblemKind::QuotaExceeded,
            format!(
                "{quota}: {} of {} used this month; it resets at {}",
                reached.used,
                reached.maximum,
                reached.resets_at.to_rfc3339()
            ),
        ),
    };
    let wait_seconds = (reached.resets_at - chrono::Utc::now())
        .num_seconds()
        .max(1);
    let mut problem = ApiError::new(kind, detail);
    problem.retry_after_seconds = u64::try_from(wait_seconds).ok();
    problem.limit = Some(Box::new(LimitProblem {
        name: reached.limit,
        maximum: reached.maximum,
        used: reached.used,
        currency,
        period: reached.period.to_string(),
        resets_at: reached.resets_at,
    }));
    problem
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let document = ProblemDocument {
            problem_type: format!("{PROBLEM_TYPE_BASE}{}", self.kind.slug()),
            title: self.kind.title().to_string(),
            status: self.kind.status().as_u16(),
            code: self.code.unwrap_or_else(|| self.kind.slug().to_string()),
            detail: self.detail,
            request_id: None,
            errors: self.errors,
            limit: self.limit.map(|limit| *limit),
        };
        let mut response = (self.kind.status(), axum::Json(document)).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(PROBLEM_CONTENT_TYPE),
        );
        if self.kind == ProblemKind::Unauthorized {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if let Some(seconds) = self.retry_after_seconds
            && let Ok(value) = HeaderValue::from_str(&seconds.to_string())
        {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        response
    }
}

pub async fn unknown_route() -> ApiError {
    let mut problem = ApiError::new(
        ProblemKind::NotFound,
        "no such route; see /openapi.json for the API",
    );
    problem.code = Some("route-not-found".to_string());
    problem
}

/// `door` answering every error as problem+json: the native API's format. Other doors
/// (the console's HTML pages, a Mem0-compatible door's `{"detail": …}`) are mounted beside
/// it, outside this layer, and keep their own bodies.
pub fn speaking_problems(door: axum::Router) -> axum::Router {
    door.layer(axum::middleware::from_fn(ensure_problem_responses))
}

/// Error responses that did not come from `ApiError` (body limit, timeout, method not
/// allowed, a rejected path) are rewritten as problems; every problem gets the request id.
async fn ensure_problem_responses(request: Request, next: Next) -> Response {
    let request_id = request
        .headers()
        .get("x-request-id")
        .and_then(|value| value.to_str().ok())
        .map(str::to_string);
    let response = next.run(request).await;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let is_problem = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|value| {
            value
                .as_bytes()
                .starts_with(PROBLEM_CONTENT_TYPE.as_bytes())
        });
    let (mut parts, body) = response.into_parts();
    let body_bytes = body
        .collect()
        .await
        .map(|collected| collected.to_bytes())
        .unwrap_or_else(|_| Bytes::new());
    let mut document = if is_problem {
        match serde_json::from_slice::<ProblemDocument>(&body_bytes) {
            Ok(mut document) => {
                if document.code.is_empty() {
                    document.code = ProblemKind::for_status(status).slug().to_string();
                }
                document
            }
            Err(_) => return Response::from_parts(parts, Body::from(body_bytes)),
        }
    } else {
        let kind = ProblemKind::for_status(status);
        let original_text = String::from_utf8_lossy(&body_bytes).trim().to_string();
        let detail = match kind {
            ProblemKind::PayloadTooLarge => format!(
                "the request body exceeds the limit of {} bytes",
                engram_core::limits::MAX_REQUEST_BODY_BYTES
            ),
            ProblemKind::RequestTimeout => {
                "the request did not complete within the time limit".to_string()
            }
            ProblemKind::MethodNotAllowed => "this route does not accept that method".to_string(),
            _ if !original_text.is_empty() && original_text.len() < 500 => original_text,
            _ => kind.title().to_string(),
        };
        ProblemDocument {
            problem_type: format!("{PROBLEM_TYPE_BASE}{}", kind.slug()),
            title: kind.title().to_string(),
            status: status.as_u16(),
            code: kind.slug().to_string(),
            detail,
            request_id: None,
            errors: Vec::new(),
            limit: None,
        }
    };
    document.request_id = request_id;
    let body = serde_json::to_vec(&document).unwrap_or_default();
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(PROBLEM_CONTENT_TYPE),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An outage of any dependency is a 503 problem the client can retry, never a 500.
    #[test]
    fn dependency_outages_answer_503_with_retry_after() {
        for outage in [
            EngineError::IndexUnavailable("connection refused".into()),
            EngineError::StorageUnavailable("pool timed out".into()),
            EngineError::EmbedderUnavailable("model missing".into()),
        ] {
            let response = ApiError::from(outage).into_response();
            assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
            assert_eq!(
                response.headers()[header::CONTENT_TYPE],
                PROBLEM_CONTENT_TYPE
            );
            assert_eq!(response.headers()[header::RETRY_AFTER], "5");
        }
    }
}
