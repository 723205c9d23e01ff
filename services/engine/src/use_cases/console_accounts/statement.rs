//! The organization's monthly statement in the console: every project's statement added up,
//! by project as well as by key, end-user, agent and channel; stored once the month closes.

use super::{ConsoleAccess, ConsoleMember};
use crate::EngineError;
use crate::use_cases::usage::statement::{
    erased_while_computed, project_statement, statement_month,
};
use chrono::Utc;
use engram_core::statements::{
    Statement, StatementBreakdownLine, StatementLine, StatementParty, closes_at, statement_totals,
};
use engram_core::usage::{BillingMonth, Picos};
use engram_core::{NotFoundKind, Operation, ProjectScope};
use engram_storage::statements::StatementOf;
use std::collections::BTreeMap;

impl ConsoleAccess {
    /// The statement of `month` (`YYYY-MM`) for the member's whole organization.
    pub async fn organization_statement_for(
        &self,
        member: &ConsoleMember,
        month: &str,
    ) -> Result<Statement, EngineError> {
        member.authorize(Operation::GetOrganizationStatement)?;
        let now = Utc::now();
        let month = statement_month(month, now)?;
        let of = StatementOf::Organization(member.organization_id());
        let closed = now >= closes_at(month);
        if closed && let Some(stored) = self.storage.stored_statement(of, month).await? {
            return Ok(stored);
        }
        let (statement, scopes) = self
            .compute_organization_statement(member, month, now)
            .await?;
        if !closed {
            return Ok(statement);
        }
        let stored = self
            .storage
            .store_statement(of, month, &statement, now)
            .await?;
        let checked: Vec<(&ProjectScope, &Statement)> =
            scopes.iter().map(|scope| (scope, &stored)).collect();
        if !erased_while_computed(&self.storage, &checked, month).await? {
            return Ok(stored);
        }
        // Computed again from the projects' statements, which now name the digest.
        let (corrected, _) = self
            .compute_organization_statement(member, month, stored.generated_at)
            .await?;
        self.storage
            .replace_stored_statement(of, month, &corrected)
            .await?;
        Ok(corrected)
    }

    /// The organization's statement of `month` as of `now`, from every project's, and the
    /// projects' scopes.
    async fn compute_organization_statement(
        &self,
        member: &ConsoleMember,
        month: BillingMonth,
        now: chrono::DateTime<Utc>,
    ) -> Result<(Statement, Vec<ProjectScope>), EngineError> {
        let organization_id = member.organization_id();
        let closes_at = closes_at(month);
        let closed = now >= closes_at;
        let mut scopes = Vec::new();
        let mut line_sums: BTreeMap<LineKey, (i64, Picos)> = BTreeMap::new();
        let mut per_project: BTreeMap<(String, String, Option<String>), (i64, Picos)> =
            BTreeMap::new();
        let mut budgets = Vec::new();
        let mut breakdowns = Vec::new();
        for project in self.storage.list_projects(organization_id).await? {
            let Some(scope) = self
                .storage
                .project_scope_for_console_account(&member.account, project.id)
                .await?
            else {
                continue;
            };
            let statement = project_statement(&self.storage, &scope, month, now).await?;
            scopes.push(scope);
            let project_id = project.id.to_string();
            for line in statement.lines {
                let sums = line_sums.entry(line_key(&line)).or_default();
                sums.0 = sums.0.saturating_add(line.quantity);
                sums.1 += line.cost;
                let sums = per_project
                    .entry((project_id.clone(), line.unit.clone(), line.currency.clone()))
                    .or_default();
                sums.0 = sums.0.saturating_add(line.quantity);
                sums.1 += line.cost;
            }
            budgets.extend(statement.budgets);
            breakdowns.extend(statement.breakdowns.into_iter().map(|mut line| {
                line.project_id = Some(project_id.clone());
                line
            }));
        }
        let lines: Vec<StatementLine> = line_sums
            .into_iter()
            .map(
                |((unit, currency, unit_price, price_from, default_price), (quantity, cost))| {
                    StatementLine {
                        unit,
                        quantity,
                        currency,
                        unit_price,
                        price_from,
                        default_price,
                        cost,
                        cost_micros: cost.micros(),
                    }
                },
            )
            .collect();
        let mut project_lines: Vec<StatementBreakdownLine> = per_project
            .into_iter()
            .map(
                |((project_id, unit, currency), (quantity, cost))| StatementBreakdownLine {
                    by: "project".to_string(),
                    value: Some(project_id.clone()),
                    erased_subject: None,
                    project_id: Some(project_id),
                    unit,
                    quantity,
                    currency,
                    cost,
                    cost_micros: cost.micros(),
                },
            )
            .collect();
        project_lines.extend(breakdowns);
        let organization_name = self
            .storage
            .organization_name(organization_id)
            .await?
            .ok_or(EngineError::NotFound(NotFoundKind::Organization))?;
        let statement = Statement {
            month: month.label(),
            organization: StatementParty {
                id: organization_id.to_string(),
                name: organization_name,
            },
            project: None,
            provisional: !closed,
            closes_at,
            generated_at: now,
            totals: statement_totals(&lines),
            lines,
            budgets,
            breakdowns: project_lines,
        };
        Ok((statement, scopes))
    }
}

type LineKey = (
    String,
    Option<String>,
    Option<Picos>,
    Option<chrono::NaiveDate>,
    bool,
);

fn line_key(line: &StatementLine) -> LineKey {
    (
        line.unit.clone(),
        line.currency.clone(),
        line.unit_price,
        line.price_from,
        line.default_price,
    )
}
