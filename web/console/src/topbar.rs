//! The header every signed-in page shares: brand, the navigation of the pages the member's
//! role may use (the current page marked), optional extra items and the logout button; and
//! the landing page each role starts on.

use crate::api::{ChooseLanguage, Logout, load_session};
use crate::i18n::{Language, load_whole_page_when, tr};
use crate::model::{ConsoleError, SessionInfo};
use leptos::prelude::*;
use leptos_router::components::Redirect;

/// One page of the navigation.
pub struct Page {
    pub path: &'static str,
    pub label: &'static str,
    pub test_id: &'static str,
    /// The console function the page is for (its row in the permission table): the page is
    /// offered only to roles that may use it.
    pub function: &'static str,
}

/// Every page of the navigation, in order.
pub const PAGES: [Page; 12] = [
    Page {
        path: "/console/memories",
        label: "Memories",
        test_id: "nav-memories",
        function: "list_memories",
    },
    Page {
        path: "/console/subjects",
        label: "Subjects",
        test_id: "nav-subjects",
        function: "subject_summary",
    },
    Page {
        path: "/console/settings",
        label: "Settings",
        test_id: "nav-settings",
        function: "governance_settings",
    },
    Page {
        path: "/console/usage",
        label: "Usage",
        test_id: "nav-usage",
        function: "usage_overview",
    },
    Page {
        path: "/console/statements",
        label: "Statements",
        test_id: "nav-statements",
        function: "organization_statement",
    },
    Page {
        path: "/console/prices",
        label: "Prices",
        test_id: "nav-prices",
        function: "price_book",
    },
    Page {
        path: "/console/recall",
        label: "Recall",
        test_id: "nav-recall",
        function: "recall_dashboard",
    },
    Page {
        path: "/console/recalls",
        label: "Recalls",
        test_id: "nav-recalls",
        function: "recall_list",
    },
    Page {
        path: "/console/runs",
        label: "Runs",
        test_id: "nav-runs",
        function: "run_list",
    },
    Page {
        path: "/console/keys",
        label: "API keys",
        test_id: "nav-keys",
        function: "list_keys",
    },
    Page {
        path: "/console/audit",
        label: "Audit log",
        test_id: "nav-audit",
        function: "audit_log",
    },
    Page {
        path: "/console/members",
        label: "Members",
        test_id: "nav-members",
        function: "list_members",
    },
];

/// Where each role starts, first usable first: compliance staff review memories, analysts
/// read recall quality and usage, developers manage keys.
const LANDING_ORDER: [&str; 6] = [
    "/console/memories",
    "/console/recall",
    "/console/usage",
    "/console/keys",
    "/console/audit",
    "/console/settings",
];

/// The pages a member whose role may use `functions` is offered, in navigation order.
pub fn pages_for(functions: &[String]) -> impl Iterator<Item = &'static Page> + '_ {
    PAGES
        .iter()
        .filter(|page| functions.iter().any(|function| function == page.function))
}

/// The page a member whose role may use `functions` lands on.
pub fn landing_page(functions: &[String]) -> &'static str {
    LANDING_ORDER
        .iter()
        .copied()
        .find(|path| pages_for(functions).any(|page| page.path == *path))
        .or_else(|| pages_for(functions).next().map(|page| page.path))
        // A role with no page at all still gets a page that says so.
        .unwrap_or("/console/memories")
}

#[component]
pub fn TopBar(
    /// Path of the page being shown (`/console/memories`, …).
    current: &'static str,
    #[prop(optional)] children: Option<Children>,
) -> impl IntoView {
    let logout = ServerAction::<Logout>::new();
    let session = Resource::new(|| (), |_| load_session());
    let navigation = move || {
        Suspend::new(async move {
            let functions = match session.await {
                Ok(SessionInfo { account, .. }) => account.functions,
                Err(_) => Vec::new(),
            };
            pages_for(&functions)
                .map(|page| {
                    let is_current = page.path == current;
                    view! {
                        <a
                            href=page.path
                            data-testid=page.test_id
                            aria-current=is_current.then_some("page")
                        >
                            {Language::current().text(page.label)}
                        </a>
                    }
                })
                .collect_view()
        })
    };
    view! {
        <header class="topbar">
            <a class="brand" href="/console">"Engram"</a>
            <nav class="nav" data-testid="nav">
                <Transition fallback=|| ()>{navigation}</Transition>
            </nav>
            <span class="spacer"></span>
            {children.map(|children| children())}
            <LanguageSwitch />
            <ActionForm action=logout attr:class="logout-form">
                <button type="submit" class="ghost" data-testid="logout-button">{tr("Log out")}</button>
            </ActionForm>
        </header>
    }
}

/// The top bar's switch to the other language: saved with the account, then the page is
/// shown again in it (without JavaScript the form post comes back to the same page).
#[component]
fn LanguageSwitch() -> impl IntoView {
    let choose = ServerAction::<ChooseLanguage>::new();
    load_whole_page_when(move || matches!(choose.value().get(), Some(Ok(()))), None);
    let other = match Language::current() {
        Language::English => Language::Chinese,
        Language::Chinese => Language::English,
    };
    let failed = move || {
        choose
            .value()
            .get()
            .and_then(Result::err)
            .map(|error| view! { <span class="error" role="alert">{error.localized()}</span> })
    };
    view! {
        <ActionForm action=choose attr:class="language-form">
            <input type="hidden" name="language" value=other.tag() />
            <button
                type="submit"
                class="ghost"
                data-testid="language-switch"
                data-language=other.tag()
                lang=other.html_lang()
                translate="no"
                title=tr("Show the console in this language")
            >
                {other.own_name()}
            </button>
            {failed}
        </ActionForm>
    }
}

/// `/console`: the landing page of the member's role (the sign-in page when signed out).
#[component]
pub fn Landing() -> impl IntoView {
    let session = Resource::new(|| (), |_| load_session());
    let target = move || {
        Suspend::new(async move {
            match session.await {
                Ok(SessionInfo { account, .. }) => {
                    view! { <Redirect path=landing_page(&account.functions) /> }.into_any()
                }
                Err(ConsoleError::Unauthorized) => {
                    view! { <Redirect path="/console/login" /> }.into_any()
                }
                // Signed in, but the session cannot be read now: say so (sending the visitor
                // to the login page would send them straight back here).
                Err(error) => view! {
                    <main class="centered">
                        <p class="error" role="alert">{error.localized()}</p>
                    </main>
                }
                .into_any(),
            }
        })
    };
    view! { <Suspense fallback=|| ()>{target}</Suspense> }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn functions(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| name.to_string()).collect()
    }

    #[test]
    fn each_role_lands_on_a_page_it_may_use() {
        assert_eq!(
            landing_page(&functions(&["list_memories", "audit_log"])),
            "/console/memories"
        );
        assert_eq!(
            landing_page(&functions(&["usage_overview", "recall_dashboard"])),
            "/console/recall"
        );
        assert_eq!(
            landing_page(&functions(&["list_keys", "governance_settings"])),
            "/console/keys"
        );
        assert_eq!(
            pages_for(&functions(&["list_keys", "list_members"]))
                .map(|page| page.path)
                .collect::<Vec<_>>(),
            ["/console/keys", "/console/members"]
        );
    }
}
