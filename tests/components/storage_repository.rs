//! Storage scenarios run twice from the same code: on SQLite and on a fresh PostgreSQL
//! database (the local server; `ENGRAM_TEST_POSTGRES_URL` overrides where it is).

use engram_core::{
    ExternalId, MemoryKind, MemorySource, MemoryState, NewMemory, OrganizationId, ProjectScope,
    SubjectFilter,
};
use engram_storage::{
    ApiKeyPepper, IdempotencyClaim, InsertOutcome, MemoryDraft, MemoryListFilter, MemoryPatch,
    Storage, StorageError,
};

async fn sqlite_storage() -> (Storage, tempfile::TempDir) {
    let directory = tempfile::tempdir().unwrap();
    let url = format!(
        "sqlite://{}?mode=rwc",
        directory.path().join("test.db").display()
    );
    (Storage::connect(&url).await.unwrap(), directory)
}

async fn postgres_storage() -> (Storage, ()) {
    let storage = Storage::connect(&engram_test_postgres::fresh_database_url().await)
        .await
        .unwrap();
    (storage, ())
}

/// Generates `sqlite` and `postgres` tests for one scenario.
macro_rules! on_both_databases {
    ($scenario:ident) => {
        mod $scenario {
            #[tokio::test]
            async fn sqlite() {
                let (storage, _guard) = super::sqlite_storage().await;
                super::$scenario(storage).await;
            }
            #[tokio::test]
            async fn postgres() {
                let (storage, _guard) = super::postgres_storage().await;
                super::$scenario(storage).await;
            }
        }
    };
}

fn system_actor() -> engram_core::audit::Actor {
    engram_core::audit::Actor::system("test")
}

fn pepper() -> ApiKeyPepper {
    ApiKeyPepper::new(b"test pepper".to_vec())
}

/// A project with a key; returns its scope (via the key, the way requests get one) and the key.
async fn project(
    storage: &Storage,
    organization: Option<OrganizationId>,
) -> (ProjectScope, String) {
    let organization_id = match organization {
        Some(id) => id,
        None => {
            storage
                .bootstrap_organization(
                    "org",
                    "first",
                    &format!("{}@example.com", uuid::Uuid::now_v7()),
                    "hash",
                    &pepper(),
                )
                .await
                .unwrap()
                .organization_id
        }
    };
    let (_, key) = storage
        .create_project(organization_id, "project", &pepper())
        .await
        .unwrap();
    let scope = storage
        .authenticate_api_key(&key, &pepper())
        .await
        .unwrap()
        .unwrap();
    (scope, key)
}

fn draft(content: &str, user: Option<&str>, key: Option<&str>) -> MemoryDraft {
    MemoryDraft {
        memory: NewMemory {
            user_id: user.map(|user| ExternalId::parse(user).unwrap()),
            agent_id: None,
            session_id: None,
            kind: MemoryKind::Semantic,
            key: key.map(|key| ExternalId::parse(key).unwrap()),
            content: content.to_string(),
            metadata: serde_json::Map::new(),
            categories: vec!["c".to_string()],
            source: MemorySource::UserStated,
            confidence: 0.9,
            expires_at: None,
            occurred_at: None,
            visibility: Some(engram_core::Visibility::Shared),
            shared_with: None,
        },
        embedding: vec![0.25, -0.5, 1.0],
        embedding_model: "test-model".to_string(),
        embedding_generation: 0,
        supersedes: None,
        reason: None,
    }
}

fn render(memories: &[engram_core::Memory]) -> (u16, String) {
    (
        201,
        serde_json::to_string(
            &memories
                .iter()
                .map(|memory| memory.id.to_string())
                .collect::<Vec<_>>(),
        )
        .unwrap(),
    )
}

async fn insert(
    storage: &Storage,
    scope: &ProjectScope,
    drafts: Vec<MemoryDraft>,
) -> Vec<engram_core::Memory> {
    match storage
        .insert_memories(scope, drafts, &system_actor(), None, render)
        .await
        .unwrap()
    {
        InsertOutcome::Inserted { memories, .. } => memories,
        InsertOutcome::Replayed { .. } | InsertOutcome::AnswerErased => panic!("unexpected replay"),
    }
}

fn listing(limit: u64) -> MemoryListFilter {
    MemoryListFilter {
        limit,
        ..Default::default()
    }
}

async fn round_trip_and_pagination(storage: Storage) {
    let (scope, _) = project(&storage, None).await;
    let stored = insert(
        &storage,
        &scope,
        (0..7)
            .map(|number| draft(&format!("fact {number}"), Some("u"), None))
            .collect(),
    )
    .await;
    let fetched = storage
        .get_memory(&engram_core::MemoryScope::project_wide(scope), stored[3].id)
        .await
        .unwrap();
    assert_eq!(fetched, stored[3], "what was stored is what is read");
    assert_eq!(fetched.confidence, 0.9);
    assert_eq!(fetched.categories, vec!["c".to_string()]);
    let mut seen = Vec::new();
    let mut filter = listing(3);
    loop {
        let page = storage
            .list_memories(&engram_core::MemoryScope::project_wide(scope), &filter)
            .await
            .unwrap();
        seen.extend(page.memories.iter().map(|memory| memory.id));
        match page.next_cursor {
            Some(cursor) => filter.after = Some(cursor),
            None => break,
        }
    }
    let mut expected: Vec<_> = stored.iter().map(|memory| memory.id).collect();
    expected.reverse();
    assert_eq!(seen, expected, "newest first, every memory once");
    let rows = storage
        .indexing_rows(&scope, &[stored[0].id])
        .await
        .unwrap();
    assert_eq!(
        rows[&stored[0].id].vector,
        vec![0.25, -0.5, 1.0],
        "the embedding round-trips exactly"
    );
    assert_eq!(
        engram_storage::MaintenanceStore::new(storage.clone())
            .pending_index_changes(100)
            .await
            .unwrap()
            .len(),
        7,
        "one outbox entry per write"
    );
    let text = MemoryListFilter {
        text_contains: Some("FACT 4".to_string()),
        ..listing(50)
    };
    assert_eq!(
        storage
            .list_memories(&engram_core::MemoryScope::project_wide(scope), &text)
            .await
            .unwrap()
            .memories
            .len(),
        1,
        "text filter is case-insensitive"
    );
    let wildcard = MemoryListFilter {
        text_contains: Some("%".to_string()),
        ..listing(50)
    };
    assert_eq!(
        storage
            .list_memories(&engram_core::MemoryScope::project_wide(scope), &wildcard)
            .await
            .unwrap()
            .memories
            .len(),
        0,
        "LIKE wildcards are escaped"
    );
}
on_both_databases!(round_trip_and_pagination);

async fn another_project_sees_nothing(storage: Storage) {
    let (alpha, _) = project(&storage, None).await;
    let (beta, _) = project(&storage, Some(alpha.organization_id())).await;
    let stored = insert(
        &storage,
        &alpha,
        vec![draft("alpha secret", Some("u"), Some("k"))],
    )
    .await;
    let id = stored[0].id;
    assert!(matches!(
        storage
            .get_memory(&engram_core::MemoryScope::project_wide(beta), id)
            .await,
        Err(StorageError::NotFound(_))
    ));
    assert!(matches!(
        storage
            .memory_history(&engram_core::MemoryScope::project_wide(beta), id)
            .await,
        Err(StorageError::NotFound(_))
    ));
    assert!(matches!(
        storage
            .update_memory(
                &beta,
                id,
                MemoryPatch {
                    reason: Some("x".into()),
                    ..Default::default()
                },
                None,
                &system_actor()
            )
            .await,
        Err(StorageError::NotFound(_))
    ));
    assert!(matches!(
        storage.delete_memory(&beta, id, &system_actor()).await,
        Err(StorageError::NotFound(_))
    ));
    assert!(
        storage
            .list_memories(&engram_core::MemoryScope::project_wide(beta), &listing(500))
            .await
            .unwrap()
            .memories
            .is_empty()
    );
    assert!(
        storage
            .active_memories_by_id(&beta, &[id])
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        storage
            .indexing_rows(&beta, &[id])
            .await
            .unwrap()
            .is_empty()
    );
    // Same key in the other project: both stay active.
    insert(&storage, &beta, vec![draft("beta", Some("u"), Some("k"))]).await;
    assert_eq!(
        storage
            .get_memory(&engram_core::MemoryScope::project_wide(alpha), id)
            .await
            .unwrap()
            .state,
        MemoryState::Active
    );
}
on_both_databases!(another_project_sees_nothing);

async fn keys_supersede_within_user_and_agent(storage: Storage) {
    let (scope, _) = project(&storage, None).await;
    let anonymous = insert(
        &storage,
        &scope,
        vec![draft("no user v1", None, Some("style"))],
    )
    .await;
    let user_one = insert(
        &storage,
        &scope,
        vec![draft("user v1", Some("u1"), Some("style"))],
    )
    .await;
    let replaced = insert(
        &storage,
        &scope,
        vec![
            draft("no user v2", None, Some("style")),
            draft("no user v3", None, Some("style")),
        ],
    )
    .await;
    let old = storage
        .get_memory(
            &engram_core::MemoryScope::project_wide(scope),
            anonymous[0].id,
        )
        .await
        .unwrap();
    assert_eq!(old.state, MemoryState::Superseded);
    assert!(old.valid_to.is_some());
    assert_eq!(
        storage
            .get_memory(
                &engram_core::MemoryScope::project_wide(scope),
                replaced[0].id
            )
            .await
            .unwrap()
            .state,
        MemoryState::Superseded,
        "a batch supersedes in order"
    );
    assert_eq!(
        storage
            .get_memory(
                &engram_core::MemoryScope::project_wide(scope),
                replaced[1].id
            )
            .await
            .unwrap()
            .state,
        MemoryState::Active
    );
    assert_eq!(
        storage
            .get_memory(
                &engram_core::MemoryScope::project_wide(scope),
                user_one[0].id
            )
            .await
            .unwrap()
            .state,
        MemoryState::Active,
        "other users keep theirs"
    );
    let superseded = MemoryListFilter {
        state: Some(MemoryState::Superseded),
        ..listing(50)
    };
    assert_eq!(
        storage
            .list_memories(&engram_core::MemoryScope::project_wide(scope), &superseded)
            .await
            .unwrap()
            .memories
            .len(),
        2
    );
}
on_both_databases!(keys_supersede_within_user_and_agent);

async fn concurrent_writers_of_one_key_leave_one_active(storage: Storage) {
    let (scope, _) = project(&storage, None).await;
    let mut tasks = Vec::new();
    for number in 0..8 {
        let storage = storage.clone();
        tasks.push(tokio::spawn(async move {
            storage
                .insert_memories(
                    &scope,
                    vec![draft(&format!("writer {number}"), Some("u"), Some("k"))],
                    &system_actor(),
                    None,
                    render,
                )
                .await
        }));
    }
    for task in tasks {
        assert!(task.await.unwrap().is_ok());
    }
    let active = storage
        .list_memories(
            &engram_core::MemoryScope::project_wide(scope),
            &MemoryListFilter {
                subject: SubjectFilter {
                    user_id: Some(ExternalId::parse("u").unwrap()),
                    ..Default::default()
                },
                ..listing(50)
            },
        )
        .await
        .unwrap();
    assert_eq!(
        active.memories.len(),
        1,
        "exactly one active memory per key"
    );
}
on_both_databases!(concurrent_writers_of_one_key_leave_one_active);

async fn versions_conflict_and_history_records_changes(storage: Storage) {
    let (scope, _) = project(&storage, None).await;
    let stored = insert(&storage, &scope, vec![draft("v1", None, None)]).await;
    let id = stored[0].id;
    let patch = MemoryPatch {
        content: Some(("v2".to_string(), vec![1.0, 0.0, 0.0])),
        reason: Some("fix".to_string()),
        ..Default::default()
    };
    let (updated, _) = storage
        .update_memory(&scope, id, patch.clone(), Some(1), &system_actor())
        .await
        .unwrap();
    assert_eq!(updated.version, 2);
    assert_eq!(updated.content, "v2");
    assert!(matches!(
        storage
            .update_memory(&scope, id, patch, Some(1), &system_actor())
            .await,
        Err(StorageError::VersionConflict { current_version: 2 })
    ));
    let history = storage
        .memory_history(&engram_core::MemoryScope::project_wide(scope), id)
        .await
        .unwrap();
    assert_eq!(
        history
            .iter()
            .map(|entry| entry.event.as_str())
            .collect::<Vec<_>>(),
        vec!["created", "updated"]
    );
    assert_eq!(history[1].actor, "system:test");
    assert_eq!(history[1].reason.as_deref(), Some("fix"));
    storage
        .delete_memory(&scope, id, &system_actor())
        .await
        .unwrap();
    assert!(
        matches!(
            storage
                .memory_history(&engram_core::MemoryScope::project_wide(scope), id)
                .await,
            Err(StorageError::NotFound(_))
        ),
        "history text is gone with the memory"
    );
    assert!(
        storage
            .indexing_rows(&scope, &[id])
            .await
            .unwrap()
            .is_empty()
    );
    let pending = storage
        .pending_index_changes_for(&scope, &[id])
        .await
        .unwrap();
    assert_eq!(
        pending.len(),
        3,
        "create, update and delete each left an outbox entry"
    );
    engram_storage::MaintenanceStore::new(storage.clone())
        .complete_index_changes(&pending.iter().map(|entry| entry.id).collect::<Vec<_>>())
        .await
        .unwrap();
    assert_eq!(
        engram_storage::MaintenanceStore::new(storage.clone())
            .outbox_backlog()
            .await
            .unwrap(),
        0
    );
}
on_both_databases!(versions_conflict_and_history_records_changes);

