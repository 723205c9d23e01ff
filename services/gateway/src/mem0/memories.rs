//! Mem0's memory routes (add, get, list, search, update, delete, delete_all, history, batch,
//! feedback, exports) in their v1, v2 and v3 forms, each read into one engine use case.

use super::filters;
use super::views::{history_object, memory_object, scored_memory_object};
use super::{bad_request, check_query_hints, check_tenant_hints, query_pairs, query_value};
use crate::auth::ProjectPrincipal;
use crate::extract::JsonBody;
use crate::problem::{ApiError, ProblemKind};
use axum::Json;
use axum::extract::{OriginalUri, Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, NaiveDate, TimeZone, Utc};
use engram_core::conversation::MessageRole;
use engram_core::limits::MAX_TOP_K;
use engram_core::search::{SearchMemoriesRequest, SearchRequest, SearchTuning};
use engram_core::{ExternalId, FieldError, Memory, MemoryFilter, MemoryId};
use engram_engine::{
    DeleteMatchingRequest, DeleteMemoryRequest, EditMemoryRequest, FeedbackRequest, MemoryEdit,
    MemoryEngine, QueryMemoriesRequest, RememberMessagesRequest, RememberedMessage,
    RememberedMessages,
};
use serde_json::{Map, Value, json};
use std::sync::Arc;

/// Mem0's page size when none is given, and its largest.
const DEFAULT_PAGE_SIZE: u64 = 100;
const MAX_PAGE_SIZE: u64 = 200;
/// Deepest a page may reach (page × page_size): pages are walked with the engine's cursors.
const MAX_PAGED_MEMORIES: u64 = 10_000;
/// Most memories one batch update or delete names (Mem0's limit, the edit use case's).
const MAX_BATCH: usize = engram_engine::MAX_EDITS_PER_REQUEST;
/// Most memories an export holds.
const MAX_EXPORTED: u64 = 1_000;

type Engine = State<Arc<MemoryEngine>>;

// --- small readers -------------------------------------------------------------------------

fn text_of<'a>(body: &'a Value, key: &str) -> Option<&'a str> {
    body.get(key).and_then(Value::as_str)
}

fn check_body_hints(principal: &ProjectPrincipal, body: &Value) -> Result<(), ApiError> {
    check_tenant_hints(
        principal,
        text_of(body, "org_id"),
        text_of(body, "project_id"),
    )
}

/// A memory id from the path: Mem0 answers a malformed one with 400.
fn memory_id_of(text: &str) -> Result<MemoryId, ApiError> {
    text.parse()
        .map_err(|_| bad_request("memory_id should be a valid UUID"))
}

fn invalid(field: &str, message: impl Into<String>) -> ApiError {
    ApiError::invalid(vec![FieldError::new(field, message)])
}

/// `YYYY-MM-DD` (the end of that UTC day) or an RFC 3339 time.
fn expiry_of(value: &Value, field: &str) -> Result<Option<DateTime<Utc>>, ApiError> {
    match value {
        Value::Null => Ok(None),
        Value::String(text) => {
            if let Ok(date) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
                let end = date
                    .and_hms_opt(23, 59, 59)
                    .map(|moment| Utc.from_utc_datetime(&moment));
                return end.map(Some).ok_or_else(|| invalid(field, "is not a date"));
            }
            DateTime::parse_from_rfc3339(text)
                .map(|at| Some(at.with_timezone(&Utc)))
                .map_err(|_| invalid(field, "must be YYYY-MM-DD or an RFC 3339 time"))
        }
        _ => Err(invalid(field, "must be YYYY-MM-DD or null")),
    }
}

/// Epoch seconds (integer or fraction, also as text) or an RFC 3339 time.
fn timestamp_of(value: &Value, field: &str) -> Result<Option<DateTime<Utc>>, ApiError> {
    let seconds = match value {
        Value::Null => return Ok(None),
        Value::Number(number) => number.as_f64(),
        Value::String(text) => match text.parse::<f64>() {
            Ok(seconds) => Some(seconds),
            Err(_) => {
                return DateTime::parse_from_rfc3339(text)
                    .map(|at| Some(at.with_timezone(&Utc)))
                    .map_err(|_| invalid(field, "must be epoch seconds or an RFC 3339 time"));
            }
        },
        _ => None,
    };
    let at = seconds
        .filter(|seconds| seconds.is_finite())
        .and_then(|seconds| DateTime::from_timestamp_millis((seconds * 1000.0) as i64));
    at.map(Some)
        .ok_or_else(|| invalid(field, "must be epoch seconds or an RFC 3339 time"))
}

fn metadata_of(value: Option<&Value>, field: &str) -> Result<Map<String, Value>, ApiError> {
    match value {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(object)) => Ok(object.clone()),
        Some(_) => Err(invalid(field, "must be an object")),
    }
}

/// Keep only `fields` (and `id`) of each object, when the caller named fields.
fn select_fields(objects: Vec<Value>, fields: Option<&Value>) -> Vec<Value> {
    let Some(fields) = fields
        .and_then(Value::as_array)
        .filter(|fields| !fields.is_empty())
    else {
        return objects;
    };
    let wanted: Vec<&str> = fields.iter().filter_map(Value::as_str).collect();
    objects
        .into_iter()
        .map(|object| match object {
            Value::Object(map) => Value::Object(
                map.into_iter()
                    .filter(|(key, _)| key == "id" || wanted.contains(&key.as_str()))
                    .collect(),
            ),
            other => other,
        })
        .collect()
}

// --- add -----------------------------------------------------------------------------------

