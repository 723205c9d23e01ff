//! The consolidation job's work on one claimed task: merge the project's near-duplicate
//! memories, bounded per run, and bill the summaries written and embedded.

use super::CONSOLIDATION_LEASE;
use crate::MemoryEngine;
use crate::consolidation::ConsolidationLimits;
use chrono::Utc;
use engram_core::Principal;
use engram_core::usage::UsageUnit;
use engram_storage::tasks::ClaimedTask;
use engram_storage::usage::UsageIncrement;

pub(super) async fn consolidate_claimed(
    engine: &MemoryEngine,
    principal: &Principal,
    task: &ClaimedTask,
    limits: ConsolidationLimits,
) -> Result<serde_json::Value, String> {
    let tasks = engine.maintenance_store();
    let report = engine
        .consolidate_project(&task.scope, limits, principal.actor())
        .await
        .map_err(|error| error.to_string())?;
    // LLM tokens were billed with each call's record; summaries written and embedded here.
    let scope = &task.scope;
    let increments: Vec<UsageIncrement> = [
        (UsageUnit::MemoriesWritten, report.memories_written),
        (UsageUnit::TokensEmbedded, report.tokens_embedded),
    ]
    .into_iter()
    .filter(|(_, quantity)| *quantity > 0)
    .map(|(unit, quantity)| UsageIncrement {
        organization_id: scope.organization_id(),
        project_id: scope.project_id(),
        attribution: engram_core::usage::UsageAttribution::engine(
            crate::consolidation::CONSOLIDATION_CREDENTIAL,
        ),
        unit,
        at: Utc::now(),
        quantity: i64::try_from(quantity).unwrap_or(i64::MAX),
    })
    .collect();
    engine
        .storage
        .add_usage(&increments)
        .await
        .map_err(|error| error.to_string())?;
    let examined = i64::try_from(report.examined).unwrap_or(i64::MAX);
    tasks
        .task_progress(task.id, examined, examined, CONSOLIDATION_LEASE)
        .await
        .map_err(|error| error.to_string())?;
    serde_json::to_value(&report).map_err(|error| error.to_string())
}
