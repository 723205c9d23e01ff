//! Applies outbox entries to the vector index: re-reads each memory's current row and
//! upserts it (with its version) or deletes its point, then flushes and clears the entries.

use crate::EngineError;
use engram_core::{MemoryId, ProjectScope};
use engram_index::{IndexedMemory, VectorIndex};
use engram_storage::{OutboxEntry, Storage};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

/// How long a worker holds the outbox entries it claimed before others may take them over.
/// Far longer than applying one batch takes; only a crashed worker's entries wait this long.
pub const DEFAULT_OUTBOX_LEASE: Duration = Duration::from_secs(60);

/// Figures from one reconciliation pass.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReconcileReport {
    pub memories_checked: u64,
    pub points_missing: u64,
    pub points_stale: u64,
}

pub struct IndexApplier {
    storage: Storage,
    index: Arc<dyn VectorIndex>,
    /// Names this applier's outbox leases; unique per process and applier.
    worker_id: String,
    outbox_lease: Duration,
    /// One application at a time: reading a row and writing its point must not interleave
    /// with another application for the same memory, or an old read could re-insert a point
    /// that a newer one just deleted.
    apply_lock: tokio::sync::Mutex<()>,
    /// Wakes the background loop when a write left work behind.
    pub work_available: tokio::sync::Notify,
}

impl IndexApplier {
    pub fn new(storage: Storage, index: Arc<dyn VectorIndex>) -> Self {
        Self {
            storage,
            index,
            worker_id: format!(
                "{}-{}",
                std::process::id(),
                &uuid::Uuid::now_v7().simple().to_string()[24..]
            ),
            outbox_lease: DEFAULT_OUTBOX_LEASE,
            apply_lock: tokio::sync::Mutex::new(()),
            work_available: tokio::sync::Notify::new(),
        }
    }

    /// Apply the pending entries of particular memories (the read-your-writes path).
    pub async fn apply_pending_for(
        &self,
        scope: &ProjectScope,
        memory_ids: &[MemoryId],
    ) -> Result<usize, EngineError> {
        let _guard = self.apply_lock.lock().await;
        let entries = self
            .storage
            .pending_index_changes_for(scope, memory_ids)
            .await?;
        self.apply_entries_locked(entries).await
    }

    /// Claim up to `batch_size` of the oldest unclaimed entries and apply them; returns how
    /// many were applied. Other workers (other processes) may do the same at the same time.
    pub async fn apply_oldest_pending(&self, batch_size: u64) -> Result<usize, EngineError> {
        let _guard = self.apply_lock.lock().await;
        let entries = self
            .storage
            .claim_index_changes(&self.worker_id, batch_size, self.outbox_lease)
            .await?;
        self.apply_entries_locked(entries).await
    }

    /// Entries not yet applied to the index (every project, leased or not).
    pub async fn outbox_backlog(&self) -> Result<u64, EngineError> {
        Ok(self.storage.outbox_backlog().await?)
    }

    /// The name this applier's outbox leases carry.
    pub fn worker_id(&self) -> &str {
        &self.worker_id
    }

    async fn apply_entries_locked(&self, entries: Vec<OutboxEntry>) -> Result<usize, EngineError> {
        if entries.is_empty() {
            return Ok(0);
        }
        let mut by_project: BTreeMap<uuid::Uuid, (ProjectScope, Vec<&OutboxEntry>)> =
            BTreeMap::new();
        for entry in &entries {
            by_project
                .entry(entry.scope.project_id().as_uuid())
                .or_insert_with(|| (entry.scope, Vec::new()))
                .1
                .push(entry);
        }
        for (scope, project_entries) in by_project.values() {
            let mut memory_ids: Vec<MemoryId> = project_entries
                .iter()
                .map(|entry| entry.memory_id)
                .collect();
            memory_ids.sort();
            memory_ids.dedup();
            let entry_ids: Vec<i64> = project_entries.iter().map(|entry| entry.id).collect();
            if let Err(error) = self.apply_project(scope, &memory_ids).await {
                tracing::warn!(project_id = %scope.project_id(), %error, "index apply failed; entries stay pending");
                let _ = self
                    .storage
                    .record_index_failure(&entry_ids, &error.to_string())
                    .await;
                return Err(error);
            }
        }
        // Only flushed changes may leave the outbox: a crash before this point replays them.
        self.index.flush().await?;
        let entry_ids: Vec<i64> = entries.iter().map(|entry| entry.id).collect();
        self.storage.complete_index_changes(&entry_ids).await?;
        Ok(entries.len())
    }