/// The entity ids of an add: at the top level, or inside `filters` (2.x's typed options).
fn add_request(body: &Value) -> Result<RememberMessagesRequest, ApiError> {
    let mut errors = Vec::new();
    let filters = body.get("filters").filter(|value| value.is_object());
    let entity = |key: &str, errors: &mut Vec<FieldError>| -> Option<ExternalId> {
        let (field, text) = match (text_of(body, key), filters.and_then(|f| text_of(f, key))) {
            (Some(text), _) => (key.to_string(), text),
            (None, Some(text)) => (format!("filters.{key}"), text),
            (None, None) => return None,
        };
        ExternalId::parse(text)
            .map_err(|message| errors.push(FieldError::new(field, message)))
            .ok()
    };
    let user_id = entity("user_id", &mut errors);
    let agent_id = entity("agent_id", &mut errors);
    let session_id = entity("run_id", &mut errors);
    let app_id = text_of(body, "app_id")
        .or_else(|| filters.and_then(|filters| text_of(filters, "app_id")))
        .map(str::to_string);
    let messages = match body.get("messages") {
        Some(Value::String(text)) => vec![RememberedMessage {
            role: MessageRole::User,
            content: text.clone(),
        }],
        Some(Value::Object(_)) => {
            message_list(std::slice::from_ref(&body["messages"]), &mut errors)
        }
        Some(Value::Array(items)) => message_list(items, &mut errors),
        _ => {
            errors.push(FieldError::new(
                "messages",
                "is required: a string, a message {role, content} or a list of them",
            ));
            Vec::new()
        }
    };
    let mut metadata = match metadata_of(body.get("metadata"), "metadata") {
        Ok(metadata) => metadata,
        Err(error) => {
            errors.extend(error.errors);
            Map::new()
        }
    };
    if let Some(app_id) = app_id {
        metadata.insert(
            engram_core::memory_filter::APP_ID_METADATA_KEY.to_string(),
            Value::String(app_id),
        );
    }
    let categories = match body.get("categories") {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    };
    let expires_at = match body.get("expiration_date") {
        None => None,
        Some(value) => expiry_of(value, "expiration_date").unwrap_or_else(|error| {
            errors.extend(error.errors);
            None
        }),
    };
    let occurred_at = match body.get("timestamp") {
        None => None,
        Some(value) => timestamp_of(value, "timestamp").unwrap_or_else(|error| {
            errors.extend(error.errors);
            None
        }),
    };
    // Engram's own field beside Mem0's: who among the project's agents reads the memories.
    let visibility = match body.get("visibility") {
        None | Some(Value::Null) => None,
        Some(value) => match value.as_str().map(str::parse::<engram_core::Visibility>) {
            Some(Ok(visibility)) => Some(visibility),
            Some(Err(message)) => {
                errors.push(FieldError::new("visibility", message));
                None
            }
            None => {
                errors.push(FieldError::new(
                    "visibility",
                    "must be `private` or `shared`",
                ));
                None
            }
        },
    };
    // And the team of agents they are shared with (Engram's too).
    let shared_with = match body.get("shared_with") {
        None | Some(Value::Null) => None,
        Some(value) => match value.as_str().map(engram_core::ExternalId::parse) {
            Some(Ok(team)) => Some(team),
            Some(Err(message)) => {
                errors.push(FieldError::new("shared_with", message));
                None
            }
            None => {
                errors.push(FieldError::new("shared_with", "must be a team's name"));
                None
            }
        },
    };
    if !errors.is_empty() {
        return Err(ApiError::invalid(errors));
    }
    Ok(RememberMessagesRequest {
        visibility,
        shared_with,
        messages,
        user_id,
        agent_id,
        session_id,
        metadata,
        categories,
        expires_at,
        occurred_at,
        infer: body.get("infer").and_then(Value::as_bool).unwrap_or(true),
    })
}

fn message_list(items: &[Value], errors: &mut Vec<FieldError>) -> Vec<RememberedMessage> {
    let mut messages = Vec::with_capacity(items.len());
    for (position, item) in items.iter().enumerate() {
        let path = format!("messages[{position}]");
        let role = match text_of(item, "role")
            .unwrap_or("user")
            .parse::<MessageRole>()
        {
            Ok(role) => role,
            Err(message) => {
                errors.push(FieldError::new(format!("{path}.role"), message));
                continue;
            }
        };
        let Some(content) = text_of(item, "content") else {
            errors.push(FieldError::new(
                format!("{path}.content"),
                "must be text (Engram remembers text messages only)",
            ));
            continue;
        };
        messages.push(RememberedMessage {
            role,
            content: content.to_string(),
        });
    }
    messages
}

struct AddResult {
    id: String,
    event: &'static str,
    memory: Option<String>,
}

async fn remember(
    principal: &ProjectPrincipal,
    engine: &MemoryEngine,
    body: &Value,
) -> Result<(RememberedMessages, Vec<AddResult>), ApiError> {
    check_body_hints(principal, body)?;
    let request = add_request(body)?;
    let remembered = engine
        .remember_messages_for(principal.principal(), request)
        .await?;
    let mut results: Vec<AddResult> = remembered
        .memories
        .iter()
        .filter(|_| remembered.changes.is_empty())
        .map(|memory| AddResult {
            id: memory.id.to_string(),
            event: "ADD",
            memory: (!memory.content_omitted).then(|| memory.content.clone()),
        })
        .collect();
    for change in &remembered.changes {
        use engram_core::conversation::ReconcileAction;
        let event = match change.action {
            ReconcileAction::Add | ReconcileAction::Supersede => "ADD",
            ReconcileAction::Update => "UPDATE",
            ReconcileAction::Delete => "DELETE",
            ReconcileAction::Noop => continue,
        };
        let Some(memory_id) = change.memory_id else {
            continue;
        };
        results.push(AddResult {
            id: memory_id.to_string(),
            event,
            memory: change.content.clone(),
        });
    }
    Ok((remembered, results))
}

