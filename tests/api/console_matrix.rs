//! The console's role table, function by function: every console server function called by
//! every console role answers as its role rule says, and every key a role mints or rolls works.

use engram_tests::{ApiClient, TestServer};
use serde_json::{Value, json};
use std::sync::Mutex;

/// The rules of `ConsoleRole` (services/core/src/access.rs) a console function checks.
#[derive(Clone, Copy, Debug)]
enum RoleRule {
    ReadMemoryContent,
    ManageApiKeys,
    /// `can_manage_members`, and `can_assign` for the role handed out or taken away.
    ManageMembers,
    ReadUsage,
    ManageSpendLimits,
    ReadAuditLog,
    /// Add and withdraw the organization's prices.
    ManagePrices,
    /// `may_see_recall_quality`: `can_read_usage || can_read_memory_content`.
    SeeRecallQuality,
}

impl RoleRule {
    /// The roles the rule lets through, as `ConsoleRole` defines them.
    fn allows(self, role: &str) -> bool {
        let allowed: &[&str] = match self {
            RoleRule::ReadMemoryContent => &["owner", "admin", "compliance"],
            RoleRule::ReadAuditLog => &["owner", "admin", "compliance"],
            RoleRule::ManageApiKeys => &["owner", "admin", "developer"],
            RoleRule::ManageMembers => &["owner", "admin"],
            RoleRule::ManageSpendLimits => &["owner", "admin"],
            RoleRule::ManagePrices => &["owner", "admin"],
            RoleRule::ReadUsage => &["owner", "admin", "analyst"],
            RoleRule::SeeRecallQuality => &["owner", "admin", "compliance", "analyst"],
        };
        allowed.contains(&role)
    }
}

const ROLES: [&str; 5] = ["owner", "admin", "compliance", "analyst", "developer"];

/// About the session itself, not a role: outside the matrix (`session` is checked per role).
const SESSION_FUNCTIONS: [&str; 6] = [
    "login",
    "logout",
    "session",
    // The account's own console language: every role chooses its own.
    "language",
    "invitation",
    "accept_invitation",
];

/// Every other console server function (web/console/src/api.rs) and the rule its backend
/// (services/gateway/src/console.rs, console/recall.rs, console/usage.rs) checks first.
const CONSOLE_FUNCTIONS: &[(&str, RoleRule)] = &[
    ("memories", RoleRule::ReadMemoryContent), // list_memories: the table is content
    ("memory", RoleRule::ReadMemoryContent),   // memory_detail: content and history
    ("correct_memory", RoleRule::ReadMemoryContent), // a new version of the content
    ("delete_memory", RoleRule::ReadMemoryContent), // with a reason and a confirmation
    ("set_memory_flag", RoleRule::ReadMemoryContent), // immutable / legal hold
    ("preview_bulk_delete", RoleRule::ReadMemoryContent), // counts what a filter matches
    ("bulk_delete", RoleRule::ReadMemoryContent), // deletes what a filter matches
    ("subject", RoleRule::ReadMemoryContent),  // subject_summary: an end-user's holds
    ("find_subjects", RoleRule::ReadMemoryContent), // end-users by id prefix or metadata
    ("request_erasure", RoleRule::ReadMemoryContent), // queues a subject erasure
    ("request_organization_erasure", RoleRule::ReadMemoryContent), // in every project
    ("settings", RoleRule::ReadMemoryContent), // governance_settings with the dry run
    ("save_settings", RoleRule::ReadMemoryContent), // the same rule as reading them
    ("usage", RoleRule::ReadUsage),            // require_role(can_read_usage)
    ("recall", RoleRule::SeeRecallQuality),    // build_recall_dashboard
    // A case probes content (its query against expected ids or contents): content roles.
    ("create_evaluation_set", RoleRule::ReadMemoryContent),
    ("run_evaluation_set", RoleRule::SeeRecallQuality), // queue_evaluation_run
    ("recall_event", RoleRule::SeeRecallQuality),       // content shown to content roles only
    ("runs", RoleRule::ReadMemoryContent),              // run_list: tasks are the agent's words
    ("run", RoleRule::ReadMemoryContent),               // run_timeline: memories then and now
    ("recalls", RoleRule::ReadMemoryContent),           // recall_list: query texts
    ("save_limits", RoleRule::ManageSpendLimits),       // require_role(can_manage_spend_limits)
    ("price_book", RoleRule::ReadUsage),                // prices read with usage
    ("add_organization_price", RoleRule::ManagePrices), // the organization's own price
    ("withdraw_organization_price", RoleRule::ManagePrices), // a scheduled one
    ("organization_statement", RoleRule::ReadUsage),    // every project's costs
    ("sweep_now", RoleRule::ReadMemoryContent),         // sweep_retention_now: deletes what is due
    ("erasure_status", RoleRule::ReadMemoryContent),    // an erasure's progress and receipt
    ("audit", RoleRule::ReadAuditLog),                  // audit_log
    ("keys", RoleRule::ManageApiKeys),                  // list_keys
    ("create_key", RoleRule::ManageApiKeys),            // then only grantable scopes
    ("revoke_key", RoleRule::ManageApiKeys),            // then the key's scopes must be grantable
    ("roll_key", RoleRule::ManageApiKeys),              // then the key's scopes must be grantable
    ("members", RoleRule::ManageMembers),               // require_role(can_manage_members)
    ("invite_member", RoleRule::ManageMembers),         // assignable_role("analyst")
    ("revoke_invitation", RoleRule::ManageMembers),     // require_role(can_manage_members)
    ("change_member_role", RoleRule::ManageMembers),    // assignable_role + member_to_manage
    ("remove_member", RoleRule::ManageMembers),         // require_role + member_to_manage
];

