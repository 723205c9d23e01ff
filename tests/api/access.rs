//! API keys end to end: scopes decide what a key may do (403 naming the scope), the secret
//! is shown once, keys expire, are revoked and rolled with an overlap window, record their
//! last use, carry a checksum, and one project's admin key cannot touch another's keys.

use engram_tests::{ApiClient, TestServer};
use serde_json::{Value, json};

async fn create_key(admin: &ApiClient, body: Value) -> (u16, Value) {
    let response = admin
        .send(admin.request(reqwest::Method::POST, "/v1/keys").json(&body))
        .await;
    (response.status, response.body)
}

async fn post(client: &ApiClient, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut request = client.request(reqwest::Method::POST, path);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = client.send(request).await;
    (response.status, response.body)
}

async fn list_keys(admin: &ApiClient) -> Vec<Value> {
    let response = admin
        .send(admin.request(reqwest::Method::GET, "/v1/keys"))
        .await;
    assert_eq!(response.status, 200, "{}", response.body);
    response.body["keys"].as_array().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scopes_decide_what_a_key_may_do() {
    let server = TestServer::spawn().await.unwrap();
    let admin = server.client();
    let stored = admin
        .add_one(json!({"content": "The staging database is called orion."}))
        .await;
    let memory_id = stored["id"].as_str().unwrap().to_string();

    let (status, created) = create_key(
        &admin,
        json!({"label": "dashboard reader", "scopes": ["memories:read"], "environment": "test"}),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let secret = created["secret"].as_str().unwrap().to_string();
    assert!(secret.starts_with("egk_test_"), "{secret}");
    assert!(engram_core::access::looks_like_valid_api_key(&secret));
    assert_eq!(created["key"]["scopes"], json!(["memories:read"]));
    assert_eq!(created["key"]["state"], "active");
    let reader = server.client_with_key(&secret);

    // Reading works.
    assert_eq!(reader.get(&memory_id).await.status, 200);
    assert_eq!(reader.list("").await.status, 200);
    assert_eq!(reader.history(&memory_id).await.status, 200);
    let found = reader
        .search(json!({"query": "staging database name"}))
        .await;
    assert_eq!(found.status, 200, "{}", found.body);

    // Writing, deleting and managing keys do not, and each refusal names the scope.
    let refused_add = reader.add(json!([{"content": "nope"}])).await;
    refused_add.assert_problem(403, "forbidden");
    assert!(
        refused_add.body["detail"]
            .as_str()
            .unwrap()
            .contains("memories:write")
    );
    let refused_edit = reader
        .patch(&memory_id, None, json!({"content": "changed"}))
        .await;
    refused_edit.assert_problem(403, "forbidden");
    let refused_delete = reader.delete(&memory_id).await;
    refused_delete.assert_problem(403, "forbidden");
    assert!(
        refused_delete.body["detail"]
            .as_str()
            .unwrap()
            .contains("memories:delete")
    );
    let refused_keys = reader
        .send(reader.request(reqwest::Method::GET, "/v1/keys"))
        .await;
    refused_keys.assert_problem(403, "forbidden");
    // Nothing changed.
    assert_eq!(
        admin.get(&memory_id).await.body["content"],
        "The staging database is called orion."
    );
    assert_eq!(
        admin.list("").await.body["memories"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // A write-only key adds but cannot read back.
    let (_, writer_key) = create_key(
        &admin,
        json!({"label": "ingest", "scopes": ["memories:write"]}),
    )
    .await;
    let writer = server.client_with_key(writer_key["secret"].as_str().unwrap());
    assert!(
        writer_key["secret"]
            .as_str()
            .unwrap()
            .starts_with("egk_live_")
    );
    let written = writer
        .add(json!([{"content": "Deploys happen on Tuesdays."}]))
        .await;
    assert_eq!(written.status, 201, "{}", written.body);
    writer.list("").await.assert_problem(403, "forbidden");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_are_shown_once_and_keys_record_their_last_use() {
    let server = TestServer::spawn().await.unwrap();
    let admin = server.client();
    let (_, created) = create_key(
        &admin,
        json!({"label": "worker", "scopes": ["memories:read", "memories:write"]}),
    )
    .await;
    let secret = created["secret"].as_str().unwrap().to_string();
    let key_id = created["key"]["id"].as_str().unwrap().to_string();
    assert!(created["key"]["last_used_at"].is_null());

    let listed = list_keys(&admin).await;
    let text = serde_json::to_string(&listed).unwrap();
    assert!(
        !text.contains(&secret[12..]),
        "a list never carries a secret"
    );
    let entry = listed.iter().find(|key| key["id"] == key_id).unwrap();
    assert!(secret.starts_with(entry["prefix"].as_str().unwrap()));
    assert_eq!(entry["label"], "worker");

    let worker = server.client_with_key(&secret);
    assert_eq!(worker.list("").await.status, 200);
    let listed = list_keys(&admin).await;
    let entry = listed.iter().find(|key| key["id"] == key_id).unwrap();
    assert!(!entry["last_used_at"].is_null(), "{entry}");

    // A key with a broken checksum is refused before the database is asked.
    let mut tampered = secret.clone().into_bytes();
    let last = tampered.len() - 1;
    tampered[last] = if tampered[last] == b'a' { b'b' } else { b'a' };
    let tampered = String::from_utf8(tampered).unwrap();
    server
        .client_with_key(&tampered)
        .list("")
        .await
        .assert_problem(401, "unauthorized");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_expire_are_revoked_and_roll_with_an_overlap() {
    let server = TestServer::spawn().await.unwrap();
    let admin = server.client();

    // Expiry: in the past is refused; a short one stops working when it passes.
    let (status, refused) = create_key(
        &admin,
        json!({"label": "old", "scopes": ["memories:read"], "expires_at": "2020-01-01T00:00:00Z"}),
    )
    .await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["errors"][0]["field"], "expires_at");
    let expiry = chrono::Utc::now() + chrono::Duration::seconds(3);
    let (_, short) = create_key(
        &admin,
        json!({"label": "short", "scopes": ["memories:read"], "expires_at": expiry.to_rfc3339()}),
    )
    .await;
    let short_lived = server.client_with_key(short["secret"].as_str().unwrap());
    let before_expiry = short_lived.list("").await;
    // On a machine slow enough to pass the expiry already, only the refusal can be checked.
    if chrono::Utc::now() < expiry {
        assert_eq!(before_expiry.status, 200, "{}", before_expiry.body);
    }
    let after_expiry = engram_tests::eventually("the key to expire", || async {
        let response = short_lived.list("").await;
        if response.status == 401 {
            Ok(response)
        } else {
            Err(response.body.to_string())
        }
    })
    .await;
    assert!(chrono::Utc::now() >= expiry, "refused only once expired");
    after_expiry.assert_problem(401, "unauthorized");

    // Revoke: at once, idempotent.
    let (_, doomed) = create_key(
        &admin,
        json!({"label": "doomed", "scopes": ["memories:read"]}),
    )
    .await;
    let doomed_id = doomed["key"]["id"].as_str().unwrap();
    let doomed_client = server.client_with_key(doomed["secret"].as_str().unwrap());
    assert_eq!(doomed_client.list("").await.status, 200);
    let (status, revoked) = post(&admin, &format!("/v1/keys/{doomed_id}/revoke"), None).await;
    assert_eq!((status, revoked["state"].as_str()), (200, Some("revoked")));
    doomed_client
        .list("")
        .await
        .assert_problem(401, "unauthorized");
    let (status, _) = post(&admin, &format!("/v1/keys/{doomed_id}/revoke"), None).await;
    assert_eq!(status, 200);
    // A revoked key cannot be rolled back to life.
    let (status, _) = post(&admin, &format!("/v1/keys/{doomed_id}/roll"), None).await;
    assert_eq!(status, 404);

    // Roll with an overlap: both work until the window ends; the new key keeps the scopes.
    let (_, rolling) = create_key(
        &admin,
        json!({"label": "service", "scopes": ["memories:read", "memories:write"]}),
    )
    .await;
    let rolling_id = rolling["key"]["id"].as_str().unwrap();
    let (status, rolled) = post(
        &admin,
        &format!("/v1/keys/{rolling_id}/roll"),
        Some(json!({"overlap_seconds": 3600})),
    )
    .await;
    assert_eq!(status, 201, "{rolled}");
    assert_eq!(
        rolled["key"]["scopes"],
        json!(["memories:read", "memories:write"])
    );
    assert_eq!(rolled["key"]["label"], "service");
    assert!(!rolled["previous"]["expires_at"].is_null());
    let old_client = server.client_with_key(rolling["secret"].as_str().unwrap());
    let new_client = server.client_with_key(rolled["secret"].as_str().unwrap());
    assert_eq!(old_client.list("").await.status, 200);
    assert_eq!(new_client.list("").await.status, 200);
    // Rolling again with no overlap retires the key at once.
    let new_id = rolled["key"]["id"].as_str().unwrap();
    let (status, rolled_again) = post(
        &admin,
        &format!("/v1/keys/{new_id}/roll"),
        Some(json!({"overlap_seconds": 0})),
    )
    .await;
    assert_eq!(status, 201);
    assert_eq!(rolled_again["previous"]["state"], "revoked");
    new_client
        .list("")
        .await
        .assert_problem(401, "unauthorized");
    let newest = server.client_with_key(rolled_again["secret"].as_str().unwrap());
    assert_eq!(newest.list("").await.status, 200);

    // Bad input changes nothing.
    let (status, problem) = post(
        &admin,
        &format!("/v1/keys/{rolling_id}/roll"),
        Some(json!({"overlap_seconds": 999_999_999})),
    )
    .await;
    assert_eq!(status, 422, "{problem}");
    let (status, problem) = create_key(
        &admin,
        json!({"label": "", "scopes": ["memories:read", "memories:everything"], "environment": "prod"}),
    )
    .await;
    assert_eq!(status, 422);
    let fields: Vec<&str> = problem["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|error| error["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, vec!["label", "scopes[1]", "environment"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_key_manages_only_its_own_project() {
    let server = TestServer::spawn().await.unwrap();
    let admin_a = server.client();
    let (_, key_b) = server.create_project("beta").unwrap();
    let admin_b = server.client_with_key(&key_b);
    let a_keys = list_keys(&admin_a).await;
    let a_key_id = a_keys[0]["id"].as_str().unwrap();
    let b_keys = list_keys(&admin_b).await;
    assert_eq!(b_keys.len(), 1);
    assert_ne!(b_keys[0]["id"], a_keys[0]["id"]);

    let (status, _) = post(&admin_b, &format!("/v1/keys/{a_key_id}/revoke"), None).await;
    assert_eq!(
        status, 404,
        "another project's key is not found, not forbidden"
    );
    let (status, _) = post(&admin_b, &format!("/v1/keys/{a_key_id}/roll"), None).await;
    assert_eq!(status, 404);
    assert_eq!(
        admin_a.list("").await.status,
        200,
        "project A's key still works"
    );
}
