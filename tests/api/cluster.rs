//! The cluster topology end to end: `engram migrate`, then two `engram gateway` and two
//! `engram worker` processes against one PostgreSQL database and one Qdrant collection. Runs
//! only when `QDRANT_URL` points at a Qdrant server (gRPC); no Qdrant server can be installed
//! on CI here, so without it the test says loudly that it skipped.

use engram_index::{QdrantClusterOptions, QdrantVectorIndex, VectorIndex};
use engram_tests::{ApiClient, RoleProcess, run_engram};
use rand::Rng;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

fn stdout_of(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).to_string()
}

/// Every point of a project in the index, as id → version.
async fn index_points(
    index: &QdrantVectorIndex,
    scope: &engram_core::ProjectScope,
) -> BTreeMap<String, i64> {
    let mut points = BTreeMap::new();
    let mut from = None;
    loop {
        let page = index.points_page(scope, from, 256).await.unwrap();
        for (memory_id, version) in page.points {
            points.insert(memory_id.to_string(), version);
        }
        match page.next {
            Some(next) => from = Some(next),
            None => return points,
        }
    }
}

async fn database_memories(
    storage: &engram_storage::Storage,
    scope: &engram_core::ProjectScope,
) -> BTreeMap<String, i64> {
    storage
        .active_memory_versions_of(scope, None, 100_000)
        .await
        .unwrap()
        .into_iter()
        .map(|(memory_id, version)| (memory_id.to_string(), version))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_gateways_and_two_workers_share_postgres_and_qdrant() {
    let Ok(qdrant_url) = std::env::var("QDRANT_URL") else {
        eprintln!(
            "SKIPPED cluster test `two_gateways_and_two_workers_share_postgres_and_qdrant`: QDRANT_URL is not set. \
             No Qdrant server can be installed here, so CI does not run the gateway/worker topology; \
             see the README's \"Remote Qdrant\" section to run it against a real cluster."
        );
        return;
    };
    let database = engram_test_postgres::create_database().await;
    let server_secret = hex_secret();
    let collection_prefix = format!("engram_cluster_{}", uuid::Uuid::now_v7().simple());
    let scratch = tempfile::tempdir().unwrap();
    let environment: Vec<(String, String)> = vec![
        ("ENGRAM_DATABASE_URL".into(), database.url.clone()),
        ("QDRANT_URL".into(), qdrant_url.clone()),
        (
            "ENGRAM_QDRANT_COLLECTION_PREFIX".into(),
            collection_prefix.clone(),
        ),
        ("ENGRAM_SERVER_SECRET".into(), server_secret.clone()),
        (
            "ENGRAM_DATA_DIR".into(),
            scratch.path().display().to_string(),
        ),
        // Answer writes at once (202): the indexing is left to the workers and to the
        // gateways' own after-write applies, all racing for the same outbox entries.
        ("ENGRAM_INDEX_WAIT_MS".into(), "0".into()),
    ];

    // A gateway never migrates a shared schema: before `engram migrate` it refuses to start.
    let premature = run_engram(
        &[
            "gateway",
            "--listen",
            "127.0.0.1:0",
            "--metrics-listen",
            "127.0.0.1:0",
        ],
        &environment,
    );
    assert!(!premature.status.success());
    assert!(
        String::from_utf8_lossy(&premature.stderr).contains("run `engram migrate` first"),
        "{}",
        String::from_utf8_lossy(&premature.stderr)
    );

    let bootstrap_path = scratch.path().join("bootstrap.json");
    let migrated = run_engram(
        &[
            "migrate",
            "--bootstrap-file",
            &bootstrap_path.display().to_string(),
        ],
        &environment,
    );
    assert!(
        migrated.status.success(),
        "{}",
        String::from_utf8_lossy(&migrated.stderr)
    );
    let bootstrap: Value =
        serde_json::from_str(&std::fs::read_to_string(&bootstrap_path).unwrap()).unwrap();
    let first_key = bootstrap["api_key"].as_str().unwrap().to_string();
    let created = run_engram(
        &["admin", "create-project", "--name", "second", "--json"],
        &environment,
    );
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    let second: Value = serde_json::from_str(&stdout_of(&created)).unwrap();
    let second_key = second["api_key"].as_str().unwrap().to_string();

    let mut gateways = Vec::new();
    for _ in 0..2 {
        gateways.push(RoleProcess::spawn("gateway", &environment).await.unwrap());
    }
    let mut workers = Vec::new();
    for _ in 0..2 {
        workers.push(RoleProcess::spawn("worker", &environment).await.unwrap());
    }
    let gateway_urls: Vec<String> = gateways
        .iter()
        .map(|gateway| gateway.base_url.clone().unwrap())
        .collect();
    let first_via = |gateway: usize| ApiClient::new(&gateway_urls[gateway], &first_key);
    let second_via = |gateway: usize| ApiClient::new(&gateway_urls[gateway], &second_key);

    // Writes through both gateways at once, in both projects.
    let started = Instant::now();
    let mut writers = Vec::new();
    for gateway in 0..2 {
        for batch in 0..5 {
            let client = first_via(gateway);
            writers.push(tokio::spawn(async move {
                let memories: Vec<Value> = (0..20)
                    .map(|item| json!({"content": format!("cluster fact g{gateway} b{batch} i{item}: the deploy window is slot {item}"), "user_id": format!("user-{}", item % 3)}))
                    .collect();
                let response = client.add(json!(memories)).await;
                assert!(matches!(response.status, 201 | 202), "{}", response.body);
                response.body["memories"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|memory| memory["id"].as_str().unwrap().to_string())
                    .collect::<Vec<_>>()
            }));
        }
    }
    let second_project_write = second_via(1)
        .add(json!(
            (0..20)
                .map(|item| json!({"content": format!("second project note {item}")}))
                .collect::<Vec<_>>()
        ))
        .await;
    assert!(matches!(second_project_write.status, 201 | 202));
    let mut first_ids = Vec::new();
    for writer in writers {
        first_ids.extend(writer.await.unwrap());
    }
    assert_eq!(first_ids.len(), 200);

    // Edits through one gateway, deletes through the other.
    let edited: Vec<String> = first_ids[0..20].to_vec();
    let deleted: Vec<String> = first_ids[20..40].to_vec();
    for (position, memory_id) in edited.iter().enumerate() {
        let response = first_via(position % 2)
            .patch(memory_id, None, json!({"content": format!("edited cluster fact {position}: the rollback plan is written down")}))
            .await;
        assert_eq!(response.status, 200, "{}", response.body);
    }
    for (position, memory_id) in deleted.iter().enumerate() {
        let response = first_via((position + 1) % 2).delete(memory_id).await;
        assert_eq!(response.status, 204, "{}", response.body);
    }
    let written_in = started.elapsed();

    // Converge: the index holds exactly the database's live memories, at their versions.
    let storage = engram_storage::Storage::connect(&database.url)
        .await
        .unwrap();
    let secrets = engram_cli::bootstrap::ServerSecrets::from_hex(&server_secret).unwrap();
    let first_scope = storage
        .authenticate_api_key(&first_key, &secrets.api_key_pepper)
        .await
        .unwrap()
        .unwrap();
    let second_scope = storage
        .authenticate_api_key(&second_key, &secrets.api_key_pepper)
        .await
        .unwrap()
        .unwrap();
    let index = QdrantVectorIndex::connect(
        &QdrantClusterOptions {
            url: qdrant_url.clone(),
            api_key: std::env::var("QDRANT_API_KEY").ok(),
            collection_prefix: collection_prefix.clone(),
            ..QdrantClusterOptions::default()
        },
        engram_embed_model_id(),
        384,
    )
    .await
    .unwrap();
    let deadline = Instant::now() + engram_tests::patience();
    loop {
        let database_side = database_memories(&storage, &first_scope).await;
        let index_side = index_points(&index, &first_scope).await;
        let backlog = engram_storage::MaintenanceStore::new(storage.clone())
            .outbox_backlog()
            .await
            .unwrap();
        if database_side == index_side && backlog == 0 {
            assert_eq!(database_side.len(), 180);
            assert!(edited.iter().all(|memory_id| database_side[memory_id] == 2));
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no convergence in 60 s: {} in the database, {} in the index, backlog {backlog}",
            database_side.len(),
            index_side.len()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let converged_in = started.elapsed();
    assert_eq!(index_points(&index, &second_scope).await.len(), 20);
    eprintln!(
        "cluster: 220 writes, 20 edits, 20 deletes through 2 gateways in {:.2} s; index converged after {:.2} s",
        written_in.as_secs_f64(),
        converged_in.as_secs_f64()
    );

    // Both gateways answer from the shared index: the edit is found, the deleted never.
    for gateway in 0..2 {
        let response = first_via(gateway)
            .search(json!({"query": "is the rollback plan written down?", "top_k": 20}))
            .await;
        assert_eq!(response.status, 200, "{}", response.body);
        let hits: Vec<String> = response.body["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|hit| hit["memory"]["id"].as_str().unwrap().to_string())
            .collect();
        assert!(edited.contains(&hits[0]), "gateway {gateway}: {hits:?}");
        assert!(hits.iter().all(|hit| !deleted.contains(hit)));
        let second_hits = second_via(gateway)
            .search(json!({"query": "the deploy window is slot 3", "top_k": 50}))
            .await;
        let foreign = second_hits.body["results"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|hit| first_ids.contains(&hit["memory"]["id"].as_str().unwrap().to_string()))
            .count();
        assert_eq!(
            foreign, 0,
            "the second project never sees the first one's memories"
        );
    }

    for worker in workers {
        assert!(worker.stop(), "a worker stops cleanly on SIGTERM");
    }
    for gateway in gateways {
        assert!(gateway.stop(), "a gateway stops cleanly on SIGTERM");
    }
    index.delete_collection().await.unwrap();
}

fn engram_embed_model_id() -> &'static str {
    "all-MiniLM-L6-v2"
}

fn hex_secret() -> String {
    let bytes: [u8; 32] = rand::thread_rng().r#gen();
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Without a cluster the distributed roles refuse to start and say what to set (this part
/// runs everywhere).
#[test]
fn distributed_roles_say_what_they_need() {
    let gateway = run_engram(&["gateway", "--listen", "127.0.0.1:0"], &[]);
    assert!(!gateway.status.success());
    let message = String::from_utf8_lossy(&gateway.stderr);
    assert!(message.contains("ENGRAM_DATABASE_URL"), "{message}");

    let worker = run_engram(
        &["worker", "--database-url", "postgres://127.0.0.1/none"],
        &[],
    );
    assert!(!worker.status.success());
    let message = String::from_utf8_lossy(&worker.stderr);
    assert!(message.contains("QDRANT_URL"), "{message}");

    let gateway_without_secret = run_engram(
        &[
            "gateway",
            "--database-url",
            "postgres://127.0.0.1/none",
            "--qdrant-url",
            "http://127.0.0.1:6334",
        ],
        &[],
    );
    assert!(!gateway_without_secret.status.success());
    let message = String::from_utf8_lossy(&gateway_without_secret.stderr);
    assert!(message.contains("ENGRAM_SERVER_SECRET"), "{message}");
}
