//! The audit log page: the chain's verification status, an action filter, the newest events
//! of the project (and the organization's console logins) and a CSV export link.

use crate::api::{load_audit, load_session};
use crate::i18n::{format_time_short, term, tr, trf};
use crate::model::{AUDIT_ACTIONS, AuditFilters, AuditListing, AuditRow, ConsoleError};
use crate::project_picker::{in_place, non_empty, project_select};
use crate::topbar::TopBar;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::{
    components::Redirect,
    hooks::{use_navigate, use_query_map},
};

#[component]
pub fn AuditPage() -> impl IntoView {
    let query = use_query_map().get_untracked();
    let text = |name: &str| query.get(name).and_then(|value| non_empty(&value));
    let initial_project = text("project");
    let initial = AuditFilters {
        project_id: initial_project.clone(),
        action: text("action"),
        actor: text("actor"),
        target: text("target"),
        since: text("since"),
        until: text("until"),
        before: text("before").and_then(|before| before.parse().ok()),
        full: query.get("full").is_some_and(|full| full == "true"),
    };
    let project = RwSignal::new(initial_project.clone());
    // The filters as applied (the form's fields apply on submit, the action at once).
    let filters = RwSignal::new(initial.clone());
    let (actor, target, since, until) = (
        RwSignal::new(initial.actor.clone().unwrap_or_default()),
        RwSignal::new(initial.target.clone().unwrap_or_default()),
        RwSignal::new(initial.since.clone().unwrap_or_default()),
        RwSignal::new(initial.until.clone().unwrap_or_default()),
    );
    let initial_action = initial.action.clone().unwrap_or_default();

    let session = Resource::new(|| (), |_| load_session());
    let audit = Resource::new(
        move || (project.get(), filters.get()),
        |(project, filters)| {
            load_audit(
                project,
                filters.action,
                Some(filters.full),
                filters.actor,
                filters.target,
                filters.since,
                filters.until,
                filters.before,
            )
        },
    );
    // The URL carries the filters and the page, so a reload or a shared link shows the same.
    let navigate = use_navigate();
    let show = move |next: AuditFilters| {
        let query = next.query_string(&project.get_untracked().unwrap_or_default());
        let page = next
            .before
            .map(|before| format!("&before={before}"))
            .unwrap_or_default();
        navigate(&format!("/console/audit?{query}{page}"), in_place());
        filters.set(next);
    };
    let apply = show.clone();
    let choose_action = show.clone();
    let page_to = show.clone();
    // A cursor is a position in one project's log: another project's log opens at its newest.
    Effect::watch(
        move || project.get(),
        move |_, _, _| {
            show(AuditFilters {
                before: None,
                full: false,
                ..filters.get_untracked()
            });
        },
        false,
    );

    let project_selector = move || {
        let initial_project = initial_project.clone();
        Suspend::new(async move { project_select(session.await, initial_project, project) })
    };

    let listing = move || {
        let page_to = page_to.clone();
        Suspend::new(async move {
            let applied = filters.get_untracked();
            audit_view(audit.await, applied, page_to)
        })
    };

    view! {
        <Title text=tr("Audit log · Engram console") />
        <TopBar current="/console/audit" />
        <main class="content">
            <h1>{tr("Audit log")}</h1>
            <form
                class="filters"
                method="get"
                action="/console/audit"
                data-testid="audit-filters"
                on:submit=move |ev| {
                    ev.prevent_default();
                    let non_blank = |value: String| non_empty(&value);
                    apply(AuditFilters {
                        actor: non_blank(actor.get_untracked()),
                        target: non_blank(target.get_untracked()),
                        since: non_blank(since.get_untracked()),
                        until: non_blank(until.get_untracked()),
                        before: None,
                        full: false,
                        ..filters.get_untracked()
                    });
                }
            >
                <label>
                    <span>{tr("Project")}</span>
                    <Transition fallback=|| view! { <select disabled></select> }>{project_selector}</Transition>
                </label>
                <label>
                    <span>{tr("Action")}</span>
                    <select
                        name="action"
                        data-testid="action-select"
                        on:change=move |ev| {
                            // A new filter continues from the checkpoint: a full recompute is
                            // asked for by its button, at most once a minute.
                            choose_action(AuditFilters {
                                action: non_empty(&event_target_value(&ev)),
                                before: None,
                                full: false,
                                ..filters.get_untracked()
                            });
                        }
                    >
                        <option value="" selected=initial_action.is_empty()>{tr("All actions")}</option>
                        {AUDIT_ACTIONS
                            .iter()
                            .map(|a| view! { <option value=*a selected=initial_action == *a>{*a}</option> })
                            .collect_view()}
                    </select>
                </label>
                <label class="grow">
                    <span>{tr("Actor")}</span>
                    <input type="text" name="actor" placeholder=tr("e-mail, key label or id") bind:value=actor data-testid="audit-actor" />
                </label>
                <label>
                    <span>{tr("Target")}</span>
                    <input type="text" name="target" placeholder=tr("memory, key or user id") bind:value=target data-testid="audit-target" />
                </label>
                <label>
                    <span>{tr("From")}</span>
                    <input type="date" name="since" bind:value=since data-testid="audit-since" />
                </label>
                <label>
                    <span>{tr("To")}</span>
                    <input type="date" name="until" bind:value=until data-testid="audit-until" />
                </label>
                <button type="submit" data-testid="audit-apply">{tr("Apply")}</button>
                <button
                    type="submit"
                    name="full"
                    value="true"
                    class="ghost"
                    data-testid="verify-from-start"
                    title=tr("Re-hash every event of the organization's chain (once a minute)")
                    on:click=move |ev| {
                        ev.prevent_default();
                        filters.update(|filters| filters.full = true);
                    }
                >
                    {tr("Verify from the first event")}
                </button>
            </form>
            <Transition fallback=|| view! { <p class="muted">{tr("Loading the audit log…")}</p> }>
                {listing}
            </Transition>
        </main>
    }
}

