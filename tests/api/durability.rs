//! Acknowledged means durable: memories survive a clean restart and a SIGKILL at any
//! moment, stay searchable afterwards, and deleted ones never come back.

use engram_tests::TestServer;
use serde_json::json;

#[tokio::test]
async fn memories_survive_a_clean_restart() {
    let server = TestServer::spawn().await.unwrap();
    let api = server.client();
    let kept = api
        .add_one(json!({"content": "Speaks Portuguese and Japanese.", "user_id": "u-1"}))
        .await;
    let bootstrap_before = server.bootstrap.clone();
    let (clean_exit, data_dir, owned) = server.stop();
    assert!(clean_exit, "SIGTERM ends the server cleanly");

    let restarted = TestServer::spawn_in(&data_dir).await.unwrap();
    let _keep_dir_alive = owned;
    assert_eq!(
        restarted.bootstrap.api_key, bootstrap_before.api_key,
        "bootstrap happens once"
    );
    let api = restarted.client();
    assert_eq!(
        api.get(kept["id"].as_str().unwrap()).await.body["content"],
        "Speaks Portuguese and Japanese."
    );
    assert_eq!(
        api.search_contents("which languages does the user speak")
            .await
            .first()
            .map(String::as_str),
        Some("Speaks Portuguese and Japanese.")
    );
}

#[tokio::test]
async fn a_sigkill_after_acknowledged_writes_loses_nothing() {
    let server = TestServer::spawn().await.unwrap();
    let api = server.client();
    let mut acknowledged = Vec::new();
    for batch in 0..5 {
        let memories: Vec<_> = (0..20).map(|number| json!({"content": format!("durable fact {batch}-{number} about topic {number}"), "user_id": "u-k"})).collect();
        let response = api.add(json!(memories)).await;
        assert_eq!(response.status, 201);
        for memory in response.body["memories"].as_array().unwrap() {
            acknowledged.push((
                memory["id"].as_str().unwrap().to_string(),
                memory["content"].as_str().unwrap().to_string(),
            ));
        }
    }
    // Writes acknowledged without waiting for the index (only the DB commit is promised).
    let unindexed: Vec<_> = (0..20).map(|number| json!({"content": format!("fast write {number} about gardening"), "user_id": "u-k"})).collect();
    let fast = api
        .send(
            api.request(reqwest::Method::POST, "/v1/memories?wait=false")
                .json(&json!({"memories": unindexed})),
        )
        .await;
    assert_eq!(fast.status, 202);
    for memory in fast.body["memories"].as_array().unwrap() {
        acknowledged.push((
            memory["id"].as_str().unwrap().to_string(),
            memory["content"].as_str().unwrap().to_string(),
        ));
    }
    let deleted = acknowledged.remove(0);
    assert_eq!(api.delete(&deleted.0).await.status, 204);
    let edited = acknowledged[0].0.clone();
    let edit = api
        .patch(
            &edited,
            None,
            json!({"content": "edited just before the crash: loves orchids"}),
        )
        .await;
    assert_eq!(edit.status, 200);
    acknowledged[0].1 = "edited just before the crash: loves orchids".to_string();

    let (data_dir, owned) = server.kill_hard();
    let restarted = TestServer::spawn_in(&data_dir).await.unwrap();
    let _keep_dir_alive = owned;
    let api = restarted.client();

    let listed = api.all_listed_ids("").await;
    assert_eq!(
        listed.len(),
        acknowledged.len(),
        "every acknowledged memory is listed, the deleted one is not"
    );
    for (id, content) in &acknowledged {
        let fetched = api.get(id).await;
        assert_eq!(fetched.status, 200, "acknowledged memory {id} lost");
        assert_eq!(fetched.body["content"].as_str(), Some(content.as_str()));
    }
    api.get(&deleted.0).await.assert_problem(404, "not-found");
    let contents = api.search_contents("fast write about gardening").await;
    assert!(
        contents
            .iter()
            .filter(|content| content.starts_with("fast write"))
            .count()
            >= 10,
        "unindexed writes were indexed after restart: {contents:?}"
    );
    let orchids = api.search_contents("who loves orchids").await;
    assert_eq!(
        orchids.first().map(String::as_str),
        Some("edited just before the crash: loves orchids")
    );
    assert!(
        !api.search_contents(&deleted.1).await.contains(&deleted.1),
        "a deleted memory never comes back"
    );
}

