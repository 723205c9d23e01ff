//! The vector index contract, run against every backend: nearest-neighbour order, tenant
//! isolation, filters, stale-write protection, deletes and paging. qdrant-edge always runs (in a
//! temporary directory); a Qdrant server runs too when `QDRANT_URL` is set (gRPC, such as
//! `http://127.0.0.1:6334`), each test in a collection of its own that it drops at the end.
//! Below the contract: what only the embedded engine has (persistence, HNSW maintenance, crash).

use chrono::Utc;
use engram_core::{MemoryId, MemoryKind, OrganizationId, ProjectId, ProjectScope};
use engram_index::{
    EdgeIndexOptions, EdgeVectorIndex, FilterableFields, InMemoryKeywordScorer, IndexError,
    IndexedMemory, KeywordQuery, PayloadBound, QdrantClusterOptions, QdrantVectorIndex, VectorHit,
    VectorIndex, VectorQuery, payload_filter_for,
};
use std::sync::Arc;
use std::time::{Duration, Instant};

const DIMENSION: usize = 8;

fn new_scope() -> ProjectScope {
    ProjectScope::from_verified_credential(OrganizationId::generate(), ProjectId::generate())
}

/// A unit vector along `axis`.
fn axis_vector(axis: usize) -> Vec<f32> {
    let mut vector = vec![0.0; DIMENSION];
    vector[axis] = 1.0;
    vector
}

fn memory(memory_id: MemoryId, version: i64, vector: Vec<f32>) -> IndexedMemory {
    IndexedMemory {
        memory_id,
        version,
        vector,
        user_id: None,
        agent_id: None,
        session_id: None,
        kind: MemoryKind::Semantic,
        created_at: Utc::now(),
        text: String::new(),
        filterable: FilterableFields::default(),
    }
}

fn query(vector: Vec<f32>, limit: usize) -> VectorQuery {
    VectorQuery {
        vector,
        limit,
        user_id: None,
        agent_id: None,
        session_id: None,
        kinds: Vec::new(),
        filter: None,
    }
}

fn hit_ids(hits: &[VectorHit]) -> Vec<MemoryId> {
    hits.iter().map(|hit| hit.memory_id).collect()
}

/// `count` new memories (version 1) of [`pseudo_random_vectors`].
fn random_memories(count: usize, seed: u64) -> Vec<IndexedMemory> {
    pseudo_random_vectors(count, seed)
        .into_iter()
        .map(|vector| memory(MemoryId::generate(), 1, vector))
        .collect()
}

/// Deterministic pseudo-random vectors (an LCG), so the large test needs no extra crate.
fn pseudo_random_vectors(count: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut state = seed;
    (0..count)
        .map(|_| {
            (0..DIMENSION)
                .map(|_| {
                    state = state
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    ((state >> 33) as f32 / (1u64 << 31) as f32) * 2.0 - 1.0
                })
                .collect()
        })
        .collect()
}

fn open_index(directory: &tempfile::TempDir) -> EdgeVectorIndex {
    EdgeVectorIndex::open(directory.path(), DIMENSION).expect("open index")
}

/// Every point of `scope`, walked page by page with `points_page` (small pages on purpose).
async fn count_points(index: &dyn VectorIndex, scope: &ProjectScope) -> usize {
    let mut count = 0;
    let mut from = None;
    loop {
        let page = index.points_page(scope, from, 3).await.unwrap();
        count += page.points.len();
        match page.next {
            Some(next) => from = Some(next),
            None => return count,
        }
    }
}

/// Opens a fresh qdrant-edge index in a temporary directory that lives as long as the test.
async fn with_edge_index<F, Fut>(contract_test: F)
where
    F: FnOnce(Arc<dyn VectorIndex>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let directory = tempfile::tempdir().unwrap();
    let index: Arc<dyn VectorIndex> = Arc::new(open_index(&directory));
    contract_test(index).await;
}

/// The server at `url` (and `QDRANT_API_KEY`), with a collection prefix of this test's own.
fn remote_test_options(url: String) -> QdrantClusterOptions {
    QdrantClusterOptions {
        url,
        api_key: std::env::var("QDRANT_API_KEY").ok(),
        collection_prefix: format!("engram_test_{}", uuid::Uuid::now_v7().simple()),
        ..QdrantClusterOptions::default()
    }
}

/// Runs `contract_test` against the Qdrant server at `QDRANT_URL` in a collection of its own,
/// or says loudly that it did not.
async fn with_remote_index<F, Fut>(test_name: &str, contract_test: F)
where
    F: FnOnce(Arc<dyn VectorIndex>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let Ok(url) = std::env::var("QDRANT_URL") else {
        eprintln!(
            "SKIPPED remote Qdrant contract test `{test_name}`: QDRANT_URL is not set. \
             No Qdrant server runs in CI here; see \"Remote Qdrant\" in infra/README.md to run it."
        );
        return;
    };
    let options = remote_test_options(url);
    let remote = Arc::new(
        QdrantVectorIndex::connect(&options, "contract-model", DIMENSION)
            .await
            .expect("connect to the Qdrant server at QDRANT_URL"),
    );
    let index: Arc<dyn VectorIndex> = remote.clone();
    contract_test(index).await;
    remote.delete_collection().await.unwrap();
}

/// One test per backend for each contract test.
macro_rules! index_contract {
    ($($contract_test:ident),* $(,)?) => {
        mod on_qdrant_edge {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $contract_test() {
                    super::with_edge_index(super::$contract_test).await;
                }
            )*
        }
        mod on_qdrant_server {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $contract_test() {
                    super::with_remote_index(stringify!($contract_test), super::$contract_test).await;
                }
            )*
        }
    };
}

