//! Crash harness: three projects write, edit and delete concurrently while the server is
//! SIGKILLed at seeded random moments and restarted, cycle after cycle. Every operation is
//! recorded as ok, failed or indeterminate (the connection died before an answer). After
//! the last cycle the server is stopped cleanly and a checker opens its database and vector
//! index directly: every acknowledged write must be in both at its acknowledged version or
//! newer, every acknowledged delete must be gone from both, and no project may see another
//! project's memories. It prints lost / resurrected / leaked counts.
//!
//! `ENGRAM_CRASH_CYCLES` sets the cycles per backend (10 in `make test`, 100 in
//! `make crash-harness`); `ENGRAM_CRASH_SEED` the seed.

use engram_core::MemoryId;
use engram_index::{EdgeVectorIndex, VectorIndex};
use engram_storage::{Storage, StorageError};
use engram_tests::{ApiClient, TestServer};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const PROJECTS: usize = 3;
const MINILM_DIMENSION: usize = 384;

/// What one project's client was told, accumulated over every cycle.
#[derive(Default)]
struct ProjectHistory {
    /// Acknowledged memories and the highest version an answer reported for each.
    acknowledged: BTreeMap<String, i64>,
    /// Deletes answered 204 (or 404 for a memory this client had acknowledged-deleted).
    deleted: BTreeSet<String>,
    /// Deletes whose answer never came: the memory may or may not exist.
    maybe_deleted: BTreeSet<String>,
    ok: usize,
    failed: usize,
    indeterminate: usize,
}

impl ProjectHistory {
    fn live_ids(&self) -> Vec<String> {
        self.acknowledged
            .keys()
            .filter(|id| !self.deleted.contains(*id) && !self.maybe_deleted.contains(*id))
            .cloned()
            .collect()
    }
}

/// One client's random operations until `stop` is set.
async fn run_workload(
    api: ApiClient,
    project: usize,
    cycle: usize,
    seed: u64,
    stop: Arc<AtomicBool>,
    mut history: ProjectHistory,
) -> ProjectHistory {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut operation = 0;
    while !stop.load(Ordering::SeqCst) {
        operation += 1;
        let live = history.live_ids();
        let choice: f64 = rng.r#gen();
        if live.is_empty() || choice < 0.55 {
            let count = rng.gen_range(1..=5);
            let memories: Vec<Value> = (0..count)
                .map(|number| {
                    json!({
                        "content": format!("project {project} cycle {cycle} op {operation}.{number}: likes {}", ["tea", "maps", "jazz", "kites"][number % 4]),
                        "user_id": format!("u-{project}-{}", number % 3),
                    })
                })
                .collect();
            let wait = if rng.gen_bool(0.5) { "true" } else { "false" };
            let sent = api
                .request(reqwest::Method::POST, &format!("/v1/memories?wait={wait}"))
                .json(&json!({ "memories": memories }))
                .send()
                .await;
            match sent {
                Ok(response) if response.status() == 201 || response.status() == 202 => {
                    match response.json::<Value>().await {
                        Ok(body) => {
                            for memory in body["memories"].as_array().into_iter().flatten() {
                                let id = memory["id"].as_str().unwrap_or_default().to_string();
                                let version = memory["version"].as_i64().unwrap_or(1);
                                history.acknowledged.insert(id, version);
                            }
                            history.ok += 1;
                        }
                        Err(_) => history.indeterminate += 1,
                    }
                }
                Ok(_) => history.failed += 1,
                // Refused before anything was sent: certainly not applied.
                Err(error) if error.is_connect() => history.failed += 1,
                Err(_) => history.indeterminate += 1,
            }
        } else if choice < 0.85 {
            let id = live[rng.gen_range(0..live.len())].clone();
            let sent = api
                .request(reqwest::Method::PATCH, &format!("/v1/memories/{id}"))
                .json(&json!({"content": format!("project {project} cycle {cycle} op {operation}: edited")}))
                .send()
                .await;
            match sent {
                Ok(response) if response.status() == 200 => match response.json::<Value>().await {
                    Ok(body) => {
                        let version = body["version"].as_i64().unwrap_or(0);
                        let known = history.acknowledged.entry(id).or_insert(0);
                        *known = (*known).max(version);
                        history.ok += 1;
                    }
                    Err(_) => history.indeterminate += 1,
                },
                Ok(_) => history.failed += 1,
                // Refused before anything was sent: certainly not applied.
                Err(error) if error.is_connect() => history.failed += 1,
                Err(_) => history.indeterminate += 1,
            }
        } else {
            let id = live[rng.gen_range(0..live.len())].clone();
            let sent = api
                .request(reqwest::Method::DELETE, &format!("/v1/memories/{id}"))
                .send()
                .await;
            match sent {
                Ok(response) if response.status() == 204 => {
                    history.deleted.insert(id);
                    history.ok += 1;
                }
                Ok(_) => history.failed += 1,
                Err(error) if error.is_connect() => history.failed += 1,
                Err(_) => {
                    history.maybe_deleted.insert(id);
                    history.indeterminate += 1;
                }
            }
        }
    }
    history
}

