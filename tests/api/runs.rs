//! Agent runs against the real engine and model, on SQLite and PostgreSQL: a scripted agent
//! loop (open a run → assemble the context → a model call with the injected memory → a tool
//! call → a write, a search and feedback linked by `run_id` → end with a trajectory) whose
//! timeline, impact list and recall list show exactly what happened; a memory corrected and
//! then deleted shows its version then and then `deleted`, with nothing of its text left; a
//! closed run takes nothing; texts stay digests unless capture is on; another project and
//! another end-user see nothing; erasing the end-user removes the run.

use engram_tests::{ApiClient, ApiResponse, TestServer};

trait NotFound {
    fn assert_not_found(&self, code: &str);
}

impl NotFound for ApiResponse {
    /// 404, with the narrower code naming what was not found.
    fn assert_not_found(&self, code: &str) {
        self.assert_problem(404, "not-found");
        assert_eq!(self.body["code"], code, "{}", self.body);
    }
}
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

async fn ok(client: &ApiClient, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
    let response = call(client, method, path, body).await;
    assert!(
        (200..300).contains(&response.status),
        "{path}: {} {}",
        response.status,
        response.body
    );
    response.body
}

async fn post(client: &ApiClient, path: &str, body: Value) -> Value {
    ok(client, reqwest::Method::POST, path, Some(body)).await
}

async fn get(client: &ApiClient, path: &str) -> Value {
    ok(client, reqwest::Method::GET, path, None).await
}

fn step_types(timeline: &Value) -> Vec<String> {
    timeline["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|step| step["type"].as_str().unwrap().to_string())
        .collect()
}

fn step<'a>(timeline: &'a Value, kind: &str) -> &'a Value {
    timeline["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|step| step["type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} step in {timeline}"))
}

