//! The MCP server (`/mcp`) as agent tools reach it: the official Python SDK (`mcp` 2.3.0) in
//! both protocol eras and the official TypeScript SDK (1.32.2, legacy era), each installed by
//! `make setup-test` into the machine cache, drive `engram serve` through every tool
//! (`tests/mcp/*`); a memory added over MCP is the same memory on `/v1`, audited and metered
//! as `mcp`; and the raw HTTP rules of the transport (401 with a challenge, Origin, Host,
//! methods, protocol versions, notifications, errors) hold without any SDK.

use engram_tests::{ApiClient, TestServer, eventually, workspace_root};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Command;

/// The Python SDK's venv and the TypeScript SDK's npm tree, as `scripts/setup.sh test` makes
/// them: missing, the test fails (it is not skipped).
fn python_sdk() -> PathBuf {
    let python = workspace_root().join(".cache/mcp-2.3.0-venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run `make setup-test` (it installs mcp==2.3.0)",
        python.display()
    );
    python
}

fn typescript_sdk() -> PathBuf {
    let folder = workspace_root().join(".cache/mcp-sdk-1.32.2");
    assert!(
        folder
            .join("node_modules/@modelcontextprotocol/sdk/package.json")
            .exists(),
        "{} is missing: run `make setup-test` (it installs @modelcontextprotocol/sdk@1.32.2)",
        folder.display()
    );
    folder
}

/// What a client check needs: a fresh server (its rate limiter off: the checks call back to
/// back), another project's key, an end-user token of `u-token`, and a memory added on /v1.
struct Setting {
    server: TestServer,
    other_key: String,
    user_token: String,
    native_id: String,
}

async fn setting() -> Setting {
    let server = TestServer::spawn_fresh_with(&[
        ("ENGRAM_RATE_LIMIT_BURST", "0"),
        ("ENGRAM_RATE_LIMIT_PER_SECOND", "0"),
    ])
    .await
    .unwrap();
    let (_, other_key) = server.create_project("other").unwrap();
    let client = server.client();
    let minted = client
        .send(
            client
                .request(reqwest::Method::POST, "/v1/end-user-tokens")
                .json(&json!({
                    "user_id": "u-token",
                    "ttl_seconds": 3600,
                    "scopes": ["memories:read", "memories:write", "memories:delete"],
                })),
        )
        .await;
    assert_eq!(minted.status, 201, "{}", minted.body);
    let native = client
        .add_one(json!({"content": "Added through the native API", "user_id": "u-native"}))
        .await;
    Setting {
        other_key,
        user_token: minted.body["token"].as_str().unwrap().to_string(),
        native_id: native["id"].as_str().unwrap().to_string(),
        server,
    }
}

/// Runs a client check script; fails with its `RESULT` line. Returns the id it `KEPT`.
async fn run_check(setting: &Setting, mut command: Command, who: &str) -> String {
    command
        .env("ENGRAM_URL", setting.server.base_url.as_str())
        .env("ENGRAM_KEY", setting.server.bootstrap.api_key.as_str())
        .env("ENGRAM_OTHER_KEY", setting.other_key.as_str())
        .env("ENGRAM_USER_TOKEN", setting.user_token.as_str())
        .env("ENGRAM_NATIVE_ID", setting.native_id.as_str())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONUNBUFFERED", "1")
        // Loopback never goes through a proxy the shell may name.
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("no_proxy", "127.0.0.1,localhost");
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .unwrap()
        .unwrap_or_else(|error| panic!("cannot run the {who} check: {error}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}");
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    let summary = stdout
        .lines()
        .rev()
        .find_map(|line| line.strip_prefix("RESULT "))
        .unwrap_or("(no RESULT line: the check stopped early, see its output above)");
    assert!(
        output.status.success() && summary == "ok",
        "{who} against Engram's MCP server failed: {summary}"
    );
    stdout
        .lines()
        .find_map(|line| line.strip_prefix("KEPT "))
        .expect("the check names the memory it kept")
        .to_string()
}

/// What a memory kept by a client shows on the native API: the same memory, written through
/// `mcp` with the tool named in the audit log and the usage report.
async fn assert_seen_on_v1(client: &ApiClient, kept_id: &str, content: &str, user_id: &str) {
    let memory = client.get(kept_id).await;
    assert_eq!(memory.status, 200, "{}", memory.body);
    assert_eq!(memory.body["content"], content);
    assert_eq!(memory.body["user_id"], user_id);
    assert_eq!(memory.body["source"], "model_inferred");
    let audit = client
        .send(client.request(
            reqwest::Method::GET,
            "/v1/audit?action=memory.created&limit=200",
        ))
        .await;
    assert_eq!(audit.status, 200, "{}", audit.body);
    let through_mcp = audit.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|event| {
            event["target_ids"]
                .as_array()
                .is_some_and(|ids| ids.iter().any(|id| id == kept_id))
        })
        .unwrap_or_else(|| panic!("no memory.created event for {kept_id}: {}", audit.body));
    assert_eq!(through_mcp["details"]["channel"], "mcp", "{through_mcp}");
    assert_eq!(
        through_mcp["details"]["tool"], "add_memory",
        "{through_mcp}"
    );
    eventually("the mcp channel's searches in the usage report", || async {
        let usage = client
            .send(client.request(reqwest::Method::GET, "/v1/usage?by=channel"))
            .await;
        let searched = usage.body["usage"].as_array().is_some_and(|rows| {
            rows.iter().any(|row| {
                row["channel"] == "mcp"
                    && row["unit"] == "searches"
                    && row["quantity"].as_i64().unwrap_or(0) > 0
            })
        });
        if searched {
            Ok(())
        } else {
            Err(usage.body.to_string())
        }
    })
    .await;
}

