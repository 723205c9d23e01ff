//! `engram bench`: loads N synthetic memories (fixed seed) through the HTTP API of an
//! embedded server and prints ingest rate and search latency, over HTTP and direct.

use crate::config::{EngramConfig, ServeArgs};
use crate::server::EmbeddedServer;
use anyhow::{Context, Result};
use clap::Args;
use engram_engine::SearchRequest;
use indicatif::{ProgressBar, ProgressStyle};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Memories to load.
    #[arg(long, default_value_t = 10_000)]
    pub memories: usize,
    /// Searches to time (each with a distinct query).
    #[arg(long, default_value_t = 300)]
    pub queries: usize,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Concurrent HTTP writers during ingest.
    #[arg(long, default_value_t = 2)]
    pub writers: usize,
    /// Data dir to use (default: a fresh temporary one, removed afterwards).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    #[arg(long, env = "ENGRAM_MODEL_DIR")]
    pub model_dir: Option<PathBuf>,
    /// Threads running the embedding model (default: the machine's cores).
    #[arg(long, env = "ENGRAM_EMBED_THREADS")]
    pub embed_threads: Option<usize>,
    /// Run everything three times — metering off, on, and on with a budget and quotas checked
    /// on every request — and print the overhead.
    #[arg(long, default_value_t = false)]
    pub compare_metering: bool,
    /// Time searches with recall events recorded and not, in alternating blocks on one
    /// server, and print the overhead of recording.
    #[arg(long, default_value_t = false)]
    pub compare_recall_events: bool,
    /// Time searches idle, then during a storm of failed console sign-ins (this many at a
    /// time, unknown e-mails, from this machine), and print both side by side.
    #[arg(long)]
    pub login_storm: Option<usize>,
}

/// What one run measured.
struct Figures {
    writes_per_second: f64,
    searches_per_second: f64,
    search_p50_ms: f64,
}

const PEOPLE: &[&str] = &[
    "Ana", "Bo", "Chen", "Dara", "Eli", "Fatima", "Gus", "Hana", "Ivan", "Jun", "Kofi", "Lena",
];
const VERBS: &[&str] = &[
    "prefers",
    "dislikes",
    "is learning",
    "often mentions",
    "asked about",
    "booked",
    "wants to try",
    "recommended",
];
const THINGS: &[&str] = &[
    "green tea",
    "trail running",
    "jazz piano",
    "Rust programming",
    "sourdough baking",
    "Kyoto temples",
    "vegan recipes",
    "chess openings",
    "watercolor painting",
    "cold brew coffee",
    "mountain biking",
    "French cinema",
    "board games",
    "home gardening",
    "sci-fi novels",
    "salsa dancing",
    "bird watching",
    "espresso machines",
    "yoga classes",
    "sushi",
];
const CONTEXTS: &[&str] = &[
    "on weekends",
    "before work",
    "with their sister",
    "during holidays",
    "after the conference",
    "every Monday",
    "when travelling",
    "since last spring",
    "at the office",
    "with friends",
];

pub(crate) fn synthetic_memory(rng: &mut StdRng) -> (String, String) {
    let person = PEOPLE.choose(rng).copied().unwrap_or("Ana");
    let sentence = format!(
        "{} {} {} {} (note {}).",
        person,
        VERBS.choose(rng).copied().unwrap_or("prefers"),
        THINGS.choose(rng).copied().unwrap_or("tea"),
        CONTEXTS.choose(rng).copied().unwrap_or("often"),
        rng.gen_range(0..1_000_000)
    );
    (format!("user-{}", person.to_lowercase()), sentence)
}

pub(crate) fn synthetic_query(rng: &mut StdRng, number: usize) -> String {
    format!(
        "what does {} think about {} {} #{number}",
        PEOPLE.choose(rng).copied().unwrap_or("Ana"),
        THINGS.choose(rng).copied().unwrap_or("tea"),
        CONTEXTS.choose(rng).copied().unwrap_or("often"),
    )
}

pub(crate) fn percentile(sorted: &[Duration], fraction: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let position = ((sorted.len() as f64 - 1.0) * fraction).round() as usize;
    sorted[position.min(sorted.len() - 1)].as_secs_f64() * 1000.0
}

