//! `engram bench-speed`: the bare embedding model (the floor, Python `onnxruntime`) and then the
//! service through HTTP on the same texts, in one run: ingest rate, search latency, concurrency.

use crate::bench::{
    BenchModel, percentile, post_memories, progress, start_bench_server, timed_search,
};
use crate::recall_bench::{Question, Turn, memory_content, read_json_lines};
use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde::Deserialize;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TextSet {
    /// Short generated sentences (`engram bench`'s set).
    Synthetic,
    /// LoCoMo dev turns (`"speaker: text"`), replicated under several end-users.
    Locomo,
}

#[derive(Debug, Args)]
pub struct SpeedBenchArgs {
    #[arg(long, value_enum, default_value = "locomo")]
    pub set: TextSet,
    /// Memories to load.
    #[arg(long, default_value_t = 10_000)]
    pub memories: usize,
    /// Single-client searches to time.
    #[arg(long, default_value_t = 300)]
    pub queries: usize,
    /// Searches per concurrency level.
    #[arg(long, default_value_t = 480)]
    pub searches_per_level: usize,
    /// Concurrent clients to measure throughput at.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16")]
    pub clients: Vec<usize>,
    /// Concurrent HTTP writers during ingest.
    #[arg(long, default_value_t = 2)]
    pub writers: usize,
    /// LoCoMo's folder (read in place, never copied).
    #[arg(long, default_value = "../shared/bench/locomo")]
    pub locomo: PathBuf,
    /// A Python with `onnxruntime`, `tokenizers` and `numpy` for the floor (`make bench`
    /// installs one into .cache/bench-venv); without it the floor is skipped, said so.
    #[arg(long, env = "ENGRAM_BENCH_PYTHON")]
    pub floor_python: Option<PathBuf>,
    #[arg(long, default_value = "scripts/embed_floor.py")]
    pub floor_script: PathBuf,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    #[arg(long, env = "ENGRAM_MODEL_DIR")]
    pub model_dir: Option<PathBuf>,
    /// The local model the benchmark's project embeds with: `minilm` (the default model) or
    /// `multilingual` (multilingual-e5-small, set as the project's embedding).
    #[arg(long, value_enum, default_value = "minilm")]
    pub model: BenchModel,
    #[arg(long, env = "ENGRAM_MULTILINGUAL_MODEL_DIR")]
    pub multilingual_model_dir: Option<PathBuf>,
    /// Threads running the embedding model (default: the machine's cores).
    #[arg(long, env = "ENGRAM_EMBED_THREADS")]
    pub embed_threads: Option<usize>,
}

/// What the bare model did on the same texts.
#[derive(Debug, Deserialize)]
struct Floor {
    query_p50_ms: f64,
    query_p95_ms: f64,
    batch_texts_per_s: f64,
    threads: usize,
    batch: usize,
    onnxruntime: String,
}

/// One memory to write and the end-user it belongs to.
struct BenchMemory {
    user_id: String,
    content: String,
}

/// A search and the end-user it is filtered to.
#[derive(Clone)]
struct BenchQuery {
    user_id: Option<String>,
    text: String,
}

