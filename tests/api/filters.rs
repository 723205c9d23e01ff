//! The filter language end to end, on SQLite and on PostgreSQL: random filter trees over a
//! random set of memories answer the same through search (the index's payload filter), list
//! (SQL) and count as the filter language's own in-memory evaluation; a filter that matches one
//! memory in 2,000 still finds it at `top_k` 10; bulk delete by filter, entity listing and
//! event time (`occurred_at`) as a client uses them. `ENGRAM_FILTER_CASES` sets the number of
//! random filters per database (48 by default).

use chrono::{DateTime, Duration, TimeZone, Utc};
use engram_core::memory_filter::parse_memory_filter;
use engram_core::{ExternalId, Memory};
use engram_tests::{ApiClient, ApiResponse, TestServer};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::BTreeSet;

const USERS: [&str; 3] = ["ana", "ben", "chen"];
const AGENTS: [&str; 2] = ["support", "billing"];
const SESSIONS: [&str; 2] = ["s-1", "s-2"];
const KINDS: [&str; 4] = ["semantic", "episodic", "procedural", "preference"];
const SOURCES: [&str; 3] = ["user_stated", "tool_result", "manual"];
const CATEGORIES: [&str; 3] = ["Food", "travel", "work"];
const TOPICS: [&str; 3] = ["tea", "trains", "Taxes"];
const WORDS: [&str; 5] = ["Oolong", "shanghai", "Ticket", "invoice", "garden"];
const APPS: [&str; 2] = ["web", "mobile"];
const CONFIDENCES: [f64; 3] = [0.2, 0.5, 0.9];
const NUMBERS: [f64; 3] = [1.0, 2.0, 2.5];
const MEMORIES: usize = 60;

async fn post(client: &ApiClient, path: &str, body: &Value) -> ApiResponse {
    client
        .send(client.request(Method::POST, path).json(body))
        .await
}

async fn client_vector_project(server: &TestServer) -> ApiClient {
    let client = server.client();
    let response = client
        .send(
            client
                .request(Method::PATCH, "/v1/project/settings")
                .json(&json!({"embedding": {"source": "client", "dimension": 4}})),
        )
        .await;
    assert_eq!(response.status, 200, "{}", response.body);
    client
}

fn day(offset_days: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2024, 7, 1, 12, 0, 0).unwrap() + Duration::days(offset_days)
}

/// One random memory as the API takes it.
fn random_memory(rng: &mut StdRng, position: usize) -> Value {
    let pick =
        |rng: &mut StdRng, values: &[&str]| values[rng.gen_range(0..values.len())].to_string();
    let maybe = |rng: &mut StdRng, values: &[&str]| {
        rng.gen_bool(0.7)
            .then(|| values[rng.gen_range(0..values.len())].to_string())
    };
    let categories: Vec<&str> = CATEGORIES
        .iter()
        .copied()
        .filter(|_| rng.gen_bool(0.4))
        .collect();
    let mut metadata = serde_json::Map::new();
    if rng.gen_bool(0.8) {
        metadata.insert("topic".into(), pick(rng, &TOPICS).into());
    }
    if rng.gen_bool(0.6) {
        metadata.insert("n".into(), json!(NUMBERS[rng.gen_range(0..NUMBERS.len())]));
    }
    if rng.gen_bool(0.5) {
        metadata.insert("flag".into(), json!(rng.gen_bool(0.5)));
    }
    if rng.gen_bool(0.5) {
        metadata.insert("app_id".into(), pick(rng, &APPS).into());
    }
    let content = format!(
        "Memory {position}: {} and {}",
        pick(rng, &WORDS),
        pick(rng, &WORDS)
    );
    json!({
        "content": content,
        "user_id": maybe(rng, &USERS),
        "agent_id": maybe(rng, &AGENTS),
        "session_id": maybe(rng, &SESSIONS),
        "kind": pick(rng, &KINDS),
        "source": pick(rng, &SOURCES),
        "categories": categories,
        "confidence": CONFIDENCES[rng.gen_range(0..CONFIDENCES.len())],
        "metadata": metadata,
        "occurred_at": day(rng.gen_range(0..40)).to_rfc3339(),
        // Every memory is similar to the query vector, so a dense search ranks them all.
        "embedding": [1.0, rng.gen_range(0.1..1.0), rng.gen_range(0.1..1.0), 0.5],
    })
}

