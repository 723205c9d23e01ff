//! The subjects page: find an end-user of a project (by the start of their id or a metadata
//! value of their memories), see what every store of the registry of subject data holds of
//! them and the erasures already done, download everything about them (NDJSON), or erase them —
//! confirmed by typing the id again — and follow the erasure's progress until its receipt
//! (counts, verification, digest) is shown.

use crate::api::{
    RequestErasure, RequestOrganizationErasure, find_subjects, load_erasure_status, load_session,
    load_subject,
};
use crate::i18n::{format_time, term, tr, trf};
use crate::model::role_name;
use crate::model::{ConsoleError, ErasureStatus, SubjectMatchRow, SubjectSummary, percent_encode};
use crate::project_picker::{in_place, non_empty, project_select};
use crate::topbar::TopBar;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::{
    components::Redirect,
    hooks::{use_navigate, use_query_map},
};

#[component]
pub fn SubjectsPage() -> impl IntoView {
    let query = use_query_map().get_untracked();
    let initial_project = query.get("project").and_then(|p| non_empty(&p));
    let initial_user = query.get("user").unwrap_or_default();
    let initial_metadata = query.get("metadata").unwrap_or_default();
    let project = RwSignal::new(initial_project.clone());
    // What the fields hold, and what was looked up (on submit, or a found person's link).
    let user_text = RwSignal::new(initial_user.clone());
    let metadata_text = RwSignal::new(initial_metadata.clone());
    let lookup = RwSignal::new(Lookup {
        user: non_empty(&initial_user),
        metadata: non_empty(&initial_metadata),
    });
    let session = Resource::new(|| (), |_| load_session());
    let erase = ServerAction::<RequestErasure>::new();
    let erase_everywhere = ServerAction::<RequestOrganizationErasure>::new();
    // The server picks the account's first project when none is chosen.
    // Bumped when an erasure ends, so the summary shows what is left afterwards.
    let erasure_ended = RwSignal::new(0u32);
    // One person's summary: an id without a metadata condition is looked up exactly (an
    // erased person has no memories left, but their erasures are still shown).
    let summary = Resource::new(
        move || {
            (
                project.get(),
                lookup.get(),
                erase.version().get() + erase_everywhere.version().get(),
                erasure_ended.get(),
            )
        },
        |(project, lookup, _, _)| async move {
            match lookup {
                Lookup {
                    user: Some(user),
                    metadata: None,
                } => Some(load_subject(project, user).await),
                _ => None,
            }
        },
    );
    // Everyone whose id starts with the text, or whose memories carry the metadata.
    let matches = Resource::new(
        move || (project.get(), lookup.get(), erasure_ended.get()),
        |(project, lookup, _)| async move {
            if lookup.user.is_none() && lookup.metadata.is_none() {
                return None;
            }
            Some(
                find_subjects(project, lookup.user.clone(), lookup.metadata.clone())
                    .await
                    .map(|found| (lookup, found)),
            )
        },
    );
    // The URL carries the lookup, so a reload or a shared link shows the same person.
    let navigate = use_navigate();
    let look_up = move |next: Lookup| {
        let mut pairs = Vec::new();
        if let Some(project) = project.get_untracked() {
            pairs.push(format!("project={}", percent_encode(&project)));
        }
        if let Some(user) = &next.user {
            pairs.push(format!("user={}", percent_encode(user)));
        }
        if let Some(metadata) = &next.metadata {
            pairs.push(format!("metadata={}", percent_encode(metadata)));
        }
        navigate(
            &format!("/console/subjects?{}", pairs.join("&")),
            in_place(),
        );
        user_text.set(next.user.clone().unwrap_or_default());
        metadata_text.set(next.metadata.clone().unwrap_or_default());
        lookup.set(next);
    };
    let submit = look_up.clone();
    // Polled while the erasure runs (in the browser only: effects do not run on the server).
    let task = RwSignal::new(None::<ErasureStatus>);
    Effect::new(move |_| {
        if let Some(Ok(started)) = erase.value().get() {
            task.set(Some(started));
        }
    });
    Effect::new(move |_| {
        if let Some(Ok(started)) = erase_everywhere.value().get() {
            task.set(Some(started));
        }
    });
    Effect::new(move |_| {
        let Some(current) = task.get() else {
            return;
        };
        if current.status == "succeeded" || current.status == "failed" {
            return;
        }
        let project = current.project_id.clone();
        let task_id = current.task_id.clone();
        set_timeout(
            move || {
                leptos::task::spawn_local(async move {
                    if let Ok(next) = load_erasure_status(project, task_id).await {
                        let ended = next.status == "succeeded" || next.status == "failed";
                        task.set(Some(next));
                        if ended {
                            erasure_ended.update(|count| *count += 1);
                        }
                    }
                });
            },
            std::time::Duration::from_millis(250),
        );
    });
    let project_selector = move || {
        let initial_project = initial_project.clone();
        Suspend::new(async move { project_select(session.await, initial_project, project) })
    };
    let summary_view = move || {
        Suspend::new(async move {
            summary
                .await
                .map(|loaded| subject_view(loaded, erase, erase_everywhere))
        })
    };
    let matches_view = move || {
        let look_up = look_up.clone();
        Suspend::new(async move {
            let shown_project = project.get_untracked().unwrap_or_default();
            matches
                .await
                .map(|found| matches_table(shown_project, found, look_up))
        })
    };
    let progress = move || task.get().map(erasure_view);
    let erase_error = move || {
        let failed = erase
            .value()
            .get()
            .and_then(Result::err)
            .or_else(|| erase_everywhere.value().get().and_then(Result::err));
        failed.map(|error| {
            view! { <p class="error" role="alert" data-testid="erasure-error">{error.localized()}</p> }
        })
    };
    view! {
        <Title text=tr("Subjects · Engram console") />
        <TopBar current="/console/subjects" />
        <main class="content">
            <h1>{tr("Subjects")}</h1>
            <p class="muted">{tr("Everything about one end-user: find them, export it, or erase it from every store.")}</p>
            <form
                class="filters"
                method="get"
                action="/console/subjects"
                on:submit=move |ev| {
                    ev.prevent_default();
                    submit(Lookup {
                        user: non_empty(&user_text.get_untracked()),
                        metadata: non_empty(&metadata_text.get_untracked()),
                    });
                }
            >
                <label>
                    <span>{tr("Project")}</span>
                    <Transition fallback=|| view! { <select disabled></select> }>{project_selector}</Transition>
                </label>
                <label class="grow">
                    <span>{tr("End-user id, or its start")}</span>
                    <input
                        type="search"
                        name="user"
                        autocomplete="off"
                        bind:value=user_text
                        data-testid="subject-user"
                    />
                </label>
                <label class="grow">
                    <span>{tr("Or a metadata value of their memories")}</span>
                    <input
                        type="search"
                        name="metadata"
                        autocomplete="off"
                        placeholder=tr("key=value")
                        bind:value=metadata_text
                        data-testid="subject-metadata"
                    />
                </label>
                <button type="submit" data-testid="subject-lookup">{tr("Look up")}</button>
            </form>
            {erase_error}
            {progress}
            <Transition fallback=|| ()>{matches_view}</Transition>
            <Transition fallback=|| view! { <p class="muted">{tr("Looking up…")}</p> }>{summary_view}</Transition>
        </main>
    }
}