/// Each scope and the status of the `/v1` call it allows (see `Matrix::use_scope`).
const PROBED_SCOPES: [(&str, u16); 4] = [
    ("memories:read", 200),
    ("memories:write", 201),
    ("memories:delete", 204),
    ("admin", 200),
];

const SAMPLE_USER: &str = "matrix-sample";
const SAMPLE_QUERY: &str = "how does the customer like to be contacted";
const REASON: (&str, &str) = ("reason", "the console matrix");

/// The scopes each role ticks when it mints a key: a developer only what it may grant.
fn scopes_asked_by(role: &str) -> &'static [&'static str] {
    match role {
        "owner" => &[
            "memories:read",
            "memories:write",
            "memories:delete",
            "admin",
        ],
        "admin" => &["memories:read", "memories:write"],
        _ => &["memories:write"],
    }
}

/// The create form's check box of a scope.
fn check_box_of(scope: &str) -> &'static str {
    match scope {
        "memories:read" => "read",
        "memories:write" => "write",
        "memories:delete" => "delete",
        _ => "admin",
    }
}

/// The endpoint of every `#[server]` function of the console, from its source.
fn console_functions_in_the_source() -> Vec<String> {
    let path = engram_tests::workspace_root().join("web/console/src/api.rs");
    let source = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()));
    let declarations = source.split("endpoint = \"").skip(1);
    let names = declarations.filter_map(|rest| rest.split('"').next());
    names.map(str::to_string).collect()
}

/// The string at `pointer` (a JSON pointer) in `value`, or a panic showing `value`.
fn text_at(value: &Value, pointer: &str) -> String {
    let text = value.pointer(pointer).and_then(Value::as_str);
    text.unwrap_or_else(|| panic!("no {pointer} in {value}"))
        .to_string()
}

/// A body cut to a length that keeps the list of mismatches readable.
fn short(body: &Value) -> String {
    body.to_string().chars().take(300).collect()
}

enum ConsoleArguments {
    Form(Vec<(String, String)>),
    /// For the functions declared with `input = Json`: the keys are the argument names.
    Json(Value),
}

fn form(fields: &[(&str, &str)]) -> ConsoleArguments {
    let owned = fields
        .iter()
        .map(|(name, value)| (name.to_string(), value.to_string()));
    ConsoleArguments::Form(owned.collect())
}

/// A signed-in console member.
struct Member {
    role: &'static str,
    /// Both session cookies, replaced whenever a response renews them.
    cookies: Mutex<String>,
}

impl Member {
    fn cookie(&self) -> String {
        let cookies = self.cookies.lock();
        cookies.map(|cookies| cookies.clone()).unwrap_or_default()
    }

