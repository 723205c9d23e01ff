//! Drives the console in headless Chromium (playwright-core, `tests/browser/console.spec.mjs`)
//! against a real server seeded through the API: login, memory list, paging, filter, logout.

use engram_tests::{TestServer, workspace_root};
use serde_json::{Value, json};
use std::process::Command;

#[tokio::test]
async fn the_console_logs_in_lists_and_filters_memories_in_a_real_browser() {
    let browser_dir = workspace_root().join("tests/browser");
    assert!(
        browser_dir.join("node_modules/playwright-core").exists(),
        "playwright-core is not installed: run `make test` (it runs `npm ci` in tests/browser)"
    );
    assert!(
        std::path::Path::new("/usr/bin/chromium").exists(),
        "Chromium is not installed: run `make setup`"
    );
    let server = TestServer::spawn().await.unwrap();
    let api = server.client();
    // More than one page of older memories, so the list pages (the newest come last).
    let older: Vec<serde_json::Value> = (1..=57)
        .map(|n| json!({"content": format!("Older note number {n:02}."), "user_id": "archivist"}))
        .collect();
    let response = api.add(json!(older)).await;
    assert_eq!(response.status, 201, "{}", response.body);
    let contents = [
        "Prefers window seats on long flights.",
        "Allergic to shellfish.",
        "Runs the weekly ops review on Mondays.",
    ];
    let response = api
        .add(json!([
            {"content": contents[0], "user_id": "traveller-1", "kind": "preference",
             "metadata": {"trip": "lisbon"}, "occurred_at": "2026-06-01T10:00:00Z"},
            {"content": contents[1], "user_id": "traveller-1", "kind": "semantic"},
            {"content": contents[2], "agent_id": "ops-bot", "kind": "procedural"},
        ]))
        .await;
    assert_eq!(response.status, 201);
    // A memory of another project must never show up in this console project's list.
    let (_, other_key) = server.create_project("other").unwrap();
    server
        .client_with_key(&other_key)
        .add_one(json!({"content": "Other project's secret."}))
        .await;

    let base_url = server.base_url.clone();
    let email = server.bootstrap.console_email.clone();
    let password = server.bootstrap.console_password.clone();
    let expected = serde_json::to_string(&contents).unwrap();
    let output = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .arg("console.spec.mjs")
            .current_dir(&browser_dir)
            .env("ENGRAM_URL", base_url)
            .env("ENGRAM_CONSOLE_EMAIL", email)
            .env("ENGRAM_CONSOLE_PASSWORD", password)
            .env("ENGRAM_EXPECT_CONTENTS", expected)
            .env("ENGRAM_EXPECT_TOTAL", "60")
            .env("ENGRAM_DATED_CONTENT", contents[0])
            .env("ENGRAM_FORBIDDEN_CONTENTS", "[\"Other project's secret.\"]")
            .output()
    })
    .await
    .unwrap()
    .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(
        output.status.success(),
        "browser test failed:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains(" passed, 0 failed"),
        "browser test summary missing:\n{stdout}"
    );
}