/// The Python SDK's check in `mode` (`legacy` or `auto`), and what its kept memory shows on
/// /v1.
async fn python_check(mode: &str, era: &str) {
    let python = python_sdk();
    let setting = setting().await;
    let mut command = Command::new(python);
    command
        .arg(workspace_root().join("tests/mcp/python_client_check.py"))
        .arg(mode);
    let kept = run_check(&setting, command, &format!("mcp 2.3.0 ({era})")).await;
    assert_seen_on_v1(
        &setting.server.client(),
        &kept,
        &format!("Kept by the {mode} Python client"),
        &format!("u-py-{mode}"),
    )
    .await;
}

/// The Python SDK in the legacy era (`initialize`, 2025-11-25): every tool round-trips; the
/// other project's key and an end-user token naming someone else are refused as the model
/// reads it (`isError`); a wrong key fails the connection with 401; an unknown tool is a
/// JSON-RPC error.
#[tokio::test]
async fn the_python_sdk_in_the_legacy_era_uses_every_tool() {
    python_check("legacy", "2025-11-25").await;
}

/// The same in the 2026-07-28 era: `mode="auto"` probes `server/discover`, and every call is
/// a stateless request carrying its protocol version and method headers.
#[tokio::test]
async fn the_python_sdk_in_the_stateless_era_uses_every_tool() {
    python_check("auto", "2026-07-28").await;
}

/// The TypeScript SDK (Claude Code's family, legacy era only) connects without a session,
/// round-trips the memory tools and is refused as the Python SDK is.
#[tokio::test]
async fn the_typescript_sdk_uses_every_tool() {
    let sdk = typescript_sdk();
    let setting = setting().await;
    let mut command = Command::new("node");
    command
        .arg(workspace_root().join("tests/mcp/typescript_client_check.cjs"))
        .env("MCP_SDK_DIR", sdk);
    let kept = run_check(&setting, command, "@modelcontextprotocol/sdk 1.32.2").await;
    assert_seen_on_v1(
        &setting.server.client(),
        &kept,
        "Kept by the TypeScript client",
        "u-ts",
    )
    .await;
}

/// One raw POST to `/mcp`.
async fn post(
    http: &reqwest::Client,
    base_url: &str,
    headers: &[(&str, &str)],
    body: Value,
) -> (u16, reqwest::header::HeaderMap, String) {
    let mut request = http
        .post(format!("{base_url}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(body.to_string());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.text().await.unwrap())
}

/// The JSON-RPC message of an answer given as JSON or as one SSE event.
fn message(body: &str) -> Value {
    let json = body
        .lines()
        .find_map(|line| line.strip_prefix("data:"))
        .unwrap_or(body)
        .trim();
    serde_json::from_str(json).unwrap_or_else(|error| panic!("{error}: {body}"))
}

fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    })
}

