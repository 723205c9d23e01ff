//! The Mem0 Platform API, as Mem0's own Python client calls it: the official `mem0ai`
//! package from PyPI, in three generations (2.2.1 on `/v3`, 1.0.11 and 0.1.118 on `/v1` and
//! `/v2`, each installed by `make setup-test` into its own venv), runs every one of its
//! methods, sync and async, against `engram serve` at the root and under `/mem0`
//! (`tests/mem0/client_check.py`), and checks each answer against Engram's own API. Beside
//! it, what a client sees on the wire without Python: the two APIs sharing `/v1`, Mem0's
//! error bodies, the two OpenAPI documents, and the root's Mem0 routes refusing `Bearer`.

use engram_tests::{ApiResponse, TestServer, workspace_root};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Command;

/// The venv python `scripts/setup.sh test` installs `mem0ai==<version>` into.
fn venv_python(version: &str) -> PathBuf {
    workspace_root().join(format!(".cache/mem0-{version}-venv/bin/python"))
}

/// A fresh server whose rate limiter is off: the client check sends a few hundred requests
/// back to back, and measures the API, not the limiter.
async fn spawn_server() -> TestServer {
    TestServer::spawn_fresh_with(&[
        ("ENGRAM_RATE_LIMIT_BURST", "0"),
        ("ENGRAM_RATE_LIMIT_PER_SECOND", "0"),
    ])
    .await
    .unwrap()
}

