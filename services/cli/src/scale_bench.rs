//! `engram bench-scale`: one project loaded with synthetic memories that carry their own
//! (client) vectors, then what decides at scale, printed as tables: load rate, the index before
//! and after its optimizer, search latency per retrieval mode and phase at 1 and N clients,
//! while the optimizer indexes the load and beside a concurrent load, dense recall@10 against
//! exact search, and the server's memory.
//!
//! The server runs in this process and the bench client in a child process of its own (the
//! same binary, `--server-url`), so the resident memory printed is the server's alone.

use crate::bench::{percentile, progress, start_bench_server_with, timed_search};
use crate::speed_bench::{SearchFigures, Target, mean_phases};
use anyhow::{Context, Result};
use clap::Args;
use rand::SeedableRng;
use rand::rngs::StdRng;
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub struct ScaleBenchArgs {
    /// Memories in the one project.
    #[arg(long, default_value_t = 1_000_000)]
    pub memories: usize,
    /// Searches per retrieval mode once everything is loaded.
    #[arg(long, default_value_t = 300)]
    pub queries: usize,
    /// Concurrent HTTP writers while loading.
    #[arg(long, default_value_t = 4)]
    pub writers: usize,
    /// Concurrent searching clients of the throughput rows.
    #[arg(long, default_value_t = 16)]
    pub clients: usize,
    /// End-users the memories are spread over.
    #[arg(long, default_value_t = 1_000)]
    pub end_users: usize,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// The server's `--index-search-ef` (candidates kept while walking the HNSW graph).
    #[arg(long, default_value_t = crate::config::DEFAULT_SEARCH_EF)]
    pub search_ef: u64,
    /// Data dir to load into (default: a fresh temporary one, removed afterwards).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// An empty PostgreSQL database to serve from instead of the data dir's SQLite file.
    #[arg(long, value_parser = crate::config::secret)]
    pub database_url: Option<secrecy::SecretString>,
    /// Internal: run as the bench client against this server (the child process).
    #[arg(long, hide = true)]
    pub server_url: Option<String>,
    /// Internal: the server's metrics endpoint (the child process).
    #[arg(long, hide = true)]
    pub metrics_url: Option<String>,
    /// Internal: the server's process id, whose memory the child reads.
    #[arg(long, hide = true)]
    pub server_pid: Option<u32>,
}

/// The bench client reads the API key from here rather than from its command line.
const API_KEY_VARIABLE: &str = "ENGRAM_BENCH_SCALE_API_KEY";
/// Vector dimensions of the synthetic memories (all-MiniLM-L6-v2's).
const DIMENSION: usize = 384;
/// Searches `bench-scale` asks with `explain` for each mode's phases.
const SCALE_EXPLAINED_QUERIES: usize = 50;
/// Memories a chunk of the load generates at once: a million memories with vectors would be
/// ~3 GB as JSON.
const LOAD_CHUNK: usize = 20_000;

/// `engram bench-scale`: serves a fresh data dir in this process and runs the bench client in
/// a child process against it (or, with `--server-url`, is that child).
pub async fn run_scale(arguments: ScaleBenchArgs) -> Result<()> {
    if let Some(server_url) = arguments.server_url.clone() {
        return run_scale_client(arguments, server_url).await;
    }
    let telemetry = crate::telemetry::init_telemetry();
    let temporary =
        std::env::temp_dir().join(format!("engram-bench-scale-{}", uuid::Uuid::now_v7()));
    let keep_data_dir = arguments.data_dir.is_some();
    let data_dir = arguments
        .data_dir
        .clone()
        .unwrap_or_else(|| temporary.clone());
    let mut serve_arguments =
        crate::bench::bench_serve_arguments(data_dir.clone(), None, None, true)?;
    serve_arguments.qdrant.index_search_ef = arguments.search_ef;
    serve_arguments.database_url = arguments.database_url.clone();
    let (server, _, api_key) = start_bench_server_with(&serve_arguments).await?;
    println!(
        "bench-scale server: this process (pid {}), {} metadata database, embedded index, hnsw_ef {}; the client runs in a process of its own",
        std::process::id(),
        if arguments.database_url.is_some() {
            "PostgreSQL"
        } else {
            "SQLite"
        },
        arguments.search_ef
    );
    let client_run = run_client_process(&arguments, &server, &api_key).await;
    // The server stops and the data dir goes whatever became of the client.
    server.shutdown().await?;
    if !keep_data_dir {
        let _ = std::fs::remove_dir_all(&temporary);
    }
    telemetry.shutdown();
    let status = client_run?;
    anyhow::ensure!(status.success(), "the bench client failed: {status}");
    Ok(())
}

