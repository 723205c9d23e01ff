//! The organization's monthly statement (owners, admins, analysts): each unit at the prices
//! in effect, totals, every project's budget and alerts, and who the cost came from — by
//! project, key, end-user, agent and channel — with a CSV download and a printable page.

use crate::api::load_organization_statement;
use crate::charts::{group_digits, money_text};
use crate::model::{ConsoleError, StatementPage};
use crate::topbar::TopBar;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::{components::Redirect, hooks::use_query_map};

/// The breakdowns in the order the page shows them, with their headings.
const BREAKDOWNS: [(&str, &str); 5] = [
    ("project", "By project"),
    ("key", "By key"),
    ("end_user", "By end-user"),
    ("agent", "By agent"),
    ("channel", "By channel"),
];

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
        <Title text="Statements · Engram console" />
        <TopBar current="/console/statements" />
        <main class="content">
            <h1>"Monthly statement"</h1>
            <Transition fallback=|| view! { <p class="muted">"Loading the statement…"</p> }>{body}</Transition>
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
                    "Your role (" {role} ") cannot see statements."
                </p>
            }
            .into_any();
        }
        Err(error) => {
            return view! { <p class="error" role="alert" data-testid="statement-error">{error.to_string()}</p> }
                .into_any();
        }
    };
    let shown_month = statement.month.clone();
    let months = statement
        .months
        .iter()
        .map(|offered| {
            let selected = *offered == shown_month;
            view! { <option value=offered.clone() selected=selected>{offered.clone()}</option> }
        })
        .collect_view();
    let status = if statement.provisional {
        format!(
            "Provisional: the month is still open and these figures can change until it closes at {}.",
            statement.closes_at
        )
    } else {
        format!(
            "Closed at {}: this statement was stored on {} and never changes (an erased end-user is shown by digest).",
            statement.closes_at, statement.generated_at
        )
    };
    let lines = if statement.lines.is_empty() {
        view! { <tr><td colspan="5" class="muted">"Nothing was used this month."</td></tr> }
            .into_any()
    } else {
        statement
            .lines
            .iter()
            .map(|line| {
                let currency = line.currency.clone().unwrap_or_default();
                let price = match &line.unit_price {
                    Some(price) => money_text(price, &currency),
                    None => "no price".to_string(),
                };
                let from = line.price_from.clone().unwrap_or_default();
                let default_note = line.default_price.then_some(" (default price)");
                view! {
                    <tr data-testid="statement-line" data-unit=line.unit.clone() data-cost=line.cost.clone()>
                        <td>{line.unit.replace('_', " ")}</td>
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
                    <th colspan="4">"Total"</th>
                    <th class="amount">{money_text(total, currency)}</th>
                </tr>
            }
        })
        .collect_view();
    let budgets = if statement.budgets.is_empty() {
        view! { <p class="muted">"No project has a monthly budget."</p> }.into_any()
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
                    .map(|(threshold, at)| format!("{threshold} % at {at}"))
                    .collect::<Vec<_>>()
                    .join("; ");
                view! {
                    <tr data-testid="statement-budget">
                        <td>{budget.project.clone()}</td>
                        <td class="amount">{money_text(&budget.amount, &budget.currency)}{budget.hard_cap.then_some(" (hard cap)")}</td>
                        <td class="amount">{money_text(&budget.spent, &budget.currency)}</td>
                        <td class="amount">{used}</td>
                        <td>{alerts}</td>
                    </tr>
                }
            })
            .collect_view();
        view! {
            <table class="table" data-testid="statement-budgets">
                <thead><tr><th>"Project"</th><th>"Budget"</th><th>"Spent"</th><th>"Used"</th><th>"Alerts"</th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
        }
        .into_any()
    };
    let breakdowns = BREAKDOWNS
        .iter()
        .map(|(by, heading)| {
            let rows: Vec<_> = statement
                .breakdowns
                .iter()
                .filter(|row| row.by == *by)
                .collect();
            let body = if rows.is_empty() {
                view! { <tr><td colspan="4" class="muted">"Nothing this month."</td></tr> }.into_any()
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
                                <td>{row.label.clone()}</td>
                                <td>{row.project.clone()}</td>
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
                    <h2>{*heading}</h2>
                    <table class="table">
                        <thead><tr><th>"Who"</th><th>"Project"</th><th class="amount">"Cost"</th><th>"Used"</th></tr></thead>
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
                <span>"Month"</span>
                <select
                    name="month"
                    data-testid="statement-month"
                    on:change=move |ev| month.set(Some(event_target_value(&ev)))
                >
                    {months}
                </select>
            </label>
            <a href=csv_href download=format!("statement-{shown_month}.csv") data-testid="statement-csv">"Download CSV"</a>
            <button type="button" class="ghost" data-testid="statement-print" onclick="window.print()">"Print"</button>
        </form>
        <section class="card" data-testid="statement" data-month=statement.month.clone()
            data-provisional=statement.provisional.to_string()>
            <h2>{format!("{} · {}", statement.organization, statement.month)}</h2>
            <p class=if statement.provisional { "warning" } else { "notice" } data-testid="statement-status">{status}</p>
            <table class="table" data-testid="statement-lines">
                <thead><tr><th>"Unit"</th><th class="amount">"Quantity"</th><th class="amount">"Price per unit"</th><th>"Price since"</th><th class="amount">"Cost"</th></tr></thead>
                <tbody>{lines}</tbody>
                <tfoot>{totals}</tfoot>
            </table>
        </section>
        <section class="card">
            <h2>"Budgets"</h2>
            {budgets}
        </section>
        {breakdowns}
    }
    .into_any()
}

/// A unit's name for `quantity` of it: `1 search`, `3 searches`, `1 memory written`.
fn unit_name(unit: &str, quantity: i64) -> String {
    let name = unit.replace('_', " ");
    if quantity != 1 {
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
