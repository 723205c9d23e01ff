//! Recall quality end to end against a spawned `engram serve`: every search leaves a recall
//! event (query text kept or not per project, erased with its end-user); the live metrics of
//! a scripted workload are exact; an evaluation set scores the expected hit@k and MRR, compares
//! two profiles and flags a regression; scheduled runs happen; traffic is split by profile.

use engram_tests::{ApiClient, ApiResponse, TestServer};
use serde_json::{Value, json};

async fn call(
    client: &ApiClient,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> ApiResponse {
    let mut request = client.request(method, path);
    if let Some(body) = body {
        request = request.json(&body);
    }
    client.send(request).await
}

async fn get_ok(client: &ApiClient, path: &str) -> Value {
    let response = call(client, reqwest::Method::GET, path, None).await;
    assert_eq!(response.status, 200, "GET {path}: {}", response.body);
    response.body
}

async fn search(client: &ApiClient, body: Value) -> Value {
    let response = client.search(body.clone()).await;
    assert_eq!(response.status, 200, "search {body}: {}", response.body);
    response.body
}

async fn finished_task(client: &ApiClient, task_id: &str) -> Value {
    let started = std::time::Instant::now();
    loop {
        let task = get_ok(client, &format!("/v1/tasks/{task_id}")).await;
        if matches!(task["status"].as_str(), Some("succeeded" | "failed")) {
            return task;
        }
        assert!(started.elapsed() < engram_tests::patience(), "{task}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

fn close(left: &Value, right: f64) -> bool {
    left.as_f64()
        .is_some_and(|left| (left - right).abs() < 1e-6)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_search_is_recorded_and_the_metrics_of_a_scripted_workload_are_exact() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    let added = client
        .add(json!([
            {"content": "Mara drinks green tea at dawn", "user_id": "mara"},
            {"content": "Mara rides a red bicycle", "user_id": "mara"},
            {"content": "Olek collects stamps", "user_id": "olek"},
        ]))
        .await;
    assert_eq!(added.status, 201, "{}", added.body);
    let tea = added.body["memories"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let bicycle = added.body["memories"][1]["id"]
        .as_str()
        .unwrap()
        .to_string();

    // Five searches: two find one memory each, three find nothing.
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let first = client
        .send(
            client
                .request(reqwest::Method::POST, "/v1/memories/search")
                .header("traceparent", traceparent)
                .json(&json!({"query": "tea", "user_id": "mara", "retrieval": "keyword"})),
        )
        .await;
    assert_eq!(first.status, 200, "{}", first.body);
    let first_recall = first.body["recall_id"].as_str().unwrap().to_string();
    let second = search(
        &client,
        json!({"query": "bicycle", "user_id": "mara", "retrieval": "keyword"}),
    )
    .await;
    let second_recall = second["recall_id"].as_str().unwrap().to_string();
    search(
        &client,
        json!({"query": "unicorns", "user_id": "mara", "retrieval": "keyword"}),
    )
    .await;
    search(
        &client,
        json!({"query": "unicorns", "retrieval": "keyword"}),
    )
    .await;
    search(&client, json!({"query": "dragons", "retrieval": "keyword"})).await;

    // The event of one search: query, results with ranks and scores, stages, trace id.
    let event = get_ok(&client, &format!("/v1/recalls/{first_recall}")).await;
    assert_eq!(event["query"], "tea", "{event}");
    assert_eq!(event["user_id"], "mara");
    assert_eq!(event["profile"], "default");
    assert_eq!(event["retrieval"], "keyword");
    assert_eq!(event["result_count"], 1);
    assert_eq!(event["results"][0]["memory_id"], tea.as_str());
    assert_eq!(event["results"][0]["rank"], 1);
    assert_eq!(
        event["results"][0]["score"],
        first.body["results"][0]["score"]
    );
    assert_eq!(event["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
    assert!(
        event["timings"]["total_micros"].as_u64().unwrap() > 0,
        "{event}"
    );
    assert_eq!(event["filters"]["top_k"], 10);

    // Feedback must name a recall that happened, and a memory it returned.
    call(
        &client,
        reqwest::Method::POST,
        "/v1/recalls/01939f2e-6f4c-7c4e-9c1e-000000000000/feedback",
        Some(json!({"rating": "relevant"})),
    )
    .await
    .assert_problem(404, "not-found");
    let stray = call(
        &client,
        reqwest::Method::POST,
        &format!("/v1/recalls/{first_recall}/feedback"),
        Some(json!({"rating": "relevant", "memory_id": bicycle})),
    )
    .await;
    stray.assert_problem(422, "validation-failed");
    assert_eq!(stray.error_fields(), vec!["memory_id"]);
    for (recall, memory, rating) in [
        (&first_recall, &tea, "relevant"),
        (&second_recall, &bicycle, "not_relevant"),
    ] {
        let rated = call(
            &client,
            reqwest::Method::POST,
            &format!("/v1/recalls/{recall}/feedback"),
            Some(json!({"rating": rating, "memory_id": memory})),
        )
        .await;
        assert_eq!(rated.status, 201, "{}", rated.body);
    }
    // The bicycle memory is corrected after it was recalled.
    let corrected = client
        .patch(
            &bicycle,
            None,
            json!({"content": "Mara rides a blue bicycle"}),
        )
        .await;
    assert_eq!(corrected.status, 200);

    let metrics = get_ok(&client, "/v1/recall-metrics").await;
    let totals = &metrics["totals"];
    assert_eq!(totals["searches"], 5, "{metrics}");
    assert_eq!(totals["empty"], 3);
    assert!(close(&totals["empty_rate"], 0.6), "{totals}");
    for percentile in ["p50_ms", "p95_ms", "p99_ms"] {
        assert!(
            totals["latency"][percentile].as_f64().unwrap() > 0.0,
            "{totals}"
        );
    }
    assert_eq!(metrics["feedback"]["ratings"], 2);
    assert!(close(&metrics["feedback"]["precision"], 0.5), "{metrics}");
    assert_eq!(
        metrics["recalled_memories"],
        json!({"distinct": 2, "superseded_or_corrected": 1, "share": 0.5})
    );
    let empty: Vec<(Value, Value)> = metrics["empty_queries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|query| (query["query"].clone(), query["count"].clone()))
        .collect();
    assert_eq!(
        empty,
        vec![(json!("unicorns"), json!(2)), (json!("dragons"), json!(1))]
    );
    let histogram: u64 = metrics["top_score_histogram"]["bins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|bin| bin.as_u64().unwrap())
        .sum();
    assert_eq!(
        histogram, 2,
        "one top score per search that found something"
    );
    let per_bucket: u64 = metrics["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|bucket| bucket["searches"].as_u64().unwrap())
        .sum();
    assert_eq!(per_bucket, 5);
    assert_eq!(metrics["profiles"][0]["profile"], "default");
    assert_eq!(metrics["profiles"][0]["searches"], 5);
    call(
        &client,
        reqwest::Method::GET,
        "/v1/recall-metrics?bucket=week",
        None,
    )
    .await
    .assert_problem(422, "validation-failed");

    // What is kept follows the project's setting.
    let changed = call(
        &client,
        reqwest::Method::PATCH,
        "/v1/project/settings",
        Some(json!({"recall_events": "no_text"})),
    )
    .await;
    assert_eq!(changed.status, 200, "{}", changed.body);
    assert_eq!(changed.body["recall_events"], "no_text");
    let untold = search(&client, json!({"query": "stamps", "retrieval": "keyword"})).await;
    let untold_event = get_ok(
        &client,
        &format!("/v1/recalls/{}", untold["recall_id"].as_str().unwrap()),
    )
    .await;
    assert!(untold_event["query"].is_null(), "{untold_event}");
    assert_eq!(untold_event["result_count"], 1);
    call(
        &client,
        reqwest::Method::PATCH,
        "/v1/project/settings",
        Some(json!({"recall_events": "off"})),
    )
    .await;
    let unrecorded = search(&client, json!({"query": "stamps"})).await;
    call(
        &client,
        reqwest::Method::GET,
        &format!("/v1/recalls/{}", unrecorded["recall_id"].as_str().unwrap()),
        None,
    )
    .await
    .assert_problem(404, "not-found");
    assert_eq!(
        get_ok(&client, "/v1/recall-metrics").await["totals"]["searches"],
        6
    );

    // Erasure removes the end-user's recall events, and says so.
    let requested = call(
        &client,
        reqwest::Method::POST,
        "/v1/subjects/mara/erasure",
        None,
    )
    .await;
    assert_eq!(requested.status, 202, "{}", requested.body);
    let receipt = finished_task(&client, requested.body["id"].as_str().unwrap()).await;
    assert_eq!(
        receipt["result"]["removed"]["recall_events"], 3,
        "{receipt}"
    );
    assert_eq!(
        receipt["result"]["verification"]["recall_events_remaining"],
        0
    );
    call(
        &client,
        reqwest::Method::GET,
        &format!("/v1/recalls/{first_recall}"),
        None,
    )
    .await
    .assert_problem(404, "not-found");
    assert_eq!(
        get_ok(&client, "/v1/recall-metrics").await["totals"]["searches"],
        3
    );

    // Another project learns nothing of these events.
    let (_, other_key) = server.create_project("other").unwrap();
    let other = server.client_with_key(&other_key);
    call(
        &other,
        reqwest::Method::GET,
        &format!("/v1/recalls/{}", untold["recall_id"].as_str().unwrap()),
        None,
    )
    .await
    .assert_problem(404, "not-found");
    assert_eq!(
        get_ok(&other, "/v1/recall-metrics").await["totals"]["searches"],
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evaluation_set_scores_hit_at_k_and_mrr_compares_profiles_and_flags_a_regression() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::spawn_with(
        directory.path(),
        &[("ENGRAM_EVALUATION_CHECK_INTERVAL_SECS", "1")],
    )
    .await
    .unwrap();
    let client = server.client();
    let added = client
        .add(json!([
            {"content": "alpha beta gamma"},
            {"content": "alpha delta"},
            {"content": "zeta eta"},
        ]))
        .await;
    assert_eq!(added.status, 201, "{}", added.body);
    let zeta = added.body["memories"][2]["id"]
        .as_str()
        .unwrap()
        .to_string();

    let profile = call(
        &client,
        reqwest::Method::PUT,
        "/v1/retrieval-profiles/words",
        Some(json!({"parameters": {"retrieval": "keyword"}})),
    )
    .await;
    assert_eq!(profile.status, 200, "{}", profile.body);
    let bad_profile = call(
        &client,
        reqwest::Method::PUT,
        "/v1/retrieval-profiles/broken",
        Some(json!({"parameters": {"retrieval": "psychic"}})),
    )
    .await;
    assert_eq!(bad_profile.error_fields(), vec!["parameters.retrieval"]);

    // Bad sets and cases are refused with the field named; nothing is created.
    let no_expectation = call(
        &client,
        reqwest::Method::POST,
        "/v1/eval-sets",
        Some(json!({"name": "smoke", "cases": [{"query": "zeta"}]})),
    )
    .await;
    assert_eq!(
        no_expectation.error_fields(),
        vec!["cases[0].expected_memory_ids"]
    );
    let unknown_profile = call(
        &client,
        reqwest::Method::POST,
        "/v1/eval-sets",
        Some(json!({"name": "smoke", "profile": "nope"})),
    )
    .await;
    assert_eq!(unknown_profile.error_fields(), vec!["profile"]);
    assert_eq!(get_ok(&client, "/v1/eval-sets").await["sets"], json!([]));

    // Case 1: rank 1. Case 2: the expected text ranks second. Case 3 (imported): nothing.
    let created = call(
        &client,
        reqwest::Method::POST,
        "/v1/eval-sets",
        Some(json!({
            "name": "smoke",
            "k": 10,
            "profile": "words",
            "regression_threshold": 0.1,
            "cases": [
                {"query": "zeta", "expected_memory_ids": [zeta]},
                {"query": "alpha beta", "expected_contents": ["ALPHA  delta"]},
            ],
        })),
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let set_id = created.body["id"].as_str().unwrap().to_string();
    call(
        &client,
        reqwest::Method::POST,
        "/v1/eval-sets",
        Some(json!({"name": "smoke"})),
    )
    .await
    .assert_problem(409, "conflict");
    let bad_import = client
        .send(
            client
                .request(reqwest::Method::POST, &format!("/v1/eval-sets/{set_id}/cases/import"))
                .header("content-type", "application/x-ndjson")
                .body("{\"query\": \"omega\", \"expected_contents\": [\"alpha beta gamma\"]}\nnot json\n"),
        )
        .await;
    bad_import.assert_problem(422, "validation-failed");
    assert_eq!(bad_import.error_fields(), vec!["line 2"]);
    let imported = client
        .send(
            client
                .request(
                    reqwest::Method::POST,
                    &format!("/v1/eval-sets/{set_id}/cases/import"),
                )
                .header("content-type", "application/x-ndjson")
                .body("{\"query\": \"omega\", \"expected_contents\": [\"alpha beta gamma\"]}\n\n"),
        )
        .await;
    assert_eq!(imported.status, 201, "{}", imported.body);
    assert_eq!(imported.body["cases"], 3);

    let run = async |body: Value| -> Value {
        let started = call(
            &client,
            reqwest::Method::POST,
            &format!("/v1/eval-sets/{set_id}/runs"),
            Some(body),
        )
        .await;
        assert_eq!(started.status, 202, "{}", started.body);
        let task = finished_task(&client, started.body["task"]["id"].as_str().unwrap()).await;
        assert_eq!(task["status"], "succeeded", "{task}");
        get_ok(
            &client,
            &format!(
                "/v1/eval-sets/{set_id}/runs/{}",
                started.body["run"]["id"].as_str().unwrap()
            ),
        )
        .await
    };
    let first = run(json!({})).await;
    let metrics = &first["metrics"];
    assert_eq!(first["profile"], "words");
    assert_eq!(metrics["cases"], 3, "{metrics}");
    assert!(close(&metrics["hit_at_1"], 1.0 / 3.0), "{metrics}");
    assert!(close(&metrics["hit_at_k"], 2.0 / 3.0), "{metrics}");
    assert!(close(&metrics["mrr"], 0.5), "{metrics}");
    assert!(close(&metrics["recall_at_k"], 2.0 / 3.0), "{metrics}");
    let ndcg = (1.0 + 1.0 / 3f64.log2()) / 3.0;
    assert!(close(&metrics["ndcg_at_k"], ndcg), "{metrics}");
    assert_eq!(first["regression"], false);

    // Two profiles side by side: per figure, both values and the difference's interval.
    let compared = run(json!({"compare_profile": "default"})).await;
    let mrr = &compared["comparison"]["differences"]["mrr"];
    assert!(close(&mrr["first"], 0.5), "{compared}");
    for field in ["second", "difference", "ci95_low", "ci95_high"] {
        assert!(mrr[field].is_number(), "{compared}");
    }
    assert!(mrr["ci95_low"].as_f64().unwrap() <= mrr["difference"].as_f64().unwrap());
    assert_eq!(compared["comparison"]["second_profile"], "default");

    // The expected memory of case 1 is deleted: hit@k falls by a third, past the threshold.
    assert_eq!(client.delete(&zeta).await.status, 204);
    let regressed = run(json!({})).await;
    assert_eq!(regressed["regression"], true, "{regressed}");
    assert!(
        regressed["regression_reasons"]
            .as_array()
            .unwrap()
            .iter()
            .any(|reason| reason
                .as_str()
                .unwrap()
                .starts_with("hit_at_k fell from 0.667 to 0.333")),
        "{regressed}"
    );
    let history = get_ok(&client, &format!("/v1/eval-sets/{set_id}/runs")).await;
    let flags: Vec<bool> = history["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|run| run["regression"].as_bool().unwrap())
        .collect();
    assert_eq!(flags, vec![true, false, false], "newest first");

    // A scheduled set gets its first run without being asked.
    let scheduled = call(
        &client,
        reqwest::Method::POST,
        "/v1/eval-sets",
        Some(json!({
            "name": "nightly",
            "schedule_interval_secs": 3600,
            "cases": [{"query": "alpha", "expected_contents": ["alpha delta"]}],
        })),
    )
    .await;
    assert_eq!(scheduled.status, 201, "{}", scheduled.body);
    let nightly = scheduled.body["id"].as_str().unwrap().to_string();
    let started = std::time::Instant::now();
    let scheduled_run = loop {
        let runs = get_ok(&client, &format!("/v1/eval-sets/{nightly}/runs")).await;
        if let Some(run) = runs["runs"].as_array().unwrap().first()
            && run["status"] == "succeeded"
        {
            break run.clone();
        }
        assert!(started.elapsed() < engram_tests::patience(), "{runs}");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    assert_eq!(scheduled_run["trigger"], "scheduled");
    assert_eq!(scheduled_run["profile"], "default");
    assert!(
        close(&scheduled_run["metrics"]["hit_at_k"], 1.0),
        "{scheduled_run}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_traffic_share_sends_searches_to_a_profile_and_metrics_split_by_profile() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    client
        .add(json!([{"content": "Nils bakes sourdough bread"}]))
        .await;
    let all = call(
        &client,
        reqwest::Method::PUT,
        "/v1/retrieval-profiles/dense-only",
        Some(json!({"parameters": {"retrieval": "dense"}, "traffic_share": 1.0})),
    )
    .await;
    assert_eq!(all.status, 200, "{}", all.body);
    let served = search(&client, json!({"query": "bread"})).await;
    let event = get_ok(
        &client,
        &format!("/v1/recalls/{}", served["recall_id"].as_str().unwrap()),
    )
    .await;
    assert_eq!(event["profile"], "dense-only");
    assert_eq!(event["retrieval"], "dense");
    // A search that tunes itself is never given to a profile; a named profile always serves.
    let tuned = search(&client, json!({"query": "bread", "retrieval": "keyword"})).await;
    let event = get_ok(
        &client,
        &format!("/v1/recalls/{}", tuned["recall_id"].as_str().unwrap()),
    )
    .await;
    assert_eq!(event["profile"], "default");
    call(
        &client,
        reqwest::Method::PUT,
        "/v1/retrieval-profiles/second",
        Some(json!({"parameters": {}, "traffic_share": 0.5})),
    )
    .await
    .assert_problem(409, "conflict");
    let unknown = client
        .search(json!({"query": "bread", "profile": "nope"}))
        .await;
    assert_eq!(unknown.error_fields(), vec!["profile"]);

    let half = call(
        &client,
        reqwest::Method::PUT,
        "/v1/retrieval-profiles/dense-only",
        Some(json!({"parameters": {"retrieval": "dense"}, "traffic_share": 0.5})),
    )
    .await;
    assert_eq!(half.status, 200);
    for _ in 0..100 {
        search(&client, json!({"query": "sourdough"})).await;
    }
    let metrics = get_ok(&client, "/v1/recall-metrics").await;
    let by_profile = |name: &str| -> u64 {
        metrics["profiles"]
            .as_array()
            .unwrap()
            .iter()
            .find(|profile| profile["profile"] == name)
            .map_or(0, |profile| profile["searches"].as_u64().unwrap())
    };
    let (dense, default) = (by_profile("dense-only") - 1, by_profile("default") - 1);
    assert_eq!(dense + default, 100, "{metrics}");
    // 100 draws at one half: 50 expected; 25–75 is five standard deviations either side.
    assert!(
        (25..=75).contains(&dense),
        "dense-only served {dense} of 100"
    );
    let only_dense = get_ok(&client, "/v1/recall-metrics?profile=dense-only").await;
    assert_eq!(only_dense["totals"]["searches"], dense + 1);
}

/// The overhead benchmark runs both modes on one server; only the recording mode stores
/// events (figures are printed, never asserted).
#[test]
fn the_recall_event_benchmark_times_both_modes_and_records_only_when_on() {
    let stdout = engram_tests::run_bench(&[
        "bench",
        "--memories",
        "200",
        "--queries",
        "30",
        "--compare-recall-events",
    ]);
    assert!(
        stdout.contains("30 queries x 6 rounds per mode, 4 concurrent clients, 180 events stored"),
        "{stdout}"
    );
    for mode in ["on", "off"] {
        assert!(stdout.contains(&format!("| {mode} | 180 |")), "{stdout}");
    }
    assert!(stdout.contains("recall event overhead: p50 "), "{stdout}");
}

/// The console creates evaluation sets through the same use case as the API: a name taken
/// in the project is refused with the reason, from either door, and nothing is created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_evaluation_set_name_is_refused_with_its_reason_in_the_console_too() {
    let server = engram_tests::TestServer::spawn().await.unwrap();
    let client = server.client();
    let memory = client
        .add_one(serde_json::json!({"content": "The office plant is a ficus."}))
        .await;
    let created = client
        .send(
            client
                .request(reqwest::Method::POST, "/v1/eval-sets")
                .json(&serde_json::json!({"name": "plants"})),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let (http, cookie) = server.console_owner_session().await;
    let case = serde_json::json!({"query": "which plant", "expected_memory_ids": [memory["id"]]})
        .to_string();
    let response = http
        .post(format!(
            "{}/console/api/create_evaluation_set",
            server.base_url
        ))
        .header("Origin", &server.base_url)
        .header("Cookie", &cookie)
        .form(&[
            ("project_id", server.bootstrap.project_id.as_str()),
            ("name", "plants"),
            ("k", "10"),
            ("cases_jsonl", case.as_str()),
        ])
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let body = response.text().await.unwrap_or_default();
    assert!(
        (400..500).contains(&status) && body.contains("already exists"),
        "{status} {body}"
    );
    let sets = client
        .send(client.request(reqwest::Method::GET, "/v1/eval-sets"))
        .await;
    assert_eq!(
        sets.body["sets"].as_array().map(Vec::len),
        Some(1),
        "{}",
        sets.body
    );
}
