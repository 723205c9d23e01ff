//! The organization's monthly statement (owners, admins, analysts): each unit at the prices
//! in effect, totals, every project's budget and alerts, and who the cost came from — by
//! project, key, end-user, agent and channel — with a CSV download and a printable page.

use crate::api::load_organization_statement;
use crate::charts::{group_digits, money_text};
use crate::i18n::{
    Language, breakdown_label, format_day, format_month, format_time, names_someone, tr, trf,
    unit_label,
};
use crate::model::role_name;
use crate::model::{ConsoleError, StatementPage};
use crate::topbar::TopBar;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::{components::Redirect, hooks::use_query_map};

/// The breakdowns in the order the page shows them.
const BREAKDOWNS: [&str; 5] = ["project", "key", "end_user", "agent", "channel"];

/// A breakdown's heading in the page's language.
fn breakdown_heading(by: &str) -> &'static str {
    match by {
        "project" => tr("By project"),
        "key" => tr("By key"),
        "end_user" => tr("By end-user"),
        "agent" => tr("By agent"),
        _ => tr("By channel"),
    }
}

#[component]
pub fn StatementsPage() -> impl IntoView {
    let initial_month = use_query_map()
        .get_untracked()
        .get("month")
        .filter(|month| !month.trim().is_empty());
    let month = RwSignal::new(initial_month);
    let statement = Resource::new(move || month.get(), load_organization_statement);
    let body = move || Suspend::new(async move { statement_view(statement.await, month) });
    view! {
        <Title text=tr("Statements · Engram console") />
        <TopBar current="/console/statements" />
        <main class="content">
            <h1>{tr("Monthly statement")}</h1>
            <Transition fallback=|| view! { <p class="muted">{tr("Loading the statement…")}</p> }>{body}</Transition>
        </main>
    }
}

