//! The in-process vector index on qdrant-edge: one shard directory holds every project's points,
//! isolated by payload filters, plus the background thread that builds HNSW indexes and flushes.

use crate::keyword_statistics::{DocumentTerms, KeywordStatistics};
use crate::payload_filter::{
    CATEGORIES_FIELD, CONFIDENCE_FIELD, CREATED_MICROS_FIELD, METADATA_FIELD,
    OCCURRED_MICROS_FIELD, SOURCE_FIELD, UPDATED_MICROS_FIELD, VERIFIED_FIELD, VISIBILITY_FIELD,
    payload_metadata,
};
use crate::{
    IndexError, IndexedMemory, KeywordQuery, POINT_LAYOUT, PayloadFilter, PointsPage, VectorHit,
    VectorIndex, VectorQuery,
};
use async_trait::async_trait;
use engram_core::memory_filter::Comparison;
use engram_core::{MemoryId, ProjectScope};
use qdrant_edge::bm25_embed::EdgeBm25;
use qdrant_edge::{
    Bm25Params, Condition, CountRequestBuilder, CreateIndex, DEFAULT_VECTOR_NAME, Distance,
    EdgeConfig, EdgeOptimizersConfig, EdgeShard, EdgeSparseVectorParams, EdgeVectorParams,
    FieldCondition, FieldIndexOperations, Filter, HasIdCondition, HnswIndexConfig, IdfCorpusParams,
    IdfParams, JsonPath, KeywordIndexParamsBuilder, Language, Match, Memory, NamedQuery,
    OperationError, Payload, PayloadFieldSchema, PayloadSchemaParams, PointId,
    PointInsertOperations, PointOperations, PointStruct, QuantizationSearchParams, QueryEnum,
    QueryRequestBuilder, RetrieveRequestBuilder, ScalarQuantizationConfig, ScalarType,
    ScoringQuery, ScrollRequestBuilder, SearchParams, Snowball, SnowballLanguage, SnowballParams,
    SparseVector, StemmingAlgorithm, StopwordsInterface, TextIndexParamsBuilder, TextQueryBuilder,
    TextQueryScoring, TextScoringParams, TextScoringType, TokenizerType, UpdateOperation,
    VectorInternal, VectorStructInternal, Vectors, WithPayloadInterface, WithVector,
};
use serde_json::{Value as JsonValue, json};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use uuid::Uuid;

const ORGANIZATION_ID_FIELD: &str = "organization_id";
const PROJECT_ID_FIELD: &str = "project_id";
const USER_ID_FIELD: &str = "user_id";
const AGENT_ID_FIELD: &str = "agent_id";
const SESSION_ID_FIELD: &str = "session_id";
const KIND_FIELD: &str = "kind";
const VERSION_FIELD: &str = "version";
const CREATED_AT_FIELD: &str = "created_at";
/// The memory's content, with a BM25-scored full-text index, in shards created before the
/// sparse BM25 vector (new shards store no text).
const TEXT_FIELD: &str = "text";
/// Each memory's BM25 term weights, as a sparse vector (see [`crate::keyword_statistics`]).
const BM25_VECTOR: &str = "bm25";
use crate::payload_filter::LAYOUT_FIELD;

/// Fields every filter may touch; each gets a keyword payload index so filtered search does not
/// have to read payloads point by point.
const KEYWORD_INDEXED_FIELDS: [&str; 7] = [
    ORGANIZATION_ID_FIELD,
    PROJECT_ID_FIELD,
    USER_ID_FIELD,
    AGENT_ID_FIELD,
    SESSION_ID_FIELD,
    KIND_FIELD,
    VISIBILITY_FIELD,
];

/// Points stored in an embedded index (approximate, as qdrant-edge counts them), by index
/// directory (`index` for the default model).
pub const INDEX_POINTS: &str = "engram_index_points";
/// Of those, vectors inside HNSW-indexed segments: searches over the rest scan them.
pub const INDEX_INDEXED_VECTORS: &str = "engram_index_indexed_vectors";
pub const INDEX_SEGMENTS: &str = "engram_index_segments";
/// Points written since the optimizer last started: 0 means it has seen every write.
pub const INDEX_UNOPTIMIZED_WRITES: &str = "engram_index_unoptimized_writes";
/// 1 while the optimizer runs (building HNSW graphs, merging or vacuuming segments).
pub const INDEX_OPTIMIZING: &str = "engram_index_optimizing";
/// Optimizer passes that ended, whether or not they found work.
pub const INDEX_OPTIMIZER_PASSES_TOTAL: &str = "engram_index_optimizer_passes_total";

/// Tuning of the background maintenance. The defaults suit a service; tests and benchmarks lower
/// the indexing threshold so HNSW building happens on small data sets too.
#[derive(Clone, Debug)]
pub struct EdgeIndexOptions {
    /// Run the optimizer as soon as this many points were written since its last run.
    pub optimize_after_written_points: u64,
    /// Run the optimizer at least this often while there were writes, however few.
    pub optimize_interval: Duration,
    /// While writes keep arriving (a bulk load, a reconciliation), the optimizer waits until
    /// they pause this long, so graphs are built once over what was loaded rather than again
    /// after every thousand points...
    pub bulk_load_pause: Duration,
    /// ...unless this many points are waiting: searches during a long load then scan about
    /// this many points that no graph holds yet (plus what is written during a pass)...
    pub bulk_load_most_waiting_points: u64,
    /// ...or the last pass was this long ago: steady traffic that never pauses for
    /// `bulk_load_pause` is still put in graphs within this time.
    pub bulk_load_longest_wait: Duration,
    /// How often the maintenance thread wakes to flush pending writes to disk (and to check the
    /// optimize interval). This bounds how much an OS crash or power loss can take.
    pub maintenance_tick: Duration,
    /// Size (KB of vectors) above which a segment gets an HNSW index. `None` keeps what the shard
    /// already has, or qdrant-edge's default (10,000 KB) for a new shard.
    pub indexing_threshold_kb: Option<usize>,
    /// Size (KB of float vectors) up to which the optimizer merges segments. Every search
    /// walks each segment's graph, so fewer, larger segments cost a search less; qdrant-edge's
    /// default (256 MB per optimizer thread) left a million memories in 9 segments here.
    pub max_segment_size_kb: usize,
    pub tuning: EdgeIndexTuning,
}

/// Segments grow to 1 GiB of float vectors (or qdrant-edge's 256 MB per optimizer thread,
/// if more): about 700,000 memories of 384 dimensions, so on this 2-core machine (where
/// qdrant-edge aims at 2 segments) a million memories are two segments (see
/// `tests/BENCHMARKS.md`, "The embedded index on disk").
pub const DEFAULT_MAX_SEGMENT_SIZE_KB: usize = 1024 * 1024;

/// qdrant-edge's own segment cap per optimizer thread (KB), which the configured one never
/// goes below (qdrant-edge 0.9 does not export it).
const QDRANT_EDGE_SEGMENT_KB_PER_THREAD: usize = 256_000;
/// Where qdrant-edge keeps a shard's segments (its `SEGMENTS_PATH`, not exported).
const SEGMENTS_DIRECTORY: &str = "segments";

impl Default for EdgeIndexOptions {
    fn default() -> Self {
        Self {
            optimize_after_written_points: 1_000,
            optimize_interval: Duration::from_secs(5),
            bulk_load_pause: Duration::from_secs(2),
            bulk_load_most_waiting_points: 100_000,
            bulk_load_longest_wait: Duration::from_secs(60),
            maintenance_tick: Duration::from_secs(1),
            indexing_threshold_kb: None,
            max_segment_size_kb: DEFAULT_MAX_SEGMENT_SIZE_KB,
            tuning: EdgeIndexTuning::default(),
        }
    }
}

/// What an operator may tune in the embedded index (`--index-search-ef`,
/// `--index-optimizer-threads`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EdgeIndexTuning {
    /// Candidates kept while walking the HNSW graph (`hnsw_ef`).
    pub search_ef: u64,
    /// Threads one optimizer pass may use to build a graph. Fewer than the cores leaves
    /// searches and writes a core while the optimizer runs.
    pub optimizer_threads: usize,
}

impl EdgeIndexTuning {
    /// The machine's cores but one (at least one).
    pub fn cores_but_one() -> usize {
        std::thread::available_parallelism()
            .map(|cores| cores.get())
            .unwrap_or(1)
            .saturating_sub(1)
            .max(1)
    }
}

impl Default for EdgeIndexTuning {
    fn default() -> Self {
        Self {
            search_ef: crate::HnswSettings::MEASURED_SEARCH_EF,
            optimizer_threads: Self::cores_but_one(),
        }
    }
}

/// Sizes of the shard as a whole (every project), for benchmarks and diagnostics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EdgeIndexStatistics {
    pub segment_count: usize,
    /// Approximate, as qdrant-edge reports it.
    pub point_count: usize,
    /// Vectors inside HNSW-indexed segments.
    pub indexed_vector_count: usize,
}

/// A [`VectorIndex`] backed by one qdrant-edge shard on local disk.
///
/// Dropping it stops the maintenance thread (waiting for an optimization in progress to end)
/// and flushes the shard, so drop it outside async worker threads or accept the short block.
pub struct EdgeVectorIndex {
    shared: Arc<SharedShard>,
    maintenance: Option<MaintenanceThread>,
    optimize_after_written_points: u64,
}

/// How a shard answers keyword queries, fixed when the shard is created.
enum KeywordScoring {
    /// Each point holds its BM25 term weights as a sparse vector; the query's term weights come
    /// from statistics kept here, so a query reads only its terms' posting lists (shared by
    /// the shard's projects, each entry checked against the query's filter) instead of
    /// gathering statistics over the project.
    SparseVector {
        model: EdgeBm25,
        statistics: RwLock<KeywordStatistics>,
    },
    /// A shard created before the sparse vector: a BM25-scored full-text index whose term
    /// statistics are gathered over the query's corpus on every query, at a cost that grows
    /// with the project. Rebuilding the index (removing its directory; the start-up
    /// reconciliation writes every memory again) moves it to the sparse vector.
    FullText,
}