/// `POST /v3/memories/add/` (2.x): written before the answer, so always `SUCCEEDED`.
pub async fn add_v3(
    principal: ProjectPrincipal,
    State(engine): Engine,
    body: JsonBody<Value>,
) -> Result<Json<Value>, ApiError> {
    let (remembered, results) = remember(&principal, &engine, &body.value).await?;
    let results: Vec<Value> = results
        .into_iter()
        .map(|result| {
            json!({
                "id": result.id,
                "event": result.event,
                "memory": result.memory,
                "data": {"memory": result.memory},
            })
        })
        .collect();
    let mut answer = json!({
        "status": "SUCCEEDED",
        "event_id": uuid::Uuid::now_v7().to_string(),
        "message": "Memories stored successfully",
        "method": remembered.method.as_str(),
        "results": results,
    });
    if let Some(note) = remembered.note {
        answer["note"] = Value::String(note);
    }
    Ok(Json(answer))
}

/// `POST /v1/memories/` (0.1.x, 1.0.x): `{"results", "relations"}` for output format v1.1,
/// else the bare list.
pub async fn add_v1(
    principal: ProjectPrincipal,
    State(engine): Engine,
    body: JsonBody<Value>,
) -> Result<Json<Value>, ApiError> {
    let (remembered, results) = remember(&principal, &engine, &body.value).await?;
    let results: Vec<Value> = results
        .into_iter()
        .map(|result| json!({"id": result.id, "memory": result.memory, "event": result.event}))
        .collect();
    if text_of(&body.value, "output_format") == Some("v1.1") {
        let mut answer =
            json!({"results": results, "relations": [], "method": remembered.method.as_str()});
        if let Some(note) = remembered.note {
            answer["note"] = Value::String(note);
        }
        return Ok(Json(answer));
    }
    Ok(Json(Value::Array(results)))
}

// --- get, update, delete, history ----------------------------------------------------------

/// `GET /v1/memories/{memory_id}/`.
pub async fn get_memory(
    principal: ProjectPrincipal,
    State(engine): Engine,
    Path(memory_id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    check_query_hints(&principal, &query_pairs(query))?;
    let memory_id = memory_id_of(&memory_id)?;
    let memory = engine
        .get_memory_for(principal.principal(), memory_id)
        .await?;
    Ok(Json(memory_object(&memory)))
}

/// `PUT /v1/memories/{memory_id}/`: text, metadata, timestamp and expiry, in place (the id
/// stays; the version and history grow).
pub async fn update_memory(
    principal: ProjectPrincipal,
    State(engine): Engine,
    Path(memory_id): Path<String>,
    RawQuery(query): RawQuery,
    body: JsonBody<Value>,
) -> Result<Json<Value>, ApiError> {
    check_query_hints(&principal, &query_pairs(query))?;
    check_body_hints(&principal, &body.value)?;
    let memory_id = memory_id_of(&memory_id)?;
    let edit = memory_edit(&body.value, "")?;
    let edited = engine
        .edit_memory_for(
            principal.principal(),
            EditMemoryRequest {
                memory_id,
                edit,
                client_vector: None,
                expected_version: None,
            },
        )
        .await?;
    Ok(Json(memory_object(&edited.memory)))
}

/// The change an update body asks for; at least one field.
fn memory_edit(body: &Value, path: &str) -> Result<MemoryEdit, ApiError> {
    let field = |name: &str| format!("{path}{name}");
    let content = match body.get("text") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(text.clone()),
        Some(_) => return Err(invalid(&field("text"), "must be text")),
    };
    let metadata = match body.get("metadata") {
        None | Some(Value::Null) => None,
        Some(value) => Some(metadata_of(Some(value), &field("metadata"))?),
    };
    let expires_at = match body.get("expiration_date") {
        None => None,
        Some(value) => Some(expiry_of(value, &field("expiration_date"))?),
    };
    let occurred_at = match body.get("timestamp") {
        None => None,
        Some(value) => timestamp_of(value, &field("timestamp"))?,
    };
    if content.is_none() && metadata.is_none() && expires_at.is_none() && occurred_at.is_none() {
        return Err(invalid(
            &field("text"),
            "name at least one of text, metadata, timestamp or expiration_date",
        ));
    }
    Ok(MemoryEdit {
        content,
        metadata,
        categories: None,
        expires_at,
        occurred_at,
        visibility: None,
        shared_with: None,
        reason: None,
        // Mem0's `app_id` is not part of its metadata: new metadata leaves it as it is.
        keep_app_id: true,
    })
}

