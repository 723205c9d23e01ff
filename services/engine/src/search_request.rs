//! What a search asks for: the query, whose memories, which filters, how many results and
//! how to retrieve and rank them. Plain values (no IO), so retrieval profiles, evaluation
//! runs and the search itself can all name them.

use chrono::{DateTime, Utc};
use engram_core::{Memory, MemoryKind, SubjectFilter};

/// Conditions on metadata and time, applied to hydrated candidates.
#[derive(Clone, Debug, Default)]
pub struct SearchFilters {
    /// Every listed metadata key must equal the given JSON value.
    pub metadata_equals: serde_json::Map<String, serde_json::Value>,
    pub created_after: Option<DateTime<Utc>>,
    pub created_before: Option<DateTime<Utc>>,
    /// The memory must carry at least one of these categories (empty: no condition).
    pub categories_any: Vec<String>,
}

/// How deep arrays and objects nest inside `value` (a scalar is 0).
fn nesting_depth(value: &serde_json::Value) -> usize {
    match value {
        serde_json::Value::Array(items) => 1 + items.iter().map(nesting_depth).max().unwrap_or(0),
        serde_json::Value::Object(fields) => {
            1 + fields.values().map(nesting_depth).max().unwrap_or(0)
        }
        _ => 0,
    }
}

impl SearchFilters {
    /// What is wrong with the filters against the documented limits (they are kept with
    /// every recall event, so their size is bounded): one error per field, named as the
    /// request names it (`filters.metadata.<key>`, `filters.categories`).
    pub fn limit_errors(&self) -> Vec<engram_core::FieldError> {
        use engram_core::FieldError;
        use engram_core::limits::{
            MAX_CATEGORY_CHARS, MAX_FILTER_CATEGORIES, MAX_FILTER_CONDITIONS, MAX_FILTER_DEPTH,
            MAX_FILTER_VALUE_BYTES,
        };
        let mut errors = Vec::new();
        if self.metadata_equals.len() > MAX_FILTER_CONDITIONS {
            errors.push(FieldError::new(
                "filters.metadata",
                format!("at most {MAX_FILTER_CONDITIONS} conditions"),
            ));
        }
        for (key, value) in &self.metadata_equals {
            let field = format!(
                "filters.metadata.{}",
                key.chars().take(64).collect::<String>()
            );
            if key.chars().count() > 255 {
                errors.push(FieldError::new(field, "a key has at most 255 characters"));
            } else if value.to_string().len() > MAX_FILTER_VALUE_BYTES {
                errors.push(FieldError::new(
                    field,
                    format!("the value has at most {MAX_FILTER_VALUE_BYTES} bytes as JSON"),
                ));
            } else if nesting_depth(value) > MAX_FILTER_DEPTH {
                errors.push(FieldError::new(
                    field,
                    format!("arrays and objects nest at most {MAX_FILTER_DEPTH} deep"),
                ));
            }
        }
        if self.categories_any.len() > MAX_FILTER_CATEGORIES
            || self
                .categories_any
                .iter()
                .any(|category| category.chars().count() > MAX_CATEGORY_CHARS)
        {
            errors.push(FieldError::new(
                "filters.categories",
                format!(
                    "at most {MAX_FILTER_CATEGORIES} categories of at most {MAX_CATEGORY_CHARS} characters"
                ),
            ));
        }
        errors
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.metadata_equals.is_empty()
            && self.created_after.is_none()
            && self.created_before.is_none()
            && self.categories_any.is_empty()
    }

    pub(crate) fn accepts(&self, memory: &Memory) -> bool {
        let metadata_matches = self
            .metadata_equals
            .iter()
            .all(|(key, expected)| memory.metadata.get(key) == Some(expected));
        let after_matches = self
            .created_after
            .is_none_or(|after| memory.created_at >= after);
        let before_matches = self
            .created_before
            .is_none_or(|before| memory.created_at < before);
        let categories_match = self.categories_any.is_empty()
            || memory
                .categories
                .iter()
                .any(|category| self.categories_any.contains(category));
        metadata_matches && after_matches && before_matches && categories_match
    }
}