/// State shared between the index handle, its blocking tasks and the maintenance thread.
struct SharedShard {
    shard: EdgeShard,
    keyword_scoring: KeywordScoring,
    dimension: usize,
    /// `hnsw_ef` of every vector search.
    search_ef: usize,
    directory: PathBuf,
    /// The directory's name, the `index` label of this index's metrics.
    index_label: String,
    /// Serialises upserts and deletes, so the stored-version check and the write it guards form
    /// one critical section: two concurrent upserts of one memory cannot both pass the check.
    write_lock: Mutex<()>,
    /// One optimization at a time, whether the maintenance thread or `optimize_now` asks.
    optimize_lock: Mutex<()>,
    points_written_since_optimize: AtomicU64,
    unflushed_writes: AtomicBool,
    /// Cleared when a background flush or optimization fails, so `/readyz` reports the broken disk.
    background_work_healthy: AtomicBool,
    /// Set when a write failed: the maintenance thread then counts the keyword statistics again.
    keyword_statistics_need_recount: AtomicBool,
    /// When the shard opened: the clock `last_write_millis` counts from.
    opened_at: Instant,
    /// Milliseconds from `opened_at` to the last write, for the bulk-load pause.
    last_write_millis: AtomicU64,
    /// When the sizes were last published from the write path: at most once a second there,
    /// since a long optimizer pass keeps the maintenance thread from publishing them.
    sizes_published_at: Mutex<Instant>,
}

enum MaintenanceSignal {
    /// Enough writes accumulated: optimize now rather than at the next tick.
    WritesAccumulated,
    Shutdown,
}

struct MaintenanceThread {
    signal_sender: mpsc::Sender<MaintenanceSignal>,
    handle: JoinHandle<()>,
}

impl EdgeVectorIndex {
    /// Open the shard in `directory`, creating it (and the directory) when absent. Vectors have
    /// `dimension` components and are compared by cosine similarity.
    pub fn open(directory: &Path, dimension: usize) -> Result<Self, IndexError> {
        Self::open_with_options(directory, dimension, EdgeIndexOptions::default())
    }

    pub fn open_with_options(
        directory: &Path,
        dimension: usize,
        options: EdgeIndexOptions,
    ) -> Result<Self, IndexError> {
        if dimension == 0 {
            return Err(IndexError::Unavailable(
                "vector dimension must be at least 1".to_string(),
            ));
        }
        std::fs::create_dir_all(directory).map_err(|io_error| {
            IndexError::Unavailable(format!(
                "cannot create index directory {}: {io_error}",
                directory.display()
            ))
        })?;

        // A shard keeps the vectors it was created with: one created before the sparse BM25
        // vector keeps its full-text index.
        let stored_config = match EdgeConfig::load(directory) {
            Some(stored) => stored.ok(),
            None => config_of_segments(directory),
        };
        let created_with_full_text = stored_config
            .as_ref()
            .is_some_and(|stored| !stored.sparse_vectors.contains_key(BM25_VECTOR));
        // A shard laid out otherwise (floats in RAM, payloads cached) is rebuilt by the
        // optimizer: a pass is due soon after the open, not only after the next write.
        let laid_out_otherwise = stored_config.as_ref().is_some_and(|stored| {
            stored.vectors.get(DEFAULT_VECTOR_NAME) != Some(&dense_vector_params(dimension))
                || stored.payload_memory != Some(Memory::Cold)
        });
        let mut config_builder = EdgeConfig::builder()
            .vector(DEFAULT_VECTOR_NAME, dense_vector_params(dimension))
            // The graph settings are qdrant-edge's defaults (m 16, ef_construct 100; only the
            // search's hnsw_ef was measured, in tests/BENCHMARKS.md); the thread cap does not
            // change a built graph, so an existing shard takes it without a rebuild.
            .hnsw_config(HnswIndexConfig {
                max_indexing_threads: options.tuning.optimizer_threads.max(1),
                ..HnswIndexConfig::default()
            })
            // Payloads are read for a search's hits and a write's version check, never scanned
            // (filters go through the payload indexes): they stay on disk, paged in as read.
            .payload_memory(Memory::Cold);
        // Optimizer settings given here replace the stored ones as a whole, so they start
        // from what the shard has.
        let stored_optimizers = stored_config
            .as_ref()
            .and_then(|stored| stored.optimizers.clone())
            .unwrap_or_default();
        config_builder =
            config_builder.optimizers(EdgeOptimizersConfig {
                indexing_threshold: options
                    .indexing_threshold_kb
                    .or(stored_optimizers.indexing_threshold),
                max_segment_size: Some(options.max_segment_size_kb.max(
                    options.tuning.optimizer_threads.max(1) * QDRANT_EDGE_SEGMENT_KB_PER_THREAD,
                )),
                ..stored_optimizers
            });
        if !created_with_full_text {
            // The inverted index stays in RAM (qdrant's default for sparse vectors): a
            // memory has a few dozen terms, so it is small beside the dense vectors.
            config_builder =
                config_builder.sparse_vector(BM25_VECTOR, EdgeSparseVectorParams::default());
        }

        // `load` creates a fresh shard in an empty directory and, for an existing one, checks the
        // vector definition against the stored segments and replays the WAL left by a crash.
        let shard =
            EdgeShard::load(directory, Some(config_builder.build())).map_err(|engine_error| {
                IndexError::Unavailable(format!(
                    "cannot open vector index at {}: {engine_error}",
                    directory.display()
                ))
            })?;
        ensure_payload_indexes(&shard, created_with_full_text)?;
        let keyword_scoring = if created_with_full_text {
            tracing::warn!(
                directory = %directory.display(),
                "this index was created before sparse keyword vectors: keyword search keeps \
                 gathering its term statistics per query, at a cost that grows with the \
                 project; remove the directory to rebuild it from the database"
            );
            KeywordScoring::FullText
        } else {
            KeywordScoring::SparseVector {
                model: crate::keywords::bm25_model()?,
                statistics: RwLock::new(keyword_statistics_of(&shard)?),
            }
        };

        let shared = Arc::new(SharedShard {
            shard,
            keyword_scoring,
            dimension,
            search_ef: options.tuning.search_ef.max(1) as usize,
            directory: directory.to_path_buf(),
            index_label: directory
                .file_name()
                .map(|name| name.to_string_lossy().into_owned())
                .unwrap_or_default(),
            write_lock: Mutex::new(()),
            optimize_lock: Mutex::new(()),
            points_written_since_optimize: AtomicU64::new(u64::from(laid_out_otherwise)),
            unflushed_writes: AtomicBool::new(false),
            background_work_healthy: AtomicBool::new(true),
            keyword_statistics_need_recount: AtomicBool::new(false),
            opened_at: Instant::now(),
            last_write_millis: AtomicU64::new(0),
            sizes_published_at: Mutex::new(Instant::now()),
        });
        shared.publish_sizes();
        let optimize_after_written_points = options.optimize_after_written_points.max(1);
        let maintenance = MaintenanceThread::start(Arc::clone(&shared), &options)?;
        tracing::info!(directory = %directory.display(), dimension, "opened edge vector index");
        Ok(Self {
            shared,
            maintenance: Some(maintenance),
            optimize_after_written_points,
        })
    }

    pub fn dimension(&self) -> usize {
        self.shared.dimension
    }

    pub fn directory(&self) -> &Path {
        &self.shared.directory
    }

    /// Build HNSW indexes and merge or vacuum segments until there is nothing left to do.
    /// Blocking (seconds on large data); call it from a blocking context.
    /// Returns whether anything was optimized.
    pub fn optimize_now(&self) -> Result<bool, IndexError> {
        self.shared.optimize()
    }

    /// Number of points stored for `scope`'s project (exact).
    pub async fn point_count(&self, scope: &ProjectScope) -> Result<usize, IndexError> {
        let project_filter = Filter::new_must(project_condition(scope)?);
        self.run_blocking(move |shared| {
            let request = CountRequestBuilder::new()
                .filter(project_filter)
                .exact(true)
                .build();
            shared
                .shard
                .count(request)
                .map_err(|engine_error| engine_failure("count points", engine_error))
        })
        .await
    }

    /// Segment and point counts of the whole shard.
    pub async fn statistics(&self) -> Result<EdgeIndexStatistics, IndexError> {
        self.run_blocking(|shared| {
            let info = shared
                .shard
                .info()
                .map_err(|engine_error| engine_failure("read shard info", engine_error))?;
            Ok(EdgeIndexStatistics {
                segment_count: info.segments_count,
                point_count: info.points_count,
                indexed_vector_count: shared.indexed_dense_vectors(&info),
            })
        })
        .await
    }

    /// Run a synchronous qdrant-edge call on tokio's blocking pool, never on an async worker.
    async fn run_blocking<T, F>(&self, operation: F) -> Result<T, IndexError>
    where
        T: Send + 'static,
        F: FnOnce(&SharedShard) -> Result<T, IndexError> + Send + 'static,
    {
        let shared = Arc::clone(&self.shared);
        tokio::task::spawn_blocking(move || operation(&shared))
            .await
            .map_err(|join_error| {
                IndexError::Internal(format!("vector index task failed: {join_error}"))
            })?
    }

    fn check_dimension(&self, vector: &[f32]) -> Result<(), IndexError> {
        if vector.len() == self.shared.dimension {
            Ok(())
        } else {
            Err(IndexError::DimensionMismatch {
                expected: self.shared.dimension,
                actual: vector.len(),
            })
        }
    }

    fn record_points_written(&self, written_point_count: usize) {
        if written_point_count == 0 {
            return;
        }
        self.shared.unflushed_writes.store(true, Ordering::Release);
        // Writers race: the latest of their clocks must win.
        self.shared.last_write_millis.fetch_max(
            self.shared.opened_at.elapsed().as_millis() as u64,
            Ordering::AcqRel,
        );
        let written = written_point_count as u64;
        let before = self
            .shared
            .points_written_since_optimize
            .fetch_add(written, Ordering::AcqRel);
        self.shared.publish_unoptimized_writes();
        self.shared.publish_sizes_at_most_each_second();
        // Wake the thread once per threshold crossing rather than on every write after it.
        if before < self.optimize_after_written_points
            && before + written >= self.optimize_after_written_points
            && let Some(maintenance) = &self.maintenance
        {
            // A closed channel means the thread is gone; the periodic work is then lost anyway.
            let _ = maintenance
                .signal_sender
                .send(MaintenanceSignal::WritesAccumulated);
        }
    }
}

impl Drop for EdgeVectorIndex {
    fn drop(&mut self) {
        if let Some(maintenance) = self.maintenance.take() {
            maintenance.stop();
        }
        // The shard itself flushes when the last Arc (possibly held by a still-running blocking
        // task) goes away.
    }
}

#[async_trait]
impl VectorIndex for EdgeVectorIndex {
    async fn upsert(
        &self,
        scope: &ProjectScope,
        points: Vec<IndexedMemory>,
    ) -> Result<(), IndexError> {
        for point in &points {
            self.check_dimension(&point.vector)?;
        }
        if points.is_empty() {
            return Ok(());
        }
        let scope = *scope;
        let written_point_count = self
            .run_blocking(move |shared| shared.upsert(&scope, points))
            .await?;
        self.record_points_written(written_point_count);
        Ok(())
    }

