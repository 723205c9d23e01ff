//! Test harness for the end-to-end suites: spawns the real `engram serve` binary on port 0
//! with its own data dir, and offers a typed client for the public API.

pub mod embedding_stand_in;
pub mod llm_stand_in;

use anyhow::{Context, Result, bail};
use serde::Deserialize;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The workspace root (this crate lives in `<root>/tests`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// The `engram` binary under test: `ENGRAM_BIN`, or `engram-under-test`, which `cargo test`
/// builds from the same library before it runs any test of this package.
pub fn engram_binary() -> PathBuf {
    if let Ok(path) = std::env::var("ENGRAM_BIN") {
        return PathBuf::from(path);
    }
    // A test executable lives in `<target>/<profile>/deps/`; its package's binaries one up.
    let built_beside_the_tests = std::env::current_exe()
        .ok()
        .and_then(|test_executable| {
            test_executable
                .parent()
                .and_then(Path::parent)
                .map(|profile_dir| profile_dir.join("engram-under-test"))
        })
        .filter(|binary| binary.exists());
    if let Some(binary) = built_beside_the_tests {
        return binary;
    }
    build_engram_binary()
}

/// Outside `cargo test` (a test executable run by hand, a stale `deps/` copy), builds the
/// binary once per process with the cargo that is at hand and returns its path.
fn build_engram_binary() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
            let status = Command::new(&cargo)
                .current_dir(workspace_root())
                .args(["build", "-p", "engram-tests", "--bin", "engram-under-test"])
                .status()
                .unwrap_or_else(|error| panic!("cannot run {cargo} to build the server: {error}"));
            assert!(status.success(), "building engram-under-test failed");
            let target = std::env::var("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|_| workspace_root().join("target"));
            target.join("debug").join("engram-under-test")
        })
        .clone()
}

/// How long a test waits for something asynchronous (a task, the indexer, a meter flush, a
/// browser step) before it fails. Generous on purpose: it is only reached when something is
/// broken, and a machine busy with other work may be many times slower than a quiet one.
/// `ENGRAM_TEST_PATIENCE_SECS` overrides it (default 300).
pub fn patience() -> Duration {
    let seconds = std::env::var("ENGRAM_TEST_PATIENCE_SECS")
        .ok()
        .and_then(|value| value.parse::<u64>().ok())
        .unwrap_or(300);
    Duration::from_secs(seconds)
}