/// A memory as the API showed it, as the filter language reads it.
fn memory_of(view: &Value) -> Memory {
    let text = |field: &str| view[field].as_str().map(str::to_string);
    let id = |field: &str| text(field).and_then(|value| ExternalId::parse(&value).ok());
    let time = |field: &str| {
        DateTime::parse_from_rfc3339(view[field].as_str().expect(field))
            .expect(field)
            .with_timezone(&Utc)
    };
    Memory {
        id: view["id"].as_str().unwrap().parse().unwrap(),
        organization_id: engram_core::OrganizationId::generate(),
        project_id: engram_core::ProjectId::generate(),
        user_id: id("user_id"),
        agent_id: id("agent_id"),
        session_id: id("session_id"),
        kind: view["kind"].as_str().unwrap().parse().unwrap(),
        key: None,
        content: text("content").unwrap(),
        metadata: view["metadata"].as_object().cloned().unwrap_or_default(),
        categories: serde_json::from_value(view["categories"].clone()).unwrap(),
        source: view["source"].as_str().unwrap().parse().unwrap(),
        confidence: view["confidence"].as_f64().unwrap(),
        state: engram_core::MemoryState::Active,
        version: view["version"].as_i64().unwrap(),
        created_at: time("created_at"),
        updated_at: time("updated_at"),
        occurred_at: time("occurred_at"),
        valid_from: time("valid_from"),
        valid_to: None,
        expires_at: None,
        embedding_model: String::new(),
        content_hash: String::new(),
        immutable: false,
        legal_hold: false,
        visibility: view["visibility"]
            .as_str()
            .and_then(|text| text.parse().ok())
            .unwrap_or(engram_core::Visibility::Shared),
        shared_with: view["shared_with"]
            .as_str()
            .and_then(|team| engram_core::ExternalId::parse(team).ok()),
        verified_at: None,
        verified_by: None,
        content_omitted: false,
    }
}

fn one_of(values: &'static [&'static str]) -> impl Strategy<Value = String> {
    proptest::sample::select(values).prop_map(str::to_string)
}

fn some_of(values: &'static [&'static str]) -> impl Strategy<Value = Vec<String>> {
    proptest::sample::subsequence(values, 1..=values.len())
        .prop_map(|picked| picked.into_iter().map(str::to_string).collect())
}

/// One condition of the filter language, in the forms clients send.
fn leaf() -> impl Strategy<Value = Value> {
    let entity = prop_oneof![Just("user_id"), Just("agent_id"), Just("session_id")];
    let entity_values = prop_oneof![Just(&USERS[..]), Just(&AGENTS[..]), Just(&SESSIONS[..])];
    let date = (0i64..40).prop_map(|offset| day(offset).format("%Y-%m-%d").to_string());
    let instant = (0i64..40).prop_map(|offset| day(offset).to_rfc3339());
    let moment = prop_oneof![date, instant];
    prop_oneof![
        (
            entity.clone(),
            one_of(&["ana", "ben", "support", "s-1", "s-2", "billing"])
        )
            .prop_map(|(field, value)| json!({ field: value })),
        (entity.clone(), entity_values).prop_flat_map(|(field, values)| {
            proptest::sample::subsequence(values, 1..=values.len())
                .prop_map(move |picked| json!({ field: {"in": picked} }))
        }),
        entity.clone().prop_map(|field| json!({ field: "*" })),
        (entity, one_of(&["ana", "support", "s-1"]))
            .prop_map(|(field, value)| json!({ field: {"ne": value} })),
        one_of(&APPS).prop_map(|app| json!({"app_id": app})),
        some_of(&KINDS).prop_map(|kinds| json!({"kind": {"in": kinds}})),
        one_of(&SOURCES).prop_map(|source| json!({"source": {"ne": source}})),
        some_of(&CATEGORIES).prop_map(|categories| json!({"categories": categories})),
        some_of(&CATEGORIES).prop_map(|categories| json!({"categories": {"all": categories}})),
        one_of(&["foo", "TRAV", "or"]).prop_map(|text| json!({"categories": {"contains": text}})),
        proptest::sample::select(&CONFIDENCES[..])
            .prop_map(|bound| json!({"confidence": {"gte": bound}})),
        one_of(&TOPICS).prop_map(|topic| json!({"metadata": {"topic": topic}})),
        one_of(&TOPICS).prop_map(|topic| json!({"metadata": {"topic": {"ne": topic}}})),
        one_of(&["TAX", "t"]).prop_map(|text| json!({"metadata": {"topic": {"contains": text}}})),
        proptest::sample::select(&NUMBERS[..])
            .prop_map(|number| json!({"metadata": {"n": number}})),
        any::<bool>().prop_map(|flag| json!({"metadata": {"flag": flag}})),
        (
            one_of(&["occurred_at", "created_at"]),
            one_of(&["gt", "gte", "lt", "lte", "ne"]),
            moment.clone()
        )
            .prop_map(|(field, operator, at)| json!({ field: { operator: at } })),
        moment.prop_map(|at| json!({"occurred_at": at})),
        one_of(&["oolong", "TICKET", "garden"]).prop_map(|text| json!({"text": text})),
        one_of(&["Oolong", "ticket"]).prop_map(|text| json!({"text": {"contains": text}})),
    ]
}