/// Writers keep adding memories while the server is SIGKILLed at a moment nobody chose;
/// every write that was answered 201/202 must be there after the restart, and searchable.
#[tokio::test]
async fn a_sigkill_in_the_middle_of_concurrent_writes_loses_nothing_acknowledged() {
    let mut server = TestServer::spawn().await.unwrap();
    let mut acknowledged: Vec<(String, String)> = Vec::new();
    let mut indeterminate = 0usize;
    let mut keep_data_dir = None;
    for cycle in 0..3u64 {
        let api = server.client();
        let stop_writing = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut writers = Vec::new();
        for writer in 0..3 {
            let api = api.clone();
            let stop_writing = stop_writing.clone();
            writers.push(tokio::spawn(async move {
                let mut written = Vec::new();
                let mut failed = 0usize;
                let mut batch = 0;
                while !stop_writing.load(std::sync::atomic::Ordering::Relaxed) {
                    let memories: Vec<_> = (0..5)
                        .map(|number| json!({"content": format!("cycle {cycle} writer {writer} batch {batch} item {number}: enjoys crash-safe storage"), "user_id": format!("u-{writer}")}))
                        .collect();
                    batch += 1;
                    let wait = if batch % 2 == 0 { "true" } else { "false" };
                    let sent = api
                        .request(reqwest::Method::POST, &format!("/v1/memories?wait={wait}"))
                        .json(&json!({"memories": memories}))
                        .send()
                        .await;
                    let Ok(response) = sent else {
                        // The server died mid-request: the outcome is unknown, not acknowledged.
                        failed += 1;
                        break;
                    };
                    if !(response.status() == 201 || response.status() == 202) {
                        failed += 1;
                        break;
                    }
                    let Ok(body) = response.json::<serde_json::Value>().await else {
                        failed += 1;
                        break;
                    };
                    for memory in body["memories"].as_array().unwrap() {
                        written.push((
                            memory["id"].as_str().unwrap().to_string(),
                            memory["content"].as_str().unwrap().to_string(),
                        ));
                    }
                }
                (written, failed)
            }));
        }
        // A different moment each cycle, somewhere inside the writes.
        tokio::time::sleep(std::time::Duration::from_millis(700 + 450 * cycle)).await;
        let (data_dir, owned) = server.kill_hard();
        stop_writing.store(true, std::sync::atomic::Ordering::Relaxed);
        for writer in writers {
            let (written, failed) = writer.await.unwrap();
            acknowledged.extend(written);
            indeterminate += failed;
        }
        server = TestServer::spawn_in(&data_dir).await.unwrap();
        // The temporary directory (owned by the first server) must outlive every restart.
        if owned.is_some() {
            keep_data_dir = owned;
        }
    }
    assert!(
        acknowledged.len() >= 30,
        "the writers got some writes in before each kill ({} acknowledged)",
        acknowledged.len()
    );
    let _keep_data_dir = keep_data_dir;
    let api = server.client();
    let listed: std::collections::HashSet<String> =
        api.all_listed_ids("").await.into_iter().collect();
    let lost: Vec<_> = acknowledged
        .iter()
        .filter(|(id, _)| !listed.contains(id))
        .collect();
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged writes lost ({indeterminate} indeterminate): {lost:?}",
        lost.len(),
        acknowledged.len()
    );
    // Indeterminate writes may or may not have landed; nothing else may appear.
    assert!(listed.len() <= acknowledged.len() + indeterminate * 5);
    // The index caught up: a sample of acknowledged memories is found by its exact text.
    for (id, content) in acknowledged.iter().step_by(acknowledged.len() / 5) {
        let found = api
            .search(json!({"query": content, "top_k": 3, "user_id": content.split(' ').nth(3).map(|writer| format!("u-{writer}"))}))
            .await;
        assert_eq!(found.status, 200);
        let ids: Vec<&str> = found.body["results"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|result| result["memory"]["id"].as_str())
            .collect();
        assert!(
            ids.contains(&id.as_str()),
            "{content:?} not searchable after restarts: {ids:?}"
        );
    }
}

/// SIGTERM while a large write is in flight: the write completes and is answered, then the
/// process exits cleanly and the memories are there on the next start.
#[tokio::test]
async fn a_graceful_shutdown_finishes_the_request_in_flight() {
    let server = TestServer::spawn().await.unwrap();
    let api = server.client();
    // One sentence each: 100 of them are several batches for the model (so the write is
    // still in flight when the signal comes), yet far inside the 30 s request limit even on a
    // busy machine (100 texts of 1,000 characters took 24 s on an idle one).
    let long_text = "The user keeps detailed notes about every hiking trail, the weather on the way, the gear that worked and the gear that failed, and the people met at each hut.";
    let memories: Vec<_> = (0..100)
        .map(|number| json!({"content": format!("{number}: {long_text}"), "user_id": "u-shutdown"}))
        .collect();
    let in_flight = {
        let api = api.clone();
        tokio::spawn(async move { api.add(json!(memories)).await })
    };
    // Shut down only once the request is inside the server: its texts are waiting for or in
    // the model (embedding 100 long texts takes several batches).
    let http = reqwest::Client::new();
    engram_tests::eventually("the write to reach the model", || async {
        let metrics = http
            .get(&server.metrics_url)
            .send()
            .await
            .map_err(|error| error.to_string())?
            .text()
            .await
            .map_err(|error| error.to_string())?;
        let waiting = engram_tests::metric_sample(&metrics, "engram_embedding_queue_depth", &[])
            .unwrap_or(0.0);
        let embedded = engram_tests::metric_sample(&metrics, "engram_embedded_texts_total", &[])
            .unwrap_or(0.0);
        if waiting > 0.0 || embedded > 0.0 {
            Ok(())
        } else {
            Err(format!("queue depth {waiting}, embedded {embedded}"))
        }
    })
    .await;
    server.request_shutdown();
    let response = in_flight.await.unwrap();
    assert_eq!(
        response.status, 201,
        "the in-flight write was answered: {:?}",
        response.body
    );
    let (clean_exit, data_dir, owned) = server.wait_for_exit();
    assert!(clean_exit, "the server exits cleanly after draining");
    let restarted = TestServer::spawn_in(&data_dir).await.unwrap();
    let _keep_dir_alive = owned;
    let listed = restarted
        .client()
        .all_listed_ids("&user_id=u-shutdown")
        .await;
    assert_eq!(listed.len(), 100);
}

