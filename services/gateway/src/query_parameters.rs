//! Query parameters a native route does not publish are refused before its handler runs: a
//! 400 naming each one, so a misplaced `?user_id=` never silently addresses someone else.

use crate::problem::{ApiError, ProblemKind};
use crate::state::AppState;
use axum::Router;
use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use engram_core::FieldError;
use std::collections::{BTreeSet, HashMap};
use std::sync::LazyLock;

/// `(method, path template)` → the query parameters the published document names for it.
/// Built once from the same document `/openapi.json` serves, so the two cannot disagree.
static PUBLISHED_QUERY_PARAMETERS: LazyLock<HashMap<(String, String), BTreeSet<String>>> =
    LazyLock::new(|| published_query_parameters(&crate::openapi::document_json()));

fn published_query_parameters(
    document: &serde_json::Value,
) -> HashMap<(String, String), BTreeSet<String>> {
    let mut known = HashMap::new();
    let Some(paths) = document.get("paths").and_then(|paths| paths.as_object()) else {
        return known;
    };
    for (path, item) in paths {
        let shared_parameters = item.get("parameters").and_then(|value| value.as_array());
        for (method, operation) in item.as_object().into_iter().flatten() {
            let Some(parameters) = operation.get("parameters").and_then(|v| v.as_array()) else {
                known.insert((method.to_uppercase(), path.clone()), BTreeSet::new());
                continue;
            };
            let names = parameters
                .iter()
                .chain(shared_parameters.into_iter().flatten())
                .filter(|parameter| parameter.get("in").and_then(|v| v.as_str()) == Some("query"))
                .filter_map(|parameter| parameter.get("name").and_then(|v| v.as_str()))
                .map(str::to_string)
                .collect();
            known.insert((method.to_uppercase(), path.clone()), names);
        }
    }
    known
}

/// `router` refusing, on each of its published operations, every query parameter the
/// operation does not publish.
pub fn refuse_unknown_query_parameters(router: Router<AppState>) -> Router<AppState> {
    router.route_layer(axum::middleware::from_fn(refuse_unknown))
}

async fn refuse_unknown(request: Request, next: Next) -> Response {
    let Some(query) = request.uri().query().filter(|query| !query.is_empty()) else {
        return next.run(request).await;
    };
    let Some(template) = request.extensions().get::<MatchedPath>() else {
        return next.run(request).await;
    };
    let key = (
        request.method().as_str().to_string(),
        template.as_str().to_string(),
    );
    let Some(published) = PUBLISHED_QUERY_PARAMETERS.get(&key) else {
        // Not a published operation (a method this path does not serve): axum answers it.
        return next.run(request).await;
    };
    let unknown: BTreeSet<String> = form_urlencoded::parse(query.as_bytes())
        .map(|(name, _)| name.into_owned())
        .filter(|name| !published.contains(name))
        .collect();
    if unknown.is_empty() {
        return next.run(request).await;
    }
    unknown_parameters_problem(&unknown, published).into_response()
}

fn unknown_parameters_problem(
    unknown: &BTreeSet<String>,
    published: &BTreeSet<String>,
) -> ApiError {
    let takes = if published.is_empty() {
        "this operation takes no query parameters".to_string()
    } else {
        format!(
            "this operation takes: {}",
            published.iter().cloned().collect::<Vec<_>>().join(", ")
        )
    };
    let names = unknown
        .iter()
        .map(|name| format!("`{name}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut problem = ApiError::new(
        ProblemKind::MalformedBody,
        format!("unknown query parameter {names}; {takes}"),
    );
    problem.code = Some("unknown-query-parameter".to_string());
    problem.errors = unknown
        .iter()
        .map(|name| {
            FieldError::new(
                format!("query.{name}"),
                format!("not a parameter of this operation; {takes}"),
            )
        })
        .collect();
    problem
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every published operation has an entry, and the parameters the list route documents
    /// are among those it accepts.
    #[test]
    fn the_published_document_names_each_operations_query_parameters() {
        let known = &*PUBLISHED_QUERY_PARAMETERS;
        let listing = known
            .get(&("GET".to_string(), "/v1/memories".to_string()))
            .expect("GET /v1/memories is published");
        assert!(listing.contains("user_id"), "{listing:?}");
        let adding = known
            .get(&("POST".to_string(), "/v1/memories".to_string()))
            .expect("POST /v1/memories is published");
        assert!(!adding.contains("zz"));
    }
}
