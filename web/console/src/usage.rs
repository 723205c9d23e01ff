//! The usage and cost page (owners, admins, analysts): units per day, cost per day, the
//! month's budget burn-down with a forecast, the organization's top projects, the top ten
//! keys, end-users, agents and channels by cost, and the budget, quota and recall-budget
//! settings (editable by owners and admins).

use crate::api::{SaveLimits, load_session, load_usage};
use crate::charts::{breakdown_bars, burn_down, daily_bars, group_digits, money, ranked_bars};
use crate::i18n::{breakdown_label, format_month, format_time, names_someone, tr, trf, unit_label};
use crate::model::role_name;
use crate::model::{ConsoleError, SpendLimitsForm, USAGE_RANGES, UsageOverview};
use crate::project_picker::{non_empty, project_select};
use crate::topbar::TopBar;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::{components::Redirect, hooks::use_query_map};

/// A colour per unit, in the order the backend lists units.
const UNIT_COLORS: [&str; 5] = ["#2563eb", "#059669", "#d97706", "#7c3aed", "#be185d"];

#[component]
pub fn UsagePage() -> impl IntoView {
    let query = use_query_map().get_untracked();
    let initial_project = query.get("project").and_then(|p| non_empty(&p));
    let initial_days = query
        .get("days")
        .and_then(|days| days.parse::<u32>().ok())
        .filter(|days| USAGE_RANGES.contains(days))
        .unwrap_or(30);
    let project = RwSignal::new(initial_project.clone());
    let days = RwSignal::new(initial_days);
    let session = Resource::new(|| (), |_| load_session());
    let save = ServerAction::<SaveLimits>::new();
    let overview = Resource::new(
        move || (project.get(), days.get(), save.version().get()),
        |(project, days, _)| load_usage(project, Some(days)),
    );
    let project_selector = move || {
        let initial_project = initial_project.clone();
        Suspend::new(async move { project_select(session.await, initial_project, project) })
    };
    let saved = move || {
        save.value().get().map(|result| match result {
            Ok(()) => view! { <p class="notice" data-testid="limits-saved">{tr("Limits saved.")}</p> }.into_any(),
            Err(error) => view! { <p class="error" role="alert" data-testid="limits-error">{error.localized()}</p> }.into_any(),
        })
    };
    let body = move || Suspend::new(async move { usage_view(overview.await, save) });
    view! {
        <Title text=tr("Usage and cost · Engram console") />
        <TopBar current="/console/usage" />
        <main class="content">
            <h1>{tr("Usage and cost")}</h1>
            <form class="filters" on:submit=|ev| ev.prevent_default()>
                <label>
                    <span>{tr("Project")}</span>
                    <Transition fallback=|| view! { <select disabled></select> }>{project_selector}</Transition>
                </label>
                <label>
                    <span>{tr("Range")}</span>
                    <select
                        name="days"
                        data-testid="usage-range"
                        on:change=move |ev| {
                            if let Ok(chosen) = event_target_value(&ev).parse::<u32>() {
                                days.set(chosen);
                            }
                        }
                    >
                        {USAGE_RANGES
                            .iter()
                            .map(|range| view! {
                                <option value=range.to_string() selected=*range == initial_days>
                                    {trf("Last {} days", &[range])}
                                </option>
                            })
                            .collect_view()}
                    </select>
                </label>
            </form>
            {saved}
            <Transition fallback=|| view! { <p class="muted">{tr("Loading usage…")}</p> }>{body}</Transition>
        </main>
    }
}