/// Runs this binary as the bench client against `server` and waits for it to end.
async fn run_client_process(
    arguments: &ScaleBenchArgs,
    server: &crate::server::EmbeddedServer,
    api_key: &str,
) -> Result<std::process::ExitStatus> {
    let executable =
        std::env::current_exe().context("cannot find this binary to run the client")?;
    tokio::process::Command::new(executable)
        .arg("bench-scale")
        .args(["--memories", &arguments.memories.to_string()])
        .args(["--queries", &arguments.queries.to_string()])
        .args(["--writers", &arguments.writers.to_string()])
        .args(["--clients", &arguments.clients.to_string()])
        .args(["--end-users", &arguments.end_users.to_string()])
        .args(["--seed", &arguments.seed.to_string()])
        .args(["--search-ef", &arguments.search_ef.to_string()])
        .args(["--server-url", &format!("http://{}", server.address)])
        .args([
            "--metrics-url",
            &format!("http://{}/metrics", server.metrics_address),
        ])
        .args(["--server-pid", &std::process::id().to_string()])
        .env(API_KEY_VARIABLE, api_key)
        .kill_on_drop(true)
        .status()
        .await
        .context("cannot start the bench client process")
}

/// One synthetic memory of the load: the n-th of the run, its end-user, text and vector.
struct ScaleMemory {
    user_id: String,
    content: String,
    vector: Vec<f32>,
}

/// Topics the synthetic vectors gather around. Uniformly random vectors have no
/// neighbourhoods at all (in 384 dimensions every pair is about as far apart), which no
/// embedding model produces and on which a graph index finds 17 % of the true ten nearest
/// (measured at 100k, hnsw_ef 128); vectors around topics are closer to what models give.
const TOPICS: usize = 2_000;
/// Spread of a vector around its topic: one memory of a topic meets another, or a query of
/// that topic, at a cosine of about 0.6, and a memory of another topic at about 0.
const TOPIC_SPREAD: f32 = 0.072;

/// The topic centres, from the seed.
struct Topics(Vec<Vec<f32>>);

impl Topics {
    fn new(seed: u64) -> Self {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x7091);
        Self((0..TOPICS).map(|_| random_unit_vector(&mut rng)).collect())
    }

    /// A vector near a random topic's centre.
    fn vector_near_one(&self, rng: &mut StdRng) -> Vec<f32> {
        use rand::Rng;
        let centre = &self.0[rng.gen_range(0..self.0.len())];
        let vector: Vec<f32> = centre
            .iter()
            .map(|component| component + rng.gen_range(-TOPIC_SPREAD..TOPIC_SPREAD))
            .collect();
        normalized(vector)
    }
}

/// The load's memories in order, from the seed: the same seed gives the same memories, so
/// exact search can regenerate them instead of keeping a million vectors in memory.
struct ScaleMemories {
    rng: StdRng,
    topics: Topics,
    end_users: usize,
    generated: usize,
}

impl ScaleMemories {
    fn new(seed: u64, end_users: usize) -> Self {
        Self {
            rng: StdRng::seed_from_u64(seed),
            topics: Topics::new(seed),
            end_users: end_users.max(1),
            generated: 0,
        }
    }