pub(crate) fn progress(length: usize, label: &str) -> ProgressBar {
    let bar = ProgressBar::new(length as u64);
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{label:>8} [{{bar:40}}] {{pos}}/{{len}} {{per_sec}} eta {{eta}}"
        ))
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}

pub async fn run(arguments: BenchArgs) -> Result<()> {
    let telemetry = crate::telemetry::init_telemetry();
    if arguments.compare_recall_events {
        compare_recall_events(&arguments).await?;
        telemetry.shutdown();
        return Ok(());
    }
    if let Some(concurrent_logins) = arguments.login_storm {
        search_during_login_storm(&arguments, concurrent_logins).await?;
        telemetry.shutdown();
        return Ok(());
    }
    if !arguments.compare_metering {
        measure(&arguments, true, false, arguments.data_dir.clone()).await?;
        telemetry.shutdown();
        return Ok(());
    }
    // Same seed, fresh data dirs: every run does exactly the same work. The machine's speed
    // drifts over minutes, so the modes run in the order off, on, limits, limits, on, off and
    // each mode's figures are the mean of its two runs.
    let modes = [
        ("off", false, false),
        ("on", true, false),
        ("on + budget and quotas", true, true),
    ];
    let order = [0usize, 1, 2, 2, 1, 0];
    let mut runs: Vec<Vec<Figures>> = vec![Vec::new(), Vec::new(), Vec::new()];
    for mode in order {
        let (label, metering, with_limits) = modes[mode];
        println!("## metering {label}");
        runs[mode].push(measure(&arguments, metering, with_limits, None).await?);
    }
    let mean = |figures: &[Figures], pick: fn(&Figures) -> f64| {
        figures.iter().map(pick).sum::<f64>() / figures.len().max(1) as f64
    };
    let writes = |mode: usize| mean(&runs[mode], |f| f.writes_per_second);
    let searches = |mode: usize| mean(&runs[mode], |f| f.searches_per_second);
    let p50 = |mode: usize| mean(&runs[mode], |f| f.search_p50_ms);
    let overhead = |without: f64, with: f64| (without - with) / without * 100.0;
    println!("| metering | writes/s | searches/s | search p50 ms |");
    println!("|---|---:|---:|---:|");
    for (mode, (label, _, _)) in modes.iter().enumerate() {
        println!(
            "| {label} | {:.1} | {:.1} | {:.2} |",
            writes(mode),
            searches(mode),
            p50(mode)
        );
    }
    println!(
        "metering overhead: writes {:+.2} %, searches {:+.2} % (positive = slower with metering)",
        overhead(writes(0), writes(1)),
        overhead(searches(0), searches(1))
    );
    println!(
        "metering + limits overhead: writes {:+.2} %, searches {:+.2} %",
        overhead(writes(0), writes(2)),
        overhead(searches(0), searches(2))
    );
    telemetry.shutdown();
    Ok(())
}

