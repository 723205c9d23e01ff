//! The HTTP face of Engram: routes, authentication into a tenant scope, input validation,
//! problem+json errors, request ids, the OpenAPI document and the console's hosting.

pub mod auth;
pub mod client_address;
pub mod console;
pub mod csv_export;
mod extract;
pub mod http_metrics;
pub mod mcp;
pub mod mem0;
pub mod openapi;
pub mod problem;
mod query_parameters;
pub mod rate_limit;
mod routes;
pub mod state;
mod subject_export;
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

/// The full application router: the native API and service endpoints, and beside them any
/// other doors (the console) the caller mounts. Each door answers errors in its own format.
pub fn build_router(state: AppState, other_doors: Router) -> Router {
    let frame = DoorFrame {
        request_timeout: state.settings.request_timeout,
        trusted_proxies: state.settings.trusted_proxies.clone(),
        cors: cors_layer(&state.settings.cors_allowed_origins),
    };
    let mem0 = mem0::door(state.clone());
    let mcp = mcp::door(state.clone());
    frame.mount(native_door(state), other_doors.merge(mem0).merge(mcp))
}

/// The native API: its routes, its unknown-route answer, and problem+json for every error
/// it gives, including those of layers (body limit, timeout, a method it does not serve).
fn native_door(state: AppState) -> Router {
    let api_routes = routes::memories::router()
        .merge(routes::keys::router())
        .merge(routes::audit::router())
        .merge(routes::end_user_tokens::router())
        .merge(routes::governance::router())
        .merge(routes::usage::router())
        .merge(routes::prices::router())
        .merge(routes::files::router())
        .merge(routes::sessions::router())
        .merge(routes::messages::router())
        .merge(routes::feedback::router())
        .merge(routes::recall_quality::router())
        .merge(routes::runs::router());
    let api_routes = api_routes.layer(axum::middleware::from_fn_with_state(
        state.credentials.client_rate_limit.clone(),
        rate_limit::limit_requests_without_a_credential,
    ));
    let api_routes = query_parameters::refuse_unknown_query_parameters(api_routes);
    let request_timeout = state.settings.request_timeout;
    problem::speaking_problems(
        Router::new()
            .merge(api_routes)
            .merge(routes::service::router())
            .with_state(state)
            .fallback(problem::unknown_route)
            // Inside the problem layer, so a slow request's 408 is a problem too.
            .layer(TimeoutLayer::with_status_code(
                axum::http::StatusCode::REQUEST_TIMEOUT,
                request_timeout,
            )),
    )
}

/// What every door shares: request ids, the body limit, tracing, metrics, security headers,
/// CORS and the client's address; the time limit for doors that set none of their own.
/// Nothing here writes an error body.
pub struct DoorFrame {
    pub request_timeout: Duration,
    pub trusted_proxies: client_address::TrustedProxies,
    pub cors: CorsLayer,
}

impl DoorFrame {
    /// `native` (already speaking problem+json) and `other_doors` (each speaking its own
    /// format) behind the shared layers.
    pub fn mount(self, native: Router, other_doors: Router) -> Router {
        // Each door answers its own slow requests: the native door inside its problem layer
        // (`native_door`), the others here, in their own format.
        let other_doors = other_doors.layer(TimeoutLayer::with_status_code(
            axum::http::StatusCode::REQUEST_TIMEOUT,
            self.request_timeout,
        ));
        native
            .merge(other_doors)
            .layer(DefaultBodyLimit::max(MAX_REQUEST_BODY_BYTES))
            .layer(TraceLayer::new_for_http().make_span_with(tracing_context::http_request_span))
            .route_layer(axum::middleware::from_fn(http_metrics::record_http_metrics))
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
            .layer(self.cors)
            // First of all: every layer and handler after it sees the client's address.
            .layer(axum::middleware::from_fn_with_state(
                self.trusted_proxies,
                client_address::resolve_client_address,
            ))
    }
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
            HeaderName::from_static("engram-run-id"),
            // The MCP door's headers, for a browser-based MCP client of an allowed origin.
            HeaderName::from_static("mcp-protocol-version"),
            HeaderName::from_static("mcp-method"),
            HeaderName::from_static("mcp-name"),
            HeaderName::from_static("mcp-session-id"),
            HeaderName::from_static("last-event-id"),
            HeaderName::from_static(mcp::DEFAULT_USER_HEADER),
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

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use axum::routing::get;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    /// Another door keeps its own error bodies: a stub answering as Mem0's API does
    /// (`{"detail": …}`) is mounted beside a native door, and its 404 and 405 pass through
    /// untouched while the native door's errors are problem+json.
    #[tokio::test]
    async fn a_door_mounted_beside_the_native_api_keeps_its_own_error_bodies() {
        let native = problem::speaking_problems(
            Router::new()
                .route(
                    "/v1/thing",
                    get(|| async {
                        problem::ApiError::new(problem::ProblemKind::NotFound, "no thing")
                    }),
                )
                .fallback(problem::unknown_route),
        );
        let stub_door = Router::new().route(
            "/stub/v1/memories/",
            get(|| async {
                (
                    StatusCode::NOT_FOUND,
                    axum::Json(serde_json::json!({"detail": "Memory not found."})),
                )
            }),
        );
        let frame = DoorFrame {
            request_timeout: Duration::from_secs(5),
            trusted_proxies: Default::default(),
            cors: CorsLayer::new(),
        };
        let router = frame.mount(native, stub_door);
        let answer = |method: &str, path: &str| {
            let request = Request::builder()
                .method(method)
                .uri(path)
                .body(Body::empty())
                .unwrap();
            let router = router.clone();
            async move {
                let response = router.oneshot(request).await.unwrap();
                let status = response.status();
                let content_type = response
                    .headers()
                    .get(header::CONTENT_TYPE)
                    .map(|value| value.to_str().unwrap_or("").to_string())
                    .unwrap_or_default();
                let body = response.into_body().collect().await.unwrap().to_bytes();
                (
                    status,
                    content_type,
                    String::from_utf8_lossy(&body).to_string(),
                )
            }
        };

        let (status, content_type, body) = answer("GET", "/stub/v1/memories/").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(content_type, "application/json");
        assert_eq!(body, r#"{"detail":"Memory not found."}"#);
        // A method the door does not serve: axum's own 405, not rewritten into a problem.
        let (status, content_type, body) = answer("DELETE", "/stub/v1/memories/").await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
        assert!(
            !content_type.starts_with(problem::PROBLEM_CONTENT_TYPE),
            "{content_type}"
        );
        assert!(body.is_empty(), "{body}");

        for (method, path) in [
            ("GET", "/v1/thing"),
            ("DELETE", "/v1/thing"),
            ("GET", "/v9/nowhere"),
        ] {
            let (status, content_type, body) = answer(method, path).await;
            assert!(status.is_client_error(), "{method} {path}: {status}");
            assert_eq!(
                content_type,
                problem::PROBLEM_CONTENT_TYPE,
                "{method} {path}: {body}"
            );
            let document: serde_json::Value = serde_json::from_str(&body).unwrap();
            assert_eq!(document["status"], status.as_u16(), "{body}");
        }
    }
}