    fn next_memory(&mut self) -> ScaleMemory {
        let (_, content) = crate::bench::synthetic_memory(&mut self.rng);
        let vector = self.topics.vector_near_one(&mut self.rng);
        let user_id = format!("user-{:04}", self.generated % self.end_users);
        self.generated += 1;
        ScaleMemory {
            user_id,
            content,
            vector,
        }
    }
}

fn random_unit_vector(rng: &mut StdRng) -> Vec<f32> {
    use rand::Rng;
    normalized(
        (0..DIMENSION)
            .map(|_| rng.gen_range(-1.0f32..1.0))
            .collect(),
    )
}

fn normalized(mut vector: Vec<f32>) -> Vec<f32> {
    let norm = vector.iter().map(|c| c * c).sum::<f32>().sqrt().max(1e-12);
    vector.iter_mut().for_each(|c| *c /= norm);
    vector
}

/// The bench client: everything that talks to the server, in its own process.
async fn run_scale_client(arguments: ScaleBenchArgs, base_url: String) -> Result<()> {
    let api_key = std::env::var(API_KEY_VARIABLE)
        .with_context(|| format!("the bench client needs {API_KEY_VARIABLE}"))?;
    let metrics_url = arguments
        .metrics_url
        .clone()
        .context("the bench client needs --metrics-url")?;
    // Every request has a deadline: a hung server fails the run instead of stalling it.
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()?;
    let response = client
        .patch(format!("{base_url}/v1/project/settings"))
        .bearer_auth(&api_key)
        .json(&serde_json::json!({"embedding": {"source": "client", "dimension": DIMENSION}}))
        .send()
        .await?;
    anyhow::ensure!(
        response.status().is_success(),
        "switching the project to client vectors failed: {}",
        response.status()
    );

    let mut memories = ScaleMemories::new(arguments.seed, arguments.end_users);
    let bar = progress(arguments.memories, "load");
    let load_started = Instant::now();
    let mut loaded = 0usize;
    while loaded < arguments.memories {
        let chunk = (arguments.memories - loaded).min(LOAD_CHUNK);
        let batches = memory_batches(&mut memories, loaded, chunk);
        crate::bench::ingest_batches(
            &client,
            &base_url,
            &api_key,
            batches,
            arguments.writers,
            &bar,
        )
        .await?;
        loaded += chunk;
    }
    bar.finish_and_clear();
    // A memory counts as loaded once the index has it: the outbox is empty.
    wait_for_an_empty_outbox(&client, &metrics_url, Duration::from_secs(600)).await?;
    let load_seconds = load_started.elapsed().as_secs_f64();
    // Queries from a stream of their own, so the load's memories stay the seed's alone.
    let mut query_rng = StdRng::seed_from_u64(arguments.seed.wrapping_add(1));
    let queries: Vec<(String, Vec<f32>)> = (0..arguments.queries.max(1))
        .map(|number| {
            (
                crate::bench::synthetic_query(&mut query_rng, number),
                memories.topics.vector_near_one(&mut query_rng),
            )
        })
        .collect();
    let target = Target {
        client: client.clone(),
        base_url: base_url.clone(),
        api_key: api_key.clone(),
    };
    let hybrid_bodies: Vec<serde_json::Value> = queries
        .iter()
        .map(|(text, vector)| scale_search_body("hybrid", text, vector, false))
        .collect();

    // The other searches are timed on a built index: the optimizer gets to finish what the
    // load left, while one client searches to show what a search costs meanwhile.
    let loaded_index = index_sizes(&client, &metrics_url).await?;
    let optimizer_started = Instant::now();
    let searching = Arc::new(AtomicBool::new(true));
    let searches_during_optimizer = tokio::spawn(
        target
            .clone()
            .searches_until_stopped(hybrid_bodies.clone(), searching.clone()),
    );
    let built_index = wait_for_the_optimizer(
        &client,
        &metrics_url,
        optimizer_deadline(arguments.memories),
    )
    .await;
    let optimizer_seconds = optimizer_started.elapsed().as_secs_f64();
    searching.store(false, Ordering::Relaxed);
    let during_optimizer = searches_during_optimizer
        .await
        .context("the searches during the optimizer failed")??;
    let built_index = built_index?;
    // Each retrieval mode on its own by one client, then by many, then its phases as the
    // engine reports them (`explain`).
    let clients = arguments.clients.max(1);
    let mut by_mode = Vec::new();
    let mut dense_answers = Vec::new();
    for mode in ["dense", "keyword", "hybrid"] {
        let bar = progress(queries.len(), mode);
        let mut latencies = Vec::with_capacity(queries.len());
        for (text, vector) in &queries {
            let body = scale_search_body(mode, text, vector, false);
            latencies.push(timed_search(&client, &base_url, &api_key, &body).await?);
            bar.inc(1);
        }
        bar.finish_and_clear();
        latencies.sort();
        let bodies: Vec<serde_json::Value> = queries
            .iter()
            .map(|(text, vector)| scale_search_body(mode, text, vector, false))
            .collect();
        let many = target
            .concurrent_searches(&bodies, clients, &format!("{mode}, {clients} clients"))
            .await?;
        let phases = scale_phases(&client, &base_url, &api_key, mode, &queries).await?;
        by_mode.push((mode, latencies, many, phases));
    }
    // Dense answers ranked by similarity alone: no recency, no neighbours, no diversifying.
    let bar = progress(queries.len(), "recall");
    for (text, vector) in &queries {
        dense_answers.push(target.dense_answer_numbers(text, vector).await?);
        bar.inc(1);
    }
    bar.finish_and_clear();

    let one_client = target
        .concurrent_searches(&hybrid_bodies, 1, "1 client")
        .await?;
    let many_clients = by_mode
        .iter()
        .find(|(mode, ..)| *mode == "hybrid")
        .map(|(_, _, many, _)| many)
        .context("the hybrid searches by many clients ran above")?;
    let while_loading = target
        .searches_beside_a_load(
            &hybrid_bodies,
            &mut memories,
            arguments.memories,
            arguments.writers,
        )
        .await?;

    let server_memory = arguments.server_pid.and_then(process_memory);
    let exact = exact_nearest(
        arguments.seed,
        arguments.end_users,
        arguments.memories,
        &queries,
    );
    let recall_at_10 = recall_against_exact(&dense_answers, &exact);
    let built_after_load = wait_for_the_optimizer(
        &client,
        &metrics_url,
        optimizer_deadline(arguments.memories),
    )
    .await?;

    println!();
    println!(
        "## engram bench-scale: {} memories in one project over {} end-users (client vectors, {DIMENSION} dimensions)",
        arguments.memories,
        arguments.end_users.max(1)
    );
    println!(
        "load: {load_seconds:.0} s, {:.0} memories/s over HTTP ({} writers, batches of 100), counted until the outbox was empty",
        arguments.memories as f64 / load_seconds.max(f64::EPSILON),
        arguments.writers
    );
    println!("| index | segments | points | in HNSW-indexed segments |");
    println!("|---|---:|---:|---:|");
    for (label, sizes) in [
        ("when the load ended".to_string(), loaded_index),
        (
            format!(
                "once the optimizer was done ({optimizer_seconds:.0} s later, one client searching meanwhile)"
            ),
            built_index,
        ),
        (
            "after the search beside a load".to_string(),
            built_after_load,
        ),
    ] {
        println!(
            "| {label} | {} | {} | {} |",
            sizes.segments, sizes.points, sizes.indexed_vectors
        );
    }
    println!(
        "| retrieval | 1 client: p50 ms | p95 ms | p99 ms | {clients} clients: p50 ms | p95 ms | p99 ms | searches/s | phases at 1 client (mean ms over {SCALE_EXPLAINED_QUERIES} searches) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---|");
    for (mode, latencies, many, phases) in &by_mode {
        let phases: Vec<String> = phases
            .iter()
            .filter(|(_, mean)| *mean > 0.0)
            .map(|(phase, mean)| format!("{phase} {mean:.2}"))
            .collect();
        println!(
            "| {mode} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.1} | {} |",
            percentile(latencies, 0.50),
            percentile(latencies, 0.95),
            percentile(latencies, 0.99),
            many.p50_ms,
            many.p95_ms,
            many.p99_ms,
            many.per_second,
            phases.join(", ")
        );
    }
    println!("| hybrid search by | p50 ms | p95 ms | p99 ms | searches/s |");
    println!("|---|---:|---:|---:|---:|");
    let during_optimizer_label = format!(
        "1 client while the optimizer indexed the load ({} searches in {optimizer_seconds:.0} s)",
        during_optimizer.searches
    );
    for (label, figures) in [
        ("1 client".to_string(), &one_client),
        (format!("{clients} clients"), many_clients),
        (during_optimizer_label, &during_optimizer.figures),
        (
            format!(
                "1 client beside a load ({:.0} memories/s written)",
                while_loading.written_per_second
            ),
            &while_loading.searches,
        ),
    ] {
        println!(
            "| {label} | {:.2} | {:.2} | {:.2} | {:.1} |",
            figures.p50_ms, figures.p95_ms, figures.p99_ms, figures.per_second
        );
    }
    println!("| measure | value |");
    println!("|---|---:|");
    println!(
        "| dense recall@10 against exact search ({} queries, hnsw_ef {}) | {recall_at_10:.3} |",
        queries.len(),
        arguments.search_ef
    );
    match server_memory {
        Some(memory) => {
            println!(
                "| server VmRSS now (its own process) | {:.0} MiB |",
                memory.resident_mib
            );
            println!("| of which anonymous | {:.0} MiB |", memory.anonymous_mib);
            println!(
                "| of which file-backed (memory-mapped index files) | {:.0} MiB |",
                memory.file_mib
            );
            println!("| server peak VmRSS (VmHWM) | {:.0} MiB |", memory.peak_mib);
        }
        None => println!("| server memory | not readable (no /proc/<pid>/status) |"),
    }
    Ok(())
}