    async fn apply_project(
        &self,
        scope: &ProjectScope,
        memory_ids: &[MemoryId],
    ) -> Result<(), EngineError> {
        let rows = self.storage.indexing_rows(scope, memory_ids).await?;
        let to_delete: Vec<MemoryId> = memory_ids
            .iter()
            .filter(|id| !rows.contains_key(id))
            .copied()
            .collect();
        let to_upsert: Vec<IndexedMemory> = rows
            .into_values()
            .map(|row| IndexedMemory {
                memory_id: row.memory_id,
                version: row.version,
                vector: row.vector,
                user_id: row.user_id,
                agent_id: row.agent_id,
                session_id: row.session_id,
                kind: row.kind,
                created_at: row.created_at,
            })
            .collect();
        let upserted: Vec<MemoryId> = to_upsert.iter().map(|memory| memory.memory_id).collect();
        if !to_upsert.is_empty() {
            self.index.upsert(scope, to_upsert).await?;
        }
        if !to_delete.is_empty() {
            self.index.delete(scope, to_delete).await?;
        }
        // Another worker may have applied a delete of one of these memories between our read
        // and our upsert, and our upsert would then bring the point back. Deletes are final
        // (ids are never reused), so one re-read after writing settles it: whatever is no
        // longer active now is removed again.
        if !upserted.is_empty() {
            let still_active = self.storage.indexing_rows(scope, &upserted).await?;
            let resurrected: Vec<MemoryId> = upserted
                .into_iter()
                .filter(|memory_id| !still_active.contains_key(memory_id))
                .collect();
            if !resurrected.is_empty() {
                self.index.delete(scope, resurrected).await?;
            }
        }
        Ok(())
    }

    /// Compare every active memory with the index and repair missing or stale points.
    /// Run at start-up, so an index that lost writes in a crash is made whole again.
    pub async fn reconcile_active_memories(
        &self,
        page_size: u64,
    ) -> Result<ReconcileReport, EngineError> {
        let mut report = ReconcileReport::default();
        let mut after = None;
        loop {
            let page = self
                .storage
                .active_memory_versions_after(after, page_size)
                .await?;
            let Some(last) = page.last() else { break };
            after = Some(last.1);
            report.memories_checked += page.len() as u64;
            let mut by_project: HashMap<uuid::Uuid, (ProjectScope, Vec<(MemoryId, i64)>)> =
                HashMap::new();
            for (scope, memory_id, version) in page {
                by_project
                    .entry(scope.project_id().as_uuid())
                    .or_insert_with(|| (scope, Vec::new()))
                    .1
                    .push((memory_id, version));
            }
            for (scope, memories) in by_project.into_values() {
                let ids: Vec<MemoryId> = memories.iter().map(|(id, _)| *id).collect();
                let indexed = self.index.versions(&scope, ids).await?;
                let mut needs_repair = Vec::new();
                for (memory_id, version) in memories {
                    match indexed.get(&memory_id) {
                        None => {
                            report.points_missing += 1;
                            needs_repair.push(memory_id);
                        }
                        Some(indexed_version) if *indexed_version < version => {
                            report.points_stale += 1;
                            needs_repair.push(memory_id);
                        }
                        Some(_) => {}
                    }
                }
                if !needs_repair.is_empty() {
                    let _guard = self.apply_lock.lock().await;
                    self.apply_project(&scope, &needs_repair).await?;
                }
            }
        }
        self.index.flush().await?;
        Ok(report)
    }
}
