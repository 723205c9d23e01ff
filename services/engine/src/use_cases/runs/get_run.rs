//! A run with its timeline. Every memory a step names (by id and version) is hydrated from
//! what exists now: its text at that version where the history keeps it, its state and
//! version now — or `deleted`, with nothing of it. A console member's view of this content
//! is logged before it is shown.

use crate::{EngineError, MemoryEngine};
use chrono::Utc;
use engram_core::runs::{RunRecord, RunStatus, RunStepRecord};
use engram_core::{MemoryId, MemoryState, Operation, Principal};
use std::collections::{BTreeSet, HashMap};

/// A run, its status now, and its steps with memories hydrated in their `detail`.
#[derive(Clone, Debug)]
pub struct RunTimeline {
    pub run: RunRecord,
    pub status: RunStatus,
    pub steps: Vec<RunStepRecord>,
}

impl MemoryEngine {
    pub async fn get_run_for(
        &self,
        principal: &Principal,
        run_id: uuid::Uuid,
    ) -> Result<RunTimeline, EngineError> {
        principal.authorize(Operation::GetRun)?;
        let run = self.visible_run(principal, run_id).await?;
        let mut steps = self
            .storage
            .run_steps(principal.memory_scope(), run_id)
            .await?;
        let mut named = BTreeSet::new();
        for step in &steps {
            memories_named(&step.detail, &mut named);
        }
        let ids: Vec<MemoryId> = named.iter().map(|(id, _)| *id).collect();
        // Hydrated through the caller's scope: an end-user token sees only its own memories.
        let now = self
            .storage
            .memories_by_id(principal.memory_scope(), &ids)
            .await?;
        let live: Vec<MemoryId> = now
            .values()
            .filter(|memory| memory.state != MemoryState::Deleted)
            .map(|memory| memory.id)
            .collect();
        let then = self
            .storage
            .memory_texts_at_versions(principal.scope(), &live)
            .await?;
        for step in &mut steps {
            hydrate(&mut step.detail, &now, &then);
            withhold_texts_quoting_deleted(&mut step.detail);
        }
        if matches!(
            principal.credential(),
            engram_core::principal::Credential::ConsoleAccount { .. }
        ) && !live.is_empty()
        {
            let mut shown = vec![run.id.to_string()];
            shown.extend(live.iter().map(ToString::to_string));
            self.record_content_view_for(principal, shown, "run")
                .await?;
        }
        let status = run.status_at(Utc::now());
        Ok(RunTimeline { run, status, steps })
    }
}

/// A model call's captured prompt and completion may quote the memories it was given: once
/// one of them is deleted, they are no longer shown (nothing of a deleted memory is handed
/// out; the run keeps them until it is erased or swept).
fn withhold_texts_quoting_deleted(detail: &mut serde_json::Value) {
    let gave_a_deleted_memory = detail
        .get("injected")
        .and_then(serde_json::Value::as_array)
        .is_some_and(|injected| {
            injected
                .iter()
                .any(|memory| memory.get("deleted") == Some(&serde_json::Value::Bool(true)))
        });
    if !gave_a_deleted_memory {
        return;
    }
    if let Some(fields) = detail.as_object_mut() {
        for field in ["prompt", "completion"] {
            if fields.get(field).is_some_and(|text| !text.is_null()) {
                fields.insert(field.to_string(), serde_json::Value::Null);
                fields.insert(
                    "texts_withheld".to_string(),
                    serde_json::json!("a memory given to this call was deleted"),
                );
            }
        }
    }
}

/// Every `{memory_id, version}` object anywhere in a step's detail.
fn memories_named(value: &serde_json::Value, found: &mut BTreeSet<(MemoryId, i64)>) {
    match value {
        serde_json::Value::Object(fields) => {
            if let (Some(id), Some(version)) = (
                fields
                    .get("memory_id")
                    .and_then(serde_json::Value::as_str)
                    .and_then(|id| id.parse::<MemoryId>().ok()),
                fields.get("version").and_then(serde_json::Value::as_i64),
            ) {
                found.insert((id, version));
            }
            fields.values().for_each(|item| memories_named(item, found));
        }
        serde_json::Value::Array(items) => {
            items.iter().for_each(|item| memories_named(item, found))
        }
        _ => {}
    }
}

/// Add to each `{memory_id, version}` its text then, and its state, version and text now; a
/// deleted or unseen memory gets `deleted: true` and nothing else.
fn hydrate(
    value: &mut serde_json::Value,
    now: &HashMap<MemoryId, engram_core::Memory>,
    then: &HashMap<(MemoryId, i64), String>,
) {
    match value {
        serde_json::Value::Object(fields) => {
            let named = fields
                .get("memory_id")
                .and_then(serde_json::Value::as_str)
                .and_then(|id| id.parse::<MemoryId>().ok())
                .zip(fields.get("version").and_then(serde_json::Value::as_i64));
            if let Some((id, version)) = named {
                match now
                    .get(&id)
                    .filter(|memory| memory.state != MemoryState::Deleted)
                {
                    Some(memory) => {
                        let content_then = then.get(&(id, version)).cloned().or_else(|| {
                            (memory.version == version).then(|| memory.content.clone())
                        });
                        fields.insert("content_then".into(), serde_json::json!(content_then));
                        fields.insert(
                            "now".into(),
                            serde_json::json!({
                                "state": memory.state.as_str(),
                                "version": memory.version,
                                "content": memory.content,
                            }),
                        );
                        fields.insert("deleted".into(), serde_json::json!(false));
                    }
                    None => {
                        fields.insert("deleted".into(), serde_json::json!(true));
                    }
                }
                return;
            }
            fields
                .values_mut()
                .for_each(|item| hydrate(item, now, then));
        }
        serde_json::Value::Array(items) => {
            items.iter_mut().for_each(|item| hydrate(item, now, then))
        }
        _ => {}
    }
}