#[tokio::test]
async fn the_console_shows_a_verified_audit_log_filters_and_exports_it() {
    let browser_dir = workspace_root().join("tests/browser");
    let server = TestServer::spawn().await.unwrap();
    let api = server.client();
    // More writes than a page of the log holds (first: the newest page still holds the rest).
    for number in 0..105 {
        api.add_one(json!({"content": format!("Note number {number}."), "user_id": "u-2"}))
            .await;
    }
    let secret = "The vault combination is 31-7-22.";
    let stored = api
        .add_one(json!({"content": secret, "user_id": "u-1"}))
        .await;
    let id = stored["id"].as_str().unwrap();
    assert_eq!(
        api.patch(
            id,
            None,
            json!({"content": "The vault combination changed.", "reason": "the owner changed it"})
        )
        .await
        .status,
        200
    );
    assert_eq!(api.delete(id).await.status, 204);
    let created = api
        .send(
            api.request(reqwest::Method::POST, "/v1/keys")
                .json(&json!({"label": "ci", "scopes": ["memories:read"]})),
        )
        .await;
    assert_eq!(created.status, 201);
    api.add_one(json!({"content": "Something to look at in the console."}))
        .await;

    let base_url = server.base_url.clone();
    let email = server.bootstrap.console_email.clone();
    let password = server.bootstrap.console_password.clone();
    let expected_actions = serde_json::to_string(&[
        "memory.created",
        "memory.updated",
        "memory.deleted",
        "api_key.created",
        "console.login",
        "console.login_failed",
        "memory.content_viewed",
    ])
    .unwrap();
    let forbidden = serde_json::to_string(&[secret, "The vault combination changed."]).unwrap();
    let output = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .arg("audit.spec.mjs")
            .current_dir(&browser_dir)
            .env("ENGRAM_URL", base_url)
            .env("ENGRAM_CONSOLE_EMAIL", email)
            .env("ENGRAM_CONSOLE_PASSWORD", password)
            .env("ENGRAM_EXPECT_ACTIONS", expected_actions)
            .env("ENGRAM_FORBIDDEN_TEXT", forbidden)
            .output()
    })
    .await
    .unwrap()
    .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(
        output.status.success(),
        "browser test failed:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains(" passed, 0 failed"),
        "summary missing:\n{stdout}"
    );
}

#[tokio::test]
async fn the_console_creates_revokes_and_rolls_api_keys() {
    let browser_dir = workspace_root().join("tests/browser");
    let server = TestServer::spawn().await.unwrap();
    let base_url = server.base_url.clone();
    let email = server.bootstrap.console_email.clone();
    let password = server.bootstrap.console_password.clone();
    let output = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .arg("keys.spec.mjs")
            .current_dir(&browser_dir)
            .env("ENGRAM_URL", base_url)
            .env("ENGRAM_CONSOLE_EMAIL", email)
            .env("ENGRAM_CONSOLE_PASSWORD", password)
            .output()
    })
    .await
    .unwrap()
    .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    println!("{stdout}");
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "browser test failed:\n{stdout}");
    let secrets: std::collections::HashMap<String, String> = stdout
        .lines()
        .filter_map(|line| line.strip_prefix("secret "))
        .filter_map(|rest| rest.split_once(' '))
        .map(|(label, secret)| (label.to_string(), secret.to_string()))
        .collect();
    // What the page showed is what the API honours.
    let revoked = server.client_with_key(&secrets["dashboard"]);
    revoked.list("").await.assert_problem(401, "unauthorized");
    let original = server.client_with_key(&secrets["ingest-original"]);
    let rolled = server.client_with_key(&secrets["ingest-rolled"]);
    for (name, client) in [("original (overlap)", &original), ("rolled", &rolled)] {
        let written = client
            .add(json!([{"content": format!("written with the {name} key")}]))
            .await;
        assert_eq!(written.status, 201, "{name}: {}", written.body);
        // Write-only: reading is refused.
        client.list("").await.assert_problem(403, "forbidden");
    }
    // The key bound to an agent in the form writes as that agent, and only as it.
    let support = server.client_with_key(&secrets["support-bot"]);
    let written = support
        .add(json!([{"content": "written by the support bot"}]))
        .await;
    assert_eq!(written.status, 201, "{}", written.body);
    assert_eq!(written.body["memories"][0]["agent_id"], "support");
    support
        .add(json!([{"content": "as billing", "agent_id": "billing"}]))
        .await
        .assert_problem(403, "forbidden");
    // The console's key changes are in the audit log under the console account.
    let audit = server
        .client()
        .send(
            server
                .client()
                .request(reqwest::Method::GET, "/v1/audit?action=api_key.revoked"),
        )
        .await;
    assert_eq!(audit.body["events"][0]["actor_type"], "console_account");
}

