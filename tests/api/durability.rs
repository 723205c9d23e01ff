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
