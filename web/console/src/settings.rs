//! The settings page (owners, admins, compliance): PII redaction, retention days per kind,
//! the relevance floor, the dry run of the next retention sweep, and a button that runs the
//! sweep now.

use crate::api::{SaveSettings, SweepNow, load_session, load_settings};
use crate::confirm::Confirm;
use crate::i18n::{term, tr, trf};
use crate::model::role_name;
use crate::model::{ConsoleError, GovernanceSettings, PII_MODES};
use crate::project_picker::{non_empty, project_select};
use crate::topbar::TopBar;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::{components::Redirect, hooks::use_query_map};

#[component]
pub fn SettingsPage() -> impl IntoView {
    let query = use_query_map().get_untracked();
    let initial_project = query.get("project").and_then(|p| non_empty(&p));
    let project = RwSignal::new(initial_project.clone());
    let session = Resource::new(|| (), |_| load_session());
    let save = ServerAction::<SaveSettings>::new();
    let sweep = ServerAction::<SweepNow>::new();
    let settings = Resource::new(
        move || (project.get(), save.version().get(), sweep.version().get()),
        |(project, _, _)| load_settings(project),
    );
    let project_selector = move || {
        let initial_project = initial_project.clone();
        Suspend::new(async move { project_select(session.await, initial_project, project) })
    };
    let messages = move || {
        let saved = save.value().get().map(|result| match result {
            Ok(()) => view! { <p class="notice" data-testid="settings-saved">{tr("Saved.")}</p> }.into_any(),
            Err(error) => view! { <p class="error" role="alert" data-testid="settings-error">{error.localized()}</p> }.into_any(),
        });
        let swept = sweep.value().get().map(|result| match result {
            Ok(removed) => view! {
                <p class="notice" data-testid="sweep-result" data-removed=removed.to_string()>
                    {trf("The sweep removed {} memories from the database and the index.", &[&removed])}
                </p>
            }
            .into_any(),
            Err(error) => view! { <p class="error" role="alert" data-testid="settings-error">{error.localized()}</p> }.into_any(),
        });
        (saved, swept)
    };
    let body = move || Suspend::new(async move { settings_view(settings.await, save, sweep) });
    view! {
        <Title text=tr("Settings · Engram console") />
        <TopBar current="/console/settings" />
        <main class="content">
            <h1>{tr("Data governance")}</h1>
            <form class="filters" on:submit=|ev| ev.prevent_default()>
                <label>
                    <span>{tr("Project")}</span>
                    <Transition fallback=|| view! { <select disabled></select> }>{project_selector}</Transition>
                </label>
            </form>
            {messages}
            <Transition fallback=|| view! { <p class="muted">{tr("Loading settings…")}</p> }>{body}</Transition>
        </main>
    }
}