/// A random tree of conditions, up to three levels of AND, OR and NOT.
fn filter_tree() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 1..=3)
                .prop_map(|children| json!({"AND": children})),
            proptest::collection::vec(inner.clone(), 1..=3)
                .prop_map(|children| json!({"OR": children})),
            inner.clone().prop_map(|child| json!({"NOT": child})),
            (inner.clone(), leaf()).prop_map(|(left, right)| {
                // A flat object of two keys is their AND (when the keys differ).
                let mut merged = left.as_object().cloned().unwrap_or_default();
                for (key, value) in right.as_object().cloned().unwrap_or_default() {
                    merged.entry(key).or_insert(value);
                }
                Value::Object(merged)
            }),
        ]
    })
}

fn ids_of(memories: &Value) -> BTreeSet<String> {
    memories
        .as_array()
        .expect("a list of memories")
        .iter()
        .map(|memory| memory["id"].as_str().unwrap().to_string())
        .collect()
}

/// Search, list, count and a dry-run bulk delete answer `filter` as the in-memory evaluation
/// does, on the memories `stored`.
async fn answers_agree(
    client: &ApiClient,
    stored: &[Memory],
    filter: &Value,
) -> Result<(), String> {
    let parsed = parse_memory_filter(filter, "filters").map_err(|errors| format!("{errors:?}"))?;
    let expected: BTreeSet<String> = stored
        .iter()
        .filter(|memory| parsed.matches(memory))
        .map(|memory| memory.id.to_string())
        .collect();
    let listed = post(
        client,
        "/v1/memories/query",
        &json!({"filters": filter, "limit": 500, "include_total": true}),
    )
    .await;
    if listed.status != 200 {
        return Err(format!("query answered {}: {}", listed.status, listed.body));
    }
    let searched = post(
        client,
        "/v1/memories/search",
        &json!({
            "query": "memory", "query_vector": [1.0, 0.5, 0.5, 0.5], "retrieval": "dense",
            "top_k": 100, "min_score": 0, "diversify": false, "filters": filter
        }),
    )
    .await;
    if searched.status != 200 {
        return Err(format!(
            "search answered {}: {}",
            searched.status, searched.body
        ));
    }
    let searched_ids: BTreeSet<String> = searched.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|result| result["memory"]["id"].as_str().unwrap().to_string())
        .collect();
    let counted = post(
        client,
        "/v1/memories/bulk-delete",
        &json!({"filters": filter, "dry_run": true, "all": true}),
    )
    .await;
    let listed_ids = ids_of(&listed.body["memories"]);
    let total = listed.body["total"].as_u64();
    let would_delete = counted.body["matched"].as_u64();
    if listed_ids != expected
        || searched_ids != expected
        || total != Some(expected.len() as u64)
        || would_delete != Some(expected.len() as u64)
    {
        return Err(format!(
            "filter {filter}: expected {} memories {expected:?}\nlist {listed_ids:?}\nsearch {searched_ids:?}\ntotal {total:?}, dry-run {would_delete:?}",
            expected.len()
        ));
    }
    Ok(())
}

