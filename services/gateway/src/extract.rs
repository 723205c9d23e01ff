//! Request extractors that fail as problem+json: a JSON body whose errors name the field
//! path, query strings, the `If-Match` and `Idempotency-Key` headers.

use crate::problem::{ApiError, ProblemKind};
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::http::request::Parts;
use engram_core::{FieldError, limits::MAX_EXTERNAL_ID_CHARS};
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};

/// A JSON body plus the raw bytes (for idempotency fingerprints).
pub struct JsonBody<T> {
    pub value: T,
    pub raw: Bytes,
}

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        check_json_content_type(&request)?;
        let raw = read_body(request, state).await?;
        let value = parse_json_object(&raw)?;
        Ok(JsonBody { value, raw })
    }
}

/// A JSON body that may be left out: no body, only white space or `null` is `T::default()`.
pub struct OptionalJsonBody<T>(pub T);

impl<T: DeserializeOwned + Default, S: Send + Sync> FromRequest<S> for OptionalJsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let content_type_check = check_json_content_type(&request);
        let raw = read_body(request, state).await?;
        let text = raw.trim_ascii();
        if text.is_empty() || text == b"null" {
            return Ok(OptionalJsonBody(T::default()));
        }
        content_type_check?;
        parse_json_object(&raw).map(OptionalJsonBody)
    }
}

fn check_json_content_type(request: &Request) -> Result<(), ApiError> {
    let Some(content_type) = request
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
    else {
        return Ok(());
    };
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if essence != "application/json" && !essence.ends_with("+json") {
        return Err(ApiError::new(
            ProblemKind::UnsupportedMediaType,
            format!("Content-Type must be application/json, got {content_type:?}"),
        ));
    }
    Ok(())
}

async fn read_body<S: Send + Sync>(request: Request, state: &S) -> Result<Bytes, ApiError> {
    Bytes::from_request(request, state)
        .await
        .map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(
                    ProblemKind::PayloadTooLarge,
                    format!(
                        "the request body exceeds the limit of {} bytes",
                        engram_core::limits::MAX_REQUEST_BODY_BYTES
                    ),
                )
            } else {
                ApiError::new(
                    ProblemKind::MalformedBody,
                    format!("could not read the request body: {rejection}"),
                )
            }
        })
}

/// The body as `T`, with errors naming the field path.
fn parse_json_object<T: DeserializeOwned>(raw: &[u8]) -> Result<T, ApiError> {
    // Every body of the API is a JSON object; serde would also fill a struct from an
    // array (`[null, null]`), which the published schema does not allow.
    let first = raw.iter().find(|byte| !byte.is_ascii_whitespace());
    if first.is_some_and(|byte| *byte != b'{') {
        return Err(ApiError::invalid(vec![FieldError::new(
            "body",
            "must be a JSON object",
        )]));
    }
    let mut deserializer = serde_json::Deserializer::from_slice(raw);
    let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner();
        let field = if path == "." {
            "body".to_string()
        } else {
            path
        };
        let message = inner.to_string();
        let kind = if inner.is_syntax() || inner.is_eof() {
            ProblemKind::MalformedBody
        } else {
            ProblemKind::ValidationFailed
        };
        ApiError {
            kind,
            detail: format!("{field}: {message}"),
            errors: vec![FieldError::new(field, message)],
            retry_after_seconds: None,
            limit: None,
            code: None,
        }
    })?;
    deserializer.end().map_err(|error| {
        ApiError::new(
            ProblemKind::MalformedBody,
            format!("trailing characters after the JSON body: {error}"),
        )
    })?;
    Ok(value)
}

/// Query string parsed with field-named errors.
pub struct QueryParams<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for QueryParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or("");
        let deserializer =
            serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
        serde_path_to_error::deserialize(deserializer)
            .map(QueryParams)
            .map_err(|error| {
                let field = error.path().to_string();
                let message = error.into_inner().to_string();
                ApiError::invalid(vec![FieldError::new(format!("query.{field}"), message)])
            })
    }
}

/// What `If-Match` takes: a memory or value version (1 or more), bare (`3`) or quoted
/// (`"3"`, `W/"3"`); published as the header's schema.
pub const IF_MATCH_PATTERN: &str = "^(W/)?\"?[1-9][0-9]{0,17}\"?$";

