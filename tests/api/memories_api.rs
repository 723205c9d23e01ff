//! The memory API as a client sees it: add / get / list / search with read-your-writes,
//! supersede by key, edit with If-Match and history, delete, idempotent retries.

use engram_tests::{ApiClient, ApiResponse, TestServer};
use serde_json::{Value, json};

#[tokio::test]
async fn added_memories_are_readable_listable_and_searchable_at_once() {
    let server = TestServer::spawn().await.unwrap();
    let api = server.client();
    let response = api
        .add(json!([
            {"content": "Prefers short answers without bullet points.", "user_id": "u-42", "kind": "preference",
             "metadata": {"channel": "chat"}, "categories": ["style"]},
            {"content": "Works as a marine biologist in Lisbon.", "user_id": "u-42"},
            {"content": "The deploy script must run with --dry-run first.", "agent_id": "ops-bot", "kind": "procedural"}
        ]))
        .await;
    assert_eq!(response.status, 201, "{}", response.body);
    let memories = response.body["memories"].as_array().unwrap();
    assert_eq!(memories.len(), 3);
    let first = &memories[0];
    assert_eq!(first["kind"], "preference");
    assert_eq!(first["state"], "active");
    assert_eq!(first["version"], 1);
    assert_eq!(first["source"], "user_stated");
    assert_eq!(first["confidence"], 1.0);
    assert_eq!(first["metadata"], json!({"channel": "chat"}));
    assert_eq!(memories[1]["kind"], "semantic", "kind defaults to semantic");
    let id = first["id"].as_str().unwrap();
    assert_eq!(
        uuid::Uuid::parse_str(id).unwrap().get_version_num(),
        7,
        "ids are UUIDv7"
    );

    let fetched = api.get(id).await;
    assert_eq!(fetched.status, 200);
    assert_eq!(
        fetched.body["content"],
        "Prefers short answers without bullet points."
    );

    let listed = api.list("?user_id=u-42").await;
    assert_eq!(listed.status, 200);
    assert_eq!(listed.body["memories"].as_array().unwrap().len(), 2);
    assert!(listed.body["next_cursor"].is_null());

    // Read-your-writes: the 201 means the index already has them.
    let results = api
        .search(json!({"query": "where does the user work?", "user_id": "u-42"}))
        .await;
    assert_eq!(results.status, 200, "{}", results.body);
    assert!(results.body["recall_id"].as_str().is_some());
    let hits = results.body["results"].as_array().unwrap();
    assert_eq!(
        hits[0]["memory"]["content"],
        "Works as a marine biologist in Lisbon."
    );
    let scores: Vec<f64> = hits
        .iter()
        .map(|hit| hit["score"].as_f64().unwrap())
        .collect();
    assert!(
        scores.iter().all(|score| (0.0..=1.0).contains(score)),
        "scores in [0,1]: {scores:?}"
    );
    assert!(
        scores.windows(2).all(|pair| pair[0] >= pair[1]),
        "best first: {scores:?}"
    );
    assert!(
        hits.iter().all(|hit| hit["memory"]["user_id"] == "u-42"),
        "user filter applies"
    );

    let procedural = api
        .search(json!({"query": "deploy", "kinds": ["procedural"]}))
        .await;
    let procedural_hits = procedural.body["results"].as_array().unwrap();
    assert_eq!(procedural_hits.len(), 1, "{}", procedural.body);
    assert_eq!(procedural_hits[0]["memory"]["agent_id"], "ops-bot");

    let strict = api
        .search(json!({"query": "marine biology job", "min_score": 0.99}))
        .await;
    assert_eq!(
        strict.body["results"].as_array().unwrap().len(),
        0,
        "min_score filters weak matches"
    );

    let filtered = api
        .search(json!({"query": "answers", "filters": {"metadata": {"channel": "chat"}}}))
        .await;
    let filtered_hits = filtered.body["results"].as_array().unwrap();
    assert_eq!(filtered_hits.len(), 1, "{}", filtered.body);
}