fn usage_view(
    overview: Result<UsageOverview, ConsoleError>,
    save: ServerAction<SaveLimits>,
) -> AnyView {
    let overview = match overview {
        Ok(overview) => overview,
        Err(ConsoleError::Unauthorized) => {
            return view! { <Redirect path="/console/login" /> }.into_any();
        }
        Err(ConsoleError::Forbidden { role }) => {
            return view! {
                <p class="notice" data-testid="usage-forbidden">
                    {trf("Your role ({}) cannot see usage and cost.", &[&role_name(&role)])}
                </p>
            }
            .into_any();
        }
        Err(error) => {
            return view! { <p class="error" role="alert">{error.localized()}</p> }.into_any();
        }
    };
    let currency = overview.currency.clone();
    let month = &overview.month;
    let day_labels: Vec<String> = overview.days.iter().map(|day| day.day.clone()).collect();
    let unit_charts = overview
        .units
        .iter()
        .enumerate()
        .map(|(index, unit)| {
            let values: Vec<i64> = overview
                .days
                .iter()
                .map(|day| day.quantities.get(index).copied().unwrap_or(0))
                .collect();
            let total: i64 = values.iter().sum();
            let svg = daily_bars(
                &format!("chart-usage-{unit}"),
                &trf("{} per day", &[&unit_label(unit)]),
                &day_labels,
                &values,
                UNIT_COLORS[index % UNIT_COLORS.len()],
                &|value| group_digits(value),
            );
            view! {
                <figure class="chart-card" data-testid=format!("usage-{unit}") data-total=total.to_string()>
                    <figcaption>
                        <strong>{unit_label(unit)}</strong>
                        {trf(" · {} in range", &[&group_digits(total)])}
                    </figcaption>
                    <div inner_html=svg></div>
                </figure>
            }
        })
        .collect_view();
    let cost_values: Vec<i64> = overview.days.iter().map(|day| day.cost_micros).collect();
    let cost_currency = currency.clone();
    let cost_svg = daily_bars(
        "chart-cost-per-day",
        tr("cost per day"),
        &day_labels,
        &cost_values,
        "#0f766e",
        &move |micros| money(micros, &cost_currency),
    );
    let burn_svg = burn_down(month, &currency);
    let top_svg = ranked_bars(&overview.top_projects, &currency, &overview.project_id);
    let budget_line = match month.budget_micros {
        Some(budget) => {
            let share = if budget > 0 {
                month.spent_micros as f64 / budget as f64 * 100.0
            } else {
                100.0
            };
            trf(
                "{} of {} spent ({} %), forecast {} by month end{}",
                &[
                    &money(month.spent_micros, &currency),
                    &money(budget, &currency),
                    &format!("{share:.0}"),
                    &money(month.forecast_micros, &currency),
                    &if month.hard_cap {
                        tr("; requests stop when the budget is spent")
                    } else {
                        ""
                    },
                ],
            )
        }
        None => trf(
            "{} spent, forecast {} by month end; no budget set",
            &[
                &money(month.spent_micros, &currency),
                &money(month.forecast_micros, &currency),
            ],
        ),
    };
    // A forecast past the budget is said where the forecast is shown.
    let over_budget = month
        .budget_micros
        .filter(|budget| month.forecast_micros > *budget)
        .map(|budget| {
            view! {
                <p class="warning" role="status" data-testid="forecast-over-budget">
                    {trf(
                        "At this rate the month ends at {}: {} over its budget of {}.",
                        &[
                            &money(month.forecast_micros, &currency),
                            &money(month.forecast_micros - budget, &currency),
                            &money(budget, &currency),
                        ],
                    )}
                </p>
            }
        });
    let alerts = month
        .alerts
        .iter()
        .map(|(threshold, at)| {
            view! {
                <li data-testid="budget-alert" data-threshold=threshold.to_string()>
                    {trf("{} % of the budget reached at {}", &[threshold, &format_time(at)])}
                </li>
            }
        })
        .collect_view();
    let quotas = month
        .quotas
        .iter()
        .map(|(unit, used, quota)| {
            let limit = quota
                .map(|quota| group_digits(quota as i64))
                .unwrap_or_else(|| tr("no quota").to_string());
            view! {
                <tr data-testid=format!("quota-{unit}")>
                    <td>{unit_label(unit)}</td>
                    <td>{group_digits(*used)}</td>
                    <td>{limit}</td>
                </tr>
            }
        })
        .collect_view();
    let llm_rows = if overview.llm_by_model.is_empty() {
        view! { <tr><td colspan="5" class="muted">{tr("No LLM calls in this range.")}</td></tr> }
            .into_any()
    } else {
        overview
            .llm_by_model
            .iter()
            .map(|usage| {
                view! {
                    <tr data-testid=format!("llm-model-{}", usage.model)>
                        <td translate="no">{usage.model.clone()}</td>
                        <td>{group_digits(usage.calls)}</td>
                        <td>{group_digits(usage.failed_calls)}</td>
                        <td>{group_digits(usage.tokens_in)}</td>
                        <td>{group_digits(usage.tokens_out)}</td>
                    </tr>
                }
            })
            .collect_view()
            .into_any()
    };
    let breakdown_cards = overview
        .breakdowns
        .iter()
        .map(|breakdown| {
            let svg = breakdown_bars(breakdown, breakdown_title(&breakdown.by), &currency);
            let empty = breakdown.entries.is_empty();
            let more = (breakdown.more > 0).then(|| {
                trf(
                    "and {} more (GET /v1/costs?by={} lists every one)",
                    &[&breakdown.more, &breakdown.by],
                )
            });
            let rows = breakdown
                .entries
                .iter()
                .map(|entry| {
                    view! {
                        <tr data-testid="breakdown-entry" data-label=entry.label.clone()
                            data-cost=entry.cost_micros.to_string()>
                            <td translate=names_someone(&entry.label).then_some("no")>{breakdown_label(&entry.label)}</td>
                            <td>{money(entry.cost_micros, &currency)}</td>
                            <td>{group_digits(entry.searches)}</td>
                            <td>{group_digits(entry.memories_written)}</td>
                        </tr>
                    }
                })
                .collect_view();
            view! {
                <div class="breakdown" data-testid=format!("breakdown-{}", breakdown.by)>
                    <h3>{breakdown_title(&breakdown.by)}</h3>
                    {if empty {
                        view! { <p class="muted">{tr("Nothing used in this range.")}</p> }.into_any()
                    } else {
                        view! {
                            <div inner_html=svg></div>
                            <table class="table">
                                <thead><tr><th>{tr("Who")}</th><th>{tr("Cost")}</th><th>{tr("Searches")}</th><th>{tr("Memories written")}</th></tr></thead>
                                <tbody>{rows}</tbody>
                            </table>
                            <p class="muted">{more}</p>
                            {(breakdown.by == "channel").then(|| view! {
                                <p class="muted" data-testid="usage-console-searches">
                                    {tr("Searches made in this console are billed as searches (channel console); the Recall page counts agents' searches only.")}
                                </p>
                            })}
                        }
                        .into_any()
                    }}
                </div>
            }
        })
        .collect_view();
    let default_prices_note = overview.default_prices.then(|| {
        view! {
            <p class="notice" data-testid="default-prices">
                {tr("Some of these costs use Engram's default price book, a placeholder: set your organization's prices on the ")}
                <a href="/console/prices">{tr("Prices")}</a>{tr(" page, or the deployment's with ")}
                <code translate="no">"engram admin set-price --unit <unit> --price <price>"</code>"."
            </p>
        }
    });
    let range_cost = money(overview.range_cost_micros, &currency);
    let limits_form = limits_form(overview.limits.clone(), overview.can_edit_limits, save);
    view! {
        <section class="card" data-testid="month-summary" data-spent=month.spent_micros.to_string()
            data-forecast=month.forecast_micros.to_string()>
            <h2><span translate="no">{overview.project_name.clone()}</span>" · "{format_month(&month.month)}</h2>
            <p data-testid="budget-line">{budget_line}</p>
            {over_budget}
            <ul class="alerts">{alerts}</ul>
            <div inner_html=burn_svg></div>
            <p class="legend muted">{tr("Solid: cost to date. Dashed: forecast at the current rate. Red: budget.")}</p>
        </section>
        <section class="card">
            <h2>{tr("Cost per day")}</h2>
            <p data-testid="range-cost">{trf("{} over the range", &[&range_cost])}</p>
            {default_prices_note}
            <div inner_html=cost_svg></div>
        </section>
        <section class="card" data-testid="cost-breakdowns">
            <h2>{tr("Who drives the cost")}</h2>
            <p class="muted">{tr("The range's top ten by cost. An end-user token's calls count under the key that minted it.")}</p>
            <div class="chart-grid">{breakdown_cards}</div>
        </section>
        <section class="card">
            <h2>{tr("Usage per day")}</h2>
            <div class="chart-grid">{unit_charts}</div>
        </section>
        <section class="card">
            <h2>{tr("Top projects this month")}</h2>
            <div inner_html=top_svg></div>
        </section>
        <section class="card">
            <h2>{tr("Quotas this month")}</h2>
            <table class="table">
                <thead><tr><th>{tr("Unit")}</th><th>{tr("Used")}</th><th>{tr("Monthly quota")}</th></tr></thead>
                <tbody>{quotas}</tbody>
            </table>
        </section>
        <section class="card">
            <h2>{tr("LLM tokens by model")}</h2>
            <table class="table" data-testid="llm-by-model">
                <thead><tr><th>{tr("Model")}</th><th>{tr("Calls")}</th><th>{tr("Failed")}</th><th>{tr("Tokens in")}</th><th>{tr("Tokens out")}</th></tr></thead>
                <tbody>{llm_rows}</tbody>
            </table>
        </section>
        {limits_form}
    }
    .into_any()
}

