//! `engram bench-recall`: ingests the LoCoMo conversations through the HTTP API of an embedded
//! server (one end-user per conversation, one memory per turn) and prints how often the
//! evidence turns come back, for dense, keyword and hybrid retrieval side by side.

use crate::bench::{BenchModel, percentile, progress, start_bench_server};
use anyhow::{Context, Result};
use clap::Args;
use serde::Deserialize;
use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Longest the bench waits for one evaluation run of the LoCoMo set (two runs take seconds).
const EVALUATION_RUN_PATIENCE: std::time::Duration = std::time::Duration::from_secs(15 * 60);

#[derive(Debug, Args)]
pub struct RecallBenchArgs {
    /// Folder with LoCoMo's `turns.jsonl` and `queries.jsonl` (evaluation data; read in place,
    /// never copied).
    #[arg(long, default_value = "../shared/bench/locomo")]
    pub data: PathBuf,
    /// Only these conversations (comma-separated ids); default all.
    #[arg(long, value_delimiter = ',')]
    pub conversations: Vec<String>,
    /// Extra hybrid rows at these keyword weights (comma-separated, 0–1), for tuning.
    #[arg(long, value_delimiter = ',')]
    pub keyword_weights: Vec<f64>,
    /// Write one run file per method here, in the format `score_run.py` reads.
    #[arg(long)]
    pub run_dir: Option<PathBuf>,
    /// Also build an evaluation set from the questions (categories 1–4, the evidence turns as
    /// expected memories) through the API, run it for the hybrid default compared with dense
    /// and with keyword profiles, and print the runs' figures.
    #[arg(long, default_value_t = false)]
    pub evaluation: bool,
    #[arg(long, env = "ENGRAM_MODEL_DIR")]
    pub model_dir: Option<PathBuf>,
    /// The local model the project embeds with: `minilm` (the default) or `multilingual`.
    #[arg(long, value_enum, default_value = "minilm")]
    pub model: BenchModel,
    /// Extra relevance floors (comma-separated, 0–1) to measure beside the model's own.
    #[arg(long, value_delimiter = ',')]
    pub floors: Vec<f64>,
    /// Threads running the embedding model (default: the machine's cores).
    #[arg(long, env = "ENGRAM_EMBED_THREADS")]
    pub embed_threads: Option<usize>,
}

/// One line of LoCoMo's `turns.jsonl` (also read by `bench-speed`).
#[derive(Debug, Deserialize)]
pub(crate) struct Turn {
    pub(crate) conv_id: String,
    session: u32,
    dia_id: String,
    seq: u32,
    speaker: String,
    text: String,
    timestamp: String,
    #[serde(default)]
    image_caption: Option<String>,
}

/// One line of LoCoMo's `queries.jsonl` (also read by `bench-speed`).
#[derive(Debug, Deserialize)]
pub(crate) struct Question {
    pub(crate) conv_id: String,
    qid: String,
    pub(crate) question: String,
    category: u8,
    evidence: Vec<String>,
}

/// Hits and misses of one method over one subset of questions.
#[derive(Default, Clone)]
struct Tally {
    questions: usize,
    hit_at: [usize; 3],
    all_at: [usize; 2],
}

impl Tally {
    fn add(&mut self, evidence: &HashSet<&str>, ranked: &[String]) {
        self.questions += 1;
        for (slot, depth) in [1usize, 5, 10].into_iter().enumerate() {
            if ranked
                .iter()
                .take(depth)
                .any(|id| evidence.contains(id.as_str()))
            {
                self.hit_at[slot] += 1;
            }
        }
        for (slot, depth) in [5usize, 10].into_iter().enumerate() {
            let found: HashSet<&str> = ranked.iter().take(depth).map(String::as_str).collect();
            if evidence.iter().all(|id| found.contains(id)) {
                self.all_at[slot] += 1;
            }
        }
    }

    fn rate(count: usize, questions: usize) -> f64 {
        count as f64 / questions.max(1) as f64
    }
}

/// A method's `now` that stands for the question's conversation's last session date.
const CONVERSATION_NOW: &str = "the conversation's last session";

/// One retrieval configuration to measure.
struct Method {
    label: String,
    body: serde_json::Value,
}

