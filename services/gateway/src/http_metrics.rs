//! Request rate and latency per route, for Prometheus: counted by route template
//! (`/v1/memories/{memory_id}`), never by raw path, so ids never become label values.

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use std::time::Instant;

pub const HTTP_REQUESTS_TOTAL: &str = "engram_http_requests_total";
pub const HTTP_REQUEST_DURATION_SECONDS: &str = "engram_http_request_duration_seconds";

pub async fn record_http_metrics(request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|path| path.as_str().to_string())
        // Always present inside a route layer; kept total so a change there cannot panic.
        .unwrap_or_else(|| "unmatched".to_string());
    let method = method_label(request.method());
    let started = Instant::now();
    let response = next.run(request).await;
    let status = response.status().as_u16().to_string();
    metrics::counter!(HTTP_REQUESTS_TOTAL, "method" => method, "route" => route.clone(), "status" => status)
        .increment(1);
    metrics::histogram!(HTTP_REQUEST_DURATION_SECONDS, "method" => method, "route" => route)
        .record(started.elapsed().as_secs_f64());
    response
}

/// The method as a label from a fixed set: a request with an invented method (any token is a
/// valid one on the wire) must not create a new time series.
fn method_label(method: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invented_methods_share_one_label() {
        let invented = axum::http::Method::from_bytes(b"EXFILTRATE").unwrap();
        let another = axum::http::Method::from_bytes(b"X-SCAN-42").unwrap();
        assert_eq!(method_label(&invented), "other");
        assert_eq!(method_label(&another), "other");
        assert_eq!(method_label(&axum::http::Method::PATCH), "PATCH");
    }
}
