//! Telemetry: logs, OpenTelemetry traces (OTLP export, W3C trace context) and Prometheus
//! metrics, whose `/metrics` is served on the admin listener, a port apart from the API so
//! scraping never needs an API key.

use anyhow::{Context, Result};
use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use opentelemetry_sdk::trace::SdkTracerProvider;
use std::net::SocketAddr;
use std::sync::OnceLock;

/// Latency buckets in seconds: 1 ms to 10 s, dense where search and writes usually land.
const LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

static PROMETHEUS: OnceLock<PrometheusHandle> = OnceLock::new();

/// The recorder every `metrics::` macro in the process reports to (installed on first use).
pub fn prometheus_handle() -> Result<PrometheusHandle> {
    if let Some(handle) = PROMETHEUS.get() {
        return Ok(handle.clone());
    }
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".to_string()), LATENCY_BUCKETS)
        .context("invalid latency buckets")?
        .install_recorder()
        .context("cannot install the metrics recorder")?;
    Ok(PROMETHEUS.get_or_init(|| handle).clone())
}

/// `/metrics`, plus `/healthz` (the process serves) and `/readyz` (its database and index
/// answer) for a worker, which has no API port to probe.
fn admin_router(
    handle: PrometheusHandle,
    readiness: Option<std::sync::Arc<engram_engine::IndexApplier>>,
) -> Router {
    let router = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(move || {
                let readiness = readiness.clone();
                async move {
                    let Some(applier) = readiness else {
                        return (axum::http::StatusCode::OK, "ready".to_string());
                    };
                    match applier.check_ready().await {
                        Ok(()) => (axum::http::StatusCode::OK, "ready".to_string()),
                        Err(error) => (
                            axum::http::StatusCode::SERVICE_UNAVAILABLE,
                            format!("not ready: {error}"),
                        ),
                    }
                }
            }),
        );
    router.route(
        "/metrics",
        get(move || {
            let handle = handle.clone();
            async move {
                // Histograms and gauges that nobody touched lately are kept; upkeep trims
                // the recorder's internal buffers.
                handle.run_upkeep();
                (
                    [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
                    handle.render(),
                )
                    .into_response()
            }
        }),
    )
}