#[tokio::test]
async fn the_console_invites_re_roles_and_removes_members() {
    let server = TestServer::spawn().await.unwrap();
    run_spec("members.spec.mjs", owner_environment(&server), 8).await;
}

#[tokio::test]
async fn the_console_reviews_corrects_holds_exports_erases_and_bulk_deletes() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    for (content, user, category) in [
        (
            "Olivia prefers window seats on long flights.",
            "olivia",
            "travel",
        ),
        (
            "Olivia's passport is kept at the front desk.",
            "olivia",
            "travel",
        ),
        ("Paul's gym membership renews in March.", "paul", "health"),
        ("Rita's temporary access code is 1188.", "rita", "access"),
        (
            "Temporary note 1 about the Q3 offsite.",
            "quentin",
            "offsite",
        ),
        (
            "Temporary note 2 about the Q3 offsite.",
            "quentin",
            "offsite",
        ),
        (
            "Temporary note 3 about the Q3 offsite.",
            "quentin",
            "offsite",
        ),
    ] {
        client
            .add_one(json!({"content": content, "user_id": user, "categories": [category]}))
            .await;
    }
    // Oliver shares the start of Olivia's id; his memory carries a customer number.
    client
        .add_one(
            json!({"content": "Oliver asked for a vegetarian meal.", "user_id": "oliver",
                        "metadata": {"customer": "C-2077"}}),
        )
        .await;
    // Paul is also in a second project of the organization: the officer erases him from both.
    let (_, second_key) = server.create_project("second").unwrap();
    let second = server.client_with_key(&second_key);
    second
        .add_one(json!({"content": "Paul's locker is number 12.", "user_id": "paul"}))
        .await;
    let officer = server.create_member("officer@example.com", "compliance");
    run_spec(
        "compliance.spec.mjs",
        vec![
            ("ENGRAM_URL", server.base_url.clone()),
            ("ENGRAM_CONSOLE_EMAIL", "officer@example.com".to_string()),
            (
                "ENGRAM_CONSOLE_PASSWORD",
                officer["password"].as_str().unwrap().to_string(),
            ),
        ],
        16,
    )
    .await;
    // What the browser did is what the API sees.
    assert!(client.all_listed_ids("&user_id=olivia").await.is_empty());
    assert!(client.all_listed_ids("&user_id=quentin").await.is_empty());
    assert!(client.all_listed_ids("&user_id=rita").await.is_empty());
    assert!(client.all_listed_ids("&user_id=paul").await.is_empty());
    assert!(second.all_listed_ids("&user_id=paul").await.is_empty());
    let audit = |action: &'static str| {
        let client = server.client();
        async move {
            client
                .send(client.request(reqwest::Method::GET, &format!("/v1/audit?action={action}")))
                .await
                .body["events"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        }
    };
    let updated = audit("memory.updated").await;
    assert_eq!(updated.len(), 1);
    assert_eq!(updated[0]["actor_type"], "console_account");
    assert_eq!(updated[0]["details"]["reason_given"], true);
    assert_eq!(audit("memory.flags_changed").await.len(), 2);
    // Olivia's, and this project's part of paul's organization-wide erasure.
    assert_eq!(audit("subject.erased").await.len(), 2);
    assert_eq!(audit("subject.exported").await.len(), 1);
    let deleted = audit("memory.deleted").await;
    assert!(
        deleted
            .iter()
            .any(|event| event["details"]["reason"] == "offsite planning is over"),
        "{deleted:?}"
    );
    assert!(
        deleted
            .iter()
            .any(|event| event["details"]["reason"] == "temporary access expired"),
        "{deleted:?}"
    );
}

