//! Console roles: owners, admins and compliance staff see memory content and the audit log;
//! owners, admins and developers manage API keys; analysts and developers never see content (403 from the console's API, an explanation on the
//! page, and no content anywhere in what they receive). Members are admin-created with
//! `engram admin create-member`.

use engram_tests::{TestServer, run_engram};

const SECRET_CONTENT: &str = "The patient's blood type is AB negative.";

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

async fn login(server: &TestServer, email: &str, password: &str) -> String {
    let response = client()
        .post(format!("{}/console/api/login", server.base_url))
        .form(&[("email", email), ("password", password)])
        .send()
        .await
        .unwrap();
    let cookies: Vec<String> = response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .filter_map(|value| value.split(';').next().map(str::to_string))
        .collect();
    // The session, its refresh token and the browser's device token.
    assert_eq!(
        cookies.len(),
        3,
        "login as {email} failed: {}",
        response.status()
    );
    cookies.join("; ")
}

/// (status, body) of a console server function called the way the browser's fetch does.
async fn call(server: &TestServer, cookie: &str, function: &str) -> (u16, String) {
    // The memories function takes its filters as JSON; the others as a form.
    let (content_type, body) = if function == "memories" {
        ("application/json", r#"{"filters":{}}"#)
    } else {
        ("application/x-www-form-urlencoded", "")
    };
    let response = client()
        .post(format!("{}/console/api/{function}", server.base_url))
        .header("Cookie", cookie)
        .header("Content-Type", content_type)
        .body(body)
        .send()
        .await
        .unwrap();
    (
        response.status().as_u16(),
        response.text().await.unwrap_or_default(),
    )
}

async fn get(server: &TestServer, cookie: &str, path: &str) -> (u16, String) {
    let response = client()
        .get(format!("{}{path}", server.base_url))
        .header("Cookie", cookie)
        // As a browser asks: pages answer 200 with an explanation rather than a bare 403.
        .header("Accept", "text/html,*/*")
        .send()
        .await
        .unwrap();
    (
        response.status().as_u16(),
        response.text().await.unwrap_or_default(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_owners_admins_and_compliance_see_memory_content_and_the_audit_log() {
    let server = TestServer::spawn().await.unwrap();
    server
        .client()
        .add_one(serde_json::json!({"content": SECRET_CONTENT, "user_id": "patient-7"}))
        .await;
    let project_id = server.bootstrap.project_id.clone();
    let mut members = vec![(
        "owner".to_string(),
        server.bootstrap.console_email.clone(),
        server.bootstrap.console_password.clone(),
    )];
    for role in ["admin", "compliance", "analyst", "developer"] {
        let created = server.create_member(&format!("{role}@example.com"), role);
        assert_eq!(created["role"], role);
        members.push((
            role.to_string(),
            created["email"].as_str().unwrap().to_string(),
            created["password"].as_str().unwrap().to_string(),
        ));
    }
    // A role that does not exist is refused, and nothing is created.
    let refused = run_engram(
        &[
            "admin",
            "create-member",
            "--data-dir",
            &server.data_dir.display().to_string(),
            "--email",
            "boss@example.com",
            "--role",
            "superuser",
        ],
        &[],
    );
    assert!(!refused.status.success());

    let mut matrix = Vec::new();
    for (role, email, password) in &members {
        let cookie = login(&server, email, password).await;
        let sees_content = matches!(role.as_str(), "owner" | "admin" | "compliance");
        let expected = if sees_content { 200 } else { 403 };

        let (memories_status, memories_body) = call(&server, &cookie, "memories").await;
        let (audit_status, audit_body) = call(&server, &cookie, "audit").await;
        let (export_status, export_body) = get(
            &server,
            &cookie,
            &format!("/console/audit/export.csv?project={project_id}"),
        )
        .await;
        let (page_status, page_body) = get(&server, &cookie, "/console/memories").await;
        let (keys_status, keys_body) = call(&server, &cookie, "keys").await;
        let (members_status, members_body) = call(&server, &cookie, "members").await;
        // The compliance workflows (subjects, memory pages) follow the content rule.
        let subject_response = client()
            .post(format!("{}/console/api/subject", server.base_url))
            .header("Cookie", &cookie)
            .form(&[
                ("project_id", project_id.as_str()),
                ("user_id", "patient-7"),
            ])
            .send()
            .await
            .unwrap();
        let subject_status = subject_response.status().as_u16();
        assert_eq!(
            subject_status,
            expected,
            "{role} subject: {}",
            subject_response.text().await.unwrap_or_default()
        );
        matrix.push(format!(
            "{role}: memories {memories_status}, audit {audit_status}, export {export_status}, page {page_status}, keys {keys_status}, members {members_status}, subject {subject_status}"
        ));
        let manages_members = matches!(role.as_str(), "owner" | "admin");
        assert_eq!(
            members_status,
            if manages_members { 200 } else { 403 },
            "{role} members: {members_body}"
        );
        let manages_keys = matches!(role.as_str(), "owner" | "admin" | "developer");
        assert_eq!(
            keys_status,
            if manages_keys { 200 } else { 403 },
            "{role} keys: {keys_body}"
        );
        assert_eq!(
            memories_status, expected,
            "{role} memories: {memories_body}"
        );
        assert_eq!(audit_status, expected, "{role} audit: {audit_body}");
        assert_eq!(export_status, expected, "{role} export: {export_body}");
        assert_eq!(page_status, 200, "{role} page");
        assert_eq!(
            memories_body.contains(SECRET_CONTENT),
            sees_content,
            "{role}"
        );
        assert_eq!(
            page_body.contains(SECRET_CONTENT),
            sees_content,
            "{role} page"
        );
        if !sees_content {
            assert!(
                memories_body.contains(role.as_str()),
                "the refusal names the role: {memories_body}"
            );
            assert!(
                page_body.contains("cannot see"),
                "{role} page explains the refusal"
            );
        }
        // Nobody's audit view ever holds content.
        assert!(!audit_body.contains(SECRET_CONTENT));
        assert!(!export_body.contains(SECRET_CONTENT));
    }
    eprintln!("console role matrix:\n  {}", matrix.join("\n  "));
}
