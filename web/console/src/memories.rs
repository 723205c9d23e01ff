//! The memories page: account header, project selector, filters and the memories table.
//! Filters reload through the `list_memories` server function; a GET form keeps them usable without JS.

use crate::api::{BulkDelete, PreviewBulkDelete, list_memories, load_session};
use crate::i18n::{format_time_short, term, tr, trf};
use crate::model::{
    ConsoleError, MEMORY_KINDS, MEMORY_PAGE_LIMIT, MEMORY_SOURCES, MemoryFilters, MemoryListing,
    MemoryRow, SessionInfo, percent_encode,
};
use crate::project_picker::{in_place, non_empty, project_select};
use crate::topbar::TopBar;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::{
    components::Redirect,
    hooks::{use_navigate, use_query_map},
};

/// A text filter bound to one field of the filters signal.
fn filter_input(
    label: &'static str,
    name: &'static str,
    placeholder: &'static str,
    input_type: &'static str,
    initial: String,
    filters: RwSignal<MemoryFilters>,
    set: fn(&mut MemoryFilters, Option<String>),
) -> impl IntoView {
    view! {
        <label>
            <span>{label}</span>
            <input
                type=input_type
                name=name
                placeholder=placeholder
                autocomplete="off"
                value=initial
                data-testid=format!("filter-{name}")
                on:input=move |ev| {
                    let value = non_empty(&event_target_value(&ev));
                    filters.update(|filters| set(filters, value));
                }
            />
        </label>
    }
}

