//! Several indexers (as separate worker processes would) drain one outbox into one index
//! while memories are added, edited and deleted: afterwards the index holds exactly the
//! active memories at their current versions. Runs on SQLite and on a fresh PostgreSQL.

use engram_core::{ExternalId, MemoryId, MemoryKind, MemorySource, NewMemory, ProjectScope};
use engram_engine::IndexApplier;
use engram_index::{EdgeVectorIndex, VectorIndex};
use engram_storage::{ApiKeyPepper, InsertOutcome, MemoryDraft, MemoryPatch, Storage};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

fn vector(seed: usize) -> Vec<f32> {
    let angle = seed as f32 * 0.37;
    vec![angle.cos(), angle.sin(), 0.5]
}

fn draft(number: usize) -> MemoryDraft {
    MemoryDraft {
        memory: NewMemory {
            user_id: Some(ExternalId::parse(&format!("u-{}", number % 3)).unwrap()),
            agent_id: None,
            session_id: None,
            kind: MemoryKind::Semantic,
            key: None,
            content: format!("memory {number}"),
            metadata: serde_json::Map::new(),
            categories: Vec::new(),
            source: MemorySource::UserStated,
            confidence: 1.0,
            expires_at: None,
            occurred_at: None,
            visibility: Some(engram_core::Visibility::Shared),
            shared_with: None,
        },
        embedding: vector(number),
        embedding_model: "test-vectors".to_string(),
        embedding_generation: 0,
        supersedes: None,
        reason: None,
    }
}

/// Stores `drafts` (no idempotency key) and returns the stored memories.
async fn insert(
    storage: &Storage,
    scope: &ProjectScope,
    drafts: Vec<MemoryDraft>,
) -> Vec<engram_core::Memory> {
    let outcome = storage
        .insert_memories(
            scope,
            drafts,
            &engram_core::audit::Actor::system("test"),
            None,
            |_| (201, String::new()),
        )
        .await
        .unwrap();
    let InsertOutcome::Inserted { memories, .. } = outcome else {
        panic!("no idempotency key, nothing to replay")
    };
    memories
}

async fn project(storage: &Storage) -> ProjectScope {
    let pepper = ApiKeyPepper::new(b"pepper".to_vec());
    let record = storage
        .bootstrap_organization("org", "project", "owner@example.com", "hash", &pepper)
        .await
        .unwrap();
    storage
        .authenticate_api_key(&record.api_key, &pepper)
        .await
        .unwrap()
        .unwrap()
}

async fn four_indexers_converge(storage: Storage) {
    let index_dir = tempfile::tempdir().unwrap();
    let index: Arc<dyn VectorIndex> = Arc::new(EdgeVectorIndex::open(index_dir.path(), 3).unwrap());
    let scope = project(&storage).await;
    let writing = Arc::new(AtomicBool::new(true));

    let mut indexers = Vec::new();
    for _ in 0..4 {
        let applier = IndexApplier::new(storage.clone(), index.clone());
        let writing = writing.clone();
        indexers.push(tokio::spawn(async move {
            let mut applied = 0;
            loop {
                let still_writing = writing.load(Ordering::SeqCst);
                let count = applier.apply_oldest_pending(5).await.unwrap();
                applied += count;
                if count == 0 {
                    if !still_writing {
                        return applied;
                    }
                    tokio::task::yield_now().await;
                }
            }
        }));
    }

    // The writer: adds, edits (new version, new vector) and deletes, interleaved.
    let mut ids: Vec<MemoryId> = Vec::new();
    let mut deleted: Vec<MemoryId> = Vec::new();
    for round in 0..20 {
        let memories = insert(
            &storage,
            &scope,
            (0..5).map(|n| draft(round * 5 + n)).collect(),
        )
        .await;
        ids.extend(memories.iter().map(|memory| memory.id));
        let edited = ids[(round * 7) % ids.len()];
        if !deleted.contains(&edited) {
            storage
                .update_memory(
                    &scope,
                    edited,
                    MemoryPatch {
                        content: Some((format!("edited in round {round}"), vector(1_000 + round))),
                        ..Default::default()
                    },
                    None,
                    &engram_core::audit::Actor::system("test"),
                )
                .await
                .unwrap();
        }
        if round % 2 == 1 {
            let victim = ids[(round * 3) % ids.len()];
            if !deleted.contains(&victim) {
                storage
                    .delete_memory(&scope, victim, &engram_core::audit::Actor::system("test"))
                    .await
                    .unwrap();
                deleted.push(victim);
            }
        }
        tokio::task::yield_now().await;
    }
    writing.store(false, Ordering::SeqCst);
    let mut applied = Vec::new();
    for indexer in indexers {
        applied.push(indexer.await.unwrap());
    }
    assert_eq!(
        engram_storage::MaintenanceStore::new(storage.clone())
            .outbox_backlog()
            .await
            .unwrap(),
        0,
        "the outbox drained"
    );
    assert!(
        applied.iter().filter(|count| **count > 0).count() >= 2,
        "the indexers shared the work: {applied:?}"
    );

    let indexed = index.versions(&scope, ids.clone()).await.unwrap();
    for memory_id in &ids {
        if deleted.contains(memory_id) {
            assert!(
                !indexed.contains_key(memory_id),
                "deleted memory {memory_id} was resurrected in the index"
            );
            continue;
        }
        let stored = storage
            .get_memory(&engram_core::MemoryScope::project_wide(scope), *memory_id)
            .await
            .unwrap();
        assert_eq!(
            indexed.get(memory_id),
            Some(&stored.version),
            "memory {memory_id} is indexed at its current version"
        );
    }
}