index_contract!(
    nearest_neighbour_comes_first_with_cosine_score,
    projects_never_see_or_remove_each_others_points,
    user_agent_session_and_kind_filters_narrow_the_search,
    a_stale_version_never_overwrites_a_newer_one,
    concurrent_upserts_of_one_memory_end_at_the_newest_version,
    delete_is_idempotent_and_deleted_points_are_not_returned,
    vectors_of_the_wrong_dimension_are_rejected,
    points_page_walks_one_project_in_id_order,
    keyword_search_stems_english_and_segments_chinese_and_japanese,
    keyword_statistics_and_results_stay_inside_the_project,
    payload_filters_apply_before_the_limit,
);

/// A filter tree the payload answers narrows the search before its limit: the one match
/// among many nearer points is returned at limit 1, in vector and keyword search alike.
async fn payload_filters_apply_before_the_limit(index: Arc<dyn VectorIndex>) {
    let scope = new_scope();
    let at = |day: u32| chrono::TimeZone::with_ymd_and_hms(&Utc, 2024, 7, day, 12, 0, 0).unwrap();
    let mut points = Vec::new();
    let mut rare = None;
    for number in 0..60u32 {
        let memory_id = MemoryId::generate();
        let is_rare = number == 41;
        if is_rare {
            rare = Some(memory_id);
        }
        let mut metadata = serde_json::Map::new();
        metadata.insert(
            "topic".into(),
            if is_rare { "tea" } else { "trains" }.into(),
        );
        metadata.insert(
            "n".into(),
            serde_json::json!(if is_rare { 2.5 } else { 1.0 }),
        );
        metadata.insert("shared".into(), serde_json::json!(is_rare));
        points.push(IndexedMemory {
            user_id: Some(if number % 2 == 0 { "ana" } else { "ben" }.to_string()),
            agent_id: (number % 3 == 0).then(|| "support".to_string()),
            text: format!("garden note {number}"),
            filterable: FilterableFields {
                visibility: None,
                shared_with: None,
                verified: None,
                source: Some(if is_rare {
                    engram_core::MemorySource::Manual
                } else {
                    engram_core::MemorySource::UserStated
                }),
                categories: if is_rare {
                    vec!["food".into(), "travel".into()]
                } else {
                    vec!["travel".into()]
                },
                confidence: Some(if is_rare { 0.9 } else { 0.4 }),
                updated_at: Some(at(1 + number % 20)),
                occurred_at: Some(if is_rare { at(25) } else { at(1 + number % 20) }),
                metadata,
            },
            // The rare point is the farthest from the probe.
            ..memory(
                memory_id,
                1,
                if is_rare {
                    axis_vector(7)
                } else {
                    axis_vector(0)
                },
            )
        });
    }
    let rare = rare.unwrap();
    index.upsert(&scope, points).await.unwrap();
    for tree in [
        serde_json::json!({"metadata": {"topic": "tea"}}),
        serde_json::json!({"metadata": {"n": 2.5}}),
        serde_json::json!({"metadata": {"shared": true}}),
        serde_json::json!({"categories": {"all": ["food", "travel"]}}),
        serde_json::json!({"source": {"ne": "user_stated"}}),
        serde_json::json!({"confidence": {"gt": 0.5}}),
        serde_json::json!({"occurred_at": {"gte": "2024-07-22"}}),
        serde_json::json!({"OR": [{"memory_ids": [rare.to_string()]}, {"user_id": "nobody"}]}),
        serde_json::json!({"NOT": {"OR": [{"metadata": {"topic": "trains"}}, {"agent_id": "*"}]}, "user_id": {"in": ["ben"]}}),
    ] {
        let filter = engram_core::memory_filter::parse_memory_filter(&tree, "filters").unwrap();
        let translation = payload_filter_for(&filter);
        assert!(translation.exact, "{tree}");
        let PayloadBound::Only(payload) = translation.bound else {
            panic!("{tree} narrows");
        };
        let vector_hits = index
            .search(
                &scope,
                VectorQuery {
                    filter: Some(payload.clone()),
                    ..query(axis_vector(0), 1)
                },
            )
            .await
            .unwrap();
        assert_eq!(hit_ids(&vector_hits), vec![rare], "vector search, {tree}");
        let keyword_hits = index
            .keyword_search(
                &scope,
                KeywordQuery {
                    filter: Some(payload),
                    ..keyword_query("garden note", 1)
                },
            )
            .await
            .unwrap();
        assert_eq!(hit_ids(&keyword_hits), vec![rare], "keyword search, {tree}");
    }
}

fn keyword_query(text: &str, limit: usize) -> KeywordQuery {
    KeywordQuery {
        text: text.to_string(),
        limit,
        user_id: None,
        agent_id: None,
        session_id: None,
        kinds: Vec::new(),
        only_ids: None,
        filter: None,
    }
}

fn with_text(memory_id: MemoryId, axis: usize, text: &str) -> IndexedMemory {
    IndexedMemory {
        text: text.to_string(),
        ..memory(memory_id, 1, axis_vector(axis % DIMENSION))
    }
}

