//! BM25 over a handful of texts in memory, tokenized like the index's keyword field: for
//! searches the index cannot answer (`as_of`, which also reads superseded memories).

use qdrant_edge::TokenizerType;
use qdrant_edge::bm25_embed::{EdgeBm25, EdgeBm25Config};
use qdrant_edge::external::ordered_float::NotNan;
use std::collections::HashMap;

/// Memories are short: a sentence or a paragraph.
const AVERAGE_MEMORY_TOKENS: f64 = 24.0;

/// Scores texts against one query with BM25 ([`bm25_model`]), term statistics taken over the
/// given texts only: the same scores the embedded index gives those texts as a corpus.
pub struct InMemoryKeywordScorer {
    model: EdgeBm25,
}

/// The BM25 model of every keyword path: the tokenizer of the full-text index (Unicode words
/// with Chinese and Japanese segmentation, lowercase, English stop words dropped, English
/// words stemmed), k1 1.2, b 0.75, and a fixed average length. The embedded index stores each
/// memory's term weights from it, so a memory's weights never change after it is written; the
/// average is fixed for that reason, at what a memory holds.
pub(crate) fn bm25_model() -> Result<EdgeBm25, crate::IndexError> {
    let average_length = NotNan::new(AVERAGE_MEMORY_TOKENS)
        .map_err(|error| crate::IndexError::Internal(error.to_string()))?;
    let config = EdgeBm25Config {
        tokenizer: TokenizerType::Multilingual,
        avg_len: average_length,
        language: Some("english".to_string()),
        ..EdgeBm25Config::default()
    };
    EdgeBm25::new(config)
        .map_err(|error| crate::IndexError::Internal(format!("BM25 model: {error}")))
}

impl InMemoryKeywordScorer {
    pub fn new() -> Result<Self, crate::IndexError> {
        Ok(Self {
            model: bm25_model()?,
        })
    }

    /// One BM25 score per text, in order; 0 for a text without any query term.
    pub fn score(&self, query: &str, texts: &[&str]) -> Vec<f32> {
        let query_terms = self.model.embed_query(query);
        if query_terms.indices.is_empty() || texts.is_empty() {
            return vec![0.0; texts.len()];
        }
        let documents: Vec<HashMap<u32, f32>> = texts
            .iter()
            .map(|text| {
                let vector = self.model.embed_document(text);
                vector.indices.into_iter().zip(vector.values).collect()
            })
            .collect();
        let document_count = documents.len() as f32;
        let mut weights = HashMap::new();
        for term in &query_terms.indices {
            let containing = documents
                .iter()
                .filter(|document| document.contains_key(term))
                .count() as f32;
            let inverse_frequency = crate::keyword_statistics::inverse_document_frequency(
                f64::from(document_count),
                f64::from(containing),
            ) as f32;
            weights.insert(*term, inverse_frequency);
        }
        documents
            .iter()
            .map(|document| {
                weights
                    .iter()
                    .map(|(term, weight)| {
                        document
                            .get(term)
                            .map_or(0.0, |saturated| weight * saturated)
                    })
                    .sum()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matching_inflections_score_and_unrelated_texts_do_not() {
        let scorer = InMemoryKeywordScorer::new().unwrap();
        let scores = scorer.score(
            "reconciling invoices",
            &[
                "The invoice was reconciled",
                "A walk in the park",
                "我最喜欢吃北京烤鸭",
            ],
        );
        assert!(scores[0] > 0.0, "{scores:?}");
        assert_eq!(scores[1], 0.0);
        assert_eq!(scores[2], 0.0);
        let chinese = scorer.score("北京", &["我最喜欢吃北京烤鸭", "The invoice"]);
        assert!(chinese[0] > 0.0 && chinese[1] == 0.0, "{chinese:?}");
    }

    #[test]
    fn a_rarer_term_weighs_more() {
        let scorer = InMemoryKeywordScorer::new().unwrap();
        let scores = scorer.score(
            "lisbon friday",
            &[
                "lisbon trip",
                "friday lunch",
                "friday meeting",
                "friday drinks",
            ],
        );
        assert!(scores[0] > scores[1], "{scores:?}");
    }
}
