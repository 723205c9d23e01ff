//! The recall-quality page (owners, admins, analysts, compliance): searches, latency
//! percentiles, empty-recall rate and top-score distribution over a date range; precision from
//! feedback and memories corrected after recall; the queries that found nothing, each a link to
//! its recall event and results; per-profile figures; evaluation history with regressions.

use crate::api::{
    CreateEvaluationSet, RunEvaluationSet, load_recall, load_recall_event, load_session,
};
use crate::charts::{daily_bars, group_digits, line_chart};
use crate::i18n::{format_day, format_time, term, tr, trf};
use crate::model::role_name;
use crate::model::{ConsoleError, RecallDashboard, RecallEventDetail};
use crate::project_picker::{non_empty, project_select};
use crate::topbar::TopBar;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::{components::Redirect, hooks::use_query_map};

fn percent(rate: Option<f64>) -> String {
    rate.map_or_else(|| "–".to_string(), |rate| format!("{:.1} %", rate * 100.0))
}

fn milliseconds(value: Option<f64>) -> String {
    value.map_or_else(|| "–".to_string(), |ms| format!("{ms:.1} ms"))
}

fn decimal(value: Option<f64>) -> String {
    value.map_or_else(|| "–".to_string(), |value| format!("{value:.3}"))
}

#[component]
pub fn RecallPage() -> impl IntoView {
    let query = use_query_map();
    let initial = query.get_untracked();
    let initial_project = initial.get("project").and_then(|p| non_empty(&p));
    let project = RwSignal::new(initial_project.clone());
    let from = RwSignal::new(initial.get("from").unwrap_or_default());
    let to = RwSignal::new(initial.get("to").unwrap_or_default());
    let session = Resource::new(|| (), |_| load_session());
    let create = ServerAction::<CreateEvaluationSet>::new();
    let run = ServerAction::<RunEvaluationSet>::new();
    let dashboard = Resource::new(
        move || {
            (
                project.get(),
                from.get(),
                to.get(),
                create.version().get(),
                run.version().get(),
            )
        },
        |(project, from, to, _, _)| load_recall(project, non_empty(&from), non_empty(&to)),
    );
    let actions = EvaluationActions { create, run };
    // The drill-down follows the `recall` query parameter, so links open it in place.
    let recall_id = move || query.with(|query| query.get("recall").and_then(|id| non_empty(&id)));
    let event = Resource::new(
        move || (project.get(), recall_id()),
        |(project, recall_id)| async move {
            match recall_id {
                Some(recall_id) => Some(load_recall_event(project, recall_id).await),
                None => None,
            }
        },
    );
    let project_selector = move || {
        let initial_project = initial_project.clone();
        Suspend::new(async move { project_select(session.await, initial_project, project) })
    };
    let body =
        move || Suspend::new(async move { dashboard_view(dashboard.await, from, to, actions) });
    let action_outcome = move || {
        let failed = create
            .value()
            .get()
            .and_then(Result::err)
            .or_else(|| run.value().get().and_then(Result::err));
        failed.map(|error| {
            view! { <p class="error" role="alert" data-testid="evaluation-error">{error.localized()}</p> }
        })
    };
    let detail = move || {
        Suspend::new(async move {
            match event.await {
                None => ().into_any(),
                Some(detail) => event_view(detail),
            }
        })
    };
    view! {
        <Title text=tr("Recall quality · Engram console") />
        <TopBar current="/console/recall" />
        <main class="content">
            <h1>{tr("Recall quality")}</h1>
            <form class="filters" on:submit=|ev| ev.prevent_default()>
                <label>
                    <span>{tr("Project")}</span>
                    <Transition fallback=|| view! { <select disabled></select> }>{project_selector}</Transition>
                </label>
            </form>
            {action_outcome}
            <Transition fallback=|| view! { <p class="muted">{tr("Loading the recall event…")}</p> }>{detail}</Transition>
            <Transition fallback=|| view! { <p class="muted">{tr("Loading recall quality…")}</p> }>{body}</Transition>
        </main>
    }
}

