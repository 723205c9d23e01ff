//! Agent runs and recorded recalls (roles that may read memory content): the Runs page lists
//! runs by end-user and status and opens one run's timeline — its steps, the memory
//! operations linked to it, the memories given to the model as they were then (and now, or
//! deleted), and the tool results kept; the Recalls page lists searches and contexts by
//! end-user, session, memory and run, each opening its recall event.

use crate::api::{load_recalls, load_run, load_runs, load_session};
use crate::i18n::{format_time, term, tr, trf};
use crate::model::role_name;
use crate::model::{
    ConsoleError, RecallListing, RunListing, RunRow, RunStepRow, RunTimelineDetail, StepMemory,
};
use crate::project_picker::{non_empty, project_select};
use crate::topbar::TopBar;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::{components::Redirect, hooks::use_query_map};

fn failure(error: ConsoleError, test_id: &'static str) -> AnyView {
    match error {
        ConsoleError::Unauthorized => view! { <Redirect path="/console/login" /> }.into_any(),
        ConsoleError::Forbidden { role } => view! {
            <p class="notice" data-testid=test_id>
                {trf("Your role ({}) cannot see runs and recalls: they hold memory content.", &[&role_name(&role)])}
            </p>
        }
        .into_any(),
        ConsoleError::NotFound => view! {
            <p class="notice" data-testid=test_id>
                {tr("Nothing with this id in this project (it may have been erased).")}
            </p>
        }
        .into_any(),
        other => {
            view! { <p class="error" role="alert" data-testid=test_id>{other.localized()}</p> }
                .into_any()
        }
    }
}

#[component]
pub fn RunsPage() -> impl IntoView {
    let query = use_query_map();
    let initial = query.get_untracked();
    let initial_project = initial.get("project").and_then(|p| non_empty(&p));
    let project = RwSignal::new(initial_project.clone());
    let user = initial.get("user_id").unwrap_or_default();
    let status = initial.get("status").unwrap_or_default();
    let session = Resource::new(|| (), |_| load_session());
    let (user_for_load, status_for_load) = (user.clone(), status.clone());
    let before = move || query.with(|query| query.get("before").and_then(|b| non_empty(&b)));
    let runs = Resource::new(
        move || (project.get(), before()),
        move |(project, before)| {
            load_runs(
                project,
                non_empty(&user_for_load),
                non_empty(&status_for_load),
                before,
            )
        },
    );
    let run_id = move || query.with(|query| query.get("run").and_then(|id| non_empty(&id)));
    let timeline = Resource::new(
        move || (project.get(), run_id()),
        |(project, run_id)| async move {
            match run_id {
                Some(run_id) => Some(load_run(project, run_id).await),
                None => None,
            }
        },
    );
    let project_selector = move || {
        let initial_project = initial_project.clone();
        Suspend::new(async move { project_select(session.await, initial_project, project) })
    };
    let list = move || Suspend::new(async move { runs_view(runs.await) });
    let detail = move || {
        Suspend::new(async move {
            match timeline.await {
                None => ().into_any(),
                Some(Ok(detail)) => timeline_view(detail),
                Some(Err(error)) => failure(error, "run-error"),
            }
        })
    };
    view! {
        <Title text=tr("Runs · Engram console") />
        <TopBar current="/console/runs" />
        <main class="content">
            <h1>{tr("Agent runs")}</h1>
            <form class="filters" method="get" action="/console/runs">
                <label>
                    <span>{tr("Project")}</span>
                    <Transition fallback=|| view! { <select disabled></select> }>{project_selector}</Transition>
                </label>
                <label>
                    <span>{tr("End-user")}</span>
                    <input type="text" name="user_id" value=user data-testid="runs-user" />
                </label>
                <label>
                    <span>{tr("Status")}</span>
                    <select name="status" data-testid="runs-status">
                        {["", "open", "ended", "expired"]
                            .into_iter()
                            .map(|value| {
                                let label = if value.is_empty() { tr("Any").to_string() } else { term(value) };
                                view! { <option value=value selected=status == value>{label}</option> }
                            })
                            .collect_view()}
                    </select>
                </label>
                <button type="submit" data-testid="runs-apply">{tr("Apply")}</button>
            </form>
            <Transition fallback=|| view! { <p class="muted">{tr("Loading the run…")}</p> }>{detail}</Transition>
            <Transition fallback=|| view! { <p class="muted">{tr("Loading runs…")}</p> }>{list}</Transition>
        </main>
    }
}