/// Which signals rank the results.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RetrievalMode {
    /// Dense and keyword search fused (the default).
    #[default]
    Hybrid,
    /// Cosine similarity of the embeddings only.
    Dense,
    /// BM25 over the memory text only (nothing is embedded).
    Keyword,
}

impl RetrievalMode {
    pub const ALL: [RetrievalMode; 3] = [Self::Hybrid, Self::Dense, Self::Keyword];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Hybrid => "hybrid",
            Self::Dense => "dense",
            Self::Keyword => "keyword",
        }
    }
}

impl std::str::FromStr for RetrievalMode {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|mode| mode.as_str() == text)
            .ok_or_else(|| format!("must be one of hybrid, dense, keyword; got {text:?}"))
    }
}

/// How the dense and keyword signals are combined in hybrid mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FusionMethod {
    /// `(1 − w) · cosine + w · BM25 / best BM25`: keeps how strong each match is.
    #[default]
    Weighted,
    /// Reciprocal rank fusion (k = 60) of the two rankings, weighted the same way and scaled
    /// to 0–1: only the ranks count.
    Rrf,
}

impl FusionMethod {
    pub const ALL: [FusionMethod; 2] = [Self::Weighted, Self::Rrf];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Weighted => "weighted",
            Self::Rrf => "rrf",
        }
    }
}

impl std::str::FromStr for FusionMethod {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|method| method.as_str() == text)
            .ok_or_else(|| format!("must be one of weighted, rrf; got {text:?}"))
    }
}

/// Weight of the keyword signal in the hybrid score when the request names none.
pub const DEFAULT_KEYWORD_WEIGHT: f32 = 0.5;
/// Largest recency bonus, for a memory valid from right now; halves every half-life.
pub const DEFAULT_RECENCY_WEIGHT: f32 = 0.05;
pub const RECENCY_HALF_LIFE_DAYS: f64 = 30.0;
/// Bonus of a memory from the session named in the request (unless it filters by it).
pub const SESSION_BOOST: f32 = 0.05;
/// A result at least this similar (cosine of the embeddings) to a better one is left out
/// when diversifying.
pub const NEAR_DUPLICATE_SIMILARITY: f32 = 0.97;
/// At most this many `always` procedures are returned at task start.
pub const MAX_ALWAYS_PROCEDURES: usize = 20;
/// `as_of` ranks in memory over at most this many memories valid at that time (newest first).
pub const MAX_AS_OF_CANDIDATES: u64 = 5_000;

#[derive(Clone, Debug)]
pub struct SearchRequest {
    pub query: String,
    /// `session_id` boosts that session's memories; it filters only with `session_only`.
    pub subject: SubjectFilter,
    pub session_only: bool,
    pub kinds: Vec<MemoryKind>,
    pub filters: SearchFilters,
    pub top_k: usize,
    pub min_score: f32,
    pub retrieval: RetrievalMode,
    pub fusion: FusionMethod,
    /// 0–1: share of the keyword signal in the hybrid score.
    pub keyword_weight: f32,
    /// 0–1: largest bonus for recency (see [`RECENCY_HALF_LIFE_DAYS`]).
    pub recency_weight: f32,
    /// Rank what was true at this moment: memories superseded later are candidates too.
    pub as_of: Option<DateTime<Utc>>,
    /// Leave out results nearly identical to a better one.
    pub diversify: bool,
    /// Also return the procedural memories marked `"always": true` (task start).
    pub include_always: bool,
    /// The query's vector, sent by a project that brings its own vectors (required there for
    /// dense and hybrid retrieval, refused elsewhere).
    pub query_vector: Option<Vec<f32>>,
}

impl Default for SearchRequest {
    fn default() -> Self {
        Self {
            query: String::new(),
            subject: SubjectFilter::default(),
            session_only: false,
            kinds: Vec::new(),
            filters: SearchFilters::default(),
            top_k: engram_core::limits::DEFAULT_TOP_K,
            min_score: 0.0,
            retrieval: RetrievalMode::Hybrid,
            fusion: FusionMethod::Weighted,
            keyword_weight: DEFAULT_KEYWORD_WEIGHT,
            recency_weight: DEFAULT_RECENCY_WEIGHT,
            as_of: None,
            diversify: true,
            include_always: false,
            query_vector: None,
        }
    }
}
