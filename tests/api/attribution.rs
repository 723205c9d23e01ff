//! Usage by who, through which door: a scripted workload through two keys, two end-user
//! tokens (minted by different keys), two agents and two channels (the API and the console)
//! whose breakdowns by key, end-user, agent and channel match hand-computed counts exactly,
//! on SQLite and PostgreSQL; a token's usage is its minting key's; recall and audit events
//! name the channel; erasing an end-user renames their usage and changes no total; another
//! project sees none of it; and a fresh install prices its first calls with the default book.

use engram_tests::{ApiClient, TestServer};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

async fn get(client: &ApiClient, path: &str) -> Value {
    let response = client
        .send(client.request(reqwest::Method::GET, path))
        .await;
    assert_eq!(response.status, 200, "{path}: {}", response.body);
    response.body
}

async fn post(client: &ApiClient, path: &str, body: Value) -> Value {
    let response = client
        .send(client.request(reqwest::Method::POST, path).json(&body))
        .await;
    assert!(
        (200..300).contains(&response.status),
        "{path}: {} {}",
        response.status,
        response.body
    );
    response.body
}

/// Waits until the meter has written `searches` and `memories_written` (it flushes every
/// second).
async fn usage_settles(client: &ApiClient, searches: i64, memories_written: i64) -> Value {
    let started = Instant::now();
    loop {
        let body = get(client, "/v1/usage").await;
        if body["totals"]["searches"] == searches
            && body["totals"]["memories_written"] == memories_written
        {
            return body;
        }
        if started.elapsed() > engram_tests::patience() {
            let by_channel = get(client, "/v1/usage?by=channel").await;
            let by_key = get(client, "/v1/usage?by=key").await;
            panic!(
                "usage never reached {searches} searches and {memories_written} memories: {}; by channel {}; by key {}",
                body["totals"], by_channel["usage"], by_key["usage"]
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `(value, unit) → quantity` of a `by=` report, the value as the row names it in `field`
/// (`-` where it is null; `erased:<digest>` for an erased end-user).
fn breakdown(report: &Value, field: &str) -> BTreeMap<(String, String), i64> {
    let mut sums = BTreeMap::new();
    for row in report["usage"].as_array().unwrap() {
        assert!(
            row.get(field).is_some(),
            "a by-row names its {field}: {row}"
        );
        let value = match (&row[field], &row["erased_subject"]) {
            (Value::String(name), _) => name.clone(),
            (Value::Null, Value::String(digest)) => format!("erased:{digest}"),
            _ => "-".to_string(),
        };
        *sums
            .entry((value, row["unit"].as_str().unwrap().to_string()))
            .or_default() += row["quantity"].as_i64().unwrap();
    }
    sums
}

/// The counts of `breakdown` for searches and memories written only (the units whose
/// quantities a test can count by hand; embedded tokens are checked against the totals).
fn counted(sums: &BTreeMap<(String, String), i64>) -> BTreeMap<(String, String), i64> {
    sums.iter()
        .filter(|((_, unit), _)| unit == "searches" || unit == "memories_written")
        .map(|(key, quantity)| (key.clone(), *quantity))
        .collect()
}

fn expected(rows: &[(&str, &str, i64)]) -> BTreeMap<(String, String), i64> {
    rows.iter()
        .map(|(value, unit, quantity)| ((value.to_string(), unit.to_string()), *quantity))
        .collect()
}

/// Per unit, what a report's rows add up to.
fn unit_sums(report: &Value) -> BTreeMap<String, i64> {
    let mut sums = BTreeMap::new();
    for row in report["usage"].as_array().unwrap() {
        *sums
            .entry(row["unit"].as_str().unwrap().to_string())
            .or_default() += row["quantity"].as_i64().unwrap();
    }
    sums
}

async fn search(client: &ApiClient, body: Value) -> Value {
    let response = client.search(body.clone()).await;
    assert_eq!(response.status, 200, "{body}: {}", response.body);
    response.body
}

async fn add(client: &ApiClient, memories: Value) {
    let response = client.add(memories.clone()).await;
    assert_eq!(response.status, 201, "{memories}: {}", response.body);
}

async fn attributed_workload_on(server: TestServer, database: &str) {
    let key_a = server.client();
    let own_keys = get(&key_a, "/v1/keys").await;
    let key_a_id = own_keys["keys"][0]["id"].as_str().unwrap().to_string();
    let scopes = own_keys["keys"][0]["scopes"].clone();
    let created = post(
        &key_a,
        "/v1/keys",
        json!({"label": "second service", "scopes": scopes, "environment": "test"}),
    )
    .await;
    let key_b_id = created["key"]["id"].as_str().unwrap().to_string();
    let key_b = server.client_with_key(created["secret"].as_str().unwrap());
    // Ann's token is minted by key A, Ben's by key B.
    let ann_token = post(&key_a, "/v1/end-user-tokens", json!({"user_id": "ann"})).await;
    let ann = server.client_with_key(ann_token["token"].as_str().unwrap());
    let ben_token = post(&key_b, "/v1/end-user-tokens", json!({"user_id": "ben"})).await;
    let ben = server.client_with_key(ben_token["token"].as_str().unwrap());

    // Key A: 2 memories and 1 search for ann with the planner.
    add(
        &key_a,
        json!([
            {"content": "Ann flies to Lisbon in May.", "user_id": "ann", "agent_id": "planner"},
            {"content": "Ann prefers aisle seats.", "user_id": "ann", "agent_id": "planner"}
        ]),
    )
    .await;
    search(
        &key_a,
        json!({"query": "flights", "user_id": "ann", "agent_id": "planner"}),
    )
    .await;
    // Key B: 1 memory and 2 searches for ben with the writer.
    add(
        &key_b,
        json!([{"content": "Ben writes in British English.", "user_id": "ben", "agent_id": "writer"}]),
    )
    .await;
    for query in ["spelling", "tone"] {
        search(
            &key_b,
            json!({"query": query, "user_id": "ben", "agent_id": "writer"}),
        )
        .await;
    }
    // Ann's token: 1 memory with the writer, 1 search with the planner.
    add(
        &ann,
        json!([{"content": "Ann's passport expires in 2031.", "agent_id": "writer"}]),
    )
    .await;
    let ann_search = search(&ann, json!({"query": "passport", "agent_id": "planner"})).await;
    // Ben's token: 1 search naming no agent.
    search(&ben, json!({"query": "style"})).await;
    // The console: 1 search by the owner (no end-user, no agent).
    let (http, cookie) = server.console_owner_session().await;
    let console_search = http
        .post(format!("{}/console/api/memories", server.base_url))
        .header("Cookie", &cookie)
        .header("Content-Type", "application/json")
        .body(r#"{"filters":{"meaning":"travel plans"}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(console_search.status().as_u16(), 200, "{database}");

    usage_settles(&key_a, 6, 4).await;
    let key_a_credential = format!("key:{key_a_id}");
    let key_b_credential = format!("key:{key_b_id}");

    // By key: a token's usage is its minting key's; the console member is a credential of
    // its own, with no key id.
    let by_key = get(&key_a, "/v1/usage?by=key").await;
    assert_eq!(by_key["by"], "key");
    let other_credentials: Vec<&str> = by_key["usage"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|row| row["key_id"].is_null())
        .map(|row| row["credential"].as_str().unwrap())
        .collect();
    assert!(
        other_credentials
            .iter()
            .all(|credential| credential.starts_with("console:") || *credential == "storage"),
        "{database}: credentials that are not keys: {other_credentials:?}"
    );
    let console_credential = other_credentials
        .iter()
        .find(|credential| credential.starts_with("console:"))
        .unwrap()
        .to_string();
    assert_eq!(
        counted(&breakdown(&by_key, "key_id")),
        expected(&[
            (&key_a_id, "memories_written", 3),
            (&key_a_id, "searches", 2),
            (&key_b_id, "memories_written", 1),
            (&key_b_id, "searches", 3),
            ("-", "searches", 1),
        ]),
        "{database}: by key"
    );
    for row in by_key["usage"].as_array().unwrap() {
        if let Some(id) = row["key_id"].as_str() {
            assert_eq!(row["credential"], format!("key:{id}").as_str());
        }
    }
    assert!(!by_key.to_string().contains("\"end_user\""), "{by_key}");
    // By end-user: what the call named, or the token's end-user.
    let by_end_user = get(&key_a, "/v1/usage?by=end_user").await;
    assert_eq!(
        counted(&breakdown(&by_end_user, "user_id")),
        expected(&[
            ("ann", "memories_written", 3),
            ("ann", "searches", 2),
            ("ben", "memories_written", 1),
            ("ben", "searches", 3),
            ("-", "searches", 1),
        ]),
        "{database}: by end-user"
    );
    // By agent.
    let by_agent = get(&key_a, "/v1/usage?by=agent").await;
    assert_eq!(
        counted(&breakdown(&by_agent, "agent_id")),
        expected(&[
            ("planner", "memories_written", 2),
            ("planner", "searches", 2),
            ("writer", "memories_written", 2),
            ("writer", "searches", 2),
            ("-", "searches", 2),
        ]),
        "{database}: by agent"
    );
    // By channel.
    let by_channel = get(&key_a, "/v1/usage?by=channel").await;
    assert_eq!(
        counted(&breakdown(&by_channel, "channel")),
        expected(&[
            ("http", "memories_written", 4),
            ("http", "searches", 5),
            ("console", "searches", 1),
        ]),
        "{database}: by channel"
    );
    // Every breakdown adds up to the totals, embedded tokens included.
    let per_unit = unit_sums(&get(&key_a, "/v1/usage").await);
    for report in [&by_key, &by_end_user, &by_agent, &by_channel] {
        assert_eq!(unit_sums(report), per_unit, "{database}: {}", report["by"]);
    }
    assert!(per_unit["tokens_embedded"] > 0);

    // Costs by key: the default price book prices a fresh install's first calls.
    let costs = get(&key_a, "/v1/costs?by=key").await;
    assert!(
        costs["totals_micros"]["USD"].as_i64().unwrap() > 0,
        "{database}: a fresh install shows money: {costs}"
    );
    let mut search_costs: BTreeMap<String, i64> = BTreeMap::new();
    for row in costs["days"].as_array().unwrap() {
        assert_eq!(row["default_price"], true, "{row}");
        if row["unit"] == "searches" {
            assert_eq!(row["unit_price_micros"], 500, "{row}");
            *search_costs
                .entry(row["credential"].as_str().unwrap().to_string())
                .or_default() += row["cost_micros"].as_i64().unwrap();
        }
    }
    assert_eq!(
        search_costs,
        BTreeMap::from([
            (key_a_credential.clone(), 1_000),
            (key_b_credential.clone(), 1_500),
            (console_credential.clone(), 500),
        ]),
        "{database}"
    );
    let unbroken = get(&key_a, "/v1/costs").await;
    assert_eq!(
        unbroken["totals_micros"], costs["totals_micros"],
        "{database}"
    );
    let csv = key_a
        .http_text(key_a.request(reqwest::Method::GET, "/v1/usage?by=agent&format=csv"))
        .await;
    assert!(
        csv.starts_with("period_start,unit,agent_id,quantity\n"),
        "{csv}"
    );
    assert!(csv.contains(",searches,planner,2"), "{csv}");
    let csv = key_a
        .http_text(key_a.request(reqwest::Method::GET, "/v1/costs?by=key&format=csv"))
        .await;
    assert!(
        csv.starts_with(
            "day,unit,credential,key_id,quantity,currency,unit_price_micros,cost_micros,default_price,unit_price,cost\n"
        ),
        "{csv}"
    );
    assert!(
        csv.contains(&format!(
            ",searches,{console_credential},,1,USD,500,500,true"
        )),
        "the console member's credential has no key id: {csv}"
    );

    // Recall events name the channel and the billed credential (the minting key).
    let recall_id = ann_search["recall_id"].as_str().unwrap();
    let recall = get(&key_a, &format!("/v1/recalls/{recall_id}")).await;
    assert_eq!(recall["channel"], "http", "{recall}");
    assert_eq!(recall["credential"], key_a_credential.as_str(), "{recall}");
    // Audit events name the door: the API's writes, the console's sign-in.
    let created_events = get(&key_a, "/v1/audit?action=memory.created").await;
    assert!(!created_events["events"].as_array().unwrap().is_empty());
    for event in created_events["events"].as_array().unwrap() {
        assert_eq!(event["details"]["channel"], "http", "{event}");
    }
    let logins = get(&key_a, "/v1/audit?action=console.login").await;
    for event in logins["events"].as_array().unwrap() {
        assert_eq!(event["details"]["channel"], "console", "{event}");
    }

    // A breakdown needs daily rows; an unknown one is named.
    for (query, field) in [
        ("?by=hourly", "by"),
        ("?by=key&granularity=hour", "granularity"),
    ] {
        let response = key_a
            .send(key_a.request(reqwest::Method::GET, &format!("/v1/usage{query}")))
            .await;
        response.assert_problem(422, "validation-failed");
        assert_eq!(response.body["errors"][0]["field"], field, "{query}");
    }

    // Another project sees none of it, by any breakdown.
    let (_, other_key) = server.create_project("other").unwrap();
    let other = server.client_with_key(&other_key);
    for by in ["key", "end_user", "agent", "channel"] {
        let report = get(&other, &format!("/v1/usage?by={by}")).await;
        let text = report["usage"].to_string();
        for own in ["ann", "ben", "planner", "writer", &key_a_id, &key_b_id] {
            assert!(!text.contains(own), "{database}: {by} shows {own}: {text}");
        }
        let costs = get(&other, &format!("/v1/costs?by={by}")).await;
        assert!(!costs["days"].to_string().contains("ann"), "{costs}");
    }

    // Erasing ann renames her usage to her subject digest: every total, and the
    // breakdown's figures, stay as they were.
    let before = get(&key_a, "/v1/usage").await["totals"].clone();
    let costs_before = get(&key_a, "/v1/costs").await["totals_micros"].clone();
    let erasure = key_a
        .send(key_a.request(reqwest::Method::POST, "/v1/subjects/ann/erasure"))
        .await;
    assert_eq!(erasure.status, 202, "{}", erasure.body);
    let task_id = erasure.body["id"].as_str().unwrap().to_string();
    let started = Instant::now();
    let task = loop {
        let task = get(&key_a, &format!("/v1/tasks/{task_id}")).await;
        if task["status"] == "succeeded" || task["status"] == "failed" {
            break task;
        }
        assert!(
            started.elapsed() < engram_tests::patience(),
            "the erasure never finished: {task}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(task["status"], "succeeded", "{database}: {task}");
    let after = get(&key_a, "/v1/usage").await;
    assert_eq!(after["totals"], before, "{database}");
    assert_eq!(
        get(&key_a, "/v1/costs").await["totals_micros"],
        costs_before,
        "{database}"
    );
    let by_end_user = get(&key_a, "/v1/usage?by=end_user").await;
    assert!(
        !by_end_user.to_string().contains("\"ann\""),
        "{database}: {by_end_user}"
    );
    let erased: BTreeMap<String, i64> = counted(&breakdown(&by_end_user, "user_id"))
        .into_iter()
        .filter(|((value, _), _)| value.starts_with("erased:"))
        .map(|((_, unit), quantity)| (unit, quantity))
        .collect();
    assert_eq!(
        erased,
        BTreeMap::from([
            ("memories_written".to_string(), 3),
            ("searches".to_string(), 2)
        ]),
        "{database}: {by_end_user}"
    );
    assert_eq!(unit_sums(&by_end_user), unit_sums(&after), "{database}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_is_attributed_to_key_end_user_agent_and_channel_on_sqlite() {
    attributed_workload_on(TestServer::spawn().await.unwrap(), "sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_is_attributed_to_key_end_user_agent_and_channel_on_postgres() {
    let database = engram_test_postgres::create_database().await;
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::spawn_with(
        directory.path(),
        &[("ENGRAM_DATABASE_URL", database.url.as_str())],
    )
    .await
    .unwrap();
    attributed_workload_on(server, "postgres").await;
}