#[tokio::test]
async fn list_pages_through_every_memory_with_a_cursor() {
    let server = TestServer::spawn().await.unwrap();
    let api = server.client();
    let batch: Vec<_> = (0..7)
        .map(|number| json!({"content": format!("fact number {number}"), "user_id": "pager"}))
        .collect();
    assert_eq!(api.add(json!(batch)).await.status, 201);
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let query = match &cursor {
            Some(cursor) => format!("?limit=3&cursor={cursor}"),
            None => "?limit=3".to_string(),
        };
        let page = api.list(&query).await;
        assert_eq!(page.status, 200, "{}", page.body);
        pages += 1;
        for memory in page.body["memories"].as_array().unwrap() {
            seen.push(memory["content"].as_str().unwrap().to_string());
        }
        match page.body["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    seen.sort();
    let mut expected: Vec<String> = (0..7)
        .map(|number| format!("fact number {number}"))
        .collect();
    expected.sort();
    assert_eq!(seen, expected, "every memory exactly once");
}

#[tokio::test]
async fn a_keyed_memory_supersedes_the_previous_one_for_the_same_user_and_agent() {
    let server = TestServer::spawn().await.unwrap();
    let api = server.client();
    let old = api.add_one(json!({"content": "Reply in long detailed paragraphs.", "user_id": "u-1", "key": "reply_style", "kind": "preference"})).await;
    let other_user = api
        .add_one(json!({"content": "Reply in French.", "user_id": "u-2", "key": "reply_style"}))
        .await;
    let new = api.add_one(json!({"content": "Reply in one short sentence.", "user_id": "u-1", "key": "reply_style", "kind": "preference"})).await;

    let old_now = api.get(old["id"].as_str().unwrap()).await;
    assert_eq!(old_now.body["state"], "superseded");
    assert!(
        old_now.body["valid_to"].is_string(),
        "valid_to set: {}",
        old_now.body
    );
    assert_eq!(old_now.body["version"], 2);
    assert_eq!(
        api.get(other_user["id"].as_str().unwrap()).await.body["state"],
        "active",
        "other users are untouched"
    );

    let active_ids = api.all_listed_ids("&user_id=u-1").await;
    assert_eq!(active_ids, vec![new["id"].as_str().unwrap().to_string()]);
    let superseded_ids = api.all_listed_ids("&user_id=u-1&state=superseded").await;
    assert_eq!(
        superseded_ids,
        vec![old["id"].as_str().unwrap().to_string()]
    );

    let contents = api.search_contents("how should replies be written?").await;
    assert!(
        contents.contains(&"Reply in one short sentence.".to_string()),
        "{contents:?}"
    );
    assert!(
        !contents.contains(&"Reply in long detailed paragraphs.".to_string()),
        "superseded never recalled: {contents:?}"
    );

    let history = api.history(old["id"].as_str().unwrap()).await;
    let events: Vec<&str> = history.body["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["event"].as_str().unwrap())
        .collect();
    assert_eq!(events, vec!["created", "superseded"]);
}

#[tokio::test]
async fn edits_bump_the_version_keep_history_and_respect_if_match() {
    let server = TestServer::spawn().await.unwrap();
    let api = server.client();
    let memory = api
        .add_one(json!({"content": "Lives in Porto.", "user_id": "u-7"}))
        .await;
    let id = memory["id"].as_str().unwrap();

    let edited = api
        .patch(
            id,
            Some("\"1\""),
            json!({"content": "Lives in Berlin since 2024.", "reason": "user corrected the city"}),
        )
        .await;
    assert_eq!(edited.status, 200, "{}", edited.body);
    assert_eq!(edited.body["version"], 2);
    assert_eq!(edited.body["content"], "Lives in Berlin since 2024.");

    let stale = api
        .patch(id, Some("1"), json!({"content": "Lives in Madrid."}))
        .await;
    stale.assert_problem(409, "version-conflict");
    assert_eq!(
        api.get(id).await.body["content"],
        "Lives in Berlin since 2024.",
        "a conflict changes nothing"
    );

    let metadata_only = api
        .patch(id, Some("2"), json!({"metadata": {"verified": true}}))
        .await;
    assert_eq!(metadata_only.status, 200);
    assert_eq!(metadata_only.body["version"], 3);
    assert_eq!(metadata_only.body["content"], "Lives in Berlin since 2024.");

    let history = api.history(id).await;
    assert_eq!(history.status, 200);
    let entries = history.body["history"].as_array().unwrap();
    assert_eq!(entries.len(), 3);
    assert_eq!(entries[0]["event"], "created");
    assert_eq!(entries[0]["content"], "Lives in Porto.");
    assert_eq!(entries[1]["event"], "updated");
    assert_eq!(entries[1]["version"], 2);
    assert_eq!(entries[1]["reason"], "user corrected the city");
    assert_eq!(entries[1]["content"], "Lives in Berlin since 2024.");

    let contents = api
        .search_contents("which city does the user live in")
        .await;
    assert_eq!(
        contents.first().map(String::as_str),
        Some("Lives in Berlin since 2024."),
        "the index has the new text"
    );
    assert!(!contents.iter().any(|content| content.contains("Porto")));
}

#[tokio::test]
async fn a_deleted_memory_is_gone_everywhere() {
    let server = TestServer::spawn().await.unwrap();
    let api = server.client();
    let doomed = api
        .add_one(json!({"content": "Allergic to peanuts.", "user_id": "u-9"}))
        .await;
    let kept = api
        .add_one(json!({"content": "Allergic to nothing else.", "user_id": "u-9"}))
        .await;
    let id = doomed["id"].as_str().unwrap();
    api.patch(
        id,
        None,
        json!({"content": "Severely allergic to peanuts.", "reason": "clarified"}),
    )
    .await;

    let deleted = api.delete(id).await;
    assert_eq!(deleted.status, 204);
    api.get(id).await.assert_problem(404, "not-found");
    api.history(id).await.assert_problem(404, "not-found");
    api.patch(id, None, json!({"content": "x"}))
        .await
        .assert_problem(404, "not-found");
    api.delete(id).await.assert_problem(404, "not-found");
    assert_eq!(
        api.all_listed_ids("").await,
        vec![kept["id"].as_str().unwrap().to_string()]
    );
    let contents = api.search_contents("peanut allergy").await;
    assert!(
        !contents.iter().any(|content| content.contains("peanuts")),
        "deleted never recalled: {contents:?}"
    );
}

async fn post_with_idempotency_key(
    api: ApiClient,
    key: &'static str,
    body: serde_json::Value,
) -> ApiResponse {
    let request = api
        .request(reqwest::Method::POST, "/v1/memories")
        .header("Idempotency-Key", key)
        .json(&body);
    api.send(request).await
}

#[tokio::test]
async fn a_retried_write_with_the_same_idempotency_key_writes_once() {
    let server = TestServer::spawn().await.unwrap();
    let api = server.client();
    let body = json!({"memories": [{"content": "Booked a table for Friday.", "user_id": "u-3"}]});
    let first = post_with_idempotency_key(api.clone(), "retry-1", body.clone()).await;
    assert_eq!(first.status, 201);
    let second = post_with_idempotency_key(api.clone(), "retry-1", body.clone()).await;
    assert_eq!(second.status, 201);
    assert_eq!(
        second.body, first.body,
        "the retry returns the first answer"
    );
    assert_eq!(api.all_listed_ids("").await.len(), 1, "written once");

    let different = post_with_idempotency_key(
        api.clone(),
        "retry-1",
        json!({"memories": [{"content": "Something else."}]}),
    )
    .await;
    different.assert_problem(422, "idempotency-key-reused");
    assert_eq!(api.all_listed_ids("").await.len(), 1, "nothing new written");

    let concurrent: Vec<_> = (0..5)
        .map(|_| {
            tokio::spawn(post_with_idempotency_key(
                api.clone(),
                "retry-2",
                json!({"memories": [{"content": "Concurrent retry."}]}),
            ))
        })
        .collect();
    let mut answers = Vec::new();
    for handle in concurrent {
        answers.push(handle.await.unwrap());
    }
    assert!(
        answers.iter().all(|answer| answer.status == 201),
        "{:?}",
        answers
            .iter()
            .map(|a| (a.status, a.body.clone()))
            .collect::<Vec<_>>()
    );
    let ids: std::collections::BTreeSet<String> = answers
        .iter()
        .map(|answer| answer.body["memories"][0]["id"].to_string())
        .collect();
    assert_eq!(ids.len(), 1, "concurrent retries agree on one memory");
    assert_eq!(api.all_listed_ids("").await.len(), 2);
}

#[tokio::test]
async fn wait_false_answers_202_and_the_memory_becomes_searchable() {
    let server = TestServer::spawn().await.unwrap();
    let api = server.client();
    let request = api
        .request(reqwest::Method::POST, "/v1/memories?wait=false")
        .json(&json!({"memories": [{"content": "Owns a golden retriever named Miso."}]}));
    let response = api.send(request).await;
    assert_eq!(response.status, 202, "{}", response.body);
    assert_eq!(
        response.body["memories"][0]["content"],
        "Owns a golden retriever named Miso."
    );
    // The background indexer makes an accepted write searchable.
    engram_tests::eventually("the accepted write to become searchable", || async {
        let contents = api.search_contents("what pet does the user have").await;
        if contents.iter().any(|content| content.contains("Miso")) {
            Ok(())
        } else {
            Err(format!("{contents:?}"))
        }
    })
    .await;
}

/// Once a memory is deleted, a retry of the request that wrote it (same Idempotency-Key,
/// same body) gets `409 idempotent-result-erased`: the stored answer lost the content with
/// the memory, and the retry writes nothing.
#[tokio::test]
async fn a_retry_after_the_memory_was_deleted_neither_replays_nor_writes() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    let write = || {
        client.send(
            client
                .request(reqwest::Method::POST, "/v1/memories")
                .header("Idempotency-Key", "note-1")
                .json(&json!({"memories": [{"content": "The spare key is under the blue pot.", "user_id": "ines"}]})),
        )
    };
    let first = write().await;
    assert_eq!(first.status, 201, "{}", first.body);
    let replay = write().await;
    assert_eq!(replay.body, first.body, "a retry replays the first answer");
    let id = first.body["memories"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(client.delete(&id).await.status, 204);

    let retried = write().await;
    retried.assert_problem(409, "idempotent-result-erased");
    assert!(
        !retried.body.to_string().contains("blue pot"),
        "{}",
        retried.body
    );
    assert_eq!(
        client.list("").await.body["memories"]
            .as_array()
            .unwrap()
            .len(),
        0,
        "the retry wrote nothing"
    );
}

/// A 404 says what kind of thing is missing in `code`, and says the same for another
/// project's memory as for one that never existed: nothing learned about the other tenant.
#[tokio::test]
async fn a_missing_thing_is_named_by_its_code_and_a_foreign_one_looks_the_same() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    let (_, other_key) = server.create_project("other").unwrap();
    let other = server.client_with_key(&other_key);
    let added = other
        .add(json!([{"content": "Only the other project knows this."}]))
        .await;
    assert_eq!(added.status, 201, "{}", added.body);
    let foreign_id = added.body["memories"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let never_existed = uuid::Uuid::now_v7().to_string();
    let mut bodies = Vec::new();
    for memory_id in [&foreign_id, &never_existed] {
        let response = client.get(memory_id).await;
        response.assert_problem(404, "not-found");
        assert_eq!(
            response.body["code"], "memory-not-found",
            "{}",
            response.body
        );
        let mut body = response.body.clone();
        body["request_id"] = Value::Null;
        bodies.push(body);
    }
    assert_eq!(
        bodies[0], bodies[1],
        "a foreign memory answers like a missing one"
    );
    let get = |path: String| client.send(client.request(reqwest::Method::GET, &path));
    let response = get(format!("/v1/files/{never_existed}")).await;
    response.assert_problem(404, "not-found");
    assert_eq!(response.body["code"], "file-not-found", "{}", response.body);
    for (path, code) in [
        (
            format!("/v1/sessions/s-1/state/k-{never_existed}"),
            "session-state-not-found",
        ),
        (format!("/v1/recalls/{never_existed}"), "recall-not-found"),
        (
            format!("/v1/eval-sets/{never_existed}"),
            "evaluation-set-not-found",
        ),
        (format!("/v1/tasks/{never_existed}"), "task-not-found"),
    ] {
        let response = get(path.clone()).await;
        response.assert_problem(404, "not-found");
        assert_eq!(response.body["code"], code, "{path}: {}", response.body);
    }
    let revoke_unknown = client
        .send(client.request(
            reqwest::Method::POST,
            &format!("/v1/keys/{never_existed}/revoke"),
        ))
        .await;
    revoke_unknown.assert_problem(404, "not-found");
    assert_eq!(
        revoke_unknown.body["code"], "api-key-not-found",
        "{}",
        revoke_unknown.body
    );
    let delete_unknown_state = client
        .send(client.request(reqwest::Method::DELETE, "/v1/sessions/s-1/state/never-set"))
        .await;
    delete_unknown_state.assert_problem(404, "not-found");
    assert_eq!(
        delete_unknown_state.body["code"], "session-state-not-found",
        "{}",
        delete_unknown_state.body
    );
    let response = get("/v1/no-such-route".to_string()).await;
    response.assert_problem(404, "not-found");
    assert_eq!(
        response.body["code"], "route-not-found",
        "{}",
        response.body
    );
}
