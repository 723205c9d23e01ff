//! The console's price book and the organization's monthly statement: the engine's price
//! and statement use cases, turned into the pages' rows (key labels, project names).

use super::{GatewayConsoleBackend, member_error, readable_time};
use engram_console::model::{
    NewPriceForm, PriceBook, PriceRow, StatementBreakdownRow, StatementBudgetRow, StatementLineRow,
    StatementPage, UnitPrices,
};
use engram_console::{ConsoleCaller, ConsoleError};
use engram_core::statements::Statement;
use engram_core::usage::{BillingMonth, Picos};
use engram_engine::{NewPriceRequest, PriceBookEntry};
use std::collections::BTreeMap;

/// A breakdown row of the page: (by, project name, label, currency).
type BreakdownRowKey = (String, String, String, Option<String>);

/// How many months back the statement page offers.
const MONTHS_OFFERED: usize = 24;

impl GatewayConsoleBackend {
    pub(super) async fn build_price_book(
        &self,
        caller: &ConsoleCaller,
    ) -> Result<PriceBook, ConsoleError> {
        let member = self.member_for(caller).await?;
        let units = self
            .access
            .price_book_for(&member)
            .await
            .map_err(|error| member_error(&member, error))?;
        let organization = self
            .access
            .organization_name(&member)
            .await
            .map_err(|error| member_error(&member, error))?;
        let row = |entry: PriceBookEntry| PriceRow {
            id: entry.id,
            currency: entry.currency,
            unit_price: entry.unit_price.decimal(),
            effective_from: entry.effective_from.to_string(),
            source: entry.source.to_string(),
        };
        Ok(PriceBook {
            organization,
            today: chrono::Utc::now().date_naive().to_string(),
            units: units
                .into_iter()
                .map(|unit| UnitPrices {
                    unit: unit.unit.as_str().to_string(),
                    current: unit.current.map(row),
                    scheduled: unit.scheduled.into_iter().map(row).collect(),
                })
                .collect(),
            can_edit: member.may(engram_core::Operation::AddOrganizationPrice),
        })
    }