/// `chunk` memories from `memories` in request batches of 100, each with its number in the
/// run as metadata (`n`), which is how recall finds them again.
fn memory_batches(
    memories: &mut ScaleMemories,
    first_number: usize,
    chunk: usize,
) -> Vec<Vec<serde_json::Value>> {
    (0..chunk)
        .map(|offset| {
            let memory = memories.next_memory();
            serde_json::json!({
                "content": memory.content,
                "user_id": memory.user_id,
                "kind": "semantic",
                "embedding": memory.vector,
                "metadata": {"n": first_number + offset},
            })
        })
        .collect::<Vec<_>>()
        .chunks(100)
        .map(<[serde_json::Value]>::to_vec)
        .collect()
}

/// The searches one client made while the optimizer finished the load's index.
struct SearchesDuringOptimizer {
    searches: usize,
    figures: SearchFigures,
}

struct SearchesBesideALoad {
    searches: SearchFigures,
    written_per_second: f64,
}

impl Target {
    /// The numbers (`metadata.n`) of the ten memories a dense search ranks first.
    async fn dense_answer_numbers(&self, text: &str, vector: &[f32]) -> Result<Vec<u64>> {
        let body = serde_json::json!({
            "query": text,
            "query_vector": vector,
            "top_k": 10,
            "retrieval": "dense",
            "recency_weight": 0,
            "neighbour_weight": 0,
            "diversify": false,
        });
        let answer: serde_json::Value = self
            .client
            .post(format!("{}/v1/memories/search", self.base_url))
            .bearer_auth(&self.api_key)
            .json(&body)
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        let results = answer["results"]
            .as_array()
            .context("a search answer without results")?;
        Ok(results
            .iter()
            .filter_map(|result| result["memory"]["metadata"]["n"].as_u64())
            .collect())
    }

