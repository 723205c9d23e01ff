//! A project's embedding space end to end, on the real engine: a project that sends its own
//! vectors (declared dimension, checked on every write and query, its own index, erasure,
//! restart), and projects of one deployment choosing the local model or the provider.

use engram_tests::embedding_stand_in::EmbeddingStandIn;
use engram_tests::{ApiClient, ApiResponse, TestServer};
use serde_json::{Value, json};

async fn settings_patch(client: &ApiClient, body: Value) -> ApiResponse {
    client
        .send(
            client
                .request(reqwest::Method::PATCH, "/v1/project/settings")
                .json(&body),
        )
        .await
}

async fn settings(client: &ApiClient) -> Value {
    let response = client
        .send(client.request(reqwest::Method::GET, "/v1/project/settings"))
        .await;
    assert_eq!(response.status, 200, "{}", response.body);
    response.body
}

async fn finished_task(client: &ApiClient, task_id: &str) -> Value {
    let started = std::time::Instant::now();
    loop {
        let task = client
            .send(client.request(reqwest::Method::GET, &format!("/v1/tasks/{task_id}")))
            .await;
        assert_eq!(task.status, 200, "{}", task.body);
        if matches!(task.body["status"].as_str(), Some("succeeded" | "failed")) {
            return task.body;
        }
        assert!(
            started.elapsed() < engram_tests::patience(),
            "{}",
            task.body
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

fn result_contents(body: &Value) -> Vec<String> {
    body["results"]
        .as_array()
        .map(|results| {
            results
                .iter()
                .filter_map(|result| result["memory"]["content"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_sends_its_own_vectors_and_engram_embeds_nothing_for_it() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();

    let default = settings(&client).await;
    assert_eq!(
        default["embedding"],
        json!({"source": "deployment", "model": "all-MiniLM-L6-v2", "dimension": 384}),
        "{default}"
    );
    // A model the deployment does not offer, or a bad declaration: refused, nothing changes.
    settings_patch(&client, json!({"embedding": {"source": "provider"}}))
        .await
        .assert_problem(409, "embedding-unavailable");
    let bad = settings_patch(&client, json!({"embedding": {"source": "client"}})).await;
    bad.assert_problem(422, "validation-failed");
    assert_eq!(bad.error_fields(), vec!["embedding.dimension"]);
    let too_long = settings_patch(
        &client,
        json!({"embedding": {"source": "client", "dimension": 5000}}),
    )
    .await;
    assert_eq!(too_long.error_fields(), vec!["embedding.dimension"]);
    assert_eq!(settings(&client).await["embedding"]["source"], "deployment");

    let declared = settings_patch(
        &client,
        json!({"embedding": {"source": "client", "dimension": 4}}),
    )
    .await;
    assert_eq!(declared.status, 200, "{}", declared.body);
    assert_eq!(
        declared.body["embedding"],
        json!({"source": "client", "model": "client-vectors-4", "dimension": 4})
    );

    // Writes must carry vectors of the declared length; a refused write stores nothing.
    let without = client.add(json!([{"content": "tea at dawn"}])).await;
    without.assert_problem(422, "validation-failed");
    assert_eq!(without.error_fields(), vec!["memories[0].embedding"]);
    let wrong_length = client
        .add(json!([{"content": "tea at dawn", "embedding": [1.0, 0.0]}]))
        .await;
    assert_eq!(wrong_length.error_fields(), vec!["memories[0].embedding"]);
    let zeros = client
        .add(json!([{"content": "tea at dawn", "embedding": [0.0, 0.0, 0.0, 0.0]}]))
        .await;
    assert_eq!(zeros.error_fields(), vec!["memories[0].embedding"]);
    let mixed = client
        .add(json!([
            {"content": "tea at dawn", "embedding": [1.0, 0.0, 0.0, 0.0]},
            {"content": "no vector here"},
        ]))
        .await;
    assert_eq!(mixed.error_fields(), vec!["memories[1].embedding"]);
    assert_eq!(
        client.list("").await.body["memories"]
            .as_array()
            .unwrap()
            .len(),
        0,
        "nothing was stored by the refused writes"
    );

    let added = client
        .add(json!([
            {"content": "Mara drinks green tea at dawn", "user_id": "mara", "embedding": [1.0, 0.0, 0.0, 0.0]},
            {"content": "Mara rides a red bicycle", "user_id": "mara", "embedding": [0.0, 1.0, 0.0, 0.0]},
            {"content": "Mara keeps bees on the roof", "user_id": "mara", "embedding": [0.0, 0.0, 1.0, 0.2]},
            {"content": "Olek collects stamps", "user_id": "olek", "embedding": [0.0, 1.0, 0.1, 0.0]},
        ]))
        .await;
    assert_eq!(added.status, 201, "{}", added.body);

    // A person in the console types words, never a vector: the same search use case looks
    // them up by words in this project, where an agent's search must bring its vector.
    let (http, cookie) = server.console_owner_session().await;
    let looked_up = http
        .post(format!("{}/console/api/memories", server.base_url))
        .header("Cookie", &cookie)
        .header("Content-Type", "application/json")
        .body(r#"{"filters":{"meaning":"bicycle"}}"#)
        .send()
        .await
        .unwrap();
    let status = looked_up.status().as_u16();
    let page = looked_up.text().await.unwrap_or_default();
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("red bicycle") && !page.contains("stamps"),
        "the console finds the memory by its words: {page}"
    );

    // Dense search ranks by the client's query vector, not by the text.
    let dense = client
        .search(
            json!({"query": "anything at all", "user_id": "mara", "retrieval": "dense",
            "query_vector": [0.1, 0.9, 0.0, 0.0]}),
        )
        .await;
    assert_eq!(dense.status, 200, "{}", dense.body);
    assert_eq!(
        result_contents(&dense.body).first().map(String::as_str),
        Some("Mara rides a red bicycle"),
        "{}",
        dense.body
    );
    assert!(
        !result_contents(&dense.body).contains(&"Olek collects stamps".to_string()),
        "another end-user's memory never comes back"
    );
    // Hybrid: the text still feeds the keyword signal.
    let hybrid = client
        .search(json!({"query": "bees", "user_id": "mara",
            "query_vector": [0.5, 0.5, 0.5, 0.0]}))
        .await;
    assert_eq!(
        result_contents(&hybrid.body).first().map(String::as_str),
        Some("Mara keeps bees on the roof"),
        "{}",
        hybrid.body
    );
    // Keyword retrieval needs no vector; dense and hybrid do.
    let keyword = client
        .search(json!({"query": "bicycle", "retrieval": "keyword"}))
        .await;
    assert_eq!(
        result_contents(&keyword.body),
        vec!["Mara rides a red bicycle"],
        "{}",
        keyword.body
    );
    let no_vector = client.search(json!({"query": "bicycle"})).await;
    no_vector.assert_problem(422, "validation-failed");
    assert_eq!(no_vector.error_fields(), vec!["query_vector"]);
    let short_vector = client
        .search(json!({"query": "bicycle", "query_vector": [1.0]}))
        .await;
    assert_eq!(short_vector.error_fields(), vec!["query_vector"]);

    // New content comes with its new vector.
    let bees = added.body["memories"][2]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let no_new_vector = client
        .patch(&bees, None, json!({"content": "Mara keeps wasps"}))
        .await;
    assert_eq!(no_new_vector.error_fields(), vec!["embedding"]);
    let edited = client
        .patch(
            &bees,
            None,
            json!({"content": "Mara keeps two beehives", "embedding": [0.0, 0.0, 0.0, 1.0]}),
        )
        .await;
    assert_eq!(edited.status, 200, "{}", edited.body);
    let moved = client
        .search(
            json!({"query": "x", "user_id": "mara", "retrieval": "dense",
            "query_vector": [0.0, 0.0, 0.0, 1.0], "top_k": 1}),
        )
        .await;
    assert_eq!(
        result_contents(&moved.body),
        vec!["Mara keeps two beehives"]
    );

    // Engram cannot embed for this project: file ingest and derivation are refused with why;
    // messages are still stored.
    client
        .send(
            client
                .request(
                    reqwest::Method::POST,
                    "/v1/files?name=note.txt&user_id=mara",
                )
                .header("content-type", "text/plain")
                .body("A note about tea."),
        )
        .await
        .assert_problem(409, "embedding-unavailable");
    let derive = client
        .send(
            client
                .request(reqwest::Method::POST, "/v1/sessions/chat-1/messages")
                .json(
                    &json!({"messages": [{"role": "user", "content": "I like tea"}],
                    "user_id": "mara", "derive_memories": true}),
                ),
        )
        .await;
    derive.assert_problem(409, "embedding-unavailable");
    let stored_only = client
        .send(
            client
                .request(reqwest::Method::POST, "/v1/sessions/chat-1/messages")
                .json(
                    &json!({"messages": [{"role": "user", "content": "I like tea"}],
                    "user_id": "mara"}),
                ),
        )
        .await;
    assert_eq!(stored_only.status, 201, "{}", stored_only.body);
    assert!(
        stored_only.body["derivation"].is_null(),
        "{}",
        stored_only.body
    );

    // A move to a model this deployment does not offer is refused, memories or not (moving
    // to one it offers re-embeds them: see the re-embedding test).
    settings_patch(&client, json!({"embedding": {"source": "provider"}}))
        .await
        .assert_problem(409, "embedding-unavailable");

    // Nothing was embedded by Engram for this project's memories.
    let usage = engram_tests::eventually("the writes to be metered", || async {
        let usage = client
            .send(client.request(reqwest::Method::GET, "/v1/usage"))
            .await;
        if usage.body["totals"]["memories_written"] == 4 {
            Ok(usage)
        } else {
            Err(usage.body.to_string())
        }
    })
    .await;
    assert_eq!(usage.body["totals"]["tokens_embedded"], 0, "{}", usage.body);

    // Erasure finds the subject's points in the project's own index.
    let requested = client
        .send(client.request(reqwest::Method::POST, "/v1/subjects/olek/erasure"))
        .await;
    assert_eq!(requested.status, 202, "{}", requested.body);
    let receipt = finished_task(&client, requested.body["id"].as_str().unwrap()).await;
    assert_eq!(receipt["result"]["removed"]["index_points"], 1, "{receipt}");
    assert_eq!(
        receipt["result"]["verification"]["verified"], true,
        "{receipt}"
    );

    // After a restart the project's index is still there, apart from the default one.
    let (_, data_dir, _guard) = server.stop();
    assert!(data_dir.join("index_client-vectors-4").is_dir());
    let server = TestServer::spawn_in(&data_dir).await.unwrap();
    let client = server.client();
    let again = client
        .search(
            json!({"query": "x", "user_id": "mara", "retrieval": "dense",
            "query_vector": [1.0, 0.0, 0.0, 0.0], "top_k": 1}),
        )
        .await;
    assert_eq!(
        result_contents(&again.body),
        vec!["Mara drinks green tea at dawn"]
    );

    // Once its memories are deleted, the project may move to a model Engram runs.
    for memory in client.list("").await.body["memories"].as_array().unwrap() {
        let deleted = client.delete(memory["id"].as_str().unwrap()).await;
        assert_eq!(deleted.status, 204);
    }
    let moved = settings_patch(&client, json!({"embedding": {"source": "local"}})).await;
    assert_eq!(moved.status, 200, "{}", moved.body);
    let refused = client
        .add(json!([{"content": "tea", "embedding": [1.0, 0.0, 0.0, 0.0]}]))
        .await;
    assert_eq!(refused.error_fields(), vec!["memories[0].embedding"]);
    assert_eq!(
        client
            .add(json!([{"content": "Mara drinks green tea"}]))
            .await
            .status,
        201
    );
    assert_eq!(
        client
            .search_contents("a hot drink in the morning")
            .await
            .first()
            .map(String::as_str),
        Some("Mara drinks green tea")
    );
}

/// One deployment, two projects: the default one embeds with the provider (the scripted
/// stand-in: a third-party API we cannot run here), the other chose the local model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn projects_of_one_deployment_choose_the_provider_or_the_local_model() {
    let provider = EmbeddingStandIn::start(32).await.unwrap();
    let directory = tempfile::tempdir().unwrap();
    let environment = provider.deployment_environment();
    let server = TestServer::spawn_with(directory.path(), &environment)
        .await
        .unwrap();
    let on_provider = server.client();
    let (_, local_key) = server.create_project("local-model").unwrap();
    let on_local = server.client_with_key(&local_key);

    assert_eq!(
        settings(&on_provider).await["embedding"],
        json!({"source": "deployment", "model": "stand-in-bag-of-words", "dimension": 32})
    );
    let chosen = settings_patch(&on_local, json!({"embedding": {"source": "local"}})).await;
    assert_eq!(chosen.status, 200, "{}", chosen.body);
    assert_eq!(
        chosen.body["embedding"],
        json!({"source": "local", "model": "all-MiniLM-L6-v2", "dimension": 384})
    );

    let before = provider.texts_embedded();
    let added = on_local
        .add(json!([
            {"content": "Iris drinks green tea every morning"},
            {"content": "Iris repairs old radios"},
        ]))
        .await;
    assert_eq!(added.status, 201, "{}", added.body);
    assert_eq!(
        added.body["memories"][0]["embedding_model"], "all-MiniLM-L6-v2",
        "{}",
        added.body
    );
    // Meaning, not words: only the local model's dense vectors can find this.
    let found = on_local
        .search(json!({"query": "a hot beverage", "retrieval": "dense", "top_k": 1}))
        .await;
    assert_eq!(
        result_contents(&found.body),
        vec!["Iris drinks green tea every morning"],
        "{}",
        found.body
    );
    assert_eq!(
        provider.texts_embedded(),
        before,
        "the local project sent nothing to the provider"
    );

    let added = on_provider
        .add(json!([{"content": "Jonas drinks black coffee"}]))
        .await;
    assert_eq!(added.status, 201, "{}", added.body);
    assert_eq!(provider.texts_embedded(), before + 1);
    assert_eq!(
        on_provider.search_contents("coffee").await,
        vec!["Jonas drinks black coffee"],
        "each project sees only its own memories, in its own index"
    );
    assert!(directory.path().join("index").is_dir());
    assert!(
        directory
            .path()
            .join("index_stand-in-bag-of-words")
            .is_dir()
    );

    // Both spaces are checked and served again after a restart.
    let (_, data_dir, _guard) = server.stop();
    let server = TestServer::spawn_with(&data_dir, &environment)
        .await
        .unwrap();
    let on_local = server.client_with_key(&local_key);
    assert_eq!(
        on_local
            .search_contents("radio repair")
            .await
            .first()
            .map(String::as_str),
        Some("Iris repairs old radios")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_on_the_multilingual_model_finds_chinese_memories_with_english_questions() {
    let server = TestServer::spawn().await.unwrap();
    let (_, key) = server.create_project("bilingual").unwrap();
    let client = server.client_with_key(&key);

    let unknown = settings_patch(
        &client,
        json!({"embedding": {"source": "local", "model": "klingon"}}),
    )
    .await;
    assert_eq!(unknown.status, 422, "{}", unknown.body);
    assert!(
        unknown.body.to_string().contains("embedding.model"),
        "{}",
        unknown.body
    );
    let chosen = settings_patch(
        &client,
        json!({"embedding": {"source": "local", "model": "multilingual"}}),
    )
    .await;
    assert_eq!(chosen.status, 200, "{}", chosen.body);
    assert_eq!(
        chosen.body["embedding"],
        json!({"source": "local", "model": "multilingual-e5-small", "dimension": 384})
    );

    let added = client
        .add(json!([
            {"content": "用户住在上海，喜欢喝乌龙茶。", "user_id": "ana"},
            {"content": "用户每周六上午去游泳。", "user_id": "ana"},
            {"content": "The user's sister is a nurse in Lyon.", "user_id": "ben"},
            {"content": "The user commutes by bicycle.", "user_id": "ben"},
        ]))
        .await;
    assert_eq!(added.status, 201, "{}", added.body);
    assert_eq!(
        added.body["memories"][0]["embedding_model"], "multilingual-e5-small",
        "{}",
        added.body
    );
    // No word in common: only the multilingual vectors can meet these. (Each end-user's
    // memories are in one language: beside memories in the question's own language, a
    // memory in the other ranks low — see the engine's reference.)
    for (question, user, expected) in [
        (
            "where does the user live?",
            "ana",
            "用户住在上海，喜欢喝乌龙茶。",
        ),
        (
            "when does she go swimming?",
            "ana",
            "用户每周六上午去游泳。",
        ),
        (
            "用户的姐姐做什么工作？",
            "ben",
            "The user's sister is a nurse in Lyon.",
        ),
    ] {
        let found = client
            .search(json!({"query": question, "user_id": user, "retrieval": "dense", "top_k": 1}))
            .await;
        assert_eq!(found.status, 200, "{}", found.body);
        assert_eq!(
            result_contents(&found.body),
            vec![expected],
            "{question}: {}",
            found.body
        );
    }
    // e5 puts two facts that differ in one value at a cosine of 0.977: read on the
    // thresholds' scale, neither hides the other as a near-duplicate.
    let added = client
        .add(json!([
            {"content": "用户住在上海。", "user_id": "cai"},
            {"content": "用户住在北京。", "user_id": "cai"},
        ]))
        .await;
    assert_eq!(added.status, 201, "{}", added.body);
    let found = client
        .search(json!({"query": "where does the user live?", "user_id": "cai", "top_k": 5}))
        .await;
    let mut cities = result_contents(&found.body);
    cities.sort();
    assert_eq!(
        cities,
        vec!["用户住在上海。", "用户住在北京。"],
        "{}",
        found.body
    );

    // The default project stays on MiniLM, in its own index.
    assert_eq!(
        settings(&server.client()).await["embedding"]["model"],
        "all-MiniLM-L6-v2"
    );

    // The choice and the index survive a restart.
    let (_, data_dir, _guard) = server.stop();
    let server = TestServer::spawn_with(&data_dir, &[]).await.unwrap();
    let client = server.client_with_key(&key);
    let found = client
        .search(json!({"query": "what does the user drink?", "user_id": "ana", "retrieval": "dense", "top_k": 1}))
        .await;
    assert_eq!(
        result_contents(&found.body),
        vec!["用户住在上海，喜欢喝乌龙茶。"],
        "{}",
        found.body
    );
}

/// The task a change of a project's embedding started (`embedding_change.task_id`).
fn move_task_id(started: &ApiResponse) -> String {
    started.body["embedding_change"]["task_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no move was started: {}", started.body))
        .to_string()
}

/// Waits until the runner holds the task `task_id`.
async fn running(client: &ApiClient, task_id: &str) {
    engram_tests::eventually("the move to be running", || async {
        match task_status(client, task_id).await.as_str() {
            "running" => Ok(()),
            other => Err(other.to_string()),
        }
    })
    .await;
}

async fn task_status(client: &ApiClient, task_id: &str) -> String {
    let task = client
        .send(client.request(reqwest::Method::GET, &format!("/v1/tasks/{task_id}")))
        .await;
    assert_eq!(task.status, 200, "{}", task.body);
    task.body["status"].as_str().unwrap_or_default().to_string()
}

fn listed_models(body: &Value) -> Vec<String> {
    body["memories"]
        .as_array()
        .map(|memories| {
            memories
                .iter()
                .filter_map(|memory| memory["embedding_model"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Moving projects with memories to the provider (a TEST DOUBLE of a third-party
/// embedding API, held or failing on demand): a failed move leaves the project on its
/// model; a held one shows searches answering from the old space, refuses a second move,
/// takes writes, and after the switch finds old and new memories in the new space.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_with_memories_moves_to_another_model_while_its_searches_keep_answering() {
    let provider = EmbeddingStandIn::start(32).await.unwrap();
    let directory = tempfile::tempdir().unwrap();
    let environment = provider.deployment_environment();
    let server = TestServer::spawn_with(directory.path(), &environment)
        .await
        .unwrap();
    let provider_space =
        json!({"source": "provider", "model": "stand-in-bag-of-words", "dimension": 32});
    let minilm = json!({"source": "local", "model": "all-MiniLM-L6-v2", "dimension": 384});

    // A move that fails (the provider is down) leaves the project where it was.
    let (_, failing_key) = server.create_project("move-fails").unwrap();
    let failing = server.client_with_key(&failing_key);
    assert_eq!(
        settings_patch(&failing, json!({"embedding": {"source": "local"}}))
            .await
            .status,
        200
    );
    let added = failing
        .add(json!([{"content": "Iris drinks green tea every morning"}]))
        .await;
    assert_eq!(added.status, 201, "{}", added.body);
    provider.fail(true);
    let started = settings_patch(&failing, json!({"embedding": {"source": "provider"}})).await;
    assert_eq!(started.status, 200, "{}", started.body);
    assert_eq!(started.body["embedding"], minilm, "{}", started.body);
    assert_eq!(started.body["embedding_change"]["to"], provider_space);
    let task_id = move_task_id(&started);
    let task = finished_task(&failing, &task_id).await;
    assert_eq!(task["status"], "failed", "{task}");
    let after = settings(&failing).await;
    assert_eq!(after["embedding"], minilm, "{after}");
    assert!(after["embedding_change"].is_null(), "{after}");
    let found = failing
        .search(json!({"query": "a hot beverage", "retrieval": "dense", "top_k": 1}))
        .await;
    assert_eq!(
        result_contents(&found.body),
        vec!["Iris drinks green tea every morning"],
        "the old space still answers: {}",
        found.body
    );
    provider.fail(false);

    // Setting the embedding back to the one in use cancels a move under way.
    provider.hold();
    let started = settings_patch(&failing, json!({"embedding": {"source": "provider"}})).await;
    assert_eq!(started.status, 200, "{}", started.body);
    let task_id = move_task_id(&started);
    running(&failing, &task_id).await;
    let cancelled = settings_patch(&failing, json!({"embedding": {"source": "local"}})).await;
    assert_eq!(cancelled.status, 200, "{}", cancelled.body);
    assert_eq!(cancelled.body["embedding"], minilm, "{}", cancelled.body);
    assert!(
        cancelled.body["embedding_change"].is_null(),
        "{}",
        cancelled.body
    );
    provider.release();
    let task = finished_task(&failing, &task_id).await;
    assert_eq!(task["status"], "failed", "{task}");
    assert!(
        task["error"]
            .as_str()
            .unwrap_or_default()
            .contains("cancelled"),
        "{task}"
    );
    assert_eq!(settings(&failing).await["embedding"], minilm);

    // A project with memories on the local model moves to the provider.
    let (_, key) = server.create_project("moving").unwrap();
    let client = server.client_with_key(&key);
    assert_eq!(
        settings_patch(&client, json!({"embedding": {"source": "local"}}))
            .await
            .status,
        200
    );
    let mut memories = vec![
        json!({"content": "Iris drinks green tea every morning", "user_id": "iris"}),
        json!({"content": "Iris repairs old radios", "user_id": "iris", "key": "hobby"}),
    ];
    memories.extend((0..70).map(|number| {
        json!({"content": format!("Ledger entry {number}: the invoice for order {number} was paid"), "user_id": "ledger"})
    }));
    let added = client.add(Value::Array(memories)).await;
    assert_eq!(added.status, 201, "{}", added.body);
    let superseded = client
        .add(json!([{"content": "Iris repairs old radios and clocks", "user_id": "iris", "key": "hobby"}]))
        .await;
    assert_eq!(superseded.status, 201, "{}", superseded.body);

    // Held, the provider keeps the move under way for as long as this test looks.
    provider.hold();
    let started = settings_patch(&client, json!({"embedding": {"source": "provider"}})).await;
    assert_eq!(started.status, 200, "{}", started.body);
    assert_eq!(started.body["embedding"], minilm, "{}", started.body);
    assert_eq!(started.body["embedding_change"]["to"], provider_space);
    let task_id = move_task_id(&started);
    running(&client, &task_id).await;
    // Searches answer from the old space: meaning, which only MiniLM reads here.
    for (query, expected) in [
        ("a hot beverage", "Iris drinks green tea every morning"),
        ("fixing electronics", "Iris repairs old radios and clocks"),
    ] {
        let found = client
            .search(json!({"query": query, "user_id": "iris", "retrieval": "dense", "top_k": 1}))
            .await;
        assert_eq!(found.status, 200, "{}", found.body);
        assert_eq!(
            result_contents(&found.body),
            vec![expected],
            "{}",
            found.body
        );
    }
    // One move at a time.
    settings_patch(&client, json!({"embedding": {"source": "deployment"}}))
        .await
        .assert_problem(409, "conflict");
    // A write during the move is stored in the old space, and moves too.
    let during = client
        .add(json!([{"content": "Iris bought a vintage radio in Lyon", "user_id": "iris"}]))
        .await;
    assert_eq!(during.status, 201, "{}", during.body);
    assert_eq!(
        during.body["memories"][0]["embedding_model"],
        "all-MiniLM-L6-v2"
    );
    assert_eq!(task_status(&client, &task_id).await, "running");
    let shown = settings(&client).await;
    assert_eq!(shown["embedding"], minilm, "{shown}");
    assert_eq!(shown["embedding_change"]["task_id"], task_id.as_str());

    provider.release();
    let task = finished_task(&client, &task_id).await;
    assert_eq!(task["status"], "succeeded", "{task}");
    assert_eq!(task["result"]["model"], "stand-in-bag-of-words", "{task}");
    // Every searchable memory moved: the 72 first ones (one now superseded, which as_of
    // searches read), the one superseding it and the one written during the move.
    assert_eq!(task["result"]["memories"], 74, "{task}");
    assert_eq!(
        task["progress"]["done"], task["progress"]["total"],
        "{task}"
    );
    let after = settings(&client).await;
    assert_eq!(after["embedding"], provider_space, "{after}");
    assert!(after["embedding_change"].is_null(), "{after}");

    // Old memories and the one written during the move are found in the new space.
    for (query, expected) in [
        (
            "green tea every morning",
            "Iris drinks green tea every morning",
        ),
        ("vintage radio Lyon", "Iris bought a vintage radio in Lyon"),
    ] {
        let found = client
            .search(json!({"query": query, "user_id": "iris", "retrieval": "dense", "top_k": 1}))
            .await;
        assert_eq!(found.status, 200, "{}", found.body);
        assert_eq!(
            result_contents(&found.body),
            vec![expected],
            "{}",
            found.body
        );
    }
    let listed = client.list("?user_id=iris&limit=100").await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    let models = listed_models(&listed.body);
    assert_eq!(models.len(), 3, "{}", listed.body);
    assert!(
        models.iter().all(|model| model == "stand-in-bag-of-words"),
        "{models:?}"
    );
    // New writes go to the new space.
    let added = client
        .add(json!([{"content": "Iris sold the vintage radio", "user_id": "iris"}]))
        .await;
    assert_eq!(added.status, 201, "{}", added.body);
    assert_eq!(
        added.body["memories"][0]["embedding_model"],
        "stand-in-bag-of-words"
    );
}

/// A project's memories, written on MiniLM, moved to the multilingual model: afterwards an
/// English question finds a Chinese memory, which MiniLM's space could not, and the
/// embedding the move did is metered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_memories_answer_questions_in_the_other_language_after_a_move_to_the_multilingual_model()
 {
    let server = TestServer::spawn().await.unwrap();
    let (_, key) = server.create_project("to-multilingual").unwrap();
    let client = server.client_with_key(&key);
    let added = client
        .add(json!([
            {"content": "用户住在上海，喜欢喝乌龙茶。", "user_id": "ana"},
            {"content": "用户每周六上午去游泳。", "user_id": "ana"},
            {"content": "The user's sister is a nurse in Lyon.", "user_id": "ben"},
        ]))
        .await;
    assert_eq!(added.status, 201, "{}", added.body);
    assert_eq!(
        added.body["memories"][0]["embedding_model"],
        "all-MiniLM-L6-v2"
    );
    let tokens_embedded = || async {
        let usage = client
            .send(client.request(reqwest::Method::GET, "/v1/usage"))
            .await;
        usage.body["totals"]["tokens_embedded"]
            .as_u64()
            .unwrap_or(0)
    };
    let metered_before = engram_tests::eventually("the writes to be metered", || async {
        match tokens_embedded().await {
            0 => Err("nothing metered yet".to_string()),
            tokens => Ok(tokens),
        }
    })
    .await;

    let started = settings_patch(
        &client,
        json!({"embedding": {"source": "local", "model": "multilingual"}}),
    )
    .await;
    assert_eq!(started.status, 200, "{}", started.body);
    assert_eq!(
        started.body["embedding_change"]["to"]["model"], "multilingual-e5-small",
        "{}",
        started.body
    );
    let task_id = move_task_id(&started);
    let task = finished_task(&client, &task_id).await;
    assert_eq!(task["status"], "succeeded", "{task}");
    assert_eq!(
        settings(&client).await["embedding"],
        json!({"source": "local", "model": "multilingual-e5-small", "dimension": 384})
    );
    for (question, user, expected) in [
        (
            "where does the user live?",
            "ana",
            "用户住在上海，喜欢喝乌龙茶。",
        ),
        (
            "用户的姐姐做什么工作？",
            "ben",
            "The user's sister is a nurse in Lyon.",
        ),
    ] {
        let found = client
            .search(json!({"query": question, "user_id": user, "retrieval": "dense", "top_k": 1}))
            .await;
        assert_eq!(found.status, 200, "{}", found.body);
        assert_eq!(
            result_contents(&found.body),
            vec![expected],
            "{question}: {}",
            found.body
        );
    }
    let task_tokens = task["result"]["tokens_embedded"].as_u64().unwrap_or(0);
    assert!(task_tokens > 0, "{task}");
    engram_tests::eventually("the move's embedding to be metered", || async {
        let now = tokens_embedded().await;
        if now >= metered_before + task_tokens {
            Ok(())
        } else {
            Err(format!("{now} tokens metered; {metered_before} before the move, which embedded {task_tokens}"))
        }
    })
    .await;
}
