//! The MCP door: `POST /mcp`, Streamable HTTP through the official SDK (`rmcp`), stateless,
//! serving both protocol eras; every tool a thin adapter over one use case.
//!
//! Authentication is the native API's (a project API key or an end-user token as `Bearer`,
//! never in the query string) and runs before the SDK sees the request: the caller rides in
//! the request's extensions to the tools. Errors before the SDK are JSON-RPC error objects;
//! the SDK answers its own (bad `Origin` or `Host`, protocol version, methods).

mod arguments;
mod tools;

pub use tools::{DEFAULT_USER_HEADER, EngramTools, TOOLS};

use crate::auth::ProjectPrincipal;
use crate::problem::{PROBLEM_CONTENT_TYPE, ProblemDocument};
use crate::state::AppState;
use axum::Router;
use axum::body::Body;
use axum::extract::{FromRequestParts, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use engram_core::audit::Channel;
use engram_core::limits::MAX_REQUEST_BODY_BYTES;
use http_body_util::BodyExt;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;
use std::sync::Arc;

/// Where the door is mounted, exactly (no trailing slash, no normalisation).
pub const PATH: &str = "/mcp";

/// The `Host` names every deployment answers to: a local client's.
pub const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// The door: the SDK's service behind the native credential check.
pub fn door(state: AppState) -> Router {
    let settings = &state.settings;
    let config = StreamableHttpServerConfig::default()
        // Stateless in every era: no session to bind to a credential, nothing to keep.
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_allowed_hosts(settings.mcp_allowed_hosts.clone())
        // A browser page may call only from an origin the deployment allows (the CORS
        // list); clients outside a browser send no `Origin`.
        .with_allowed_origins(
            settings
                .cors_allowed_origins
                .iter()
                .filter_map(|origin| origin.to_str().ok())
                .map(with_default_port),
        )
        .enforce_origin_validation()
        .with_max_request_body_bytes(MAX_REQUEST_BODY_BYTES);
    let engine = state.engine.clone();
    let service = StreamableHttpService::new(
        move || Ok(EngramTools::new(engine.clone())),
        // No sessions at all: nothing a later request could resume or replay.
        Arc::new(NeverSessionManager::default()),
        config,
    );
    Router::new()
        .route_service(PATH, service)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            authenticate,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.credentials.client_rate_limit.clone(),
            crate::rate_limit::limit_requests_without_a_credential,
        ))
        .layer(axum::middleware::from_fn(answer_problems_as_json_rpc))
}

/// The caller, verified as the native API verifies it, put on the request for the tools;
/// the channel is `mcp` (each tool names itself when it calls its use case).
async fn authenticate(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let (mut parts, body) = request.into_parts();
    parts.extensions.insert(Channel::Mcp {
        tool: String::new(),
    });
    match ProjectPrincipal::from_request_parts(&mut parts, &state).await {
        Ok(principal) => {
            parts.extensions.insert(principal);
            next.run(Request::from_parts(parts, body)).await
        }
        Err(problem) => {
            // Read a small body the client already sent, so the connection stays usable for
            // its next call; a large one (or one that waits for `100 Continue`) is not read
            // for a caller who is not known.
            let small = parts
                .headers
                .get(header::CONTENT_LENGTH)
                .and_then(|value| value.to_str().ok()?.parse::<usize>().ok())
                .is_some_and(|length| length <= REFUSED_BODY_READ_BYTES);
            if small && !parts.headers.contains_key(header::EXPECT) {
                let _ = axum::body::to_bytes(body, REFUSED_BODY_READ_BYTES).await;
            }
            problem.into_response()
        }
    }
}

/// The largest body read from a request whose credential is refused.
const REFUSED_BODY_READ_BYTES: usize = 64 * 1024;

/// A CORS origin as the SDK's Origin check matches it exactly: with its scheme's default
/// port when it names none (the SDK reads a missing port as "any port").
fn with_default_port(origin: &str) -> String {
    let Ok(uri) = origin.parse::<axum::http::Uri>() else {
        return origin.to_string();
    };
    match (uri.port_u16(), uri.scheme_str()) {
        (None, Some("https")) => format!("{origin}:443"),
        (None, Some("http")) => format!("{origin}:80"),
        _ => origin.to_string(),
    }
}

/// A problem (from authentication or a rate limit) as MCP clients read an HTTP error: a
/// JSON-RPC error object (its id null), the status and headers kept. A refused credential
/// is challenged with `Bearer realm="engram"` and no OAuth metadata, so clients use the
/// header they were configured with instead of starting an OAuth flow.
async fn answer_problems_as_json_rpc(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let is_problem = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with(PROBLEM_CONTENT_TYPE));
    if !is_problem {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let bytes = body
        .collect()
        .await
        .map(|collected| collected.to_bytes())
        .unwrap_or_default();
    let detail = serde_json::from_slice::<ProblemDocument>(&bytes)
        .map(|problem| problem.detail)
        .unwrap_or_else(|_| {
            parts
                .status
                .canonical_reason()
                .unwrap_or("request refused")
                .to_string()
        });
    let code = match parts.status {
        StatusCode::UNAUTHORIZED => -32001,
        StatusCode::TOO_MANY_REQUESTS => -32029,
        _ => -32000,
    };
    // `id: null`: the request's id is unread; clients then show this message, not a stand-in.
    let body = json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": code, "message": detail, "data": {"status": parts.status.as_u16()}},
    });
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    if parts.status == StatusCode::UNAUTHORIZED {
        parts.headers.insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"engram\""),
        );
    }
    Response::from_parts(
        parts,
        Body::from(serde_json::to_vec(&body).unwrap_or_default()),
    )
}

#[cfg(test)]
mod tests {
    use super::with_default_port;

    #[test]
    fn an_origin_without_a_port_is_its_schemes_default() {
        assert_eq!(
            with_default_port("https://app.example.com"),
            "https://app.example.com:443"
        );
        assert_eq!(with_default_port("http://localhost"), "http://localhost:80");
        assert_eq!(
            with_default_port("http://localhost:5173"),
            "http://localhost:5173"
        );
        assert_eq!(with_default_port("https://[::1]"), "https://[::1]:443");
        assert_eq!(
            with_default_port("https://[::1]:8443"),
            "https://[::1]:8443"
        );
    }
}
