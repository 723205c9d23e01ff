//! Assembles the embedded all-in-one service (SQLite, in-process Qdrant, local model,
//! gateway, console, indexer) and runs it until a shutdown signal, then drains cleanly.

use crate::bootstrap::{self, ServerSecrets};
use crate::config::{EngramConfig, ServeArgs};
use anyhow::{Context, Result};
use engram_embed::Embedder;
use engram_engine::{EngineSettings, MemoryEngine};
use engram_gateway::AppState;
use engram_gateway::auth::ConsoleSessionKeys;
use engram_index::VectorIndex;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Console sessions last a working day.
const CONSOLE_SESSION_LIFETIME: Duration = Duration::from_secs(12 * 60 * 60);

/// A running embedded server: its address and the handles a caller (the CLI, the
/// benchmark) needs.
pub struct EmbeddedServer {
    pub address: SocketAddr,
    /// Where Prometheus scrapes `/metrics`.
    pub metrics_address: SocketAddr,
    pub engine: Arc<MemoryEngine>,
    pub bootstrap: Option<bootstrap::BootstrapFile>,
    shutdown_sender: watch::Sender<bool>,
    server_task: tokio::task::JoinHandle<std::io::Result<()>>,
    indexer_task: tokio::task::JoinHandle<()>,
    reconciler_task: tokio::task::JoinHandle<()>,
    admin_server: crate::telemetry::AdminServer,
    /// Held until the server value is dropped: one process per data dir.
    _data_dir_lock: crate::maintenance::DataDirLock,
}

impl EmbeddedServer {
    pub async fn start(config: &EngramConfig) -> Result<Self> {
        // Before anything records a metric, so nothing recorded at start-up is lost.
        crate::telemetry::prometheus_handle()?;
        let data_dir_lock = crate::maintenance::DataDirLock::acquire(&config.data_dir)?;
        let secrets: ServerSecrets = bootstrap::load_or_create_server_secrets(&config.data_dir)?;
        let storage =
            crate::config::open_storage(&config.database_url, config.allow_unsafe_durability)
                .await?;
        let bootstrap = bootstrap::bootstrap_if_empty(&storage, &config.data_dir, &secrets).await?;

        let embedder: Arc<dyn Embedder> = Arc::new(
            engram_embed::LocalMiniLm::load(
                &config.model_dir,
                engram_embed::LocalModelOptions {
                    worker_threads: config.embed_threads,
                    ..Default::default()
                },
            )
            .context("cannot load the local embedding model")?,
        );
        let index: Arc<dyn VectorIndex> = Arc::new(
            engram_index::EdgeVectorIndex::open(&config.index_dir, embedder.dimension())
                .context("cannot open the vector index")?,
        );
        let engine = Arc::new(MemoryEngine::new(
            storage.clone(),
            index,
            embedder,
            EngineSettings {
                index_wait: config.index_wait,
                ..Default::default()
            },
        ));

        // Replay what a previous run acknowledged but did not index, then repair any point
        // the index lost (a crash can drop its last unflushed writes). This process is the
        // only indexer of its data dir, so leases left in the outbox belong to a run that
        // died: they are released instead of waited out.
        let released = storage.release_all_outbox_claims().await?;
        if released > 0 {
            tracing::info!(released, "released outbox leases of a previous run");
        }
        let replayed = engram_worker::drain_outbox(&engine.applier()).await?;
        let report = engine.applier().reconcile_all_projects(|_, _| {}).await?;
        tracing::info!(
            replayed,
            checked = report.memories_checked,
            missing = report.points_missing,
            stale = report.points_stale,
            orphaned = report.points_orphaned,
            "index caught up with the database"
        );

        let (shutdown_sender, shutdown_receiver) = watch::channel(false);
        let indexer_task = tokio::spawn(engram_worker::run_indexer(
            engine.applier(),
            shutdown_receiver.clone(),
        ));
        let reconciler_task = tokio::spawn(engram_worker::run_reconciler(
            engine.applier(),
            config.reconcile_interval,
            shutdown_receiver.clone(),
        ));

        let credentials = engram_gateway::state::CredentialVerifier {
            storage: storage.clone(),
            api_key_pepper: secrets.api_key_pepper.clone(),
            console_sessions: ConsoleSessionKeys::new(
                &secrets.console_signing_secret,
                CONSOLE_SESSION_LIFETIME,
            ),
        };
        let state = AppState {
            engine: engine.clone(),
            credentials,
            settings: config.gateway_settings()?,
        };
        let console_routes =
            engram_gateway::console::console_routes(&state, &config.console_assets);
        let router = engram_gateway::build_router(state, console_routes);

        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .with_context(|| format!("cannot listen on {}", config.listen))?;
        let address = listener.local_addr()?;
        let mut admin_shutdown = shutdown_receiver.clone();
        let admin_server =
            crate::telemetry::AdminServer::start(config.metrics_listen, async move {
                let _ = admin_shutdown.wait_for(|stop| *stop).await;
            })
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
            shutdown_sender,
            server_task,
            indexer_task,
            reconciler_task,
        })
    }

    /// Stop accepting connections, finish in-flight requests, apply what is left in the
    /// outbox and flush the index.
    pub async fn shutdown(self) -> Result<()> {
        let _ = self.shutdown_sender.send(true);
        match self.server_task.await {
            Ok(result) => result.context("server failed")?,
            Err(join_error) => return Err(anyhow::anyhow!("server task failed: {join_error}")),
        }
        let _ = self.indexer_task.await;
        let _ = self.reconciler_task.await;
        self.admin_server.stop().await;
        engram_worker::drain_outbox(&self.engine.applier()).await?;
        self.engine.index().flush().await?;
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

pub async fn serve_until_signal(arguments: ServeArgs) -> Result<()> {
    let telemetry = crate::telemetry::init_telemetry();
    let config = EngramConfig::resolve(&arguments);
    eprintln!("engram serve starting with:\n{config}");
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
            config.data_dir.display()
        );
    } else {
        println!(
            "  console:  {base_url}/console (credentials in {}/bootstrap.json)",
            config.data_dir.display()
        );
    }
    println!("  api docs: {base_url}/docs");
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