/// What the page looked up: an id (exact, or the start of ids) and a metadata condition.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Lookup {
    user: Option<String>,
    metadata: Option<String>,
}

/// The people a lookup found, each a link to their summary. Nothing is shown when the only
/// one found is the person whose summary is already below.
fn matches_table(
    project: String,
    found: Result<(Lookup, Vec<SubjectMatchRow>), ConsoleError>,
    look_up: impl Fn(Lookup) + Clone + Send + Sync + 'static,
) -> AnyView {
    let (lookup, found) = match found {
        Ok(found) => found,
        // The summary below says what is wrong (sign-in, role); a bad metadata condition is
        // the lookup's own.
        Err(ConsoleError::Unauthorized | ConsoleError::Forbidden { .. }) => return ().into_any(),
        Err(error) => {
            return view! { <p class="error" role="alert" data-testid="subject-find-error">{error.localized()}</p> }
                .into_any();
        }
    };
    let exact_only = lookup.metadata.is_none()
        && found.len() <= 1
        && found
            .iter()
            .all(|person| Some(&person.user_id) == lookup.user.as_ref());
    if exact_only {
        return ().into_any();
    }
    let described = match (&lookup.user, &lookup.metadata) {
        (Some(user), Some(metadata)) => trf(
            "whose id starts with “{}” and with a memory carrying {}",
            &[user, metadata],
        ),
        (Some(user), None) => trf("whose id starts with “{}”", &[user]),
        (None, Some(metadata)) => trf("with a memory carrying {}", &[metadata]),
        (None, None) => String::new(),
    };
    if found.is_empty() {
        return view! { <p class="empty" data-testid="subject-matches-empty">{trf("No end-user {}.", &[&described])}</p> }
            .into_any();
    }
    let limit_note = (found.len() as u64 >= MAX_SUBJECT_MATCHES_SHOWN).then(
        || view! { <p class="muted">{tr("Only the first of them are shown: narrow the lookup.")}</p> },
    );
    let rows = found
        .into_iter()
        .map(|person| {
            let look_up = look_up.clone();
            // The project goes in the link too: opened in a new tab, it shows this person in
            // this project, never the same id in another.
            let href = format!(
                "/console/subjects?project={}&user={}",
                percent_encode(&project),
                percent_encode(&person.user_id)
            );
            let user_id = person.user_id.clone();
            view! {
                <tr data-testid="subject-match" data-user=person.user_id.clone()>
                    <td>
                        <a
                            href=href
                            data-testid="subject-match-link"
                            on:click=move |ev| {
                                ev.prevent_default();
                                look_up(Lookup { user: Some(user_id.clone()), metadata: None });
                            }
                        >
                            {person.user_id.clone()}
                        </a>
                    </td>
                    <td class="num">{person.memories.to_string()}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <section class="card" data-testid="subject-matches">
            <table class="table">
                <caption>{trf("End-users {}", &[&described])}</caption>
                <thead><tr><th>{tr("End-user")}</th><th class="num">{tr("Matching memories")}</th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
            {limit_note}
        </section>
    }
    .into_any()
}

/// How many people a lookup answers at most (the engine's limit).
const MAX_SUBJECT_MATCHES_SHOWN: u64 = 50;

fn subject_view(
    summary: Result<SubjectSummary, ConsoleError>,
    erase: ServerAction<RequestErasure>,
    erase_everywhere: ServerAction<RequestOrganizationErasure>,
) -> AnyView {
    let summary = match summary {
        Ok(summary) => summary,
        Err(ConsoleError::Unauthorized) => {
            return view! { <Redirect path="/console/login" /> }.into_any();
        }
        Err(ConsoleError::Forbidden { role }) => {
            return view! {
                <p class="notice" data-testid="subjects-forbidden">
                    {trf("Your role ({}) cannot export or erase end-users.", &[&role_name(&role)])}
                </p>
            }
            .into_any();
        }
        Err(error) => {
            return view! { <p class="error" role="alert" data-testid="subject-error">{error.localized()}</p> }
                .into_any();
        }
    };
    let project = summary.project_id.clone();
    let export_link = format!(
        "/console/subjects/export.ndjson?project={project}&user={}",
        summary.user_id
    );
    let held = summary.held_memory_ids.clone();
    let erasures = summary
        .erasures
        .iter()
        .map(|erasure| {
            let digest = serde_json::from_str::<serde_json::Value>(&erasure.receipt)
                .ok()
                .and_then(|receipt| receipt.get("digest").and_then(|d| d.as_str()).map(str::to_string))
                .unwrap_or_default();
            view! {
                <details class="erased" data-testid="subject-erased" data-erased-at=erasure.erased_at.clone()>
                    <summary>
                        {trf("Erased on {} with receipt ", &[&format_time(&erasure.erased_at)])}
                        <code data-testid="subject-erased-digest">{digest}</code>
                    </summary>
                    {receipt_table(&erasure.receipt, "subject-erased-receipt")}
                </details>
            }
        })
        .collect_view();
    let user_id = summary.user_id.clone();
    let memories = summary.memories;
    let project_everywhere = project.clone();
    let user_for_erase = user_id.clone();
    let user_everywhere = user_id.clone();
    let store_rows = summary
        .stores
        .iter()
        .map(|line| {
            view! {
                <tr data-testid=format!("subject-store-{}", line.store) data-records=line.records.to_string()>
                    <td>{term(&line.store)}</td>
                    <td>{line.records.to_string()}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <section class="card" data-testid="subject-summary" data-memories=memories.to_string()>
            <p>
                <strong translate="no">{user_id}</strong>
                {trf(" has {} memories in this project.", &[&memories])}
            </p>
            <table class="stores" data-testid="subject-stores">
                <caption>{tr("What the project holds of them, store by store (the registry of subject data)")}</caption>
                <thead><tr><th>{tr("Store")}</th><th>{tr("Records")}</th></tr></thead>
                <tbody>{store_rows}</tbody>
            </table>
            {erasures}
            {(!held.is_empty()).then(|| view! {
                <p class="error" data-testid="subject-held">
                    {trf("{} of them are under legal hold — erasure is refused until the holds are lifted: {}", &[&held.len(), &held.join(", ")])}
                </p>
            })}
            <p><a href=export_link data-testid="subject-export" download>{tr("Download everything (NDJSON)")}</a></p>
            <ActionForm action=erase attr:class="filters" attr:data-testid="erase-form">
                <input type="hidden" name="project_id" value=project />
                <input type="hidden" name="user_id" value=user_for_erase />
                <label class="grow">
                    <span>{tr("Type the end-user id again to erase everything about them")}</span>
                    <input type="text" name="confirm" required autocomplete="off" data-testid="erase-confirm" />
                </label>
                <button type="submit" class="danger" data-testid="erase-submit">{tr("Erase")}</button>
            </ActionForm>
            <ActionForm action=erase_everywhere attr:class="filters" attr:data-testid="erase-everywhere-form">
                <input type="hidden" name="project_id" value=project_everywhere />
                <input type="hidden" name="user_id" value=user_everywhere />
                <label class="grow">
                    <span>{tr("Or erase them from every project of the organization: type the id again")}</span>
                    <input type="text" name="confirm" required autocomplete="off" data-testid="erase-everywhere-confirm" />
                </label>
                <button type="submit" class="danger" data-testid="erase-everywhere-submit">{tr("Erase everywhere")}</button>
            </ActionForm>
        </section>
    }
    .into_any()
}

fn erasure_view(status: ErasureStatus) -> impl IntoView {
    let finished = status.status == "succeeded" || status.status == "failed";
    let total = status.total.max(status.done).max(1);
    view! {
        <section class="card" data-testid="erasure" data-status=status.status.clone() data-verified=status.verified.map(|v| v.to_string()).unwrap_or_default() data-organization-wide=status.organization_wide.to_string()>
            <p>
                <strong>{trf("Erasure {}", &[&term(&status.status)])}</strong>
                {if status.organization_wide {
                    trf(" — {} of {} projects", &[&status.done, &status.total])
                } else {
                    trf(" — {} of {} memories", &[&status.done, &status.total])
                }}
            </p>
            {(!finished).then(|| view! { <progress data-testid="erasure-progress" value=status.done.to_string() max=total.to_string()></progress> })}
            {status.verified.map(|verified| view! {
                <p data-testid="erasure-verified">
                    {if verified { tr("Verified: nothing of this end-user remains in the database or the index.") } else { tr("Verification found remains.") }}
                </p>
            })}
            {status.digest.map(|digest| view! { <p class="muted">{tr("Receipt digest ")} <code data-testid="erasure-digest">{digest}</code></p> })}
            {status.receipt.map(|receipt| view! {
                {receipt_table(&receipt, "erasure-receipt-table")}
                <details>
                    <summary>{tr("The receipt as signed (JSON)")}</summary>
                    <pre class="receipt" data-testid="erasure-receipt">{receipt}</pre>
                </details>
            })}
            {status.error.map(|error| view! { <p class="error" data-testid="erasure-failed">{error}</p> })}
        </section>
    }
}

/// The receipt as a table a person reads: one row per field, nested fields by their path
/// (`removed.memories`), lists by their items.
fn receipt_table(receipt: &str, testid: &'static str) -> impl IntoView + use<> {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(receipt) else {
        return ().into_any();
    };
    let mut rows = Vec::new();
    flatten("", &value, &mut rows);
    view! {
        <table class="table receipt-table" data-testid=testid>
            <tbody>
                {rows
                    .into_iter()
                    .map(|(field, shown)| view! { <tr><th scope="row">{field}</th><td>{shown}</td></tr> })
                    .collect_view()}
            </tbody>
        </table>
    }
    .into_any()
}

fn flatten(path: &str, value: &serde_json::Value, rows: &mut Vec<(String, String)>) {
    match value {
        serde_json::Value::Object(object) => {
            for (key, inner) in object {
                let path = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                flatten(&path, inner, rows);
            }
        }
        serde_json::Value::Array(items) if items.iter().all(|item| !item.is_object()) => {
            let shown = items
                .iter()
                .map(|item| {
                    item.as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| item.to_string())
                })
                .collect::<Vec<_>>()
                .join(", ");
            rows.push((path.to_string(), shown));
        }
        serde_json::Value::Array(items) => {
            for (position, item) in items.iter().enumerate() {
                flatten(&format!("{path}[{}]", position + 1), item, rows);
            }
        }
        serde_json::Value::String(text) => rows.push((path.to_string(), text.clone())),
        other => rows.push((path.to_string(), other.to_string())),
    }
}
