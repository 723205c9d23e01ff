//! What a member sees of the organization as a whole: its name, its projects, and this
//! month's cost of each project (the usage page's ranking).

use super::{ConsoleAccess, ConsoleMember};
use crate::EngineError;
use engram_core::NotFoundKind;
use engram_core::Operation;
use engram_core::usage::BillingMonth;
use engram_storage::ProjectRecord;

/// One project's cost so far this month, in one currency.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProjectMonthCost {
    pub project: ProjectRecord,
    pub cost_micros: i64,
}

impl ConsoleAccess {
    /// The member's organization's name (every member may see it).
    pub async fn organization_name(&self, member: &ConsoleMember) -> Result<String, EngineError> {
        self.storage
            .organization_name(member.organization_id())
            .await?
            .ok_or(EngineError::NotFound(NotFoundKind::Organization))
    }

    /// The projects of the member's organization, oldest first (every member may list them;
    /// what they may do inside one is the permission table's).
    pub async fn organization_projects(
        &self,
        member: &ConsoleMember,
    ) -> Result<Vec<ProjectRecord>, EngineError> {
        Ok(self.storage.list_projects(member.organization_id()).await?)
    }

    /// Every project of the member's organization with its cost this month in `currency`,
    /// highest first (ties by name).
    pub async fn project_costs_this_month(
        &self,
        member: &ConsoleMember,
        currency: &str,
    ) -> Result<Vec<ProjectMonthCost>, EngineError> {
        member.authorize(Operation::GetCosts)?;
        let month = BillingMonth::containing(chrono::Utc::now());
        let mut ranked = Vec::new();
        for project in self.storage.list_projects(member.organization_id()).await? {
            let Some(scope) = self
                .storage
                .project_scope_for_console_account(&member.account, project.id)
                .await?
            else {
                continue;
            };
            let cost: engram_core::usage::Picos = self
                .storage
                .costs(&scope, month.starts_at(), month.resets_at())
                .await?
                .iter()
                .filter(|row| {
                    row.price
                        .as_ref()
                        .is_some_and(|price| price.currency == currency)
                })
                .map(|row| row.cost)
                .sum();
            let cost_micros = cost.micros();
            ranked.push(ProjectMonthCost {
                project,
                cost_micros,
            });
        }
        ranked.sort_by(|a, b| {
            b.cost_micros
                .cmp(&a.cost_micros)
                .then(a.project.name.cmp(&b.project.name))
        });
        Ok(ranked)
    }
}
