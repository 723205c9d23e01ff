//! Strangers' traffic costs bounded work: failed console sign-ins reuse the password
//! workers' memory, and a storm of them is answered at once beyond the address's budget and
//! the bounded password pool, so the server's memory barely moves and the API keeps
//! answering.

use engram_tests::TestServer;
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
    let status_path = server_status_path(&server);
    let sampler = {
        let (peak, storming) = (peak.clone(), storming.clone());
        tokio::spawn(async move {
            while storming.load(Ordering::SeqCst) {
                if let Some(rss) = server_rss(&status_path) {
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

fn server_status_path(server: &TestServer) -> std::path::PathBuf {
    std::path::PathBuf::from(format!("/proc/{}/status", server.pid()))
}

fn server_rss(status_path: &std::path::Path) -> Option<u64> {
    engram_tests::resident_bytes_in(&std::fs::read_to_string(status_path).ok()?)
}
