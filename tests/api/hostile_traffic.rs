//! Strangers' traffic costs bounded work: failed console sign-ins reuse the password
//! workers' memory, and a storm of them is answered at once beyond the address's budget and
//! the bounded password pool, so the server's memory barely moves and the API keeps
//! answering.

use engram_tests::{ApiResponse, TestServer};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

const STORM: usize = 200;
const SEQUENTIAL: usize = 30;
const MIB: u64 = 1024 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storm_of_failed_console_logins_costs_bounded_memory_and_the_api_keeps_answering() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    let added = client
        .add(json!([{"content": "The night shift starts at ten."}]))
        .await;
    assert_eq!(added.status, 201, "{}", added.body);
    let http = reqwest::Client::new();
    let login_url = format!("{}/console/api/login", server.base_url);
    let fail_once = |http: reqwest::Client, login_url: String, n: usize| async move {
        http.post(login_url)
            .form(&[
                ("email", format!("stranger{n}@example.com")),
                ("password", "not a credential".to_string()),
            ])
            .send()
            .await
            .map(|response| response.status().as_u16())
            .unwrap_or(0)
    };
    // Warm: the model, the password pool's first hash and the search path are loaded.
    assert_eq!(fail_once(http.clone(), login_url.clone(), 0).await, 401);
    assert_eq!(
        client.search(json!({"query": "night shift"})).await.status,
        200
    );
    let idle = server
        .resident_bytes()
        .expect("the server's RSS is readable");

    // One after another, each failed login is hashed: the hashes reuse their memory.
    let mut sequential = BTreeMap::new();
    for n in 1..=SEQUENTIAL {
        *sequential
            .entry(fail_once(http.clone(), login_url.clone(), n).await)
            .or_insert(0) += 1;
    }
    let after_sequential = server
        .resident_bytes()
        .expect("the server's RSS is readable");
    let sequential_growth = after_sequential.saturating_sub(idle);
    println!(
        "{SEQUENTIAL} failed console logins one after another answered {sequential:?}; \
         server RSS {} MiB before, {} MiB after (+{:.1} MiB)",
        idle / MIB,
        after_sequential / MIB,
        sequential_growth as f64 / MIB as f64
    );
    assert_eq!(
        sequential.get(&401),
        Some(&SEQUENTIAL),
        "each was checked: {sequential:?}"
    );
    assert!(
        sequential_growth < 50 * MIB,
        "{SEQUENTIAL} password checks grew the server by {} MiB",
        sequential_growth / MIB
    );
    let before = after_sequential;

    // Sample the server's memory through the storm, not after it (freed hashes leave RSS).
    let peak = Arc::new(AtomicU64::new(before));
    let storming = Arc::new(AtomicBool::new(true));
    let pid = server.pid();
    let sampler = {
        let (peak, storming) = (peak.clone(), storming.clone());
        tokio::spawn(async move {
            while storming.load(Ordering::SeqCst) {
                if let Some(rss) = engram_tests::resident_bytes_of(pid) {
                    peak.fetch_max(rss, Ordering::SeqCst);
                }
                tokio::task::yield_now().await;
            }
        })
    };

    let mut logins = tokio::task::JoinSet::new();
    for n in 1..=STORM {
        logins.spawn(fail_once(http.clone(), login_url.clone(), STORM + n));
    }
    let mut searches_answered = Vec::new();
    while !logins.is_empty() && searches_answered.len() < 20 {
        searches_answered.push(client.search(json!({"query": "night shift"})).await.status);
    }
    let mut statuses: BTreeMap<u16, usize> = BTreeMap::new();
    while let Some(status) = logins.join_next().await {
        *statuses.entry(status.unwrap()).or_default() += 1;
    }
    storming.store(false, Ordering::SeqCst);
    sampler.await.unwrap();
    let peak = peak.load(Ordering::SeqCst);
    let growth = peak.saturating_sub(before);
    println!(
        "login storm: {STORM} concurrent failed console logins answered {statuses:?}; \
         server RSS {} MiB before, {} MiB at its peak during the storm (+{:.1} MiB); \
         {} API searches during the storm answered {:?}",
        before / MIB,
        peak / MIB,
        growth as f64 / MIB as f64,
        searches_answered.len(),
        searches_answered
    );
    assert_eq!(
        statuses.values().sum::<usize>(),
        STORM,
        "every login was answered"
    );
    assert!(
        statuses
            .keys()
            .all(|status| [401, 429, 503].contains(status)),
        "failed logins are refused, never an error: {statuses:?}"
    );
    assert!(
        growth < 100 * MIB,
        "the storm grew the server's memory by {} MiB",
        growth / MIB
    );
    assert!(
        searches_answered.iter().all(|status| *status == 200),
        "the API keeps answering during the storm: {searches_answered:?}"
    );
    assert_eq!(
        client.search(json!({"query": "night shift"})).await.status,
        200
    );
}