fn statement_view(
    statement: Result<StatementPage, ConsoleError>,
    month: RwSignal<Option<String>>,
) -> AnyView {
    let statement = match statement {
        Ok(statement) => statement,
        Err(ConsoleError::Unauthorized) => {
            return view! { <Redirect path="/console/login" /> }.into_any();
        }
        Err(ConsoleError::Forbidden { role }) => {
            return view! {
                <p class="notice" data-testid="statement-forbidden">
                    {trf("Your role ({}) cannot see statements.", &[&role_name(&role)])}
                </p>
            }
            .into_any();
        }
        Err(error) => {
            return view! { <p class="error" role="alert" data-testid="statement-error">{error.localized()}</p> }
                .into_any();
        }
    };
    let shown_month = statement.month.clone();
    let months = statement
        .months
        .iter()
        .map(|offered| {
            let selected = *offered == shown_month;
            view! { <option value=offered.clone() selected=selected>{format_month(offered)}</option> }
        })
        .collect_view();
    let status = if statement.provisional {
        trf(
            "Provisional: the month is still open and these figures can change until it closes at {}.",
            &[&format_time(&statement.closes_at)],
        )
    } else {
        trf(
            "Closed at {}: this statement was stored on {} and never changes (an erased end-user is shown by digest).",
            &[
                &format_time(&statement.closes_at),
                &format_time(&statement.generated_at),
            ],
        )
    };
    let lines = if statement.lines.is_empty() {
        view! { <tr><td colspan="5" class="muted">{tr("Nothing was used this month.")}</td></tr> }
            .into_any()
    } else {
        statement
            .lines
            .iter()
            .map(|line| {
                let currency = line.currency.clone().unwrap_or_default();
                let price = match &line.unit_price {
                    Some(price) => money_text(price, &currency),
                    None => tr("no price").to_string(),
                };
                let from = line.price_from.as_deref().map(format_day).unwrap_or_default();
                let default_note = line.default_price.then(|| tr(" (default price)"));
                view! {
                    <tr data-testid="statement-line" data-unit=line.unit.clone() data-cost=line.cost.clone()>
                        <td>{unit_label(&line.unit)}</td>
                        <td class="amount">{group_digits(line.quantity)}</td>
                        <td class="amount">{price}{default_note}</td>
                        <td>{from}</td>
                        <td class="amount">{money_text(&line.cost, &currency)}</td>
                    </tr>
                }
            })
            .collect_view()
            .into_any()
    };
    let totals = statement
        .totals
        .iter()
        .map(|(currency, total)| {
            view! {
                <tr data-testid="statement-total" data-currency=currency.clone() data-total=total.clone()>
                    <th colspan="4">{tr("Total")}</th>
                    <th class="amount">{money_text(total, currency)}</th>
                </tr>
            }
        })
        .collect_view();
    let budgets = if statement.budgets.is_empty() {
        view! { <p class="muted">{tr("No project has a monthly budget.")}</p> }.into_any()
    } else {
        let rows = statement
            .budgets
            .iter()
            .map(|budget| {
                let used = budget
                    .percent_used
                    .map(|percent| format!("{percent} %"))
                    .unwrap_or_default();
                let alerts = budget
                    .alerts
                    .iter()
                    .map(|(threshold, at)| trf("{} % at {}", &[threshold, &format_time(at)]))
                    .collect::<Vec<_>>()
                    .join("; ");
                view! {
                    <tr data-testid="statement-budget">
                        <td translate="no">{budget.project.clone()}</td>
                        <td class="amount">{money_text(&budget.amount, &budget.currency)}{budget.hard_cap.then(|| tr(" (hard cap)"))}</td>
                        <td class="amount">{money_text(&budget.spent, &budget.currency)}</td>
                        <td class="amount">{used}</td>
                        <td>{alerts}</td>
                    </tr>
                }
            })
            .collect_view();
        view! {
            <table class="table" data-testid="statement-budgets">
                <thead><tr><th>{tr("Project")}</th><th>{tr("Budget")}</th><th>{tr("Spent")}</th><th>{tr("Used")}</th><th>{tr("Alerts")}</th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
        }
        .into_any()
    };
    let breakdowns = BREAKDOWNS
        .iter()
        .map(|by| {
            let rows: Vec<_> = statement
                .breakdowns
                .iter()
                .filter(|row| row.by == *by)
                .collect();
            let body = if rows.is_empty() {
                view! { <tr><td colspan="4" class="muted">{tr("Nothing this month.")}</td></tr> }.into_any()
            } else {
                rows.into_iter()
                    .map(|row| {
                        let currency = row.currency.clone().unwrap_or_default();
                        let used = row
                            .quantities
                            .iter()
                            .map(|(unit, quantity)| format!("{} {}", group_digits(*quantity), unit_name(unit, *quantity)))
                            .collect::<Vec<_>>()
                            .join(", ");
                        view! {
                            <tr data-testid="statement-breakdown" data-by=row.by.clone() data-label=row.label.clone() data-cost=row.cost.clone()>
                                <td translate=names_someone(&row.label).then_some("no")>{breakdown_label(&row.label)}</td>
                                <td translate="no">{row.project.clone()}</td>
                                <td class="amount">{money_text(&row.cost, &currency)}</td>
                                <td>{used}</td>
                            </tr>
                        }
                    })
                    .collect_view()
                    .into_any()
            };
            view! {
                <section class="card" data-testid=format!("statement-by-{by}")>
                    <h2>{breakdown_heading(by)}</h2>
                    <table class="table">
                        <thead><tr><th>{tr("Who")}</th><th>{tr("Project")}</th><th class="amount">{tr("Cost")}</th><th>{tr("Used")}</th></tr></thead>
                        <tbody>{body}</tbody>
                    </table>
                </section>
            }
        })
        .collect_view();
    let csv_href = format!("/console/statements/export.csv?month={shown_month}");
    view! {
        <form class="filters no-print" on:submit=|ev| ev.prevent_default()>
            <label>
                <span>{tr("Month")}</span>
                <select
                    name="month"
                    data-testid="statement-month"
                    on:change=move |ev| month.set(Some(event_target_value(&ev)))
                >
                    {months}
                </select>
            </label>
            <a href=csv_href download=format!("statement-{shown_month}.csv") data-testid="statement-csv">{tr("Download CSV")}</a>
            <button type="button" class="ghost" data-testid="statement-print" onclick="window.print()">{tr("Print")}</button>
        </form>
        <section class="card" data-testid="statement" data-month=statement.month.clone()
            data-provisional=statement.provisional.to_string()>
            <h2><span translate="no">{statement.organization.clone()}</span>" · "{format_month(&statement.month)}</h2>
            <p class=if statement.provisional { "warning" } else { "notice" } data-testid="statement-status">{status}</p>
            <table class="table" data-testid="statement-lines">
                <thead><tr><th>{tr("Unit")}</th><th class="amount">{tr("Quantity")}</th><th class="amount">{tr("Price per unit")}</th><th>{tr("Price since")}</th><th class="amount">{tr("Cost")}</th></tr></thead>
                <tbody>{lines}</tbody>
                <tfoot>{totals}</tfoot>
            </table>
        </section>
        <section class="card">
            <h2>{tr("Budgets")}</h2>
            {budgets}
        </section>
        {breakdowns}
    }
    .into_any()
}

/// A unit's name for `quantity` of it: `1 search`, `3 searches`, `1 memory written`.
fn unit_name(unit: &str, quantity: i64) -> String {
    let name = unit_label(unit);
    // Chinese has no plural: the label serves every quantity.
    if quantity != 1 || Language::current() == Language::Chinese {
        return name;
    }
    match unit {
        "searches" => "search".to_string(),
        "memories_written" => "memory written".to_string(),
        "memories_evicted" => "memory evicted".to_string(),
        "memory_days" => "memory-day".to_string(),
        other => other.replace('_', " ").trim_end_matches('s').to_string(),
    }
}
