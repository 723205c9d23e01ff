//! The price book page (owners, admins, analysts): every unit's price today with where it
//! comes from, the prices scheduled, and — for owners and admins — a form to add the
//! organization's own price from today or a later day, and withdrawal of scheduled ones.

use crate::api::{AddOrganizationPrice, WithdrawOrganizationPrice, load_price_book};
use crate::charts::money_text;
use crate::confirm::Confirm;
use crate::i18n::{format_day, tr, trf, unit_label};
use crate::model::role_name;
use crate::model::{ConsoleError, PriceBook, PriceRow};
use crate::topbar::TopBar;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::components::Redirect;

#[component]
pub fn PricesPage() -> impl IntoView {
    let add = ServerAction::<AddOrganizationPrice>::new();
    let withdraw = ServerAction::<WithdrawOrganizationPrice>::new();
    let book = Resource::new(
        move || (add.version().get(), withdraw.version().get()),
        |_| load_price_book(),
    );
    let last_done = RwSignal::new(None::<&'static str>);
    Effect::new(move |_| {
        if let Some(Ok(_)) = add.value().get() {
            last_done.set(Some(tr(
                "The price was added; it applies from its first day and never re-prices a day before it.",
            )));
        }
    });
    Effect::new(move |_| {
        if let Some(Ok(())) = withdraw.value().get() {
            last_done.set(Some(tr("The scheduled price was withdrawn.")));
        }
    });
    // A refusal replaces the report of what an earlier action did.
    Effect::new(move |_| {
        if matches!(add.value().get(), Some(Err(_)))
            || matches!(withdraw.value().get(), Some(Err(_)))
        {
            last_done.set(None);
        }
    });
    let done = move || {
        last_done.get().map(
            |text| view! { <p class="notice" role="status" data-testid="prices-done">{text}</p> },
        )
    };
    let action_error = move || {
        [
            add.value().get().and_then(Result::err),
            withdraw.value().get().and_then(Result::err),
        ]
        .into_iter()
        .flatten()
        .next()
        .map(|error| {
            view! { <p class="error" role="alert" data-testid="prices-error">{error.localized()}</p> }
        })
    };
    let body = move || Suspend::new(async move { prices_view(book.await, add, withdraw) });
    view! {
        <Title text=tr("Prices · Engram console") />
        <TopBar current="/console/prices" />
        <main class="content">
            <h1>{tr("Prices")}</h1>
            <p class="muted">
                {tr("What each unit costs this organization: its own price where it set one, else the deployment's, else Engram's default book. Costs, budgets and statements use the price in effect on each day; a new price starts today or later, so no day that is over is ever re-priced.")}
            </p>
            {action_error}
            {done}
            <Transition fallback=|| view! { <p class="muted">{tr("Loading prices…")}</p> }>{body}</Transition>
        </main>
    }
}

fn prices_view(
    book: Result<PriceBook, ConsoleError>,
    add: ServerAction<AddOrganizationPrice>,
    withdraw: ServerAction<WithdrawOrganizationPrice>,
) -> AnyView {
    let book = match book {
        Ok(book) => book,
        Err(ConsoleError::Unauthorized) => {
            return view! { <Redirect path="/console/login" /> }.into_any();
        }
        Err(ConsoleError::Forbidden { role }) => {
            return view! {
                <p class="notice" data-testid="prices-forbidden">
                    {trf("Your role ({}) cannot see prices.", &[&role_name(&role)])}
                </p>
            }
            .into_any();
        }
        Err(error) => {
            return view! { <p class="error" role="alert">{error.localized()}</p> }.into_any();
        }
    };
    let can_edit = book.can_edit;
    let rows = book
        .units
        .iter()
        .map(|unit| {
            let current = match &unit.current {
                Some(price) => view! {
                    <td class="amount" data-testid="price-current">{money_text(&price.unit_price, &price.currency)}</td>
                    <td>{source_label(&price.source)}</td>
                    <td>{format_day(&price.effective_from)}</td>
                }
                .into_any(),
                None => view! { <td class="muted" colspan="3">{tr("No price: this unit costs nothing")}</td> }
                    .into_any(),
            };
            let scheduled = unit
                .scheduled
                .iter()
                .map(|price| scheduled_item(price, can_edit, withdraw))
                .collect_view();
            view! {
                <tr data-testid=format!("price-{}", unit.unit)>
                    <td>{unit_label(&unit.unit)}</td>
                    {current}
                    <td><ul class="plain">{scheduled}</ul></td>
                </tr>
            }
        })
        .collect_view();
    let form = can_edit.then(|| {
        let units = book.units.iter().map(|unit| {
            view! { <option value=unit.unit.clone()>{unit_label(&unit.unit)}</option> }
        });
        let units = units.collect_view();
        let today = book.today.clone();
        view! {
            <section class="card">
                <h2>{tr("Add a price of ")}<span translate="no">{book.organization.clone()}</span></h2>
                <ActionForm action=add attr:class="filters" attr:data-testid="price-form">
                    <label>
                        <span>{tr("Unit")}</span>
                        <select name="unit" data-testid="price-unit">{units}</select>
                    </label>
                    <label>
                        <span>{tr("Price")}</span>
                        <input name="price" required inputmode="decimal" placeholder="0.02" data-testid="price-amount" />
                    </label>
                    <label>
                        <span>{tr("Per")}</span>
                        <select name="per" data-testid="price-per">
                            <option value="1">{tr("unit")}</option>
                            <option value="1000">{tr("1,000 units")}</option>
                            <option value="1000000">{tr("1,000,000 units")}</option>
                        </select>
                    </label>
                    <label>
                        <span>{tr("Currency")}</span>
                        <input name="currency" value="USD" maxlength="3" size="4" data-testid="price-currency" />
                    </label>
                    <label>
                        <span>{tr("From")}</span>
                        <input type="date" name="effective_from" min=today.clone() value=today data-testid="price-from" />
                    </label>
                    <button type="submit" data-testid="price-submit">{tr("Add price")}</button>
                </ActionForm>
                <p class="muted">
                    {tr("Token prices are usually quoted per million tokens: choose “1,000,000 units”. Prices are exact to a trillionth of the currency per unit.")}
                </p>
            </section>
        }
    });
    view! {
        {form}
        <div class="table-wrap">
            <table class="table" data-testid="price-table">
                <thead>
                    <tr>
                        <th>{tr("Unit")}</th>
                        <th>{tr("Price per unit today")}</th>
                        <th>{tr("Set by")}</th>
                        <th>{tr("Since")}</th>
                        <th>{tr("Scheduled")}</th>
                    </tr>
                </thead>
                <tbody>{rows}</tbody>
            </table>
        </div>
    }
    .into_any()
}

fn source_label(source: &str) -> &'static str {
    match source {
        "organization" => tr("this organization"),
        "deployment" => tr("the deployment's operator"),
        _ => tr("Engram's default (placeholder)"),
    }
}

fn scheduled_item(
    price: &PriceRow,
    can_edit: bool,
    withdraw: ServerAction<WithdrawOrganizationPrice>,
) -> impl IntoView + use<> {
    let text = trf(
        "{} from {} ({})",
        &[
            &money_text(&price.unit_price, &price.currency),
            &format_day(&price.effective_from),
            &source_label(&price.source),
        ],
    );
    let withdrawable = can_edit && price.source == "organization";
    let text_again = text.clone();
    let price_id = price.id.clone();
    view! {
        <li data-testid="price-scheduled" data-id=price.id.clone()>
            {text}
            {withdrawable.then(|| {
                view! {
                    <Confirm
                        label=tr("Withdraw…")
                        question=trf("Withdraw {}? It has not priced any day yet.", &[&text_again])
                        test_id="price-withdraw-ask"
                    >
                        <ActionForm action=withdraw attr:class="inline">
                            <input type="hidden" name="price_id" value=price_id.clone() />
                            <button type="submit" class="danger" data-testid="price-withdraw">{tr("Withdraw the price")}</button>
                        </ActionForm>
                    </Confirm>
                }
            })}
        </li>
    }
}