    async fn delete(&self, scope: &ProjectScope, ids: Vec<MemoryId>) -> Result<(), IndexError> {
        if ids.is_empty() {
            return Ok(());
        }
        let scope = *scope;
        let requested_count = ids.len();
        self.run_blocking(move |shared| shared.delete(&scope, ids))
            .await?;
        // Deletions leave holes the vacuum optimizer reclaims, so they count towards optimizing.
        self.record_points_written(requested_count);
        Ok(())
    }

    async fn delete_subject(&self, scope: &ProjectScope, user_id: &str) -> Result<(), IndexError> {
        let scope = *scope;
        let user_id = user_id.to_string();
        self.run_blocking(move |shared| shared.delete_subject(&scope, user_id))
            .await?;
        self.record_points_written(1);
        Ok(())
    }

    async fn count_points(
        &self,
        scope: &ProjectScope,
        user_id: Option<&str>,
    ) -> Result<u64, IndexError> {
        let mut conditions = vec![project_condition(scope)?];
        if let Some(user_id) = user_id {
            conditions.push(keyword_condition(
                USER_ID_FIELD,
                Match::from(user_id.to_string()),
            )?);
        }
        let count_filter = Filter {
            should: None,
            min_should: None,
            must: Some(conditions),
            must_not: None,
        };
        self.run_blocking(move |shared| {
            let request = CountRequestBuilder::new()
                .filter(count_filter)
                .exact(true)
                .build();
            shared
                .shard
                .count(request)
                .map(|count| count as u64)
                .map_err(|engine_error| engine_failure("count points", engine_error))
        })
        .await
    }

    async fn search(
        &self,
        scope: &ProjectScope,
        query: VectorQuery,
    ) -> Result<Vec<VectorHit>, IndexError> {
        self.check_dimension(&query.vector)?;
        if query.limit == 0 {
            return Ok(Vec::new());
        }
        let scope = *scope;
        self.run_blocking(move |shared| shared.search(&scope, query))
            .await
    }

    async fn keyword_search(
        &self,
        scope: &ProjectScope,
        query: KeywordQuery,
    ) -> Result<Vec<VectorHit>, IndexError> {
        if query.limit == 0 || query.text.trim().is_empty() {
            return Ok(Vec::new());
        }
        let scope = *scope;
        self.run_blocking(move |shared| shared.keyword_search(&scope, query))
            .await
    }

    async fn versions(
        &self,
        scope: &ProjectScope,
        ids: Vec<MemoryId>,
    ) -> Result<HashMap<MemoryId, i64>, IndexError> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let project_id = project_id_text(scope);
        self.run_blocking(move |shared| {
            let stored = shared.stored_points(ids.iter().map(MemoryId::as_uuid), false)?;
            Ok(stored
                .into_iter()
                .filter(|(_, stored_point)| {
                    stored_point.project_id.as_deref() == Some(project_id.as_str())
                })
                .map(|(point_uuid, stored_point)| {
                    (MemoryId::from_uuid(point_uuid), stored_point.version)
                })
                .collect())
        })
        .await
    }

    async fn points_page(
        &self,
        scope: &ProjectScope,
        from: Option<MemoryId>,
        limit: usize,
    ) -> Result<PointsPage, IndexError> {
        let project_filter = Filter::new_must(project_condition(scope)?);
        let limit = limit.max(1);
        self.run_blocking(move |shared| {
            let mut request = ScrollRequestBuilder::new()
                .limit(limit)
                .filter(project_filter)
                .with_payload(WithPayloadInterface::Fields(vec![
                    field_path(VERSION_FIELD)?,
                    field_path(LAYOUT_FIELD)?,
                ]))
                .with_vector(WithVector::Bool(false));
            if let Some(from) = from {
                request = request.offset(PointId::Uuid(from.as_uuid()));
            }
            let (records, next) = shared
                .shard
                .scroll(request.build())
                .map_err(|engine_error| engine_failure("scroll points", engine_error))?;
            let points = records
                .into_iter()
                .filter_map(|record| match record.id {
                    PointId::Uuid(point_uuid) => Some((
                        MemoryId::from_uuid(point_uuid),
                        current_layout_version(record.payload.as_ref()),
                    )),
                    _ => None,
                })
                .collect();
            let next = match next {
                Some(PointId::Uuid(point_uuid)) => Some(MemoryId::from_uuid(point_uuid)),
                _ => None,
            };
            Ok(PointsPage { points, next })
        })
        .await
    }

    fn keyword_lists_are_complete(&self) -> bool {
        // Every segment is asked for the full limit, and the filter is applied exactly.
        true
    }

    async fn flush(&self) -> Result<(), IndexError> {
        self.run_blocking(|shared| shared.flush()).await
    }

    async fn check_ready(&self) -> Result<(), IndexError> {
        if !self.shared.background_work_healthy.load(Ordering::Acquire) {
            return Err(IndexError::Unavailable(
                "the last background flush or optimization failed".to_string(),
            ));
        }
        match &self.maintenance {
            Some(maintenance) if !maintenance.handle.is_finished() => Ok(()),
            _ => Err(IndexError::Unavailable(
                "the vector index maintenance thread has stopped".to_string(),
            )),
        }
    }
}

/// What the stale-write check needs to know about a point already in the shard.
struct StoredPoint {
    project_id: Option<String>,
    version: i64,
    /// Its share of the keyword statistics, when asked for.
    terms: Option<DocumentTerms>,
}

impl SharedShard {
    /// Returns how many points were written (stale and foreign ones are skipped).
    fn upsert(
        &self,
        scope: &ProjectScope,
        points: Vec<IndexedMemory>,
    ) -> Result<usize, IndexError> {
        // Within one batch the highest version of a memory wins, as it would across batches.
        let mut newest_by_id: HashMap<Uuid, IndexedMemory> = HashMap::with_capacity(points.len());
        for point in points {
            let point_uuid = point.memory_id.as_uuid();
            match newest_by_id.get(&point_uuid) {
                Some(kept) if kept.version > point.version => {}
                _ => {
                    newest_by_id.insert(point_uuid, point);
                }
            }
        }

        let project_id = project_id_text(scope);
        let organization_id = scope.organization_id().as_uuid().to_string();
        // Tokenizing (jieba, vaporetto, stemming) happens before the lock every write takes.
        let mut keyword_weights: HashMap<Uuid, SparseVector> = match &self.keyword_scoring {
            KeywordScoring::SparseVector { model, .. } => newest_by_id
                .iter()
                .map(|(point_uuid, point)| (*point_uuid, keyword_weights_of(model, &point.text)))
                .collect(),
            KeywordScoring::FullText => HashMap::new(),
        };
        let sparse = matches!(self.keyword_scoring, KeywordScoring::SparseVector { .. });
        let _write_guard = lock_ignoring_poison(&self.write_lock);
        let mut stored = self.stored_points(newest_by_id.keys().copied(), sparse)?;

        let mut skipped_stale_count = 0usize;
        let mut accepted_points = Vec::with_capacity(newest_by_id.len());
        // (replaced, written) shares of the keyword statistics, applied once the write is in.
        let mut term_changes = Vec::new();
        for (point_uuid, point) in newest_by_id {
            if let Some(stored_point) = stored.get(&point_uuid) {
                if stored_point.project_id.as_deref() != Some(project_id.as_str()) {
                    // Memory ids are generated server-side and never shared between projects;
                    // refusing keeps one tenant from ever replacing another tenant's point.
                    tracing::warn!(
                        memory_id = %point_uuid,
                        project_id = %project_id,
                        "skipped upsert of a point owned by another project"
                    );
                    continue;
                }
                if stored_point.version > point.version {
                    skipped_stale_count += 1;
                    continue;
                }
            }
            let keyword_weights = keyword_weights.remove(&point_uuid);
            if let Some(weights) = &keyword_weights {
                let replaced = stored
                    .remove(&point_uuid)
                    .and_then(|stored_point| stored_point.terms);
                let written = DocumentTerms {
                    project_id: project_id.clone(),
                    user_id: point.user_id.clone(),
                    terms: terms_of(weights),
                };
                term_changes.push((replaced, written));
            }
            accepted_points.push(
                point_struct(
                    point_uuid,
                    &organization_id,
                    &project_id,
                    point,
                    keyword_weights,
                )
                .into(),
            );
        }

        let written_point_count = accepted_points.len();
        if written_point_count > 0 {
            let operation = UpdateOperation::PointOperation(PointOperations::UpsertPoints(
                PointInsertOperations::PointsList(accepted_points),
            ));
            self.shard.update(operation).map_err(|engine_error| {
                self.recount_keyword_statistics_later();
                engine_failure("upsert points", engine_error)
            })?;
        }
        if let KeywordScoring::SparseVector { statistics, .. } = &self.keyword_scoring
            && !term_changes.is_empty()
        {
            let mut statistics = statistics.write().unwrap_or_else(PoisonError::into_inner);
            for (replaced, written) in &term_changes {
                if let Some(replaced) = replaced {
                    statistics.remove(replaced);
                }
                statistics.add(written);
            }
        }
        tracing::debug!(
            project_id = %project_id,
            written_point_count,
            skipped_stale_count,
            "upserted points into the edge vector index"
        );
        Ok(written_point_count)
    }

    fn delete(&self, scope: &ProjectScope, ids: Vec<MemoryId>) -> Result<(), IndexError> {
        let requested_count = ids.len();
        // Deleting by filter (ids AND project) makes a foreign id a no-op by construction.
        let delete_filter = Filter {
            should: None,
            min_should: None,
            must: Some(vec![
                project_condition(scope)?,
                Condition::HasId(
                    ids.iter()
                        .map(|memory_id| PointId::Uuid(memory_id.as_uuid()))
                        .collect::<HasIdCondition>(),
                ),
            ]),
            must_not: None,
        };
        let _write_guard = lock_ignoring_poison(&self.write_lock);
        // The deleted points' terms leave the statistics; only this project's points are
        // deleted, so only theirs are read.
        let removed_terms: Vec<DocumentTerms> = match &self.keyword_scoring {
            KeywordScoring::SparseVector { .. } => {
                let project_id = project_id_text(scope);
                self.stored_points(ids.iter().map(MemoryId::as_uuid), true)?
                    .into_values()
                    .filter(|stored_point| stored_point.project_id.as_deref() == Some(&project_id))
                    .filter_map(|stored_point| stored_point.terms)
                    .collect()
            }
            KeywordScoring::FullText => Vec::new(),
        };
        self.shard
            .update(UpdateOperation::PointOperation(
                PointOperations::DeletePointsByFilter(delete_filter),
            ))
            .map_err(|engine_error| {
                self.recount_keyword_statistics_later();
                engine_failure("delete points", engine_error)
            })?;
        if let KeywordScoring::SparseVector { statistics, .. } = &self.keyword_scoring {
            let mut statistics = statistics.write().unwrap_or_else(PoisonError::into_inner);
            for removed in &removed_terms {
                statistics.remove(removed);
            }
        }
        tracing::debug!(
            project_id = %scope.project_id(),
            requested_count,
            "deleted points from the edge vector index"
        );
        Ok(())
    }