fn settings_view(
    settings: Result<GovernanceSettings, ConsoleError>,
    save: ServerAction<SaveSettings>,
    sweep: ServerAction<SweepNow>,
) -> AnyView {
    let settings = match settings {
        Ok(settings) => settings,
        Err(ConsoleError::Unauthorized) => {
            return view! { <Redirect path="/console/login" /> }.into_any();
        }
        Err(ConsoleError::Forbidden { role }) => {
            return view! {
                <p class="notice" data-testid="settings-forbidden">
                    {trf("Your role ({}) cannot change data governance settings.", &[&role_name(&role)])}
                </p>
            }
            .into_any();
        }
        Err(error) => {
            return view! { <p class="error" role="alert">{error.localized()}</p> }.into_any();
        }
    };
    let GovernanceSettings {
        project_id,
        pii_redaction,
        retention_days,
        preview,
        relevance_floor,
        relevance_floor_in_effect,
        relevance_floor_for_unmentioned_names,
        embedding_model,
        embedding_change,
    } = settings;
    let embedding_card = embedding_change.map(|change| {
        let total = change.memories.max(change.memories_embedded).max(1);
        let text = trf(
            "Moving from {0} to {1}: {2} of {3} memories embedded (task {4}). Searches use {0} until every memory is in the new space, then switch at once; if the move fails, the project stays on {0}.",
            &[
                &embedding_model,
                &change.to_model,
                &change.memories_embedded,
                &change.memories,
                &change.task_id,
            ],
        );
        view! {
            <section class="card" data-testid="embedding-move">
                <h2>{tr("Embedding model")}</h2>
                <p>{text}</p>
                <progress
                    max=total.to_string()
                    value=change.memories_embedded.to_string()
                    data-testid="embedding-move-progress"
                ></progress>
            </section>
        }
    });
    let by_kind = preview
        .by_kind
        .iter()
        .map(|(kind, count)| format!("{}{}{count}", term(kind), tr(": ")))
        .collect::<Vec<_>>()
        .join(", ");
    let project_for_sweep = project_id.clone();
    view! {
        {embedding_card}
        <section class="card">
            <h2>{tr("Personal data, retention and recall")}</h2>
            <ActionForm action=save attr:class="stack" attr:data-testid="settings-form">
                <input type="hidden" name="project_id" value=project_id />
                <label>
                    <span>{tr("PII redaction (e-mail, phone, card and national id numbers)")}</span>
                    <select name="pii_redaction" data-testid="settings-pii">
                        {PII_MODES
                            .iter()
                            .map(|mode| view! { <option value=*mode selected=*mode == pii_redaction>{term(mode)}</option> })
                            .collect_view()}
                    </select>
                </label>
                {retention_days
                    .into_iter()
                    .map(|(kind, days)| {
                        let label = trf("Keep {} memories for (days, empty = until deleted)", &[&term(&kind)]);
                        view! {
                            <label>
                                <span>{label}</span>
                                <input
                                    type="number"
                                    min="1"
                                    max="36500"
                                    name=kind.clone()
                                    value=days.map(|days| days.to_string()).unwrap_or_default()
                                    data-testid=format!("settings-retention-{kind}")
                                />
                            </label>
                        }
                    })
                    .collect_view()}
                <label>
                    <span>{tr("Relevance floor: searches that ask for no minimum score answer nothing below it (0 to 1; “model” = the embedding model's measured floors; 0 = never abstain)")}</span>
                    <input
                        name="relevance_floor"
                        value=relevance_floor
                        inputmode="decimal"
                        data-testid="settings-relevance-floor"
                    />
                </label>
                <p class="muted" data-testid="settings-relevance-floor-in-effect">
                    {match relevance_floor_for_unmentioned_names {
                        Some(names_floor) => trf(
                            "In effect: {}, and {} when a question names someone or something no memory mentions (model {}). An explicit min_score, Mem0's threshold or an MCP tool's min_score always wins.",
                            &[&relevance_floor_in_effect, &names_floor, &embedding_model],
                        ),
                        None => trf(
                            "In effect: {} (model {}). An explicit min_score, Mem0's threshold or an MCP tool's min_score always wins.",
                            &[&relevance_floor_in_effect, &embedding_model],
                        ),
                    }}
                </p>
                <button type="submit" data-testid="settings-save">{tr("Save")}</button>
            </ActionForm>
        </section>
        <section class="card" data-testid="retention-preview" data-would-delete=preview.would_delete.to_string()>
            <h2>{tr("Next retention sweep")}</h2>
            <p>
                {trf("The next sweep removes {} memories", &[&preview.would_delete])}
                {(!by_kind.is_empty()).then(|| format!(" ({by_kind})"))}
                {tr("; immutable and held memories are never removed.")}
            </p>
            {(!preview.memory_ids.is_empty()).then(|| view! {
                <p class="muted">{tr("First: ")}<span translate="no">{preview.memory_ids.join(", ")}</span></p>
            })}
            <Confirm
                label=tr("Run the sweep now…")
                question=trf("Delete the {} memories past their retention now, from the database and the index? This cannot be undone.", &[&preview.would_delete])
                test_id="sweep-now-ask"
            >
                <ActionForm action=sweep attr:class="inline">
                    <input type="hidden" name="project_id" value=project_for_sweep />
                    <button type="submit" class="danger" data-testid="sweep-now">{tr("Run the sweep")}</button>
                </ActionForm>
            </Confirm>
        </section>
    }
    .into_any()
}