fn audit_view(
    listing: Result<AuditListing, ConsoleError>,
    applied: AuditFilters,
    page_to: impl Fn(AuditFilters) + Clone + Send + Sync + 'static,
) -> AnyView {
    let listing = match listing {
        Ok(listing) => listing,
        Err(ConsoleError::Unauthorized) => {
            return view! { <Redirect path="/console/login" /> }.into_any();
        }
        Err(err) => {
            return view! { <p class="error" role="alert" data-testid="audit-error">{err.localized()}</p> }
                .into_any();
        }
    };
    let Some(project_id) = listing.project_id else {
        return view! { <p class="empty">{tr("This organization has no projects yet.")}</p> }
            .into_any();
    };
    let chain = listing.chain;
    let status = if chain.verified {
        view! {
            <p class="badge state-active" data-testid="audit-verification" data-verified="true">
                {trf(
                    "Hash chain verified: {} events recomputed{}",
                    &[
                        &chain.events_checked,
                        &match chain.recomputed_from_sequence {
                            Some(1) => tr(" from the first event").to_string(),
                            Some(sequence) => trf(" (continued at sequence {})", &[&sequence]),
                            None => String::new(),
                        },
                    ],
                )}
            </p>
        }
        .into_any()
    } else {
        view! {
            <p class="error" role="alert" data-testid="audit-verification" data-verified="false">
                {trf(
                    "Hash chain broken{}: {}",
                    &[
                        &chain.broken_at_event.map(|id| trf(" at event {}", &[&id])).unwrap_or_default(),
                        &chain.broken_reason.unwrap_or_default(),
                    ],
                )}
            </p>
        }
        .into_any()
    };
    // The export follows the filter, every page of it.
    let export_href = format!(
        "/console/audit/export.csv?{}",
        applied.query_string(&project_id)
    );
    let paging = {
        let newest = applied.before.is_some().then(|| {
            let page_to = page_to.clone();
            let applied = applied.clone();
            view! {
                <button
                    type="button"
                    class="ghost"
                    data-testid="audit-newest"
                    on:click=move |_| page_to(AuditFilters { before: None, full: false, ..applied.clone() })
                >
                    {tr("← Newest")}
                </button>
            }
        });
        let older = listing.next_before.map(|before| {
            let page_to = page_to.clone();
            let applied = applied.clone();
            view! {
                <button
                    type="button"
                    class="ghost"
                    data-testid="audit-older"
                    data-before=before.to_string()
                    on:click=move |_| page_to(AuditFilters { before: Some(before), full: false, ..applied.clone() })
                >
                    {tr("Older events →")}
                </button>
            }
        });
        view! { <p class="paging">{newest}" "{older}</p> }
    };
    let rows = if listing.events.is_empty() {
        view! { <p class="empty" data-testid="audit-empty">{tr("No events match.")}</p> }.into_any()
    } else {
        view! {
            <div class="table-wrap">
                <table class="memories" data-testid="audit-table">
                    <thead>
                        <tr>
                            <th class="num">"#"</th>
                            <th>{tr("When (UTC)")}</th>
                            <th>{tr("Action")}</th>
                            <th>{tr("Actor")}</th>
                            <th>{tr("Targets")}</th>
                            <th>{tr("Reason")}</th>
                            <th>{tr("Outcome")}</th>
                            <th>{tr("From")}</th>
                        </tr>
                    </thead>
                    <tbody>{grouped(listing.events).into_iter().map(audit_line).collect_view()}</tbody>
                </table>
            </div>
        }
        .into_any()
    };
    view! {
        {status}
        <p>
            <a href=export_href download="audit.csv" data-testid="audit-export">{tr("Export CSV (this filter)")}</a>
        </p>
        {rows}
        {paging}
    }
    .into_any()
}

/// One line of the table: an event, or a run of content views by one actor.
enum AuditLine {
    Event(Box<AuditRow>),
    /// Consecutive `memory.content_viewed` events of one actor: every page view of the
    /// memories list writes one, and one line with a count keeps the log reviewable.
    Views(Vec<AuditRow>),
}

