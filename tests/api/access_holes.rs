//! The access holes that were found and closed, each as the attack a user tried: a console
//! developer minting an admin key, keys minting wider keys, a token outliving its key,
//! end-users replaying each other's Idempotency-Keys or sharing a session, `memories:write`
//! deleting through an LLM or an expiry, an analyst writing expected contents, and one
//! tenant learning from another's cached query embeddings.

use engram_tests::llm_stand_in::{LlmStandIn, ScriptedReply};
use engram_tests::{ApiClient, ApiResponse, TestServer};
use serde_json::{Value, json};

fn console_http() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// A console member of `role` (admin-created), signed in: their cookie header.
async fn signed_in_member(server: &TestServer, role: &str) -> String {
    signed_in_member_as(server, &format!("{role}@example.com"), role).await
}

/// A console server function called as the browser's fetch calls it (a form body).
async fn console_call(
    server: &TestServer,
    cookie: &str,
    function: &str,
    form: &[(&str, &str)],
) -> (u16, Value) {
    let response = console_http()
        .post(format!("{}/console/api/{function}", server.base_url))
        .header("Cookie", cookie)
        .header("Origin", &server.base_url)
        .form(form)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap_or_default();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

async fn post(client: &ApiClient, path: &str, body: Value) -> ApiResponse {
    client
        .send(client.request(reqwest::Method::POST, path).json(&body))
        .await
}

async fn mint_token(client: &ApiClient, user_id: &str) -> String {
    let minted = post(client, "/v1/end-user-tokens", json!({"user_id": user_id})).await;
    assert_eq!(minted.status, 201, "{}", minted.body);
    minted.body["token"].as_str().unwrap().to_string()
}

async fn create_key(client: &ApiClient, scopes: &[&str]) -> ApiResponse {
    post(
        client,
        "/v1/keys",
        json!({"label": format!("{scopes:?}"), "scopes": scopes}),
    )
    .await
}

/// A console developer mints and rolls only `memories:write` keys, and the key it gets can
/// neither read content nor reach the audit log; owners still mint anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_console_developer_cannot_mint_or_roll_a_key_wider_than_its_role() {
    let server = TestServer::spawn().await.unwrap();
    let owner_api = server.client();
    owner_api
        .add_one(json!({"content": "The patient's blood type is AB negative.", "user_id": "p-7"}))
        .await;
    let project = server.bootstrap.project_id.clone();
    let developer = signed_in_member(&server, "developer").await;

    for (scope, permission) in [
        ("read", "memories:read"),
        ("delete", "memories:delete"),
        ("admin", "admin"),
    ] {
        let (status, body) = console_call(
            &server,
            &developer,
            "create_key",
            &[
                ("project_id", &project),
                ("label", "escalate"),
                (scope, "on"),
            ],
        )
        .await;
        assert_eq!(status, 403, "a developer minting {scope}: {body}");
        assert_eq!(
            body["MissingPermission"]["permission"], permission,
            "the refusal names the permission: {body}"
        );
        assert_eq!(body["MissingPermission"]["role"], "developer");
    }
    let (status, minted) = console_call(
        &server,
        &developer,
        "create_key",
        &[
            ("project_id", &project),
            ("label", "ingest"),
            ("write", "on"),
        ],
    )
    .await;
    assert_eq!(status, 200, "{minted}");
    let ingest = server.client_with_key(minted["secret"].as_str().unwrap());
    ingest
        .add_one(json!({"content": "Likes tea.", "user_id": "p-8"}))
        .await;
    ingest
        .search(json!({"query": "blood type"}))
        .await
        .assert_problem(403, "forbidden");
    ingest
        .send(ingest.request(reqwest::Method::GET, "/v1/audit"))
        .await
        .assert_problem(403, "forbidden");

    // The bootstrap key holds every scope: rolling it would hand the developer all of them.
    let listed = owner_api
        .send(owner_api.request(reqwest::Method::GET, "/v1/keys"))
        .await;
    let bootstrap_key_id = listed.body["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|key| key["label"] == "default")
        .map(|key| key["id"].as_str().unwrap().to_string())
        .unwrap();
    let (status, body) = console_call(
        &server,
        &developer,
        "roll_key",
        &[("project_id", &project), ("key_id", &bootstrap_key_id)],
    )
    .await;
    assert_eq!(status, 403, "{body}");
    let (status, body) = console_call(
        &server,
        &developer,
        "revoke_key",
        &[("project_id", &project), ("key_id", &bootstrap_key_id)],
    )
    .await;
    assert_eq!(
        status, 403,
        "a developer cannot switch off the owner's key: {body}"
    );
    assert_eq!(
        owner_api.list("").await.status,
        200,
        "the refused roll and revoke left the key working"
    );
    let (status, rolled) = console_call(
        &server,
        &developer,
        "roll_key",
        &[
            ("project_id", &project),
            ("key_id", minted["key"]["id"].as_str().unwrap()),
        ],
    )
    .await;
    assert_eq!(
        status, 200,
        "a developer rolls its own kind of key: {rolled}"
    );
}

/// Through the API a key mints and rolls only keys within its own scopes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_never_mints_or_rolls_a_key_wider_than_itself() {
    let server = TestServer::spawn().await.unwrap();
    let owner = server.client();
    let admin_only = create_key(&owner, &["admin"]).await;
    assert_eq!(admin_only.status, 201, "{}", admin_only.body);
    let admin_only = server.client_with_key(admin_only.body["secret"].as_str().unwrap());
    let wider = create_key(&admin_only, &["admin", "memories:read"]).await;
    wider.assert_problem(403, "forbidden");
    assert_eq!(
        wider.body["code"], "scope-not-grantable",
        "the refusal names its rule: {}",
        wider.body
    );
    assert!(
        wider.body["detail"]
            .as_str()
            .unwrap()
            .contains("it holds: admin"),
        "the refusal says what the minting key holds: {}",
        wider.body
    );
    assert!(
        wider.body["detail"]
            .as_str()
            .unwrap()
            .contains("`memories:read`"),
        "{}",
        wider.body
    );
    assert_eq!(create_key(&admin_only, &["admin"]).await.status, 201);

    // Nor one that outlives it: a key that expires mints keys that expire with it.
    let expiry = chrono::Utc::now() + chrono::Duration::hours(1);
    let expiring = post(
        &owner,
        "/v1/keys",
        json!({"label": "expiring", "scopes": ["admin"], "expires_at": expiry.to_rfc3339()}),
    )
    .await;
    assert_eq!(expiring.status, 201, "{}", expiring.body);
    let expiring = server.client_with_key(expiring.body["secret"].as_str().unwrap());
    let minted = create_key(&expiring, &["admin"]).await;
    assert_eq!(minted.status, 201, "{}", minted.body);
    let minted_expiry: chrono::DateTime<chrono::Utc> = minted.body["key"]["expires_at"]
        .as_str()
        .unwrap_or_else(|| panic!("the minted key expires: {}", minted.body))
        .parse()
        .unwrap();
    assert!(
        (minted_expiry - expiry).num_seconds().abs() <= 1,
        "expires with its maker: {minted_expiry} vs {expiry}"
    );

    let reader = create_key(&owner, &["memories:read"]).await;
    let reader_id = reader.body["key"]["id"].as_str().unwrap().to_string();
    post(
        &admin_only,
        &format!("/v1/keys/{reader_id}/roll"),
        json!({}),
    )
    .await
    .assert_problem(403, "forbidden");
    let rolled = post(&owner, &format!("/v1/keys/{reader_id}/roll"), json!({})).await;
    assert_eq!(rolled.status, 201, "{}", rolled.body);
}