pub async fn run(arguments: SpeedBenchArgs) -> Result<()> {
    let telemetry = crate::telemetry::init_telemetry();
    let (memories, queries) = match arguments.set {
        TextSet::Synthetic => synthetic_set(&arguments),
        TextSet::Locomo => locomo_set(&arguments)?,
    };
    // As the floor script reads them: one line each, trimmed, none empty.
    let floor_texts: Vec<String> = memories
        .iter()
        .take(1000)
        .map(|memory| memory.content.replace('\n', " ").trim().to_string())
        .filter(|text| !text.is_empty())
        .collect();
    let floor = measure_floor(&arguments, &floor_texts)?;

    let data_dir =
        std::env::temp_dir().join(format!("engram-bench-speed-{}", uuid::Uuid::now_v7()));
    let (server, config, api_key) = start_bench_server(
        &data_dir,
        arguments.model_dir.clone(),
        arguments.embed_threads,
        true,
    )
    .await?;
    // The service's own embedder on the floor's texts, before anything else runs: what the
    // hand-off to a model thread and the Rust tokenizer add to the bare model.
    let embedder_alone = match &floor {
        Some(_) => Some(measure_embedder_alone(&arguments, &config, &floor_texts).await?),
        None => None,
    };
    let base_url = format!("http://{}", server.address);
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .build()?;
    arguments
        .model
        .choose_for_project(&client, &base_url, &api_key)
        .await?;
    let target = Target {
        client: client.clone(),
        base_url: base_url.clone(),
        api_key: api_key.clone(),
    };

    // Ingest: batches of 100, a few writers.
    let batches: Vec<Vec<serde_json::Value>> = memories
        .chunks(100)
        .map(|chunk| {
            chunk
                .iter()
                .map(|memory| {
                    serde_json::json!({"content": memory.content, "user_id": memory.user_id, "kind": "episodic"})
                })
                .collect()
        })
        .collect();
    let bar = progress(memories.len(), "ingest");
    let ingest_started = Instant::now();
    crate::bench::ingest_batches(
        &client,
        &base_url,
        &api_key,
        batches,
        arguments.writers,
        &bar,
    )
    .await?;
    let ingest_seconds = ingest_started.elapsed().as_secs_f64();
    bar.finish_and_clear();
    let ingest_rate = memories.len() as f64 / ingest_seconds;
    // Searches are timed on a built index, as a project that has stopped loading has: the
    // indexer has caught up and the optimizer has put the load in graphs.
    let metrics_url = format!("http://{}/metrics", server.metrics_address);
    let settling_started = Instant::now();
    crate::scale_bench::wait_for_an_empty_outbox(&client, &metrics_url, Duration::from_secs(600))
        .await?;
    crate::scale_bench::wait_for_the_optimizer(
        &client,
        &metrics_url,
        crate::scale_bench::optimizer_deadline(memories.len()),
    )
    .await?;
    let settle_seconds = settling_started.elapsed().as_secs_f64();

    // Single client, every query new to the query cache.
    server.engine.clear_query_cache();
    let single = run_searches(&target, &queries, arguments.queries, 1, "1 client").await?;

    // Where a search's time goes inside the engine (`explain: true`), cold query cache.
    server.engine.clear_query_cache();
    let phases = explain_phases(&target, &queries, 100).await?;

    let mut levels = Vec::new();
    for &clients in &arguments.clients {
        server.engine.clear_query_cache();
        let label = format!("{clients} clients");
        levels.push((
            clients,
            run_searches(
                &target,
                &queries,
                arguments.searches_per_level,
                clients,
                &label,
            )
            .await?,
        ));
    }

    // Searches while one writer posts batches of 100 in a loop.
    server.engine.clear_query_cache();
    let writing = Arc::new(AtomicBool::new(true));
    let writer = {
        let target = target.clone();
        let writing = writing.clone();
        let contents: Vec<BenchMemory> = memories
            .iter()
            .take(2_000)
            .map(|memory| BenchMemory {
                user_id: format!("{}-again", memory.user_id),
                content: memory.content.clone(),
            })
            .collect();
        tokio::spawn(async move {
            let mut written = 0usize;
            let mut batch_number = 0usize;
            while writing.load(Ordering::Relaxed) {
                let start = (batch_number * 100) % contents.len().max(1);
                let batch: Vec<serde_json::Value> = contents
                    .iter()
                    .cycle()
                    .skip(start)
                    .take(100)
                    .map(|memory| serde_json::json!({"content": memory.content, "user_id": memory.user_id, "kind": "episodic"}))
                    .collect();
                post_memories(&target.client, &target.base_url, &target.api_key, batch).await?;
                written += 100;
                batch_number += 1;
            }
            Ok::<usize, anyhow::Error>(written)
        })
    };
    let beside_ingest =
        run_searches(&target, &queries, arguments.queries, 1, "beside ingest").await?;
    writing.store(false, Ordering::Relaxed);
    let written_beside = writer.await??;

    let stored = memories.len();
    println!();
    println!(
        "## engram bench-speed: {} set, {stored} memories, release build, embedding model {}",
        match arguments.set {
            TextSet::Synthetic => "synthetic",
            TextSet::Locomo => "LoCoMo dev turns",
        },
        arguments.model.spec().model_id
    );
    let local_model = local_model_of(arguments.model, &config);
    println!(
        "service: {} model worker(s) × {} thread(s) (ONNX Runtime), {} writers",
        local_model.model_workers, local_model.threads_per_worker, arguments.writers
    );
    match &floor {
        Some(floor) => println!(
            "floor (bare model, Python onnxruntime {}, {} threads, length-sorted batches of {}, same texts): query p50 {:.2} ms, p95 {:.2} ms; batch rate {:.1} texts/s",
            floor.onnxruntime,
            floor.threads,
            floor.batch,
            floor.query_p50_ms,
            floor.query_p95_ms,
            floor.batch_texts_per_s
        ),
        None => println!("floor: not measured (no --floor-python; `make bench` installs one)"),
    }
    println!("| measure | Engram | floor | Engram / floor |");
    println!("|---|---:|---:|---:|");
    let ratio = |engram: f64, floor_value: Option<f64>| match floor_value {
        Some(floor_value) if floor_value > 0.0 => format!("{:.2}×", engram / floor_value),
        _ => "–".to_string(),
    };
    let floor_cell = |value: Option<f64>, unit: &str| match value {
        Some(value) => format!("{value:.2} {unit}"),
        None => "–".to_string(),
    };
    let floor_query = floor.as_ref().map(|floor| floor.query_p50_ms);
    let floor_query_p95 = floor.as_ref().map(|floor| floor.query_p95_ms);
    let floor_rate = floor.as_ref().map(|floor| floor.batch_texts_per_s);
    println!(
        "| ingest, batches of 100 | {ingest_rate:.1} memories/s | {} | {} |",
        floor_cell(floor_rate, "texts/s"),
        ratio(ingest_rate, floor_rate)
    );
    println!(
        "| index built after the last write (outbox empty, optimizer done) | {settle_seconds:.1} s | – | – |"
    );
    if let Some((alone_p50, alone_p95)) = embedder_alone {
        println!(
            "| the service's embedder alone, one text at a time (p50 / p95, no search; ratio of p50) | {alone_p50:.2} / {alone_p95:.2} ms | {} | {} |",
            match &floor {
                Some(floor) => format!("{:.2} / {:.2} ms", floor.query_p50_ms, floor.query_p95_ms),
                None => "–".to_string(),
            },
            ratio(alone_p50, floor_query)
        );
    }
    println!(
        "| search p50, 1 client | {:.2} ms | {} | {} |",
        single.p50_ms,
        floor_cell(floor_query, "ms"),
        ratio(single.p50_ms, floor_query)
    );
    println!(
        "| search p95, 1 client | {:.2} ms | {} | {} |",
        single.p95_ms,
        floor_cell(floor_query_p95, "ms"),
        ratio(single.p95_ms, floor_query_p95)
    );
    println!("| search p99, 1 client | {:.2} ms | – | – |", single.p99_ms);
    for (clients, level) in &levels {
        println!(
            "| {clients} clients: searches/s (p95) | {:.1}/s ({:.1} ms) | {} | {} |",
            level.per_second,
            level.p95_ms,
            floor_cell(floor_rate, "texts/s"),
            ratio(level.per_second, floor_rate)
        );
    }
    println!(
        "engine phases, mean of 100 searches (explain timings): {}",
        phases
            .iter()
            .map(|(phase, millis)| format!("{phase} {millis:.2} ms"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "| search p50 / p95 beside a 100-memory ingest loop ({written_beside} written meanwhile) | {:.2} / {:.2} ms | – | – |",
        beside_ingest.p50_ms, beside_ingest.p95_ms
    );

    server.shutdown().await?;
    let _ = std::fs::remove_dir_all(&data_dir);
    telemetry.shutdown();
    Ok(())
}

/// Where a benchmark's searches go: the server and the key they carry.
#[derive(Clone)]
pub(crate) struct Target {
    pub(crate) client: reqwest::Client,
    pub(crate) base_url: String,
    pub(crate) api_key: String,
}

/// Latency percentiles and throughput of one batch of searches.
pub(crate) struct SearchFigures {
    pub(crate) p50_ms: f64,
    pub(crate) p95_ms: f64,
    pub(crate) p99_ms: f64,
    pub(crate) per_second: f64,
}

impl SearchFigures {
    /// The figures of `latencies`, searches that took `elapsed_seconds` of wall-clock time.
    pub(crate) fn of(mut latencies: Vec<Duration>, elapsed_seconds: f64) -> Self {
        latencies.sort();
        Self {
            p50_ms: percentile(&latencies, 0.50),
            p95_ms: percentile(&latencies, 0.95),
            p99_ms: percentile(&latencies, 0.99),
            per_second: latencies.len() as f64 / elapsed_seconds.max(f64::EPSILON),
        }
    }
}

/// `total` searches by `clients` concurrent clients, each taking the next query in turn.
async fn run_searches(
    target: &Target,
    queries: &[BenchQuery],
    total: usize,
    clients: usize,
    label: &str,
) -> Result<SearchFigures> {
    anyhow::ensure!(!queries.is_empty(), "no queries to run");
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let queries: Arc<Vec<BenchQuery>> = Arc::new(queries.to_vec());
    let bar = progress(total, label);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients.max(1) {
        let next = next.clone();
        let queries = queries.clone();
        let target = target.clone();
        let bar = bar.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            loop {
                let number = next.fetch_add(1, Ordering::Relaxed);
                if number >= total {
                    return Ok::<Vec<Duration>, anyhow::Error>(latencies);
                }
                let query = &queries[number % queries.len()];
                let mut body = serde_json::json!({"query": query.text, "top_k": 10});
                if let Some(user_id) = &query.user_id {
                    body["user_id"] = serde_json::json!(user_id);
                }
                latencies.push(
                    timed_search(&target.client, &target.base_url, &target.api_key, &body).await?,
                );
                bar.inc(1);
            }
        }));
    }
    let mut latencies = Vec::with_capacity(total);
    for task in tasks {
        latencies.extend(task.await??);
    }
    let elapsed = started.elapsed().as_secs_f64();
    bar.finish_and_clear();
    Ok(SearchFigures::of(latencies, elapsed))
}

