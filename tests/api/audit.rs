//! The audit log end to end, on PostgreSQL: every change through the API is recorded with
//! who, from where and which request, never with memory content; the project's admin key
//! reads, filters, pages and exports its events and no other project's; verification passes
//! on an untouched chain and names the first broken link after a row is edited or removed.

use engram_tests::{ApiClient, TestServer};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

async fn audit(client: &ApiClient, query: &str) -> Value {
    let response = client
        .send(client.request(reqwest::Method::GET, &format!("/v1/audit{query}")))
        .await;
    assert_eq!(response.status, 200, "{}", response.body);
    response.body
}

async fn verify(client: &ApiClient) -> Value {
    let response = client
        .send(client.request(reqwest::Method::POST, "/v1/audit/verify"))
        .await;
    assert_eq!(response.status, 200, "{}", response.body);
    response.body
}

fn actions(page: &Value) -> Vec<String> {
    page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|event| event["action"].as_str().unwrap().to_string())
        .collect()
}

struct AuditedServer {
    server: TestServer,
    database_url: String,
    _directory: tempfile::TempDir,
}

async fn server_on_postgres() -> AuditedServer {
    let database = engram_test_postgres::create_database().await;
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::spawn_with(
        directory.path(),
        &[("ENGRAM_DATABASE_URL", database.url.as_str())],
    )
    .await
    .unwrap();
    AuditedServer {
        server,
        database_url: database.url,
        _directory: directory,
    }
}