/// A token minted by a key stops working when that key is revoked, expires, or is rolled
/// past its overlap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_end_user_token_dies_with_the_key_that_minted_it() {
    let server = TestServer::spawn().await.unwrap();
    let owner = server.client();
    let mut minters = Vec::new();
    for _ in 0..2 {
        let key = create_key(&owner, &["memories:read", "memories:write"]).await;
        assert_eq!(key.status, 201, "{}", key.body);
        minters.push((
            key.body["key"]["id"].as_str().unwrap().to_string(),
            server.client_with_key(key.body["secret"].as_str().unwrap()),
        ));
    }
    let revoked_token = server.client_with_key(&mint_token(&minters[0].1, "u-a").await);
    let rolled_token = server.client_with_key(&mint_token(&minters[1].1, "u-b").await);
    assert_eq!(revoked_token.list("").await.status, 200);
    assert_eq!(rolled_token.list("").await.status, 200);

    let revoked = post(
        &owner,
        &format!("/v1/keys/{}/revoke", minters[0].0),
        json!({}),
    )
    .await;
    assert_eq!(revoked.status, 200, "{}", revoked.body);
    revoked_token
        .list("")
        .await
        .assert_problem(401, "unauthorized");

    let rolled = post(
        &owner,
        &format!("/v1/keys/{}/roll", minters[1].0),
        json!({"overlap_seconds": 0}),
    )
    .await;
    assert_eq!(rolled.status, 201, "{}", rolled.body);
    rolled_token
        .list("")
        .await
        .assert_problem(401, "unauthorized");
    // The rolled key's successor mints tokens that work.
    let successor = server.client_with_key(rolled.body["secret"].as_str().unwrap());
    let fresh = server.client_with_key(&mint_token(&successor, "u-b").await);
    assert_eq!(fresh.list("").await.status, 200);
}