/// A running admin listener.
pub struct AdminServer {
    pub address: SocketAddr,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl AdminServer {
    /// Listens on `listen`; when it is taken and `may_move` (the operator did not choose it),
    /// on a free port of the same host instead, saying so on stderr.
    pub async fn start(
        listen: SocketAddr,
        may_move: bool,
        readiness: Option<std::sync::Arc<engram_engine::IndexApplier>>,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<Self> {
        let handle = prometheus_handle()?;
        let listener = match tokio::net::TcpListener::bind(listen).await {
            Ok(listener) => listener,
            Err(error) if may_move && error.kind() == std::io::ErrorKind::AddrInUse => {
                let free_port = SocketAddr::new(listen.ip(), 0);
                let listener = tokio::net::TcpListener::bind(free_port)
                    .await
                    .with_context(|| format!("cannot listen on {free_port} for metrics"))?;
                let moved_to = listener.local_addr()?;
                tracing::warn!(%listen, %moved_to, "metrics address in use; serving metrics on a free port");
                eprintln!(
                    "engram: the metrics address {listen} is in use (another engram on this machine?); \
                     metrics are served on {moved_to} instead. Set --metrics-listen or \
                     ENGRAM_METRICS_LISTEN to choose one."
                );
                listener
            }
            Err(error) => {
                return Err(error).with_context(|| {
                    format!(
                        "cannot listen on {listen} for metrics (set --metrics-listen or \
                         ENGRAM_METRICS_LISTEN to another address, or port 0 for a free one)"
                    )
                });
            }
        };
        let address = listener.local_addr()?;
        let task = tokio::spawn(async move {
            axum::serve(listener, admin_router(handle, readiness))
                .with_graceful_shutdown(shutdown)
                .await
        });
        Ok(Self { address, task })
    }

    pub async fn stop(self) {
        let _ = self.task.await;
    }
}

/// Callers' W3C `traceparent` headers are honoured (the gateway reads them through the
/// global propagator).
pub fn install_trace_context_propagator() {
    opentelemetry::global::set_text_map_propagator(
        opentelemetry_sdk::propagation::TraceContextPropagator::new(),
    );
}

/// The layer that turns tracing spans (HTTP, embed, db, index) into OpenTelemetry spans: at
/// info and above, and never the database drivers' own spans, whose statements carry the
/// bound values (end-user ids, memory content).
pub fn otel_layer<S>(provider: &SdkTracerProvider) -> impl tracing_subscriber::Layer<S>
where
    S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
{
    use opentelemetry::trace::TracerProvider as _;
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::filter::{LevelFilter, Targets};
    let filter = Targets::new()
        .with_default(LevelFilter::INFO)
        .with_target("sea_orm", LevelFilter::OFF)
        .with_target("sea_orm_migration", LevelFilter::OFF)
        .with_target("sqlx", LevelFilter::OFF);
    tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("engram"))
        .with_filter(filter)
}

/// An OTLP/HTTP span exporter when `OTEL_EXPORTER_OTLP_ENDPOINT` (or the traces-specific
/// variable) is set; the exporter reads the standard `OTEL_EXPORTER_OTLP_*` variables.
pub fn otlp_tracer_provider_from_env() -> Result<Option<SdkTracerProvider>> {
    let configured = [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ]
    .iter()
    .any(|name| std::env::var_os(name).is_some_and(|value| !value.is_empty()));
    if !configured {
        return Ok(None);
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()
        .context("cannot build the OTLP span exporter")?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(
            opentelemetry_sdk::Resource::builder()
                .with_service_name("engram")
                .build(),
        )
        .build();
    Ok(Some(provider))
}

/// Keeps the trace exporter alive; `shutdown` sends what is still buffered.
pub struct TelemetryGuard {
    tracer_provider: Option<SdkTracerProvider>,
}

impl TelemetryGuard {
    pub fn shutdown(self) {
        if let Some(provider) = self.tracer_provider
            && let Err(error) = provider.shutdown()
        {
            eprintln!("warning: flushing traces failed: {error}");
        }
    }
}

fn log_filter() -> tracing_subscriber::EnvFilter {
    let mut filter =
        tracing_subscriber::EnvFilter::try_from_env("ENGRAM_LOG").unwrap_or_else(|_| {
            tracing_subscriber::EnvFilter::new("info,sqlx=warn,sea_orm=warn,tower_http=info")
        });
    // qdrant-edge 0.9 warns on every segment open that its feature flags and mmap check
    // were never initialised: their initialisers are private to the crate and the defaults
    // are the ones we want, so those two targets only speak up for errors. The database
    // drivers log statements with their bound values (end-user ids, content) below info:
    // capped at info whatever ENGRAM_LOG asks for.
    for directive in [
        "qdrant_edge::common::flags=error",
        "qdrant_edge::common::mmap=error",
        "sea_orm=info",
        "sqlx=info",
    ] {
        if let Ok(directive) = directive.parse() {
            filter = filter.add_directive(directive);
        }
    }
    filter
}

/// Logs to stderr (plain, or JSON with the current span's fields such as `request_id` and
/// `trace_id` when `ENGRAM_LOG_FORMAT=json`), filtered by `ENGRAM_LOG`; spans at info and
/// above to OTLP when configured, whatever the log filter says.
pub fn init_telemetry() -> TelemetryGuard {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let tracer_provider = match otlp_tracer_provider_from_env() {
        Ok(provider) => provider,
        Err(error) => {
            eprintln!("warning: trace export disabled: {error:#}");
            None
        }
    };
    install_trace_context_propagator();
    let json = std::env::var("ENGRAM_LOG_FORMAT").is_ok_and(|format| format == "json");
    let plain_logs = (!json).then(|| {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_filter(log_filter())
    });
    let json_logs = json.then(|| {
        tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(true)
            .with_writer(std::io::stderr)
            .with_filter(log_filter())
    });
    let traces = tracer_provider.as_ref().map(otel_layer);
    let _ = tracing_subscriber::registry()
        .with(plain_logs)
        .with(json_logs)
        .with(traces)
        .try_init();
    TelemetryGuard { tracer_provider }
}