/// Runs `tests/mem0/client_check.py` with the venv of `version` against a fresh server (its
/// bootstrap project A, and a project B for isolation); fails with the script's summary.
async fn run_client_check(version: &str) {
    let python = venv_python(version);
    let server = spawn_server().await;
    let (_, other_key) = server.create_project("other").unwrap();
    // The client writes an anonymous id into MEM0_DIR when imported.
    let mem0_dir = tempfile::Builder::new()
        .prefix("mem0-dir-")
        .tempdir()
        .unwrap();
    let mut command = Command::new(&python);
    command
        .arg(workspace_root().join("tests/mem0/client_check.py"))
        .env("ENGRAM_URL", server.base_url.as_str())
        .env("ENGRAM_KEY", server.bootstrap.api_key.as_str())
        .env("ENGRAM_OTHER_KEY", other_key.as_str())
        .env("ENGRAM_ORG_ID", server.bootstrap.org_id.as_str())
        .env("ENGRAM_PROJECT_ID", server.bootstrap.project_id.as_str())
        // Telemetry to PostHog is on by default and would wait on a host it cannot reach.
        .env("MEM0_TELEMETRY", "false")
        .env("MEM0_DIR", mem0_dir.path())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONUNBUFFERED", "1")
        // Loopback never goes through a proxy the shell may name.
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("no_proxy", "127.0.0.1,localhost")
        .env_remove("MEM0_API_KEY")
        .env_remove("MEM0_CLIENT_STACK");
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .unwrap()
        .unwrap_or_else(|error| panic!("cannot run {}: {error}", python.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}");
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    let summary = stdout
        .lines()
        .rev()
        .find_map(|line| line.strip_prefix("RESULT "))
        .unwrap_or("(no RESULT line: the script stopped early, see its output above)");
    assert!(
        output.status.success(),
        "mem0ai {version} against Engram failed: {summary}"
    );
}

/// A venv `make setup-test` must have made: its absence fails the test, it is not skipped.
fn required_venv(version: &str) {
    let python = venv_python(version);
    assert!(
        python.exists(),
        "{} is missing: run `make setup-test` (scripts/setup.sh test installs mem0ai=={version})",
        python.display()
    );
}

/// A user of the current Mem0 client (2.x, the `/v3` routes) points `host` at Engram and
/// every method works: add stores verbatim, get/get_all/search find it (paginated, with
/// the v3 filter grammar), update/history/batch edits and deletes show in Engram's own API,
/// entities, exports, project settings, feedback; another project's key finds nothing.
#[tokio::test]
async fn mem0ai_2_2_1_runs_every_method_against_engram() {
    required_venv("2.2.1");
    run_client_check("2.2.1").await;
}

/// The same for 1.0.x, which adds on `/v1/memories/` (asking for background processing,
/// which Engram does at once), lists and searches on `/v2`, sends the org and project ids
/// with every call, and crashes client-side after `feedback` (its own bug).
#[tokio::test]
async fn mem0ai_1_0_11_runs_every_method_against_engram() {
    required_venv("1.0.11");
    run_client_check("1.0.11").await;
}

/// The same for 0.1.x, which lists with `GET /v1/memories/` and searches on `/v1` by
/// default (`version="v2"` for the filter forms) and expects bare arrays back. Its venv is
/// optional: where this Python cannot install 0.1.118, setup says so and this is skipped.
#[tokio::test]
async fn mem0ai_0_1_118_runs_every_method_against_engram() {
    if !venv_python("0.1.118").exists() {
        println!(
            "skipped: mem0ai 0.1.118 is not installed ({} is missing; `make setup-test` prints why it could not install it)",
            venv_python("0.1.118").display()
        );
        return;
    }
    run_client_check("0.1.118").await;
}

/// `Authorization: Token <key>` on `url`.
fn with_token(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    key: &str,
) -> reqwest::RequestBuilder {
    http.request(method, url)
        .header("Authorization", format!("Token {key}"))
}

/// A Mem0 error as the client parses it: `application/json` (the client reads a message
/// only from that type; `application/problem+json` reaches the user as raw text) with a
/// `detail`.
fn assert_mem0_error(response: &ApiResponse, statuses: &[u16]) {
    assert!(
        statuses.contains(&response.status),
        "status {} not in {statuses:?}: {}",
        response.status,
        response.body
    );
    assert!(
        response.content_type.starts_with("application/json"),
        "a Mem0 error is application/json, not {:?}: {}",
        response.content_type,
        response.body
    );
    assert!(
        response.body["detail"]
            .as_str()
            .is_some_and(|detail| !detail.is_empty()),
        "a Mem0 error carries a `detail`: {}",
        response.body
    );
}

/// Mem0's `/v1/memories/` and Engram's `/v1/memories` live side by side at the root: a Mem0
/// client listing with `Token` gets Mem0 memory objects, a native client with `Bearer` gets
/// Engram's page, both holding the same memory.
#[tokio::test]
async fn the_mem0_list_and_the_native_list_share_the_root_each_in_its_own_shape() {
    let server = TestServer::spawn().await.unwrap();
    let api = server.client();
    let added = api
        .add_one(json!({"content": "Listed by both APIs.", "user_id": "lists-user"}))
        .await;
    let id = added["id"].as_str().unwrap();
    let http = reqwest::Client::new();

    let mem0 = api
        .send(
            with_token(
                &http,
                reqwest::Method::GET,
                &format!("{}/v1/memories/", server.base_url),
                server.bootstrap.api_key.as_str(),
            )
            .query(&[("user_id", "lists-user")]),
        )
        .await;
    assert_eq!(mem0.status, 200, "{}", mem0.body);
    let items = mem0.body.as_array().unwrap_or_else(|| {
        panic!(
            "the v1 Mem0 list without page/page_size is a bare array: {}",
            mem0.body
        )
    });
    assert_eq!(items.len(), 1, "{}", mem0.body);
    assert_eq!(items[0]["id"], id);
    assert_eq!(items[0]["memory"], "Listed by both APIs.");
    assert_eq!(items[0]["user_id"], "lists-user");

    let native = api.list("?user_id=lists-user").await;
    assert_eq!(native.status, 200, "{}", native.body);
    let memories = native.body["memories"].as_array().unwrap();
    assert_eq!(memories.len(), 1);
    assert_eq!(memories[0]["id"], id);
    assert_eq!(memories[0]["content"], "Listed by both APIs.");
    assert!(native.body.get("next_cursor").is_some(), "{}", native.body);
}

/// A Mem0 client that asks for something wrong reads why: Mem0 routes answer errors as
/// `application/json` with a `detail` (the client shows it as the exception's message),
/// while the native routes keep their problem documents.
#[tokio::test]
async fn mem0_errors_are_json_with_a_detail_and_native_errors_stay_problem_documents() {
    let server = TestServer::spawn().await.unwrap();
    let api = server.client();
    let http = reqwest::Client::new();
    let key = server.bootstrap.api_key.as_str();
    let get = |path: &str, token: &str| {
        with_token(
            &http,
            reqwest::Method::GET,
            &format!("{}{path}", server.base_url),
            token,
        )
    };

    let not_a_uuid = api.send(get("/v1/memories/not-a-uuid/", key)).await;
    assert_mem0_error(&not_a_uuid, &[400, 404]);
    let unknown = api
        .send(get(&format!("/v1/memories/{}/", uuid::Uuid::now_v7()), key))
        .await;
    assert_mem0_error(&unknown, &[404]);
    let unknown_under_prefix = api
        .send(get(
            &format!("/mem0/v1/memories/{}/", uuid::Uuid::now_v7()),
            key,
        ))
        .await;
    assert_mem0_error(&unknown_under_prefix, &[404]);
    // The client's constructor turns this `detail` into `ValueError("Error: <detail>")`.
    let wrong_key = api.send(get("/v1/ping/", "egk_not_a_key")).await;
    assert_mem0_error(&wrong_key, &[401]);

    api.get("not-a-uuid").await.assert_problem(404, "not-found");
}

/// Mem0's routes have their own OpenAPI document under `/mem0`; Engram's published document
/// stays Engram's: none of its paths ends in `/`, the mark of every Mem0 route.
#[tokio::test]
async fn the_mem0_document_is_served_under_mem0_and_the_native_one_has_no_mem0_paths() {
    let server = TestServer::spawn().await.unwrap();
    let mem0: Value = reqwest::get(format!("{}/mem0/openapi.json", server.base_url))
        .await
        .unwrap()
        .json()
        .await
        .expect("/mem0/openapi.json is JSON");
    assert!(
        mem0["openapi"].as_str().is_some(),
        "not an OpenAPI document: {mem0}"
    );
    let mem0_paths = mem0["paths"].as_object().expect("paths");
    assert!(
        mem0_paths.contains_key("/v3/memories/search/"),
        "the Mem0 document lacks /v3/memories/search/: {:?}",
        mem0_paths.keys().collect::<Vec<_>>()
    );

    let native: Value = reqwest::get(format!("{}/openapi.json", server.base_url))
        .await
        .unwrap()
        .json()
        .await
        .expect("/openapi.json is JSON");
    let with_slash: Vec<&String> = native["paths"]
        .as_object()
        .expect("paths")
        .keys()
        .filter(|path| path.ends_with('/'))
        .collect();
    assert!(
        with_slash.is_empty(),
        "Engram's document publishes Mem0 routes: {with_slash:?}"
    );
}

/// At the root, where Mem0's and Engram's paths differ only by a trailing slash, Mem0's
/// routes take only Mem0's `Token` scheme: a native client that adds a slash by mistake to a
/// wildcard delete gets 401 and loses nothing. Under `/mem0`, where nothing is ambiguous,
/// the same request with `Bearer` is served.
#[tokio::test]
async fn a_bearer_key_on_the_roots_mem0_routes_is_refused_and_deletes_nothing() {
    let server = TestServer::spawn().await.unwrap();
    let api = server.client();
    let by_user = api
        .add_one(json!({"content": "Kept through a refused wipe.", "user_id": "bearer-user"}))
        .await;
    let by_agent = api
        .add_one(json!({"content": "Kept too.", "agent_id": "bearer-agent"}))
        .await;
    let wildcards = [
        ("user_id", "*"),
        ("agent_id", "*"),
        ("app_id", "*"),
        ("run_id", "*"),
    ];
    let wipe = |path: &str| api.request(reqwest::Method::DELETE, path).query(&wildcards);

    let refused = api.send(wipe("/v1/memories/")).await;
    assert_mem0_error(&refused, &[401]);
    for memory in [&by_user, &by_agent] {
        let kept = api.get(memory["id"].as_str().unwrap()).await;
        assert_eq!(
            kept.status, 200,
            "deleted by a refused request: {}",
            kept.body
        );
    }

    let served = api.send(wipe("/mem0/v1/memories/")).await;
    assert_eq!(served.status, 200, "{}", served.body);
    for memory in [&by_user, &by_agent] {
        let gone = api.get(memory["id"].as_str().unwrap()).await;
        assert_eq!(gone.status, 404, "the /mem0 wipe left it: {}", gone.body);
    }
}

/// The body or query a route needs to reach its use case (a well-formed request), with
/// `{memory}` standing for a memory of this project.
fn matrix_request(method: &str, path: &str) -> (String, Option<Value>) {
    let query = match (method, path) {
        ("get", "/v1/memories/") | ("delete", "/v1/memories/") => "?user_id=matrix-user",
        _ => "",
    };
    let body = match (method, path) {
        ("post", "/v3/memories/add/") | ("post", "/v1/memories/") => Some(json!({
            "messages": [{"role": "user", "content": "Matrix memory."}],
            "user_id": "matrix-user",
            "infer": false,
        })),
        ("post", "/v3/memories/") | ("post", "/v2/memories/") => {
            Some(json!({"filters": {"user_id": "matrix-user"}}))
        }
        ("post", "/v3/memories/search/") | ("post", "/v2/memories/search/") => {
            Some(json!({"query": "matrix", "filters": {"user_id": "matrix-user"}}))
        }
        ("post", "/v1/memories/search/") => {
            Some(json!({"query": "matrix", "user_id": "matrix-user"}))
        }
        ("put", "/v1/memories/{memory_id}/") => Some(json!({"text": "Matrix memory, edited."})),
        ("put", "/v1/batch/") => {
            Some(json!({"memories": [{"memory_id": "{memory}", "text": "Batch edited."}]}))
        }
        ("delete", "/v1/batch/") => Some(json!({"memories": [{"memory_id": "{memory}"}]})),
        ("post", "/v1/feedback/") => Some(json!({"memory_id": "{memory}", "feedback": "POSITIVE"})),
        ("post", "/v1/exports/") | ("post", "/v1/exports/get/") => {
            Some(json!({"schema": "{\"type\": \"object\"}", "filters": {"user_id": "matrix-user"}}))
        }
        _ => None,
    };
    (format!("{path}{query}"), body)
}

/// The key scope a permission of the table stands for, and a scope that lacks it.
fn scope_for(permission: &str) -> (&'static str, &'static str) {
    match permission {
        "read_memories" => ("memories:read", "memories:write"),
        "write_memories" => ("memories:write", "memories:read"),
        "delete_memories" => ("memories:delete", "memories:read"),
        _ => ("admin", "memories:read"),
    }
}

/// Every route of `/mem0/openapi.json` (drawn from the permission table) is mounted at the
/// root and under `/mem0` and answers as the table says: 401 in Mem0's format without a
/// credential and, at the root, with `Bearer`; 403 for a key without the permission the
/// table names; served for a key that holds it. A route the table names but nobody mounted
/// would answer 404 here; one mounted without a row is not in the document.
#[tokio::test]
async fn every_mem0_route_answers_each_credential_as_the_permission_table_says() {
    let server = spawn_server().await;
    let api = server.client();
    let http = reqwest::Client::new();
    let document: Value = http
        .get(format!("{}/mem0/openapi.json", server.base_url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut keys = std::collections::BTreeMap::new();
    for scope in [
        "memories:read",
        "memories:write",
        "memories:delete",
        "admin",
    ] {
        let created = api
            .send(
                api.request(reqwest::Method::POST, "/v1/keys")
                    .json(&json!({"label": format!("mem0 {scope}"), "scopes": [scope]})),
            )
            .await;
        assert_eq!(created.status, 201, "{}", created.body);
        keys.insert(scope, created.body["secret"].as_str().unwrap().to_string());
    }
    let all_scopes = server.bootstrap.api_key.clone();
    let paths = document["paths"].as_object().expect("paths");
    let mut checked = 0;
    for (path, operations) in paths {
        if path == "/openapi.json" {
            continue;
        }
        for (method, operation) in operations.as_object().expect("methods") {
            let needs: Vec<&str> = operation["x-engram-permissions"]
                .as_array()
                .map(|needs| needs.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            // A fresh memory per call: some of these routes delete it.
            let memory = api
                .add_one(json!({"content": "Matrix memory.", "user_id": "matrix-user"}))
                .await;
            let memory_id = memory["id"].as_str().unwrap();
            let (target, body) = matrix_request(method, path);
            let target = target
                .replace("{memory_id}", memory_id)
                .replace("{entity_type}", "user")
                .replace("{entity_id}", "matrix-user")
                .replace("{org_id}", &server.bootstrap.org_id)
                .replace("{project_id}", &server.bootstrap.project_id);
            let body = body.map(|body| {
                serde_json::from_str::<Value>(&body.to_string().replace("{memory}", memory_id))
                    .unwrap()
            });
            let call = |prefix: &str, authorization: Option<String>| {
                let method = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
                let mut request =
                    http.request(method, format!("{}{prefix}{target}", server.base_url));
                if let Some(authorization) = authorization {
                    request = request.header("Authorization", authorization);
                }
                if let Some(body) = &body {
                    request = request.json(body);
                }
                api.send(request)
            };
            for prefix in ["", "/mem0"] {
                let anonymous = call(prefix, None).await;
                assert_mem0_error(&anonymous, &[401]);
            }
            let bearer_at_root = call("", Some(format!("Bearer {all_scopes}"))).await;
            assert_mem0_error(&bearer_at_root, &[401]);
            for need in &needs {
                let (_, lacking) = scope_for(need);
                if needs.iter().any(|other| scope_for(other).0 == lacking) {
                    continue;
                }
                let refused = call("/mem0", Some(format!("Token {}", keys[lacking]))).await;
                assert_mem0_error(&refused, &[403]);
                assert!(
                    refused.body["detail"]
                        .as_str()
                        .is_some_and(|detail| detail.contains(scope_for(need).0)),
                    "{method} {path}: the refusal names the scope: {}",
                    refused.body
                );
            }
            let served = call("", Some(format!("Token {all_scopes}"))).await;
            let expected: &[u16] = if needs.is_empty() && path != "/v1/ping/" {
                // Routes Engram answers "not supported": their own status, with a detail.
                &[400, 403, 501]
            } else {
                &[200, 201]
            };
            assert!(
                expected.contains(&served.status),
                "{method} {path} with every scope: {} {}",
                served.status,
                served.body
            );
            checked += 1;
        }
    }
    assert!(checked >= 25, "only {checked} routes in /mem0/openapi.json");
}

/// `POST /v3/memories/add/` through `token` at the root.
async fn mem0_add(server: &TestServer, body: Value) -> ApiResponse {
    let api = server.client();
    let http = reqwest::Client::new();
    api.send(
        with_token(
            &http,
            reqwest::Method::POST,
            &format!("{}/v3/memories/add/", server.base_url),
            server.bootstrap.api_key.as_str(),
        )
        .json(&body),
    )
    .await
}

/// With an LLM configured (here the scripted stand-in for a provider), Mem0's default
/// `add` (infer) is Engram's extraction and reconciliation: the answer lists the facts the
/// LLM drew, not the messages; a later add that contradicts one supersedes it; Mem0's
/// metadata, app and run ride along on what is written; the conversation itself is not
/// kept. `infer: false` on the same server stores the message verbatim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_an_llm_mem0_add_extracts_and_reconciles() {
    use engram_tests::llm_stand_in::{LlmStandIn, ScriptedReply};
    let stand_in = LlmStandIn::start(|request| {
        let said = |text: &str| request.user_prompt.contains(text);
        if request.is_extraction() {
            let fact = if said("I moved to Lisbon") {
                "The user lives in Lisbon."
            } else {
                "The user lives in Berlin."
            };
            return ScriptedReply::Json {
                content: json!({"memories": [{"kind": "semantic", "content": fact, "source": "user_stated"}]}),
                prompt_tokens: 200,
                completion_tokens: 40,
            };
        }
        // Reconciliation: Lisbon replaces Berlin.
        let candidate = request.user_prompt.lines().find_map(|line| {
            let (number, text) = line.split_once(". ")?;
            (text == "The user lives in Lisbon.").then(|| number.parse::<u64>().ok())?
        });
        let decisions = match (candidate, request.label_of("The user lives in Berlin.")) {
            (Some(candidate), Some(target)) => json!([{
                "candidate": candidate, "action": "SUPERSEDE", "target": target,
                "content": null, "reason": "the user moved"
            }]),
            _ => json!([]),
        };
        ScriptedReply::Json {
            content: json!({"decisions": decisions}),
            prompt_tokens: 150,
            completion_tokens: 30,
        }
    })
    .await
    .unwrap();
    let server = TestServer::spawn_fresh_with(&[
        ("ENGRAM_LLM_BASE_URL", stand_in.base_url.as_str()),
        ("ENGRAM_LLM_MODEL", "stand-in-chat"),
    ])
    .await
    .unwrap();
    let api = server.client();

    let first = mem0_add(
        &server,
        json!({
            "messages": [
                {"role": "user", "content": "Hi, I live in Berlin."},
                {"role": "assistant", "content": "Noted!"},
            ],
            "user_id": "mem0-llm-user", "run_id": "chat-1", "app_id": "travel",
            "metadata": {"channel": "web"},
        }),
    )
    .await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(first.body["method"], "llm", "{}", first.body);
    assert_eq!(first.body["status"], "SUCCEEDED");
    let results = first.body["results"].as_array().unwrap();
    assert_eq!(
        results.len(),
        1,
        "one fact, not two messages: {}",
        first.body
    );
    assert_eq!(results[0]["event"], "ADD");
    assert_eq!(results[0]["memory"], "The user lives in Berlin.");
    let berlin_id = results[0]["id"].as_str().unwrap().to_string();
    let berlin = api.get(&berlin_id).await;
    assert_eq!(berlin.status, 200, "{}", berlin.body);
    assert_eq!(berlin.body["user_id"], "mem0-llm-user");
    assert_eq!(berlin.body["session_id"], "chat-1");
    assert_eq!(berlin.body["metadata"]["app_id"], "travel");
    assert_eq!(berlin.body["metadata"]["channel"], "web");
    assert_eq!(berlin.body["source"], "user_stated");

    let second = mem0_add(
        &server,
        json!({"messages": "I moved to Lisbon last month.", "user_id": "mem0-llm-user"}),
    )
    .await;
    assert_eq!(second.status, 200, "{}", second.body);
    let results = second.body["results"].as_array().unwrap();
    assert_eq!(results.len(), 1, "{}", second.body);
    assert_eq!(results[0]["memory"], "The user lives in Lisbon.");
    let lisbon_id = results[0]["id"].as_str().unwrap();
    let listed = api.list("?user_id=mem0-llm-user").await;
    let active: Vec<&str> = listed.body["memories"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|memory| memory["id"].as_str())
        .collect();
    assert_eq!(
        active,
        vec![lisbon_id],
        "Berlin was superseded: {}",
        listed.body
    );
    assert!(
        stand_in
            .requests()
            .iter()
            .any(|request| request.user_prompt.contains("I moved to Lisbon")),
        "the LLM read the message"
    );
    // Mem0's add keeps what was learned, not the conversation.
    let messages = api
        .send(api.request(reqwest::Method::GET, "/v1/sessions/chat-1/messages"))
        .await;
    assert_eq!(messages.status, 200, "{}", messages.body);
    let kept = messages.body["messages"].as_array().map_or(0, Vec::len);
    assert_eq!(kept, 0, "{}", messages.body);

    let verbatim = mem0_add(
        &server,
        json!({"messages": "Keep this exactly.", "user_id": "mem0-llm-user", "infer": false}),
    )
    .await;
    assert_eq!(verbatim.body["method"], "verbatim", "{}", verbatim.body);
    assert_eq!(verbatim.body["results"][0]["memory"], "Keep this exactly.");
}

/// `method` `path` at the root with `Authorization: Token <credential>`.
async fn mem0_call(
    server: &TestServer,
    credential: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> ApiResponse {
    let http = reqwest::Client::new();
    let mut request = with_token(
        &http,
        method,
        &format!("{}{path}", server.base_url),
        credential,
    );
    if let Some(body) = body {
        request = request.json(&body);
    }
    server.client().send(request).await
}

/// What a Mem0 client does is the project's like any other door's work, told apart by its
/// channel: writes and searches are metered as `mem0`, the audit log and the recall events
/// name `mem0`. And an end-user token used through Mem0's routes stays its end-user's:
/// it writes as that user, cannot name another, and finds, lists and deletes nothing of
/// another user's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mem0_work_is_metered_and_audited_as_mem0_and_end_user_tokens_stay_confined() {
    use reqwest::Method;
    let server = TestServer::spawn().await.unwrap();
    let api = server.client();
    let key = server.bootstrap.api_key.clone();
    let added = mem0_call(
        &server,
        &key,
        Method::POST,
        "/v3/memories/add/",
        Some(json!({"messages": "Ann drinks oolong tea.", "user_id": "ann", "infer": false})),
    )
    .await;
    assert_eq!(added.status, 200, "{}", added.body);
    let searched = mem0_call(
        &server,
        &key,
        Method::POST,
        "/v3/memories/search/",
        Some(json!({"query": "what does ann drink", "filters": {"user_id": "ann"}})),
    )
    .await;
    assert_eq!(searched.status, 200, "{}", searched.body);
    assert_eq!(
        searched.body["results"][0]["memory"],
        "Ann drinks oolong tea."
    );

    let by_channel = engram_tests::eventually("mem0 usage to be metered", || async {
        let report = api
            .send(api.request(Method::GET, "/v1/usage?by=channel"))
            .await;
        let mem0_units: Vec<String> = report.body["usage"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|row| row["channel"] == "mem0")
            .filter_map(|row| row["unit"].as_str().map(str::to_string))
            .collect();
        if mem0_units.iter().any(|unit| unit == "searches")
            && mem0_units.iter().any(|unit| unit == "memories_written")
        {
            Ok(mem0_units)
        } else {
            Err(report.body.to_string())
        }
    })
    .await;
    assert!(!by_channel.is_empty());
    let created = api
        .send(api.request(Method::GET, "/v1/audit?action=memory.created"))
        .await;
    let channels: Vec<&str> = created.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|event| event["details"]["channel"].as_str())
        .collect();
    assert_eq!(channels, vec!["mem0"], "{}", created.body);
    let recalls = api.send(api.request(Method::GET, "/v1/recalls")).await;
    assert_eq!(recalls.status, 200, "{}", recalls.body);
    let recall_channels: Vec<&str> = recalls.body["recalls"]
        .as_array()
        .or_else(|| recalls.body["events"].as_array())
        .into_iter()
        .flatten()
        .filter_map(|recall| recall["channel"].as_str())
        .collect();
    assert_eq!(recall_channels, vec!["mem0"], "{}", recalls.body);

    // An end-user token of ann's, through the Mem0 routes.
    let bob = api
        .add_one(json!({"content": "Bob's secret plan.", "user_id": "bob"}))
        .await;
    let bob_id = bob["id"].as_str().unwrap();
    let minted = api
        .send(
            api.request(Method::POST, "/v1/end-user-tokens")
                .json(&json!({"user_id": "ann"})),
        )
        .await;
    assert_eq!(minted.status, 201, "{}", minted.body);
    let ann = minted.body["token"].as_str().unwrap().to_string();

    let own = mem0_call(
        &server,
        &ann,
        Method::POST,
        "/v3/memories/add/",
        Some(json!({"messages": "Ann likes jasmine too.", "infer": false})),
    )
    .await;
    assert_eq!(own.status, 200, "{}", own.body);
    let own_id = own.body["results"][0]["id"].as_str().unwrap();
    assert_eq!(api.get(own_id).await.body["user_id"], "ann");
    let as_bob = mem0_call(
        &server,
        &ann,
        Method::POST,
        "/v3/memories/add/",
        Some(json!({"messages": "Written as bob.", "user_id": "bob", "infer": false})),
    )
    .await;
    assert_mem0_error(&as_bob, &[403]);
    let read_bob = mem0_call(
        &server,
        &ann,
        Method::GET,
        &format!("/v1/memories/{bob_id}/"),
        None,
    )
    .await;
    assert_mem0_error(&read_bob, &[404]);
    let search_bob = mem0_call(
        &server,
        &ann,
        Method::POST,
        "/v3/memories/search/",
        Some(json!({"query": "secret plan", "filters": {"user_id": "bob"}})),
    )
    .await;
    let found = search_bob.body["results"].as_array().map_or(0, Vec::len);
    assert!(
        search_bob.status == 403 || (search_bob.status == 200 && found == 0),
        "{} {}",
        search_bob.status,
        search_bob.body
    );
    let entities = mem0_call(&server, &ann, Method::GET, "/v1/entities/", None).await;
    assert_eq!(entities.status, 200, "{}", entities.body);
    assert!(
        !entities.body.to_string().contains("bob"),
        "another end-user is listed: {}",
        entities.body
    );
    for path in [
        "/v1/memories/?user_id=bob",
        "/v1/memories/?user_id=*&agent_id=*&app_id=*&run_id=*",
        "/v2/entities/user/bob/",
    ] {
        let deleted = mem0_call(&server, &ann, Method::DELETE, path, None).await;
        // Refused, or confined to ann's own memories: never bob's.
        assert!(
            [200, 403].contains(&deleted.status),
            "{path}: {} {}",
            deleted.status,
            deleted.body
        );
        assert_eq!(
            api.get(bob_id).await.status,
            200,
            "{path} deleted another end-user's memory"
        );
    }
}

/// Bad input through Mem0's batch and add routes changes nothing: a batch update naming one
/// unknown memory edits none of the others, and a write-only key cannot backdate an expiry
/// (which would delete at the next sweep) through `add`, whatever `infer` says.
#[tokio::test]
async fn a_refused_mem0_batch_or_add_changes_nothing() {
    use reqwest::Method;
    let server = TestServer::spawn().await.unwrap();
    let api = server.client();
    let key = server.bootstrap.api_key.clone();
    let kept = api
        .add_one(json!({"content": "Unchanged by a refused batch.", "user_id": "batch-user"}))
        .await;
    let kept_id = kept["id"].as_str().unwrap();
    let refused = mem0_call(
        &server,
        &key,
        Method::PUT,
        "/v1/batch/",
        Some(json!({"memories": [
            {"memory_id": kept_id, "text": "Changed."},
            {"memory_id": uuid::Uuid::now_v7().to_string(), "text": "Nobody."},
        ]})),
    )
    .await;
    assert_mem0_error(&refused, &[400]);
    assert!(
        refused.body["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("memories[1].memory_id")),
        "the refusal names the item: {}",
        refused.body
    );
    let after = api.get(kept_id).await;
    assert_eq!(after.body["content"], "Unchanged by a refused batch.");
    assert_eq!(after.body["version"], 1);

    let writer = api
        .send(
            api.request(Method::POST, "/v1/keys")
                .json(&json!({"label": "writer", "scopes": ["memories:write"]})),
        )
        .await;
    let writer = writer.body["secret"].as_str().unwrap().to_string();
    for infer in [false, true] {
        let backdated = mem0_call(
            &server,
            &writer,
            Method::POST,
            "/v3/memories/add/",
            Some(json!({
                "messages": "Expired on arrival.", "user_id": "batch-user",
                "expiration_date": "2000-01-01", "infer": infer,
            })),
        )
        .await;
        assert_mem0_error(&backdated, &[400]);
    }
    let listed = api.list("?user_id=batch-user").await;
    assert_eq!(
        listed.body["memories"].as_array().unwrap().len(),
        1,
        "{}",
        listed.body
    );
}