async fn add_with_idempotency_key(client: &ApiClient, key: &str, body: &Value) -> ApiResponse {
    client
        .send(
            client
                .request(reqwest::Method::POST, "/v1/memories")
                .header("Idempotency-Key", key)
                .json(body),
        )
        .await
}

/// End-user `u-b` replaying `u-a`'s Idempotency-Key and body gets a write of its own, never
/// `u-a`'s answer; a project key's retry after a roll still replays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_keys_belong_to_their_credential_and_end_user() {
    let server = TestServer::spawn().await.unwrap();
    let owner = server.client();
    let alice = server.client_with_key(&mint_token(&owner, "u-a").await);
    let bob = server.client_with_key(&mint_token(&owner, "u-b").await);
    let body = json!({"memories": [{"content": "My door code is 4711."}]});
    let first = add_with_idempotency_key(&alice, "retry-1", &body).await;
    assert_eq!(first.status, 201, "{}", first.body);
    assert_eq!(first.body["memories"][0]["user_id"], "u-a");
    let replayed = add_with_idempotency_key(&alice, "retry-1", &body).await;
    assert_eq!(
        replayed.body["memories"][0]["id"], first.body["memories"][0]["id"],
        "the same end-user's retry replays"
    );
    let bobs = add_with_idempotency_key(&bob, "retry-1", &body).await;
    assert_eq!(bobs.status, 201, "{}", bobs.body);
    assert_eq!(bobs.body["memories"][0]["user_id"], "u-b");
    assert_ne!(
        bobs.body["memories"][0]["id"], first.body["memories"][0]["id"],
        "another end-user never gets u-a's answer"
    );

    // A project key: another key of the project does not replay its answer; its successor
    // after a roll does.
    let writer = create_key(&owner, &["memories:read", "memories:write"]).await;
    let writer_id = writer.body["key"]["id"].as_str().unwrap().to_string();
    let writer_client = server.client_with_key(writer.body["secret"].as_str().unwrap());
    let keyed = json!({"memories": [{"content": "Ships on Fridays.", "user_id": "ops"}]});
    let original = add_with_idempotency_key(&writer_client, "deploy-7", &keyed).await;
    assert_eq!(original.status, 201, "{}", original.body);
    let by_owner = add_with_idempotency_key(&owner, "deploy-7", &keyed).await;
    assert_ne!(
        by_owner.body["memories"][0]["id"],
        original.body["memories"][0]["id"]
    );
    let rolled = post(&owner, &format!("/v1/keys/{writer_id}/roll"), json!({})).await;
    let successor = server.client_with_key(rolled.body["secret"].as_str().unwrap());
    let retried = add_with_idempotency_key(&successor, "deploy-7", &keyed).await;
    assert_eq!(
        retried.body["memories"][0]["id"], original.body["memories"][0]["id"],
        "a retry after a roll replays: {}",
        retried.body
    );
}