/// The date range picker, showing the range the page shows (the last 7 days by default).
fn range_picker(
    dashboard: &RecallDashboard,
    from: RwSignal<String>,
    to: RwSignal<String>,
) -> AnyView {
    view! {
        <form class="filters" data-testid="recall-range" on:submit=|ev| ev.prevent_default()>
            <label>
                <span>{tr("From")}</span>
                <input type="date" name="from" data-testid="recall-from" value=dashboard.from.clone()
                    on:change=move |ev| from.set(event_target_value(&ev)) />
            </label>
            <label>
                <span>{tr("To")}</span>
                <input type="date" name="to" data-testid="recall-to" value=dashboard.to.clone()
                    on:change=move |ev| to.set(event_target_value(&ev)) />
            </label>
        </form>
    }
    .into_any()
}

/// The console's evaluation actions: create a set, run one now.
#[derive(Clone, Copy)]
struct EvaluationActions {
    create: ServerAction<CreateEvaluationSet>,
    run: ServerAction<RunEvaluationSet>,
}

/// A new set from a name, k, a schedule and cases as JSONL.
fn new_set_form(project_id: String, create: ServerAction<CreateEvaluationSet>) -> AnyView {
    view! {
        <details data-testid="new-evaluation-set">
            <summary>{tr("New evaluation set")}</summary>
            <ActionForm action=create attr:class="stack" attr:data-testid="evaluation-form">
                <input type="hidden" name="project_id" value=project_id />
                <label><span>{tr("Name")}</span><input name="name" data-testid="evaluation-name" required /></label>
                <label><span>{tr("k (default 10)")}</span><input name="k" data-testid="evaluation-k" placeholder="10" /></label>
                <label><span>{tr("Run every (hours; empty: on request)")}</span><input name="schedule_hours" data-testid="evaluation-schedule" /></label>
                <label>
                    <span>{tr("Cases, one JSON object per line: query, user_id, expected_memory_ids or expected_contents")}</span>
                    <textarea name="cases_jsonl" rows="6" data-testid="evaluation-cases"
                        placeholder=r#"{"query": "where does Ines live", "expected_contents": ["Lisbon"]}"#></textarea>
                </label>
                <button type="submit" data-testid="evaluation-create">{tr("Create set")}</button>
            </ActionForm>
        </details>
    }
    .into_any()
}