    /// Every body once, by `clients` concurrent clients each taking the next in turn.
    async fn concurrent_searches(
        &self,
        bodies: &[serde_json::Value],
        clients: usize,
        label: &str,
    ) -> Result<SearchFigures> {
        let next = Arc::new(AtomicUsize::new(0));
        let bodies = Arc::new(bodies.to_vec());
        let bar = progress(bodies.len(), label);
        let started = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..clients.max(1) {
            let (next, bodies, target, bar) =
                (next.clone(), bodies.clone(), self.clone(), bar.clone());
            tasks.push(tokio::spawn(async move {
                let mut latencies = Vec::new();
                loop {
                    let number = next.fetch_add(1, Ordering::Relaxed);
                    let Some(body) = bodies.get(number) else {
                        return Ok::<Vec<Duration>, anyhow::Error>(latencies);
                    };
                    latencies.push(
                        timed_search(&target.client, &target.base_url, &target.api_key, body)
                            .await?,
                    );
                    bar.inc(1);
                }
            }));
        }
        let mut latencies = Vec::with_capacity(bodies.len());
        for task in tasks {
            latencies.extend(task.await.context("search task failed")??);
        }
        let elapsed = started.elapsed().as_secs_f64();
        bar.finish_and_clear();
        Ok(SearchFigures::of(latencies, elapsed))
    }