/// Two end-users of one session id: the LLM deriving `u-b`'s memories is shown none of
/// `u-a`'s messages, and each reads only their own history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_users_sharing_a_session_id_never_see_each_others_conversation() {
    let stand_in = LlmStandIn::start(|_| ScriptedReply::Json {
        content: json!({"memories": []}),
        prompt_tokens: 10,
        completion_tokens: 2,
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
    let owner = server.client();
    let alice = server.client_with_key(&mint_token(&owner, "u-a").await);
    let bob = server.client_with_key(&mint_token(&owner, "u-b").await);
    let said = post(
        &alice,
        "/v1/sessions/shared-1/messages",
        json!({"messages": [{"role": "user", "content": "My account number is 99-1234."}]}),
    )
    .await;
    assert_eq!(said.status, 201, "{}", said.body);
    let replied = post(
        &bob,
        "/v1/sessions/shared-1/messages",
        json!({"messages": [{"role": "user", "content": "What did the last person say?"}]}),
    )
    .await;
    assert_eq!(replied.status, 201, "{}", replied.body);
    assert_eq!(
        replied.body["derivation"]["status"], "succeeded",
        "{}",
        replied.body
    );
    let prompts: Vec<String> = stand_in
        .requests()
        .iter()
        .filter(|request| {
            request
                .user_prompt
                .contains("What did the last person say?")
        })
        .map(|request| request.user_prompt.clone())
        .collect();
    assert!(!prompts.is_empty(), "bob's batch was derived with the LLM");
    for prompt in &prompts {
        assert!(
            !prompt.contains("99-1234"),
            "u-a's words reached the model deriving u-b's memories: {prompt}"
        );
    }
    let bobs_history = bob
        .send(bob.request(reqwest::Method::GET, "/v1/sessions/shared-1/messages"))
        .await;
    assert!(
        !bobs_history.body.to_string().contains("99-1234"),
        "{}",
        bobs_history.body
    );
    owner
        .send(owner.request(
            reqwest::Method::GET,
            "/v1/sessions/shared-1/messages?user_id=u-a",
        ))
        .await
        .body["messages"][0]["content"]
        .as_str()
        .map(|content| assert_eq!(content, "My account number is 99-1234."))
        .unwrap();
    bob.send(bob.request(
        reqwest::Method::GET,
        "/v1/sessions/shared-1/messages?user_id=u-a",
    ))
    .await
    .assert_problem(403, "forbidden");
}

/// A key that may write but not delete: an LLM's DELETE becomes a proposal in the memory's
/// history and the memory stays; a past `expires_at` is refused naming the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memories_write_never_deletes_through_an_llm_or_an_expiry() {
    let stand_in = LlmStandIn::start(|_| ScriptedReply::Json {
        content: json!({"action": "DELETE", "reason": "the user asked to forget it"}),
        prompt_tokens: 30,
        completion_tokens: 5,
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
    let owner = server.client();
    let writer = create_key(&owner, &["memories:read", "memories:write"]).await;
    let writer = server.client_with_key(writer.body["secret"].as_str().unwrap());
    let memory = writer
        .add_one(json!({"content": "The user lives in Berlin.", "user_id": "dee"}))
        .await;
    let memory_id = memory["id"].as_str().unwrap().to_string();

    let corrected = post(
        &writer,
        &format!("/v1/memories/{memory_id}/feedback"),
        json!({"rating": "wrong", "text": "Forget where I live."}),
    )
    .await;
    assert_eq!(corrected.status, 201, "{}", corrected.body);
    assert_ne!(
        corrected.body["correction"]["action"], "DELETE",
        "{}",
        corrected.body
    );
    assert_eq!(writer.get(&memory_id).await.status, 200, "the memory stays");
    let history = writer.history(&memory_id).await.body;
    let proposal = history["history"]
        .as_array()
        .unwrap()
        .iter()
        .find(|entry| entry["event"] == "delete_proposed")
        .unwrap_or_else(|| panic!("no proposal in the history: {history}"));
    assert!(
        proposal["reason"]
            .as_str()
            .unwrap()
            .contains("the user asked to forget it"),
        "{proposal}"
    );

    // The owner's key holds memories:delete: the same correction deletes.
    let applied = post(
        &owner,
        &format!("/v1/memories/{memory_id}/feedback"),
        json!({"rating": "wrong", "text": "Forget where I live."}),
    )
    .await;
    assert_eq!(
        applied.body["correction"]["action"], "DELETE",
        "{}",
        applied.body
    );
    assert_eq!(owner.get(&memory_id).await.status, 404);

    let past = writer
        .add(json!([
            {"content": "Fine.", "user_id": "dee"},
            {"content": "Expired already.", "user_id": "dee", "expires_at": "2020-01-01T00:00:00Z"}
        ]))
        .await;
    past.assert_problem(422, "validation-failed");
    assert_eq!(past.error_fields(), ["memories[1].expires_at"]);
    assert!(
        writer.list("?user_id=dee").await.body["memories"]
            .as_array()
            .unwrap()
            .is_empty(),
        "nothing of the refused batch was stored"
    );
    let kept = writer
        .add_one(json!({"content": "Parking until noon.", "user_id": "dee"}))
        .await;
    writer
        .patch(
            kept["id"].as_str().unwrap(),
            None,
            json!({"expires_at": "2020-01-01T00:00:00Z"}),
        )
        .await
        .assert_problem(422, "validation-failed");
    // A future expiry on a stored memory schedules its deletion all the same.
    writer
        .patch(
            kept["id"].as_str().unwrap(),
            None,
            json!({"expires_at": (chrono::Utc::now() + chrono::Duration::seconds(2)).to_rfc3339()}),
        )
        .await
        .assert_problem(422, "validation-failed");
    assert_eq!(
        writer.get(kept["id"].as_str().unwrap()).await.body["expires_at"],
        Value::Null
    );
    let with_delete = owner
        .add(json!([{"content": "Expired already.", "user_id": "dee", "expires_at": "2020-01-01T00:00:00Z"}]))
        .await;
    assert_eq!(with_delete.status, 201, "{}", with_delete.body);
}

/// Expected contents are content: an analyst cannot write them in the console, an admin key
/// without `memories:read` cannot write or read cases; a content role's view of a recall
/// event is audited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expected_contents_and_recalled_content_stay_with_content_roles() {
    let server = TestServer::spawn().await.unwrap();
    let owner = server.client();
    owner
        .add_one(json!({"content": "Ines speaks Portuguese.", "user_id": "ines"}))
        .await;
    let project = server.bootstrap.project_id.clone();
    let analyst = signed_in_member(&server, "analyst").await;
    let (status, body) = console_call(
        &server,
        &analyst,
        "create_evaluation_set",
        &[
            ("project_id", &project),
            ("name", "probe"),
            ("k", "10"),
            ("schedule_hours", ""),
            (
                "cases_jsonl",
                r#"{"query": "language", "expected_contents": ["speaks Portuguese"]}"#,
            ),
        ],
    )
    .await;
    assert_eq!(status, 403, "{body}");

    let admin_only = create_key(&owner, &["admin"]).await;
    let admin_only = server.client_with_key(admin_only.body["secret"].as_str().unwrap());
    post(
        &admin_only,
        "/v1/eval-sets",
        json!({"name": "probe", "cases": [{"query": "language", "expected_contents": ["Portuguese"]}]}),
    )
    .await
    .assert_problem(403, "forbidden");
    let set = post(
        &owner,
        "/v1/eval-sets",
        json!({"name": "owned", "cases": [{"query": "language", "expected_contents": ["Portuguese"]}]}),
    )
    .await;
    assert_eq!(set.status, 201, "{}", set.body);
    let set_id = set.body["id"].as_str().unwrap();
    admin_only
        .send(admin_only.request(
            reqwest::Method::GET,
            &format!("/v1/eval-sets/{set_id}/cases"),
        ))
        .await
        .assert_problem(403, "forbidden");

    // The owner opens a recall event in the console: an audit event names it first.
    let found = owner
        .search(json!({"query": "which language", "user_id": "ines"}))
        .await;
    let recall_id = found.body["recall_id"].as_str().unwrap().to_string();
    let (_, owner_cookie) = server.console_owner_session().await;
    let (status, event) = console_call(
        &server,
        &owner_cookie,
        "recall_event",
        &[("project_id", &project), ("recall_id", &recall_id)],
    )
    .await;
    assert_eq!(status, 200, "{event}");
    let audit = owner
        .send(owner.request(
            reqwest::Method::GET,
            &format!("/v1/audit?action=memory.content_viewed&target_id={recall_id}"),
        ))
        .await;
    assert_eq!(
        audit.body["events"].as_array().map(Vec::len),
        Some(1),
        "{}",
        audit.body
    );
    assert_eq!(audit.body["events"][0]["details"]["page"], "recall-event");
}

/// The query-embedding cache is per project: a query another project searched first is
/// still embedded (and billed) for this one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_project_learns_nothing_from_anothers_cached_queries() {
    let server = TestServer::spawn().await.unwrap();
    let first = server.client();
    let (_, second_key) = server.create_project("second").unwrap();
    let second = server.client_with_key(&second_key);
    let query =
        json!({"query": "what is the secret launch date of project aurora", "explain": true});
    assert_eq!(first.search(query.clone()).await.status, 200);
    assert_eq!(first.search(query.clone()).await.status, 200);
    assert_eq!(second.search(query.clone()).await.status, 200);
    let tokens = |client: ApiClient| async move {
        engram_tests::eventually("the searches to be metered", || async {
            let usage = client
                .send(client.request(reqwest::Method::GET, "/v1/usage"))
                .await
                .body;
            if usage["totals"]["searches"].as_u64().unwrap_or(0) >= 1 {
                Ok(usage["totals"]["tokens_embedded"].as_u64().unwrap_or(0))
            } else {
                Err(usage.to_string())
            }
        })
        .await
    };
    let first_tokens = engram_tests::eventually("both searches of the first project", || async {
        let usage = first
            .send(first.request(reqwest::Method::GET, "/v1/usage"))
            .await
            .body;
        if usage["totals"]["searches"] == 2 {
            Ok(usage["totals"]["tokens_embedded"].as_u64().unwrap_or(0))
        } else {
            Err(usage.to_string())
        }
    })
    .await;
    let second_tokens = tokens(second).await;
    assert!(first_tokens > 0);
    assert_eq!(
        second_tokens, first_tokens,
        "the second project's search is embedded and billed as the first project's first one was"
    );
}