async fn keyword_search_stems_english_and_segments_chinese_and_japanese(
    index: Arc<dyn VectorIndex>,
) {
    let scope = new_scope();
    let invoices = MemoryId::generate();
    let parcel = MemoryId::generate();
    let beijing_duck = MemoryId::generate();
    let tokyo_home = MemoryId::generate();
    index
        .upsert(
            &scope,
            vec![
                with_text(
                    invoices,
                    0,
                    "The quarterly invoices were reconciled by Dana",
                ),
                with_text(parcel, 1, "Ship the parcel to Lisbon on Friday"),
                with_text(beijing_duck, 2, "我最喜欢吃北京烤鸭"),
                with_text(tokyo_home, 3, "私は東京都に住んでいます"),
            ],
        )
        .await
        .unwrap();

    // Other inflections of the stored words match through the English stemmer.
    let hits = index
        .keyword_search(&scope, keyword_query("reconciling an invoice", 10))
        .await
        .unwrap();
    assert_eq!(hit_ids(&hits), vec![invoices], "{hits:?}");
    assert!(hits[0].score > 0.0);

    // A Chinese word inside an unsegmented sentence is found.
    let hits = index
        .keyword_search(&scope, keyword_query("北京", 10))
        .await
        .unwrap();
    assert_eq!(hit_ids(&hits), vec![beijing_duck], "{hits:?}");

    // So is a Japanese one (a query with kana is read as Japanese; kanji alone as Chinese).
    let hits = index
        .keyword_search(&scope, keyword_query("東京に住む", 10))
        .await
        .unwrap();
    assert_eq!(hit_ids(&hits), vec![tokyo_home], "{hits:?}");

    // Stop words alone match nothing, and neither does an absent word.
    for nothing in ["the to on", "helicopter"] {
        let hits = index
            .keyword_search(&scope, keyword_query(nothing, 10))
            .await
            .unwrap();
        assert!(hits.is_empty(), "{nothing:?} matched {hits:?}");
    }

    // A memory holding both query words comes before one holding only one of them.
    let second_friday = MemoryId::generate();
    index
        .upsert(
            &scope,
            vec![with_text(second_friday, 4, "Friday is the team lunch")],
        )
        .await
        .unwrap();
    let hits = index
        .keyword_search(&scope, keyword_query("parcel friday", 10))
        .await
        .unwrap();
    assert_eq!(hit_ids(&hits), vec![parcel, second_friday], "{hits:?}");
}

async fn keyword_statistics_and_results_stay_inside_the_project(index: Arc<dyn VectorIndex>) {
    let scope_a = new_scope();
    let scope_b = new_scope();
    let zebra_of_a = MemoryId::generate();
    let lion_of_a = MemoryId::generate();
    index
        .upsert(
            &scope_a,
            vec![
                with_text(zebra_of_a, 0, "zebra crossing near the office"),
                with_text(lion_of_a, 1, "lion statue in the park"),
            ],
        )
        .await
        .unwrap();
    let before = index
        .keyword_search(&scope_a, keyword_query("zebra lion", 10))
        .await
        .unwrap();
    assert_eq!(before.len(), 2, "{before:?}");

    // Another project fills up with one of the two words.
    let foreign: Vec<IndexedMemory> = (0..40)
        .map(|position| with_text(MemoryId::generate(), position, "zebra zebra herd"))
        .collect();
    index.upsert(&scope_b, foreign).await.unwrap();

    let after = index
        .keyword_search(&scope_a, keyword_query("zebra lion", 10))
        .await
        .unwrap();
    assert_eq!(
        after, before,
        "project A's ranking and scores must not depend on project B's words"
    );
    let hits_b = index
        .keyword_search(&scope_b, keyword_query("zebra lion", 100))
        .await
        .unwrap();
    assert_eq!(hits_b.len(), 40);
    assert!(!hit_ids(&hits_b).contains(&zebra_of_a));
}

