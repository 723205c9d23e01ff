//! A project's monthly statement (`GET /v1/statements/{month}`): the month's units at the
//! prices in effect, totals, budget and alerts, and the breakdowns — computed while the
//! month is open, stored when it closes and read back as stored ever after.

use crate::{EngineError, MemoryEngine};
use chrono::{DateTime, Utc};
use engram_core::statements::{
    Statement, StatementAlert, StatementBudget, StatementParty, closes_at, parse_statement_month,
    statement_breakdown, statement_lines, statement_totals,
};
use engram_core::usage::{BillingMonth, Picos};
use engram_core::{FieldError, InvalidInput, NotFoundKind, Operation, Principal, ProjectScope};
use engram_storage::Storage;
use engram_storage::statements::StatementOf;

impl MemoryEngine {
    /// The project's statement of `month` (`YYYY-MM`): provisional until an hour after the
    /// month ends, then the stored one.
    pub async fn statement_for(
        &self,
        principal: &Principal,
        month: &str,
    ) -> Result<Statement, EngineError> {
        principal.authorize(Operation::GetStatement)?;
        let now = Utc::now();
        let month = statement_month(month, now)?;
        project_statement(&self.storage, principal.scope(), month, now).await
    }
}

/// `YYYY-MM`, a month that has begun (from 1970 on): else a 422 naming `month`.
pub(crate) fn statement_month(text: &str, now: DateTime<Utc>) -> Result<BillingMonth, EngineError> {
    let refuse = |message: &str| -> EngineError {
        InvalidInput(vec![FieldError::new("month", message)]).into()
    };
    let Some(month) = parse_statement_month(text.trim()) else {
        return Err(refuse("must be a month as YYYY-MM, e.g. 2026-11"));
    };
    if month.starts_at() > now {
        return Err(refuse(
            "has not begun: a statement covers a past or the current month",
        ));
    }
    if engram_core::validation::check_report_day("month", month.starts_at().date_naive()).is_err() {
        return Err(refuse("must be 1970-01 or later"));
    }
    Ok(month)
}

/// Store `scope`'s statement of the latest month closed by `now`, unless stored already;
/// whether it was stored now.
pub(crate) async fn close_latest_month(
    storage: &Storage,
    scope: &ProjectScope,
    now: DateTime<Utc>,
) -> Result<bool, EngineError> {
    let mut month = BillingMonth::containing(now).previous();
    if now < closes_at(month) {
        month = month.previous();
    }
    if storage
        .stored_statement(StatementOf::Project(scope), month)
        .await?
        .is_some()
    {
        return Ok(false);
    }
    project_statement(storage, scope, month, now).await?;
    Ok(true)
}

/// `scope`'s statement of `month` as of `now`: the stored one once the month closed (stored
/// by the first read after closing, when none was), else computed.
pub(crate) async fn project_statement(
    storage: &Storage,
    scope: &ProjectScope,
    month: BillingMonth,
    now: DateTime<Utc>,
) -> Result<Statement, EngineError> {
    let closes_at = closes_at(month);
    let closed = now >= closes_at;
    if closed
        && let Some(stored) = storage
            .stored_statement(StatementOf::Project(scope), month)
            .await?
    {
        return Ok(stored);
    }
    let (from, to) = (month.starts_at(), month.resets_at());
    let (costs, _) = storage.costs_with_price_book(scope, from, to).await?;
    let lines = statement_lines(&costs);
    let totals = statement_totals(&lines);
    let mut breakdowns = Vec::new();
    for by in engram_core::usage::UsageBreakdown::ALL {
        let rows = storage.costs_breakdown(scope, from, to, by).await?;
        breakdowns.extend(statement_breakdown(by.as_str(), &rows, None));
    }
    let project_id = scope.project_id().to_string();
    let budget = match storage.spend_limits(scope).await?.monthly_budget {
        Some(budget) => {
            let spent: Picos = totals
                .iter()
                .filter(|total| total.currency == budget.currency)
                .map(|total| total.cost)
                .sum();
            let alerts = storage.budget_alerts(scope, month).await?;
            let amount = Picos::from_micros(budget.amount_micros);
            Some(StatementBudget {
                project_id: project_id.clone(),
                currency: budget.currency,
                amount,
                hard_cap: budget.hard_cap,
                spent,
                percent_used: (amount.0 > 0)
                    .then(|| u64::try_from(spent.0 * 100 / amount.0).unwrap_or(0)),
                alerts: alerts
                    .into_iter()
                    .map(|alert| StatementAlert {
                        threshold_percent: alert.threshold_percent,
                        reached_at: alert.reached_at,
                    })
                    .collect(),
            })
        }
        None => None,
    };
    let organization_name = storage
        .organization_name(scope.organization_id())
        .await?
        .ok_or(EngineError::NotFound(NotFoundKind::Organization))?;
    let project_name = storage
        .list_projects(scope.organization_id())
        .await?
        .into_iter()
        .find(|project| project.id == scope.project_id())
        .map(|project| project.name)
        .ok_or(EngineError::NotFound(NotFoundKind::Project))?;
    let statement = Statement {
        month: month.label(),
        organization: StatementParty {
            id: scope.organization_id().to_string(),
            name: organization_name,
        },
        project: Some(StatementParty {
            id: project_id,
            name: project_name,
        }),
        provisional: !closed,
        closes_at,
        generated_at: now,
        lines,
        totals,
        budgets: budget.into_iter().collect(),
        breakdowns,
    };
    if !closed {
        return Ok(statement);
    }
    Ok(storage
        .store_statement(StatementOf::Project(scope), month, &statement, now)
        .await?)
}
