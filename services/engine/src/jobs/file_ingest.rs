//! The file-ingest job's work on one claimed task: cut the file into chunks and store them
//! as memories (`source = file`) in idempotent batches, billed to whoever uploaded.

use super::FILE_INGEST_LEASE;
use crate::{AddOutcome, MemoryEngine};
use chrono::Utc;
use engram_core::files::{CHUNK_TARGET_CHARS, FileChunk, FileFormat, chunk_file};
use engram_core::usage::UsageUnit;
use engram_core::{
    ExternalId, MemoryId, MemoryKind, MemorySource, NewMemory, Principal, ProjectScope,
};
use engram_storage::IdempotencyClaim;
use engram_storage::files::FileRecord;
use engram_storage::tasks::ClaimedTask;
use engram_storage::usage::UsageIncrement;

/// Chunks embedded and stored per batch (one transaction, one progress update).
const CHUNKS_PER_BATCH: usize = 16;

pub(super) async fn ingest_claimed_file(
    engine: &MemoryEngine,
    principal: &Principal,
    task: &ClaimedTask,
) -> Result<serde_json::Value, String> {
    let storage = &engine.storage;
    let file_id: uuid::Uuid = task
        .subject
        .as_deref()
        .and_then(|subject| subject.parse().ok())
        .ok_or_else(|| "the task names no file".to_string())?;
    let file = storage
        .file(&engram_core::MemoryScope::project_wide(task.scope), file_id)
        .await
        .map_err(|error| error.to_string())?
        .ok_or_else(|| "the file was deleted before it was ingested".to_string())?;
    let outcome = ingest(engine, principal, task, &file).await;
    let finished = storage
        .finish_file(
            &task.scope,
            file_id,
            outcome.as_ref().map(|_| ()).map_err(Clone::clone),
        )
        .await;
    if let Err(error) = finished {
        tracing::error!(%error, %file_id, "cannot record the end of a file ingest");
    }
    outcome
}

async fn ingest(
    engine: &MemoryEngine,
    principal: &Principal,
    task: &ClaimedTask,
    file: &FileRecord,
) -> Result<serde_json::Value, String> {
    let storage = &engine.storage;
    let tasks = engine.maintenance_store();
    let scope = &task.scope;
    let text = storage
        .file_text(scope, file.id)
        .await
        .map_err(|error| error.to_string())?
        .ok_or_else(|| "the file's text is no longer stored; upload it again".to_string())?;
    let format = FileFormat::parse(&file.format)
        .ok_or_else(|| format!("unknown file format {:?}", file.format))?;
    let chunks = chunk_file(format, &text, CHUNK_TARGET_CHARS);
    let total = chunks.len();
    let actor = principal.actor();
    let mut memory_ids: Vec<MemoryId> = Vec::with_capacity(total);
    tasks
        .task_progress(task.id, 0, total as i64, FILE_INGEST_LEASE)
        .await
        .map_err(|error| error.to_string())?;
    for (batch_number, batch) in chunks.chunks(CHUNKS_PER_BATCH).enumerate() {
        let new_memories = batch
            .iter()
            .map(|chunk| chunk_memory(file, chunk, total))
            .collect::<Result<Vec<_>, String>>()?;
        // The same batch of the same file is stored once, however often the task is retried.
        let claim = IdempotencyClaim {
            key: format!("file-ingest:{}:{batch_number}", file.id),
            request_fingerprint: engram_core::memory::content_digest(
                &batch
                    .iter()
                    .map(|chunk| chunk.content.as_str())
                    .collect::<Vec<_>>()
                    .join("\u{0}"),
            ),
        };
        let render = |memories: &[engram_core::Memory]| {
            let ids: Vec<String> = memories
                .iter()
                .map(|memory| memory.id.to_string())
                .collect();
            (201, serde_json::json!(ids).to_string())
        };
        let stored_ids = match super::again_after_space_switch(|| {
            engine.add_memories(
                scope,
                new_memories.clone(),
                actor,
                Some(claim.clone()),
                false,
                render,
            )
        })
        .await
        {
            Ok(AddOutcome::Stored {
                memories,
                tokens_embedded: tokens,
                ..
            }) => {
                bill(
                    engine,
                    scope,
                    file,
                    &[
                        (UsageUnit::MemoriesWritten, memories.len() as i64),
                        (
                            UsageUnit::TokensEmbedded,
                            i64::try_from(tokens).unwrap_or(i64::MAX),
                        ),
                    ],
                )
                .await?;
                memories.iter().map(|memory| memory.id).collect::<Vec<_>>()
            }
            // This batch was stored before and its memories deleted since: nothing to redo.
            Ok(AddOutcome::AnswerErased) => Vec::new(),
            Ok(AddOutcome::Replayed { body, .. }) => serde_json::from_str::<Vec<String>>(&body)
                .map_err(|error| format!("unreadable earlier batch: {error}"))?
                .iter()
                .filter_map(|id| id.parse().ok())
                .collect(),
            Err(error) => {
                return Err(format!(
                    "chunk {} of {total}: {error}",
                    batch_number * CHUNKS_PER_BATCH + 1
                ));
            }
        };
        memory_ids.extend(stored_ids);
        storage
            .record_file_progress(scope, file.id, total, &memory_ids)
            .await
            .map_err(|error| error.to_string())?;
        tasks
            .task_progress(
                task.id,
                memory_ids.len() as i64,
                total as i64,
                FILE_INGEST_LEASE,
            )
            .await
            .map_err(|error| error.to_string())?;
    }
    bill(
        engine,
        scope,
        file,
        &[(UsageUnit::FileBytes, file.size_bytes)],
    )
    .await?;
    Ok(serde_json::json!({
        "file_id": file.id.to_string(),
        "chunks": total,
        "memories": memory_ids.len(),
    }))
}

