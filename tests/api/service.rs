//! Service endpoints and bootstrap: health, readiness, the OpenAPI document and docs page,
//! the bootstrap file, and `admin create-project`.

use engram_tests::TestServer;
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
}