/// The optional `If-Match` header: a memory version, bare (`3`) or quoted (`"3"`).
pub struct IfMatchVersion(pub Option<i64>);

/// The version `If-Match` names, taking exactly what [`IF_MATCH_PATTERN`] describes.
fn parse_if_match(text: &str) -> Option<i64> {
    let unweak = text.strip_prefix("W/").unwrap_or(text);
    let unquoted = unweak.strip_prefix('"').unwrap_or(unweak);
    let digits = unquoted.strip_suffix('"').unwrap_or(unquoted);
    let well_formed = (1..=18).contains(&digits.len())
        && digits.bytes().all(|byte| byte.is_ascii_digit())
        && !digits.starts_with('0');
    if !well_formed {
        return None;
    }
    digits.parse().ok()
}

impl<S: Send + Sync> FromRequestParts<S> for IfMatchVersion {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let Some(value) = parts.headers.get("if-match") else {
            return Ok(IfMatchVersion(None));
        };
        let text = value.to_str().unwrap_or("");
        match parse_if_match(text) {
            Some(version) => Ok(IfMatchVersion(Some(version))),
            None => Err(ApiError::invalid(vec![FieldError::new(
                "header.If-Match",
                format!("must be a version such as 3 or \"3\", got {text:?}"),
            )])),
        }
    }
}

/// What `Idempotency-Key` takes: 1–255 printable ASCII characters, not starting or ending
/// with a space; published as the header's schema.
pub const IDEMPOTENCY_KEY_PATTERN: &str = "^[!-~]([ -~]*[!-~])?$";

/// The optional `Idempotency-Key` header.
pub struct IdempotencyKey(pub Option<String>);

fn is_idempotency_key(text: &str) -> bool {
    (1..=MAX_EXTERNAL_ID_CHARS).contains(&text.len())
        && text.bytes().all(|byte| (b' '..=b'~').contains(&byte))
        && !text.starts_with(' ')
        && !text.ends_with(' ')
}

impl<S: Send + Sync> FromRequestParts<S> for IdempotencyKey {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let Some(value) = parts.headers.get("idempotency-key") else {
            return Ok(IdempotencyKey(None));
        };
        let text = value.to_str().unwrap_or("");
        if !is_idempotency_key(text) {
            return Err(ApiError::invalid(vec![FieldError::new(
                "header.Idempotency-Key",
                format!(
                    "must be 1–{MAX_EXTERNAL_ID_CHARS} printable ASCII characters, not starting or ending with a space"
                ),
            )]));
        }
        Ok(IdempotencyKey(Some(text.to_string())))
    }
}

/// Digest of what makes two requests "the same" for idempotency: route and exact body.
pub fn request_fingerprint(route: &str, query: &str, body: &[u8]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(route.as_bytes());
    hasher.update([0]);
    hasher.update(query.as_bytes());
    hasher.update([0]);
    hasher.update(body);
    hex::encode(hasher.finalize())
}

/// The optional `Engram-Run-Id` header: the agent run a call is linked to.
pub struct RunLinkHeader(pub Option<uuid::Uuid>);

impl<S: Send + Sync> FromRequestParts<S> for RunLinkHeader {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let Some(value) = parts.headers.get("engram-run-id") else {
            return Ok(RunLinkHeader(None));
        };
        match value.to_str().ok().and_then(|text| text.parse().ok()) {
            Some(run_id) => Ok(RunLinkHeader(Some(run_id))),
            None => Err(ApiError::invalid(vec![FieldError::new(
                "header.Engram-Run-Id",
                "must be a run id (a UUID, as POST /v1/runs answered)",
            )])),
        }
    }
}

impl RunLinkHeader {
    /// The run a call names in its header or its body's `run_id`; both must agree.
    pub fn with_body(self, body: Option<uuid::Uuid>) -> Result<Option<uuid::Uuid>, ApiError> {
        match (self.0, body) {
            (Some(header), Some(body)) if header != body => {
                Err(ApiError::invalid(vec![FieldError::new(
                    "run_id",
                    "names another run than the Engram-Run-Id header; send one, or both the same",
                )]))
            }
            (header, body) => Ok(body.or(header)),
        }
    }
}