    fn delete_subject(&self, scope: &ProjectScope, user_id: String) -> Result<(), IndexError> {
        let delete_filter = Filter {
            should: None,
            min_should: None,
            must: Some(vec![
                project_condition(scope)?,
                keyword_condition(USER_ID_FIELD, Match::from(user_id.clone()))?,
            ]),
            must_not: None,
        };
        let _write_guard = lock_ignoring_poison(&self.write_lock);
        self.shard
            .update(UpdateOperation::PointOperation(
                PointOperations::DeletePointsByFilter(delete_filter),
            ))
            .map_err(|engine_error| {
                self.recount_keyword_statistics_later();
                engine_failure("delete a subject's points", engine_error)
            })?;
        if let KeywordScoring::SparseVector { statistics, .. } = &self.keyword_scoring {
            statistics
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .remove_end_user(&project_id_text(scope), &user_id);
        }
        Ok(())
    }

    fn search(
        &self,
        scope: &ProjectScope,
        query: VectorQuery,
    ) -> Result<Vec<VectorHit>, IndexError> {
        let mut search_filter = search_filter(
            scope,
            [query.user_id, query.agent_id, query.session_id],
            &query.kinds,
        )?;
        if let Some(filter) = &query.filter
            && let Some(conditions) = search_filter.must.as_mut()
        {
            conditions.push(payload_condition(filter)?);
        }
        let request = QueryRequestBuilder::new(query.limit)
            .query(ScoringQuery::Vector(QueryEnum::Nearest(NamedQuery {
                query: VectorInternal::Dense(query.vector),
                using: None,
            })))
            .params(rescored_search_params(self.search_ef))
            .filter(search_filter)
            .with_payload(WithPayloadInterface::Fields(vec![field_path(
                VERSION_FIELD,
            )?]))
            .with_vector(WithVector::Bool(false))
            .build();
        let scored_points = self
            .shard
            .query(request)
            .map_err(|engine_error| engine_failure("search points", engine_error))?;
        Ok(hits_of(scored_points))
    }

    fn keyword_search(
        &self,
        scope: &ProjectScope,
        query: KeywordQuery,
    ) -> Result<Vec<VectorHit>, IndexError> {
        match &self.keyword_scoring {
            KeywordScoring::SparseVector { model, statistics } => {
                self.sparse_keyword_search(scope, query, model, statistics)
            }
            KeywordScoring::FullText => self.full_text_keyword_search(scope, query),
        }
    }

    /// BM25 as a dot product: the query's terms weighted by their inverse document frequency
    /// in the project (or the end-user's memories), against each memory's stored term
    /// weights. Only the query terms' posting lists are read; with `only_ids`, only those
    /// points are scored.
    fn sparse_keyword_search(
        &self,
        scope: &ProjectScope,
        query: KeywordQuery,
        model: &EdgeBm25,
        statistics: &RwLock<KeywordStatistics>,
    ) -> Result<Vec<VectorHit>, IndexError> {
        let query_terms = model.embed_query(&query.text).indices;
        let weights = statistics
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .weights(
                &project_id_text(scope),
                query.user_id.as_deref(),
                &query_terms,
            );
        if weights.is_empty() {
            return Ok(Vec::new());
        }
        let (indices, values) = weights.into_iter().unzip();
        let mut search_filter = search_filter(
            scope,
            [query.user_id, query.agent_id, query.session_id],
            &query.kinds,
        )?;
        if let Some(conditions) = search_filter.must.as_mut() {
            if let Some(only_ids) = &query.only_ids {
                conditions.push(Condition::HasId(
                    only_ids
                        .iter()
                        .map(|memory_id| PointId::Uuid(memory_id.as_uuid()))
                        .collect::<HasIdCondition>(),
                ));
            }
            if let Some(filter) = &query.filter {
                conditions.push(payload_condition(filter)?);
            }
        }
        let request = QueryRequestBuilder::new(query.limit)
            .query(ScoringQuery::Vector(QueryEnum::Nearest(NamedQuery {
                query: VectorInternal::Sparse(SparseVector { indices, values }),
                using: Some(BM25_VECTOR.to_string()),
            })))
            .filter(search_filter)
            .with_payload(WithPayloadInterface::Fields(vec![field_path(
                VERSION_FIELD,
            )?]))
            .with_vector(WithVector::Bool(false))
            .build();
        let scored_points = self
            .shard
            .query(request)
            .map_err(|engine_error| engine_failure("keyword search points", engine_error))?;
        // A few filtered points are scored one by one, those without a query term too.
        let mut hits = hits_of(scored_points);
        hits.retain(|hit| hit.score > 0.0);
        Ok(hits)
    }

    fn full_text_keyword_search(
        &self,
        scope: &ProjectScope,
        query: KeywordQuery,
    ) -> Result<Vec<VectorHit>, IndexError> {
        let corpus_filter = search_filter(
            scope,
            [query.user_id, query.agent_id, query.session_id],
            &query.kinds,
        )?;
        let mut search_filter = corpus_filter.clone();
        if let Some(conditions) = search_filter.must.as_mut() {
            if let Some(only_ids) = &query.only_ids {
                conditions.push(Condition::HasId(
                    only_ids
                        .iter()
                        .map(|memory_id| PointId::Uuid(memory_id.as_uuid()))
                        .collect::<HasIdCondition>(),
                ));
            }
            if let Some(filter) = &query.filter {
                conditions.push(payload_condition(filter)?);
            }
        }
        let request = QueryRequestBuilder::new(query.limit)
            .query(
                TextQueryBuilder::new(field_path(TEXT_FIELD)?, query.text)
                    .scoring(TextQueryScoring::Bm25(Bm25Params::default()))
                    .build(),
            )
            // Term statistics come from the points this query may see, so one tenant's data
            // never shifts another tenant's ranking.
            .params(SearchParams {
                idf: Some(IdfParams::Corpus(IdfCorpusParams {
                    corpus: corpus_filter,
                })),
                ..SearchParams::default()
            })
            .filter(search_filter)
            .with_payload(WithPayloadInterface::Fields(vec![field_path(
                VERSION_FIELD,
            )?]))
            .with_vector(WithVector::Bool(false))
            .build();
        let scored_points = self
            .shard
            .query(request)
            .map_err(|engine_error| engine_failure("keyword search points", engine_error))?;
        Ok(hits_of(scored_points))
    }
}

fn hits_of(scored_points: Vec<qdrant_edge::ScoredPoint>) -> Vec<VectorHit> {
    let mut hits = Vec::with_capacity(scored_points.len());
    for scored_point in scored_points {
        let PointId::Uuid(point_uuid) = scored_point.id else {
            // This index only ever writes UUID ids; anything else is not a memory.
            tracing::warn!(point_id = %scored_point.id, "ignored a search hit with a non-uuid point id");
            continue;
        };
        hits.push(VectorHit {
            memory_id: MemoryId::from_uuid(point_uuid),
            version: payload_version(scored_point.payload.as_ref()),
            score: scored_point.score,
        });
    }
    hits
}

impl SharedShard {
    /// Project and version of each of `point_uuids` present in the shard, whatever its project.
    /// With `with_terms`, also each point's keyword terms (sparse-vector shards only).
    fn stored_points(
        &self,
        point_uuids: impl Iterator<Item = Uuid>,
        with_terms: bool,
    ) -> Result<HashMap<Uuid, StoredPoint>, IndexError> {
        let point_ids: Vec<PointId> = point_uuids.map(PointId::Uuid).collect();
        if point_ids.is_empty() {
            return Ok(HashMap::new());
        }
        let mut fields = vec![field_path(PROJECT_ID_FIELD)?, field_path(VERSION_FIELD)?];
        if with_terms {
            fields.push(field_path(USER_ID_FIELD)?);
        }
        let request = RetrieveRequestBuilder::new(point_ids)
            .with_payload(WithPayloadInterface::Fields(fields))
            .with_vector(if with_terms {
                WithVector::Selector(vec![BM25_VECTOR.to_string()])
            } else {
                WithVector::Bool(false)
            })
            .build();
        let records = self
            .shard
            .retrieve(request)
            .map_err(|engine_error| engine_failure("retrieve points", engine_error))?;
        Ok(records
            .into_iter()
            .filter_map(|record| {
                let PointId::Uuid(point_uuid) = record.id else {
                    return None;
                };
                let project_id = payload_text(record.payload.as_ref(), PROJECT_ID_FIELD);
                let terms = with_terms.then(|| DocumentTerms {
                    project_id: project_id.clone().unwrap_or_default(),
                    user_id: payload_text(record.payload.as_ref(), USER_ID_FIELD),
                    terms: stored_terms(record.vector.as_ref()),
                });
                Some((
                    point_uuid,
                    StoredPoint {
                        project_id,
                        version: payload_version(record.payload.as_ref()),
                        terms,
                    },
                ))
            })
            .collect())
    }

    fn flush(&self) -> Result<(), IndexError> {
        // Clear the flag first: a write landing during the flush sets it again and is flushed
        // next time instead of being forgotten.
        self.unflushed_writes.store(false, Ordering::Release);
        self.shard.flush().map_err(|engine_error| {
            self.unflushed_writes.store(true, Ordering::Release);
            engine_failure("flush the shard", engine_error)
        })
    }

    /// Dense vectors in HNSW-indexed segments. With a sparse vector every segment counts as
    /// indexed, and qdrant counts each of its sparse vectors; a sparse-vector shard stores one
    /// BM25 vector per point (a text without terms too, see [`keyword_weights_of`]), so the
    /// points are taken off. Approximate, as qdrant's counts are.
    fn indexed_dense_vectors(&self, info: &qdrant_edge::ShardInfo) -> usize {
        match self.keyword_scoring {
            KeywordScoring::SparseVector { .. } => {
                info.indexed_vectors_count.saturating_sub(info.points_count)
            }
            KeywordScoring::FullText => info.indexed_vectors_count,
        }
    }

    /// A write the shard refused may have been applied in part, so the keyword statistics
    /// can no longer be updated by difference: the maintenance thread counts them again.
    fn recount_keyword_statistics_later(&self) {
        if matches!(self.keyword_scoring, KeywordScoring::SparseVector { .. }) {
            self.keyword_statistics_need_recount
                .store(true, Ordering::Release);
        }
    }

    /// Count the keyword statistics again from the stored points, holding writes off so no
    /// write lands between the count and the swap.
    fn recount_keyword_statistics(&self) -> Result<(), IndexError> {
        let KeywordScoring::SparseVector { statistics, .. } = &self.keyword_scoring else {
            return Ok(());
        };
        let _write_guard = lock_ignoring_poison(&self.write_lock);
        let recounted = keyword_statistics_of(&self.shard)?;
        *statistics.write().unwrap_or_else(PoisonError::into_inner) = recounted;
        Ok(())
    }

