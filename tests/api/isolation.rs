//! Tenancy: a project's key can never read, change or learn about another project's
//! memories, on any endpoint. Unknown and foreign ids answer the same 404.

use engram_tests::TestServer;
use serde_json::json;

#[tokio::test]
async fn two_projects_never_see_each_other() {
    let server = TestServer::spawn().await.unwrap();
    let alpha = server.client();
    // Created while the server runs: the new key must work at once.
    let (beta_project_id, beta_key) = server.create_project("beta").unwrap();
    assert_ne!(beta_project_id, server.bootstrap.project_id);
    let beta = server.client_with_key(&beta_key);

    let secret = alpha
        .add_one(json!({"content": "Alpha's launch code is 7-7-4-1.", "user_id": "shared-user", "key": "launch", "agent_id": "a"}))
        .await;
    let secret_id = secret["id"].as_str().unwrap();
    let beta_own = beta.add_one(json!({"content": "Beta likes launch parties.", "user_id": "shared-user", "key": "launch", "agent_id": "a"})).await;

    // Same (user, agent, key) in another project does not supersede across projects.
    assert_eq!(alpha.get(secret_id).await.body["state"], "active");

    // Read, edit, delete and history of a foreign id: exactly like an unknown id.
    let unknown = uuid::Uuid::now_v7().to_string();
    for id in [secret_id, unknown.as_str()] {
        beta.get(id).await.assert_problem(404, "not-found");
        beta.history(id).await.assert_problem(404, "not-found");
        beta.patch(id, None, json!({"content": "overwritten by beta"}))
            .await
            .assert_problem(404, "not-found");
        beta.patch(id, Some("1"), json!({"content": "overwritten by beta"}))
            .await
            .assert_problem(404, "not-found");
        beta.delete(id).await.assert_problem(404, "not-found");
    }
    let foreign = beta.get(secret_id).await;
    let unknown_answer = beta.get(&unknown).await;
    assert_eq!(
        foreign.body["detail"], unknown_answer.body["detail"],
        "existence is not revealed"
    );

    // Lists and searches only ever show the caller's project.
    assert_eq!(
        beta.all_listed_ids("").await,
        vec![beta_own["id"].as_str().unwrap().to_string()]
    );
    assert_eq!(beta.all_listed_ids("&user_id=shared-user").await.len(), 1);
    let beta_search = beta
        .search(json!({"query": "launch code", "top_k": 100, "user_id": "shared-user"}))
        .await;
    let beta_results = beta_search.body["results"].as_array().unwrap();
    assert!(
        beta_results
            .iter()
            .all(|result| result["memory"]["id"] != secret_id),
        "{}",
        beta_search.body
    );
    assert!(!beta_search.body.to_string().contains("7-7-4-1"));

    // Alpha's memory is untouched by all of the above.
    let after = alpha.get(secret_id).await;
    assert_eq!(after.body["content"], "Alpha's launch code is 7-7-4-1.");
    assert_eq!(after.body["version"], 1);
    assert_eq!(
        alpha.history(secret_id).await.body["history"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        alpha.search_contents("launch code").await,
        vec!["Alpha's launch code is 7-7-4-1.".to_string()]
    );

    // Idempotency keys are per project: the same key in beta is a new request, not a replay.
    let post = |client: &engram_tests::ApiClient, content: &str| {
        client
            .request(reqwest::Method::POST, "/v1/memories")
            .header("Idempotency-Key", "same-key")
            .json(&json!({"memories": [{"content": content}]}))
    };
    assert_eq!(
        alpha.send(post(&alpha, "alpha idempotent")).await.status,
        201
    );
    let beta_answer = beta.send(post(&beta, "beta idempotent")).await;
    assert_eq!(beta_answer.status, 201);
    assert_eq!(
        beta_answer.body["memories"][0]["content"], "beta idempotent",
        "no replay of alpha's answer"
    );
}
