//! Assembles each role from the same parts and runs it until a shutdown signal, then drains
//! cleanly: `serve` (everything in one process), `gateway` (API + console) and `worker`.

use crate::bootstrap::{self, ServerSecrets};
use crate::config::{EngramConfig, IndexBackend, Role, ServeArgs};
use anyhow::{Context, Result};
use engram_embed::Embedder;
use engram_engine::console_credentials::ConsoleSessionKeys;
use engram_engine::{EngineSettings, MemoryEngine};
use engram_gateway::AppState;
use engram_index::VectorIndex;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Console access tokens live 15 minutes; the session (renewed through its rotating refresh
/// token) lasts `engram_engine::CONSOLE_SESSION_LIFETIME`.
const CONSOLE_ACCESS_TOKEN_LIFETIME: Duration = Duration::from_secs(15 * 60);

/// A running API process (`serve` or `gateway`): its address and the handles a caller (the
/// CLI, the benchmark, tests) needs.
pub struct EmbeddedServer {
    pub address: SocketAddr,
    /// Where Prometheus scrapes `/metrics`.
    pub metrics_address: SocketAddr,
    pub engine: Arc<MemoryEngine>,
    pub bootstrap: Option<bootstrap::BootstrapFile>,
    /// Units this start gave Engram's default price (first start, or an upgrade that
    /// brought the default price book): the start prints where to replace them.
    pub default_prices_applied: Vec<engram_core::usage::UsageUnit>,
    role: Role,
    shutdown_sender: watch::Sender<bool>,
    server_task: tokio::task::JoinHandle<std::io::Result<()>>,
    /// Indexer, reconciler and tombstone purge of an all-in-one process; none in a gateway.
    background_tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Writes metered usage; told to finish after the server and the background tasks.
    /// The meter the engine bills through, and its flusher: finished after the last request.
    meter_flusher: Option<(engram_engine::UsageMeter, tokio::task::JoinHandle<()>)>,
    admin_server: crate::telemetry::AdminServer,
    /// Held until the server value is dropped: one process per embedded index.
    _data_dir_lock: Option<crate::data_dir_lock::DataDirLock>,
}

/// Opens the index of one embedding model: a directory of the embedded engine beside the data
/// dir's `index` (which the local model keeps), or the model's collection on a Qdrant cluster
/// (created on first use).
pub fn index_opener(backend: &IndexBackend) -> engram_engine::IndexOpener {
    let backend = backend.clone();
    Arc::new(
        move |model_id: String, dimension: usize| -> engram_engine::IndexOpening {
            let backend = backend.clone();
            Box::pin(async move {
                let index: Arc<dyn VectorIndex> = match backend {
                    IndexBackend::Embedded { index_dir, tuning } => {
                        let index_dir = if model_id == engram_embed::MINILM_MODEL_ID {
                            index_dir
                        } else {
                            index_dir.with_file_name(engram_index::collection_name_for_model(
                                "index", &model_id,
                            ))
                        };
                        Arc::new(
                            tokio::task::spawn_blocking(move || {
                                engram_index::EdgeVectorIndex::open_with_options(
                                    &index_dir,
                                    dimension,
                                    engram_index::EdgeIndexOptions {
                                        tuning,
                                        ..engram_index::EdgeIndexOptions::default()
                                    },
                                )
                            })
                            .await
                            .map_err(|error| {
                                engram_index::IndexError::Internal(error.to_string())
                            })??,
                        )
                    }
                    IndexBackend::Cluster(options) => Arc::new(
                        engram_index::QdrantVectorIndex::connect(&options, &model_id, dimension)
                            .await?,
                    ),
                };
                Ok(index)
            })
        },
    )
}

/// Where the local models' files are.
pub struct LocalModelDirs {
    pub minilm: std::path::PathBuf,
    pub multilingual: std::path::PathBuf,
}

/// The models this deployment offers its projects: the local models and, when configured, the
/// OpenAI-compatible provider, which is then the default. `embeds: false` (a worker) knows
/// them by name only. The local model beside a provider, and the multilingual model always,
/// are loaded when a project first needs them.
pub fn embedding_models(
    provider: Option<&crate::config::EmbeddingProviderConfig>,
    model_dirs: &LocalModelDirs,
    local_model: &engram_embed::LocalModelOptions,
    embeds: bool,
) -> Result<engram_engine::EmbeddingModels> {
    use engram_engine::EmbeddingModel;
    let load_local = {
        let model_dir = model_dirs.minilm.clone();
        let local_model = local_model.clone();
        move || -> Result<Arc<dyn Embedder>, engram_embed::EmbedError> {
            Ok(Arc::new(engram_embed::LocalEncoder::load(
                engram_embed::MINILM,
                &model_dir,
                local_model.clone(),
            )?))
        }
    };
    // One session: each holds ~200 MB of weights, and queries still go first on it.
    let load_multilingual = {
        let model_dir = model_dirs.multilingual.clone();
        let options = local_model.clone().single_session();
        move || -> Result<Arc<dyn Embedder>, engram_embed::EmbedError> {
            Ok(Arc::new(engram_embed::LocalEncoder::load(
                engram_embed::MULTILINGUAL_E5_SMALL,
                &model_dir,
                options.clone(),
            )?))
        }
    };
    let multilingual = Arc::new(if embeds {
        EmbeddingModel::on_first_use(
            engram_embed::MULTILINGUAL_E5_SMALL.model_id,
            engram_embed::MULTILINGUAL_E5_SMALL.dimension,
            Arc::new(load_multilingual),
        )
    } else {
        EmbeddingModel::identity_only(
            engram_embed::MULTILINGUAL_E5_SMALL.model_id,
            engram_embed::MULTILINGUAL_E5_SMALL.dimension,
        )
    });
    let local_identity = || {
        EmbeddingModel::identity_only(
            engram_embed::MINILM_MODEL_ID,
            engram_embed::MINILM_DIMENSION,
        )
    };
    Ok(match provider {
        None => {
            let local = Arc::new(if embeds {
                EmbeddingModel::ready(
                    load_local().context("cannot load the local embedding model")?,
                )
            } else {
                local_identity()
            });
            engram_engine::EmbeddingModels {
                deployment: local.clone(),
                local: Some(local),
                local_multilingual: Some(multilingual),
                provider: None,
            }
        }
        Some(provider) => {
            let provider = Arc::new(if embeds {
                EmbeddingModel::ready(Arc::new(
                    engram_embed::OpenAiCompatibleEmbedder::new(provider.options())
                        .context("cannot set up the embedding provider")?,
                ))
            } else {
                EmbeddingModel::identity_only(&provider.model, provider.dimension)
            });
            let local = Arc::new(if embeds {
                EmbeddingModel::on_first_use(
                    engram_embed::MINILM_MODEL_ID,
                    engram_embed::MINILM_DIMENSION,
                    Arc::new(load_local),
                )
            } else {
                local_identity()
            });
            engram_engine::EmbeddingModels {
                deployment: provider.clone(),
                local: Some(local),
                local_multilingual: Some(multilingual),
                provider: Some(provider),
            }
        }
    })
}

/// Every project's embedding space for this configuration, with the default model's index
/// open and the stored vectors checked against their projects' spaces.
async fn open_embedding_spaces(
    config: &EngramConfig,
    storage: &engram_storage::Storage,
    embeds: bool,
) -> Result<Arc<engram_engine::EmbeddingSpaces>> {
    let models = embedding_models(
        config.embed.provider.as_ref(),
        &LocalModelDirs {
            minilm: config.embed.model_dir.clone(),
            multilingual: config.embed.multilingual_model_dir.clone(),
        },
        &config.embed.local_model,
        embeds,
    )?;
    let spaces = Arc::new(engram_engine::EmbeddingSpaces::new(
        storage.clone(),
        models,
        index_opener(&config.index_backend),
    ));
    spaces
        .open_deployment_index()
        .await
        .context("cannot open the vector index")?;
    // Vectors of two models cannot be compared: every project's data must be in the space
    // its setting names here (re-embedding a data set is not built yet).
    spaces
        .check_stored_vectors(&engram_storage::MaintenanceStore::new(storage.clone()))
        .await?;
    Ok(spaces)
}

/// Where erasures are remembered (a file outside the database) and the subject digest key.
fn ledger_settings(
    config: &EngramConfig,
    secrets: &ServerSecrets,
) -> engram_engine::ErasureLedgerSettings {
    engram_engine::ErasureLedgerSettings {
        ledger_path: Some(config.engine.erasure_ledger.clone()),
        subject_digest_key: secrets.subject_digest_key.clone(),
    }
}

impl EmbeddedServer {
    /// `serve` (everything in one process) or `gateway` (API and console only), by
    /// `config.role`.
    pub async fn start(config: &EngramConfig) -> Result<Self> {
        // Before anything records a metric, so nothing recorded at start-up is lost.
        crate::telemetry::prometheus_handle()?;
        let all_in_one = config.role == Role::AllInOne;
        let embedded_index = matches!(config.index_backend, IndexBackend::Embedded { .. });
        let data_dir_lock = if embedded_index {
            Some(crate::data_dir_lock::DataDirLock::acquire(
                &config.process.data_dir,
            )?)
        } else {
            None
        };
        let secrets: ServerSecrets = bootstrap::server_secrets(
            config.secrets.server_secret.as_ref(),
            &config.process.data_dir,
        )?;
        let storage = crate::config::open_storage_for(config).await?;
        let storage =
            crate::config::seal_storage(storage, &secrets, &config.storage.audit_anchor).await?;
        let bootstrap = if all_in_one {
            bootstrap::bootstrap_if_empty(
                &storage,
                &config.process.data_dir.join(bootstrap::BOOTSTRAP_FILE),
                &secrets,
            )
            .await?
        } else {
            if storage.organization_count().await? == 0 {
                tracing::warn!(
                    "the database has no organization yet: run `engram migrate --bootstrap-file <path>` once to create the first one"
                );
            }
            None
        };
        let default_prices_applied = bootstrap::deployment_admin(&storage, &secrets)
            .apply_default_prices_for(&engram_core::DeploymentOperator::at_the_command_line(
                "serve",
            ))
            .await
            .map_err(|error| anyhow::anyhow!("applying the default price book: {error}"))?;

        let spaces = open_embedding_spaces(config, &storage, true).await?;
        let embedder = spaces.deployment_embedder().await?;
        // Shutdown tells the flusher to write what is left once the server has answered its
        // last request (the engine keeps a clone of the meter, so it cannot wait for that).
        let mut meter_flusher = None;
        let meter = if config.engine.metering {
            let (meter, flusher) = engram_engine::UsageMeter::start(storage.clone());
            meter_flusher = Some((meter.clone(), flusher));
            meter
        } else {
            engram_engine::UsageMeter::default()
        };
        let engine = Arc::new(
            MemoryEngine::with_embedding_spaces(
                storage.clone(),
                spaces,
                embedder,
                EngineSettings {
                    index_wait: config.engine.index_wait,
                    ledger: ledger_settings(config, &secrets),
                    llm: config
                        .engine
                        .llm
                        .as_ref()
                        .map(crate::config::LlmConfig::engine_settings)
                        .transpose()?,
                    ..Default::default()
                },
            )
            .with_usage_meter(meter)
            .with_api_key_pepper(secrets.api_key_pepper.clone())
            .with_end_user_token_keys(
                engram_engine::end_user_tokens::EndUserTokenKeys::new(
                    &secrets.end_user_token_secret,
                ),
            ),
        );

        let (shutdown_sender, shutdown_receiver) = watch::channel(false);
        if all_in_one {
            // Replay what a previous run acknowledged but did not index, then repair any
            // point the index lost (a crash can drop its last unflushed writes).
            if embedded_index {
                // This process is the only indexer of its data dir, so leases left in the
                // outbox belong to a run that died: released instead of waited out. (With a
                // cluster, other workers may hold live leases.)
                let released = engine
                    .maintenance_store()
                    .release_all_outbox_claims()
                    .await?;
                if released > 0 {
                    tracing::info!(released, "released outbox leases of a previous run");
                }
            }
            let replayed = engram_worker::drain_outbox(&engine.applier()).await?;
            // A database restored from an older copy may hold subjects erased since: erase
            // them again before anything is served.
            let replay = engine.data_governance().replay_erasure_ledger().await?;
            if replay.subjects_erased_again > 0 {
                tracing::warn!(
                    subjects = replay.subjects_erased_again,
                    memories = replay.memories_erased_again,
                    "erasure ledger replayed: restored data of erased subjects removed again"
                );
            }
            let report = engine.applier().reconcile_all_projects(|_, _| {}).await?;
            tracing::info!(
                replayed,
                checked = report.memories_checked,
                missing = report.points_missing,
                stale = report.points_stale,
                orphaned = report.points_orphaned,
                "index caught up with the database"
            );
        }

        // This role's jobs, as its list names them.
        let background_tasks = crate::roles::spawn_jobs(
            &config.role.background_jobs(&config.jobs),
            &crate::roles::JobParts {
                applier: engine.applier(),
                governance: engine.data_governance(),
                engine: Some(engine.clone()),
                // The all-in-one server reconciled everything above, before it answered.
                index_reconciled_at_start: all_in_one,
            },
            &config.jobs,
            &shutdown_receiver,
        )?;

        let credentials = engram_gateway::state::CredentialVerifier::new(
            engine.clone(),
            ConsoleSessionKeys::rotating(
                config.gateway.console_signing_key_version,
                &secrets.console_signing_secret_for(config.gateway.console_signing_key_version),
                Some(&secrets.console_signing_secret_for(
                    config.gateway.console_signing_key_version.saturating_sub(1),
                )),
                CONSOLE_ACCESS_TOKEN_LIFETIME,
            ),
            engram_gateway::rate_limit::RateLimitSettings {
                burst: config.gateway.rate_limit_burst,
                per_second: config.gateway.rate_limit_per_second,
            },
            engram_gateway::rate_limit::RateLimitSettings {
                burst: config.gateway.end_user_rate_limit_burst,
                per_second: config.gateway.end_user_rate_limit_per_second,
            },
        );
        let state = AppState {
            engine: engine.clone(),
            credentials,
            settings: config.gateway_settings()?,
        };
        // The doors this role's list names: the API always (this is an API process), the
        // console only where the role opens it.
        let front_doors = config.role.front_doors();
        let console_routes = if front_doors.contains(&crate::roles::FrontDoor::Console) {
            engram_gateway::console::console_routes(&state, &config.process.console_assets)
        } else {
            axum::Router::new()
        };
        let router = engram_gateway::build_router(state, console_routes);

        let listener = tokio::net::TcpListener::bind(config.process.listen)
            .await
            .with_context(|| format!("cannot listen on {}", config.process.listen))?;
        let address = listener.local_addr()?;
        let mut admin_shutdown = shutdown_receiver.clone();
        let admin_server = crate::telemetry::AdminServer::start(
            config.process.metrics_listen,
            config.process.metrics_listen_may_move,
            Some(engine.applier()),
            async move {
                let _ = admin_shutdown.wait_for(|stop| *stop).await;
            },
        )
        .await?;
        let mut server_shutdown = shutdown_receiver;
        let server_task = tokio::spawn(engram_gateway::serve(listener, router, async move {
            let _ = server_shutdown.wait_for(|stop| *stop).await;
        }));
        Ok(Self {
            address,
            metrics_address: admin_server.address,
            admin_server,
            _data_dir_lock: data_dir_lock,
            engine,
            bootstrap,
            default_prices_applied,
            role: config.role,
            shutdown_sender,
            server_task,
            background_tasks,
            meter_flusher,
        })
    }

    /// Stop accepting connections and finish in-flight requests; an all-in-one process then
    /// applies what is left in the outbox and flushes the index (a gateway leaves that to
    /// the workers).
    pub async fn shutdown(self) -> Result<()> {
        let _ = self.shutdown_sender.send(true);
        let served = match self.server_task.await {
            Ok(result) => result.context("server failed"),
            Err(join_error) => Err(anyhow::anyhow!("server task failed: {join_error}")),
        };
        for task in self.background_tasks {
            let _ = task.await;
        }
        // Even after a failed server: what was acknowledged is billed.
        if let Some((meter, meter_flusher)) = self.meter_flusher {
            meter.finish().await;
            let _ = meter_flusher.await;
        }
        served?;
        self.admin_server.stop().await;
        if self.role == Role::AllInOne {
            engram_worker::drain_outbox(&self.engine.applier()).await?;
        }
        // Searches answered before the shutdown keep their recall events; the index is
        // flushed last.
        self.engine.flush_before_exit().await?;
        Ok(())
    }
}

/// A running `engram worker`: the outbox indexer, the reconciler and the tombstone purge
/// against the shared database and Qdrant cluster, with `/metrics`, `/healthz` and `/readyz`
/// on the admin port.
pub struct WorkerProcess {
    pub metrics_address: SocketAddr,
    applier: Arc<engram_engine::IndexApplier>,
    shutdown_sender: watch::Sender<bool>,
    background_tasks: Vec<tokio::task::JoinHandle<()>>,
    admin_server: crate::telemetry::AdminServer,
}

impl WorkerProcess {
    pub async fn start(config: &EngramConfig) -> Result<Self> {
        crate::telemetry::prometheus_handle()?;
        let storage = crate::config::open_storage_for(config).await?;
        let secrets: ServerSecrets = bootstrap::server_secrets(
            config.secrets.server_secret.as_ref(),
            &config.process.data_dir,
        )?;
        let storage =
            crate::config::seal_storage(storage, &secrets, &config.storage.audit_anchor).await?;
        // Workers never embed: vectors were computed by the gateway and stored with the row.
        let spaces = open_embedding_spaces(config, &storage, false).await?;
        let index: Arc<dyn VectorIndex> = Arc::new(
            engram_engine::embedding_spaces::RoutedVectorIndex::new(spaces),
        );
        let applier = Arc::new(engram_engine::IndexApplier::new(
            storage.clone(),
            index.clone(),
        ));
        let governance = Arc::new(engram_engine::DataGovernance::new(
            storage.clone(),
            index,
            applier.clone(),
            ledger_settings(config, &secrets),
        ));
        // A worker that cannot replay the ledger refuses to start (and is restarted): going on
        // would leave a restored database serving subjects whose erasure was acknowledged.
        let replay = governance
            .replay_erasure_ledger()
            .await
            .context("cannot replay the erasure ledger")?;
        if replay.subjects_erased_again > 0 {
            tracing::warn!(
                subjects = replay.subjects_erased_again,
                memories = replay.memories_erased_again,
                "erasure ledger replayed: restored data of erased subjects removed again"
            );
        }
        let (shutdown_sender, shutdown_receiver) = watch::channel(false);
        // The reconciler job starts with a full pass, in the background, so a large backlog
        // does not delay readiness; until one succeeds, every pass is a full one.
        let background_tasks = crate::roles::spawn_jobs(
            &config.role.background_jobs(&config.jobs),
            &crate::roles::JobParts {
                applier: applier.clone(),
                governance,
                engine: None,
                index_reconciled_at_start: false,
            },
            &config.jobs,
            &shutdown_receiver,
        )?;
        let mut admin_shutdown = shutdown_receiver;
        let admin_server = crate::telemetry::AdminServer::start(
            config.process.metrics_listen,
            config.process.metrics_listen_may_move,
            Some(applier.clone()),
            async move {
                let _ = admin_shutdown.wait_for(|stop| *stop).await;
            },
        )
        .await?;
        Ok(Self {
            metrics_address: admin_server.address,
            applier,
            shutdown_sender,
            background_tasks,
            admin_server,
        })
    }

    /// Stop the loops (an apply in progress finishes: its leases are completed or expire).
    pub async fn shutdown(self) -> Result<()> {
        let _ = self.shutdown_sender.send(true);
        for task in self.background_tasks {
            let _ = task.await;
        }
        self.admin_server.stop().await;
        drop(self.applier);
        Ok(())
    }
}

async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = interrupt => {}
        _ = terminate => {}
    }
}

