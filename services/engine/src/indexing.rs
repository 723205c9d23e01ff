//! Applies outbox entries to the vector index: re-reads each memory's current row and
//! upserts it (with its version) or deletes its point, then flushes and clears the entries.

use crate::EngineError;
use chrono::{DateTime, Utc};
use engram_core::{MemoryId, ProjectScope};
use engram_index::{IndexedMemory, VectorIndex};
use engram_storage::{MaintenanceStore, OutboxEntry, Storage};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

/// How long a worker holds the outbox entries it claimed before others may take them over.
/// Far longer than applying one batch takes; only a crashed worker's entries wait this long.
pub const OUTBOX_LEASE: Duration = Duration::from_secs(60);

/// Figures from one reconciliation pass: what differed between database and index (and
/// was repaired).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReconcileReport {
    pub projects_checked: u64,
    pub memories_checked: u64,
    /// Active memories without a point.
    pub points_missing: u64,
    /// Points older than their memory.
    pub points_stale: u64,
    /// Points whose memory is deleted, superseded or unknown.
    pub points_orphaned: u64,
}

impl ReconcileReport {
    fn add(&mut self, other: &ReconcileReport) {
        self.projects_checked += other.projects_checked;
        self.memories_checked += other.memories_checked;
        self.points_missing += other.points_missing;
        self.points_stale += other.points_stale;
        self.points_orphaned += other.points_orphaned;
    }

    /// Points that had to be repaired.
    pub fn drift(&self) -> u64 {
        self.points_missing + self.points_stale + self.points_orphaned
    }
}

/// Drift found by the last full reconciliation, by kind (`missing`, `stale`, `orphaned`).
pub const INDEX_DRIFT_POINTS: &str = "engram_index_drift_points";
const RECONCILE_PAGE_SIZE: usize = 1_000;

/// After upserting `upserted` into `index`: another worker may have applied a delete of one
/// of these memories between our read and our upsert, and our upsert would then bring the
/// point back. Deletes are final (ids are never reused), so one re-read after writing settles
/// it: whatever is no longer active now is removed again.
pub(crate) async fn remove_points_no_longer_active(
    storage: &Storage,
    index: &dyn VectorIndex,
    scope: &ProjectScope,
    upserted: Vec<MemoryId>,
) -> Result<(), EngineError> {
    if upserted.is_empty() {
        return Ok(());
    }
    let still_active = storage.active_memory_ids(scope, &upserted).await?;
    let resurrected: Vec<MemoryId> = upserted
        .into_iter()
        .filter(|memory_id| !still_active.contains(memory_id))
        .collect();
    if !resurrected.is_empty() {
        index.delete(scope, resurrected).await?;
    }
    Ok(())
}

/// A memory's index point as its row holds it.
pub(crate) fn indexed_memory(row: engram_storage::outbox::IndexingRow) -> IndexedMemory {
    IndexedMemory {
        memory_id: row.memory_id,
        version: row.version,
        vector: row.vector,
        user_id: row.user_id,
        agent_id: row.agent_id,
        session_id: row.session_id,
        kind: row.kind,
        created_at: row.created_at,
        text: row.content,
        filterable: engram_index::FilterableFields {
            source: Some(row.source),
            categories: row.categories,
            confidence: Some(row.confidence),
            updated_at: Some(row.updated_at),
            occurred_at: Some(row.occurred_at),
            metadata: row.metadata,
            visibility: Some(row.visibility),
            shared_with: row.shared_with,
            verified: Some(row.verified),
        },
    }
}