/// `engram admin reconcile` rebuilds a lost index from the database with the server stopped,
/// reports what it repaired, finds nothing the second time, and refuses to run beside a
/// live server on the same data dir.
#[tokio::test]
async fn admin_reconcile_rebuilds_a_lost_index_and_refuses_a_live_data_dir() {
    let server = TestServer::spawn().await.unwrap();
    let api = server.client();
    for content in [
        "Keeps bees on the roof.",
        "Learning the cello.",
        "Allergic to penicillin.",
    ] {
        api.add_one(json!({"content": content, "user_id": "u-r"}))
            .await;
    }
    let busy = std::process::Command::new(engram_tests::engram_binary())
        .args(["admin", "reconcile", "--data-dir"])
        .arg(&server.data_dir)
        .output()
        .unwrap();
    assert!(
        !busy.status.success(),
        "reconcile must not open a live server's index"
    );
    assert!(
        String::from_utf8_lossy(&busy.stderr).contains("in use"),
        "{}",
        String::from_utf8_lossy(&busy.stderr)
    );
    let (clean_exit, data_dir, owned) = server.stop();
    assert!(clean_exit);
    let _keep_dir_alive = owned;

    std::fs::remove_dir_all(data_dir.join("index")).unwrap();
    let reconcile = |expected: &str| {
        let output = std::process::Command::new(engram_tests::engram_binary())
            .args(["admin", "reconcile", "--data-dir"])
            .arg(&data_dir)
            .env("ENGRAM_LOG", "warn")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).to_string();
        assert!(
            output.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            stdout.contains(expected),
            "expected {expected:?} in {stdout:?}"
        );
    };
    reconcile("3 active memories: missing 3 / stale 0 / orphaned 0");
    reconcile("3 active memories: missing 0 / stale 0 / orphaned 0");

    let restarted = TestServer::spawn_in(&data_dir).await.unwrap();
    assert_eq!(
        restarted
            .client()
            .search_contents("which medicine is dangerous for the user")
            .await
            .first()
            .map(String::as_str),
        Some("Allergic to penicillin.")
    );
}

/// The database goes away under a running server (its database closed to connections and
/// every session terminated): requests answer 503 problem+json with Retry-After, the write
/// attempted meanwhile leaves nothing behind, and service resumes by itself when the
/// database is back.
#[tokio::test]
async fn a_database_outage_answers_503_writes_nothing_and_recovers() {
    let engram_test_postgres::TestDatabase {
        name: database,
        url,
    } = engram_test_postgres::create_database().await;
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::spawn_with(directory.path(), &[("ENGRAM_DATABASE_URL", &url)])
        .await
        .unwrap();
    let api = server.client();
    api.add_one(json!({"content": "Written before the outage.", "user_id": "u-db"}))
        .await;

    engram_test_postgres::execute_as_admin(&format!(
        "ALTER DATABASE {database} ALLOW_CONNECTIONS false"
    ))
    .await;
    engram_test_postgres::execute_as_admin(&format!(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{database}'"
    ))
    .await;
    let during = api
        .add(json!([{"content": "Attempted during the outage.", "user_id": "u-db"}]))
        .await;
    during.assert_problem(503, "dependency-unavailable");
    assert!(during.retry_after.is_some(), "503 says when to retry");
    api.list("")
        .await
        .assert_problem(503, "dependency-unavailable");

    engram_test_postgres::execute_as_admin(&format!(
        "ALTER DATABASE {database} ALLOW_CONNECTIONS true"
    ))
    .await;
    engram_tests::eventually(
        "the server to serve again once the database is back",
        || async {
            let response = api.list("").await;
            if response.status == 200 {
                Ok(())
            } else {
                Err(response.body.to_string())
            }
        },
    )
    .await;
    let contents: Vec<String> = api.list("?user_id=u-db").await.body["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|memory| memory["content"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        contents,
        vec!["Written before the outage.".to_string()],
        "nothing half-written"
    );
    api.add_one(json!({"content": "Written after the outage.", "user_id": "u-db"}))
        .await;
}