    /// Publish the shard's segments, points and indexed vectors (a failed read is logged and
    /// leaves the last figures).
    fn publish_sizes(&self) {
        let info = match self.shard.info() {
            Ok(info) => info,
            Err(engine_error) => {
                tracing::warn!(error = %engine_error, "could not read the index's sizes");
                return;
            }
        };
        let label = self.index_label.clone();
        metrics::gauge!(INDEX_POINTS, "index" => label.clone()).set(info.points_count as f64);
        metrics::gauge!(INDEX_INDEXED_VECTORS, "index" => label.clone())
            .set(self.indexed_dense_vectors(&info) as f64);
        metrics::gauge!(INDEX_SEGMENTS, "index" => label).set(info.segments_count as f64);
    }

    fn publish_sizes_at_most_each_second(&self) {
        // A writer that finds another publishing simply skips it.
        let Ok(mut published_at) = self.sizes_published_at.try_lock() else {
            return;
        };
        if published_at.elapsed() < Duration::from_secs(1) {
            return;
        }
        *published_at = Instant::now();
        drop(published_at);
        self.publish_sizes();
    }

    /// How long ago the last write was recorded (since the open, if none was).
    fn since_last_write(&self) -> Duration {
        let last_write = Duration::from_millis(self.last_write_millis.load(Ordering::Acquire));
        self.opened_at.elapsed().saturating_sub(last_write)
    }

    fn publish_unoptimized_writes(&self) {
        let unoptimized = self.points_written_since_optimize.load(Ordering::Acquire);
        metrics::gauge!(INDEX_UNOPTIMIZED_WRITES, "index" => self.index_label.clone())
            .set(unoptimized as f64);
    }

    fn optimize(&self) -> Result<bool, IndexError> {
        let _optimize_guard = lock_ignoring_poison(&self.optimize_lock);
        let pending_points = self.points_written_since_optimize.swap(0, Ordering::AcqRel);
        self.publish_unoptimized_writes();
        let label = self.index_label.clone();
        metrics::gauge!(INDEX_OPTIMIZING, "index" => label.clone()).set(1.0);
        let started = Instant::now();
        let outcome = self.shard.optimize();
        metrics::gauge!(INDEX_OPTIMIZING, "index" => label.clone()).set(0.0);
        metrics::counter!(INDEX_OPTIMIZER_PASSES_TOTAL, "index" => label).increment(1);
        self.publish_sizes();
        let optimized = outcome.map_err(|engine_error| {
            // The writes this pass took are still to be optimized: the next pass retries them.
            self.points_written_since_optimize
                .fetch_add(pending_points, Ordering::AcqRel);
            self.publish_unoptimized_writes();
            engine_failure("optimize the shard", engine_error)
        })?;
        // Most passes find nothing worth rebuilding; only real work is worth an info line.
        let elapsed_ms = started.elapsed().as_millis() as u64;
        if optimized {
            tracing::info!(
                pending_points,
                elapsed_ms,
                "optimized the edge vector index"
            );
        } else {
            tracing::debug!(
                pending_points,
                elapsed_ms,
                "edge vector index needs no optimization"
            );
        }
        Ok(optimized)
    }
}

impl MaintenanceThread {
    fn start(shared: Arc<SharedShard>, options: &EdgeIndexOptions) -> Result<Self, IndexError> {
        let (signal_sender, signal_receiver) = mpsc::channel();
        let schedule = MaintenanceSchedule::of(options);
        let handle = std::thread::Builder::new()
            .name("engram-index-maintenance".to_string())
            .spawn(move || run_maintenance(&shared, &signal_receiver, &schedule))
            .map_err(|io_error| {
                IndexError::Unavailable(format!(
                    "cannot start the vector index maintenance thread: {io_error}"
                ))
            })?;
        Ok(Self {
            signal_sender,
            handle,
        })
    }

    fn stop(self) {
        // If the thread already ended, the send fails and the join returns at once.
        let _ = self.signal_sender.send(MaintenanceSignal::Shutdown);
        if self.handle.join().is_err() {
            tracing::error!("the vector index maintenance thread panicked");
        }
    }
}

struct MaintenanceSchedule {
    optimize_after_written_points: u64,
    optimize_interval: Duration,
    bulk_load_pause: Duration,
    bulk_load_most_waiting_points: u64,
    bulk_load_longest_wait: Duration,
    maintenance_tick: Duration,
}

impl MaintenanceSchedule {
    fn of(options: &EdgeIndexOptions) -> Self {
        Self {
            optimize_after_written_points: options.optimize_after_written_points.max(1),
            optimize_interval: options.optimize_interval,
            bulk_load_pause: options.bulk_load_pause,
            bulk_load_most_waiting_points: options.bulk_load_most_waiting_points.max(1),
            bulk_load_longest_wait: options.bulk_load_longest_wait,
            maintenance_tick: options.maintenance_tick.max(Duration::from_millis(10)),
        }
    }

    /// Whether the optimizer should run now: enough writes are waiting (or some, and the
    /// interval passed), and either the writes paused, or too many are waiting, or they have
    /// waited too long.
    fn optimize_is_due(
        &self,
        waiting_points: u64,
        since_last_optimize: Duration,
        since_last_write: Duration,
    ) -> bool {
        let enough_waiting = waiting_points >= self.optimize_after_written_points
            || (waiting_points > 0 && since_last_optimize >= self.optimize_interval);
        let no_longer_worth_waiting = since_last_write >= self.bulk_load_pause
            || waiting_points >= self.bulk_load_most_waiting_points
            || since_last_optimize >= self.bulk_load_longest_wait;
        enough_waiting && no_longer_worth_waiting
    }
}

/// The maintenance loop: optimize when enough writes accumulated (or some did and the interval
/// passed), and flush after writes every tick so an OS crash loses at most about one tick.
fn run_maintenance(
    shared: &SharedShard,
    signal_receiver: &mpsc::Receiver<MaintenanceSignal>,
    schedule: &MaintenanceSchedule,
) {
    let mut last_optimize = Instant::now();
    loop {
        match signal_receiver.recv_timeout(schedule.maintenance_tick) {
            Ok(MaintenanceSignal::Shutdown) | Err(RecvTimeoutError::Disconnected) => break,
            Ok(MaintenanceSignal::WritesAccumulated) | Err(RecvTimeoutError::Timeout) => {}
        }

        // Writes and an optimizer pass publish this too, and may overtake each other: the
        // tick sets it right.
        shared.publish_unoptimized_writes();
        let pending_points = shared.points_written_since_optimize.load(Ordering::Acquire);
        let optimize_due = schedule.optimize_is_due(
            pending_points,
            last_optimize.elapsed(),
            shared.since_last_write(),
        );
        let flush_due = shared.unflushed_writes.load(Ordering::Acquire);
        if shared
            .keyword_statistics_need_recount
            .swap(false, Ordering::AcqRel)
            && let Err(index_error) = shared.recount_keyword_statistics()
        {
            tracing::error!(error = %index_error, "counting the keyword statistics again failed");
            shared
                .keyword_statistics_need_recount
                .store(true, Ordering::Release);
        }
        if !optimize_due && !flush_due {
            continue;
        }
        let mut healthy = true;
        if optimize_due {
            last_optimize = Instant::now();
            if let Err(index_error) = shared.optimize() {
                tracing::error!(error = %index_error, "background optimization of the vector index failed");
                healthy = false;
            }
        }
        if flush_due && let Err(index_error) = shared.flush() {
            tracing::error!(error = %index_error, "background flush of the vector index failed");
            healthy = false;
        }
        // Only work actually attempted can clear an earlier failure.
        shared
            .background_work_healthy
            .store(healthy, Ordering::Release);
    }
    tracing::debug!("vector index maintenance thread stopped");
}

/// Create the payload indexes that are missing, and ask again for those an older version
/// created with other parameters (a shard written before HNSW links were limited to the tenant
/// field takes the new parameters at open; graphs already built keep their links until the
/// optimizer rebuilds their segments). Asking for an existing index again may rebuild it, so
/// the shard's schema is consulted first. The full-text index is only for a shard created
/// with it (`with_full_text`, before sparse BM25 vectors).
fn ensure_payload_indexes(shard: &EdgeShard, with_full_text: bool) -> Result<(), IndexError> {
    let existing_schema = shard
        .info()
        .map_err(|engine_error| engine_failure("read the payload schema", engine_error))?
        .payload_schema;
    let wanted = KEYWORD_INDEXED_FIELDS
        .into_iter()
        .map(|field| (field, keyword_index_params(field)))
        .chain(with_full_text.then(|| {
            (
                TEXT_FIELD,
                PayloadSchemaParams::Text(keyword_text_index_params()),
            )
        }));
    for (field, params) in wanted {
        let field_path = field_path(field)?;
        let existing = existing_schema.get(&field_path);
        if existing.is_some_and(|existing| existing.params.as_ref() == Some(&params)) {
            continue;
        }
        let changed = existing.is_some();
        shard
            .update(UpdateOperation::FieldIndexOperation(
                FieldIndexOperations::CreateIndex(CreateIndex {
                    field_name: field_path,
                    field_schema: Some(PayloadFieldSchema::FieldParams(params)),
                }),
            ))
            .map_err(|engine_error| engine_failure("create a payload index", engine_error))?;
        if changed {
            tracing::info!(field, "updated the parameters of a payload index");
        } else {
            tracing::debug!(field, "created payload index");
        }
    }
    Ok(())
}

/// The dense vectors' layout: float vectors on disk (memory-mapped), and in every segment
/// with a graph an int8 copy in RAM that the graph is built over and searches walk, the
/// best candidates re-scored on the floats: a quarter of the RAM floats would take. Segments
/// without a graph yet (the one being written, the small ones) are scanned on the floats.
/// The settings apply to existing shards too: the optimizer rebuilds segments laid out
/// otherwise, in the background (a pass runs soon after such a shard opens).
#[allow(deprecated)] // `always_ram`: qdrant-edge 0.9 still has the field; `memory` replaces it
fn dense_vector_params(dimension: usize) -> EdgeVectorParams {
    let int8_in_ram = ScalarQuantizationConfig {
        r#type: ScalarType::Int8,
        quantile: Some(crate::QUANTIZATION_QUANTILE),
        always_ram: None,
        memory: Some(Memory::Pinned),
    };
    EdgeVectorParams::builder(dimension, Distance::Cosine)
        .memory(Memory::Cold)
        .quantization_config(int8_in_ram.into())
        .build()
}

