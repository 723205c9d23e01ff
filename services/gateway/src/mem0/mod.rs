//! The Mem0 Platform–compatible door: the routes the official `mem0ai` clients call (their
//! v1, v2 and v3 forms) in Mem0's shapes and error format, each a thin adapter over a use case.
//!
//! Mounted twice: at the root, where every path ends in `/` (so none collides with a native
//! route) and only `Authorization: Token <key>` is accepted — a native client's trailing-slash
//! typo with `Bearer` must never reach a Mem0 bulk delete — and under `/mem0`, where `Bearer`
//! works too. Only the permission table's `Door::Mem0` rows are mounted (plus the ping, which
//! only authenticates, and the routes Engram answers "not supported"), so the table and the
//! router cannot disagree. No layer may normalise slashes.

mod entities;
mod filters;
mod memories;
mod openapi;
mod project;
mod views;

use crate::auth::ProjectPrincipal;
use crate::problem::{ApiError, PROBLEM_CONTENT_TYPE, ProblemDocument, ProblemKind};
use crate::state::AppState;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::MethodRouter;
use engram_core::audit::Channel;
use engram_core::permissions::{Door, OPERATIONS};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The prefix under which the door is mounted a second time.
pub const PREFIX: &str = "/mem0";

/// Routes answered without reaching a use case: the ping only authenticates; the rest are
/// Mem0 features Engram does not offer, answered with a JSON `detail` the client surfaces.
/// Each still reads the request's body: a connection whose body was left unread is closed
/// after the answer, and a client that reuses it sees "server disconnected".
pub const ROUTES_WITHOUT_USE_CASE: &[(&str, &str)] = &[
    ("get", "/v1/ping/"),
    ("post", "/v1/summary/"),
    (
        "patch",
        "/api/v1/orgs/organizations/{org_id}/projects/{project_id}/",
    ),
    (
        "delete",
        "/api/v1/orgs/organizations/{org_id}/projects/{project_id}/",
    ),
    ("post", "/api/v1/orgs/organizations/{org_id}/projects/"),
    (
        "get",
        "/api/v1/orgs/organizations/{org_id}/projects/{project_id}/members/",
    ),
    (
        "post",
        "/api/v1/orgs/organizations/{org_id}/projects/{project_id}/members/",
    ),
    (
        "put",
        "/api/v1/orgs/organizations/{org_id}/projects/{project_id}/members/",
    ),
    (
        "delete",
        "/api/v1/orgs/organizations/{org_id}/projects/{project_id}/members/",
    ),
];

/// The door, at the root and under [`PREFIX`], with its own OpenAPI document.
pub fn door(state: AppState) -> Router {
    let root = speaking_mem0(routes(), Mount::Root, &state);
    // The document is public, as the native one is: outside the credential layers.
    let document = Router::new().route(
        "/openapi.json",
        axum::routing::get(|| async { axum::Json(openapi::document()) }),
    );
    let prefixed = speaking_mem0(routes(), Mount::Prefixed, &state)
        .merge(document)
        .fallback(|| async {
            mem0_error(
                StatusCode::NOT_FOUND,
                "no such Mem0-compatible route; see /mem0/openapi.json",
            )
        });
    root.nest(PREFIX, prefixed)
}

/// Where the door is mounted: which authorization schemes it accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mount {
    /// Beside the native API: `Token` only.
    Root,
    /// Under `/mem0`: `Token` or `Bearer`.
    Prefixed,
}

fn speaking_mem0(routes: Router<AppState>, mount: Mount, state: &AppState) -> Router {
    routes
        .layer(axum::middleware::from_fn_with_state(
            mount,
            accept_mem0_credentials,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.credentials.client_rate_limit.clone(),
            crate::rate_limit::limit_requests_without_a_credential,
        ))
        // Inside the error layer, so a slow request's 408 is in Mem0's format too.
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            state.settings.request_timeout,
        ))
        .layer(axum::middleware::from_fn(answer_errors_as_mem0))
        .with_state(state.clone())
}

/// Every route of the table's `Door::Mem0` rows and of [`ROUTES_WITHOUT_USE_CASE`].
fn routes() -> Router<AppState> {
    let mut by_path: BTreeMap<&'static str, MethodRouter<AppState>> = BTreeMap::new();
    let doors = OPERATIONS
        .iter()
        .flat_map(|rule| rule.doors.iter())
        .filter_map(|door| match door {
            Door::Mem0 { method, path } => Some((*method, *path)),
            _ => None,
        })
        .chain(ROUTES_WITHOUT_USE_CASE.iter().copied());
    for (method, path) in doors {
        let Some(handler) = handler_for(method, path) else {
            tracing::error!(
                method,
                path,
                "a mem0 door of the permission table has no handler"
            );
            continue;
        };
        let merged = match by_path.remove(path) {
            Some(existing) => existing.merge(handler),
            None => handler,
        };
        by_path.insert(path, merged);
    }
    by_path
        .into_iter()
        .fold(Router::new(), |router, (path, handler)| {
            router.route(path, handler)
        })
}