/// The real index, with every upsert held back for a while: it opens, on purpose, the window
/// in which another worker applies a delete between this worker's read and its write.
struct UpsertsLateIndex {
    inner: Arc<dyn VectorIndex>,
    delay: std::time::Duration,
}

#[async_trait::async_trait]
impl VectorIndex for UpsertsLateIndex {
    async fn upsert(
        &self,
        scope: &ProjectScope,
        points: Vec<engram_index::IndexedMemory>,
    ) -> Result<(), engram_index::IndexError> {
        tokio::time::sleep(self.delay).await;
        self.inner.upsert(scope, points).await
    }
    async fn delete(
        &self,
        scope: &ProjectScope,
        ids: Vec<MemoryId>,
    ) -> Result<(), engram_index::IndexError> {
        self.inner.delete(scope, ids).await
    }
    async fn search(
        &self,
        scope: &ProjectScope,
        query: engram_index::VectorQuery,
    ) -> Result<Vec<engram_index::VectorHit>, engram_index::IndexError> {
        self.inner.search(scope, query).await
    }
    async fn keyword_search(
        &self,
        scope: &ProjectScope,
        query: engram_index::KeywordQuery,
    ) -> Result<Vec<engram_index::VectorHit>, engram_index::IndexError> {
        self.inner.keyword_search(scope, query).await
    }
    async fn versions(
        &self,
        scope: &ProjectScope,
        ids: Vec<MemoryId>,
    ) -> Result<std::collections::HashMap<MemoryId, i64>, engram_index::IndexError> {
        self.inner.versions(scope, ids).await
    }
    async fn points_page(
        &self,
        scope: &ProjectScope,
        from: Option<MemoryId>,
        limit: usize,
    ) -> Result<engram_index::PointsPage, engram_index::IndexError> {
        self.inner.points_page(scope, from, limit).await
    }
    async fn delete_subject(
        &self,
        scope: &ProjectScope,
        user_id: &str,
    ) -> Result<(), engram_index::IndexError> {
        self.inner.delete_subject(scope, user_id).await
    }
    async fn count_points(
        &self,
        scope: &ProjectScope,
        user_id: Option<&str>,
    ) -> Result<u64, engram_index::IndexError> {
        self.inner.count_points(scope, user_id).await
    }
    async fn flush(&self) -> Result<(), engram_index::IndexError> {
        self.inner.flush().await
    }
    async fn check_ready(&self) -> Result<(), engram_index::IndexError> {
        self.inner.check_ready().await
    }
}