async fn nearest_neighbour_comes_first_with_cosine_score(index: Arc<dyn VectorIndex>) {
    let scope = new_scope();
    let exact = MemoryId::generate();
    let close = MemoryId::generate();
    let orthogonal = MemoryId::generate();
    let opposite = MemoryId::generate();
    let mut close_vector = axis_vector(0);
    close_vector[1] = 0.3;
    let mut opposite_vector = axis_vector(0);
    opposite_vector[0] = -1.0;
    index
        .upsert(
            &scope,
            vec![
                memory(orthogonal, 1, axis_vector(1)),
                memory(exact, 1, axis_vector(0)),
                memory(opposite, 1, opposite_vector),
                memory(close, 1, close_vector),
            ],
        )
        .await
        .unwrap();

    // Cosine ignores length: a scaled copy of the stored vector is still an exact match.
    let mut scaled = axis_vector(0);
    scaled[0] = 5.0;
    let hits = index.search(&scope, query(scaled, 10)).await.unwrap();
    assert_eq!(hit_ids(&hits), vec![exact, close, orthogonal, opposite]);
    assert!((hits[0].score - 1.0).abs() < 1e-5, "{hits:?}");
    assert!(
        (hits[1].score - 1.0 / 1.09f32.sqrt()).abs() < 1e-4,
        "{hits:?}"
    );
    assert!(hits[2].score.abs() < 1e-5, "{hits:?}");
    assert!((hits[3].score + 1.0).abs() < 1e-5, "{hits:?}");
    assert!(hits.iter().all(|hit| hit.version == 1));

    let limited = index
        .search(&scope, query(axis_vector(0), 2))
        .await
        .unwrap();
    assert_eq!(hit_ids(&limited), vec![exact, close]);
    assert!(
        index
            .search(&scope, query(axis_vector(0), 0))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(count_points(&*index, &scope).await, 4);
    index.check_ready().await.unwrap();
}

async fn projects_never_see_or_remove_each_others_points(index: Arc<dyn VectorIndex>) {
    let scope_a = new_scope();
    let scope_b = new_scope();
    let memory_of_a = MemoryId::generate();
    let memory_of_b = MemoryId::generate();
    index
        .upsert(&scope_a, vec![memory(memory_of_a, 3, axis_vector(0))])
        .await
        .unwrap();
    index
        .upsert(&scope_b, vec![memory(memory_of_b, 1, axis_vector(1))])
        .await
        .unwrap();

    let hits_b = index
        .search(&scope_b, query(axis_vector(0), 10))
        .await
        .unwrap();
    assert_eq!(hit_ids(&hits_b), vec![memory_of_b]);

    let versions_b = index
        .versions(&scope_b, vec![memory_of_a, memory_of_b])
        .await
        .unwrap();
    assert_eq!(versions_b.len(), 1);
    assert_eq!(versions_b.get(&memory_of_b), Some(&1));

    index.delete(&scope_b, vec![memory_of_a]).await.unwrap();
    assert_eq!(
        index
            .versions(&scope_a, vec![memory_of_a])
            .await
            .unwrap()
            .get(&memory_of_a),
        Some(&3)
    );
    assert_eq!(
        hit_ids(
            &index
                .search(&scope_a, query(axis_vector(0), 10))
                .await
                .unwrap()
        ),
        vec![memory_of_a]
    );

    // An upsert through another project must not take over (or overwrite) the point.
    index
        .upsert(&scope_b, vec![memory(memory_of_a, 9, axis_vector(2))])
        .await
        .unwrap();
    assert_eq!(
        index
            .versions(&scope_a, vec![memory_of_a])
            .await
            .unwrap()
            .get(&memory_of_a),
        Some(&3)
    );
    assert!(
        index
            .versions(&scope_b, vec![memory_of_a])
            .await
            .unwrap()
            .is_empty()
    );
    let hits_a = index
        .search(&scope_a, query(axis_vector(0), 10))
        .await
        .unwrap();
    assert!(
        (hits_a[0].score - 1.0).abs() < 1e-5,
        "vector of A must be unchanged: {hits_a:?}"
    );

    assert_eq!(count_points(&*index, &scope_a).await, 1);
    assert_eq!(count_points(&*index, &scope_b).await, 1);
}

async fn user_agent_session_and_kind_filters_narrow_the_search(index: Arc<dyn VectorIndex>) {
    let scope = new_scope();
    let alice_semantic = MemoryId::generate();
    let alice_episodic_in_session = MemoryId::generate();
    let bob_by_planner = MemoryId::generate();
    let unowned_preference = MemoryId::generate();
    let points = vec![
        IndexedMemory {
            user_id: Some("alice".into()),
            ..memory(alice_semantic, 1, axis_vector(0))
        },
        IndexedMemory {
            user_id: Some("alice".into()),
            session_id: Some("session-1".into()),
            kind: MemoryKind::Episodic,
            ..memory(alice_episodic_in_session, 1, axis_vector(1))
        },
        IndexedMemory {
            user_id: Some("bob".into()),
            agent_id: Some("planner".into()),
            kind: MemoryKind::Procedural,
            ..memory(bob_by_planner, 1, axis_vector(2))
        },
        IndexedMemory {
            kind: MemoryKind::Preference,
            ..memory(unowned_preference, 1, axis_vector(3))
        },
    ];
    index.upsert(&scope, points).await.unwrap();
    let probe = vec![1.0; DIMENSION];

    let sorted = |mut ids: Vec<MemoryId>| {
        ids.sort();
        ids
    };
    let search = |filtered: VectorQuery| {
        let index = &index;
        async move { sorted(hit_ids(&index.search(&scope, filtered).await.unwrap())) }
    };

    assert_eq!(search(query(probe.clone(), 10)).await.len(), 4);
    assert_eq!(
        search(VectorQuery {
            user_id: Some("alice".into()),
            ..query(probe.clone(), 10)
        })
        .await,
        sorted(vec![alice_semantic, alice_episodic_in_session])
    );
    assert_eq!(
        search(VectorQuery {
            agent_id: Some("planner".into()),
            ..query(probe.clone(), 10)
        })
        .await,
        vec![bob_by_planner]
    );
    assert_eq!(
        search(VectorQuery {
            session_id: Some("session-1".into()),
            ..query(probe.clone(), 10)
        })
        .await,
        vec![alice_episodic_in_session]
    );
    assert_eq!(
        search(VectorQuery {
            kinds: vec![MemoryKind::Procedural, MemoryKind::Preference],
            ..query(probe.clone(), 10)
        })
        .await,
        sorted(vec![bob_by_planner, unowned_preference])
    );
    assert_eq!(
        search(VectorQuery {
            user_id: Some("alice".into()),
            kinds: vec![MemoryKind::Semantic],
            ..query(probe.clone(), 10)
        })
        .await,
        vec![alice_semantic]
    );
    assert!(
        search(VectorQuery {
            user_id: Some("carol".into()),
            ..query(probe, 10)
        })
        .await
        .is_empty()
    );
}

async fn a_stale_version_never_overwrites_a_newer_one(index: Arc<dyn VectorIndex>) {
    let scope = new_scope();
    let memory_id = MemoryId::generate();
    index
        .upsert(&scope, vec![memory(memory_id, 2, axis_vector(2))])
        .await
        .unwrap();
    index
        .upsert(&scope, vec![memory(memory_id, 1, axis_vector(1))])
        .await
        .unwrap();

    assert_eq!(
        index
            .versions(&scope, vec![memory_id])
            .await
            .unwrap()
            .get(&memory_id),
        Some(&2)
    );
    let hits = index
        .search(&scope, query(axis_vector(2), 1))
        .await
        .unwrap();
    assert_eq!(hits[0].memory_id, memory_id);
    assert_eq!(hits[0].version, 2);
    assert!(
        (hits[0].score - 1.0).abs() < 1e-5,
        "the vector must still be version 2's: {hits:?}"
    );

    // Within one batch the newest version wins too, whatever the order.
    index
        .upsert(
            &scope,
            vec![
                memory(memory_id, 4, axis_vector(4)),
                memory(memory_id, 3, axis_vector(3)),
            ],
        )
        .await
        .unwrap();
    let hits = index
        .search(&scope, query(axis_vector(4), 1))
        .await
        .unwrap();
    assert_eq!(
        (hits[0].version, hits[0].score > 0.99),
        (4, true),
        "{hits:?}"
    );

    // Re-applying the same version is allowed (idempotent re-index).
    index
        .upsert(&scope, vec![memory(memory_id, 4, axis_vector(5))])
        .await
        .unwrap();
    let hits = index
        .search(&scope, query(axis_vector(5), 1))
        .await
        .unwrap();
    assert_eq!(
        (hits[0].version, hits[0].score > 0.99),
        (4, true),
        "{hits:?}"
    );
}

async fn concurrent_upserts_of_one_memory_end_at_the_newest_version(index: Arc<dyn VectorIndex>) {
    let scope = new_scope();
    let memory_id = MemoryId::generate();
    // Versions arrive in a scrambled order from many tasks at once.
    let versions: Vec<i64> = (1..=24).map(|step| (step * 7) % 24 + 1).collect();
    let mut tasks = Vec::new();
    for version in versions {
        let index = std::sync::Arc::clone(&index);
        tasks.push(tokio::spawn(async move {
            // Only the newest version points along the last axis.
            let axis = if version == 24 {
                DIMENSION - 1
            } else {
                version as usize % (DIMENSION - 1)
            };
            index
                .upsert(&scope, vec![memory(memory_id, version, axis_vector(axis))])
                .await
        }));
    }
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    assert_eq!(
        index
            .versions(&scope, vec![memory_id])
            .await
            .unwrap()
            .get(&memory_id),
        Some(&24)
    );
    let hits = index
        .search(&scope, query(axis_vector(DIMENSION - 1), 1))
        .await
        .unwrap();
    assert!(
        hits[0].score > 0.99,
        "the vector must be version 24's: {hits:?}"
    );
}

async fn delete_is_idempotent_and_deleted_points_are_not_returned(index: Arc<dyn VectorIndex>) {
    let scope = new_scope();
    let kept = MemoryId::generate();
    let deleted = MemoryId::generate();
    index
        .upsert(
            &scope,
            vec![
                memory(kept, 1, axis_vector(1)),
                memory(deleted, 1, axis_vector(0)),
            ],
        )
        .await
        .unwrap();

    index
        .delete(&scope, vec![deleted, MemoryId::generate()])
        .await
        .unwrap();
    index.delete(&scope, vec![deleted]).await.unwrap();
    index.delete(&scope, Vec::new()).await.unwrap();

    assert_eq!(
        hit_ids(
            &index
                .search(&scope, query(axis_vector(0), 10))
                .await
                .unwrap()
        ),
        vec![kept]
    );
    let versions = index.versions(&scope, vec![kept, deleted]).await.unwrap();
    assert_eq!(versions.len(), 1);
    assert!(versions.contains_key(&kept));
    assert_eq!(count_points(&*index, &scope).await, 1);
}

async fn points_page_walks_one_project_in_id_order(index: Arc<dyn VectorIndex>) {
    let scope = new_scope();
    let other_scope = new_scope();
    let mut ids: Vec<MemoryId> = (0..7).map(|_| MemoryId::generate()).collect();
    index
        .upsert(
            &scope,
            ids.iter()
                .enumerate()
                .map(|(position, memory_id)| {
                    memory(
                        *memory_id,
                        position as i64 + 1,
                        axis_vector(position % DIMENSION),
                    )
                })
                .collect(),
        )
        .await
        .unwrap();
    index
        .upsert(
            &other_scope,
            vec![memory(MemoryId::generate(), 1, axis_vector(0))],
        )
        .await
        .unwrap();

    let mut walked = Vec::new();
    let mut from = None;
    loop {
        let page = index.points_page(&scope, from, 3).await.unwrap();
        assert!(page.points.len() <= 3, "{page:?}");
        walked.extend(page.points);
        match page.next {
            Some(next) => from = Some(next),
            None => break,
        }
    }
    let mut expected: Vec<(MemoryId, i64)> = ids
        .iter()
        .enumerate()
        .map(|(position, memory_id)| (*memory_id, position as i64 + 1))
        .collect();
    expected.sort();
    ids.sort();
    let mut walked_sorted = walked.clone();
    walked_sorted.sort();
    assert_eq!(
        walked_sorted, expected,
        "every point once, with its version, no foreign one"
    );
    assert_eq!(count_points(&*index, &other_scope).await, 1);
}

/// The outage path the gateway maps to 503: a server that does not answer is "unavailable",
/// not an internal error. Runs everywhere (nothing listens on the port).
#[tokio::test]
async fn an_unreachable_qdrant_server_is_reported_unavailable() {
    let unused_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let options = QdrantClusterOptions {
        url: format!("http://127.0.0.1:{unused_port}"),
        timeout: Duration::from_secs(2),
        ..QdrantClusterOptions::default()
    };
    let error = QdrantVectorIndex::connect(&options, "contract-model", DIMENSION)
        .await
        .err()
        .expect("nothing listens there");
    assert!(matches!(error, IndexError::Unavailable(_)), "{error:?}");
}

#[test]
fn collection_names_are_per_model_and_safe() {
    assert_eq!(
        engram_index::collection_name_for_model("engram", "sentence-transformers/all-MiniLM-L6-v2"),
        "engram_sentence-transformers-all-minilm-l6-v2"
    );
}

/// Gateways and workers connect side by side: the second connection finds the collection the
/// first created, sees its points, and a process with another model dimension is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_connections_share_one_collection_and_refuse_another_dimension() {
    let Ok(url) = std::env::var("QDRANT_URL") else {
        eprintln!(
            "SKIPPED remote Qdrant test `remote_connections_share_one_collection_and_refuse_another_dimension`: \
             QDRANT_URL is not set (see \"Remote Qdrant\" in infra/README.md)."
        );
        return;
    };
    let options = remote_test_options(url);
    let (first, second) = tokio::join!(
        QdrantVectorIndex::connect(&options, "shared-model", DIMENSION),
        QdrantVectorIndex::connect(&options, "shared-model", DIMENSION),
    );
    let (first, second) = (first.unwrap(), second.unwrap());
    assert_eq!(first.collection_name(), second.collection_name());
    let scope = new_scope();
    let memory_id = MemoryId::generate();
    first
        .upsert(&scope, vec![memory(memory_id, 1, axis_vector(0))])
        .await
        .unwrap();
    assert_eq!(
        second
            .versions(&scope, vec![memory_id])
            .await
            .unwrap()
            .get(&memory_id),
        Some(&1)
    );
    let refused = QdrantVectorIndex::connect(&options, "shared-model", DIMENSION * 2)
        .await
        .err()
        .expect("another dimension must be refused");
    assert!(
        matches!(refused, IndexError::DimensionMismatch { .. }),
        "{refused:?}"
    );
    first.delete_collection().await.unwrap();
}