async fn measure(
    arguments: &BenchArgs,
    metering: bool,
    with_limits: bool,
    data_dir: Option<PathBuf>,
) -> Result<Figures> {
    let temporary = std::env::temp_dir().join(format!("engram-bench-{}", uuid::Uuid::now_v7()));
    let keep_data_dir = data_dir.is_some();
    let data_dir = data_dir.unwrap_or_else(|| temporary.clone());
    let (server, api_key) = start_server(arguments, &data_dir, metering).await?;
    let base_url = format!("http://{}", server.address);
    let client = reqwest::Client::new();
    let mut rng = StdRng::seed_from_u64(arguments.seed);
    if with_limits {
        // Limits far above the load: every request pays for the checks, none is refused.
        let response = client
            .put(format!("{base_url}/v1/project/limits"))
            .bearer_auth(&api_key)
            .json(&serde_json::json!({
                "monthly_budget": {"amount_micros": 1_000_000_000_000i64, "currency": "USD", "hard_cap": true},
                "monthly_quotas": {"memories_written": 1_000_000_000u64, "searches": 1_000_000_000u64}
            }))
            .send()
            .await?;
        anyhow::ensure!(
            response.status().is_success(),
            "setting limits failed: {}",
            response.status()
        );
    }

    // Ingest through the public API, 100 per request, a few writers at once.
    let batches = synthetic_batches(&mut rng, arguments.memories);
    let bar = progress(arguments.memories, "ingest");
    let ingest_started = Instant::now();
    ingest_batches(
        &client,
        &base_url,
        &api_key,
        batches,
        arguments.writers,
        &bar,
    )
    .await?;
    let ingest_elapsed = ingest_started.elapsed();
    bar.finish_and_clear();

    let queries: Vec<String> = (0..arguments.queries)
        .map(|number| synthetic_query(&mut rng, number))
        .collect();
    let (principal, _) = server
        .engine
        .authenticate(&api_key, engram_core::audit::Actor::command_line("bench"))
        .await?
        .context("bootstrap key did not authenticate")?;

    // Search over HTTP (embedding included: every query is new to the cache).
    let bar = progress(queries.len(), "http");
    let searches_started = Instant::now();
    let mut http_latencies = Vec::with_capacity(queries.len());
    for query in &queries {
        let body = serde_json::json!({"query": query, "top_k": 10});
        http_latencies.push(timed_search(&client, &base_url, &api_key, &body).await?);
        bar.inc(1);
    }
    let searches_elapsed = searches_started.elapsed();
    bar.finish_and_clear();

    // The same queries straight on the engine, with a cold embedding cache again.
    server.engine.clear_query_cache();
    let bar = progress(queries.len(), "direct");
    let mut direct_latencies = Vec::with_capacity(queries.len());
    for query in &queries {
        let request = engram_core::search::SearchMemoriesRequest {
            request: SearchRequest {
                query: query.clone(),
                subject: Default::default(),
                top_k: 10,
                ..SearchRequest::default()
            },
            caller_tuning: Default::default(),
            profile: None,
            context_tokens: None,
            trace_id: None,
            run_id: None,
        };
        let started = Instant::now();
        // The search use case, as every door calls it: the HTTP figures above less this is
        // what the HTTP door costs.
        server
            .engine
            .search_memories_for(&principal, request)
            .await?;
        direct_latencies.push(started.elapsed());
        bar.inc(1);
    }
    bar.finish_and_clear();

    http_latencies.sort();
    direct_latencies.sort();
    let stored = arguments.memories;
    println!(
        "engram bench: {} memories (seed {}), {} queries, top_k 10",
        stored,
        arguments.seed,
        queries.len()
    );
    println!(
        "ingest: {:.1} s, {:.0} memories/s over HTTP ({} writers, batches of 100, embedding + index included)",
        ingest_elapsed.as_secs_f64(),
        arguments.memories as f64 / ingest_elapsed.as_secs_f64(),
        arguments.writers
    );
    println!("| path | p50 ms | p95 ms | p99 ms |");
    println!("|---|---:|---:|---:|");
    for (label, latencies) in [
        ("HTTP search (query embedding included)", &http_latencies),
        ("engine search, no HTTP", &direct_latencies),
    ] {
        println!(
            "| {label} | {:.2} | {:.2} | {:.2} |",
            percentile(latencies, 0.50),
            percentile(latencies, 0.95),
            percentile(latencies, 0.99)
        );
    }
    let ratio = percentile(&http_latencies, 0.50) / percentile(&direct_latencies, 0.50).max(1e-9);
    println!("HTTP / direct p50 ratio: {ratio:.2}");
    server.shutdown().await?;
    if !keep_data_dir {
        let _ = std::fs::remove_dir_all(&temporary);
    }
    Ok(Figures {
        writes_per_second: arguments.memories as f64 / ingest_elapsed.as_secs_f64(),
        searches_per_second: queries.len() as f64 / searches_elapsed.as_secs_f64(),
        search_p50_ms: percentile(&http_latencies, 0.50),
    })
}