/// How a dense search uses the int8 copy: it ranks candidates, and the best of them (twice
/// the limit) are scored again on the float vectors, which recovers what rounding reorders.
fn rescored_search_params(search_ef: usize) -> SearchParams {
    SearchParams {
        hnsw_ef: Some(search_ef),
        quantization: Some(QuantizationSearchParams {
            ignore: false,
            rescore: Some(true),
            oversampling: Some(crate::RESCORE_OVERSAMPLING),
        }),
        ..SearchParams::default()
    }
}

/// The keyword index of `field`. Only the project gets HNSW links of its own (payload-aware
/// links, one subgraph per project): every query is inside one project, while a subgraph per
/// end-user, agent, session or kind would cost graph building and memory for filters the
/// planner answers by scanning their few points, or by the project's graph.
fn keyword_index_params(field: &str) -> PayloadSchemaParams {
    let params = if field == PROJECT_ID_FIELD {
        // The tenant flag lets qdrant co-locate each project's points on disk and plan
        // searches per project, which is how every query here is shaped. Every query reads
        // it, so it stays in RAM.
        KeywordIndexParamsBuilder::new().is_tenant(true).build()
    } else {
        // The others narrow some queries only: on disk, paged in as they are read. `on_disk`
        // rather than `memory`: qdrant-edge 0.9 switches an existing index to it in place,
        // where a new `memory` makes it rebuild every segment's index at open.
        #[allow(deprecated)]
        KeywordIndexParamsBuilder::new()
            .enable_hnsw(false)
            .on_disk(true)
            .build()
    };
    PayloadSchemaParams::Keyword(params)
}

/// How memory text is tokenized for keyword search: Unicode word segmentation with Chinese
/// (jieba) and Japanese (vaporetto) segmenters, lowercase, English stop words dropped and
/// English words stemmed (Snowball), scored with BM25. The remote backend declares the same.
fn keyword_text_index_params() -> qdrant_edge::TextIndexParams {
    TextIndexParamsBuilder::new()
        .tokenizer(TokenizerType::Multilingual)
        .lowercase(true)
        .stopwords(StopwordsInterface::Language(Language::English))
        .stemmer(StemmingAlgorithm::Snowball(SnowballParams {
            r#type: Snowball::Snowball,
            language: SnowballLanguage::English,
        }))
        .scoring(TextScoringParams {
            r#type: TextScoringType::Bm25,
        })
        // No HNSW subgraph per frequent word: keyword search reads the inverted index.
        .enable_hnsw(false)
        .build()
}

/// The filter of a search: the project, then each given subject field, then the kinds.
fn search_filter(
    scope: &ProjectScope,
    [user_id, agent_id, session_id]: [Option<String>; 3],
    kinds: &[engram_core::MemoryKind],
) -> Result<Filter, IndexError> {
    let mut conditions = vec![project_condition(scope)?];
    for (field, wanted) in [
        (USER_ID_FIELD, user_id),
        (AGENT_ID_FIELD, agent_id),
        (SESSION_ID_FIELD, session_id),
    ] {
        if let Some(wanted) = wanted {
            conditions.push(keyword_condition(field, Match::from(wanted))?);
        }
    }
    if !kinds.is_empty() {
        let kind_names: Vec<String> = kinds.iter().map(|kind| kind.as_str().to_string()).collect();
        conditions.push(keyword_condition(KIND_FIELD, Match::from(kind_names))?);
    }
    Ok(Filter {
        should: None,
        min_should: None,
        must: Some(conditions),
        must_not: None,
    })
}

/// The point of `point`. With keyword weights (a sparse-vector shard) they are stored as the
/// BM25 vector and the text is not kept; without, the text is, for the full-text index.
fn point_struct(
    point_uuid: Uuid,
    organization_id: &str,
    project_id: &str,
    point: IndexedMemory,
    keyword_weights: Option<SparseVector>,
) -> PointStruct {
    let text = keyword_weights.is_none().then_some(point.text);
    let mut payload = json!({
        ORGANIZATION_ID_FIELD: organization_id,
        PROJECT_ID_FIELD: project_id,
        USER_ID_FIELD: point.user_id,
        AGENT_ID_FIELD: point.agent_id,
        SESSION_ID_FIELD: point.session_id,
        KIND_FIELD: point.kind.as_str(),
        VERSION_FIELD: point.version,
        CREATED_AT_FIELD: point.created_at.to_rfc3339(),
        LAYOUT_FIELD: POINT_LAYOUT,
        SOURCE_FIELD: point.filterable.source.map(|source| source.as_str()),
        VISIBILITY_FIELD: crate::payload_filter::visibility_keyword(
            point.filterable.visibility,
            point.filterable.shared_with.as_deref(),
        ),
        VERIFIED_FIELD: point.filterable.verified.unwrap_or(false),
        CATEGORIES_FIELD: point.filterable.categories,
        CONFIDENCE_FIELD: point.filterable.confidence,
        CREATED_MICROS_FIELD: point.created_at.timestamp_micros(),
        UPDATED_MICROS_FIELD: point.filterable.updated_at.map(|at| at.timestamp_micros()),
        OCCURRED_MICROS_FIELD: point.filterable.occurred_at.map(|at| at.timestamp_micros()),
        METADATA_FIELD: payload_metadata(&point.filterable.metadata),
    });
    if let (Some(text), Some(fields)) = (text, payload.as_object_mut()) {
        fields.insert(TEXT_FIELD.to_string(), JsonValue::String(text));
    }
    let vectors = match keyword_weights {
        None => Vectors::from(point.vector),
        Some(weights) => Vectors(VectorStructInternal::Named(HashMap::from([
            (
                DEFAULT_VECTOR_NAME.to_string(),
                VectorInternal::Dense(point.vector),
            ),
            (BM25_VECTOR.to_string(), VectorInternal::Sparse(weights)),
        ]))),
    };
    PointStruct::new(PointId::Uuid(point_uuid), vectors, payload)
}

fn payload_text(payload: Option<&Payload>, field: &str) -> Option<String> {
    payload
        .and_then(|payload| payload.0.get(field))
        .and_then(JsonValue::as_str)
        .map(str::to_string)
}

/// The BM25 vector stored for `text`. A text without a term gets one term of weight 0, which
/// never scores: qdrant does not store an empty vector, and the dense share of its indexed
/// vectors is read by taking one BM25 vector per point off (see
/// [`SharedShard::indexed_dense_vectors`]).
fn keyword_weights_of(model: &EdgeBm25, text: &str) -> SparseVector {
    let weights = model.embed_document(text);
    if weights.indices.is_empty() {
        return SparseVector {
            indices: vec![0],
            values: vec![0.0],
        };
    }
    weights
}

