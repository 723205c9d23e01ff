//! End-user tokens end to end: a project key mints a token confined to one user_id and a
//! subset of its scopes; the token sees and changes only that user's memories; rotation
//! voids it; and every classic JWT attack is refused with 401.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use engram_engine::end_user_tokens::{EndUserTokenKeys, key_id};
use engram_tests::{ApiClient, TestServer};
use serde_json::{Value, json};

async fn mint(client: &ApiClient, body: Value) -> (u16, Value) {
    let response = client
        .send(
            client
                .request(reqwest::Method::POST, "/v1/end-user-tokens")
                .json(&body),
        )
        .await;
    (response.status, response.body)
}

fn memory_ids(list: &Value) -> Vec<String> {
    list["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|memory| memory["id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_is_confined_to_its_user_and_never_exceeds_its_parent() {
    let server = TestServer::spawn().await.unwrap();
    let project = server.client();
    let bobs = project
        .add_one(json!({"content": "Bob's flight lands at 9.", "user_id": "bob"}))
        .await;
    let bobs_id = bobs["id"].as_str().unwrap().to_string();
    project
        .add_one(json!({"content": "Alice prefers window seats.", "user_id": "alice"}))
        .await;

    let (status, minted) = mint(&project, json!({"user_id": "alice", "ttl_seconds": 600})).await;
    assert_eq!(status, 201, "{minted}");
    assert_eq!(minted["scopes"], json!(["memories:read", "memories:write"]));
    assert_eq!(minted["user_id"], "alice");
    let alice = server.client_with_key(minted["token"].as_str().unwrap());

    // Writes are Alice's: an absent user_id becomes hers, another one is refused.
    let written = alice
        .add(json!([{"content": "Alice's passport expires in May."}]))
        .await;
    assert_eq!(written.status, 201, "{}", written.body);
    assert_eq!(written.body["memories"][0]["user_id"], "alice");
    let refused = alice
        .add(json!([{"content": "Pretending to be Bob.", "user_id": "bob"}]))
        .await;
    refused.assert_problem(403, "forbidden");
    assert!(
        refused.body["detail"]
            .as_str()
            .unwrap()
            .contains("memories[0].user_id")
    );

    // Reads see only Alice's memories; Bob's exist for her as little as another project's.
    let listed = alice.list("").await;
    assert_eq!(listed.status, 200);
    assert_eq!(memory_ids(&listed.body).len(), 2);
    alice
        .list("?user_id=bob")
        .await
        .assert_problem(403, "forbidden");
    let found = alice
        .search(json!({"query": "when does the flight land?", "top_k": 10}))
        .await;
    assert_eq!(found.status, 200);
    assert!(
        found.body["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|hit| hit["memory"]["user_id"] == "alice")
    );
    alice.get(&bobs_id).await.assert_problem(404, "not-found");
    alice
        .history(&bobs_id)
        .await
        .assert_problem(404, "not-found");
    alice
        .patch(&bobs_id, None, json!({"content": "hijacked"}))
        .await
        .assert_problem(404, "not-found");
    // No delete scope was granted, and keys and the audit log need admin.
    let alices_own = written.body["memories"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    alice
        .delete(&alices_own)
        .await
        .assert_problem(403, "forbidden");
    alice
        .send(alice.request(reqwest::Method::GET, "/v1/keys"))
        .await
        .assert_problem(403, "forbidden");
    assert_eq!(
        project.get(&bobs_id).await.body["content"],
        "Bob's flight lands at 9."
    );

    // Tokens cannot mint tokens; a token never exceeds the minting key.
    let (status, _) = mint(&alice, json!({"user_id": "alice"})).await;
    assert_eq!(status, 403);
    let (status, refused) = mint(&project, json!({"user_id": "alice", "scopes": ["admin"]})).await;
    assert_eq!(status, 422, "{refused}");
    let reader_key = project
        .send(
            project
                .request(reqwest::Method::POST, "/v1/keys")
                .json(&json!({"label": "r", "scopes": ["memories:read"]})),
        )
        .await;
    let reader = server.client_with_key(reader_key.body["secret"].as_str().unwrap());
    let (status, refused) = mint(
        &reader,
        json!({"user_id": "alice", "scopes": ["memories:write"]}),
    )
    .await;
    assert_eq!(status, 403, "{refused}");
    let (status, reader_token) = mint(&reader, json!({"user_id": "alice"})).await;
    assert_eq!(status, 201);
    assert_eq!(
        reader_token["scopes"],
        json!(["memories:read"]),
        "defaults shrink to the parent"
    );
    let (status, refused) =
        mint(&project, json!({"user_id": "alice", "ttl_seconds": 86_401})).await;
    assert_eq!(
        (status, refused["errors"][0]["field"].as_str()),
        (422, Some("ttl_seconds"))
    );

    // The audit log names the end-user by a keyed digest (the same for each of its events),
    // never by the raw id, which an erasure could not reach there.
    let audit = project
        .send(project.request(reqwest::Method::GET, "/v1/audit?action=memory.created"))
        .await;
    let last = audit.body["events"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["actor_type"].as_str(), Some("end_user"));
    let actor_id = last["actor_id"].as_str().unwrap();
    assert!(
        actor_id.len() == 64 && actor_id.chars().all(|c| c.is_ascii_hexdigit()),
        "{actor_id}"
    );
    assert!(
        audit.body["events"]
            .as_array()
            .unwrap()
            .iter()
            .all(|event| event["actor_id"] != "alice"),
        "{}",
        audit.body
    );

    // Rotating the signing key voids every token at once; a new one works.
    let rotated = project
        .send(project.request(
            reqwest::Method::POST,
            "/v1/end-user-tokens/rotate-signing-key",
        ))
        .await;
    assert_eq!(rotated.status, 200, "{}", rotated.body);
    assert_eq!(rotated.body["generation"], 2);
    alice.list("").await.assert_problem(401, "unauthorized");
    let (_, fresh) = mint(&project, json!({"user_id": "alice"})).await;
    assert_eq!(
        server
            .client_with_key(fresh["token"].as_str().unwrap())
            .list("")
            .await
            .status,
        200
    );
}

fn encode_part(value: &Value) -> String {
    URL_SAFE_NO_PAD.encode(value.to_string())
}

fn hs256(secret: &[u8], signing_input: &str) -> String {
    use hmac::{Hmac, Mac};
    let mut mac = <Hmac<sha2::Sha256> as Mac>::new_from_slice(secret).unwrap();
    mac.update(signing_input.as_bytes());
    URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
}

/// A token with any header and claims, signed with `secret` (HMAC-SHA-256) or unsigned.
fn forge(header: &Value, claims: &Value, secret: Option<&[u8]>) -> String {
    let signing_input = format!("{}.{}", encode_part(header), encode_part(claims));
    match secret {
        Some(secret) => format!("{signing_input}.{}", hs256(secret, &signing_input)),
        None => format!("{signing_input}."),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwt_attacks_are_refused() {
    let server = TestServer::spawn().await.unwrap();
    let project = server.client();
    project
        .add_one(json!({"content": "Alice's secret is safe.", "user_id": "alice"}))
        .await;
    let (_, minted) = mint(&project, json!({"user_id": "alice"})).await;
    let genuine = minted["token"].as_str().unwrap().to_string();
    assert_eq!(server.client_with_key(&genuine).list("").await.status, 200);

    // The test knows the server's secret (its data dir), so it can sign exactly like the
    // server and change one thing at a time.
    let secrets = engram_cli::bootstrap::load_or_create_server_secrets(&server.data_dir).unwrap();
    let project_id: engram_core::ProjectId = server.bootstrap.project_id.parse().unwrap();
    let key = EndUserTokenKeys::new(&secrets.end_user_token_secret).signing_secret(project_id, 1);
    let now = chrono::Utc::now().timestamp();
    // The genuine token names the key that minted it; a forged one must name a live key too.
    let genuine_claims: Value = serde_json::from_slice(
        &URL_SAFE_NO_PAD
            .decode(genuine.split('.').nth(1).unwrap())
            .unwrap(),
    )
    .unwrap();
    let minting_key = genuine_claims["key"].as_str().unwrap().to_string();
    let claims = json!({"iss": "engram", "aud": "engram-api", "sub": "alice", "typ": "end_user",
        "pid": project_id.to_string(), "scp": "memories:read", "key": minting_key,
        "iat": now, "nbf": now, "exp": now + 600});
    let header = json!({"alg": "HS256", "typ": "JWT", "kid": key_id(project_id, 1)});
    let well_formed = forge(&header, &claims, Some(&key));
    assert_eq!(
        server.client_with_key(&well_formed).list("").await.status,
        200,
        "the forging matches the server, so each refusal below is about the one change"
    );

    let with_claims = |changes: Value| {
        let mut changed = claims.clone();
        for (name, value) in changes.as_object().unwrap() {
            if value.is_null() {
                changed.as_object_mut().unwrap().remove(name);
            } else {
                changed[name] = value.clone();
            }
        }
        forge(&header, &changed, Some(&key))
    };
    let with_header = |changes: Value| {
        let mut changed = header.clone();
        for (name, value) in changes.as_object().unwrap() {
            if value.is_null() {
                changed.as_object_mut().unwrap().remove(name);
            } else {
                changed[name] = value.clone();
            }
        }
        forge(&changed, &claims, Some(&key))
    };
    let mut attacks: Vec<(&str, String)> = Vec::new();
    for alg in ["none", "None", "NONE", "nOnE"] {
        let mut unsigned_header = header.clone();
        unsigned_header["alg"] = json!(alg);
        attacks.push(("alg none", forge(&unsigned_header, &claims, None)));
    }
    attacks.push(("HS/RS confusion", with_header(json!({"alg": "RS256"}))));
    attacks.push(("HS512", with_header(json!({"alg": "HS512"}))));
    attacks.push((
        "unknown kid",
        with_header(json!({"kid": key_id(engram_core::ProjectId::generate(), 1)})),
    ));
    attacks.push((
        "old generation kid",
        with_header(json!({"kid": key_id(project_id, 0)})),
    ));
    attacks.push(("no kid", with_header(json!({"kid": null}))));
    attacks.push(("expired", with_claims(json!({"exp": now - 60}))));
    attacks.push(("not yet valid", with_claims(json!({"nbf": now + 600}))));
    attacks.push((
        "wrong audience",
        with_claims(json!({"aud": "engram-console"})),
    ));
    attacks.push(("wrong issuer", with_claims(json!({"iss": "someone-else"}))));
    attacks.push(("wrong type", with_claims(json!({"typ": "console_session"}))));
    attacks.push((
        "other project claim",
        with_claims(json!({"pid": engram_core::ProjectId::generate().to_string()})),
    ));
    attacks.push((
        "admin scope",
        with_claims(json!({"scp": "memories:read admin"})),
    ));
    attacks.push((
        "minted by a key that never existed",
        with_claims(json!({"key": engram_core::ids::ApiKeyId::generate().to_string()})),
    ));
    for missing in ["sub", "exp", "nbf", "iss", "aud", "key"] {
        attacks.push(("missing claim", with_claims(json!({ missing: null }))));
    }
    let parts: Vec<&str> = genuine.split('.').collect();
    let mut payload: Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
    payload["sub"] = json!("bob");
    attacks.push((
        "tampered payload",
        format!("{}.{}.{}", parts[0], encode_part(&payload), parts[2]),
    ));
    let mut signature = parts[2].to_string();
    let flipped = if signature.ends_with('A') { "B" } else { "A" };
    signature.replace_range(signature.len() - 1.., flipped);
    attacks.push((
        "tampered signature",
        format!("{}.{}.{signature}", parts[0], parts[1]),
    ));
    let console_keys = engram_engine::console_credentials::ConsoleSessionKeys::new(
        &secrets.console_signing_secret,
        std::time::Duration::from_secs(600),
    );
    let console_token = console_keys
        .issue(
            engram_core::ids::ConsoleAccountId::generate(),
            uuid::Uuid::now_v7(),
        )
        .unwrap();
    attacks.push(("console session on the API", console_token));

    for (attack, token) in &attacks {
        let response = server.client_with_key(token).list("").await;
        assert_eq!(response.status, 401, "{attack}: {}", response.body);
    }
    eprintln!("jwt attacks refused: {}", attacks.len());

    // The reverse: an end-user token is no console session.
    let console = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(format!("{}/console/memories", server.base_url))
        .header("Cookie", format!("engram_console={genuine}"))
        .send()
        .await
        .unwrap();
    assert_eq!(console.status().as_u16(), 303);
    assert_eq!(
        console.headers()["location"].to_str().unwrap(),
        "/console/login"
    );
}

/// One end-user cannot use up the project's quota: past its own burst it gets 429 with
/// Retry-After, while another end-user of the same project (and the project key) carry on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_end_user_has_a_rate_limit_of_their_own() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::spawn_with(
        directory.path(),
        &[
            ("ENGRAM_END_USER_RATE_LIMIT_BURST", "5"),
            ("ENGRAM_END_USER_RATE_LIMIT_PER_SECOND", "1"),
        ],
    )
    .await
    .unwrap();
    let admin = server.client();
    let (_, alice) = mint(&admin, json!({"user_id": "alice"})).await;
    let (_, bob) = mint(&admin, json!({"user_id": "bob"})).await;
    let alice = server.client_with_key(alice["token"].as_str().unwrap());
    let bob = server.client_with_key(bob["token"].as_str().unwrap());

    let mut alice_statuses = Vec::new();
    for _ in 0..8 {
        alice_statuses.push(alice.list("").await);
    }
    let ok = alice_statuses.iter().filter(|r| r.status == 200).count();
    let limited: Vec<_> = alice_statuses.iter().filter(|r| r.status == 429).collect();
    // Burst 5 and one more per second: at most 6 or 7 pass in this quick loop.
    assert!((5..=7).contains(&ok), "alice passed {ok} of 8");
    assert!(!limited.is_empty(), "alice was never limited");
    limited[0].assert_problem(429, "rate-limited");
    assert!(
        limited[0].body["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("end-user"),
        "{}",
        limited[0].body
    );
    assert!(limited[0].retry_after.is_some(), "Retry-After is set");
    // Bob and the project key are unaffected by alice's burst.
    assert_eq!(bob.list("").await.status, 200);
    assert_eq!(admin.list("").await.status, 200);
    eprintln!(
        "end-user limit: alice {ok} passed, {} limited; bob unaffected",
        limited.len()
    );
}
