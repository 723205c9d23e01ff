//! `engram bench-speed`: the bare embedding model (the floor, Python `onnxruntime`) and the
//! service through HTTP on the same texts, in one run: ingest rate, search latency, concurrency.
//! The single-client searches are timed in rounds, each after the floor and the service's own
//! embedder have embedded the same query texts, so the ratio compares the same moments.

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

/// What the floor script says once it has loaded the model and timed the batches.
#[derive(Debug, Deserialize)]
struct FloorHeader {
    batch_texts_per_s: f64,
    texts: usize,
    threads: usize,
    batch: usize,
    onnxruntime: String,
}

/// One round of the floor script: a duration per text, in order.
#[derive(Debug, Deserialize)]
struct FloorRound {
    ms: Vec<f64>,
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
    let mut floor = FloorProcess::start(&arguments, &floor_texts).await?;

    let data_dir =
        std::env::temp_dir().join(format!("engram-bench-speed-{}", uuid::Uuid::now_v7()));
    let (server, config, api_key) = start_bench_server(
        &data_dir,
        arguments.model_dir.clone(),
        arguments.embed_threads,
        true,
    )
    .await?;
    // The service's own embedder, loaded in this process as the server loads it: what the
    // hand-off to a model thread and the Rust tokenizer add to the bare model.
    let embedder_alone = match &floor {
        Some(_) => Some(load_embedder_alone(&arguments, &config, &floor_texts).await?),
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

    // A single client, every query new to the query cache, in rounds with the floor and the
    // embedder alone on the same query texts, after a round of each that is not timed.
    server.engine.clear_query_cache();
    let single = single_client_rounds(
        &target,
        &queries,
        arguments.queries,
        floor.as_mut(),
        embedder_alone.as_ref(),
    )
    .await?;
    let floor = match floor {
        Some(floor) => Some(floor.stop().await),
        None => None,
    };
    drop(embedder_alone);

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
    match (&floor, &single.floor) {
        (Some(floor), Some((query_p50_ms, query_p95_ms))) => println!(
            "floor (bare model, Python onnxruntime {}, {} threads): the searches' own {} query texts one at a time, in {} rounds taken in turn with the service's embedder alone and the searches, p50 {query_p50_ms:.2} ms, p95 {query_p95_ms:.2} ms; batch rate on {} of the memories' texts in length-sorted batches of {}, {:.1} texts/s",
            floor.onnxruntime,
            floor.threads,
            single.searched,
            single.round_ratios.len(),
            floor.texts,
            floor.batch,
            floor.batch_texts_per_s
        ),
        _ => println!("floor: not measured (no --floor-python; `make bench` installs one)"),
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
    let floor_query = single.floor.map(|(p50_ms, _)| p50_ms);
    let floor_query_p95 = single.floor.map(|(_, p95_ms)| p95_ms);
    let floor_rate = floor.as_ref().map(|floor| floor.batch_texts_per_s);
    println!(
        "| ingest, batches of 100 | {ingest_rate:.1} memories/s | {} | {} |",
        floor_cell(floor_rate, "texts/s"),
        ratio(ingest_rate, floor_rate)
    );
    println!(
        "| index built after the last write (outbox empty, optimizer done) | {settle_seconds:.1} s | – | – |"
    );
    if let (Some((alone_p50, alone_p95)), Some((floor_p50, floor_p95))) =
        (single.embedder_alone, single.floor)
    {
        println!(
            "| the service's embedder alone, one query text at a time (p50 / p95, no search; ratio of p50) | {alone_p50:.2} / {alone_p95:.2} ms | {floor_p50:.2} / {floor_p95:.2} ms | {} |",
            ratio(alone_p50, floor_query)
        );
    }
    println!(
        "| search p50, 1 client | {:.2} ms | {} | {} |",
        single.searches.p50_ms,
        floor_cell(floor_query, "ms"),
        ratio(single.searches.p50_ms, floor_query)
    );
    println!(
        "| search p95, 1 client | {:.2} ms | {} | {} |",
        single.searches.p95_ms,
        floor_cell(floor_query_p95, "ms"),
        ratio(single.searches.p95_ms, floor_query_p95)
    );
    println!(
        "| search p99, 1 client | {:.2} ms | – | – |",
        single.searches.p99_ms
    );
    if !single.round_ratios.is_empty() {
        println!(
            "search p50 ÷ floor p50, round by round: {}",
            single
                .round_ratios
                .iter()
                .map(|ratio| format!("{ratio:.2}×"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
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

/// Rounds a single client's searches are timed in, each beside the floor and the embedder
/// alone on the same query texts: the machine's pace drifts over seconds, and a floor timed
/// minutes apart from the searches moved their ratio more than the service did.
const SINGLE_CLIENT_ROUNDS: usize = 6;

/// Queries of the warm-up round, which is not timed: the first searches after a load meet
/// cold caches (the query's model session, the index's pages), and the floor and the
/// embedder alone get the same texts first. They follow the timed queries in the list, so
/// no timed query was asked before (the `explain` searches take the list's last 100).
const WARM_UP_QUERIES: usize = 20;

/// How long one round (the floor, the embedder alone and the searches on its queries) may
/// take.
const ROUND_DEADLINE: Duration = Duration::from_secs(300);

/// One client's searches, timed round by round beside the bare model and the service's own
/// embedder on the same query texts.
struct SingleClient {
    searches: SearchFigures,
    searched: usize,
    /// The bare model's p50 and p95 (ms), each query text embedded alone.
    floor: Option<(f64, f64)>,
    /// The service's embedder alone: p50 and p95 (ms).
    embedder_alone: Option<(f64, f64)>,
    /// Each round's search p50 ÷ its floor p50.
    round_ratios: Vec<f64>,
}

/// `total` searches by one client in [`SINGLE_CLIENT_ROUNDS`] rounds, after an untimed round
/// of [`WARM_UP_QUERIES`] other queries.
async fn single_client_rounds(
    target: &Target,
    queries: &[BenchQuery],
    total: usize,
    mut floor: Option<&mut FloorProcess>,
    embedder_alone: Option<&engram_embed::LocalEncoder>,
) -> Result<SingleClient> {
    anyhow::ensure!(!queries.is_empty(), "no queries to run");
    let warm_up: Vec<&BenchQuery> = queries
        .iter()
        .cycle()
        .skip(total)
        .take(WARM_UP_QUERIES)
        .collect();
    one_round(target, &warm_up, floor.as_deref_mut(), embedder_alone, None).await?;
    let bar = progress(total, "1 client");
    let round_size = total.div_ceil(SINGLE_CLIENT_ROUNDS).max(1);
    let mut searches = Vec::with_capacity(total);
    let mut floor_latencies = Vec::new();
    let mut alone_latencies = Vec::new();
    let mut round_ratios = Vec::new();
    let mut searching = Duration::ZERO;
    let timed: Vec<&BenchQuery> = queries.iter().cycle().take(total).collect();
    for round in timed.chunks(round_size) {
        let times = one_round(
            target,
            round,
            floor.as_deref_mut(),
            embedder_alone,
            Some(&bar),
        )
        .await?;
        if let Some(round_floor) = times.floor {
            let floor_p50 = SearchFigures::of(round_floor.clone(), 1.0).p50_ms;
            let search_p50 = SearchFigures::of(times.searches.clone(), 1.0).p50_ms;
            if floor_p50 > 0.0 {
                round_ratios.push(search_p50 / floor_p50);
            }
            floor_latencies.extend(round_floor);
        }
        alone_latencies.extend(times.embedder_alone);
        searches.extend(times.searches);
        searching += times.searching;
    }
    bar.finish_and_clear();
    let p50_and_p95 = |latencies: Vec<Duration>| {
        (!latencies.is_empty()).then(|| {
            let figures = SearchFigures::of(latencies, 1.0);
            (figures.p50_ms, figures.p95_ms)
        })
    };
    Ok(SingleClient {
        searched: searches.len(),
        searches: SearchFigures::of(searches, searching.as_secs_f64()),
        floor: p50_and_p95(floor_latencies),
        embedder_alone: p50_and_p95(alone_latencies),
        round_ratios,
    })
}

/// What one round took: each text or search on its own.
struct RoundTimes {
    floor: Option<Vec<Duration>>,
    embedder_alone: Vec<Duration>,
    searches: Vec<Duration>,
    /// The searches' wall-clock time, for their rate.
    searching: Duration,
}

/// The floor, then the embedder alone, then one search each, on the queries of `round`,
/// within [`ROUND_DEADLINE`].
async fn one_round(
    target: &Target,
    round: &[&BenchQuery],
    floor: Option<&mut FloorProcess>,
    embedder_alone: Option<&engram_embed::LocalEncoder>,
    bar: Option<&indicatif::ProgressBar>,
) -> Result<RoundTimes> {
    use engram_embed::Embedder;
    let timed_round = async {
        let texts: Vec<String> = round.iter().map(|query| query.text.clone()).collect();
        let floor = match floor {
            Some(floor) => Some(floor.time(&texts).await?),
            None => None,
        };
        let mut alone = Vec::new();
        if let Some(encoder) = embedder_alone {
            for text in &texts {
                let started = Instant::now();
                encoder.embed_query(text.clone()).await?;
                alone.push(started.elapsed());
            }
        }
        let searching_started = Instant::now();
        let mut searches = Vec::with_capacity(round.len());
        for query in round {
            let mut body = serde_json::json!({"query": query.text, "top_k": 10});
            if let Some(user_id) = &query.user_id {
                body["user_id"] = serde_json::json!(user_id);
            }
            searches.push(
                timed_search(&target.client, &target.base_url, &target.api_key, &body).await?,
            );
            if let Some(bar) = bar {
                bar.inc(1);
            }
        }
        Ok::<_, anyhow::Error>(RoundTimes {
            floor,
            embedder_alone: alone,
            searches,
            searching: searching_started.elapsed(),
        })
    };
    tokio::time::timeout(ROUND_DEADLINE, timed_round)
        .await
        .with_context(|| {
            format!(
                "a round of {} queries (floor, embedder alone, searches) did not finish within {} s",
                round.len(),
                ROUND_DEADLINE.as_secs()
            )
        })?
}

/// The service's own embedder, loaded in this process as the server loads it, warmed on the
/// first texts of `warm_up`.
async fn load_embedder_alone(
    arguments: &SpeedBenchArgs,
    config: &crate::config::EngramConfig,
    warm_up: &[String],
) -> Result<engram_embed::LocalEncoder> {
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
    for text in warm_up.iter().take(20) {
        encoder.embed_query(text.clone()).await?;
    }
    Ok(encoder)
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

/// The floor script kept running (`--serve`): it timed its batches on start, and times
/// rounds of single texts when asked, so that the floor and the service share the machine.
struct FloorProcess {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    answers: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    header: FloorHeader,
}

impl FloorProcess {
    /// Starts the floor script on `passages` (its batch rate) when a Python is given.
    async fn start(arguments: &SpeedBenchArgs, passages: &[String]) -> Result<Option<Self>> {
        use tokio::io::AsyncBufReadExt;
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
            for text in passages {
                writeln!(file, "{text}")?;
            }
        }
        println!(
            "floor: the bare model, batches of {} of the texts…",
            passages.len()
        );
        let mut child = tokio::process::Command::new(python)
            .arg(&arguments.floor_script)
            .arg("--model")
            .arg(model_dir.join("model.onnx"))
            .arg("--tokenizer")
            .arg(model_dir.join("tokenizer.json"))
            .arg("--texts")
            .arg(&texts_file)
            .args(["--threads", "2", "--batch", "16", "--serve"])
            .arg("--max-length")
            .arg(spec.max_sequence_tokens.to_string())
            .arg("--query-prefix")
            .arg(spec.query_prefix)
            .arg("--passage-prefix")
            .arg(spec.passage_prefix)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot run {}", python.display()))?;
        let stdin = child
            .stdin
            .take()
            .context("the floor script has no stdin")?;
        let stdout = child
            .stdout
            .take()
            .context("the floor script has no stdout")?;
        let mut answers = tokio::io::BufReader::new(stdout).lines();
        // Loading the model and embedding the passages in batches.
        let header = tokio::time::timeout(Duration::from_secs(600), answers.next_line()).await;
        let _ = std::fs::remove_file(&texts_file);
        let line = header
            .context("the floor script did not report its batch rate within 10 minutes")??
            .context("the floor script ended before reporting its batch rate")?;
        Ok(Some(Self {
            child,
            stdin,
            answers,
            header: serde_json::from_str(&line).with_context(|| {
                format!("the floor script's first line is not its figures: {line}")
            })?,
        }))
    }

    /// Each of `texts` embedded alone by the bare model: a duration each, in order.
    async fn time(&mut self, texts: &[String]) -> Result<Vec<Duration>> {
        use tokio::io::AsyncWriteExt;
        // No deadline of its own: it is part of a round, which has one.
        let mut request = serde_json::to_string(texts)?;
        request.push('\n');
        self.stdin.write_all(request.as_bytes()).await?;
        self.stdin.flush().await?;
        let line = self
            .answers
            .next_line()
            .await?
            .context("the floor script ended during a round")?;
        let round: FloorRound = serde_json::from_str(&line)
            .with_context(|| format!("the floor script's answer is not a round: {line}"))?;
        anyhow::ensure!(
            round.ms.len() == texts.len(),
            "the floor script timed {} texts of {}",
            round.ms.len(),
            texts.len()
        );
        Ok(round
            .ms
            .into_iter()
            .map(|millis| Duration::from_secs_f64(millis.max(0.0) / 1000.0))
            .collect())
    }

    /// Closes the script's input (it ends) and hands back what it reported on start.
    async fn stop(self) -> FloorHeader {
        let Self {
            mut child,
            stdin,
            header,
            ..
        } = self;
        drop(stdin);
        if tokio::time::timeout(Duration::from_secs(30), child.wait())
            .await
            .is_err()
        {
            tracing::warn!("the floor script did not end within 30 s of its input closing; killed");
            let _ = child.kill().await;
        }
        header
    }
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