    fn renew(&self, set_cookies: String) {
        let renewed = set_cookies.contains("engram_console=")
            && set_cookies.contains("engram_console_refresh=");
        if renewed && let Ok(mut cookies) = self.cookies.lock() {
            *cookies = set_cookies;
        }
    }
}

fn session_cookies(response: &reqwest::Response) -> String {
    let set_cookies = response.headers().get_all("set-cookie");
    let pairs = set_cookies
        .iter()
        .filter_map(|value| value.to_str().ok())
        .filter_map(|value| value.split(';').next())
        .filter(|pair| !pair.ends_with('='));
    pairs.collect::<Vec<_>>().join("; ")
}

async fn sign_in(
    http: &reqwest::Client,
    server: &TestServer,
    role: &'static str,
    email: &str,
    password: &str,
) -> Member {
    let login = format!("{}/console/api/login", server.base_url);
    let request = http.post(login).header("Origin", &server.base_url);
    let response = request
        .form(&[("email", email), ("password", password)])
        .send()
        .await;
    let response = response.unwrap_or_else(|error| panic!("signing in as {role}: {error}"));
    let cookies = session_cookies(&response);
    assert!(
        cookies.contains("engram_console=") && cookies.contains("engram_console_refresh="),
        "signing in as {role} ({email}) failed: {}",
        response.status()
    );
    let cookies = Mutex::new(cookies);
    Member { role, cookies }
}

/// One server, the five signed-in roles, and the targets that calls only read.
struct Matrix {
    server: TestServer,
    /// The bootstrap key (every scope): makes fresh targets through `/v1`.
    api: ApiClient,
    http: reqwest::Client,
    project_id: String,
    /// In the order of [`ROLES`].
    members: Vec<Member>,
    sample_memory_id: String,
    recall_id: String,
    agent_run_id: String,
    evaluation_set_id: String,
    erasure_task_id: String,
    /// The project's PII mode and retention as they are, as the settings form sends them.
    governance_fields: Vec<(String, String)>,
}

impl Matrix {
    async fn set_up() -> Self {
        let server = TestServer::spawn().await.expect("the server starts");
        // No redirects followed: a console answer is looked at as it is.
        let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none());
        let http = http.build().expect("an HTTP client");
        let bootstrap = server.bootstrap.clone();
        let (email, password) = (&bootstrap.console_email, &bootstrap.console_password);
        let mut members = vec![sign_in(&http, &server, "owner", email, password).await];
        for role in ROLES.into_iter().skip(1) {
            let created = server.create_member(&format!("{role}@example.com"), role);
            let (email, password) = (text_at(&created, "/email"), text_at(&created, "/password"));
            members.push(sign_in(&http, &server, role, &email, &password).await);
        }
        let mut matrix = Self {
            api: server.client(),
            http,
            server,
            project_id: bootstrap.project_id.clone(),
            members,
            sample_memory_id: String::new(),
            recall_id: String::new(),
            agent_run_id: String::new(),
            evaluation_set_id: String::new(),
            erasure_task_id: String::new(),
            governance_fields: Vec::new(),
        };
        matrix.sample_memory_id = matrix.fresh_memory(SAMPLE_USER).await;
        let search = json!({"query": SAMPLE_QUERY, "user_id": SAMPLE_USER});
        let found = matrix.api.search(search).await;
        assert_eq!(found.status, 200, "{}", found.body);
        matrix.recall_id = text_at(&found.body, "/recall_id");
        let run = json!({"task": "matrix run", "user_id": SAMPLE_USER});
        let run = matrix.created_through_v1("/v1/runs", run).await;
        matrix.agent_run_id = text_at(&run, "/run_id");
        let case = json!({"query": SAMPLE_QUERY, "expected_memory_ids": [matrix.sample_memory_id]});
        let set = json!({"name": "matrix set", "cases": [case]});
        let set = matrix.created_through_v1("/v1/eval-sets", set).await;
        matrix.evaluation_set_id = text_at(&set, "/id");