    /// The bodies by one client, round and round, until `searching` turns false (at least
    /// one search, so the figures are never of nothing).
    async fn searches_until_stopped(
        self,
        bodies: Vec<serde_json::Value>,
        searching: Arc<AtomicBool>,
    ) -> Result<SearchesDuringOptimizer> {
        let started = Instant::now();
        let mut latencies = Vec::new();
        for body in bodies.iter().cycle() {
            latencies.push(timed_search(&self.client, &self.base_url, &self.api_key, body).await?);
            if !searching.load(Ordering::Relaxed) {
                break;
            }
        }
        let elapsed = started.elapsed().as_secs_f64();
        Ok(SearchesDuringOptimizer {
            searches: latencies.len(),
            figures: SearchFigures::of(latencies, elapsed),
        })
    }

    /// The bodies by one client while `writers` post new memories (batches of 100, continuing
    /// the run's numbering) until the searches are done; the optimizer runs meanwhile.
    async fn searches_beside_a_load(
        &self,
        bodies: &[serde_json::Value],
        memories: &mut ScaleMemories,
        first_number: usize,
        writers: usize,
    ) -> Result<SearchesBesideALoad> {
        // Enough for the searches to run their course; the writers stop when they are done.
        let batches = memory_batches(memories, first_number, (bodies.len() * 200).max(1_000));
        let queue = Arc::new(tokio::sync::Mutex::new(batches));
        let writing = Arc::new(AtomicBool::new(true));
        let written = Arc::new(AtomicUsize::new(0));
        let started = Instant::now();
        let mut writer_tasks = Vec::new();
        for _ in 0..writers.max(1) {
            let (queue, writing, written, target) = (
                queue.clone(),
                writing.clone(),
                written.clone(),
                self.clone(),
            );
            writer_tasks.push(tokio::spawn(async move {
                while writing.load(Ordering::Relaxed) {
                    let Some(batch) = queue.lock().await.pop() else {
                        break;
                    };
                    let count = batch.len();
                    crate::bench::post_memories(
                        &target.client,
                        &target.base_url,
                        &target.api_key,
                        batch,
                    )
                    .await?;
                    written.fetch_add(count, Ordering::Relaxed);
                }
                Ok::<(), anyhow::Error>(())
            }));
        }
        let searches = self.concurrent_searches(bodies, 1, "beside a load").await;
        writing.store(false, Ordering::Relaxed);
        let elapsed = started.elapsed().as_secs_f64();
        for task in writer_tasks {
            task.await.context("writer task failed")??;
        }
        Ok(SearchesBesideALoad {
            searches: searches?,
            written_per_second: written.load(Ordering::Relaxed) as f64 / elapsed.max(f64::EPSILON),
        })
    }
}