/// The term ids of a point's BM25 vector (none when it has none); a weight of 0 is no term.
fn stored_terms(vectors: Option<&VectorStructInternal>) -> Vec<u32> {
    match vectors {
        Some(VectorStructInternal::Named(named)) => match named.get(BM25_VECTOR) {
            Some(VectorInternal::Sparse(weights)) => terms_of(weights),
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

fn terms_of(weights: &SparseVector) -> Vec<u32> {
    weights
        .indices
        .iter()
        .zip(&weights.values)
        .filter(|(_, weight)| **weight > 0.0)
        .map(|(term, _)| *term)
        .collect()
}

/// Points read per page while counting the terms of a shard at open.
const STATISTICS_PAGE: usize = 2_000;

/// What the segments in `directory` were created with, for a shard whose `edge_config.json`
/// is gone (a partial copy or restore): without it, a shard created before the sparse keyword
/// vectors would be taken for a new one, and its segments would refuse the new definition.
/// `None` when there are no segments (a new shard).
fn config_of_segments(directory: &Path) -> Option<EdgeConfig> {
    // A segment is a directory of its own (qdrant's own check for existing segments).
    let has_segments = std::fs::read_dir(directory.join(SEGMENTS_DIRECTORY))
        .ok()?
        .filter_map(Result::ok)
        .any(|entry| {
            entry.path().is_dir() && !entry.file_name().to_string_lossy().starts_with('.')
        });
    if !has_segments {
        return None;
    }
    let shard = EdgeShard::load(directory, None)
        .inspect_err(|engine_error| {
            tracing::warn!(
                directory = %directory.display(),
                error = %engine_error,
                "the index has no edge_config.json and its segments could not be read"
            );
        })
        .ok()?;
    let derived = shard.config().clone();
    tracing::warn!(
        directory = %directory.display(),
        "the index had no edge_config.json: its vector definitions were read from its segments"
    );
    Some(derived)
}

/// The keyword statistics of every point in `shard`, counted page by page. A shard's points
/// and its statistics then agree after any restart, including after a crash the WAL replayed.
fn keyword_statistics_of(shard: &EdgeShard) -> Result<KeywordStatistics, IndexError> {
    let started = Instant::now();
    let mut statistics = KeywordStatistics::default();
    let mut point_count = 0usize;
    let mut from = None;
    loop {
        let mut request = ScrollRequestBuilder::new()
            .limit(STATISTICS_PAGE)
            .with_payload(WithPayloadInterface::Fields(vec![
                field_path(PROJECT_ID_FIELD)?,
                field_path(USER_ID_FIELD)?,
            ]))
            .with_vector(WithVector::Selector(vec![BM25_VECTOR.to_string()]));
        if let Some(from) = from.take() {
            request = request.offset(from);
        }
        let (records, next) = shard
            .scroll(request.build())
            .map_err(|engine_error| engine_failure("count keyword terms", engine_error))?;
        for record in &records {
            let Some(project_id) = payload_text(record.payload.as_ref(), PROJECT_ID_FIELD) else {
                continue;
            };
            statistics.add(&DocumentTerms {
                project_id,
                user_id: payload_text(record.payload.as_ref(), USER_ID_FIELD),
                terms: stored_terms(record.vector.as_ref()),
            });
            point_count += 1;
        }
        match next {
            Some(next) => from = Some(next),
            None => break,
        }
    }
    tracing::info!(
        point_count,
        term_entries = statistics.term_entries(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "counted the keyword terms of the index"
    );
    Ok(statistics)
}

/// The qdrant-edge condition of a payload filter.
fn payload_condition(filter: &PayloadFilter) -> Result<Condition, IndexError> {
    let nested = |must, should, must_not| {
        Condition::Filter(Filter {
            should,
            min_should: None,
            must,
            must_not,
        })
    };
    let all = |children: &[PayloadFilter]| -> Result<Vec<Condition>, IndexError> {
        children.iter().map(payload_condition).collect()
    };
    Ok(match filter {
        PayloadFilter::All(children) => nested(Some(all(children)?), None, None),
        PayloadFilter::Any(children) => nested(None, Some(all(children)?), None),
        PayloadFilter::Not(child) => nested(None, None, Some(vec![payload_condition(child)?])),
        PayloadFilter::KeywordIn { field, values } => {
            keyword_condition(field, Match::from(values.clone()))?
        }
        PayloadFilter::Present { field } => {
            Condition::Field(FieldCondition::new_is_empty(field_path(field)?, false))
        }
        PayloadFilter::Range {
            field,
            comparison,
            value,
        } => {
            let bound = Some(qdrant_edge::external::ordered_float::OrderedFloat(*value));
            let mut range = qdrant_edge::Range {
                lt: None,
                gt: None,
                gte: None,
                lte: None,
            };
            match comparison {
                Comparison::Gt => range.gt = bound,
                Comparison::Gte => range.gte = bound,
                Comparison::Lt => range.lt = bound,
                Comparison::Lte => range.lte = bound,
            }
            Condition::Field(FieldCondition::new_range(field_path(field)?, range))
        }
        PayloadFilter::BoolIs { field, value } => keyword_condition(field, Match::from(*value))?,
        PayloadFilter::Ids(ids) => Condition::HasId(
            ids.iter()
                .map(|memory_id| PointId::Uuid(memory_id.as_uuid()))
                .collect::<HasIdCondition>(),
        ),
    })
}

fn project_id_text(scope: &ProjectScope) -> String {
    scope.project_id().as_uuid().to_string()
}

fn project_condition(scope: &ProjectScope) -> Result<Condition, IndexError> {
    keyword_condition(PROJECT_ID_FIELD, Match::from(project_id_text(scope)))
}

fn keyword_condition(field: &str, wanted: Match) -> Result<Condition, IndexError> {
    Ok(Condition::Field(FieldCondition::new_match(
        field_path(field)?,
        wanted,
    )))
}

fn field_path(field: &str) -> Result<JsonPath, IndexError> {
    field.parse().map_err(|_| {
        IndexError::Internal(format!(
            "payload field name {field:?} is not a valid json path"
        ))
    })
}

/// The memory version stored in a payload. A point without one (never written by this code) is
/// treated as older than anything, so a real write replaces it.
fn payload_version(payload: Option<&Payload>) -> i64 {
    payload
        .and_then(|payload| payload.0.get(VERSION_FIELD))
        .and_then(JsonValue::as_i64)
        .unwrap_or(i64::MIN)
}

/// The version the reconciler compares, or `i64::MIN` for a point of an older layout so that
/// it is rewritten with what this layout adds.
fn current_layout_version(payload: Option<&Payload>) -> i64 {
    let layout = payload
        .and_then(|payload| payload.0.get(LAYOUT_FIELD))
        .and_then(JsonValue::as_i64);
    if layout == Some(POINT_LAYOUT) {
        payload_version(payload)
    } else {
        i64::MIN
    }
}

fn engine_failure(action: &str, engine_error: OperationError) -> IndexError {
    match engine_error {
        OperationError::WrongVectorDimension {
            expected_dim,
            received_dim,
        } => IndexError::DimensionMismatch {
            expected: expected_dim,
            actual: received_dim,
        },
        other => IndexError::Internal(format!("cannot {action}: {other}")),
    }
}

/// The locks guard no data (only ordering), so a panic while holding one leaves nothing broken.
fn lock_ignoring_poison(mutex: &Mutex<()>) -> MutexGuard<'_, ()> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use qdrant_edge::PayloadSchemaType;

    /// The operator's tuning reaches the shard: the optimizer's thread cap is in the shard's
    /// configuration, an existing shard takes a new cap at open without losing its points,
    /// and searches walk the graph with the configured `hnsw_ef`.
    #[tokio::test]
    async fn the_optimizer_thread_cap_and_search_ef_reach_the_shard() {
        let directory = tempfile::tempdir().unwrap();
        let tuned = |optimizer_threads, search_ef| EdgeIndexOptions {
            tuning: EdgeIndexTuning {
                search_ef,
                optimizer_threads,
            },
            ..EdgeIndexOptions::default()
        };
        let point_uuid = Uuid::now_v7();
        {
            let index =
                EdgeVectorIndex::open_with_options(directory.path(), 4, tuned(1, 64)).unwrap();
            assert_eq!(
                index
                    .shared
                    .shard
                    .config()
                    .hnsw_config()
                    .max_indexing_threads,
                1
            );
            assert_eq!(index.shared.search_ef, 64);
            write_through_shard(
                &index.shared.shard,
                point_uuid,
                None,
                "kept across a reopening",
                None,
            );
        }
        let reopened =
            EdgeVectorIndex::open_with_options(directory.path(), 4, tuned(3, 200)).unwrap();
        assert_eq!(
            reopened
                .shared
                .shard
                .config()
                .hnsw_config()
                .max_indexing_threads,
            3
        );
        assert_eq!(reopened.shared.search_ef, 200);
        assert_eq!(
            reopened
                .shared
                .shard
                .config()
                .optimizers
                .as_ref()
                .and_then(|optimizers| optimizers.max_segment_size),
            Some(DEFAULT_MAX_SEGMENT_SIZE_KB),
            "segments may grow past qdrant-edge's default"
        );
        assert_eq!(
            reopened.statistics().await.unwrap().point_count,
            1,
            "the point written before the new cap is still there"
        );
    }

    /// Writes one point of project "project" straight into the shard: a project scope is only
    /// ever minted from a verified credential, never in this crate.
    fn write_through_shard(
        shard: &EdgeShard,
        point_uuid: Uuid,
        user_id: Option<&str>,
        text: &str,
        keyword_weights: Option<SparseVector>,
    ) {
        let point = IndexedMemory {
            memory_id: MemoryId::from_uuid(point_uuid),
            version: 1,
            vector: vec![1.0, 0.0, 0.0, 0.0],
            user_id: user_id.map(str::to_string),
            agent_id: None,
            session_id: None,
            kind: engram_core::MemoryKind::Semantic,
            created_at: chrono::Utc::now(),
            text: text.to_string(),
            filterable: crate::FilterableFields::default(),
        };
        shard
            .update(UpdateOperation::PointOperation(
                PointOperations::UpsertPoints(PointInsertOperations::PointsList(vec![
                    point_struct(
                        point_uuid,
                        "organization",
                        "project",
                        point,
                        keyword_weights,
                    )
                    .into(),
                ])),
            ))
            .unwrap();
    }

    /// Keyword statistics out of step with the stored points (as a write the shard refused
    /// part-way leaves them) are counted again by the maintenance thread, without a write.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_maintenance_thread_counts_the_keyword_statistics_again_after_a_refused_write() {
        let directory = tempfile::tempdir().unwrap();
        let index = EdgeVectorIndex::open(directory.path(), 4).unwrap();
        let KeywordScoring::SparseVector { model, statistics } = &index.shared.keyword_scoring
        else {
            panic!("a new shard scores keywords with sparse vectors");
        };
        let bees = model.embed_query("bees").indices;
        // Written past the statistics: they no longer match the points.
        for _ in 0..3 {
            write_through_shard(
                &index.shared.shard,
                Uuid::now_v7(),
                Some("ann"),
                "Ann keeps bees",
                Some(model.embed_document("Ann keeps bees")),
            );
        }
        let counted = || {
            statistics
                .read()
                .unwrap()
                .weights("project", Some("ann"), &bees)
                .len()
        };
        assert_eq!(counted(), 0, "the statistics missed the writes");

        index.shared.recount_keyword_statistics_later();
        let deadline = Instant::now() + Duration::from_secs(60);
        while counted() == 0 {
            assert!(
                Instant::now() < deadline,
                "the maintenance thread did not count the keyword statistics again within 60 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(
            !index
                .shared
                .keyword_statistics_need_recount
                .load(Ordering::Acquire),
            "the recount is done, not left pending"
        );
        let recounted = statistics.read().unwrap().clone();
        assert_eq!(
            recounted,
            keyword_statistics_of(&index.shared.shard).unwrap(),
            "the statistics are those of the stored points"
        );
    }

    /// A shard whose edge_config.json is gone opens with what its segments were created with:
    /// one created before the sparse keyword vectors keeps its full-text keyword search, a
    /// newer one its sparse vectors, and both keep their points.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_shard_without_its_config_file_opens_as_its_segments_were_created() {
        for created_with_full_text in [true, false] {
            let directory = tempfile::tempdir().unwrap();
            if created_with_full_text {
                create_full_text_shard(directory.path());
            }
            {
                let index = EdgeVectorIndex::open(directory.path(), 4).unwrap();
                let weights = match &index.shared.keyword_scoring {
                    KeywordScoring::SparseVector { model, .. } => {
                        Some(model.embed_document("Ann keeps bees"))
                    }
                    KeywordScoring::FullText => None,
                };
                write_through_shard(
                    &index.shared.shard,
                    Uuid::now_v7(),
                    Some("ann"),
                    "Ann keeps bees",
                    weights,
                );
            }
            std::fs::remove_file(directory.path().join("edge_config.json")).unwrap();

            let reopened = EdgeVectorIndex::open(directory.path(), 4)
                .unwrap_or_else(|error| panic!("full text {created_with_full_text}: {error}"));
            assert_eq!(
                matches!(reopened.shared.keyword_scoring, KeywordScoring::FullText),
                created_with_full_text
            );
            assert_eq!(reopened.statistics().await.unwrap().point_count, 1);
            assert!(directory.path().join("edge_config.json").exists());
        }
    }

    /// A shard as versions before the sparse BM25 vector created it: one dense vector.
    fn create_full_text_shard(directory: &Path) {
        let config = EdgeConfig::builder()
            .vector(
                DEFAULT_VECTOR_NAME,
                EdgeVectorParams::builder(4, Distance::Cosine).build(),
            )
            .build();
        drop(EdgeShard::load(directory, Some(config)).expect("create a full-text shard"));
    }

    /// A bulk load is indexed once: while writes keep arriving the optimizer waits for them to
    /// pause, unless too many points are waiting or they waited a minute; writes further
    /// apart than the pause are optimized as before.
    #[test]
    fn the_optimizer_waits_for_a_bulk_load_to_pause_unless_too_much_waits() {
        // The defaults: 1,000 writes or 5 s, a 2 s pause, 100,000 points, a minute.
        let schedule = MaintenanceSchedule::of(&EdgeIndexOptions::default());
        let seconds = Duration::from_secs;
        let millis = Duration::from_millis;
        // (waiting points, since the last optimization, since the last write) → due
        let cases = [
            (0, seconds(60), seconds(60), false),
            (5_000, seconds(1), millis(100), false),
            (99_999, seconds(30), millis(100), false),
            (100_000, seconds(1), millis(100), true),
            (5_000, seconds(1), seconds(2), true),
            (10, seconds(1), seconds(10), false),
            (10, seconds(5), seconds(2), true),
            (10, seconds(5), millis(100), false),
            // Steady traffic that never pauses is optimized once a minute.
            (10, seconds(59), millis(100), false),
            (10, seconds(60), millis(100), true),
        ];
        for (waiting, since_optimize, since_write, due) in cases {
            assert_eq!(
                schedule.optimize_is_due(waiting, since_optimize, since_write),
                due,
                "{waiting} points waiting, {since_optimize:?} since the optimizer, \
                 {since_write:?} since a write"
            );
        }
    }

    /// How each segment of the shard in `directory` keeps its dense vectors: whether the float
    /// vectors are on disk, and whether it has an int8 copy, by whether it has an HNSW graph.
    fn dense_layout_of_segments(directory: &Path) -> Vec<(bool, bool, bool)> {
        let segments = std::fs::read_dir(directory.join("segments")).unwrap();
        segments
            .map(|entry| entry.unwrap().path())
            // Segments being removed are renamed first.
            .filter(|path| {
                path.extension()
                    .is_none_or(|extension| extension != "deleted")
            })
            .filter_map(|path| {
                let state_file = path.join(qdrant_edge::SEGMENT_STATE_FILE);
                let state: qdrant_edge::SegmentState =
                    serde_json::from_slice(&std::fs::read(state_file).ok()?).unwrap();
                let dense = &state.config.vector_data[DEFAULT_VECTOR_NAME];
                Some((
                    dense.index.is_indexed(),
                    dense
                        .storage_type
                        .memory()
                        .is_some_and(|memory| memory.is_cold()),
                    dense.quantization_config.is_some(),
                ))
            })
            .collect()
    }

    /// A shard whose graphs were built over float vectors in RAM (before this layout) takes
    /// the layout when it opens: an optimizer pass is due at once, and it rebuilds those
    /// segments with the floats on disk and an int8 copy in RAM, every point still found.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_older_shard_moves_its_float_vectors_to_disk_and_searches_int8_in_ram() {
        let directory = tempfile::tempdir().unwrap();
        let point_count = 400;
        {
            let in_ram = EdgeConfig::builder()
                .vector(
                    DEFAULT_VECTOR_NAME,
                    EdgeVectorParams::builder(4, Distance::Cosine).build(),
                )
                .sparse_vector(BM25_VECTOR, EdgeSparseVectorParams::default())
                .payload_memory(Memory::Cached)
                .optimizers(EdgeOptimizersConfig {
                    indexing_threshold: Some(1),
                    ..EdgeOptimizersConfig::default()
                })
                .build();
            let older = EdgeShard::load(directory.path(), Some(in_ram)).unwrap();
            for _ in 0..point_count {
                write_through_shard(&older, Uuid::now_v7(), None, "a memory", None);
            }
            older.optimize().unwrap();
        }
        let graphs_of = |layouts: Vec<(bool, bool, bool)>| -> Vec<(bool, bool)> {
            layouts
                .into_iter()
                .filter(|(indexed, ..)| *indexed)
                .map(|(_, floats_on_disk, int8)| (floats_on_disk, int8))
                .collect()
        };
        let before = graphs_of(dense_layout_of_segments(directory.path()));
        assert!(
            !before.is_empty() && before.iter().all(|graph| *graph == (false, false)),
            "the older shard has graphs over floats in RAM: {before:?}"
        );

        let index = EdgeVectorIndex::open(directory.path(), 4).unwrap();
        assert_eq!(
            index
                .shared
                .points_written_since_optimize
                .load(Ordering::Acquire),
            1,
            "a pass is due without waiting for a write"
        );
        index.optimize_now().unwrap();
        // qdrant removes replaced segments' files after the next flush.
        index.shared.flush().unwrap();
        let after = graphs_of(dense_layout_of_segments(directory.path()));
        assert!(
            !after.is_empty() && after.iter().all(|graph| *graph == (true, true)),
            "every graph is rebuilt with floats on disk and int8 in RAM: {after:?}"
        );
        let found = index
            .shared
            .shard
            .query(
                QueryRequestBuilder::new(point_count)
                    .query(ScoringQuery::Vector(QueryEnum::Nearest(NamedQuery {
                        query: VectorInternal::Dense(vec![1.0, 0.0, 0.0, 0.0]),
                        using: None,
                    })))
                    .params(rescored_search_params(index.shared.search_ef))
                    .build(),
            )
            .unwrap();
        assert_eq!(found.len(), point_count);
    }

    /// A new shard stores BM25 vectors, keeps no text and builds no full-text index; one
    /// created before them keeps its full-text index (the test below).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_new_shard_scores_keywords_with_sparse_vectors_and_keeps_no_text() {
        let directory = tempfile::tempdir().unwrap();
        let point_uuid = Uuid::now_v7();
        {
            let index = EdgeVectorIndex::open(directory.path(), 4).unwrap();
            let KeywordScoring::SparseVector { model, .. } = &index.shared.keyword_scoring else {
                panic!("a new shard must score keywords with sparse vectors");
            };
            let weights = model.embed_document("Ann keeps bees on the roof");
            write_through_shard(
                &index.shared.shard,
                point_uuid,
                Some("ann"),
                "Ann keeps bees on the roof",
                Some(weights),
            );
            let stored = index
                .shared
                .shard
                .retrieve(
                    RetrieveRequestBuilder::new(vec![PointId::Uuid(point_uuid)])
                        .with_payload(WithPayloadInterface::Bool(true))
                        .with_vector(WithVector::Bool(true))
                        .build(),
                )
                .unwrap();
            let payload = stored[0].payload.as_ref().unwrap();
            assert!(!payload.0.contains_key(TEXT_FIELD), "{payload:?}");
            assert!(!stored_terms(stored[0].vector.as_ref()).is_empty());
        }
        let schema = schema_of(directory.path());
        assert!(!schema.contains_key(TEXT_FIELD), "{schema:?}");
        // Reopened, its statistics are counted from the stored vectors.
        let reopened = EdgeVectorIndex::open(directory.path(), 4).unwrap();
        let KeywordScoring::SparseVector { model, statistics } = &reopened.shared.keyword_scoring
        else {
            panic!("a reopened shard keeps its sparse vectors");
        };
        let bees = model.embed_query("bees").indices;
        let statistics = statistics.read().unwrap();
        assert_eq!(statistics.weights("project", Some("ann"), &bees).len(), 1);
        assert!(statistics.weights("project", Some("bob"), &bees).is_empty());
    }

    /// The payload schema of the shard in `directory`, field by field.
    fn schema_of(directory: &Path) -> HashMap<String, Option<PayloadSchemaParams>> {
        let shard = EdgeShard::load(directory, None).expect("reopen the shard");
        let schema = shard.info().expect("shard info").payload_schema;
        schema
            .into_iter()
            .map(|(field, info)| (field.to_string(), info.params))
            .collect()
    }

    fn builds_hnsw_links(params: &Option<PayloadSchemaParams>) -> bool {
        match params {
            Some(PayloadSchemaParams::Keyword(keyword)) => keyword.enable_hnsw != Some(false),
            Some(PayloadSchemaParams::Text(text)) => text.enable_hnsw != Some(false),
            _ => true,
        }
    }

    /// A shard an older version created (every keyword field indexed with default parameters,
    /// so each grew HNSW links of its own) gets the new schema when it is opened: links for
    /// the project field only, and its points still searchable by keyword.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn only_the_project_field_keeps_hnsw_links_and_older_shards_take_that_at_open() {
        let directory = tempfile::tempdir().unwrap();
        // Written and searched through the shard itself: a project scope is only ever minted
        // from a verified credential, never in this crate.
        let point_uuid = Uuid::now_v7();
        create_full_text_shard(directory.path());
        {
            let index = EdgeVectorIndex::open(directory.path(), 4).unwrap();
            assert!(matches!(
                index.shared.keyword_scoring,
                KeywordScoring::FullText
            ));
            write_through_shard(
                &index.shared.shard,
                point_uuid,
                Some("ann"),
                "Ann keeps bees on the roof",
                None,
            );
            // Put the older schema back: plain keyword indexes, a text index with links.
            let shard = &index.shared.shard;
            for field in KEYWORD_INDEXED_FIELDS
                .into_iter()
                .filter(|field| *field != PROJECT_ID_FIELD)
            {
                shard
                    .update(UpdateOperation::FieldIndexOperation(
                        FieldIndexOperations::CreateIndex(CreateIndex {
                            field_name: field_path(field).unwrap(),
                            field_schema: Some(PayloadFieldSchema::FieldType(
                                PayloadSchemaType::Keyword,
                            )),
                        }),
                    ))
                    .unwrap();
            }
            let mut older_text = keyword_text_index_params();
            older_text.enable_hnsw = None;
            shard
                .update(UpdateOperation::FieldIndexOperation(
                    FieldIndexOperations::CreateIndex(CreateIndex {
                        field_name: field_path(TEXT_FIELD).unwrap(),
                        field_schema: Some(PayloadFieldSchema::FieldParams(
                            PayloadSchemaParams::Text(older_text),
                        )),
                    }),
                ))
                .unwrap();
        }
        let older = schema_of(directory.path());
        assert!(builds_hnsw_links(&older[USER_ID_FIELD]), "{older:?}");
        assert!(builds_hnsw_links(&older[TEXT_FIELD]), "{older:?}");

        let index = EdgeVectorIndex::open(directory.path(), 4).unwrap();
        let request = QueryRequestBuilder::new(10)
            .query(
                TextQueryBuilder::new(field_path(TEXT_FIELD).unwrap(), "bees".to_string())
                    .scoring(TextQueryScoring::Bm25(Bm25Params::default()))
                    .build(),
            )
            .filter(Filter::new_must(
                keyword_condition(USER_ID_FIELD, Match::from("ann".to_string())).unwrap(),
            ))
            .build();
        let hits = index.shared.shard.query(request).unwrap();
        assert_eq!(hits.len(), 1, "{hits:?}");
        assert_eq!(hits[0].id, PointId::Uuid(point_uuid));
        drop(index);

        let rebuilt = schema_of(directory.path());
        for field in KEYWORD_INDEXED_FIELDS.into_iter().chain([TEXT_FIELD]) {
            let params = &rebuilt[field];
            // Stored as asked, so the next open finds nothing to rebuild.
            let wanted = match field {
                TEXT_FIELD => PayloadSchemaParams::Text(keyword_text_index_params()),
                keyword => keyword_index_params(keyword),
            };
            assert_eq!(params.as_ref(), Some(&wanted), "{field}");
            assert_eq!(
                builds_hnsw_links(params),
                field == PROJECT_ID_FIELD,
                "{field}: {params:?}"
            );
        }
        assert!(
            matches!(&rebuilt[PROJECT_ID_FIELD], Some(PayloadSchemaParams::Keyword(keyword)) if keyword.is_tenant == Some(true))
        );
    }
}