        let owner = matrix.member("owner");
        let subject = [("user_id", "erased-before"), ("confirm", "erased-before")];
        let erasure = matrix.project_form(&subject);
        let (status, erasure) = matrix.call(owner, "request_erasure", &erasure).await;
        assert_eq!(status, 200, "{erasure}");
        let erasure_task_id = text_at(&erasure, "/task_id");
        let (status, settings) = matrix
            .call(owner, "settings", &matrix.project_form(&[]))
            .await;
        assert_eq!(status, 200, "{settings}");
        let pii = text_at(&settings, "/pii_redaction");
        let mut governance_fields = vec![("pii_redaction".to_string(), pii)];
        for entry in settings["retention_days"].as_array().into_iter().flatten() {
            if let (Some(kind), Some(days)) = (entry[0].as_str(), entry[1].as_u64()) {
                governance_fields.push((kind.to_string(), days.to_string()));
            }
        }
        matrix.erasure_task_id = erasure_task_id;
        matrix.governance_fields = governance_fields;
        matrix
    }

    fn member(&self, role: &str) -> &Member {
        let found = self.members.iter().find(|member| member.role == role);
        found.unwrap_or_else(|| panic!("no {role} signed in"))
    }

    /// (status, JSON body) of a console server function, called as the browser's fetch does.
    async fn call(
        &self,
        member: &Member,
        function: &str,
        arguments: &ConsoleArguments,
    ) -> (u16, Value) {
        let url = format!("{}/console/api/{function}", self.server.base_url);
        // State-changing console requests from another origin get 403: come from this one.
        let request = self.http.post(url).header("Origin", &self.server.base_url);
        let request = request.header("Cookie", member.cookie());
        let request = match arguments {
            ConsoleArguments::Form(fields) => request.form(fields),
            ConsoleArguments::Json(body) => request.json(body),
        };
        let response = request.send().await;
        let response = response.unwrap_or_else(|error| panic!("{function}: {error}"));
        let status = response.status().as_u16();
        member.renew(session_cookies(&response));
        let text = response.text().await.unwrap_or_default();
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, body)
    }

    /// A form naming this project, then `fields`.
    fn project_form(&self, fields: &[(&str, &str)]) -> ConsoleArguments {
        let mut all = vec![("project_id", self.project_id.as_str())];
        all.extend_from_slice(fields);
        form(&all)
    }

    /// POST `body` to `path` with the bootstrap key; the created object (201).
    async fn created_through_v1(&self, path: &str, body: Value) -> Value {
        let request = self.api.request(reqwest::Method::POST, path).json(&body);
        let created = self.api.send(request).await;
        assert_eq!(created.status, 201, "POST {path}: {}", created.body);
        created.body
    }

    async fn fresh_memory(&self, user_id: &str) -> String {
        let content = format!("{user_id} prefers to be called in the morning.");
        let memory = json!({"content": content, "user_id": user_id});
        text_at(&self.api.add_one(memory).await, "/id")
    }

    /// Valid arguments for `function` called by `role`, with a fresh target where the call
    /// consumes one: the role is the only reason left to refuse.
    async fn arguments_for(&self, function: &str, role: &str) -> ConsoleArguments {
        let project = self.project_id.as_str();
        let tag = format!("{function}-{role}");
        match function {
            "memories" => ConsoleArguments::Json(json!({"filters": {"project_id": project}})),
            "memory" => self.project_form(&[("memory_id", self.sample_memory_id.as_str())]),
            "correct_memory" => {
                let memory = self.fresh_memory(&tag).await;
                let content = ("content", "Prefers to be called in the afternoon.");
                self.project_form(&[("memory_id", memory.as_str()), content, REASON])
            }
            "delete_memory" => {
                let memory = self.fresh_memory(&tag).await;
                self.project_form(&[("memory_id", memory.as_str()), REASON, ("confirm", "on")])
            }
            "set_memory_flag" => {
                let memory = self.fresh_memory(&tag).await;
                let target = ("memory_id", memory.as_str());
                self.project_form(&[target, ("flag", "immutable"), ("value", "on"), REASON])
            }
            "preview_bulk_delete" => {
                let filters = json!({"project_id": project, "user_id": SAMPLE_USER});
                ConsoleArguments::Json(json!({"filters": filters}))
            }
            "bulk_delete" => {
                let _only_match = self.fresh_memory(&tag).await;
                let filters = json!({"project_id": project, "user_id": tag});
                let body = json!({"filters": filters, "expected": 1, "reason": REASON.1});
                ConsoleArguments::Json(body)
            }
            "subject" => self.project_form(&[("user_id", SAMPLE_USER)]),
            "find_subjects" => self.project_form(&[("id_prefix", SAMPLE_USER)]),
            "request_erasure" | "request_organization_erasure" => {
                self.project_form(&[("user_id", tag.as_str()), ("confirm", tag.as_str())])
            }
            "run" => self.project_form(&[("run_id", self.agent_run_id.as_str())]),
            "settings" | "usage" | "recall" | "save_limits" | "sweep_now" | "audit" | "keys"
            | "runs" | "recalls" => self.project_form(&[]),
            "save_settings" => {
                let fields = self.governance_fields.iter();
                let fields: Vec<(&str, &str)> =
                    fields.map(|(k, v)| (k.as_str(), v.as_str())).collect();
                self.project_form(&fields)
            }
            "create_evaluation_set" => {
                // Expected memory ids, not contents: a probe of content all the same.
                let case =
                    json!({"query": SAMPLE_QUERY, "expected_memory_ids": [self.sample_memory_id]});
                let (name, cases) = (format!("matrix set {tag}"), case.to_string());
                let fields = [
                    ("name", name.as_str()),
                    ("k", "10"),
                    ("cases_jsonl", cases.as_str()),
                ];
                self.project_form(&fields)
            }
            "run_evaluation_set" => {
                self.project_form(&[("set_id", self.evaluation_set_id.as_str())])
            }
            "recall_event" => self.project_form(&[("recall_id", self.recall_id.as_str())]),
            "erasure_status" => self.project_form(&[("task_id", self.erasure_task_id.as_str())]),
            "create_key" => {
                let label = format!("minted by {role}");
                let mut fields = vec![("label", label.as_str())];
                let boxes = scopes_asked_by(role)
                    .iter()
                    .map(|scope| (check_box_of(scope), "on"));
                fields.extend(boxes);
                self.project_form(&fields)
            }
            "revoke_key" | "roll_key" => {
                // `memories:write`: within what every key-managing role may revoke or roll; the
                // member's own key where it may make one (a developer manages only the keys
                // it made), else one the project's key made.
                let asked = self.project_form(&[("label", tag.as_str()), ("write", "on")]);
                let (status, own) = self.call(self.member(role), "create_key", &asked).await;
                let key_id = if status == 200 {
                    text_at(&own, "/key/id")
                } else {
                    let key = json!({"label": tag, "scopes": ["memories:write"]});
                    let key = self.created_through_v1("/v1/keys", key).await;
                    text_at(&key, "/key/id")
                };
                self.project_form(&[("key_id", key_id.as_str())])
            }
            "price_book" | "organization_statement" => form(&[]),
            "add_organization_price" => form(&[
                ("unit", "searches"),
                ("price", "0.0004"),
                ("per", "1"),
                ("currency", "USD"),
            ]),
            "withdraw_organization_price" => {
                let later =
                    (chrono::Utc::now().date_naive() + chrono::Duration::days(30)).to_string();
                let scheduled = form(&[
                    ("unit", "searches"),
                    ("price", "0.0009"),
                    ("currency", "USD"),
                    ("effective_from", later.as_str()),
                ]);
                let owner = self.member("owner");
                let (status, id) = self.call(owner, "add_organization_price", &scheduled).await;
                assert_eq!(status, 200, "scheduling a price: {id}");
                let id = id
                    .as_str()
                    .unwrap_or_else(|| panic!("a price id: {id}"))
                    .to_string();
                form(&[("price_id", id.as_str())])
            }
            "members" => form(&[]),
            "invite_member" => {
                let email = format!("invited-by-{role}@example.com");
                form(&[("email", email.as_str()), ("role", "analyst")])
            }
            "revoke_invitation" => {
                let email = format!("withdrawn-for-{role}@example.com");
                let invitation = form(&[("email", email.as_str()), ("role", "analyst")]);
                let owner = self.member("owner");
                let (status, invited) = self.call(owner, "invite_member", &invitation).await;
                assert_eq!(status, 200, "inviting {email}: {invited}");
                form(&[(
                    "invitation_id",
                    text_at(&invited, "/invitation/id").as_str(),
                )])
            }
            "change_member_role" => {
                let email = format!("rerole-by-{role}@example.com");
                let member = self.server.create_member(&email, "developer");
                let member_id = text_at(&member, "/account_id");
                form(&[("member_id", member_id.as_str()), ("role", "analyst")])
            }
            "remove_member" => {
                let email = format!("removed-by-{role}@example.com");
                let member = self.server.create_member(&email, "analyst");
                form(&[("member_id", text_at(&member, "/account_id").as_str())])
            }
            other => panic!("no arguments for the console function {other}: add them here"),
        }
    }

    /// (status, body) of the `/v1` call that needs `scope`, made with `key`.
    async fn use_scope(&self, key: &ApiClient, scope: &str, tag: &str) -> (u16, Value) {
        let response = match scope {
            "memories:read" => key.search(json!({"query": SAMPLE_QUERY})).await,
            "memories:write" => {
                let memory = json!({"content": format!("Written by {tag}."), "user_id": tag});
                key.add(json!([memory])).await
            }
            "memories:delete" => {
                let memory = self.fresh_memory(&format!("deleted-{tag}")).await;
                key.delete(&memory).await
            }
            "admin" => {
                key.send(key.request(reqwest::Method::GET, "/v1/audit"))
                    .await
            }
            other => panic!("no /v1 call needs the scope {other}"),
        };
        (response.status, response.body)
    }
}