/// `engram serve` and `engram gateway`.
pub async fn serve_until_signal(arguments: ServeArgs, role: Role) -> Result<()> {
    let telemetry = crate::telemetry::init_telemetry();
    let config = EngramConfig::resolve_for_role(&arguments, role)?;
    eprintln!("engram {} starting with:\n{config}", role.command_name());
    let server = EmbeddedServer::start(&config).await?;
    let base_url = format!("http://{}", server.address);
    if let Some(first_start) = &server.bootstrap {
        println!(
            "first start: created an organization, a project, a console account and an API key"
        );
        println!("  console:  {base_url}/console");
        println!(
            "  login:    {} / {}",
            first_start.console_email, first_start.console_password
        );
        println!("  api key:  {}", first_start.api_key);
        println!(
            "  (saved once to {}/bootstrap.json, mode 0600)",
            config.process.data_dir.display()
        );
    } else if role == Role::AllInOne {
        println!(
            "  console:  {base_url}/console (credentials in {}/bootstrap.json)",
            config.process.data_dir.display()
        );
    } else {
        println!("  console:  {base_url}/console");
    }
    println!("  api docs: {base_url}/docs");
    if !server.default_prices_applied.is_empty() {
        let units: Vec<&str> = server
            .default_prices_applied
            .iter()
            .map(|unit| unit.as_str())
            .collect();
        println!(
            "  prices:   Engram's default price book (USD) now prices {}; replace them with \
             `engram admin set-price --unit <unit> --price <price> [--currency USD]`",
            units.join(", ")
        );
    }
    // Tests and scripts read this line to find the admin port.
    println!("metrics on http://{}/metrics", server.metrics_address);
    // Tests and scripts read this line to find the port.
    println!("listening on {base_url}");
    shutdown_signal().await;
    eprintln!("shutting down: finishing in-flight requests");
    server.shutdown().await?;
    telemetry.shutdown();
    eprintln!("stopped cleanly");
    Ok(())
}

/// `engram worker`.
pub async fn work_until_signal(arguments: ServeArgs) -> Result<()> {
    let telemetry = crate::telemetry::init_telemetry();
    let config = EngramConfig::resolve_for_role(&arguments, Role::Worker)?;
    eprintln!("engram worker starting with:\n{config}");
    let worker = WorkerProcess::start(&config).await?;
    // Tests and scripts read this line to find the admin port.
    println!("metrics on http://{}/metrics", worker.metrics_address);
    println!("worker running");
    shutdown_signal().await;
    eprintln!("shutting down: stopping the indexer");
    worker.shutdown().await?;
    telemetry.shutdown();
    eprintln!("stopped cleanly");
    Ok(())
}
