//! Session state end to end: versioned JSON checkpoints that survive a restart, writes that
//! are conditional on the version (If-Match) or on absence (If-None-Match: *), exactly one
//! winner among concurrent writers of one version, limits with the field named, values
//! confined to their project and end-user, and removal with a subject erasure.

use engram_tests::{ApiClient, ApiResponse, TestServer};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

async fn put(client: &ApiClient, path: &str, body: Value, headers: &[(&str, &str)]) -> ApiResponse {
    let mut request = client
        .request(reqwest::Method::PUT, &format!("/v1/sessions/{path}"))
        .json(&body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    client.send(request).await
}

async fn get(client: &ApiClient, path: &str) -> ApiResponse {
    client
        .send(client.request(reqwest::Method::GET, &format!("/v1/sessions/{path}")))
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_resumes_from_its_last_checkpoint_after_a_restart() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::spawn_in(directory.path()).await.unwrap();
    let client = server.client();
    let mut version = 0;
    for step in 1..=5 {
        let if_match = format!("\"{version}\"");
        let headers: Vec<(&str, &str)> = if version == 0 {
            vec![("If-None-Match", "*")]
        } else {
            vec![("If-Match", if_match.as_str())]
        };
        let written = put(
            &client,
            "run-42/state/checkpoint",
            json!({"value": {"step": step, "done": ["fetch", "parse"]}}),
            &headers,
        )
        .await;
        assert_eq!(
            written.status,
            if step == 1 { 201 } else { 200 },
            "{}",
            written.body
        );
        version = written.body["version"].as_i64().unwrap();
        assert_eq!(version, step);
    }
    // The process dies; a new one serves the same data.
    let (_, data_dir, _) = server.stop();
    let server = TestServer::spawn_in(&data_dir).await.unwrap();
    let client = server.client();
    let resumed = get(&client, "run-42/state/checkpoint").await;
    assert_eq!(resumed.status, 200, "{}", resumed.body);
    assert_eq!(resumed.body["value"]["step"], 5);
    assert_eq!(resumed.body["version"], 5);

    // A writer holding an old version is refused and changes nothing.
    let stale = put(
        &client,
        "run-42/state/checkpoint",
        json!({"value": {"step": 99}}),
        &[("If-Match", "\"3\"")],
    )
    .await;
    stale.assert_problem(409, "version-conflict");
    assert!(
        stale.body["detail"].as_str().unwrap().contains("version 5"),
        "{}",
        stale.body
    );
    let again = put(
        &client,
        "run-42/state/checkpoint",
        json!({"value": 1}),
        &[("If-None-Match", "*")],
    )
    .await;
    again.assert_problem(409, "version-conflict");
    assert_eq!(
        get(&client, "run-42/state/checkpoint").await.body["value"]["step"],
        5
    );

    // Of eight writers of version 5, exactly one wins.
    let mut writers = Vec::new();
    for writer in 0..8 {
        let client = client.clone();
        writers.push(tokio::spawn(async move {
            put(
                &client,
                "run-42/state/checkpoint",
                json!({"value": {"writer": writer}}),
                &[("If-Match", "5")],
            )
            .await
            .status
        }));
    }
    let mut statuses = Vec::new();
    for writer in writers {
        statuses.push(writer.await.unwrap());
    }
    statuses.sort();
    assert_eq!(statuses, [200, 409, 409, 409, 409, 409, 409, 409]);
    assert_eq!(
        get(&client, "run-42/state/checkpoint").await.body["version"],
        6
    );

    // The list shows every key in order; a conditional delete needs the current version.
    put(&client, "run-42/state/attempts", json!({"value": 2}), &[]).await;
    let listed = get(&client, "run-42/state").await;
    let keys: Vec<&str> = listed.body["state"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["attempts", "checkpoint"]);
    let wrong = client
        .send(
            client
                .request(
                    reqwest::Method::DELETE,
                    "/v1/sessions/run-42/state/checkpoint",
                )
                .header("If-Match", "1"),
        )
        .await;
    wrong.assert_problem(409, "version-conflict");
    let removed = client
        .send(
            client
                .request(
                    reqwest::Method::DELETE,
                    "/v1/sessions/run-42/state/checkpoint",
                )
                .header("If-Match", "6"),
        )
        .await;
    assert_eq!(removed.status, 204);
    get(&client, "run-42/state/checkpoint")
        .await
        .assert_problem(404, "not-found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_state_is_refused_and_values_stay_with_their_project_and_end_user() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    let too_big = put(
        &client,
        "s/state/blob",
        json!({"value": "x".repeat(64 * 1024)}),
        &[],
    )
    .await;
    too_big.assert_problem(422, "validation-failed");
    assert_eq!(too_big.error_fields(), ["value"]);
    let long_key = format!("s/state/{}", "k".repeat(256));
    put(&client, &long_key, json!({"value": 1}), &[])
        .await
        .assert_problem(422, "validation-failed");
    let bad_if_match = put(
        &client,
        "s/state/a",
        json!({"value": 1}),
        &[("If-Match", "soon")],
    )
    .await;
    assert_eq!(bad_if_match.error_fields(), ["header.If-Match"]);
    put(
        &client,
        "s/state/a",
        json!({"value": 1, "extra": true}),
        &[],
    )
    .await
    .assert_problem(422, "validation-failed");
    get(&client, "s/state/a")
        .await
        .assert_problem(404, "not-found");

    // An end-user token writes for its end-user; another end-user and another project see
    // nothing; the project key sees it.
    let token = |user: &str| {
        let client = client.clone();
        let user = user.to_string();
        async move {
            let minted = client
                .send(
                    client
                        .request(reqwest::Method::POST, "/v1/end-user-tokens")
                        .json(&json!({"user_id": user})),
                )
                .await;
            minted.body["token"].as_str().unwrap().to_string()
        }
    };
    let lena = server.client_with_key(&token("lena").await);
    let written = put(
        &lena,
        "chat-1/state/draft",
        json!({"value": {"text": "Dear Sir"}}),
        &[],
    )
    .await;
    assert_eq!(written.status, 201, "{}", written.body);
    assert_eq!(written.body["user_id"], "lena");
    // Omar shares the session id but has a namespace of his own: he neither reads nor
    // overwrites Lena's draft, and his own draft of the same key is a new value.
    let omar = server.client_with_key(&token("omar").await);
    get(&omar, "chat-1/state/draft")
        .await
        .assert_problem(404, "not-found");
    assert!(
        get(&omar, "chat-1/state").await.body["state"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let omars = put(&omar, "chat-1/state/draft", json!({"value": "mine"}), &[]).await;
    assert_eq!(omars.status, 201, "a value of his own: {}", omars.body);
    assert_eq!(omars.body["user_id"], "omar");
    assert_eq!(omars.body["version"], 1);
    get(&omar, "chat-1/state/draft?user_id=lena")
        .await
        .assert_problem(403, "forbidden");
    assert_eq!(
        get(&lena, "chat-1/state/draft").await.body["value"]["text"],
        "Dear Sir",
        "Lena's draft is untouched"
    );
    let (_, other_key) = server.create_project("other").unwrap();
    get(
        &server.client_with_key(&other_key),
        "chat-1/state/draft?user_id=lena",
    )
    .await
    .assert_problem(404, "not-found");
    // The project key addresses an end-user's values by naming them, and without a user_id
    // the values of no end-user.
    assert_eq!(
        get(&client, "chat-1/state/draft?user_id=lena").await.body["value"]["text"],
        "Dear Sir"
    );
    assert_eq!(
        get(&client, "chat-1/state/draft?user_id=omar").await.body["value"],
        "mine"
    );
    get(&client, "chat-1/state/draft")
        .await
        .assert_problem(404, "not-found");

    // Erasing lena removes her values, and the receipt counts them.
    let erasure = client
        .send(client.request(reqwest::Method::POST, "/v1/subjects/lena/erasure"))
        .await;
    assert_eq!(erasure.status, 202, "{}", erasure.body);
    let task_id = erasure.body["id"].as_str().unwrap().to_string();
    let started = Instant::now();
    let receipt = loop {
        let task = client
            .send(client.request(reqwest::Method::GET, &format!("/v1/tasks/{task_id}")))
            .await;
        if task.body["status"] == "succeeded" {
            break task.body;
        }
        assert!(
            started.elapsed() < engram_tests::patience(),
            "{}",
            task.body
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        receipt["result"]["removed"]["session_state"], 1,
        "{receipt}"
    );
    get(&client, "chat-1/state/draft?user_id=lena")
        .await
        .assert_problem(404, "not-found");
    assert_eq!(
        get(&client, "chat-1/state/draft?user_id=omar").await.body["value"],
        "mine",
        "Omar's value stays"
    );
}

/// A project key addresses an end-user's values the same way on every method: `?user_id=`
/// on PUT as on GET and DELETE (or in the PUT's body, as before). A value written so is the
/// end-user's — read back under their id and in their export — and a PUT naming two
/// different end-users changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_put_addresses_the_end_user_in_its_query_as_get_and_delete_do() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    let written = put(
        &client,
        "trip/state/plan?user_id=uma",
        json!({"value": {"leg": 1}}),
        &[],
    )
    .await;
    assert_eq!(written.status, 201, "{}", written.body);
    assert_eq!(written.body["user_id"], "uma");
    let hers = get(&client, "trip/state/plan?user_id=uma").await;
    assert_eq!(hers.status, 200, "{}", hers.body);
    assert_eq!(hers.body["value"], json!({"leg": 1}));
    // Nothing went to the values of no end-user.
    assert_eq!(get(&client, "trip/state/plan").await.status, 404);
    let export = client
        .http_text(client.request(reqwest::Method::GET, "/v1/subjects/uma/export"))
        .await;
    assert!(
        export.contains("\"plan\"") && export.contains("\"leg\":1"),
        "the export of uma holds her value: {export}"
    );

    // The same end-user in both places is fine; two different ones are refused.
    let agreed = put(
        &client,
        "trip/state/plan?user_id=uma",
        json!({"value": {"leg": 2}, "user_id": "uma"}),
        &[],
    )
    .await;
    assert_eq!(agreed.status, 200, "{}", agreed.body);
    let conflicting = put(
        &client,
        "trip/state/plan?user_id=uma",
        json!({"value": {"leg": 3}, "user_id": "ulf"}),
        &[],
    )
    .await;
    assert_eq!(conflicting.status, 422, "{}", conflicting.body);
    assert_eq!(conflicting.body["errors"][0]["field"], "user_id");
    assert_eq!(
        get(&client, "trip/state/plan?user_id=uma").await.body["value"],
        json!({"leg": 2})
    );
    assert_eq!(
        get(&client, "trip/state/plan?user_id=ulf").await.status,
        404
    );
}
