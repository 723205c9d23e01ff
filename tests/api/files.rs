//! File ingest end to end against the real engine and model: a Markdown file becomes one
//! memory per chunk (headed by its section, `source = file`, linked to the file) through a
//! task with progress; the right chunk is recalled; bytes, memories and tokens are billed
//! exactly once; bad uploads are refused with the field named and change nothing; files are
//! confined to their project and end-user, deleted with their memories, and erased with
//! their subject.

use engram_tests::{ApiClient, ApiResponse, TestServer};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const HANDBOOK: &str = "# Field handbook

Welcome to the Orchard Street community garden.

## Watering

Water the raised beds before 9 am in summer. The hose key hangs inside the blue shed, on the
left hook. Never water the herb spiral on rainy days.

## Tools

The wheelbarrow with the flat tyre is kept for compost only. Return every spade cleaned.

## Emergencies

If someone is stung by a wasp, the first-aid kit is in the red box under the bench.
";

async fn upload(
    client: &ApiClient,
    query: &str,
    content_type: &str,
    body: impl Into<reqwest::Body>,
) -> ApiResponse {
    client
        .send(
            client
                .request(reqwest::Method::POST, &format!("/v1/files{query}"))
                .header("content-type", content_type)
                .body(body),
        )
        .await
}

/// Polls the task until it ended; returns it.
async fn finished_task(client: &ApiClient, task_id: &str) -> Value {
    let started = Instant::now();
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
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn model_tokens(text: &str) -> i64 {
    let tokenizer =
        tokenizers::Tokenizer::from_file(engram_tests::model_dir().join("tokenizer.json")).unwrap();
    let encoding = tokenizer.encode(text, true).unwrap();
    encoding
        .get_attention_mask()
        .iter()
        .filter(|&&mask| mask == 1)
        .count() as i64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_markdown_file_becomes_searchable_chunks_billed_once() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    let uploaded = upload(
        &client,
        "?name=handbook.md&user_id=gardener-7",
        "text/markdown; charset=utf-8",
        HANDBOOK,
    )
    .await;
    assert_eq!(uploaded.status, 202, "{}", uploaded.body);
    let file_id = uploaded.body["file"]["id"].as_str().unwrap().to_string();
    assert_eq!(uploaded.body["file"]["format"], "markdown");
    assert_eq!(uploaded.body["file"]["size_bytes"], HANDBOOK.len());
    let task = finished_task(&client, uploaded.body["task"]["id"].as_str().unwrap()).await;
    assert_eq!(task["status"], "succeeded", "{task}");
    assert_eq!(task["kind"], "file_ingest");
    // One chunk per section with text: the title's welcome line, watering, tools, emergencies.
    assert_eq!(task["progress"], json!({"done": 4, "total": 4}));

    let file = client
        .send(client.request(reqwest::Method::GET, &format!("/v1/files/{file_id}")))
        .await;
    assert_eq!(file.body["status"], "ingested", "{}", file.body);
    assert_eq!(file.body["chunk_count"], 4);
    let memory_ids: Vec<String> = file.body["memory_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| id.as_str().unwrap().to_string())
        .collect();
    assert_eq!(memory_ids.len(), 4);
    let mut contents = Vec::new();
    for (index, memory_id) in memory_ids.iter().enumerate() {
        let memory = client.get(memory_id).await;
        assert_eq!(memory.status, 200);
        assert_eq!(memory.body["source"], "file");
        assert_eq!(memory.body["user_id"], "gardener-7");
        assert_eq!(memory.body["metadata"]["file_id"], file_id.as_str());
        assert_eq!(memory.body["metadata"]["file_name"], "handbook.md");
        assert_eq!(memory.body["metadata"]["chunk_index"], index);
        assert_eq!(memory.body["metadata"]["chunk_count"], 4);
        contents.push(memory.body["content"].as_str().unwrap().to_string());
    }
    assert!(
        contents[1].starts_with("Field handbook > Watering\n\nWater the raised beds"),
        "{}",
        contents[1]
    );

    // The chunk that answers the question is recalled first.
    let found = client
        .search(
            json!({"query": "where is the key for the hose?", "user_id": "gardener-7", "top_k": 3}),
        )
        .await;
    assert_eq!(
        found.body["results"][0]["memory"]["id"],
        memory_ids[1].as_str(),
        "{}",
        found.body
    );

    // Billed once: the bytes, the 4 memories and the tokens of their contents.
    let tokens: i64 = contents.iter().map(|content| model_tokens(content)).sum();
    let usage = client
        .send(client.request(reqwest::Method::GET, "/v1/usage"))
        .await;
    assert_eq!(
        usage.body["totals"]["file_bytes"],
        HANDBOOK.len(),
        "{}",
        usage.body
    );
    assert_eq!(usage.body["totals"]["memories_written"], 4);
    // The search embedded its query too (the only other tokens).
    let query_tokens = model_tokens("where is the key for the hose?");
    let started = Instant::now();
    loop {
        let usage = client
            .send(client.request(reqwest::Method::GET, "/v1/usage"))
            .await;
        if usage.body["totals"]["tokens_embedded"] == tokens + query_tokens {
            break;
        }
        assert!(
            started.elapsed() < engram_tests::patience(),
            "{} vs {}",
            usage.body,
            tokens + query_tokens
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Deleting the file deletes its memories.
    let deleted = client
        .send(client.request(reqwest::Method::DELETE, &format!("/v1/files/{file_id}")))
        .await;
    assert_eq!(deleted.status, 204, "{}", deleted.body);
    for memory_id in &memory_ids {
        client.get(memory_id).await.assert_problem(404, "not-found");
    }
    client
        .send(client.request(reqwest::Method::GET, &format!("/v1/files/{file_id}")))
        .await
        .assert_problem(404, "not-found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_uploads_are_refused_naming_what_is_wrong_and_store_nothing() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    for (query, field) in [
        ("", "name"),
        ("?name=../../etc/passwd", "name"),
        ("?name=a%00b.md", "name"),
        ("?name=ok.md&kind=gossip", "kind"),
        ("?name=ok.md&user_id=", "user_id"),
    ] {
        let refused = upload(&client, query, "text/markdown", "Some text.").await;
        refused.assert_problem(422, "validation-failed");
        assert_eq!(refused.error_fields(), [field], "{query}: {}", refused.body);
    }
    let empty = upload(&client, "?name=empty.txt", "text/plain", "  \n").await;
    empty.assert_problem(422, "validation-failed");
    assert_eq!(empty.error_fields(), ["body"]);
    let binary = upload(
        &client,
        "?name=data.txt",
        "text/plain",
        vec![0xffu8, 0xfe, 0x00],
    )
    .await;
    binary.assert_problem(422, "validation-failed");
    assert!(
        binary.body["detail"]
            .as_str()
            .unwrap()
            .contains("not UTF-8")
    );
    upload(&client, "?name=photo.png", "image/png", "not really")
        .await
        .assert_problem(415, "unsupported-media-type");
    upload(
        &client,
        "?name=report.pdf",
        "application/octet-stream",
        "%PDF",
    )
    .await
    .assert_problem(415, "unsupported-media-type");
    let too_big = upload(
        &client,
        "?name=big.txt",
        "text/plain",
        "a".repeat(4 * 1024 * 1024 + 1),
    )
    .await;
    too_big.assert_problem(413, "payload-too-large");
    assert!(
        too_big.body["detail"].as_str().unwrap().contains("4 MiB"),
        "{}",
        too_big.body
    );
    // Nothing was stored or billed.
    assert!(client.all_listed_ids("").await.is_empty());
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let usage = client
        .send(client.request(reqwest::Method::GET, "/v1/usage"))
        .await;
    assert_eq!(usage.body["totals"]["file_bytes"], 0);
    assert_eq!(usage.body["totals"]["memories_written"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_stay_in_their_project_and_with_their_end_user_and_go_with_an_erasure() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    let minted = client
        .send(
            client
                .request(reqwest::Method::POST, "/v1/end-user-tokens")
                .json(&json!({"user_id": "rosa"})),
        )
        .await;
    let rosa = server.client_with_key(minted.body["token"].as_str().unwrap());
    // An end-user token uploads for its own end-user only.
    upload(
        &rosa,
        "?name=diary.txt&user_id=someone-else",
        "text/plain",
        "Rosa's notes.",
    )
    .await
    .assert_problem(403, "forbidden");
    let uploaded = upload(
        &rosa,
        "?name=diary.txt",
        "text/plain",
        "Rosa plants tulips in October.",
    )
    .await;
    assert_eq!(uploaded.status, 202, "{}", uploaded.body);
    assert_eq!(uploaded.body["file"]["user_id"], "rosa");
    let file_id = uploaded.body["file"]["id"].as_str().unwrap().to_string();
    let task = finished_task(&client, uploaded.body["task"]["id"].as_str().unwrap()).await;
    assert_eq!(task["status"], "succeeded", "{task}");

    // Another project, and another end-user of this one, do not see it.
    let (_, other_key) = server.create_project("other").unwrap();
    server
        .client_with_key(&other_key)
        .send(
            server
                .client_with_key(&other_key)
                .request(reqwest::Method::GET, &format!("/v1/files/{file_id}")),
        )
        .await
        .assert_problem(404, "not-found");
    let minted = client
        .send(
            client
                .request(reqwest::Method::POST, "/v1/end-user-tokens")
                .json(&json!({"user_id": "tomas"})),
        )
        .await;
    let tomas = server.client_with_key(minted.body["token"].as_str().unwrap());
    tomas
        .send(tomas.request(reqwest::Method::GET, &format!("/v1/files/{file_id}")))
        .await
        .assert_problem(404, "not-found");
    assert_eq!(
        rosa.send(rosa.request(reqwest::Method::GET, &format!("/v1/files/{file_id}")))
            .await
            .status,
        200
    );

    // Erasing rosa removes the file with her memories, and the receipt counts it.
    let erasure = client
        .send(client.request(reqwest::Method::POST, "/v1/subjects/rosa/erasure"))
        .await;
    assert_eq!(erasure.status, 202, "{}", erasure.body);
    let receipt = finished_task(&client, erasure.body["id"].as_str().unwrap()).await;
    assert_eq!(receipt["status"], "succeeded", "{receipt}");
    assert_eq!(receipt["result"]["removed"]["files"], 1, "{receipt}");
    assert_eq!(receipt["result"]["removed"]["memories"], 1, "{receipt}");
    client
        .send(client.request(reqwest::Method::GET, &format!("/v1/files/{file_id}")))
        .await
        .assert_problem(404, "not-found");
}
