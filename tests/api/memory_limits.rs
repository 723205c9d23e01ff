//! Bounded memory per subject: a project's `memory_limits` refuse a write past them, or evict
//! the subject's oldest or least important memories as deletes by whoever set the limits,
//! never immutable or held ones, audited, metered and counted in metrics.

use engram_tests::{ApiClient, TestServer, eventually, metric_sample};
use serde_json::{Value, json};

async fn put_limits(client: &ApiClient, limits: Value) -> engram_tests::ApiResponse {
    client
        .send(
            client
                .request(reqwest::Method::PUT, "/v1/project/limits")
                .json(&limits),
        )
        .await
}

async fn get_json(client: &ApiClient, path: &str) -> Value {
    let answer = client
        .send(client.request(reqwest::Method::GET, path))
        .await;
    assert_eq!(answer.status, 200, "{path}: {}", answer.body);
    answer.body
}

/// A key holding only `scopes`, as a client.
async fn key_with(server: &TestServer, maker: &ApiClient, scopes: Value) -> (ApiClient, String) {
    let made = maker
        .send(
            maker
                .request(reqwest::Method::POST, "/v1/keys")
                .json(&json!({"label": "writer", "scopes": scopes})),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.body);
    (
        server.client_with_key(made.body["secret"].as_str().unwrap()),
        made.body["key"]["id"].as_str().unwrap().to_string(),
    )
}

