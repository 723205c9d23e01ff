//! Who may call what: every `/v1` route × every kind of principal (no credential, a garbage
//! credential, another project's admin key, a key per single scope, an all-scope key, an
//! end-user token, a forged console session token, the live console session of each console
//! role, as bearer and as the console's cookie), each answered exactly as the scope table says,
//! and another project's key never sees this project's ids. Plus: 10,000 wrong secrets
//! against one key id are throttled.

use engram_tests::{ApiClient, TestServer, run_engram};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// Every text of alice's the fixture stores (memories and their metadata, messages, session
/// state, files, search queries) starts with this: a credential without `memories:read` must
/// never find it in an answer.
const SEEDED: &str = "SEEDED-alice";

/// Every text of another agent's the fixture stores (a private memory, a message, a session
/// state value) starts with this: the key bound to `matrix-agent` must never find it.
const OTHER_AGENTS: &str = "PRIVATE-other-agent";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Needs {
    Read,
    Write,
    Delete,
    /// `memories:verify` and `memories:read` (vouching for words needs reading them): never
    /// an end-user token's.
    VerifyAndRead,
    Admin,
    /// Any project API key (minting end-user tokens), never an end-user token.
    AnyApiKey,
    /// `admin` and `memories:read` together (evaluation cases hold queries and contents; a
    /// subject export is content).
    AdminAndRead,
    /// `admin` and `memories:delete` together (erasure deletes).
    AdminAndDelete,
    /// An organization-level credential: no project key or token, whatever its scopes.
    Organization,
}

#[derive(Clone, Copy, Debug)]
struct Route {
    method: &'static str,
    /// `{memory}`, `{file}`, `{task}`, `{state}` and `{key}` are replaced by a fresh target of
    /// this project per call.
    path: &'static str,
    needs: Needs,
    success: u16,
}

