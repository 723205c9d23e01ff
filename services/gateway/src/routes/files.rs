//! File ingest: `POST /v1/files` stores a plain-text or Markdown file and answers `202` with
//! the ingest task (its chunks become memories with `source = file`); `GET /v1/files/{id}`
//! shows the file's status and memories; `DELETE` removes the file and its memories.

use crate::auth::{Authorized, MemoriesDelete, MemoriesRead, MemoriesWrite};
use crate::extract::QueryParams;
use crate::problem::{ApiError, ProblemDocument, ProblemKind};
use crate::state::AppState;
use crate::views::TaskView;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use engram_core::NotFoundKind;
use engram_core::files::FileRecord;
use engram_core::files::{FileFormat, FileName, MAX_FILE_BYTES};
use engram_core::{ExternalId, FieldError, MemoryKind};
use engram_engine::{MemoryEngine, UploadFileRequest};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use utoipa::{IntoParams, ToSchema};

pub fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/v1/files",
            // The file is the body: a route limit above the API's 1 MiB, checked again below
            // so the answer names the file limit.
            post(upload_file).layer(DefaultBodyLimit::max(MAX_FILE_BYTES + 1)),
        )
        .route("/v1/files/{file_id}", get(get_file).delete(delete_file))
}

/// The published schema of an uploaded file: UTF-8 text that is not only white space.
pub struct FileText;

impl utoipa::PartialSchema for FileText {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        engram_core::openapi_schemas::non_blank_text(MAX_FILE_BYTES)
            .description(Some(
                "The file's text: UTF-8, at most 4 MiB, not only white space",
            ))
            .build()
            .into()
    }
}

impl utoipa::ToSchema for FileText {}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct UploadFileQuery {
    /// The file's name, e.g. `handbook.md` (1–255 characters, no directories).
    /// Required (published so by `openapi::REQUIRED_QUERY_PARAMETERS`; parsed here as
    /// optional so its absence is refused with a hint, not a serde message).
    #[param(schema_with = engram_core::openapi_schemas::file_name)]
    pub name: Option<String>,
    #[param(schema_with = engram_core::openapi_schemas::external_id)]
    pub user_id: Option<String>,
    #[param(schema_with = engram_core::openapi_schemas::external_id)]
    pub agent_id: Option<String>,
    #[param(schema_with = engram_core::openapi_schemas::external_id)]
    pub session_id: Option<String>,
    /// Kind of the memories it becomes (default `semantic`).
    #[param(schema_with = engram_core::openapi_schemas::memory_kind)]
    pub kind: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct FileView {
    pub id: String,
    pub name: String,
    /// `plain_text | markdown`
    pub format: String,
    pub size_bytes: i64,
    /// SHA-256 of the text.
    pub sha256: String,
    pub user_id: Option<String>,
    pub agent_id: Option<String>,
    pub session_id: Option<String>,
    pub kind: String,
    /// `queued | ingesting | ingested | failed`
    pub status: String,
    pub chunk_count: i32,
    /// The memories its chunks became, in file order.
    pub memory_ids: Vec<String>,
    pub task_id: String,
    pub error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<FileRecord> for FileView {
    fn from(file: FileRecord) -> Self {
        Self {
            id: file.id.to_string(),
            name: file.name,
            format: file.format,
            size_bytes: file.size_bytes,
            sha256: file.sha256,
            user_id: file.user_id,
            agent_id: file.agent_id,
            session_id: file.session_id,
            kind: file.kind,
            status: file.status.as_str().to_string(),
            chunk_count: file.chunk_count,
            memory_ids: file.memory_ids.iter().map(ToString::to_string).collect(),
            task_id: file.task_id.to_string(),
            error: file.error,
            created_at: file.created_at,
            updated_at: file.updated_at,
        }
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct UploadedFileView {
    pub file: FileView,
    /// Follow it at `GET /v1/tasks/{id}` (progress counts chunks).
    pub task: TaskView,
}

fn optional_id(
    value: Option<&str>,
    field: &str,
    errors: &mut Vec<FieldError>,
) -> Option<ExternalId> {
    let value = value?;
    ExternalId::parse(value)
        .map_err(|message| errors.push(FieldError::new(field, message)))
        .ok()
}

/// Store a plain-text or Markdown file (the request body, up to 4 MiB of UTF-8; media type
/// `text/plain`, `text/markdown`, or `application/octet-stream` with a `.txt`/`.md` name)
/// and ingest it in the background: cut into chunks of about 900 characters (Markdown by
/// section, each chunk headed by its section path), each stored as a memory with
/// `source = file` and metadata `file_id`, `file_name`, `chunk_index`, `chunk_count`,
/// `heading`. Billed as `file_bytes` once ingested.
#[utoipa::path(post, path = "/v1/files", tag = "files", params(UploadFileQuery),
    request_body(content = inline(FileText), content_type = "text/markdown"),
    responses((status = 202, body = UploadedFileView),
        (status = 403, description = "The API key lacks the `memories:write` scope", body = ProblemDocument, content_type = "application/problem+json"),
        (status = 413, body = ProblemDocument, content_type = "application/problem+json"),
        (status = 415, body = ProblemDocument, content_type = "application/problem+json"),
        (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["memories:write"])))]
pub async fn upload_file(
    principal: Authorized<MemoriesWrite>,
    State(engine): State<Arc<MemoryEngine>>,
    QueryParams(query): QueryParams<UploadFileQuery>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            too_large()
        } else {
            ApiError::new(ProblemKind::MalformedBody, rejection.body_text())
        }
    })?;
    if body.len() > MAX_FILE_BYTES {
        return Err(too_large());
    }
    let mut errors = Vec::new();
    let name = match query.name.as_deref() {
        Some(name) => FileName::parse(name)
            .map_err(|message| errors.push(FieldError::new("name", message)))
            .ok(),
        None => {
            errors.push(FieldError::new(
                "name",
                "is required, e.g. ?name=handbook.md",
            ));
            None
        }
    };
    let user_id = optional_id(query.user_id.as_deref(), "user_id", &mut errors);
    let agent_id = optional_id(query.agent_id.as_deref(), "agent_id", &mut errors);
    let session_id = optional_id(query.session_id.as_deref(), "session_id", &mut errors);
    let kind = match query.kind.as_deref() {
        None => MemoryKind::Semantic,
        Some(kind) => kind.parse::<MemoryKind>().unwrap_or_else(|message| {
            errors.push(FieldError::new("kind", message));
            MemoryKind::Semantic
        }),
    };
    let text = match std::str::from_utf8(&body) {
        Ok(text) => Some(text.to_string()),
        Err(error) => {
            errors.push(FieldError::new(
                "body",
                format!("the file is not UTF-8 text (byte {})", error.valid_up_to()),
            ));
            None
        }
    };
    let (Some(name), Some(text), true) = (name, text, errors.is_empty()) else {
        return Err(ApiError::invalid(errors));
    };
    let media_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("application/octet-stream");
    let format = FileFormat::detect(media_type, &name).ok_or_else(|| {
        ApiError::new(
            ProblemKind::UnsupportedMediaType,
            format!(
                "{media_type:?} for {:?} is not supported: send text/plain or text/markdown (or application/octet-stream with a .txt or .md name)",
                name.as_str()
            ),
        )
    })?;
    let request = UploadFileRequest {
        name,
        format,
        text,
        bytes: body.len(),
        user_id,
        agent_id,
        session_id,
        kind,
    };
    let (file, task) = engine
        .upload_file_for(principal.principal(), request)
        .await?;
    let location = format!("/v1/tasks/{}", task.id);
    let mut response = (
        StatusCode::ACCEPTED,
        Json(UploadedFileView {
            file: FileView::from(file),
            task: TaskView::from(task),
        }),
    )
        .into_response();
    if let Ok(value) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    Ok(response)
}

