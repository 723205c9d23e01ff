//! The HTTP face of Engram: routes, authentication into a tenant scope, input validation,
//! problem+json errors, request ids, the OpenAPI document and the console's hosting.

pub mod auth;
pub mod console;
mod extract;
pub mod http_metrics;
pub mod openapi;
pub mod problem;
mod routes;
pub mod state;
pub mod tracing_context;
mod views;

pub use state::{AppState, GatewaySettings};

use axum::Router;
use axum::extract::DefaultBodyLimit;
use engram_core::limits::MAX_REQUEST_BODY_BYTES;
use std::future::Future;
use std::time::Duration;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

/// The full application router: the public API, service endpoints, and any extra routes
/// (the console) merged in by the caller.
pub fn build_router(state: AppState, extra_routes: Router) -> Router {
    let request_timeout = state.settings.request_timeout;
    Router::new()
        .merge(routes::memories::router())
        .merge(routes::service::router())
        .with_state(state)
        .merge(extra_routes)
        .fallback(problem::unknown_route)
        .layer(DefaultBodyLimit::max(MAX_REQUEST_BODY_BYTES))
        .layer(TimeoutLayer::with_status_code(
            axum::http::StatusCode::REQUEST_TIMEOUT,
            request_timeout,
        ))
        .layer(TraceLayer::new_for_http().make_span_with(tracing_context::http_request_span))
        .route_layer(axum::middleware::from_fn(http_metrics::record_http_metrics))
        .layer(axum::middleware::from_fn(problem::ensure_problem_responses))
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
}

/// Serve until `shutdown` resolves, then finish in-flight requests before returning.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(
        listener,
        router.into_make_service_with_connect_info::<std::net::SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown)
    .await
}

/// Default per-request time limit.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
