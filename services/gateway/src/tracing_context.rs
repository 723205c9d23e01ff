//! The span of each HTTP request: named by method and route, carrying the request id and
//! the trace id, and continuing the caller's trace when it sends W3C `traceparent`. No span
//! carries an end-user's id: the path keeps server-issued ids only, and a use case about one
//! end-user records their keyed digest (`subject_digest`).

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
        url.path = %path_without_subject_ids(request.uri().path(), route.as_deref()),
        request_id = %request_id,
        trace_id = tracing::field::Empty,
        subject_digest = tracing::field::Empty,
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

/// Route parameters a client chooses and that may name a person (`/v1/subjects/alice/…`,
/// a session called after its user, a state key): kept out of spans and logs.
const SUBJECT_PARAMETERS: [&str; 3] = ["{user_id}", "{session_id}", "{key}"];

/// The request path with each segment that fills a subject parameter of the route replaced
/// by the parameter's name; without a matched route, only the route-free prefix is safe, so
/// nothing past `/v1/<resource>` is kept.
fn path_without_subject_ids(path: &str, route: Option<&str>) -> String {
    let Some(route) = route else {
        return path.split('/').take(3).collect::<Vec<_>>().join("/");
    };
    let template: Vec<&str> = route.split('/').collect();
    path.split('/')
        .enumerate()
        .map(|(position, segment)| match template.get(position) {
            Some(parameter) if SUBJECT_PARAMETERS.contains(parameter) => *parameter,
            _ => segment,
        })
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::path_without_subject_ids;

    #[test]
    fn spans_keep_server_issued_ids_and_drop_the_ids_of_people() {
        assert_eq!(
            path_without_subject_ids(
                "/v1/subjects/alice@example.com/erasure",
                Some("/v1/subjects/{user_id}/erasure")
            ),
            "/v1/subjects/{user_id}/erasure"
        );
        assert_eq!(
            path_without_subject_ids(
                "/v1/sessions/chat-with-alice/state/alice-notes",
                Some("/v1/sessions/{session_id}/state/{key}")
            ),
            "/v1/sessions/{session_id}/state/{key}"
        );
        let memory = "/v1/memories/01a23803-f9d2-7116-b3ab-cd5dc8184712";
        assert_eq!(
            path_without_subject_ids(memory, Some("/v1/memories/{memory_id}")),
            memory
        );
        assert_eq!(
            path_without_subject_ids("/v1/organization/subjects/bob/erasure", None),
            "/v1/organization"
        );
    }
}