/// A project-wide search of `bench-scale`: the query text and the client's query vector.
fn scale_search_body(mode: &str, text: &str, vector: &[f32], explain: bool) -> serde_json::Value {
    serde_json::json!({
        "query": text,
        "query_vector": vector,
        "top_k": 10,
        "retrieval": mode,
        "explain": explain,
    })
}

/// Mean milliseconds per engine phase of `mode` over the last queries of the list.
async fn scale_phases(
    client: &reqwest::Client,
    base_url: &str,
    api_key: &str,
    mode: &str,
    queries: &[(String, Vec<f32>)],
) -> Result<Vec<(&'static str, f64)>> {
    let bodies = queries
        .iter()
        .rev()
        .take(SCALE_EXPLAINED_QUERIES)
        .map(|(text, vector)| scale_search_body(mode, text, vector, true));
    mean_phases(client, base_url, api_key, bodies).await
}

/// The numbers of the ten memories nearest each query by cosine, over the first `count`
/// memories of the run, regenerated from the seed (one pass, every query at once).
fn exact_nearest(
    seed: u64,
    end_users: usize,
    count: usize,
    queries: &[(String, Vec<f32>)],
) -> Vec<Vec<u64>> {
    let mut memories = ScaleMemories::new(seed, end_users);
    let bar = progress(count, "exact");
    // Per query, the ten best (similarity, number) so far, worst first.
    let mut best: Vec<Vec<(f32, u64)>> = vec![Vec::with_capacity(11); queries.len()];
    for number in 0..count {
        let memory = memories.next_memory();
        for ((_, query), kept) in queries.iter().zip(best.iter_mut()) {
            let similarity: f32 = query.iter().zip(&memory.vector).map(|(a, b)| a * b).sum();
            if kept.len() < 10 || kept.first().is_some_and(|(worst, _)| similarity > *worst) {
                let position =
                    kept.partition_point(|(kept_similarity, _)| *kept_similarity < similarity);
                kept.insert(position, (similarity, number as u64));
                if kept.len() > 10 {
                    kept.remove(0);
                }
            }
        }
        if number % 10_000 == 0 {
            bar.set_position(number as u64);
        }
    }
    bar.finish_and_clear();
    best.into_iter()
        .map(|kept| kept.into_iter().map(|(_, number)| number).collect())
        .collect()
}

/// Mean share of the exact ten nearest that the search returned.
fn recall_against_exact(answers: &[Vec<u64>], exact: &[Vec<u64>]) -> f64 {
    let shares: Vec<f64> = answers
        .iter()
        .zip(exact)
        .filter(|(_, truth)| !truth.is_empty())
        .map(|(answer, truth)| {
            let truth: HashSet<&u64> = truth.iter().collect();
            answer
                .iter()
                .filter(|number| truth.contains(number))
                .count() as f64
                / truth.len() as f64
        })
        .collect();
    shares.iter().sum::<f64>() / shares.len().max(1) as f64
}

/// A process's resident memory as the kernel reports it.
struct ProcessMemory {
    resident_mib: f64,
    anonymous_mib: f64,
    file_mib: f64,
    peak_mib: f64,
}

fn process_memory(pid: u32) -> Option<ProcessMemory> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let mib = |field: &str| -> Option<f64> {
        let line = status.lines().find(|line| line.starts_with(field))?;
        let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib / 1024.0)
    };
    Some(ProcessMemory {
        resident_mib: mib("VmRSS:")?,
        anonymous_mib: mib("RssAnon:")?,
        file_mib: mib("RssFile:")?,
        peak_mib: mib("VmHWM:")?,
    })
}

/// The embedded indexes' sizes and optimizer state, summed over the indexes the server opened,
/// as its metrics report them.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct IndexSizes {
    segments: u64,
    points: u64,
    indexed_vectors: u64,
    unoptimized_writes: u64,
    optimizing: u64,
    passes: u64,
}

