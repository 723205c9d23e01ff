//! The re-embedding job's work on one claimed task: embed every searchable memory of the
//! project into the space it moves to, staging the vectors and filling the new index while
//! searches keep the old space, then switch at once; on failure the old space stays.

use super::REEMBEDDING_LEASE;
use crate::MemoryEngine;
use crate::embedding_spaces::ProjectSpace;
use crate::project_settings_cache::PROJECT_SETTINGS_TTL;
use chrono::Utc;
use engram_core::usage::{UsageAttribution, UsageUnit};
use engram_core::{MemoryId, Principal, ProjectScope};
use engram_index::{IndexedMemory, VectorIndex};
use engram_storage::reembedding::{StagedVector, SwitchOutcome};
use engram_storage::tasks::ClaimedTask;
use engram_storage::usage::UsageIncrement;
use std::sync::Arc;

/// Memories embedded and staged at once.
const BATCH: u64 = 64;
/// Attempts to switch while writes keep changing memories: each catches up with what was
/// written since the last.
const SWITCH_ATTEMPTS: usize = 20;
/// The credential usage of this job is billed under.
const REEMBEDDING_CREDENTIAL: &str = "reembedding";
/// Index points read at once when the old space is emptied.
const POINTS_PAGE: usize = 1_000;

/// What the task reports when it is done.
#[derive(Debug, serde::Serialize)]
struct ReembeddingReport {
    /// The model id the project's memories now carry.
    model: String,
    /// Searchable memories moved into the new space at the switch.
    memories: u64,
    /// Memories embedded (some twice, when they changed during the move).
    embedded: u64,
    tokens_embedded: u64,
    /// Points removed from the old space's index.
    old_points_removed: u64,
}

pub(super) async fn reembed_claimed(
    engine: &MemoryEngine,
    principal: &Principal,
    task: &ClaimedTask,
) -> Result<serde_json::Value, String> {
    let scope = task.scope;
    let settings = engine
        .storage
        .project_settings(&scope)
        .await
        .map_err(|error| error.to_string())?;
    let Some(change) = settings
        .embedding_change
        .filter(|change| change.task_id == task.id)
    else {
        return Err(
            "the project is no longer moving to this embedding (the change was cancelled or replaced)"
                .to_string(),
        );
    };
    // The old space is only needed to empty it afterwards: a model the deployment no longer
    // offers is exactly one a project may need to leave.
    let old_space = engine
        .spaces
        .space_of(settings.embedding, settings.embedding_generation)
        .await
        .ok();
    let outcome = match engine
        .spaces
        .space_of(change.to, settings.embedding_generation + 1)
        .await
    {
        Ok(new_space) => move_to(engine, principal, task, old_space.as_ref(), &new_space).await,
        Err(error) => Err(error.to_string()),
    };
    if let Err(error) = &outcome {
        abandon(engine, principal, task, change.to, error).await;
    }
    outcome
}

