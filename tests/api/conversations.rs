//! Conversation ingest end to end: messages stored in order and paged with a cursor, turned
//! into memories — verbatim without an LLM (duplicates skipped, keys supersede), extracted
//! and reconciled (ADD / UPDATE / SUPERSEDE / DELETE / NOOP with reasons in history) with
//! one — LLM tokens billed per model, an LLM outage that loses nothing, bad input refused
//! whole, and messages confined to their project and removed with the subject.
//!
//! The LLM is `LlmStandIn`, a scripted local HTTP server: a TEST DOUBLE for a third-party
//! provider we cannot run here. Everything else is real (engine, model, index, database).

use engram_tests::llm_stand_in::{LlmStandIn, ScriptedReply, SeenChatRequest};
use engram_tests::{ApiClient, ApiResponse, TestServer};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

async fn post_messages(client: &ApiClient, session: &str, body: Value) -> ApiResponse {
    client
        .send(
            client
                .request(
                    reqwest::Method::POST,
                    &format!("/v1/sessions/{session}/messages"),
                )
                .json(&body),
        )
        .await
}

async fn get_path(client: &ApiClient, path: &str) -> ApiResponse {
    client
        .send(client.request(reqwest::Method::GET, path))
        .await
}

/// A server whose LLM is the stand-in (model `stand-in-chat`), and its data dir.
async fn server_with_llm(
    stand_in: &LlmStandIn,
    api_key: Option<&str>,
) -> (TestServer, tempfile::TempDir) {
    let directory = tempfile::tempdir().unwrap();
    let mut environment = vec![
        ("ENGRAM_LLM_BASE_URL", stand_in.base_url.as_str()),
        ("ENGRAM_LLM_MODEL", "stand-in-chat"),
    ];
    if let Some(api_key) = api_key {
        environment.push(("ENGRAM_LLM_API_KEY", api_key));
    }
    let server = TestServer::spawn_with(directory.path(), &environment)
        .await
        .unwrap();
    (server, directory)
}

fn actions(derivation: &Value) -> Vec<String> {
    let mut actions: Vec<String> = derivation["result"]["changes"]
        .as_array()
        .unwrap_or(&Vec::new())
        .iter()
        .map(|change| change["action"].as_str().unwrap_or_default().to_string())
        .collect();
    actions.sort();
    actions
}

fn change_for<'a>(derivation: &'a Value, action: &str) -> &'a Value {
    derivation["result"]["changes"]
        .as_array()
        .and_then(|changes| changes.iter().find(|change| change["action"] == action))
        .unwrap_or_else(|| panic!("no {action} in {derivation}"))
}