async fn deletes_leave_content_free_tombstones_until_purged(storage: Storage) {
    let (scope, _) = project(&storage, None).await;
    let (other_scope, _) = project(&storage, None).await;
    let memories = insert(
        &storage,
        &scope,
        vec![draft("remember the tombstone", None, None)],
    )
    .await;
    let id = memories[0].id;
    storage
        .update_memory(
            &scope,
            id,
            MemoryPatch {
                content: Some(("second version".to_string(), vec![1.0, 0.0, 0.0])),
                ..Default::default()
            },
            None,
            &system_actor(),
        )
        .await
        .unwrap();
    assert_eq!(storage.memory_tombstone(&scope, id).await.unwrap(), None);
    storage
        .delete_memory(&scope, id, &system_actor())
        .await
        .unwrap();

    let (last_version, deleted_at) = storage
        .memory_tombstone(&scope, id)
        .await
        .unwrap()
        .expect("a tombstone");
    assert_eq!(last_version, 2, "the tombstone keeps the last version");
    assert!((chrono::Utc::now() - deleted_at).num_seconds().abs() < 60);
    assert_eq!(
        storage.memory_tombstone(&other_scope, id).await.unwrap(),
        None,
        "another project learns nothing about it"
    );
    assert_eq!(
        storage
            .tombstoned_memory_ids(&scope, &[id])
            .await
            .unwrap()
            .len(),
        1
    );

    // A purge with a cutoff before the deletion keeps it; one after removes it.
    let kept = engram_storage::MaintenanceStore::new(storage.clone())
        .purge_tombstones_deleted_before(deleted_at - chrono::Duration::seconds(1))
        .await
        .unwrap();
    assert_eq!(kept, 0);
    assert!(
        storage
            .memory_tombstone(&scope, id)
            .await
            .unwrap()
            .is_some()
    );
    let purged = engram_storage::MaintenanceStore::new(storage.clone())
        .purge_tombstones_deleted_before(deleted_at + chrono::Duration::seconds(1))
        .await
        .unwrap();
    assert_eq!(purged, 1);
    assert_eq!(storage.memory_tombstone(&scope, id).await.unwrap(), None);
}
on_both_databases!(deletes_leave_content_free_tombstones_until_purged);