async fn metrics_text(client: &reqwest::Client, metrics_url: &str) -> Result<String> {
    Ok(client
        .get(metrics_url)
        .send()
        .await?
        .error_for_status()?
        .text()
        .await?)
}

/// The sum of a metric's series in Prometheus text.
fn metric_sum(text: &str, name: &str) -> u64 {
    text.lines()
        .filter(|line| {
            line.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// Waits until the outbox backlog reads 0 twice, a second apart (the gauge is sampled by the
/// indexer, so one 0 may predate the last writes).
pub(crate) async fn wait_for_an_empty_outbox(
    client: &reqwest::Client,
    metrics_url: &str,
    deadline: Duration,
) -> Result<()> {
    let started = Instant::now();
    let mut empty_reads = 0;
    loop {
        let backlog = metric_sum(
            &metrics_text(client, metrics_url).await?,
            engram_worker::OUTBOX_BACKLOG,
        );
        empty_reads = if backlog == 0 { empty_reads + 1 } else { 0 };
        if empty_reads >= 2 {
            return Ok(());
        }
        anyhow::ensure!(
            started.elapsed() < deadline,
            "gave up after {deadline:?} waiting for the outbox to empty after the load (backlog {backlog})"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn index_sizes(client: &reqwest::Client, metrics_url: &str) -> Result<IndexSizes> {
    let text = metrics_text(client, metrics_url).await?;
    let sum = |name: &str| metric_sum(&text, name);
    Ok(IndexSizes {
        segments: sum(engram_index::INDEX_SEGMENTS),
        points: sum(engram_index::INDEX_POINTS),
        indexed_vectors: sum(engram_index::INDEX_INDEXED_VECTORS),
        unoptimized_writes: sum(engram_index::INDEX_UNOPTIMIZED_WRITES),
        optimizing: sum(engram_index::INDEX_OPTIMIZING),
        passes: sum(engram_index::INDEX_OPTIMIZER_PASSES_TOTAL),
    })
}

/// How long the optimizer may take after a load of `memories`: ten minutes, and about half
/// an hour more per million.
pub(crate) fn optimizer_deadline(memories: usize) -> Duration {
    Duration::from_secs(600 + memories as u64 / 500)
}

/// Waits until no optimizer pass runs and none of the writes is left unseen, showing the
/// indexed share as it grows. The two figures are published by writes and passes, which may
/// overtake each other for up to one maintenance tick (the tick then republishes them), so
/// "done" is the state holding across more than a tick.
pub(crate) async fn wait_for_the_optimizer(
    client: &reqwest::Client,
    metrics_url: &str,
    deadline: Duration,
) -> Result<IndexSizes> {
    /// Longer than the embedded index's maintenance tick (1 s).
    const SETTLED_FOR: Duration = Duration::from_millis(2_500);
    let started = Instant::now();
    let mut sizes = index_sizes(client, metrics_url).await?;
    let bar = progress(sizes.points as usize, "optimize");
    let mut idle_since: Option<(Instant, u64)> = None;
    loop {
        bar.set_length(sizes.points);
        bar.set_position(sizes.indexed_vectors.min(sizes.points));
        let idle = sizes.unoptimized_writes == 0 && sizes.optimizing == 0;
        idle_since = match idle_since {
            // A pass that began and ended between two reads shows as a new pass count.
            Some((since, passes)) if idle && passes == sizes.passes => Some((since, passes)),
            _ if idle => Some((Instant::now(), sizes.passes)),
            _ => None,
        };
        if idle_since.is_some_and(|(since, _)| since.elapsed() >= SETTLED_FOR) {
            bar.finish_and_clear();
            return Ok(sizes);
        }
        anyhow::ensure!(
            started.elapsed() < deadline,
            "gave up after {deadline:?} waiting for the index optimizer to finish after the load \
             (last seen: {sizes:?})"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
        sizes = index_sizes(client, metrics_url).await?;
    }
}