#[component]
pub fn MemoriesPage() -> impl IntoView {
    // Filters start from the query string, so the no-JS form (method=get) and shared links
    // land on the same view; after hydration they live in one signal and never reload the page.
    let query = use_query_map().get_untracked();
    let from_query = |name: &str| query.get(name).and_then(|value| non_empty(&value));
    let initial = MemoryFilters {
        project_id: from_query("project"),
        text: from_query("q"),
        kind: from_query("kind"),
        user_id: from_query("user"),
        agent_id: from_query("agent"),
        session_id: from_query("session"),
        state: from_query("state"),
        source: from_query("source"),
        category: from_query("category"),
        created_from: from_query("from"),
        created_to: from_query("to"),
        occurred_from: from_query("happened_from"),
        occurred_to: from_query("happened_to"),
        metadata: from_query("metadata"),
        min_confidence: from_query("min_confidence"),
        meaning: from_query("meaning"),
        min_score: from_query("min_score"),
    };
    // Back from the memory page after a deletion.
    let just_deleted = query.get("deleted").is_some();
    let initial_project = initial.project_id.clone();
    let initial_kind = initial.kind.clone().unwrap_or_default();
    let initial_state = initial.state.clone().unwrap_or_default();
    let initial_source = initial.source.clone().unwrap_or_default();
    let filters = RwSignal::new(initial.clone());
    let project = RwSignal::new(initial_project.clone());
    Effect::new(move |_| {
        let chosen = project.get();
        filters.update(|filters| filters.project_id = chosen);
    });

    let session = Resource::new(|| (), |_| load_session());
    let bulk_delete = ServerAction::<BulkDelete>::new();
    // Cursor paging: the cursors of the pages opened after the first, for the filters they
    // were opened under (other filters start again from the first page).
    // A shared link or a reload opens the same page: `pages` lists its cursors.
    let paging: RwSignal<Paging> = RwSignal::new(Paging {
        filters: initial.clone(),
        cursors: from_query("pages")
            .map(|pages| pages.split(',').map(str::to_string).collect())
            .unwrap_or_default(),
    });
    // The URL follows the filters and the page, without reloading.
    let navigate = use_navigate();
    Effect::new(move |previous: Option<String>| {
        let filters = filters.get();
        let pages = paging.with(|paging| {
            if paging.filters == filters {
                paging.cursors.join(",")
            } else {
                String::new()
            }
        });
        let mut query = filter_query(&filters);
        if !pages.is_empty() {
            query.push(("pages", pages));
        }
        let url = format!(
            "/console/memories?{}",
            query
                .into_iter()
                .map(|(name, value)| format!("{name}={}", percent_encode(&value)))
                .collect::<Vec<_>>()
                .join("&")
        );
        // The first run is the page as loaded: nothing to change.
        if previous.is_some_and(|previous| previous != url) {
            navigate(&url, in_place());
        }
        url
    });
    let memories = Resource::new(
        move || {
            let filters = filters.get();
            let after = paging.with(|paging| paging.cursor_for(&filters));
            (filters, after, bulk_delete.version().get())
        },
        |(filters, after, _)| list_memories(filters, after),
    );
    let preview = ServerAction::<PreviewBulkDelete>::new();

    let header_account = move || {
        Suspend::new(async move {
            session.await.ok().map(|SessionInfo { account, .. }| {
                view! {
                    <span class="account">
                        <span class="account-email" data-testid="account-email">
                            {account.email}
                        </span>
                        <span class="muted" translate="no">{account.organization_name}</span>
                    </span>
                }
            })
        })
    };

    let project_selector = move || {
        let initial_project = initial_project.clone();
        Suspend::new(async move { project_select(session.await, initial_project, project) })
    };

    let table = move || {
        Suspend::new(async move {
            let listing = memories.await;
            let page_number =
                paging.with_untracked(|paging| paging.page_number(&filters.get_untracked()));
            listing_view(listing, filters, paging, page_number)
        })
    };

    // Bulk delete: count first, then confirm by typing the count and a reason.
    let bulk_expected = RwSignal::new(String::new());
    let bulk_reason = RwSignal::new(String::new());
    let bulk_section = move || {
        // Offered only under a filter: deleting a whole project is not one click away.
        if !has_filter(&filters.get()) {
            return view! {
                <p class="muted" data-testid="bulk-needs-filter">{tr("Bulk delete needs a filter (a user, a kind, a date, …).")}</p>
            }
            .into_any();
        }
        let preview_result = preview.value().get();
        let outcome = bulk_delete.value().get();
        view! {
            <div class="bulk" data-testid="bulk-delete">
                <button
                    type="button"
                    class="ghost"
                    data-testid="bulk-preview"
                    on:click=move |_| {
                        preview.dispatch(PreviewBulkDelete { filters: filters.get_untracked() });
                    }
                >
                    {tr("Bulk delete…")}
                </button>
                {preview_result.map(|result| match result {
                    Ok(counted) => view! {
                        <span data-testid="bulk-count" data-matching=counted.matching.to_string()>
                            {trf(
                                "{} memories match these filters{}. Type the number and a reason to delete them:",
                                &[
                                    &counted.matching,
                                    &if counted.locked > 0 { trf(" ({} immutable or held ones will be kept)", &[&counted.locked]) } else { String::new() },
                                ],
                            )}
                        </span>
                        <input type="number" min="0" placeholder=tr("how many") data-testid="bulk-expected"
                            on:input=move |ev| bulk_expected.set(event_target_value(&ev)) />
                        <input type="text" placeholder=tr("reason") maxlength="500" data-testid="bulk-reason"
                            on:input=move |ev| bulk_reason.set(event_target_value(&ev)) />
                        <button type="button" class="danger" data-testid="bulk-confirm"
                            on:click=move |_| {
                                let expected = bulk_expected.get_untracked().trim().parse().unwrap_or(u64::MAX);
                                bulk_delete.dispatch(BulkDelete {
                                    filters: filters.get_untracked(),
                                    expected,
                                    reason: bulk_reason.get_untracked(),
                                });
                            }>
                            {tr("Delete them")}
                        </button>
                    }.into_any(),
                    Err(error) => view! { <span class="error" data-testid="bulk-error">{error.localized()}</span> }.into_any(),
                })}
                {outcome.map(|result| match result {
                    Ok(done) => view! {
                        <span class="notice" data-testid="bulk-outcome" data-deleted=done.deleted.to_string()>
                            {trf("Deleted {} memories; kept {} immutable or held.", &[&done.deleted, &done.skipped_locked])}
                        </span>
                    }.into_any(),
                    Err(error) => view! { <span class="error" data-testid="bulk-error">{error.localized()}</span> }.into_any(),
                })}
            </div>
        }
        .into_any()
    };

    let select = move |name: &'static str,
                       all_label: &'static str,
                       options: Vec<&'static str>,
                       initial: String,
                       set: fn(&mut MemoryFilters, Option<String>)| {
        view! {
            <select
                name=name
                data-testid=if name == "kind" { "kind-select".to_string() } else { format!("filter-{name}") }
                on:change=move |ev| {
                    let value = non_empty(&event_target_value(&ev));
                    filters.update(|filters| set(filters, value));
                }
            >
                <option value="" selected=initial.is_empty()>{all_label}</option>
                {options
                    .into_iter()
                    .map(|option| view! { <option value=option selected=initial == option>{term(option)}</option> })
                    .collect_view()}
            </select>
        }
    };

    view! {
        <Title text=tr("Memories · Engram console") />
        <TopBar current="/console/memories">
            <Transition fallback=|| ()>{header_account}</Transition>
        </TopBar>
        <main class="content">
            <h1>{tr("Memories")}</h1>
            {just_deleted.then(|| view! {
                <p class="notice" role="status" data-testid="memory-deleted">
                    {tr("The memory was deleted, with its history; the list below no longer has it.")}
                </p>
            })}
            <form
                class="filters"
                method="get"
                action="/console/memories"
                on:submit=|ev| ev.prevent_default()
            >
                <label>
                    <span>{tr("Project")}</span>
                    <Transition fallback=|| view! { <select disabled></select> }>
                        {project_selector}
                    </Transition>
                </label>
                <label class="grow">
                    <span>{tr("Search")}</span>
                    <input
                        type="search"
                        name="q"
                        placeholder=tr("Content or user id")
                        autocomplete="off"
                        value=initial.text.clone().unwrap_or_default()
                        data-testid="memory-filter"
                        on:input=move |ev| {
                            let value = non_empty(&event_target_value(&ev));
                            filters.update(|filters| filters.text = value);
                        }
                    />
                </label>
                <label class="grow">
                    <span>{tr("By meaning")}</span>
                    <input
                        type="search"
                        name="meaning"
                        placeholder=tr("What it is about")
                        autocomplete="off"
                        value=initial.meaning.clone().unwrap_or_default()
                        data-testid="memory-meaning"
                        on:input=move |ev| {
                            let value = non_empty(&event_target_value(&ev));
                            filters.update(|filters| filters.meaning = value);
                        }
                    />
                </label>
                <label>
                    <span>{tr("Kind")}</span>
                    {select("kind", tr("All kinds"), MEMORY_KINDS.to_vec(), initial_kind, |f, v| f.kind = v)}
                </label>
                <label>
                    <span>{tr("State")}</span>
                    {select("state", tr("Active"), vec!["superseded"], initial_state, |f, v| f.state = v)}
                </label>
                <label>
                    <span>{tr("Source")}</span>
                    {select("source", tr("All sources"), MEMORY_SOURCES.to_vec(), initial_source, |f, v| f.source = v)}
                </label>
                {filter_input(tr("User"), "user", tr("user id"), "text", initial.user_id.clone().unwrap_or_default(), filters, |f, v| f.user_id = v)}
                {filter_input(tr("Agent"), "agent", tr("agent id"), "text", initial.agent_id.clone().unwrap_or_default(), filters, |f, v| f.agent_id = v)}
                {filter_input(tr("Session"), "session", tr("session id"), "text", initial.session_id.clone().unwrap_or_default(), filters, |f, v| f.session_id = v)}
                {filter_input(tr("Category"), "category", tr("category"), "text", initial.category.clone().unwrap_or_default(), filters, |f, v| f.category = v)}
                {filter_input(tr("From"), "from", "", "date", initial.created_from.clone().unwrap_or_default(), filters, |f, v| f.created_from = v)}
                {filter_input(tr("To"), "to", "", "date", initial.created_to.clone().unwrap_or_default(), filters, |f, v| f.created_to = v)}
                {filter_input(tr("Happened from"), "happened_from", "", "date", initial.occurred_from.clone().unwrap_or_default(), filters, |f, v| f.occurred_from = v)}
                {filter_input(tr("Happened to"), "happened_to", "", "date", initial.occurred_to.clone().unwrap_or_default(), filters, |f, v| f.occurred_to = v)}
                {filter_input(tr("Metadata"), "metadata", "key=value", "text", initial.metadata.clone().unwrap_or_default(), filters, |f, v| f.metadata = v)}
                {filter_input(tr("Min confidence"), "min_confidence", "0–1", "text", initial.min_confidence.clone().unwrap_or_default(), filters, |f, v| f.min_confidence = v)}
                {filter_input(tr("Min relevance (by meaning)"), "min_score", "0–1", "text", initial.min_score.clone().unwrap_or_default(), filters, |f, v| f.min_score = v)}
                <button type="submit" class="no-js-only">
                    {tr("Apply")}
                </button>
            </form>
            {bulk_section}
            <Transition fallback=|| view! { <p class="muted">{tr("Loading memories…")}</p> }>
                {table}
            </Transition>
        </main>
    }
}