/// The contents of an end-user's (or agent's) live memories, sorted.
async fn held(client: &ApiClient, query: &str) -> Vec<String> {
    let listed = client.list(query).await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    let mut contents: Vec<String> = listed.body["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|memory| memory["content"].as_str().unwrap().to_string())
        .collect();
    contents.sort();
    contents
}

fn sorted(contents: &[&str]) -> Vec<String> {
    let mut contents: Vec<String> = contents.iter().map(|text| text.to_string()).collect();
    contents.sort();
    contents
}

async fn write_one(client: &ApiClient, memory: Value) -> String {
    let written = client.add(json!([memory])).await;
    assert_eq!(written.status, 201, "{}", written.body);
    written.body["memories"][0]["id"]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusing_limit_answers_409_naming_the_subject_and_stores_nothing() {
    let server = TestServer::spawn().await.unwrap();
    let admin = server.client();
    for (bad, field) in [
        (
            json!({"per_end_user": 0, "policy": "refuse"}),
            "memory_limits.per_end_user",
        ),
        (
            json!({"per_agent": 100_001, "policy": "refuse"}),
            "memory_limits.per_agent",
        ),
    ] {
        let refused = put_limits(&admin, json!({"memory_limits": bad})).await;
        refused.assert_problem(422, "validation-failed");
        assert_eq!(
            refused.error_fields(),
            vec![field.to_string()],
            "{}",
            refused.body
        );
    }
    let unknown_policy = put_limits(
        &admin,
        json!({"memory_limits": {"per_end_user": 2, "policy": "lru"}}),
    )
    .await;
    assert!(
        (400..500).contains(&unknown_policy.status),
        "{}",
        unknown_policy.body
    );
    let set = put_limits(
        &admin,
        json!({"memory_limits": {"per_end_user": 2, "policy": "refuse"}}),
    )
    .await;
    assert_eq!(set.status, 200, "{}", set.body);
    let shown = get_json(&admin, "/v1/project/limits").await;
    assert_eq!(
        shown["limits"]["memory_limits"],
        json!({"per_end_user": 2, "policy": "refuse"}),
        "{shown}"
    );

    write_one(
        &admin,
        json!({"content": "Ann drinks green tea.", "user_id": "ann"}),
    )
    .await;
    write_one(
        &admin,
        json!({"content": "Ann lives in Porto.", "user_id": "ann", "key": "home"}),
    )
    .await;
    let refused = admin
        .add(json!([{"content": "Ann has a cat called Miso.", "user_id": "ann"}]))
        .await;
    refused.assert_problem(409, "conflict");
    assert_eq!(
        refused.body["code"], "memory-limit-reached",
        "{}",
        refused.body
    );
    let detail = refused.body["detail"].as_str().unwrap();
    assert!(
        detail.contains("end-user \"ann\"") && detail.contains("memory_limits.per_end_user"),
        "the refusal names the subject and the limit: {detail}"
    );
    assert_eq!(
        held(&admin, "?user_id=ann").await,
        sorted(&["Ann drinks green tea.", "Ann lives in Porto."])
    );
    // A keyed memory that replaces its earlier version adds nothing: it is let through.
    write_one(
        &admin,
        json!({"content": "Ann lives in Lisbon.", "user_id": "ann", "key": "home"}),
    )
    .await;
    assert_eq!(
        held(&admin, "?user_id=ann").await,
        sorted(&["Ann drinks green tea.", "Ann lives in Lisbon."])
    );
    // Another end-user has room of their own; a batch bigger than the limit never fits.
    write_one(
        &admin,
        json!({"content": "Bo plays chess.", "user_id": "bo"}),
    )
    .await;
    let too_many = admin
        .add(json!([
            {"content": "Cy likes jazz.", "user_id": "cy"},
            {"content": "Cy likes blues.", "user_id": "cy"},
            {"content": "Cy likes soul.", "user_id": "cy"},
        ]))
        .await;
    assert_eq!(
        too_many.body["code"], "memory-limit-reached",
        "{}",
        too_many.body
    );
    assert!(held(&admin, "?user_id=cy").await.is_empty());
    // The MCP door is held to the same limit.
    let by_mcp = admin
        .mcp_tool(
            "add_memory",
            json!({"content": "Ann collects stamps.", "user_id": "ann"}),
        )
        .await;
    assert!(
        by_mcp.body.to_string().contains("memory-limit-reached"),
        "{}",
        by_mcp.body
    );
    assert_eq!(held(&admin, "?user_id=ann").await.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evicting_the_oldest_deletes_as_the_limit_setter_and_never_touches_held_or_immutable() {
    let server = TestServer::spawn().await.unwrap();
    let admin = server.client();
    let set = put_limits(
        &admin,
        json!({"memory_limits": {"per_agent": 3, "policy": "evict_oldest"}}),
    )
    .await;
    assert_eq!(set.status, 200, "{}", set.body);
    // The writer may not delete anything itself.
    let (writer, writer_key_id) =
        key_with(&server, &admin, json!(["memories:read", "memories:write"])).await;
    let planner = |content: &str| json!({"content": content, "agent_id": "planner"});
    let first = write_one(&writer, planner("Step 1: gather the invoices.")).await;
    let second = write_one(&writer, planner("Step 2: group them by customer.")).await;
    let third = write_one(&writer, planner("Step 3: flag the duplicates.")).await;
    let held_flag = admin
        .send(
            admin
                .request(reqwest::Method::PUT, &format!("/v1/memories/{first}/flags"))
                .json(&json!({"legal_hold": true, "reason": "audit of the planner"})),
        )
        .await;
    assert_eq!(held_flag.status, 200, "{}", held_flag.body);

    write_one(&writer, planner("Step 4: email the customers.")).await;
    assert_eq!(
        held(&admin, "?agent_id=planner").await,
        sorted(&[
            "Step 1: gather the invoices.",
            "Step 3: flag the duplicates.",
            "Step 4: email the customers.",
        ]),
        "the oldest memory not under legal hold made room"
    );
    assert_eq!(admin.get(&second).await.status, 404);

    // The eviction is a delete by the policy, in the name of whoever set it.
    let setter =
        get_json(&admin, "/v1/audit?action=project.limits_changed").await["events"][0]["actor_id"]
            .clone();
    let evictions = get_json(&admin, "/v1/audit?action=memory.evicted").await;
    let event = &evictions["events"][0];
    assert_eq!(event["actor_type"], "api_key", "{evictions}");
    assert_eq!(event["actor_id"], setter, "{evictions}");
    assert_ne!(event["actor_id"], writer_key_id.as_str());
    assert_eq!(event["target_ids"], json!([second]), "{evictions}");
    assert_eq!(event["details"]["limit"], "memory_limits.per_agent");
    assert_eq!(event["details"]["policy"], "evict_oldest");
    assert_eq!(event["details"]["subject"], "agent \"planner\"");
    assert_eq!(
        event["details"]["made_room_for"],
        format!("api_key:{writer_key_id}"),
        "{evictions}"
    );

    // Immutable memories stay too; with only one evictable memory left, a write of two
    // cannot fit and is refused whole.
    let immutable = admin
        .send(
            admin
                .request(reqwest::Method::PUT, &format!("/v1/memories/{third}/flags"))
                .json(&json!({"immutable": true, "reason": "signed off"})),
        )
        .await;
    assert_eq!(immutable.status, 200, "{}", immutable.body);
    let no_room = writer
        .add(json!([
            planner("Step 5: wait for replies."),
            planner("Step 6: close the tickets."),
        ]))
        .await;
    no_room.assert_problem(409, "conflict");
    assert_eq!(no_room.body["code"], "memory-limit-reached");
    assert!(
        no_room.body["detail"]
            .as_str()
            .unwrap()
            .contains("immutable or under legal hold"),
        "{}",
        no_room.body
    );
    write_one(&writer, planner("Step 5: wait for replies.")).await;
    assert_eq!(
        held(&admin, "?agent_id=planner").await,
        sorted(&[
            "Step 1: gather the invoices.",
            "Step 3: flag the duplicates.",
            "Step 5: wait for replies.",
        ])
    );

    // Counted: the usage unit (drawn on the Usage page) and the metric.
    eventually("two evictions in the usage totals", || async {
        let usage = get_json(&admin, "/v1/usage").await;
        match usage["totals"]["memories_evicted"].as_i64() {
            Some(2) => Ok(()),
            _ => Err(usage["totals"].to_string()),
        }
    })
    .await;
    let metrics = reqwest::get(&server.metrics_url)
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(
        metric_sample(
            &metrics,
            "engram_memories_evicted_total",
            &["policy=\"evict_oldest\""]
        ),
        Some(2.0),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evicting_the_least_important_keeps_what_was_recalled_and_rated_relevant() {
    let server = TestServer::spawn().await.unwrap();
    let admin = server.client();
    let set = put_limits(
        &admin,
        json!({"memory_limits": {"per_end_user": 3, "policy": "evict_least_important"}}),
    )
    .await;
    assert_eq!(set.status, 200, "{}", set.body);
    let dee = |content: &str| json!({"content": content, "user_id": "dee"});
    let recalled = write_one(&admin, dee("Dee is allergic to peanuts.")).await;
    let idle = write_one(&admin, dee("Dee once visited Oslo.")).await;
    let rated = write_one(&admin, dee("Dee works night shifts at the hospital.")).await;
    // The oldest is recalled, the newest rated relevant; the middle one is neither.
    let found = admin
        .search(json!({"query": "is Dee allergic to any food?", "user_id": "dee", "top_k": 1}))
        .await;
    assert_eq!(found.status, 200, "{}", found.body);
    assert_eq!(found.body["results"][0]["memory"]["id"], recalled.as_str());
    eventually("the recall of the peanut memory to be recorded", || async {
        let recalls = get_json(&admin, &format!("/v1/recalls?memory_id={recalled}")).await;
        match recalls["recalls"].as_array().map(Vec::len) {
            Some(1..) => Ok(()),
            _ => Err(recalls.to_string()),
        }
    })
    .await;
    let rating = admin
        .send(
            admin
                .request(
                    reqwest::Method::POST,
                    &format!("/v1/memories/{rated}/feedback"),
                )
                .json(&json!({"rating": "relevant"})),
        )
        .await;
    assert_eq!(rating.status, 201, "{}", rating.body);

    write_one(&admin, dee("Dee is learning Portuguese.")).await;
    assert_eq!(
        held(&admin, "?user_id=dee").await,
        sorted(&[
            "Dee is allergic to peanuts.",
            "Dee works night shifts at the hospital.",
            "Dee is learning Portuguese.",
        ]),
        "the memory never recalled nor rated went, not the oldest"
    );
    assert_eq!(admin.get(&idle).await.status, 404);
    // The audit log names the end-user by the subject digest, never by the raw id.
    let evictions = get_json(&admin, "/v1/audit?action=memory.evicted").await;
    let subject = evictions["events"][0]["details"]["subject"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        subject.starts_with("end-user ") && !subject.contains("dee"),
        "{evictions}"
    );
}