/// The events as lines, runs of one actor's content views folded into one.
fn grouped(events: Vec<AuditRow>) -> Vec<AuditLine> {
    let mut lines: Vec<AuditLine> = Vec::new();
    for event in events {
        if event.action == "memory.content_viewed" {
            if let Some(AuditLine::Views(views)) = lines.last_mut()
                && views
                    .first()
                    .is_some_and(|first| first.actor_id == event.actor_id)
            {
                views.push(event);
                continue;
            }
            lines.push(AuditLine::Views(vec![event]));
            continue;
        }
        lines.push(AuditLine::Event(Box::new(event)));
    }
    lines
}

fn when_of(at: &str) -> String {
    format_time_short(&at.get(..19).unwrap_or(at).replacen('T', " ", 1))
}

/// The actor as a person reads it: the name (e-mail, key label) beside the kind and id.
fn actor_view(
    actor_type: &str,
    actor_id: &str,
    actor_name: Option<String>,
) -> impl IntoView + use<> {
    let title = format!("{actor_type} {actor_id}");
    let shown = match actor_name {
        Some(name) => name,
        None => format!(
            "{actor_type} {}",
            actor_id.chars().take(12).collect::<String>()
        ),
    };
    view! { <span title=title data-testid="audit-actor-name" translate="no">{shown}</span> }
}

/// The targets as a person reads them: a key, member or project by its name (the id on
/// hover and in the CSV), anything else by its id.
fn targets_view(
    target_ids: Vec<String>,
    names: &std::collections::BTreeMap<String, String>,
) -> impl IntoView + use<> {
    target_ids
        .into_iter()
        .enumerate()
        .map(|(position, id)| {
            let separator = (position > 0).then_some(", ");
            match names.get(&id) {
                Some(name) => view! {
                    {separator}
                    <span title=id.clone() data-testid="audit-target-name" data-id=id translate="no">{name.clone()}</span>
                }
                .into_any(),
                None => view! { {separator}<span translate="no">{id}</span> }.into_any(),
            }
        })
        .collect_view()
}

fn audit_line(line: AuditLine) -> AnyView {
    match line {
        AuditLine::Event(event) => audit_row(*event).into_any(),
        AuditLine::Views(views) => {
            let count = views.len();
            let first = views.first().cloned();
            let last = views.last().cloned();
            let (Some(first), Some(last)) = (first, last) else {
                return ().into_any();
            };
            let viewed: usize = views.iter().map(|view| view.target_ids.len()).sum();
            let span = if count == 1 {
                when_of(&first.at)
            } else {
                format!("{} – {}", when_of(&last.at), when_of(&first.at))
            };
            let targets = views
                .iter()
                .flat_map(|view| view.target_ids.iter().cloned())
                .collect::<Vec<_>>()
                .join(", ");
            view! {
                <tr
                    data-testid="audit-row"
                    data-action="memory.content_viewed"
                    data-count=count.to_string()
                >
                    <td class="num">{first.sequence}</td>
                    <td class="nowrap"><time datetime=first.at.clone()>{span}</time></td>
                    <td data-testid="audit-action" translate="no">
                        {if count == 1 {
                            "memory.content_viewed".to_string()
                        } else {
                            format!("memory.content_viewed × {count}")
                        }}
                    </td>
                    <td>{actor_view(&first.actor_type, &first.actor_id, first.actor_name.clone())}</td>
                    <td class="content">
                        <details data-testid="audit-views">
                            <summary>{trf("{} memories shown in {} page views", &[&viewed, &count])}</summary>
                            <p class="muted" translate="no">{targets}</p>
                        </details>
                    </td>
                    <td></td>
                    <td>{term(&first.outcome)}</td>
                    <td translate="no">{first.ip.clone().unwrap_or_default()}</td>
                </tr>
            }
            .into_any()
        }
    }
}

fn audit_row(event: AuditRow) -> impl IntoView {
    let AuditRow {
        sequence,
        at,
        actor_type,
        actor_id,
        actor_name,
        action,
        target_ids,
        outcome,
        ip,
        reason,
        target_names,
        ..
    } = event;
    let when = when_of(&at);
    let targets = targets_view(target_ids, &target_names);
    let action_attribute = action.clone();
    view! {
        <tr data-testid="audit-row" data-action=action_attribute>
            <td class="num">{sequence}</td>
            <td class="nowrap"><time datetime=at>{when}</time></td>
            <td data-testid="audit-action" translate="no">{action}</td>
            <td>{actor_view(&actor_type, &actor_id, actor_name)}</td>
            <td class="content">{targets}</td>
            <td data-testid="audit-reason" translate="no">{reason.unwrap_or_default()}</td>
            <td>{term(&outcome)}</td>
            <td translate="no">{ip.unwrap_or_default()}</td>
        </tr>
    }
}
