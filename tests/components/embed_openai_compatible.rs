//! `OpenAiCompatibleEmbedder` against a one-shot local HTTP server: request shape, bearer key,
//! batching, reordering by `index`, normalisation and error mapping.

use std::sync::{Arc, Mutex};

use engram_embed::{EmbedError, Embedder, OpenAiCompatibleEmbedder, OpenAiCompatibleOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

struct CapturedRequest {
    head: String,
    body: serde_json::Value,
}

/// Serves each connection with `respond(request_body) -> (status line, json body)`.
async fn start_server(
    respond: impl Fn(&serde_json::Value) -> (&'static str, String) + Send + Sync + 'static,
) -> (String, Arc<Mutex<Vec<CapturedRequest>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let captured = Arc::new(Mutex::new(Vec::new()));
    let captured_by_server = Arc::clone(&captured);
    let respond = Arc::new(respond);
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut buffer = Vec::new();
            let mut chunk = [0u8; 4096];
            let (head, body) = loop {
                let read = stream.read(&mut chunk).await.unwrap();
                assert!(read > 0, "client closed before sending a full request");
                buffer.extend_from_slice(&chunk[..read]);
                let text = String::from_utf8_lossy(&buffer).to_string();
                if let Some(head_end) = text.find("\r\n\r\n") {
                    let head = text[..head_end].to_string();
                    let content_length: usize = head
                        .lines()
                        .find_map(|line| {
                            let lower = line.to_ascii_lowercase();
                            lower
                                .strip_prefix("content-length:")
                                .map(|value| value.trim().parse().unwrap())
                        })
                        .unwrap_or(0);
                    if buffer.len() >= head_end + 4 + content_length {
                        let body = buffer[head_end + 4..head_end + 4 + content_length].to_vec();
                        break (head, body);
                    }
                }
            };
            let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
            let (status_line, response_body) = respond(&body);
            captured_by_server
                .lock()
                .unwrap()
                .push(CapturedRequest { head, body });
            let response = format!(
                "HTTP/1.1 {status_line}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{response_body}",
                response_body.len()
            );
            stream.write_all(response.as_bytes()).await.unwrap();
            stream.shutdown().await.unwrap();
        }
    });
    (format!("http://{address}/v1/"), captured)
}

/// Answers with vectors `[i+1, 0, 0]` per input, listed in reverse index order.
fn reversed_unnormalised_vectors(request_body: &serde_json::Value) -> (&'static str, String) {
    let input_count = request_body["input"].as_array().unwrap().len();
    let data: Vec<serde_json::Value> = (0..input_count)
        .rev()
        .map(|index| {
            serde_json::json!({"object": "embedding", "index": index, "embedding": [index as f32 + 1.0, 0.0, (index % 2) as f32]})
        })
        .collect();
    (
        "200 OK",
        serde_json::json!({"object": "list", "data": data}).to_string(),
    )
}

#[tokio::test]
async fn posts_batches_with_bearer_key_and_returns_ordered_unit_vectors() {
    let (base_url, captured) = start_server(reversed_unnormalised_vectors).await;
    let embedder = OpenAiCompatibleEmbedder::new(OpenAiCompatibleOptions {
        api_key: Some("secret-key".to_string()),
        max_batch: 2,
        ..OpenAiCompatibleOptions::new(base_url, "text-embedding-test", 3)
    })
    .unwrap();
    assert_eq!(embedder.model_id(), "text-embedding-test");
    assert_eq!(embedder.dimension(), 3);

    let texts: Vec<String> = ["first", "second", "third"].map(String::from).to_vec();
    let vectors = embedder.embed(texts).await.unwrap();
    assert_eq!(vectors.len(), 3);
    // Batches of 2 then 1: within-batch indexes are 0,1 then 0.
    let expected = [
        vec![1.0, 0.0, 0.0],
        {
            let norm = (4.0f32 + 1.0).sqrt();
            vec![2.0 / norm, 0.0, 1.0 / norm]
        },
        vec![1.0, 0.0, 0.0],
    ];
    for (vector, expected_vector) in vectors.iter().zip(&expected) {
        for (component, expected_component) in vector.iter().zip(expected_vector) {
            assert!((component - expected_component).abs() < 1e-6, "{vectors:?}");
        }
    }

    let requests = captured.lock().unwrap();
    assert_eq!(requests.len(), 2);
    assert!(
        requests[0].head.starts_with("POST /v1/embeddings "),
        "{}",
        requests[0].head
    );
    assert!(
        requests[0]
            .head
            .to_ascii_lowercase()
            .contains("authorization: bearer secret-key")
    );
    assert_eq!(
        requests[0].body,
        serde_json::json!({"model": "text-embedding-test", "input": ["first", "second"]})
    );
    assert_eq!(requests[1].body["input"], serde_json::json!(["third"]));
}

#[tokio::test]
async fn server_errors_are_unavailable_and_client_errors_are_failed() {
    let (server_error_url, _) = start_server(|_| {
        (
            "503 Service Unavailable",
            "{\"error\":\"busy\"}".to_string(),
        )
    })
    .await;
    let embedder =
        OpenAiCompatibleEmbedder::new(OpenAiCompatibleOptions::new(server_error_url, "m", 3))
            .unwrap();
    match embedder.embed(vec!["text".to_string()]).await {
        Err(EmbedError::Unavailable(message)) => assert!(message.contains("busy"), "{message}"),
        other => panic!("expected Unavailable, got {other:?}"),
    }

    let (client_error_url, _) =
        start_server(|_| ("400 Bad Request", "{\"error\":\"bad model\"}".to_string())).await;
    let embedder =
        OpenAiCompatibleEmbedder::new(OpenAiCompatibleOptions::new(client_error_url, "m", 3))
            .unwrap();
    match embedder.embed(vec!["text".to_string()]).await {
        Err(EmbedError::Failed(message)) => assert!(message.contains("bad model"), "{message}"),
        other => panic!("expected Failed, got {other:?}"),
    }
}

#[tokio::test]
async fn wrong_dimension_is_rejected() {
    let (base_url, _) = start_server(reversed_unnormalised_vectors).await;
    let embedder =
        OpenAiCompatibleEmbedder::new(OpenAiCompatibleOptions::new(base_url, "m", 384)).unwrap();
    match embedder.embed(vec!["text".to_string()]).await {
        Err(EmbedError::Failed(message)) => assert!(message.contains("length 3"), "{message}"),
        other => panic!("expected Failed, got {other:?}"),
    }
    assert!(embedder.embed(Vec::new()).await.unwrap().is_empty());
}