#[tokio::test]
async fn the_console_sets_pii_and_retention_and_sweeps_what_the_dry_run_named() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    // It expires just after it is written: the sweep the server runs when it starts must not
    // find it expired yet, or it removes it before the page can name it.
    let expired = client
        .add_one(json!({
            "content": "Sam's one-time code is 4411.",
            "user_id": "sam",
            "kind": "episodic",
            "expires_at": (chrono::Utc::now() + chrono::Duration::seconds(2)).to_rfc3339(),
        }))
        .await;
    client
        .add_one(json!({"content": "Sam likes jazz.", "user_id": "sam"}))
        .await;
    engram_tests::eventually(
        "the memory to be past its expiry in the dry run",
        || async {
            let preview = client
                .send(client.request(reqwest::Method::GET, "/v1/retention/preview"))
                .await;
            if preview.body["would_delete"] == 1 {
                Ok(())
            } else {
                Err(preview.body.to_string())
            }
        },
    )
    .await;
    run_spec("settings.spec.mjs", owner_environment(&server), 5).await;
    // What the browser set is what the API enforces.
    client
        .get(expired["id"].as_str().unwrap())
        .await
        .assert_problem(404, "not-found");
    let settings = client
        .send(client.request(reqwest::Method::GET, "/v1/project/settings"))
        .await;
    assert_eq!(settings.body["pii_redaction"], "mask");
    assert_eq!(settings.body["retention_days"]["episodic"], 30);
    assert_eq!(
        settings.body["relevance_floor_setting"], 0.38,
        "{}",
        settings.body
    );
    // The floor applies to a search that asks for no minimum: nothing about jazz for "volcano".
    let unrelated = client
        .search(json!({"query": "volcano eruption statistics", "user_id": "sam"}))
        .await;
    assert_eq!(unrelated.body["abstained"], true, "{}", unrelated.body);
    let masked = client
        .add_one(json!({"content": "Mail sam@example.com today.", "user_id": "sam"}))
        .await;
    assert_eq!(masked["content"], "Mail [email] today.");
    let expired_events = client
        .send(client.request(reqwest::Method::GET, "/v1/audit?action=memory.expired"))
        .await;
    assert_eq!(expired_events.body["events"].as_array().unwrap().len(), 1);
}

