//! Prometheus metrics: installs the process-wide recorder once and serves `/metrics` on the
//! admin listener, a port apart from the API so scraping never needs an API key.

use anyhow::{Context, Result};
use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
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

fn admin_router(handle: PrometheusHandle) -> Router {
    Router::new().route(
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
    pub async fn start(
        listen: SocketAddr,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<Self> {
        let handle = prometheus_handle()?;
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("cannot listen on {listen} for metrics"))?;
        let address = listener.local_addr()?;
        let task = tokio::spawn(async move {
            axum::serve(listener, admin_router(handle))
                .with_graceful_shutdown(shutdown)
                .await
        });
        Ok(Self { address, task })
    }

    pub async fn stop(self) {
        let _ = self.task.await;
    }
}
