//! Mem0's entities: the users, agents, apps and runs (Engram's sessions) that memories name,
//! with their counts, and the deletion of one entity's memories (not a subject erasure).

use super::memories::delete_matching;
use super::{bad_request, check_query_hints, query_pairs};
use crate::auth::ProjectPrincipal;
use crate::problem::ApiError;
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use engram_core::memory_filter::EntityField;
use engram_core::{ExternalId, MemoryFilter};
use engram_engine::{ListEntitiesRequest, MAX_ENTITY_PAGE, MemoryEngine};
use serde_json::{Value, json};
use std::sync::Arc;

/// Most entities of one type listed (pages of the engine's largest page).
const MAX_LISTED_PER_TYPE: usize = 5_000;

/// Mem0's entity type for each of Engram's entity fields, in the order they are listed.
const ENTITY_TYPES: [(&str, EntityField); 4] = [
    ("user", EntityField::UserId),
    ("agent", EntityField::AgentId),
    ("app", EntityField::AppId),
    ("run", EntityField::SessionId),
];

/// `GET /v1/entities/`: every user, agent, app and run with memories, with its count.
pub async fn list_entities(
    principal: ProjectPrincipal,
    State(engine): State<Arc<MemoryEngine>>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    check_query_hints(&principal, &query_pairs(query))?;
    let owner = principal.principal().scope().project_id().to_string();
    let mut results = Vec::new();
    let mut totals = serde_json::Map::new();
    for (entity_type, field) in ENTITY_TYPES {
        let mut after = None;
        let mut listed = 0;
        loop {
            let page = engine
                .list_entities_for(
                    principal.principal(),
                    ListEntitiesRequest {
                        field,
                        after,
                        limit: MAX_ENTITY_PAGE,
                    },
                )
                .await?;
            for entity in &page.entities {
                results.push(json!({
                    "id": entity.id,
                    "name": entity.id,
                    "type": entity_type,
                    "total_memories": entity.memories,
                    "owner": owner,
                    "metadata": null,
                    "created_at": null,
                    "updated_at": null,
                }));
            }
            listed += page.entities.len();
            match page.next_cursor {
                Some(cursor) if listed < MAX_LISTED_PER_TYPE => after = Some(cursor),
                _ => break,
            }
        }
        totals.insert(format!("total_{entity_type}s"), json!(listed));
    }
    let mut answer = json!({
        "count": results.len(),
        "next": null,
        "previous": null,
        "results": results,
    });
    for (key, value) in totals {
        answer[key] = value;
    }
    Ok(Json(answer))
}

/// `DELETE /v2/entities/{type}/{name}/`: deletes that entity's memories, as Mem0 does. It is
/// not a subject erasure (messages, state, files and receipts stay): that is
/// `POST /v1/subjects/{user_id}/erasure`.
pub async fn delete_entity(
    principal: ProjectPrincipal,
    State(engine): State<Arc<MemoryEngine>>,
    Path((entity_type, entity_id)): Path<(String, String)>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    check_query_hints(&principal, &query_pairs(query))?;
    let Some((_, field)) = ENTITY_TYPES.iter().find(|(name, _)| *name == entity_type) else {
        return Err(bad_request(
            "Invalid entity type: expected user, agent, app or run",
        ));
    };
    if *field != EntityField::AppId {
        ExternalId::parse(&entity_id).map_err(|message| {
            ApiError::invalid(vec![engram_core::FieldError::new("entity_id", message)])
        })?;
    }
    let filter = MemoryFilter::entity_equals(*field, &entity_id);
    let deleted = delete_matching(
        &principal,
        &engine,
        filter,
        false,
        "deleted through the Mem0-compatible delete_users",
    )
    .await?;
    Ok(Json(deleted.answer("Entity deleted successfully!")))
}