/// Mean milliseconds per engine phase over `count` searches with `explain: true`.
async fn explain_phases(
    target: &Target,
    queries: &[BenchQuery],
    count: usize,
) -> Result<Vec<(&'static str, f64)>> {
    // From the end of the list, so these queries are new to the cache and to the other runs.
    let bodies = queries.iter().rev().take(count).map(|query| {
        let mut body = serde_json::json!({"query": query.text, "top_k": 10, "explain": true});
        if let Some(user_id) = &query.user_id {
            body["user_id"] = serde_json::json!(user_id);
        }
        body
    });
    mean_phases(&target.client, &target.base_url, &target.api_key, bodies).await
}

fn synthetic_set(arguments: &SpeedBenchArgs) -> (Vec<BenchMemory>, Vec<BenchQuery>) {
    let mut rng = StdRng::seed_from_u64(arguments.seed);
    let memories = (0..arguments.memories)
        .map(|_| {
            let (user_id, content) = crate::bench::synthetic_memory(&mut rng);
            BenchMemory { user_id, content }
        })
        .collect();
    // Distinct texts, so no search is answered from the query cache.
    let query_count = arguments.queries.max(arguments.searches_per_level);
    let queries = (0..query_count)
        .map(|number| BenchQuery {
            user_id: None,
            text: crate::bench::synthetic_query(&mut rng, number),
        })
        .collect();
    (memories, queries)
}