/// The handler serving `method` `path` of the door.
fn handler_for(method: &str, path: &str) -> Option<MethodRouter<AppState>> {
    use axum::routing::{delete, get, patch, post, put};
    Some(match (method, path) {
        ("get", "/v1/ping/") => get(ping),
        ("post", "/v3/memories/add/") => post(memories::add_v3),
        ("post", "/v1/memories/") => post(memories::add_v1),
        ("get", "/v1/memories/{memory_id}/") => get(memories::get_memory),
        ("post", "/v3/memories/") => post(memories::list_v3),
        ("post", "/v2/memories/") => post(memories::list_v2),
        ("get", "/v1/memories/") => get(memories::list_v1),
        ("post", "/v3/memories/search/") => post(memories::search_v3),
        ("post", "/v2/memories/search/") => post(memories::search_v2),
        ("post", "/v1/memories/search/") => post(memories::search_v1),
        ("put", "/v1/memories/{memory_id}/") => put(memories::update_memory),
        ("delete", "/v1/memories/{memory_id}/") => delete(memories::delete_memory),
        ("delete", "/v1/memories/") => delete(memories::delete_all),
        ("get", "/v1/memories/{memory_id}/history/") => get(memories::history),
        ("put", "/v1/batch/") => put(memories::batch_update),
        ("delete", "/v1/batch/") => delete(memories::batch_delete),
        ("get", "/v1/entities/") => get(entities::list_entities),
        ("delete", "/v2/entities/{entity_type}/{entity_id}/") => delete(entities::delete_entity),
        ("post", "/v1/feedback/") => post(memories::feedback),
        ("post", "/v1/exports/") => post(memories::create_export),
        ("post", "/v1/exports/get/") => post(memories::get_export),
        ("post", "/v1/summary/") => post(project::summary_not_supported),
        ("get", "/api/v1/orgs/organizations/{org_id}/projects/{project_id}/") => {
            get(project::get_project)
        }
        ("patch", "/api/v1/orgs/organizations/{org_id}/projects/{project_id}/") => {
            patch(project::update_project_not_supported)
        }
        ("delete", "/api/v1/orgs/organizations/{org_id}/projects/{project_id}/")
        | ("post", "/api/v1/orgs/organizations/{org_id}/projects/") => {
            let answer = |_: ProjectPrincipal, _: Bytes| async {
                project::console_only("creating and deleting projects")
            };
            if method == "post" {
                post(answer)
            } else {
                delete(answer)
            }
        }
        (method, "/api/v1/orgs/organizations/{org_id}/projects/{project_id}/members/") => {
            let answer =
                |_: ProjectPrincipal, _: Bytes| async { project::console_only("project members") };
            match method {
                "get" => get(answer),
                "post" => post(answer),
                "put" => put(answer),
                "delete" => delete(answer),
                _ => return None,
            }
        }
        _ => return None,
    })
}

/// `GET /v1/ping/`: the client's constructor check. Authentication only: the credential's
/// organization and project, which older clients then add to every call.
async fn ping(
    principal: ProjectPrincipal,
    axum::extract::RawQuery(query): axum::extract::RawQuery,
) -> Result<axum::Json<Value>, ApiError> {
    check_query_hints(&principal, &query_pairs(query))?;
    let scope = principal.principal().scope();
    Ok(axum::Json(json!({
        "status": "ok",
        "org_id": scope.organization_id().to_string(),
        "project_id": scope.project_id().to_string(),
        "user_email": null,
    })))
}

/// The channel for audit, usage and recall events, and the `Token` scheme read as the
/// native extractor reads `Bearer` (at the root, `Bearer` itself is refused).
async fn accept_mem0_credentials(
    State(mount): State<Mount>,
    mut request: Request,
    next: Next,
) -> Response {
    request.extensions_mut().insert(Channel::Mem0);
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(|value| value.to_str().unwrap_or_default().to_string());
    match presented {
        None => {
            return mem0_unauthorized(
                "missing Authorization header; send `Authorization: Token <Engram API key>`",
            );
        }
        Some(value) => {
            let (scheme, key) = value.split_once(' ').unwrap_or((value.as_str(), ""));
            if scheme.eq_ignore_ascii_case("token") {
                match HeaderValue::from_str(&format!("Bearer {}", key.trim())) {
                    Ok(mut bearer) => {
                        bearer.set_sensitive(true);
                        request.headers_mut().insert(header::AUTHORIZATION, bearer);
                    }
                    Err(_) => return mem0_unauthorized("the API key is malformed"),
                }
            } else if mount == Mount::Root {
                return mem0_unauthorized(
                    "Mem0-compatible routes at the root accept only `Authorization: Token <key>`; use the /mem0 prefix to send `Bearer`",
                );
            }
        }
    }
    next.run(request).await
}