fn chunk_memory(file: &FileRecord, chunk: &FileChunk, total: usize) -> Result<NewMemory, String> {
    let external = |value: &Option<String>| {
        value
            .as_deref()
            .map(ExternalId::parse)
            .transpose()
            .map_err(|error| format!("stored id is invalid: {error}"))
    };
    let mut metadata = serde_json::Map::new();
    metadata.insert("file_id".into(), file.id.to_string().into());
    metadata.insert("file_name".into(), file.name.clone().into());
    metadata.insert("chunk_index".into(), chunk.index.into());
    metadata.insert("chunk_count".into(), total.into());
    if let Some(heading) = &chunk.heading {
        metadata.insert("heading".into(), heading.clone().into());
    }
    Ok(NewMemory {
        shared_with: None,
        user_id: external(&file.user_id)?,
        agent_id: external(&file.agent_id)?,
        session_id: external(&file.session_id)?,
        kind: file
            .kind
            .parse::<MemoryKind>()
            .unwrap_or(MemoryKind::Semantic),
        key: None,
        content: chunk.content.clone(),
        metadata,
        categories: Vec::new(),
        source: MemorySource::File,
        confidence: 1.0,
        expires_at: None,
        occurred_at: None,
        visibility: None,
    })
}

/// Usage is written straight to storage (one transaction), billed to whoever uploaded.
async fn bill(
    engine: &MemoryEngine,
    scope: &ProjectScope,
    file: &FileRecord,
    units: &[(UsageUnit, i64)],
) -> Result<(), String> {
    let increments: Vec<UsageIncrement> = units
        .iter()
        .filter(|(_, quantity)| *quantity > 0)
        .map(|(unit, quantity)| UsageIncrement {
            organization_id: scope.organization_id(),
            project_id: scope.project_id(),
            attribution: engram_core::usage::UsageAttribution::from_billing_label(&file.credential)
                .for_subject(file.user_id.as_deref(), file.agent_id.as_deref()),
            unit: *unit,
            at: Utc::now(),
            quantity: *quantity,
        })
        .collect();
    engine
        .storage
        .add_usage(&increments)
        .await
        .map_err(|error| error.to_string())
}