async fn move_to(
    engine: &MemoryEngine,
    principal: &Principal,
    task: &ClaimedTask,
    old_space: Option<&ProjectSpace>,
    new_space: &ProjectSpace,
) -> Result<serde_json::Value, String> {
    let scope = &task.scope;
    let embedder = new_space
        .embedder()
        .await
        .map_err(|error| error.to_string())?;
    let total = engine
        .storage
        .task(scope, task.id)
        .await
        .map_err(|error| error.to_string())?
        .map_or(0, |record| record.progress_total);
    let mut embedded: u64 = 0;
    let mut tokens_embedded: u64 = 0;
    for _attempt in 0..SWITCH_ATTEMPTS {
        // Each pass walks forward by id; the next one catches up with what changed behind it.
        let mut after = None;
        // Cancelled or replaced, the move stops at its next batch: staging refuses it.
        loop {
            let sources = engine
                .storage
                .memories_to_reembed(scope, &new_space.model_id, after, BATCH)
                .await
                .map_err(|error| error.to_string())?;
            let Some(last) = sources.last() else {
                break;
            };
            after = Some(last.memory_id);
            let texts: Vec<String> = sources
                .iter()
                .map(|source| source.content.clone())
                .collect();
            let (vectors, tokens): (Vec<Vec<f32>>, Vec<u64>) = embedder
                .embed_counted(texts)
                .await
                .map_err(|error| error.to_string())?
                .into_iter()
                .unzip();
            if vectors.len() != sources.len() {
                return Err("the embedder returned a different number of vectors".to_string());
            }
            let batch_tokens: u64 = tokens.iter().sum();
            let staged: Vec<StagedVector> = sources
                .iter()
                .zip(&vectors)
                .map(|(source, vector)| StagedVector {
                    memory_id: source.memory_id,
                    content_hash: source.content_hash.clone(),
                    vector: vector.clone(),
                })
                .collect();
            engine
                .storage
                .stage_reembeddings(scope, task.id, &new_space.model_id, &staged)
                .await
                .map_err(|error| error.to_string())?;
            let active: Vec<(MemoryId, Vec<f32>)> = sources
                .iter()
                .zip(vectors)
                .filter(|(source, _)| source.active)
                .map(|(source, vector)| (source.memory_id, vector))
                .collect();
            index_in_new_space(engine, scope, &new_space.index, active).await?;
            meter(engine, scope, batch_tokens).await?;
            embedded += sources.len() as u64;
            tokens_embedded += batch_tokens;
            let done = i64::try_from(embedded).unwrap_or(i64::MAX).min(total);
            engine
                .maintenance_store()
                .task_progress(task.id, done, total.max(done), REEMBEDDING_LEASE)
                .await
                .map_err(|error| error.to_string())?;
        }
        new_space
            .index
            .flush()
            .await
            .map_err(|error| error.to_string())?;
        match engine
            .storage
            .switch_embedding(
                scope,
                task.id,
                new_space.embedding,
                &new_space.model_id,
                principal.actor(),
            )
            .await
            .map_err(|error| error.to_string())?
        {
            SwitchOutcome::Switched { memories } => {
                let old_points_removed =
                    settle_after_switch(engine, scope, old_space, new_space).await;
                let total = i64::try_from(memories).unwrap_or(i64::MAX);
                if let Err(error) = engine
                    .maintenance_store()
                    .task_progress(task.id, total, total, REEMBEDDING_LEASE)
                    .await
                {
                    tracing::warn!(%error, "cannot record the re-embedding's final progress");
                }
                tracing::info!(
                    project_id = %scope.project_id(),
                    model = %new_space.model_id,
                    memories,
                    embedded,
                    "project switched to its new embedding space"
                );
                return serde_json::to_value(ReembeddingReport {
                    model: new_space.model_id.clone(),
                    memories,
                    embedded,
                    tokens_embedded,
                    old_points_removed,
                })
                .map_err(|error| error.to_string());
            }
            SwitchOutcome::Behind { memories } => {
                tracing::info!(
                    project_id = %scope.project_id(),
                    memories,
                    "memories changed during the move; embedding them before switching"
                );
            }
            SwitchOutcome::NoLongerWanted => {
                return Err("the move was cancelled or replaced before it could switch".to_string());
            }
        }
    }
    Err(format!(
        "memories kept changing faster than they could be re-embedded ({SWITCH_ATTEMPTS} attempts to switch); the project stays on its current embedding"
    ))
}

/// After the switch: the new space brought to what the database holds and the old one
/// emptied, once every process reads the new setting; how many old points went. This is
/// upkeep the reconciler would also do, so a failure is logged, not the task's.
async fn settle_after_switch(
    engine: &MemoryEngine,
    scope: &ProjectScope,
    old_space: Option<&ProjectSpace>,
    new_space: &ProjectSpace,
) -> u64 {
    engine.forget_project_settings(scope.project_id());
    let reconcile = || async {
        // Points of memories changed or deleted during the move, and what processes still
        // on the old setting sent to the old index, are brought into the new space.
        if let Err(error) = engine.applier.reconcile_project(scope).await {
            tracing::warn!(%error, "cannot reconcile the new space after the switch; the reconciler will");
        }
    };
    reconcile().await;
    let Some(old_space) = old_space.filter(|old_space| old_space.model_id != new_space.model_id)
    else {
        return 0;
    };
    // Other processes read the new setting within the settings cache's lifetime; until then
    // their searches still go to the old index.
    tracing::info!(
        wait_seconds = PROJECT_SETTINGS_TTL.as_secs(),
        "waiting for every process to read the new embedding before emptying the old index"
    );
    tokio::time::sleep(PROJECT_SETTINGS_TTL).await;
    reconcile().await;
    empty_unused_space(engine, scope, old_space)
        .await
        .unwrap_or_else(|error| {
            tracing::warn!(%error, "cannot remove the old space's points");
            0
        })
}

