//! Service endpoints and bootstrap: health, readiness, the OpenAPI document and docs page,
//! the bootstrap file, and `admin create-project`.

use engram_tests::TestServer;
use serde_json::json;
use std::os::unix::fs::PermissionsExt;

#[tokio::test]
async fn health_readiness_openapi_and_docs_are_served() {
    let server = TestServer::spawn().await.unwrap();
    let http = reqwest::Client::new();
    let health = http
        .get(format!("{}/healthz", server.base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let ready: serde_json::Value = http
        .get(format!("{}/readyz", server.base_url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(ready["status"], "ready");

    let document: serde_json::Value = http
        .get(format!("{}/openapi.json", server.base_url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        document["openapi"].as_str().unwrap().starts_with("3.1"),
        "OpenAPI 3.1: {}",
        document["openapi"]
    );
    let paths = document["paths"].as_object().unwrap();
    for path in [
        "/v1/memories",
        "/v1/memories/search",
        "/v1/memories/{memory_id}",
        "/v1/memories/{memory_id}/history",
    ] {
        assert!(
            paths.contains_key(path),
            "{path} missing from the OpenAPI document"
        );
    }
    for method in ["get", "patch", "delete"] {
        assert!(
            paths["/v1/memories/{memory_id}"].get(method).is_some(),
            "{method} of a memory is documented"
        );
    }
    assert!(
        document["components"]["schemas"]["MemoryView"]["properties"]["valid_from"].is_object()
    );
    assert!(document["components"]["securitySchemes"]["api_key"].is_object());

    let docs = http
        .get(format!("{}/docs", server.base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(docs.status(), 200);
    let html = docs.text().await.unwrap();
    assert!(
        html.contains("/v1/memories/search") && !html.contains("https://cdn"),
        "docs render the operations without external assets"
    );
}

#[tokio::test]
async fn first_start_writes_a_private_bootstrap_file_and_projects_can_be_added() {
    let server = TestServer::spawn().await.unwrap();
    let path = server.data_dir.join("bootstrap.json");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "bootstrap.json is readable by its owner only");
    let bootstrap: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for field in [
        "org_id",
        "project_id",
        "api_key",
        "console_email",
        "console_password",
    ] {
        assert!(
            bootstrap[field]
                .as_str()
                .is_some_and(|value| !value.is_empty()),
            "{field} missing"
        );
    }
    assert!(bootstrap["api_key"].as_str().unwrap().starts_with("egk_"));

    let (first_id, first_key) = server.create_project("gamma").unwrap();
    let (second_id, second_key) = server.create_project("delta").unwrap();
    assert_ne!(first_id, second_id);
    assert_ne!(first_key, second_key);
    let created = server
        .client_with_key(&first_key)
        .add_one(serde_json::json!({"content": "gamma's first memory"}))
        .await;
    assert_eq!(created["state"], "active");
    assert_eq!(
        server
            .client_with_key(&second_key)
            .all_listed_ids("")
            .await
            .len(),
        0
    );

    // Without --organization the project joins the bootstrap organization; with it, the
    // organization named by name or id; an unknown one is refused by name.
    let data_dir = server.data_dir.display().to_string();
    let create = |extra: &[&str]| {
        let mut arguments = vec!["admin", "create-project", "--data-dir", &data_dir, "--json"];
        arguments.extend_from_slice(extra);
        engram_tests::run_engram(&arguments, &[])
    };
    let default_home = create(&["--name", "epsilon"]);
    assert!(
        default_home.status.success(),
        "{}",
        String::from_utf8_lossy(&default_home.stderr)
    );
    let default_home: serde_json::Value = serde_json::from_slice(&default_home.stdout).unwrap();
    assert_eq!(default_home["organization_id"], bootstrap["org_id"]);
    let organization = engram_tests::run_engram(
        &[
            "admin",
            "create-organization",
            "--data-dir",
            &data_dir,
            "--name",
            "Beta Labs",
            "--owner-email",
            "owner@beta.example",
            "--projects",
            "1",
        ],
        &[],
    );
    assert!(
        organization.status.success(),
        "{}",
        String::from_utf8_lossy(&organization.stderr)
    );
    let organization: serde_json::Value = serde_json::from_slice(&organization.stdout).unwrap();
    let beta = organization["organization_id"]
        .as_str()
        .unwrap()
        .to_string();
    for named in ["Beta Labs", beta.as_str()] {
        let created = create(&["--name", "zeta", "--organization", named]);
        assert!(
            created.status.success(),
            "{}",
            String::from_utf8_lossy(&created.stderr)
        );
        let created: serde_json::Value = serde_json::from_slice(&created.stdout).unwrap();
        assert_eq!(
            created["organization_id"],
            beta.as_str(),
            "--organization {named}"
        );
    }
    let unknown = create(&["--name", "eta", "--organization", "Nowhere Inc"]);
    assert!(!unknown.status.success());
    let said = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        said.contains("no organization is named \"Nowhere Inc\""),
        "{said}"
    );
}

fn sample(metrics: &str, name: &str, labels: &[&str]) -> Option<f64> {
    engram_tests::metric_sample(metrics, name, labels)
}

/// Prometheus scrapes request counts and latency by route, search latency by phase and the
/// outbox backlog from the admin port, without an API key; ids never become labels.
#[tokio::test]
async fn metrics_are_served_on_the_admin_port() {
    let server = TestServer::spawn().await.unwrap();
    let api = server.client();
    let added = api
        .add_one(json!({"content": "Prefers the window seat on long flights.", "user_id": "u-m"}))
        .await;
    let memory_id = added["id"].as_str().unwrap().to_string();
    assert_eq!(api.get(&memory_id).await.status, 200);
    assert!(!api.search_contents("seat preference").await.is_empty());

    let response = reqwest::get(&server.metrics_url).await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain"),
    );
    let metrics = response.text().await.unwrap();
    let created = sample(
        &metrics,
        "engram_http_requests_total",
        &[
            r#"method="POST""#,
            r#"route="/v1/memories""#,
            r#"status="201""#,
        ],
    );
    assert_eq!(created, Some(1.0), "one add counted:\n{metrics}");
    assert_eq!(
        sample(
            &metrics,
            "engram_http_requests_total",
            &[
                r#"method="GET""#,
                r#"route="/v1/memories/{memory_id}""#,
                r#"status="200""#
            ],
        ),
        Some(1.0),
        "reads are counted by route template"
    );
    assert!(
        !metrics.contains(&memory_id),
        "a memory id leaked into a label"
    );
    assert!(
        sample(
            &metrics,
            "engram_http_request_duration_seconds_bucket",
            &[r#"route="/v1/memories/search""#, r#"le="+Inf""#],
        ) >= Some(1.0)
    );
    assert!(
        sample(
            &metrics,
            "engram_search_duration_seconds_count",
            &[r#"phase="total""#],
        ) >= Some(1.0),
        "search latency recorded:\n{metrics}"
    );
    // On a SQLite file the search reads its candidates on its own thread, not through the
    // pool (tests/BENCHMARKS.md, "The hydrate on the caller's thread").
    assert!(
        sample(
            &metrics,
            "engram_search_candidate_reads_total",
            &[r#"read="caller_thread""#]
        ) >= Some(1.0),
        "the search's candidates were read on the caller's thread:\n{metrics}"
    );
    assert_eq!(
        sample(
            &metrics,
            "engram_search_candidate_reads_total",
            &[r#"read="pool""#]
        ),
        None,
        "no candidate read fell back to the pool:\n{metrics}"
    );
    assert!(
        sample(
            &metrics,
            "engram_search_duration_seconds_count",
            &[r#"phase="embed""#]
        )
        .is_some()
    );
    assert!(
        metrics.contains("engram_outbox_backlog"),
        "outbox backlog exported:\n{metrics}"
    );
    assert!(
        sample(&metrics, "engram_embedded_texts_total", &[]) >= Some(2.0),
        "the add and the search query were embedded:\n{metrics}"
    );
    for lane in [r#"lane="query""#, r#"lane="ingest""#] {
        assert_eq!(
            sample(&metrics, "engram_embedding_queue_depth", &[lane]),
            Some(0.0),
            "nothing waits for the model ({lane}) once the requests are answered:\n{metrics}"
        );
        assert!(
            sample(&metrics, "engram_embedding_batch_size_count", &[lane]) >= Some(1.0),
            "the search query and the add each went through their lane ({lane}):\n{metrics}"
        );
    }
    assert!(
        sample(
            &metrics,
            "engram_embedding_batch_duration_seconds_count",
            &[]
        ) >= Some(2.0)
    );

    // The embedded index reports its size, and when its optimizer has seen every write.
    let index = r#"index="index""#;
    let settled = engram_tests::eventually("the index optimizer to see the write", || async {
        let metrics = reqwest::get(&server.metrics_url)
            .await
            .map_err(|error| error.to_string())?
            .text()
            .await
            .map_err(|error| error.to_string())?;
        let seen = sample(&metrics, "engram_index_optimizer_passes_total", &[index]) >= Some(1.0)
            && sample(&metrics, "engram_index_unoptimized_writes", &[index]) == Some(0.0)
            && sample(&metrics, "engram_index_optimizing", &[index]) == Some(0.0);
        if seen { Ok(metrics) } else { Err(metrics) }
    })
    .await;
    assert_eq!(
        sample(&settled, "engram_index_points", &[index]),
        Some(1.0),
        "the one memory is in the index:\n{settled}"
    );
    assert!(sample(&settled, "engram_index_segments", &[index]) >= Some(1.0));
    assert!(sample(&settled, "engram_index_indexed_vectors", &[index]).is_some());

    // Every series the Grafana dashboard charts is exported by a server that has written,
    // searched and indexed: a renamed metric would otherwise leave an empty panel.
    let dashboard = std::fs::read_to_string(
        engram_tests::workspace_root().join("infra/grafana/engram-dashboard.json"),
    )
    .unwrap();
    let charted: std::collections::BTreeSet<&str> = dashboard
        .match_indices("engram_")
        .map(|(start, _)| {
            let rest = &dashboard[start..];
            let end = rest
                .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
                .unwrap_or(rest.len());
            &rest[..end]
        })
        .collect();
    assert!(charted.len() >= 10, "the dashboard's series: {charted:?}");
    for series in charted {
        assert!(
            settled.lines().any(|line| line
                .strip_prefix(series)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))),
            "the dashboard charts {series}, which /metrics does not export:\n{settled}"
        );
    }
}

/// `engram migrate` brings an empty PostgreSQL database to the current schema and exits;
/// running it again changes nothing.
#[tokio::test]
async fn migrate_brings_a_fresh_database_up_to_date_and_is_repeatable() {
    let url = engram_test_postgres::fresh_database_url().await;
    let mut reports = Vec::new();
    for _ in 0..2 {
        let output = std::process::Command::new(engram_tests::engram_binary())
            .args(["migrate", "--database-url", &url])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            stdout.contains("postgres schema is up to date ("),
            "{stdout}"
        );
        reports.push(stdout.to_string());
    }
    assert_eq!(
        reports[0], reports[1],
        "the second run finds nothing to apply"
    );
    let tables = std::process::Command::new("psql")
        .arg(&url)
        .args(["-Atc", "SELECT count(*) FROM information_schema.tables WHERE table_name IN ('memories', 'index_outbox', 'api_keys')"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&tables.stdout).trim(), "3");
}

/// An API key that exceeds its rate gets 429 problem+json with Retry-After while another
/// key is unaffected; every response carries the security headers; only configured
/// origins pass a CORS preflight.
#[tokio::test]
async fn rate_limits_security_headers_and_cors() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::spawn_with(
        directory.path(),
        &[
            ("ENGRAM_RATE_LIMIT_BURST", "3"),
            ("ENGRAM_RATE_LIMIT_PER_SECOND", "1"),
            ("ENGRAM_CORS_ALLOWED_ORIGINS", "https://app.example.com"),
        ],
    )
    .await
    .unwrap();
    let (_, other_key) = server.create_project("other").unwrap();
    let api = server.client();
    let mut statuses = Vec::new();
    for _ in 0..5 {
        statuses.push(api.list("").await.status);
    }
    assert_eq!(
        &statuses[..3],
        &[200, 200, 200],
        "the burst is allowed: {statuses:?}"
    );
    assert_eq!(statuses[4], 429, "beyond the burst: {statuses:?}");
    let limited = api.list("").await;
    limited.assert_problem(429, "rate-limited");
    assert!(
        limited
            .retry_after
            .as_deref()
            .is_some_and(|seconds| seconds.parse::<u64>().is_ok_and(|seconds| seconds >= 1)),
        "Retry-After in seconds: {:?}",
        limited.retry_after
    );
    assert_eq!(
        server.client_with_key(&other_key).list("").await.status,
        200,
        "another key has its own budget"
    );

    let http = reqwest::Client::new();
    let health = http
        .get(format!("{}/healthz", server.base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(health.headers()["x-content-type-options"], "nosniff");
    assert_eq!(health.headers()["referrer-policy"], "no-referrer");
    assert_eq!(health.headers()["x-frame-options"], "DENY");

    let preflight = |origin: &'static str| {
        http.request(
            reqwest::Method::OPTIONS,
            format!("{}/v1/memories", server.base_url),
        )
        .header("origin", origin)
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization, content-type",
        )
        .send()
    };
    let allowed = preflight("https://app.example.com").await.unwrap();
    assert_eq!(
        allowed.headers()["access-control-allow-origin"],
        "https://app.example.com"
    );
    let refused = preflight("https://evil.example").await.unwrap();
    assert!(
        refused
            .headers()
            .get("access-control-allow-origin")
            .is_none(),
        "an unknown origin gets no CORS grant"
    );
}

/// Two `engram serve` on one machine, neither told where to serve metrics: both start, the
/// second (or both, when something else holds 9464) serves metrics on a free port it prints,
/// and each keeps its own data. An operator's explicit metrics address that is taken is
/// refused with a message naming it.
#[tokio::test]
async fn two_instances_run_side_by_side_and_a_taken_metrics_address_is_named() {
    let first = TestServer::spawn_with_default_metrics_address()
        .await
        .unwrap();
    let second = TestServer::spawn_with_default_metrics_address()
        .await
        .unwrap();
    assert_ne!(first.base_url, second.base_url);
    assert_ne!(
        first.metrics_url, second.metrics_url,
        "each instance serves its own metrics"
    );
    let http = reqwest::Client::new();
    for server in [&first, &second] {
        let metrics = http
            .get(&server.metrics_url)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(
            metrics.contains("engram_"),
            "{} serves Engram's metrics: {metrics}",
            server.metrics_url
        );
    }

    let written = first
        .client()
        .add_one(json!({"content": "Lives next door to the second instance.", "user_id": "u-1"}))
        .await;
    assert_eq!(
        second.client().all_listed_ids("").await,
        Vec::<String>::new(),
        "the second instance holds none of the first one's memories"
    );
    assert_eq!(
        first.client().all_listed_ids("").await,
        vec![written["id"].as_str().unwrap().to_string()]
    );
    assert!(
        first
            .client()
            .search_contents("next door")
            .await
            .iter()
            .any(|content| content.contains("next door"))
    );

    // An address the operator chose that is taken: no silent move, a clear error.
    let taken = first
        .metrics_url
        .trim_start_matches("http://")
        .trim_end_matches("/metrics")
        .to_string();
    let directory = tempfile::tempdir().unwrap();
    let mut third = std::process::Command::new(engram_tests::engram_binary())
        .args(["serve", "--data-dir"])
        .arg(directory.path())
        .args(["--listen", "127.0.0.1:0", "--metrics-listen", &taken])
        .env("ENGRAM_MODEL_DIR", engram_tests::model_dir())
        .env("ENGRAM_LOG", "warn")
        .env_remove("QDRANT_URL")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + engram_tests::patience();
    let status = loop {
        if let Some(status) = third.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = third.kill();
            panic!("a server whose metrics address is taken kept running");
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut third.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(!status.success(), "refused to start");
    assert!(
        stderr.contains(&taken) && stderr.contains("metrics"),
        "the error names the metrics address: {stderr}"
    );
}

/// Runs `engram admin create-project` on `server`'s data dir in the background, with
/// `lock_wait_secs` of patience for the database's write lock.
fn create_project_in_background(
    server: &TestServer,
    name: &str,
    lock_wait_secs: &str,
) -> tokio::task::JoinHandle<std::process::Output> {
    let data_dir = server.data_dir.display().to_string();
    let name = name.to_string();
    let lock_wait_secs = lock_wait_secs.to_string();
    tokio::task::spawn_blocking(move || {
        engram_tests::run_engram(
            &[
                "admin",
                "create-project",
                "--data-dir",
                &data_dir,
                "--name",
                &name,
                "--json",
            ],
            &[("ENGRAM_ADMIN_LOCK_WAIT_SECS".to_string(), lock_wait_secs)],
        )
    })
}

/// An admin command beside a running server whose SQLite write lock another process holds:
/// it waits and succeeds once the lock is released; when the lock outlasts its patience it
/// gives up with a message saying so, and nothing was created.
#[tokio::test]
async fn admin_commands_wait_for_a_locked_database_and_say_when_they_give_up() {
    use sqlx::Connection;
    let server = TestServer::spawn().await.unwrap();
    let database = server.data_dir.join("engram.db");
    let mut neighbour =
        sqlx::SqliteConnection::connect(&format!("sqlite://{}?mode=rw", database.display()))
            .await
            .unwrap();

    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut neighbour)
        .await
        .unwrap();
    let waiting = create_project_in_background(&server, "patient", "600");
    // However long the command takes to reach the lock, it cannot finish while it is held.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    sqlx::query("COMMIT").execute(&mut neighbour).await.unwrap();
    let output = waiting.await.unwrap();
    assert!(
        output.status.success(),
        "create-project waited for the lock: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let created: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let patient = server.client_with_key(created["api_key"].as_str().unwrap());
    assert_eq!(patient.list("").await.status, 200, "the new key works");

    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut neighbour)
        .await
        .unwrap();
    let output = create_project_in_background(&server, "impatient", "1")
        .await
        .unwrap();
    sqlx::query("COMMIT").execute(&mut neighbour).await.unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("stayed locked by another process")
            && stderr.contains("nothing was changed"),
        "the command says why it gave up: {stderr}"
    );
    let projects: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM projects WHERE name = 'impatient'")
            .fetch_one(&mut neighbour)
            .await
            .unwrap();
    assert_eq!(projects, 0, "nothing of the refused command was written");
}