/// The dev turns, replicated under end-users `<conv>~<copy>` until `memories` are reached;
/// the questions, each filtered to a copy of its conversation's end-user.
fn locomo_set(arguments: &SpeedBenchArgs) -> Result<(Vec<BenchMemory>, Vec<BenchQuery>)> {
    let turns: Vec<Turn> = read_json_lines(&arguments.locomo.join("turns.jsonl"))?;
    let questions: Vec<Question> = read_json_lines(&arguments.locomo.join("queries.jsonl"))?;
    anyhow::ensure!(
        !turns.is_empty() && !questions.is_empty(),
        "no LoCoMo turns or questions in {}",
        arguments.locomo.display()
    );
    let copies = arguments.memories.div_ceil(turns.len()).max(1);
    let mut memories = Vec::with_capacity(arguments.memories);
    'copies: for copy in 0..copies {
        for turn in &turns {
            if memories.len() >= arguments.memories {
                break 'copies;
            }
            memories.push(BenchMemory {
                user_id: format!("{}~{copy}", turn.conv_id),
                content: memory_content(turn),
            });
        }
    }
    let queries = questions
        .iter()
        .enumerate()
        .map(|(number, question)| BenchQuery {
            user_id: Some(format!("{}~{}", question.conv_id, number % copies)),
            text: question.question.clone(),
        })
        .collect();
    Ok((memories, queries))
}

/// Texts the floor script times one at a time (its `--queries`).
const FLOOR_QUERIES: usize = 300;