#[tokio::test]
async fn data_survives_closing_and_reopening_the_directory() {
    let directory = tempfile::tempdir().unwrap();
    let scope = new_scope();
    let survivor = MemoryId::generate();
    let removed = MemoryId::generate();
    {
        let index = open_index(&directory);
        index
            .upsert(
                &scope,
                vec![
                    memory(survivor, 5, axis_vector(3)),
                    memory(removed, 1, axis_vector(4)),
                ],
            )
            .await
            .unwrap();
        index.delete(&scope, vec![removed]).await.unwrap();
        // No explicit flush: the WAL and the flush on drop must be enough.
    }
    let reopened = open_index(&directory);
    let hits = reopened
        .search(&scope, query(axis_vector(3), 10))
        .await
        .unwrap();
    assert_eq!(hit_ids(&hits), vec![survivor]);
    assert_eq!(hits[0].version, 5);
    assert!((hits[0].score - 1.0).abs() < 1e-5);

    // Writes after reopening work and persist too.
    let later = MemoryId::generate();
    reopened
        .upsert(&scope, vec![memory(later, 1, axis_vector(6))])
        .await
        .unwrap();
    reopened.flush().await.unwrap();
    drop(reopened);
    let reopened_again = open_index(&directory);
    assert_eq!(reopened_again.point_count(&scope).await.unwrap(), 2);
}