async fn concurrent_audit_appends_form_one_unbroken_chain(storage: Storage) {
    use engram_core::audit::{AuditAction, NewAuditEvent};
    let (scope, _) = project(&storage, None).await;
    let mut writers = Vec::new();
    for writer in 0..8 {
        let storage = storage.clone();
        writers.push(tokio::spawn(async move {
            for event in 0..10 {
                storage
                    .record_audit_event(
                        scope.organization_id(),
                        Some(&scope),
                        &system_actor(),
                        &NewAuditEvent::success(
                            AuditAction::MemoryContentViewed,
                            vec![format!("{writer}-{event}")],
                            serde_json::json!({}),
                        ),
                    )
                    .await
                    .unwrap();
            }
        }));
    }
    for writer in writers {
        writer.await.unwrap();
    }
    let verification = storage
        .verify_audit_chain(&scope, engram_storage::VerificationStart::Genesis)
        .await
        .unwrap();
    assert_eq!(verification.first_broken, None);
    assert_eq!(verification.events_checked, 80);
    let events = storage
        .audit_events(
            &scope,
            &engram_storage::AuditFilter {
                limit: 500,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let sequences: Vec<i64> = events.iter().map(|event| event.sequence).collect();
    assert_eq!(
        sequences,
        (1..=80).collect::<Vec<i64>>(),
        "no gaps, no forks"
    );
}
on_both_databases!(concurrent_audit_appends_form_one_unbroken_chain);

/// Cluster roles never migrate: on a schema with pending migrations they refuse to start
/// and name the command that fixes it; once migrated they start.
#[tokio::test]
async fn cluster_roles_refuse_a_schema_with_pending_migrations() {
    let url = engram_test_postgres::fresh_database_url().await;
    let strict = engram_storage::StorageOptions {
        require_migrated_schema: true,
        ..Default::default()
    };
    let refused = Storage::connect_with_options(&url, strict)
        .await
        .err()
        .expect("an empty database has pending migrations");
    assert!(
        refused.to_string().contains("run `engram migrate` first"),
        "{refused}"
    );
    Storage::connect(&url).await.unwrap().close().await.unwrap();
    let started = Storage::connect_with_options(&url, strict).await.unwrap();
    assert!(started.applied_migration_count().await.unwrap() >= 3);
}

async fn idempotent_inserts_replay_and_reject_other_bodies(storage: Storage) {
    let (scope, _) = project(&storage, None).await;
    let claim = |fingerprint: &str| {
        Some(IdempotencyClaim {
            key: "key-1".to_string(),
            request_fingerprint: fingerprint.to_string(),
        })
    };
    let first = storage
        .insert_memories(
            &scope,
            vec![draft("once", None, None)],
            &system_actor(),
            claim("a"),
            render,
        )
        .await
        .unwrap();
    let InsertOutcome::Inserted { memories, .. } = first else {
        panic!("first insert must store")
    };
    let replay = storage
        .insert_memories(
            &scope,
            vec![draft("once", None, None)],
            &system_actor(),
            claim("a"),
            render,
        )
        .await
        .unwrap();
    let InsertOutcome::Replayed { status, body } = replay else {
        panic!("second insert must replay")
    };
    assert_eq!(status, 201);
    assert_eq!(body, render(&memories).1);
    assert!(matches!(
        storage
            .insert_memories(
                &scope,
                vec![draft("other", None, None)],
                &system_actor(),
                claim("b"),
                render
            )
            .await,
        Err(StorageError::IdempotencyKeyReused)
    ));
    assert_eq!(storage.count_active_memories(&scope).await.unwrap(), 1);

    // Deleted (one by one, or in bulk) after its answer was stored: a retry neither replays
    // the content nor writes it again.
    storage
        .delete_memory_with_reason(&scope, memories[0].id, None, &system_actor())
        .await
        .unwrap();
    let keyed = |key: &str| {
        Some(IdempotencyClaim {
            key: key.to_string(),
            request_fingerprint: "a".to_string(),
        })
    };
    let retry = |key: &'static str| {
        let storage = storage.clone();
        async move {
            storage
                .insert_memories(
                    &scope,
                    vec![draft("once", None, None)],
                    &system_actor(),
                    keyed(key),
                    render,
                )
                .await
                .unwrap()
        }
    };
    assert!(matches!(retry("key-1").await, InsertOutcome::AnswerErased));
    let InsertOutcome::Inserted { memories: bulk, .. } = retry("key-2").await else {
        panic!("a new key stores")
    };
    storage
        .delete_memories_in_bulk(&scope, &[bulk[0].id], "a reason", &system_actor())
        .await
        .unwrap();
    assert!(matches!(retry("key-2").await, InsertOutcome::AnswerErased));
    assert_eq!(
        storage.count_active_memories(&scope).await.unwrap(),
        0,
        "the retries wrote nothing"
    );
}
on_both_databases!(idempotent_inserts_replay_and_reject_other_bodies);

async fn api_keys_authenticate_only_with_the_right_secret(storage: Storage) {
    let (scope, key) = project(&storage, None).await;
    assert_eq!(
        storage.authenticate_api_key(&key, &pepper()).await.unwrap(),
        Some(scope)
    );
    assert_eq!(
        storage
            .authenticate_api_key(&key, &ApiKeyPepper::new(b"other".to_vec()))
            .await
            .unwrap(),
        None,
        "the pepper is part of the hash"
    );
    let (prefix, secret) = key.rsplit_once('_').unwrap();
    let wrong = format!("{prefix}_{}", "A".repeat(secret.len()));
    assert_eq!(
        storage
            .authenticate_api_key(&wrong, &pepper())
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        storage
            .authenticate_api_key("egk_nonsense", &pepper())
            .await
            .unwrap(),
        None
    );
}
on_both_databases!(api_keys_authenticate_only_with_the_right_secret);

/// Four workers drain one outbox at once: every entry is claimed by exactly one of them and
/// none is left behind; an entry whose worker died (lease ran out) is claimed again.
async fn concurrent_workers_claim_each_outbox_entry_once(storage: Storage) {
    use std::time::Duration;
    let (scope, _) = project(&storage, None).await;
    for batch in 0..6 {
        insert(
            &storage,
            &scope,
            (0..40)
                .map(|number| draft(&format!("claim {batch}-{number}"), Some("u"), None))
                .collect(),
        )
        .await;
    }
    let expected = engram_storage::MaintenanceStore::new(storage.clone())
        .pending_index_changes(1_000)
        .await
        .unwrap();
    assert_eq!(expected.len(), 240);

    let mut workers = Vec::new();
    for worker in 0..4 {
        let storage = storage.clone();
        workers.push(tokio::spawn(async move {
            let worker_id = format!("worker-{worker}");
            let mut claimed = Vec::new();
            loop {
                let entries = engram_storage::MaintenanceStore::new(storage.clone())
                    .claim_index_changes(&worker_id, 7, Duration::from_secs(60))
                    .await
                    .unwrap();
                if entries.is_empty() {
                    return claimed;
                }
                let ids: Vec<i64> = entries.iter().map(|entry| entry.id).collect();
                // Give the other workers a chance to run into these rows while they are held.
                tokio::task::yield_now().await;
                engram_storage::MaintenanceStore::new(storage.clone())
                    .complete_index_changes(&ids)
                    .await
                    .unwrap();
                claimed.extend(ids);
            }
        }));
    }
    let mut claimed = Vec::new();
    let mut workers_that_got_work = 0;
    for worker in workers {
        let mine = worker.await.unwrap();
        workers_that_got_work += usize::from(!mine.is_empty());
        claimed.extend(mine);
    }
    claimed.sort_unstable();
    let mut unique = claimed.clone();
    unique.dedup();
    assert_eq!(unique.len(), claimed.len(), "an entry was claimed twice");
    let mut expected_ids: Vec<i64> = expected.iter().map(|entry| entry.id).collect();
    expected_ids.sort_unstable();
    assert_eq!(claimed, expected_ids, "every entry claimed once, none lost");
    assert!(workers_that_got_work >= 2, "the work was shared");
    assert_eq!(
        engram_storage::MaintenanceStore::new(storage.clone())
            .outbox_backlog()
            .await
            .unwrap(),
        0
    );

    // A worker claims and dies; nobody else gets the entry until its lease runs out.
    insert(&storage, &scope, vec![draft("orphaned claim", None, None)]).await;
    let dying = engram_storage::MaintenanceStore::new(storage.clone())
        .claim_index_changes("dying-worker", 10, Duration::from_millis(300))
        .await
        .unwrap();
    assert_eq!(dying.len(), 1);
    assert!(
        engram_storage::MaintenanceStore::new(storage.clone())
            .claim_index_changes("survivor", 10, Duration::from_secs(60))
            .await
            .unwrap()
            .is_empty(),
        "a live lease is respected"
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    let taken_over = engram_storage::MaintenanceStore::new(storage.clone())
        .claim_index_changes("survivor", 10, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(
        taken_over.iter().map(|entry| entry.id).collect::<Vec<_>>(),
        vec![dying[0].id],
        "an expired lease returns the entry to the pool"
    );
    // A failed attempt releases the lease at once and counts the attempt.
    engram_storage::MaintenanceStore::new(storage.clone())
        .record_index_failure(&[dying[0].id], "index unavailable")
        .await
        .unwrap();
    let retried = engram_storage::MaintenanceStore::new(storage.clone())
        .claim_index_changes("survivor", 10, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(retried.len(), 1);
    assert_eq!(retried[0].attempts, 1);
    // The embedded server, sole indexer of its database, drops a dead run's leases at start.
    assert_eq!(
        engram_storage::MaintenanceStore::new(storage.clone())
            .release_all_outbox_claims()
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        engram_storage::MaintenanceStore::new(storage.clone())
            .claim_index_changes("next-run", 10, Duration::from_secs(60))
            .await
            .unwrap()
            .len(),
        1
    );
}
on_both_databases!(concurrent_workers_claim_each_outbox_entry_once);

/// Both databases as Engram configures them promise durable commits.
async fn the_database_promises_durable_commits(storage: Storage) {
    assert_eq!(
        storage.durability_violations().await.unwrap(),
        Vec::<String>::new()
    );
}
on_both_databases!(the_database_promises_durable_commits);

/// A PostgreSQL session that may lose acknowledged commits is refused, naming the setting,
/// unless the operator explicitly allows it.
#[tokio::test]
async fn postgres_without_synchronous_commit_is_refused_unless_allowed() {
    let url = format!(
        "{}?options%5Bsynchronous_commit%5D=off",
        engram_test_postgres::fresh_database_url().await
    );
    let refused = Storage::connect(&url).await.err().expect("refused");
    let message = refused.to_string();
    assert!(
        message.contains("synchronous_commit=off")
            && message.contains("ENGRAM_ALLOW_UNSAFE_DURABILITY"),
        "{message}"
    );
    let allowed = Storage::connect_with_options(
        &url,
        engram_storage::StorageOptions {
            allow_unsafe_durability: true,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(
        allowed.durability_violations().await.unwrap(),
        vec!["synchronous_commit=off".to_string()]
    );
}

/// Invitations are single-use and expire; an organization always keeps an owner, even when
/// two owners demote each other at the same moment; removing a member ends their sessions;
/// no organization can touch another's members.
async fn members_and_invitations_keep_an_owner_and_stay_in_their_organization(storage: Storage) {
    use engram_core::ConsoleRole;
    let owner_email = format!("{}@example.com", uuid::Uuid::now_v7());
    let organization_id = storage
        .bootstrap_organization("org", "first", &owner_email, "hash", &pepper())
        .await
        .unwrap()
        .organization_id;
    let owner = storage
        .find_console_account(&owner_email)
        .await
        .unwrap()
        .unwrap();

    let invited_email = format!("Invited-{}@Example.com", uuid::Uuid::now_v7());
    let invitation = storage
        .create_console_invitation(
            organization_id,
            &invited_email,
            ConsoleRole::Owner,
            "token-one",
            chrono::Utc::now() + chrono::Duration::days(7),
            &system_actor(),
            owner.id,
        )
        .await
        .unwrap();
    assert_eq!(invitation.email, invited_email.to_lowercase());
    assert_eq!(
        storage
            .list_pending_console_invitations(organization_id)
            .await
            .unwrap()
            .len(),
        1
    );
    // The owner's address cannot be invited again.
    assert!(matches!(
        storage
            .create_console_invitation(
                organization_id,
                &owner_email,
                ConsoleRole::Analyst,
                "token-x",
                chrono::Utc::now() + chrono::Duration::days(7),
                &system_actor(),
                owner.id,
            )
            .await,
        Err(StorageError::WriteConflict(_))
    ));

    // Accepting twice (sequentially or at once) creates exactly one account.
    let mut acceptances = Vec::new();
    for _ in 0..4 {
        let storage = storage.clone();
        acceptances.push(tokio::spawn(async move {
            storage
                .accept_console_invitation("token-one", "hash-2", &system_actor())
                .await
        }));
    }
    let mut accepted = Vec::new();
    for acceptance in acceptances {
        if let Ok(account) = acceptance.await.unwrap() {
            accepted.push(account);
        }
    }
    assert_eq!(accepted.len(), 1, "one link, one account");
    let second_owner = accepted.remove(0);
    assert_eq!(second_owner.role, ConsoleRole::Owner);
    assert!(matches!(
        storage
            .accept_console_invitation("token-one", "hash-3", &system_actor())
            .await,
        Err(StorageError::NotFound(_))
    ));
    // An expired link is refused too.
    storage
        .create_console_invitation(
            organization_id,
            "late@example.com",
            ConsoleRole::Analyst,
            "token-expired",
            chrono::Utc::now() - chrono::Duration::seconds(1),
            &system_actor(),
            owner.id,
        )
        .await
        .unwrap();
    assert!(matches!(
        storage
            .accept_console_invitation("token-expired", "hash", &system_actor())
            .await,
        Err(StorageError::NotFound(_))
    ));

    // Two owners demote each other at once: one of them stays owner.
    let first = {
        let storage = storage.clone();
        tokio::spawn(async move {
            storage
                .change_console_member_role(
                    organization_id,
                    owner.id,
                    ConsoleRole::Analyst,
                    &system_actor(),
                )
                .await
        })
    };
    let second = {
        let storage = storage.clone();
        let second_owner_id = second_owner.id;
        tokio::spawn(async move {
            storage
                .change_console_member_role(
                    organization_id,
                    second_owner_id,
                    ConsoleRole::Analyst,
                    &system_actor(),
                )
                .await
        })
    };
    let outcomes = [first.await.unwrap(), second.await.unwrap()];
    assert_eq!(outcomes.iter().filter(|outcome| outcome.is_ok()).count(), 1);
    assert!(
        outcomes
            .iter()
            .any(|outcome| matches!(outcome, Err(StorageError::Refused(_))))
    );
    let members = storage.list_console_members(organization_id).await.unwrap();
    assert_eq!(
        members
            .iter()
            .filter(|member| member.role == ConsoleRole::Owner)
            .count(),
        1
    );
    let remaining_owner = members
        .iter()
        .find(|member| member.role == ConsoleRole::Owner)
        .unwrap()
        .id;
    let analyst = members
        .iter()
        .find(|member| member.role == ConsoleRole::Analyst)
        .unwrap()
        .id;
    assert!(matches!(
        storage
            .remove_console_member(organization_id, remaining_owner, &system_actor())
            .await,
        Err(StorageError::Refused(_))
    ));

    // Another organization cannot see or touch these members.
    let other_organization = storage
        .bootstrap_organization(
            "other",
            "p",
            &format!("{}@example.com", uuid::Uuid::now_v7()),
            "hash",
            &pepper(),
        )
        .await
        .unwrap()
        .organization_id;
    assert!(matches!(
        storage
            .remove_console_member(other_organization, analyst, &system_actor())
            .await,
        Err(StorageError::NotFound(_))
    ));
    assert!(matches!(
        storage
            .change_console_member_role(
                other_organization,
                analyst,
                ConsoleRole::Owner,
                &system_actor()
            )
            .await,
        Err(StorageError::NotFound(_))
    ));
    assert_eq!(
        storage
            .list_console_members(other_organization)
            .await
            .unwrap()
            .len(),
        1
    );

    // Removing a member ends their sessions at once.
    let session = storage
        .create_console_session(
            analyst,
            organization_id,
            "refresh-of-analyst",
            chrono::Utc::now() + chrono::Duration::hours(1),
        )
        .await
        .unwrap();
    assert!(storage.console_session_is_live(session).await.unwrap());
    storage
        .remove_console_member(organization_id, analyst, &system_actor())
        .await
        .unwrap();
    assert!(!storage.console_session_is_live(session).await.unwrap());
    assert_eq!(
        storage
            .console_account(analyst)
            .await
            .unwrap()
            .map(|a| a.id),
        None
    );
    assert_eq!(
        storage
            .list_console_members(organization_id)
            .await
            .unwrap()
            .len(),
        1
    );
}
on_both_databases!(members_and_invitations_keep_an_owner_and_stay_in_their_organization);

/// Retention picks memories past their own expiry or their kind's age limit, never
/// immutable or held ones; expiring removes rows and history, leaves tombstones, and touches
/// no other project.
async fn retention_takes_expired_and_old_memories_but_never_flagged_ones(storage: Storage) {
    use engram_storage::governance::ProjectSettings;
    let (scope, _) = project(&storage, None).await;
    let (other_scope, _) = project(&storage, Some(scope.organization_id())).await;
    let episodic_of = |content: &str, user: &'static str| {
        let mut memory = draft(content, Some(user), None);
        memory.memory.kind = MemoryKind::Episodic;
        memory
    };
    let episodic = |content: &str| episodic_of(content, "u");
    let stored = insert(
        &storage,
        &scope,
        vec![
            episodic("episode one"),
            // Another subject's: a hold keeps every memory of its subject.
            episodic_of("episode two", "h"),
            episodic("episode three"),
            draft("a semantic fact", Some("u"), None),
        ],
    )
    .await;
    insert(&storage, &other_scope, vec![episodic("foreign episode")]).await;
    let settings = ProjectSettings {
        retention_days: [(MemoryKind::Episodic, 30)].into_iter().collect(),
        ..Default::default()
    };
    storage
        .update_project_settings(&scope, &settings, &system_actor())
        .await
        .unwrap();
    assert_eq!(storage.project_settings(&scope).await.unwrap(), settings);
    let now = chrono::Utc::now();
    assert!(
        storage
            .memories_due_for_retention(&scope, &settings, now, 100)
            .await
            .unwrap()
            .is_empty()
    );
    let later = now + chrono::Duration::days(31);
    let due = storage
        .memories_due_for_retention(&scope, &settings, later, 100)
        .await
        .unwrap();
    assert_eq!(due.len(), 3, "the three episodes, not the fact");
    storage
        .set_memory_flags(
            &scope,
            stored[0].id,
            Some(true),
            None,
            None,
            &system_actor(),
        )
        .await
        .unwrap();
    storage
        .set_memory_flags(
            &scope,
            stored[1].id,
            None,
            Some(true),
            Some("hold"),
            &system_actor(),
        )
        .await
        .unwrap();
    let due = storage
        .memories_due_for_retention(&scope, &settings, later, 100)
        .await
        .unwrap();
    assert_eq!(due, vec![(stored[2].id, MemoryKind::Episodic)]);
    // Flagged memories are spared even when named explicitly.
    let expired = storage
        .expire_memories(
            &scope,
            &[stored[0].id, stored[1].id, stored[2].id],
            &system_actor(),
        )
        .await
        .unwrap();
    assert_eq!(expired, vec![stored[2].id]);
    assert!(matches!(
        storage
            .get_memory(&engram_core::MemoryScope::project_wide(scope), stored[2].id)
            .await,
        Err(StorageError::NotFound(_))
    ));
    assert!(
        storage
            .memory_tombstone(&scope, stored[2].id)
            .await
            .unwrap()
            .is_some()
    );
    // The other project's episode is untouched by this project's rules.
    assert_eq!(
        storage.count_active_memories(&other_scope).await.unwrap(),
        1
    );
    // Locked memories refuse edits and deletes.
    assert!(matches!(
        storage
            .delete_memory(&scope, stored[0].id, &system_actor())
            .await,
        Err(StorageError::Refused(_))
    ));
}
on_both_databases!(retention_takes_expired_and_old_memories_but_never_flagged_ones);

/// Erasure in batches removes every memory of the subject with its history, refuses while a
/// memory is held, and leaves other subjects and projects alone.
async fn subject_erasure_batches_remove_everything_of_one_subject(storage: Storage) {
    let (scope, _) = project(&storage, None).await;
    let (other_scope, _) = project(&storage, Some(scope.organization_id())).await;
    let subject: Vec<MemoryDraft> = (0..5)
        .map(|n| draft(&format!("subject memory {n}"), Some("erase-me"), None))
        .collect();
    let stored = insert(&storage, &scope, subject).await;
    insert(
        &storage,
        &scope,
        vec![draft("someone else", Some("keep-me"), None)],
    )
    .await;
    insert(
        &storage,
        &other_scope,
        vec![draft("same id, other project", Some("erase-me"), None)],
    )
    .await;
    storage
        .set_memory_flags(
            &scope,
            stored[0].id,
            None,
            Some(true),
            None,
            &system_actor(),
        )
        .await
        .unwrap();
    assert_eq!(
        storage
            .held_memories_of_subject(&scope, "erase-me")
            .await
            .unwrap(),
        vec![stored[0].id]
    );
    assert!(matches!(
        storage.erase_subject_batch(&scope, "erase-me", 2).await,
        Err(StorageError::Refused(_))
    ));
    storage
        .set_memory_flags(
            &scope,
            stored[0].id,
            None,
            Some(false),
            None,
            &system_actor(),
        )
        .await
        .unwrap();
    let mut erased = Vec::new();
    let mut history_entries = 0;
    loop {
        let (ids, history) = storage
            .erase_subject_batch(&scope, "erase-me", 2)
            .await
            .unwrap();
        if ids.is_empty() {
            break;
        }
        assert!(ids.len() <= 2);
        history_entries += history;
        erased.extend(ids);
    }
    assert_eq!(erased.len(), 5);
    assert_eq!(history_entries, 5);
    let remains = storage
        .subject_remains(&scope, "erase-me", &erased)
        .await
        .unwrap();
    assert_eq!(
        remains,
        engram_storage::governance::DatabaseRemains::default()
    );
    assert_eq!(
        storage
            .count_subject_memories(&scope, "keep-me")
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        storage
            .count_subject_memories(&other_scope, "erase-me")
            .await
            .unwrap(),
        1
    );
}
on_both_databases!(subject_erasure_batches_remove_everything_of_one_subject);

/// A compliance lookup finds people by the exact start of their id (case and wildcards
/// taken literally, the same on both databases) or by a metadata value, in its project only.
async fn subjects_are_found_by_id_prefix_or_metadata(storage: Storage) {
    let (scope, _) = project(&storage, None).await;
    let (other_scope, _) = project(&storage, Some(scope.organization_id())).await;
    let with_customer = |content: &str, user: &str, customer: &str| {
        let mut draft = draft(content, Some(user), None);
        draft
            .memory
            .metadata
            .insert("customer".into(), serde_json::json!(customer));
        draft
    };
    insert(
        &storage,
        &scope,
        vec![
            with_customer("one", "olivia", "C-1"),
            draft("two", Some("olivia"), None),
            with_customer("three", "oliver", "C-2"),
            draft("four", Some("Olga"), None),
            draft("five", Some("ol%x"), None),
        ],
    )
    .await;
    insert(
        &storage,
        &other_scope,
        vec![with_customer("elsewhere", "olive", "C-1")],
    )
    .await;
    let wide = engram_core::MemoryScope::project_wide(scope);
    let everything = engram_core::MemoryFilter::everything();
    let found = storage
        .subjects_matching(&wide, Some("oli"), &everything, 50)
        .await
        .unwrap();
    assert_eq!(
        found,
        vec![("oliver".to_string(), 1), ("olivia".to_string(), 2)],
        "ids by their exact start, with their memories, in this project only"
    );
    let found = storage
        .subjects_matching(&wide, Some("ol%"), &everything, 50)
        .await
        .unwrap();
    assert_eq!(
        found,
        vec![("ol%x".to_string(), 1)],
        "% is a character, not a wildcard"
    );
    let customer = engram_core::memory_filter::parse_memory_filter(
        &serde_json::json!({"metadata": {"customer": "C-1"}}),
        "metadata",
    )
    .unwrap();
    let found = storage
        .subjects_matching(&wide, None, &customer, 50)
        .await
        .unwrap();
    assert_eq!(found, vec![("olivia".to_string(), 1)]);
    let found = storage
        .subjects_matching(&wide, Some("oliver"), &customer, 50)
        .await
        .unwrap();
    assert!(found.is_empty(), "both conditions must hold: {found:?}");
    let found = storage
        .subjects_matching(&wide, Some("o"), &everything, 1)
        .await
        .unwrap();
    assert_eq!(found.len(), 1, "the limit holds");
}
on_both_databases!(subjects_are_found_by_id_prefix_or_metadata);

/// Usage counters add up exactly under concurrent batches, per hour and credential, and the
/// daily view is the sum of the hours; another project's usage is never included.
async fn usage_counters_add_up_exactly(storage: Storage) {
    use engram_core::usage::UsageUnit;
    use engram_storage::usage::{UsageGranularity, UsageIncrement};
    let (scope, _) = project(&storage, None).await;
    let (other_scope, _) = project(&storage, Some(scope.organization_id())).await;
    let base = chrono::Utc::now()
        .date_naive()
        .and_hms_opt(10, 15, 0)
        .unwrap()
        .and_utc();
    let increment =
        |scope: &ProjectScope, credential: &str, minutes: i64, quantity: i64| UsageIncrement {
            organization_id: scope.organization_id(),
            project_id: scope.project_id(),
            attribution: engram_core::usage::UsageAttribution {
                credential: credential.to_string(),
                channel: "http".to_string(),
                end_user: None,
                agent_id: None,
            },
            unit: UsageUnit::Searches,
            at: base + chrono::Duration::minutes(minutes),
            quantity,
        };
    let mut writers = Vec::new();
    for writer in 0..8 {
        let storage = storage.clone();
        let batch = vec![
            increment(&scope, "key:a", 0, 1),
            increment(&scope, "key:a", 90, 2),
            increment(&scope, "end_user", 10, writer + 1),
        ];
        writers.push(tokio::spawn(async move {
            storage.add_usage(&batch).await.unwrap()
        }));
    }
    for writer in writers {
        writer.await.unwrap();
    }
    storage
        .add_usage(&[increment(&other_scope, "key:b", 0, 1000)])
        .await
        .unwrap();
    let from = base - chrono::Duration::hours(12);
    let to = base + chrono::Duration::hours(12);
    let hourly = storage
        .usage(&scope, from, to, UsageGranularity::Hour)
        .await
        .unwrap();
    let quantity = |rows: &[engram_storage::usage::UsageRow], credential: &str| -> i64 {
        rows.iter()
            .filter(|row| row.credential == credential)
            .map(|row| row.quantity)
            .sum()
    };
    assert_eq!(quantity(&hourly, "key:a"), 8 + 16);
    assert_eq!(quantity(&hourly, "end_user"), (1..=8).sum::<i64>());
    assert_eq!(
        hourly
            .iter()
            .filter(|row| row.credential == "key:a")
            .count(),
        2,
        "two hours"
    );
    let daily = storage
        .usage(&scope, from, to, UsageGranularity::Day)
        .await
        .unwrap();
    assert_eq!(quantity(&daily, "key:a"), quantity(&hourly, "key:a"));
    assert_eq!(quantity(&daily, "key:b"), 0, "another project's usage");
}
on_both_databases!(usage_counters_add_up_exactly);

/// A price applies from its effective date on, an organization's override beats the
/// default, and cost is quantity × the price of that day.
async fn costs_use_the_price_in_effect_each_day(storage: Storage) {
    use engram_core::usage::UsageUnit;
    use engram_storage::usage::{PriceEntry, UsageIncrement};
    let (scope, _) = project(&storage, None).await;
    let day = |offset: i64| {
        (chrono::Utc::now().date_naive() - chrono::Duration::days(10 - offset))
            .and_hms_opt(0, 0, 0)
            .unwrap()
            .and_utc()
    };
    let price = |organization: bool, micros: i64, from: i64| PriceEntry {
        organization_id: organization.then(|| scope.organization_id()),
        unit: UsageUnit::Searches,
        currency: "USD".to_string(),
        unit_price_picos: micros * 1_000_000,
        effective_from: day(from),
        is_default: false,
    };
    storage
        .add_price(
            &price(false, 1_000, 0),
            &engram_core::audit::Actor::system("test"),
        )
        .await
        .unwrap();
    storage
        .add_price(
            &price(false, 2_000, 2),
            &engram_core::audit::Actor::system("test"),
        )
        .await
        .unwrap();
    storage
        .add_price(
            &price(true, 500, 4),
            &engram_core::audit::Actor::system("test"),
        )
        .await
        .unwrap();
    let increments: Vec<UsageIncrement> = (0..6)
        .map(|offset| UsageIncrement {
            organization_id: scope.organization_id(),
            project_id: scope.project_id(),
            attribution: engram_core::usage::UsageAttribution::engine("key:a"),
            unit: UsageUnit::Searches,
            at: day(offset) + chrono::Duration::hours(12),
            quantity: 10,
        })
        .collect();
    storage.add_usage(&increments).await.unwrap();
    let costs = storage.costs(&scope, day(0), day(6)).await.unwrap();
    let per_day: Vec<i64> = costs.iter().map(|row| row.cost.micros()).collect();
    // Days 0–1 at the first default, 2–3 at the second, 4–5 at the organization's override.
    assert_eq!(per_day, vec![10_000, 10_000, 20_000, 20_000, 5_000, 5_000]);
    // Another organization only gets the defaults.
    let (other_scope, _) = project(&storage, None).await;
    let book = storage
        .price_book_for(other_scope.organization_id())
        .await
        .unwrap();
    assert_eq!(book.len(), 2);
}
on_both_databases!(costs_use_the_price_in_effect_each_day);

/// The default price book fills only what the operator left unpriced: from today for a
/// unit never used, from tomorrow for one that was (no used day is re-priced), never again
/// once applied, and an operator's price beats it whatever their dates.
async fn default_prices_fill_only_what_the_operator_left_unpriced(storage: Storage) {
    use engram_core::usage::{UsageAttribution, UsageUnit};
    use engram_storage::usage::{PriceEntry, UsageIncrement, price_in_effect};
    let (scope, _) = project(&storage, None).await;
    let now = chrono::Utc::now();
    let today = now.date_naive().and_hms_opt(0, 0, 0).unwrap().and_utc();
    // Searches were used before the upgrade; memories written have the operator's price.
    storage
        .add_usage(&[UsageIncrement {
            organization_id: scope.organization_id(),
            project_id: scope.project_id(),
            attribution: UsageAttribution::engine("key:a"),
            unit: UsageUnit::Searches,
            at: now,
            quantity: 3,
        }])
        .await
        .unwrap();
    let operator_price = PriceEntry {
        organization_id: None,
        unit: UsageUnit::MemoriesWritten,
        currency: "USD".to_string(),
        unit_price_picos: 7_000_000,
        effective_from: today - chrono::Duration::days(3),
        is_default: false,
    };
    storage
        .add_price(&operator_price, &engram_core::audit::Actor::system("test"))
        .await
        .unwrap();
    let defaults = [
        (UsageUnit::Searches, 500),
        (UsageUnit::MemoriesWritten, 1_000),
        (UsageUnit::TokensEmbedded, 1),
    ];
    let applied = storage
        .apply_default_prices(&defaults, "USD", now)
        .await
        .unwrap();
    assert_eq!(
        applied,
        vec![UsageUnit::Searches, UsageUnit::TokensEmbedded]
    );
    assert!(
        storage
            .apply_default_prices(&defaults, "USD", now)
            .await
            .unwrap()
            .is_empty(),
        "applied once"
    );
    let book = storage
        .price_book_for(scope.organization_id())
        .await
        .unwrap();
    let tomorrow = today + chrono::Duration::days(1);
    // Searches had usage today: priced from tomorrow; tokens were never used: from today.
    assert_eq!(price_in_effect(&book, UsageUnit::Searches, today), None);
    let searches = price_in_effect(&book, UsageUnit::Searches, tomorrow).unwrap();
    assert!(searches.is_default);
    assert_eq!(searches.unit_price_picos, 500_000_000);
    let tokens = price_in_effect(&book, UsageUnit::TokensEmbedded, today).unwrap();
    assert!(tokens.is_default);
    assert_eq!(
        price_in_effect(&book, UsageUnit::MemoriesWritten, tomorrow),
        Some(operator_price.clone())
    );
    // An operator's price set later, effective before the default, still wins.
    storage
        .add_price(
            &PriceEntry {
                unit: UsageUnit::TokensEmbedded,
                unit_price_picos: 0,
                effective_from: today - chrono::Duration::days(1),
                ..operator_price
            },
            &engram_core::audit::Actor::system("test"),
        )
        .await
        .unwrap();
    let book = storage
        .price_book_for(scope.organization_id())
        .await
        .unwrap();
    let tokens = price_in_effect(&book, UsageUnit::TokensEmbedded, tomorrow).unwrap();
    assert!(!tokens.is_default);
    assert_eq!(tokens.unit_price_picos, 0);
}
on_both_databases!(default_prices_fill_only_what_the_operator_left_unpriced);

/// A deployment that prices in euros gets no dollar placeholders.
async fn default_prices_keep_out_of_a_book_in_another_currency(storage: Storage) {
    use engram_core::usage::UsageUnit;
    use engram_storage::usage::PriceEntry;
    storage
        .add_price(
            &PriceEntry {
                organization_id: None,
                unit: UsageUnit::Searches,
                currency: "EUR".to_string(),
                unit_price_picos: 300_000_000,
                effective_from: chrono::Utc::now(),
                is_default: false,
            },
            &engram_core::audit::Actor::system("test"),
        )
        .await
        .unwrap();
    let applied = storage
        .apply_default_prices(&[(UsageUnit::TokensEmbedded, 1)], "USD", chrono::Utc::now())
        .await
        .unwrap();
    assert!(applied.is_empty(), "{applied:?}");
}
on_both_databases!(default_prices_keep_out_of_a_book_in_another_currency);

/// Usage broken down by end-user names them until they are erased; erasure renames their
/// counters to the subject digest (merging with counters already renamed), keeps every
/// quantity, and touches no other end-user's or project's counters.
async fn erasure_pseudonymizes_usage_and_keeps_every_quantity(storage: Storage) {
    use engram_core::usage::{BreakdownValue, UsageAttribution, UsageBreakdown, UsageUnit};
    use engram_storage::usage::UsageIncrement;
    let (scope, _) = project(&storage, None).await;
    let (other_scope, _) = project(&storage, None).await;
    let now = chrono::Utc::now();
    let attributed =
        |scope: &ProjectScope, user: &str, agent: &str, quantity: i64| UsageIncrement {
            organization_id: scope.organization_id(),
            project_id: scope.project_id(),
            attribution: UsageAttribution {
                credential: "key:a".to_string(),
                channel: "http".to_string(),
                end_user: Some(user.to_string()),
                agent_id: Some(agent.to_string()),
            },
            unit: UsageUnit::Searches,
            at: now,
            quantity,
        };
    let from = now - chrono::Duration::days(1);
    let to = now + chrono::Duration::days(1);
    let per_value = |rows: Vec<engram_core::usage::UsageBreakdownRow>| {
        rows.into_iter()
            .map(|row| (row.value, row.quantity))
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    storage
        .add_usage(&[
            attributed(&scope, "ann", "planner", 2),
            attributed(&scope, "ann", "writer", 3),
            attributed(&scope, "ben", "planner", 5),
            attributed(&other_scope, "ann", "planner", 7),
        ])
        .await
        .unwrap();
    let named = |name: &str| BreakdownValue::Named(name.to_string());
    assert_eq!(
        per_value(
            storage
                .usage_breakdown(&scope, from, to, UsageBreakdown::EndUser)
                .await
                .unwrap()
        ),
        [(named("ann"), 5), (named("ben"), 5)].into_iter().collect()
    );
    assert_eq!(
        storage.count_usage_of_subject(&scope, "ann").await.unwrap(),
        2
    );
    // Erased, then seen again under the same id, then erased again: one digest's counters.
    for (round, counters) in [(1, 2), (2, 1)] {
        let changed = storage
            .pseudonymize_usage_of_subject(&scope, "ann", "d1gest")
            .await
            .unwrap();
        assert_eq!(changed, counters, "round {round}");
        assert_eq!(
            storage.count_usage_of_subject(&scope, "ann").await.unwrap(),
            0
        );
        if round == 1 {
            storage
                .add_usage(&[attributed(&scope, "ann", "planner", 4)])
                .await
                .unwrap();
        }
    }
    let erased = BreakdownValue::ErasedEndUser("d1gest".to_string());
    assert_eq!(
        per_value(
            storage
                .usage_breakdown(&scope, from, to, UsageBreakdown::EndUser)
                .await
                .unwrap()
        ),
        [(erased, 9), (named("ben"), 5)].into_iter().collect()
    );
    // Agents keep their figures; the other project still names its own ann.
    assert_eq!(
        per_value(
            storage
                .usage_breakdown(&scope, from, to, UsageBreakdown::Agent)
                .await
                .unwrap()
        ),
        [(named("planner"), 11), (named("writer"), 3)]
            .into_iter()
            .collect()
    );
    assert_eq!(
        storage
            .count_usage_of_subject(&other_scope, "ann")
            .await
            .unwrap(),
        1
    );
    let totals: i64 = storage
        .usage(
            &scope,
            from,
            to,
            engram_storage::usage::UsageGranularity::Day,
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.quantity)
        .sum();
    assert_eq!(totals, 14, "the hourly totals are untouched");
}
on_both_databases!(erasure_pseudonymizes_usage_and_keeps_every_quantity);

/// A closed month's statement is written once (a second writer gets the first one back),
/// is read back only by its own project or organization, and an erasure renames the
/// end-user in it — in the project's and the organization's statement — keeping every
/// figure, counted until then by the subject's usage count.
async fn statements_are_stored_once_and_erasure_renames_the_end_user(storage: Storage) {
    use engram_core::statements::{Statement, StatementBreakdownLine, StatementParty};
    use engram_core::usage::{BillingMonth, Picos};
    use engram_storage::statements::StatementOf;
    let (scope, _) = project(&storage, None).await;
    let (other_scope, _) = project(&storage, None).await;
    let month = BillingMonth::containing(chrono::Utc::now() - chrono::Duration::days(62));
    let statement = |project: Option<&str>, generated: i64| Statement {
        month: month.label(),
        organization: StatementParty {
            id: scope.organization_id().to_string(),
            name: "Org".to_string(),
        },
        project: project.map(|id| StatementParty {
            id: id.to_string(),
            name: "P".to_string(),
        }),
        provisional: false,
        closes_at: month.resets_at(),
        generated_at: chrono::DateTime::from_timestamp(generated, 0).unwrap(),
        lines: Vec::new(),
        totals: Vec::new(),
        budgets: Vec::new(),
        breakdowns: vec![StatementBreakdownLine {
            by: "end_user".to_string(),
            value: Some("ann".to_string()),
            erased_subject: None,
            project_id: project.is_none().then(|| scope.project_id().to_string()),
            unit: "searches".to_string(),
            quantity: 4,
            currency: Some("USD".to_string()),
            cost: Picos(2_000_000_000),
            cost_micros: 2_000,
        }],
    };
    let project_id = scope.project_id().to_string();
    let first = statement(Some(&project_id), 1_000);
    let now = chrono::Utc::now();
    let stored = storage
        .store_statement(StatementOf::Project(&scope), month, &first, now)
        .await
        .unwrap();
    assert_eq!(stored, first);
    // A second writer of the same month gets the first statement back.
    let second = statement(Some(&project_id), 2_000);
    let kept = storage
        .store_statement(StatementOf::Project(&scope), month, &second, now)
        .await
        .unwrap();
    assert_eq!(kept, first);
    storage
        .store_statement(
            StatementOf::Organization(scope.organization_id()),
            month,
            &statement(None, 1_000),
            now,
        )
        .await
        .unwrap();
    // Another project of the organization has no statement of that month.
    assert!(
        storage
            .stored_statement(StatementOf::Project(&other_scope), month)
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        storage.count_usage_of_subject(&scope, "ann").await.unwrap(),
        2
    );
    assert_eq!(
        storage
            .count_usage_of_subject(&other_scope, "ann")
            .await
            .unwrap(),
        0,
        "another project's ann is someone else"
    );
    let changed = storage
        .pseudonymize_usage_of_subject(&scope, "ann", "d1gest")
        .await
        .unwrap();
    assert_eq!(changed, 2, "both statements renamed");
    assert_eq!(
        storage.count_usage_of_subject(&scope, "ann").await.unwrap(),
        0
    );
    for of in [
        StatementOf::Project(&scope),
        StatementOf::Organization(scope.organization_id()),
    ] {
        let read = storage.stored_statement(of, month).await.unwrap().unwrap();
        let line = &read.breakdowns[0];
        assert_eq!(line.value, None);
        assert_eq!(line.erased_subject.as_deref(), Some("d1gest"));
        assert_eq!((line.quantity, line.cost), (4, Picos(2_000_000_000)));
        assert_eq!(read.generated_at, first.generated_at);
    }
}
on_both_databases!(statements_are_stored_once_and_erasure_renames_the_end_user);

/// Spend limits round-trip and are audited; a budget alert is recorded once per threshold
/// and month even when raised concurrently; a daily sample replaces the day's earlier one.
async fn spend_limits_alerts_and_daily_samples(storage: Storage) {
    use engram_core::usage::{BillingMonth, MonthlyBudget, SpendLimits, UsageUnit};
    use engram_storage::usage::BudgetAlert;
    let (scope, _) = project(&storage, None).await;
    let (other_scope, _) = project(&storage, None).await;
    assert_eq!(
        storage.spend_limits(&scope).await.unwrap(),
        SpendLimits::default()
    );
    let limits = SpendLimits {
        monthly_budget: Some(MonthlyBudget {
            amount_micros: 5_000_000,
            currency: "EUR".to_string(),
            alert_thresholds_percent: vec![50, 100],
            hard_cap: true,
        }),
        requests_per_minute: Some(60),
        monthly_quotas: [(UsageUnit::Searches, 1_000)].into_iter().collect(),
        recall: engram_core::usage::RecallBudget {
            max_results: Some(5),
            max_tokens: None,
        },
        memory_limits: Some(engram_core::memory_limits::MemoryLimits {
            per_end_user: Some(100),
            per_agent: None,
            policy: engram_core::memory_limits::MemoryLimitPolicy::EvictLeastImportant,
            set_by: Some("api_key:setter".to_string()),
        }),
    };
    storage
        .set_spend_limits(&scope, &limits, &engram_core::audit::Actor::system("test"))
        .await
        .unwrap();
    assert_eq!(storage.spend_limits(&scope).await.unwrap(), limits);
    assert_eq!(
        storage.spend_limits(&other_scope).await.unwrap(),
        SpendLimits::default(),
        "another project keeps its own limits"
    );

    let month = BillingMonth::containing(chrono::Utc::now());
    let alert = BudgetAlert {
        month: month.label(),
        threshold_percent: 50,
        spent_micros: 2_600_000,
        budget_micros: 5_000_000,
        currency: "EUR".to_string(),
        reached_at: chrono::Utc::now(),
    };
    let mut racers = Vec::new();
    for _ in 0..4 {
        let storage = storage.clone();
        let alert = alert.clone();
        racers.push(tokio::spawn(async move {
            storage.record_budget_alert(&scope, &alert).await.unwrap()
        }));
    }
    let mut first_times = 0;
    for racer in racers {
        first_times += usize::from(racer.await.unwrap());
    }
    assert_eq!(
        first_times, 1,
        "one of four concurrent raisers records the alert"
    );
    let alerts = storage.budget_alerts(&scope, month).await.unwrap();
    assert_eq!(alerts.len(), 1);
    assert_eq!(alerts[0].threshold_percent, 50);
    assert!(
        storage
            .budget_alerts(&other_scope, month)
            .await
            .unwrap()
            .is_empty()
    );

    let now = chrono::Utc::now();
    storage
        .set_daily_sample(&scope, UsageUnit::MemoryDays, now, 7)
        .await
        .unwrap();
    storage
        .set_daily_sample(&scope, UsageUnit::MemoryDays, now, 4)
        .await
        .unwrap();
    let used = storage.month_usage(&scope, month).await.unwrap();
    assert_eq!(used.get(&UsageUnit::MemoryDays), Some(&4));
}
on_both_databases!(spend_limits_alerts_and_daily_samples);

async fn conversation_history_llm_calls_and_named_supersede(storage: Storage) {
    use engram_core::conversation::MessageRole;
    use engram_core::usage::UsageUnit;
    use engram_storage::conversations::{LlmCallRecord, MessageBatch, NewMessage};
    let (scope, _) = project(&storage, None).await;
    let (other_scope, _) = project(&storage, Some(scope.organization_id())).await;
    let now = chrono::Utc::now();
    let batch = |user: Option<&str>, texts: &[&str]| MessageBatch {
        session_id: ExternalId::parse("s-1").unwrap(),
        user_id: user.map(|user| ExternalId::parse(user).unwrap()),
        agent_id: None,
        messages: texts
            .iter()
            .map(|text| NewMessage {
                role: MessageRole::User,
                name: None,
                content: text.to_string(),
                memory_key: None,
                sent_at: now,
            })
            .collect(),
    };
    let (first, task) = storage
        .append_session_messages(
            &scope,
            batch(Some("ana"), &["one", "two", "three"]),
            Some(engram_storage::conversations::DerivationRequest {
                credential: "key:k",
                may_delete: false,
            }),
            None,
        )
        .await
        .unwrap();
    let task = task.expect("a derivation task is queued with the messages");
    assert_eq!(task.kind, engram_core::TaskKind::MessageDerivation);
    assert_eq!(task.progress_total, 3);
    let (_, none) = storage
        .append_session_messages(&scope, batch(None, &["four"]), None, None)
        .await
        .unwrap();
    assert!(none.is_none());
    // Each end-user of the session has a history of its own; "four" is no end-user's.
    let (page, cursor) = storage
        .session_messages(
            &engram_core::MemoryScope::project_wide(scope),
            "s-1",
            Some("ana"),
            None,
            2,
        )
        .await
        .unwrap();
    assert_eq!(
        page.iter()
            .map(|message| message.content.as_str())
            .collect::<Vec<_>>(),
        ["one", "two"]
    );
    let (rest, end) = storage
        .session_messages(
            &engram_core::MemoryScope::project_wide(scope),
            "s-1",
            Some("ana"),
            cursor,
            10,
        )
        .await
        .unwrap();
    assert_eq!(
        rest.iter()
            .map(|message| message.content.as_str())
            .collect::<Vec<_>>(),
        ["three"]
    );
    assert_eq!(end, None);
    let (nobodys, _) = storage
        .session_messages(
            &engram_core::MemoryScope::project_wide(scope),
            "s-1",
            None,
            None,
            10,
        )
        .await
        .unwrap();
    assert_eq!(
        nobodys
            .iter()
            .map(|message| message.content.as_str())
            .collect::<Vec<_>>(),
        ["four"]
    );
    let earlier = storage
        .messages_before(&scope, "s-1", [Some("ana"), None], nobodys[0].id, 2)
        .await
        .unwrap();
    assert_eq!(
        earlier
            .iter()
            .map(|message| message.content.as_str())
            .collect::<Vec<_>>(),
        ["two", "three"],
        "the context of a batch is its own end-user's earlier messages"
    );
    assert!(
        storage
            .messages_before(&scope, "s-1", [Some("bo"), None], nobodys[0].id, 10)
            .await
            .unwrap()
            .is_empty(),
        "another end-user of the session gets none of ana's words"
    );
    assert!(
        storage
            .messages_before(&scope, "s-1", [None, None], nobodys[0].id, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        storage
            .messages_of_batch(&scope, first[0].batch_id)
            .await
            .unwrap()
            .len(),
        3
    );
    let (foreign, _) = storage
        .session_messages(
            &engram_core::MemoryScope::project_wide(other_scope),
            "s-1",
            Some("ana"),
            None,
            10,
        )
        .await
        .unwrap();
    assert!(foreign.is_empty(), "another project sees no messages");
    assert_eq!(
        storage
            .delete_session_messages_of_subject(&other_scope, "ana")
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        storage
            .delete_session_messages_of_subject(&scope, "ana")
            .await
            .unwrap(),
        3
    );
    assert_eq!(
        storage
            .count_session_messages_of_subject(&scope, "ana")
            .await
            .unwrap(),
        0
    );

    // LLM calls: per model, and the hourly counters agree with them.
    for (model, tokens_in, tokens_out, succeeded) in [
        ("small", 100, 20, true),
        ("small", 50, 10, true),
        ("large", 0, 0, false),
    ] {
        storage
            .record_llm_call(
                &scope,
                &LlmCallRecord {
                    attribution: engram_core::usage::UsageAttribution::engine("key:k"),
                    model: model.to_string(),
                    purpose: "extraction".to_string(),
                    tokens_in,
                    tokens_out,
                    duration_ms: 5,
                    succeeded,
                    at: now,
                },
            )
            .await
            .unwrap();
    }
    let by_model = storage
        .llm_usage_by_model(
            &scope,
            now - chrono::Duration::hours(1),
            now + chrono::Duration::hours(1),
        )
        .await
        .unwrap();
    assert_eq!(by_model.len(), 2);
    assert_eq!(
        (
            by_model[0].model.as_str(),
            by_model[0].calls,
            by_model[0].failed_calls
        ),
        ("large", 1, 1)
    );
    assert_eq!(
        (
            by_model[1].model.as_str(),
            by_model[1].calls,
            by_model[1].tokens_in,
            by_model[1].tokens_out
        ),
        ("small", 2, 150, 30)
    );
    let used = storage
        .month_usage(&scope, engram_core::usage::BillingMonth::containing(now))
        .await
        .unwrap();
    assert_eq!(used.get(&UsageUnit::LlmTokensIn), Some(&150));
    assert_eq!(used.get(&UsageUnit::LlmTokensOut), Some(&30));
    assert!(
        storage
            .llm_usage_by_model(
                &other_scope,
                now - chrono::Duration::hours(1),
                now + chrono::Duration::hours(1)
            )
            .await
            .unwrap()
            .is_empty()
    );

    // A draft that names the memory it supersedes: the old one is superseded with the
    // reason; an immutable one is left alone.
    let stored = |outcome: InsertOutcome| match outcome {
        InsertOutcome::Inserted { memories, .. } => memories,
        InsertOutcome::Replayed { .. } | InsertOutcome::AnswerErased => panic!("not a replay"),
    };
    let old = stored(
        storage
            .insert_memories(
                &scope,
                vec![draft("Lives in Berlin", Some("bo"), None)],
                &system_actor(),
                None,
                |_| (201, String::new()),
            )
            .await
            .unwrap(),
    )
    .remove(0);
    let mut replacing = draft("Lives in Lisbon", Some("bo"), None);
    replacing.supersedes = Some(old.id);
    replacing.reason = Some("moved".to_string());
    let new = stored(
        storage
            .insert_memories(&scope, vec![replacing], &system_actor(), None, |_| {
                (201, String::new())
            })
            .await
            .unwrap(),
    )
    .remove(0);
    let old_now = storage
        .get_memory(&engram_core::MemoryScope::project_wide(scope), old.id)
        .await
        .unwrap();
    assert_eq!(old_now.state, MemoryState::Superseded);
    let history = storage
        .memory_history(&engram_core::MemoryScope::project_wide(scope), old.id)
        .await
        .unwrap();
    let reason = history.last().unwrap().reason.clone().unwrap();
    assert!(
        reason.contains("moved") && reason.contains(&new.id.to_string()),
        "{reason}"
    );
    assert_eq!(
        storage
            .memory_history(&engram_core::MemoryScope::project_wide(scope), new.id)
            .await
            .unwrap()[0]
            .reason
            .as_deref(),
        Some("moved")
    );
    storage
        .set_memory_flags(
            &scope,
            new.id,
            Some(true),
            None,
            Some("fixed"),
            &system_actor(),
        )
        .await
        .unwrap();
    let mut over_immutable = draft("Lives in Porto", Some("bo"), None);
    over_immutable.supersedes = Some(new.id);
    storage
        .insert_memories(&scope, vec![over_immutable], &system_actor(), None, |_| {
            (201, String::new())
        })
        .await
        .unwrap();
    assert_eq!(
        storage
            .get_memory(&engram_core::MemoryScope::project_wide(scope), new.id)
            .await
            .unwrap()
            .state,
        MemoryState::Active,
        "an immutable memory is never superseded"
    );
}
on_both_databases!(conversation_history_llm_calls_and_named_supersede);

async fn feedback_is_kept_per_memory_and_recall_and_goes_with_the_subject(storage: Storage) {
    use engram_storage::feedback::NewFeedback;
    let (scope, _) = project(&storage, None).await;
    let (other_scope, _) = project(&storage, Some(scope.organization_id())).await;
    let memory = match storage
        .insert_memories(
            &scope,
            vec![draft("Likes tea", Some("ana"), None)],
            &system_actor(),
            None,
            |_| (201, String::new()),
        )
        .await
        .unwrap()
    {
        InsertOutcome::Inserted { memories, .. } => memories[0].clone(),
        InsertOutcome::Replayed { .. } | InsertOutcome::AnswerErased => panic!("not a replay"),
    };
    let recall_id = uuid::Uuid::now_v7();
    for (rating, text) in [("relevant", None), ("wrong", Some("It is coffee."))] {
        storage
            .record_feedback(
                &scope,
                NewFeedback {
                    memory_id: Some(memory.id),
                    recall_id: Some(recall_id),
                    user_id: Some("ana".to_string()),
                    rating: rating.to_string(),
                    text: text.map(str::to_string),
                    credential: "key:k".to_string(),
                    correction: None,
                    agent_id: None,
                },
            )
            .await
            .unwrap();
    }
    let on_memory = storage
        .feedback_on_memory(&engram_core::MemoryScope::project_wide(scope), memory.id)
        .await
        .unwrap();
    assert_eq!(
        on_memory
            .iter()
            .map(|feedback| feedback.rating.as_str())
            .collect::<Vec<_>>(),
        ["relevant", "wrong"]
    );
    assert_eq!(on_memory[1].text.as_deref(), Some("It is coffee."));
    assert_eq!(
        storage
            .feedback_on_recall(&engram_core::MemoryScope::project_wide(scope), recall_id)
            .await
            .unwrap()
            .len(),
        2
    );
    assert!(
        storage
            .feedback_on_recall(
                &engram_core::MemoryScope::project_wide(other_scope),
                recall_id
            )
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        storage
            .delete_feedback_of_subject(&other_scope, "ana")
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        storage
            .delete_feedback_of_subject(&scope, "ana")
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        storage
            .count_feedback_of_subject(&scope, "ana")
            .await
            .unwrap(),
        0
    );
}
on_both_databases!(feedback_is_kept_per_memory_and_recall_and_goes_with_the_subject);

/// Session state written before values were kept per end-user (migration m0021) stays with
/// the end-user it was stored for, and a value of no end-user stays in that namespace.
#[tokio::test]
async fn session_state_written_before_per_end_user_namespaces_keeps_its_user() {
    use engram_migrations::sea_orm::{ConnectionTrait, Database};
    use engram_migrations::{Migrator, MigratorTrait};
    let directory = tempfile::tempdir().unwrap();
    let url = format!(
        "sqlite://{}?mode=rwc",
        directory.path().join("test.db").display()
    );
    let older = Database::connect(&url).await.unwrap();
    Migrator::up(&older, Some(20)).await.unwrap();
    let project_id = uuid::Uuid::now_v7();
    for (key, user_id) in [("draft", "'lena'"), ("shared", "NULL")] {
        older
            .execute_unprepared(&format!(
                "INSERT INTO session_state (organization_id, project_id, session_id, key, value, \
                 version, user_id, created_at, updated_at) VALUES ('{organization}', '{project_id}', \
                 'chat-1', '{key}', '\"kept\"', 3, {user_id}, '2026-01-01T00:00:00Z', \
                 '2026-01-01T00:00:00Z')",
                organization = uuid::Uuid::now_v7(),
            ))
            .await
            .unwrap();
    }
    older.close().await.unwrap();

    let storage = Storage::connect(&url).await.unwrap();
    let (scope, _) = project(&storage, None).await;
    let adopted = Database::connect(&url).await.unwrap();
    // Uuids are stored as the driver binds them (not as text): bound values, not literals.
    adopted
        .execute(engram_migrations::sea_orm::Statement::from_sql_and_values(
            engram_migrations::sea_orm::DbBackend::Sqlite,
            "UPDATE session_state SET project_id = ?, organization_id = ?",
            [
                scope.project_id().as_uuid().into(),
                scope.organization_id().as_uuid().into(),
            ],
        ))
        .await
        .unwrap();
    adopted.close().await.unwrap();

    let lenas = storage
        .session_state(
            &engram_core::MemoryScope::project_wide(scope),
            "chat-1",
            Some("lena"),
            "draft",
        )
        .await
        .unwrap()
        .expect("lena's value is in lena's namespace");
    assert_eq!(lenas.value, serde_json::json!("kept"));
    assert_eq!(lenas.version, 3);
    assert_eq!(lenas.user_id.as_deref(), Some("lena"));
    assert!(
        storage
            .session_state(
                &engram_core::MemoryScope::project_wide(scope),
                "chat-1",
                None,
                "draft"
            )
            .await
            .unwrap()
            .is_none(),
        "not in the namespace of no end-user"
    );
    assert!(
        storage
            .session_state(
                &engram_core::MemoryScope::project_wide(scope),
                "chat-1",
                None,
                "shared"
            )
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        storage
            .session_state(
                &engram_core::MemoryScope::project_wide(scope),
                "chat-1",
                Some("omar"),
                "shared"
            )
            .await
            .unwrap()
            .is_none()
    );
}

/// A scope built from an end-user token reads and writes only that end-user's data, whatever
/// the query asks for: storage adds the end-user, not the use case.
async fn an_end_user_scope_reaches_only_its_end_users_data(storage: Storage) {
    use engram_core::conversation::MessageRole;
    use engram_storage::conversations::{MessageBatch, NewMessage};
    use engram_storage::feedback::NewFeedback;
    use engram_storage::session_state::StateWrite;
    let (scope, _) = project(&storage, None).await;
    let whole = engram_core::MemoryScope::project_wide(scope);
    let anas = engram_core::Principal::end_user_token(
        scope,
        ExternalId::parse("ana").unwrap(),
        engram_core::ids::ApiKeyId::generate(),
        engram_core::ApiScopes::default(),
        None,
        "digest-of-ana".to_string(),
        system_actor(),
    )
    .memory_scope()
    .clone();
    let stored = insert(
        &storage,
        &scope,
        vec![
            draft("Ana likes tea", Some("ana"), None),
            draft("Ben likes coffee", Some("ben"), None),
            draft("The office opens at nine", None, None),
        ],
    )
    .await;
    let (ana_memory, ben_memory, shared_memory) = (&stored[0], &stored[1], &stored[2]);

    // Memories: one by id, lists (even when the filter names another end-user), hydration.
    assert_eq!(
        storage.get_memory(&anas, ana_memory.id).await.unwrap().id,
        ana_memory.id
    );
    for foreign in [ben_memory.id, shared_memory.id] {
        assert!(matches!(
            storage.get_memory(&anas, foreign).await,
            Err(StorageError::NotFound(engram_core::NotFoundKind::Memory))
        ));
        assert!(storage.get_memory(&whole, foreign).await.is_ok());
    }
    let listed = storage.list_memories(&anas, &listing(50)).await.unwrap();
    assert_eq!(
        listed
            .memories
            .iter()
            .map(|memory| memory.id)
            .collect::<Vec<_>>(),
        vec![ana_memory.id]
    );
    let mut asking_for_ben = listing(50);
    asking_for_ben.subject.user_id = Some(ExternalId::parse("ben").unwrap());
    assert!(
        storage
            .list_memories(&anas, &asking_for_ben)
            .await
            .unwrap()
            .memories
            .is_empty()
    );
    assert_eq!(
        storage
            .list_memories(&whole, &listing(50))
            .await
            .unwrap()
            .memories
            .len(),
        3
    );
    let hydrated = storage
        .active_memories_with_embeddings(&anas, &[ana_memory.id, ben_memory.id, shared_memory.id])
        .await
        .unwrap();
    assert_eq!(
        hydrated.keys().copied().collect::<Vec<_>>(),
        vec![ana_memory.id]
    );

    // Session messages: only ana's history, not ben's nor the session's shared one.
    for user in [Some("ana"), Some("ben"), None] {
        storage
            .append_session_messages(
                &scope,
                MessageBatch {
                    session_id: ExternalId::parse("s-1").unwrap(),
                    user_id: user.map(|user| ExternalId::parse(user).unwrap()),
                    agent_id: None,
                    messages: vec![NewMessage {
                        role: MessageRole::User,
                        name: None,
                        content: format!("said by {user:?}"),
                        memory_key: None,
                        sent_at: chrono::Utc::now(),
                    }],
                },
                None,
                None,
            )
            .await
            .unwrap();
    }
    for requested in [Some("ana"), None] {
        let (page, _) = storage
            .session_messages(&anas, "s-1", requested, None, 10)
            .await
            .unwrap();
        assert_eq!(
            page.iter()
                .map(|message| message.content.as_str())
                .collect::<Vec<_>>(),
            ["said by Some(\"ana\")"]
        );
    }
    let (bens, _) = storage
        .session_messages(&anas, "s-1", Some("ben"), None, 10)
        .await
        .unwrap();
    assert!(
        bens.is_empty(),
        "ben's history does not exist for ana: {bens:?}"
    );

    // Session state: ana's namespace only; writes elsewhere are refused and change nothing.
    let write = |value: &str| StateWrite {
        value: serde_json::json!(value),
        expected: None,
        create_only: false,
        agent_id: None,
    };
    storage
        .put_session_state(&whole, "s-1", Some("ben"), "draft", write("ben's"))
        .await
        .unwrap()
        .unwrap();
    storage
        .put_session_state(&whole, "s-1", None, "draft", write("shared"))
        .await
        .unwrap()
        .unwrap();
    storage
        .put_session_state(&anas, "s-1", None, "draft", write("ana's"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        storage
            .session_state(&anas, "s-1", None, "draft")
            .await
            .unwrap()
            .map(|entry| entry.value),
        Some(serde_json::json!("ana's")),
        "an end-user's unnamed namespace is its own"
    );
    assert!(
        storage
            .session_state(&anas, "s-1", Some("ben"), "draft")
            .await
            .unwrap()
            .is_none()
    );
    assert!(matches!(
        storage
            .put_session_state(&anas, "s-1", Some("ben"), "draft", write("overwritten"))
            .await,
        Err(StorageError::NotFound(
            engram_core::NotFoundKind::SessionState
        ))
    ));
    assert!(matches!(
        storage
            .delete_session_state(&anas, "s-1", Some("ben"), "draft", None)
            .await,
        Ok(Ok(None))
    ));
    for (namespace, value) in [(Some("ben"), "ben's"), (None, "shared")] {
        assert_eq!(
            storage
                .session_state(&whole, "s-1", namespace, "draft")
                .await
                .unwrap()
                .map(|entry| entry.value),
            Some(serde_json::json!(value)),
            "the refused write and delete left {namespace:?} alone"
        );
    }
    assert_eq!(
        storage
            .session_state_entries(&anas, "s-1", Some("ben"))
            .await
            .unwrap(),
        Vec::new()
    );

    // Feedback on one recall: only ana's.
    let recall_id = uuid::Uuid::now_v7();
    for user in ["ana", "ben"] {
        storage
            .record_feedback(
                &scope,
                NewFeedback {
                    memory_id: None,
                    recall_id: Some(recall_id),
                    user_id: Some(user.to_string()),
                    rating: "relevant".to_string(),
                    text: None,
                    credential: "key:k".to_string(),
                    correction: None,
                    agent_id: None,
                },
            )
            .await
            .unwrap();
    }
    let feedback = storage.feedback_on_recall(&anas, recall_id).await.unwrap();
    assert_eq!(
        feedback
            .iter()
            .map(|record| record.user_id.as_deref())
            .collect::<Vec<_>>(),
        [Some("ana")]
    );
    assert_eq!(
        storage
            .feedback_on_recall(&whole, recall_id)
            .await
            .unwrap()
            .len(),
        2
    );
}
on_both_databases!(an_end_user_scope_reaches_only_its_end_users_data);

/// What is wrong between the migrated schema and the registry of subject data: a table no
/// store names and no reason excuses, a store naming a missing table or column, a table both
/// registered and excused.
async fn registry_problems(storage: &Storage) -> Vec<String> {
    use engram_storage::subject_data::{SubjectStore, TABLES_WITHOUT_SUBJECT_DATA};
    use std::collections::BTreeSet;
    let schema = engram_storage::MaintenanceStore::new(storage.clone());
    let tables: BTreeSet<String> = schema.table_names().await.unwrap().into_iter().collect();
    assert!(tables.contains("memories"), "{tables:?}");
    let mut problems = Vec::new();
    let mut classified = BTreeSet::new();
    for store in SubjectStore::ALL {
        let declaration = store.declaration();
        if declaration.how.is_empty() {
            problems.push(format!("store {} does not say how", declaration.name));
        }
        for table in declaration.tables {
            if !tables.contains(table.table) {
                problems.push(format!(
                    "store {} names {}, which is not a table of the schema",
                    declaration.name, table.table
                ));
                continue;
            }
            let columns = schema.column_names(table.table).await.unwrap();
            if table.subject_columns.is_empty() {
                problems.push(format!(
                    "store {} declares no subject column of {}",
                    declaration.name, table.table
                ));
            }
            for column in table.subject_columns {
                if !columns.iter().any(|name| name == column) {
                    problems.push(format!(
                        "store {} names {}.{column}, which is not a column ({columns:?})",
                        declaration.name, table.table
                    ));
                }
            }
            classified.insert(table.table.to_string());
        }
    }
    for (table, reason) in TABLES_WITHOUT_SUBJECT_DATA {
        if reason.is_empty() {
            problems.push(format!("{table} is excused without a reason"));
        }
        if !tables.contains(*table) {
            problems.push(format!(
                "{table} is listed as holding no subject data but is not a table"
            ));
        }
        if !classified.insert(table.to_string()) {
            problems.push(format!(
                "{table} is both registered and listed as holding no subject data"
            ));
        }
    }
    for table in tables.difference(&classified) {
        problems.push(format!(
            "table {table} is not classified in engram_storage::subject_data: register it as \
             a store of subject data, or list it in TABLES_WITHOUT_SUBJECT_DATA with a reason"
        ));
    }
    problems
}

/// Every table of the migrated schema is classified in the registry of subject data, and
/// the registry names at least the stores a receipt must list.
async fn every_table_is_classified_in_the_registry_of_subject_data(storage: Storage) {
    use engram_storage::subject_data::SubjectStore;
    let problems = registry_problems(&storage).await;
    assert!(problems.is_empty(), "{problems:#?}");
    let names: Vec<&str> = SubjectStore::ALL
        .iter()
        .map(|store| store.declaration().name)
        .collect();
    for required in [
        "memories",
        "history",
        "messages",
        "session_state",
        "feedback",
        "recall_events",
        "idempotency",
        "index",
        "files",
        "evaluation_cases",
        "evaluation_runs",
        "task_results",
        "usage",
    ] {
        assert!(names.contains(&required), "{required} is not registered");
    }
}
on_both_databases!(every_table_is_classified_in_the_registry_of_subject_data);

/// A table added without classifying it is named by the registry check.
#[tokio::test]
async fn a_new_table_fails_the_registry_check_until_it_is_classified() {
    use engram_migrations::sea_orm::{ConnectionTrait, Database};
    let directory = tempfile::tempdir().unwrap();
    let url = format!(
        "sqlite://{}?mode=rwc",
        directory.path().join("test.db").display()
    );
    let storage = Storage::connect(&url).await.unwrap();
    assert_eq!(registry_problems(&storage).await, Vec::<String>::new());
    Database::connect(&url)
        .await
        .unwrap()
        .execute_unprepared("CREATE TABLE reminders (id TEXT PRIMARY KEY, user_id TEXT, body TEXT)")
        .await
        .unwrap();
    let problems = registry_problems(&storage).await;
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(
        problems[0].contains("table reminders is not classified"),
        "{problems:#?}"
    );
}

/// Nothing strands: a worker ready to claim the moment a task commits always finds the
/// evaluation run its task names. The task used to be committed before its run, so a claim
/// in between failed it ("evaluation run … does not exist") and the run stayed queued; a
/// suite waiting on that run hung. Twenty runs are queued while a claimer spins beside them.
async fn an_evaluation_run_exists_when_its_task_can_be_claimed(storage: Storage) {
    use engram_core::recall::EvalTrigger;
    use engram_storage::recall_quality::NewEvalSet;
    let (scope, _) = project(&storage, None).await;
    let set = storage
        .create_eval_set(
            &scope,
            NewEvalSet {
                name: "race".to_string(),
                k: 10,
                regression_threshold: 0.05,
                schedule_interval_secs: None,
                profile: None,
            },
            Vec::new(),
        )
        .await
        .unwrap();
    const RUNS: usize = 20;
    let worker = engram_storage::MaintenanceStore::new(storage.clone());
    let claimer = {
        let storage = storage.clone();
        tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + engram_tests::patience();
            let mut claimed = Vec::new();
            while claimed.len() < RUNS {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "waited for {RUNS} evaluation tasks to be claimable; claimed {}",
                    claimed.len()
                );
                let Some(task) = worker
                    .claim_next_task(
                        &[engram_core::TaskKind::EvaluationRun],
                        std::time::Duration::from_secs(600),
                    )
                    .await
                    .unwrap()
                else {
                    tokio::task::yield_now().await;
                    continue;
                };
                let run_id: uuid::Uuid = task.subject.as_deref().unwrap().parse().unwrap();
                // Looked up at once, as the runner does.
                let run = storage.eval_run(&task.scope, run_id).await.unwrap();
                claimed.push((run_id, run.is_some()));
            }
            claimed
        })
    };
    for _ in 0..RUNS {
        storage
            .queue_eval_run(
                &scope,
                set.id,
                "default",
                None,
                EvalTrigger::Manual,
                engram_core::TaskKind::EvaluationRun,
                None,
            )
            .await
            .unwrap();
    }
    let claimed = claimer.await.unwrap();
    let missing: Vec<_> = claimed.iter().filter(|(_, found)| !found).collect();
    assert!(
        missing.is_empty(),
        "{} of {RUNS} claimed tasks named a run not yet stored: {missing:?}",
        missing.len()
    );
}
on_both_databases!(an_evaluation_run_exists_when_its_task_can_be_claimed);

/// Idempotency answers are found by index, never by reading every body: each answer lists
/// its memories and their end-users, so erasing one end-user beside 300 answers of another
/// blanks exactly the one answer naming them (and drops the index rows holding their id);
/// a retry of it writes nothing, the others still replay. Answers stored before a cutoff are
/// purged with their index rows, after which a retry writes anew.
async fn idempotency_answers_are_found_by_index_and_expire(storage: Storage) {
    let (scope, _) = project(&storage, None).await;
    let stored_under = |key: String, user: &'static str| {
        let storage = storage.clone();
        async move {
            storage
                .insert_memories(
                    &scope,
                    vec![draft(&format!("{user} said something"), Some(user), None)],
                    &system_actor(),
                    Some(IdempotencyClaim {
                        key,
                        request_fingerprint: "same".to_string(),
                    }),
                    render,
                )
                .await
                .unwrap()
        }
    };
    for n in 0..300 {
        assert!(matches!(
            stored_under(format!("ben-{n}"), "ben").await,
            InsertOutcome::Inserted { .. }
        ));
    }
    assert!(matches!(
        stored_under("ana-1".to_string(), "ana").await,
        InsertOutcome::Inserted { .. }
    ));
    assert_eq!(
        storage
            .count_idempotency_records_naming_subject(&scope, "ana")
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        storage
            .erase_subject_idempotency_records(&scope, "ana")
            .await
            .unwrap(),
        1,
        "exactly ana's answer is blanked"
    );
    assert_eq!(
        storage
            .count_idempotency_records_naming_subject(&scope, "ana")
            .await
            .unwrap(),
        0
    );
    assert!(matches!(
        stored_under("ana-1".to_string(), "ana").await,
        InsertOutcome::AnswerErased
    ));
    assert!(matches!(
        stored_under("ben-7".to_string(), "ben").await,
        InsertOutcome::Replayed { .. }
    ));
    assert_eq!(
        storage
            .count_idempotency_records_naming_subject(&scope, "ben")
            .await
            .unwrap(),
        300
    );
    let purged = engram_storage::MaintenanceStore::new(storage.clone())
        .purge_idempotency_answers_stored_before(chrono::Utc::now() + chrono::Duration::seconds(1))
        .await
        .unwrap();
    assert_eq!(purged, 301, "every answer was stored before the cutoff");
    assert_eq!(
        storage
            .count_idempotency_records_naming_subject(&scope, "ben")
            .await
            .unwrap(),
        0,
        "their index rows went with them"
    );
    assert!(matches!(
        stored_under("ben-7".to_string(), "ben").await,
        InsertOutcome::Inserted { .. }
    ));
}
on_both_databases!(idempotency_answers_are_found_by_index_and_expire);

/// Answers stored before the index existed are listed from their bodies when storage opens:
/// a delete then blanks them like any other.
#[tokio::test]
async fn answers_stored_before_the_index_are_indexed_when_storage_opens() {
    use sqlx::Connection;
    let (storage, directory) = sqlite_storage().await;
    let (scope, _) = project(&storage, None).await;
    // The API's shape of an answer: memories with their ids and end-users.
    let api_answer = |memories: &[engram_core::Memory]| {
        let listed: Vec<serde_json::Value> = memories
            .iter()
            .map(|memory| serde_json::json!({"id": memory.id.to_string(), "user_id": "ana", "content": memory.content}))
            .collect();
        (201, serde_json::json!({"memories": listed}).to_string())
    };
    let InsertOutcome::Inserted { memories, .. } = storage
        .insert_memories(
            &scope,
            vec![draft("An old answer", Some("ana"), None)],
            &system_actor(),
            Some(IdempotencyClaim {
                key: "old".to_string(),
                request_fingerprint: "same".to_string(),
            }),
            api_answer,
        )
        .await
        .unwrap()
    else {
        panic!("stored")
    };
    drop(storage);
    // As a database from before the index holds it: no index rows, not marked indexed.
    let path = directory.path().join("test.db");
    let mut raw = sqlx::SqliteConnection::connect(&format!("sqlite://{}?mode=rw", path.display()))
        .await
        .unwrap();
    sqlx::query("DELETE FROM idempotency_answer_memories")
        .execute(&mut raw)
        .await
        .unwrap();
    sqlx::query("UPDATE idempotency_records SET indexed = 0")
        .execute(&mut raw)
        .await
        .unwrap();
    raw.close().await.unwrap();
    let storage = Storage::connect(&format!("sqlite://{}?mode=rwc", path.display()))
        .await
        .unwrap();
    assert_eq!(
        storage
            .count_idempotency_records_naming_subject(&scope, "ana")
            .await
            .unwrap(),
        1,
        "the old answer is indexed by its end-user"
    );
    storage
        .delete_memory_with_reason(&scope, memories[0].id, None, &system_actor())
        .await
        .unwrap();
    assert!(matches!(
        storage
            .insert_memories(
                &scope,
                vec![draft("An old answer", Some("ana"), None)],
                &system_actor(),
                Some(IdempotencyClaim {
                    key: "old".to_string(),
                    request_fingerprint: "same".to_string(),
                }),
                api_answer,
            )
            .await
            .unwrap(),
        InsertOutcome::AnswerErased
    ));
}

/// Search's neighbours: positions follow the write order of one end-user's session, skip
/// deleted memories, and never count another end-user's turns under the same session id or
/// another project's memories.
async fn session_positions_follow_write_order_within_one_session(storage: Storage) {
    let (scope, _) = project(&storage, None).await;
    let (other_scope, _) = project(&storage, None).await;
    let in_session_of = |user: &str, content: &str, session: &str| {
        let mut memory = draft(content, Some(user), None);
        memory.memory.session_id = Some(ExternalId::parse(session).unwrap());
        memory
    };
    let in_session = |content: &str, session: &str| in_session_of("u1", content, session);
    let mut written = Vec::new();
    for (content, session) in [
        ("first turn", "s1"),
        ("second turn", "s1"),
        ("a turn later deleted", "s1"),
        ("fourth turn", "s1"),
        ("another session's only turn", "s2"),
        ("fifth turn", "s1"),
    ] {
        // One write at a time, as turns arrive, so write order is certain.
        written.extend(insert(&storage, &scope, vec![in_session(content, session)]).await);
        // Another project's memory of a session with the same name, between every write,
        // and another end-user's under the same session id.
        insert(
            &storage,
            &other_scope,
            vec![in_session("elsewhere", session)],
        )
        .await;
        insert(
            &storage,
            &scope,
            vec![in_session_of("u2", "someone else's turn", session)],
        )
        .await;
    }
    let (first, deleted, fourth, lone, fifth) = (
        written[0].id,
        written[2].id,
        written[3].id,
        written[4].id,
        written[5].id,
    );
    storage
        .delete_memory(&scope, deleted, &system_actor())
        .await
        .unwrap();
    let memory_scope = engram_core::MemoryScope::project_wide(scope);
    let member = |id, session| engram_storage::recall::SessionMember {
        id,
        end_user: Some("u1"),
        session,
    };
    let positions = storage
        .session_positions(
            &memory_scope,
            &[
                member(first, "s1"),
                member(fourth, "s1"),
                member(fifth, "s1"),
                member(lone, "s2"),
            ],
            false,
        )
        .await
        .unwrap();
    assert_eq!(positions.get(&first), Some(&0));
    // The second turn is between; the deleted one no longer is.
    assert_eq!(positions.get(&fourth), Some(&2));
    assert_eq!(positions.get(&fifth), Some(&3));
    assert_eq!(
        positions.get(&lone),
        None,
        "alone in its session: no neighbour"
    );
    assert_eq!(positions.len(), 3);
}
on_both_databases!(session_positions_follow_write_order_within_one_session);

/// What the memory limits read: a subject's live and locked memories, and the order each
/// eviction policy takes them in (recalls and ratings counted on both databases).
async fn memory_limits_count_and_rank_a_subjects_memories(storage: Storage) {
    use engram_core::memory_limits::{LimitedSubject, MemoryLimitPolicy};
    let (scope, _) = project(&storage, None).await;
    let stored = insert(
        &storage,
        &scope,
        ["oldest", "recalled", "rated", "idle", "newest"]
            .iter()
            .map(|content| draft(content, Some("eve"), None))
            .collect(),
    )
    .await;
    insert(
        &storage,
        &scope,
        vec![draft("not eve's", Some("fay"), None)],
    )
    .await;
    let eve = LimitedSubject::EndUser("eve".to_string());
    let now = chrono::Utc::now();
    storage
        .insert_memory_uses(
            &scope,
            &[engram_core::runs::NewMemoryUse {
                memory: engram_core::runs::MemoryAtVersion {
                    memory_id: stored[1].id,
                    version: 1,
                },
                kind: engram_core::runs::MemoryUseKind::Returned,
                used_at: now,
                recall_id: None,
                run_id: None,
                user_id: Some("eve".to_string()),
            }],
        )
        .await
        .unwrap();
    storage
        .record_feedback(
            &scope,
            engram_storage::feedback::NewFeedback {
                memory_id: Some(stored[2].id),
                recall_id: None,
                user_id: Some("eve".to_string()),
                rating: "relevant".to_string(),
                text: None,
                credential: "key:test".to_string(),
                correction: None,
                agent_id: None,
            },
        )
        .await
        .unwrap();
    let count = storage.subject_memory_count(&scope, &eve).await.unwrap();
    assert_eq!((count.live, count.locked), (5, 0));

    let oldest = storage
        .eviction_candidates(
            &scope,
            &eve,
            MemoryLimitPolicy::EvictOldest,
            &[stored[0].id],
            2,
            now,
        )
        .await
        .unwrap();
    assert_eq!(
        oldest,
        vec![stored[1].id, stored[2].id],
        "oldest first, kept ones skipped"
    );
    let least_important = storage
        .eviction_candidates(
            &scope,
            &eve,
            MemoryLimitPolicy::EvictLeastImportant,
            &[],
            3,
            now,
        )
        .await
        .unwrap();
    assert_eq!(
        least_important,
        vec![stored[0].id, stored[3].id, stored[4].id],
        "neither recalled nor rated go first, the oldest of equals before the newer"
    );
    assert!(
        storage
            .replaces_keyed_memory(&scope, Some("eve"), None, "no-such-key")
            .await
            .is_ok_and(|replaces| !replaces)
    );
}
on_both_databases!(memory_limits_count_and_rank_a_subjects_memories);

/// A project with memories moving to another embedding: it switches only once every
/// searchable memory has a fresh vector (writes and edits during the move need theirs), at
/// once, with the staged vectors gone; a write embedded before the switch is refused after
/// it; an abandoned move leaves the project as it was.
async fn a_move_to_another_embedding_switches_at_once_and_refuses_late_writes(storage: Storage) {
    use engram_core::governance::EmbeddingChange;
    use engram_core::{MemoryScope, ProjectEmbedding, TaskKind};
    use engram_storage::reembedding::{StagedVector, SwitchOutcome};
    let (scope, _) = project(&storage, None).await;
    let actor = system_actor();
    let first = insert(&storage, &scope, vec![draft("tea", Some("ana"), None)]).await;
    let second = insert(&storage, &scope, vec![draft("radios", Some("ana"), None)]).await;
    let (first, second) = (first[0].clone(), second[0].clone());

    let to = ProjectEmbedding::LocalMultilingual;
    let task = storage
        .start_embedding_change(&scope, to, None, &actor)
        .await
        .unwrap();
    assert_eq!(task.kind, TaskKind::Reembedding);
    assert_eq!(task.progress_total, 2);
    let another = storage
        .start_embedding_change(&scope, ProjectEmbedding::Local, None, &actor)
        .await;
    assert!(
        matches!(another, Err(StorageError::EmbeddingChangeUnderWay(_))),
        "{another:?}"
    );
    let settings = storage.project_settings(&scope).await.unwrap();
    assert_eq!(settings.embedding, ProjectEmbedding::Deployment);
    assert_eq!(
        settings.embedding_change,
        Some(EmbeddingChange {
            to,
            task_id: task.id
        })
    );

    let stage = |memory: &engram_core::Memory, component: f32| StagedVector {
        memory_id: memory.id,
        content_hash: engram_core::memory::content_digest(&memory.content),
        vector: vec![component, 0.0, 0.0],
    };
    let to_embed = storage
        .memories_to_reembed(&scope, "new-model", None, 10)
        .await
        .unwrap();
    assert_eq!(to_embed.len(), 2);
    storage
        .stage_reembeddings(&scope, task.id, "new-model", &[stage(&first, 0.5)])
        .await
        .unwrap();
    let to_embed = storage
        .memories_to_reembed(&scope, "new-model", None, 10)
        .await
        .unwrap();
    assert_eq!(
        to_embed
            .iter()
            .map(|source| source.memory_id)
            .collect::<Vec<_>>(),
        vec![second.id]
    );
    let switch = || storage.switch_embedding(&scope, task.id, to, "new-model", &actor);
    assert_eq!(
        switch().await.unwrap(),
        SwitchOutcome::Behind { memories: 1 }
    );
    storage
        .stage_reembeddings(&scope, task.id, "new-model", &[stage(&second, 0.25)])
        .await
        .unwrap();
    // A write during the move (embedded in the space in use) needs its vector too.
    let third = insert(&storage, &scope, vec![draft("clocks", Some("ana"), None)]).await;
    assert_eq!(
        switch().await.unwrap(),
        SwitchOutcome::Behind { memories: 1 }
    );
    storage
        .stage_reembeddings(&scope, task.id, "new-model", &[stage(&third[0], 0.75)])
        .await
        .unwrap();
    // A deleted memory takes its staged vector with it.
    storage
        .delete_memory(&scope, second.id, &actor)
        .await
        .unwrap();
    assert_eq!(storage.count_staged_reembeddings(&scope).await.unwrap(), 2);

    assert_eq!(
        switch().await.unwrap(),
        SwitchOutcome::Switched { memories: 2 }
    );
    let settings = storage.project_settings(&scope).await.unwrap();
    assert_eq!(settings.embedding, to);
    assert_eq!(settings.embedding_generation, 1);
    assert_eq!(settings.embedding_change, None);
    assert_eq!(storage.count_staged_reembeddings(&scope).await.unwrap(), 0);
    let moved = storage
        .get_memory(&MemoryScope::project_wide(scope), first.id)
        .await
        .unwrap();
    assert_eq!(moved.embedding_model, "new-model");
    let rows = storage.indexing_rows(&scope, &[first.id]).await.unwrap();
    assert_eq!(rows[&first.id].vector, vec![0.5, 0.0, 0.0]);

    // Embedded in the old space, a write arriving after the switch is refused.
    let late = storage
        .insert_memories(
            &scope,
            vec![draft("late", Some("ana"), None)],
            &actor,
            None,
            render,
        )
        .await;
    assert!(
        matches!(late, Err(StorageError::EmbeddingSpaceChanged)),
        "{:?}",
        late.err()
    );
    let late_edit = storage
        .update_memory(
            &scope,
            first.id,
            MemoryPatch {
                content: Some(("tea and cake".to_string(), vec![1.0, 0.0, 0.0])),
                ..Default::default()
            },
            None,
            &actor,
        )
        .await;
    assert!(
        matches!(late_edit, Err(StorageError::EmbeddingSpaceChanged)),
        "{:?}",
        late_edit.err()
    );
    let mut current = draft("on time", Some("ana"), None);
    current.embedding_generation = 1;
    insert(&storage, &scope, vec![current]).await;

    // Abandoned, a move leaves the project where it was and its staged vectors go.
    let task = storage
        .start_embedding_change(&scope, ProjectEmbedding::Local, None, &actor)
        .await
        .unwrap();
    storage
        .stage_reembeddings(&scope, task.id, "minilm", &[stage(&first, 0.1)])
        .await
        .unwrap();
    assert!(
        storage
            .abandon_embedding_change(&scope, task.id, "cancelled", &actor)
            .await
            .unwrap()
    );
    assert_eq!(storage.count_staged_reembeddings(&scope).await.unwrap(), 0);
    let late_stage = storage
        .stage_reembeddings(&scope, task.id, "minilm", &[stage(&first, 0.1)])
        .await;
    assert!(
        matches!(late_stage, Err(StorageError::Refused(_))),
        "{late_stage:?}"
    );
    assert_eq!(storage.count_staged_reembeddings(&scope).await.unwrap(), 0);
    let settings = storage.project_settings(&scope).await.unwrap();
    assert_eq!((settings.embedding, settings.embedding_change), (to, None));
    assert_eq!(
        storage
            .switch_embedding(&scope, task.id, ProjectEmbedding::Local, "minilm", &actor)
            .await
            .unwrap(),
        SwitchOutcome::NoLongerWanted
    );
}

on_both_databases!(a_move_to_another_embedding_switches_at_once_and_refuses_late_writes);

/// A console account keeps the language it chose; another organization's caller cannot set
/// it (the account is not found there), and clearing it leaves the choice to the browser.
async fn a_console_account_keeps_its_language_within_its_organization(storage: Storage) {
    use engram_core::{ConsoleLanguage, ConsoleRole};
    let (home, _) = project(&storage, None).await;
    let (elsewhere, _) = project(&storage, None).await;
    let account = storage
        .create_console_account(
            home.organization_id(),
            "linguist@example.com",
            "not-a-real-hash",
            ConsoleRole::Analyst,
        )
        .await
        .unwrap();
    let language = |storage: Storage| async move {
        storage
            .console_account(account)
            .await
            .unwrap()
            .expect("the account exists")
            .language
    };
    assert_eq!(language(storage.clone()).await, None);
    storage
        .set_console_account_language(
            home.organization_id(),
            account,
            Some(ConsoleLanguage::Chinese),
        )
        .await
        .unwrap();
    assert_eq!(
        language(storage.clone()).await,
        Some(ConsoleLanguage::Chinese)
    );
    let foreign = storage
        .set_console_account_language(
            elsewhere.organization_id(),
            account,
            Some(ConsoleLanguage::English),
        )
        .await;
    assert!(
        matches!(foreign, Err(StorageError::NotFound(_))),
        "{foreign:?}"
    );
    assert_eq!(
        language(storage.clone()).await,
        Some(ConsoleLanguage::Chinese),
        "nothing changed"
    );
    storage
        .set_console_account_language(home.organization_id(), account, None)
        .await
        .unwrap();
    assert_eq!(language(storage.clone()).await, None);
}
on_both_databases!(a_console_account_keeps_its_language_within_its_organization);

/// A search reads its candidates as they were stored, whichever way it reads them. On SQLite
/// a search's read of a few candidates runs on the caller's thread through a connection of
/// its own and decodes rows by hand, and a larger read goes through the pool: both must give
/// back exactly what the plain read of each memory does, and only the active ones.
async fn search_candidates_read_as_stored(storage: Storage) {
    let (scope, _) = project(&storage, None).await;
    let whole = engram_core::MemoryScope::project_wide(scope);
    let now = chrono::Utc::now();
    let mut varied = draft(
        "Ana drinks 绿茶 at 08:00 — \"always\", never ☕",
        Some("ana"),
        Some("morning-tea"),
    );
    varied.memory.agent_id = Some(ExternalId::parse("planner").unwrap());
    varied.memory.session_id = Some(ExternalId::parse("s-1").unwrap());
    varied.memory.kind = MemoryKind::Procedural;
    varied.memory.metadata = serde_json::json!({
        "always": true,
        "nested": {"list": [1, 2.5, null, "x"], "empty": {}},
        "ünïcode": "値"
    })
    .as_object()
    .unwrap()
    .clone();
    varied.memory.categories = vec!["food".to_string(), "habits".to_string()];
    varied.memory.confidence = 0.123_456_789_012_345_6;
    varied.memory.expires_at = Some(now + chrono::Duration::days(30));
    varied.memory.occurred_at = Some(now - chrono::Duration::days(400));
    varied.memory.visibility = Some(engram_core::Visibility::Private);
    varied.embedding = (0..384).map(|index| (index as f32).sin() / 3.0).collect();
    let mut team_shared = draft("The team's standup is at ten", None, None);
    team_shared.memory.shared_with = Some(ExternalId::parse("ops").unwrap());
    team_shared.memory.categories = Vec::new();
    let stored = insert(
        &storage,
        &scope,
        vec![
            varied,
            team_shared,
            draft("Ben's old address", Some("ben"), None),
            draft("to be deleted", None, None),
        ],
    )
    .await;
    let mut replacing = draft("Ben's new address", Some("ben"), None);
    replacing.supersedes = Some(stored[2].id);
    let replacement = insert(&storage, &scope, vec![replacing]).await.remove(0);
    storage
        .set_memory_verification(&scope, stored[0].id, true, None, "checked", &system_actor())
        .await
        .unwrap();
    storage
        .delete_memory(&scope, stored[3].id, &system_actor())
        .await
        .unwrap();

    let asked: Vec<_> = stored
        .iter()
        .map(|memory| memory.id)
        .chain([replacement.id])
        .collect();
    let reads_before = storage.candidate_reads();
    let few = storage
        .active_memories_with_embeddings(&whole, &asked)
        .await
        .unwrap();
    let mut found: Vec<_> = few.keys().copied().collect();
    found.sort();
    let mut active = vec![stored[0].id, stored[1].id, replacement.id];
    active.sort();
    assert_eq!(
        found, active,
        "the active ones, not the superseded or deleted"
    );
    for (id, candidate) in &few {
        let plain = storage.get_memory(&whole, *id).await.unwrap();
        assert_eq!(
            candidate.memory, plain,
            "read as a candidate as it reads alone"
        );
    }
    assert!(few[&stored[0].id].memory.verified_at.is_some());
    assert_eq!(
        few[&stored[0].id].embedding,
        (0..384)
            .map(|index| (index as f32).sin() / 3.0)
            .collect::<Vec<f32>>()
    );
    assert_eq!(few[&stored[1].id].embedding, vec![0.25, -0.5, 1.0]);

    // A key bound to the planner agent (and no team): its own memory and those shared with
    // every agent, not the one shared with the ops team.
    let planners = whole.clone().bound_to_agents(Some(
        engram_core::AgentRestriction::new([ExternalId::parse("planner").unwrap()]).unwrap(),
    ));
    let for_planner = storage
        .active_memories_with_embeddings(&planners, &asked)
        .await
        .unwrap();
    let mut seen_by_planner: Vec<_> = for_planner.keys().copied().collect();
    seen_by_planner.sort();
    let mut expected = vec![stored[0].id, replacement.id];
    expected.sort();
    assert_eq!(seen_by_planner, expected);
    for (id, candidate) in &for_planner {
        assert_eq!(candidate.memory, few[id].memory);
    }

    // Among hundreds of ids asked for (a filtered search reads up to 500 from each half),
    // the same answer.
    let many: Vec<_> = asked
        .iter()
        .copied()
        .chain((0..400).map(|_| engram_core::MemoryId::generate()))
        .collect();
    let from_many = storage
        .active_memories_with_embeddings(&whole, &many)
        .await
        .unwrap();
    assert_eq!(from_many.len(), few.len());
    for (id, candidate) in &few {
        assert_eq!(from_many[id].memory, candidate.memory);
        assert_eq!(from_many[id].embedding, candidate.embedding);
    }

    // Which way each read went: on SQLite the two small ones on the caller's thread (none
    // fell back), on PostgreSQL every one through the pool.
    let reads = reads_since(&storage, reads_before);
    match storage.backend_name() {
        "sqlite" => assert_eq!((reads.caller_thread, reads.pool), (2, 1), "{reads:?}"),
        _ => assert_eq!((reads.caller_thread, reads.pool), (0, 3), "{reads:?}"),
    }
}

/// How `storage` read candidates since `before`.
fn reads_since(
    storage: &Storage,
    before: engram_storage::recall::CandidateReads,
) -> engram_storage::recall::CandidateReads {
    let now = storage.candidate_reads();
    engram_storage::recall::CandidateReads {
        caller_thread: now.caller_thread - before.caller_thread,
        pool: now.pool - before.pool,
        caller_thread_opens: now.caller_thread_opens - before.caller_thread_opens,
    }
}
on_both_databases!(search_candidates_read_as_stored);

/// An erasure raises its project's query-cache epoch and is told the epoch its own raise
/// wrote, whatever other erasures raise at the same moment; another project's stays put.
async fn each_raise_of_the_query_cache_epoch_reports_its_own(storage: Storage) {
    let (scope, _) = project(&storage, None).await;
    let (other, _) = project(&storage, None).await;
    let before = storage.query_cache_epoch(&scope).await.unwrap();
    let mut raises = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let storage = storage.clone();
        raises.spawn(async move { storage.raise_query_cache_epoch(&scope).await.unwrap() });
    }
    let mut reported: Vec<i64> = raises.join_all().await;
    reported.sort_unstable();
    let expected: Vec<i64> = (before + 1..=before + 8).collect();
    assert_eq!(reported, expected, "eight raises, eight distinct epochs");
    assert_eq!(storage.query_cache_epoch(&scope).await.unwrap(), before + 8);
    assert_eq!(
        storage.query_cache_epoch(&other).await.unwrap(),
        0,
        "another project's epoch is its own"
    );
}
on_both_databases!(each_raise_of_the_query_cache_epoch_reports_its_own);

/// Only a plain file is read beside the pool: a URL that opens the database through another
/// VFS (here one that takes no locks) gets no second connection, however it spells the option,
/// since that connection would lock the file in a way the pool's do not expect.
#[tokio::test]
async fn a_database_behind_another_vfs_is_read_through_the_pool() {
    let directory = tempfile::tempdir().unwrap();
    // `%76` is `v`: sqlx decodes the option's name, so this is `vfs=unix-none`.
    let url = format!(
        "sqlite://{}?mode=rwc&%76fs=unix-none",
        directory.path().join("test.db").display()
    );
    let storage = Storage::connect(&url).await.unwrap();
    let (scope, _) = project(&storage, None).await;
    let stored = insert(&storage, &scope, vec![draft("no locks", Some("ana"), None)]).await;
    let before = storage.candidate_reads();
    let read = storage
        .active_memories_with_embeddings(
            &engram_core::MemoryScope::project_wide(scope),
            &[stored[0].id],
        )
        .await
        .unwrap();
    assert_eq!(read[&stored[0].id].memory.content, "no locks");
    let reads = reads_since(&storage, before);
    assert_eq!(
        (reads.caller_thread, reads.pool),
        (0, 1),
        "read through the pool: {reads:?}"
    );
}

/// A search whose read beside the pool cannot open the database file still gets its answer:
/// the pool reads it (here the file was moved after the pool opened it, so no new connection
/// can open it by name). The next search does not try to open it again: a failed open rests.
#[tokio::test]
async fn a_search_reads_through_the_pool_when_the_file_cannot_be_opened_again() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("test.db");
    let storage = Storage::connect(&format!("sqlite://{}?mode=rwc", path.display()))
        .await
        .unwrap();
    let (scope, _) = project(&storage, None).await;
    let stored = insert(
        &storage,
        &scope,
        vec![draft("still here", Some("ana"), None)],
    )
    .await;
    std::fs::rename(&path, directory.path().join("moved.db")).unwrap();
    let whole = engram_core::MemoryScope::project_wide(scope);
    let before = storage.candidate_reads();
    for _ in 0..2 {
        let read = storage
            .active_memories_with_embeddings(&whole, &[stored[0].id])
            .await
            .unwrap();
        assert_eq!(read[&stored[0].id].memory.content, "still here");
    }
    let reads = reads_since(&storage, before);
    assert_eq!((reads.caller_thread, reads.pool), (0, 2), "{reads:?}");
    assert_eq!(
        reads.caller_thread_opens, 1,
        "one open tried, then none for a while: {reads:?}"
    );
}