/// Search latency idle and during a storm of failed console sign-ins (`concurrent_logins` in
/// flight at all times), on one server: what a stranger's storm costs the API's users.
async fn search_during_login_storm(arguments: &BenchArgs, concurrent_logins: usize) -> Result<()> {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let data_dir = std::env::temp_dir().join(format!("engram-bench-{}", uuid::Uuid::now_v7()));
    let (server, api_key) = start_server(arguments, &data_dir, true).await?;
    let base_url = format!("http://{}", server.address);
    let client = reqwest::Client::new();
    let queries = load_synthetic_set(arguments, &client, &base_url, &api_key).await?;
    let time_searches = |label: &'static str| {
        let (client, base_url, api_key, queries) = (
            client.clone(),
            base_url.clone(),
            api_key.clone(),
            queries.clone(),
        );
        async move {
            let bar = progress(queries.len(), label);
            let mut latencies = Vec::with_capacity(queries.len());
            for query in &queries {
                // A fresh query each time: the embedding is part of what is measured.
                let body = serde_json::json!({"query": format!("{query} ({label})"), "top_k": 10});
                latencies.push(timed_search(&client, &base_url, &api_key, &body).await?);
                bar.inc(1);
            }
            bar.finish_and_clear();
            latencies.sort();
            anyhow::Ok(latencies)
        }
    };
    let idle = time_searches("idle").await?;
    let resident_idle = resident_memory_mib();

    let storming = Arc::new(AtomicBool::new(true));
    let mut stormers = tokio::task::JoinSet::new();
    for stormer in 0..concurrent_logins.max(1) {
        let (storming, login_url) = (storming.clone(), format!("{base_url}/console/api/login"));
        let http = reqwest::Client::new();
        stormers.spawn(async move {
            let mut answers: std::collections::BTreeMap<u16, u64> = Default::default();
            let mut attempt = 0u64;
            while storming.load(Ordering::Relaxed) {
                attempt += 1;
                let status = http
                    .post(&login_url)
                    .form(&[
                        ("email", format!("stranger-{stormer}-{attempt}@example.com")),
                        ("password", "not a credential".to_string()),
                    ])
                    .send()
                    .await
                    .map(|response| response.status().as_u16())
                    .unwrap_or(0);
                *answers.entry(status).or_default() += 1;
            }
            answers
        });
    }
    let storm_started = Instant::now();
    let during = time_searches("storm").await?;
    let resident_storm = resident_memory_mib();
    storming.store(false, Ordering::Relaxed);
    let mut answers: std::collections::BTreeMap<u16, u64> = Default::default();
    while let Some(stormer) = stormers.join_next().await {
        for (status, count) in stormer? {
            *answers.entry(status).or_default() += count;
        }
    }
    let storm_seconds = storm_started.elapsed().as_secs_f64();
    let logins: u64 = answers.values().sum();
    println!(
        "engram bench --login-storm: {} memories, {} searches each idle and during {concurrent_logins} concurrent failed console sign-ins",
        arguments.memories,
        queries.len()
    );
    println!("| search over HTTP | p50 ms | p95 ms | p99 ms |");
    println!("|---|---:|---:|---:|");
    for (label, latencies) in [("idle", &idle), ("during the login storm", &during)] {
        println!(
            "| {label} | {:.2} | {:.2} | {:.2} |",
            percentile(latencies, 0.50),
            percentile(latencies, 0.95),
            percentile(latencies, 0.99)
        );
    }
    println!(
        "login storm: {logins} sign-ins in {storm_seconds:.1} s ({:.0}/s), answered {answers:?} (401 = password checked, 429/503 = refused before hashing)",
        logins as f64 / storm_seconds.max(1e-9)
    );
    if let (Some(idle), Some(storm)) = (resident_idle, resident_storm) {
        println!(
            "resident memory (server and this client, one process): {idle:.0} MiB idle, {storm:.0} MiB at the end of the storm"
        );
    }
    server.shutdown().await?;
    let _ = std::fs::remove_dir_all(&data_dir);
    Ok(())
}

/// Ingest `arguments.memories` synthetic memories (fixed seed) over HTTP with a progress bar;
/// the `arguments.queries` queries drawn from the same seed after them.
async fn load_synthetic_set(
    arguments: &BenchArgs,
    client: &reqwest::Client,
    base_url: &str,
    api_key: &str,
) -> Result<Vec<String>> {
    let mut rng = StdRng::seed_from_u64(arguments.seed);
    let batches = synthetic_batches(&mut rng, arguments.memories);
    let bar = progress(arguments.memories, "ingest");
    ingest_batches(client, base_url, api_key, batches, arguments.writers, &bar).await?;
    bar.finish_and_clear();
    Ok((0..arguments.queries)
        .map(|number| synthetic_query(&mut rng, number))
        .collect())
}