/// The transport's rules on the wire, without an SDK (interop B6): a missing or wrong
/// credential is 401 with a Bearer challenge and no OAuth metadata (a key in the query string
/// is no credential); a foreign `Origin` or `Host` is 403; GET is 405; an unknown protocol
/// version is 400; a modern request whose `Mcp-Name` disagrees with its body is 400 -32020;
/// a notification is 202 with no body; a legacy request without a version header is served
/// (as 2025-03-26); an unknown tool is -32602; bad arguments are an `isError` result naming
/// the argument; a request body over the limit is refused.
#[tokio::test]
async fn the_transport_rules_hold_on_the_wire() {
    let server =
        TestServer::spawn_fresh_with(&[("ENGRAM_CORS_ALLOWED_ORIGINS", "https://agent.example")])
            .await
            .unwrap();
    let http = reqwest::Client::new();
    let base = server.base_url.as_str();
    let key = server.bootstrap.api_key.as_str();
    let bearer = format!("Bearer {key}");
    let auth = ("authorization", bearer.as_str());
    let list_tools = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});

    for headers in [vec![], vec![("authorization", "Bearer egk_live_nope")]] {
        let (status, response_headers, body) =
            post(&http, base, &headers, list_tools.clone()).await;
        assert_eq!(status, 401, "{body}");
        let challenge = response_headers["www-authenticate"].to_str().unwrap();
        assert!(challenge.starts_with("Bearer"), "{challenge}");
        assert!(!challenge.contains("resource_metadata"), "{challenge}");
        assert!(message(&body)["error"]["message"].is_string(), "{body}");
    }
    let (status, _, _) = http
        .post(format!("{base}/mcp?api_key={key}"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(list_tools.to_string())
        .send()
        .await
        .map(|response| (response.status().as_u16(), (), ()))
        .unwrap();
    assert_eq!(status, 401, "a key in the query string is not a credential");
    let (status, _, _) = post(
        &http,
        base,
        &[auth, ("origin", "http://evil.example")],
        list_tools.clone(),
    )
    .await;
    assert_eq!(status, 403, "a foreign Origin");
    let (status, _, body) = post(
        &http,
        base,
        &[auth, ("origin", "https://agent.example")],
        list_tools.clone(),
    )
    .await;
    assert_eq!(status, 200, "an allowed Origin: {body}");
    let (status, _, _) = post(
        &http,
        base,
        &[auth, ("host", "attacker.example")],
        list_tools.clone(),
    )
    .await;
    assert_eq!(status, 403, "a foreign Host (DNS rebinding)");
    let get = http
        .get(format!("{base}/mcp"))
        .header("authorization", bearer.as_str())
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(get.status().as_u16(), 405, "GET on a stateless server");
    let delete = http
        .delete(format!("{base}/mcp"))
        .header("authorization", bearer.as_str())
        .header("mcp-session-id", "anything")
        .send()
        .await
        .unwrap();
    assert_eq!(
        delete.status().as_u16(),
        405,
        "DELETE: there are no sessions"
    );
    let (status, _, _) = post(
        &http,
        base,
        &[auth, ("mcp-protocol-version", "1900-01-01")],
        list_tools.clone(),
    )
    .await;
    assert_eq!(status, 400, "an unknown protocol version");

    let modern_call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "get_memory", "arguments": {"id": "nope"}, "_meta": modern_meta()}});
    let (status, _, body) = post(
        &http,
        base,
        &[
            auth,
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "search_memories"),
        ],
        modern_call.clone(),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(message(&body)["error"]["code"], -32020, "{body}");
    let (status, _, body) = post(
        &http,
        base,
        &[
            auth,
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "get_memory"),
        ],
        modern_call,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let answer = message(&body);
    assert_eq!(answer["result"]["isError"], true, "{body}");
    assert_eq!(
        answer["result"]["structuredContent"]["status"], 404,
        "{body}"
    );

    let (status, _, body) = post(
        &http,
        base,
        &[auth, ("mcp-protocol-version", "2025-11-25")],
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    assert!(
        body.is_empty(),
        "a notification's answer has no body: {body}"
    );

    // A Dify-style legacy client: no version header at all.
    let (status, _, body) = post(&http, base, &[auth], list_tools.clone()).await;
    assert_eq!(status, 200, "{body}");
    let tools = message(&body)["result"]["tools"].clone();
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 14, "{names:?}");
    assert!(names.contains(&"delete_all_memories"), "{names:?}");
    let search = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["name"] == "search_memories")
        .unwrap();
    assert_eq!(search["annotations"]["readOnlyHint"], true, "{search}");
    assert_eq!(
        search["inputSchema"]["required"],
        json!(["query"]),
        "{search}"
    );

    let call = |name: &str, arguments: Value| {
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}})
    };
    let (_, _, body) = post(&http, base, &[auth], call("no_such_tool", json!({}))).await;
    assert_eq!(message(&body)["error"]["code"], -32602, "{body}");
    let (status, _, body) = post(
        &http,
        base,
        &[auth],
        call("add_memory", json!({"content": 42, "colour": "red"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let refused = message(&body)["result"].clone();
    assert_eq!(refused["isError"], true, "{body}");
    assert_eq!(refused["structuredContent"]["status"], 422, "{body}");
    let (_, _, body) = post(
        &http,
        base,
        &[auth],
        call("add_memory", json!({"content": "", "user_id": ""})),
    )
    .await;
    let refused = message(&body)["result"]["structuredContent"].clone();
    let fields: Vec<&str> = refused["errors"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"))
        .iter()
        .map(|error| error["field"].as_str().unwrap())
        .collect();
    assert!(
        fields.contains(&"user_id") && fields.contains(&"content"),
        "{body}"
    );
    let listed = server.client().list("").await;
    assert_eq!(
        listed.body["memories"],
        json!([]),
        "refused calls stored nothing"
    );

    // The caller's default end-user header scopes a project key's tools; a null optional
    // argument (strict function calling) is its default.
    let (_, _, body) = post(
        &http,
        base,
        &[auth, ("x-engram-user-id", "u-header")],
        call(
            "add_memory",
            json!({"content": "Header user likes maps", "source": null, "user_id": null}),
        ),
    )
    .await;
    let stored = message(&body)["result"]["structuredContent"].clone();
    assert_eq!(stored["user_id"], "u-header", "{body}");
    assert_eq!(stored["source"], "model_inferred", "{body}");
    // A header that cannot be read is refused, never ignored (the call would run
    // project-wide); a bulk delete never takes its end-user from the header.
    let (_, _, body) = post(
        &http,
        base,
        &[auth, ("x-engram-user-id", " ")],
        call("list_memories", json!({})),
    )
    .await;
    let refused = message(&body)["result"]["structuredContent"].clone();
    assert_eq!(refused["status"], 422, "{body}");
    assert_eq!(
        refused["errors"][0]["field"], "header.X-Engram-User-Id",
        "{body}"
    );
    let (_, _, body) = post(
        &http,
        base,
        &[auth, ("x-engram-user-id", "u-header")],
        call("delete_all_memories", json!({"confirm": true})),
    )
    .await;
    let refused = message(&body)["result"]["structuredContent"].clone();
    assert_eq!(refused["status"], 422, "{body}");

    // Scopes apply as on /v1: a read-only key reads, and is refused writes and deletes.
    let admin = server.client();
    let created = admin
        .send(
            admin
                .request(reqwest::Method::POST, "/v1/keys")
                .json(&json!({"label": "agent reader", "scopes": ["memories:read"]})),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let reader = server.client_with_key(created.body["secret"].as_str().unwrap());
    let listed = reader.mcp_tool("list_memories", json!({})).await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    let refused = reader
        .mcp_tool("add_memory", json!({"content": "not allowed"}))
        .await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(
        refused.body["detail"]
            .as_str()
            .unwrap()
            .contains("memories:write"),
        "{}",
        refused.body
    );
    let refused = reader
        .mcp_tool(
            "delete_all_memories",
            json!({"user_id": "u-header", "confirm": true}),
        )
        .await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    let still = admin.list("?user_id=u-header").await;
    assert_eq!(still.body["memories"].as_array().unwrap().len(), 1);

    let oversized = "x".repeat(engram_core::limits::MAX_REQUEST_BODY_BYTES + 1024);
    let (status, _, _) = post(
        &http,
        base,
        &[auth],
        call("add_memory", json!({"content": oversized})),
    )
    .await;
    assert_eq!(status, 413, "a body over the limit");
}