/// The single-text p50 and p95 (ms) of the service's own embedder, loaded in this process as
/// the server loads it, on the texts the floor times one at a time, with the same warm-up.
async fn measure_embedder_alone(
    arguments: &SpeedBenchArgs,
    config: &crate::config::EngramConfig,
    texts: &[String],
) -> Result<(f64, f64)> {
    use engram_embed::Embedder;
    let spec = arguments.model.spec();
    let model_dir = match arguments.model {
        BenchModel::Minilm => config.embed.model_dir.clone(),
        BenchModel::Multilingual => config.embed.multilingual_model_dir.clone(),
    };
    let options = local_model_of(arguments.model, config);
    let encoder = tokio::task::spawn_blocking(move || {
        engram_embed::LocalEncoder::load(spec, &model_dir, options)
    })
    .await??;
    for text in texts.iter().take(20) {
        encoder.embed_query(text.clone()).await?;
    }
    let started = Instant::now();
    let mut latencies = Vec::with_capacity(FLOOR_QUERIES);
    for text in texts.iter().cycle().take(FLOOR_QUERIES) {
        let text_started = Instant::now();
        encoder.embed_query(text.clone()).await?;
        latencies.push(text_started.elapsed());
    }
    let figures = SearchFigures::of(latencies, started.elapsed().as_secs_f64());
    Ok((figures.p50_ms, figures.p95_ms))
}

/// The local model's workers and threads as the bench server runs `model` (the multilingual
/// model in one session, as the server loads it).
fn local_model_of(
    model: BenchModel,
    config: &crate::config::EngramConfig,
) -> engram_embed::LocalModelOptions {
    match model {
        BenchModel::Minilm => config.embed.local_model.clone(),
        BenchModel::Multilingual => config.embed.local_model.clone().single_session(),
    }
}

/// Runs the floor script on `texts` (written to a temporary file, removed afterwards).
fn measure_floor(arguments: &SpeedBenchArgs, texts: &[String]) -> Result<Option<Floor>> {
    let Some(python) = &arguments.floor_python else {
        return Ok(None);
    };
    let spec = arguments.model.spec();
    let model_dir = match arguments.model {
        BenchModel::Minilm => arguments
            .model_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from(engram_embed::DEFAULT_MODEL_SUBDIR)),
        BenchModel::Multilingual => arguments
            .multilingual_model_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from(engram_embed::DEFAULT_MULTILINGUAL_MODEL_SUBDIR)),
    };
    let texts_file =
        std::env::temp_dir().join(format!("engram-bench-floor-{}.txt", uuid::Uuid::now_v7()));
    {
        let mut file = std::fs::File::create(&texts_file)?;
        for text in texts {
            writeln!(file, "{text}")?;
        }
    }
    println!("floor: the bare model on {} of the texts…", texts.len());
    let output = std::process::Command::new(python)
        .arg(&arguments.floor_script)
        .arg("--model")
        .arg(model_dir.join("model.onnx"))
        .arg("--tokenizer")
        .arg(model_dir.join("tokenizer.json"))
        .arg("--texts")
        .arg(&texts_file)
        .args(["--threads", "2", "--batch", "16", "--queries"])
        .arg(FLOOR_QUERIES.to_string())
        .arg("--max-length")
        .arg(spec.max_sequence_tokens.to_string())
        .arg("--query-prefix")
        .arg(spec.query_prefix)
        .arg("--passage-prefix")
        .arg(spec.passage_prefix)
        .output()
        .with_context(|| format!("cannot run {}", python.display()))?;
    let _ = std::fs::remove_file(&texts_file);
    anyhow::ensure!(
        output.status.success(),
        "the floor script failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|line| line.starts_with('{'))
        .context("the floor script printed no figures")?;
    Ok(Some(serde_json::from_str(line)?))
}

/// Mean milliseconds per engine phase (`explain` timings) over the searches of `bodies`.
pub(crate) async fn mean_phases(
    client: &reqwest::Client,
    base_url: &str,
    api_key: &str,
    bodies: impl Iterator<Item = serde_json::Value>,
) -> Result<Vec<(&'static str, f64)>> {
    const PHASES: [&str; 6] = ["embed", "dense", "keyword", "hydrate", "rank", "total"];
    let mut sums = [0f64; 6];
    let mut measured = 0usize;
    for body in bodies {
        let response: serde_json::Value = client
            .post(format!("{base_url}/v1/memories/search"))
            .bearer_auth(api_key)
            .json(&body)
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        for (sum, phase) in sums.iter_mut().zip(PHASES) {
            *sum += response["timings_ms"][phase].as_f64().unwrap_or(0.0);
        }
        measured += 1;
    }
    Ok(PHASES
        .into_iter()
        .zip(sums)
        .map(|(phase, sum)| (phase, sum / measured.max(1) as f64))
        .collect())
}
