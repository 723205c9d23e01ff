//! Traces: a request carrying W3C `traceparent` produces an HTTP span in the caller's
//! trace, named by route, with embed, index and database spans beneath it. The real
//! embedded server runs in this process with an in-memory span exporter.

use engram_cli::config::{EngramConfig, ServeArgs};
use engram_cli::server::EmbeddedServer;
use opentelemetry::trace::{SpanId, TraceId};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use tracing_subscriber::layer::SubscriberExt;

const CALLER_TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN_ID: &str = "00f067aa0ba902b7";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_continues_the_callers_trace_with_embed_index_and_db_spans() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    engram_cli::telemetry::install_trace_context_propagator();
    let subscriber =
        tracing_subscriber::registry().with(engram_cli::telemetry::otel_layer(&provider));
    tracing::subscriber::set_global_default(subscriber).unwrap();

    let data_dir = tempfile::tempdir().unwrap();
    let workspace_root = engram_tests::workspace_root();
    let arguments = ServeArgs {
        data_dir: data_dir.path().to_path_buf(),
        listen: "127.0.0.1:0".parse().unwrap(),
        public_url: None,
        mcp_allowed_hosts: Vec::new(),
        metrics_listen: Some("127.0.0.1:0".parse().unwrap()),
        database_url: None,
        model_dir: Some(engram_embed::resolve_model_dir(&workspace_root)),
        multilingual_model_dir: None,
        console_assets: None,
        index_wait_ms: 5_000,
        onnxruntime_library: None,
        embed_threads: Some(1),
        embed_workers: None,
        reconcile_interval_secs: 600,
        full_reconcile_interval_secs: 86_400,
        rate_limit_burst: 0,
        rate_limit_per_second: 0,
        end_user_rate_limit_burst: 0,
        end_user_rate_limit_per_second: 0,
        console_signing_key_version: 1,
        cors_allowed_origins: Vec::new(),
        trusted_proxies: Vec::new(),
        tombstone_retention_hours: 720,
        idempotency_ttl_hours: 24,
        retention_sweep_interval_secs: 3600,
        usage_sample_interval_secs: 3600,
        consolidation_interval_secs: 0,
        evaluation_check_interval_secs: 60,
        consolidation_compact_after_secs: 2_592_000,
        erasure_ledger: None,
        audit_anchor: None,
        metering: true,
        server_secret: None,
        qdrant: engram_cli::config::QdrantArgs::embedded(),
        llm: engram_cli::config::LlmArgs::none(),
        embedding: engram_cli::config::EmbeddingArgs::local(),
        allow_unsafe_durability: false,
    };
    let server = EmbeddedServer::start(&EngramConfig::resolve(
        &arguments,
        engram_cli::config::Role::AllInOne,
    ))
    .await
    .unwrap();
    let api_key = server.bootstrap.as_ref().unwrap().api_key.clone();
    let base_url = format!("http://{}", server.address);
    let http = reqwest::Client::new();
    let added = http
        .post(format!("{base_url}/v1/memories"))
        .bearer_auth(&api_key)
        .json(&serde_json::json!({"memories": [{"content": "Takes the night train to Vienna."}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(added.status(), 201);
    let searched = http
        .post(format!("{base_url}/v1/memories/search"))
        .bearer_auth(&api_key)
        .header(
            "traceparent",
            format!("00-{CALLER_TRACE_ID}-{CALLER_SPAN_ID}-01"),
        )
        .json(&serde_json::json!({"query": "how does the user travel"}))
        .send()
        .await
        .unwrap();
    assert_eq!(searched.status(), 200);
    // A request about one end-user: its span names them by digest only.
    let exported = http
        .get(format!("{base_url}/v1/subjects/alice-in-the-trace/export"))
        .bearer_auth(&api_key)
        .send()
        .await
        .unwrap();
    assert_eq!(exported.status(), 200);
    server.shutdown().await.unwrap();
    provider.force_flush().unwrap();

    let spans = exporter.get_finished_spans().unwrap();
    let caller_trace = TraceId::from_hex(CALLER_TRACE_ID).unwrap();
    let request_span = spans
        .iter()
        .find(|span| span.name == "POST /v1/memories/search")
        .unwrap_or_else(|| {
            panic!(
                "no span for the search request among {:?}",
                spans
                    .iter()
                    .map(|span| span.name.to_string())
                    .collect::<Vec<_>>()
            )
        });
    assert_eq!(
        request_span.span_context.trace_id(),
        caller_trace,
        "the caller's trace continues"
    );
    assert_eq!(
        request_span.parent_span_id,
        SpanId::from_hex(CALLER_SPAN_ID).unwrap()
    );
    for child in ["embed", "index.search", "db.hydrate"] {
        let span = spans
            .iter()
            .find(|span| span.name == child && span.span_context.trace_id() == caller_trace)
            .unwrap_or_else(|| panic!("no {child} span in the caller's trace"));
        assert_eq!(
            span.parent_span_id,
            request_span.span_context.span_id(),
            "{child} is a child of the request span"
        );
    }
    let add_span = spans
        .iter()
        .find(|span| span.name == "POST /v1/memories")
        .expect("the add request has its own span");
    assert_ne!(
        add_span.span_context.trace_id(),
        caller_trace,
        "a request without traceparent starts a new trace"
    );
    assert!(
        spans.iter().any(|span| span.name == "db.insert_memories"
            && span.span_context.trace_id() == add_span.span_context.trace_id()),
        "the add's database write is traced"
    );
    let export_span = spans
        .iter()
        .find(|span| span.name == "GET /v1/subjects/{user_id}/export")
        .expect("the export request has its own span");
    let attribute = |span: &opentelemetry_sdk::trace::SpanData, key: &str| {
        span.attributes
            .iter()
            .find(|attribute| attribute.key.as_str() == key)
            .map(|attribute| attribute.value.to_string())
    };
    let digest = attribute(export_span, "subject_digest").expect("the span names the subject");
    assert_eq!(digest.len(), 64, "{digest}");
    assert_eq!(
        attribute(export_span, "url.path").as_deref(),
        Some("/v1/subjects/{user_id}/export")
    );
    for span in &spans {
        for attribute in &span.attributes {
            assert!(
                !attribute.value.to_string().contains("alice-in-the-trace"),
                "{} carries the end-user's id in {}",
                span.name,
                attribute.key
            );
        }
    }
}
