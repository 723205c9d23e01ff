//! Every bad input of API.md gets an exact problem+json answer naming the field, and writes
//! nothing: the project looks exactly as before after all of them.

use engram_tests::{ApiClient, TestServer};
use reqwest::Method;
use serde_json::{Value, json};

struct Case {
    name: &'static str,
    status: u16,
    slug: &'static str,
    field: Option<&'static str>,
}

async fn post_raw(
    api: &ApiClient,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> engram_tests::ApiResponse {
    api.send(
        api.request(Method::POST, path)
            .header("content-type", content_type)
            .body(body),
    )
    .await
}

fn check(case: &Case, response: &engram_tests::ApiResponse) {
    assert_eq!(
        response.status, case.status,
        "{}: {}",
        case.name, response.body
    );
    response.assert_problem(case.status, case.slug);
    if let Some(field) = case.field {
        assert!(
            response
                .error_fields()
                .iter()
                .any(|reported| reported == field),
            "{}: expected field {field}, got {:?} in {}",
            case.name,
            response.error_fields(),
            response.body
        );
    }
}

#[tokio::test]
async fn invalid_memory_writes_are_rejected_with_the_field_and_write_nothing() {
    let server = TestServer::spawn().await.unwrap();
    let api = server.client();
    let long_id = "u".repeat(256);
    let too_long_content = "x".repeat(32 * 1024 + 1);
    let big_metadata = json!({"blob": "y".repeat(16 * 1024)});
    let hundred_and_one: Vec<Value> = (0..101)
        .map(|number| json!({"content": format!("m{number}")}))
        .collect();
    let cases: Vec<(Case, Value)> = vec![
        (
            Case {
                name: "no memories",
                status: 422,
                slug: "validation-failed",
                field: Some("memories"),
            },
            json!({"memories": []}),
        ),
        (
            Case {
                name: "101 memories",
                status: 422,
                slug: "validation-failed",
                field: Some("memories"),
            },
            json!({"memories": hundred_and_one}),
        ),
        (
            Case {
                name: "empty content",
                status: 422,
                slug: "validation-failed",
                field: Some("memories[0].content"),
            },
            json!({"memories": [{"content": ""}]}),
        ),
        (
            Case {
                name: "content over 32 KiB",
                status: 422,
                slug: "validation-failed",
                field: Some("memories[0].content"),
            },
            json!({"memories": [{"content": too_long_content}]}),
        ),
        (
            Case {
                name: "metadata over 16 KiB",
                status: 422,
                slug: "validation-failed",
                field: Some("memories[0].metadata"),
            },
            json!({"memories": [{"content": "a", "metadata": big_metadata}]}),
        ),
        (
            Case {
                name: "metadata not an object",
                status: 422,
                slug: "validation-failed",
                field: Some("memories[0].metadata"),
            },
            json!({"memories": [{"content": "a", "metadata": [1, 2]}]}),
        ),
        (
            Case {
                name: "user_id of 256 chars",
                status: 422,
                slug: "validation-failed",
                field: Some("memories[0].user_id"),
            },
            json!({"memories": [{"content": "a", "user_id": long_id}]}),
        ),
        (
            Case {
                name: "empty agent_id",
                status: 422,
                slug: "validation-failed",
                field: Some("memories[0].agent_id"),
            },
            json!({"memories": [{"content": "a", "agent_id": ""}]}),
        ),
        (
            Case {
                name: "key of 256 chars",
                status: 422,
                slug: "validation-failed",
                field: Some("memories[0].key"),
            },
            json!({"memories": [{"content": "a", "key": "k".repeat(256)}]}),
        ),
        (
            Case {
                name: "unknown kind",
                status: 422,
                slug: "validation-failed",
                field: Some("memories[0].kind"),
            },
            json!({"memories": [{"content": "a", "kind": "fact"}]}),
        ),
        (
            Case {
                name: "unknown source",
                status: 422,
                slug: "validation-failed",
                field: Some("memories[0].source"),
            },
            json!({"memories": [{"content": "a", "source": "guess"}]}),
        ),
        (
            Case {
                name: "confidence above 1",
                status: 422,
                slug: "validation-failed",
                field: Some("memories[0].confidence"),
            },
            json!({"memories": [{"content": "a", "confidence": 1.5}]}),
        ),
        (
            Case {
                name: "content not a string",
                status: 422,
                slug: "validation-failed",
                field: Some("memories[0].content"),
            },
            json!({"memories": [{"content": 5}]}),
        ),
        (
            Case {
                name: "expires_at not a time",
                status: 422,
                slug: "validation-failed",
                field: Some("memories[0].expires_at"),
            },
            json!({"memories": [{"content": "a", "expires_at": "tomorrow"}]}),
        ),
        (
            Case {
                name: "one bad item in a batch",
                status: 422,
                slug: "validation-failed",
                field: Some("memories[2].kind"),
            },
            json!({"memories": [{"content": "good one"}, {"content": "good two"}, {"content": "bad", "kind": "nope"}]}),
        ),
    ];
    for (case, body) in &cases {
        let response = api
            .send(api.request(Method::POST, "/v1/memories").json(body))
            .await;
        check(case, &response);
    }

    let malformed = post_raw(
        &api,
        "/v1/memories",
        "application/json",
        b"{\"memories\": [".to_vec(),
    )
    .await;
    check(
        &Case {
            name: "malformed JSON",
            status: 400,
            slug: "malformed-body",
            field: None,
        },
        &malformed,
    );
    let wrong_type = post_raw(&api, "/v1/memories", "text/plain", b"hello".to_vec()).await;
    check(
        &Case {
            name: "text/plain body",
            status: 415,
            slug: "unsupported-media-type",
            field: None,
        },
        &wrong_type,
    );
    let oversized = format!(
        "{{\"memories\": [{{\"content\": \"{}\"}}]}}",
        "z".repeat(1024 * 1024 + 10)
    );
    let too_large = post_raw(
        &api,
        "/v1/memories",
        "application/json",
        oversized.into_bytes(),
    )
    .await;
    check(
        &Case {
            name: "body over 1 MiB",
            status: 413,
            slug: "payload-too-large",
            field: None,
        },
        &too_large,
    );
    let long_key = api
        .send(
            api.request(Method::POST, "/v1/memories")
                .header("Idempotency-Key", "k".repeat(300))
                .json(&json!({"memories": [{"content": "a"}]})),
        )
        .await;
    check(
        &Case {
            name: "idempotency key too long",
            status: 422,
            slug: "validation-failed",
            field: Some("header.Idempotency-Key"),
        },
        &long_key,
    );

    let listed = api.list("?state=active").await;
    assert_eq!(
        listed.body["memories"].as_array().unwrap().len(),
        0,
        "nothing was written: {}",
        listed.body
    );
    assert_eq!(
        api.list("?state=superseded").await.body["memories"]
            .as_array()
            .unwrap()
            .len(),
        0
    );
}

#[tokio::test]
async fn invalid_reads_edits_and_searches_are_rejected_precisely() {
    let server = TestServer::spawn().await.unwrap();
    let api = server.client();
    let memory = api
        .add_one(json!({"content": "Original text.", "user_id": "u-1"}))
        .await;
    let id = memory["id"].as_str().unwrap();

    let search_cases: Vec<(Case, Value)> = vec![
        (
            Case {
                name: "top_k 0",
                status: 422,
                slug: "validation-failed",
                field: Some("top_k"),
            },
            json!({"query": "a", "top_k": 0}),
        ),
        (
            Case {
                name: "top_k 101",
                status: 422,
                slug: "validation-failed",
                field: Some("top_k"),
            },
            json!({"query": "a", "top_k": 101}),
        ),
        (
            Case {
                name: "empty query",
                status: 422,
                slug: "validation-failed",
                field: Some("query"),
            },
            json!({"query": ""}),
        ),
        (
            Case {
                name: "unknown kind",
                status: 422,
                slug: "validation-failed",
                field: Some("kinds[1]"),
            },
            json!({"query": "a", "kinds": ["semantic", "x"]}),
        ),
        (
            Case {
                name: "min_score 2",
                status: 422,
                slug: "validation-failed",
                field: Some("min_score"),
            },
            json!({"query": "a", "min_score": 2}),
        ),
        (
            Case {
                name: "missing query",
                status: 422,
                slug: "validation-failed",
                field: None,
            },
            json!({"top_k": 3}),
        ),
    ];
    for (case, body) in &search_cases {
        check(case, &api.search(body.clone()).await);
    }

    for (query, field) in [
        ("?limit=0", "query.limit"),
        ("?limit=501", "query.limit"),
        ("?state=deleted", "query.state"),
        ("?kind=fact", "query.kind"),
        ("?cursor=not-a-cursor", "query.cursor"),
        ("?user_id=", "query.user_id"),
        ("?limit=abc", "query.limit"),
    ] {
        check(
            &Case {
                name: "bad list query",
                status: 422,
                slug: "validation-failed",
                field: Some(field),
            },
            &api.list(query).await,
        );
    }

    check(
        &Case {
            name: "empty patch",
            status: 422,
            slug: "validation-failed",
            field: Some("body"),
        },
        &api.patch(id, None, json!({})).await,
    );
    check(
        &Case {
            name: "empty content",
            status: 422,
            slug: "validation-failed",
            field: Some("content"),
        },
        &api.patch(id, None, json!({"content": ""})).await,
    );
    check(
        &Case {
            name: "bad If-Match",
            status: 422,
            slug: "validation-failed",
            field: Some("header.If-Match"),
        },
        &api.patch(id, Some("abc"), json!({"content": "b"})).await,
    );
    check(
        &Case {
            name: "unknown memory",
            status: 404,
            slug: "not-found",
            field: None,
        },
        &api.get(&uuid::Uuid::now_v7().to_string()).await,
    );
    check(
        &Case {
            name: "not an id",
            status: 404,
            slug: "not-found",
            field: None,
        },
        &api.get("not-a-uuid").await,
    );
    check(
        &Case {
            name: "unknown route",
            status: 404,
            slug: "not-found",
            field: None,
        },
        &api.send(api.request(Method::GET, "/v1/nothing-here")).await,
    );
    check(
        &Case {
            name: "wrong method",
            status: 405,
            slug: "method-not-allowed",
            field: None,
        },
        &api.send(api.request(Method::PUT, "/v1/memories")).await,
    );

    let unchanged = api.get(id).await;
    assert_eq!(unchanged.body["content"], "Original text.");
    assert_eq!(
        unchanged.body["version"], 1,
        "no failed edit changed the memory"
    );
    assert_eq!(
        api.history(id).await.body["history"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn missing_or_wrong_credentials_get_401_and_a_request_id_is_echoed() {
    let server = TestServer::spawn().await.unwrap();
    let anonymous = reqwest::Client::new();
    let api = server.client();
    let no_key = api
        .send(
            anonymous
                .post(format!("{}/v1/memories", server.base_url))
                .json(&json!({"memories": [{"content": "a"}]})),
        )
        .await;
    no_key.assert_problem(401, "unauthorized");
    let forged =
        server.client_with_key("egk_aaaaaaaaaaaaaaaa_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb");
    forged.list("").await.assert_problem(401, "unauthorized");
    let (_, real_secret) = server.bootstrap.api_key.rsplit_once('_').unwrap();
    let wrong_secret = server
        .bootstrap
        .api_key
        .replace(real_secret, &"Z".repeat(real_secret.len()));
    server
        .client_with_key(&wrong_secret)
        .list("")
        .await
        .assert_problem(401, "unauthorized");
    server
        .client_with_key("not-a-key")
        .search(json!({"query": "a"}))
        .await
        .assert_problem(401, "unauthorized");

    let echoed = api
        .send(
            api.request(Method::GET, "/v1/memories")
                .header("x-request-id", "trace-me-123"),
        )
        .await;
    assert_eq!(echoed.request_id.as_deref(), Some("trace-me-123"));
    let problem = api
        .send(
            api.request(Method::GET, "/v1/memories?limit=0")
                .header("x-request-id", "trace-me-456"),
        )
        .await;
    assert_eq!(problem.body["request_id"], "trace-me-456");
    assert!(
        api.list("").await.request_id.is_some(),
        "a request id is generated when none is sent"
    );
    assert_eq!(
        api.list("").await.body["memories"]
            .as_array()
            .unwrap()
            .len(),
        0,
        "nothing written by rejected calls"
    );
}

/// Search filters are kept with every recall event, so their size is bounded: too many
/// metadata conditions, a value too large or nested too deep, or too many categories is a
/// 422 naming the field, and a search within the limits still answers.
#[tokio::test]
async fn search_filters_beyond_their_documented_limits_are_refused_with_the_field() {
    let server = TestServer::spawn().await.unwrap();
    let api = server.client();
    // One more metadata key than a filter holds conditions.
    let many: serde_json::Map<String, Value> = (0..engram_core::limits::MAX_FILTER_CONDITIONS)
        .map(|number| (format!("key{number}"), json!(number)))
        .collect();
    let nested = json!([[["three levels"]]]);
    let large = "x".repeat(2_000);
    let categories: Vec<String> = (0..=engram_core::limits::MAX_FILTER_LIST_ITEMS)
        .map(|number| format!("c{number}"))
        .collect();
    for (filters, field) in [
        (json!({ "metadata": many, "user_id": "a" }), "filters"),
        (
            json!({ "metadata": { "note": large } }),
            "filters.metadata.note",
        ),
        (
            json!({ "metadata": { "path": nested } }),
            "filters.metadata.path",
        ),
        (json!({ "categories": categories }), "filters.categories"),
        (
            json!({ "AND": [{ "user_id": "a" }, { "metadata": { "topic": { "gt": 1 } } }] }),
            "filters.AND[1].metadata.topic.gt",
        ),
    ] {
        let answer = api
            .search(json!({ "query": "anything", "filters": filters }))
            .await;
        answer.assert_problem(422, "validation-failed");
        assert_eq!(answer.error_fields(), vec![field.to_string()], "{filters}");
    }
    let within = api
        .search(json!({
            "query": "anything",
            "filters": { "metadata": { "channel": "chat", "turn": 3 } }
        }))
        .await;
    assert_eq!(within.status, 200, "{}", within.body);
}

/// A query parameter an operation does not know is refused, never ignored: `?zz=1` sent to
/// every operation of the published document gets a 400 naming `zz` (before anything is
/// read or written), and a misplaced parameter beside known ones is named alone.
#[tokio::test]
async fn every_published_operation_refuses_a_query_parameter_it_does_not_know() {
    let server = TestServer::spawn().await.unwrap();
    let api = server.client();
    let document: Value = reqwest::get(format!("{}/openapi.json", server.base_url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut operations = 0;
    let mut mismatches = Vec::new();
    for (template, item) in document["paths"].as_object().unwrap() {
        // Any value fits a path parameter: the parameter is refused before the path is read.
        let path: String = template
            .split('/')
            .map(|segment| {
                if segment.starts_with('{') {
                    "x"
                } else {
                    segment
                }
            })
            .collect::<Vec<_>>()
            .join("/");
        for method in item.as_object().unwrap().keys() {
            operations += 1;
            let request = api
                .request(
                    method.to_uppercase().parse().unwrap(),
                    &format!("{path}?zz=1"),
                )
                .json(&json!({}));
            let answer = api.send(request).await;
            let names_it = answer.status == 400
                && answer.body["code"] == "unknown-query-parameter"
                && answer.body["detail"]
                    .as_str()
                    .unwrap_or("")
                    .contains("`zz`")
                && answer.error_fields() == ["query.zz"];
            if !names_it {
                mismatches.push(format!(
                    "{} {template}: {} {}",
                    method.to_uppercase(),
                    answer.status,
                    answer.body
                ));
            }
        }
    }
    assert!(
        operations > 50,
        "the document lists the operations ({operations})"
    );
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));

    // Known parameters pass; only the unknown one is named, with what the operation takes.
    let listing = api
        .send(api.request(Method::GET, "/v1/memories?user_id=u-1&usr_id=u-1"))
        .await;
    assert_eq!(listing.status, 400, "{}", listing.body);
    assert_eq!(listing.error_fields(), ["query.usr_id"]);
    assert!(
        listing.body["detail"].as_str().unwrap().contains("user_id"),
        "{}",
        listing.body
    );
    // A write with an unknown parameter wrote nothing.
    let write = api
        .send(
            api.request(Method::POST, "/v1/memories?wiat=false")
                .json(&json!({"memories": [{"content": "Never stored."}]})),
        )
        .await;
    assert_eq!(write.status, 400, "{}", write.body);
    assert!(api.all_listed_ids("").await.is_empty());
}