/// What a write past a memory limit does, as the form offers it.
const MEMORY_POLICIES: [&str; 3] = ["refuse", "evict_oldest", "evict_least_important"];

/// A memory policy as the form names it, in the page's language.
fn memory_policy_label(policy: &str) -> &'static str {
    match policy {
        "refuse" => tr("Refuse the write (409)"),
        "evict_oldest" => tr("Evict the oldest memories"),
        _ => tr("Evict the least important memories"),
    }
}

/// A cost breakdown's heading in the page's language.
fn breakdown_title(by: &str) -> &'static str {
    match by {
        "key" => tr("Keys"),
        "end_user" => tr("End-users"),
        "agent" => tr("Agents"),
        _ => tr("Channels"),
    }
}

fn limits_form(form: SpendLimitsForm, can_edit: bool, save: ServerAction<SaveLimits>) -> AnyView {
    let field =
        move |name: &'static str, label: &'static str, value: String, placeholder: &'static str| {
            view! {
                <label>
                    <span>{label}</span>
                    <input
                        name=name
                        value=value
                        placeholder=placeholder
                        disabled=!can_edit
                        data-testid=format!("limits-{name}")
                    />
                </label>
            }
        };
    view! {
        <section class="card">
            <h2>{tr("Budget and limits")}</h2>
            {(!can_edit).then(|| view! {
                <p class="muted" data-testid="limits-read-only">{tr("Only owners and admins can change these.")}</p>
            })}
            <ActionForm action=save attr:class="stack" attr:data-testid="limits-form">
                <input type="hidden" name="project_id" value=form.project_id.clone() />
                {field("budget_amount", tr("Monthly budget (empty: none)"), form.budget_amount, "250.00")}
                {field("currency", tr("Currency"), form.currency, "USD")}
                {field("alert_thresholds", tr("Alert at (% of the budget)"), form.alert_thresholds, "80, 100")}
                <label class="checkbox">
                    <input type="checkbox" name="hard_cap" checked=form.hard_cap disabled=!can_edit data-testid="limits-hard_cap" />
                    <span>{tr("Hard cap: refuse requests (402) once the budget is spent")}</span>
                </label>
                {field("requests_per_minute", tr("Requests per minute (project)"), form.requests_per_minute, tr("no limit"))}
                {field("quota_memories_written", tr("Memories written per month"), form.quota_memories_written, tr("no quota"))}
                {field("quota_searches", tr("Searches per month"), form.quota_searches, tr("no quota"))}
                {field("quota_tokens_embedded", tr("Tokens embedded per month"), form.quota_tokens_embedded, tr("no quota"))}
                {field("quota_file_bytes", tr("File bytes ingested per month"), form.quota_file_bytes, tr("no quota"))}
                {field("recall_max_results", tr("Recall budget: most memories per search"), form.recall_max_results, tr("no limit"))}
                {field("recall_max_tokens", tr("Recall budget: most tokens per search"), form.recall_max_tokens, tr("no limit"))}
                {field("memory_per_end_user", tr("Most memories per end-user"), form.memory_per_end_user, tr("no limit"))}
                {field("memory_per_agent", tr("Most memories per agent"), form.memory_per_agent, tr("no limit"))}
                <label>
                    <span>{tr("Past a memory limit")}</span>
                    <select name="memory_policy" disabled=!can_edit data-testid="limits-memory_policy">
                        {MEMORY_POLICIES.iter().map(|value| view! {
                            <option value=*value selected=form.memory_policy == *value>{memory_policy_label(value)}</option>
                        }).collect::<Vec<_>>()}
                    </select>
                </label>
                {can_edit.then(|| view! { <button type="submit" data-testid="limits-save">{tr("Save limits")}</button> })}
            </ActionForm>
        </section>
    }
    .into_any()
}