fn dashboard_view(
    dashboard: Result<RecallDashboard, ConsoleError>,
    from: RwSignal<String>,
    to: RwSignal<String>,
    actions: EvaluationActions,
) -> AnyView {
    let dashboard = match dashboard {
        Ok(dashboard) => dashboard,
        Err(ConsoleError::Unauthorized) => {
            return view! { <Redirect path="/console/login" /> }.into_any();
        }
        Err(ConsoleError::Forbidden { role }) => {
            return view! {
                <p class="notice" data-testid="recall-forbidden">
                    {trf("Your role ({}) cannot see recall quality.", &[&role_name(&role)])}
                </p>
            }
            .into_any();
        }
        Err(error) => {
            return view! { <p class="error" role="alert" data-testid="recall-error">{error.localized()}</p> }.into_any();
        }
    };
    let totals = dashboard.totals.clone();
    let labels: Vec<String> = dashboard
        .buckets
        .iter()
        .map(|bucket| bucket.label.clone())
        .collect();
    let searches: Vec<i64> = dashboard
        .buckets
        .iter()
        .map(|bucket| bucket.searches as i64)
        .collect();
    let volume_svg = daily_bars(
        "chart-recall-volume",
        &trf("searches per {}", &[&term(&dashboard.bucket)]),
        &labels,
        &searches,
        "#2563eb",
        &|value| group_digits(value),
    );
    let latency_svg = line_chart(
        "chart-recall-latency",
        tr("search latency percentiles"),
        &labels,
        &[
            (
                "p50",
                "#059669",
                dashboard
                    .buckets
                    .iter()
                    .map(|bucket| bucket.p50_ms)
                    .collect(),
            ),
            (
                "p95",
                "#d97706",
                dashboard
                    .buckets
                    .iter()
                    .map(|bucket| bucket.p95_ms)
                    .collect(),
            ),
            (
                "p99",
                "#dc2626",
                dashboard
                    .buckets
                    .iter()
                    .map(|bucket| bucket.p99_ms)
                    .collect(),
            ),
        ],
        &|ms| format!("{ms:.1} ms"),
        &[],
        None,
    );
    let empty_svg = line_chart(
        "chart-recall-empty",
        tr("share of searches that found nothing"),
        &labels,
        &[(
            tr("empty"),
            "#7c3aed",
            dashboard
                .buckets
                .iter()
                .map(|bucket| bucket.empty_rate.map(|rate| rate * 100.0))
                .collect(),
        )],
        &|value| format!("{value:.0} %"),
        &[],
        Some(100.0),
    );
    let precision_svg = line_chart(
        "chart-recall-precision",
        tr("precision from feedback"),
        &labels,
        &[(
            tr("precision"),
            "#2563eb",
            dashboard
                .buckets
                .iter()
                .map(|bucket| bucket.precision.map(|precision| precision * 100.0))
                .collect(),
        )],
        &|value| format!("{value:.0} %"),
        &[],
        Some(100.0),
    );
    let bin_labels: Vec<String> = (0..10)
        .map(|bin| format!("{:.1}–{:.1}", bin as f64 / 10.0, (bin + 1) as f64 / 10.0))
        .collect();
    let bins: Vec<i64> = dashboard
        .top_score_bins
        .iter()
        .map(|count| *count as i64)
        .collect();
    let scores_svg = daily_bars(
        "chart-recall-top-scores",
        tr("searches by best score"),
        &bin_labels,
        &bins,
        "#0f766e",
        &|value| group_digits(value),
    );
    let project_id = dashboard.project_id.clone();
    let empty_rows = if dashboard.empty_queries.is_empty() {
        view! { <tr><td colspan="3" class="muted">{tr("Every search found something.")}</td></tr> }
            .into_any()
    } else {
        dashboard
            .empty_queries
            .iter()
            .map(|row| {
                let href = format!(
                    "/console/recall?project={project_id}&recall={}",
                    row.recall_id
                );
                let shown = row
                    .query
                    .clone()
                    .unwrap_or_else(|| tr("(query text not shown)").to_string());
                view! {
                    <tr data-testid="empty-query" data-count=row.count.to_string()>
                        <td translate=row.query.is_some().then_some("no")><a href=href data-testid="empty-query-link">{shown}</a></td>
                        <td>{group_digits(row.count as i64)}</td>
                        <td>{format_time(&row.last_seen)}</td>
                    </tr>
                }
            })
            .collect_view()
            .into_any()
    };
    let profile_rows = dashboard
        .profiles
        .iter()
        .map(|row| {
            view! {
                <tr data-testid=format!("profile-{}", row.profile)>
                    <td translate="no">{row.profile.clone()}</td>
                    <td>{group_digits(row.searches as i64)}</td>
                    <td>{percent(row.empty_rate)}</td>
                    <td>{milliseconds(row.p95_ms)}</td>
                    <td>{decimal(row.mean_top_score)}</td>
                    <td>{percent(row.precision)}</td>
                </tr>
            }
        })
        .collect_view();
    let evaluations = dashboard
        .evaluations
        .iter()
        .map(|set| {
            let run_labels: Vec<String> = set.runs.iter().map(|run| run.at.clone()).collect();
            let marked: Vec<usize> = set
                .runs
                .iter()
                .enumerate()
                .filter(|(_, run)| run.regression)
                .map(|(index, _)| index)
                .collect();
            let svg = line_chart(
                &format!("chart-eval-{}", set.set_id),
                &trf("{} over time", &[&set.name]),
                &run_labels,
                &[
                    (&format!("hit@{}", set.k), "#2563eb", set.runs.iter().map(|run| Some(run.hit_at_k)).collect()),
                    ("MRR", "#059669", set.runs.iter().map(|run| Some(run.mrr)).collect()),
                    (&format!("nDCG@{}", set.k), "#d97706", set.runs.iter().map(|run| Some(run.ndcg_at_k)).collect()),
                ],
                &|value| format!("{value:.2}"),
                &marked,
                Some(1.0),
            );
            let last = set.runs.last();
            let status = match last {
                None => tr("No runs yet.").to_string(),
                Some(run) if run.regression => trf("Last run flagged a regression: {}", &[&run.regression_reasons.join("; ")]),
                Some(run) => trf("Last run ({}, profile {}): no regression.", &[&format_time(&run.at), &run.profile]),
            };
            let regressed = last.is_some_and(|run| run.regression);
            let comparison = set.comparison.as_ref().map(|comparison| {
                let rows = comparison
                    .rows
                    .iter()
                    .map(|row| {
                        view! {
                            <tr data-testid="comparison-row" data-figure=row.figure.clone()
                                data-significant=row.significant.to_string()>
                                <td translate="no">{row.figure.replace('_', " ")}</td>
                                <td>{format!("{:.3}", row.first)}</td>
                                <td>{format!("{:.3}", row.second)}</td>
                                <td>{format!("{:+.3} [{:+.3}, {:+.3}]", row.difference, row.low, row.high)}</td>
                                <td>{if row.significant { tr("yes") } else { tr("no") }}</td>
                            </tr>
                        }
                    })
                    .collect_view();
                view! {
                    <table class="table" data-testid="evaluation-comparison">
                        <caption>{trf("{} vs {} ({})", &[&comparison.first_profile, &comparison.second_profile, &format_time(&comparison.run_at)])}</caption>
                        <thead><tr>
                            <th>{tr("Figure")}</th>
                            <th translate="no">{comparison.first_profile.clone()}</th>
                            <th translate="no">{comparison.second_profile.clone()}</th>
                            <th>{tr("Difference, 95 % interval")}</th>
                            <th>{tr("Beyond noise")}</th>
                        </tr></thead>
                        <tbody>{rows}</tbody>
                    </table>
                }
            });
            let (run_project, run_set) = (project_id.clone(), set.set_id.clone());
            let run_now = view! {
                <ActionForm action=actions.run attr:class="inline">
                    <input type="hidden" name="project_id" value=run_project />
                    <input type="hidden" name="set_id" value=run_set />
                    <button type="submit" class="ghost" data-testid="evaluation-run">{tr("Run now")}</button>
                </ActionForm>
            };
            view! {
                <figure class="chart-card" data-testid="evaluation-set" data-name=set.name.clone()
                    data-runs=set.runs.len().to_string() data-regression=regressed.to_string()>
                    <figcaption>
                        <strong translate="no">{set.name.clone()}</strong>
                        {trf(" · {} cases · k = {}", &[&set.cases, &set.k])}
                    </figcaption>
                    <p class=if regressed { "error" } else { "muted" } data-testid="evaluation-status">{status}</p>
                    {run_now}
                    <div inner_html=svg></div>
                    {comparison}
                </figure>
            }
        })
        .collect_view();
    let evaluation_note = dashboard.evaluations.is_empty().then(|| {
        view! { <p class="muted">{tr("No evaluation sets yet: create one below or with POST /v1/eval-sets.")}</p> }
    });
    let new_set = new_set_form(dashboard.project_id.clone(), actions.create);
    let picker = range_picker(&dashboard, from, to);
    view! {
        {picker}
        <section class="card" data-testid="recall-summary" data-searches=totals.searches.to_string()
            data-empty=totals.empty.to_string()>
            <h2><span translate="no">{dashboard.project_name.clone()}</span>{trf(" · {} to {}", &[&format_day(&dashboard.from), &format_day(&dashboard.to)])}</h2>
            <dl class="figures">
                <div><dt>{tr("Searches")}</dt><dd data-testid="figure-searches">{group_digits(totals.searches as i64)}</dd></div>
                <div><dt>{tr("Found nothing")}</dt><dd data-testid="figure-empty-rate">{percent(totals.empty_rate)}</dd></div>
                <div><dt>{tr("Latency p50 / p95 / p99")}</dt><dd>{format!("{} / {} / {}", milliseconds(totals.p50_ms), milliseconds(totals.p95_ms), milliseconds(totals.p99_ms))}</dd></div>
                <div><dt>{tr("Mean best score")}</dt><dd>{decimal(totals.mean_top_score)}</dd></div>
                <div><dt>{tr("Precision from feedback")}</dt><dd data-testid="figure-precision">{trf("{} ({} ratings)", &[&percent(totals.precision), &totals.ratings])}</dd></div>
                <div><dt>{tr("Recalled, later superseded or corrected")}</dt><dd data-testid="figure-corrected">{trf("{} of {} memories ({})", &[&totals.superseded_or_corrected, &totals.recalled_memories, &percent(totals.corrected_share)])}</dd></div>
            </dl>
            {dashboard.truncated.then(|| view! { <p class="notice">{tr("More searches than are read at once: the figures cover the newest.")}</p> })}
            <p class="muted" data-testid="recall-counts-what">
                {tr("Searches agents made (the API, MCP, Mem0's clients). Lookups in this console are billed — the Usage page lists them under the channel console — but are not recall events, so they are not counted here.")}
            </p>
        </section>
        <section class="card">
            <h2>{tr("Volume and latency")}</h2>
            <div class="chart-grid">
                <figure class="chart-card"><figcaption>{trf("Searches per {}", &[&term(&dashboard.bucket)])}</figcaption><div inner_html=volume_svg></div></figure>
                <figure class="chart-card"><figcaption>{tr("Latency p50 / p95 / p99")}</figcaption><div inner_html=latency_svg></div></figure>
            </div>
        </section>
        <section class="card">
            <h2>{tr("Did it find anything?")}</h2>
            <p class="muted" data-testid="found-nothing-means">
                {tr("A search finds nothing when nothing it could consider clears the project's relevance floor or the min_score it asked for: it answers \"abstained\": true, meaning nothing relevant is known — not an error. New projects get the floors measured for their embedding model (the built-in one: 0.15, and 0.45 when a question names someone no memory mentions), so this rate counts searches the memories held nothing relevant for — most often questions about someone they do not know. Projects created before floors existed keep 0 until an admin sets one (the Settings page or PATCH /v1/project/settings); with the floor at 0 every search that has memories to consider returns some, and this rate stays near 0.")}
            </p>
            <div class="chart-grid">
                <figure class="chart-card"><figcaption>{tr("Searches that found nothing")}</figcaption><div inner_html=empty_svg></div></figure>
                <figure class="chart-card"><figcaption>{tr("Best score per search")}</figcaption><div inner_html=scores_svg></div></figure>
                <figure class="chart-card"><figcaption>{tr("Precision from feedback")}</figcaption><div inner_html=precision_svg></div></figure>
            </div>
            <h3>{tr("Queries that found nothing")}</h3>
            <table class="table" data-testid="empty-queries">
                <thead><tr><th>{tr("Query")}</th><th>{tr("Times")}</th><th>{tr("Last")}</th></tr></thead>
                <tbody>{empty_rows}</tbody>
            </table>
        </section>
        <section class="card">
            <h2>{tr("Retrieval profiles")}</h2>
            <table class="table" data-testid="recall-profiles">
                <thead><tr><th>{tr("Profile")}</th><th>{tr("Searches")}</th><th>{tr("Found nothing")}</th><th>{tr("p95")}</th><th>{tr("Mean best score")}</th><th>{tr("Precision")}</th></tr></thead>
                <tbody>{profile_rows}</tbody>
            </table>
        </section>
        <section class="card">
            <h2>{tr("Evaluations")}</h2>
            {evaluation_note}
            <div class="chart-grid">{evaluations}</div>
            {new_set}
        </section>
    }
    .into_any()
}