/// Worker A reads a memory and is slow to upsert it; meanwhile the memory is deleted and
/// worker B applies the delete. A's late upsert must not leave the deleted memory indexed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_late_upsert_never_resurrects_a_deleted_memory() {
    let directory = tempfile::tempdir().unwrap();
    let url = format!(
        "sqlite://{}?mode=rwc",
        directory.path().join("test.db").display()
    );
    let storage = Storage::connect(&url).await.unwrap();
    let index: Arc<dyn VectorIndex> =
        Arc::new(EdgeVectorIndex::open(&directory.path().join("index"), 3).unwrap());
    let scope = project(&storage).await;
    let memories = insert(&storage, &scope, vec![draft(1)]).await;
    let memory_id = memories[0].id;

    let slow_worker = IndexApplier::new(
        storage.clone(),
        Arc::new(UpsertsLateIndex {
            inner: index.clone(),
            delay: std::time::Duration::from_millis(400),
        }),
    );
    let slow = tokio::spawn(async move { slow_worker.apply_oldest_pending(10).await.unwrap() });
    // The slow worker has claimed the entry and read the row; now the memory goes away.
    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    storage
        .delete_memory(
            &scope,
            memory_id,
            &engram_core::audit::Actor::system("test"),
        )
        .await
        .unwrap();
    let fast_worker = IndexApplier::new(storage.clone(), index.clone());
    assert_eq!(
        fast_worker.apply_oldest_pending(10).await.unwrap(),
        1,
        "the delete's entry"
    );
    assert_eq!(slow.await.unwrap(), 1, "the add's entry");

    assert!(
        index
            .versions(&scope, vec![memory_id])
            .await
            .unwrap()
            .is_empty(),
        "the deleted memory was brought back by the late upsert"
    );
    assert_eq!(
        engram_storage::MaintenanceStore::new(storage.clone())
            .outbox_backlog()
            .await
            .unwrap(),
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn four_indexers_converge_on_sqlite() {
    let directory = tempfile::tempdir().unwrap();
    let url = format!(
        "sqlite://{}?mode=rwc",
        directory.path().join("test.db").display()
    );
    four_indexers_converge(Storage::connect(&url).await.unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn four_indexers_converge_on_postgres() {
    let url = engram_test_postgres::fresh_database_url().await;
    four_indexers_converge(Storage::connect(&url).await.unwrap()).await;
}

/// Drift no outbox entry describes (a point lost by the index, a point left stale, a point
/// whose memory never existed) is found by the reconciler and repaired; a second pass finds
/// nothing. Another project's points are neither counted nor touched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reconciler_repairs_missing_stale_and_orphaned_points() {
    let directory = tempfile::tempdir().unwrap();
    let url = format!(
        "sqlite://{}?mode=rwc",
        directory.path().join("test.db").display()
    );
    let storage = Storage::connect(&url).await.unwrap();
    let index: Arc<dyn VectorIndex> =
        Arc::new(EdgeVectorIndex::open(&directory.path().join("index"), 3).unwrap());
    let scope = project(&storage).await;
    let applier = IndexApplier::new(storage.clone(), index.clone());
    let memories = insert(&storage, &scope, (0..5).map(draft).collect()).await;
    assert_eq!(applier.apply_oldest_pending(100).await.unwrap(), 5);
    let ids: Vec<MemoryId> = memories.iter().map(|memory| memory.id).collect();

    // Lost by the index.
    index.delete(&scope, vec![ids[0]]).await.unwrap();
    // Edited in the database, but its outbox entry vanished before it was applied.
    storage
        .update_memory(
            &scope,
            ids[1],
            MemoryPatch {
                content: Some(("edited".to_string(), vector(77))),
                ..Default::default()
            },
            None,
            &engram_core::audit::Actor::system("test"),
        )
        .await
        .unwrap();
    let entries = engram_storage::MaintenanceStore::new(storage.clone())
        .claim_index_changes("lost-worker", 10, std::time::Duration::from_secs(60))
        .await
        .unwrap();
    let entry_ids: Vec<i64> = entries.iter().map(|entry| entry.id).collect();
    engram_storage::MaintenanceStore::new(storage.clone())
        .complete_index_changes(&entry_ids)
        .await
        .unwrap();
    // A point whose memory does not exist.
    let stranger = MemoryId::generate();
    index
        .upsert(
            &scope,
            vec![engram_index::IndexedMemory {
                memory_id: stranger,
                version: 1,
                vector: vector(5),
                user_id: None,
                agent_id: None,
                session_id: None,
                kind: MemoryKind::Semantic,
                created_at: chrono::Utc::now(),
                text: "a point without a memory".to_string(),
                filterable: engram_index::FilterableFields::default(),
            }],
        )
        .await
        .unwrap();

    let report = applier.reconcile_all_projects(|_, _| {}).await.unwrap();
    assert_eq!(
        (
            report.points_missing,
            report.points_stale,
            report.points_orphaned
        ),
        (1, 1, 1),
        "{report:?}"
    );
    assert_eq!(report.memories_checked, 5);
    let indexed = index
        .versions(&scope, ids.iter().copied().chain([stranger]).collect())
        .await
        .unwrap();
    assert_eq!(indexed.len(), 5, "every memory indexed, the stranger gone");
    assert_eq!(indexed[&ids[1]], 2, "the edit is indexed");
    assert_eq!(
        applier
            .reconcile_all_projects(|_, _| {})
            .await
            .unwrap()
            .drift(),
        0
    );
}

/// Loses the outbox entries written so far, as a crash between commit and indexing could.
async fn lose_pending_outbox_entries(storage: &Storage) {
    let maintenance = engram_storage::MaintenanceStore::new(storage.clone());
    let entries = maintenance
        .claim_index_changes("lost-worker", 100, std::time::Duration::from_secs(60))
        .await
        .unwrap();
    let entry_ids: Vec<i64> = entries.iter().map(|entry| entry.id).collect();
    maintenance
        .complete_index_changes(&entry_ids)
        .await
        .unwrap();
}

/// The periodic pass between full ones reads only what changed since it last looked: the
/// stale point of a memory edited since then, and the point of a memory deleted since then,
/// are repaired, and nothing else is read. A point lost for a memory untouched since then is
/// left to the full pass, which finds it.
async fn the_pass_over_changes_repairs_what_changed(storage: Storage) {
    let directory = tempfile::tempdir().unwrap();
    let index: Arc<dyn VectorIndex> =
        Arc::new(EdgeVectorIndex::open(&directory.path().join("index"), 3).unwrap());
    let scope = project(&storage).await;
    let applier = IndexApplier::new(storage.clone(), index.clone());
    let memories = insert(&storage, &scope, (0..6).map(draft).collect()).await;
    assert_eq!(applier.apply_oldest_pending(100).await.unwrap(), 6);
    let ids: Vec<MemoryId> = memories.iter().map(|memory| memory.id).collect();
    // The previous pass looked at everything up to just after these writes.
    let since = memories
        .iter()
        .map(|memory| memory.updated_at)
        .max()
        .unwrap()
        + chrono::Duration::microseconds(1);

    // Untouched since, its point lost by the index.
    index.delete(&scope, vec![ids[0]]).await.unwrap();
    // Edited and deleted since, both outbox entries lost.
    storage
        .update_memory(
            &scope,
            ids[1],
            MemoryPatch {
                content: Some(("edited".to_string(), vector(77))),
                ..Default::default()
            },
            None,
            &engram_core::audit::Actor::system("test"),
        )
        .await
        .unwrap();
    storage
        .delete_memory(&scope, ids[2], &engram_core::audit::Actor::system("test"))
        .await
        .unwrap();
    lose_pending_outbox_entries(&storage).await;

    // Read a row at a time, the changes of the last day are what one read gives: every
    // memory still there, each once, and the one deletion.
    let a_day_before = since - chrono::Duration::days(1);
    let mut paged = Vec::new();
    let mut after = None;
    loop {
        let page = storage
            .memory_versions_changed_since(&scope, a_day_before, after.as_ref(), 1)
            .await
            .unwrap();
        let Some(last) = page.last() else { break };
        after = Some(*last);
        paged.extend(page.iter().map(|changed| changed.memory_id));
    }
    paged.sort();
    let mut expected: Vec<MemoryId> = ids
        .iter()
        .copied()
        .filter(|memory_id| *memory_id != ids[2])
        .collect();
    expected.sort();
    assert_eq!(paged, expected);
    let deleted = storage
        .memories_deleted_since(&scope, a_day_before, None, 10)
        .await
        .unwrap();
    assert_eq!(
        deleted
            .iter()
            .map(|(_, memory_id)| *memory_id)
            .collect::<Vec<_>>(),
        vec![ids[2]]
    );
    assert!(
        storage
            .memories_deleted_since(&scope, a_day_before, deleted.last(), 10)
            .await
            .unwrap()
            .is_empty()
    );

    let changes = applier.reconcile_changed_since(since).await.unwrap();
    assert_eq!(
        (
            changes.points_missing,
            changes.points_stale,
            changes.points_orphaned
        ),
        (0, 1, 1),
        "{changes:?}"
    );
    assert_eq!(
        changes.memories_checked, 1,
        "only the edited memory is read among the active ones"
    );
    let indexed = index.versions(&scope, ids.clone()).await.unwrap();
    assert_eq!(indexed[&ids[1]], 2, "the edit is indexed");
    assert!(
        !indexed.contains_key(&ids[2]),
        "the deleted memory's point is gone"
    );
    assert!(
        !indexed.contains_key(&ids[0]),
        "the untouched memory is not the pass's business"
    );

    let full = applier.reconcile_all_projects(|_, _| {}).await.unwrap();
    assert_eq!(
        (full.points_missing, full.points_stale, full.points_orphaned),
        (1, 0, 0),
        "{full:?}"
    );
    assert_eq!(
        index.versions(&scope, ids.clone()).await.unwrap().len(),
        5,
        "every active memory indexed after the full pass"
    );
    assert_eq!(
        applier
            .reconcile_changed_since(since)
            .await
            .unwrap()
            .drift(),
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pass_over_changes_repairs_what_changed_on_sqlite() {
    let directory = tempfile::tempdir().unwrap();
    let url = format!(
        "sqlite://{}?mode=rwc",
        directory.path().join("test.db").display()
    );
    the_pass_over_changes_repairs_what_changed(Storage::connect(&url).await.unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pass_over_changes_repairs_what_changed_on_postgres() {
    let url = engram_test_postgres::fresh_database_url().await;
    the_pass_over_changes_repairs_what_changed(Storage::connect(&url).await.unwrap()).await;
}