/// One memory of the keyword-statistics test: who owns it and what it says.
struct OwnedText {
    memory_id: MemoryId,
    user_id: Option<&'static str>,
    text: &'static str,
}

/// Asserts that `index` scores `query` over `scope` (as `user_id`, if any) exactly as BM25 over
/// the texts of that corpus alone: the in-memory scorer's figures, a memory without a query
/// term absent.
async fn assert_bm25_over(
    index: &EdgeVectorIndex,
    scope: &ProjectScope,
    texts: &[OwnedText],
    user_id: Option<&str>,
    query: &str,
) {
    let corpus: Vec<&OwnedText> = texts
        .iter()
        .filter(|owned| user_id.is_none() || owned.user_id == user_id)
        .collect();
    let corpus_texts: Vec<&str> = corpus.iter().map(|owned| owned.text).collect();
    let expected = InMemoryKeywordScorer::new()
        .unwrap()
        .score(query, &corpus_texts);
    let hits = index
        .keyword_search(
            scope,
            KeywordQuery {
                user_id: user_id.map(str::to_string),
                ..keyword_query(query, 100)
            },
        )
        .await
        .unwrap();
    let scores: std::collections::HashMap<MemoryId, f32> =
        hits.iter().map(|hit| (hit.memory_id, hit.score)).collect();
    for (owned, expected_score) in corpus.iter().zip(&expected) {
        match scores.get(&owned.memory_id) {
            Some(score) => assert!(
                (score - expected_score).abs() < 1e-4,
                "{:?} as {user_id:?}: scored {score}, BM25 over the corpus gives {expected_score}",
                owned.text
            ),
            None => assert_eq!(
                *expected_score, 0.0,
                "{:?} as {user_id:?} was not found",
                owned.text
            ),
        }
    }
    let matching = expected.iter().filter(|score| **score > 0.0).count();
    assert_eq!(hits.len(), matching, "{user_id:?}: {hits:?}");
}