/// The filters as the page's query string names them (the names the GET form sends).
fn filter_query(filters: &MemoryFilters) -> Vec<(&'static str, String)> {
    [
        ("project", &filters.project_id),
        ("q", &filters.text),
        ("meaning", &filters.meaning),
        ("kind", &filters.kind),
        ("state", &filters.state),
        ("source", &filters.source),
        ("user", &filters.user_id),
        ("agent", &filters.agent_id),
        ("session", &filters.session_id),
        ("category", &filters.category),
        ("from", &filters.created_from),
        ("to", &filters.created_to),
        ("happened_from", &filters.occurred_from),
        ("happened_to", &filters.occurred_to),
        ("metadata", &filters.metadata),
        ("min_confidence", &filters.min_confidence),
        ("min_score", &filters.min_score),
    ]
    .into_iter()
    .filter_map(|(name, value)| value.clone().map(|value| (name, value)))
    .collect()
}

/// Whether anything narrows what a bulk delete would take: the project, a search by meaning
/// and its cut-off do not (a bulk delete goes by the filters, never by meaning).
fn has_filter(filters: &MemoryFilters) -> bool {
    filter_query(filters)
        .iter()
        .any(|(name, _)| !matches!(*name, "project" | "meaning" | "min_score"))
}

/// Where the memories table is in its pages.
#[derive(Clone, Debug, Default, PartialEq)]
struct Paging {
    /// The filters the cursors belong to.
    filters: MemoryFilters,
    /// The cursor of each page opened after the first, in order.
    cursors: Vec<String>,
}