/// An embedded server on a fresh data dir and free ports, as the benchmarks run it (no rate
/// limits, no LLM, the embedded index): the server, its configuration and its bootstrap key.
pub(crate) async fn start_bench_server(
    data_dir: &std::path::Path,
    model_dir: Option<PathBuf>,
    embed_threads: Option<usize>,
    metering: bool,
) -> Result<(EmbeddedServer, EngramConfig, String)> {
    let serve_arguments =
        bench_serve_arguments(data_dir.to_path_buf(), model_dir, embed_threads, metering)?;
    start_bench_server_with(&serve_arguments).await
}

/// [`start_bench_server`] with arguments the caller adjusted.
pub(crate) async fn start_bench_server_with(
    serve_arguments: &ServeArgs,
) -> Result<(EmbeddedServer, EngramConfig, String)> {
    let config = EngramConfig::resolve(serve_arguments, crate::config::Role::AllInOne);
    let server = EmbeddedServer::start(&config).await?;
    let api_key = match &server.bootstrap {
        Some(bootstrap) => bootstrap.api_key.clone(),
        None => {
            anyhow::bail!("a benchmark needs a fresh data dir (it reads the bootstrap API key)")
        }
    };
    Ok((server, config, api_key))
}

async fn start_server(
    arguments: &BenchArgs,
    data_dir: &std::path::Path,
    metering: bool,
) -> Result<(EmbeddedServer, String)> {
    let (server, _, api_key) = start_bench_server(
        data_dir,
        arguments.model_dir.clone(),
        arguments.embed_threads,
        metering,
    )
    .await?;
    Ok((server, api_key))
}

/// One search through the HTTP API with `body`; how long it took, answer read in full.
pub(crate) async fn timed_search(
    client: &reqwest::Client,
    base_url: &str,
    api_key: &str,
    body: &serde_json::Value,
) -> Result<Duration> {
    let started = Instant::now();
    let response = client
        .post(format!("{base_url}/v1/memories/search"))
        .bearer_auth(api_key)
        .json(body)
        .send()
        .await?;
    anyhow::ensure!(
        response.status().is_success(),
        "search failed: {}",
        response.status()
    );
    let _ = response.bytes().await?;
    Ok(started.elapsed())
}

/// One `POST /v1/memories` of `memories`; an answer other than success is an error.
pub(crate) async fn post_memories(
    client: &reqwest::Client,
    base_url: &str,
    api_key: &str,
    memories: Vec<serde_json::Value>,
) -> Result<()> {
    let response = client
        .post(format!("{base_url}/v1/memories"))
        .bearer_auth(api_key)
        .json(&serde_json::json!({"memories": memories}))
        .send()
        .await?;
    anyhow::ensure!(
        response.status().is_success(),
        "ingest failed: {}",
        response.status()
    );
    Ok(())
}

/// `memories` synthetic memories in request batches of 100.
fn synthetic_batches(rng: &mut StdRng, memories: usize) -> Vec<Vec<serde_json::Value>> {
    (0..memories)
        .map(|_| {
            let (user_id, content) = synthetic_memory(rng);
            serde_json::json!({"content": content, "user_id": user_id, "kind": "semantic"})
        })
        .collect::<Vec<_>>()
        .chunks(100)
        .map(<[serde_json::Value]>::to_vec)
        .collect()
}

/// Post `batches` of memories through the API with `writers` concurrent writers.
pub(crate) async fn ingest_batches(
    client: &reqwest::Client,
    base_url: &str,
    api_key: &str,
    batches: Vec<Vec<serde_json::Value>>,
    writers: usize,
    bar: &ProgressBar,
) -> Result<()> {
    let queue = std::sync::Arc::new(tokio::sync::Mutex::new(batches));
    let mut tasks = Vec::new();
    for _ in 0..writers.max(1) {
        let queue = queue.clone();
        let client = client.clone();
        let base_url = base_url.to_string();
        let api_key = api_key.to_string();
        let bar = bar.clone();
        tasks.push(tokio::spawn(async move {
            loop {
                let Some(batch) = queue.lock().await.pop() else {
                    return Ok::<(), anyhow::Error>(());
                };
                let count = batch.len();
                post_memories(&client, &base_url, &api_key, batch).await?;
                bar.inc(count as u64);
            }
        }));
    }
    for task in tasks {
        task.await.context("writer task failed")??;
    }
    Ok(())
}