fn mem0_unauthorized(detail: &str) -> Response {
    let mut response = mem0_error(StatusCode::UNAUTHORIZED, detail);
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Token"));
    response
}

/// A Mem0 error body: `detail` (what the client shows) and `error` (what older Mem0 servers
/// sent), as `application/json`.
pub(crate) fn mem0_error(status: StatusCode, detail: &str) -> Response {
    (
        status,
        axum::Json(json!({
            "detail": detail,
            "error": detail,
            "status": status.as_u16(),
        })),
    )
        .into_response()
}

/// Every error of the door in Mem0's format: a problem (from a use case, an extractor or the
/// rate limit) keeps its fields but is sent as `application/json` with `detail`, which the
/// client reads into its exception; 422 is Mem0's 400; an empty body gets a `detail`.
async fn answer_errors_as_mem0(request: Request, next: Next) -> Response {
    let request_id = request
        .headers()
        .get("x-request-id")
        .and_then(|value| value.to_str().ok())
        .map(str::to_string);
    let response = next.run(request).await;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_string();
    if content_type.starts_with("application/json") {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let bytes = body
        .collect()
        .await
        .map(|collected| collected.to_bytes())
        .unwrap_or_else(|_| Bytes::new());
    let status = if status == StatusCode::UNPROCESSABLE_ENTITY {
        StatusCode::BAD_REQUEST
    } else {
        status
    };
    let document = if content_type.starts_with(PROBLEM_CONTENT_TYPE) {
        serde_json::from_slice::<ProblemDocument>(&bytes).ok()
    } else {
        None
    };
    let body = match document {
        Some(problem) => json!({
            "detail": problem.detail,
            "error": problem.detail,
            "status": status.as_u16(),
            "type": problem.problem_type,
            "title": problem.title,
            "code": problem.code,
            "errors": problem.errors,
            "request_id": request_id,
        }),
        None => {
            let text = String::from_utf8_lossy(&bytes).trim().to_string();
            let detail = if text.is_empty() || text.len() > 500 {
                status
                    .canonical_reason()
                    .unwrap_or("request failed")
                    .to_string()
            } else {
                text
            };
            json!({"detail": detail, "error": detail, "status": status.as_u16(), "request_id": request_id})
        }
    };
    parts.status = status;
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(
        parts,
        Body::from(serde_json::to_vec(&body).unwrap_or_default()),
    )
}

/// Older clients add the organization and project from the ping to every call: the
/// credential decides the tenant, so they are only checked — another's is "not found".
pub(crate) fn check_tenant_hints(
    principal: &ProjectPrincipal,
    org_id: Option<&str>,
    project_id: Option<&str>,
) -> Result<(), ApiError> {
    let scope = principal.principal().scope();
    let differs = |given: Option<&str>, own: String| given.is_some_and(|given| given != own);
    if differs(org_id, scope.organization_id().to_string())
        || differs(project_id, scope.project_id().to_string())
    {
        return Err(ApiError::new(
            ProblemKind::NotFound,
            "no such organization or project for this API key",
        ));
    }
    Ok(())
}

/// The query string's pairs, decoded (repeated names kept: `fields=a&fields=b`).
pub(crate) fn query_pairs(raw: Option<String>) -> Vec<(String, String)> {
    raw.map(|raw| {
        form_urlencoded::parse(raw.as_bytes())
            .into_owned()
            .collect()
    })
    .unwrap_or_default()
}

/// The first value of `name` in the query string.
pub(crate) fn query_value<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.as_str())
}

/// [`check_tenant_hints`] for the `org_id` and `project_id` of a query string.
pub(crate) fn check_query_hints(
    principal: &ProjectPrincipal,
    pairs: &[(String, String)],
) -> Result<(), ApiError> {
    check_tenant_hints(
        principal,
        query_value(pairs, "org_id"),
        query_value(pairs, "project_id"),
    )
}

/// A 400 naming what is wrong, in the door's words.
pub(crate) fn bad_request(detail: impl Into<String>) -> ApiError {
    ApiError::new(ProblemKind::MalformedBody, detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mem0_door_of_the_table_has_a_handler() {
        for rule in OPERATIONS {
            for door in rule.doors {
                if let Door::Mem0 { method, path } = door {
                    assert!(
                        handler_for(method, path).is_some(),
                        "{:?}: {method} {path} has no handler",
                        rule.operation
                    );
                    assert!(path.ends_with('/'), "{method} {path} must end in a slash");
                }
            }
        }
        for (method, path) in ROUTES_WITHOUT_USE_CASE {
            assert!(handler_for(method, path).is_some(), "{method} {path}");
        }
    }
}