/// The embedded index scores keywords with BM25 over the project's memories, or over the
/// end-user's when an end-user searches: another project's or end-user's words never weigh
/// in. The statistics follow every write, correction, deletion and erasure, and are the same
/// after the index is reopened; scoring a few given memories gives their scores in the full
/// search.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyword_scores_are_bm25_over_the_project_or_end_user_through_every_change() {
    let directory = tempfile::tempdir().unwrap();
    let scope = new_scope();
    let owned = |user_id, text| OwnedText {
        memory_id: MemoryId::generate(),
        user_id,
        text,
    };
    let mut texts = vec![
        owned(Some("ann"), "zebra crossing near the office"),
        owned(Some("ann"), "lion statue in the park"),
        owned(Some("bob"), "zebra zebra herd at the zoo"),
        owned(Some("bob"), "a lion and a zebra at the crossing"),
        owned(None, "crossing guard on Friday"),
    ];
    let point = |owned: &OwnedText, version| IndexedMemory {
        user_id: owned.user_id.map(str::to_string),
        text: owned.text.to_string(),
        ..memory(owned.memory_id, version, axis_vector(0))
    };
    let query = "zebra lion crossing";
    let index = open_index(&directory);
    index
        .upsert(&scope, texts.iter().map(|owned| point(owned, 1)).collect())
        .await
        .unwrap();
    // Another project full of one of the words.
    let foreign: Vec<IndexedMemory> = (0..30)
        .map(|position| with_text(MemoryId::generate(), position, "zebra zebra herd"))
        .collect();
    index.upsert(&new_scope(), foreign).await.unwrap();
    for user_id in [None, Some("ann"), Some("bob")] {
        assert_bm25_over(&index, &scope, &texts, user_id, query).await;
    }

    // Scoring given memories only gives them the scores of the full search.
    let full = index
        .keyword_search(&scope, keyword_query(query, 100))
        .await
        .unwrap();
    let given = vec![texts[1].memory_id, texts[3].memory_id, texts[4].memory_id];
    let only_given = index
        .keyword_search(
            &scope,
            KeywordQuery {
                only_ids: Some(given.clone()),
                ..keyword_query(query, 100)
            },
        )
        .await
        .unwrap();
    assert_eq!(only_given.len(), 3, "{only_given:?}");
    for hit in &only_given {
        assert!(given.contains(&hit.memory_id));
        let in_full = full.iter().find(|each| each.memory_id == hit.memory_id);
        assert_eq!(in_full.map(|each| each.score), Some(hit.score));
    }

    // A correction replaces the old words, a stale write changes nothing, a deletion removes.
    texts[1].text = "a quiet office";
    index
        .upsert(&scope, vec![point(&texts[1], 2)])
        .await
        .unwrap();
    index
        .upsert(
            &scope,
            vec![IndexedMemory {
                text: "lion lion lion".to_string(),
                ..point(&texts[1], 1)
            }],
        )
        .await
        .unwrap();
    let deleted = texts.remove(3);
    index.delete(&scope, vec![deleted.memory_id]).await.unwrap();
    for user_id in [None, Some("ann"), Some("bob")] {
        assert_bm25_over(&index, &scope, &texts, user_id, query).await;
    }

    // Erasing an end-user takes their words out of the project's statistics.
    index.delete_subject(&scope, "bob").await.unwrap();
    texts.retain(|owned| owned.user_id != Some("bob"));
    assert_bm25_over(&index, &scope, &texts, None, query).await;
    assert_bm25_over(&index, &scope, &texts, Some("bob"), query).await;

    // Reopened, the statistics are counted again from the stored points.
    drop(index);
    let reopened = open_index(&directory);
    for user_id in [None, Some("ann")] {
        assert_bm25_over(&reopened, &scope, &texts, user_id, query).await;
    }
}

#[tokio::test]
async fn reopening_with_another_dimension_is_refused() {
    let directory = tempfile::tempdir().unwrap();
    drop(open_index(&directory));
    let error = EdgeVectorIndex::open(directory.path(), DIMENSION * 2)
        .err()
        .expect("must refuse");
    assert!(matches!(error, IndexError::Unavailable(_)), "{error:?}");
}

