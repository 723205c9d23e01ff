//! Prices and monthly statements through the API: a scripted workload's statement equals
//! the totals computed by hand from its quantities and the prices set (including a token
//! price quoted per million), a closed month's statement stays as stored through a price
//! change and an erasure, and who may read prices and statements.

use chrono::Datelike;
use engram_tests::{ApiClient, TestServer};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

async fn get(client: &ApiClient, path: &str) -> engram_tests::ApiResponse {
    client
        .send(client.request(reqwest::Method::GET, path))
        .await
}

async fn post(client: &ApiClient, path: &str, body: Value) -> engram_tests::ApiResponse {
    client
        .send(client.request(reqwest::Method::POST, path).json(&body))
        .await
}

/// Trillionths of a currency unit in a decimal such as `0.00000002`.
fn picos(decimal: &str) -> i128 {
    let (whole, fraction) = decimal.split_once('.').unwrap_or((decimal, ""));
    let whole: i128 = whole.parse().unwrap();
    let fraction: i128 = format!("{fraction:0<12}").parse().unwrap();
    whole * 1_000_000_000_000 + fraction
}

fn this_month() -> String {
    chrono::Utc::now().format("%Y-%m").to_string()
}

/// The latest month closed by now (a month closes an hour after it ends): the one the
/// statement closer stores.
fn the_latest_closed_month() -> chrono::NaiveDate {
    let now = chrono::Utc::now();
    let today = now.date_naive();
    let this_month = chrono::NaiveDate::from_ymd_opt(today.year(), today.month(), 1).unwrap();
    let closes = this_month.and_hms_opt(1, 0, 0).unwrap().and_utc();
    let back = if now >= closes { 1 } else { 2 };
    this_month
        .checked_sub_months(chrono::Months::new(back))
        .unwrap()
}