/// Memory writes, an edit, a delete and key management, as one admin would do them.
async fn scripted_changes(api: &ApiClient) -> (String, String) {
    let secret_fact = "Alice's locker code is 4417.";
    let first = api
        .add_one(json!({"content": secret_fact, "user_id": "alice"}))
        .await;
    let memory_id = first["id"].as_str().unwrap().to_string();
    let edited = api
        .patch(
            &memory_id,
            None,
            json!({"content": "Alice's locker code is 9921.", "reason": "changed"}),
        )
        .await;
    assert_eq!(edited.status, 200);
    let doomed = api.add_one(json!({"content": "Temporary note."})).await;
    assert_eq!(api.delete(doomed["id"].as_str().unwrap()).await.status, 204);
    let created = api
        .send(
            api.request(reqwest::Method::POST, "/v1/keys")
                .json(&json!({"label": "ci", "scopes": ["memories:read"]})),
        )
        .await;
    assert_eq!(created.status, 201);
    let key_id = created.body["key"]["id"].as_str().unwrap().to_string();
    let rolled = api
        .send(
            api.request(reqwest::Method::POST, &format!("/v1/keys/{key_id}/roll"))
                .json(&json!({"overlap_seconds": 0})),
        )
        .await;
    assert_eq!(rolled.status, 201);
    let new_key_id = rolled.body["key"]["id"].as_str().unwrap().to_string();
    let revoked = api
        .send(api.request(
            reqwest::Method::POST,
            &format!("/v1/keys/{new_key_id}/revoke"),
        ))
        .await;
    assert_eq!(revoked.status, 200);
    (memory_id, secret_fact.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_change_is_audited_without_content_and_only_for_its_project() {
    let audited = server_on_postgres().await;
    let api = audited.server.client();
    let (memory_id, secret_fact) = scripted_changes(&api).await;

    let page = audit(&api, "").await;
    assert_eq!(
        actions(&page),
        vec![
            "memory.created",
            "memory.updated",
            "memory.created",
            "memory.deleted",
            "api_key.created",
            "api_key.rolled",
            "api_key.revoked"
        ]
    );
    let events = page["events"].as_array().unwrap();
    let own_key_id = audit(&api, "?action=api_key.created").await["events"][0]["actor_id"]
        .as_str()
        .unwrap()
        .to_string();
    for event in events {
        assert_eq!(event["actor_type"], "api_key");
        assert_eq!(event["actor_id"], own_key_id.as_str());
        assert_eq!(event["outcome"], "success");
        assert_eq!(event["ip"], "127.0.0.1");
        assert!(
            event["request_id"]
                .as_str()
                .is_some_and(|id| !id.is_empty())
        );
        assert_eq!(event["user_agent"], "engram-tests");
        assert_eq!(event["hash"].as_str().unwrap().len(), 64);
        assert_eq!(event["details"]["channel"], "http", "{event}");
    }
    // Content never enters the log; its digest does.
    let everything = serde_json::to_string(&page).unwrap();
    assert!(!everything.contains("locker code"), "{everything}");
    assert!(!everything.contains("Temporary note"));
    let digest = hex::encode(Sha256::digest(secret_fact.as_bytes()));
    assert_eq!(events[0]["details"]["content_sha256"][0], digest.as_str());
    assert_eq!(events[0]["target_ids"][0], memory_id.as_str());
    assert_eq!(events[1]["details"]["version"], 2);
    assert_eq!(events[3]["details"]["last_version"], 1);

    // Filters and the cursor.
    assert_eq!(
        actions(&audit(&api, "?action=memory.deleted").await),
        vec!["memory.deleted"]
    );
    assert_eq!(
        actions(&audit(&api, &format!("?target_id={memory_id}")).await),
        vec!["memory.created", "memory.updated"]
    );
    let first_page = audit(&api, "?limit=4").await;
    assert_eq!(first_page["events"].as_array().unwrap().len(), 4);
    let cursor = first_page["next_cursor"].as_str().unwrap();
    let second_page = audit(&api, &format!("?limit=4&cursor={cursor}")).await;
    assert_eq!(actions(&second_page), actions(&page)[4..].to_vec());
    assert!(second_page["next_cursor"].is_null());
    let bad = api
        .send(api.request(
            reqwest::Method::GET,
            "/v1/audit?action=memory.exploded&limit=0",
        ))
        .await;
    bad.assert_problem(422, "validation-failed");
    assert_eq!(bad.error_fields(), vec!["query.action", "query.limit"]);

    // Exports hold the same events.
    let ndjson = api
        .send(api.request(reqwest::Method::GET, "/v1/audit/export"))
        .await;
    assert_eq!(ndjson.status, 200);
    let csv = api
        .http_text(api.request(reqwest::Method::GET, "/v1/audit/export?format=csv"))
        .await;
    assert_eq!(csv.lines().count(), 1 + 7, "{csv}");
    assert!(csv.starts_with("id,sequence,at,actor_type"));
    let ndjson_text = api
        .http_text(api.request(reqwest::Method::GET, "/v1/audit/export?format=ndjson"))
        .await;
    let exported: Vec<Value> = ndjson_text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(exported.len(), 7);
    assert_eq!(exported[6]["action"], "api_key.revoked");

    // The chain verifies.
    let verification = verify(&api).await;
    assert_eq!(verification["verified"], true, "{verification}");
    assert_eq!(verification["project_events_checked"], 7);

    // Another project of the organization sees none of it; a read-only key sees nothing.
    let (_, other_key) = audited.server.create_project("other").unwrap();
    let other = audited.server.client_with_key(&other_key);
    assert_eq!(
        actions(&audit(&other, "").await),
        vec!["project.created".to_string()],
        "another project's log holds only its own creation"
    );
    let other_verification = verify(&other).await;
    assert_eq!(other_verification["verified"], true);
    assert_eq!(other_verification["project_events_checked"], 1);
    let reader_key = api
        .send(
            api.request(reqwest::Method::POST, "/v1/keys")
                .json(&json!({"label": "r", "scopes": ["memories:read"]})),
        )
        .await;
    let reader = audited
        .server
        .client_with_key(reader_key.body["secret"].as_str().unwrap());
    reader
        .send(reader.request(reqwest::Method::GET, "/v1/audit"))
        .await
        .assert_problem(403, "forbidden");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verification_names_the_first_edited_event() {
    let audited = server_on_postgres().await;
    let api = audited.server.client();
    scripted_changes(&api).await;
    let events = audit(&api, "").await["events"].as_array().unwrap().clone();
    let victim = &events[2];
    // Rewrite history: pretend the deleted note was never created.
    engram_test_postgres::execute_on(
        &audited.database_url,
        &format!(
            "UPDATE audit_events SET action = 'memory.updated' WHERE id = {}",
            victim["id"]
        ),
    )
    .await;
    let verification = verify(&api).await;
    assert_eq!(verification["verified"], false, "{verification}");
    assert_eq!(verification["first_broken_link"]["event_id"], victim["id"]);
    assert!(
        verification["first_broken_link"]["reason"]
            .as_str()
            .unwrap()
            .contains("edited"),
        "{verification}"
    );
    assert_eq!(verification["project_events_checked"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verification_detects_removed_events_in_the_middle_and_at_the_end() {
    let audited = server_on_postgres().await;
    let api = audited.server.client();
    scripted_changes(&api).await;
    let events = audit(&api, "").await["events"].as_array().unwrap().clone();

    // The newest event removed: only the chain head still knows it existed.
    engram_test_postgres::execute_on(
        &audited.database_url,
        &format!("DELETE FROM audit_events WHERE id = {}", events[6]["id"]),
    )
    .await;
    let verification = verify(&api).await;
    assert_eq!(verification["verified"], false, "{verification}");
    assert!(
        verification["first_broken_link"]["reason"]
            .as_str()
            .unwrap()
            .contains("newest events were removed"),
        "{verification}"
    );

    // An event removed from the middle: the next one is named.
    engram_test_postgres::execute_on(
        &audited.database_url,
        &format!("DELETE FROM audit_events WHERE id = {}", events[3]["id"]),
    )
    .await;
    let verification = verify(&api).await;
    assert_eq!(
        verification["first_broken_link"]["event_id"],
        events[4]["id"]
    );
    assert!(
        verification["first_broken_link"]["reason"]
            .as_str()
            .unwrap()
            .contains("missing"),
        "{verification}"
    );
}

/// Every cell of a parsed CSV export: none may begin as a formula, and `hostile` must be
/// among them, kept whole behind the `'` that disarms it.
fn assert_no_cell_runs_as_a_formula(text: &str, hostile: &str) {
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let mut found = false;
    for record in reader.records() {
        let record = record.expect("the export is valid CSV");
        for cell in record.iter() {
            assert!(
                !cell.starts_with(['=', '+', '-', '@', '\t', '\r']),
                "the cell {cell:?} would run as a formula: {text}"
            );
            found |= cell == format!("'{hostile}");
        }
    }
    assert!(found, "{hostile:?} is exported, disarmed: {text}");
}

/// Exports are opened in spreadsheets: a formula smuggled into a request's user agent or
/// request id, or into a stranger's failed sign-in, never runs from the audit CSV, neither
/// from the API's export nor from the console's.
#[tokio::test]
async fn audit_csv_exports_never_carry_a_formula() {
    let server = TestServer::spawn().await.unwrap();
    let api = server.client();
    let hostile_agent = "=HYPERLINK(\"http://x\",\"open\")";
    let hostile_request_id = "+SUM(1,2)";
    let added = api
        .send(
            api.request(reqwest::Method::POST, "/v1/memories")
                .header("user-agent", hostile_agent)
                .header("x-request-id", hostile_request_id)
                .json(&json!({ "memories": [{ "content": "Prefers tea", "user_id": "u-1" }] })),
        )
        .await;
    assert_eq!(added.status, 201, "{}", added.body);
    let exported = api
        .http_text(api.request(reqwest::Method::GET, "/v1/audit/export?format=csv"))
        .await;
    assert_no_cell_runs_as_a_formula(&exported, hostile_agent);
    assert_no_cell_runs_as_a_formula(&exported, hostile_request_id);

    let stranger_agent = "@cmd|' /C calc'!A0";
    let failed = reqwest::Client::new()
        .post(format!("{}/console/api/login", server.base_url))
        .header("user-agent", stranger_agent)
        .form(&[
            ("email", server.bootstrap.console_email.as_str()),
            ("password", "not the password"),
        ])
        .send()
        .await
        .unwrap();
    assert!(!failed.status().is_success());
    let (owner, cookie) = server.console_owner_session().await;
    let console_export = owner
        .get(format!(
            "{}/console/audit/export.csv?project={}",
            server.base_url, server.bootstrap.project_id
        ))
        .header("Cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(console_export.status(), 200);
    let console_text = console_export.text().await.unwrap();
    assert_no_cell_runs_as_a_formula(&console_text, stranger_agent);
    assert_no_cell_runs_as_a_formula(&console_text, hostile_agent);
}

/// A full re-hash of the organization's chain is the organization's: a project admin key
/// could force one on every call (`?full=true`), and each verify answer's sequence numbers
/// told it how busy the other projects were. Now a key gets 403 for `full` and no
/// organization sequences; a console owner recomputes from the first event at most once a
/// minute (a second request is 429 with `Retry-After`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_verification_is_the_organizations_and_a_project_learns_no_sequences() {
    let server = TestServer::spawn().await.unwrap();
    let key = server.client();
    key.add_one(json!({"content": "An audited write.", "user_id": "u-1"}))
        .await;
    let (_, other_key) = server.create_project("busy neighbour").unwrap();
    let neighbour = server.client_with_key(&other_key);
    for position in 0..3 {
        neighbour
            .add_one(json!({"content": format!("Neighbour write {position}.")}))
            .await;
    }
    let refused = key
        .send(key.request(reqwest::Method::POST, "/v1/audit/verify?full=true"))
        .await;
    refused.assert_problem(403, "forbidden");
    let verified = verify(&key).await;
    assert_eq!(verified["verified"], true, "{verified}");
    for field in [
        "recomputed_from_sequence",
        "anchored_sequence",
        "keyed_since",
    ] {
        assert!(
            verified[field].is_null(),
            "a project key learns no organization sequence ({field}): {verified}"
        );
    }

    let (http, cookie) = server.console_owner_session().await;
    let audit_page = |full: bool| {
        let http = http.clone();
        let cookie = cookie.clone();
        let url = format!("{}/console/api/audit", server.base_url);
        let origin = server.base_url.clone();
        let project = server.bootstrap.project_id.clone();
        async move {
            let mut form = vec![("project_id", project)];
            if full {
                form.push(("full", "true".to_string()));
            }
            let response = http
                .post(url)
                .header("Cookie", cookie)
                .header("Origin", origin)
                .form(&form)
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            let retry_after = response
                .headers()
                .get("retry-after")
                .and_then(|value| value.to_str().ok())
                .map(str::to_string);
            let body: Value = response.json().await.unwrap_or(Value::Null);
            (status, retry_after, body)
        }
    };
    let (status, _, page) = audit_page(true).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["chain"]["verified"], true, "{page}");
    assert_eq!(page["chain"]["recomputed_from_sequence"], 1, "{page}");
    let (status, retry_after, page) = audit_page(true).await;
    assert_eq!(
        status, 429,
        "a second full verification within a minute: {page}"
    );
    assert!(
        retry_after.is_some_and(|seconds| seconds.parse::<u64>().is_ok_and(|seconds| seconds >= 1)),
        "{page}"
    );
    // The incremental verification stays available meanwhile.
    let (status, _, page) = audit_page(false).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["chain"]["verified"], true, "{page}");
}

/// An admin command anchors its audit events where the server does: `--audit-anchor` names
/// the same file as the server's `ENGRAM_AUDIT_ANCHOR`, so a cluster whose anchor lives on a
/// shared volume keeps one anchored chain, and nothing is anchored in the data dir instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_commands_anchor_where_the_server_does() {
    let anchor_dir = tempfile::tempdir().unwrap();
    let anchor = anchor_dir.path().join("shared-anchor.jsonl");
    let anchor_text = anchor.display().to_string();
    let server = TestServer::spawn_fresh_with(&[("ENGRAM_AUDIT_ANCHOR", &anchor_text)])
        .await
        .unwrap();
    server
        .client()
        .add_one(json!({"content": "An audited write.", "user_id": "u-1"}))
        .await;
    let anchored_lines = || {
        std::fs::read_to_string(&anchor)
            .map(|text| text.lines().count())
            .unwrap_or(0)
    };
    let before = anchored_lines();
    assert!(before > 0, "the server anchors its events in {anchor_text}");

    let created = std::process::Command::new(engram_tests::engram_binary())
        .env_remove("ENGRAM_AUDIT_ANCHOR")
        .args(["admin", "create-project", "--data-dir"])
        .arg(&server.data_dir)
        .args([
            "--audit-anchor",
            &anchor_text,
            "--name",
            "anchored",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    assert!(
        anchored_lines() > before,
        "the admin command's audit event is anchored in the server's file"
    );
    assert!(
        !server.data_dir.join("audit-anchor.jsonl").exists(),
        "nothing is anchored in the data dir's default file"
    );
    let verified = verify(&server.client()).await;
    assert_eq!(verified["verified"], true, "{verified}");
    // The operator's act is in the new project's log, by the operator.
    let project: Value = serde_json::from_slice(&created.stdout).unwrap();
    let project_key = server.client_with_key(project["api_key"].as_str().unwrap());
    let page = audit(&project_key, "").await;
    let creation = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|event| event["action"] == "project.created")
        .unwrap_or_else(|| panic!("the project's log records its creation: {page}"));
    assert_eq!(creation["actor_type"], "system", "{creation}");
    assert_eq!(creation["actor_id"], "admin create-project", "{creation}");
    assert_eq!(
        creation["target_ids"][0], project["project_id"],
        "{creation}"
    );
}