async fn agreement_on(server: TestServer, database: &str) {
    let client = client_vector_project(&server).await;
    let mut rng = StdRng::seed_from_u64(7);
    let memories: Vec<Value> = (0..MEMORIES)
        .map(|position| random_memory(&mut rng, position))
        .collect();
    let added = client.add(json!(memories)).await;
    assert_eq!(added.status, 201, "{}", added.body);
    let listed = client.list("?limit=500").await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    let stored: Vec<Memory> = listed.body["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(memory_of)
        .collect();
    assert_eq!(stored.len(), MEMORIES);
    let cases = std::env::var("ENGRAM_FILTER_CASES")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(48);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let runtime = tokio::runtime::Handle::current();
    let matched_some = std::cell::Cell::new(0usize);
    let outcome = runner.run(&filter_tree(), |filter| {
        let result = tokio::task::block_in_place(|| {
            runtime.block_on(answers_agree(&client, &stored, &filter))
        });
        let parsed = parse_memory_filter(&filter, "filters").expect("a valid filter");
        if stored.iter().any(|memory| parsed.matches(memory)) {
            matched_some.set(matched_some.get() + 1);
        }
        result.map_err(TestCaseError::fail)
    });
    if let Err(failure) = outcome {
        panic!("on {database}: {failure}");
    }
    // The drawn filters were not all empty-handed (the property would be weak).
    let matched_some = matched_some.get();
    assert!(
        matched_some * 4 >= cases as usize,
        "{matched_some} of {cases} filters matched anything"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_list_and_count_agree_with_the_filter_on_sqlite() {
    agreement_on(TestServer::spawn().await.unwrap(), "sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_list_and_count_agree_with_the_filter_on_postgres() {
    let database = engram_test_postgres::create_database().await;
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::spawn_with(
        directory.path(),
        &[("ENGRAM_DATABASE_URL", database.url.as_str())],
    )
    .await
    .unwrap();
    agreement_on(server, "postgres").await;
}

/// The filter is applied before the top-k cut: one memory in 2,000 matches, and it is the
/// least similar of all to the query, yet a search at `top_k` 10 returns it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rare_match_is_found_however_many_memories_rank_above_it() {
    let server = TestServer::spawn().await.unwrap();
    let client = client_vector_project(&server).await;
    for batch in 0..20 {
        let memories: Vec<Value> = (0..100)
            .map(|position| {
                let rare = batch == 13 && position == 57;
                json!({
                    "content": format!("note {batch}-{position} about the garden"),
                    "metadata": {"ticket": if rare { "T-1" } else { "other" }},
                    "embedding": if rare { json!([0.0, 0.0, 1.0, 0.0]) } else { json!([1.0, 0.1, 0.0, 0.0]) },
                })
            })
            .collect();
        let added = client.add(json!(memories)).await;
        assert_eq!(added.status, 201, "{}", added.body);
    }
    for filters in [
        json!({"metadata": {"ticket": "T-1"}}),
        // A substring the index cannot evaluate: the database narrows the search first.
        json!({"text": "note 13-57 "}),
    ] {
        let found = post(
            &client,
            "/v1/memories/search",
            &json!({"query": "garden", "query_vector": [1.0, 0.1, 0.0, 0.0], "top_k": 10, "filters": filters}),
        )
        .await;
        assert_eq!(found.status, 200, "{}", found.body);
        let contents: Vec<&str> = found.body["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|result| result["memory"]["content"].as_str().unwrap())
            .collect();
        assert_eq!(contents, vec!["note 13-57 about the garden"], "{filters}");
    }
}

/// Bad filters are refused with the path of the bad node, and change nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_filter_names_the_node_and_an_empty_bulk_delete_needs_all() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    client
        .add_one(json!({"content": "The user likes oolong tea.", "user_id": "ana"}))
        .await;
    let bad = post(
        &client,
        "/v1/memories/search",
        &json!({"query": "tea", "filters": {"AND": [{"user_id": "ana"}, {"metadata": {"topic": {"gt": 1}}}]}}),
    )
    .await;
    bad.assert_problem(422, "validation-failed");
    assert_eq!(bad.error_fields(), vec!["filters.AND[1].metadata.topic.gt"]);
    let unknown = post(
        &client,
        "/v1/memories/query",
        &json!({"filters": {"colour": "red"}}),
    )
    .await;
    unknown.assert_problem(422, "validation-failed");
    assert_eq!(unknown.error_fields(), vec!["filters.colour"]);
    let everything = post(&client, "/v1/memories/bulk-delete", &json!({})).await;
    everything.assert_problem(422, "validation-failed");
    assert_eq!(everything.error_fields(), vec!["filters"]);
    assert_eq!(ids_of(&client.list("").await.body["memories"]).len(), 1);
}

/// Bulk delete by filter: locked memories are skipped and counted, one audit event names the
/// batch, the index forgets the deleted ones, and an end-user token deletes only its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_delete_by_filter_skips_locked_memories_and_stays_within_the_end_user() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    let mut ids = Vec::new();
    for (user, topic) in [
        ("ana", "trip"),
        ("ana", "trip"),
        ("ana", "work"),
        ("ben", "trip"),
    ] {
        let memory = client
            .add_one(json!({"content": format!("{user} planned a {topic} to Lisbon."), "user_id": user, "metadata": {"topic": topic}}))
            .await;
        ids.push(memory["id"].as_str().unwrap().to_string());
    }
    let held = client
        .send(
            client
                .request(Method::PUT, &format!("/v1/memories/{}/flags", ids[1]))
                .json(&json!({"legal_hold": true, "reason": "litigation"})),
        )
        .await;
    assert_eq!(held.status, 200, "{}", held.body);
    // An end-user token of ana: its tree is ANDed with its own user, so ben's trip stays.
    let minted = post(
        &client,
        "/v1/end-user-tokens",
        &json!({"user_id": "ana", "scopes": ["memories:read", "memories:delete"]}),
    )
    .await;
    assert_eq!(minted.status, 201, "{}", minted.body);
    let ana = server.client_with_key(minted.body["token"].as_str().unwrap());
    let dry = post(
        &ana,
        "/v1/memories/bulk-delete",
        &json!({"filters": {"metadata": {"topic": "trip"}}, "dry_run": true}),
    )
    .await;
    assert_eq!(dry.status, 200, "{}", dry.body);
    assert_eq!(
        (
            dry.body["matched"].as_u64(),
            dry.body["deleted"].as_u64(),
            dry.body["skipped_locked"].as_u64()
        ),
        (Some(2), Some(0), Some(1))
    );
    let done = post(
        &ana,
        "/v1/memories/bulk-delete",
        &json!({"filters": {"metadata": {"topic": "trip"}}, "reason": "trip cancelled"}),
    )
    .await;
    assert_eq!(done.status, 200, "{}", done.body);
    assert_eq!(
        (
            done.body["deleted"].as_u64(),
            done.body["skipped_locked"].as_u64()
        ),
        (Some(1), Some(1)),
        "{}",
        done.body
    );
    assert_eq!(client.get(&ids[0]).await.status, 404);
    assert_eq!(client.get(&ids[1]).await.status, 200, "held: kept");
    assert_eq!(
        client.get(&ids[3]).await.status,
        200,
        "ben's: not the token's to delete"
    );
    let searched = client
        .search(json!({"query": "Lisbon trip", "top_k": 10}))
        .await;
    let found: BTreeSet<String> = searched.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|result| result["memory"]["id"].as_str().unwrap().to_string())
        .collect();
    assert!(
        !found.contains(&ids[0]),
        "the index forgot the deleted memory: {found:?}"
    );
    let audit = client
        .send(client.request(Method::GET, "/v1/audit?action=memory.deleted"))
        .await;
    assert_eq!(audit.status, 200, "{}", audit.body);
    let events = audit.body["events"].as_array().unwrap();
    assert!(
        events
            .iter()
            .any(|event| event["details"]["bulk"] == json!(true)
                && event["details"]["reason"] == json!("trip cancelled")),
        "{events:?}"
    );
}

/// Entities: which end-users, agents, sessions and applications memories name, with counts,
/// page by page; an end-user token sees only itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entities_are_listed_with_their_counts_and_confined_for_end_users() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    for (user, agent, app) in [
        ("ana", "support", "web"),
        ("ana", "billing", "web"),
        ("ben", "support", "mobile"),
        ("chen", "support", "web"),
    ] {
        client
            .add_one(json!({"content": format!("{user} talked to {agent}."), "user_id": user, "agent_id": agent, "metadata": {"app_id": app}}))
            .await;
    }
    let entities = |response: &ApiResponse| -> Vec<(String, u64)> {
        response.body["entities"]
            .as_array()
            .unwrap()
            .iter()
            .map(|entity| {
                (
                    entity["id"].as_str().unwrap().to_string(),
                    entity["memories"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    let first = client
        .send(client.request(Method::GET, "/v1/entities?type=user&limit=2"))
        .await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(
        entities(&first),
        vec![("ana".to_string(), 2), ("ben".to_string(), 1)]
    );
    let cursor = first.body["next_cursor"]
        .as_str()
        .expect("a second page")
        .to_string();
    let second = client
        .send(client.request(
            Method::GET,
            &format!("/v1/entities?type=user&limit=2&cursor={cursor}"),
        ))
        .await;
    assert_eq!(entities(&second), vec![("chen".to_string(), 1)]);
    assert!(second.body["next_cursor"].is_null());
    let agents = client
        .send(client.request(Method::GET, "/v1/entities?type=agent"))
        .await;
    assert_eq!(
        entities(&agents),
        vec![("billing".to_string(), 1), ("support".to_string(), 3)]
    );
    let apps = client
        .send(client.request(Method::GET, "/v1/entities?type=app"))
        .await;
    assert_eq!(
        entities(&apps),
        vec![("mobile".to_string(), 1), ("web".to_string(), 3)]
    );
    client
        .send(client.request(Method::GET, "/v1/entities?type=team"))
        .await
        .assert_problem(422, "validation-failed");
    let minted = post(
        &client,
        "/v1/end-user-tokens",
        &json!({"user_id": "ben", "scopes": ["memories:read"]}),
    )
    .await;
    let ben = server.client_with_key(minted.body["token"].as_str().unwrap());
    let own = ben
        .send(ben.request(Method::GET, "/v1/entities?type=user"))
        .await;
    assert_eq!(entities(&own), vec![("ben".to_string(), 1)]);
}

/// Event time: given on add (or dated by the write), edited, refused in the future, and
/// filtered on in search and list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn occurred_at_dates_a_memory_by_its_event_and_filters_by_it() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    let last_month = client
        .add_one(json!({"content": "She hiked the Dolomites.", "user_id": "ana", "occurred_at": "2026-11-02T09:00:00Z"}))
        .await;
    assert_eq!(last_month["occurred_at"], json!("2026-11-02T09:00:00Z"));
    let now = client
        .add_one(json!({"content": "She hiked the Alps.", "user_id": "ana"}))
        .await;
    assert_eq!(now["occurred_at"], now["created_at"], "dated by its write");
    let future = (Utc::now() + Duration::days(2)).to_rfc3339();
    let refused = client
        .add(json!([{"content": "Not yet.", "occurred_at": future}]))
        .await;
    refused.assert_problem(422, "validation-failed");
    assert_eq!(refused.error_fields(), vec!["memories[0].occurred_at"]);
    let november = json!({"occurred_at": {"gte": "2026-11-01", "lte": "2026-11-30"}});
    let found = client
        .search(json!({"query": "where did she hike", "user_id": "ana", "filters": november}))
        .await;
    assert_eq!(found.status, 200, "{}", found.body);
    let contents: Vec<&str> = found.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|result| result["memory"]["content"].as_str().unwrap())
        .collect();
    assert_eq!(contents, vec!["She hiked the Dolomites."]);
    let edited = client
        .patch(
            now["id"].as_str().unwrap(),
            None,
            json!({"occurred_at": "2026-11-20T10:00:00Z", "reason": "it was in November"}),
        )
        .await;
    assert_eq!(edited.status, 200, "{}", edited.body);
    let listed = post(&client, "/v1/memories/query", &json!({"filters": november})).await;
    assert_eq!(ids_of(&listed.body["memories"]).len(), 2, "{}", listed.body);
}
