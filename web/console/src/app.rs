//! The console's root component, its routes and (server side) the HTML document around it.
//! Every route lives under `/console`; the router sees full paths, nothing is nested.

use crate::audit::AuditPage;
use crate::i18n::{Language, tr};
use crate::invite::InvitePage;
use crate::keys::KeysPage;
use crate::login::LoginPage;
use crate::members::MembersPage;
use crate::memories::MemoriesPage;
use crate::memory::MemoryPage;
use crate::prices::PricesPage;
use crate::recall::RecallPage;
use crate::runs::{RecallsPage, RunsPage};
use crate::settings::SettingsPage;
use crate::statements::StatementsPage;
use crate::subjects::SubjectsPage;
use crate::topbar::Landing;
use crate::usage::UsagePage;
use leptos::prelude::*;
use leptos_meta::{Title, provide_meta_context};
use leptos_router::{
    SsrMode,
    components::{Route, Router, Routes},
    path,
};

/// The stylesheet, inlined into every page so the console looks right even without the
/// wasm bundle.
#[cfg(feature = "ssr")]
const STYLESHEET: &str = include_str!("../style/console.css");

#[cfg(feature = "ssr")]
const FAVICON: &str = "data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 16 16'%3E%3Ccircle cx='8' cy='8' r='7' fill='%233556d4'/%3E%3C/svg%3E";

/// The HTML document: head (meta tags, styles, hydration scripts) and the app in `<body>`.
///
/// `hydrate` is false when the wasm bundle is not on disk; the page is then served as plain
/// server-rendered HTML instead of pointing the browser at scripts that would 404.
#[cfg(feature = "ssr")]
pub fn shell(options: LeptosOptions, hydrate: bool) -> impl IntoView {
    use leptos_meta::MetaTags;

    view! {
        <!DOCTYPE html>
        <html lang=page_language().html_lang()>
            <head>
                <meta charset="utf-8" />
                <meta name="viewport" content="width=device-width, initial-scale=1" />
                <meta name="robots" content="noindex" />
                // Inline icon: spares the browser a /favicon.ico request the console does not serve.
                <link rel="icon" href=FAVICON />
                <style inner_html=STYLESHEET></style>
                {hydrate.then(|| view! { <HydrationScripts options /> })}
                <MetaTags />
            </head>
            <body>
                <App />
            </body>
        </html>
    }
}

/// The language of this page: on the server the one the session guard settled on (the
/// account's choice, else the browser's `Accept-Language`); in the browser the page's own
/// `<html lang>`, which the server wrote.
fn page_language() -> Language {
    #[cfg(feature = "ssr")]
    {
        use_context::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Language>().copied())
            .unwrap_or_default()
    }
    #[cfg(not(feature = "ssr"))]
    {
        crate::i18n::hydrated_language()
    }
}

/// The console application, rendered on the server and hydrated in the browser.
#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    provide_context(page_language());

    // Effects only run in the browser, after hydration: the flag tells tests (and the
    // stylesheet, which hides no-JS-only controls) that the page is interactive.
    let hydrated = RwSignal::new(false);
    Effect::new(move |_| hydrated.set(true));

    view! {
        <Router>
            <div
                class="console"
                data-testid="console-root"
                data-hydrated=move || if hydrated.get() { "true" } else { "false" }
            >
                <Routes fallback=NotFound>
                    // Each role's own first page.
                    <Route path=path!("/console") view=Landing ssr=SsrMode::Async />
                    <Route path=path!("/console/login") view=LoginPage />
                    // Async: the page is sent once the memories are loaded, so it is complete
                    // without JavaScript and a session lost mid-render can still redirect.
                    <Route path=path!("/console/memories") view=MemoriesPage ssr=SsrMode::Async />
                    <Route path=path!("/console/audit") view=AuditPage ssr=SsrMode::Async />
                    <Route path=path!("/console/keys") view=KeysPage ssr=SsrMode::Async />
                    <Route path=path!("/console/members") view=MembersPage ssr=SsrMode::Async />
                    <Route path=path!("/console/memory") view=MemoryPage ssr=SsrMode::Async />
                    <Route path=path!("/console/subjects") view=SubjectsPage ssr=SsrMode::Async />
                    <Route path=path!("/console/settings") view=SettingsPage ssr=SsrMode::Async />
                    <Route path=path!("/console/usage") view=UsagePage ssr=SsrMode::Async />
                    <Route path=path!("/console/prices") view=PricesPage ssr=SsrMode::Async />
                    <Route path=path!("/console/statements") view=StatementsPage ssr=SsrMode::Async />
                    <Route path=path!("/console/recall") view=RecallPage ssr=SsrMode::Async />
                    <Route path=path!("/console/recalls") view=RecallsPage ssr=SsrMode::Async />
                    <Route path=path!("/console/runs") view=RunsPage ssr=SsrMode::Async />
                    <Route path=path!("/console/invite") view=InvitePage ssr=SsrMode::Async />
                </Routes>
            </div>
        </Router>
    }
}

#[component]
fn NotFound() -> impl IntoView {
    #[cfg(feature = "ssr")]
    if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
        response.set_status(axum::http::StatusCode::NOT_FOUND);
    }
    view! {
        <Title text=tr("Not found · Engram console") />
        <main class="centered">
            <section class="card">
                <h1>{tr("Page not found")}</h1>
                <p><a href="/console">{tr("Back to the console")}</a></p>
            </section>
        </main>
    }
}
