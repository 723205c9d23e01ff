//! Mem0's shapes of Engram's answers: the memory object (A5), a history entry, and the error
//! body its clients read (`detail`, under `application/json`).

use chrono::{DateTime, SecondsFormat, Utc};
use engram_core::memory::HistoryEntry;
use engram_core::memory_filter::APP_ID_METADATA_KEY;
use engram_core::{ExternalId, Memory};
use serde_json::{Value, json};

fn time(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Micros, true)
}

fn id_text(id: Option<&ExternalId>) -> Value {
    id.map_or(Value::Null, |id| Value::String(id.as_str().to_string()))
}

/// A memory as Mem0 writes one: `memory` is the content; the session is both `run_id` (v3
/// search) and `session_id` (everywhere else); Engram's own fields follow.
pub fn memory_object(memory: &Memory) -> Value {
    let session = id_text(memory.session_id.as_ref());
    let mut object = json!({
        "id": memory.id.to_string(),
        "memory": memory.content,
        "user_id": id_text(memory.user_id.as_ref()),
        "agent_id": id_text(memory.agent_id.as_ref()),
        "app_id": memory.metadata.get(APP_ID_METADATA_KEY).cloned().unwrap_or(Value::Null),
        "run_id": session.clone(),
        "session_id": session,
        "metadata": memory.metadata,
        "categories": memory.categories,
        "created_at": time(memory.created_at),
        "updated_at": time(memory.updated_at),
        "expiration_date": memory.expires_at.map(|at| at.date_naive().to_string()),
        "structured_attributes": null,
        "replaced_by": null,
        "synthesized": false,
        "lifecycle_state": memory.state.as_str(),
        "immutable": memory.immutable,
        // Engram's own fields: clients ignore what they do not know.
        "kind": memory.kind.as_str(),
        "key": id_text(memory.key.as_ref()),
        "source": memory.source.as_str(),
        "confidence": memory.confidence,
        "version": memory.version,
        "occurred_at": time(memory.occurred_at),
        "valid_from": time(memory.valid_from),
        "valid_to": memory.valid_to.map(time),
    });
    if memory.content_omitted {
        object["content_omitted"] = Value::Bool(true);
    }
    object
}

/// A search result: the memory and its score.
pub fn scored_memory_object(memory: &Memory, score: f32) -> Value {
    let mut object = memory_object(memory);
    object["score"] = json!(score);
    object
}

/// One entry of Mem0's history list, from Engram's version history of `memory_id`.
pub fn history_object(
    memory_id: &str,
    entry: &HistoryEntry,
    previous: Option<&str>,
    memory: Option<&Memory>,
) -> Value {
    let event = match entry.event.as_str() {
        "create" | "created" | "add" => "ADD",
        event if event.contains("delete") || event.contains("erase") => "DELETE",
        _ => "UPDATE",
    };
    let field = |pick: fn(&Memory) -> Option<&ExternalId>| {
        memory.map_or(Value::Null, |memory| id_text(pick(memory)))
    };
    json!({
        "id": format!("{memory_id}:{}", entry.version),
        "memory_id": memory_id,
        "input": [],
        "old_memory": previous,
        "new_memory": entry.content,
        "user_id": field(|memory| memory.user_id.as_ref()),
        "agent_id": field(|memory| memory.agent_id.as_ref()),
        "app_id": memory
            .and_then(|memory| memory.metadata.get(APP_ID_METADATA_KEY).cloned())
            .unwrap_or(Value::Null),
        "session_id": field(|memory| memory.session_id.as_ref()),
        "categories": memory.map(|memory| memory.categories.clone()).unwrap_or_default(),
        "event": event,
        "metadata": memory.map(|memory| Value::Object(memory.metadata.clone())).unwrap_or(Value::Null),
        "created_at": time(entry.at),
        "updated_at": time(entry.at),
        // Engram's own fields.
        "version": entry.version,
        "actor": entry.actor,
        "reason": entry.reason,
    })
}
