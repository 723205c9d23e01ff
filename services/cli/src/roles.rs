//! What each role runs, as lists: the front doors it serves and its background jobs. `serve`
//! is the gateway's doors and jobs plus the worker's, in one process.

use anyhow::{Result, bail};
use engram_engine::{DataGovernance, IndexApplier, MemoryEngine};
use engram_worker::JobSettings;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Tombstones are purged hourly; their retention is counted in hours.
const TOMBSTONE_PURGE_INTERVAL: Duration = Duration::from_secs(60 * 60);

/// Which part of the system this process runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// API, console, indexer and reconciler in one process (`engram serve`).
    AllInOne,
    /// API and console only; any number run behind a load balancer (`engram gateway`).
    Gateway,
    /// Index upkeep and data governance, no model; any number run at once (`engram worker`).
    Worker,
}

impl Role {
    pub fn command_name(self) -> &'static str {
        match self {
            Role::AllInOne => "serve",
            Role::Gateway => "gateway",
            Role::Worker => "worker",
        }
    }
}

/// A way in to the service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrontDoor {
    /// The HTTP API (`/v1/…`, `/docs`).
    Api,
    /// The admin console (`/console`).
    Console,
    /// `/metrics`, `/healthz` and `/readyz` on the admin port.
    Admin,
}

/// Work a process does beside answering requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackgroundJob {
    /// Applies the outbox to the vector index.
    Indexer,
    /// Periodically repairs index drift the outbox does not describe.
    Reconciler,
    /// Periodically drops tombstones past their retention.
    TombstonePurge,
    /// Runs queued subject erasures.
    ErasureRunner,
    /// Periodically samples each project's live memories (memory-days).
    UsageSampler,
    /// Periodically deletes memories past their retention.
    RetentionSweeper,
    /// Periodically stores each project's statement of the month that closed.
    StatementCloser,
    /// Chunks and embeds uploaded files (embeds: wherever the model is loaded).
    FileIngest,
    /// Derives memories from session messages (embeds).
    MessageDerivation,
    /// Runs queued consolidations (embeds).
    ConsolidationRunner,
    /// Moves projects to the embedding model they change to (embeds).
    ReembeddingRunner,
    /// Runs queued evaluation runs (searches, so embeds).
    EvaluationRunner,
    /// Periodically queues due evaluation runs and purges old recall events.
    EvaluationScheduler,
    /// Periodically queues consolidations, when configured.
    ConsolidationScheduler,
}

/// The jobs that need no embedding model: index upkeep and data governance.
const WORKER_JOBS: &[BackgroundJob] = &[
    BackgroundJob::Indexer,
    BackgroundJob::Reconciler,
    BackgroundJob::TombstonePurge,
    BackgroundJob::ErasureRunner,
    BackgroundJob::UsageSampler,
    BackgroundJob::RetentionSweeper,
    BackgroundJob::StatementCloser,
];

/// The jobs that embed or search, so they run where the model is loaded.
const GATEWAY_JOBS: &[BackgroundJob] = &[
    BackgroundJob::FileIngest,
    BackgroundJob::MessageDerivation,
    BackgroundJob::ConsolidationRunner,
    BackgroundJob::ReembeddingRunner,
    BackgroundJob::EvaluationRunner,
    BackgroundJob::EvaluationScheduler,
    BackgroundJob::ConsolidationScheduler,
];

impl BackgroundJob {
    pub fn name(self) -> &'static str {
        match self {
            BackgroundJob::Indexer => "indexer",
            BackgroundJob::Reconciler => "reconciler",
            BackgroundJob::TombstonePurge => "tombstone-purge",
            BackgroundJob::ErasureRunner => "erasure-runner",
            BackgroundJob::UsageSampler => "usage-sampler",
            BackgroundJob::RetentionSweeper => "retention-sweeper",
            BackgroundJob::StatementCloser => "statement-closer",
            BackgroundJob::FileIngest => "file-ingest",
            BackgroundJob::MessageDerivation => "message-derivation",
            BackgroundJob::ConsolidationRunner => "consolidation-runner",
            BackgroundJob::ReembeddingRunner => "reembedding-runner",
            BackgroundJob::EvaluationRunner => "evaluation-runner",
            BackgroundJob::EvaluationScheduler => "evaluation-scheduler",
            BackgroundJob::ConsolidationScheduler => "consolidation-scheduler",
        }
    }
}

impl Role {
    pub fn front_doors(self) -> &'static [FrontDoor] {
        match self {
            Role::AllInOne | Role::Gateway => {
                &[FrontDoor::Api, FrontDoor::Console, FrontDoor::Admin]
            }
            Role::Worker => &[FrontDoor::Admin],
        }
    }

    /// Every job this role's list names.
    pub fn listed_jobs(self) -> Vec<BackgroundJob> {
        match self {
            Role::AllInOne => GATEWAY_JOBS.iter().chain(WORKER_JOBS).copied().collect(),
            Role::Gateway => GATEWAY_JOBS.to_vec(),
            Role::Worker => WORKER_JOBS.to_vec(),
        }
    }

    /// The jobs this role runs with `settings`: its list, less what is configured off (the
    /// consolidation scheduler without an interval).
    pub fn background_jobs(self, settings: &JobSettings) -> Vec<BackgroundJob> {
        self.listed_jobs()
            .into_iter()
            .filter(|job| {
                *job != BackgroundJob::ConsolidationScheduler
                    || settings.consolidation_interval.is_some()
            })
            .collect()
    }
}

impl FrontDoor {
    pub fn name(self) -> &'static str {
        match self {
            FrontDoor::Api => "api",
            FrontDoor::Console => "console",
            FrontDoor::Admin => "admin",
        }
    }
}

