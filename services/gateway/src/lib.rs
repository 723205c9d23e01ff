//! The HTTP face of Engram: routes, authentication into a tenant scope, input validation,
//! problem+json errors, request ids, the OpenAPI document and the console's hosting.

pub mod auth;
pub mod client_address;
pub mod console;
pub mod csv_export;
mod extract;
pub mod http_metrics;
pub mod openapi;
pub mod problem;
pub mod rate_limit;
mod routes;
pub mod state;
pub mod tracing_context;
mod views;

pub use state::{AppState, GatewaySettings};

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderName, HeaderValue, Method, header};
use engram_core::limits::MAX_REQUEST_BODY_BYTES;
use std::future::Future;
use std::time::Duration;
use tower_http::cors::{AllowOrigin, CorsLayer};
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

/// The full application router: the public API, service endpoints, and any extra routes
/// (the console) merged in by the caller.
pub fn build_router(state: AppState, extra_routes: Router) -> Router {
    let request_timeout = state.settings.request_timeout;
    let trusted_proxies = state.settings.trusted_proxies.clone();
    let api_routes = routes::memories::router()
        .merge(routes::keys::router())
        .merge(routes::audit::router())
        .merge(routes::end_user_tokens::router())
        .merge(routes::governance::router())
        .merge(routes::usage::router())
        .merge(routes::files::router())
        .merge(routes::sessions::router())
        .merge(routes::messages::router())
        .merge(routes::feedback::router())
        .merge(routes::recall_quality::router());
    let api_routes = api_routes.layer(axum::middleware::from_fn_with_state(
        state.credentials.client_rate_limit.clone(),
        rate_limit::limit_requests_without_a_credential,
    ));
    let cors = cors_layer(&state.settings.cors_allowed_origins);
    Router::new()
        .merge(api_routes)
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
        // Every response: no MIME sniffing, no referrer leaks, never framed.
        .layer(SetResponseHeaderLayer::if_not_present(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::X_FRAME_OPTIONS,
            HeaderValue::from_static("DENY"),
        ))
        .layer(cors)
        // First of all: every layer and handler after it sees the client's address.
        .layer(axum::middleware::from_fn_with_state(
            trusted_proxies,
            client_address::resolve_client_address,
        ))
}

/// Cross-origin access for the configured browser origins only (none by default).
fn cors_layer(allowed_origins: &[HeaderValue]) -> CorsLayer {
    if allowed_origins.is_empty() {
        // No CORS headers at all: browsers keep the same-origin policy.
        return CorsLayer::new();
    }
    CorsLayer::new()
        .allow_origin(AllowOrigin::list(allowed_origins.iter().cloned()))
        .allow_methods([Method::GET, Method::POST, Method::PATCH, Method::DELETE])
        .allow_headers([
            header::AUTHORIZATION,
            header::CONTENT_TYPE,
            header::IF_MATCH,
            HeaderName::from_static("idempotency-key"),
            HeaderName::from_static("x-request-id"),
            HeaderName::from_static("traceparent"),
        ])
        .expose_headers([
            header::ETAG,
            header::RETRY_AFTER,
            HeaderName::from_static("x-request-id"),
        ])
        .max_age(Duration::from_secs(600))
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
