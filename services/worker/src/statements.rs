//! The statement closer: every interval it stores each project's statement of the month that
//! closed last (an hour after the month ended), so a month's statement is fixed when it
//! closes, read or not. A statement is stored once; every worker may run it.

use crate::periodic::{FirstRun, Schedule, run_periodic};
use chrono::Utc;
use engram_engine::DataGovernance;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Close every project's latest month; returns how many statements were stored now.
pub async fn close_all_statements(
    engine: &DataGovernance,
) -> Result<u64, engram_engine::EngineError> {
    let now = Utc::now();
    let mut stored = 0;
    for scope in engine.maintenance_store().all_project_scopes().await? {
        // One project's failure does not hold up the others; it is retried next period.
        match engine.close_statements(&scope, now).await {
            Ok(true) => stored += 1,
            Ok(false) => {}
            Err(error) => tracing::warn!(
                project_id = %scope.project_id(),
                %error,
                "closing a project's statement failed; retrying next period"
            ),
        }
    }
    Ok(stored)
}

pub async fn run_statement_closer(
    engine: Arc<DataGovernance>,
    interval: Duration,
    shutdown: watch::Receiver<bool>,
) {
    let schedule = Schedule {
        name: "statement closer",
        interval,
        first_run: FirstRun::AtStart,
    };
    let engine = &engine;
    run_periodic(schedule, shutdown, move || async move {
        match close_all_statements(engine).await {
            Ok(0) => {}
            Ok(stored) => tracing::info!(stored, "monthly statements closed"),
            Err(error) => {
                tracing::warn!(%error, "closing statements failed; retrying next period")
            }
        }
    })
    .await;
}