    pub(super) async fn add_price(
        &self,
        caller: &ConsoleCaller,
        form: NewPriceForm,
    ) -> Result<String, ConsoleError> {
        let member = self.member_for(caller).await?;
        let per = match form.per.trim() {
            "" => None,
            text => Some(text.parse::<u64>().map_err(|_| {
                ConsoleError::InvalidInput("per: must be 1, 1000 or 1000000".to_string())
            })?),
        };
        let effective_from = match form.effective_from.trim() {
            "" => None,
            text => Some(
                chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").map_err(|_| {
                    ConsoleError::InvalidInput(
                        "effective_from: must be a day as YYYY-MM-DD".to_string(),
                    )
                })?,
            ),
        };
        self.access
            .add_organization_price_for(
                &member,
                NewPriceRequest {
                    unit: form.unit,
                    price: form.price,
                    per,
                    currency: form.currency,
                    effective_from,
                },
            )
            .await
            .map_err(|error| member_error(&member, error))
    }

    pub(super) async fn withdraw_price(
        &self,
        caller: &ConsoleCaller,
        price_id: &str,
    ) -> Result<(), ConsoleError> {
        let member = self.member_for(caller).await?;
        self.access
            .withdraw_organization_price_for(&member, price_id)
            .await
            .map_err(|error| member_error(&member, error))
    }

    /// The organization's statement of `month` (empty: this month), as the engine gives it.
    pub(super) async fn statement(
        &self,
        caller: &ConsoleCaller,
        month: &str,
    ) -> Result<Statement, ConsoleError> {
        let member = self.member_for(caller).await?;
        self.statement_of(&member, month).await
    }

    async fn statement_of(
        &self,
        member: &engram_engine::ConsoleMember,
        month: &str,
    ) -> Result<Statement, ConsoleError> {
        let month = if month.trim().is_empty() {
            BillingMonth::containing(chrono::Utc::now()).label()
        } else {
            month.trim().to_string()
        };
        self.access
            .organization_statement_for(member, &month)
            .await
            .map_err(|error| member_error(member, error))
    }

    pub(super) async fn statement_page(
        &self,
        caller: &ConsoleCaller,
        month: &str,
    ) -> Result<StatementPage, ConsoleError> {
        // The session is checked once; each project is opened as this member.
        let member = self.member_for(caller).await?;
        let statement = self.statement_of(&member, month).await?;
        let projects: BTreeMap<String, String> = self
            .access
            .organization_projects(&member)
            .await
            .map_err(|error| member_error(&member, error))?
            .into_iter()
            .map(|project| (project.id.to_string(), project.name))
            .collect();
        let project_name = |id: Option<&str>| {
            id.map(|id| projects.get(id).cloned().unwrap_or_else(|| id.to_string()))
                .unwrap_or_default()
        };
        // Keys by label where the member may list them, in every project.
        let mut key_labels: BTreeMap<String, String> = BTreeMap::new();
        if let Ok(engine) = self.engine()
            && member.may(engram_core::Operation::ListApiKeys)
        {
            for project_id in projects.keys() {
                if let Ok(principal) = self.access.principal_in_project(&member, project_id).await
                    && let Ok(keys) = engine.list_api_keys_for(&principal).await
                {
                    for key in keys {
                        key_labels.insert(format!("key:{}", key.id), key.label);
                    }
                }
            }
        }
        // One row per value of a breakdown (and project), all units together.
        let mut rows: BTreeMap<BreakdownRowKey, (Picos, Vec<(String, i64)>)> = BTreeMap::new();
        for line in &statement.breakdowns {
            let label = match (&line.value, &line.erased_subject) {
                (_, Some(digest)) => format!("erased {}", short(digest)),
                (Some(value), None) if line.by == "project" => project_name(Some(value)),
                (Some(value), None) => key_labels
                    .get(value)
                    .cloned()
                    .unwrap_or_else(|| value.clone()),
                (None, None) => "(none)".to_string(),
            };
            let project = if line.by == "project" {
                String::new()
            } else {
                project_name(line.project_id.as_deref())
            };
            let row = rows
                .entry((line.by.clone(), project, label, line.currency.clone()))
                .or_default();
            row.0 += line.cost;
            if line.quantity != 0 {
                row.1.push((line.unit.clone(), line.quantity));
            }
        }
        let mut breakdowns: Vec<StatementBreakdownRow> = rows
            .into_iter()
            .map(
                |((by, project, label, currency), (cost, quantities))| StatementBreakdownRow {
                    by,
                    project,
                    label,
                    currency,
                    cost: cost.decimal(),
                    quantities,
                },
            )
            .collect();
        breakdowns.sort_by(|a, b| {
            a.by.cmp(&b.by)
                .then(
                    Picos::parse(&b.cost)
                        .unwrap_or_default()
                        .cmp(&Picos::parse(&a.cost).unwrap_or_default()),
                )
                .then(a.label.cmp(&b.label))
        });
        let mut months = Vec::with_capacity(MONTHS_OFFERED);
        let mut offered = BillingMonth::containing(chrono::Utc::now());
        for _ in 0..MONTHS_OFFERED {
            months.push(offered.label());
            offered = offered.previous();
        }
        Ok(StatementPage {
            month: statement.month,
            organization: statement.organization.name,
            provisional: statement.provisional,
            closes_at: readable_time(statement.closes_at),
            generated_at: readable_time(statement.generated_at),
            lines: statement
                .lines
                .into_iter()
                .map(|line| StatementLineRow {
                    unit: line.unit,
                    quantity: line.quantity,
                    currency: line.currency,
                    unit_price: line.unit_price.map(Picos::decimal),
                    price_from: line.price_from.map(|day| day.to_string()),
                    default_price: line.default_price,
                    cost: line.cost.decimal(),
                })
                .collect(),
            totals: statement
                .totals
                .into_iter()
                .map(|total| (total.currency, total.cost.decimal()))
                .collect(),
            budgets: statement
                .budgets
                .into_iter()
                .map(|budget| StatementBudgetRow {
                    project: project_name(Some(&budget.project_id)),
                    currency: budget.currency,
                    amount: budget.amount.decimal(),
                    spent: budget.spent.decimal(),
                    percent_used: budget.percent_used,
                    hard_cap: budget.hard_cap == Some(true),
                    alerts: budget
                        .alerts
                        .into_iter()
                        .map(|alert| (alert.threshold_percent, readable_time(alert.reached_at)))
                        .collect(),
                })
                .collect(),
            breakdowns,
            months,
        })
    }
}

/// The first twelve characters of a digest: enough to tell subjects apart on a page.
fn short(digest: &str) -> String {
    digest.chars().take(12).collect()
}
