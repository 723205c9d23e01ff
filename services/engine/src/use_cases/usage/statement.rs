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

/// The project's budget as the statement of `month` shows it: the budget now for the open
/// month and the one that closed last (the closer stores it within an interval of closing);
/// for an older month — stored on its first read, long after — only what its alerts
/// recorded (amount and currency; whether it was a hard cap is not known), since budgets
/// keep no history.
async fn month_budget(
    storage: &Storage,
    scope: &ProjectScope,
    month: BillingMonth,
    now: DateTime<Utc>,
    totals: &[engram_core::statements::StatementTotal],
) -> Result<Option<StatementBudget>, EngineError> {
    let alerts = storage.budget_alerts(scope, month).await?;
    let recent = month >= latest_closed_month(now);
    let (amount_micros, currency, hard_cap) =
        match storage.spend_limits(scope).await?.monthly_budget {
            Some(budget) if recent => {
                (budget.amount_micros, budget.currency, Some(budget.hard_cap))
            }
            _ if recent => return Ok(None),
            _ => match alerts.first() {
                Some(alert) => (alert.budget_micros, alert.currency.clone(), None),
                None => return Ok(None),
            },
        };
    let spent: Picos = totals
        .iter()
        .filter(|total| total.currency == currency)
        .map(|total| total.cost)
        .sum();
    let amount = Picos::from_micros(amount_micros);
    Ok(Some(StatementBudget {
        project_id: scope.project_id().to_string(),
        currency,
        amount,
        hard_cap,
        spent,
        percent_used: (amount.0 > 0)
            .then(|| u64::try_from(spent.0.saturating_mul(100) / amount.0).unwrap_or(u64::MAX)),
        alerts: alerts
            .into_iter()
            .map(|alert| StatementAlert {
                threshold_percent: alert.threshold_percent,
                reached_at: alert.reached_at,
            })
            .collect(),
    }))
}

/// The latest month closed by `now`: the one the closer stores.
fn latest_closed_month(now: DateTime<Utc>) -> BillingMonth {
    let month = BillingMonth::containing(now).previous();
    if now < closes_at(month) {
        month.previous()
    } else {
        month
    }
}

/// Store `scope`'s statement of the latest month closed by `now`, unless stored already;
/// whether it was stored now.
pub(crate) async fn close_latest_month(
    storage: &Storage,
    scope: &ProjectScope,
    now: DateTime<Utc>,
) -> Result<bool, EngineError> {
    let month = latest_closed_month(now);
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
    let statement = compute_project_statement(storage, scope, month, now).await?;
    if !closed {
        return Ok(statement);
    }
    let stored = storage
        .store_statement(StatementOf::Project(scope), month, &statement, now)
        .await?;
    if !erased_while_computed(storage, &[(scope, &stored)], month).await? {
        return Ok(stored);
    }
    // The counters now name the digest: computed again, the statement does too.
    let corrected = compute_project_statement(storage, scope, month, stored.generated_at).await?;
    storage
        .replace_stored_statement(StatementOf::Project(scope), month, &corrected)
        .await?;
    Ok(corrected)
}

/// Whether an end-user a just-stored statement names has been erased meanwhile: the
/// statement was computed from counters naming them, and an erasure that renamed those
/// counters before the statement was stored found no statement to rename. (One that runs
/// after the store renames it itself.) Checked after storing, so one of the two always sees
/// the other.
pub(crate) async fn erased_while_computed(
    storage: &Storage,
    statements: &[(&ProjectScope, &Statement)],
    month: BillingMonth,
) -> Result<bool, EngineError> {
    for (scope, statement) in statements {
        let project_id = scope.project_id().to_string();
        // An end-user has a line per unit: each is looked up once.
        let named: std::collections::BTreeSet<&str> = statement.end_users_of(&project_id).collect();
        for user_id in named {
            if !storage
                .usage_names_end_user(scope, user_id, month.starts_at(), month.resets_at())
                .await?
            {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// `scope`'s statement of `month` from its counters and prices, as of `now`.
async fn compute_project_statement(
    storage: &Storage,
    scope: &ProjectScope,
    month: BillingMonth,
    now: DateTime<Utc>,
) -> Result<Statement, EngineError> {
    let closes_at = closes_at(month);
    let closed = now >= closes_at;
    let (from, to) = (month.starts_at(), month.resets_at());
    // One read of the daily counters: the lines and every breakdown are the same usage.
    let (costs, by_dimension) = storage.statement_costs(scope, from, to).await?;
    let lines = statement_lines(&costs);
    let totals = statement_totals(&lines);
    let mut breakdowns = Vec::new();
    for (by, rows) in by_dimension {
        breakdowns.extend(statement_breakdown(by.as_str(), &rows, None));
    }
    let project_id = scope.project_id().to_string();
    let budget = month_budget(storage, scope, month, now, &totals).await?;
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
    Ok(Statement {
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
    })
}
