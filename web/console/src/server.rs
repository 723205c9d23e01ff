//! The axum side of the console: SSR pages, server-function endpoints and the wasm bundle,
//! all under `/console`, plus the guard that sends visitors without a session to the login page.

use crate::BUNDLE_NAME;
use crate::api::{
    API_PREFIX,
    ssr::{
        is_https, refresh_cookie, refresh_token_from_headers, session_cookie, token_from_headers,
        with_session_cookies,
    },
};
use crate::app::{App, shell};
use crate::backend::ConsoleBackend;
use crate::i18n::Language;
use axum::{
    Router,
    extract::{Request, State},
    http::{HeaderValue, Method, header},
    middleware::{self, Next},
    response::{IntoResponse, Redirect, Response},
    routing::get,
};
use leptos::prelude::{LeptosOptions, provide_context};
use leptos_axum::{LeptosRoutes, generate_route_list};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tower_http::{services::ServeDir, set_header::SetResponseHeaderLayer};

const LOGIN_PATH: &str = "/console/login";
/// Where an invitation link leads: open without a session, like the login page.
const INVITE_PATH: &str = "/console/invite";
/// The landing route: it sends each role to its own first page.
const HOME_PATH: &str = "/console";
/// URL path of the bundle, without the leading slash (the form `LeptosOptions` wants).
const PKG_URL_DIR: &str = "console/pkg";

/// Where the hydrate bundle built by `scripts/build-console.sh` lives on disk: a directory
/// holding `engram-console.js` and `engram-console_bg.wasm`, served at `/console/pkg/`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsoleAssets {
    pub pkg_dir: PathBuf,
}

impl ConsoleAssets {
    pub fn new(pkg_dir: impl Into<PathBuf>) -> Self {
        Self {
            pkg_dir: pkg_dir.into(),
        }
    }

    /// `<workspace>/target/console-pkg`, the build script's default output. Only useful for
    /// binaries run from a source checkout; deployments should configure the path.
    pub fn workspace_default() -> Self {
        let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
        let workspace = manifest_dir
            .parent()
            .and_then(Path::parent)
            .unwrap_or(manifest_dir);
        Self::new(workspace.join("target").join("console-pkg"))
    }

    fn js_path(&self) -> PathBuf {
        self.pkg_dir.join(format!("{BUNDLE_NAME}.js"))
    }

    fn wasm_path(&self) -> PathBuf {
        self.pkg_dir.join(format!("{BUNDLE_NAME}_bg.wasm"))
    }

    /// Whether both bundle files are on disk. Checked on every page render (two `stat`s), so
    /// a bundle built after the server started is picked up without a restart.
    pub fn bundle_present(&self) -> bool {
        self.js_path().is_file() && self.wasm_path().is_file()
    }
}

impl Default for ConsoleAssets {
    fn default() -> Self {
        Self::workspace_default()
    }
}