#[derive(Default, Debug)]
struct Verdict {
    lost: Vec<String>,
    resurrected: Vec<String>,
    leaked: Vec<String>,
}

async fn run_crash_harness(backend: &str, database_url: Option<String>) {
    let cycles: usize = std::env::var("ENGRAM_CRASH_CYCLES")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(10);
    let seed: u64 = std::env::var("ENGRAM_CRASH_SEED")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(20_261_130);
    let directory = tempfile::Builder::new()
        .prefix("engram-crash-")
        .tempdir()
        .unwrap();
    let data_dir = directory.path().to_path_buf();
    let environment: Vec<(&str, &str)> = match &database_url {
        Some(url) => vec![("ENGRAM_DATABASE_URL", url.as_str())],
        None => Vec::new(),
    };
    let mut server = TestServer::spawn_with(&data_dir, &environment)
        .await
        .unwrap();
    let mut project_keys = vec![server.bootstrap.api_key.clone()];
    for number in 1..PROJECTS {
        project_keys.push(server.create_project(&format!("crash-{number}")).unwrap().1);
    }
    let mut histories: Vec<ProjectHistory> =
        (0..PROJECTS).map(|_| ProjectHistory::default()).collect();
    let mut rng = StdRng::seed_from_u64(seed);

    for cycle in 0..cycles {
        let stop = Arc::new(AtomicBool::new(false));
        let mut clients = Vec::new();
        for (project, history) in std::mem::take(&mut histories).into_iter().enumerate() {
            clients.push(tokio::spawn(run_workload(
                server.client_with_key(&project_keys[project]),
                project,
                cycle,
                rng.r#gen(),
                stop.clone(),
                history,
            )));
        }
        tokio::time::sleep(Duration::from_millis(rng.gen_range(200..1_200))).await;
        let (_, _) = server.kill_hard();
        stop.store(true, Ordering::SeqCst);
        for client in clients {
            histories.push(client.await.unwrap());
        }
        server = TestServer::spawn_with(&data_dir, &environment)
            .await
            .unwrap();
    }

    // Isolation, seen through the API: each project lists only its own memories.
    let mut verdict = Verdict::default();
    for (project, key) in project_keys.iter().enumerate() {
        let listed = server.client_with_key(key).all_listed_ids("").await;
        for id in listed {
            let owner = histories
                .iter()
                .position(|history| history.acknowledged.contains_key(&id));
            if let Some(owner) = owner
                && owner != project
            {
                verdict.leaked.push(format!(
                    "{id} of project {owner} listed by project {project}"
                ));
            }
        }
    }
    let (clean_exit, _, _) = server.stop();
    assert!(clean_exit, "the last server stopped cleanly");

    // The checker reads the database and the index directly.
    let database_url = database_url
        .unwrap_or_else(|| format!("sqlite://{}?mode=rwc", data_dir.join("engram.db").display()));
    let storage = Storage::connect(&database_url).await.unwrap();
    let index = EdgeVectorIndex::open(&data_dir.join("index"), MINILM_DIMENSION).unwrap();
    let secrets = engram_cli::bootstrap::load_or_create_server_secrets(&data_dir).unwrap();
    let mut scopes = Vec::new();
    for key in &project_keys {
        scopes.push(
            storage
                .authenticate_api_key(key, &secrets.api_key_pepper)
                .await
                .unwrap()
                .expect("project key still valid"),
        );
    }
    for (project, history) in histories.iter().enumerate() {
        let scope = &scopes[project];
        let known: Vec<MemoryId> = history
            .acknowledged
            .keys()
            .map(|id| id.parse().expect("memory ids are UUIDs"))
            .collect();
        let indexed = index.versions(scope, known.clone()).await.unwrap();
        for memory_id in known {
            let id = memory_id.to_string();
            let stored = match storage
                .get_memory(&engram_core::MemoryScope::project_wide(*scope), memory_id)
                .await
            {
                Ok(memory) => Some(memory),
                Err(StorageError::NotFound(_)) => None,
                Err(error) => panic!("checker cannot read {id}: {error}"),
            };
            if history.deleted.contains(&id) {
                if stored.is_some() || indexed.contains_key(&memory_id) {
                    verdict
                        .resurrected
                        .push(format!("{id} (project {project})"));
                }
                continue;
            }
            if history.maybe_deleted.contains(&id) {
                // Either outcome is allowed, but the index must agree with the database.
                if stored.is_none() && indexed.contains_key(&memory_id) {
                    verdict
                        .resurrected
                        .push(format!("{id} (indeterminate delete, still indexed)"));
                }
                continue;
            }
            let acknowledged_version = history.acknowledged[&id];
            match stored {
                None => verdict.lost.push(format!(
                    "{id} (project {project}) missing from the database"
                )),
                Some(memory) if memory.version < acknowledged_version => {
                    verdict.lost.push(format!(
                        "{id} at version {} < acknowledged {acknowledged_version}",
                        memory.version
                    ))
                }
                Some(memory) => {
                    let active = memory.state == engram_core::MemoryState::Active;
                    match indexed.get(&memory_id) {
                        Some(version) if active && *version == memory.version => {}
                        None if !active => {}
                        other => verdict.lost.push(format!(
                            "{id}: database version {} ({:?}), index {other:?}",
                            memory.version, memory.state
                        )),
                    }
                }
            }
        }
        // No other project's scope finds this project's points in the index.
        for (other, other_scope) in scopes.iter().enumerate() {
            if other == project {
                continue;
            }
            let ids: Vec<MemoryId> = history
                .acknowledged
                .keys()
                .filter_map(|id| id.parse().ok())
                .collect();
            let seen = index.versions(other_scope, ids).await.unwrap();
            for memory_id in seen.keys() {
                verdict.leaked.push(format!(
                    "{memory_id} of project {project} in project {other}'s index view"
                ));
            }
        }
    }

    let total = |pick: fn(&ProjectHistory) -> usize| histories.iter().map(pick).sum::<usize>();
    println!(
        "crash harness ({backend}): {cycles} SIGKILL cycles, {} operations ok / {} failed / {} indeterminate, {} memories acknowledged, {} deletes acknowledged",
        total(|history| history.ok),
        total(|history| history.failed),
        total(|history| history.indeterminate),
        total(|history| history.acknowledged.len()),
        total(|history| history.deleted.len()),
    );
    println!(
        "crash harness ({backend}): lost {} / resurrected {} / leaked {}",
        verdict.lost.len(),
        verdict.resurrected.len(),
        verdict.leaked.len()
    );
    assert!(
        total(|history| history.ok) > cycles,
        "the workload got operations in"
    );
    assert!(
        verdict.lost.is_empty() && verdict.resurrected.is_empty() && verdict.leaked.is_empty(),
        "{verdict:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkill_cycles_on_sqlite_lose_resurrect_and_leak_nothing() {
    run_crash_harness("sqlite + qdrant-edge", None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkill_cycles_on_postgres_lose_resurrect_and_leak_nothing() {
    run_crash_harness(
        "postgres + qdrant-edge",
        Some(engram_test_postgres::fresh_database_url().await),
    )
    .await;
}