/// Upserts the active memories into the new space's index with their new vectors (read
/// again: the point carries what filters read, as the database holds it now).
async fn index_in_new_space(
    engine: &MemoryEngine,
    scope: &ProjectScope,
    index: &Arc<dyn VectorIndex>,
    vectors: Vec<(MemoryId, Vec<f32>)>,
) -> Result<(), String> {
    if vectors.is_empty() {
        return Ok(());
    }
    let ids: Vec<MemoryId> = vectors.iter().map(|(memory_id, _)| *memory_id).collect();
    let mut rows = engine
        .storage
        .indexing_rows(scope, &ids)
        .await
        .map_err(|error| error.to_string())?;
    let points: Vec<IndexedMemory> = vectors
        .into_iter()
        .filter_map(|(memory_id, vector)| {
            let row = rows.remove(&memory_id)?;
            Some(IndexedMemory {
                vector,
                ..crate::indexing::indexed_memory(row)
            })
        })
        .collect();
    if points.is_empty() {
        return Ok(());
    }
    let upserted: Vec<MemoryId> = points.iter().map(|point| point.memory_id).collect();
    index
        .upsert(scope, points)
        .await
        .map_err(|error| error.to_string())?;
    crate::indexing::remove_points_no_longer_active(
        &engine.storage,
        index.as_ref(),
        scope,
        upserted,
    )
    .await
    .map_err(|error| error.to_string())
}

/// Empties `space` of the project's points unless the project uses it again (it may have
/// moved back meanwhile) or another move is filling it.
async fn empty_unused_space(
    engine: &MemoryEngine,
    scope: &ProjectScope,
    space: &ProjectSpace,
) -> Result<u64, String> {
    let settings = engine
        .storage
        .project_settings(scope)
        .await
        .map_err(|error| error.to_string())?;
    let model_of = |embedding| {
        engine
            .spaces
            .identity_of(embedding)
            .map(|(model_id, _)| model_id)
            .ok()
    };
    let in_use = model_of(settings.embedding);
    let filling = settings
        .embedding_change
        .and_then(|change| model_of(change.to));
    if in_use.as_deref() == Some(space.model_id.as_str())
        || filling.as_deref() == Some(space.model_id.as_str())
    {
        return Ok(0);
    }
    empty_space(scope, &space.index)
        .await
        .map_err(|error| error.to_string())
}

async fn meter(engine: &MemoryEngine, scope: &ProjectScope, tokens: u64) -> Result<(), String> {
    if tokens == 0 {
        return Ok(());
    }
    engine
        .storage
        .add_usage(&[UsageIncrement {
            organization_id: scope.organization_id(),
            project_id: scope.project_id(),
            attribution: UsageAttribution::engine(REEMBEDDING_CREDENTIAL),
            unit: UsageUnit::TokensEmbedded,
            at: Utc::now(),
            quantity: i64::try_from(tokens).unwrap_or(i64::MAX),
        }])
        .await
        .map_err(|error| error.to_string())
}

/// Removes every point of the project from `index` (a space it no longer uses); how many.
async fn empty_space(
    scope: &ProjectScope,
    index: &Arc<dyn VectorIndex>,
) -> Result<u64, engram_index::IndexError> {
    let mut removed = 0;
    let mut from = None;
    loop {
        let page = index.points_page(scope, from, POINTS_PAGE).await?;
        let ids: Vec<MemoryId> = page
            .points
            .iter()
            .map(|(memory_id, _)| *memory_id)
            .collect();
        removed += ids.len() as u64;
        if !ids.is_empty() {
            index.delete(scope, ids).await?;
        }
        match page.next {
            Some(next) => from = Some(next),
            None => break,
        }
    }
    index.flush().await?;
    Ok(removed)
}

/// The move failed: the project stays in its space, the staged vectors go, and so do the
/// points already written to the new space's index.
async fn abandon(
    engine: &MemoryEngine,
    principal: &Principal,
    task: &ClaimedTask,
    to: engram_core::ProjectEmbedding,
    error: &str,
) {
    let scope = &task.scope;
    tracing::warn!(project_id = %scope.project_id(), %error, "re-embedding failed; the project keeps its embedding");
    if let Err(abandon_error) = engine
        .storage
        .abandon_embedding_change(
            scope,
            task.id,
            "failed: the re-embedding task did not finish",
            principal.actor(),
        )
        .await
    {
        tracing::warn!(%abandon_error, "cannot record the abandoned re-embedding");
    }
    // Only from an index the project does not use (the same model may serve both settings)
    // and no other move of the project is filling now.
    let Ok(abandoned) = engine.spaces.space_of(to, 0).await else {
        return;
    };
    if let Err(cleanup_error) = empty_unused_space(engine, scope, &abandoned).await {
        tracing::warn!(%cleanup_error, "cannot remove the abandoned space's points");
    }
}