/// `DELETE /v1/memories/{memory_id}/`: a real delete (content erased; the audit log keeps a
/// content-free record). `delete_linked` is accepted; Engram keeps no links to follow.
pub async fn delete_memory(
    principal: ProjectPrincipal,
    State(engine): Engine,
    Path(memory_id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let pairs = query_pairs(query);
    check_query_hints(&principal, &pairs)?;
    let memory_id = memory_id_of(&memory_id)?;
    engine
        .delete_memory_for(
            principal.principal(),
            DeleteMemoryRequest {
                memory_id,
                reason: None,
            },
        )
        .await?;
    let mut answer = json!({"message": "Memory deleted successfully!"});
    if query_value(&pairs, "delete_linked") == Some("true") {
        answer["cascade_count"] = json!(0);
    }
    Ok(Json(answer))
}

/// `GET /v1/memories/{memory_id}/history/`: the bare list Mem0 answers, oldest first.
pub async fn history(
    principal: ProjectPrincipal,
    State(engine): Engine,
    Path(memory_id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    check_query_hints(&principal, &query_pairs(query))?;
    let id = memory_id_of(&memory_id)?;
    let entries = engine.memory_history_for(principal.principal(), id).await?;
    // The subject fields come from the memory while it exists.
    let memory = engine.get_memory_for(principal.principal(), id).await.ok();
    let mut previous: Option<String> = None;
    let mut listed = Vec::with_capacity(entries.len());
    for entry in &entries {
        listed.push(history_object(
            &id.to_string(),
            entry,
            previous.as_deref(),
            memory.as_ref(),
        ));
        if entry.content.is_some() {
            previous.clone_from(&entry.content);
        }
    }
    Ok(Json(Value::Array(listed)))
}

// --- list ----------------------------------------------------------------------------------

/// The filter of a list or search: Mem0's tree, and the extra body fields that narrow it.
fn narrowed_filter(tree: Option<Value>, extras: &Value) -> Result<MemoryFilter, ApiError> {
    let mut parts: Vec<Value> = tree.into_iter().collect();
    if let Some(categories) = extras.get("categories").filter(|value| value.is_array()) {
        parts.push(json!({"categories": {"in": categories}}));
    }
    if let Some(start) = text_of(extras, "start_date") {
        parts.push(json!({"created_at": {"gte": start}}));
    }
    if let Some(end) = text_of(extras, "end_date") {
        parts.push(json!({"created_at": {"lte": end}}));
    }
    if let Some(keywords) = text_of(extras, "keywords").filter(|text| !text.is_empty()) {
        parts.push(json!({"keywords": {"icontains": keywords}}));
    }
    if let Some(metadata) = extras.get("metadata").filter(|value| value.is_object()) {
        parts.push(json!({"metadata": metadata}));
    }
    let tree = match parts.len() {
        0 => return Ok(MemoryFilter::everything()),
        1 => parts.remove(0),
        _ => json!({"AND": parts}),
    };
    filters::parse(&tree, "filters").map_err(ApiError::invalid)
}

/// The entity ids given at the top level (older forms) as filter conditions.
fn top_level_entities(source: impl Fn(&str) -> Option<String>) -> Vec<Value> {
    ["user_id", "agent_id", "app_id", "run_id"]
        .into_iter()
        .filter_map(|key| source(key).map(|value| json!({ key: value })))
        .collect()
}

fn refuse_top_level_entities(body: &Value) -> Result<(), ApiError> {
    for key in ["user_id", "agent_id", "app_id", "run_id"] {
        if body.get(key).is_some() {
            return Err(invalid(
                key,
                format!(
                    "top-level entity parameters are not accepted here; use filters={{\"{key}\": …}}"
                ),
            ));
        }
    }
    Ok(())
}

fn require_entity(tree: &Value) -> Result<(), ApiError> {
    if filters::names_an_entity(tree) {
        return Ok(());
    }
    Err(invalid(
        "filters",
        "must name at least one of user_id, agent_id, app_id or run_id (outside NOT)",
    ))
}

/// The filter of a v3 list or search: `filters` is required and names an entity; entity
/// ids at the top level are refused (2.x's client refuses them too).
fn v3_filter(body: &Value) -> Result<MemoryFilter, ApiError> {
    refuse_top_level_entities(body)?;
    let Some(tree) = body.get("filters").filter(|value| !value.is_null()) else {
        return Err(invalid(
            "filters",
            "is required, e.g. {\"user_id\": \"alice\"}",
        ));
    };
    require_entity(tree)?;
    narrowed_filter(Some(tree.clone()), body)
}

/// The filter of a v2 list or search: entity ids at the top level or in `filters`, at
/// least one of them.
fn v2_filter(body: &Value) -> Result<MemoryFilter, ApiError> {
    let mut parts = top_level_entities(|key| text_of(body, key).map(str::to_string));
    if let Some(tree) = body.get("filters").filter(|value| !value.is_null()) {
        parts.push(tree.clone());
    }
    let tree = json!({"AND": parts});
    if !filters::names_an_entity(&tree) {
        return Err(invalid(
            "filters",
            "One of the filters: app_id, user_id, agent_id, run_id is required!",
        ));
    }
    narrowed_filter(Some(tree), body)
}

/// Page `page` of `page_size`, newest first, and how many match in all.
async fn list_page(
    principal: &ProjectPrincipal,
    engine: &MemoryEngine,
    filter: MemoryFilter,
    page: u64,
    page_size: u64,
) -> Result<(Vec<Memory>, u64), ApiError> {
    if page == 0 {
        return Err(invalid("page", "must be at least 1"));
    }
    if page_size == 0 || page_size > MAX_PAGE_SIZE {
        return Err(invalid(
            "page_size",
            format!("must be between 1 and {MAX_PAGE_SIZE}"),
        ));
    }
    if page.saturating_mul(page_size) > MAX_PAGED_MEMORIES {
        return Err(invalid(
            "page",
            format!("pages reach at most {MAX_PAGED_MEMORIES} memories deep; narrow the filters"),
        ));
    }
    // The pages before this one are skipped with the engine's cursors, in its largest
    // pages (their rows are read only to find where this page starts).
    let mut skip = (page - 1) * page_size;
    let mut after = None;
    let mut total = None;
    loop {
        let limit = if skip == 0 {
            page_size
        } else {
            skip.min(engram_core::limits::MAX_LIST_LIMIT)
        };
        let queried = engine
            .query_memories_for(
                principal.principal(),
                QueryMemoriesRequest {
                    filter: filter.clone(),
                    after,
                    limit,
                    include_total: total.is_none(),
                },
            )
            .await?;
        total = total.or(queried.total);
        if skip == 0 {
            return Ok((queried.page.memories, total.unwrap_or(0)));
        }
        skip -= limit;
        match queried.page.next_cursor {
            Some(cursor) => after = Some(cursor),
            None => return Ok((Vec::new(), total.unwrap_or(0))),
        }
    }
}

fn number(value: Option<&Value>, text: Option<&str>) -> Option<u64> {
    text.and_then(|text| text.parse().ok())
        .or_else(|| value.and_then(Value::as_u64))
}

/// The page link Mem0 answers with, on the request's own base.
fn page_link(headers: &HeaderMap, uri: &axum::http::Uri, page: u64, page_size: u64) -> String {
    let host = headers
        .get(axum::http::header::HOST)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("localhost");
    let scheme = headers
        .get("x-forwarded-proto")
        .and_then(|value| value.to_str().ok())
        .filter(|scheme| *scheme == "https")
        .unwrap_or("http");
    format!(
        "{scheme}://{host}{}?page={page}&page_size={page_size}",
        uri.path()
    )
}

struct Listed {
    results: Vec<Value>,
    count: u64,
    page: u64,
    page_size: u64,
}

impl Listed {
    fn envelope(self, headers: &HeaderMap, uri: &axum::http::Uri) -> Value {
        let shown = (self.page - 1) * self.page_size + self.results.len() as u64;
        json!({
            "count": self.count,
            "next": (shown < self.count).then(|| page_link(headers, uri, self.page + 1, self.page_size)),
            "previous": (self.page > 1).then(|| page_link(headers, uri, self.page - 1, self.page_size)),
            "results": self.results,
        })
    }
}

async fn listed(
    principal: &ProjectPrincipal,
    engine: &MemoryEngine,
    filter: MemoryFilter,
    page: u64,
    page_size: u64,
    fields: Option<&Value>,
) -> Result<Listed, ApiError> {
    let (memories, count) = list_page(principal, engine, filter, page, page_size).await?;
    Ok(Listed {
        results: select_fields(memories.iter().map(memory_object).collect(), fields),
        count,
        page,
        page_size,
    })
}

/// `POST /v3/memories/` (2.x get_all): `filters` required, scoped to an entity; pages in
/// the query (or the body).
pub async fn list_v3(
    principal: ProjectPrincipal,
    State(engine): Engine,
    headers: HeaderMap,
    OriginalUri(uri): OriginalUri,
    RawQuery(query): RawQuery,
    body: JsonBody<Value>,
) -> Result<Json<Value>, ApiError> {
    let pairs = query_pairs(query);
    let body = body.value;
    check_body_hints(&principal, &body)?;
    let filter = v3_filter(&body)?;
    let page = number(body.get("page"), query_value(&pairs, "page")).unwrap_or(1);
    let page_size = number(body.get("page_size"), query_value(&pairs, "page_size"))
        .unwrap_or(DEFAULT_PAGE_SIZE);
    let listed = listed(
        &principal,
        &engine,
        filter,
        page,
        page_size,
        body.get("fields"),
    )
    .await?;
    Ok(Json(listed.envelope(&headers, &uri)))
}

/// `POST /v2/memories/` (1.0.x, 0.1.x with version v2): the paginated envelope when both
/// `page` and `page_size` are given, else the bare list.
pub async fn list_v2(
    principal: ProjectPrincipal,
    State(engine): Engine,
    headers: HeaderMap,
    OriginalUri(uri): OriginalUri,
    RawQuery(query): RawQuery,
    body: JsonBody<Value>,
) -> Result<Json<Value>, ApiError> {
    let pairs = query_pairs(query);
    let body = body.value;
    check_body_hints(&principal, &body)?;
    let filter = v2_filter(&body)?;
    let page = number(body.get("page"), query_value(&pairs, "page"));
    let page_size = number(body.get("page_size"), query_value(&pairs, "page_size"));
    let listed = listed(
        &principal,
        &engine,
        filter,
        page.unwrap_or(1),
        page_size.unwrap_or(DEFAULT_PAGE_SIZE),
        body.get("fields"),
    )
    .await?;
    if page.is_some() && page_size.is_some() {
        return Ok(Json(listed.envelope(&headers, &uri)));
    }
    Ok(Json(Value::Array(listed.results)))
}

/// `GET /v1/memories/` (0.1.x get_all v1): entity ids and narrowing in the query string.
pub async fn list_v1(
    principal: ProjectPrincipal,
    State(engine): Engine,
    headers: HeaderMap,
    OriginalUri(uri): OriginalUri,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let pairs = query_pairs(query);
    check_query_hints(&principal, &pairs)?;
    let parts = top_level_entities(|key| query_value(&pairs, key).map(str::to_string));
    if parts.is_empty() {
        return Err(invalid(
            "user_id",
            "One of the filters: app_id, user_id, agent_id, run_id is required!",
        ));
    }
    let mut extras = Map::new();
    for key in ["start_date", "end_date", "keywords"] {
        if let Some(value) = query_value(&pairs, key) {
            extras.insert(key.to_string(), Value::String(value.to_string()));
        }
    }
    if let Some(metadata) = query_value(&pairs, "metadata") {
        extras.insert(
            "metadata".to_string(),
            filters::query_object(metadata, "metadata")
                .map_err(|error| ApiError::invalid(vec![error]))?,
        );
    }
    let categories: Vec<Value> = pairs
        .iter()
        .filter(|(key, _)| key == "categories")
        .map(|(_, value)| Value::String(value.clone()))
        .collect();
    if !categories.is_empty() {
        extras.insert("categories".to_string(), Value::Array(categories));
    }
    let filter = narrowed_filter(Some(json!({"AND": parts})), &Value::Object(extras))?;
    let page = number(None, query_value(&pairs, "page"));
    let page_size = number(None, query_value(&pairs, "page_size"));
    let limit = number(None, query_value(&pairs, "limit"));
    let fields: Vec<Value> = pairs
        .iter()
        .filter(|(key, _)| key == "fields")
        .map(|(_, value)| Value::String(value.clone()))
        .collect();
    let fields = Value::Array(fields);
    let listed = listed(
        &principal,
        &engine,
        filter,
        page.unwrap_or(1),
        page_size.or(limit).unwrap_or(DEFAULT_PAGE_SIZE),
        Some(&fields),
    )
    .await?;
    if page.is_some() && page_size.is_some() {
        return Ok(Json(listed.envelope(&headers, &uri)));
    }
    Ok(Json(Value::Array(listed.results)))
}

// --- search --------------------------------------------------------------------------------

struct Searched {
    results: Vec<Value>,
    /// The `top_k` asked for when it was above Engram's largest.
    clamped_from: Option<i64>,
}

async fn search(
    principal: &ProjectPrincipal,
    engine: &MemoryEngine,
    body: &Value,
    filter: MemoryFilter,
) -> Result<Searched, ApiError> {
    let query = text_of(body, "query").unwrap_or_default().to_string();
    let asked_top_k = body.get("top_k").and_then(Value::as_i64).unwrap_or(10);
    let clamped_from = (asked_top_k > MAX_TOP_K as i64).then_some(asked_top_k);
    let top_k = usize::try_from(asked_top_k.min(MAX_TOP_K as i64)).unwrap_or(0);
    // Mem0's `threshold` is Engram's `min_score`: given, it wins over every default.
    let threshold = body
        .get("threshold")
        .and_then(Value::as_f64)
        .map(|threshold| threshold as f32);
    let request = SearchMemoriesRequest {
        request: SearchRequest {
            query,
            filters: filter,
            top_k,
            min_score: threshold.unwrap_or(0.0),
            ..SearchRequest::default()
        },
        caller_tuning: SearchTuning {
            min_score: threshold,
            ..SearchTuning::default()
        },
        profile: None,
        context_tokens: None,
        trace_id: None,
        run_id: None,
    };
    let errors = request.limit_errors();
    if !errors.is_empty() {
        return Err(ApiError::invalid(errors));
    }
    let answer = engine
        .search_memories_for(principal.principal(), request)
        .await?;
    let results = answer
        .outcome
        .results
        .iter()
        .map(|hit| scored_memory_object(&hit.memory, hit.score))
        .collect();
    Ok(Searched {
        results: select_fields(results, body.get("fields")),
        clamped_from,
    })
}

fn with_clamp_note(mut answer: Value, clamped_from: Option<i64>) -> Value {
    if let Some(asked) = clamped_from {
        answer["top_k_clamped"] = json!({
            "asked": asked,
            "used": MAX_TOP_K,
            "why": format!("Engram returns at most {MAX_TOP_K} results per search"),
        });
    }
    answer
}

/// A bare-list answer cannot carry the note: a header says it.
fn bare_list(searched: Searched) -> Response {
    let mut response = Json(Value::Array(searched.results)).into_response();
    if searched.clamped_from.is_some() {
        response.headers_mut().insert(
            "engram-top-k-clamped",
            axum::http::HeaderValue::from_static("100"),
        );
    }
    response
}

/// `POST /v3/memories/search/` (2.x): `filters` required and scoped to an entity.
/// `rerank` and `keyword_search` are accepted: Engram's hybrid ranking always weighs both
/// meaning and keywords.
pub async fn search_v3(
    principal: ProjectPrincipal,
    State(engine): Engine,
    body: JsonBody<Value>,
) -> Result<Json<Value>, ApiError> {
    let body = body.value;
    check_body_hints(&principal, &body)?;
    let filter = v3_filter(&body)?;
    let searched = search(&principal, &engine, &body, filter).await?;
    let clamped_from = searched.clamped_from;
    Ok(Json(with_clamp_note(
        json!({"results": searched.results}),
        clamped_from,
    )))
}

/// `POST /v2/memories/search/` (1.0.x, 0.1.x with version v2): the bare list.
pub async fn search_v2(
    principal: ProjectPrincipal,
    State(engine): Engine,
    body: JsonBody<Value>,
) -> Result<Response, ApiError> {
    let body = body.value;
    check_body_hints(&principal, &body)?;
    let filter = v2_filter(&body)?;
    Ok(bare_list(search(&principal, &engine, &body, filter).await?))
}

/// `POST /v1/memories/search/` (0.1.x default): entity ids at the top level; the bare list,
/// or `{"results", "relations"}` for output format v1.1.
pub async fn search_v1(
    principal: ProjectPrincipal,
    State(engine): Engine,
    body: JsonBody<Value>,
) -> Result<Response, ApiError> {
    let body = body.value;
    check_body_hints(&principal, &body)?;
    let parts = top_level_entities(|key| text_of(&body, key).map(str::to_string));
    if parts.is_empty() {
        return Err(invalid(
            "user_id",
            "At least one of the filters: agent_id, user_id, app_id, run_id is required!",
        ));
    }
    let filter = narrowed_filter(Some(json!({"AND": parts})), &body)?;
    let searched = search(&principal, &engine, &body, filter).await?;
    if text_of(&body, "output_format") == Some("v1.1") {
        let clamped_from = searched.clamped_from;
        let answer = json!({"results": searched.results, "relations": []});
        return Ok(Json(with_clamp_note(answer, clamped_from)).into_response());
    }
    Ok(bare_list(searched))
}

// --- delete_all and batches ----------------------------------------------------------------

/// What one bulk delete did, as Mem0's delete answers carry it.
pub(super) struct Deleted {
    pub deleted: u64,
    /// Immutable or under legal hold: never deleted.
    pub skipped_locked: u64,
    /// Still matching past the bulk delete's per-call cap: call again to delete them.
    pub remaining: u64,
}

impl Deleted {
    /// Mem0's message, saying when more remain.
    pub fn answer(&self, done: &str) -> Value {
        let message = if self.remaining > 0 {
            format!(
                "Deleted {} memories; {} more match: call again to delete them",
                self.deleted, self.remaining
            )
        } else {
            done.to_string()
        };
        json!({
            "message": message,
            "deleted": self.deleted,
            "skipped_locked": self.skipped_locked,
            "remaining": self.remaining,
        })
    }
}

/// Delete what `filter` matches (every memory with `all`): one call of the engine's bulk
/// delete, with its cap per call.
pub(super) async fn delete_matching(
    principal: &ProjectPrincipal,
    engine: &MemoryEngine,
    filter: MemoryFilter,
    all: bool,
    reason: &str,
) -> Result<Deleted, ApiError> {
    let outcome = engine
        .delete_memories_matching_for(
            principal.principal(),
            DeleteMatchingRequest {
                filter,
                all,
                reason: Some(reason.to_string()),
                dry_run: false,
            },
        )
        .await?;
    Ok(Deleted {
        deleted: outcome.deleted,
        skipped_locked: outcome.skipped_locked,
        remaining: outcome.remaining,
    })
}

/// `DELETE /v1/memories/?user_id=…` (every client): the filters are in the query string,
/// `*` means any value of that entity, `filters=` and `metadata=` may be Python dict
/// literals, and no filter at all is refused (Mem0 once wiped everything here).
pub async fn delete_all(
    principal: ProjectPrincipal,
    State(engine): Engine,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let pairs = query_pairs(query);
    check_query_hints(&principal, &pairs)?;
    let mut concrete = Vec::new();
    let mut wildcards = Vec::new();
    for key in ["user_id", "agent_id", "app_id", "run_id"] {
        match query_value(&pairs, key) {
            None | Some("") => {}
            Some("*") => wildcards.push(json!({ key: "*" })),
            Some(value) => concrete.push(json!({ key: value })),
        }
    }
    if let Some(metadata) = query_value(&pairs, "metadata") {
        let metadata = filters::query_object(metadata, "metadata")
            .map_err(|error| ApiError::invalid(vec![error]))?;
        concrete.push(json!({ "metadata": metadata }));
    }
    if let Some(tree) = query_value(&pairs, "filters") {
        concrete.push(
            filters::query_object(tree, "filters")
                .map_err(|error| ApiError::invalid(vec![error]))?,
        );
    }
    if concrete.is_empty() && wildcards.is_empty() {
        return Err(invalid(
            "user_id",
            "name what to delete: user_id, agent_id, app_id or run_id (\"*\" for any value; all four \"*\" delete every memory of the project)",
        ));
    }
    // All four wildcards: the whole project, said explicitly.
    let everything = concrete.is_empty() && wildcards.len() == 4;
    let filter = if everything {
        MemoryFilter::everything()
    } else {
        let mut parts = concrete;
        if !wildcards.is_empty() {
            parts.push(json!({"OR": wildcards}));
        }
        filters::parse(&json!({"AND": parts}), "filters").map_err(ApiError::invalid)?
    };
    let deleted = delete_matching(
        &principal,
        &engine,
        filter,
        everything,
        "deleted through the Mem0-compatible delete_all",
    )
    .await?;
    Ok(Json(deleted.answer("Memories deleted successfully!")))
}

fn batch_items(body: &Value) -> Result<&Vec<Value>, ApiError> {
    let Some(items) = body.get("memories").and_then(Value::as_array) else {
        return Err(invalid("memories", "is required: a list of {memory_id, …}"));
    };
    if items.is_empty() {
        return Err(invalid("memories", "must name at least one memory"));
    }
    if items.len() > MAX_BATCH {
        return Err(invalid(
            "memories",
            format!("Maximum of {MAX_BATCH} memories can be changed in a single request"),
        ));
    }
    Ok(items)
}

fn batch_memory_id(item: &Value, position: usize) -> Result<MemoryId, ApiError> {
    text_of(item, "memory_id")
        .and_then(|text| text.parse().ok())
        .ok_or_else(|| {
            invalid(
                &format!("memories[{position}].memory_id"),
                "must be a memory id (UUID)",
            )
        })
}

/// `PUT /v1/batch/`: every item is checked (by the use case) before the first is applied;
/// each is then an edit of its own, with its own version and history entry.
pub async fn batch_update(
    principal: ProjectPrincipal,
    State(engine): Engine,
    RawQuery(query): RawQuery,
    body: JsonBody<Value>,
) -> Result<Json<Value>, ApiError> {
    check_query_hints(&principal, &query_pairs(query))?;
    check_body_hints(&principal, &body.value)?;
    let items = batch_items(&body.value)?;
    let mut requests = Vec::with_capacity(items.len());
    for (position, item) in items.iter().enumerate() {
        requests.push(EditMemoryRequest {
            memory_id: batch_memory_id(item, position)?,
            edit: memory_edit(item, &format!("memories[{position}]."))?,
            client_vector: None,
            expected_version: None,
        });
    }
    let updated = engine
        .edit_memories_for(principal.principal(), requests)
        .await?
        .len();
    Ok(Json(
        json!({"message": format!("Successfully updated {updated} memories")}),
    ))
}

/// `DELETE /v1/batch/` (a JSON body on a DELETE): one bulk delete of the named memories.
pub async fn batch_delete(
    principal: ProjectPrincipal,
    State(engine): Engine,
    RawQuery(query): RawQuery,
    body: JsonBody<Value>,
) -> Result<Json<Value>, ApiError> {
    check_query_hints(&principal, &query_pairs(query))?;
    check_body_hints(&principal, &body.value)?;
    let items = batch_items(&body.value)?;
    let mut ids = Vec::with_capacity(items.len());
    for (position, item) in items.iter().enumerate() {
        ids.push(Value::String(batch_memory_id(item, position)?.to_string()));
    }
    let filter =
        filters::parse(&json!({"memory_ids": ids}), "memories").map_err(ApiError::invalid)?;
    let deleted = delete_matching(
        &principal,
        &engine,
        filter,
        false,
        "deleted through the Mem0-compatible batch_delete",
    )
    .await?;
    let done = format!("Successfully deleted {} memories", deleted.deleted);
    Ok(Json(deleted.answer(&done)))
}

// --- feedback and exports ------------------------------------------------------------------

/// `POST /v1/feedback/`: POSITIVE, NEGATIVE and VERY_NEGATIVE are Engram's `relevant`,
/// `not_relevant` and `wrong`. Feedback is a record: `null` (Mem0's "remove") is refused.
pub async fn feedback(
    principal: ProjectPrincipal,
    State(engine): Engine,
    body: JsonBody<Value>,
) -> Result<Json<Value>, ApiError> {
    let body = body.value;
    check_body_hints(&principal, &body)?;
    let Some(memory_id) = text_of(&body, "memory_id") else {
        return Err(invalid("memory_id", "is required"));
    };
    let memory_id = memory_id_of(memory_id)?;
    let rating = match text_of(&body, "feedback")
        .map(str::to_ascii_uppercase)
        .as_deref()
    {
        Some("POSITIVE") => "relevant",
        Some("NEGATIVE") => "not_relevant",
        Some("VERY_NEGATIVE") => "wrong",
        None => {
            return Err(invalid(
                "feedback",
                "Engram keeps feedback as a record and cannot remove it; send POSITIVE, NEGATIVE or VERY_NEGATIVE",
            ));
        }
        Some(_) => {
            return Err(invalid(
                "feedback",
                "must be POSITIVE, NEGATIVE or VERY_NEGATIVE",
            ));
        }
    };
    let record = engine
        .give_memory_feedback_for(
            principal.principal(),
            memory_id,
            None,
            FeedbackRequest {
                rating: rating.to_string(),
                text: text_of(&body, "feedback_reason").map(str::to_string),
                run_id: None,
            },
        )
        .await?;
    Ok(Json(json!({
        "id": record.id.to_string(),
        "memory_id": memory_id.to_string(),
        "feedback": body.get("feedback").cloned().unwrap_or(Value::Null),
        "feedback_reason": record.text,
    })))
}

/// The `filters` of an export request (Mem0's tree, or flat ids), required: an export is
/// built from the memories it names.
fn export_filter(body: &Value) -> Result<MemoryFilter, ApiError> {
    let Some(tree) = body.get("filters").filter(|value| value.is_object()) else {
        return Err(invalid(
            "filters",
            "is required: Engram builds an export from the memories the filters name (e.g. {\"user_id\": \"alice\"})",
        ));
    };
    require_entity(tree)?;
    filters::parse(tree, "filters").map_err(ApiError::invalid)
}

/// `POST /v1/exports/`: builds the export at once and answers it in `export` with an id.
/// Engram keeps no export snapshot (nothing acknowledged is held back): `get_memory_export`
/// with the same filters builds it again from the memories as they are then.
pub async fn create_export(
    principal: ProjectPrincipal,
    State(engine): Engine,
    body: JsonBody<Value>,
) -> Result<Response, ApiError> {
    let body = body.value;
    check_body_hints(&principal, &body)?;
    let schema = export_schema(&body)?;
    let filter = export_filter(&body)?;
    let export = build_export(&principal, &engine, &schema, filter).await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({
            "message": "Memory export ready: it is in `export`. Engram keeps no export snapshot: get_memory_export with the same filters builds it again.",
            "id": uuid::Uuid::now_v7().to_string(),
            "export": export,
        })),
    )
        .into_response())
}