/// A member created by the operator with this e-mail and role, signed in: their cookie.
async fn signed_in_member_as(server: &TestServer, email: &str, role: &str) -> String {
    let created = server.create_member(email, role);
    let response = console_http()
        .post(format!("{}/console/api/login", server.base_url))
        .form(&[
            ("email", created["email"].as_str().unwrap()),
            ("password", created["password"].as_str().unwrap()),
        ])
        .send()
        .await
        .unwrap();
    let cookies: Vec<String> = response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .filter_map(|value| value.split(';').next().map(str::to_string))
        .collect();
    assert_eq!(cookies.len(), 3, "login as {email} failed: {cookies:?}");
    cookies.join("; ")
}

/// Keys belong to someone: a console developer took over a production write key someone
/// else made by rolling it. Now each key records its maker, the key list shows it, a
/// developer rolls and revokes only the keys they made, owners (and `admin` keys) any.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_console_developer_rolls_and_revokes_only_the_keys_they_made() {
    let server = TestServer::spawn().await.unwrap();
    let project = server.bootstrap.project_id.clone();
    let owner_api = server.client();
    let ada = signed_in_member_as(&server, "ada@example.com", "developer").await;
    let bob = signed_in_member_as(&server, "bob@example.com", "developer").await;
    let mint = |cookie: String, label: &'static str| {
        let server = &server;
        let project = project.clone();
        async move {
            let (status, minted) = console_call(
                server,
                &cookie,
                "create_key",
                &[("project_id", &project), ("label", label), ("write", "on")],
            )
            .await;
            assert_eq!(status, 200, "{minted}");
            minted
        }
    };
    let adas = mint(ada.clone(), "ada's ingest").await;
    let production = create_key(&owner_api, &["memories:write"]).await;
    assert_eq!(production.status, 201, "{}", production.body);
    let production_id = production.body["key"]["id"].as_str().unwrap().to_string();
    let production_key = server.client_with_key(production.body["secret"].as_str().unwrap());
    let adas_id = adas["key"]["id"].as_str().unwrap().to_string();

    // The key list names each key's maker: the API by actor, the console "you" for one's own.
    let listed = owner_api
        .send(owner_api.request(reqwest::Method::GET, "/v1/keys"))
        .await;
    let maker_of = |id: &str| {
        listed.body["keys"]
            .as_array()
            .unwrap()
            .iter()
            .find(|key| key["id"] == id)
            .map(|key| key["created_by"].clone())
            .unwrap()
    };
    assert!(
        maker_of(&adas_id)
            .as_str()
            .is_some_and(|maker| maker.starts_with("console_account:")),
        "{}",
        listed.body
    );
    assert!(
        maker_of(&production_id)
            .as_str()
            .is_some_and(|maker| maker.starts_with("api_key:")),
        "{}",
        listed.body
    );
    let (status, console_list) =
        console_call(&server, &ada, "keys", &[("project_id", &project)]).await;
    assert_eq!(status, 200, "{console_list}");
    let row = |id: &str| {
        console_list["keys"]
            .as_array()
            .unwrap()
            .iter()
            .find(|key| key["id"] == id)
            .cloned()
            .unwrap()
    };
    assert_eq!(row(&adas_id)["created_by"], "you");
    assert_eq!(row(&adas_id)["manageable"], true);
    assert_eq!(row(&production_id)["manageable"], false);

    // Another developer cannot roll or revoke Ada's key, nor anyone the owner's key.
    for (cookie, key_id, whose) in [
        (&bob, &adas_id, "another developer's"),
        (&ada, &production_id, "the owner's"),
    ] {
        for function in ["roll_key", "revoke_key"] {
            let (status, body) = console_call(
                &server,
                cookie,
                function,
                &[("project_id", &project), ("key_id", key_id)],
            )
            .await;
            assert_eq!(status, 403, "{function} of {whose} key: {body}");
        }
    }
    assert_eq!(
        production_key
            .add(json!([{"content": "Still writing.", "user_id": "u-1"}]))
            .await
            .status,
        201,
        "the refused roll and revoke left the production key working"
    );
    let listed_after = owner_api
        .send(owner_api.request(reqwest::Method::GET, "/v1/keys"))
        .await;
    assert_eq!(
        listed_after.body["keys"].as_array().unwrap().len(),
        listed.body["keys"].as_array().unwrap().len(),
        "no key was rolled: {}",
        listed_after.body
    );

    // Ada rolls her own key; the new key stays hers.
    let (status, rolled) = console_call(
        &server,
        &ada,
        "roll_key",
        &[("project_id", &project), ("key_id", &adas_id)],
    )
    .await;
    assert_eq!(status, 200, "{rolled}");
    let rolled_id = rolled["key"]["id"].as_str().unwrap().to_string();
    let (_, console_list) = console_call(&server, &ada, "keys", &[("project_id", &project)]).await;
    let rolled_row = console_list["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|key| key["id"] == rolled_id.as_str())
        .cloned()
        .unwrap();
    assert_eq!(rolled_row["created_by"], "you", "{console_list}");
    let (status, body) = console_call(
        &server,
        &ada,
        "revoke_key",
        &[("project_id", &project), ("key_id", &rolled_id)],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    // The owner manages any key, Ada's included.
    let revoked = post(
        &owner_api,
        &format!("/v1/keys/{production_id}/revoke"),
        json!({}),
    )
    .await;
    assert_eq!(revoked.status, 200, "{}", revoked.body);
}

/// A write that names the key of a locked memory supersedes it no more: an immutable
/// "consent: opted out" stayed replaceable by `{"key": "consent", "content": "opted in"}`
/// from any write key, because the keyed path skipped the lock the edit path checks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_write_never_replaces_an_immutable_or_held_memory() {
    let server = TestServer::spawn().await.unwrap();
    let admin = server.client();
    let writer = create_key(&admin, &["memories:write"]).await;
    let writer = server.client_with_key(writer.body["secret"].as_str().unwrap());
    for (flag, lock) in [("immutable", "immutable"), ("legal_hold", "legal hold")] {
        let key = format!("consent-{flag}");
        let original = admin
            .add_one(json!({"content": "Consent: opted out of marketing.", "user_id": "u-9", "key": key}))
            .await;
        let original_id = original["id"].as_str().unwrap().to_string();
        let flagged = admin
            .send(
                admin
                    .request(
                        reqwest::Method::PUT,
                        &format!("/v1/memories/{original_id}/flags"),
                    )
                    .json(&json!({flag: true, "reason": "consent record"})),
            )
            .await;
        assert_eq!(flagged.status, 200, "{}", flagged.body);
        let refused = writer
            .add(json!([{"content": "Consent: opted in to marketing.", "user_id": "u-9", "key": key}]))
            .await;
        refused.assert_problem(409, "memory-locked");
        assert!(
            refused.body["detail"]
                .as_str()
                .is_some_and(|detail| detail.contains(lock) && detail.contains(&original_id)),
            "the refusal names the lock and the memory: {}",
            refused.body
        );
        let kept = admin.get(&original_id).await;
        assert_eq!(kept.body["state"], "active", "{}", kept.body);
        assert_eq!(kept.body["content"], "Consent: opted out of marketing.");
        let listed = admin.list("?user_id=u-9").await;
        let contents: Vec<&str> = listed.body["memories"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|memory| memory["key"] == key.as_str())
            .filter_map(|memory| memory["content"].as_str())
            .collect();
        assert_eq!(
            contents,
            ["Consent: opted out of marketing."],
            "nothing was written"
        );
    }
}

