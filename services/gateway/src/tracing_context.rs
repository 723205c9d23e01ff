//! The span of each HTTP request: named by method and route, carrying the request id and
//! the trace id, and continuing the caller's trace when it sends W3C `traceparent`.

use axum::extract::MatchedPath;
use axum::http::Request;
use opentelemetry::trace::TraceContextExt;
use opentelemetry_http::HeaderExtractor;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// `TraceLayer::make_span_with` for every request.
pub fn http_request_span<B>(request: &Request<B>) -> tracing::Span {
    let request_id = request
        .headers()
        .get("x-request-id")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    // `Router::layer` wraps each route, so the router has already matched: the span is
    // named after the route template, never the raw path (ids stay out of span names).
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|path| path.as_str().to_string());
    let name = match &route {
        Some(route) => format!("{} {route}", request.method()),
        None => request.method().to_string(),
    };
    let span = tracing::info_span!(
        "http request",
        otel.name = %name,
        http.request.method = %request.method(),
        http.route = %route.as_deref().unwrap_or(""),
        url.path = %request.uri().path(),
        request_id = %request_id,
        trace_id = tracing::field::Empty,
    );
    let parent = opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.extract(&HeaderExtractor(request.headers()))
    });
    // Fails only when no OpenTelemetry layer is installed; the span then simply has no parent.
    let _ = span.set_parent(parent);
    let trace_id = span.context().span().span_context().trace_id();
    if trace_id != opentelemetry::trace::TraceId::INVALID {
        span.record("trace_id", tracing::field::display(trace_id));
    }
    span
}
