//! Teams of agents end to end: a key or end-user token bound to agents writes only as them
//! and reads only their memories and those shared with them, across memories, search,
//! context, messages, session state and feedback; it mints only within its agents; and a
//! memory's visibility (`private`, `shared`) decides what other agents' credentials see.

use engram_tests::{ApiClient, TestServer};
use serde_json::{Value, json};

/// A key of `scopes` bound to `agents`, made by `maker`; its secret and its answer.
async fn bound_key(maker: &ApiClient, agents: Value, scopes: Value) -> (String, Value) {
    let made = maker
        .send(
            maker
                .request(reqwest::Method::POST, "/v1/keys")
                .json(&json!({
                    "label": "bound", "scopes": scopes, "agents": agents,
                })),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.body);
    (
        made.body["secret"].as_str().unwrap().to_string(),
        made.body["key"].clone(),
    )
}

fn contents(answer: &Value, list: &str) -> Vec<String> {
    answer[list]
        .as_array()
        .unwrap_or_else(|| panic!("no {list} in {answer}"))
        .iter()
        .map(|item| {
            let memory = if list == "results" {
                &item["memory"]
            } else {
                item
            };
            memory["content"].as_str().unwrap().to_string()
        })
        .collect()
}

/// The id of the memory with `content` in a list answer.
fn id_of(list: &Value, content: &str) -> String {
    list["memories"]
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .find(|memory| memory["content"] == content)
        .unwrap_or_else(|| panic!("no memory {content:?} in {list}"))["id"]
        .as_str()
        .unwrap()
        .to_string()
}

const BILLING_PRIVATE: &str = "Invoice 4471 was disputed by the customer's bank.";
const BILLING_SHARED: &str = "The customer prefers email over phone calls.";
const SUPPORT_OWN: &str = "The customer's router was replaced in March.";