fn too_large() -> ApiError {
    ApiError::new(
        ProblemKind::PayloadTooLarge,
        format!("a file may be at most {MAX_FILE_BYTES} bytes (4 MiB)"),
    )
}

fn file_not_found() -> ApiError {
    ApiError::not_found(NotFoundKind::File)
}

/// The file of this project (and, for an end-user token, of that end-user).
fn parse_file_id(file_id: &str) -> Result<uuid::Uuid, ApiError> {
    file_id.parse().map_err(|_| file_not_found())
}

#[utoipa::path(get, path = "/v1/files/{file_id}", tag = "files", params(("file_id" = String, Path)),
    responses((status = 200, body = FileView),
        (status = 404, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["memories:read"])))]
pub async fn get_file(
    principal: Authorized<MemoriesRead>,
    State(engine): State<Arc<MemoryEngine>>,
    Path(file_id): Path<String>,
) -> Result<Json<FileView>, ApiError> {
    let file = engine
        .get_file_for(principal.principal(), parse_file_id(&file_id)?)
        .await?;
    Ok(Json(FileView::from(file)))
}

/// Delete a file and every memory it became (audited per memory). A memory under legal
/// hold or immutable stops it with `409`, and the file stays.
#[utoipa::path(delete, path = "/v1/files/{file_id}", tag = "files", params(("file_id" = String, Path)),
    responses((status = 204, description = "Deleted with its memories"),
        (status = 404, body = ProblemDocument, content_type = "application/problem+json"),
        (status = 409, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["memories:delete"])))]
pub async fn delete_file(
    principal: Authorized<MemoriesDelete>,
    State(engine): State<Arc<MemoryEngine>>,
    Path(file_id): Path<String>,
) -> Result<StatusCode, ApiError> {
    engine
        .delete_file_for(principal.principal(), parse_file_id(&file_id)?)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
