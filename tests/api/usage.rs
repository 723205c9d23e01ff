//! Usage metering end to end: a scripted workload with retries and failures is billed
//! exactly (stored memories, successful searches and the tokens the model read; replays and
//! failed calls never), per credential, per hour and per day (the day equals the sum of its
//! hours); a clean shutdown right after the last request loses nothing; memory-days are
//! sampled; quotas, the rate quota, the recall budget and a hard-capped budget are enforced
//! at their boundary with problems that name the limit, and budget alerts fire once.

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

/// Tokens all-MiniLM-L6-v2 reads for `text`, counted with its own tokenizer.json.
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

/// Waits until the meter has written `expected` totals (it flushes every second); units
/// not named in `expected` are not compared.
async fn totals_reach(client: &ApiClient, expected: Value) -> Value {
    let started = Instant::now();
    loop {
        let body = usage(client, "").await;
        let matches = expected
            .as_object()
            .unwrap()
            .iter()
            .all(|(unit, quantity)| &body["totals"][unit] == quantity);
        if matches {
            return body;
        }
        assert!(
            started.elapsed() < engram_tests::patience(),
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

    let billed_texts = [
        "Uma likes rye bread.",
        "Uma runs on Sundays.",
        "Uma's sister is called Vera.",
        "bread",
        "running",
        "Uma prefers tea.",
        "tea",
    ];
    let tokens: i64 = billed_texts.iter().map(|text| model_tokens(text)).sum();
    println!("scripted workload: 4 memories written, 3 searches, {tokens} tokens embedded");
    let body = totals_reach(
        &client,
        json!({"memories_written": 4, "searches": 3, "tokens_embedded": tokens}),
    )
    .await;
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
    // The end-user token's write and search are billed to the key that minted it.
    let own_key = format!(
        "key:{}",
        usage(&client, "?by=key").await["usage"][0]["key_id"]
            .as_str()
            .unwrap()
    );
    assert_eq!(by_credential(&own_key, "memories_written"), 4);
    assert_eq!(by_credential(&own_key, "searches"), 3);
    assert_eq!(by_credential("end_user", "searches"), 0);

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
    for unit in ["memories_written", "searches", "tokens_embedded"] {
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
    for unit in [
        "memories_written",
        "searches",
        "tokens_embedded",
        "memory_days",
    ] {
        assert_eq!(other["totals"][unit], 0, "{unit}: {}", other["totals"]);
    }
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
    let set = engram_tests::set_price(&server.data_dir, "searches", "0.0004", "usd");
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
    let days = costs.body["days"].as_array().unwrap();
    let searches = days.iter().find(|row| row["unit"] == "searches").unwrap();
    // The operator's price, not the default book's, though the default applies from today.
    assert_eq!(searches["unit_price_micros"], 400);
    assert_eq!(searches["default_price"], false);
    assert_eq!(searches["quantity"], 3);
    assert_eq!(searches["cost_micros"], 1_200);
    // The tokens the queries embedded are priced by the default book, marked as such.
    let tokens = days
        .iter()
        .find(|row| row["unit"] == "tokens_embedded")
        .unwrap();
    assert_eq!(tokens["default_price"], true, "{tokens}");
    assert_eq!(tokens["cost_micros"], tokens["quantity"], "{tokens}");
    assert_eq!(
        costs.body["totals_micros"]["USD"].as_i64().unwrap(),
        1_200 + tokens["quantity"].as_i64().unwrap(),
        "{}",
        costs.body
    );
    let csv = client
        .http_text(client.request(reqwest::Method::GET, "/v1/costs?format=csv"))
        .await;
    assert!(csv.contains(",searches,3,USD,400,1200,false"), "{csv}");
}

async fn put_limits(client: &ApiClient, limits: Value) -> engram_tests::ApiResponse {
    client
        .send(
            client
                .request(reqwest::Method::PUT, "/v1/project/limits")
                .json(&limits),
        )
        .await
}

fn first_of_next_month() -> String {
    use chrono::Datelike;
    let today = chrono::Utc::now().date_naive();
    let next = chrono::NaiveDate::from_ymd_opt(today.year(), today.month(), 1)
        .unwrap()
        .checked_add_months(chrono::Months::new(1))
        .unwrap();
    format!("{next}T00:00:00Z")
}

/// The limit a refused request names, with the reset at the next month's first instant.
fn assert_limit(response: &engram_tests::ApiResponse, name: &str, maximum: i64, used: i64) {
    let limit = &response.body["limit"];
    assert_eq!(limit["name"], name, "{}", response.body);
    assert_eq!(limit["maximum"], maximum, "{}", response.body);
    assert_eq!(limit["used"], used, "{}", response.body);
    assert_eq!(limit["period"], "month", "{}", response.body);
    let resets_at = chrono::DateTime::parse_from_rfc3339(limit["resets_at"].as_str().unwrap())
        .unwrap()
        .with_timezone(&chrono::Utc);
    assert_eq!(
        resets_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        first_of_next_month()
    );
    assert!(response.retry_after.is_some(), "Retry-After is set");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotas_the_rate_quota_and_the_recall_budget_hold_at_their_boundary() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    let saved = put_limits(
        &client,
        json!({
            "monthly_quotas": {"memories_written": 5, "searches": 3},
            "recall": {"max_results": 2}
        }),
    )
    .await;
    assert_eq!(saved.status, 200, "{}", saved.body);
    assert_eq!(
        saved.body["limits"]["monthly_quotas"]["memories_written"],
        5
    );

    // 3 + 2 memories fill the quota exactly; one more is refused and stores nothing.
    let three = json!([
        {"content": "Ida keeps bees.", "user_id": "ida"},
        {"content": "Ida's hives are on the roof.", "user_id": "ida"},
        {"content": "Ida sells honey on Saturdays.", "user_id": "ida"}
    ]);
    assert_eq!(client.add(three).await.status, 201);
    let two = json!([
        {"content": "Ida's favourite flower is lavender.", "user_id": "ida"},
        {"content": "Ida lost a queen bee in May.", "user_id": "ida"}
    ]);
    assert_eq!(client.add(two).await.status, 201);
    let refused = client
        .add(json!([{"content": "Ida wants a sixth hive.", "user_id": "ida"}]))
        .await;
    refused.assert_problem(429, "quota-exceeded");
    assert_limit(&refused, "monthly_quota.memories_written", 5, 5);
    assert_eq!(client.all_listed_ids("&user_id=ida").await.len(), 5);

    // The recall budget caps every search at 2 results, and says so.
    for query in ["bees", "honey", "flowers"] {
        let found = client
            .search(json!({"query": query, "user_id": "ida", "top_k": 10}))
            .await;
        assert_eq!(found.status, 200, "{}", found.body);
        assert_eq!(
            found.body["results"].as_array().unwrap().len(),
            2,
            "{query}"
        );
        assert_eq!(found.body["recall_budget"]["max_results"], 2);
    }
    let fourth = client
        .search(json!({"query": "queen", "user_id": "ida"}))
        .await;
    fourth.assert_problem(429, "quota-exceeded");
    assert_limit(&fourth, "monthly_quota.searches", 3, 3);
    // Refused requests are not billed.
    totals_reach(&client, json!({"memories_written": 5, "searches": 3})).await;

    // Another project is not limited by this one's quotas.
    let (_, other_key) = server.create_project("unlimited").unwrap();
    let other = server.client_with_key(&other_key);
    assert_eq!(other.search(json!({"query": "bees"})).await.status, 200);

    // A token budget keeps the best-ranked memories that fit.
    let limits = put_limits(&client, json!({"recall": {"max_tokens": 12}})).await;
    assert_eq!(limits.status, 200, "{}", limits.body);
    let budgeted = client
        .search(json!({"query": "bees", "user_id": "ida", "top_k": 5}))
        .await;
    assert_eq!(budgeted.status, 200, "{}", budgeted.body);
    let returned: i64 = budgeted.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|hit| model_tokens(hit["memory"]["content"].as_str().unwrap()))
        .sum();
    assert!(returned <= 12, "{returned} tokens returned");
    assert!(!budgeted.body["results"].as_array().unwrap().is_empty());
    assert!(budgeted.body["recall_budget"]["omitted"].as_u64().unwrap() >= 1);

    // Bad limits are refused, each problem named by its field, and change nothing.
    let bad = put_limits(
        &client,
        json!({
            "monthly_quotas": {"hugs": 1, "memory_days": 10},
            "monthly_budget": {"amount_micros": -1, "currency": "dollars"},
            "recall": {"max_results": 0},
            "requests_per_minute": 0
        }),
    )
    .await;
    bad.assert_problem(422, "validation-failed");
    let mut fields = bad.error_fields();
    fields.sort();
    assert_eq!(
        fields,
        [
            "monthly_budget.amount_micros",
            "monthly_budget.currency",
            "monthly_quotas.hugs",
            "monthly_quotas.memory_days",
            "recall.max_results",
            "requests_per_minute"
        ]
    );
    let unchanged = client
        .send(client.request(reqwest::Method::GET, "/v1/project/limits"))
        .await;
    assert_eq!(unchanged.body["limits"]["recall"]["max_tokens"], 12);
    assert_eq!(
        unchanged.body["month_to_date"]["used"]["memories_written"],
        5
    );

    // A rate quota of 2 requests per minute: the third is a 429 naming it.
    assert_eq!(
        put_limits(&client, json!({"requests_per_minute": 2}))
            .await
            .status,
        200
    );
    assert_eq!(client.search(json!({"query": "bees"})).await.status, 200);
    assert_eq!(client.search(json!({"query": "hives"})).await.status, 200);
    let limited = client.search(json!({"query": "honey"})).await;
    limited.assert_problem(429, "rate-limited");
    assert_eq!(limited.body["limit"]["name"], "requests_per_minute");
    assert_eq!(limited.body["limit"]["period"], "minute");
    assert!(limited.retry_after.is_some());

    // Every change of the limits is in the audit log.
    let changes = client
        .send(client.request(
            reqwest::Method::GET,
            "/v1/audit?action=project.limits_changed",
        ))
        .await;
    assert_eq!(changes.body["events"].as_array().unwrap().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hard_capped_budget_stops_spending_at_the_budget_and_alerts_fire_once() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    // Searches are what this budget counts: the default book's price of the tokens they
    // embed is set to nothing.
    for (unit, price) in [("searches", "0.001"), ("tokens_embedded", "0")] {
        let set = engram_tests::set_price(&server.data_dir, unit, price, "USD");
        assert!(
            set.status.success(),
            "{}",
            String::from_utf8_lossy(&set.stderr)
        );
    }
    // 5 searches' worth, alerts at half, 80 % and all of it.
    let saved = put_limits(
        &client,
        json!({"monthly_budget": {
            "amount_micros": 5_000, "currency": "usd",
            "alert_thresholds_percent": [100, 50, 80], "hard_cap": true
        }}),
    )
    .await;
    assert_eq!(saved.status, 200, "{}", saved.body);
    assert_eq!(
        saved.body["limits"]["monthly_budget"]["alert_thresholds_percent"],
        json!([50, 80, 100])
    );
    assert_eq!(saved.body["limits"]["monthly_budget"]["currency"], "USD");
    for query in ["one", "two", "three", "four", "five"] {
        let found = client.search(json!({"query": query})).await;
        assert_eq!(found.status, 200, "{query}: {}", found.body);
    }
    let refused = client.search(json!({"query": "six"})).await;
    refused.assert_problem(402, "budget-exceeded");
    assert_limit(&refused, "monthly_budget", 5_000, 5_000);
    assert_eq!(refused.body["limit"]["currency"], "USD");
    // Writes are refused too while the budget is spent.
    client
        .add(json!([{"content": "Not while the budget is spent."}]))
        .await
        .assert_problem(402, "budget-exceeded");
    assert_eq!(client.search(json!({"query": "seven"})).await.status, 402);

    let limits = client
        .send(client.request(reqwest::Method::GET, "/v1/project/limits"))
        .await;
    let month = &limits.body["month_to_date"];
    assert_eq!(month["spent_micros"], 5_000, "{}", limits.body);
    assert_eq!(month["used"]["searches"], 5);
    let forecast = month["forecast_micros"].as_i64().unwrap();
    assert!(forecast >= 5_000);
    // Spent at the budget before the month's end, the forecast passes it, and says so.
    assert_eq!(
        month["forecast_exceeds_budget"],
        forecast > 5_000,
        "{month}"
    );
    let thresholds: Vec<i64> = month["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|alert| alert["threshold_percent"].as_i64().unwrap())
        .collect();
    assert_eq!(thresholds, [50, 80, 100]);
    let audited = client
        .send(client.request(
            reqwest::Method::GET,
            "/v1/audit?action=project.budget_threshold_reached",
        ))
        .await;
    assert_eq!(
        audited.body["events"].as_array().unwrap().len(),
        3,
        "each threshold is recorded once: {}",
        audited.body
    );

    // Raising the budget lets requests through at once.
    let raised = put_limits(
        &client,
        json!({"monthly_budget": {"amount_micros": 10_000, "currency": "USD", "hard_cap": true}}),
    )
    .await;
    assert_eq!(raised.status, 200);
    assert_eq!(client.search(json!({"query": "eight"})).await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_memories_are_sampled_as_memory_days() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::spawn_with(
        directory.path(),
        &[("ENGRAM_USAGE_SAMPLE_INTERVAL_SECS", "1")],
    )
    .await
    .unwrap();
    let client = server.client();
    let added = client
        .add(json!([
            {"content": "Kai grows tomatoes.", "user_id": "kai"},
            {"content": "Kai has two cats.", "user_id": "kai"},
            {"content": "Kai cycles to work.", "user_id": "kai"}
        ]))
        .await;
    assert_eq!(added.status, 201);
    totals_reach(&client, json!({"memory_days": 3})).await;
    // A later sample of the same day replaces the earlier one (it is not added to it).
    let deleted = client
        .delete(added.body["memories"][0]["id"].as_str().unwrap())
        .await;
    assert_eq!(deleted.status, 204);
    totals_reach(&client, json!({"memory_days": 2})).await;
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let body = usage(&client, "").await;
    assert_eq!(body["totals"]["memory_days"], 2, "{body}");
}

/// The console is one more door over the same use cases: a search by meaning in the
/// console is billed like an API search (under the member's credential), and it is
/// refused once the project's search quota is used up; the recall budget, which bounds
/// what agents are handed, does not shorten a console member's lookup.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_searches_are_metered_and_limited_like_api_searches() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    let added = client
        .add(json!([{"content": "The patient's blood type is AB negative."}]))
        .await;
    assert_eq!(added.status, 201, "{}", added.body);
    let (http, cookie) = server.console_owner_session().await;
    let search_in_console = || async {
        let response = http
            .post(format!("{}/console/api/memories", server.base_url))
            .header("Cookie", &cookie)
            .header("Content-Type", "application/json")
            .body(r#"{"filters":{"meaning":"which blood type"}}"#)
            .send()
            .await
            .unwrap();
        (
            response.status().as_u16(),
            response.text().await.unwrap_or_default(),
        )
    };
    let added = client
        .add(json!([{"content": "The patient's blood type was once recorded as O positive."}]))
        .await;
    assert_eq!(added.status, 201, "{}", added.body);
    // A recall budget of one result shortens what agents get, not a compliance lookup.
    let response = put_limits(&client, json!({"recall": {"max_results": 1}})).await;
    assert_eq!(response.status, 200, "{}", response.body);
    let (status, body) = search_in_console().await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("AB negative") && body.contains("O positive"),
        "the console shows every match: {body}"
    );
    let totals = totals_reach(&client, json!({"searches": 1, "memories_written": 2})).await;
    let rows = totals["usage"].to_string();
    assert!(
        rows.contains("console:"),
        "the search is billed to the member: {rows}"
    );

    // One search a month: the console's next search is refused like the API's.
    let response = put_limits(&client, json!({"monthly_quotas": {"searches": 1}})).await;
    assert_eq!(response.status, 200, "{}", response.body);
    let api_search = client.search(json!({"query": "blood type"})).await;
    assert_limit(&api_search, "monthly_quota.searches", 1, 1);
    let (status, body) = search_in_console().await;
    assert_ne!(status, 200, "a console search past the quota: {body}");
    assert!(body.contains("monthly_quota.searches"), "{body}");
}

/// Report dates keep to 1970-01-01 … 9999-12-31: a day chrono can parse but no report can
/// be about (the year -262143 or 1, or the last day chrono knows, where adding one
/// overflows) is a 422 naming the field, for usage, costs and recall metrics alike, and
/// never a crash.
#[tokio::test]
async fn report_dates_outside_their_range_are_refused_with_the_field() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    // The year -262143 on both ends: each field is named.
    for (path, fields) in [
        (
            "/v1/usage?from=-262143-01-01&to=-262143-01-02",
            vec!["from", "to"],
        ),
        ("/v1/usage?from=2026-01-01&to=%2B262142-12-31", vec!["to"]),
        ("/v1/costs?from=1969-12-31&to=1970-01-02", vec!["from"]),
        ("/v1/costs?from=9999-12-30&to=%2B10000-01-01", vec!["to"]),
    ] {
        let answer = client
            .send(client.request(reqwest::Method::GET, path))
            .await;
        answer.assert_problem(422, "validation-failed");
        assert_eq!(answer.error_fields(), fields, "{path}");
    }
    let metrics = client
        .send(client.request(
            reqwest::Method::GET,
            "/v1/recall-metrics?from=0001-01-01T00:00:00Z",
        ))
        .await;
    metrics.assert_problem(422, "validation-failed");
    assert_eq!(metrics.error_fields(), vec!["query.from".to_string()]);
    // The edges themselves are fine.
    let widest = client
        .send(client.request(
            reqwest::Method::GET,
            "/v1/costs?from=9999-12-01&to=9999-12-31",
        ))
        .await;
    assert_eq!(widest.status, 200, "{}", widest.body);
}

/// Evaluation runs are searches like any other: a run of 3 cases compared with a second
/// profile bills 6 searches (and the tokens of its queries) under `system:evaluation`, and a
/// run the month's search quota cannot hold is refused at once, naming the quota, with
/// nothing queued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evaluation_runs_are_metered_and_held_to_the_search_quota() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    let added = client
        .add(json!([
            {"content": "Lena drinks green tea.", "user_id": "lena"},
            {"content": "Lena lives in Porto.", "user_id": "lena"},
        ]))
        .await;
    assert_eq!(added.status, 201, "{}", added.body);
    let put_profile = client
        .send(
            client
                .request(reqwest::Method::PUT, "/v1/retrieval-profiles/keyword")
                .json(&json!({"parameters": {"retrieval": "keyword"}})),
        )
        .await;
    assert_eq!(put_profile.status, 200, "{}", put_profile.body);
    let cases: Vec<Value> = ["what does lena drink", "where does lena live", "tea"]
        .iter()
        .map(|query| json!({"query": query, "user_id": "lena", "expected_contents": ["Lena"]}))
        .collect();
    let set = client
        .send(
            client
                .request(reqwest::Method::POST, "/v1/eval-sets")
                .json(&json!({"name": "metered", "cases": cases})),
        )
        .await;
    assert_eq!(set.status, 201, "{}", set.body);
    let set_id = set.body["id"].as_str().unwrap().to_string();
    let before = usage(&client, "").await["totals"]["searches"]
        .as_i64()
        .unwrap_or(0);
    let started = client
        .send(
            client
                .request(
                    reqwest::Method::POST,
                    &format!("/v1/eval-sets/{set_id}/runs"),
                )
                .json(&json!({"compare_profile": "keyword"})),
        )
        .await;
    assert_eq!(started.status, 202, "{}", started.body);
    let run_id = started.body["run"]["id"].as_str().unwrap().to_string();
    engram_tests::eventually("the evaluation run to succeed", || async {
        let run = client
            .send(client.request(
                reqwest::Method::GET,
                &format!("/v1/eval-sets/{set_id}/runs/{run_id}"),
            ))
            .await;
        match run.body["status"].as_str() {
            Some("succeeded") => Ok(()),
            Some("failed") => panic!("{}", run.body),
            _ => Err(run.body.to_string()),
        }
    })
    .await;
    let billed = totals_reach(&client, json!({"searches": before + 6})).await;
    let evaluation_searches: i64 = billed["usage"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|row| row["unit"] == "searches" && row["credential"] == "system:evaluation")
        .map(|row| row["quantity"].as_i64().unwrap())
        .sum();
    assert_eq!(evaluation_searches, 6, "{billed}");

    // A quota that cannot hold another run's 6 searches refuses it, naming the quota.
    let limits = client
        .send(
            client
                .request(reqwest::Method::PUT, "/v1/project/limits")
                .json(&json!({"monthly_quotas": {"searches": before + 8}})),
        )
        .await;
    assert_eq!(limits.status, 200, "{}", limits.body);
    let refused = client
        .send(
            client
                .request(
                    reqwest::Method::POST,
                    &format!("/v1/eval-sets/{set_id}/runs"),
                )
                .json(&json!({"compare_profile": "keyword"})),
        )
        .await;
    refused.assert_problem(429, "quota-exceeded");
    let runs = client
        .send(client.request(
            reqwest::Method::GET,
            &format!("/v1/eval-sets/{set_id}/runs"),
        ))
        .await;
    assert_eq!(
        runs.body["runs"].as_array().map(Vec::len),
        Some(1),
        "the refused run was not queued: {}",
        runs.body
    );
}

/// One admin cannot make the shared workers search without end for one project: at most
/// 5 of a project's evaluation sets run on a schedule; a sixth is refused naming the field,
/// and an unscheduled set is still taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_runs_at_most_five_evaluation_sets_on_a_schedule() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    let create = |name: String, scheduled: bool| {
        let client = &client;
        async move {
            let mut body = json!({"name": name});
            if scheduled {
                body["schedule_interval_secs"] = json!(3600);
            }
            client
                .send(
                    client
                        .request(reqwest::Method::POST, "/v1/eval-sets")
                        .json(&body),
                )
                .await
        }
    };
    for n in 0..5 {
        let created = create(format!("nightly-{n}"), true).await;
        assert_eq!(created.status, 201, "{}", created.body);
    }
    let refused = create("nightly-5".to_string(), true).await;
    refused.assert_problem(422, "validation-failed");
    assert_eq!(
        refused.error_fields(),
        ["schedule_interval_secs"],
        "{}",
        refused.body
    );
    let unscheduled = create("by-hand".to_string(), false).await;
    assert_eq!(unscheduled.status, 201, "{}", unscheduled.body);
}
