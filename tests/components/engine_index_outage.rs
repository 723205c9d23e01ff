//! The vector index goes down: writes are still acknowledged (the outbox grows), search says
//! the index is unavailable (the gateway turns that into 503 + Retry-After), and when the
//! index returns the pending writes are applied and found, with no one lifting a finger
//! beyond the indexer's ordinary retry loop. Real model, real SQLite, real qdrant-edge.

use engram_core::search::SearchMemoriesRequest;
use engram_core::{ExternalId, MemoryKind, MemorySource, NewMemory, ProjectScope};
use engram_embed::{Embedder, LocalEncoder};
use engram_engine::{
    AddMemoriesRequest, AddOutcome, EngineError, EngineSettings, MemoryEngine, SearchRequest,
};
use engram_index::{
    EdgeVectorIndex, IndexError, IndexedMemory, VectorHit, VectorIndex, VectorQuery,
};
use engram_storage::{ApiKeyPepper, Storage};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The real index behind a switch that makes every call fail as an unreachable index would.
struct SwitchableIndex {
    inner: Arc<dyn VectorIndex>,
    down: AtomicBool,
}

impl SwitchableIndex {
    fn check(&self) -> Result<(), IndexError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(IndexError::Unavailable(
                "connection refused (outage under test)".into(),
            ));
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl VectorIndex for SwitchableIndex {
    async fn upsert(
        &self,
        scope: &ProjectScope,
        points: Vec<IndexedMemory>,
    ) -> Result<(), IndexError> {
        self.check()?;
        self.inner.upsert(scope, points).await
    }
    async fn delete(
        &self,
        scope: &ProjectScope,
        ids: Vec<engram_core::MemoryId>,
    ) -> Result<(), IndexError> {
        self.check()?;
        self.inner.delete(scope, ids).await
    }
    async fn search(
        &self,
        scope: &ProjectScope,
        query: VectorQuery,
    ) -> Result<Vec<VectorHit>, IndexError> {
        self.check()?;
        self.inner.search(scope, query).await
    }
    async fn keyword_search(
        &self,
        scope: &ProjectScope,
        query: engram_index::KeywordQuery,
    ) -> Result<Vec<VectorHit>, IndexError> {
        self.check()?;
        self.inner.keyword_search(scope, query).await
    }
    async fn versions(
        &self,
        scope: &ProjectScope,
        ids: Vec<engram_core::MemoryId>,
    ) -> Result<HashMap<engram_core::MemoryId, i64>, IndexError> {
        self.check()?;
        self.inner.versions(scope, ids).await
    }
    async fn points_page(
        &self,
        scope: &ProjectScope,
        from: Option<engram_core::MemoryId>,
        limit: usize,
    ) -> Result<engram_index::PointsPage, IndexError> {
        self.check()?;
        self.inner.points_page(scope, from, limit).await
    }
    async fn delete_subject(&self, scope: &ProjectScope, user_id: &str) -> Result<(), IndexError> {
        self.check()?;
        self.inner.delete_subject(scope, user_id).await
    }
    async fn count_points(
        &self,
        scope: &ProjectScope,
        user_id: Option<&str>,
    ) -> Result<u64, IndexError> {
        self.check()?;
        self.inner.count_points(scope, user_id).await
    }
    async fn flush(&self) -> Result<(), IndexError> {
        self.check()?;
        self.inner.flush().await
    }
    async fn check_ready(&self) -> Result<(), IndexError> {
        self.check()?;
        self.inner.check_ready().await
    }
}

fn model_dir() -> std::path::PathBuf {
    let workspace_root = engram_tests::workspace_root();
    let directory = engram_embed::resolve_model_dir(&workspace_root);
    assert!(
        directory.join("model.onnx").exists(),
        "the embedding model is missing at {}: run `./scripts/setup.sh test` (make test does)",
        directory.display()
    );
    directory
}

fn memory(content: &str) -> NewMemory {
    NewMemory {
        user_id: Some(ExternalId::parse("u-outage").unwrap()),
        agent_id: None,
        session_id: None,
        kind: MemoryKind::Semantic,
        key: None,
        content: content.to_string(),
        metadata: serde_json::Map::new(),
        categories: Vec::new(),
        source: MemorySource::UserStated,
        confidence: 1.0,
        expires_at: None,
        occurred_at: None,
        visibility: None,
        shared_with: None,
    }
}

fn query(text: &str) -> SearchMemoriesRequest {
    SearchMemoriesRequest {
        request: SearchRequest {
            query: text.to_string(),
            top_k: 50,
            // The notes differ by a number only: every one of them must come back.
            diversify: false,
            ..SearchRequest::default()
        },
        caller_tuning: Default::default(),
        profile: None,
        context_tokens: None,
        trace_id: None,
        run_id: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_survive_an_index_outage_and_catch_up_when_it_returns() {
    let directory = tempfile::tempdir().unwrap();
    let storage = Storage::connect(&format!(
        "sqlite://{}?mode=rwc",
        directory.path().join("engram.db").display()
    ))
    .await
    .unwrap();
    let embedder: Arc<dyn Embedder> = Arc::new(
        LocalEncoder::load(
            engram_embed::MINILM,
            &model_dir(),
            engram_tests::local_model_options(),
        )
        .unwrap(),
    );
    let index = Arc::new(SwitchableIndex {
        inner: Arc::new(
            EdgeVectorIndex::open(&directory.path().join("index"), embedder.dimension()).unwrap(),
        ),
        down: AtomicBool::new(false),
    });
    let engine = MemoryEngine::new(
        storage.clone(),
        index.clone(),
        embedder,
        EngineSettings {
            index_wait: Duration::from_secs(2),
            ..Default::default()
        },
    );
    let pepper = ApiKeyPepper::new(b"pepper".to_vec());
    let record = storage
        .bootstrap_organization("org", "project", "owner@example.com", "hash", &pepper)
        .await
        .unwrap();
    let scope = storage
        .authenticate_api_key(&record.api_key, &pepper)
        .await
        .unwrap()
        .unwrap();

    // The engine's use cases, as the operator of the project: what every door calls.
    let operator = engram_core::Principal::operator(scope, "index-outage-test");
    index.down.store(true, Ordering::SeqCst);
    // ENGRAM_OUTAGE_WRITES (a multiple of 10) measures catch-up with a bigger backlog.
    let pending_writes: usize = std::env::var("ENGRAM_OUTAGE_WRITES")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(40);
    for batch in 0..(pending_writes / 10) {
        let memories = (0..10)
            .map(|number| {
                memory(&format!(
                    "outage note {batch}-{number}: the user collects vintage fountain pens"
                ))
            })
            .collect();
        let outcome = engine
            .add_memories_for(
                &operator,
                AddMemoriesRequest {
                    run_id: None,
                    memories,
                    client_vectors: None,
                    idempotency: None,
                    wait_for_index: true,
                },
                |_| (201, String::new()),
            )
            .await
            .expect("a write is acknowledged while the index is down");
        let AddOutcome::Stored {
            memories, indexed, ..
        } = outcome
        else {
            panic!("no idempotency key, nothing to replay")
        };
        assert_eq!(memories.len(), 10);
        assert!(!indexed, "the answer says the index is behind (202)");
    }
    assert_eq!(
        engram_storage::MaintenanceStore::new(storage.clone())
            .outbox_backlog()
            .await
            .unwrap(),
        pending_writes as u64
    );
    match engine
        .search_memories_for(&operator, query("fountain pens"))
        .await
    {
        Err(EngineError::IndexUnavailable(_)) => {}
        Err(other) => panic!("search during the outage failed with {other:?}"),
        Ok(_) => panic!("search during the outage cannot answer from a dead index"),
    }
    // The indexer keeps retrying (its loop backs off) and achieves nothing meanwhile.
    assert!(engine.applier().apply_oldest_pending(256).await.is_err());
    assert_eq!(
        engram_storage::MaintenanceStore::new(storage.clone())
            .outbox_backlog()
            .await
            .unwrap(),
        pending_writes as u64
    );

    index.down.store(false, Ordering::SeqCst);
    let recovery_started = Instant::now();
    let mut applied = 0;
    loop {
        let count = engine.applier().apply_oldest_pending(256).await.unwrap();
        if count == 0 {
            break;
        }
        applied += count;
    }
    println!(
        "index outage: {pending_writes} pending writes applied {:.1} ms after the index returned",
        recovery_started.elapsed().as_secs_f64() * 1_000.0
    );
    assert_eq!(applied, pending_writes);
    assert_eq!(
        engram_storage::MaintenanceStore::new(storage.clone())
            .outbox_backlog()
            .await
            .unwrap(),
        0
    );
    // Every write made during the outage is searchable (top_k is capped at 50).
    let found = engine
        .search_memories_for(&operator, query("fountain pens"))
        .await
        .unwrap();
    assert_eq!(found.outcome.results.len(), pending_writes.min(50));
}