/// `/v1/usage` once it shows what `arrived` looks for: meter flushes happen every second (later
/// on a busy machine); the runner's units are written directly.
async fn usage_totals(client: &ApiClient, arrived: impl Fn(&Value) -> bool) -> Value {
    engram_tests::eventually("the usage to be recorded", || async {
        let usage = get_path(client, "/v1/usage").await.body;
        if arrived(&usage) {
            Ok(usage)
        } else {
            Err(usage.to_string())
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_llm_messages_become_episodic_memories_once_and_keys_supersede() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    let first = post_messages(
        &client,
        "chat-1",
        json!({
            "user_id": "ana",
            "agent_id": "helper",
            "messages": [
                {"role": "system", "content": "You are a helpful travel agent."},
                {"role": "user", "content": "I want to visit Kyoto in April.", "name": "ana", "timestamp": "2026-11-30T09:00:00Z"},
                {"role": "assistant", "content": "Kyoto in April is cherry blossom season."},
            ]
        }),
    )
    .await;
    assert_eq!(first.status, 201, "{}", first.body);
    assert_eq!(first.body["messages"].as_array().unwrap().len(), 3);
    assert_eq!(
        first.body["messages"][1]["timestamp"],
        "2026-11-30T09:00:00Z"
    );
    let derivation = &first.body["derivation"];
    assert_eq!(derivation["status"], "succeeded", "{derivation}");
    assert_eq!(derivation["result"]["method"], "verbatim");
    assert_eq!(
        actions(derivation),
        vec!["ADD", "ADD"],
        "the system message is not a memory"
    );
    let user_memory_id = derivation["result"]["changes"][0]["memory_id"]
        .as_str()
        .unwrap()
        .to_string();
    let user_memory = client.get(&user_memory_id).await.body;
    assert_eq!(user_memory["content"], "I want to visit Kyoto in April.");
    assert_eq!(user_memory["kind"], "episodic");
    assert_eq!(user_memory["source"], "user_stated");
    assert_eq!(user_memory["session_id"], "chat-1");
    assert_eq!(user_memory["user_id"], "ana");
    assert_eq!(
        user_memory["metadata"]["message_id"],
        first.body["messages"][1]["id"]
    );
    let hits = client
        .search(json!({"query": "when is the trip to Japan", "user_id": "ana", "top_k": 1}))
        .await;
    assert_eq!(
        hits.body["results"][0]["memory"]["content"], "I want to visit Kyoto in April.",
        "derived memories are searchable as soon as the call returns: {}",
        hits.body
    );

    // Said again (exactly, and with trailing space): nothing new is stored.
    let again = post_messages(
        &client,
        "chat-1",
        json!({"user_id": "ana", "agent_id": "helper", "messages": [
            {"role": "user", "content": "I want to visit Kyoto in April. "},
        ]}),
    )
    .await;
    assert_eq!(
        actions(&again.body["derivation"]),
        vec!["NOOP"],
        "{}",
        again.body
    );
    assert_eq!(
        again.body["derivation"]["result"]["changes"][0]["memory_id"],
        user_memory_id.as_str()
    );
    let ana_memories = client.list("?user_id=ana").await.body;
    assert_eq!(ana_memories["memories"].as_array().unwrap().len(), 2);

    // A keyed message supersedes the memory with the same key.
    let berlin = post_messages(
        &client,
        "chat-1",
        json!({"user_id": "ana", "agent_id": "helper", "messages": [
            {"role": "user", "content": "My home city is Berlin.", "key": "home_city"},
        ]}),
    )
    .await;
    let berlin_id = berlin.body["derivation"]["result"]["changes"][0]["memory_id"]
        .as_str()
        .unwrap()
        .to_string();
    let lisbon = post_messages(
        &client,
        "chat-1",
        json!({"user_id": "ana", "agent_id": "helper", "messages": [
            {"role": "user", "content": "My home city is Lisbon now.", "key": "home_city"},
        ]}),
    )
    .await;
    assert_eq!(actions(&lisbon.body["derivation"]), vec!["ADD"]);
    let old = client.get(&berlin_id).await.body;
    assert_eq!(old["state"], "superseded", "{old}");
    let history = client.history(&berlin_id).await.body;
    let last = history["history"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["event"], "superseded");
    assert!(
        last["reason"].as_str().unwrap().contains("home_city"),
        "{history}"
    );

    // The history pages in order with a cursor.
    let page = get_path(&client, "/v1/sessions/chat-1/messages?user_id=ana&limit=4").await;
    assert_eq!(page.status, 200, "{}", page.body);
    let contents: Vec<&str> = page.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| message["content"].as_str().unwrap())
        .collect();
    assert_eq!(contents[0], "You are a helpful travel agent.");
    assert_eq!(contents[3], "I want to visit Kyoto in April. ");
    let cursor = page.body["next_cursor"].as_str().unwrap().to_string();
    let rest = get_path(
        &client,
        &format!("/v1/sessions/chat-1/messages?user_id=ana&limit=4&after={cursor}"),
    )
    .await;
    let rest_contents: Vec<&str> = rest.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| message["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        rest_contents,
        vec!["My home city is Berlin.", "My home city is Lisbon now."]
    );
    assert!(rest.body["next_cursor"].is_null());

    // derive_memories: false keeps the history only.
    let kept = post_messages(
        &client,
        "chat-2",
        json!({"derive_memories": false, "messages": [{"role": "user", "content": "Just chatting."}]}),
    )
    .await;
    assert_eq!(kept.status, 201, "{}", kept.body);
    assert!(kept.body["derivation"].is_null());
    assert!(
        client
            .search_contents("Just chatting.")
            .await
            .iter()
            .all(|content| content != "Just chatting.")
    );

    // Bad input: every problem named, nothing stored.
    let bad = post_messages(
        &client,
        "chat-1",
        json!({"user_id": "", "messages": [
            {"role": "robot", "content": "hello"},
            {"role": "user", "content": "   "},
            {"role": "user", "content": "fine", "timestamp": "yesterday"},
        ]}),
    )
    .await;
    bad.assert_problem(422, "validation-failed");
    let mut fields = bad.error_fields();
    fields.sort();
    assert_eq!(
        fields,
        vec![
            "messages[0].role",
            "messages[1].content",
            "messages[2].timestamp",
            "user_id"
        ]
    );
    let too_many: Vec<Value> = (0..101)
        .map(|number| json!({"role": "user", "content": format!("message {number}")}))
        .collect();
    post_messages(&client, "chat-1", json!({"messages": too_many}))
        .await
        .assert_problem(422, "validation-failed");
    let everything = get_path(
        &client,
        "/v1/sessions/chat-1/messages?user_id=ana&limit=500",
    )
    .await;
    assert_eq!(everything.body["messages"].as_array().unwrap().len(), 6);

    // Another project sees none of it.
    let (_, other_key) = server.create_project("other").unwrap();
    let other = server.client_with_key(&other_key);
    let foreign = get_path(&other, "/v1/sessions/chat-1/messages").await;
    assert_eq!(foreign.status, 200);
    assert_eq!(foreign.body["messages"], json!([]));

    // Without an LLM, a correction is kept as feedback and changes nothing.
    let feedback = client
        .send(
            client
                .request(
                    reqwest::Method::POST,
                    &format!("/v1/memories/{user_memory_id}/feedback"),
                )
                .json(&json!({"rating": "wrong", "text": "It is Osaka, not Kyoto."})),
        )
        .await;
    assert_eq!(feedback.status, 201, "{}", feedback.body);
    assert!(feedback.body["correction"].is_null());
    assert_eq!(
        client.get(&user_memory_id).await.body["content"],
        "I want to visit Kyoto in April."
    );
    client
        .send(
            client
                .request(
                    reqwest::Method::POST,
                    &format!("/v1/memories/{user_memory_id}/feedback"),
                )
                .json(&json!({"rating": "meh"})),
        )
        .await
        .assert_problem(422, "validation-failed");
    other
        .send(
            other
                .request(
                    reqwest::Method::POST,
                    &format!("/v1/memories/{user_memory_id}/feedback"),
                )
                .json(&json!({"rating": "relevant"})),
        )
        .await
        .assert_problem(404, "not-found");

    // Erasing ana removes her messages and feedback, and the receipt counts them.
    let erasure = client
        .send(client.request(reqwest::Method::POST, "/v1/subjects/ana/erasure"))
        .await;
    assert_eq!(erasure.status, 202, "{}", erasure.body);
    let task_id = erasure.body["id"].as_str().unwrap().to_string();
    let started = Instant::now();
    let receipt = loop {
        let task = get_path(&client, &format!("/v1/tasks/{task_id}")).await;
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
        receipt["result"]["removed"]["session_messages"], 6,
        "{receipt}"
    );
    assert_eq!(receipt["result"]["removed"]["feedback"], 1, "{receipt}");
    let left = get_path(&client, "/v1/sessions/chat-1/messages").await;
    assert_eq!(left.body["messages"], json!([]), "{}", left.body);
    let unrelated = get_path(&client, "/v1/sessions/chat-2/messages").await;
    assert_eq!(
        unrelated.body["messages"][0]["content"], "Just chatting.",
        "messages without the subject stay"
    );
}

/// The candidate number the reconciliation prompt gives `content`.
fn candidate_number(request: &SeenChatRequest, content: &str) -> Option<u64> {
    request.user_prompt.lines().find_map(|line| {
        let (number, text) = line.split_once(". ")?;
        (text == content).then(|| number.parse().ok())?
    })
}

fn extraction(memories: Value, prompt_tokens: u64, completion_tokens: u64) -> ScriptedReply {
    ScriptedReply::Json {
        content: json!({ "memories": memories }),
        prompt_tokens,
        completion_tokens,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_llm_extracts_and_reconciles_and_every_change_carries_its_reason() {
    let stand_in = LlmStandIn::start(|request| {
        if request.is_extraction() {
            if request.user_prompt.contains("I moved to Lisbon") {
                return extraction(
                    json!([
                        {"kind": "semantic", "content": "The user lives in Lisbon.", "confidence": 0.9, "source": "user_stated"},
                        {"kind": "semantic", "content": "The user works as a nurse at Santa Maria hospital.", "source": "user_stated"},
                        {"kind": "semantic", "content": "The user gave away their dog Rex.", "source": "user_stated"},
                        {"kind": "preference", "content": "The user is pescatarian.", "key": "diet", "source": "user_stated"},
                        {"kind": "semantic", "content": "The user lives in Berlin.", "source": "model_inferred"},
                    ]),
                    400,
                    120,
                );
            }
            return extraction(
                json!([
                    {"kind": "semantic", "content": "The user lives in Berlin.", "confidence": 0.95, "source": "user_stated"},
                    {"kind": "semantic", "content": "The user works as a nurse.", "source": "user_stated"},
                    {"kind": "semantic", "content": "The user has a dog named Rex.", "source": "user_stated"},
                    {"kind": "preference", "content": "The user is vegetarian.", "key": "diet", "source": "user_stated"},
                    {"kind": "semantic", "content": "", "source": "user_stated"},
                ]),
                300,
                100,
            );
        }
        let decide = |content: &str, action: &str, target: &str, merged: Value, reason: &str| {
            json!({
                "candidate": candidate_number(request, content),
                "action": action,
                "target": request.label_of(target),
                "content": merged,
                "reason": reason,
            })
        };
        ScriptedReply::Json {
            content: json!({"decisions": [
                decide("The user lives in Lisbon.", "SUPERSEDE", "The user lives in Berlin.", Value::Null, "the user moved to Lisbon"),
                decide("The user works as a nurse at Santa Maria hospital.", "UPDATE", "The user works as a nurse.",
                    json!("The user works as a nurse at Santa Maria hospital."), "more detail about the job"),
                decide("The user gave away their dog Rex.", "DELETE", "The user has a dog named Rex.", Value::Null, "the user no longer has the dog"),
            ]}),
            prompt_tokens: 250,
            completion_tokens: 80,
        }
    })
    .await
    .unwrap();
    let (server, _data_dir) = server_with_llm(&stand_in, Some("sk-test-secret")).await;
    let client = server.client();

    let first = post_messages(
        &client,
        "onboarding",
        json!({"user_id": "bo", "messages": [
            {"role": "user", "content": "Hi! I live in Berlin, I work as a nurse and I have a dog called Rex. I'm vegetarian."},
            {"role": "assistant", "content": "Nice to meet you!"},
        ]}),
    )
    .await;
    assert_eq!(first.status, 201, "{}", first.body);
    let derivation = &first.body["derivation"];
    assert_eq!(derivation["status"], "succeeded", "{derivation}");
    assert_eq!(derivation["result"]["method"], "llm");
    assert_eq!(actions(derivation), vec!["ADD", "ADD", "ADD", "ADD"]);
    assert_eq!(
        derivation["result"]["dropped"],
        json!(["memories[4]: no content"])
    );
    let id_of = |derivation: &Value, content: &str| -> String {
        derivation["result"]["changes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|change| change["content"] == content)
            .and_then(|change| change["memory_id"].as_str())
            .unwrap_or_else(|| panic!("no change with {content:?}: {derivation}"))
            .to_string()
    };
    let berlin = id_of(derivation, "The user lives in Berlin.");
    let nurse = id_of(derivation, "The user works as a nurse.");
    let rex = id_of(derivation, "The user has a dog named Rex.");
    let vegetarian = id_of(derivation, "The user is vegetarian.");
    let berlin_memory = client.get(&berlin).await.body;
    assert_eq!(berlin_memory["source"], "user_stated");
    assert_eq!(berlin_memory["confidence"], 0.95);
    assert_eq!(client.get(&vegetarian).await.body["kind"], "preference");

    let second = post_messages(
        &client,
        "onboarding",
        json!({"user_id": "bo", "messages": [
            {"role": "user", "content": "I moved to Lisbon last month and now work as a nurse at Santa Maria hospital. Sadly I gave Rex away. I eat fish now."},
        ]}),
    )
    .await;
    assert_eq!(second.status, 201, "{}", second.body);
    let derivation = &second.body["derivation"];
    assert_eq!(
        actions(derivation),
        vec!["ADD", "DELETE", "NOOP", "SUPERSEDE", "UPDATE"],
        "{derivation}"
    );

    // SUPERSEDE: Berlin is superseded by Lisbon, both with the model's reason.
    let supersede = change_for(derivation, "SUPERSEDE");
    assert_eq!(supersede["replaces"], berlin.as_str());
    let lisbon = supersede["memory_id"].as_str().unwrap().to_string();
    assert_eq!(client.get(&berlin).await.body["state"], "superseded");
    let berlin_history = client.history(&berlin).await.body;
    let last = berlin_history["history"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["event"], "superseded");
    assert!(
        last["reason"]
            .as_str()
            .unwrap()
            .contains("the user moved to Lisbon")
            && last["reason"].as_str().unwrap().contains(&lisbon),
        "{berlin_history}"
    );
    let lisbon_history = client.history(&lisbon).await.body;
    assert_eq!(
        lisbon_history["history"][0]["reason"],
        "the user moved to Lisbon"
    );
    assert_eq!(client.get(&lisbon).await.body["state"], "active");

    // UPDATE: the same memory, next version, merged content, reason in history.
    let nurse_now = client.get(&nurse).await.body;
    assert_eq!(
        nurse_now["content"],
        "The user works as a nurse at Santa Maria hospital."
    );
    assert_eq!(nurse_now["version"], 2);
    let nurse_history = client.history(&nurse).await.body;
    assert_eq!(
        nurse_history["history"].as_array().unwrap().last().unwrap()["reason"],
        "more detail about the job"
    );

    // DELETE: gone from the API and from recall.
    client.get(&rex).await.assert_problem(404, "not-found");
    assert!(
        !client
            .search_contents("does the user have a dog")
            .await
            .contains(&"The user has a dog named Rex.".to_string())
    );

    // A keyed preference supersedes by key; the repeated Berlin fact is a NOOP.
    assert_eq!(client.get(&vegetarian).await.body["state"], "superseded");
    let noop = change_for(derivation, "NOOP");
    assert_eq!(noop["memory_id"], berlin.as_str());
    let hits = client
        .search(json!({"query": "which city does the user live in", "user_id": "bo", "top_k": 1}))
        .await;
    assert_eq!(
        hits.body["results"][0]["memory"]["content"],
        "The user lives in Lisbon."
    );

    // What the provider was sent: the model, the key, the new messages, earlier ones as
    // context, and the stored memories under labels.
    let requests = stand_in.requests();
    assert_eq!(requests.len(), 3, "two extractions and one reconciliation");
    assert!(
        requests
            .iter()
            .all(|request| request.model == "stand-in-chat")
    );
    assert!(
        requests
            .iter()
            .all(|request| request.authorization.as_deref() == Some("Bearer sk-test-secret"))
    );
    assert!(
        requests[1].user_prompt.contains("earlier ["),
        "{}",
        requests[1].user_prompt
    );
    let reconciliation = requests
        .iter()
        .find(|request| !request.is_extraction())
        .unwrap();
    assert!(
        reconciliation
            .label_of("The user lives in Berlin.")
            .is_some()
    );
    assert!(
        reconciliation.label_of("The user is vegetarian.").is_none(),
        "keyed candidates are decided by key, not by the model"
    );

    // Tokens in and out, per model, exactly as the provider reported them.
    let usage = usage_totals(&client, |usage| {
        usage["totals"]["memories_written"] == 4 + 2 && usage["totals"]["llm_tokens_in"] == 950
    })
    .await;
    assert_eq!(usage["totals"]["llm_tokens_in"], 300 + 250 + 400, "{usage}");
    assert_eq!(usage["totals"]["llm_tokens_out"], 100 + 80 + 120);
    assert_eq!(
        usage["llm_by_model"],
        json!([{"model": "stand-in-chat", "calls": 3, "failed_calls": 0, "tokens_in": 950, "tokens_out": 300}])
    );
    assert_eq!(usage["totals"]["memories_written"], 4 + 2, "{usage}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_llm_outage_keeps_the_messages_and_says_why_nothing_was_derived() {
    let stand_in = LlmStandIn::start(|_| ScriptedReply::Status(503))
        .await
        .unwrap();
    let (server, _data_dir) = server_with_llm(&stand_in, None).await;
    let client = server.client();
    let response = post_messages(
        &client,
        "s-1",
        json!({"user_id": "cy", "messages": [{"role": "user", "content": "Remember that I am allergic to peanuts."}]}),
    )
    .await;
    assert_eq!(response.status, 201, "{}", response.body);
    let derivation = &response.body["derivation"];
    assert_eq!(derivation["status"], "failed", "{derivation}");
    assert!(
        derivation["error"].as_str().unwrap().contains("LLM"),
        "{derivation}"
    );
    assert_eq!(
        stand_in.requests().len(),
        3,
        "three attempts, then the task fails"
    );
    let history = get_path(&client, "/v1/sessions/s-1/messages?user_id=cy").await;
    assert_eq!(
        history.body["messages"][0]["content"],
        "Remember that I am allergic to peanuts."
    );
    assert_eq!(client.list("?user_id=cy").await.body["memories"], json!([]));
    let usage = usage_totals(&client, |usage| usage["llm_by_model"] != json!([])).await;
    assert_eq!(
        usage["llm_by_model"],
        json!([{"model": "stand-in-chat", "calls": 1, "failed_calls": 1, "tokens_in": 0, "tokens_out": 0}])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_correction_in_feedback_is_applied_by_the_llm_and_feedback_is_kept_per_memory_and_recall()
{
    let stand_in = LlmStandIn::start(|request| {
        assert!(request.system_prompt.contains("You correct"), "{}", request.system_prompt);
        assert!(request.user_prompt.contains("Stored memory: The user lives in Berlin."));
        ScriptedReply::Json {
            content: json!({"action": "UPDATE", "content": "The user lives in Munich.", "reason": "the user corrected the city"}),
            prompt_tokens: 90,
            completion_tokens: 20,
        }
    })
    .await
    .unwrap();
    let (server, _data_dir) = server_with_llm(&stand_in, None).await;
    let client = server.client();
    let memory = client
        .add_one(json!({"content": "The user lives in Berlin.", "user_id": "dee"}))
        .await;
    let memory_id = memory["id"].as_str().unwrap().to_string();
    let found = client
        .search(json!({"query": "where does the user live", "user_id": "dee"}))
        .await;
    let recall_id = found.body["recall_id"].as_str().unwrap().to_string();

    let corrected = client
        .send(
            client
                .request(reqwest::Method::POST, &format!("/v1/memories/{memory_id}/feedback"))
                .json(&json!({"rating": "wrong", "text": "I live in Munich, not Berlin.", "recall_id": recall_id})),
        )
        .await;
    assert_eq!(corrected.status, 201, "{}", corrected.body);
    assert_eq!(corrected.body["correction"]["action"], "UPDATE");
    let now = client.get(&memory_id).await.body;
    assert_eq!(now["content"], "The user lives in Munich.");
    assert_eq!(now["version"], 2);
    let history = client.history(&memory_id).await.body;
    assert_eq!(
        history["history"].as_array().unwrap().last().unwrap()["reason"],
        "correction from feedback: the user corrected the city"
    );
    let hits = client
        .search(json!({"query": "which city does the user live in", "user_id": "dee", "top_k": 1}))
        .await;
    assert_eq!(
        hits.body["results"][0]["memory"]["content"],
        "The user lives in Munich."
    );

    let rated = client
        .send(
            client
                .request(
                    reqwest::Method::POST,
                    &format!("/v1/recalls/{recall_id}/feedback"),
                )
                .json(&json!({"rating": "relevant", "memory_id": memory_id})),
        )
        .await;
    assert_eq!(rated.status, 201, "{}", rated.body);
    assert!(rated.body["correction"].is_null());
    let on_recall = get_path(&client, &format!("/v1/recalls/{recall_id}/feedback")).await;
    let ratings: Vec<&str> = on_recall.body["feedback"]
        .as_array()
        .unwrap()
        .iter()
        .map(|feedback| feedback["rating"].as_str().unwrap())
        .collect();
    assert_eq!(ratings, vec!["wrong", "relevant"]);
    let on_memory = get_path(&client, &format!("/v1/memories/{memory_id}/feedback")).await;
    assert_eq!(on_memory.body["feedback"].as_array().unwrap().len(), 2);
    assert_eq!(
        on_memory.body["feedback"][0]["text"],
        "I live in Munich, not Berlin."
    );
    let (_, other_key) = server.create_project("other").unwrap();
    let other = server.client_with_key(&other_key);
    // Another project's recall does not exist for it.
    get_path(&other, &format!("/v1/recalls/{recall_id}/feedback"))
        .await
        .assert_problem(404, "not-found");

    let usage = usage_totals(&client, |usage| usage["llm_by_model"] != json!([])).await;
    assert_eq!(
        usage["llm_by_model"],
        json!([{"model": "stand-in-chat", "calls": 1, "failed_calls": 0, "tokens_in": 90, "tokens_out": 20}])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_project_setting_decides_derivation_when_the_request_does_not() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    let settings = client
        .send(client.request(reqwest::Method::GET, "/v1/project/settings"))
        .await;
    assert_eq!(settings.body["derive_memories"], true, "{}", settings.body);
    let changed = client
        .send(
            client
                .request(reqwest::Method::PATCH, "/v1/project/settings")
                .json(&json!({"derive_memories": false})),
        )
        .await;
    assert_eq!(changed.status, 200, "{}", changed.body);
    assert_eq!(changed.body["derive_memories"], false);

    let stored_only = post_messages(
        &client,
        "log-1",
        json!({"user_id": "eve", "messages": [{"role": "user", "content": "My locker code is in the blue notebook."}]}),
    )
    .await;
    assert_eq!(stored_only.status, 201, "{}", stored_only.body);
    assert!(
        stored_only.body["derivation"].is_null(),
        "{}",
        stored_only.body
    );
    assert!(client.search_contents("locker code").await.is_empty());

    // The request flag still wins over the setting.
    let derived = post_messages(
        &client,
        "log-1",
        json!({"user_id": "eve", "derive_memories": true,
               "messages": [{"role": "user", "content": "My bike is the red one by the door."}]}),
    )
    .await;
    assert_eq!(derived.status, 201, "{}", derived.body);
    assert_eq!(derived.body["derivation"]["status"], "succeeded");
    assert_eq!(
        client
            .search_contents("which bike")
            .await
            .first()
            .map(String::as_str),
        Some("My bike is the red one by the door.")
    );
    // The change is in the audit log.
    let audit = client
        .send(client.request(
            reqwest::Method::GET,
            "/v1/audit?action=project.settings_changed",
        ))
        .await;
    assert!(
        audit.body.to_string().contains("derive_memories"),
        "{}",
        audit.body
    );
}
