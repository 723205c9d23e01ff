//! The memories page: account header, project selector, filters and the memories table.
//! Filters reload through the `list_memories` server function; a GET form keeps them usable without JS.

use crate::api::{Logout, list_memories, load_session};
use crate::model::{ConsoleError, MEMORY_KINDS, MemoryListing, MemoryRow, SessionInfo};
use crate::project_picker::{non_empty, project_select};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::{components::Redirect, hooks::use_query_map};

#[component]
pub fn MemoriesPage() -> impl IntoView {
    // Filters start from the query string, so the no-JS form (method=get) and shared links
    // land on the same view; after hydration they live in signals and never reload the page.
    let query = use_query_map().get_untracked();
    let initial_project = query.get("project").and_then(|p| non_empty(&p));
    let initial_text = query.get("q").unwrap_or_default();
    let initial_kind = query
        .get("kind")
        .and_then(|k| non_empty(&k))
        .unwrap_or_default();

    let project = RwSignal::new(initial_project.clone());
    let text = RwSignal::new(initial_text.clone());
    let kind = RwSignal::new(initial_kind.clone());

    let session = Resource::new(|| (), |_| load_session());
    let memories = Resource::new(
        move || {
            (
                project.get(),
                non_empty(&text.get()),
                non_empty(&kind.get()),
            )
        },
        |(project, text, kind)| list_memories(project, text, kind),
    );
    let logout = ServerAction::<Logout>::new();

    let header_account = move || {
        Suspend::new(async move {
            session.await.ok().map(|SessionInfo { account, .. }| {
                view! {
                    <span class="account">
                        <span class="account-email" data-testid="account-email">
                            {account.email}
                        </span>
                        <span class="muted">{account.organization_name}</span>
                    </span>
                }
            })
        })
    };

    let project_selector = move || {
        let initial_project = initial_project.clone();
        Suspend::new(async move { project_select(session.await, initial_project, project) })
    };

    let table = move || Suspend::new(async move { listing_view(memories.await) });

    view! {
        <Title text="Memories · Engram console" />
        <header class="topbar">
            <a class="brand" href="/console/memories">
                "Engram"
            </a>
            <nav class="nav">
                <a href="/console/memories" aria-current="page">"Memories"</a>
                <a href="/console/keys" data-testid="nav-keys">"API keys"</a>
                <a href="/console/audit" data-testid="nav-audit">"Audit log"</a>
                <a href="/console/members" data-testid="nav-members">"Members"</a>
            </nav>
            <span class="spacer"></span>
            <Transition fallback=|| ()>{header_account}</Transition>
            <ActionForm action=logout attr:class="logout-form">
                <button type="submit" class="ghost" data-testid="logout-button">
                    "Log out"
                </button>
            </ActionForm>
        </header>
        <main class="content">
            <h1>"Memories"</h1>
            <form
                class="filters"
                method="get"
                action="/console/memories"
                on:submit=|ev| ev.prevent_default()
            >
                <label>
                    <span>"Project"</span>
                    <Transition fallback=|| view! { <select disabled></select> }>
                        {project_selector}
                    </Transition>
                </label>
                <label class="grow">
                    <span>"Search"</span>
                    <input
                        type="search"
                        name="q"
                        placeholder="Content or user id"
                        autocomplete="off"
                        value=initial_text
                        data-testid="memory-filter"
                        on:input=move |ev| text.set(event_target_value(&ev))
                    />
                </label>
                <label>
                    <span>"Kind"</span>
                    <select
                        name="kind"
                        data-testid="kind-select"
                        on:change=move |ev| kind.set(event_target_value(&ev))
                    >
                        <option value="" selected=initial_kind.is_empty()>
                            "All kinds"
                        </option>
                        {MEMORY_KINDS
                            .iter()
                            .map(|k| {
                                view! {
                                    <option value=*k selected=initial_kind == *k>
                                        {*k}
                                    </option>
                                }
                            })
                            .collect_view()}
                    </select>
                </label>
                <button type="submit" class="no-js-only">
                    "Apply"
                </button>
            </form>
            <Transition fallback=|| view! { <p class="muted">"Loading memories…"</p> }>
                {table}
            </Transition>
        </main>
    }
}