const ROUTES: &[Route] = &[
    Route {
        method: "GET",
        path: "/v1/memories",
        needs: Needs::Read,
        success: 200,
    },
    Route {
        method: "POST",
        path: "/v1/memories",
        needs: Needs::Write,
        success: 201,
    },
    Route {
        method: "GET",
        path: "/v1/memories/{memory}",
        needs: Needs::Read,
        success: 200,
    },
    Route {
        method: "PATCH",
        path: "/v1/memories/{memory}",
        needs: Needs::Write,
        success: 200,
    },
    Route {
        method: "DELETE",
        path: "/v1/memories/{memory}",
        needs: Needs::Delete,
        success: 204,
    },
    Route {
        method: "GET",
        path: "/v1/memories/{memory}/history",
        needs: Needs::Read,
        success: 200,
    },
    Route {
        method: "POST",
        path: "/v1/memories/{memory}/verify",
        needs: Needs::VerifyAndRead,
        success: 200,
    },
    Route {
        method: "POST",
        path: "/v1/memories/search",
        needs: Needs::Read,
        success: 200,
    },
    Route {
        method: "POST",
        path: "/v1/memories/query",
        needs: Needs::Read,
        success: 200,
    },
    Route {
        method: "POST",
        path: "/v1/memories/bulk-delete",
        needs: Needs::Delete,
        success: 200,
    },
    Route {
        method: "GET",
        path: "/v1/entities",
        needs: Needs::Read,
        success: 200,
    },
    Route {
        method: "GET",
        path: "/v1/keys",
        needs: Needs::Admin,
        success: 200,
    },
    Route {
        method: "POST",
        path: "/v1/keys",
        needs: Needs::Admin,
        success: 201,
    },
    Route {
        method: "POST",
        path: "/v1/keys/{key}/revoke",
        needs: Needs::Admin,
        success: 200,
    },
    Route {
        method: "POST",
        path: "/v1/keys/{key}/roll",
        needs: Needs::Admin,
        success: 201,
    },
    Route {
        method: "GET",
        path: "/v1/audit",
        needs: Needs::Admin,
        success: 200,
    },
    Route {
        method: "POST",
        path: "/v1/audit/verify",
        needs: Needs::Admin,
        success: 200,
    },
    Route {
        method: "GET",
        path: "/v1/audit/export",
        needs: Needs::Admin,
        success: 200,
    },
    Route {
        method: "POST",
        path: "/v1/end-user-tokens",
        needs: Needs::AnyApiKey,
        success: 201,
    },
    Route {
        method: "POST",
        path: "/v1/end-user-tokens/rotate-signing-key",
        needs: Needs::Admin,
        success: 200,
    },
    Route {
        method: "GET",
        path: "/v1/project/settings",
        needs: Needs::Admin,
        success: 200,
    },
    Route {
        method: "PATCH",
        path: "/v1/project/settings",
        needs: Needs::Admin,
        success: 200,
    },
    Route {
        method: "PUT",
        path: "/v1/memories/{memory}/flags",
        needs: Needs::Admin,
        success: 200,
    },
    // A subject of its own: the erasure runs in the background and must not remove the
    // targets other cells create for alice.
    Route {
        method: "POST",
        path: "/v1/subjects/zed/erasure",
        needs: Needs::AdminAndDelete,
        success: 202,
    },
    // Erasure across the organization: never through a project credential.
    Route {
        method: "POST",
        path: "/v1/organization/subjects/zed/erasure",
        needs: Needs::Organization,
        success: 202,
    },
    Route {
        method: "GET",
        path: "/v1/tasks/{task}",
        needs: Needs::Admin,
        success: 200,
    },
    Route {
        method: "GET",
        path: "/v1/subjects/alice/export",
        needs: Needs::AdminAndRead,
        success: 200,
    },
    Route {
        method: "GET",
        path: "/v1/retention/preview",
        needs: Needs::Admin,
        success: 200,
    },
    Route {
        method: "GET",
        path: "/v1/usage",
        needs: Needs::Admin,
        success: 200,
    },
    Route {
        method: "GET",
        path: "/v1/costs",
        needs: Needs::Admin,
        success: 200,
    },
    Route {
        method: "GET",
        path: "/v1/statements/2026-01",
        needs: Needs::Admin,
        success: 200,
    },
    Route {
        method: "GET",
        path: "/v1/prices",
        needs: Needs::AnyApiKey,
        success: 200,
    },
    Route {
        method: "POST",
        path: "/v1/files?name=matrix.md&user_id=alice",
        needs: Needs::Write,
        success: 202,
    },
    Route {
        method: "GET",
        path: "/v1/files/{file}",
        needs: Needs::Read,
        success: 200,
    },
    Route {
        method: "DELETE",
        path: "/v1/files/{file}",
        needs: Needs::Delete,
        success: 204,
    },
    Route {
        method: "GET",
        // alice's namespace of the session (an end-user token may name its own user).
        path: "/v1/sessions/matrix/state?user_id=alice",
        needs: Needs::Read,
        success: 200,
    },
    Route {
        method: "GET",
        path: "/v1/sessions/matrix/state/{state}?user_id=alice",
        needs: Needs::Read,
        success: 200,
    },
    Route {
        method: "PUT",
        path: "/v1/sessions/matrix/state/{state}",
        needs: Needs::Write,
        success: 200,
    },
    Route {
        method: "DELETE",
        path: "/v1/sessions/matrix/state/{state}?user_id=alice",
        needs: Needs::Delete,
        success: 204,
    },
    Route {
        method: "POST",
        path: "/v1/memories/{memory}/feedback",
        needs: Needs::Write,
        success: 201,
    },
    Route {
        method: "GET",
        path: "/v1/memories/{memory}/feedback",
        needs: Needs::Read,
        success: 200,
    },
    Route {
        method: "GET",
        path: "/v1/sessions/matrix/messages",
        needs: Needs::Read,
        success: 200,
    },
    Route {
        method: "POST",
        path: "/v1/sessions/matrix/messages",
        needs: Needs::Write,
        success: 201,
    },
    Route {
        method: "GET",
        path: "/v1/project/limits",
        needs: Needs::Admin,
        success: 200,
    },
    Route {
        method: "PUT",
        path: "/v1/project/limits",
        needs: Needs::Admin,
        success: 200,
    },
    Route {
        method: "GET",
        path: "/v1/recalls/{recall}",
        needs: Needs::Read,
        success: 200,
    },
    Route {
        method: "POST",
        path: "/v1/recalls/{recall}/feedback",
        needs: Needs::Write,
        success: 201,
    },
    Route {
        method: "GET",
        path: "/v1/recalls/{recall}/feedback",
        needs: Needs::Read,
        success: 200,
    },
    Route {
        method: "POST",
        path: "/v1/eval-sets/{set}/cases/import",
        needs: Needs::AdminAndRead,
        success: 201,
    },
    Route {
        method: "GET",
        path: "/v1/recall-metrics",
        needs: Needs::Admin,
        success: 200,
    },
    Route {
        method: "GET",
        path: "/v1/retrieval-profiles",
        needs: Needs::Admin,
        success: 200,
    },
    Route {
        method: "GET",
        path: "/v1/retrieval-profiles/{profile}",
        needs: Needs::Admin,
        success: 200,
    },
    Route {
        method: "PUT",
        path: "/v1/retrieval-profiles/{profile}",
        needs: Needs::Admin,
        success: 200,
    },
    Route {
        method: "DELETE",
        path: "/v1/retrieval-profiles/{profile}",
        needs: Needs::Admin,
        success: 204,
    },
    Route {
        method: "POST",
        path: "/v1/eval-sets",
        // With cases, which probe content.
        needs: Needs::AdminAndRead,
        success: 201,
    },
    Route {
        method: "GET",
        path: "/v1/eval-sets",
        needs: Needs::Admin,
        success: 200,
    },
    Route {
        method: "GET",
        path: "/v1/eval-sets/{set}",
        needs: Needs::Admin,
        success: 200,
    },
    Route {
        method: "POST",
        path: "/v1/eval-sets/{set}/cases",
        needs: Needs::AdminAndRead,
        success: 201,
    },
    Route {
        method: "GET",
        path: "/v1/eval-sets/{set}/cases",
        needs: Needs::AdminAndRead,
        success: 200,
    },
    Route {
        method: "POST",
        path: "/v1/eval-sets/{set}/runs",
        needs: Needs::Admin,
        success: 202,
    },
    Route {
        method: "GET",
        path: "/v1/eval-sets/{set}/runs",
        needs: Needs::Admin,
        success: 200,
    },
    Route {
        method: "GET",
        path: "/v1/eval-sets/{set}/runs/{run}",
        needs: Needs::Admin,
        success: 200,
    },
    Route {
        method: "POST",
        path: "/v1/consolidations",
        needs: Needs::Admin,
        success: 202,
    },
    Route {
        method: "GET",
        path: "/v1/recalls",
        needs: Needs::Read,
        success: 200,
    },
    Route {
        method: "POST",
        path: "/v1/context",
        needs: Needs::Read,
        success: 200,
    },
    Route {
        method: "POST",
        path: "/v1/runs",
        needs: Needs::Write,
        success: 201,
    },
    Route {
        method: "GET",
        path: "/v1/runs",
        needs: Needs::Read,
        success: 200,
    },
    Route {
        method: "GET",
        path: "/v1/runs/{agentrun}",
        needs: Needs::Read,
        success: 200,
    },
    Route {
        method: "POST",
        path: "/v1/runs/{agentrun}/steps",
        needs: Needs::Write,
        success: 201,
    },
    Route {
        method: "POST",
        path: "/v1/runs/{agentrun}/end",
        needs: Needs::Write,
        success: 200,
    },
    Route {
        method: "GET",
        path: "/v1/memories/{memory}/impact",
        needs: Needs::Read,
        success: 200,
    },
];