pub struct IndexApplier {
    /// The outbox and every project's scope: the applier is maintenance work.
    maintenance: MaintenanceStore,
    /// Each project's rows, read under the scope of the outbox entry being applied.
    storage: Storage,
    index: Arc<dyn VectorIndex>,
    /// Names this applier's outbox leases; unique per process and applier.
    worker_id: String,
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
            maintenance: MaintenanceStore::new(storage.clone()),
            storage,
            index,
            worker_id: format!(
                "{}-{}",
                std::process::id(),
                &uuid::Uuid::now_v7().simple().to_string()[24..]
            ),
            apply_lock: tokio::sync::Mutex::new(()),
            work_available: tokio::sync::Notify::new(),
        }
    }

    /// Both stores answer: what a worker's `/readyz` reports.
    pub async fn check_ready(&self) -> Result<(), EngineError> {
        self.storage.check_ready().await?;
        self.index.check_ready().await?;
        Ok(())
    }

    /// The store of work across projects, for the workers this applier's process runs.
    pub fn maintenance_store(&self) -> &MaintenanceStore {
        &self.maintenance
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
            .maintenance
            .claim_index_changes(&self.worker_id, batch_size, OUTBOX_LEASE)
            .await?;
        self.apply_entries_locked(entries).await
    }

    /// Entries not yet applied to the index (every project, leased or not).
    pub async fn outbox_backlog(&self) -> Result<u64, EngineError> {
        Ok(self.maintenance.outbox_backlog().await?)
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
                    .maintenance
                    .record_index_failure(&entry_ids, &error.to_string())
                    .await;
                return Err(error);
            }
        }
        // Only flushed changes may leave the outbox: a crash before this point replays them.
        self.index.flush().await?;
        let entry_ids: Vec<i64> = entries.iter().map(|entry| entry.id).collect();
        self.maintenance.complete_index_changes(&entry_ids).await?;
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
        let to_upsert: Vec<IndexedMemory> = rows.into_values().map(indexed_memory).collect();
        let upserted: Vec<MemoryId> = to_upsert.iter().map(|memory| memory.memory_id).collect();
        if !to_upsert.is_empty() {
            self.index.upsert(scope, to_upsert).await?;
        }
        if !to_delete.is_empty() {
            self.index.delete(scope, to_delete).await?;
        }
        remove_points_no_longer_active(&self.storage, self.index.as_ref(), scope, upserted).await
    }

    /// Compare every project's active memories with its index points and repair what
    /// differs: missing points, stale versions, and orphans (points whose memory is gone).
    /// `progress` is told (projects done, projects in all) after each project.
    pub async fn reconcile_all_projects(
        &self,
        mut progress: impl FnMut(usize, usize),
    ) -> Result<ReconcileReport, EngineError> {
        let scopes = self.maintenance.all_project_scopes().await?;
        let mut report = ReconcileReport::default();
        for (done, scope) in scopes.iter().enumerate() {
            let project_report = self.reconcile_project(scope).await?;
            report.add(&project_report);
            progress(done + 1, scopes.len());
        }
        self.index.flush().await?;
        metrics::gauge!(INDEX_DRIFT_POINTS, "kind" => "missing").set(report.points_missing as f64);
        metrics::gauge!(INDEX_DRIFT_POINTS, "kind" => "stale").set(report.points_stale as f64);
        metrics::gauge!(INDEX_DRIFT_POINTS, "kind" => "orphaned")
            .set(report.points_orphaned as f64);
        Ok(report)
    }

    /// Reconcile one project (see [`Self::reconcile_all_projects`]).
    pub async fn reconcile_project(
        &self,
        scope: &ProjectScope,
    ) -> Result<ReconcileReport, EngineError> {
        // The database first: a memory added after this read is in the index but not in
        // `active`; it looks like an orphan and is re-checked before anything is deleted.
        let mut active: HashMap<MemoryId, i64> = HashMap::new();
        let mut after = None;
        loop {
            let page = self
                .storage
                .active_memory_versions_of(scope, after, RECONCILE_PAGE_SIZE as u64)
                .await?;
            let Some(last) = page.last() else { break };
            after = Some(last.0);
            active.extend(page);
        }
        let mut indexed: HashMap<MemoryId, i64> = HashMap::with_capacity(active.len());
        let mut from = None;
        loop {
            let page = self
                .index
                .points_page(scope, from, RECONCILE_PAGE_SIZE)
                .await?;
            indexed.extend(page.points);
            match page.next {
                Some(next) => from = Some(next),
                None => break,
            }
        }
        let maybe_orphaned: Vec<MemoryId> = indexed
            .keys()
            .filter(|memory_id| !active.contains_key(memory_id))
            .copied()
            .collect();
        self.repair(scope, &active, &indexed, maybe_orphaned).await
    }

    /// Reconcile only what changed at or after `since` in every project: memories written,
    /// edited, superseded or deleted (their tombstones) since then are compared with their
    /// points and repaired.
    /// This is the periodic pass between full ones (see `run_reconciler`): its cost follows
    /// the writes, not the size of the projects. Points lost without a change in the database
    /// (an index restored from an old backup) wait for the next full pass.
    pub async fn reconcile_changed_since(
        &self,
        since: DateTime<Utc>,
    ) -> Result<ReconcileReport, EngineError> {
        let scopes = self.maintenance.all_project_scopes().await?;
        let mut report = ReconcileReport::default();
        for scope in &scopes {
            report.add(&self.reconcile_changes_in_project(scope, since).await?);
        }
        self.index.flush().await?;
        Ok(report)
    }

    async fn reconcile_changes_in_project(
        &self,
        scope: &ProjectScope,
        since: DateTime<Utc>,
    ) -> Result<ReconcileReport, EngineError> {
        let mut active: HashMap<MemoryId, i64> = HashMap::new();
        let mut no_longer_active: Vec<MemoryId> = Vec::new();
        let mut after = None;
        loop {
            let page = self
                .storage
                .memory_versions_changed_since(
                    scope,
                    since,
                    after.as_ref(),
                    RECONCILE_PAGE_SIZE as u64,
                )
                .await?;
            let Some(last) = page.last() else { break };
            after = Some(*last);
            for changed in page {
                if changed.active {
                    active.insert(changed.memory_id, changed.version);
                } else {
                    no_longer_active.push(changed.memory_id);
                }
            }
        }
        let mut after = None;
        loop {
            let page = self
                .storage
                .memories_deleted_since(scope, since, after.as_ref(), RECONCILE_PAGE_SIZE as u64)
                .await?;
            let Some(last) = page.last() else { break };
            after = Some(*last);
            no_longer_active.extend(page.into_iter().map(|(_, memory_id)| memory_id));
        }
        if active.is_empty() && no_longer_active.is_empty() {
            return Ok(ReconcileReport::default());
        }
        let mut indexed: HashMap<MemoryId, i64> = HashMap::with_capacity(active.len());
        let changed_ids: Vec<MemoryId> = active
            .keys()
            .copied()
            .chain(no_longer_active.iter().copied())
            .collect();
        for ids in changed_ids.chunks(RECONCILE_PAGE_SIZE) {
            indexed.extend(self.index.versions(scope, ids.to_vec()).await?);
        }
        let maybe_orphaned: Vec<MemoryId> = no_longer_active
            .into_iter()
            .filter(|memory_id| indexed.contains_key(memory_id))
            .collect();
        self.repair(scope, &active, &indexed, maybe_orphaned).await
    }

    /// Upserts the `active` memories whose point is missing or older, and deletes the
    /// `maybe_orphaned` points whose memory is still not active when re-read.
    async fn repair(
        &self,
        scope: &ProjectScope,
        active: &HashMap<MemoryId, i64>,
        indexed: &HashMap<MemoryId, i64>,
        maybe_orphaned: Vec<MemoryId>,
    ) -> Result<ReconcileReport, EngineError> {
        let mut report = ReconcileReport {
            projects_checked: 1,
            memories_checked: active.len() as u64,
            ..Default::default()
        };
        let mut needs_upsert = Vec::new();
        for (memory_id, version) in active {
            match indexed.get(memory_id) {
                None => {
                    report.points_missing += 1;
                    needs_upsert.push(*memory_id);
                }
                Some(indexed_version) if indexed_version < version => {
                    report.points_stale += 1;
                    needs_upsert.push(*memory_id);
                }
                Some(_) => {}
            }
        }
        if needs_upsert.is_empty() && maybe_orphaned.is_empty() {
            return Ok(report);
        }
        let _guard = self.apply_lock.lock().await;
        if !needs_upsert.is_empty() {
            // Re-reads each row: whatever changed since the scan is applied as it is now.
            self.apply_project(scope, &needs_upsert).await?;
        }
        if !maybe_orphaned.is_empty() {
            let still_active = self
                .storage
                .active_memory_ids(scope, &maybe_orphaned)
                .await?;
            let orphaned: Vec<MemoryId> = maybe_orphaned
                .into_iter()
                .filter(|memory_id| !still_active.contains(memory_id))
                .collect();
            report.points_orphaned = orphaned.len() as u64;
            if !orphaned.is_empty() {
                self.index.delete(scope, orphaned).await?;
            }
        }
        tracing::info!(
            project_id = %scope.project_id(),
            missing = report.points_missing,
            stale = report.points_stale,
            orphaned = report.points_orphaned,
            "reconciler repaired the index"
        );
        Ok(report)
    }
}