fn event_view(detail: Result<RecallEventDetail, ConsoleError>) -> AnyView {
    let detail = match detail {
        Ok(detail) => detail,
        Err(ConsoleError::NotFound) => {
            return view! { <p class="notice" data-testid="recall-event-missing">{tr("That recall event no longer exists (erased, or past its retention).")}</p> }.into_any();
        }
        Err(error) => {
            return view! { <p class="error" role="alert">{error.localized()}</p> }.into_any();
        }
    };
    let results = if detail.results.is_empty() {
        view! { <tr><td colspan="4" class="muted">{tr("The search returned nothing.")}</td></tr> }
            .into_any()
    } else {
        detail
            .results
            .iter()
            .map(|row| {
                let href = format!(
                    "/console/memory?project={}&id={}",
                    detail.project_id, row.memory_id
                );
                let content = row.content.clone().unwrap_or_else(|| row.memory_id.clone());
                view! {
                    <tr data-testid="recalled-memory">
                        <td>{row.rank}</td>
                        <td>{format!("{:.3}", row.score)}</td>
                        <td translate="no"><a href=href>{content}</a></td>
                        <td>{term(&row.state)}</td>
                    </tr>
                }
            })
            .collect_view()
            .into_any()
    };
    let stages = detail
        .stages
        .iter()
        .map(|(stage, ms)| format!("{} {ms:.2} ms", term(stage)))
        .collect::<Vec<_>>()
        .join(" · ");
    // Who it was for: each id marked as the user's words, not the console's.
    let subject: Vec<_> = [
        (tr("user "), detail.user_id.clone()),
        (tr("agent "), detail.agent_id.clone()),
        (tr("session "), detail.session_id.clone()),
    ]
    .into_iter()
    .filter_map(|(what, id)| id.map(|id| (what, id)))
    .collect();
    let no_subject = subject.is_empty();
    let subject = subject
        .into_iter()
        .enumerate()
        .map(|(position, (what, id))| {
            view! { {(position > 0).then_some(", ")}{what}<span translate="no">{id}</span> }
        })
        .collect_view();
    view! {
        <section class="card" data-testid="recall-event" data-recall-id=detail.recall_id.clone()>
            <h2>{tr("Recall event")}</h2>
            <p>
                <strong data-testid="recall-event-query" translate=detail.query.is_some().then_some("no")>
                    {detail.query.clone().unwrap_or_else(|| tr("(query text not shown)").to_string())}
                </strong>
                " · "{format_time(&detail.created_at)}" · "{tr("profile ")}<span translate="no">{detail.profile.clone()}</span>
                " · "{term(&detail.retrieval)}" · "{no_subject.then(|| tr("no subject"))}{subject}
            </p>
            <p class="muted" data-testid="recall-event-stages">{trf("{} ms in all: {}", &[&format!("{:.2}", detail.total_ms), &stages])}</p>
            {detail.trace_id.clone().map(|trace| view! { <p class="muted">{tr("Trace ")} <code translate="no">{trace}</code></p> })}
            <table class="table">
                <thead><tr><th>{tr("Rank")}</th><th>{tr("Score")}</th><th>{tr("Memory")}</th><th>{tr("Now")}</th></tr></thead>
                <tbody>{results}</tbody>
            </table>
            <details><summary>{tr("Filters and parameters")}</summary><pre translate="no">{detail.filters.clone()}</pre></details>
        </section>
    }
    .into_any()
}