/// `--compare-recall-events`: one server and data set; the same queries in alternating blocks
/// with recall events recorded (`full`) and not (`off`), from `clients` concurrent clients;
/// prints latency percentiles, throughput and the overhead of recording.
async fn compare_recall_events(arguments: &BenchArgs) -> Result<()> {
    const ROUNDS: usize = 6;
    const CLIENTS: usize = 4;
    let data_dir = std::env::temp_dir().join(format!("engram-bench-{}", uuid::Uuid::now_v7()));
    let (server, api_key) = start_server(arguments, &data_dir, true).await?;
    let base_url = format!("http://{}", server.address);
    let client = reqwest::Client::new();
    let queries = load_synthetic_set(arguments, &client, &base_url, &api_key).await?;
    let set_recording = async |mode: &str| -> Result<()> {
        let response = client
            .patch(format!("{base_url}/v1/project/settings"))
            .bearer_auth(&api_key)
            .json(&serde_json::json!({"recall_events": mode}))
            .send()
            .await?;
        anyhow::ensure!(
            response.status().is_success(),
            "settings: {}",
            response.status()
        );
        Ok(())
    };
    // One block: every query once, spread over CLIENTS concurrent clients.
    let block = async |label: &str| -> Result<(Vec<Duration>, Duration)> {
        let bar = progress(queries.len(), label);
        let queue = std::sync::Arc::new(tokio::sync::Mutex::new(queries.clone()));
        let started = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..CLIENTS {
            let queue = queue.clone();
            let client = client.clone();
            let url = format!("{base_url}/v1/memories/search");
            let api_key = api_key.clone();
            let bar = bar.clone();
            tasks.push(tokio::spawn(async move {
                let mut latencies = Vec::new();
                loop {
                    let Some(query) = queue.lock().await.pop() else {
                        return Ok::<_, anyhow::Error>(latencies);
                    };
                    let sent = Instant::now();
                    let response = client
                        .post(&url)
                        .bearer_auth(&api_key)
                        .json(&serde_json::json!({"query": query, "top_k": 10}))
                        .send()
                        .await?;
                    anyhow::ensure!(
                        response.status().is_success(),
                        "search: {}",
                        response.status()
                    );
                    let _ = response.bytes().await?;
                    latencies.push(sent.elapsed());
                    bar.inc(1);
                }
            }));
        }
        let mut latencies = Vec::new();
        for task in tasks {
            latencies.extend(task.await.context("search client failed")??);
        }
        let elapsed = started.elapsed();
        bar.finish_and_clear();
        Ok((latencies, elapsed))
    };
    // Warm-up without recording: every query embedded once, so both modes hit the cache
    // and the comparison is about recording, not the model.
    set_recording("off").await?;
    block("warm-up").await?;
    let mut latencies: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
    let mut elapsed = [Duration::ZERO, Duration::ZERO];
    // The machine's speed drifts: the modes alternate, each round starting with the other.
    for round in 0..ROUNDS {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for mode in order {
            set_recording(["full", "off"][mode]).await?;
            let (block_latencies, block_elapsed) =
                block(&format!("round {} {}", round + 1, ["on", "off"][mode])).await?;
            latencies[mode].extend(block_latencies);
            elapsed[mode] += block_elapsed;
        }
    }
    let recorded = client
        .get(format!("{base_url}/v1/recall-metrics"))
        .bearer_auth(&api_key)
        .send()
        .await?
        .json::<serde_json::Value>()
        .await?["totals"]["searches"]
        .as_u64()
        .unwrap_or(0);
    println!(
        "recall events: {} memories, {} queries x {ROUNDS} rounds per mode, {CLIENTS} concurrent clients, {} events stored",
        arguments.memories,
        queries.len(),
        recorded
    );
    println!("| recall events | searches | p50 ms | p95 ms | p99 ms | searches/s |");
    println!("|---|---:|---:|---:|---:|---:|");
    let mut figures = Vec::new();
    for mode in 0..2 {
        latencies[mode].sort();
        let throughput = latencies[mode].len() as f64 / elapsed[mode].as_secs_f64().max(1e-9);
        let p50 = percentile(&latencies[mode], 0.50);
        println!(
            "| {} | {} | {:.2} | {:.2} | {:.2} | {:.1} |",
            ["on", "off"][mode],
            latencies[mode].len(),
            p50,
            percentile(&latencies[mode], 0.95),
            percentile(&latencies[mode], 0.99),
            throughput
        );
        figures.push((p50, throughput));
    }
    let (on, off) = (figures[0], figures[1]);
    println!(
        "recall event overhead: p50 {:+.2} %, throughput {:+.2} % (positive = slower with recording)",
        (on.0 - off.0) / off.0 * 100.0,
        (off.1 - on.1) / off.1 * 100.0
    );
    server.shutdown().await?;
    let _ = std::fs::remove_dir_all(&data_dir);
    Ok(())
}

