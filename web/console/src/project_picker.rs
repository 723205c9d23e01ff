//! The project selector shared by the console's pages: filled from the session's projects,
//! it sets the page's `project` signal; a lost session sends the visitor to the login page.
//! Also how a page keeps its filters in the URL.

use crate::model::{ConsoleError, SessionInfo};
use leptos::prelude::*;
use leptos_router::components::Redirect;

/// `value` trimmed, or `None` when that leaves nothing.
pub fn non_empty(value: &str) -> Option<String> {
    let value = value.trim();
    (!value.is_empty()).then(|| value.to_owned())
}

/// The `<select name="project">` for a loaded session; `initial_project` is preselected.
pub fn project_select(
    session: Result<SessionInfo, ConsoleError>,
    initial_project: Option<String>,
    project: RwSignal<Option<String>>,
) -> AnyView {
    match session {
        Ok(SessionInfo { projects, .. }) => view! {
            <select
                name="project"
                data-testid="project-select"
                on:change=move |ev| project.set(non_empty(&event_target_value(&ev)))
            >
                {projects
                    .into_iter()
                    .map(|p| {
                        let selected = initial_project.as_deref() == Some(p.id.as_str());
                        view! {
                            <option value=p.id selected=selected translate="no">
                                {p.name}
                            </option>
                        }
                    })
                    .collect_view()}
            </select>
        }
        .into_any(),
        Err(ConsoleError::Unauthorized) => view! { <Redirect path="/console/login" /> }.into_any(),
        Err(err) => view! { <span class="error">{err.localized()}</span> }.into_any(),
    }
}

/// How a page writes its filters into the URL: in place of the current entry (the back
/// button leaves the page, not the last keystroke), without scrolling.
pub fn in_place() -> leptos_router::NavigateOptions {
    leptos_router::NavigateOptions {
        replace: true,
        scroll: false,
        ..Default::default()
    }
}
