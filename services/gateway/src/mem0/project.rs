//! Mem0's project routes, answered from the credential's project; what is managed in
//! Engram's console (projects, members) or not offered (summaries) says so in a `detail`.

use super::{check_query_hints, check_tenant_hints, mem0_error, query_pairs};
use crate::auth::ProjectPrincipal;
use crate::problem::ApiError;
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use engram_engine::MemoryEngine;
use serde_json::{Map, Value, json};
use std::sync::Arc;

/// `GET /api/v1/orgs/organizations/{org_id}/projects/{project_id}/`: the credential's
/// project (another's ids are not found); `fields` keeps only those.
pub async fn get_project(
    principal: ProjectPrincipal,
    State(engine): State<Arc<MemoryEngine>>,
    Path((org_id, project_id)): Path<(String, String)>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    check_tenant_hints(&principal, Some(&org_id), Some(&project_id))?;
    let report = engine.project_settings_for(principal.principal()).await?;
    let settings = &report.settings;
    let scope = principal.principal().scope();
    let project = json!({
        "id": scope.project_id().to_string(),
        "org_id": scope.organization_id().to_string(),
        "custom_instructions": null,
        "custom_categories": null,
        "multilingual": false,
        "decay": false,
        "engram": {
            "pii_redaction": settings.pii_redaction.as_str(),
            "derive_memories": settings.derive_memories,
            "embedding_model": report.embedding_model,
            "embedding_dimension": report.embedding_dimension,
        },
    });
    let pairs = query_pairs(query);
    check_query_hints(&principal, &pairs)?;
    let fields: Vec<&str> = pairs
        .iter()
        .filter(|(key, _)| key == "fields")
        .map(|(_, value)| value.as_str())
        .collect();
    if fields.is_empty() {
        return Ok(Json(project));
    }
    let selected: Map<String, Value> = project
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(key, _)| key.as_str() == "id" || fields.contains(&key.as_str()))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    Ok(Json(Value::Object(selected)))
}

/// `PATCH …/projects/{project_id}/`: Mem0's project options (custom instructions and
/// categories, multilingual, decay) have no Engram counterpart yet.
pub async fn update_project_not_supported(_: ProjectPrincipal, _: axum::body::Bytes) -> Response {
    mem0_error(
        StatusCode::BAD_REQUEST,
        "Engram does not offer Mem0's project options (custom_instructions, custom_categories, multilingual, decay); project settings are PATCH /v1/project/settings",
    )
}

/// Projects and members are managed in Engram's console, never with a project key.
pub fn console_only(what: &str) -> Response {
    mem0_error(
        StatusCode::FORBIDDEN,
        &format!(
            "not supported by Engram's Mem0 compatibility: {what} are managed in Engram's console"
        ),
    )
}

/// `POST /v1/summary/`: Engram has no summary of memories to give.
pub async fn summary_not_supported(_: ProjectPrincipal, _: axum::body::Bytes) -> Response {
    mem0_error(
        StatusCode::NOT_IMPLEMENTED,
        "get_summary is not supported by Engram: list the memories (get_all) or assemble a context (POST /v1/context) instead",
    )
}
