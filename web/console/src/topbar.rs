//! The header every signed-in page shares: brand, navigation (the current page marked),
//! optional extra items (the account on the memories page) and the logout button.

use crate::api::Logout;
use leptos::prelude::*;

/// (path, label, test id) of each page in the navigation, in order.
const PAGES: [(&str, &str, &str); 10] = [
    ("/console/memories", "Memories", "nav-memories"),
    ("/console/subjects", "Subjects", "nav-subjects"),
    ("/console/settings", "Settings", "nav-settings"),
    ("/console/usage", "Usage", "nav-usage"),
    ("/console/recall", "Recall", "nav-recall"),
    ("/console/recalls", "Recalls", "nav-recalls"),
    ("/console/runs", "Runs", "nav-runs"),
    ("/console/keys", "API keys", "nav-keys"),
    ("/console/audit", "Audit log", "nav-audit"),
    ("/console/members", "Members", "nav-members"),
];

#[component]
pub fn TopBar(
    /// Path of the page being shown (`/console/memories`, …).
    current: &'static str,
    #[prop(optional)] children: Option<Children>,
) -> impl IntoView {
    let logout = ServerAction::<Logout>::new();
    view! {
        <header class="topbar">
            <a class="brand" href="/console/memories">"Engram"</a>
            <nav class="nav">
                {PAGES
                    .iter()
                    .map(|(path, label, test_id)| {
                        let is_current = *path == current;
                        view! {
                            <a
                                href=*path
                                data-testid=*test_id
                                aria-current=is_current.then_some("page")
                            >
                                {*label}
                            </a>
                        }
                    })
                    .collect_view()}
            </nav>
            <span class="spacer"></span>
            {children.map(|children| children())}
            <ActionForm action=logout attr:class="logout-form">
                <button type="submit" class="ghost" data-testid="logout-button">"Log out"</button>
            </ActionForm>
        </header>
    }
}