/// A key a role got from `create_key` or `roll_key`, and the scopes it must hold.
struct MintedKey {
    made_by: &'static str,
    function: &'static str,
    secret: String,
    scopes: Vec<String>,
}

impl MintedKey {
    /// The key in a successful answer of `function` to `role`; a mismatch when the key row
    /// does not show the scopes it must hold.
    fn from_answer(
        role: &'static str,
        function: &'static str,
        body: &Value,
        mismatches: &mut Vec<String>,
    ) -> Self {
        let scopes: Vec<String> = match function {
            "create_key" => scopes_asked_by(role)
                .iter()
                .map(|scope| scope.to_string())
                .collect(),
            // Rolled: the `memories:write` key made for the call keeps its scopes.
            _ => vec!["memories:write".to_string()],
        };
        let granted = body["key"]["scopes"].as_array().into_iter().flatten();
        let mut granted: Vec<String> = granted
            .filter_map(|scope| scope.as_str().map(str::to_string))
            .collect();
        let mut wanted = scopes.clone();
        granted.sort();
        wanted.sort();
        if granted != wanted {
            mismatches.push(format!(
                "{function} as {role}: {granted:?}, expected {wanted:?}"
            ));
        }
        let secret = text_at(body, "/secret");
        Self {
            made_by: role,
            function,
            secret,
            scopes,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_console_server_function_answers_every_role_as_the_role_table_says() {
    let declared = console_functions_in_the_source();
    for function in &declared {
        let in_table = CONSOLE_FUNCTIONS.iter().any(|(name, _)| name == function);
        let about_the_session = SESSION_FUNCTIONS.contains(&function.as_str());
        assert!(
            in_table || about_the_session,
            "{function} is missing from CONSOLE_FUNCTIONS"
        );
    }
    for (function, _) in CONSOLE_FUNCTIONS {
        assert!(
            declared.iter().any(|name| name == function),
            "no console function {function}"
        );
    }

    let matrix = Matrix::set_up().await;
    let mut mismatches = Vec::new();
    for member in &matrix.members {
        let (status, session) = matrix.call(member, "session", &form(&[])).await;
        if status != 200 || session["account"]["role"] != member.role {
            mismatches.push(format!(
                "session as {}: {status}: {}",
                member.role,
                short(&session)
            ));
        }
    }

    let mut cells = 0;
    let mut minted = Vec::new();
    for &(function, rule) in CONSOLE_FUNCTIONS {
        for member in &matrix.members {
            let arguments = matrix.arguments_for(function, member.role).await;
            let (status, body) = matrix.call(member, function, &arguments).await;
            cells += 1;
            let allowed = rule.allows(member.role);
            // A refusal names the role: a 403 for another reason (the origin check) is no pass.
            let (as_expected, expected) = if allowed {
                ((200..300).contains(&status), "2xx")
            } else {
                let names_the_role = body.to_string().contains(member.role);
                (status == 403 && names_the_role, "403 naming the role")
            };
            let role = member.role;
            if !as_expected {
                let body = short(&body);
                mismatches.push(format!(
                    "{function} as {role}: {status}, expected {expected} ({rule:?}): {body}"
                ));
            } else if allowed && matches!(function, "create_key" | "roll_key") {
                minted.push(MintedKey::from_answer(
                    role,
                    function,
                    &body,
                    &mut mismatches,
                ));
            }
        }
    }

    // `set_memory_flag`'s other settings go to their own use cases (verification, visibility):
    // each answers the role table too.
    for member in &matrix.members {
        for (flag, value) in [("verified", "on"), ("visibility", "private")] {
            let tag = format!("set_memory_flag-{flag}-{}", member.role);
            let memory = matrix
                .api
                .add_one(json!({"content": format!("{tag} note"), "user_id": tag, "agent_id": "matrix-agent"}))
                .await;
            let memory = text_at(&memory, "/id");
            let arguments = matrix.project_form(&[
                ("memory_id", memory.as_str()),
                ("flag", flag),
                ("value", value),
                REASON,
            ]);
            let (status, body) = matrix.call(member, "set_memory_flag", &arguments).await;
            cells += 1;
            let allowed = RoleRule::ReadMemoryContent.allows(member.role);
            let as_expected = if allowed {
                (200..300).contains(&status)
            } else {
                status == 403 && body.to_string().contains(member.role)
            };
            if !as_expected {
                let role = member.role;
                let body = short(&body);
                mismatches.push(format!(
                    "set_memory_flag {flag}={value} as {role}: {status}: {body}"
                ));
            }
        }
    }

    // Mint or roll a key, then use it: it does exactly what its scopes allow.
    let mut key_cells = 0;
    for key in &minted {
        let client = matrix.server.client_with_key(&key.secret);
        for (scope, success) in PROBED_SCOPES {
            let tag = format!("{}-{}-{scope}", key.function, key.made_by);
            let (status, body) = matrix.use_scope(&client, scope, &tag).await;
            key_cells += 1;
            let holds = key.scopes.iter().any(|held| held == scope);
            let expected = if holds { success } else { 403 };
            if status != expected {
                let who = format!("the key {} got from {}", key.made_by, key.function);
                let body = short(&body);
                mismatches.push(format!(
                    "{scope} with {who}: {status}, expected {expected}: {body}"
                ));
            }
        }
    }
    if minted.len() != 6 {
        let count = minted.len();
        mismatches.push(format!(
            "{count} keys minted or rolled, expected 6 (3 roles × 2)"
        ));
    }

    // Refused for what the role may hand on: a developer asking for an `admin` key (that
    // expected contents are refused to an analyst is access_holes.rs's).
    let escalation = [("label", "escalation"), ("write", "on"), ("admin", "on")];
    let developer = matrix.member("developer");
    let (status, body) = matrix
        .call(developer, "create_key", &matrix.project_form(&escalation))
        .await;
    if status != 403 || !body.to_string().contains("admin") {
        mismatches.push(format!(
            "create_key admin=on as developer: {status}: {}",
            short(&body)
        ));
    }
    let owner = matrix.member("owner");
    let (_, listing) = matrix.call(owner, "keys", &matrix.project_form(&[])).await;
    if listing.to_string().contains("escalation") {
        mismatches.push(format!("the refused key exists: {}", short(&listing)));
    }

    let (functions, roles) = (CONSOLE_FUNCTIONS.len(), ROLES.len());
    eprintln!("console matrix: {functions} functions × {roles} roles = {cells} cells");
    let (key_count, scope_count) = (minted.len(), PROBED_SCOPES.len());
    eprintln!(
        "console matrix: {key_count} keys minted or rolled × {scope_count} scopes = {key_cells}"
    );
    assert!(
        mismatches.is_empty(),
        "{} mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}