fn runs_view(listing: Result<RunListing, ConsoleError>) -> AnyView {
    let listing = match listing {
        Ok(listing) => listing,
        Err(error) => return failure(error, "runs-error"),
    };
    let Some(project_id) = listing.project_id else {
        return view! { <p class="empty">{tr("This organization has no projects yet.")}</p> }
            .into_any();
    };
    if listing.runs.is_empty() {
        return view! { <p class="empty" data-testid="runs-empty">{tr("No runs match.")}</p> }
            .into_any();
    }
    let next = listing.next_cursor.map(|cursor| {
        let href = format!("/console/runs?project={project_id}&before={cursor}");
        view! { <p><a href=href data-testid="runs-next">{tr("Older runs →")}</a></p> }
    });
    let rows = listing
        .runs
        .into_iter()
        .map(|run| {
            let href = format!("/console/runs?project={project_id}&run={}", run.run_id);
            let status_class = format!("badge run-{}", run.status);
            view! {
                <tr data-testid="run-row" data-run-id=run.run_id.clone()>
                    <td translate="no"><a href=href data-testid="run-link">{run.task.clone()}</a></td>
                    <td translate="no">{run.user_id.clone().unwrap_or_else(|| "—".into())}</td>
                    <td translate="no">{run.agent_id.clone().unwrap_or_else(|| "—".into())}</td>
                    <td><span class=status_class>{term(&run.status)}</span></td>
                    <td>{run.outcome.as_deref().map(term).unwrap_or_else(|| "—".into())}</td>
                    <td class="number">{run.step_count}</td>
                    <td>{format_time(&run.created_at)}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table class="memories" data-testid="runs-table">
            <thead><tr>
                <th>{tr("Task")}</th><th>{tr("End-user")}</th><th>{tr("Agent")}</th><th>{tr("Status")}</th>
                <th>{tr("Outcome")}</th><th>{tr("Steps")}</th><th>{tr("Started")}</th>
            </tr></thead>
            <tbody>{rows}</tbody>
        </table>
        {next}
    }
    .into_any()
}

fn run_header(run: &RunRow) -> impl IntoView + use<> {
    let trajectory = run.trajectory_memory_id.clone().map(|id| {
        view! { <dt>{tr("Trajectory")}</dt><dd data-testid="run-trajectory" translate="no">{id}</dd> }
    });
    view! {
        <h2 data-testid="run-task" translate="no">{run.task.clone()}</h2>
        <dl class="detail">
            <dt>{tr("Status")}</dt><dd data-testid="run-status">{term(&run.status)}</dd>
            <dt>{tr("Outcome")}</dt><dd data-testid="run-outcome">{run.outcome.as_deref().map(term).unwrap_or_else(|| "—".into())}</dd>
            <dt>{tr("End-user")}</dt><dd translate="no">{run.user_id.clone().unwrap_or_else(|| "—".into())}</dd>
            <dt>{tr("Agent")}</dt><dd translate="no">{run.agent_id.clone().unwrap_or_else(|| "—".into())}</dd>
            <dt>{tr("Session")}</dt><dd translate="no">{run.session_id.clone().unwrap_or_else(|| "—".into())}</dd>
            <dt>{tr("Started")}</dt><dd>{format_time(&run.created_at)}</dd>
            {trajectory}
        </dl>
    }
}

fn timeline_view(detail: RunTimelineDetail) -> AnyView {
    let header = run_header(&detail.run);
    let steps = detail.steps.into_iter().map(step_view).collect_view();
    view! {
        <section class="card" data-testid="run-timeline" data-run-id=detail.run.run_id.clone()>
            {header}
            <ul class="timeline" data-testid="run-steps">{steps}</ul>
        </section>
    }
    .into_any()
}

fn step_view(step: RunStepRow) -> impl IntoView {
    let texts = step
        .texts
        .into_iter()
        .map(|(label, text)| {
            view! { <div class="step-text" data-testid="step-text"><strong>{term(&label)}{tr(": ")}</strong><code translate="no">{text}</code></div> }
        })
        .collect_view();
    let memories = (!step.memories.is_empty()).then(|| {
        let items = step
            .memories
            .into_iter()
            .map(memory_then_view)
            .collect_view();
        view! { <ul class="step-memories">{items}</ul> }
    });
    view! {
        <li data-testid="run-step" data-step-type=step.step_type.clone()>
            <strong>{format!("{}. ", step.seq)}{term(&step.step_type)}</strong>
            <span class="muted">" · "{format_time(&step.at)}" · "<span translate="no">{step.summary.clone()}</span></span>
            {texts}
            {memories}
        </li>
    }
}

fn memory_then_view(memory: StepMemory) -> impl IntoView {
    if memory.deleted {
        return view! {
            <li data-testid="step-memory" data-deleted="true">
                <span class="badge state-deleted">{tr("deleted")}</span>
                <span class="muted" translate="no">{format!(" {} (v{})", memory.memory_id, memory.version)}</span>
            </li>
        }
        .into_any();
    }
    let now = match (memory.now_version, memory.now_state) {
        (Some(version), Some(state)) if version != memory.version || state != "active" => {
            trf(" · now v{}, {}", &[&version, &term(&state)])
        }
        _ => String::new(),
    };
    view! {
        <li data-testid="step-memory" data-deleted="false" data-version=memory.version.to_string()>
            <span data-testid="step-memory-content" translate="no">{memory.content_then.unwrap_or_default()}</span>
            <span class="muted">{format!(" · v{}{now}", memory.version)}</span>
        </li>
    }
    .into_any()
}

#[component]
pub fn RecallsPage() -> impl IntoView {
    let query = use_query_map();
    let initial = query.get_untracked();
    let initial_project = initial.get("project").and_then(|p| non_empty(&p));
    let project = RwSignal::new(initial_project.clone());
    let field = |name: &str| initial.get(name).unwrap_or_default();
    let (user, session_id, memory, run) = (
        field("user_id"),
        field("session_id"),
        field("memory_id"),
        field("run_id"),
    );
    let session = Resource::new(|| (), |_| load_session());
    let filters = (
        user.clone(),
        session_id.clone(),
        memory.clone(),
        run.clone(),
    );
    let before = move || query.with(|query| query.get("before").and_then(|b| non_empty(&b)));
    let recalls = Resource::new(
        move || (project.get(), before()),
        move |(project, before)| {
            let (user, session_id, memory, run) = filters.clone();
            load_recalls(
                project,
                non_empty(&user),
                non_empty(&session_id),
                non_empty(&memory),
                non_empty(&run),
                before,
            )
        },
    );
    let project_selector = move || {
        let initial_project = initial_project.clone();
        Suspend::new(async move { project_select(session.await, initial_project, project) })
    };
    let list = move || Suspend::new(async move { recalls_view(recalls.await) });
    view! {
        <Title text=tr("Recalls · Engram console") />
        <TopBar current="/console/recalls" />
        <main class="content">
            <h1>{tr("Recalls")}</h1>
            <form class="filters" method="get" action="/console/recalls">
                <label>
                    <span>{tr("Project")}</span>
                    <Transition fallback=|| view! { <select disabled></select> }>{project_selector}</Transition>
                </label>
                <label><span>{tr("End-user")}</span><input type="text" name="user_id" value=user data-testid="recalls-user" /></label>
                <label><span>{tr("Session")}</span><input type="text" name="session_id" value=session_id /></label>
                <label><span>{tr("Memory id")}</span><input type="text" name="memory_id" value=memory data-testid="recalls-memory" /></label>
                <label><span>{tr("Run id")}</span><input type="text" name="run_id" value=run data-testid="recalls-run" /></label>
                <button type="submit" data-testid="recalls-apply">{tr("Apply")}</button>
            </form>
            <Transition fallback=|| view! { <p class="muted">{tr("Loading recalls…")}</p> }>{list}</Transition>
        </main>
    }
}

fn recalls_view(listing: Result<RecallListing, ConsoleError>) -> AnyView {
    let listing = match listing {
        Ok(listing) => listing,
        Err(error) => return failure(error, "recalls-error"),
    };
    let Some(project_id) = listing.project_id else {
        return view! { <p class="empty">{tr("This organization has no projects yet.")}</p> }
            .into_any();
    };
    if listing.recalls.is_empty() {
        return view! { <p class="empty" data-testid="recalls-empty">{tr("No recalls match.")}</p> }
            .into_any();
    }
    let next = listing.next_cursor.map(|cursor| {
        let href = format!("/console/recalls?project={project_id}&before={cursor}");
        view! { <p><a href=href>{tr("Older recalls →")}</a></p> }
    });
    let rows = listing
        .recalls
        .into_iter()
        .map(|recall| {
            let href = format!(
                "/console/recall?project={project_id}&recall={}",
                recall.recall_id
            );
            let run = recall.run_id.clone().map(|run_id| {
                let href = format!("/console/runs?project={project_id}&run={run_id}");
                view! { <a href=href data-testid="recall-run-link">{tr("run")}</a> }
            });
            view! {
                <tr data-testid="recall-row" data-purpose=recall.purpose.clone()>
                    <td>{format_time(&recall.at)}</td>
                    <td translate=recall.query.is_some().then_some("no")><a href=href data-testid="recall-link">{recall.query.clone().unwrap_or_else(|| tr("(query text not kept)").into())}</a></td>
                    <td>{term(&recall.purpose)}</td>
                    <td translate="no">{recall.user_id.clone().unwrap_or_else(|| "—".into())}</td>
                    <td translate="no">{recall.profile.clone()}</td>
                    <td class="number">{recall.result_count}</td>
                    <td class="number">{recall.top_score.map_or_else(|| "–".to_string(), |score| format!("{score:.3}"))}</td>
                    <td>{run}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table class="memories" data-testid="recalls-table">
            <thead><tr>
                <th>{tr("When")}</th><th>{tr("Query")}</th><th>{tr("Purpose")}</th><th>{tr("End-user")}</th>
                <th>{tr("Profile")}</th><th>{tr("Results")}</th><th>{tr("Top score")}</th><th>{tr("Run")}</th>
            </tr></thead>
            <tbody>{rows}</tbody>
        </table>
        {next}
    }
    .into_any()
}