#[derive(Clone, Debug)]
enum Principal {
    NoCredential,
    Garbage,
    ForeignAdmin,
    ScopedKey(&'static str),
    AllScopes,
    /// A key of every scope bound to the agent `matrix-agent`: it reads what is shared with
    /// its agent (the targets are rows of no agent, which every agent reads), changes none
    /// of them, and administers nothing.
    AgentBound,
    EndUserToken,
    ConsoleSession,
    /// A signed-in console member of this organization with this role: console sessions
    /// never open the `/v1` API, whatever the role.
    ConsoleRole(&'static str),
}

impl Principal {
    fn name(&self) -> String {
        match self {
            Principal::ScopedKey(scope) => format!("key[{scope}]"),
            Principal::ConsoleRole(role) => format!("console[{role}]"),
            other => format!("{other:?}"),
        }
    }
}

fn body_for(route: &Route) -> Option<Value> {
    match (route.method, route.path) {
        ("POST", "/v1/memories") => {
            Some(json!({"memories": [{"content": "Matrix write.", "user_id": "alice"}]}))
        }
        ("PATCH", "/v1/memories/{memory}") => Some(json!({"content": "Matrix edit."})),
        ("POST", "/v1/memories/{memory}/verify") => Some(json!({"reason": "matrix review"})),
        ("POST", "/v1/memories/search") => Some(json!({"query": "matrix"})),
        ("POST", "/v1/memories/query") => Some(json!({"filters": {"user_id": "alice"}})),
        // Deletes nothing the other routes need: no memory names this end-user.
        ("POST", "/v1/memories/bulk-delete") => {
            Some(json!({"filters": {"user_id": "matrix-nobody"}, "reason": "matrix"}))
        }
        // A key mints only what it holds itself: the `admin` key mints an `admin` key.
        ("POST", "/v1/keys") => Some(json!({"label": "matrix", "scopes": ["admin"]})),
        ("POST", "/v1/keys/{key}/roll") => Some(json!({"overlap_seconds": 0})),
        ("PATCH", "/v1/project/settings") => Some(json!({"pii_redaction": "off"})),
        ("PUT", "/v1/project/limits") => Some(json!({"recall": {"max_results": 100}})),
        ("PUT", "/v1/sessions/matrix/state/{state}") => {
            Some(json!({"value": {"step": 2}, "user_id": "alice"}))
        }
        ("POST", "/v1/memories/{memory}/feedback") => Some(json!({"rating": "relevant"})),
        ("POST", "/v1/recalls/{recall}/feedback") => Some(json!({"rating": "relevant"})),
        ("POST", "/v1/context") => Some(
            json!({"query": format!("{SEEDED}: what does alice like?"), "user_id": "alice", "token_budget": 200}),
        ),
        ("POST", "/v1/runs") => Some(json!({"task": "matrix task", "user_id": "alice"})),
        ("POST", "/v1/runs/{agentrun}/steps") => Some(json!({"type": "note", "text": "matrix"})),
        ("POST", "/v1/runs/{agentrun}/end") => Some(json!({"outcome": "success"})),
        ("POST", "/v1/sessions/matrix/messages") => Some(
            json!({"user_id": "alice", "messages": [{"role": "user", "content": "Matrix message."}]}),
        ),
        ("PUT", path) if path.ends_with("/flags") => Some(json!({"immutable": false})),
        ("PUT", "/v1/retrieval-profiles/{profile}") => {
            Some(json!({"parameters": {"retrieval": "keyword"}}))
        }
        // Names are unique per project: a fresh one per call.
        ("POST", "/v1/eval-sets") => Some(json!({
            "name": format!("matrix-{}", uuid::Uuid::now_v7()),
            "cases": [{"query": "matrix", "expected_memory_ids": [uuid::Uuid::now_v7().to_string()]}],
        })),
        ("POST", "/v1/eval-sets/{set}/cases") => Some(json!({
            "cases": [{"query": "matrix", "expected_memory_ids": [uuid::Uuid::now_v7().to_string()]}],
        })),
        ("POST", "/v1/end-user-tokens") => {
            Some(json!({"user_id": "alice", "scopes": ["memories:read"]}))
        }
        _ => None,
    }
}

/// What the scope table says `principal` gets from `route` (on this project's targets).
fn expected_status(route: &Route, principal: &Principal) -> u16 {
    let targets_an_id = route.path.contains('{');
    match principal {
        Principal::NoCredential
        | Principal::Garbage
        | Principal::ConsoleSession
        | Principal::ConsoleRole(_) => 401,
        // Authorized in its own project: a PUT of session state creates the key there,
        // beside ours, never over it.
        Principal::ForeignAdmin if route.method == "PUT" && route.path.contains("{state}") => 201,
        // Likewise a PUT of a retrieval profile of that name in its own project.
        Principal::ForeignAdmin if route.method == "PUT" && route.path.contains("{profile}") => 200,
        // Authorized in its own project: ids of ours do not exist there.
        Principal::ForeignAdmin if targets_an_id => 404,
        Principal::ForeignAdmin | Principal::AllScopes if route.needs == Needs::Organization => 403,
        // The targets are written by this very key, and a conclusion is verified by
        // someone else than who wrote it.
        Principal::AllScopes if route.needs == Needs::VerifyAndRead => 403,
        Principal::ForeignAdmin | Principal::AllScopes => route.success,
        Principal::ScopedKey(scope) => {
            let holds = match route.needs {
                Needs::Read => *scope == "memories:read",
                Needs::Write => *scope == "memories:write",
                Needs::Delete => *scope == "memories:delete",
                Needs::VerifyAndRead => false,
                Needs::Admin => *scope == "admin",
                Needs::AdminAndRead | Needs::AdminAndDelete | Needs::Organization => false,
                Needs::AnyApiKey => true,
            };
            match (holds, route.needs) {
                // The body asks for a `memories:read` token: more than any other single-scope
                // key holds, and a token never exceeds its parent.
                (true, Needs::AnyApiKey)
                    if route.path == "/v1/end-user-tokens" && *scope != "memories:read" =>
                {
                    403
                }
                (true, _) => route.success,
                (false, _) => 403,
            }
        }
        Principal::AgentBound => match (route.method, route.path) {
            // It lists and mints keys and tokens within its agent; the target keys are of
            // every agent, so not its to roll or revoke.
            ("GET", "/v1/keys") | ("POST", "/v1/keys") | ("POST", "/v1/end-user-tokens") => {
                route.success
            }
            ("POST", "/v1/keys/{key}/revoke") | ("POST", "/v1/keys/{key}/roll") => 403,
            ("GET", "/v1/prices") => route.success,
            // The targets are rows of no agent: read by every agent, changed by none.
            ("PATCH", "/v1/memories/{memory}")
            | ("DELETE", "/v1/memories/{memory}")
            | ("DELETE", "/v1/files/{file}")
            | ("PUT", "/v1/sessions/matrix/state/{state}")
            | ("DELETE", "/v1/sessions/matrix/state/{state}?user_id=alice")
            | ("POST", "/v1/runs/{agentrun}/steps")
            | ("POST", "/v1/runs/{agentrun}/end") => 403,
            _ => match route.needs {
                Needs::Read | Needs::Write | Needs::Delete => route.success,
                // It does not hold `memories:verify`.
                Needs::VerifyAndRead => 403,
                // Project administration spans every agent, whatever the key's scopes.
                Needs::Admin
                | Needs::AdminAndRead
                | Needs::AdminAndDelete
                | Needs::AnyApiKey
                | Needs::Organization => 403,
            },
        },
        // Read and write for alice; no delete, no verification, no admin, no minting.
        Principal::EndUserToken => match route.needs {
            Needs::Read | Needs::Write => route.success,
            Needs::Delete
            | Needs::VerifyAndRead
            | Needs::Admin
            | Needs::AdminAndRead
            | Needs::AdminAndDelete
            | Needs::AnyApiKey
            | Needs::Organization => 403,
        },
    }
}

struct Fixture {
    server: TestServer,
    admin: ApiClient,
    keys: BTreeMap<&'static str, String>,
    foreign_admin_key: String,
    console_token: String,
    /// Access tokens of live console sessions, by role.
    console_role_tokens: BTreeMap<&'static str, String>,
}

/// Signs in through the console and returns the access token of the new session.
async fn console_access_token(server: &TestServer, email: &str, password: &str) -> String {
    let response = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .post(format!("{}/console/api/login", server.base_url))
        .form(&[("email", email), ("password", password)])
        .send()
        .await
        .unwrap();
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .find_map(|value| {
            value
                .split(';')
                .next()?
                .strip_prefix("engram_console=")
                .map(str::to_string)
        })
        .unwrap_or_else(|| panic!("login as {email} failed: {}", response.status()))
}

impl Fixture {
    async fn new() -> Self {
        // The fixture makes hundreds of setup calls with one admin key as fast as the
        // machine allows; the per-key rate limit is not what this matrix is about (the
        // throttling test below is), so it must not turn a setup call into a 429.
        let server = TestServer::spawn_fresh_with(&[("ENGRAM_RATE_LIMIT_BURST", "100000")])
            .await
            .unwrap();
        let admin = server.client();
        let mut keys = BTreeMap::new();
        for scope in [
            "memories:read",
            "memories:write",
            "memories:delete",
            "memories:verify",
            "admin",
        ] {
            let created = admin
                .send(
                    admin
                        .request(reqwest::Method::POST, "/v1/keys")
                        .json(&json!({"label": scope, "scopes": [scope]})),
                )
                .await;
            assert_eq!(created.status, 201);
            keys.insert(scope, created.body["secret"].as_str().unwrap().to_string());
        }
        let bound = admin
            .send(
                admin
                    .request(reqwest::Method::POST, "/v1/keys")
                    .json(&json!({
                        "label": "agent-bound",
                        "scopes": ["memories:read", "memories:write", "memories:delete", "admin"],
                        "agents": ["matrix-agent"],
                    })),
            )
            .await;
        assert_eq!(bound.status, 201, "{}", bound.body);
        keys.insert(
            "agent-bound",
            bound.body["secret"].as_str().unwrap().to_string(),
        );
        let (_, foreign_admin_key) = server.create_project("foreign").unwrap();
        let secrets =
            engram_cli::bootstrap::load_or_create_server_secrets(&server.data_dir).unwrap();
        let console_token = engram_engine::console_credentials::ConsoleSessionKeys::new(
            &secrets.console_signing_secret,
            std::time::Duration::from_secs(600),
        )
        .issue(
            engram_core::ids::ConsoleAccountId::generate(),
            uuid::Uuid::now_v7(),
        )
        .unwrap();
        let mut console_role_tokens = BTreeMap::new();
        console_role_tokens.insert(
            "owner",
            console_access_token(
                &server,
                &server.bootstrap.console_email,
                &server.bootstrap.console_password,
            )
            .await,
        );
        for role in ["admin", "compliance", "analyst", "developer"] {
            let output = run_engram(
                &[
                    "admin",
                    "create-member",
                    "--data-dir",
                    &server.data_dir.display().to_string(),
                    "--email",
                    &format!("{role}@example.com"),
                    "--role",
                    role,
                ],
                &[],
            );
            assert!(output.status.success());
            let created: Value = serde_json::from_slice(&output.stdout).unwrap();
            let token = console_access_token(
                &server,
                created["email"].as_str().unwrap(),
                created["password"].as_str().unwrap(),
            )
            .await;
            console_role_tokens.insert(role, token);
        }
        Self {
            server,
            admin,
            keys,
            foreign_admin_key,
            console_token,
            console_role_tokens,
        }
    }

    async fn credential(&self, principal: &Principal) -> Option<String> {
        match principal {
            Principal::NoCredential => None,
            Principal::Garbage => Some("egk_live_0000000000000000_not-a-real-key".to_string()),
            Principal::ForeignAdmin => Some(self.foreign_admin_key.clone()),
            Principal::ScopedKey(scope) => Some(self.keys[scope].clone()),
            Principal::AllScopes => Some(self.server.bootstrap.api_key.clone()),
            Principal::AgentBound => Some(self.keys["agent-bound"].clone()),
            Principal::ConsoleSession => Some(self.console_token.clone()),
            Principal::ConsoleRole(role) => Some(self.console_role_tokens[role].clone()),
            Principal::EndUserToken => {
                // Fresh per call: a rotate cell may have voided the previous one.
                let minted = self
                    .admin
                    .send(
                        self.admin
                            .request(reqwest::Method::POST, "/v1/end-user-tokens")
                            .json(&json!({"user_id": "alice"})),
                    )
                    .await;
                assert_eq!(minted.status, 201);
                Some(minted.body["token"].as_str().unwrap().to_string())
            }
        }
    }

    /// A fresh target for a route with an id: alice's memory or file, a task, or a new read key.
    async fn path_for(&self, route: &Route) -> (String, Vec<String>) {
        if route.path.contains("{recall}") {
            let found = self
                .admin
                .search(
                    json!({"query": format!("{SEEDED}: what did alice ask?"), "user_id": "alice"}),
                )
                .await;
            let id = found.body["recall_id"].as_str().unwrap().to_string();
            // Recall events are written off the search's path: wait until it is readable.
            engram_tests::eventually("the recall event to be stored", || async {
                let stored = self
                    .admin
                    .send(
                        self.admin
                            .request(reqwest::Method::GET, &format!("/v1/recalls/{id}")),
                    )
                    .await;
                if stored.status == 200 {
                    Ok(())
                } else {
                    Err(stored.body.to_string())
                }
            })
            .await;
            return (route.path.replace("{recall}", &id), vec![id]);
        }
        if route.path.contains("{agentrun}") {
            let started = self
                .admin
                .send(
                    self.admin
                        .request(reqwest::Method::POST, "/v1/runs")
                        .json(&json!({"task": format!("{SEEDED}: a matrix run of alice"), "user_id": "alice"})),
                )
                .await;
            assert_eq!(started.status, 201, "{}", started.body);
            let id = started.body["run_id"].as_str().unwrap().to_string();
            return (route.path.replace("{agentrun}", &id), vec![id]);
        }
        if route.path.contains("{profile}") {
            let name = format!("matrix-{}", uuid::Uuid::now_v7().simple());
            let stored = self
                .admin
                .send(
                    self.admin
                        .request(
                            reqwest::Method::PUT,
                            &format!("/v1/retrieval-profiles/{name}"),
                        )
                        .json(&json!({"parameters": {"retrieval": "dense"}})),
                )
                .await;
            assert_eq!(stored.status, 200, "{}", stored.body);
            return (route.path.replace("{profile}", &name), Vec::new());
        }
        if route.path.contains("{set}") {
            let created = self
                .admin
                .send(self.admin.request(reqwest::Method::POST, "/v1/eval-sets").json(&json!({
                    "name": format!("target-{}", uuid::Uuid::now_v7()),
                    "cases": [{"query": "matrix target", "user_id": "alice", "expected_memory_ids": [uuid::Uuid::now_v7().to_string()]}],
                })))
                .await;
            assert_eq!(created.status, 201, "{}", created.body);
            let set_id = created.body["id"].as_str().unwrap().to_string();
            let mut ids = vec![set_id.clone()];
            let mut path = route.path.replace("{set}", &set_id);
            if path.contains("{run}") {
                let started = self
                    .admin
                    .send(
                        self.admin
                            .request(
                                reqwest::Method::POST,
                                &format!("/v1/eval-sets/{set_id}/runs"),
                            )
                            .json(&json!({})),
                    )
                    .await;
                assert_eq!(started.status, 202, "{}", started.body);
                let run_id = started.body["run"]["id"].as_str().unwrap().to_string();
                path = path.replace("{run}", &run_id);
                ids.push(run_id);
            }
            return (path, ids);
        }
        if route.path.contains("{memory}") {
            let memory = self
                .admin
                .add_one(json!({"content": format!("{SEEDED}: a matrix target of alice."), "user_id": "alice", "metadata": {"note": format!("{SEEDED}: her note")}}))
                .await;
            let id = memory["id"].as_str().unwrap().to_string();
            return (route.path.replace("{memory}", &id), vec![id]);
        }
        if route.path.contains("{task}") {
            let requested = self
                .admin
                .send(
                    self.admin
                        .request(reqwest::Method::POST, "/v1/subjects/zed/erasure"),
                )
                .await;
            assert_eq!(requested.status, 202, "{}", requested.body);
            let id = requested.body["id"].as_str().unwrap().to_string();
            return (route.path.replace("{task}", &id), vec![id]);
        }
        if route.path.contains("{file}") {
            let uploaded = self
                .admin
                .send(
                    self.admin
                        .request(
                            reqwest::Method::POST,
                            "/v1/files?name=target.md&user_id=alice",
                        )
                        .header("content-type", "text/markdown")
                        .body(format!("{SEEDED}: a file target of alice.")),
                )
                .await;
            assert_eq!(uploaded.status, 202, "{}", uploaded.body);
            let id = uploaded.body["file"]["id"].as_str().unwrap().to_string();
            // Deleting needs the ingest to have finished.
            let started = std::time::Instant::now();
            loop {
                let file = self
                    .admin
                    .send(
                        self.admin
                            .request(reqwest::Method::GET, &format!("/v1/files/{id}")),
                    )
                    .await;
                if file.body["status"] == "ingested" {
                    break;
                }
                assert!(
                    started.elapsed() < engram_tests::patience(),
                    "{}",
                    file.body
                );
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            return (route.path.replace("{file}", &id), vec![id]);
        }
        if route.path.contains("{state}") {
            let key = format!("k-{}", uuid::Uuid::now_v7());
            let written = self
                .admin
                .send(
                    self.admin
                        .request(
                            reqwest::Method::PUT,
                            &format!("/v1/sessions/matrix/state/{key}"),
                        )
                        .json(&json!({"value": {"note": format!("{SEEDED}: her state")}, "user_id": "alice"})),
                )
                .await;
            assert_eq!(written.status, 201, "{}", written.body);
            // The key is in the caller's own path, so an answer repeating it reveals nothing:
            // what must not leak is our value (the foreign GET is checked to be a 404).
            return (route.path.replace("{state}", &key), Vec::new());
        }
        if route.path.contains("{key}") {
            let created = self
                .admin
                .send(
                    self.admin
                        .request(reqwest::Method::POST, "/v1/keys")
                        // Within what the `admin` key holds, so it may roll it.
                        .json(&json!({"label": "target", "scopes": ["admin"]})),
                )
                .await;
            let id = created.body["key"]["id"].as_str().unwrap().to_string();
            return (route.path.replace("{key}", &id), vec![id]);
        }
        (route.path.to_string(), Vec::new())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_every_principal_as_the_scope_table_says() {
    let fixture = Fixture::new().await;
    // The matrix covers what is published: an operation of /openapi.json without a row here
    // would escape every check below.
    let uncovered = unmatrixed_operations(&fixture.server).await;
    assert!(
        uncovered.is_empty(),
        "published operations without a row in the security matrix: {uncovered:?}"
    );
    let own_memory = fixture
        .admin
        .add_one(json!({"content": format!("{SEEDED}: our own fact the foreign project must never see."), "user_id": "alice"}))
        .await;
    // alice's words in the other stores: a message, and a search that finds nothing (so its
    // query is listed among the empty queries of the recall metrics).
    let said = fixture
        .admin
        .send(
            fixture
                .admin
                .request(reqwest::Method::POST, "/v1/sessions/seeded/messages")
                .json(&json!({"user_id": "alice", "derive_memories": false,
                    "messages": [{"role": "user", "content": format!("{SEEDED}: a message of hers")}]})),
        )
        .await;
    assert_eq!(said.status, 201, "{}", said.body);
    let unanswered = fixture
        .admin
        .search(json!({"query": format!("{SEEDED}: a question nothing answers"), "user_id": "alice", "min_score": 1.0}))
        .await;
    assert_eq!(unanswered.status, 200, "{}", unanswered.body);
    assert_eq!(
        unanswered.body["results"],
        json!([]),
        "a search nothing answers"
    );
    let unanswered_id = unanswered.body["recall_id"].as_str().unwrap().to_string();
    engram_tests::eventually("the empty search's recall event to be stored", || async {
        let stored = fixture
            .admin
            .send(fixture.admin.request(
                reqwest::Method::GET,
                &format!("/v1/recalls/{unanswered_id}"),
            ))
            .await;
        if stored.status == 200 {
            Ok(())
        } else {
            Err(stored.body.to_string())
        }
    })
    .await;
    // Another agent's words, beside alice's: what the agent-bound key must never be given.
    let private = fixture
        .admin
        .add(json!([{"content": format!("{OTHER_AGENTS}: a private memory of another agent about alice."),
            "user_id": "alice", "agent_id": "other-agent", "visibility": "private"}]))
        .await;
    assert_eq!(private.status, 201, "{}", private.body);
    let their_message = fixture
        .admin
        .send(
            fixture
                .admin
                .request(reqwest::Method::POST, "/v1/sessions/matrix/messages")
                .json(&json!({"user_id": "alice", "agent_id": "other-agent", "derive_memories": false,
                    "messages": [{"role": "user", "content": format!("{OTHER_AGENTS}: a message to another agent")}]})),
        )
        .await;
    assert_eq!(their_message.status, 201, "{}", their_message.body);
    let their_state = fixture
        .admin
        .send(
            fixture
                .admin
                .request(reqwest::Method::PUT, "/v1/sessions/matrix/state/their-plan")
                .json(&json!({"value": {"note": format!("{OTHER_AGENTS}: their plan")}, "user_id": "alice", "agent_id": "other-agent"})),
        )
        .await;
    assert_eq!(their_state.status, 201, "{}", their_state.body);
    let own_ids = [own_memory["id"].as_str().unwrap().to_string()];
    let principals = [
        Principal::NoCredential,
        Principal::Garbage,
        Principal::ForeignAdmin,
        Principal::ScopedKey("memories:read"),
        Principal::ScopedKey("memories:write"),
        Principal::ScopedKey("memories:delete"),
        Principal::ScopedKey("memories:verify"),
        Principal::ScopedKey("admin"),
        Principal::AllScopes,
        Principal::AgentBound,
        Principal::EndUserToken,
        Principal::ConsoleSession,
        Principal::ConsoleRole("owner"),
        Principal::ConsoleRole("admin"),
        Principal::ConsoleRole("compliance"),
        Principal::ConsoleRole("analyst"),
        Principal::ConsoleRole("developer"),
    ];
    let http = reqwest::Client::new();
    let mut mismatches = Vec::new();
    let mut cells = 0;
    for route in ROUTES {
        for principal in &principals {
            let (path, target_ids) = fixture.path_for(route).await;
            let mut request = http.request(
                route.method.parse().unwrap(),
                format!("{}{path}", fixture.server.base_url),
            );
            if let Some(credential) = fixture.credential(principal).await {
                // A console session is offered both ways: as a bearer token and as the
                // console's own cookie.
                if matches!(principal, Principal::ConsoleRole(_)) {
                    request = request.header("Cookie", format!("engram_console={credential}"));
                }
                request = request.bearer_auth(credential);
            }
            if let Some(body) = body_for(route) {
                request = request.json(&body);
            }
            if route.path.ends_with("/cases/import") {
                let case = json!({"query": "matrix", "expected_memory_ids": [uuid::Uuid::now_v7().to_string()]});
                request = request
                    .header("content-type", "application/x-ndjson")
                    .body(format!("{case}\n"));
            }
            if route.path.starts_with("/v1/files?") {
                request = request
                    .header("content-type", "text/markdown")
                    .body("# Matrix\n\nA file of alice.");
            }
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            let text = response.text().await.unwrap_or_default();
            cells += 1;
            let expected = expected_status(route, principal);
            if status != expected {
                mismatches.push(format!(
                    "{} {} as {}: {status}, expected {expected}: {text:.200}",
                    route.method,
                    route.path,
                    principal.name()
                ));
            }
            // Content only for those who may read it: a key without `memories:read` gets
            // ids, states and counts, never alice's words, whatever the route answers.
            if matches!(
                principal,
                Principal::ScopedKey(
                    "admin" | "memories:write" | "memories:delete" | "memories:verify"
                )
            ) && text.contains(SEEDED)
            {
                mismatches.push(format!(
                    "{} {} as {} ({status}) carried alice's content: {text:.300}",
                    route.method,
                    route.path,
                    principal.name()
                ));
            }
            if matches!(principal, Principal::AgentBound) && text.contains(OTHER_AGENTS) {
                mismatches.push(format!(
                    "{} {} as the agent-bound key ({status}) carried another agent's words: {text:.300}",
                    route.method, route.path
                ));
            }
            if matches!(principal, Principal::ForeignAdmin) {
                for id in own_ids.iter().chain(target_ids.iter()) {
                    if status < 400 && text.contains(id.as_str()) {
                        mismatches.push(format!(
                            "{} {} as the foreign admin leaked id {id}",
                            route.method, route.path
                        ));
                    }
                }
                assert!(!text.contains(SEEDED), "{route:?}: {text}");
            }
        }
    }
    eprintln!(
        "security matrix: {} routes × {} principals = {cells} cells checked",
        ROUTES.len(),
        principals.len()
    );
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

/// Each `method path` of the published document that no row of `ROUTES` exercises (a row's
/// placeholders and fixed ids stand for the document's `{…}` segments).
async fn unmatrixed_operations(server: &TestServer) -> Vec<String> {
    let document: Value = reqwest::get(format!("{}/openapi.json", server.base_url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let covers = |route: &Route, method: &str, template: &str| {
        let path = route.path.split('?').next().unwrap_or(route.path);
        let ours: Vec<&str> = path.split('/').collect();
        let published: Vec<&str> = template.split('/').collect();
        route.method.eq_ignore_ascii_case(method)
            && ours.len() == published.len()
            && ours
                .iter()
                .zip(&published)
                .all(|(ours, published)| published.starts_with('{') || ours == published)
    };
    let mut uncovered = Vec::new();
    for (template, item) in document["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            if !ROUTES.iter().any(|route| covers(route, method, template)) {
                uncovered.push(format!("{} {template}", method.to_uppercase()));
            }
        }
    }
    uncovered
}

/// A guessing attack on one key id runs into the guesser's own rate limit (its address's:
/// failed authentications spend it, never the key's): of 10,000 wrong secrets only about the
/// burst plus the refill are answered at all, the rest are 429.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_wrong_secrets_against_one_key_id_are_throttled() {
    let server = TestServer::spawn().await.unwrap();
    let real_key = server.bootstrap.api_key.clone();
    let public_id = engram_core::access::api_key_public_id(&real_key)
        .unwrap()
        .to_string();
    let http = reqwest::Client::new();
    let started = std::time::Instant::now();
    let mut statuses: BTreeMap<u16, usize> = BTreeMap::new();
    let mut attempts = futures_like::Buffered::new(32);
    for attempt in 0..10_000u32 {
        let guess = format!("egk_live_{public_id}_{:040}", attempt);
        let request = http
            .get(format!("{}/v1/memories", server.base_url))
            .bearer_auth(guess)
            .send();
        attempts.push(tokio::spawn(async move {
            request
                .await
                .map(|response| response.status().as_u16())
                .unwrap_or(0)
        }));
        while let Some(status) = attempts.next_ready().await {
            *statuses.entry(status).or_default() += 1;
        }
    }
    for status in attempts.drain().await {
        *statuses.entry(status).or_default() += 1;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let checked = statuses.get(&401).copied().unwrap_or(0);
    let throttled = statuses.get(&429).copied().unwrap_or(0);
    eprintln!(
        "10,000 wrong secrets in {elapsed:.1} s: {checked} told the secret is wrong (401), {throttled} throttled (429)"
    );
    assert_eq!(checked + throttled, 10_000, "{statuses:?}");
    // Burst 200, refill 100/s: the rest must have been refused.
    let allowed = 200.0 + 100.0 * elapsed + 50.0;
    assert!((checked as f64) <= allowed, "{checked} > {allowed}");
    assert!(throttled >= 10_000 - allowed as usize);
}

/// Forged keys with valid checksums and made-up ids each cost a database lookup before their
/// client's bucket was consulted. Now a key not verified a moment ago spends its client's
/// bucket first: every lookup is answered 401, and once the bucket is empty the rest are 429
/// with no lookup at all (`engram_api_key_lookups_total` counts the lookups).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_keys_are_throttled_before_any_database_lookup() {
    const FORGED: usize = 300;
    let server = TestServer::spawn_fresh_with(&[
        ("ENGRAM_RATE_LIMIT_BURST", "20"),
        ("ENGRAM_RATE_LIMIT_PER_SECOND", "1"),
    ])
    .await
    .unwrap();
    let lookups = || async {
        let page = reqwest::get(&server.metrics_url)
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        engram_tests::metric_sample(&page, "engram_api_key_lookups_total", &[]).unwrap_or(0.0)
            as usize
    };
    let before = lookups().await;
    let http = reqwest::Client::new();
    let mut statuses: BTreeMap<u16, usize> = BTreeMap::new();
    for attempt in 0..FORGED {
        let forged = engram_core::access::format_api_key(
            engram_core::KeyEnvironment::Live,
            &format!("{attempt:016}"),
            &format!("{attempt:040}"),
        );
        let status = http
            .get(format!("{}/v1/memories", server.base_url))
            .bearer_auth(forged)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16();
        *statuses.entry(status).or_default() += 1;
    }
    let looked_up = lookups().await - before;
    let unknown = statuses.get(&401).copied().unwrap_or(0);
    let throttled = statuses.get(&429).copied().unwrap_or(0);
    eprintln!(
        "{FORGED} forged keys with valid checksums: {unknown} looked up and refused (401), {throttled} throttled before any lookup (429); {looked_up} database lookups"
    );
    assert_eq!(unknown + throttled, FORGED, "{statuses:?}");
    assert!(throttled > 0, "the client's bucket ran out: {statuses:?}");
    assert_eq!(
        looked_up, unknown,
        "only the keys answered 401 cost a lookup: {statuses:?}"
    );
}

/// A small bounded-concurrency helper (no extra crate): at most `limit` requests in flight.
mod futures_like {
    use std::collections::VecDeque;
    use tokio::task::JoinHandle;

    pub struct Buffered {
        limit: usize,
        in_flight: VecDeque<JoinHandle<u16>>,
    }

    impl Buffered {
        pub fn new(limit: usize) -> Self {
            Self {
                limit,
                in_flight: VecDeque::new(),
            }
        }

        pub fn push(&mut self, task: JoinHandle<u16>) {
            self.in_flight.push_back(task);
        }

        /// Waits for the oldest request while the window is full.
        pub async fn next_ready(&mut self) -> Option<u16> {
            if self.in_flight.len() < self.limit {
                return None;
            }
            let oldest = self.in_flight.pop_front()?;
            Some(oldest.await.unwrap_or(0))
        }

        pub async fn drain(&mut self) -> Vec<u16> {
            let mut statuses = Vec::new();
            while let Some(task) = self.in_flight.pop_front() {
                statuses.push(task.await.unwrap_or(0));
            }
            statuses
        }
    }
}