fn listing_view(listing: Result<MemoryListing, ConsoleError>) -> AnyView {
    let listing = match listing {
        Ok(listing) => listing,
        Err(ConsoleError::Unauthorized) => {
            return view! { <Redirect path="/console/login" /> }.into_any();
        }
        Err(ConsoleError::NotFound) => {
            return view! {
                <p class="error" role="alert" data-testid="memories-error">
                    "This project does not exist or is not visible to you."
                </p>
            }
            .into_any();
        }
        Err(err) => {
            return view! {
                <p class="error" role="alert" data-testid="memories-error">
                    {err.to_string()}
                </p>
            }
            .into_any();
        }
    };
    if listing.project_id.is_none() {
        return view! { <p class="empty">"This organization has no projects yet."</p> }.into_any();
    }
    let page = listing.page;
    if page.memories.is_empty() {
        return view! {
            <p class="empty" data-testid="memories-empty">
                "No memories match these filters."
            </p>
        }
        .into_any();
    }
    let summary = match page.total_shown {
        1 => "1 memory".to_owned(),
        n if n as u32 >= crate::model::MEMORY_PAGE_LIMIT => {
            format!("First {n} memories — narrow the filters to see others")
        }
        n => format!("{n} memories"),
    };
    view! {
        <p class="muted summary" data-testid="memories-count">
            {summary}
        </p>
        <div class="table-wrap">
            <table class="memories" data-testid="memories-table">
                <thead>
                    <tr>
                        <th>"Content"</th>
                        <th>"Kind"</th>
                        <th>"User"</th>
                        <th>"Key"</th>
                        <th>"State"</th>
                        <th class="num">"Version"</th>
                        <th>"Updated"</th>
                    </tr>
                </thead>
                <tbody>{page.memories.into_iter().map(memory_row).collect_view()}</tbody>
            </table>
        </div>
    }
    .into_any()
}

fn memory_row(memory: MemoryRow) -> impl IntoView {
    let MemoryRow {
        id,
        user_id,
        kind,
        key,
        content,
        state,
        version,
        updated_at,
        ..
    } = memory;
    let updated_short = short_timestamp(&updated_at);
    view! {
        <tr data-testid="memory-row" data-memory-id=id data-kind=kind.clone()>
            <td class="content" data-testid="memory-content">
                {content}
            </td>
            <td>
                <span class=format!("badge kind-{kind}")>{kind.clone()}</span>
            </td>
            <td data-testid="memory-user">{or_dash(user_id)}</td>
            <td>{or_dash(key)}</td>
            <td>
                <span class=format!("badge state-{state}")>{state.clone()}</span>
            </td>
            <td class="num">{version}</td>
            <td class="nowrap">
                <time datetime=updated_at.clone() title=updated_at>
                    {updated_short}
                </time>
            </td>
        </tr>
    }
}

fn or_dash(value: Option<String>) -> impl IntoView {
    match value {
        Some(value) => view! { <span>{value}</span> }.into_any(),
        None => view! { <span class="muted">"—"</span> }.into_any(),
    }
}

/// `2025-06-01T12:34:56.123Z` → `2025-06-01 12:34:56`; anything else is shown as given.
fn short_timestamp(rfc3339: &str) -> String {
    match rfc3339.get(..19) {
        Some(head) if head.as_bytes().get(10) == Some(&b'T') => head.replacen('T', " ", 1),
        _ => rfc3339.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::short_timestamp;

    #[test]
    fn timestamps_are_shortened_to_the_second() {
        assert_eq!(
            short_timestamp("2025-06-01T12:34:56.123456Z"),
            "2025-06-01 12:34:56"
        );
        assert_eq!(short_timestamp("yesterday"), "yesterday");
    }
}