/// A project moving to another embedding model (the provider: a TEST DOUBLE of a
/// third-party embedding API, held so the move stays under way while the page is looked
/// at): the settings page says where it moves and draws the task's progress.
#[tokio::test]
async fn the_console_shows_a_move_to_another_embedding_model_with_its_progress() {
    let provider = engram_tests::embedding_stand_in::EmbeddingStandIn::start(32)
        .await
        .unwrap();
    let directory = tempfile::tempdir().unwrap();
    let environment = provider.deployment_environment();
    let server = TestServer::spawn_with(directory.path(), &environment)
        .await
        .unwrap();
    let client = server.client();
    let patch = |body: Value| {
        let request = client
            .request(reqwest::Method::PATCH, "/v1/project/settings")
            .json(&body);
        async { client.send(request).await }
    };
    assert_eq!(
        patch(json!({"embedding": {"source": "local"}}))
            .await
            .status,
        200
    );
    let added = client
        .add(json!([
            {"content": "Sam likes jazz.", "user_id": "sam"},
            {"content": "Sam plays the trumpet.", "user_id": "sam"},
            {"content": "Sam lives by the sea.", "user_id": "sam"},
        ]))
        .await;
    assert_eq!(added.status, 201, "{}", added.body);
    provider.hold();
    let started = patch(json!({"embedding": {"source": "provider"}})).await;
    assert_eq!(started.status, 200, "{}", started.body);
    let task_id = started.body["embedding_change"]["task_id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut environment = owner_environment(&server);
    environment.push(("ENGRAM_MOVE_TO", "stand-in-bag-of-words".to_string()));
    environment.push(("ENGRAM_MOVE_MEMORIES", "3".to_string()));
    run_spec("embedding-move.spec.mjs", environment, 2).await;
    provider.release();
    let task = engram_tests::eventually("the move to finish", || async {
        let task = client
            .send(client.request(reqwest::Method::GET, &format!("/v1/tasks/{task_id}")))
            .await;
        match task.body["status"].as_str() {
            Some("succeeded" | "failed") => Ok(task.body),
            _ => Err(task.body.to_string()),
        }
    })
    .await;
    assert_eq!(task["status"], "succeeded", "{task}");
    let settings = client
        .send(client.request(reqwest::Method::GET, "/v1/project/settings"))
        .await;
    assert_eq!(
        settings.body["embedding"]["model"], "stand-in-bag-of-words",
        "{}",
        settings.body
    );
}

/// A scripted agent run (context → model call given one memory → tool call → search → end)
/// shown in the console: the run's timeline, the recalls it made, and the memory's impact
/// before its deletion; afterwards the run shows the memory as deleted, and who saw the
/// timeline's content is in the audit log.
#[tokio::test]
async fn the_console_shows_a_runs_timeline_its_recalls_and_a_memorys_impact() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    let send = |method: reqwest::Method, path: &str, body: serde_json::Value| {
        let request = client.request(method, path).json(&body);
        async { client.send(request).await }
    };
    let captured = send(
        reqwest::Method::PATCH,
        "/v1/project/settings",
        json!({"run_capture": "full"}),
    )
    .await;
    assert_eq!(captured.status, 200, "{}", captured.body);
    let content = "Ann is allergic to peanuts.";
    let memory = client
        .add_one(json!({"content": content, "user_id": "ann", "kind": "preference"}))
        .await;
    let memory_id = memory["id"].as_str().unwrap().to_string();
    let task = "Order Thai dinner for Ann";
    let run = send(
        reqwest::Method::POST,
        "/v1/runs",
        json!({"task": task, "user_id": "ann"}),
    )
    .await;
    assert_eq!(run.status, 201, "{}", run.body);
    let run_id = run.body["run_id"].as_str().unwrap().to_string();
    let context = send(
        reqwest::Method::POST,
        "/v1/context",
        json!({"user_id": "ann", "query": "what can Ann eat", "token_budget": 300, "run_id": run_id}),
    )
    .await;
    assert_eq!(context.status, 200, "{}", context.body);
    let steps = format!("/v1/runs/{run_id}/steps");
    let tool_result = "Thai Garden has a peanut-free menu";
    for step in [
        json!({"type": "model_call", "model": "gpt-test", "context_id": context.body["context_id"],
               "injected_memory_ids": [memory_id], "tokens_in": 300, "tokens_out": 20}),
        json!({"type": "tool_call", "tool": "restaurant_search", "arguments": {"city": "Oslo"}, "result": tool_result}),
    ] {
        let recorded = send(reqwest::Method::POST, &steps, step).await;
        assert_eq!(recorded.status, 201, "{}", recorded.body);
    }
    let searched = send(
        reqwest::Method::POST,
        "/v1/memories/search",
        json!({"query": "peanut allergy", "user_id": "ann", "run_id": run_id}),
    )
    .await;
    assert_eq!(searched.status, 200, "{}", searched.body);
    let ended = send(
        reqwest::Method::POST,
        &format!("/v1/runs/{run_id}/end"),
        json!({"outcome": "success"}),
    )
    .await;
    assert_eq!(ended.status, 200, "{}", ended.body);
    let mut environment = owner_environment(&server);
    environment.extend([
        ("PROJECT_ID", server.bootstrap.project_id.clone()),
        ("RUN_ID", run_id.clone()),
        ("RUN_TASK", task.to_string()),
        ("MEMORY_ID", memory_id.clone()),
        ("MEMORY_CONTENT", content.to_string()),
        ("TOOL_RESULT", tool_result.to_string()),
    ]);
    run_spec("runs.spec.mjs", environment, 4).await;
    // The console's views of the run's content are in the audit log.
    let viewed = client
        .send(client.request(
            reqwest::Method::GET,
            "/v1/audit?action=memory.content_viewed",
        ))
        .await;
    assert!(
        viewed.body["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|event| event["details"]["page"] == "run"),
        "{}",
        viewed.body
    );
}

/// The server's address and its owner's console sign-in, as every spec reads them.
/// Every role signs in, lands on a page of its own and walks the whole menu it is offered:
/// no page of the menu is refused, no request fails, the browser logs no error; the menu
/// hides what the role may not use (`roles.spec.mjs`).
#[tokio::test]
async fn each_role_lands_on_its_own_page_and_every_page_of_its_menu_works() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    for (content, user) in [
        ("Prefers the aisle seat.", "olivia"),
        ("Allergic to peanuts.", "paul"),
    ] {
        client
            .add_one(json!({"content": content, "user_id": user}))
            .await;
    }
    client
        .search(json!({"query": "seat preference", "user_id": "olivia"}))
        .await;
    let mut accounts = vec![json!({
        "role": "owner",
        "email": server.bootstrap.console_email,
        "password": server.bootstrap.console_password,
    })];
    for role in ["admin", "compliance", "analyst", "developer"] {
        let email = format!("{role}@example.com");
        let member = server.create_member(&email, role);
        accounts.push(json!({"role": role, "email": email, "password": member["password"]}));
    }
    run_spec(
        "roles.spec.mjs",
        vec![
            ("ENGRAM_URL", server.base_url.clone()),
            ("ENGRAM_ROLE_ACCOUNTS", Value::Array(accounts).to_string()),
        ],
        5,
    )
    .await;
}

