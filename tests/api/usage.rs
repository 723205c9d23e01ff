//! Usage metering end to end: a scripted workload with retries and failures is billed
//! exactly (stored memories and successful searches only; replays and failed calls never),
//! per credential, per hour and per day (the day equals the sum of its hours), and a clean
//! shutdown right after the last request loses nothing.

use engram_tests::{ApiClient, TestServer};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

async fn usage(client: &ApiClient, query: &str) -> Value {
    let response = client
        .send(client.request(reqwest::Method::GET, &format!("/v1/usage{query}")))
        .await;
    assert_eq!(response.status, 200, "{}", response.body);
    response.body
}

/// Waits until the meter has written `expected` totals (it flushes every second).
async fn totals_reach(client: &ApiClient, expected: Value) -> Value {
    let started = Instant::now();
    loop {
        let body = usage(client, "").await;
        if body["totals"] == expected {
            return body;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "totals never reached {expected}: {}",
            body["totals"]
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scripted_workload_is_billed_exactly() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    // 3 memories in one request, then its retry with the same key (a replay: not billed).
    let batch = json!({"memories": [
        {"content": "Uma likes rye bread.", "user_id": "uma"},
        {"content": "Uma runs on Sundays.", "user_id": "uma"},
        {"content": "Uma's sister is called Vera.", "user_id": "uma"}
    ]});
    for _ in 0..2 {
        let response = client
            .send(
                client
                    .request(reqwest::Method::POST, "/v1/memories")
                    .header("Idempotency-Key", "batch-1")
                    .json(&batch),
            )
            .await;
        assert_eq!(response.status, 201, "{}", response.body);
    }
    // A failed write (422) and a failed search (422) are not billed.
    client
        .add(json!([{"content": ""}]))
        .await
        .assert_problem(422, "validation-failed");
    client
        .search(json!({"query": ""}))
        .await
        .assert_problem(422, "validation-failed");
    // 2 searches with the project key, 1 write and 1 search with an end-user token.
    client.search(json!({"query": "bread"})).await;
    client.search(json!({"query": "running"})).await;
    let minted = client
        .send(
            client
                .request(reqwest::Method::POST, "/v1/end-user-tokens")
                .json(&json!({"user_id": "uma"})),
        )
        .await;
    let end_user = server.client_with_key(minted.body["token"].as_str().unwrap());
    assert_eq!(
        end_user
            .add(json!([{"content": "Uma prefers tea."}]))
            .await
            .status,
        201
    );
    assert_eq!(end_user.search(json!({"query": "tea"})).await.status, 200);

    let body = totals_reach(&client, json!({"memories_written": 4, "searches": 3})).await;
    let by_credential = |credential_prefix: &str, unit: &str| -> i64 {
        body["usage"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|row| row["unit"] == unit)
            .filter(|row| {
                row["credential"]
                    .as_str()
                    .unwrap()
                    .starts_with(credential_prefix)
            })
            .map(|row| row["quantity"].as_i64().unwrap())
            .sum()
    };
    assert_eq!(by_credential("key:", "memories_written"), 3);
    assert_eq!(by_credential("key:", "searches"), 2);
    assert_eq!(by_credential("end_user", "memories_written"), 1);
    assert_eq!(by_credential("end_user", "searches"), 1);

    // The daily rollup is the sum of the hours.
    let hourly = usage(&client, "?granularity=hour").await;
    let sum = |view: &Value, unit: &str| -> i64 {
        view["usage"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|row| row["unit"] == unit)
            .map(|row| row["quantity"].as_i64().unwrap())
            .sum()
    };
    for unit in ["memories_written", "searches"] {
        assert_eq!(sum(&hourly, unit), sum(&body, unit), "{unit}");
    }
    let csv = client
        .http_text(client.request(reqwest::Method::GET, "/v1/usage?format=csv"))
        .await;
    assert!(
        csv.starts_with("period_start,unit,credential,quantity\n"),
        "{csv}"
    );
    assert_eq!(
        csv.lines().count(),
        1 + body["usage"].as_array().unwrap().len()
    );

    // Another project sees none of it; bad parameters are a 422 naming the field.
    let (_, other_key) = server.create_project("other").unwrap();
    let other = usage(&server.client_with_key(&other_key), "").await;
    assert_eq!(
        other["totals"],
        json!({"memories_written": 0, "searches": 0})
    );
    for (query, field) in [
        ("?from=yesterday", "from"),
        ("?granularity=minute", "granularity"),
        ("?from=2026-01-10&to=2026-01-01", "to"),
        ("?from=2020-01-01&to=2026-01-01", "to"),
    ] {
        let response = client
            .send(client.request(reqwest::Method::GET, &format!("/v1/usage{query}")))
            .await;
        response.assert_problem(422, "validation-failed");
        assert_eq!(response.body["errors"][0]["field"], field, "{query}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_shutdown_right_after_a_request_loses_no_usage() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::spawn_in(directory.path()).await.unwrap();
    let client = server.client();
    assert_eq!(
        client
            .add(json!([{"content": "Written just before the shutdown."}]))
            .await
            .status,
        201
    );
    // SIGTERM at once: the meter has not flushed yet (it does so every second).
    let (stopped, data_dir, _) = server.stop();
    assert!(stopped);
    let server = TestServer::spawn_in(&data_dir).await.unwrap();
    let body = usage(&server.client(), "").await;
    assert_eq!(body["totals"]["memories_written"], 1, "{body}");
}

/// A price set with `engram admin set-price` turns the day's usage into cost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn costs_are_usage_times_the_price_in_effect() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    let yesterday = (chrono::Utc::now().date_naive() - chrono::Duration::days(1)).to_string();
    let set = engram_tests::run_engram(
        &[
            "admin",
            "set-price",
            "--data-dir",
            &server.data_dir.display().to_string(),
            "--unit",
            "searches",
            "--price",
            "0.0004",
            "--currency",
            "usd",
            "--effective-from",
            &yesterday,
        ],
        &[],
    );
    assert!(
        set.status.success(),
        "{}",
        String::from_utf8_lossy(&set.stderr)
    );
    let refused = engram_tests::run_engram(
        &[
            "admin",
            "set-price",
            "--data-dir",
            &server.data_dir.display().to_string(),
            "--unit",
            "hugs",
            "--price",
            "1",
        ],
        &[],
    );
    assert!(!refused.status.success());
    for query in ["bread", "tea", "maps"] {
        assert_eq!(client.search(json!({"query": query})).await.status, 200);
    }
    totals_reach(&client, json!({"memories_written": 0, "searches": 3})).await;
    let costs = client
        .send(client.request(reqwest::Method::GET, "/v1/costs"))
        .await;
    assert_eq!(costs.status, 200, "{}", costs.body);
    assert_eq!(costs.body["totals_micros"]["USD"], 1_200, "{}", costs.body);
    let searches = costs.body["days"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["unit"] == "searches")
        .unwrap();
    assert_eq!(searches["unit_price_micros"], 400);
    assert_eq!(searches["quantity"], 3);
    let csv = client
        .http_text(client.request(reqwest::Method::GET, "/v1/costs?format=csv"))
        .await;
    assert!(csv.contains(",searches,3,USD,400,1200"), "{csv}");
}