/// Rate limits are spent by the verified identity: a stranger who knows only a key's public
/// id spends the stranger's own address bucket with every wrong guess and never pushes the
/// key into 429s; a forged key id escapes nothing; `X-Forwarded-For` from an untrusted peer
/// changes nothing; the key's own bucket still bounds the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_are_spent_by_the_verified_identity() {
    let server = TestServer::spawn_fresh_with(&[
        ("ENGRAM_RATE_LIMIT_BURST", "10"),
        ("ENGRAM_RATE_LIMIT_PER_SECOND", "1"),
    ])
    .await
    .unwrap();
    let victim = server.client();
    let public_id = engram_core::access::api_key_public_id(&server.bootstrap.api_key)
        .unwrap()
        .to_string();
    let http = reqwest::Client::new();
    let list_with = |bearer: String, forwarded_for: Option<&'static str>| {
        let mut request = http
            .get(format!("{}/v1/memories", server.base_url))
            .bearer_auth(bearer);
        if let Some(forwarded_for) = forwarded_for {
            request = request.header("x-forwarded-for", forwarded_for);
        }
        async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            (status, response.text().await.unwrap_or_default())
        }
    };
    let mut guesses: BTreeMap<u16, usize> = BTreeMap::new();
    let mut last_refusal = String::new();
    for attempt in 0..40u32 {
        let (status, body) = list_with(format!("egk_live_{public_id}_{attempt:040}"), None).await;
        *guesses.entry(status).or_default() += 1;
        if status == 429 {
            last_refusal = body;
        }
    }
    println!("40 wrong secrets for a real key id: {guesses:?}");
    assert!(
        guesses.get(&429).is_some_and(|throttled| *throttled > 0),
        "the stranger runs out of its own budget: {guesses:?}"
    );
    assert!(last_refusal.contains("client address"), "{last_refusal}");
    assert_eq!(
        victim.list("").await.status,
        200,
        "the key the stranger guessed at keeps its whole budget"
    );
    let (status, _) = list_with(
        "egk_live_AAAAAAAAAAAAAAAAAAAAAA_forged".to_string(),
        Some("198.51.100.9"),
    )
    .await;
    assert_eq!(
        status, 429,
        "a forged key id, even with a made-up X-Forwarded-For, spends the same address bucket"
    );

    // The verified key's own bucket bounds the key itself.
    let mut own = Vec::new();
    while own
        .last()
        .is_none_or(|response: &ApiResponse| response.status != 429)
        && own.len() < 40
    {
        own.push(victim.list("").await);
    }
    let refused = own.last().unwrap();
    refused.assert_problem(429, "rate-limited");
    assert!(
        refused.body["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("API key")),
        "{}",
        refused.body
    );
}

/// Behind a trusted proxy each client has a bucket of its own, named by `X-Forwarded-For`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_trusted_proxy_each_client_has_its_own_bucket() {
    let server = TestServer::spawn_fresh_with(&[
        ("ENGRAM_RATE_LIMIT_BURST", "5"),
        ("ENGRAM_RATE_LIMIT_PER_SECOND", "1"),
        ("ENGRAM_TRUSTED_PROXIES", "127.0.0.1/32, 10.0.0.0/8"),
    ])
    .await
    .unwrap();
    let http = reqwest::Client::new();
    let without_credential = |client: &'static str| {
        http.get(format!("{}/v1/memories", server.base_url))
            .header("x-forwarded-for", format!("{client}, 10.0.0.5"))
            .send()
    };
    let mut first = BTreeMap::<u16, usize>::new();
    for _ in 0..20 {
        let status = without_credential("203.0.113.1")
            .await
            .unwrap()
            .status()
            .as_u16();
        *first.entry(status).or_default() += 1;
    }
    assert!(
        first.get(&429).is_some_and(|throttled| *throttled > 0),
        "{first:?}"
    );
    let second = without_credential("203.0.113.2").await.unwrap();
    assert_eq!(
        second.status().as_u16(),
        401,
        "another client behind the proxy is not throttled by the first"
    );
}

/// A key verified a moment ago is remembered, not read again on every request; a revoke by
/// another replica (written straight into the shared database) applies here within the
/// cache's TTL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_revoked_by_another_replica_stops_working_within_the_cache_ttl() {
    use sqlx::Connection;
    let server = TestServer::spawn().await.unwrap();
    let admin = server.client();
    let created = admin
        .send(
            admin
                .request(reqwest::Method::POST, "/v1/keys")
                .json(&json!({"label": "elsewhere-revoked", "scopes": ["memories:read"]})),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let key = server.client_with_key(created.body["secret"].as_str().unwrap());
    assert_eq!(key.list("").await.status, 200);

    let database = server.data_dir.join("engram.db");
    let mut other_replica =
        sqlx::SqliteConnection::connect(&format!("sqlite://{}?mode=rw", database.display()))
            .await
            .unwrap();
    let revoked = sqlx::query(
        "UPDATE api_keys SET revoked_at = created_at WHERE label = 'elsewhere-revoked'",
    )
    .execute(&mut other_replica)
    .await
    .unwrap();
    assert_eq!(revoked.rows_affected(), 1);
    let revoked_at = std::time::Instant::now();
    let deadline = revoked_at + engram_tests::patience();
    loop {
        let response = key.list("").await;
        if response.status == 401 {
            break;
        }
        assert_eq!(response.status, 200, "{}", response.body);
        assert!(
            std::time::Instant::now() < deadline,
            "the revoked key still works after {:?}",
            revoked_at.elapsed()
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    println!(
        "a key revoked by another replica was refused here {:.1} s later (cache TTL {} s)",
        revoked_at.elapsed().as_secs_f64(),
        engram_engine::api_key_cache::API_KEY_CACHE_TTL.as_secs()
    );
}