/// The console in Chinese (`chinese.spec.mjs`): a browser asking for zh-CN gets every main
/// page in Chinese with nothing left in English, and the top bar's switch saves English as
/// the account's language, which then wins over the browser's.
#[tokio::test]
async fn the_console_speaks_chinese_on_every_main_page_and_the_account_can_switch_to_english() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    for (content, user) in [
        ("用户住在上海，喜欢喝乌龙茶。", "li-wei"),
        ("Prefers the aisle seat.", "olivia"),
    ] {
        client
            .add_one(json!({"content": content, "user_id": user}))
            .await;
    }
    client
        .search(json!({"query": "用户喜欢喝什么？", "user_id": "li-wei"}))
        .await;
    run_spec("chinese.spec.mjs", owner_environment(&server), 4).await;
}

fn owner_environment(server: &TestServer) -> Vec<(&'static str, String)> {
    vec![
        ("ENGRAM_URL", server.base_url.clone()),
        (
            "ENGRAM_CONSOLE_EMAIL",
            server.bootstrap.console_email.clone(),
        ),
        (
            "ENGRAM_CONSOLE_PASSWORD",
            server.bootstrap.console_password.clone(),
        ),
    ]
}

/// Runs one browser spec of `tests/browser` with `environment` and returns its output,
/// asserting that all `expected_steps` steps passed.
async fn run_spec(spec: &str, environment: Vec<(&str, String)>, expected_steps: usize) -> String {
    let browser_dir = workspace_root().join("tests/browser");
    let spec = spec.to_string();
    let environment: Vec<(String, String)> = environment
        .into_iter()
        .map(|(name, value)| (name.to_string(), value))
        .collect();
    let output = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .arg(&spec)
            .current_dir(&browser_dir)
            .envs(environment)
            .output()
    })
    .await
    .unwrap()
    .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    println!("{stdout}");
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "browser test failed:\n{stdout}");
    assert!(
        stdout.contains(&format!("{expected_steps} passed, 0 failed")),
        "summary missing:\n{stdout}"
    );
    stdout
}