/// Polls `probe` every 100 ms until it returns `Some`, and returns that; fails naming `what`
/// (and the last thing the probe saw) once [`patience`] runs out.
pub async fn eventually<T, Probe, Attempt>(what: &str, mut probe: Probe) -> T
where
    Probe: FnMut() -> Attempt,
    Attempt: std::future::Future<Output = Result<T, String>>,
{
    let deadline = std::time::Instant::now() + patience();
    loop {
        match probe().await {
            Ok(value) => return value,
            Err(last_seen) if std::time::Instant::now() > deadline => {
                panic!(
                    "gave up waiting for {what} after {:?}; last seen: {last_seen}",
                    patience()
                )
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// The value of the first sample of `name` in a Prometheus text page whose labels include
/// all of `labels`.
pub fn metric_sample(metrics: &str, name: &str, labels: &[&str]) -> Option<f64> {
    metrics
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter(|line| {
            line.starts_with(&format!("{name}{{")) || line.starts_with(&format!("{name} "))
        })
        .find(|line| labels.iter().all(|label| line.contains(label)))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
}

/// The embedding model installed by `scripts/setup.sh` (or `ENGRAM_MODEL_DIR`).
pub fn model_dir() -> PathBuf {
    engram_embed::resolve_model_dir(&workspace_root())
}

/// The multilingual model installed by `scripts/setup.sh` (or
/// `ENGRAM_MULTILINGUAL_MODEL_DIR`).
pub fn multilingual_model_dir() -> PathBuf {
    engram_embed::resolve_multilingual_model_dir(&workspace_root())
}

/// The local model's options on this machine, with the ONNX Runtime library `scripts/setup.sh`
/// installed (or `ORT_DYLIB_PATH`).
pub fn local_model_options() -> engram_embed::LocalModelOptions {
    engram_embed::LocalModelOptions::for_runtime(engram_embed::resolve_runtime_library(
        &workspace_root(),
    ))
}

/// The console bundle built by `scripts/build-console.sh`.
pub fn console_assets_dir() -> PathBuf {
    std::env::var("ENGRAM_CONSOLE_ASSETS")
        .map(PathBuf::from)
        .unwrap_or_else(|_| workspace_root().join("target/console-pkg"))
}

#[derive(Clone, Debug, Deserialize)]
pub struct BootstrapFile {
    pub org_id: String,
    pub project_id: String,
    pub api_key: String,
    pub console_email: String,
    pub console_password: String,
}

/// A running `engram serve` child process.
pub struct TestServer {
    pub base_url: String,
    /// `http://host:port/metrics` on the admin listener.
    pub metrics_url: String,
    pub data_dir: PathBuf,
    pub bootstrap: BootstrapFile,
    /// Extra environment the server was started with; admin commands get it too (so they
    /// reach the same database).
    environment: Vec<(String, String)>,
    child: Child,
    _owned_dir: Option<tempfile::TempDir>,
}

impl TestServer {
    /// A server on a fresh data dir.
    pub async fn spawn() -> Result<Self> {
        let directory = tempfile::Builder::new().prefix("engram-test-").tempdir()?;
        let data_dir = directory.path().to_path_buf();
        let mut server = Self::spawn_in(&data_dir).await?;
        server._owned_dir = Some(directory);
        Ok(server)
    }

    /// A server on a fresh data dir, started with `environment`.
    pub async fn spawn_fresh_with(environment: &[(&str, &str)]) -> Result<Self> {
        let directory = tempfile::Builder::new().prefix("engram-test-").tempdir()?;
        let data_dir = directory.path().to_path_buf();
        let mut server = Self::spawn_with(&data_dir, environment).await?;
        server._owned_dir = Some(directory);
        Ok(server)
    }

    /// A server on an existing data dir (a restart).
    pub async fn spawn_in(data_dir: &Path) -> Result<Self> {
        Self::spawn_with(data_dir, &[]).await
    }

    pub async fn spawn_with(data_dir: &Path, environment: &[(&str, &str)]) -> Result<Self> {
        Self::spawn_process(data_dir, environment, Some("127.0.0.1:0")).await
    }

    /// A server on a fresh data dir that is not told where to serve metrics, as `engram
    /// serve` runs for a user: it tries the default metrics address first.
    pub async fn spawn_with_default_metrics_address() -> Result<Self> {
        let directory = tempfile::Builder::new().prefix("engram-test-").tempdir()?;
        let mut server = Self::spawn_process(directory.path(), &[], None).await?;
        server._owned_dir = Some(directory);
        Ok(server)
    }

    async fn spawn_process(
        data_dir: &Path,
        environment: &[(&str, &str)],
        metrics_listen: Option<&str>,
    ) -> Result<Self> {
        let metrics_listen = metrics_listen.map(str::to_string);
        let data_dir = data_dir.to_path_buf();
        let binary = engram_binary();
        let environment: Vec<(String, String)> = environment
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect();
        let data_dir_for_child = data_dir.clone();
        let environment_for_child = environment.clone();
        let (child, base_url, metrics_url) =
            tokio::task::spawn_blocking(move || -> Result<(Child, String, String)> {
                let mut command = Command::new(&binary);
                command
                    .arg("serve")
                    .arg("--data-dir")
                    .arg(&data_dir_for_child)
                    .arg("--listen")
                    .arg("127.0.0.1:0")
                    // The suite's servers use the embedded index unless a test says otherwise,
                    // even when the developer's shell points QDRANT_URL at a cluster.
                    .env_remove("QDRANT_URL")
                    .env_remove("QDRANT_API_KEY")
                    // And the embedded SQLite database, whatever ENGRAM_DATABASE_URL says.
                    .env_remove("ENGRAM_DATABASE_URL")
                    .env_remove("ENGRAM_METRICS_LISTEN")
                    // A write answers 201 once the index has it, or 202 after this budget: on a
                    // busy machine the default 5 s can pass, and the suites assert 201. A test
                    // that wants another budget sets it in its environment (applied below).
                    .env("ENGRAM_INDEX_WAIT_MS", patience().as_millis().to_string())
                    .env("ENGRAM_LOG", "warn")
                    .env("ENGRAM_MODEL_DIR", model_dir())
                    .env("ENGRAM_MULTILINGUAL_MODEL_DIR", multilingual_model_dir())
                    .env("ENGRAM_CONSOLE_ASSETS", console_assets_dir())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::inherit());
                if let Some(metrics_listen) = &metrics_listen {
                    command.arg("--metrics-listen").arg(metrics_listen);
                }
                for (key, value) in &environment_for_child {
                    command.env(key, value);
                }
                let mut child = command
                    .spawn()
                    .with_context(|| format!("cannot start {}", binary.display()))?;
                let stdout = child.stdout.take().context("no stdout")?;
                let mut lines = BufReader::new(stdout).lines();
                let mut metrics_url = None;
                let base_url = loop {
                    match lines.next() {
                        Some(Ok(line)) => {
                            if let Some(url) = line.strip_prefix("metrics on ") {
                                metrics_url = Some(url.trim().to_string());
                            }
                            if let Some(url) = line.strip_prefix("listening on ") {
                                break url.trim().to_string();
                            }
                        }
                        Some(Err(error)) => bail!("reading server output failed: {error}"),
                        None => bail!("the server exited before listening (see its stderr above)"),
                    }
                };
                // Keep draining stdout so the child never blocks on a full pipe.
                std::thread::spawn(move || for _ in lines {});
                let metrics_url =
                    metrics_url.context("the server did not print its metrics address")?;
                Ok((child, base_url, metrics_url))
            })
            .await??;
        let bootstrap_text = std::fs::read_to_string(data_dir.join("bootstrap.json"))?;
        let bootstrap: BootstrapFile = serde_json::from_str(&bootstrap_text)?;
        Ok(Self {
            base_url,
            metrics_url,
            environment,
            data_dir,
            bootstrap,
            child,
            _owned_dir: None,
        })
    }

    /// A console member with this e-mail and role, created the way an operator does
    /// (`engram admin create-member`): the JSON it prints (`email`, `password`, `role`,
    /// `account_id`).
    pub fn create_member(&self, email: &str, role: &str) -> Value {
        let data_dir = self.data_dir.display().to_string();
        let output = run_engram(
            &[
                "admin",
                "create-member",
                "--data-dir",
                &data_dir,
                "--email",
                email,
                "--role",
                role,
            ],
            &[],
        );
        assert!(
            output.status.success(),
            "create-member {email}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|error| panic!("create-member printed no JSON: {error}"))
    }

    /// A browser-like client signed in to the console as the bootstrap owner, and its
    /// session cookies (for `Cookie:`); console server functions are then POSTs to
    /// `/console/api/<function>`.
    pub async fn console_owner_session(&self) -> (reqwest::Client, String) {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("an HTTP client");
        let login = http
            .post(format!("{}/console/api/login", self.base_url))
            .form(&[
                ("email", self.bootstrap.console_email.as_str()),
                ("password", self.bootstrap.console_password.as_str()),
            ])
            .send()
            .await
            .expect("the console login answers");
        let cookie = login
            .headers()
            .get_all("set-cookie")
            .iter()
            .filter_map(|value| value.to_str().ok())
            .filter_map(|value| value.split(';').next().map(str::to_string))
            .collect::<Vec<_>>()
            .join("; ");
        assert!(!cookie.is_empty(), "the owner signs in: {}", login.status());
        (http, cookie)
    }

    pub fn client(&self) -> ApiClient {
        ApiClient::new(&self.base_url, &self.bootstrap.api_key)
    }

    /// The server's process id (its memory is read from `/proc/<pid>/status`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The server process's resident memory now, bytes.
    pub fn resident_bytes(&self) -> Option<u64> {
        resident_bytes_of(self.pid())
    }

    pub fn client_with_key(&self, api_key: &str) -> ApiClient {
        ApiClient::new(&self.base_url, api_key)
    }

    /// `engram admin create-project` against this server's data dir, while it runs.
    pub fn create_project(&self, name: &str) -> Result<(String, String)> {
        let output = Command::new(engram_binary())
            .envs(self.environment.iter().map(|(key, value)| (key, value)))
            .args(["admin", "create-project", "--data-dir"])
            .arg(&self.data_dir)
            .args(["--name", name, "--json"])
            .output()?;
        if !output.status.success() {
            bail!(
                "create-project failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let created: Value = serde_json::from_slice(&output.stdout)?;
        Ok((
            created["project_id"]
                .as_str()
                .context("project_id")?
                .to_string(),
            created["api_key"].as_str().context("api_key")?.to_string(),
        ))
    }

    /// Sends SIGTERM without waiting: the server starts its graceful shutdown.
    pub fn request_shutdown(&self) {
        use nix::sys::signal::{Signal, kill};
        use nix::unistd::Pid;
        let _ = kill(Pid::from_raw(self.child.id() as i32), Signal::SIGTERM);
    }

    /// Waits for the process to end; returns whether it exited successfully.
    pub fn wait_for_exit(mut self) -> (bool, PathBuf, Option<tempfile::TempDir>) {
        let status = self
            .child
            .wait()
            .map(|status| status.success())
            .unwrap_or(false);
        (status, self.data_dir.clone(), self._owned_dir.take())
    }

    /// SIGKILL: no shutdown code runs.
    pub fn kill_hard(mut self) -> (PathBuf, Option<tempfile::TempDir>) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        (self.data_dir.clone(), self._owned_dir.take())
    }

    /// SIGTERM and wait for a clean exit; returns whether the exit status was success.
    pub fn stop(self) -> (bool, PathBuf, Option<tempfile::TempDir>) {
        self.request_shutdown();
        self.wait_for_exit()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A response reduced to what tests look at.
#[derive(Debug)]
pub struct ApiResponse {
    pub status: u16,
    pub content_type: String,
    pub request_id: Option<String>,
    pub retry_after: Option<String>,
    pub body: Value,
}

impl ApiResponse {
    /// Assert this is a problem+json answer with `status` and type slug `slug`.
    pub fn assert_problem(&self, status: u16, slug: &str) {
        assert_eq!(
            self.status, status,
            "unexpected status; body: {}",
            self.body
        );
        assert!(
            self.content_type.starts_with("application/problem+json"),
            "content type {:?}; body {}",
            self.content_type,
            self.body
        );
        assert_eq!(
            self.body["type"],
            format!("https://engram.dev/problems/{slug}"),
            "body: {}",
            self.body
        );
        assert_eq!(self.body["status"], status, "body: {}", self.body);
        // `code` is the slug or a narrower stable code from the engine's table
        // (`memory-not-found`, `scope-not-grantable`, `database-unavailable`): lowercase
        // words joined by `-`, so it never carries an id.
        let code = self.body["code"].as_str().unwrap_or("");
        assert!(
            !code.is_empty()
                && code
                    .split('-')
                    .all(|word| !word.is_empty() && word.chars().all(|c| c.is_ascii_lowercase())),
            "code {code:?} is not a stable code: {}",
            self.body
        );
        assert!(
            self.body["title"]
                .as_str()
                .is_some_and(|title| !title.is_empty()),
            "title missing: {}",
            self.body
        );
        assert!(
            self.body["detail"]
                .as_str()
                .is_some_and(|detail| !detail.is_empty()),
            "detail missing: {}",
            self.body
        );
        assert_eq!(
            self.body["request_id"].as_str(),
            self.request_id.as_deref(),
            "request_id must match x-request-id"
        );
    }

    pub fn error_fields(&self) -> Vec<String> {
        self.body["errors"]
            .as_array()
            .map(|errors| {
                errors
                    .iter()
                    .filter_map(|error| error["field"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Typed helpers for the public API with one API key.
#[derive(Clone)]
pub struct ApiClient {
    base_url: String,
    api_key: String,
    http: reqwest::Client,
}

impl ApiClient {
    pub fn new(base_url: &str, api_key: &str) -> Self {
        let http = reqwest::Client::builder()
            .user_agent("engram-tests")
            .timeout(patience())
            .build()
            .unwrap_or_default();
        Self {
            base_url: base_url.to_string(),
            api_key: api_key.to_string(),
            http,
        }
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    pub async fn send(&self, request: reqwest::RequestBuilder) -> ApiResponse {
        let response = request.send().await.expect("request failed to send");
        let status = response.status().as_u16();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|value| value.to_str().ok())
                .map(str::to_string)
        };
        let content_type = header("content-type").unwrap_or_default();
        let request_id = header("x-request-id");
        let retry_after = header("retry-after");
        let bytes = response.bytes().await.unwrap_or_default();
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).to_string()))
        };
        ApiResponse {
            status,
            content_type,
            request_id,
            retry_after,
            body,
        }
    }

    /// Calls the MCP tool `tool` over `/mcp` (one stateless JSON-RPC request) and answers it
    /// as the HTTP API would: status 200 and the tool's `structuredContent`, or for an
    /// `isError` result the status it names; a JSON-RPC error is status 0 with the error.
    pub async fn mcp_tool(&self, tool: &str, arguments: Value) -> ApiResponse {
        let request = self
            .request(reqwest::Method::POST, "/mcp")
            .header("accept", "application/json, text/event-stream")
            .json(&serde_json::json!({
                "jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": tool, "arguments": arguments},
            }));
        let mut response = self.send(request).await;
        if response.status != 200 {
            return response;
        }
        let message = response.body.take();
        if let Some(error) = message.get("error") {
            response.status = 0;
            response.body = error.clone();
            return response;
        }
        let result = &message["result"];
        response.body = result["structuredContent"].clone();
        if result["isError"] == true {
            response.status = response.body["status"].as_u64().unwrap_or(0) as u16;
        }
        response
    }

    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.base_url))
            .bearer_auth(&self.api_key)
    }

    /// Send `request`, expect 200 and return the body as text (exports).
    pub async fn http_text(&self, request: reqwest::RequestBuilder) -> String {
        let response = request.send().await.expect("request failed");
        assert_eq!(response.status().as_u16(), 200);
        response.text().await.expect("body")
    }

    pub async fn add(&self, memories: Value) -> ApiResponse {
        self.send(
            self.request(reqwest::Method::POST, "/v1/memories")
                .json(&json!({ "memories": memories })),
        )
        .await
    }

    /// Add one memory and return it (asserting 201).
    pub async fn add_one(&self, memory: Value) -> Value {
        let response = self.add(json!([memory])).await;
        assert_eq!(response.status, 201, "add failed: {}", response.body);
        response.body["memories"][0].clone()
    }

    pub async fn get(&self, memory_id: &str) -> ApiResponse {
        self.send(self.request(reqwest::Method::GET, &format!("/v1/memories/{memory_id}")))
            .await
    }

    pub async fn list(&self, query: &str) -> ApiResponse {
        self.send(self.request(reqwest::Method::GET, &format!("/v1/memories{query}")))
            .await
    }

    pub async fn patch(&self, memory_id: &str, if_match: Option<&str>, body: Value) -> ApiResponse {
        let mut request = self
            .request(reqwest::Method::PATCH, &format!("/v1/memories/{memory_id}"))
            .json(&body);
        if let Some(version) = if_match {
            request = request.header("If-Match", version);
        }
        self.send(request).await
    }

    pub async fn delete(&self, memory_id: &str) -> ApiResponse {
        self.send(self.request(
            reqwest::Method::DELETE,
            &format!("/v1/memories/{memory_id}"),
        ))
        .await
    }

    pub async fn history(&self, memory_id: &str) -> ApiResponse {
        self.send(self.request(
            reqwest::Method::GET,
            &format!("/v1/memories/{memory_id}/history"),
        ))
        .await
    }

    pub async fn search(&self, body: Value) -> ApiResponse {
        self.send(
            self.request(reqwest::Method::POST, "/v1/memories/search")
                .json(&body),
        )
        .await
    }

    /// Contents of the search results for `query`, best first.
    pub async fn search_contents(&self, query: &str) -> Vec<String> {
        let response = self.search(json!({"query": query, "top_k": 100})).await;
        assert_eq!(response.status, 200, "search failed: {}", response.body);
        response.body["results"]
            .as_array()
            .map(|results| {
                results
                    .iter()
                    .filter_map(|result| result["memory"]["content"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Every memory id visible in the default list (all pages).
    pub async fn all_listed_ids(&self, extra_query: &str) -> Vec<String> {
        let mut ids = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut query = format!("?limit=500{extra_query}");
            if let Some(cursor) = &cursor {
                query.push_str(&format!("&cursor={cursor}"));
            }
            let response = self.list(&query).await;
            assert_eq!(response.status, 200, "list failed: {}", response.body);
            for memory in response.body["memories"]
                .as_array()
                .cloned()
                .unwrap_or_default()
            {
                ids.push(memory["id"].as_str().unwrap_or_default().to_string());
            }
            match response.body["next_cursor"].as_str() {
                Some(next) => cursor = Some(next.to_string()),
                None => return ids,
            }
        }
    }
}

/// A running `engram gateway` or `engram worker` of a cluster test.
pub struct RoleProcess {
    /// `http://host:port` of a gateway; `None` for a worker.
    pub base_url: Option<String>,
    pub metrics_url: String,
    child: Child,
}

impl RoleProcess {
    /// Start `engram <role>` with `environment` (database, Qdrant, secret) on free ports and
    /// wait until it is serving (a gateway prints `listening on`, a worker `worker running`).
    pub async fn spawn(role: &str, environment: &[(String, String)]) -> Result<Self> {
        let binary = engram_binary();
        let role = role.to_string();
        let environment = environment.to_vec();
        tokio::task::spawn_blocking(move || -> Result<Self> {
            let mut command = Command::new(&binary);
            command
                .arg(&role)
                .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
                .env("ENGRAM_LOG", "warn")
                .env("ENGRAM_MODEL_DIR", model_dir())
                .env("ENGRAM_MULTILINGUAL_MODEL_DIR", multilingual_model_dir())
                .env("ENGRAM_CONSOLE_ASSETS", console_assets_dir())
                .envs(environment.iter().map(|(key, value)| (key, value)))
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit());
            let mut child = command
                .spawn()
                .with_context(|| format!("cannot start {}", binary.display()))?;
            let stdout = child.stdout.take().context("no stdout")?;
            let mut lines = BufReader::new(stdout).lines();
            let mut metrics_url = None;
            let base_url = loop {
                match lines.next() {
                    Some(Ok(line)) => {
                        if let Some(url) = line.strip_prefix("metrics on ") {
                            metrics_url = Some(url.trim().to_string());
                        }
                        if let Some(url) = line.strip_prefix("listening on ") {
                            break Some(url.trim().to_string());
                        }
                        if line.trim() == "worker running" {
                            break None;
                        }
                    }
                    Some(Err(error)) => bail!("reading {role} output failed: {error}"),
                    None => bail!("`engram {role}` exited before serving (see its stderr above)"),
                }
            };
            std::thread::spawn(move || for _ in lines {});
            Ok(Self {
                base_url,
                metrics_url: metrics_url.context("no metrics address printed")?,
                child,
            })
        })
        .await?
    }

    /// SIGTERM, then wait; returns whether it exited cleanly.
    pub fn stop(mut self) -> bool {
        use nix::sys::signal::{Signal, kill};
        use nix::unistd::Pid;
        let _ = kill(Pid::from_raw(self.child.id() as i32), Signal::SIGTERM);
        self.child
            .wait()
            .map(|status| status.success())
            .unwrap_or(false)
    }
}

impl Drop for RoleProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Run an `engram` command to completion (migrate, admin) with `environment`.
pub fn run_engram(arguments: &[&str], environment: &[(String, String)]) -> std::process::Output {
    Command::new(engram_binary())
        .args(arguments)
        .env_remove("QDRANT_URL")
        .envs(environment.iter().map(|(key, value)| (key, value)))
        .output()
        .expect("run engram")
}

/// Run an `engram` benchmark command with the test model to completion, fail the test with
/// its output unless it succeeded, print its table and return it (stdout).
pub fn run_bench(arguments: &[&str]) -> String {
    let output = run_engram(
        arguments,
        &[(
            "ENGRAM_MODEL_DIR".to_string(),
            model_dir().display().to_string(),
        )],
    );
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    println!("{stdout}");
    stdout
}

/// `engram admin set-price` on a server's data dir: `price` of one `unit` in `currency`
/// from today (a price never starts in the past). Returns the command's output.
pub fn set_price(data_dir: &Path, unit: &str, price: &str, currency: &str) -> std::process::Output {
    run_engram(
        &[
            "admin",
            "set-price",
            "--data-dir",
            &data_dir.display().to_string(),
            "--unit",
            unit,
            "--price",
            price,
            "--currency",
            currency,
        ],
        &[],
    )
}

/// The resident memory of process `pid` now (`VmRSS` of `/proc/<pid>/status`), bytes.
pub fn resident_bytes_of(pid: u32) -> Option<u64> {
    status_bytes_of(pid, "VmRSS:")
}

/// The most resident memory process `pid` has held since it started (`VmHWM`), bytes.
pub fn peak_resident_bytes_of(pid: u32) -> Option<u64> {
    status_bytes_of(pid, "VmHWM:")
}

fn status_bytes_of(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix(field))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}