/// A project where billing keeps a private and a shared memory and support one of its own,
/// all about end-user `carol`.
async fn team_project(server: &TestServer) -> ApiClient {
    let project = server.client();
    let written = project
        .add(json!([
            {"content": BILLING_PRIVATE, "user_id": "carol", "agent_id": "billing", "visibility": "private"},
            {"content": BILLING_SHARED, "user_id": "carol", "agent_id": "billing", "visibility": "shared"},
            {"content": SUPPORT_OWN, "user_id": "carol", "agent_id": "support", "visibility": "private"},
        ]))
        .await;
    assert_eq!(written.status, 201, "{}", written.body);
    assert_eq!(written.body["memories"][0]["visibility"], "private");
    assert_eq!(written.body["memories"][1]["visibility"], "shared");
    project
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_bound_to_an_agent_reads_its_own_and_the_shared_never_another_agents_private() {
    let server = TestServer::spawn().await.unwrap();
    let project = team_project(&server).await;
    let (secret, key) = bound_key(
        &project,
        json!(["support"]),
        json!(["memories:read", "memories:write", "memories:delete"]),
    )
    .await;
    assert_eq!(key["agents"], json!(["support"]));
    let support = server.client_with_key(&secret);

    // Lists and search: support's own and billing's shared, never billing's private.
    let listed = support.list("?user_id=carol").await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    let mut seen = contents(&listed.body, "memories");
    seen.sort();
    let mut expected = vec![BILLING_SHARED.to_string(), SUPPORT_OWN.to_string()];
    expected.sort();
    assert_eq!(seen, expected);
    let found = support
        .search(json!({"query": "was an invoice disputed by the bank?", "user_id": "carol", "top_k": 10, "min_score": 0}))
        .await;
    assert_eq!(found.status, 200, "{}", found.body);
    assert!(
        !contents(&found.body, "results").contains(&BILLING_PRIVATE.to_string()),
        "{}",
        found.body
    );
    // The same search by a key of every agent finds it: the query does reach it.
    let unbound = project
        .search(json!({"query": "was an invoice disputed by the bank?", "user_id": "carol", "top_k": 10, "min_score": 0}))
        .await;
    assert!(
        contents(&unbound.body, "results").contains(&BILLING_PRIVATE.to_string()),
        "{}",
        unbound.body
    );
    // Asking for billing's memories by name still shows only what billing shares.
    let billing_listed = support.list("?user_id=carol&agent_id=billing").await;
    assert_eq!(
        contents(&billing_listed.body, "memories"),
        vec![BILLING_SHARED.to_string()]
    );
    // The private memory does not exist for it, by id either.
    let all = project.list("?user_id=carol").await;
    let private_id = id_of(&all.body, BILLING_PRIVATE);
    support
        .get(&private_id)
        .await
        .assert_problem(404, "not-found");
    support
        .history(&private_id)
        .await
        .assert_problem(404, "not-found");

    // The context it assembles leaves billing's private memory out too (a key of every
    // agent gets it for the same request).
    let context_of = |client: ApiClient| async move {
        let context = client
            .send(client.request(reqwest::Method::POST, "/v1/context").json(&json!({
                "query": "what happened with the invoice and the bank?", "user_id": "carol", "token_budget": 500,
            })))
            .await;
        assert_eq!(context.status, 200, "{}", context.body);
        context.body.to_string()
    };
    let text = context_of(support.clone()).await;
    assert!(!text.contains("disputed"), "{text}");
    let text = context_of(project.clone()).await;
    assert!(text.contains("disputed"), "{text}");

    // An unbound key still sees everything, as before.
    let everything = project.list("?user_id=carol").await;
    assert_eq!(contents(&everything.body, "memories").len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_key_writes_only_as_its_agents_and_changes_only_their_memories() {
    let server = TestServer::spawn().await.unwrap();
    let project = team_project(&server).await;
    let (secret, _) = bound_key(
        &project,
        json!(["support"]),
        json!(["memories:read", "memories:write", "memories:delete"]),
    )
    .await;
    let support = server.client_with_key(&secret);

    // No agent named: written as its only agent. Another agent: a 403 naming it.
    let written = support
        .add(json!([{"content": "Carol asked for a callback on Friday.", "user_id": "carol"}]))
        .await;
    assert_eq!(written.status, 201, "{}", written.body);
    assert_eq!(written.body["memories"][0]["agent_id"], "support");
    let refused = support
        .add(json!([{"content": "Pretending to be billing.", "user_id": "carol", "agent_id": "billing"}]))
        .await;
    refused.assert_problem(403, "forbidden");
    let detail = refused.body["detail"].as_str().unwrap();
    assert!(
        detail.contains("billing") && detail.contains("memories[0].agent_id"),
        "{detail}"
    );

    // A key of two agents must say which one writes.
    let (two, _) = bound_key(
        &project,
        json!(["support", "planner"]),
        json!(["memories:read", "memories:write"]),
    )
    .await;
    let unnamed = server
        .client_with_key(&two)
        .add(json!([{"content": "Whose is this?", "user_id": "carol"}]))
        .await;
    unnamed.assert_problem(422, "validation-failed");
    assert_eq!(
        unnamed.error_fields(),
        vec!["memories[0].agent_id".to_string()]
    );

    // Billing's shared memory is read, not owned: no edit, no delete.
    let listed = project.list("?user_id=carol&agent_id=billing").await;
    let shared_id = id_of(&listed.body, BILLING_SHARED);
    support
        .patch(
            &shared_id,
            None,
            json!({"content": "Rewritten by support."}),
        )
        .await
        .assert_problem(403, "forbidden");
    support
        .delete(&shared_id)
        .await
        .assert_problem(403, "forbidden");
    // A bulk delete by end-user reaches support's own memories only.
    let bulk = support
        .send(
            support
                .request(reqwest::Method::POST, "/v1/memories/bulk-delete")
                .json(&json!({"filters": {"user_id": "carol"}})),
        )
        .await;
    assert_eq!(bulk.status, 200, "{}", bulk.body);
    assert_eq!(bulk.body["deleted"], 2, "{}", bulk.body);
    let left = contents(&project.list("?user_id=carol").await.body, "memories");
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(
        left.contains(&BILLING_PRIVATE.to_string()) && left.contains(&BILLING_SHARED.to_string())
    );

    // Its own memory can become private; a memory of no agent cannot.
    let own = support
        .add(json!([{"content": "Support's note on Carol's modem.", "user_id": "carol"}]))
        .await;
    let own_id = own.body["memories"][0]["id"].as_str().unwrap().to_string();
    let private = support
        .patch(&own_id, None, json!({"visibility": "private"}))
        .await;
    assert_eq!(private.status, 200, "{}", private.body);
    assert_eq!(private.body["visibility"], "private");
    let agentless = project
        .add_one(json!({"content": "A note of no agent.", "user_id": "carol"}))
        .await;
    let refused = project
        .patch(
            agentless["id"].as_str().unwrap(),
            None,
            json!({"visibility": "private"}),
        )
        .await;
    refused.assert_problem(422, "validation-failed");
    assert_eq!(refused.error_fields(), vec!["visibility".to_string()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_key_mints_only_within_its_agents_and_administers_nothing() {
    let server = TestServer::spawn().await.unwrap();
    let project = team_project(&server).await;
    let (secret, _) = bound_key(
        &project,
        json!(["support", "planner"]),
        json!(["memories:read", "memories:write", "admin"]),
    )
    .await;
    let support = server.client_with_key(&secret);

    // A key it mints is within its agents: its own when it names none, never another.
    let (_, inherited) = bound_key(&support, Value::Null, json!(["memories:read"])).await;
    assert_eq!(inherited["agents"], json!(["planner", "support"]));
    let (_, narrowed) = bound_key(&support, json!(["support"]), json!(["memories:read"])).await;
    assert_eq!(narrowed["agents"], json!(["support"]));
    let wider = support
        .send(
            support
                .request(reqwest::Method::POST, "/v1/keys")
                .json(&json!({
                    "label": "wider", "scopes": ["memories:read"], "agents": ["billing"],
                })),
        )
        .await;
    wider.assert_problem(403, "forbidden");
    assert!(wider.body["detail"].as_str().unwrap().contains("billing"));
    // It lists only keys within its agents (not the project's first key, of every agent).
    let keys = support
        .send(support.request(reqwest::Method::GET, "/v1/keys"))
        .await;
    assert_eq!(keys.status, 200, "{}", keys.body);
    assert!(
        keys.body["keys"]
            .as_array()
            .unwrap()
            .iter()
            .all(|key| key["agents"].is_array()),
        "{}",
        keys.body
    );

    // Project administration spans every agent: refused even with `admin`.
    let settings = support
        .send(support.request(reqwest::Method::GET, "/v1/project/settings"))
        .await;
    settings.assert_problem(403, "forbidden");
    assert!(
        settings.body["detail"]
            .as_str()
            .unwrap()
            .contains("bound to agents")
    );
    support
        .send(support.request(reqwest::Method::GET, "/v1/subjects/carol/export"))
        .await
        .assert_problem(403, "forbidden");

    // An end-user token it mints is bound too, and sees as its key sees.
    let minted = support
        .send(
            support
                .request(reqwest::Method::POST, "/v1/end-user-tokens")
                .json(&json!({"user_id": "carol", "agents": ["support"]})),
        )
        .await;
    assert_eq!(minted.status, 201, "{}", minted.body);
    assert_eq!(minted.body["agents"], json!(["support"]));
    let carol = server.client_with_key(minted.body["token"].as_str().unwrap());
    let mut seen = contents(&carol.list("").await.body, "memories");
    seen.sort();
    let mut expected = vec![BILLING_SHARED.to_string(), SUPPORT_OWN.to_string()];
    expected.sort();
    assert_eq!(seen, expected);
    let beyond = support
        .send(
            support
                .request(reqwest::Method::POST, "/v1/end-user-tokens")
                .json(&json!({"user_id": "carol", "agents": ["billing"]})),
        )
        .await;
    beyond.assert_problem(403, "forbidden");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_and_session_state_of_another_agent_stay_out_of_reach() {
    let server = TestServer::spawn().await.unwrap();
    let project = server.client();
    let (support_secret, _) = bound_key(
        &project,
        json!(["support"]),
        json!(["memories:read", "memories:write", "memories:delete"]),
    )
    .await;
    let support = server.client_with_key(&support_secret);
    let (billing_secret, _) = bound_key(
        &project,
        json!(["billing"]),
        json!(["memories:read", "memories:write", "memories:delete"]),
    )
    .await;
    let billing = server.client_with_key(&billing_secret);

    // Billing's state and messages in a session both agents serve.
    let put = billing
        .send(
            billing
                .request(reqwest::Method::PUT, "/v1/sessions/s-1/state/refund")
                .json(&json!({"value": {"amount": 120}})),
        )
        .await;
    assert!(put.status == 201 || put.status == 200, "{}", put.body);
    let added = billing
        .send(
            billing
                .request(reqwest::Method::POST, "/v1/sessions/s-1/messages")
                .json(&json!({"messages": [{"role": "user", "content": "My card number ends in 4242."}], "derive_memories": false})),
        )
        .await;
    assert!(added.status < 300, "{}", added.body);

    support
        .send(support.request(reqwest::Method::GET, "/v1/sessions/s-1/state/refund"))
        .await
        .assert_problem(404, "not-found");
    let listed_state = support
        .send(support.request(reqwest::Method::GET, "/v1/sessions/s-1/state"))
        .await;
    assert_eq!(listed_state.status, 200, "{}", listed_state.body);
    assert!(
        !listed_state.body.to_string().contains("refund"),
        "{}",
        listed_state.body
    );
    let messages = support
        .send(support.request(reqwest::Method::GET, "/v1/sessions/s-1/messages"))
        .await;
    assert_eq!(messages.status, 200, "{}", messages.body);
    assert!(
        !messages.body.to_string().contains("4242"),
        "{}",
        messages.body
    );
    // Writing billing's key as support is refused, not a silent overwrite.
    support
        .send(
            support
                .request(reqwest::Method::PUT, "/v1/sessions/s-1/state/refund")
                .json(&json!({"value": {"amount": 0}})),
        )
        .await
        .assert_problem(403, "forbidden");
    // Billing still reads its own.
    let own = billing
        .send(billing.request(reqwest::Method::GET, "/v1/sessions/s-1/state/refund"))
        .await;
    assert_eq!(own.status, 200, "{}", own.body);
    assert_eq!(own.body["value"]["amount"], 120);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_asks_for_its_own_memories_with_the_shared_ones_weighted_as_it_says() {
    let server = TestServer::spawn().await.unwrap();
    let project = team_project(&server).await;
    let search = |body: Value| {
        let project = project.clone();
        async move { project.search(body).await }
    };
    let query = "how does the customer like to be contacted and what about the router?";
    let own_only =
        search(json!({"query": query, "user_id": "carol", "agent_id": "support", "min_score": 0}))
            .await;
    assert_eq!(
        contents(&own_only.body, "results"),
        vec![SUPPORT_OWN.to_string()]
    );
    let with_shared = search(json!({"query": query, "user_id": "carol", "agent_id": "support", "include_shared": true, "min_score": 0})).await;
    let mut seen = contents(&with_shared.body, "results");
    seen.sort();
    let mut expected = vec![BILLING_SHARED.to_string(), SUPPORT_OWN.to_string()];
    expected.sort();
    assert_eq!(seen, expected, "{}", with_shared.body);
    // A shared weight of 0 puts the agent's own memory first whatever the match.
    let weighted = search(json!({"query": "does the customer prefer email or phone?", "user_id": "carol", "agent_id": "support", "include_shared": true, "shared_weight": 0, "min_score": 0})).await;
    assert_eq!(
        contents(&weighted.body, "results")[0],
        SUPPORT_OWN,
        "{}",
        weighted.body
    );
    let unweighted = search(json!({"query": "does the customer prefer email or phone?", "user_id": "carol", "agent_id": "support", "include_shared": true, "min_score": 0})).await;
    assert_eq!(
        contents(&unweighted.body, "results")[0],
        BILLING_SHARED,
        "{}",
        unweighted.body
    );
    // `include_shared` needs the agent whose memories the shared ones join.
    let refused = search(json!({"query": query, "include_shared": true})).await;
    refused.assert_problem(422, "validation-failed");
    assert_eq!(refused.error_fields(), vec!["include_shared".to_string()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_console_member_makes_a_shared_memory_private_and_the_other_agents_lose_it() {
    let server = TestServer::spawn().await.unwrap();
    let project = team_project(&server).await;
    let (secret, _) = bound_key(&project, json!(["support"]), json!(["memories:read"])).await;
    let support = server.client_with_key(&secret);
    let shared_id = id_of(
        &project.list("?user_id=carol&agent_id=billing").await.body,
        BILLING_SHARED,
    );
    assert_eq!(support.get(&shared_id).await.status, 200);

    let (owner, cookie) = server.console_owner_session().await;
    let made_private = owner
        .post(format!("{}/console/api/set_memory_flag", server.base_url))
        .header("Origin", &server.base_url)
        .header("Cookie", &cookie)
        .form(&[
            ("project_id", server.bootstrap.project_id.as_str()),
            ("memory_id", shared_id.as_str()),
            ("flag", "visibility"),
            ("value", "private"),
            ("reason", "billing disputes are billing's own"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(
        made_private.status().as_u16(),
        200,
        "{:?}",
        made_private.text().await
    );

    // Gone for the support key, in lists and by id; still there for a key of every agent.
    support
        .get(&shared_id)
        .await
        .assert_problem(404, "not-found");
    assert!(
        !contents(&support.list("?user_id=carol").await.body, "memories")
            .contains(&BILLING_SHARED.to_string())
    );
    let now = project.get(&shared_id).await;
    assert_eq!(now.body["visibility"], "private", "{}", now.body);
    assert_eq!(now.body["version"], 2);
    // The history keeps who changed it and why; the audit log names the field.
    let history = project.history(&shared_id).await;
    assert!(
        history
            .body
            .to_string()
            .contains("billing disputes are billing's own"),
        "{}",
        history.body
    );
    let audit = project
        .send(project.request(reqwest::Method::GET, "/v1/audit?action=memory.updated"))
        .await;
    let event = audit.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|event| event["target_ids"].to_string().contains(&shared_id))
        .unwrap_or_else(|| panic!("no audit event for the change: {}", audit.body))
        .clone();
    assert!(event.to_string().contains("visibility"), "{event}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memories_derived_from_an_agents_messages_follow_the_projects_default_visibility() {
    let server = TestServer::spawn().await.unwrap();
    let project = server.client();
    let changed = project
        .send(
            project
                .request(reqwest::Method::PATCH, "/v1/project/settings")
                .json(&json!({"default_visibility": "private"})),
        )
        .await;
    assert_eq!(changed.status, 200, "{}", changed.body);
    assert_eq!(changed.body["default_visibility"], "private");
    let (billing_secret, _) = bound_key(
        &project,
        json!(["billing"]),
        json!(["memories:read", "memories:write"]),
    )
    .await;
    let billing = server.client_with_key(&billing_secret);
    let (support_secret, _) =
        bound_key(&project, json!(["support"]), json!(["memories:read"])).await;
    let support = server.client_with_key(&support_secret);

    let said = billing
        .send(
            billing
                .request(reqwest::Method::POST, "/v1/sessions/s-9/messages")
                .json(&json!({"user_id": "carol", "derive_memories": true,
                    "messages": [{"role": "user", "content": "My refund should go to the card ending 1881."}]})),
        )
        .await;
    assert_eq!(said.status, 201, "{}", said.body);
    assert_eq!(
        said.body["derivation"]["status"], "succeeded",
        "{}",
        said.body
    );
    // Derived as billing's, private by the project's default: support never sees it.
    let everything = project.list("?user_id=carol").await;
    let derived = everything.body["memories"]
        .as_array()
        .unwrap()
        .iter()
        .find(|memory| memory["content"].as_str().unwrap_or("").contains("1881"))
        .unwrap_or_else(|| panic!("no derived memory: {}", everything.body))
        .clone();
    assert_eq!(derived["agent_id"], "billing");
    assert_eq!(derived["visibility"], "private", "{derived}");
    assert!(
        !support
            .list("?user_id=carol")
            .await
            .body
            .to_string()
            .contains("1881")
    );
    // Written directly with no visibility, it is private too; one of no agent stays shared.
    let written = project
        .add(json!([
            {"content": "Billing's direct note.", "user_id": "carol", "agent_id": "billing"},
            {"content": "A note of no agent.", "user_id": "carol"},
        ]))
        .await;
    assert_eq!(written.body["memories"][0]["visibility"], "private");
    assert_eq!(written.body["memories"][1]["visibility"], "shared");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_agents_conclusion_is_found_once_verified_and_the_history_says_by_whom_and_why() {
    let server = TestServer::spawn().await.unwrap();
    let project = server.client();
    let conclusion = "The outage on May 3 was caused by an expired TLS certificate.";
    let written = project
        .add(json!([
            {"content": conclusion, "user_id": "carol", "agent_id": "researcher", "visibility": "shared"},
            {"content": "The planner will schedule a certificate audit.", "user_id": "carol", "agent_id": "planner"},
        ]))
        .await;
    assert_eq!(written.status, 201, "{}", written.body);
    let conclusion_id = written.body["memories"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(written.body["memories"][0]["verified_at"].is_null());
    let changed = project
        .send(
            project
                .request(reqwest::Method::PATCH, "/v1/project/settings")
                .json(&json!({"verified_only_from_other_agents": true})),
        )
        .await;
    assert_eq!(changed.status, 200, "{}", changed.body);
    let (planner_secret, _) =
        bound_key(&project, json!(["planner"]), json!(["memories:read"])).await;
    let planner = server.client_with_key(&planner_secret);
    let query =
        json!({"query": "what caused the outage on May 3?", "user_id": "carol", "min_score": 0});
    let finds = |client: ApiClient, body: Value| async move {
        let found = client.search(body).await;
        assert_eq!(found.status, 200, "{}", found.body);
        contents(&found.body, "results")
    };
    let with = |field: &str, value: Value| {
        let mut body = query.clone();
        body[field] = value;
        body
    };
    let context_for_planner = |client: ApiClient| async move {
        let context = client
            .send(
                client
                    .request(reqwest::Method::POST, "/v1/context")
                    .json(&json!({
                        "query": "what caused the outage on May 3?", "user_id": "carol",
                        "agent_id": "planner", "token_budget": 500,
                    })),
            )
            .await;
        assert_eq!(context.status, 200, "{}", context.body);
        context.body.to_string()
    };
    let holds_conclusion = |texts: &[String]| texts.iter().any(|text| text == conclusion);

    // Unverified, the researcher's conclusion does not reach the planner, whatever it asks:
    // naming the researcher does not make it its own, and it cannot ask the rule away. Its
    // own memory always does. A key of every agent asks for everything, or for the planner's
    // context, which leaves the conclusion out too.
    let seen = finds(planner.clone(), query.clone()).await;
    assert!(!holds_conclusion(&seen), "{seen:?}");
    assert!(
        seen.iter().any(|text| text.contains("certificate audit")),
        "{seen:?}"
    );
    assert!(!holds_conclusion(
        &finds(planner.clone(), with("verified_only", json!(false))).await
    ));
    assert!(!holds_conclusion(
        &finds(planner.clone(), with("agent_id", json!("researcher"))).await
    ));
    assert!(holds_conclusion(
        &finds(project.clone(), with("verified_only", json!(false))).await
    ));
    assert!(
        !context_for_planner(project.clone())
            .await
            .contains("expired TLS")
    );

    // Verifying needs `memories:verify` and `memories:read` (a token never gets the first),
    // a credential bound to agents verifies only its own agents' memories, and the key that
    // wrote the words cannot vouch for them.
    let verify = |client: ApiClient, id: String, body: Value| async move {
        client
            .send(
                client
                    .request(reqwest::Method::POST, &format!("/v1/memories/{id}/verify"))
                    .json(&body),
            )
            .await
    };
    verify(
        planner.clone(),
        conclusion_id.clone(),
        json!({"reason": "looks right"}),
    )
    .await
    .assert_problem(403, "forbidden");
    let (bound_reviewer, _) = bound_key(
        &project,
        json!(["planner"]),
        json!(["memories:read", "memories:verify"]),
    )
    .await;
    verify(
        server.client_with_key(&bound_reviewer),
        conclusion_id.clone(),
        json!({"reason": "looks right"}),
    )
    .await
    .assert_problem(403, "forbidden");
    verify(
        project.clone(),
        conclusion_id.clone(),
        json!({"reason": "I wrote it, I am sure"}),
    )
    .await
    .assert_problem(403, "forbidden");
    let token = project
        .send(
            project
                .request(reqwest::Method::POST, "/v1/end-user-tokens")
                .json(&json!({"user_id": "carol", "scopes": ["memories:read", "memories:verify"]})),
        )
        .await;
    token.assert_problem(422, "validation-failed");
    let reviewer_made = project
        .send(
            project
                .request(reqwest::Method::POST, "/v1/keys")
                .json(&json!({
                    "label": "reviewer", "scopes": ["memories:read", "memories:verify"],
                })),
        )
        .await;
    assert_eq!(reviewer_made.status, 201, "{}", reviewer_made.body);
    let reviewer = server.client_with_key(reviewer_made.body["secret"].as_str().unwrap());
    let reviewer_id = reviewer_made.body["key"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    verify(
        reviewer.clone(),
        conclusion_id.clone(),
        json!({"reason": " "}),
    )
    .await
    .assert_problem(422, "validation-failed");
    let verified = verify(
        reviewer.clone(),
        conclusion_id.clone(),
        json!({"reason": "matches the incident report", "expected_version": 1}),
    )
    .await;
    assert_eq!(verified.status, 200, "{}", verified.body);
    assert_eq!(
        verified.body["verified_by"],
        format!("api_key:{reviewer_id}")
    );
    assert!(verified.body["verified_at"].is_string());
    assert_eq!(verified.body["content"], conclusion);

    // Now the planner finds it, its context holds it, and it answers `verified_only`.
    assert!(holds_conclusion(
        &finds(planner.clone(), query.clone()).await
    ));
    assert!(
        context_for_planner(project.clone())
            .await
            .contains("expired TLS")
    );
    assert_eq!(
        finds(project.clone(), with("verified_only", json!(true))).await,
        vec![conclusion.to_string()]
    );
    let history = project.history(&conclusion_id).await;
    let entry = history.body["history"]
        .as_array()
        .unwrap()
        .iter()
        .find(|entry| entry.to_string().contains("matches the incident report"))
        .unwrap_or_else(|| panic!("no verification in the history: {}", history.body))
        .clone();
    assert!(entry.to_string().contains(&reviewer_id), "{entry}");

    // A verification is of what the memory said: a reviewer vouches only for the version it
    // read, and an edit of the words withdraws it.
    verify(
        reviewer.clone(),
        conclusion_id.clone(),
        json!({"reason": "again", "expected_version": 1}),
    )
    .await
    .assert_problem(409, "version-conflict");
    let edited = project
        .patch(
            &conclusion_id,
            None,
            json!({"content": "The outage on May 3 was caused by a full disk."}),
        )
        .await;
    assert_eq!(edited.status, 200, "{}", edited.body);
    assert!(edited.body["verified_at"].is_null(), "{}", edited.body);
    assert!(
        finds(project.clone(), with("verified_only", json!(true)))
            .await
            .is_empty()
    );
    let seen = finds(planner.clone(), query.clone()).await;
    assert!(
        !seen.iter().any(|text| text.contains("full disk")),
        "{seen:?}"
    );
    let reverified = verify(
        reviewer.clone(),
        conclusion_id.clone(),
        json!({"reason": "the disk was full", "expected_version": edited.body["version"]}),
    )
    .await;
    assert_eq!(reverified.status, 200, "{}", reverified.body);
    let seen = finds(planner.clone(), query.clone()).await;
    assert!(
        seen.iter().any(|text| text.contains("full disk")),
        "{seen:?}"
    );

    // Withdrawn, it is an unverified conclusion again.
    let withdrawn = verify(
        reviewer,
        conclusion_id.clone(),
        json!({"verified": false, "reason": "the report was revised"}),
    )
    .await;
    assert_eq!(withdrawn.status, 200, "{}", withdrawn.body);
    assert!(withdrawn.body["verified_at"].is_null());
    assert!(
        finds(project, with("verified_only", json!(true)))
            .await
            .is_empty()
    );
    let seen = finds(planner, query.clone()).await;
    assert!(!seen.iter().any(|text| text.contains("May 3")), "{seen:?}");
}

const TEAM_NOTE: &str = "Ledger close for March is blocked on the bank statement.";

async fn set_teams(project: &ApiClient, teams: Value) {
    let set = project
        .send(
            project
                .request(reqwest::Method::PATCH, "/v1/project/settings")
                .json(&json!({"agent_teams": teams})),
        )
        .await;
    assert_eq!(set.status, 200, "{}", set.body);
    assert_eq!(set.body["agent_teams"], teams, "{}", set.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_shared_with_a_team_reaches_its_agents_and_no_other() {
    let server = TestServer::spawn().await.unwrap();
    let project = server.client();
    let note = json!({"content": TEAM_NOTE, "user_id": "carol", "agent_id": "billing", "shared_with": "finance"});
    let unknown = project.add(json!([note.clone()])).await;
    unknown.assert_problem(422, "validation-failed");
    assert_eq!(unknown.error_fields(), vec!["memories[0].shared_with"]);
    set_teams(&project, json!({"finance": ["billing", "ledger"]})).await;
    let private_and_shared = project
        .add(json!([{"content": "x", "agent_id": "billing", "visibility": "private", "shared_with": "finance"}]))
        .await;
    private_and_shared.assert_problem(422, "validation-failed");
    let written = project.add(json!([note])).await;
    assert_eq!(written.status, 201, "{}", written.body);
    let stored = &written.body["memories"][0];
    assert_eq!(
        (&stored["visibility"], &stored["shared_with"]),
        (&json!("shared"), &json!("finance"))
    );
    let note_id = stored["id"].as_str().unwrap().to_string();
    let scopes = json!(["memories:read", "memories:write"]);
    let (ledger, _) = bound_key(&project, json!(["ledger"]), scopes.clone()).await;
    let ledger = server.client_with_key(&ledger);
    let (support, _) = bound_key(&project, json!(["support"]), scopes).await;
    let support = server.client_with_key(&support);

    let question = json!({"query": "why is the March ledger close blocked?", "user_id": "carol", "top_k": 10, "min_score": 0});
    assert!(
        contents(&ledger.list("?user_id=carol").await.body, "memories")
            .contains(&TEAM_NOTE.to_string())
    );
    assert!(
        contents(&ledger.search(question.clone()).await.body, "results")
            .contains(&TEAM_NOTE.to_string())
    );
    assert!(
        !contents(&support.list("?user_id=carol").await.body, "memories")
            .contains(&TEAM_NOTE.to_string())
    );
    assert!(
        !contents(&support.search(question.clone()).await.body, "results")
            .contains(&TEAM_NOTE.to_string())
    );
    assert_eq!(support.get(&note_id).await.status, 404);
    // An unbound caller asking for one agent's view sees what that agent's teams see.
    let as_agent = |agent: &str| {
        let mut body = question.clone();
        body["agent_id"] = json!(agent);
        body["include_shared"] = json!(true);
        body
    };
    assert!(
        contents(&project.search(as_agent("ledger")).await.body, "results")
            .contains(&TEAM_NOTE.to_string())
    );
    assert!(
        !contents(&project.search(as_agent("support")).await.body, "results")
            .contains(&TEAM_NOTE.to_string())
    );

    // A team's members are read per request: support joins and sees it at once.
    set_teams(
        &project,
        json!({"finance": ["billing", "ledger", "support"]}),
    )
    .await;
    assert_eq!(support.get(&note_id).await.status, 200);
    assert!(
        contents(&support.search(question.clone()).await.body, "results")
            .contains(&TEAM_NOTE.to_string())
    );

    // Shared with every agent again: an agent of no team reads it too.
    let (planner, _) = bound_key(&project, json!(["planner"]), json!(["memories:read"])).await;
    let planner = server.client_with_key(&planner);
    assert_eq!(planner.get(&note_id).await.status, 404);
    let widened = project
        .patch(
            &note_id,
            None,
            json!({"shared_with": null, "reason": "the whole team needs it"}),
        )
        .await;
    assert_eq!(widened.status, 200, "{}", widened.body);
    assert_eq!(widened.body["shared_with"], Value::Null);
    assert_eq!(planner.get(&note_id).await.status, 200);

    // MCP's add_memory takes the team too.
    let by_mcp = ledger
        .mcp_tool(
            "add_memory",
            json!({"content": "The ledger agent reconciled February.", "user_id": "carol", "shared_with": "finance"}),
        )
        .await;
    assert!(
        by_mcp.body.to_string().contains("finance"),
        "{}",
        by_mcp.body
    );
    assert_eq!(
        planner.list("?user_id=carol&agent_id=ledger").await.body["memories"],
        json!([])
    );
}
