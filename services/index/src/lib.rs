//! The vector index contract: what the engine asks of any vector store (upsert by version,
//! delete, scoped search), and its backends. Every call takes the tenant scope.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use engram_core::{MemoryId, MemoryKind, ProjectScope};
use std::collections::HashMap;

pub mod cluster_layout;
pub mod edge;
mod keyword_statistics;
pub mod keywords;
pub mod payload_filter;
pub mod remote;

pub use cluster_layout::{ClusterLayout, ClusterSharding, ClusterVectorStorage, HnswSettings};
pub use edge::{
    EdgeIndexOptions, EdgeIndexStatistics, EdgeIndexTuning, EdgeVectorIndex, INDEX_INDEXED_VECTORS,
    INDEX_OPTIMIZER_PASSES_TOTAL, INDEX_OPTIMIZING, INDEX_POINTS, INDEX_SEGMENTS,
    INDEX_UNOPTIMIZED_WRITES,
};
pub use keywords::InMemoryKeywordScorer;
pub use payload_filter::{
    PayloadBound, PayloadFilter, PayloadTranslation, or_written_before_filters, payload_filter_for,
    within_agents,
};
pub use remote::{
    MINIMUM_QDRANT_VERSION, QdrantClusterOptions, QdrantVectorIndex, collection_name_for_model,
};

/// Re-scored candidates per result when vectors are quantized: twice the results are read
/// again from the float vectors, which recovers what int8 rounding reorders. Both backends'
/// quantized layouts use it (the embedded index always, a cluster by default).
pub(crate) const RESCORE_OVERSAMPLING: f64 = 2.0;
/// Scalar quantization ignores the 1 % most extreme components when choosing its range.
pub(crate) const QUANTIZATION_QUANTILE: f32 = 0.99;

/// What the index stores for one memory: its vector plus the payload the scope filter needs.
/// The point id is the memory id; `version` lets a stale write be recognised and skipped.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexedMemory {
    pub memory_id: MemoryId,
    pub version: i64,
    pub vector: Vec<f32>,
    pub user_id: Option<String>,
    pub agent_id: Option<String>,
    pub session_id: Option<String>,
    pub kind: MemoryKind,
    pub created_at: DateTime<Utc>,
    /// The memory's content (after PII masking), indexed for keyword (BM25) search.
    pub text: String,
    /// What filters read beyond the subject and kind.
    pub filterable: FilterableFields,
}

/// The fields of a memory a filter reads from the payload besides subject and kind (see
/// [`payload_filter`]); absent ones are stored as null.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FilterableFields {
    pub source: Option<engram_core::MemorySource>,
    pub categories: Vec<String>,
    pub confidence: Option<f64>,
    pub updated_at: Option<DateTime<Utc>>,
    pub occurred_at: Option<DateTime<Utc>>,
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// Who among the project's agents reads it; `None` (points written before visibility
    /// existed) is read as `shared`, which every such memory is.
    pub visibility: Option<engram_core::Visibility>,
    /// The team a shared memory is shared with; `None`: every agent.
    pub shared_with: Option<String>,
    /// Whether it was verified; `None` on points written before verification existed (none
    /// of which was).
    pub verified: Option<bool>,
}

/// A page of [`VectorIndex::points_page`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PointsPage {
    pub points: Vec<(MemoryId, i64)>,
    pub next: Option<MemoryId>,
}

/// A nearest-neighbour query inside one project. `None` filters match anything.
#[derive(Clone, Debug, PartialEq)]
pub struct VectorQuery {
    pub vector: Vec<f32>,
    pub limit: usize,
    pub user_id: Option<String>,
    pub agent_id: Option<String>,
    pub session_id: Option<String>,
    /// Empty means every kind.
    pub kinds: Vec<MemoryKind>,
    /// Conditions of the caller's filter the payload answers, applied before the top-k cut.
    pub filter: Option<PayloadFilter>,
}