impl Paging {
    fn cursor_for(&self, filters: &MemoryFilters) -> Option<String> {
        if self.filters == *filters {
            self.cursors.last().cloned()
        } else {
            None
        }
    }

    fn page_number(&self, filters: &MemoryFilters) -> usize {
        if self.filters == *filters {
            self.cursors.len() + 1
        } else {
            1
        }
    }

    fn next(&mut self, filters: MemoryFilters, cursor: String) {
        if self.filters != filters {
            self.filters = filters;
            self.cursors.clear();
        }
        self.cursors.push(cursor);
    }

    fn previous(&mut self) {
        self.cursors.pop();
    }
}

fn listing_view(
    listing: Result<MemoryListing, ConsoleError>,
    filters: RwSignal<MemoryFilters>,
    paging: RwSignal<Paging>,
    page_number: usize,
) -> AnyView {
    let listing = match listing {
        Ok(listing) => listing,
        Err(ConsoleError::Unauthorized) => {
            return view! { <Redirect path="/console/login" /> }.into_any();
        }
        Err(ConsoleError::NotFound) => {
            return view! {
                <p class="error" role="alert" data-testid="memories-error">
                    {tr("This project does not exist or is not visible to you.")}
                </p>
            }
            .into_any();
        }
        Err(err) => {
            return view! {
                <p class="error" role="alert" data-testid="memories-error">
                    {err.localized()}
                </p>
            }
            .into_any();
        }
    };
    if listing.project_id.is_none() {
        return view! { <p class="empty">{tr("This organization has no projects yet.")}</p> }
            .into_any();
    }
    let project_id = listing.project_id.clone().unwrap_or_default();
    let page = listing.page;
    if page.memories.is_empty() {
        return view! {
            <p class="empty" data-testid="memories-empty">
                {tr("No memories match these filters.")}
            </p>
        }
        .into_any();
    }
    let memories = |count: u64| match count {
        1 => tr("1 memory").to_owned(),
        n => trf("{} memories", &[&n]),
    };
    let shown = page.total_shown as u64;
    let summary = match (page.total_matching, page_number, page.next_cursor.is_some()) {
        (Some(total), 1, false) => memories(total),
        (Some(total), number, more) => {
            let first = (number as u64 - 1) * u64::from(MEMORY_PAGE_LIMIT) + 1;
            let last = first + shown.saturating_sub(1);
            let rest = if more {
                tr(" — more on the next pages")
            } else {
                tr(", the last page")
            };
            trf("{}–{} of {}{}", &[&first, &last, &memories(total), &rest])
        }
        (None, _, _) => trf("The {} nearest in meaning", &[&memories(shown)]),
    };
    let total_attribute = page.total_matching.map(|total| total.to_string());
    let next_cursor = page.next_cursor.clone();
    let has_next = next_cursor.is_some();
    let pager = (page_number > 1 || has_next).then(|| {
        view! {
            <nav class="pager" data-testid="memories-pager" data-page=page_number.to_string()>
                <button
                    type="button"
                    class="ghost"
                    data-testid="memories-previous"
                    disabled=page_number == 1
                    on:click=move |_| paging.update(Paging::previous)
                >
                    {tr("← Previous page")}
                </button>
                <span class="muted">{trf("Page {}", &[&page_number])}</span>
                <button
                    type="button"
                    class="ghost"
                    data-testid="memories-next"
                    disabled=!has_next
                    on:click=move |_| {
                        if let Some(cursor) = next_cursor.clone() {
                            let current = filters.get_untracked();
                            paging.update(|paging| paging.next(current, cursor));
                        }
                    }
                >
                    {tr("Next page →")}
                </button>
            </nav>
        }
    });
    view! {
        <p class="muted summary" data-testid="memories-count" data-total=total_attribute>
            {summary}
        </p>
        {pager}
        <div class="table-wrap">
            <table class="memories" data-testid="memories-table">
                <thead>
                    <tr>
                        <th>{tr("Content")}</th>
                        <th>{tr("Kind")}</th>
                        <th>{tr("User")}</th>
                        <th>{tr("Key")}</th>
                        <th>{tr("State")}</th>
                        <th class="num">{tr("Version")}</th>
                        <th>{tr("Updated (UTC)")}</th>
                    </tr>
                </thead>
                <tbody>
                    {page
                        .memories
                        .into_iter()
                        .map(|memory| memory_row(memory, project_id.clone()))
                        .collect_view()}
                </tbody>
            </table>
        </div>
    }
    .into_any()
}

