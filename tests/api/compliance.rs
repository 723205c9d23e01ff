//! Compliance workflows end to end against a spawned `engram serve`: subject erasure as a task
//! with a verified receipt (and at 10,000 memories), legal hold and immutable memories,
//! subject export with no foreign items, PII masking and rejection, retention sweeps that
//! really delete, and restores that never bring erased data back.

use engram_tests::{ApiClient, ApiResponse, TestServer};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

async fn admin_call(
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

async fn add_for(client: &ApiClient, user_id: &str, contents: &[String]) -> Vec<String> {
    let mut ids = Vec::new();
    for chunk in contents.chunks(100) {
        let memories: Vec<Value> = chunk
            .iter()
            .map(|content| json!({"content": content, "user_id": user_id}))
            .collect();
        let added = client.add(json!(memories)).await;
        assert!(added.status == 201 || added.status == 202, "{}", added.body);
        for memory in added.body["memories"].as_array().unwrap() {
            ids.push(memory["id"].as_str().unwrap().to_string());
        }
    }
    ids
}

/// Ask for an erasure and wait for its task to end; returns (task view, seconds taken).
async fn erase(client: &ApiClient, user_id: &str) -> (Value, f64) {
    let started = Instant::now();
    let requested = admin_call(
        client,
        reqwest::Method::POST,
        &format!("/v1/subjects/{user_id}/erasure"),
        None,
    )
    .await;
    assert_eq!(requested.status, 202, "{}", requested.body);
    let task_id = requested.body["id"].as_str().unwrap().to_string();
    let mut last_progress = None;
    loop {
        let task = admin_call(
            client,
            reqwest::Method::GET,
            &format!("/v1/tasks/{task_id}"),
            None,
        )
        .await;
        assert_eq!(task.status, 200, "{}", task.body);
        let progress = (
            task.body["progress"]["done"].as_i64().unwrap(),
            task.body["progress"]["total"].as_i64().unwrap(),
        );
        if last_progress != Some(progress) {
            eprintln!(
                "  erasure of {user_id}: {} — {}/{}",
                task.body["status"], progress.0, progress.1
            );
            last_progress = Some(progress);
        }
        match task.body["status"].as_str().unwrap() {
            "succeeded" | "failed" => return (task.body, started.elapsed().as_secs_f64()),
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
        assert!(
            started.elapsed() < engram_tests::patience(),
            "erasure never finished"
        );
    }
}

async fn count_listed(client: &ApiClient, user_id: &str) -> usize {
    client
        .all_listed_ids(&format!("&user_id={user_id}"))
        .await
        .len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn erasure_removes_a_subject_from_every_store_and_proves_it() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    let alice: Vec<String> = (0..30)
        .map(|n| format!("Alice's fact number {n}: she keeps bees in Lyon."))
        .collect();
    let alice_ids = add_for(&client, "alice", &alice).await;
    add_for(
        &client,
        "bob",
        &["Bob collects maps of Lisbon.".to_string()],
    )
    .await;
    // Edits leave history text; an idempotent write leaves a stored answer with content.
    for id in alice_ids.iter().take(5) {
        let edited = client
            .patch(
                id,
                None,
                json!({"content": "Alice moved her bees to Annecy.", "reason": "moved"}),
            )
            .await;
        assert_eq!(edited.status, 200, "{}", edited.body);
    }
    let idempotent = client
        .send(
            client
                .request(reqwest::Method::POST, "/v1/memories")
                .header("Idempotency-Key", "alice-once")
                .json(&json!({"memories": [{"content": "Alice's secret garden is behind the mill.", "user_id": "alice"}]})),
        )
        .await;
    assert_eq!(idempotent.status, 201);
    assert!(
        !client
            .search_contents("secret garden behind the mill")
            .await
            .is_empty()
    );

    // An evaluation set with a case of alice's and one of bob's, run once: the run keeps
    // each case's query text in its per-case results.
    let set = admin_call(
        &client,
        reqwest::Method::POST,
        "/v1/eval-sets",
        Some(json!({"name": "subjects", "cases": [
            {"query": "where does alice keep her bees", "user_id": "alice", "expected_memory_ids": [alice_ids[0]]},
            {"query": "what does bob collect", "user_id": "bob", "expected_contents": ["maps of Lisbon"]},
        ]})),
    )
    .await;
    assert_eq!(set.status, 201, "{}", set.body);
    let set_id = set.body["id"].as_str().unwrap().to_string();
    let run = admin_call(
        &client,
        reqwest::Method::POST,
        &format!("/v1/eval-sets/{set_id}/runs"),
        None,
    )
    .await;
    assert_eq!(run.status, 202, "{}", run.body);
    let run_path = format!(
        "/v1/eval-sets/{set_id}/runs/{}",
        run.body["run"]["id"].as_str().unwrap()
    );
    let started = Instant::now();
    loop {
        let current = admin_call(&client, reqwest::Method::GET, &run_path, None).await;
        if current.body["status"] == "succeeded" {
            assert!(
                current
                    .body
                    .to_string()
                    .contains("where does alice keep her bees")
            );
            break;
        }
        assert_ne!(current.body["status"], "failed", "{}", current.body);
        assert!(
            started.elapsed() < engram_tests::patience(),
            "{}",
            current.body
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let (task, seconds) = erase(&client, "alice").await;
    assert_eq!(task["status"], "succeeded", "{task}");
    let receipt = &task["result"];
    // The receipt names every registered store, what each lost and that nothing is left.
    let stores = receipt["stores"].as_array().unwrap();
    let names: Vec<&str> = stores
        .iter()
        .map(|store| store["store"].as_str().unwrap())
        .collect();
    for required in [
        "idempotency",
        "memories",
        "history",
        "messages",
        "session_state",
        "files",
        "feedback",
        "recall_events",
        "evaluation_cases",
        "evaluation_runs",
        "task_results",
        "index",
        "query_cache",
    ] {
        assert!(
            names.contains(&required),
            "{required} missing from {receipt}"
        );
    }
    assert!(
        stores.iter().all(|store| store["remaining"] == 0),
        "{receipt}"
    );
    let removed_from =
        |name: &str| stores.iter().find(|store| store["store"] == name).unwrap()["removed"].clone();
    assert_eq!(removed_from("memories"), 31, "{receipt}");
    assert_eq!(removed_from("evaluation_cases"), 1, "{receipt}");
    assert_eq!(removed_from("evaluation_runs"), 1, "{receipt}");
    // The run keeps its figures and bob's case; alice's query is gone from it.
    let after = admin_call(&client, reqwest::Method::GET, &run_path, None).await;
    assert!(!after.body.to_string().contains("alice"), "{}", after.body);
    assert!(
        after.body.to_string().contains("what does bob collect"),
        "{}",
        after.body
    );
    let cases = admin_call(
        &client,
        reqwest::Method::GET,
        &format!("/v1/eval-sets/{set_id}/cases"),
        None,
    )
    .await;
    assert_eq!(
        cases.body["cases"].as_array().unwrap().len(),
        1,
        "{}",
        cases.body
    );
    assert_eq!(receipt["removed"]["memories"], 31, "{receipt}");
    assert_eq!(receipt["removed"]["history_entries"], 31 + 5, "{receipt}");
    assert_eq!(receipt["removed"]["idempotency_records"], 1, "{receipt}");
    // A retry of the erased write is told so, and neither replays nor writes the content.
    let retried = client
        .send(
            client
                .request(reqwest::Method::POST, "/v1/memories")
                .header("Idempotency-Key", "alice-once")
                .json(&json!({"memories": [{"content": "Alice's secret garden is behind the mill.", "user_id": "alice"}]})),
        )
        .await;
    retried.assert_problem(409, "idempotent-result-erased");
    assert!(!retried.body.to_string().contains("secret garden"));
    // The search above cached its query embedding; erasure empties that cache.
    assert!(
        receipt["removed"]["query_cache_entries"].as_u64().unwrap() >= 1,
        "{receipt}"
    );
    assert_eq!(receipt["verification"]["verified"], true, "{receipt}");
    for remaining in [
        "database_memories_remaining",
        "history_entries_remaining",
        "idempotency_records_remaining",
        "index_points_remaining",
    ] {
        assert_eq!(
            receipt["verification"][remaining], 0,
            "{remaining}: {receipt}"
        );
    }
    assert_eq!(receipt["digest"].as_str().unwrap().len(), 64);
    assert_eq!(task["progress"]["done"], 31);
    assert!(
        !task.to_string().contains("alice"),
        "the task keeps no end-user id: {task}"
    );
    eprintln!("erased 31 memories of alice in {seconds:.2} s");

    // Nothing of alice is left anywhere a client can look; bob is untouched.
    assert_eq!(count_listed(&client, "alice").await, 0);
    assert!(
        client
            .search_contents("bees in Lyon")
            .await
            .iter()
            .all(|c| !c.contains("Alice"))
    );
    assert!(
        client
            .search_contents("secret garden behind the mill")
            .await
            .iter()
            .all(|c| !c.contains("garden"))
    );
    client
        .get(&alice_ids[0])
        .await
        .assert_problem(404, "not-found");
    client
        .history(&alice_ids[0])
        .await
        .assert_problem(404, "not-found");
    assert_eq!(count_listed(&client, "bob").await, 1);
    let export = client
        .http_text(client.request(reqwest::Method::GET, "/v1/subjects/alice/export"))
        .await;
    assert_eq!(export.lines().count(), 1, "only the summary line: {export}");

    // The audit log has the request and the receipt, never the id or content.
    let audit = admin_call(
        &client,
        reqwest::Method::GET,
        "/v1/audit?action=subject.erased",
        None,
    )
    .await;
    let events = audit.body["events"].as_array().unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["details"]["digest"], receipt["digest"]);
    let all_audit = admin_call(&client, reqwest::Method::GET, "/v1/audit?limit=500", None).await;
    assert!(
        all_audit.body["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["action"] == "subject.erasure_requested")
    );
    let verify = admin_call(&client, reqwest::Method::POST, "/v1/audit/verify", None).await;
    assert_eq!(verify.body["verified"], true);

    // An unknown subject erases to an empty, verified receipt.
    let (nobody, _) = erase(&client, "nobody").await;
    assert_eq!(nobody["status"], "succeeded");
    assert_eq!(nobody["result"]["removed"]["memories"], 0);
    assert_eq!(nobody["result"]["verification"]["verified"], true);
    // Another project's key cannot see the task.
    let (_, other_key) = server.create_project("other").unwrap();
    let other = server.client_with_key(&other_key);
    admin_call(
        &other,
        reqwest::Method::GET,
        &format!("/v1/tasks/{}", task["id"].as_str().unwrap()),
        None,
    )
    .await
    .assert_problem(404, "not-found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legal_hold_blocks_erasure_and_changes_immutable_blocks_changes() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    let carol = add_for(
        &client,
        "carol",
        &[
            "Carol signed the contract on May 3.".to_string(),
            "Carol prefers phone calls.".to_string(),
        ],
    )
    .await;
    let held = admin_call(
        &client,
        reqwest::Method::PUT,
        &format!("/v1/memories/{}/flags", carol[0]),
        Some(json!({"legal_hold": true, "reason": "litigation 2026-17"})),
    )
    .await;
    assert_eq!(held.status, 200, "{}", held.body);
    assert_eq!(held.body["legal_hold"], true);

    // Erasure is refused, naming what is held, and nothing is removed.
    let refused = admin_call(
        &client,
        reqwest::Method::POST,
        "/v1/subjects/carol/erasure",
        None,
    )
    .await;
    refused.assert_problem(409, "legal-hold");
    assert_eq!(
        refused.body["errors"][0]["field"],
        format!("memories/{}", carol[0])
    );
    assert_eq!(count_listed(&client, "carol").await, 2);
    // A held memory cannot be edited or deleted either.
    client
        .patch(&carol[0], None, json!({"content": "changed"}))
        .await
        .assert_problem(409, "memory-locked");
    client
        .delete(&carol[0])
        .await
        .assert_problem(409, "memory-locked");

    // Immutable: no edits, no deletes, but erasure still removes it once the hold is lifted.
    let immutable = admin_call(
        &client,
        reqwest::Method::PUT,
        &format!("/v1/memories/{}/flags", carol[1]),
        Some(json!({"immutable": true})),
    )
    .await;
    assert_eq!(immutable.body["immutable"], true);
    let edit = client
        .patch(&carol[1], None, json!({"content": "Carol prefers e-mail."}))
        .await;
    edit.assert_problem(409, "memory-locked");
    assert!(edit.body["detail"].as_str().unwrap().contains("immutable"));
    client
        .delete(&carol[1])
        .await
        .assert_problem(409, "memory-locked");
    assert_eq!(
        client.get(&carol[1]).await.body["content"],
        "Carol prefers phone calls."
    );

    let lifted = admin_call(
        &client,
        reqwest::Method::PUT,
        &format!("/v1/memories/{}/flags", carol[0]),
        Some(json!({"legal_hold": false})),
    )
    .await;
    assert_eq!(lifted.body["legal_hold"], false);
    let (task, _) = erase(&client, "carol").await;
    assert_eq!(task["status"], "succeeded", "{task}");
    assert_eq!(task["result"]["removed"]["memories"], 2);
    assert_eq!(count_listed(&client, "carol").await, 0);

    // Flags need the admin scope, and a bad body changes nothing.
    admin_call(
        &client,
        reqwest::Method::PUT,
        "/v1/memories/not-a-uuid/flags",
        Some(json!({"legal_hold": true})),
    )
    .await
    .assert_problem(404, "not-found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_holds_the_subject_and_nothing_else() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    let dave = add_for(
        &client,
        "dave",
        &[
            "Dave runs marathons.".to_string(),
            "Dave is allergic to nuts.".to_string(),
        ],
    )
    .await;
    client
        .patch(
            &dave[0],
            None,
            json!({"content": "Dave runs ultramarathons.", "reason": "update"}),
        )
        .await;
    add_for(&client, "erin", &["Erin paints watercolours.".to_string()]).await;
    let (_, other_key) = server.create_project("other").unwrap();
    let other = server.client_with_key(&other_key);
    add_for(
        &other,
        "dave",
        &["Another project's Dave likes jazz.".to_string()],
    )
    .await;

    // Every other store of dave's (and of erin's, which must stay out of the export).
    let call = |method: reqwest::Method, path: String, body: Option<Value>| {
        let client = &client;
        async move {
            let mut request = client.request(method, &path);
            if let Some(body) = body {
                request = request.json(&body);
            }
            client.send(request).await
        }
    };
    for user in ["dave", "erin"] {
        let posted = call(
            reqwest::Method::POST,
            format!("/v1/sessions/s-{user}/messages"),
            Some(json!({"user_id": user, "messages": [{"role": "user", "content": format!("{user} asked about trail shoes.")}]})),
        )
        .await;
        assert!(posted.status < 300, "{}", posted.body);
        let put = call(
            reqwest::Method::PUT,
            format!("/v1/sessions/s-{user}/state/draft"),
            Some(json!({"user_id": user, "value": {"note": format!("{user}'s draft")}})),
        )
        .await;
        assert!(put.status < 300, "{}", put.body);
        let uploaded = client
            .send(
                client
                    .request(
                        reqwest::Method::POST,
                        &format!("/v1/files?name={user}.txt&user_id={user}"),
                    )
                    .header("content-type", "text/plain")
                    .body(format!("{user} keeps a training log.")),
            )
            .await;
        assert!(uploaded.status < 300, "{}", uploaded.body);
        let searched = client
            .search(json!({"query": "what does the user do", "user_id": user}))
            .await;
        assert_eq!(searched.status, 200, "{}", searched.body);
        let recall_id = searched.body["recall_id"].as_str().unwrap().to_string();
        let rated = call(
            reqwest::Method::POST,
            format!("/v1/recalls/{recall_id}/feedback"),
            Some(json!({"rating": "relevant"})),
        )
        .await;
        assert_eq!(rated.status, 201, "{}", rated.body);
    }

    let eval_set = call(
        reqwest::Method::POST,
        "/v1/eval-sets".to_string(),
        Some(json!({"name": "runners", "cases": [
            {"query": "how far does dave run", "user_id": "dave", "expected_memory_ids": [dave[0]]},
            {"query": "what does erin paint", "user_id": "erin", "expected_contents": ["watercolours"]},
        ]})),
    )
    .await;
    assert_eq!(eval_set.status, 201, "{}", eval_set.body);

    let response = client
        .send(client.request(reqwest::Method::GET, "/v1/subjects/dave/export"))
        .await;
    assert_eq!(response.status, 200);
    let text = client
        .http_text(client.request(reqwest::Method::GET, "/v1/subjects/dave/export"))
        .await;
    let lines: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let of_type =
        |kind: &str| -> Vec<&Value> { lines.iter().filter(|line| line["type"] == kind).collect() };
    // Dave's two, the one derived from his message and the one his file became.
    let memories = of_type("memory");
    let listed = client.list("?user_id=dave&limit=50").await;
    let mut listed_ids: Vec<&str> = listed.body["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|memory| memory["id"].as_str().unwrap())
        .collect();
    let mut exported_ids: Vec<&str> = memories
        .iter()
        .map(|line| line["memory"]["id"].as_str().unwrap())
        .collect();
    listed_ids.sort_unstable();
    exported_ids.sort_unstable();
    assert_eq!(exported_ids, listed_ids, "{text}");
    assert_eq!(memories.len(), 4, "{text}");
    let edited = memories
        .iter()
        .find(|line| line["memory"]["id"] == dave[0].as_str())
        .unwrap();
    assert_eq!(
        edited["history"].as_array().unwrap().len(),
        2,
        "created and updated"
    );
    // Store by store, the export holds what the API answers for dave.
    let messages = call(
        reqwest::Method::GET,
        "/v1/sessions/s-dave/messages?user_id=dave".to_string(),
        None,
    )
    .await;
    assert_eq!(
        of_type("message")
            .iter()
            .map(|line| line["message"].clone())
            .collect::<Vec<_>>(),
        messages.body["messages"].as_array().unwrap().clone(),
        "{text}"
    );
    let state = call(
        reqwest::Method::GET,
        "/v1/sessions/s-dave/state?user_id=dave".to_string(),
        None,
    )
    .await;
    assert_eq!(
        of_type("state")
            .iter()
            .map(|line| line["state"].clone())
            .collect::<Vec<_>>(),
        state.body["state"].as_array().unwrap().clone()
    );
    let files = of_type("file");
    assert_eq!(files.len(), 1, "{text}");
    let file = call(
        reqwest::Method::GET,
        format!("/v1/files/{}", files[0]["file"]["id"].as_str().unwrap()),
        None,
    )
    .await;
    assert_eq!(files[0]["file"]["name"], file.body["name"]);
    assert_eq!(files[0]["file"]["user_id"], "dave");
    let recalls = of_type("recall");
    assert_eq!(recalls.len(), 1, "{text}");
    let recall_id = recalls[0]["recall"]["recall_id"].as_str().unwrap();
    let recall = call(
        reqwest::Method::GET,
        format!("/v1/recalls/{recall_id}"),
        None,
    )
    .await;
    assert_eq!(recalls[0]["recall"], recall.body);
    let feedback = call(
        reqwest::Method::GET,
        format!("/v1/recalls/{recall_id}/feedback"),
        None,
    )
    .await;
    assert_eq!(
        of_type("feedback")
            .iter()
            .map(|line| line["feedback"].clone())
            .collect::<Vec<_>>(),
        feedback.body["feedback"].as_array().unwrap().clone()
    );
    let cases = of_type("evaluation_case");
    assert_eq!(cases.len(), 1, "{text}");
    assert_eq!(
        cases[0]["evaluation_case"]["query"],
        "how far does dave run"
    );
    assert_eq!(cases[0]["evaluation_case"]["set_id"], eval_set.body["id"]);
    let summary = &lines.last().unwrap()["summary"];
    assert_eq!(summary["evaluation_cases"], 1, "{summary}");
    assert_eq!(summary["evaluation_runs"], 0, "{summary}");
    assert_eq!(
        (
            &summary["memories"],
            &summary["session_messages"],
            &summary["session_state"],
            &summary["files"],
            &summary["feedback"],
            &summary["recall_events"]
        ),
        (
            &json!(4),
            &json!(1),
            &json!(1),
            &json!(1),
            &json!(1),
            &json!(1)
        ),
        "{summary}"
    );
    assert!(
        !text.contains("Erin") && !text.contains("erin") && !text.contains("jazz"),
        "no foreign items: {text}"
    );
    // Both downloads above are in the audit log.
    let audit = admin_call(
        &client,
        reqwest::Method::GET,
        "/v1/audit?action=subject.exported",
        None,
    )
    .await;
    assert_eq!(audit.body["events"].as_array().unwrap().len(), 2);
    // A malformed user id is a 422 naming the field.
    let too_long = "x".repeat(256);
    let bad = admin_call(
        &client,
        reqwest::Method::GET,
        &format!("/v1/subjects/{too_long}/export"),
        None,
    )
    .await;
    bad.assert_problem(422, "validation-failed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn personal_data_is_masked_or_rejected_before_it_is_stored() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    let settings = admin_call(&client, reqwest::Method::GET, "/v1/project/settings", None).await;
    assert_eq!(settings.body["pii_redaction"], "off");
    for (body, field) in [
        (json!({"pii_redaction": "sometimes"}), "pii_redaction"),
        (
            json!({"retention_days": {"episodic": 0}}),
            "retention_days.episodic",
        ),
        (
            json!({"retention_days": {"gossip": 10}}),
            "retention_days.gossip",
        ),
    ] {
        let refused = admin_call(
            &client,
            reqwest::Method::PATCH,
            "/v1/project/settings",
            Some(body),
        )
        .await;
        refused.assert_problem(422, "validation-failed");
        assert_eq!(refused.body["errors"][0]["field"], field);
    }

    let masked = admin_call(
        &client,
        reqwest::Method::PATCH,
        "/v1/project/settings",
        Some(json!({"pii_redaction": "mask"})),
    )
    .await;
    assert_eq!(masked.body["pii_redaction"], "mask");
    let added = client
        .add(json!([{"content": "Reach Frank at frank.li@example.com or 138 1234 5678; card 4111 1111 1111 1111.", "user_id": "frank"}]))
        .await;
    assert_eq!(added.status, 201);
    let content = added.body["memories"][0]["content"].as_str().unwrap();
    assert_eq!(
        content,
        "Reach Frank at [email] or [phone]; card [payment_card]."
    );
    // A large request (three contents of 30 KiB, scanned off the request thread) is masked
    // the same way, every finding in every content.
    let filler = "The quarterly numbers were discussed at length. ".repeat(600);
    let large: Vec<Value> = (0..3)
        .map(|n| json!({"content": format!("{filler} Write to person{n}@example.com."), "user_id": "frank"}))
        .collect();
    let added_large = client.add(Value::Array(large)).await;
    assert_eq!(added_large.status, 201, "{}", added_large.body);
    for memory in added_large.body["memories"].as_array().unwrap() {
        let content = memory["content"].as_str().unwrap();
        assert!(
            content.ends_with("Write to [email]."),
            "{}",
            &content[content.len() - 40..]
        );
        assert!(!content.contains("@example.com"));
    }
    let id = added.body["memories"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let edited = client
        .patch(
            &id,
            None,
            json!({"content": "Frank's id is 11010519491231002X."}),
        )
        .await;
    assert_eq!(edited.body["content"], "Frank's id is [national_id].");
    let history = client.history(&id).await;
    assert!(!history.body.to_string().contains("frank.li@example.com"));
    assert!(!history.body.to_string().contains("11010519491231002X"));
    // What was never stored cannot be found either.
    for hit in client.search_contents("frank.li@example.com").await {
        assert!(!hit.contains("frank.li@"), "{hit}");
    }

    admin_call(
        &client,
        reqwest::Method::PATCH,
        "/v1/project/settings",
        Some(json!({"pii_redaction": "reject"})),
    )
    .await;
    let before = count_listed(&client, "frank").await;
    let rejected = client
        .add(json!([
            {"content": "Frank likes tea.", "user_id": "frank"},
            {"content": "Frank's card is 5500-0000-0000-0004.", "user_id": "frank"}
        ]))
        .await;
    rejected.assert_problem(422, "validation-failed");
    assert_eq!(rejected.body["errors"][0]["field"], "memories[1].content");
    assert!(
        rejected.body["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("payment_card")
    );
    assert_eq!(
        count_listed(&client, "frank").await,
        before,
        "nothing of the batch is stored"
    );
    client
        .patch(&id, None, json!({"content": "Call +44 20 7946 0958."}))
        .await
        .assert_problem(422, "validation-failed");
    // Text without personal data passes, and ordinary numbers are left alone.
    let fine = client
        .add(json!([{"content": "Frank's order 2024-01-15 had 12345 items.", "user_id": "frank"}]))
        .await;
    assert_eq!(fine.status, 201);
    assert_eq!(
        fine.body["memories"][0]["content"],
        "Frank's order 2024-01-15 had 12345 items."
    );
    let audit = admin_call(
        &client,
        reqwest::Method::GET,
        "/v1/audit?action=project.settings_changed",
        None,
    )
    .await;
    assert_eq!(audit.body["events"].as_array().unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_sweeps_delete_from_every_store_but_spare_immutable_and_held() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::spawn_with(
        directory.path(),
        &[("ENGRAM_RETENTION_SWEEP_INTERVAL_SECS", "1")],
    )
    .await
    .unwrap();
    let client = server.client();
    // Far enough ahead that the flags below are set before the sweeper may act, even on a
    // busy machine; the test then waits for the sweeper, however late it comes.
    let expiry = chrono::Utc::now() + chrono::Duration::seconds(10);
    let soon = expiry.to_rfc3339();
    let added = client
        .add(json!([
            {"content": "Gina's parking spot is C-12 this week.", "user_id": "gina", "expires_at": soon},
            {"content": "Gina's badge expires soon but is kept.", "user_id": "gina", "expires_at": soon},
            // Another subject's: a hold keeps every record of its subject (see
            // `a_legal_hold_stops_retention_in_every_store_for_the_held_subject`).
            {"content": "Hana's held note expires too.", "user_id": "hana", "expires_at": soon},
            {"content": "Gina likes oolong tea.", "user_id": "gina"}
        ]))
        .await;
    let ids: Vec<String> = added.body["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_string())
        .collect();
    admin_call(
        &client,
        reqwest::Method::PUT,
        &format!("/v1/memories/{}/flags", ids[1]),
        Some(json!({"immutable": true})),
    )
    .await;
    admin_call(
        &client,
        reqwest::Method::PUT,
        &format!("/v1/memories/{}/flags", ids[2]),
        Some(json!({"legal_hold": true})),
    )
    .await;

    let preview_before =
        admin_call(&client, reqwest::Method::GET, "/v1/retention/preview", None).await;
    if chrono::Utc::now() < expiry {
        assert_eq!(
            preview_before.body["would_delete"], 0,
            "{}",
            preview_before.body
        );
    }
    assert!(
        client.get(&ids[1]).await.status == 200 && client.get(&ids[2]).await.status == 200,
        "the flagged memories are there before their expiry"
    );
    // The sweep runs every second: wait until the expired memory is gone.
    let started = Instant::now();
    loop {
        if client.get(&ids[0]).await.status == 404 {
            break;
        }
        assert!(
            started.elapsed() < engram_tests::patience(),
            "the sweeper never removed it"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        client
            .search_contents("parking spot C-12")
            .await
            .iter()
            .all(|c| !c.contains("C-12"))
    );
    client
        .history(&ids[0])
        .await
        .assert_problem(404, "not-found");
    for kept in &ids[1..] {
        assert_eq!(
            client.get(kept).await.status,
            200,
            "immutable, held and unexpired stay"
        );
    }
    let audit = admin_call(
        &client,
        reqwest::Method::GET,
        "/v1/audit?action=memory.expired",
        None,
    )
    .await;
    let expired_ids: Vec<&str> = audit.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|event| {
            event["target_ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|id| id.as_str().unwrap())
        })
        .collect();
    assert_eq!(expired_ids, vec![ids[0].as_str()]);
    let metrics = reqwest::get(&server.metrics_url)
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("engram_retention_deleted_total{store=\"memories\"} 1"),
        "{}",
        metrics
            .lines()
            .filter(|l| l.contains("retention"))
            .collect::<Vec<_>>()
            .join("\n")
    );

    // The dry run names what the next sweep would take: lift the hold and look.
    let settings = admin_call(
        &client,
        reqwest::Method::PATCH,
        "/v1/project/settings",
        Some(json!({"retention_days": {"episodic": 30}})),
    )
    .await;
    assert_eq!(settings.body["retention_days"]["episodic"], 30);
    let preview = admin_call(&client, reqwest::Method::GET, "/v1/retention/preview", None).await;
    assert_eq!(
        preview.body["would_delete"], 0,
        "held and immutable are exempt: {}",
        preview.body
    );
}

/// The 10,000-memory erasure: ingest through the API, erase, verify; prints the timings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subject_with_ten_thousand_memories_is_erased_and_verified() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    let subject_size: usize = std::env::var("ENGRAM_ERASURE_SUBJECT_SIZE")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(10_000);
    let contents: Vec<String> = (0..subject_size)
        .map(|n| {
            format!(
                "Harriet note {n}: met supplier {} about order {}.",
                n % 97,
                n * 7
            )
        })
        .collect();
    let ingest_started = Instant::now();
    let writers: Vec<_> = contents
        .chunks(subject_size.div_ceil(2).max(1))
        .map(|half| {
            let client = server.client();
            let half = half.to_vec();
            tokio::spawn(async move { add_for(&client, "harriet", &half).await.len() })
        })
        .collect();
    let mut written = 0;
    for writer in writers {
        written += writer.await.unwrap();
    }
    assert_eq!(written, subject_size);
    let ingest_seconds = ingest_started.elapsed().as_secs_f64();
    add_for(&client, "ivan", &["Ivan's only memory.".to_string()]).await;
    // And something of hers in every other store: messages, state, a file, searches with
    // their recall events, and feedback on them.
    let messages: Vec<Value> = (0..50)
        .map(|n| json!({"role": "user", "content": format!("Harriet asks about order {n}.")}))
        .collect();
    let posted = admin_call(
        &client,
        reqwest::Method::POST,
        "/v1/sessions/harriet-chat/messages",
        Some(json!({"user_id": "harriet", "messages": messages, "derive_memories": false})),
    )
    .await;
    assert!(posted.status < 300, "{}", posted.body);
    for key in ["draft", "cart", "step"] {
        let put = admin_call(
            &client,
            reqwest::Method::PUT,
            &format!("/v1/sessions/harriet-chat/state/{key}"),
            Some(json!({"user_id": "harriet", "value": {"key": key}})),
        )
        .await;
        assert!(put.status < 300, "{}", put.body);
    }
    let uploaded = client
        .send(
            client
                .request(
                    reqwest::Method::POST,
                    "/v1/files?name=harriet.txt&user_id=harriet",
                )
                .header("content-type", "text/plain")
                .body("Harriet's supplier list: mills, dairies and bakeries."),
        )
        .await;
    assert_eq!(uploaded.status, 202, "{}", uploaded.body);
    // Its ingest finishes first (an ingest racing the erasure would write its chunk behind
    // it, and the verification would rightly fail).
    wait_until_ingested(&client, &uploaded.body).await;
    for query in ["which supplier", "what order", "whom did she meet"] {
        let searched = client
            .search(json!({"query": query, "user_id": "harriet"}))
            .await;
        assert_eq!(searched.status, 200, "{}", searched.body);
        let recall_id = searched.body["recall_id"].as_str().unwrap().to_string();
        let rated = admin_call(
            &client,
            reqwest::Method::POST,
            &format!("/v1/recalls/{recall_id}/feedback"),
            Some(json!({"rating": "relevant"})),
        )
        .await;
        assert_eq!(rated.status, 201, "{}", rated.body);
    }

    let (task, seconds) = erase(&client, "harriet").await;
    assert_eq!(task["status"], "succeeded", "{task}");
    let receipt = &task["result"];
    let stores: Vec<(String, u64)> = receipt["stores"]
        .as_array()
        .unwrap()
        .iter()
        .map(|store| {
            assert_eq!(store["remaining"], 0, "{store}");
            (
                store["store"].as_str().unwrap().to_string(),
                store["removed"].as_u64().unwrap(),
            )
        })
        .collect();
    let removed = |name: &str| {
        stores
            .iter()
            .find(|(store, _)| store == name)
            .map(|(_, removed)| *removed)
            .unwrap_or_default()
    };
    assert_eq!(removed("messages"), 50, "{receipt}");
    assert_eq!(removed("session_state"), 3, "{receipt}");
    assert_eq!(removed("files"), 1, "{receipt}");
    assert_eq!(removed("recall_events"), 3, "{receipt}");
    assert_eq!(removed("feedback"), 3, "{receipt}");
    // Her memories, and the chunk her file became.
    assert_eq!(removed("memories"), subject_size as u64 + 1, "{receipt}");
    assert_eq!(receipt["verification"]["verified"], true, "{receipt}");
    assert_eq!(receipt["verification"]["index_points_remaining"], 0);
    assert_eq!(count_listed(&client, "harriet").await, 0);
    assert_eq!(count_listed(&client, "ivan").await, 1);
    eprintln!(
        "erasure: {subject_size} memories ingested in {ingest_seconds:.1} s; with 50 messages, 3 state values, a file, 3 recall events and 3 feedback, erased and verified in {seconds:.2} s (receipt {} → {}); stores {stores:?}",
        receipt["started_at"], receipt["finished_at"]
    );
}

fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The database files of a data dir (SQLite and its write-ahead log).
fn database_files(data_dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    ["engram.db", "engram.db-wal", "engram.db-shm"]
        .iter()
        .map(|name| data_dir.join(name))
        .filter(|path| path.exists())
        .collect()
}

/// Restoring the database or the index from a copy taken before an erasure does not bring
/// the erased subject back: the erasure ledger (outside the database) is replayed at start,
/// and the reconciler drops index points whose memory is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restoring_an_older_copy_never_resurrects_an_erased_subject() {
    let directory = tempfile::tempdir().unwrap();
    let data_dir = directory.path().join("data");
    let backup = directory.path().join("backup");
    let server = TestServer::spawn_in(&data_dir).await.unwrap();
    let client = server.client();
    add_for(
        &client,
        "judy",
        &[
            "Judy's locker code is 4471.".to_string(),
            "Judy drives a green van.".to_string(),
        ],
    )
    .await;
    add_for(&client, "ken", &["Ken plays the oboe.".to_string()]).await;
    assert!(server.stop().0);
    // The backup: database and index as they were before the erasure.
    std::fs::create_dir_all(backup.join("db")).unwrap();
    for file in database_files(&data_dir) {
        std::fs::copy(&file, backup.join("db").join(file.file_name().unwrap())).unwrap();
    }
    copy_tree(&data_dir.join("index"), &backup.join("index"));

    let server = TestServer::spawn_in(&data_dir).await.unwrap();
    let client = server.client();
    let (task, _) = erase(&client, "judy").await;
    assert_eq!(task["status"], "succeeded", "{task}");
    assert!(server.stop().0);
    let ledger = std::fs::read_to_string(data_dir.join("erasure-ledger.jsonl")).unwrap();
    assert_eq!(ledger.lines().count(), 1);
    assert!(
        !ledger.contains("judy") && !ledger.contains("locker"),
        "content-free: {ledger}"
    );

    // 1. The database comes back from the backup (with judy's rows); the index is current.
    for file in database_files(&data_dir) {
        std::fs::remove_file(file).unwrap();
    }
    for entry in std::fs::read_dir(backup.join("db")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), data_dir.join(entry.file_name())).unwrap();
    }
    let server = TestServer::spawn_in(&data_dir).await.unwrap();
    let client = server.client();
    assert_eq!(
        count_listed(&client, "judy").await,
        0,
        "the ledger replay erased judy again"
    );
    assert!(
        client
            .search_contents("locker code")
            .await
            .iter()
            .all(|c| !c.contains("4471"))
    );
    assert_eq!(count_listed(&client, "ken").await, 1);
    assert!(server.stop().0);

    // 2. The index comes back from the backup (with judy's points); the database is current.
    std::fs::remove_dir_all(data_dir.join("index")).unwrap();
    copy_tree(&backup.join("index"), &data_dir.join("index"));
    let server = TestServer::spawn_in(&data_dir).await.unwrap();
    let client = server.client();
    assert!(
        client
            .search_contents("Judy's locker code")
            .await
            .iter()
            .all(|c| !c.contains("4471"))
    );
    assert!(
        client
            .search_contents("green van")
            .await
            .iter()
            .all(|c| !c.contains("Judy"))
    );
    assert_eq!(count_listed(&client, "ken").await, 1);
    // The start-up reconciliation found judy's two restored points and removed them.
    let metrics = reqwest::get(&server.metrics_url)
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("engram_index_drift_points{kind=\"orphaned\"} 2"),
        "{}",
        metrics
            .lines()
            .filter(|line| line.contains("drift"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// An organization erases a person in every project at once: only an organization-level
/// credential may (a console owner here; a project key, even `admin`, is refused), one task
/// gives one receipt listing each project with its own subject digest and per-store counts,
/// and an independent count finds nothing left anywhere; other people stay, and no project
/// key can read the organization's receipt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_organization_erases_a_person_in_every_project_with_one_receipt() {
    let server = TestServer::spawn().await.unwrap();
    let first = server.client();
    let (second_project, second_key) = server.create_project("second").unwrap();
    let second = server.client_with_key(&second_key);
    for (client, place) in [(&first, "Annecy"), (&second, "Lyon")] {
        add_for(
            client,
            "zoe",
            &[
                format!("Zoe swims in the lake at {place}."),
                format!("Zoe's sister lives in {place}."),
            ],
        )
        .await;
        add_for(client, "yan", &[format!("Yan sells bread in {place}.")]).await;
    }

    let refused = admin_call(
        &first,
        reqwest::Method::POST,
        "/v1/organization/subjects/zoe/erasure",
        None,
    )
    .await;
    refused.assert_problem(403, "forbidden");
    assert_eq!(
        count_listed(&first, "zoe").await,
        2,
        "a refusal erases nothing"
    );

    let (owner, cookie) = server.console_owner_session().await;
    let console = |function: &'static str, fields: Vec<(&'static str, String)>| {
        let request = owner
            .post(format!("{}/console/api/{function}", server.base_url))
            .header("Origin", &server.base_url)
            .header("Cookie", &cookie)
            .form(&fields);
        async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            let body: Value = response.json().await.unwrap_or(Value::Null);
            (status, body)
        }
    };
    let project = server.bootstrap.project_id.clone();
    let (status, started) = console(
        "request_organization_erasure",
        vec![
            ("project_id", project.clone()),
            ("user_id", "zoe".to_string()),
            ("confirm", "zoe".to_string()),
        ],
    )
    .await;
    assert_eq!(status, 200, "{started}");
    let task_id = started["task_id"].as_str().unwrap().to_string();
    let begun = Instant::now();
    let finished = loop {
        let (status, current) = console(
            "erasure_status",
            vec![
                ("project_id", project.clone()),
                ("task_id", task_id.clone()),
            ],
        )
        .await;
        assert_eq!(status, 200, "{current}");
        if matches!(current["status"].as_str(), Some("succeeded" | "failed")) {
            break current;
        }
        assert!(begun.elapsed() < engram_tests::patience(), "{current}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(finished["status"], "succeeded", "{finished}");
    assert_eq!(finished["verified"], true, "{finished}");
    let receipt: Value = serde_json::from_str(finished["receipt"].as_str().unwrap()).unwrap();
    let projects = receipt["projects"].as_array().unwrap();
    let mut named: Vec<&str> = projects
        .iter()
        .map(|part| part["project_id"].as_str().unwrap())
        .collect();
    named.sort_unstable();
    let mut expected = vec![project.as_str(), second_project.as_str()];
    expected.sort_unstable();
    assert_eq!(named, expected, "{receipt}");
    assert_ne!(
        projects[0]["subject_digest"], projects[1]["subject_digest"],
        "each project has its own digest of the person"
    );
    for part in projects {
        let memories = part["stores"]
            .as_array()
            .unwrap()
            .iter()
            .find(|store| store["store"] == "memories")
            .unwrap();
        assert_eq!(memories["removed"], 2, "{receipt}");
    }
    assert_eq!(receipt["removed"]["memories"], 4, "{receipt}");
    assert_eq!(receipt["verification"]["verified"], true, "{receipt}");
    assert!(
        receipt["verification"]["remaining"]
            .as_object()
            .unwrap()
            .values()
            .all(|left| *left == 0),
        "{receipt}"
    );
    assert!(!receipt.to_string().contains("zoe"), "no raw id: {receipt}");

    for client in [&first, &second] {
        assert_eq!(count_listed(client, "zoe").await, 0);
        assert_eq!(count_listed(client, "yan").await, 1);
    }
    // The organization's receipt names every project: no project key reads it.
    admin_call(
        &first,
        reqwest::Method::GET,
        &format!("/v1/tasks/{task_id}"),
        None,
    )
    .await
    .assert_problem(404, "not-found");
}

/// Waits until the file an upload answered with (`202 {"file": …}`) is ingested; a failed
/// ingest fails the test.
async fn wait_until_ingested(client: &ApiClient, uploaded: &Value) {
    let path = format!("/v1/files/{}", uploaded["file"]["id"].as_str().unwrap());
    let waited = Instant::now();
    loop {
        let file = admin_call(client, reqwest::Method::GET, &path, None).await;
        match file.body["status"].as_str() {
            Some("ingested") => return,
            Some("failed") => panic!("{}", file.body),
            _ => {}
        }
        assert!(waited.elapsed() < engram_tests::patience(), "{}", file.body);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What the subject export holds, counted by line `type`.
async fn exported_types(
    client: &ApiClient,
    user_id: &str,
) -> std::collections::BTreeMap<String, usize> {
    let export = client
        .http_text(client.request(
            reqwest::Method::GET,
            &format!("/v1/subjects/{user_id}/export"),
        ))
        .await;
    let mut counts = std::collections::BTreeMap::new();
    for line in export.lines() {
        let line: Value = serde_json::from_str(line).unwrap();
        if let Some(kind) = line["type"].as_str() {
            *counts.entry(kind.to_string()).or_default() += 1;
        }
    }
    counts
}

/// Retention beside memories: a project keeps messages, session state, feedback, files and
/// recall events for the days it sets per store (read back for all five); the sweeper removes
/// what is older — and only that, and nothing of a store left without a limit — audits each
/// store's removal with its count, and counts it in `engram_retention_deleted_total{store}`.
/// The records are aged in PostgreSQL directly: nobody waits days in a test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_sweeps_every_store_kept_for_a_number_of_days() {
    let database = engram_test_postgres::create_database().await;
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::spawn_with(
        directory.path(),
        &[
            ("ENGRAM_DATABASE_URL", database.url.as_str()),
            ("ENGRAM_RETENTION_SWEEP_INTERVAL_SECS", "1"),
        ],
    )
    .await
    .unwrap();
    let client = server.client();
    let client = &client;

    // Wrong names and days are refused whole, naming the field.
    for (body, field) in [
        (
            json!({"store_retention_days": {"memories": 3}}),
            "store_retention_days.memories",
        ),
        (
            json!({"store_retention_days": {"messages": 0}}),
            "store_retention_days.messages",
        ),
        (
            json!({"store_retention_days": {"recall_events": 4000}}),
            "store_retention_days.recall_events",
        ),
    ] {
        let refused = admin_call(
            client,
            reqwest::Method::PATCH,
            "/v1/project/settings",
            Some(body),
        )
        .await;
        refused.assert_problem(422, "validation-failed");
        assert!(refused.body.to_string().contains(field), "{}", refused.body);
    }
    let settings = admin_call(
        client,
        reqwest::Method::PATCH,
        "/v1/project/settings",
        Some(json!({"store_retention_days": {
            "messages": 1, "session_state": 1, "files": 1, "recall_events": 1, "runs": 1
        }})),
    )
    .await;
    assert_eq!(settings.status, 200, "{}", settings.body);
    assert_eq!(
        settings.body["store_retention_days"],
        json!({"messages": 1, "session_state": 1, "files": 1, "recall_events": 1, "runs": 1, "feedback": null}),
        "every store swept by age is listed; feedback keeps its records"
    );
    assert_eq!(settings.body["recall_event_retention_days"], 1);

    // Old records of every store…
    let post_messages = |session: &'static str, count: usize| {
        let messages: Vec<Value> = (0..count)
            .map(|n| json!({"role": "user", "content": format!("Ines asks about parcel {n} in {session}.")}))
            .collect();
        async move {
            admin_call(
                client,
                reqwest::Method::POST,
                &format!("/v1/sessions/{session}/messages"),
                Some(json!({"user_id": "ines", "messages": messages, "derive_memories": false})),
            )
            .await
        }
    };
    let put_state = |session: &'static str| async move {
        admin_call(
            client,
            reqwest::Method::PUT,
            &format!("/v1/sessions/{session}/state/step"),
            Some(json!({"user_id": "ines", "value": {"session": session}})),
        )
        .await
    };
    let upload_and_ingest = |name: &'static str| async move {
        let uploaded = client
            .send(
                client
                    .request(
                        reqwest::Method::POST,
                        &format!("/v1/files?name={name}&user_id=ines"),
                    )
                    .header("content-type", "text/plain")
                    .body(format!("Ines keeps her notes in {name}.")),
            )
            .await;
        assert_eq!(uploaded.status, 202, "{}", uploaded.body);
        wait_until_ingested(client, &uploaded.body).await;
    };
    let search_and_rate = |query: &'static str| async move {
        let searched = client
            .search(json!({"query": query, "user_id": "ines"}))
            .await;
        assert_eq!(searched.status, 200, "{}", searched.body);
        let recall_id = searched.body["recall_id"].as_str().unwrap().to_string();
        let rated = admin_call(
            client,
            reqwest::Method::POST,
            &format!("/v1/recalls/{recall_id}/feedback"),
            Some(json!({"rating": "relevant"})),
        )
        .await;
        assert_eq!(rated.status, 201, "{}", rated.body);
    };
    assert!(post_messages("old-chat", 4).await.status < 300);
    assert!(put_state("old-chat").await.status < 300);
    upload_and_ingest("old.txt").await;
    search_and_rate("where are the parcels").await;
    search_and_rate("which notes").await;
    let start_run = |task: &'static str| async move {
        let started = admin_call(
            client,
            reqwest::Method::POST,
            "/v1/runs",
            Some(json!({"task": task, "user_id": "ines"})),
        )
        .await;
        assert_eq!(started.status, 201, "{}", started.body);
        let run_id = started.body["run_id"].as_str().unwrap().to_string();
        let noted = admin_call(
            client,
            reqwest::Method::POST,
            &format!("/v1/runs/{run_id}/steps"),
            Some(json!({"type": "note", "text": "looked for the parcel"})),
        )
        .await;
        assert_eq!(noted.status, 201, "{}", noted.body);
    };
    start_run("find the old parcel").await;
    // …aged three days (every row written so far)…
    for table in [
        "session_messages",
        "feedback",
        "recall_events",
        "files",
        "agent_runs",
    ] {
        engram_test_postgres::execute_on(
            &database.url,
            &format!("UPDATE {table} SET created_at = created_at - interval '3 days'"),
        )
        .await;
    }
    for table in ["session_state", "files"] {
        engram_test_postgres::execute_on(
            &database.url,
            &format!("UPDATE {table} SET updated_at = updated_at - interval '3 days'"),
        )
        .await;
    }
    // …and new ones beside them.
    assert!(post_messages("new-chat", 2).await.status < 300);
    assert!(put_state("new-chat").await.status < 300);
    upload_and_ingest("new.txt").await;
    search_and_rate("what is new").await;
    start_run("find the new parcel").await;

    // The sweeper runs every second: wait until the old records are gone.
    let expected = std::collections::BTreeMap::from([
        ("feedback".to_string(), 3), // no limit: old and new stay
        ("file".to_string(), 1),
        ("message".to_string(), 2),
        ("recall".to_string(), 1),
        ("run".to_string(), 1),
        ("state".to_string(), 1),
    ]);
    let started = Instant::now();
    loop {
        let mut held = exported_types(client, "ines").await;
        held.remove("memory"); // the files' chunks, kept by their own kind's retention
        if held == expected {
            break;
        }
        assert!(
            started.elapsed() < engram_tests::patience(),
            "the sweeper left {held:?}, expected {expected:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Each store's removal is audited with its count.
    let audit = admin_call(
        client,
        reqwest::Method::GET,
        "/v1/audit?action=project.retention_swept",
        None,
    )
    .await;
    let mut removed: std::collections::BTreeMap<String, u64> = Default::default();
    for event in audit.body["events"].as_array().unwrap() {
        assert_eq!(event["actor_type"], "system", "{event}");
        *removed
            .entry(event["details"]["store"].as_str().unwrap().to_string())
            .or_default() += event["details"]["removed"].as_u64().unwrap();
    }
    assert_eq!(
        removed,
        std::collections::BTreeMap::from([
            ("files".to_string(), 1),
            ("messages".to_string(), 4),
            ("recall_events".to_string(), 2),
            ("runs".to_string(), 1),
            ("session_state".to_string(), 1),
        ]),
        "{}",
        audit.body
    );
    let metrics = reqwest::get(&server.metrics_url)
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        "engram_retention_deleted_total{store=\"messages\"} 4",
        "engram_retention_deleted_total{store=\"session_state\"} 1",
        "engram_retention_deleted_total{store=\"files\"} 1",
        "engram_retention_deleted_total{store=\"recall_events\"} 2",
        "engram_retention_deleted_total{store=\"runs\"} 1",
        "engram_retention_deleted_total{store=\"feedback\"} 0",
    ] {
        assert!(
            metrics.contains(line),
            "{line} in {}",
            metrics
                .lines()
                .filter(|l| l.contains("retention"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    // The dry run lists every store with its days, and nothing more is due.
    let preview = admin_call(client, reqwest::Method::GET, "/v1/retention/preview", None).await;
    let stores = preview.body["stores"].as_array().unwrap();
    assert_eq!(stores.len(), 6, "{}", preview.body);
    for store in stores {
        assert_eq!(store["would_delete"], 0, "{}", preview.body);
    }
}

/// A legal hold stops retention too: the sweeper deleted a held subject's messages,
/// feedback and session state by age, although the hold exists to keep them. Two end-users
/// write to every store swept by age, one of them has a memory under legal hold, everything
/// is aged three days, and the sweeper (every second) removes only the other's records:
/// the held subject keeps each store's records until the hold is lifted, and then loses them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legal_hold_stops_retention_in_every_store_for_the_held_subject() {
    let database = engram_test_postgres::create_database().await;
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::spawn_with(
        directory.path(),
        &[
            ("ENGRAM_DATABASE_URL", database.url.as_str()),
            ("ENGRAM_RETENTION_SWEEP_INTERVAL_SECS", "1"),
        ],
    )
    .await
    .unwrap();
    let client = server.client();
    let client = &client;
    let settings = admin_call(
        client,
        reqwest::Method::PATCH,
        "/v1/project/settings",
        Some(json!({"store_retention_days": {
            "messages": 1, "session_state": 1, "files": 1, "feedback": 1, "recall_events": 1
        }})),
    )
    .await;
    assert_eq!(settings.status, 200, "{}", settings.body);
    let held_memory = client
        .add_one(json!({"content": "Hana disputes the invoice of March.", "user_id": "hana"}))
        .await;
    let held_id = held_memory["id"].as_str().unwrap().to_string();
    let flags = |hold: bool| {
        let path = format!("/v1/memories/{held_id}/flags");
        async move {
            let flagged = admin_call(
                client,
                reqwest::Method::PUT,
                &path,
                Some(json!({"legal_hold": hold, "reason": "litigation"})),
            )
            .await;
            assert_eq!(flagged.status, 200, "{}", flagged.body);
        }
    };
    flags(true).await;
    // A memory of hana's already past its own expiry: the hold keeps it too.
    let expired = client
        .add_one(json!({"content": "Hana's visit is logged.", "user_id": "hana", "expires_at": "2020-01-01T00:00:00Z"}))
        .await;
    let expired_id = expired["id"].as_str().unwrap().to_string();
    for user in ["hana", "otto"] {
        let said = admin_call(
            client,
            reqwest::Method::POST,
            "/v1/sessions/old-chat/messages",
            Some(json!({"user_id": user, "derive_memories": false,
                "messages": [{"role": "user", "content": format!("{user} asks about an invoice.")}]})),
        )
        .await;
        assert_eq!(said.status, 201, "{}", said.body);
        let state = admin_call(
            client,
            reqwest::Method::PUT,
            "/v1/sessions/old-chat/state/step",
            Some(json!({"user_id": user, "value": {"step": 3}})),
        )
        .await;
        assert!(state.status < 300, "{}", state.body);
        let uploaded = client
            .send(
                client
                    .request(
                        reqwest::Method::POST,
                        &format!("/v1/files?name={user}.txt&user_id={user}"),
                    )
                    .header("content-type", "text/plain")
                    .body(format!("{user} keeps the invoices in a folder.")),
            )
            .await;
        assert_eq!(uploaded.status, 202, "{}", uploaded.body);
        wait_until_ingested(client, &uploaded.body).await;
        let searched = client
            .search(json!({"query": "which invoice", "user_id": user}))
            .await;
        let recall_id = searched.body["recall_id"].as_str().unwrap().to_string();
        let rated = admin_call(
            client,
            reqwest::Method::POST,
            &format!("/v1/recalls/{recall_id}/feedback"),
            Some(json!({"rating": "relevant"})),
        )
        .await;
        assert_eq!(rated.status, 201, "{}", rated.body);
    }
    // Recall events are written off the search's path: wait until both are stored.
    for user in ["hana", "otto"] {
        engram_tests::eventually("both recall events to be stored", || async {
            let held = exported_types(client, user).await;
            if held.get("recall").copied() == Some(1) {
                Ok(())
            } else {
                Err(format!("{user}: {held:?}"))
            }
        })
        .await;
    }
    for table in ["session_messages", "feedback", "recall_events", "files"] {
        engram_test_postgres::execute_on(
            &database.url,
            &format!("UPDATE {table} SET created_at = created_at - interval '3 days'"),
        )
        .await;
    }
    for table in ["session_state", "files"] {
        engram_test_postgres::execute_on(
            &database.url,
            &format!("UPDATE {table} SET updated_at = updated_at - interval '3 days'"),
        )
        .await;
    }
    let stores = ["feedback", "file", "message", "recall", "state"];
    let in_stores = |exported: std::collections::BTreeMap<String, usize>| {
        stores
            .iter()
            .map(|store| {
                (
                    store.to_string(),
                    exported.get(*store).copied().unwrap_or(0),
                )
            })
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let none: std::collections::BTreeMap<String, usize> =
        stores.iter().map(|store| (store.to_string(), 0)).collect();
    let one_each: std::collections::BTreeMap<String, usize> =
        stores.iter().map(|store| (store.to_string(), 1)).collect();
    // The unheld subject's records go…
    engram_tests::eventually("the sweeper to remove otto's old records", || async {
        let otto = in_stores(exported_types(client, "otto").await);
        if otto == none {
            Ok(())
        } else {
            Err(format!("{otto:?}"))
        }
    })
    .await;
    // …and the held subject keeps one record in every store, after the same sweeps.
    assert_eq!(
        in_stores(exported_types(client, "hana").await),
        one_each,
        "a held subject's records stay in every store"
    );
    let preview = admin_call(client, reqwest::Method::GET, "/v1/retention/preview", None).await;
    assert!(
        preview.body["stores"]
            .as_array()
            .unwrap()
            .iter()
            .all(|store| store["would_delete"] == 0),
        "the preview counts no held record as due: {}",
        preview.body
    );
    assert_eq!(
        client.get(&expired_id).await.status,
        200,
        "a held subject's expired memory is kept through the same sweeps"
    );
    // Lifting the hold lets retention run again.
    flags(false).await;
    engram_tests::eventually(
        "the sweeper to remove hana's old records once the hold is lifted",
        || async {
            let hana = in_stores(exported_types(client, "hana").await);
            let expired_gone = client.get(&expired_id).await.status == 404;
            if hana == none && expired_gone {
                Ok(())
            } else {
                Err(format!("{hana:?}, expired memory gone: {expired_gone}"))
            }
        },
    )
    .await;
}

/// What one writer's idempotency answers cost an erasure of someone else: 100,000 stored
/// answers of ben (about 1 KiB each, written straight into the database as a busy writer
/// would leave them) beside ada's one. The erasure finds ada's answer by index, blanks it,
/// and never reads ben's bodies; the server's peak resident memory before and after the
/// erasure is printed (a figure, not a bound).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_erasure_beside_100000_idempotency_answers_reads_none_of_them() {
    use sqlx::Connection;
    const ANSWERS: usize = 100_000;
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    let written = client
        .send(
            client
                .request(reqwest::Method::POST, "/v1/memories")
                .header("Idempotency-Key", "ada-once")
                .json(&json!({"memories": [{"content": "Ada's private note.", "user_id": "ada"}]})),
        )
        .await;
    assert_eq!(written.status, 201, "{}", written.body);

    let database = server.data_dir.join("engram.db");
    let mut writer =
        sqlx::SqliteConnection::connect(&format!("sqlite://{}?mode=rw", database.display()))
            .await
            .unwrap();
    let filler = "x".repeat(900);
    let project = uuid::Uuid::parse_str(&server.bootstrap.project_id).unwrap();
    let now = chrono::Utc::now().to_rfc3339();
    let mut transaction = sqlx::Connection::begin(&mut writer).await.unwrap();
    for n in 0..ANSWERS {
        let memory_id = uuid::Uuid::now_v7();
        let body = format!(
            r#"{{"memories":[{{"id":"{memory_id}","user_id":"ben","content":"Ben's note {n}: {filler}"}}]}}"#
        );
        // UUIDs as the storage layer writes them on SQLite: 16 bytes.
        sqlx::query(
            "INSERT INTO idempotency_records (project_id, idempotency_key, request_fingerprint, response_status, response_body, created_at, indexed) VALUES (?, ?, 'f', 201, ?, ?, 1)",
        )
        .bind(project.as_bytes().to_vec())
        .bind(format!("client:key:filler:{n}"))
        .bind(body)
        .bind(&now)
        .execute(&mut *transaction)
        .await
        .unwrap();
        sqlx::query(
            "INSERT INTO idempotency_answer_memories (project_id, idempotency_key, memory_id, user_id) VALUES (?, ?, ?, 'ben')",
        )
        .bind(project.as_bytes().to_vec())
        .bind(format!("client:key:filler:{n}"))
        .bind(memory_id.as_bytes().to_vec())
        .execute(&mut *transaction)
        .await
        .unwrap();
    }
    transaction.commit().await.unwrap();
    writer.close().await.unwrap();

    let peak_before = engram_tests::peak_resident_bytes_of(server.pid()).unwrap_or(0);
    let (task, seconds) = erase(&client, "ada").await;
    let peak_after = engram_tests::peak_resident_bytes_of(server.pid()).unwrap_or(0);
    assert_eq!(task["status"], "succeeded", "{task}");
    eprintln!(
        "erasure beside {ANSWERS} idempotency answers of another end-user: {seconds:.2} s; server peak RSS {:.1} MiB before, {:.1} MiB after (+{:.1} MiB)",
        peak_before as f64 / 1_048_576.0,
        peak_after as f64 / 1_048_576.0,
        peak_after.saturating_sub(peak_before) as f64 / 1_048_576.0
    );
    let retried = client
        .send(
            client
                .request(reqwest::Method::POST, "/v1/memories")
                .header("Idempotency-Key", "ada-once")
                .json(&json!({"memories": [{"content": "Ada's private note.", "user_id": "ada"}]})),
        )
        .await;
    retried.assert_problem(409, "idempotent-result-erased");
}

/// Erasure reaches every process: its query cache held the erased person's questions in
/// every gateway but the one that erased, and the receipt said 0 remained. Two servers share
/// one PostgreSQL database; the second answers a question twice (the second time from its
/// cache: no tokens billed), the first erases the person, and the second embeds that
/// question afresh (billed again) once it has read the project's raised epoch — its cache
/// no longer answers with the erased text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn erasure_reaches_the_query_cache_of_every_process() {
    let database = engram_test_postgres::create_database().await;
    let secret: String = (0..32)
        .map(|byte| format!("{:02x}", (byte * 7 + 3) as u8))
        .collect();
    let first_directory = tempfile::tempdir().unwrap();
    let first = TestServer::spawn_with(
        first_directory.path(),
        &[
            ("ENGRAM_DATABASE_URL", database.url.as_str()),
            ("ENGRAM_SERVER_SECRET", secret.as_str()),
        ],
    )
    .await
    .unwrap();
    let second_directory = tempfile::tempdir().unwrap();
    let second_process = engram_tests::RoleProcess::spawn(
        "serve",
        &[
            ("ENGRAM_DATABASE_URL".to_string(), database.url.clone()),
            ("ENGRAM_SERVER_SECRET".to_string(), secret.clone()),
            (
                "ENGRAM_DATA_DIR".to_string(),
                second_directory.path().display().to_string(),
            ),
        ],
    )
    .await
    .unwrap();
    let via_first = first.client();
    let via_second = engram_tests::ApiClient::new(
        second_process.base_url.as_deref().unwrap(),
        &first.bootstrap.api_key,
    );
    via_first
        .add_one(json!({"content": "Ines is treated for asthma.", "user_id": "ines"}))
        .await;
    // Tokens billed once `searches` searches and the one memory written are metered (both
    // processes meter into the one database, each on its own flush).
    let tokens_after = |searches: u64| {
        let client = &via_first;
        async move {
            engram_tests::eventually("the searches to be metered", || async {
                let usage = client
                    .send(client.request(reqwest::Method::GET, "/v1/usage"))
                    .await
                    .body;
                if usage["totals"]["searches"].as_u64() == Some(searches)
                    && usage["totals"]["memories_written"].as_u64() == Some(1)
                {
                    Ok(usage["totals"]["tokens_embedded"].as_u64().unwrap_or(0))
                } else {
                    Err(usage.to_string())
                }
            })
            .await
        }
    };
    let question = json!({"query": "which illness is ines treated for", "user_id": "ines"});
    let before = tokens_after(0).await;
    assert_eq!(via_second.search(question.clone()).await.status, 200);
    let embedded = tokens_after(1).await - before;
    assert!(embedded > 0, "the first search embeds the question");
    assert_eq!(via_second.search(question.clone()).await.status, 200);
    assert_eq!(
        tokens_after(2).await - before,
        embedded,
        "the second search is answered from the second process's cache"
    );

    let (task, _) = erase(&via_first, "ines").await;
    assert_eq!(task["status"], "succeeded", "{task}");
    let query_cache = task["result"]["stores"]
        .as_array()
        .unwrap()
        .iter()
        .find(|store| store["store"] == "query_cache")
        .cloned()
        .unwrap();
    assert_eq!(query_cache["remaining"], 0, "{task}");

    // The second process reads the raised epoch within its settings' TTL: from then on the
    // question is embedded afresh, never answered from the erased person's entry.
    let searches = std::sync::atomic::AtomicU64::new(2);
    engram_tests::eventually(
        "the second process to stop answering from its cache",
        || {
            let searched = searches.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            let via_second = &via_second;
            let question = question.clone();
            let tokens_after = &tokens_after;
            async move {
                let billed_before = tokens_after(searched - 1).await;
                assert_eq!(via_second.search(question).await.status, 200);
                let billed = tokens_after(searched).await;
                if billed > billed_before {
                    Ok(())
                } else {
                    Err(format!("search {searched} was answered from the cache"))
                }
            }
        },
    )
    .await;
    assert!(second_process.stop(), "the second server stops cleanly");
}