/// Content only for those who may read it. An `admin`-only key read every end-user's
/// content (`PUT …/flags {}` returned the memory, the subject export and the recall metrics'
/// query texts), and a `memories:write` key read what it edited and cleared expiries;
/// retention and erasure deleted without `memories:delete`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_without_memories_read_get_content_free_answers() {
    let server = TestServer::spawn().await.unwrap();
    let all = server.client();
    let admin_key = create_key(&all, &["admin"]).await;
    let admin = server.client_with_key(admin_key.body["secret"].as_str().unwrap());
    let writer_key = create_key(&all, &["memories:write"]).await;
    let writer = server.client_with_key(writer_key.body["secret"].as_str().unwrap());
    let expiry = "2099-01-01T00:00:00Z";
    let stored = all
        .add_one(
            json!({"content": "Her diagnosis is private.", "user_id": "u-3",
            "metadata": {"clinic": "north"}, "expires_at": expiry}),
        )
        .await;
    let id = stored["id"].as_str().unwrap().to_string();
    let content_free = |memory: &Value| {
        assert_eq!(memory["content_omitted"], true, "{memory}");
        assert!(memory.get("content").is_none(), "{memory}");
        assert!(memory.get("metadata").is_none(), "{memory}");
        assert!(memory["id"].as_str().is_some(), "{memory}");
    };

    // The writer's own add comes back content-free, ids and state kept.
    let added = writer
        .add(json!([{"content": "Written blind.", "user_id": "u-3"}]))
        .await;
    assert_eq!(added.status, 201, "{}", added.body);
    content_free(&added.body["memories"][0]);
    assert_eq!(added.body["memories"][0]["state"], "active");
    // An edit answers content-free, and an expiry can be neither cleared nor set.
    let edited = writer
        .patch(&id, None, json!({"categories": ["health"]}))
        .await;
    assert_eq!(edited.status, 200, "{}", edited.body);
    content_free(&edited.body);
    for change in [json!(null), json!("2098-01-01T00:00:00Z")] {
        let refused = writer.patch(&id, None, json!({"expires_at": change})).await;
        assert_eq!(refused.status, 422, "{}", refused.body);
        assert_eq!(refused.error_fields(), ["expires_at"], "{}", refused.body);
    }
    let kept = all.get(&id).await;
    assert_eq!(
        kept.body["expires_at"], expiry,
        "the expiry stays: {}",
        kept.body
    );
    assert_eq!(kept.body["content"], "Her diagnosis is private.");

    // Flags answer content-free to an admin-only key.
    let flagged = admin
        .send(
            admin
                .request(reqwest::Method::PUT, &format!("/v1/memories/{id}/flags"))
                .json(&json!({})),
        )
        .await;
    assert_eq!(flagged.status, 200, "{}", flagged.body);
    content_free(&flagged.body);
    // A subject export is content: admin alone is refused, naming the missing scope.
    let export = admin
        .send(admin.request(reqwest::Method::GET, "/v1/subjects/u-3/export"))
        .await;
    export.assert_problem(403, "forbidden");
    assert!(
        export.body["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("memories:read")),
        "{}",
        export.body
    );
    // With both it is served, and audited as a content read.
    let exported = all
        .send(all.request(reqwest::Method::GET, "/v1/subjects/u-3/export"))
        .await;
    assert_eq!(exported.status, 200, "{}", exported.body);
    let audit = all
        .send(all.request(
            reqwest::Method::GET,
            "/v1/audit?action=memory.content_viewed",
        ))
        .await;
    assert!(
        audit.body["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|event| event["details"]["page"] == "subject_export"),
        "{}",
        audit.body
    );

    // Recall metrics: counts of the empty queries, never their words.
    let empty = all
        .search(json!({"query": "a question nobody answers", "user_id": "u-3", "min_score": 1.0}))
        .await;
    assert_eq!(empty.body["results"], json!([]), "{}", empty.body);
    let recall_id = empty.body["recall_id"].as_str().unwrap().to_string();
    let metrics = engram_tests::eventually("the empty search to reach the metrics", || async {
        let metrics = admin
            .send(admin.request(reqwest::Method::GET, "/v1/recall-metrics"))
            .await;
        let listed = metrics.body["empty_queries"]
            .as_array()
            .is_some_and(|queries| {
                queries
                    .iter()
                    .any(|query| query["last_recall_id"] == recall_id.as_str())
            });
        if listed {
            Ok(metrics)
        } else {
            Err(metrics.body.to_string())
        }
    })
    .await;
    assert!(
        !metrics.body.to_string().contains("nobody answers"),
        "{}",
        metrics.body
    );
    assert!(metrics.body["empty_queries"][0]["count"].as_u64() >= Some(1));
    assert!(metrics.body["empty_queries"][0]["query"].is_null());

    // Settings that delete need `memories:delete` too; refused, they change nothing.
    let before = admin
        .send(admin.request(reqwest::Method::GET, "/v1/project/settings"))
        .await;
    for change in [
        json!({"retention_days": {"episodic": 1}}),
        json!({"store_retention_days": {"messages": 1}}),
        json!({"recall_event_retention_days": 1}),
    ] {
        let refused = admin
            .send(
                admin
                    .request(reqwest::Method::PATCH, "/v1/project/settings")
                    .json(&change),
            )
            .await;
        refused.assert_problem(403, "forbidden");
    }
    let after = admin
        .send(admin.request(reqwest::Method::GET, "/v1/project/settings"))
        .await;
    assert_eq!(before.body, after.body);
    admin
        .send(admin.request(reqwest::Method::POST, "/v1/subjects/u-3/erasure"))
        .await
        .assert_problem(403, "forbidden");
    assert_eq!(all.get(&id).await.status, 200, "nothing was erased");
    // Settings that do not delete stay the admin's.
    let allowed = admin
        .send(
            admin
                .request(reqwest::Method::PATCH, "/v1/project/settings")
                .json(&json!({"pii_redaction": "off"})),
        )
        .await;
    assert_eq!(allowed.status, 200, "{}", allowed.body);
}