fn memory_row(memory: MemoryRow, project_id: String) -> impl IntoView {
    let MemoryRow {
        id,
        user_id,
        kind,
        key,
        content,
        state,
        version,
        updated_at,
        immutable,
        legal_hold,
        score,
        agent_id,
        visibility,
        ..
    } = memory;
    let updated_short = format_time_short(&short_timestamp(&updated_at));
    let link = format!("/console/memory?project={project_id}&id={id}");
    view! {
        <tr data-testid="memory-row" data-memory-id=id data-kind=kind.clone()>
            <td class="content">
                <a href=link data-testid="memory-link"><span data-testid="memory-content" translate="no">{content}</span></a>
                {legal_hold.then(|| view! { <span class="badge state-held">{tr(" legal hold")}</span> })}
                {immutable.then(|| view! { <span class="badge">{tr(" immutable")}</span> })}
                {(visibility == "private")
                    .then(|| {
                        let title = trf(
                            "private to agent {}",
                            &[&agent_id.unwrap_or_default()],
                        );
                        view! { <span class="badge" title=title data-testid="memory-private">{tr(" private")}</span> }
                    })}
                {score.map(|score| view! { <span class="muted" data-testid="memory-score">{format!(" {score:.2}")}</span> })}
            </td>
            <td>
                <span class=format!("badge kind-{kind}")>{term(&kind)}</span>
            </td>
            <td data-testid="memory-user" translate="no">{or_dash(user_id)}</td>
            <td translate="no">{or_dash(key)}</td>
            <td>
                <span class=format!("badge state-{state}")>{term(&state)}</span>
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