pub(crate) fn bench_serve_arguments(
    data_dir: PathBuf,
    model_dir: Option<PathBuf>,
    embed_threads: Option<usize>,
    metering: bool,
) -> Result<ServeArgs> {
    Ok(ServeArgs {
        data_dir,
        listen: "127.0.0.1:0".parse()?,
        public_url: None,
        mcp_allowed_hosts: Vec::new(),
        metrics_listen: Some("127.0.0.1:0".parse()?),
        database_url: None,
        model_dir,
        // The server's own lookup: ENGRAM_MULTILINGUAL_MODEL_DIR, else the checkout's .cache.
        multilingual_model_dir: std::env::var_os("ENGRAM_MULTILINGUAL_MODEL_DIR")
            .map(std::path::PathBuf::from),
        console_assets: None,
        index_wait_ms: 30_000,
        onnxruntime_library: None,
        embed_threads,
        // Tuning runs set the split of the model's threads as a server would read it.
        embed_workers: std::env::var("ENGRAM_EMBED_WORKERS")
            .ok()
            .and_then(|workers| workers.parse().ok()),
        allow_unsafe_durability: false,
        reconcile_interval_secs: 600,
        full_reconcile_interval_secs: 86_400,
        rate_limit_burst: 0,
        rate_limit_per_second: 0,
        end_user_rate_limit_burst: 0,
        end_user_rate_limit_per_second: 0,
        console_signing_key_version: 1,
        cors_allowed_origins: Vec::new(),
        trusted_proxies: Vec::new(),
        tombstone_retention_hours: 720,
        idempotency_ttl_hours: 24,
        retention_sweep_interval_secs: 3600,
        usage_sample_interval_secs: 3600,
        consolidation_interval_secs: 0,
        evaluation_check_interval_secs: 60,
        consolidation_compact_after_secs: 2_592_000,
        erasure_ledger: None,
        audit_anchor: None,
        metering,
        server_secret: None,
        qdrant: crate::config::QdrantArgs::embedded(),
        llm: crate::config::LlmArgs::none(),
        embedding: crate::config::EmbeddingArgs::local(),
    })
}

/// VmRSS of this process, from /proc (Linux).
pub(crate) fn resident_memory_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// The local model a benchmark's project embeds with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchModel {
    /// all-MiniLM-L6-v2, the default model.
    Minilm,
    /// multilingual-e5-small, set as the project's embedding.
    Multilingual,
}

impl BenchModel {
    pub fn spec(self) -> engram_embed::LocalModelSpec {
        match self {
            BenchModel::Minilm => engram_embed::MINILM,
            BenchModel::Multilingual => engram_embed::MULTILINGUAL_E5_SMALL,
        }
    }

    /// Puts the (empty) bench project on this model.
    pub async fn choose_for_project(
        self,
        client: &reqwest::Client,
        base_url: &str,
        api_key: &str,
    ) -> anyhow::Result<()> {
        if self == BenchModel::Minilm {
            return Ok(());
        }
        let response = client
            .patch(format!("{base_url}/v1/project/settings"))
            .bearer_auth(api_key)
            .json(&serde_json::json!({"embedding": {"source": "local", "model": "multilingual"}}))
            .send()
            .await?;
        anyhow::ensure!(
            response.status().is_success(),
            "cannot put the bench project on the multilingual model: {}",
            response.text().await?
        );
        Ok(())
    }
}