/// The whole console as one router with full `/console/...` paths, ready to be merged into
/// the gateway's router:
/// - `GET /console`, `/console/login`, `/console/memories`: server-rendered pages (all but
///   the login page require a session and redirect to it otherwise);
/// - `/console/api/{fn}`: the server functions;
/// - `GET /console/pkg/...`: the hydrate bundle from [`ConsoleAssets::pkg_dir`].
///
/// A missing bundle is not fatal: pages are then served without hydration scripts.
pub fn console_router(backend: Arc<dyn ConsoleBackend>, assets: ConsoleAssets) -> Router {
    if assets.bundle_present() {
        tracing::info!(pkg_dir = %assets.pkg_dir.display(), "console bundle found");
    } else {
        tracing::warn!(
            pkg_dir = %assets.pkg_dir.display(),
            "console bundle missing; pages are served without hydration (run scripts/build-console.sh)"
        );
    }

    // Configured here rather than from a cargo-leptos Cargo.toml section: only the names the
    // hydration scripts point at matter (`/console/pkg/engram-console.js` and `_bg.wasm`).
    let options = LeptosOptions::builder()
        .output_name(BUNDLE_NAME)
        // site_root is only read to look for a wasm-split manifest, which this bundle never has.
        .site_root(assets.pkg_dir.to_string_lossy().into_owned())
        .site_pkg_dir(PKG_URL_DIR)
        .hash_files(false)
        .build();

    let context = {
        let backend = backend.clone();
        move || provide_context(backend.clone())
    };

    let pages = {
        let shell_options = options.clone();
        let assets = assets.clone();
        Router::new()
            // Registers the pages and also every server function (at `/console/api/…`, from
            // their `prefix`), both with the backend in context.
            .leptos_routes_with_context(&options, generate_route_list(App), context, move || {
                shell(shell_options.clone(), assets.bundle_present())
            })
            .route("/console/", get(|| async { Redirect::to(HOME_PATH) }))
            .route(
                "/console/audit/export.csv",
                get({
                    let backend = backend.clone();
                    move |headers: axum::http::HeaderMap,
                          query: axum::extract::Query<ExportQuery>| {
                        let backend = backend.clone();
                        async move { export_audit_csv(backend, headers, query.0).await }
                    }
                }),
            )
            .route(
                "/console/statements/export.csv",
                get({
                    let backend = backend.clone();
                    move |headers: axum::http::HeaderMap,
                          query: axum::extract::Query<StatementExportQuery>| {
                        let backend = backend.clone();
                        async move { export_statement_csv(backend, headers, query.0).await }
                    }
                }),
            )
            .route(
                "/console/subjects/export.ndjson",
                get({
                    let backend = backend.clone();
                    move |headers: axum::http::HeaderMap,
                          query: axum::extract::Query<SubjectExportQuery>| {
                        let backend = backend.clone();
                        async move { export_subject(backend, headers, query.0).await }
                    }
                }),
            )
            .route_layer(middleware::from_fn_with_state(backend, require_session))
            .with_state(options)
    };

    // Pages and answers carry memory content: never cache them, never frame them.
    let private = pages
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CACHE_CONTROL,
            HeaderValue::from_static("no-store"),
        ))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::X_FRAME_OPTIONS,
            HeaderValue::from_static("DENY"),
        ))
        // Same-origin only: the no-JS login form relies on the Referer to come back with its error.
        .layer(SetResponseHeaderLayer::if_not_present(
            header::REFERRER_POLICY,
            HeaderValue::from_static("same-origin"),
        ));

    // The bundle has no content hash in its name, so browsers must revalidate it.
    let bundle = ServeDir::new(&assets.pkg_dir);
    let bundle = Router::new().nest_service("/console/pkg", bundle).layer(
        SetResponseHeaderLayer::overriding(
            header::CACHE_CONTROL,
            HeaderValue::from_static("no-cache"),
        ),
    );

    private
        .merge(bundle)
        .layer(SetResponseHeaderLayer::if_not_present(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
}

#[derive(serde::Deserialize)]
struct ExportQuery {
    project: String,
    action: Option<String>,
    actor: Option<String>,
    target: Option<String>,
    since: Option<String>,
    until: Option<String>,
}

#[derive(serde::Deserialize)]
struct StatementExportQuery {
    month: Option<String>,
}

/// The organization's statement of a month as a CSV download.
async fn export_statement_csv(
    backend: Arc<dyn ConsoleBackend>,
    headers: axum::http::HeaderMap,
    query: StatementExportQuery,
) -> Response {
    let Some(token) = token_from_headers(&headers) else {
        return Redirect::to(LOGIN_PATH).into_response();
    };
    let caller =
        crate::model::ConsoleCaller::new(token, crate::api::ssr::origin_from(&headers, None));
    let month = query.month.unwrap_or_default();
    match backend
        .organization_statement_csv(&caller, month.trim())
        .await
    {
        Ok(csv) => {
            // The month is the use case's checked `YYYY-MM` (else it refused): safe in a name.
            let name = if month.trim().is_empty() {
                "statement.csv".to_string()
            } else {
                format!("statement-{}.csv", month.trim())
            };
            (
                [
                    (header::CONTENT_TYPE, "text/csv; charset=utf-8".to_string()),
                    (
                        header::CONTENT_DISPOSITION,
                        format!("attachment; filename=\"{name}\""),
                    ),
                ],
                csv,
            )
                .into_response()
        }
        Err(error) => download_refused(error),
    }
}

/// A download the backend refused, as the browser should see it: to the sign-in page
/// without a session, else the status and what was wrong.
fn download_refused(error: crate::model::ConsoleError) -> Response {
    use crate::model::ConsoleError;
    use axum::http::StatusCode;
    let status = match &error {
        ConsoleError::Unauthorized => return Redirect::to(LOGIN_PATH).into_response(),
        ConsoleError::NotFound => {
            return (StatusCode::NOT_FOUND, "no such project").into_response();
        }
        ConsoleError::Forbidden { .. } => StatusCode::FORBIDDEN,
        ConsoleError::InvalidInput(_) => StatusCode::BAD_REQUEST,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    (status, error.to_string()).into_response()
}

#[derive(serde::Deserialize)]
struct SubjectExportQuery {
    project: String,
    user: String,
}

/// Everything live about one end-user as an NDJSON download (the session guard ran already).
async fn export_subject(
    backend: Arc<dyn ConsoleBackend>,
    headers: axum::http::HeaderMap,
    query: SubjectExportQuery,
) -> Response {
    let Some(token) = token_from_headers(&headers) else {
        return Redirect::to(LOGIN_PATH).into_response();
    };
    let caller =
        crate::model::ConsoleCaller::new(token, crate::api::ssr::origin_from(&headers, None));
    match backend
        .export_subject(&caller, &query.project, &query.user)
        .await
    {
        Ok(ndjson) => (
            [
                (header::CONTENT_TYPE, "application/x-ndjson"),
                (
                    header::CONTENT_DISPOSITION,
                    "attachment; filename=\"subject-export.ndjson\"",
                ),
            ],
            ndjson,
        )
            .into_response(),
        Err(error) => download_refused(error),
    }
}

/// The project's audit events as a CSV download (the session guard ran already).
async fn export_audit_csv(
    backend: Arc<dyn ConsoleBackend>,
    headers: axum::http::HeaderMap,
    query: ExportQuery,
) -> Response {
    let Some(token) = token_from_headers(&headers) else {
        return Redirect::to(LOGIN_PATH).into_response();
    };
    let caller = crate::model::ConsoleCaller::new(token, Default::default());
    let query = crate::model::AuditQuery {
        project_id: query.project,
        action: query.action.filter(|value| !value.is_empty()),
        limit: crate::model::AUDIT_PAGE_LIMIT,
        full: false,
        actor: query.actor.filter(|value| !value.is_empty()),
        target: query.target.filter(|value| !value.is_empty()),
        since: query.since.filter(|value| !value.is_empty()),
        until: query.until.filter(|value| !value.is_empty()),
        before: None,
    };
    match backend.export_audit_csv(&caller, query).await {
        Ok(csv) => (
            [
                (header::CONTENT_TYPE, "text/csv; charset=utf-8"),
                (
                    header::CONTENT_DISPOSITION,
                    "attachment; filename=\"audit.csv\"",
                ),
            ],
            csv,
        )
            .into_response(),
        Err(error) => download_refused(error),
    }
}

/// Lets only signed-in visitors reach the pages; the login page itself is open (and sends
/// visitors who already have a session on to the memories). Server functions pass: they
/// check the session themselves and answer with `ConsoleError::Unauthorized`.
async fn require_session(
    State(backend): State<Arc<dyn ConsoleBackend>>,
    mut req: Request,
    next: Next,
) -> Response {
    // CSRF: besides SameSite=Strict cookies, a state-changing request must come from this
    // very origin when the browser says where it comes from.
    if !matches!(*req.method(), Method::GET | Method::HEAD) && !same_origin(req.headers()) {
        tracing::warn!("cross-origin console request refused");
        return (
            axum::http::StatusCode::FORBIDDEN,
            "cross-origin requests to the console are refused",
        )
            .into_response();
    }
    // An expired (or missing) access token is renewed with the refresh token; the request
    // then continues with the new session, and the response carries both new cookies.
    let account_of = |token: String| {
        let backend = backend.clone();
        async move {
            backend
                .current_account(&crate::model::ConsoleCaller::new(token, Default::default()))
                .await
        }
    };
    let mut account = match token_from_headers(req.headers()) {
        Some(token) => account_of(token).await,
        None => None,
    };
    let mut renewed = None;
    if account.is_none()
        && let Some(refresh) = refresh_token_from_headers(req.headers())
        && let Some(tokens) = backend.refresh(&refresh).await
        && let Some(cookie) = with_session_cookies(req.headers(), &tokens.access, &tokens.refresh)
    {
        req.headers_mut().insert(header::COOKIE, cookie);
        account = account_of(tokens.access.clone()).await;
        renewed = Some(tokens);
    }
    let signed_in = account.is_some() || renewed.is_some();
    // The page's language: the account's choice, else what the browser asks for.
    let language = account
        .as_ref()
        .and_then(|account| account.language.as_deref())
        .and_then(Language::from_tag)
        .unwrap_or_else(|| {
            Language::from_accept_language(
                req.headers()
                    .get(header::ACCEPT_LANGUAGE)
                    .and_then(|value| value.to_str().ok())
                    .unwrap_or(""),
            )
        });
    req.extensions_mut().insert(language);
    let secure = is_https(req.headers());
    let is_api = req
        .uri()
        .path()
        .strip_prefix(API_PREFIX)
        .is_some_and(|rest| rest.starts_with('/'));
    let mut response = if is_api {
        next.run(req).await
    } else if req.uri().path() == LOGIN_PATH {
        if signed_in && req.method() == Method::GET {
            Redirect::to(HOME_PATH).into_response()
        } else {
            next.run(req).await
        }
    } else if signed_in || req.uri().path() == INVITE_PATH {
        next.run(req).await
    } else {
        Redirect::to(LOGIN_PATH).into_response()
    };
    if let Some(tokens) = renewed {
        for cookie in [
            session_cookie(&tokens.access, secure),
            refresh_cookie(&tokens.refresh, secure),
        ]
        .into_iter()
        .flatten()
        {
            response.headers_mut().append(header::SET_COOKIE, cookie);
        }
    }
    response
}

/// Whether `Origin` (or, without it, `Referer`) names this host; requests that carry neither
/// (non-browser clients) pass, since the cookies are SameSite=Strict anyway.
fn same_origin(headers: &axum::http::HeaderMap) -> bool {
    let host = headers
        .get("x-forwarded-host")
        .or_else(|| headers.get(header::HOST))
        .and_then(|value| value.to_str().ok());
    let claimed = headers
        .get(header::ORIGIN)
        .or_else(|| headers.get(header::REFERER))
        .and_then(|value| value.to_str().ok());
    let Some(claimed) = claimed else {
        return true;
    };
    let claimed_host = claimed
        .split_once("://")
        .map(|(_, rest)| rest.split('/').next().unwrap_or(""));
    match (claimed_host, host) {
        (Some(claimed_host), Some(host)) => claimed_host.eq_ignore_ascii_case(host),
        _ => false,
    }
}
