//! The audit log page: the chain's verification status, an action filter, the newest events
//! of the project (and the organization's console logins) and a CSV export link.

use crate::api::{load_audit, load_session};
use crate::model::{AUDIT_ACTIONS, AuditListing, AuditRow, ConsoleError};
use crate::project_picker::{non_empty, project_select};
use crate::topbar::TopBar;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::{components::Redirect, hooks::use_query_map};

#[component]
pub fn AuditPage() -> impl IntoView {
    let query = use_query_map().get_untracked();
    let initial_project = query.get("project").and_then(|p| non_empty(&p));
    let initial_action = query
        .get("action")
        .and_then(|a| non_empty(&a))
        .unwrap_or_default();
    let project = RwSignal::new(initial_project.clone());
    let action = RwSignal::new(initial_action.clone());
    // Recompute the whole chain from its first event (the button below), not only what
    // came after the last checkpoint.
    let full = RwSignal::new(query.get("full").is_some_and(|full| full == "true"));

    let session = Resource::new(|| (), |_| load_session());
    let audit = Resource::new(
        move || (project.get(), non_empty(&action.get()), full.get()),
        |(project, action, full)| load_audit(project, action, Some(full)),
    );

    let project_selector = move || {
        let initial_project = initial_project.clone();
        Suspend::new(async move { project_select(session.await, initial_project, project) })
    };

    let listing = move || Suspend::new(async move { audit_view(audit.await) });

    view! {
        <Title text="Audit log · Engram console" />
        <TopBar current="/console/audit" />
        <main class="content">
            <h1>"Audit log"</h1>
            <form class="filters" method="get" action="/console/audit" on:submit=|ev| ev.prevent_default()>
                <label>
                    <span>"Project"</span>
                    <Transition fallback=|| view! { <select disabled></select> }>{project_selector}</Transition>
                </label>
                <label>
                    <span>"Action"</span>
                    <select
                        name="action"
                        data-testid="action-select"
                        on:change=move |ev| {
                            // A new filter continues from the checkpoint: a full recompute is
                            // asked for by its button, at most once a minute.
                            full.set(false);
                            action.set(event_target_value(&ev));
                        }
                    >
                        <option value="" selected=initial_action.is_empty()>"All actions"</option>
                        {AUDIT_ACTIONS
                            .iter()
                            .map(|a| view! { <option value=*a selected=initial_action == *a>{*a}</option> })
                            .collect_view()}
                    </select>
                </label>
                <button type="submit" class="no-js-only">"Apply"</button>
                <button
                    type="submit"
                    name="full"
                    value="true"
                    class="ghost"
                    data-testid="verify-from-start"
                    title="Re-hash every event of the organization's chain (once a minute)"
                    on:click=move |ev| {
                        ev.prevent_default();
                        full.set(true);
                    }
                >
                    "Verify from the first event"
                </button>
            </form>
            <Transition fallback=|| view! { <p class="muted">"Loading the audit log…"</p> }>
                {listing}
            </Transition>
        </main>
    }
}

fn audit_view(listing: Result<AuditListing, ConsoleError>) -> AnyView {
    let listing = match listing {
        Ok(listing) => listing,
        Err(ConsoleError::Unauthorized) => {
            return view! { <Redirect path="/console/login" /> }.into_any();
        }
        Err(err) => {
            return view! { <p class="error" role="alert" data-testid="audit-error">{err.to_string()}</p> }
                .into_any();
        }
    };
    let Some(project_id) = listing.project_id else {
        return view! { <p class="empty">"This organization has no projects yet."</p> }.into_any();
    };
    let chain = listing.chain;
    let status = if chain.verified {
        view! {
            <p class="badge state-active" data-testid="audit-verification" data-verified="true">
                {format!(
                    "Hash chain verified: {} events recomputed{}",
                    chain.events_checked,
                    match chain.recomputed_from_sequence {
                        Some(1) => " from the first event".to_string(),
                        Some(sequence) => format!(" (continued at sequence {sequence})"),
                        None => String::new(),
                    }
                )}
            </p>
        }
        .into_any()
    } else {
        view! {
            <p class="error" role="alert" data-testid="audit-verification" data-verified="false">
                {format!(
                    "Hash chain broken{}: {}",
                    chain.broken_at_event.map(|id| format!(" at event {id}")).unwrap_or_default(),
                    chain.broken_reason.unwrap_or_default()
                )}
            </p>
        }
        .into_any()
    };
    let export_href = format!("/console/audit/export.csv?project={project_id}");
    let rows = if listing.events.is_empty() {
        view! { <p class="empty" data-testid="audit-empty">"No events match."</p> }.into_any()
    } else {
        view! {
            <div class="table-wrap">
                <table class="memories" data-testid="audit-table">
                    <thead>
                        <tr>
                            <th class="num">"#"</th>
                            <th>"When"</th>
                            <th>"Action"</th>
                            <th>"Actor"</th>
                            <th>"Targets"</th>
                            <th>"Outcome"</th>
                            <th>"From"</th>
                        </tr>
                    </thead>
                    <tbody>{listing.events.into_iter().map(audit_row).collect_view()}</tbody>
                </table>
            </div>
        }
        .into_any()
    };
    view! {
        {status}
        <p>
            <a href=export_href download="audit.csv" data-testid="audit-export">"Export CSV"</a>
        </p>
        {rows}
    }
    .into_any()
}

fn audit_row(event: AuditRow) -> impl IntoView {
    let AuditRow {
        sequence,
        at,
        actor_type,
        actor_id,
        action,
        target_ids,
        outcome,
        ip,
        ..
    } = event;
    let when = at.get(..19).unwrap_or(&at).replacen('T', " ", 1);
    let actor = format!("{actor_type} {actor_id}");
    let targets = target_ids.join(", ");
    let action_attribute = action.clone();
    view! {
        <tr data-testid="audit-row" data-action=action_attribute>
            <td class="num">{sequence}</td>
            <td class="nowrap"><time datetime=at>{when}</time></td>
            <td data-testid="audit-action">{action}</td>
            <td>{actor}</td>
            <td class="content">{targets}</td>
            <td>{outcome}</td>
            <td>{ip.unwrap_or_default()}</td>
        </tr>
    }
}