pub async fn run(arguments: RecallBenchArgs) -> Result<()> {
    let turns_path = arguments.data.join("turns.jsonl");
    let queries_path = arguments.data.join("queries.jsonl");
    if !turns_path.exists() || !queries_path.exists() {
        println!(
            "SKIPPED bench-recall: LoCoMo data not found at {} (needs turns.jsonl and queries.jsonl)",
            arguments.data.display()
        );
        return Ok(());
    }
    let wanted = |conversation: &str| {
        arguments.conversations.is_empty()
            || arguments.conversations.iter().any(|id| id == conversation)
    };
    let turns: Vec<Turn> = read_json_lines(&turns_path)?
        .into_iter()
        .filter(|turn: &Turn| wanted(&turn.conv_id))
        .collect();
    let questions: Vec<Question> = read_json_lines(&queries_path)?
        .into_iter()
        .filter(|question: &Question| wanted(&question.conv_id))
        .collect();
    anyhow::ensure!(!turns.is_empty(), "no turns left after --conversations");

    let telemetry = crate::telemetry::init_telemetry();
    let data_dir =
        std::env::temp_dir().join(format!("engram-bench-recall-{}", uuid::Uuid::now_v7()));
    let (server, _, api_key) = start_bench_server(
        &data_dir,
        arguments.model_dir.clone(),
        arguments.embed_threads,
        true,
    )
    .await?;
    let base_url = format!("http://{}", server.address);
    let client = reqwest::Client::new();
    arguments
        .model
        .choose_for_project(&client, &base_url, &api_key)
        .await?;

    // Ingest: every turn as "speaker: text", dated by its session (`occurred_at`), its ids
    // and session date in metadata, 100 per
    // request, each request waiting until its memories are searchable.
    let bar = progress(turns.len(), "ingest");
    let ingest_started = Instant::now();
    // (conversation, dia_id) → memory id, for the evaluation set's expected memories.
    let mut memory_ids: BTreeMap<(String, String), String> = BTreeMap::new();
    for batch in turns.chunks(100) {
        let memories: Vec<serde_json::Value> = batch
            .iter()
            .map(|turn| {
                serde_json::json!({
                    "content": memory_content(turn),
                    "user_id": turn.conv_id,
                    "session_id": format!("{}-s{}", turn.conv_id, turn.session),
                    "kind": "episodic",
                    // The session's date: when what was said happened.
                    "occurred_at": turn.timestamp,
                    "metadata": {
                        "dia_id": turn.dia_id,
                        "session": turn.session,
                        "seq": turn.seq,
                        "timestamp": turn.timestamp,
                    },
                })
            })
            .collect();
        let response = client
            .post(format!("{base_url}/v1/memories"))
            .bearer_auth(&api_key)
            .json(&serde_json::json!({ "memories": memories }))
            .send()
            .await?;
        anyhow::ensure!(
            response.status().is_success(),
            "ingest failed: {}",
            response.status()
        );
        let stored: serde_json::Value = response.json().await?;
        for (turn, memory) in batch
            .iter()
            .zip(stored["memories"].as_array().cloned().unwrap_or_default())
        {
            if let Some(id) = memory["id"].as_str() {
                memory_ids.insert((turn.conv_id.clone(), turn.dia_id.clone()), id.to_string());
            }
        }
        bar.inc(batch.len() as u64);
    }
    let ingest_elapsed = ingest_started.elapsed();
    bar.finish_and_clear();

    let mut methods = vec![
        Method {
            label: "dense".to_string(),
            body: serde_json::json!({"retrieval": "dense"}),
        },
        Method {
            label: "keyword (BM25)".to_string(),
            body: serde_json::json!({"retrieval": "keyword"}),
        },
        Method {
            label: "hybrid, RRF k=60".to_string(),
            body: serde_json::json!({"fusion": "rrf"}),
        },
        Method {
            label: "hybrid (default)".to_string(),
            body: serde_json::json!({}),
        },
        // The same without borrowing from neighbouring turns: what the neighbours bring.
        Method {
            label: "hybrid, no neighbours".to_string(),
            body: serde_json::json!({"neighbour_weight": 0}),
        },
        // The same without the project's relevance floor: what the floor costs.
        Method {
            label: "hybrid, no floor".to_string(),
            body: serde_json::json!({"min_score": 0}),
        },
        // Time named in a question ("last week") read against the conversation's last
        // session, not today: the default rows read it against the server's clock, years
        // after LoCoMo's sessions, so nothing falls in the window they name.
        Method {
            label: "hybrid, time read at the last session".to_string(),
            body: serde_json::json!({"now": CONVERSATION_NOW}),
        },
    ];
    // Each conversation's last session date (RFC 3339 in one format: the greatest string).
    let last_session: BTreeMap<&str, &str> =
        turns.iter().fold(BTreeMap::new(), |mut last, turn| {
            let latest = last
                .entry(turn.conv_id.as_str())
                .or_insert(turn.timestamp.as_str());
            if turn.timestamp.as_str() > *latest {
                *latest = turn.timestamp.as_str();
            }
            last
        });
    for weight in &arguments.keyword_weights {
        methods.push(Method {
            label: format!("hybrid, keyword_weight {weight}"),
            body: serde_json::json!({"keyword_weight": weight}),
        });
    }

    let mut rows = Vec::new();
    for method in &methods {
        let bar = progress(questions.len(), "search");
        let mut headline = Tally::default();
        let mut adversarial = Tally::default();
        let mut temporal = Tally::default();
        let mut latencies = Vec::with_capacity(questions.len());
        let mut run_lines = Vec::with_capacity(questions.len());
        for question in &questions {
            let mut body = serde_json::json!({
                "query": question.question,
                "user_id": question.conv_id,
                "top_k": 10,
                "recency_weight": 0,
            });
            if let (Some(body), Some(extra)) = (body.as_object_mut(), method.body.as_object()) {
                body.extend(extra.clone());
            }
            if body["now"] == CONVERSATION_NOW {
                body["now"] = serde_json::json!(last_session.get(question.conv_id.as_str()));
            }
            let started = Instant::now();
            let response = client
                .post(format!("{base_url}/v1/memories/search"))
                .bearer_auth(&api_key)
                .json(&body)
                .send()
                .await?;
            anyhow::ensure!(
                response.status().is_success(),
                "search failed: {}",
                response.status()
            );
            let answer: serde_json::Value = response.json().await?;
            latencies.push(started.elapsed());
            let ranked = dia_ids_of(&answer);
            let evidence: HashSet<&str> = question.evidence.iter().map(String::as_str).collect();
            if question.category == 5 {
                adversarial.add(&evidence, &ranked);
            } else {
                headline.add(&evidence, &ranked);
            }
            if question.category == 2 {
                temporal.add(&evidence, &ranked);
            }
            run_lines.push(serde_json::json!({"qid": question.qid, "top": ranked}).to_string());
            bar.inc(1);
        }
        bar.finish_and_clear();
        latencies.sort();
        if let Some(run_dir) = &arguments.run_dir {
            std::fs::create_dir_all(run_dir)?;
            let file_name = format!("{}.jsonl", method.label.replace([' ', '(', ')', ','], "_"));
            let mut file = std::fs::File::create(run_dir.join(file_name))?;
            for line in &run_lines {
                writeln!(file, "{line}")?;
            }
        }
        rows.push((
            method.label.clone(),
            headline,
            adversarial,
            temporal,
            latencies,
        ));
    }

    let conversations: BTreeMap<&str, usize> =
        turns.iter().fold(BTreeMap::new(), |mut counts, turn| {
            *counts.entry(turn.conv_id.as_str()).or_default() += 1;
            counts
        });
    println!(
        "engram bench-recall: LoCoMo ({}), {} conversations, {} turns, {} questions; top_k 10, one end-user per conversation; model {}",
        arguments.data.display(),
        conversations.len(),
        turns.len(),
        questions.len(),
        arguments.model.spec().model_id
    );
    println!(
        "ingest: {:.1} s, {:.0} turns/s over HTTP (embedding and indexing included)",
        ingest_elapsed.as_secs_f64(),
        turns.len() as f64 / ingest_elapsed.as_secs_f64()
    );
    println!(
        "| method | subset | n | hit@1 | hit@5 | hit@10 | all@5 | all@10 | search p50 ms | p95 ms |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (label, headline, adversarial, temporal, latencies) in &rows {
        for (subset, tally) in [
            ("cat 1-4", headline),
            ("cat 2 (temporal)", temporal),
            ("cat 5", adversarial),
        ] {
            let rate = |count| Tally::rate(count, tally.questions);
            println!(
                "| {label} | {subset} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.2} | {:.2} |",
                tally.questions,
                rate(tally.hit_at[0]),
                rate(tally.hit_at[1]),
                rate(tally.hit_at[2]),
                rate(tally.all_at[0]),
                rate(tally.all_at[1]),
                percentile(latencies, 0.50),
                percentile(latencies, 0.95),
            );
        }
    }
    println!("baseline (README, RRF of BM25 and dense, cat 1-4): hit@5 .525, hit@10 .632");
    // The relevance floor: what it costs on these questions, and how often it answers
    // nothing where nothing relevant exists.
    // Written after the tables above, under end-users of their own: LoCoMo's figures do
    // not see them.
    let bilingual = ingest_bilingual(&client, &base_url, &api_key).await?;
    let short_facts = ingest_short_facts(&client, &base_url, &api_key).await?;
    println!(
        "relevance floor: hybrid (default) on cat 1-4, questions about what an end-user never said (answered with nothing is right), and answers a floor must keep: short facts asked about, the bilingual set asked across languages"
    );
    println!(
        "| floor | hit@1 | hit@5 | hit@10 | another conversation's questions: nothing | never-said questions: nothing | both | short facts: answer kept | cross-lingual: answer kept |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    // No floor first: what the others cost is read against it.
    let mut floors = vec![serde_json::json!(0), serde_json::json!("model")];
    if arguments.model == BenchModel::Minilm {
        floors.push(serde_json::json!(
            engram_core::search::CONVERSATION_RELEVANCE_FLOOR
        ));
    }
    floors.extend(
        arguments
            .floors
            .iter()
            .map(|floor| serde_json::json!(floor)),
    );
    for floor in floors {
        let figures = measure_floor(
            &client,
            &base_url,
            &api_key,
            FloorQuestions {
                locomo: &questions,
                short_facts: &short_facts,
                bilingual: &bilingual,
            },
            &floor,
        )
        .await?;
        let share = |(asked, counted): (usize, usize)| {
            format!(
                "{:.1} % of {asked}",
                100.0 * counted as f64 / asked.max(1) as f64
            )
        };
        println!(
            "| {} | {:.3} | {:.3} | {:.3} | {} | {} | {} | {} | {} |",
            figures.floor,
            Tally::rate(figures.tally.hit_at[0], figures.tally.questions),
            Tally::rate(figures.tally.hit_at[1], figures.tally.questions),
            Tally::rate(figures.tally.hit_at[2], figures.tally.questions),
            share(figures.foreign),
            share(figures.never_said),
            share((
                figures.foreign.0 + figures.never_said.0,
                figures.foreign.1 + figures.never_said.1
            )),
            share(figures.short_facts_kept),
            share(figures.cross_lingual_kept),
        );
    }
    // Back to the model's floors: what follows measures the search agents get.
    let restored = client
        .patch(format!("{base_url}/v1/project/settings"))
        .bearer_auth(&api_key)
        .json(&serde_json::json!({ "relevance_floor": "model" }))
        .send()
        .await?;
    anyhow::ensure!(
        restored.status().is_success(),
        "restoring the floor failed: {}",
        restored.status()
    );
    bilingual_figures(&client, &base_url, &api_key, &bilingual, arguments.model).await?;
    if arguments.evaluation {
        evaluate_through_the_api(&client, &base_url, &api_key, &questions, &memory_ids).await?;
    }
    server.shutdown().await?;
    let _ = std::fs::remove_dir_all(&data_dir);
    telemetry.shutdown();
    Ok(())
}

/// Questions about an end-user's life, written for bench-recall: about things no LoCoMo dev
/// conversation mentions.
const NEVER_SAID: &str = include_str!("../data/never_said.txt");

/// The bilingual set: each fact in English and in Chinese, a question about it in each.
const BILINGUAL_FACTS: &str = include_str!("../data/bilingual_facts.jsonl");

/// Short facts as a memory service extracts them, and a question about each, written for
/// bench-recall: answers a relevance floor must keep.
const SHORT_FACTS: &str = include_str!("../data/short_facts.jsonl");

#[derive(Deserialize)]
struct ShortFact {
    fact: String,
    question: String,
}

#[derive(Debug, Deserialize)]
struct BilingualFact {
    subject: String,
    en: String,
    zh: String,
    q_en: String,
    q_zh: String,
}

/// Cross-lingual recall on the bilingual set: every fact stored in Chinese under one end-user
/// per subject and in English under another, then each English question asked of the Chinese
/// memories and each Chinese question of the English ones. Hit@k: the fact asked about is in
/// the top k (no relevance floor).
/// The end-user a bilingual fact is stored under in `language` (`en`, `zh`).
fn stored_as(fact: &BilingualFact, language: &str) -> String {
    format!("{}-{language}", fact.subject)
}

/// Writes `memories` (`{content, user_id}`) in batches.
async fn write_memories(
    client: &reqwest::Client,
    base_url: &str,
    api_key: &str,
    memories: &[serde_json::Value],
    what: &str,
) -> Result<()> {
    for batch in memories.chunks(100) {
        let response = client
            .post(format!("{base_url}/v1/memories"))
            .bearer_auth(api_key)
            .json(&serde_json::json!({ "memories": batch }))
            .send()
            .await?;
        anyhow::ensure!(
            response.status().is_success(),
            "{what} ingest failed: {}",
            response.status()
        );
    }
    Ok(())
}

/// Stores every bilingual fact in Chinese under one end-user per subject and in English
/// under another.
async fn ingest_bilingual(
    client: &reqwest::Client,
    base_url: &str,
    api_key: &str,
) -> Result<Vec<BilingualFact>> {
    let facts: Vec<BilingualFact> = json_lines(BILINGUAL_FACTS)
        .context("services/cli/data/bilingual_facts.jsonl is not valid")?;
    let memories: Vec<serde_json::Value> = facts
        .iter()
        .flat_map(|fact| {
            [
                serde_json::json!({"content": fact.zh, "user_id": stored_as(fact, "zh")}),
                serde_json::json!({"content": fact.en, "user_id": stored_as(fact, "en")}),
            ]
        })
        .collect();
    write_memories(client, base_url, api_key, &memories, "bilingual").await?;
    Ok(facts)
}

/// The end-user the short facts are stored under.
const SHORT_FACTS_USER: &str = "short-facts";

/// Stores every short fact under one end-user.
async fn ingest_short_facts(
    client: &reqwest::Client,
    base_url: &str,
    api_key: &str,
) -> Result<Vec<ShortFact>> {
    let facts: Vec<ShortFact> =
        json_lines(SHORT_FACTS).context("services/cli/data/short_facts.jsonl is not valid")?;
    let memories: Vec<serde_json::Value> = facts
        .iter()
        .map(|fact| serde_json::json!({"content": fact.fact, "user_id": SHORT_FACTS_USER}))
        .collect();
    write_memories(client, base_url, api_key, &memories, "short facts").await?;
    Ok(facts)
}

/// The JSON lines of a committed data file, comments (`#`) and blank lines left out.
fn json_lines<T: for<'de> Deserialize<'de>>(text: &str) -> serde_json::Result<Vec<T>> {
    text.lines()
        .filter(|line| !line.trim().is_empty() && !line.starts_with('#'))
        .map(serde_json::from_str)
        .collect()
}

async fn bilingual_figures(
    client: &reqwest::Client,
    base_url: &str,
    api_key: &str,
    facts: &[BilingualFact],
    model: BenchModel,
) -> Result<()> {
    println!(
        "bilingual set ({} facts in {} subjects, written for Engram), model {}: hit@1 / hit@5, one end-user per subject and language, no floor",
        facts.len(),
        facts
            .iter()
            .map(|fact| fact.subject.as_str())
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        model.spec().model_id
    );
    println!(
        "| retrieval | English question, Chinese memories | Chinese question, English memories | both |"
    );
    println!("|---|---:|---:|---:|");
    let bar = progress(facts.len() * 4, "bilingual");
    for retrieval in ["dense", "hybrid"] {
        let mut hits = [[0usize; 2]; 2];
        for fact in facts {
            for (direction, (question, language, expected)) in
                [(&fact.q_en, "zh", &fact.zh), (&fact.q_zh, "en", &fact.en)]
                    .into_iter()
                    .enumerate()
            {
                let response = client
                    .post(format!("{base_url}/v1/memories/search"))
                    .bearer_auth(api_key)
                    .json(&serde_json::json!({
                        "query": question,
                        "user_id": stored_as(fact, language),
                        "retrieval": retrieval,
                        "top_k": 5,
                        "min_score": 0,
                        "recency_weight": 0,
                    }))
                    .send()
                    .await?;
                anyhow::ensure!(
                    response.status().is_success(),
                    "bilingual search failed: {}",
                    response.status()
                );
                let answer: serde_json::Value = response.json().await?;
                let contents: Vec<&str> = answer["results"]
                    .as_array()
                    .map(|results| {
                        results
                            .iter()
                            .filter_map(|result| result["memory"]["content"].as_str())
                            .collect()
                    })
                    .unwrap_or_default();
                if contents.first() == Some(&expected.as_str()) {
                    hits[direction][0] += 1;
                }
                if contents.contains(&expected.as_str()) {
                    hits[direction][1] += 1;
                }
                bar.inc(1);
            }
        }
        let rate = |count: usize, asked: usize| count as f64 / asked.max(1) as f64;
        let cell = |hit: [usize; 2], asked: usize| {
            format!("{:.3} / {:.3}", rate(hit[0], asked), rate(hit[1], asked))
        };
        println!(
            "| {retrieval} (bilingual) | {} | {} | {} |",
            cell(hits[0], facts.len()),
            cell(hits[1], facts.len()),
            cell(
                [hits[0][0] + hits[1][0], hits[0][1] + hits[1][1]],
                facts.len() * 2
            ),
        );
    }
    bar.finish_and_clear();
    Ok(())
}

/// The LoCoMo turn ids of a search answer's results, best first.
fn dia_ids_of(answer: &serde_json::Value) -> Vec<String> {
    answer["results"]
        .as_array()
        .map(|results| {
            results
                .iter()
                .filter_map(|result| result["memory"]["metadata"]["dia_id"].as_str())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// What one relevance floor does to the default search.
struct FloorFigures {
    /// The floor as the project's settings report it (`"model"` resolved).
    floor: String,
    /// Categories 1–4 asked of their own end-user.
    tally: Tally,
    /// (asked, answered with nothing): each conversation's questions (categories 1–4) asked
    /// of the next conversation's end-user.
    foreign: (usize, usize),
    /// (asked, answered with nothing): the never-said questions asked of every end-user.
    never_said: (usize, usize),
    /// (asked, answered with the fact among the results): each short fact's question.
    short_facts_kept: (usize, usize),
    /// (asked, answered with the fact among the results): each bilingual question asked of
    /// the memories in the other language.
    cross_lingual_kept: (usize, usize),
}

/// What a floor is measured on.
struct FloorQuestions<'a> {
    locomo: &'a [Question],
    short_facts: &'a [ShortFact],
    bilingual: &'a [BilingualFact],
}

/// Sets the project's relevance floor to `floor`, then asks every question at the default.
async fn measure_floor(
    client: &reqwest::Client,
    base_url: &str,
    api_key: &str,
    asked: FloorQuestions<'_>,
    floor: &serde_json::Value,
) -> Result<FloorFigures> {
    let questions = asked.locomo;
    let saved = client
        .patch(format!("{base_url}/v1/project/settings"))
        .bearer_auth(api_key)
        .json(&serde_json::json!({ "relevance_floor": floor }))
        .send()
        .await?;
    anyhow::ensure!(
        saved.status().is_success(),
        "setting the floor failed: {}",
        saved.status()
    );
    let saved: serde_json::Value = saved.json().await?;
    let search = |query: &str, user: &str| {
        let request = client
            .post(format!("{base_url}/v1/memories/search"))
            .bearer_auth(api_key)
            .json(&serde_json::json!({"query": query, "user_id": user, "top_k": 10, "recency_weight": 0}));
        async move {
            let response = request.send().await?;
            anyhow::ensure!(
                response.status().is_success(),
                "search failed: {}",
                response.status()
            );
            Ok::<serde_json::Value, anyhow::Error>(response.json().await?)
        }
    };
    let holds = |answer: &serde_json::Value, content: &str| {
        answer["results"].as_array().is_some_and(|results| {
            results
                .iter()
                .any(|result| result["memory"]["content"].as_str() == Some(content))
        })
    };
    let conversations: Vec<&str> = questions
        .iter()
        .map(|question| question.conv_id.as_str())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let never_said: Vec<&str> = NEVER_SAID
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .collect();
    let answerable: Vec<&Question> = questions
        .iter()
        .filter(|question| question.category != 5)
        .collect();
    let bar = progress(
        answerable.len() * 2
            + never_said.len() * conversations.len()
            + asked.short_facts.len()
            + asked.bilingual.len() * 2,
        "floor",
    );
    let mut figures = FloorFigures {
        floor: match saved["relevance_floor_for_unmentioned_names"].as_f64() {
            Some(names_floor) if names_floor > 0.0 => format!(
                "{} ({}; {names_floor} for unmentioned names)",
                saved["relevance_floor_setting"], saved["relevance_floor"]
            )
            .replace('"', ""),
            _ => saved["relevance_floor"].to_string(),
        },
        tally: Tally::default(),
        foreign: (0, 0),
        never_said: (0, 0),
        short_facts_kept: (0, 0),
        cross_lingual_kept: (0, 0),
    };
    for question in &answerable {
        let ranked = dia_ids_of(&search(&question.question, &question.conv_id).await?);
        let evidence: HashSet<&str> = question.evidence.iter().map(String::as_str).collect();
        figures.tally.add(&evidence, &ranked);
        bar.inc(1);
        // Asked of another conversation's end-user: nothing there is about it.
        let position = conversations
            .iter()
            .position(|conversation| *conversation == question.conv_id)
            .unwrap_or(0);
        let other = conversations[(position + 1) % conversations.len()];
        if other != question.conv_id {
            let ranked = dia_ids_of(&search(&question.question, other).await?);
            figures.foreign.0 += 1;
            figures.foreign.1 += usize::from(ranked.is_empty());
        }
        bar.inc(1);
    }
    for text in &never_said {
        for conversation in &conversations {
            let ranked = dia_ids_of(&search(text, conversation).await?);
            figures.never_said.0 += 1;
            figures.never_said.1 += usize::from(ranked.is_empty());
            bar.inc(1);
        }
    }
    for fact in asked.short_facts {
        let answer = search(&fact.question, SHORT_FACTS_USER).await?;
        figures.short_facts_kept.0 += 1;
        figures.short_facts_kept.1 += usize::from(holds(&answer, &fact.fact));
        bar.inc(1);
    }
    for fact in asked.bilingual {
        for (question, language, expected) in
            [(&fact.q_en, "zh", &fact.zh), (&fact.q_zh, "en", &fact.en)]
        {
            let answer = search(question, &stored_as(fact, language)).await?;
            figures.cross_lingual_kept.0 += 1;
            figures.cross_lingual_kept.1 += usize::from(holds(&answer, expected));
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    Ok(figures)
}

/// The evaluation path end to end: profiles, a set imported as JSONL, runs as tasks, and
/// their figures with the comparison of two profiles.
async fn evaluate_through_the_api(
    client: &reqwest::Client,
    base_url: &str,
    api_key: &str,
    questions: &[Question],
    memory_ids: &BTreeMap<(String, String), String>,
) -> Result<()> {
    let call = async |method: reqwest::Method,
                      path: &str,
                      body: Option<serde_json::Value>|
           -> Result<serde_json::Value> {
        let mut request = client
            .request(method, format!("{base_url}{path}"))
            .bearer_auth(api_key);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await?;
        let status = response.status();
        let answer: serde_json::Value = response.json().await.unwrap_or_default();
        anyhow::ensure!(status.is_success(), "{path}: {status} {answer}");
        Ok(answer)
    };
    for (name, parameters) in [
        (
            "dense",
            serde_json::json!({"retrieval": "dense", "recency_weight": 0}),
        ),
        (
            "keyword",
            serde_json::json!({"retrieval": "keyword", "recency_weight": 0}),
        ),
        ("hybrid", serde_json::json!({"recency_weight": 0})),
    ] {
        call(
            reqwest::Method::PUT,
            &format!("/v1/retrieval-profiles/{name}"),
            Some(serde_json::json!({"parameters": parameters})),
        )
        .await?;
    }
    let set = call(
        reqwest::Method::POST,
        "/v1/eval-sets",
        Some(serde_json::json!({"name": "locomo", "k": 10, "profile": "hybrid"})),
    )
    .await?;
    let set_id = set["id"].as_str().context("set id")?.to_string();
    let cases: Vec<String> = questions
        .iter()
        .filter(|question| question.category != 5)
        .filter_map(|question| {
            let expected: Vec<&String> = question
                .evidence
                .iter()
                .filter_map(|dia_id| memory_ids.get(&(question.conv_id.clone(), dia_id.clone())))
                .collect();
            (!expected.is_empty()).then(|| {
                serde_json::json!({
                    "query": question.question,
                    "user_id": question.conv_id,
                    "expected_memory_ids": expected,
                })
                .to_string()
            })
        })
        .collect();
    for chunk in cases.chunks(1_000) {
        let response = client
            .post(format!("{base_url}/v1/eval-sets/{set_id}/cases/import"))
            .bearer_auth(api_key)
            .header("content-type", "application/x-ndjson")
            .body(chunk.join("\n"))
            .send()
            .await?;
        anyhow::ensure!(
            response.status().is_success(),
            "case import: {}",
            response.status()
        );
    }
    let started = Instant::now();
    let mut runs = Vec::new();
    for other in ["dense", "keyword"] {
        let queued = call(
            reqwest::Method::POST,
            &format!("/v1/eval-sets/{set_id}/runs"),
            Some(serde_json::json!({"profile": "hybrid", "compare_profile": other})),
        )
        .await?;
        let run_id = queued["run"]["id"].as_str().context("run id")?.to_string();
        let bar = progress(cases.len() * 2, "evaluate");
        // A wait with a deadline: a run the server never moves on must end the bench with
        // what it waited for, not hang a test suite.
        let deadline = Instant::now() + EVALUATION_RUN_PATIENCE;
        let run = loop {
            let run = call(
                reqwest::Method::GET,
                &format!("/v1/eval-sets/{set_id}/runs/{run_id}"),
                None,
            )
            .await?;
            let task = call(
                reqwest::Method::GET,
                &format!(
                    "/v1/tasks/{}",
                    queued["task"]["id"].as_str().unwrap_or_default()
                ),
                None,
            )
            .await?;
            bar.set_position(task["progress"]["done"].as_u64().unwrap_or(0));
            match run["status"].as_str() {
                Some("succeeded") => break run,
                Some("failed") => anyhow::bail!("evaluation run failed: {}", run["error"]),
                status if Instant::now() >= deadline => anyhow::bail!(
                    "waited {} s for evaluation run {run_id} to finish; it is still {} (its task: {} {})",
                    EVALUATION_RUN_PATIENCE.as_secs(),
                    status.unwrap_or("unknown"),
                    task["status"],
                    task["error"]
                ),
                _ => tokio::time::sleep(std::time::Duration::from_millis(500)).await,
            }
        };
        bar.finish_and_clear();
        runs.push(run);
    }
    println!(
        "evaluation set \"locomo\" (API, {} cases of categories 1-4, k = 10, evidence turns expected), two runs in {:.1} s:",
        cases.len(),
        started.elapsed().as_secs_f64()
    );
    println!("| profile | hit@1 | hit@10 | recall@10 | MRR | nDCG@10 | p50 ms | p95 ms |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    let row = |metrics: &serde_json::Value| {
        let figure = |name: &str| metrics[name].as_f64().unwrap_or(f64::NAN);
        println!(
            "| {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.1} | {:.1} |",
            metrics["profile"].as_str().unwrap_or("?"),
            figure("hit_at_1"),
            figure("hit_at_k"),
            figure("recall_at_k"),
            figure("mrr"),
            figure("ndcg_at_k"),
            figure("latency_p50_ms"),
            figure("latency_p95_ms"),
        );
    };
    row(&runs[0]["metrics"]);
    for run in &runs {
        row(&run["comparison"]["second_metrics"]);
    }
    println!("| comparison | figure | hybrid | other | difference | 95 % interval |");
    println!("|---|---|---:|---:|---:|---|");
    for run in &runs {
        let comparison = &run["comparison"];
        for figure in ["hit_at_k", "mrr", "ndcg_at_k"] {
            let difference = &comparison["differences"][figure];
            let number = |name: &str| difference[name].as_f64().unwrap_or(f64::NAN);
            println!(
                "| hybrid vs {} | {figure} | {:.3} | {:.3} | {:+.3} | [{:+.3}, {:+.3}] |",
                comparison["second_profile"].as_str().unwrap_or("?"),
                number("first"),
                number("second"),
                // Reported as hybrid − other.
                -number("difference"),
                -number("ci95_high"),
                -number("ci95_low"),
            );
        }
    }
    Ok(())
}

/// What one turn is stored as: the README's `"speaker: text"`, plus the caption of a shared
/// photo, which is part of what was said.
/// A turn as the benchmarks store it: "speaker: text", plus the caption of a shared photo.
pub(crate) fn memory_content(turn: &Turn) -> String {
    match &turn.image_caption {
        Some(caption) if !caption.trim().is_empty() => {
            format!(
                "{}: {} [shared a photo: {}]",
                turn.speaker, turn.text, caption
            )
        }
        _ => format!("{}: {}", turn.speaker, turn.text),
    }
}

pub(crate) fn read_json_lines<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Vec<T>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .enumerate()
        .map(|(number, line)| {
            serde_json::from_str(line)
                .with_context(|| format!("{}:{}: not a valid line", path.display(), number + 1))
        })
        .collect()
}