/// Wait until the usage report counts at least `searches` searches and `written` memories.
async fn usage_counted(client: &ApiClient, searches: i64, written: i64) -> Value {
    let started = Instant::now();
    loop {
        let usage = get(client, "/v1/usage").await;
        assert_eq!(usage.status, 200, "{}", usage.body);
        let totals = usage.body["totals"].clone();
        if totals["searches"].as_i64() >= Some(searches)
            && totals["memories_written"].as_i64() >= Some(written)
        {
            return totals;
        }
        assert!(
            started.elapsed() < engram_tests::patience(),
            "the meter never counted {searches} searches and {written} memories: {totals}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `engram admin set-price` on the server's data dir with `arguments` after `--data-dir`.
fn set_price_command(server: &TestServer, arguments: &[&str]) -> std::process::Output {
    let data_dir = server.data_dir.display().to_string();
    let mut command = vec!["admin", "set-price", "--data-dir", data_dir.as_str()];
    command.extend_from_slice(arguments);
    engram_tests::run_engram(&command, &[])
}

fn set_price(server: &TestServer, unit: &str, price: &str, per: &str) {
    let set = set_price_command(server, &["--unit", unit, "--price", price, "--per", per]);
    assert!(
        set.status.success(),
        "{}",
        String::from_utf8_lossy(&set.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scripted_workload_statement_matches_the_totals_computed_by_hand() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    // One price per unit the workload uses; the token price as price lists quote it.
    set_price(&server, "searches", "0.0004", "1");
    set_price(&server, "memories_written", "0.0015", "1");
    set_price(&server, "tokens_embedded", "0.02", "1000000");
    set_price(&server, "memory_days", "0", "1");
    let prices: BTreeMap<&str, i128> = BTreeMap::from([
        ("searches", picos("0.0004")),
        ("memories_written", picos("0.0015")),
        ("tokens_embedded", 20_000),
        ("memory_days", 0),
    ]);
    let limits = client
        .send(
            client
                .request(reqwest::Method::PUT, "/v1/project/limits")
                .json(&json!({"monthly_budget": {"amount_micros": 1_000, "currency": "USD"}})),
        )
        .await;
    assert_eq!(limits.status, 200, "{}", limits.body);
    for (user, text) in [
        ("ann", "Ann drinks oolong."),
        ("ben", "Ben cycles to work."),
        ("ann", "Ann lives in Lyon."),
    ] {
        let added = client
            .add(json!([{"content": text, "user_id": user}]))
            .await;
        assert!(added.status == 201 || added.status == 202, "{}", added.body);
    }
    for query in ["tea", "bicycle", "city", "work", "drinks"] {
        let found = client
            .search(json!({"query": query, "user_id": "ann"}))
            .await;
        assert_eq!(found.status, 200, "{}", found.body);
    }
    usage_counted(&client, 5, 3).await;
    // The statement read between two equal usage reports: nothing was metered meanwhile.
    let started = Instant::now();
    let (totals, statement) = loop {
        let before = get(&client, "/v1/usage").await.body["totals"].clone();
        let statement = get(&client, &format!("/v1/statements/{}", this_month())).await;
        assert_eq!(statement.status, 200, "{}", statement.body);
        let after = get(&client, "/v1/usage").await.body["totals"].clone();
        if before == after {
            break (after, statement.body);
        }
        assert!(
            started.elapsed() < engram_tests::patience(),
            "the usage never settled: {before} then {after}"
        );
    };
    assert_eq!(statement["provisional"], true, "{statement}");
    assert_eq!(statement["month"], this_month());
    // Each line is its quantity at its price, exactly; the usage report has the quantities.
    let mut by_hand: i128 = 0;
    for line in statement["lines"].as_array().unwrap() {
        let unit = line["unit"].as_str().unwrap();
        let quantity = line["quantity"].as_i64().unwrap();
        assert_eq!(Some(quantity), totals[unit].as_i64(), "{unit}: {statement}");
        let price = prices[unit];
        assert_eq!(picos(line["unit_price"].as_str().unwrap()), price, "{line}");
        assert_eq!(line["default_price"], false, "{line}");
        let cost = price * i128::from(quantity);
        assert_eq!(picos(line["cost"].as_str().unwrap()), cost, "{line}");
        by_hand += cost;
    }
    let tokens = totals["tokens_embedded"].as_i64().unwrap();
    assert!(tokens > 0, "the workload embedded tokens: {totals}");
    assert_eq!(
        by_hand,
        5 * picos("0.0004") + 3 * picos("0.0015") + i128::from(tokens) * 20_000
    );
    let total = &statement["totals"][0];
    assert_eq!(total["currency"], "USD");
    assert_eq!(
        picos(total["cost"].as_str().unwrap()),
        by_hand,
        "{statement}"
    );
    // The budget is the project's, against the same total.
    let budget = &statement["budgets"][0];
    assert_eq!(budget["amount"], "0.001", "{statement}");
    assert_eq!(picos(budget["spent"].as_str().unwrap()), by_hand);
    // Each breakdown adds up to the total, and names who did it.
    for by in ["key", "end_user", "agent", "channel"] {
        let sum: i128 = statement["breakdowns"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|line| line["by"] == by)
            .map(|line| picos(line["cost"].as_str().unwrap()))
            .sum();
        assert_eq!(sum, by_hand, "{by}: {statement}");
    }
    let ann_searches = statement["breakdowns"]
        .as_array()
        .unwrap()
        .iter()
        .find(|line| {
            line["by"] == "end_user" && line["value"] == "ann" && line["unit"] == "searches"
        })
        .unwrap_or_else(|| panic!("ann's searches: {statement}"));
    assert_eq!(ann_searches["quantity"], 5);
    assert_eq!(ann_searches["cost"], "0.002");

    // The CSV is the same statement, one row per line, total, budget and breakdown.
    let csv = client
        .http_text(client.request(
            reqwest::Method::GET,
            &format!("/v1/statements/{}?format=csv", this_month()),
        ))
        .await;
    assert!(csv.starts_with("month,provisional,section,by,project_id,value,erased_subject,unit,quantity,currency,unit_price,price_from,default_price,cost\n"), "{csv}");
    let total_cell = total["cost"].as_str().unwrap();
    assert!(
        csv.contains(&format!(",total,,,,,,,USD,,,,{total_cell}\n")),
        "{csv}"
    );
    assert!(csv.contains(",line,,,,,searches,5,USD,0.0004,"), "{csv}");
    assert!(
        csv.contains(",breakdown,end_user,,ann,,searches,5,USD,,,,0.002\n"),
        "{csv}"
    );

    // The prices that apply, to any key of the project (not to an end-user token).
    let reader = post(
        &client,
        "/v1/keys",
        json!({"label": "reader", "scopes": ["memories:read"]}),
    )
    .await;
    assert_eq!(reader.status, 201, "{}", reader.body);
    let reader = server.client_with_key(reader.body["secret"].as_str().unwrap());
    let prices = get(&reader, "/v1/prices").await;
    assert_eq!(prices.status, 200, "{}", prices.body);
    let tokens_price = prices.body["units"]
        .as_array()
        .unwrap()
        .iter()
        .find(|unit| unit["unit"] == "tokens_embedded")
        .unwrap()
        .clone();
    assert_eq!(
        tokens_price["current"]["unit_price"], "0.00000002",
        "{tokens_price}"
    );
    assert_eq!(tokens_price["current"]["source"], "deployment");
    // The reader key reads prices but not statements; an end-user token reads neither.
    assert_eq!(
        get(&reader, &format!("/v1/statements/{}", this_month()))
            .await
            .status,
        403
    );
    let token = post(
        &client,
        "/v1/end-user-tokens",
        json!({"user_id": "ann", "scopes": ["memories:read"]}),
    )
    .await;
    assert_eq!(token.status, 201, "{}", token.body);
    let end_user = server.client_with_key(token.body["token"].as_str().unwrap());
    assert_eq!(get(&end_user, "/v1/prices").await.status, 403);
    assert_eq!(
        get(&end_user, &format!("/v1/statements/{}", this_month()))
            .await
            .status,
        403
    );

    // Months that are not a month, or have not begun, are refused naming `month`.
    let next = chrono::Utc::now().date_naive() + chrono::Duration::days(40);
    for month in [
        "2026-13",
        "26-11",
        "november",
        &next.format("%Y-%m").to_string(),
    ] {
        let refused = get(&client, &format!("/v1/statements/{month}")).await;
        assert_eq!(refused.status, 422, "{month}: {}", refused.body);
        assert!(
            refused.body.to_string().contains("month"),
            "{}",
            refused.body
        );
    }
    let refused = get(
        &client,
        &format!("/v1/statements/{}?format=xml", this_month()),
    )
    .await;
    assert_eq!(refused.status, 422);
}

/// Prices finer than a millionth are kept exactly; a price that starts in the past is
/// refused (a new price never re-prices a day that is over).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prices_are_exact_and_never_start_in_the_past() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    set_price(&server, "llm_tokens_in", "0.00000002", "1");
    set_price(&server, "llm_tokens_out", "0.075", "1000000");
    let prices = get(&client, "/v1/prices").await.body;
    let current = |unit: &str| {
        prices["units"]
            .as_array()
            .unwrap()
            .iter()
            .find(|entry| entry["unit"] == unit)
            .unwrap()["current"]
            .clone()
    };
    assert_eq!(current("llm_tokens_in")["unit_price"], "0.00000002");
    assert_eq!(current("llm_tokens_out")["unit_price"], "0.000000075");
    let yesterday = (chrono::Utc::now().date_naive() - chrono::Duration::days(1)).to_string();
    let refused = set_price_command(
        &server,
        &[
            "--unit",
            "searches",
            "--price",
            "1",
            "--effective-from",
            &yesterday,
        ],
    );
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("must be today"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let too_fine = set_price_command(
        &server,
        &["--unit", "searches", "--price", "0.0000000000001"],
    );
    assert!(!too_fine.status.success());
    assert!(String::from_utf8_lossy(&too_fine.stderr).contains("trillionth"));
}

/// The statement closer stores a closed month's statement, unread; it is read back as
/// stored: a price later written into that month and an erasure of one of its end-users
/// change the costs report, not the statement (the erased end-user's id becomes their
/// digest, every figure stays).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_months_statement_is_stored_by_the_closer_and_never_changes() {
    use engram_core::usage::{BillingMonth, PriceEntry, UsageAttribution, UsageUnit};
    use engram_storage::statements::StatementOf;
    use engram_storage::usage::UsageIncrement;
    let server = TestServer::spawn().await.unwrap();
    // A project made after the closer's first run: its last month is not stored yet.
    let (project_id, key) = server.create_project("billing").unwrap();
    // Usage of the month that closed last, as the meter would have written it then.
    let storage = engram_storage::Storage::connect(&format!(
        "sqlite://{}?mode=rwc",
        server.data_dir.join("engram.db").display()
    ))
    .await
    .unwrap();
    let scope = engram_storage::MaintenanceStore::new(storage.clone())
        .all_project_scopes()
        .await
        .unwrap()
        .into_iter()
        .find(|scope| scope.project_id().to_string() == project_id)
        .unwrap();
    let month = the_latest_closed_month();
    let at = month.and_hms_opt(12, 0, 0).unwrap().and_utc() + chrono::Duration::days(3);
    let usage = |user: &str, quantity: i64| UsageIncrement {
        organization_id: scope.organization_id(),
        project_id: scope.project_id(),
        attribution: UsageAttribution {
            credential: "key:scripted".to_string(),
            channel: "http".to_string(),
            end_user: Some(user.to_string()),
            agent_id: None,
        },
        unit: UsageUnit::Searches,
        at,
        quantity,
    };
    storage
        .add_usage(&[usage("ann", 4), usage("ben", 6)])
        .await
        .unwrap();
    let price = |picos: i64| PriceEntry {
        organization_id: None,
        unit: UsageUnit::Searches,
        currency: "USD".to_string(),
        unit_price_picos: picos,
        effective_from: month.and_hms_opt(0, 0, 0).unwrap().and_utc(),
        is_default: false,
    };
    storage
        .add_price(
            &price(500_000_000),
            &engram_core::audit::Actor::system("test"),
        )
        .await
        .unwrap();
    // The closer runs at start: restarted, the server stores the month without a read.
    let (stopped, data_dir, owned_dir) = server.stop();
    assert!(stopped);
    let server = TestServer::spawn_in(&data_dir).await.unwrap();
    let client = server.client_with_key(&key);
    let billing_month = BillingMonth::containing(at);
    let started = Instant::now();
    let stored = loop {
        if let Some(stored) = storage
            .stored_statement(StatementOf::Project(&scope), billing_month)
            .await
            .unwrap()
        {
            break stored;
        }
        assert!(
            started.elapsed() < engram_tests::patience(),
            "the statement closer never stored {}",
            billing_month.label()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(!stored.provisional);
    assert_eq!(
        stored.totals[0].cost.decimal(),
        "0.005",
        "10 searches at 0.0005"
    );

    let path = format!("/v1/statements/{}", month.format("%Y-%m"));
    let first = get(&client, &path).await;
    assert_eq!(first.status, 200, "{}", first.body);
    let first = first.body;
    assert_eq!(first["provisional"], false, "{first}");
    assert_eq!(first["totals"][0]["cost"], "0.005", "{first}");
    assert_eq!(
        first["generated_at"],
        serde_json::to_value(stored.generated_at).unwrap(),
        "the read returns what the closer stored"
    );
    let costs_path = format!(
        "/v1/costs?from={}&to={}",
        month,
        month.checked_add_months(chrono::Months::new(1)).unwrap() - chrono::Duration::days(1)
    );
    assert_eq!(
        get(&client, &costs_path).await.body["totals"]["USD"],
        "0.005"
    );

    // A price written into that month afterwards (no door allows it; storage does) re-prices
    // the costs report, and an erasure renames ann.
    storage
        .add_price(
            &price(900_000_000),
            &engram_core::audit::Actor::system("test"),
        )
        .await
        .unwrap();
    assert_eq!(
        get(&client, &costs_path).await.body["totals"]["USD"],
        "0.009"
    );
    let erasure = client
        .send(client.request(reqwest::Method::POST, "/v1/subjects/ann/erasure"))
        .await;
    assert_eq!(erasure.status, 202, "{}", erasure.body);
    let task_id = erasure.body["id"].as_str().unwrap().to_string();
    let started = Instant::now();
    let task = loop {
        let task = get(&client, &format!("/v1/tasks/{task_id}")).await.body;
        if task["status"] == "succeeded" || task["status"] == "failed" {
            break task;
        }
        assert!(
            started.elapsed() < engram_tests::patience(),
            "the erasure never finished: {task}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(task["status"], "succeeded", "{task}");

    let second = get(&client, &path).await.body;
    for field in [
        "month",
        "provisional",
        "closes_at",
        "generated_at",
        "lines",
        "totals",
        "budgets",
        "project",
        "organization",
    ] {
        assert_eq!(second[field], first[field], "{field} changed: {second}");
    }
    let text = second["breakdowns"].to_string();
    assert!(!text.contains("\"ann\""), "the erased id is gone: {text}");
    assert!(text.contains("\"ben\""), "{text}");
    // Every breakdown line keeps its figures; ann's are under her digest.
    let figures = |statement: &Value| -> Vec<String> {
        let mut lines: Vec<String> = statement["breakdowns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|line| {
                format!(
                    "{} {} {} {}",
                    line["by"], line["unit"], line["quantity"], line["cost"]
                )
            })
            .collect();
        lines.sort();
        lines
    };
    assert_eq!(figures(&second), figures(&first));
    let erased = second["breakdowns"]
        .as_array()
        .unwrap()
        .iter()
        .find(|line| line["by"] == "end_user" && line["erased_subject"].is_string())
        .unwrap_or_else(|| panic!("ann's line under her digest: {second}"));
    assert_eq!(erased["quantity"], 4);
    assert_eq!(erased["cost"], "0.002");
    storage.close().await.unwrap();
    drop(server);
    drop(owned_dir);
}