fn export_schema(body: &Value) -> Result<Value, ApiError> {
    match body.get("schema") {
        Some(Value::String(text)) => serde_json::from_str::<Value>(text)
            .map_err(|error| invalid("schema", format!("is not JSON: {error}"))),
        Some(schema @ Value::Object(_)) => Ok(schema.clone()),
        None | Some(Value::Null) => Ok(json!({"type": "object"})),
        Some(_) => Err(invalid("schema", "must be a JSON schema (object or text)")),
    }
}

/// The memories `filter` names (newest first, at most 1,000), shaped by `schema` as far as
/// Engram can without an LLM: every array property holds the memories' texts, a text
/// property the newest memory whose `key` is its name; `memories` lists them all.
async fn build_export(
    principal: &ProjectPrincipal,
    engine: &MemoryEngine,
    schema: &Value,
    filter: MemoryFilter,
) -> Result<Map<String, Value>, ApiError> {
    let mut memories = Vec::new();
    for page in 1..=MAX_EXPORTED / MAX_PAGE_SIZE {
        let (chunk, _) = list_page(principal, engine, filter.clone(), page, MAX_PAGE_SIZE).await?;
        let last = (chunk.len() as u64) < MAX_PAGE_SIZE;
        memories.extend(chunk);
        if last {
            break;
        }
    }
    let texts: Vec<Value> = memories
        .iter()
        .map(|memory| Value::String(memory.content.clone()))
        .collect();
    let mut export = Map::new();
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            let value = match property.get("type").and_then(Value::as_str) {
                Some("array") => Value::Array(texts.clone()),
                _ => memories
                    .iter()
                    .find(|memory| memory.key.as_ref().is_some_and(|key| key.as_str() == name))
                    .map_or(Value::Null, |memory| Value::String(memory.content.clone())),
            };
            export.insert(name.clone(), value);
        }
    }
    export.insert(
        "memories".to_string(),
        Value::Array(memories.iter().map(memory_object).collect()),
    );
    Ok(export)
}

/// `POST /v1/exports/get/`: the export built again from its filters (see `build_export`);
/// without filters, there is nothing to build it from.
pub async fn get_export(
    principal: ProjectPrincipal,
    State(engine): Engine,
    body: JsonBody<Value>,
) -> Result<Json<Value>, ApiError> {
    let body = body.value;
    check_body_hints(&principal, &body)?;
    if body.get("filters").is_none() {
        return Err(ApiError::new(
            ProblemKind::NotFound,
            "No memory export request found: Engram keeps no export snapshots; call get_memory_export with the export's filters (filters={\"user_id\": …})",
        ));
    }
    let schema = export_schema(&body)?;
    let filter = export_filter(&body)?;
    let mut export = build_export(&principal, &engine, &schema, filter).await?;
    if let Some(id) = body.get("memory_export_id") {
        export.insert("memory_export_id".to_string(), id.clone());
    }
    Ok(Json(Value::Object(export)))
}