#[tokio::test]
async fn the_console_charts_usage_and_cost_and_saves_a_budget_that_the_api_enforces() {
    // TEST DOUBLE for the third-party LLM provider: it finds nothing worth remembering, and
    // reports the tokens the usage page must show for its model.
    let stand_in = engram_tests::llm_stand_in::LlmStandIn::start(|_| {
        engram_tests::llm_stand_in::ScriptedReply::Json {
            content: json!({"memories": []}),
            prompt_tokens: 1234,
            completion_tokens: 56,
        }
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
    let client = server.client();
    let derived = client
        .send(
            client
                .request(reqwest::Method::POST, "/v1/sessions/chat/messages")
                .json(&json!({"user_id": "noor", "messages": [{"role": "user", "content": "Hello there."}]})),
        )
        .await;
    assert_eq!(
        derived.body["derivation"]["status"], "succeeded",
        "{}",
        derived.body
    );
    // 0.01 USD a search, 0.002 USD a memory written, from today; the other units
    // the operator prices at nothing (so the default price book prices none of them).
    for (unit, price) in [
        ("searches", "0.01"),
        ("memories_written", "0.002"),
        ("tokens_embedded", "0"),
        ("memory_days", "0"),
        ("file_bytes", "0"),
        ("llm_tokens_in", "0"),
        ("llm_tokens_out", "0"),
    ] {
        let set = engram_tests::set_price(&server.data_dir, unit, price, "USD");
        assert!(
            set.status.success(),
            "{}",
            String::from_utf8_lossy(&set.stderr)
        );
    }
    let added = client
        .add(json!([
            {"content": "Noor plays the oud.", "user_id": "noor"},
            {"content": "Noor studies geology.", "user_id": "noor"},
            {"content": "Noor drinks mint tea.", "user_id": "noor"}
        ]))
        .await;
    assert_eq!(added.status, 201);
    for query in ["music", "rocks", "tea", "studies"] {
        assert_eq!(client.search(json!({"query": query})).await.status, 200);
    }
    let (_, beta_key) = server.create_project("beta").unwrap();
    let beta = server.client_with_key(&beta_key);
    assert_eq!(beta.search(json!({"query": "anything"})).await.status, 200);
    let analyst = server.create_member("analyst@example.com", "analyst");
    // The meter writes within a second; the page reads what was written.
    let deadline = std::time::Instant::now() + engram_tests::patience();
    loop {
        let usage = client
            .send(client.request(reqwest::Method::GET, "/v1/usage"))
            .await;
        if usage.body["totals"]["searches"] == 4 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{}", usage.body);
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    run_spec(
        "usage.spec.mjs",
        [
            owner_environment(&server),
            vec![
                ("ANALYST_EMAIL", "analyst@example.com".to_string()),
                (
                    "ANALYST_PASSWORD",
                    analyst["password"].as_str().unwrap().to_string(),
                ),
                ("PROJECT_ID", server.bootstrap.project_id.clone()),
                ("EXPECTED_SEARCHES", "4".to_string()),
                ("EXPECTED_WRITES", "3".to_string()),
                ("EXPECTED_COST_MICROS", (4 * 10_000 + 3 * 2_000).to_string()),
                ("EXPECTED_UNNAMED_COST_MICROS", (4 * 10_000).to_string()),
                ("EXPECTED_NOOR_COST_MICROS", (3 * 2_000).to_string()),
                ("LLM_MODEL", "stand-in-chat".to_string()),
                // Both projects: 0.046 here and one search of beta at 0.01.
                ("EXPECTED_ORG_TOTAL", "0.056".to_string()),
            ],
        ]
        .concat(),
        11,
    )
    .await;
    // The budget the browser saved is the one the API enforces: 0.046 of 0.05 USD spent, one
    // more search brings it to 0.056, and the next is refused.
    let limits = client
        .send(client.request(reqwest::Method::GET, "/v1/project/limits"))
        .await;
    assert_eq!(
        limits.body["limits"]["monthly_budget"]["amount_micros"],
        50_000
    );
    assert_eq!(limits.body["limits"]["monthly_budget"]["hard_cap"], true);
    assert_eq!(limits.body["limits"]["monthly_quotas"]["file_bytes"], 1000);
    assert_eq!(client.search(json!({"query": "oud"})).await.status, 200);
    client
        .search(json!({"query": "geology"}))
        .await
        .assert_problem(402, "budget-exceeded");
}

#[tokio::test]
async fn the_console_charts_recall_quality_drills_into_a_recall_and_marks_a_regression() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    let added = client
        .add(json!([
            {"content": "Ines grows tomatoes on the balcony", "user_id": "ines"},
            {"content": "Ines speaks Portuguese", "user_id": "ines"},
        ]))
        .await;
    assert_eq!(added.status, 201);
    let tomatoes = added.body["memories"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut found_recall = String::new();
    for query in [
        "tomatoes",
        "Portuguese",
        "submarines",
        "submarines",
        "volcanoes",
    ] {
        let searched = client
            .search(json!({"query": query, "user_id": "ines", "retrieval": "keyword"}))
            .await;
        assert_eq!(searched.status, 200);
        if query == "Portuguese" {
            found_recall = searched.body["recall_id"].as_str().unwrap().to_string();
        }
    }
    // One rating: today's precision is 100 %.
    let rated = client
        .send(
            client
                .request(
                    reqwest::Method::POST,
                    &format!("/v1/recalls/{found_recall}/feedback"),
                )
                .json(&json!({"rating": "relevant"})),
        )
        .await;
    assert_eq!(rated.status, 201, "{}", rated.body);
    let profile = client
        .send(
            client
                .request(reqwest::Method::PUT, "/v1/retrieval-profiles/words")
                .json(&json!({"parameters": {"retrieval": "keyword"}})),
        )
        .await;
    assert_eq!(profile.status, 200, "{}", profile.body);
    // An evaluation set run twice; the expected memory is deleted in between, and the second
    // run also compares the default with the keyword profile.
    let set = client
        .send(client.request(reqwest::Method::POST, "/v1/eval-sets").json(&json!({
            "name": "garden",
            "cases": [{"query": "tomatoes", "user_id": "ines", "expected_memory_ids": [tomatoes]}],
        })))
        .await;
    assert_eq!(set.status, 201, "{}", set.body);
    let set_id = set.body["id"].as_str().unwrap().to_string();
    for round in 0..2 {
        if round == 1 {
            assert_eq!(client.delete(&tomatoes).await.status, 204);
        }
        let started = client
            .send(
                client
                    .request(
                        reqwest::Method::POST,
                        &format!("/v1/eval-sets/{set_id}/runs"),
                    )
                    .json(&if round == 1 {
                        json!({"compare_profile": "words"})
                    } else {
                        json!({})
                    }),
            )
            .await;
        assert_eq!(started.status, 202, "{}", started.body);
        let task_id = started.body["task"]["id"].as_str().unwrap().to_string();
        let deadline = std::time::Instant::now() + engram_tests::patience();
        loop {
            let task = client
                .send(client.request(reqwest::Method::GET, &format!("/v1/tasks/{task_id}")))
                .await;
            if task.body["status"] == "succeeded" {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{}", task.body);
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
    let analyst = server.create_member("analyst@example.com", "analyst");
    // The two evaluation runs searched too, but evaluations leave no recall events.
    run_spec(
        "recall.spec.mjs",
        [
            owner_environment(&server),
            vec![
                ("ANALYST_EMAIL", "analyst@example.com".to_string()),
                (
                    "ANALYST_PASSWORD",
                    analyst["password"].as_str().unwrap().to_string(),
                ),
                ("PROJECT_ID", server.bootstrap.project_id.clone()),
                ("EXPECTED_SEARCHES", "5".to_string()),
                ("EXPECTED_EMPTY", "3".to_string()),
                ("EMPTY_QUERY", "submarines".to_string()),
                ("FOUND_RECALL_ID", found_recall),
                ("FOUND_CONTENT", "Ines speaks Portuguese".to_string()),
                ("EVAL_SET", "garden".to_string()),
            ],
        ]
        .concat(),
        9,
    )
    .await;
}