/// A keyword (BM25) query inside one project: `text` is tokenized by the index itself
/// (English stemming and stop words, Chinese and Japanese segmentation). Term statistics
/// (IDF) never include another project's points, nor, when `user_id` is given, another
/// end-user's: the embedded index counts them over the project, or over the end-user's
/// points; a cluster, and an embedded index created before sparse BM25 vectors, gather them
/// over the points the filters let through.
#[derive(Clone, Debug, PartialEq)]
pub struct KeywordQuery {
    pub text: String,
    pub limit: usize,
    pub user_id: Option<String>,
    pub agent_id: Option<String>,
    pub session_id: Option<String>,
    /// Empty means every kind.
    pub kinds: Vec<MemoryKind>,
    /// Score only these memories (their term statistics are those of the query without
    /// it). `None`: every memory.
    pub only_ids: Option<Vec<MemoryId>>,
    /// Conditions of the caller's filter the payload answers, applied before the top-k cut
    /// (term statistics do not depend on it).
    pub filter: Option<PayloadFilter>,
}

/// The version of the point layout written by this code. Points of an older layout (written
/// before keyword search existed, so without `text`) are reported as stale by
/// [`VectorIndex::points_page`] and rewritten by the reconciler.
/// Layout 3 added the fields filters read (source, categories, confidence, times, metadata).
pub const POINT_LAYOUT: i64 = 3;

/// One search hit: cosine similarity in [-1, 1] for vector search, a BM25 score (≥ 0,
/// unbounded) for keyword search.
#[derive(Clone, Debug, PartialEq)]
pub struct VectorHit {
    pub memory_id: MemoryId,
    pub version: i64,
    pub score: f32,
}

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("vector index unavailable: {0}")]
    Unavailable(String),
    #[error("vector has dimension {actual}, the index expects {expected}")]
    DimensionMismatch { expected: usize, actual: usize },
    #[error("vector index failure: {0}")]
    Internal(String),
}

#[async_trait]
pub trait VectorIndex: Send + Sync + 'static {
    /// Insert or replace points of `scope`'s project. A point whose stored version is newer
    /// than the one given is left as it is (stale writes never win). Idempotent.
    async fn upsert(
        &self,
        scope: &ProjectScope,
        points: Vec<IndexedMemory>,
    ) -> Result<(), IndexError>;

    /// Remove points of `scope`'s project. Ids that are absent (or belong to another
    /// project) are ignored. Idempotent.
    async fn delete(&self, scope: &ProjectScope, ids: Vec<MemoryId>) -> Result<(), IndexError>;

    /// Nearest neighbours inside `scope`'s project, best first.
    async fn search(
        &self,
        scope: &ProjectScope,
        query: VectorQuery,
    ) -> Result<Vec<VectorHit>, IndexError>;

    /// Best BM25 matches of `query.text` inside `scope`'s project, best first. Memories
    /// without any query term are not returned.
    async fn keyword_search(
        &self,
        scope: &ProjectScope,
        query: KeywordQuery,
    ) -> Result<Vec<VectorHit>, IndexError>;

    /// Whether a keyword search that returns fewer hits than its limit is known to hold
    /// every memory its filters let through that has a query term. A sharded cluster may ask
    /// each shard for fewer than the limit, so the default is no.
    fn keyword_lists_are_complete(&self) -> bool {
        false
    }

    /// The stored version of each of `ids` that is present in `scope`'s project.
    async fn versions(
        &self,
        scope: &ProjectScope,
        ids: Vec<MemoryId>,
    ) -> Result<HashMap<MemoryId, i64>, IndexError>;

    /// One page of `scope`'s points in id order, as (id, version), starting at `from`
    /// (inclusive), and where the next page starts. The reconciler walks the whole project
    /// with it to find points whose memory is gone (orphans). A point of an older
    /// [`POINT_LAYOUT`] is reported with version `i64::MIN`, so it gets rewritten.
    async fn points_page(
        &self,
        scope: &ProjectScope,
        from: Option<MemoryId>,
        limit: usize,
    ) -> Result<PointsPage, IndexError>;

    /// Remove every point of one end-user of `scope`'s project, whatever its id (subject
    /// erasure: also catches points whose memory row is already gone). Idempotent.
    async fn delete_subject(&self, scope: &ProjectScope, user_id: &str) -> Result<(), IndexError>;

    /// Exact number of `scope`'s points, of one end-user when `user_id` is given. Erasure
    /// verification asks the index itself, not the database's idea of it.
    async fn count_points(
        &self,
        scope: &ProjectScope,
        user_id: Option<&str>,
    ) -> Result<u64, IndexError>;

    /// Make every applied write durable on disk.
    async fn flush(&self) -> Result<(), IndexError>;

    /// Cheap check for `/readyz`.
    async fn check_ready(&self) -> Result<(), IndexError>;
}