async fn agent_loop_on(server: TestServer) {
    let client = server.client();
    let settings = call(
        &client,
        reqwest::Method::PATCH,
        "/v1/project/settings",
        Some(json!({"run_capture": "full"})),
    )
    .await;
    assert_eq!(settings.status, 200, "{}", settings.body);
    assert_eq!(settings.body["run_capture"], "full");

    // What the agent knows about Ann before the task.
    let stored = post(
        &client,
        "/v1/memories",
        json!({"memories": [
            {"content": "Ann is allergic to peanuts.", "user_id": "ann", "kind": "preference"},
            {"content": "Always confirm the delivery address before ordering food.", "user_id": "ann",
             "kind": "procedural", "metadata": {"always": true}},
            {"content": "Ann lives in Oslo near the harbour.", "user_id": "ann"},
        ]}),
    )
    .await;
    let peanut = stored["memories"][0]["id"].as_str().unwrap().to_string();
    let procedure = stored["memories"][1]["id"].as_str().unwrap().to_string();
    let written = call(
        &client,
        reqwest::Method::PUT,
        "/v1/sessions/dinner/state/cart?user_id=ann",
        Some(json!({"value": {"items": 0}})),
    )
    .await;
    assert!(written.status < 300, "{}", written.body);
    post(
        &client,
        "/v1/sessions/dinner/messages",
        json!({"user_id": "ann", "derive_memories": false, "messages": [
            {"role": "user", "content": "Can you order dinner for tonight?"},
            {"role": "assistant", "content": "Sure, which cuisine would you like?"},
            {"role": "user", "content": "Something Thai, please."},
        ]}),
    )
    .await;

    // The run.
    let run = post(
        &client,
        "/v1/runs",
        json!({"task": "Order Thai dinner for Ann", "user_id": "ann", "session_id": "dinner",
               "agent_id": "concierge", "metadata": {"ticket": 7}}),
    )
    .await;
    assert_eq!(run["status"], "open");
    let run_id = run["run_id"].as_str().unwrap().to_string();

    let context = post(
        &client,
        "/v1/context",
        json!({"user_id": "ann", "agent_id": "concierge", "session_id": "dinner",
               "query": "which food is safe for Ann", "token_budget": 400, "run_id": run_id,
               "explain": true}),
    )
    .await;
    let text = context["context"].as_str().unwrap();
    for expected in [
        "Procedures (always follow):",
        "Always confirm the delivery address",
        "Session state:",
        "cart",
        "Ann is allergic to peanuts.",
        "Recent messages (oldest first):",
        "Something Thai, please.",
    ] {
        assert!(
            text.contains(expected),
            "{expected:?} in the context:\n{text}\n{context}"
        );
    }
    // Parts in priority order, each within the budget, with provenance.
    let parts: Vec<&str> = context["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|part| part["part"].as_str().unwrap())
        .collect();
    assert_eq!(
        parts,
        ["procedures", "state", "memories", "recent_messages"]
    );
    let total: u64 = context["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|part| part["tokens"].as_u64().unwrap())
        .sum();
    assert_eq!(total, context["tokens"].as_u64().unwrap());
    assert!(context["tokens"].as_u64().unwrap() <= 400);
    assert_eq!(
        context["parts"][0]["items"][0]["memory_id"],
        procedure.as_str()
    );
    assert_eq!(
        context["parts"][1]["items"][0],
        json!({"key": "cart", "version": 1})
    );
    let memories_part = &context["parts"][2]["items"];
    assert!(
        memories_part
            .as_array()
            .unwrap()
            .iter()
            .any(|item| item["memory_id"] == peanut.as_str() && item["version"] == 1),
        "the peanut memory is packed at version 1: {memories_part}"
    );
    assert!(
        !memories_part
            .as_array()
            .unwrap()
            .iter()
            .any(|item| item["memory_id"] == procedure.as_str()),
        "a procedure is not repeated among the memories"
    );
    assert_eq!(context["parts"][3]["items"].as_array().unwrap().len(), 3);
    assert_eq!(context["omitted_parts"][0]["part"], "summary");
    assert!(context["timings_ms"]["total"].is_number());
    let context_id = context["context_id"].as_str().unwrap().to_string();

    // A budget too small for everything spends itself in priority order: the procedure
    // fits, the state that would pass the budget is left out (and counted).
    let procedure_tokens = context["parts"][0]["tokens"].as_u64().unwrap();
    let budget = procedure_tokens + 5;
    let tight = post(
        &client,
        "/v1/context",
        json!({"user_id": "ann", "session_id": "dinner", "query": "food", "token_budget": budget}),
    )
    .await;
    assert!(tight["tokens"].as_u64().unwrap() <= budget, "{tight}");
    assert!(
        tight["context"].as_str().unwrap().starts_with("Procedures"),
        "{tight}"
    );
    assert_eq!(tight["parts"][1]["part"], "state");
    assert_eq!(tight["parts"][1]["omitted"], 1, "{tight}");

    post(
        &client,
        &format!("/v1/runs/{run_id}/steps"),
        json!({"type": "model_call", "model": "gpt-test", "context_id": context_id,
               "injected_memory_ids": [peanut], "tokens_in": 812, "tokens_out": 64,
               "prompt": "You are a concierge…", "completion": "I will search Thai restaurants."}),
    )
    .await;
    post(
        &client,
        &format!("/v1/runs/{run_id}/steps"),
        json!({"type": "tool_call", "tool": "restaurant_search", "arguments": {"city": "Oslo", "cuisine": "thai"},
               "result": "Thai Garden (peanut-free menu)"}),
    )
    .await;
    // Linked through the header.
    let linked_write = client
        .send(
            client
                .request(reqwest::Method::POST, "/v1/memories")
                .header("Engram-Run-Id", &run_id)
                .json(&json!({"memories": [{"content": "Ann ordered from Thai Garden.", "user_id": "ann", "kind": "episodic"}]})),
        )
        .await;
    assert_eq!(linked_write.status, 201, "{}", linked_write.body);
    let search = post(
        &client,
        "/v1/memories/search",
        json!({"query": "peanut allergy", "user_id": "ann", "run_id": run_id}),
    )
    .await;
    let recall_id = search["recall_id"].as_str().unwrap().to_string();
    post(
        &client,
        &format!("/v1/memories/{peanut}/feedback"),
        json!({"rating": "relevant", "recall_id": recall_id, "run_id": run_id}),
    )
    .await;
    // A header and a body naming different runs are refused, and nothing is written.
    let mismatched = client
        .send(
            client
                .request(reqwest::Method::POST, "/v1/memories/search")
                .header("Engram-Run-Id", uuid::Uuid::now_v7().to_string())
                .json(&json!({"query": "x", "user_id": "ann", "run_id": run_id})),
        )
        .await;
    mismatched.assert_problem(422, "validation-failed");
    // A run is one end-user's: a call about another end-user, another end-user's memory in a
    // model call, or a sub-task of another end-user's run is refused, and nothing is recorded.
    let bobs = client
        .add_one(json!({"content": "Bob likes jazz.", "user_id": "bob"}))
        .await;
    call(
        &client,
        reqwest::Method::POST,
        "/v1/memories/search",
        Some(json!({"query": "jazz", "user_id": "bob", "run_id": run_id})),
    )
    .await
    .assert_problem(422, "validation-failed");
    let foreign_memory = call(
        &client,
        reqwest::Method::POST,
        &format!("/v1/runs/{run_id}/steps"),
        Some(json!({"type": "model_call", "model": "m", "injected_memory_ids": [bobs["id"]]})),
    )
    .await;
    foreign_memory.assert_problem(422, "validation-failed");
    assert_eq!(foreign_memory.error_fields(), ["injected_memory_ids[0]"]);
    call(
        &client,
        reqwest::Method::POST,
        "/v1/runs",
        Some(json!({"task": "sub-task", "user_id": "bob", "parent_run_id": run_id})),
    )
    .await
    .assert_problem(422, "validation-failed");
    // A run another call cannot name: unknown ids are missing.
    call(
        &client,
        reqwest::Method::POST,
        "/v1/memories/search",
        Some(json!({"query": "x", "run_id": uuid::Uuid::now_v7()})),
    )
    .await
    .assert_not_found("run-not-found");

    let ended = post(
        &client,
        &format!("/v1/runs/{run_id}/end"),
        json!({"outcome": "success", "keep_trajectory": true}),
    )
    .await;
    assert_eq!(ended["status"], "ended");
    assert_eq!(ended["outcome"], "success");
    let trajectory_id = ended["trajectory_memory_id"].as_str().unwrap().to_string();

    // A closed run takes nothing, and a call linked to it changes nothing.
    call(
        &client,
        reqwest::Method::POST,
        &format!("/v1/runs/{run_id}/steps"),
        Some(json!({"type": "note", "text": "too late"})),
    )
    .await
    .assert_problem(409, "conflict");
    let before = client.all_listed_ids("&user_id=ann").await.len();
    call(
        &client,
        reqwest::Method::POST,
        "/v1/memories",
        Some(json!({"run_id": run_id, "memories": [{"content": "late write", "user_id": "ann"}]})),
    )
    .await
    .assert_problem(409, "conflict");
    assert_eq!(client.all_listed_ids("&user_id=ann").await.len(), before);

    // The timeline shows exactly what happened, in order.
    let timeline = get(&client, &format!("/v1/runs/{run_id}")).await;
    eprintln!(
        "run timeline: {}",
        serde_json::to_string_pretty(&timeline).unwrap()
    );
    assert_eq!(
        step_types(&timeline),
        [
            "context",
            "model_call",
            "tool_call",
            "memory_write",
            "search",
            "feedback"
        ]
    );
    assert_eq!(timeline["run"]["step_count"], 6);
    assert_eq!(timeline["run"]["channel"], "http");
    let model_call = step(&timeline, "model_call");
    assert_eq!(model_call["detail"]["context_id"], context_id.as_str());
    assert_eq!(model_call["detail"]["tokens_in"], 812);
    assert_eq!(
        model_call["detail"]["injected"][0]["memory_id"],
        peanut.as_str()
    );
    assert_eq!(model_call["detail"]["injected"][0]["version"], 1);
    assert_eq!(
        model_call["detail"]["injected"][0]["content_then"],
        "Ann is allergic to peanuts."
    );
    assert_eq!(model_call["detail"]["prompt"], "You are a concierge…");
    assert!(
        model_call["detail"]["prompt_digest"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    let tool = step(&timeline, "tool_call");
    assert_eq!(tool["detail"]["result"], "Thai Garden (peanut-free menu)");
    let context_step = step(&timeline, "context");
    assert_eq!(context_step["detail"]["context_id"], context_id.as_str());
    assert!(
        !context_step.to_string().contains("Something Thai"),
        "a run keeps ids of what a context held, not its text"
    );
    assert_eq!(
        step(&timeline, "search")["detail"]["recall_id"],
        recall_id.as_str()
    );
    assert_eq!(step(&timeline, "feedback")["detail"]["rating"], "relevant");

    // The trajectory is a memory of its own kind, recallable by kind.
    let trajectories = post(
        &client,
        "/v1/memories/search",
        json!({"query": "order Thai dinner restaurant", "user_id": "ann", "kinds": ["trajectory"]}),
    )
    .await;
    let found = &trajectories["results"][0]["memory"];
    assert_eq!(found["id"], trajectory_id.as_str());
    assert_eq!(found["kind"], "trajectory");
    let trajectory_text = found["content"].as_str().unwrap();
    assert!(
        trajectory_text.contains("Tools in order: restaurant_search"),
        "{trajectory_text}"
    );
    assert!(
        trajectory_text.contains("Outcome: success"),
        "{trajectory_text}"
    );
    assert!(trajectory_text.contains("Thai Garden"), "{trajectory_text}");

    // The blast radius of the peanut memory: a context packed it, a search returned it, a
    // model call of one run was given it.
    let impact = get(&client, &format!("/v1/memories/{peanut}/impact")).await;
    eprintln!(
        "memory impact: {}",
        serde_json::to_string_pretty(&impact).unwrap()
    );
    assert_eq!(
        impact["counts"],
        json!({"recalls": 1, "contexts": 1, "runs": 1})
    );
    let kinds: Vec<&str> = impact["uses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|used| used["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["returned", "injected", "packed"],
        "newest first: {impact}"
    );
    assert!(
        impact["uses"]
            .as_array()
            .unwrap()
            .iter()
            .all(|used| used["run_id"] == run_id.as_str())
    );
    let later = get(
        &client,
        &format!(
            "/v1/memories/{peanut}/impact?since={}",
            (chrono::Utc::now() + chrono::Duration::minutes(1))
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        ),
    )
    .await;
    assert_eq!(
        later["counts"],
        json!({"recalls": 0, "contexts": 0, "runs": 0})
    );

    // Recall browsing by run and by memory.
    let of_run = get(&client, &format!("/v1/recalls?run_id={run_id}")).await;
    let purposes: Vec<&str> = of_run["recalls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|recall| recall["purpose"].as_str().unwrap())
        .collect();
    assert_eq!(purposes, ["search", "context"]);
    let of_memory = get(&client, &format!("/v1/recalls?memory_id={peanut}&limit=1")).await;
    assert_eq!(of_memory["recalls"].as_array().unwrap().len(), 1);
    let cursor = of_memory["next_cursor"].as_str().unwrap();
    let next = get(
        &client,
        &format!("/v1/recalls?memory_id={peanut}&before={cursor}"),
    )
    .await;
    assert_eq!(next["recalls"][0]["recall_id"], context_id.as_str());
    assert!(next["next_cursor"].is_null());
    let runs = get(&client, "/v1/runs?user_id=ann&status=ended").await;
    assert_eq!(runs["runs"].as_array().unwrap().len(), 1);
    assert!(
        get(&client, "/v1/runs?status=open").await["runs"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    // Corrected: the timeline keeps the version then and shows the version now.
    let corrected = client
        .patch(
            &peanut,
            None,
            json!({"content": "Ann is allergic to peanuts and cashews."}),
        )
        .await;
    assert_eq!(corrected.status, 200, "{}", corrected.body);
    let timeline = get(&client, &format!("/v1/runs/{run_id}")).await;
    let injected = &step(&timeline, "model_call")["detail"]["injected"][0];
    assert_eq!(injected["content_then"], "Ann is allergic to peanuts.");
    assert_eq!(injected["now"]["version"], 2);
    assert_eq!(
        injected["now"]["content"],
        "Ann is allergic to peanuts and cashews."
    );
    // Deleted: the timeline says so and holds nothing of it.
    assert_eq!(client.delete(&peanut).await.status, 204);
    let timeline = get(&client, &format!("/v1/runs/{run_id}")).await;
    let given = &step(&timeline, "model_call")["detail"];
    assert_eq!(given["injected"][0]["deleted"], true);
    assert!(
        given["prompt"].is_null(),
        "a prompt given a deleted memory is withheld: {given}"
    );
    assert!(given["texts_withheld"].is_string(), "{given}");
    assert!(!timeline.to_string().contains("allergic"), "{timeline}");

    // Another project, and another end-user's token, see nothing of it.
    let (_, other_key) = server.create_project("elsewhere").unwrap();
    let other = server.client_with_key(&other_key);
    call(
        &other,
        reqwest::Method::GET,
        &format!("/v1/runs/{run_id}"),
        None,
    )
    .await
    .assert_not_found("run-not-found");
    call(
        &other,
        reqwest::Method::GET,
        &format!("/v1/memories/{procedure}/impact"),
        None,
    )
    .await
    .assert_not_found("memory-not-found");
    assert!(
        get(&other, "/v1/runs").await["runs"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert!(
        get(&other, "/v1/recalls").await["recalls"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    call(
        &other,
        reqwest::Method::POST,
        "/v1/context",
        Some(json!({"query": "peanuts", "token_budget": 100, "run_id": run_id})),
    )
    .await
    .assert_not_found("run-not-found");
    let bob = post(&client, "/v1/end-user-tokens", json!({"user_id": "bob"})).await;
    let bob = server.client_with_key(bob["token"].as_str().unwrap());
    call(
        &bob,
        reqwest::Method::GET,
        &format!("/v1/runs/{run_id}"),
        None,
    )
    .await
    .assert_not_found("run-not-found");
    assert!(
        get(&bob, "/v1/runs").await["runs"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert!(
        get(&bob, "/v1/recalls").await["recalls"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let ann = post(&client, "/v1/end-user-tokens", json!({"user_id": "ann"})).await;
    let ann = server.client_with_key(ann["token"].as_str().unwrap());
    assert_eq!(
        get(&ann, &format!("/v1/runs/{run_id}")).await["run"]["run_id"],
        run_id.as_str()
    );

    // The export carries the run; the erasure removes it.
    let export = client
        .http_text(client.request(reqwest::Method::GET, "/v1/subjects/ann/export"))
        .await;
    assert!(
        export
            .lines()
            .any(|line| line.contains("\"type\":\"run\"") && line.contains(&run_id)),
        "the export holds the run"
    );
    let erasure = post(&client, "/v1/subjects/ann/erasure", json!({})).await;
    let task_id = erasure["id"].as_str().unwrap().to_string();
    let task = engram_tests::eventually("the erasure of ann to finish", || {
        let client = &client;
        let task_id = &task_id;
        async move {
            let task = get(client, &format!("/v1/tasks/{task_id}")).await;
            if matches!(task["status"].as_str(), Some("succeeded" | "failed")) {
                Ok(task)
            } else {
                Err(task["status"].to_string())
            }
        }
    })
    .await;
    assert_eq!(task["status"], "succeeded", "{task}");
    let runs_store = task["result"]["stores"]
        .as_array()
        .unwrap()
        .iter()
        .find(|store| store["store"] == "runs")
        .unwrap_or_else(|| panic!("the receipt names the runs store: {task}"));
    assert!(runs_store["removed"].as_u64().unwrap() > 0, "{runs_store}");
    assert_eq!(runs_store["remaining"], 0);
    call(
        &client,
        reqwest::Method::GET,
        &format!("/v1/runs/{run_id}"),
        None,
    )
    .await
    .assert_not_found("run-not-found");
}

/// Without capture, a step keeps digests of what the client sent, never the text.
async fn digests_without_capture(server: &TestServer) {
    let (_, key) = server.create_project("digests").unwrap();
    let client = server.client_with_key(&key);
    let run = post(&client, "/v1/runs", json!({"task": "look something up"})).await;
    let run_id = run["run_id"].as_str().unwrap();
    let recorded = post(
        &client,
        &format!("/v1/runs/{run_id}/steps"),
        json!({"type": "tool_call", "tool": "lookup", "arguments": "secret query", "result": "secret answer"}),
    )
    .await;
    assert!(recorded["detail"]["arguments"].is_null(), "{recorded}");
    assert_eq!(
        recorded["detail"]["arguments_digest"],
        format!("sha256:{}", hex_sha256("secret query"))
    );
    let timeline = get(&client, &format!("/v1/runs/{run_id}")).await;
    assert!(!timeline.to_string().contains("secret"), "{timeline}");
    // Bad steps are refused with every field named, and nothing is recorded.
    let refused = call(
        &client,
        reqwest::Method::POST,
        &format!("/v1/runs/{run_id}/steps"),
        Some(json!({"type": "model_call", "model": "", "injected_memory_ids": ["not-an-id", uuid::Uuid::now_v7()]})),
    )
    .await;
    refused.assert_problem(422, "validation-failed");
    assert_eq!(refused.error_fields(), ["injected_memory_ids[0]", "model"]);
    let unknown_memory = call(
        &client,
        reqwest::Method::POST,
        &format!("/v1/runs/{run_id}/steps"),
        Some(json!({"type": "model_call", "model": "m", "injected_memory_ids": [uuid::Uuid::now_v7()]})),
    )
    .await;
    unknown_memory.assert_problem(422, "validation-failed");
    assert_eq!(
        get(&client, &format!("/v1/runs/{run_id}")).await["run"]["step_count"],
        1
    );
}

fn hex_sha256(text: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_loop_is_recorded_and_its_memories_impact_traced_on_sqlite() {
    let server = TestServer::spawn().await.unwrap();
    digests_without_capture(&server).await;
    agent_loop_on(server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_loop_is_recorded_and_its_memories_impact_traced_on_postgres() {
    let database = engram_test_postgres::create_database().await;
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::spawn_with(
        directory.path(),
        &[("ENGRAM_DATABASE_URL", database.url.as_str())],
    )
    .await
    .unwrap();
    digests_without_capture(&server).await;
    agent_loop_on(server).await;
}

/// With an LLM (here the stand-in for a provider's API), the `summary` part is built from
/// the session's messages in the end-user's namespace and billed like every LLM call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_context_summarises_the_session_with_an_llm() {
    use engram_tests::llm_stand_in::{LlmStandIn, ScriptedReply};
    let stand_in = LlmStandIn::start(|_| ScriptedReply::Json {
        content: json!({"summary": "Ann wants a Thai dinner tonight."}),
        prompt_tokens: 120,
        completion_tokens: 12,
    })
    .await
    .unwrap();
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::spawn_with(
        directory.path(),
        &[
            ("ENGRAM_LLM_BASE_URL", stand_in.base_url.as_str()),
            ("ENGRAM_LLM_MODEL", "stand-in-chat"),
        ],
    )
    .await
    .unwrap();
    let client = server.client();
    post(
        &client,
        "/v1/sessions/dinner/messages",
        json!({"user_id": "ann", "derive_memories": false, "messages": [
            {"role": "user", "content": "Can you order dinner for tonight?"},
            {"role": "user", "content": "Something Thai, please."},
        ]}),
    )
    .await;
    let context = post(
        &client,
        "/v1/context",
        json!({"user_id": "ann", "session_id": "dinner", "token_budget": 200,
               "include": ["summary", "procedures"]}),
    )
    .await;
    assert!(
        context["omitted_parts"].as_array().unwrap().is_empty(),
        "{context}"
    );
    let summary = context["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|part| part["part"] == "summary")
        .unwrap_or_else(|| panic!("a summary part: {context}"));
    assert!(summary["tokens"].as_u64().unwrap() > 0);
    assert!(
        context["context"]
            .as_str()
            .unwrap()
            .contains("Session summary:\n- Ann wants a Thai dinner tonight."),
        "{context}"
    );
    let asked = stand_in.requests();
    assert_eq!(asked.len(), 1);
    assert!(
        asked[0]
            .user_prompt
            .contains("user: Something Thai, please."),
        "{}",
        asked[0].user_prompt
    );
    // Another end-user's session of the same id has nothing to summarise.
    let other = post(
        &client,
        "/v1/context",
        json!({"user_id": "bob", "session_id": "dinner", "token_budget": 200, "include": ["summary"]}),
    )
    .await;
    assert_eq!(other["omitted_parts"][0]["part"], "summary", "{other}");
    assert_eq!(stand_in.requests().len(), 1, "no call for an empty session");
}