/// What the jobs of a process work with. A worker has no engine (it never embeds).
pub struct JobParts {
    pub applier: Arc<IndexApplier>,
    pub governance: Arc<DataGovernance>,
    pub engine: Option<Arc<MemoryEngine>>,
    /// Whether the process compared the whole index with the database before starting its
    /// jobs; otherwise the reconciler's first pass, at once, is a full one.
    pub index_reconciled_at_start: bool,
}

/// Starts `jobs`, each stopping when `shutdown` turns true.
pub fn spawn_jobs(
    jobs: &[BackgroundJob],
    parts: &JobParts,
    settings: &JobSettings,
    shutdown: &watch::Receiver<bool>,
) -> Result<Vec<tokio::task::JoinHandle<()>>> {
    let mut running = Vec::with_capacity(jobs.len());
    for &job in jobs {
        let stop = shutdown.clone();
        let storage = parts.governance.maintenance_store().clone();
        let engine = || match &parts.engine {
            Some(engine) => Ok(engine.clone()),
            None => bail!(
                "the {} job embeds, and this role loads no model",
                job.name()
            ),
        };
        let task = match job {
            BackgroundJob::Indexer => {
                tokio::spawn(engram_worker::run_indexer(parts.applier.clone(), stop))
            }
            BackgroundJob::Reconciler => tokio::spawn(engram_worker::run_reconciler(
                parts.applier.clone(),
                engram_worker::ReconcileSchedule {
                    changes_every: settings.reconcile_interval,
                    full_every: settings.full_reconcile_interval,
                    full_pass_done_at_start: parts.index_reconciled_at_start,
                },
                stop,
            )),
            BackgroundJob::TombstonePurge => tokio::spawn(engram_worker::run_tombstone_purge(
                storage,
                settings.tombstone_retention,
                settings.idempotency_ttl,
                TOMBSTONE_PURGE_INTERVAL,
                stop,
            )),
            BackgroundJob::ErasureRunner => tokio::spawn(engram_worker::tasks::run_task_runner(
                parts.governance.clone(),
                stop,
            )),
            BackgroundJob::UsageSampler => {
                tokio::spawn(engram_worker::usage_sampling::run_usage_sampler(
                    storage,
                    settings.usage_sample_interval,
                    stop,
                ))
            }
            // As often as usage is sampled: a month is fixed within an interval of closing.
            BackgroundJob::StatementCloser => {
                tokio::spawn(engram_worker::statements::run_statement_closer(
                    parts.governance.clone(),
                    settings.usage_sample_interval,
                    stop,
                ))
            }
            BackgroundJob::RetentionSweeper => {
                tokio::spawn(engram_worker::retention::run_retention_sweeper(
                    parts.governance.clone(),
                    settings.retention_sweep_interval,
                    stop,
                ))
            }
            BackgroundJob::FileIngest => tokio::spawn(
                engram_worker::file_ingest::run_file_ingest_runner(engine()?, stop),
            ),
            BackgroundJob::MessageDerivation => tokio::spawn(
                engram_worker::message_derivation::run_message_derivation_runner(engine()?, stop),
            ),
            BackgroundJob::ConsolidationRunner => {
                tokio::spawn(engram_worker::consolidation::run_consolidation_runner(
                    engine()?,
                    settings.consolidation_limits,
                    stop,
                ))
            }
            BackgroundJob::ReembeddingRunner => tokio::spawn(
                engram_worker::reembedding::run_reembedding_runner(engine()?, stop),
            ),
            BackgroundJob::EvaluationRunner => tokio::spawn(
                engram_worker::evaluation::run_evaluation_runner(engine()?, stop),
            ),
            BackgroundJob::EvaluationScheduler => {
                tokio::spawn(engram_worker::evaluation::run_evaluation_scheduler(
                    storage,
                    parts.governance.task_queued.clone(),
                    settings.evaluation_check_interval,
                    stop,
                ))
            }
            BackgroundJob::ConsolidationScheduler => {
                // Off unless an interval is configured.
                let Some(interval) = settings.consolidation_interval else {
                    continue;
                };
                tokio::spawn(engram_worker::consolidation::run_consolidation_scheduler(
                    storage,
                    parts.governance.task_queued.clone(),
                    interval,
                    stop,
                ))
            }
        };
        running.push(task);
    }
    Ok(running)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serve_runs_what_a_gateway_and_a_worker_run_together_and_nothing_else() {
        let serve = Role::AllInOne.listed_jobs();
        let mut split = Role::Gateway.listed_jobs();
        split.extend(Role::Worker.listed_jobs());
        assert_eq!(serve.len(), split.len());
        assert!(split.iter().all(|job| serve.contains(job)));
        assert_eq!(Role::AllInOne.front_doors(), Role::Gateway.front_doors());
    }

    #[test]
    fn gateways_keep_no_index_upkeep_and_workers_never_embed() {
        let gateway = Role::Gateway.listed_jobs();
        for upkeep in [
            BackgroundJob::Indexer,
            BackgroundJob::Reconciler,
            BackgroundJob::TombstonePurge,
            BackgroundJob::ErasureRunner,
        ] {
            assert!(!gateway.contains(&upkeep), "{}", upkeep.name());
        }
        let worker = Role::Worker.listed_jobs();
        for embeds in [BackgroundJob::FileIngest, BackgroundJob::MessageDerivation] {
            assert!(!worker.contains(&embeds), "{}", embeds.name());
        }
        assert_eq!(Role::Worker.front_doors(), &[FrontDoor::Admin]);
    }
}