async fn vectors_of_the_wrong_dimension_are_rejected(index: Arc<dyn VectorIndex>) {
    let scope = new_scope();
    let error = index
        .upsert(&scope, vec![memory(MemoryId::generate(), 1, vec![1.0; 3])])
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            IndexError::DimensionMismatch {
                expected: 8,
                actual: 3
            }
        ),
        "{error:?}"
    );
    let error = index
        .search(&scope, query(vec![1.0; 9], 5))
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            IndexError::DimensionMismatch {
                expected: 8,
                actual: 9
            }
        ),
        "{error:?}"
    );
    assert_eq!(count_points(&*index, &scope).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_stays_exact_after_hnsw_optimization() {
    let directory = tempfile::tempdir().unwrap();
    // A tiny indexing threshold so 2,000 eight-dimensional vectors do get an HNSW index; the
    // maintenance thread is kept out of the way so `optimize_now` does the work.
    let options = EdgeIndexOptions {
        indexing_threshold_kb: Some(10),
        optimize_after_written_points: u64::MAX,
        optimize_interval: Duration::from_secs(3600),
        ..EdgeIndexOptions::default()
    };
    let index = EdgeVectorIndex::open_with_options(directory.path(), DIMENSION, options).unwrap();
    let scope = new_scope();
    let other_scope = new_scope();
    let vectors = pseudo_random_vectors(2_000, 7);
    let ids: Vec<MemoryId> = (0..vectors.len()).map(|_| MemoryId::generate()).collect();
    for (chunk_ids, chunk_vectors) in ids.chunks(250).zip(vectors.chunks(250)) {
        let points = chunk_ids
            .iter()
            .zip(chunk_vectors)
            .map(|(id, vector)| memory(*id, 1, vector.clone()))
            .collect();
        index.upsert(&scope, points).await.unwrap();
    }
    // Another project's copies of the same vectors must never leak into the results.
    let decoys = vectors[..200]
        .iter()
        .map(|vector| memory(MemoryId::generate(), 1, vector.clone()))
        .collect();
    index.upsert(&other_scope, decoys).await.unwrap();

    let unbuilt = index.statistics().await.unwrap();
    assert_eq!(unbuilt.indexed_vector_count, 0, "{unbuilt:?}");
    let optimize_index = &index;
    let optimized = tokio::task::block_in_place(|| optimize_index.optimize_now()).unwrap();
    assert!(
        optimized,
        "the segment is over the indexing threshold and must be optimized"
    );
    let statistics = index.statistics().await.unwrap();
    // Every point's dense vector is in a graph now; their BM25 vectors (of empty texts
    // here) are not counted as dense ones.
    assert_eq!(
        statistics.indexed_vector_count, statistics.point_count,
        "{statistics:?}"
    );
    assert_eq!(index.point_count(&scope).await.unwrap(), 2_000);

    for probe in [0usize, 1, 199, 777, 1_500, 1_999] {
        let hits = index
            .search(&scope, query(vectors[probe].clone(), 5))
            .await
            .unwrap();
        assert_eq!(hits[0].memory_id, ids[probe], "probe {probe}: {hits:?}");
        assert!(
            (hits[0].score - 1.0).abs() < 1e-4,
            "probe {probe}: {hits:?}"
        );
        assert!(
            hits.windows(2).all(|pair| pair[0].score >= pair[1].score),
            "best first: {hits:?}"
        );
        assert!(
            hits.iter().all(|hit| ids.contains(&hit.memory_id)),
            "only this project's points: {hits:?}"
        );
    }

    // Writes after optimization land in a fresh appendable segment and are found as well.
    let late = MemoryId::generate();
    index
        .upsert(&scope, vec![memory(late, 1, axis_vector(7))])
        .await
        .unwrap();
    assert_eq!(
        index
            .search(&scope, query(axis_vector(7), 1))
            .await
            .unwrap()[0]
            .memory_id,
        late
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_maintenance_thread_optimizes_after_enough_writes() {
    let directory = tempfile::tempdir().unwrap();
    let options = EdgeIndexOptions {
        indexing_threshold_kb: Some(10),
        optimize_after_written_points: 500,
        maintenance_tick: Duration::from_millis(50),
        ..EdgeIndexOptions::default()
    };
    let index = EdgeVectorIndex::open_with_options(directory.path(), DIMENSION, options).unwrap();
    let scope = new_scope();
    index
        .upsert(&scope, random_memories(1_000, 11))
        .await
        .unwrap();

    wait_for_a_graph(&index, "no background optimization happened").await;
    index.check_ready().await.unwrap();
    assert_eq!(index.point_count(&scope).await.unwrap(), 1_000);
}

/// Points that waited for a load to pause are optimized once enough of them wait, pause or
/// not, so searches never scan an unbounded number of points without a graph (when the
/// optimizer waits is the schedule's unit test, `edge::tests`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enough_waiting_points_are_optimized_before_the_writes_pause() {
    let directory = tempfile::tempdir().unwrap();
    let options = EdgeIndexOptions {
        indexing_threshold_kb: Some(10),
        optimize_after_written_points: 100,
        bulk_load_pause: Duration::from_secs(3600),
        bulk_load_longest_wait: Duration::from_secs(3600),
        bulk_load_most_waiting_points: 1_000,
        maintenance_tick: Duration::from_millis(50),
        ..EdgeIndexOptions::default()
    };
    let index = EdgeVectorIndex::open_with_options(directory.path(), DIMENSION, options).unwrap();
    let scope = new_scope();
    index
        .upsert(&scope, random_memories(1_000, 13))
        .await
        .unwrap();

    wait_for_a_graph(
        &index,
        "1,000 points waited and the optimizer still did not run",
    )
    .await;
}

/// Waits (within the tests' patience) until the maintenance thread put some vectors in a
/// graph; fails with `failure` and the index's sizes otherwise.
async fn wait_for_a_graph(index: &EdgeVectorIndex, failure: &str) {
    let deadline = Instant::now() + engram_tests::patience();
    loop {
        let statistics = index.statistics().await.unwrap();
        if statistics.indexed_vector_count > 0 {
            return;
        }
        assert!(Instant::now() < deadline, "{failure}: {statistics:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Set in the child process of the crash test: where to write before aborting.
const CRASH_DIRECTORY_VARIABLE: &str = "ENGRAM_INDEX_CRASH_TEST_DIRECTORY";

#[tokio::test]
async fn an_acknowledged_upsert_survives_a_process_crash() {
    if let Ok(crash_directory) = std::env::var(CRASH_DIRECTORY_VARIABLE) {
        // Child: write without any flush (the maintenance tick is far away), then die the way a
        // crash does: no destructors, no flush on drop.
        let options = EdgeIndexOptions {
            maintenance_tick: Duration::from_secs(3600),
            ..EdgeIndexOptions::default()
        };
        let index = EdgeVectorIndex::open_with_options(
            std::path::Path::new(&crash_directory),
            DIMENSION,
            options,
        )
        .expect("open index in the child");
        let scope: ProjectScope = ProjectScope::from_verified_credential(
            std::env::var("ENGRAM_INDEX_CRASH_TEST_ORGANIZATION")
                .unwrap()
                .parse()
                .unwrap(),
            std::env::var("ENGRAM_INDEX_CRASH_TEST_PROJECT")
                .unwrap()
                .parse()
                .unwrap(),
        );
        let memory_id: MemoryId = std::env::var("ENGRAM_INDEX_CRASH_TEST_MEMORY")
            .unwrap()
            .parse()
            .unwrap();
        index
            .upsert(&scope, vec![memory(memory_id, 7, axis_vector(5))])
            .await
            .expect("upsert in the child");
        std::process::abort();
    }

    let directory = tempfile::tempdir().unwrap();
    let scope = new_scope();
    let memory_id = MemoryId::generate();
    let child_status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            // The test's full name in the `components` binary.
            concat!(
                module_path!(),
                "::an_acknowledged_upsert_survives_a_process_crash"
            )
            .split_once("::")
            .map_or("", |(_crate, path)| path),
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CRASH_DIRECTORY_VARIABLE, directory.path())
        .env(
            "ENGRAM_INDEX_CRASH_TEST_ORGANIZATION",
            scope.organization_id().to_string(),
        )
        .env(
            "ENGRAM_INDEX_CRASH_TEST_PROJECT",
            scope.project_id().to_string(),
        )
        .env("ENGRAM_INDEX_CRASH_TEST_MEMORY", memory_id.to_string())
        .status()
        .unwrap();
    assert!(!child_status.success(), "the child must have aborted");

    let reopened = open_index(&directory);
    assert_eq!(
        reopened
            .versions(&scope, vec![memory_id])
            .await
            .unwrap()
            .get(&memory_id),
        Some(&7)
    );
    let hits = reopened
        .search(&scope, query(axis_vector(5), 1))
        .await
        .unwrap();
    assert_eq!(hit_ids(&hits), vec![memory_id]);
}
