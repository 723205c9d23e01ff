//! The vector index on a Qdrant server or cluster (gRPC, `qdrant-client`): one collection per
//! embedding model, every project's points in it, each request confined to one project.
//!
//! Qdrant no longer enforces tenant filters carried in its JWTs, so this module is where the
//! tenant boundary holds: every read and write of the [`VectorIndex`] goes through
//! [`project_filter`]. The one exception is the operator's move of a project named in the
//! options to a shard of its own, which copies and then clears that one project's points.

use crate::cluster_layout::{
    self, ClusterLayout, ClusterSharding, ClusterVectorStorage, HnswSettings,
};
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
use engram_core::{MemoryId, ProjectId, ProjectScope};
use qdrant_client::qdrant::{
    Condition, CountPointsBuilder, CreateFieldIndexCollection, CreateFieldIndexCollectionBuilder,
    CreateShardKeyRequest, DatetimeIndexParamsBuilder, DeleteCollectionBuilder,
    DeletePointsBuilder, FieldType, Filter, IdfParams, KeywordIndexParamsBuilder,
    PayloadIncludeSelector, PointId, PointStruct, Query, QueryPointsBuilder, Range,
    ReplicatePointsBuilder, RetrievedPoint, ScoredPoint, ScrollPointsBuilder, SearchParams,
    ShardKey, ShardKeySelector, TextIndexParamsBuilder, TextQueryBuilder, TokenizerType,
    UpdateCollectionClusterSetupRequest, UpsertPointsBuilder, Value, point_id::PointIdOptions,
    update_collection_cluster_setup_request::Operation, value::Kind, vectors_config,
};
use qdrant_client::{Payload, Qdrant, QdrantError};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::time::Duration;
use uuid::Uuid;

const ORGANIZATION_ID_FIELD: &str = "organization_id";
const PROJECT_ID_FIELD: &str = "project_id";
const USER_ID_FIELD: &str = "user_id";
const AGENT_ID_FIELD: &str = "agent_id";
const SESSION_ID_FIELD: &str = "session_id";
const KIND_FIELD: &str = "kind";
const VERSION_FIELD: &str = "version";
/// The oldest Qdrant server this index works with: the content's BM25-scored full-text index
/// (`TEXT_FIELD`) needs it. The deployment files pin an image at least this new (a test reads
/// this line).
pub const MINIMUM_QDRANT_VERSION: &str = "1.20.0";
/// The memory's content, with a BM25-scored full-text index (needs `MINIMUM_QDRANT_VERSION`).
const TEXT_FIELD: &str = "text";
use crate::payload_filter::LAYOUT_FIELD;
const CREATED_AT_FIELD: &str = "created_at";

/// Where the cluster is and how the collection is laid out when this process creates it.
/// An existing collection keeps its sharding and storage (Qdrant cannot reshard in place);
/// the search parameters and dedicated shards apply to it too.
#[derive(Clone)]
pub struct QdrantClusterOptions {
    /// gRPC endpoint, such as `http://qdrant:6334`.
    pub url: String,
    pub api_key: Option<String>,
    /// Collections are named `<prefix>_<model>`; several deployments (or test runs) can share
    /// one cluster with different prefixes.
    pub collection_prefix: String,
    pub layout: ClusterLayout,
    /// Deadline of one request.
    pub timeout: Duration,
}

impl Default for QdrantClusterOptions {
    fn default() -> Self {
        Self {
            url: "http://127.0.0.1:6334".to_string(),
            api_key: None,
            collection_prefix: "engram".to_string(),
            layout: ClusterLayout {
                sharding: ClusterSharding::Automatic,
                shard_number: 1,
                replication_factor: 1,
                write_consistency_factor: 1,
                vector_storage: ClusterVectorStorage::default(),
                hnsw: HnswSettings::default(),
                dedicated_shard_projects: Vec::new(),
            },
            timeout: Duration::from_secs(10),
        }
    }
}

impl fmt::Debug for QdrantClusterOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QdrantClusterOptions")
            .field("url", &self.url)
            .field("api_key", &self.api_key.as_ref().map(|_| "***"))
            .field("collection_prefix", &self.collection_prefix)
            .field("layout", &self.layout)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// The collection name for an embedding model: `<prefix>_<model>` with every character Qdrant
/// does not accept in a name replaced by `-`.
pub fn collection_name_for_model(collection_prefix: &str, model_name: &str) -> String {
    let sanitized_model: String = model_name
        .chars()
        .map(|character| {
            if character.is_ascii_alphanumeric() || character == '-' || character == '_' {
                character.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    format!("{collection_prefix}_{sanitized_model}")
}

/// A [`VectorIndex`] on a remote Qdrant collection.
pub struct QdrantVectorIndex {
    client: Qdrant,
    collection_name: String,
    dimension: usize,
    timeout_secs: u64,
    layout: ClusterLayout,
    /// The collection's actual sharding (an existing collection keeps the one it was made with).
    sharding: ClusterSharding,
}

impl QdrantVectorIndex {
    /// Connect and make sure the model's collection exists with the expected dimension and
    /// payload indexes (created when absent; several processes may race to do it).
    pub async fn connect(
        options: &QdrantClusterOptions,
        model_name: &str,
        dimension: usize,
    ) -> Result<Self, IndexError> {
        let client = Qdrant::from_url(&options.url)
            .api_key(options.api_key.clone())
            .timeout(options.timeout)
            .connect_timeout(options.timeout)
            // The server's version is checked by the first request instead of a start-up probe
            // that would print to stderr when the cluster is still starting.
            .skip_compatibility_check()
            .build()
            .map_err(|client_error| {
                IndexError::Unavailable(format!(
                    "invalid Qdrant URL {:?}: {client_error}",
                    options.url
                ))
            })?;
        let mut index = Self {
            client,
            collection_name: collection_name_for_model(&options.collection_prefix, model_name),
            dimension,
            timeout_secs: options.timeout.as_secs().max(1),
            layout: options.layout.clone(),
            sharding: options.layout.sharding,
        };
        index.ensure_collection().await?;
        Ok(index)
    }

    pub fn collection_name(&self) -> &str {
        &self.collection_name
    }

    pub fn dimension(&self) -> usize {
        self.dimension
    }

    /// Drop the whole collection (every project). For tests and decommissioning only.
    pub async fn delete_collection(&self) -> Result<(), IndexError> {
        self.client
            .delete_collection(DeleteCollectionBuilder::new(&self.collection_name))
            .await
            .map_err(|error| qdrant_failure("delete collection", error))?;
        Ok(())
    }

    async fn ensure_collection(&mut self) -> Result<(), IndexError> {
        let exists = self
            .client
            .collection_exists(&self.collection_name)
            .await
            .map_err(|error| qdrant_failure("check collection", error))?;
        if !exists {
            let mut request = self
                .layout
                .create_collection(&self.collection_name, self.dimension);
            request.timeout = Some(self.timeout_secs);
            let created = self.client.create_collection(request).await;
            // Another gateway or worker may have created it in the meantime; the dimension
            // check below tells a real failure from that race.
            if let Err(error) = created {
                tracing::info!(collection = %self.collection_name, %error, "collection creation did not succeed; checking whether another process created it");
            }
        }
        self.sharding = self.check_collection_dimension().await?;
        if self.sharding == ClusterSharding::Tiered {
            self.ensure_shared_shard_key().await?;
        }
        self.ensure_payload_indexes().await?;
        self.ensure_dedicated_shards().await
    }

    /// Checks the stored vector dimension against this process's and returns the collection's
    /// sharding method.
    async fn check_collection_dimension(&self) -> Result<ClusterSharding, IndexError> {
        let info = self
            .client
            .collection_info(&self.collection_name)
            .await
            .map_err(|error| qdrant_failure("read collection info", error))?;
        let params = info
            .result
            .and_then(|collection| collection.config)
            .and_then(|config| config.params);
        let sharding =
            cluster_layout::sharding_of(params.as_ref().and_then(|params| params.sharding_method));
        let stored_dimension = params
            .and_then(|params| params.vectors_config)
            .and_then(|vectors| vectors.config)
            .and_then(|config| match config {
                vectors_config::Config::Params(params) => Some(params.size as usize),
                vectors_config::Config::ParamsMap(_) => None,
            });
        match stored_dimension {
            Some(stored) if stored == self.dimension => Ok(sharding),
            Some(stored) => Err(IndexError::DimensionMismatch {
                expected: stored,
                actual: self.dimension,
            }),
            None => Err(IndexError::Internal(format!(
                "collection {} has named vectors; Engram expects one unnamed vector",
                self.collection_name
            ))),
        }
    }

    /// Creating an index that exists is accepted by Qdrant, so every process may run this at
    /// start; one with other parameters takes these (graphs already built keep their links
    /// until their segments are rebuilt).
    async fn ensure_payload_indexes(&self) -> Result<(), IndexError> {
        for request in payload_index_requests(&self.collection_name) {
            let field = request.field_name.clone();
            self.client
                .create_field_index(request)
                .await
                .map_err(|error| qdrant_failure(&format!("create the index of {field}"), error))?;
        }
        Ok(())
    }

    /// The shard keys the collection has (none unless it is custom-sharded).
    async fn shard_keys(&self) -> Result<Vec<ShardKey>, IndexError> {
        let listed = self
            .client
            .list_shard_keys(&self.collection_name)
            .await
            .map_err(|error| qdrant_failure("list shard keys", error))?;
        Ok(listed
            .shard_keys
            .into_iter()
            .filter_map(|description| description.key)
            .collect())
    }

    /// A tiered collection's shared shard key, created once by whichever process gets there
    /// first (a refusal is fine when the key then exists).
    async fn ensure_shared_shard_key(&self) -> Result<(), IndexError> {
        let has_shared = |keys: &[ShardKey]| keys.contains(&cluster_layout::shared_shard_key());
        if has_shared(&self.shard_keys().await?) {
            return Ok(());
        }
        let created = self
            .client
            .create_shard_key(CreateShardKeyRequest {
                collection_name: self.collection_name.clone(),
                request: Some(self.layout.create_shared_shard_key()),
                timeout: Some(self.timeout_secs),
            })
            .await;
        if let Err(error) = created
            && !has_shared(&self.shard_keys().await?)
        {
            return Err(qdrant_failure("create the shared shard key", error));
        }
        Ok(())
    }

    /// Gives each project named in the options a shard key of its own (tiered sharding):
    /// a new key starts partial and Qdrant copies the project's points into it from the shared
    /// shard (asked again when a partial key receives nothing); once every replica of it is
    /// active, the project's copies left in the shared shard are deleted (at the next start of
    /// a gateway or worker after the copy).
    async fn ensure_dedicated_shards(&self) -> Result<(), IndexError> {
        if self.layout.dedicated_shard_projects.is_empty() {
            return Ok(());
        }
        if self.sharding != ClusterSharding::Tiered {
            tracing::warn!(
                collection = %self.collection_name,
                "dedicated shards need a collection created with tiered sharding; this one is sharded automatically, so every project stays where it is"
            );
            return Ok(());
        }
        let existing = self.shard_keys().await?;
        // Read once, when some project's key exists already: what each such key's state is.
        let mut cluster = None;
        for project_id in &self.layout.dedicated_shard_projects {
            let key = cluster_layout::dedicated_shard_key(*project_id);
            if !existing.contains(&key) {
                let created = self
                    .client
                    .create_shard_key(CreateShardKeyRequest {
                        collection_name: self.collection_name.clone(),
                        request: Some(self.layout.create_dedicated_shard_key(*project_id)),
                        timeout: Some(self.timeout_secs),
                    })
                    .await;
                match created {
                    Ok(_) => self.copy_project_to_its_shard(*project_id, &key).await?,
                    // Another gateway or worker created it first and asked for the copy.
                    Err(_) if self.shard_keys().await?.contains(&key) => {}
                    Err(error) => {
                        return Err(qdrant_failure("create a project's shard key", error));
                    }
                }
                continue;
            }
            let cluster = match &mut cluster {
                Some(cluster) => cluster,
                None => cluster.insert(
                    self.client
                        .collection_cluster_info(&self.collection_name)
                        .await
                        .map_err(|error| qdrant_failure("read the cluster's shards", error))?,
                ),
            };
            if !cluster_layout::shard_key_is_active(cluster, &key) {
                if !cluster_layout::shard_key_is_receiving(cluster, &key) {
                    // Partial with no transfer under way: the copy was lost (a failed request,
                    // a restarted node). Ask again; copying a point twice changes nothing.
                    tracing::warn!(project_id = %project_id, "a project's shard is partial and receives nothing; asking for its copy again");
                    self.copy_project_to_its_shard(*project_id, &key).await?;
                }
                continue;
            }
            // Housekeeping: a failure leaves copies that no search reads (the project's
            // requests go to its own shard), so it is logged and retried at the next start
            // rather than keeping this process from starting.
            let cleared = self
                .client
                .delete_points(
                    DeletePointsBuilder::new(&self.collection_name)
                        .points(Filter::must([project_condition(*project_id)]))
                        .shard_key_selector(ShardKeySelector {
                            shard_keys: vec![cluster_layout::shared_shard_key()],
                            fallback: None,
                        })
                        .ordering(ClusterLayout::write_ordering())
                        .timeout(self.timeout_secs)
                        .wait(false),
                )
                .await;
            if let Err(error) = cleared {
                tracing::warn!(project_id = %project_id, %error, "could not clear a moved project's points from the shared shard; the next start retries");
            }
        }
        Ok(())
    }

    /// Has Qdrant copy `project_id`'s points from the shared shard into its own `key`.
    async fn copy_project_to_its_shard(
        &self,
        project_id: ProjectId,
        key: &ShardKey,
    ) -> Result<(), IndexError> {
        self.client
            .update_collection_cluster_setup(UpdateCollectionClusterSetupRequest {
                collection_name: self.collection_name.clone(),
                operation: Some(Operation::ReplicatePoints(
                    ReplicatePointsBuilder::new(cluster_layout::shared_shard_key(), key.clone())
                        .filter(Filter::must([project_condition(project_id)]))
                        .build(),
                )),
                timeout: Some(self.timeout_secs),
            })
            .await
            .map_err(|error| qdrant_failure("copy a project's points to its shard", error))?;
        tracing::info!(project_id = %project_id, "project moving to a shard of its own; its searches use the shared shard until the copy is done");
        Ok(())
    }

    fn shard_key_selector(&self, scope: &ProjectScope) -> Option<ShardKeySelector> {
        ClusterLayout::shard_key_selector(self.sharding, scope)
    }

    fn check_dimension(&self, vector: &[f32]) -> Result<(), IndexError> {
        if vector.len() != self.dimension {
            return Err(IndexError::DimensionMismatch {
                expected: self.dimension,
                actual: vector.len(),
            });
        }
        Ok(())
    }
}

/// The one way to build a filter here: the project condition first, then `extra`.
fn project_filter(scope: &ProjectScope, extra: Vec<Condition>) -> Filter {
    let mut conditions = Vec::with_capacity(extra.len() + 1);
    conditions.push(project_condition(scope.project_id()));
    conditions.extend(extra);
    Filter::must(conditions)
}

/// One project's points. Requests take it through [`project_filter`]; only moving a project
/// named in the operator's options to its own shard uses it alone.
fn project_condition(project_id: ProjectId) -> Condition {
    Condition::matches(PROJECT_ID_FIELD, project_id.as_uuid().to_string())
}

/// Sets a shard key selector on a request builder when there is one (tiered collections).
trait ShardKeySelectorIf: Sized {
    fn shard_key_selector_if(self, selector: Option<ShardKeySelector>) -> Self;
}

macro_rules! shard_key_selector_if {
    ($($builder:ty),*) => {$(
        impl ShardKeySelectorIf for $builder {
            fn shard_key_selector_if(self, selector: Option<ShardKeySelector>) -> Self {
                match selector {
                    Some(selector) => self.shard_key_selector(selector),
                    None => self,
                }
            }
        }
    )*};
}

shard_key_selector_if!(
    UpsertPointsBuilder,
    DeletePointsBuilder,
    CountPointsBuilder,
    QueryPointsBuilder,
    ScrollPointsBuilder
);

/// Conditions on the given subject fields and kinds (the project condition is added by
/// [`project_filter`]).
fn subject_conditions(
    [user_id, agent_id, session_id]: [Option<String>; 3],
    kinds: &[engram_core::MemoryKind],
) -> Vec<Condition> {
    let mut conditions = Vec::new();
    for (field, wanted) in [
        (USER_ID_FIELD, user_id),
        (AGENT_ID_FIELD, agent_id),
        (SESSION_ID_FIELD, session_id),
    ] {
        if let Some(wanted) = wanted {
            conditions.push(Condition::matches(field, wanted));
        }
    }
    if !kinds.is_empty() {
        let kind_names: Vec<String> = kinds.iter().map(|kind| kind.as_str().to_string()).collect();
        conditions.push(Condition::matches(KIND_FIELD, kind_names));
    }
    conditions
}

/// The Qdrant condition of a payload filter (added to [`project_filter`]'s, never alone).
pub(crate) fn payload_condition(filter: &PayloadFilter) -> Condition {
    let all =
        |children: &[PayloadFilter]| children.iter().map(payload_condition).collect::<Vec<_>>();
    match filter {
        PayloadFilter::All(children) => Condition::from(Filter::must(all(children))),
        PayloadFilter::Any(children) => Condition::from(Filter::should(all(children))),
        PayloadFilter::Not(child) => Condition::from(Filter::must_not([payload_condition(child)])),
        PayloadFilter::KeywordIn { field, values } => {
            Condition::matches(field.clone(), values.clone())
        }
        PayloadFilter::Present { field } => {
            Condition::from(Filter::must_not([Condition::is_empty(field.clone())]))
        }
        PayloadFilter::Range {
            field,
            comparison,
            value,
        } => {
            let mut range = Range::default();
            match comparison {
                Comparison::Gt => range.gt = Some(*value),
                Comparison::Gte => range.gte = Some(*value),
                Comparison::Lt => range.lt = Some(*value),
                Comparison::Lte => range.lte = Some(*value),
            }
            Condition::range(field.clone(), range)
        }
        PayloadFilter::BoolIs { field, value } => Condition::matches(field.clone(), *value),
        PayloadFilter::Ids(ids) => Condition::has_id(ids.iter().copied().map(point_id_of)),
    }
}

fn hits_of(scored_points: Vec<ScoredPoint>) -> Vec<VectorHit> {
    scored_points
        .into_iter()
        .filter_map(|scored| {
            Some(VectorHit {
                memory_id: memory_id_of(scored.id.as_ref())?,
                version: payload_version(&scored.payload),
                score: scored.score,
            })
        })
        .collect()
}

fn point_id_of(memory_id: MemoryId) -> PointId {
    PointId::from(memory_id.as_uuid().to_string())
}

fn memory_id_of(point_id: Option<&PointId>) -> Option<MemoryId> {
    match point_id?.point_id_options.as_ref()? {
        PointIdOptions::Uuid(text) => Uuid::parse_str(text).ok().map(MemoryId::from_uuid),
        PointIdOptions::Num(_) => None,
    }
}

fn payload_version(payload: &HashMap<String, Value>) -> i64 {
    match payload
        .get(VERSION_FIELD)
        .and_then(|value| value.kind.as_ref())
    {
        Some(Kind::IntegerValue(version)) => *version,
        Some(Kind::DoubleValue(version)) => *version as i64,
        _ => 0,
    }
}

fn version_only() -> PayloadIncludeSelector {
    PayloadIncludeSelector {
        fields: vec![VERSION_FIELD.to_string()],
    }
}

fn point_struct(scope: &ProjectScope, point: IndexedMemory) -> PointStruct {
    let mut payload = Payload::new();
    payload.insert(
        ORGANIZATION_ID_FIELD,
        scope.organization_id().as_uuid().to_string(),
    );
    payload.insert(PROJECT_ID_FIELD, scope.project_id().as_uuid().to_string());
    for (field, value) in [
        (USER_ID_FIELD, point.user_id),
        (AGENT_ID_FIELD, point.agent_id),
        (SESSION_ID_FIELD, point.session_id),
    ] {
        if let Some(value) = value {
            payload.insert(field, value);
        }
    }
    payload.insert(KIND_FIELD, point.kind.as_str().to_string());
    payload.insert(VERSION_FIELD, point.version);
    payload.insert(CREATED_AT_FIELD, point.created_at.to_rfc3339());
    payload.insert(TEXT_FIELD, point.text);
    payload.insert(LAYOUT_FIELD, POINT_LAYOUT);
    let filterable = point.filterable;
    if let Some(source) = filterable.source {
        payload.insert(SOURCE_FIELD, source.as_str().to_string());
    }
    if let Some(visibility) = crate::payload_filter::visibility_keyword(
        filterable.visibility,
        filterable.shared_with.as_deref(),
    ) {
        payload.insert(VISIBILITY_FIELD, visibility);
    }
    payload.insert(VERIFIED_FIELD, filterable.verified.unwrap_or(false));
    payload.insert(CATEGORIES_FIELD, filterable.categories);
    if let Some(confidence) = filterable.confidence {
        payload.insert(CONFIDENCE_FIELD, confidence);
    }
    payload.insert(CREATED_MICROS_FIELD, point.created_at.timestamp_micros());
    for (field, at) in [
        (UPDATED_MICROS_FIELD, filterable.updated_at),
        (OCCURRED_MICROS_FIELD, filterable.occurred_at),
    ] {
        if let Some(at) = at {
            payload.insert(field, at.timestamp_micros());
        }
    }
    let mut metadata = Payload::new();
    for (key, value) in payload_metadata(&filterable.metadata) {
        match value {
            serde_json::Value::String(text) => metadata.insert(key, text),
            serde_json::Value::Bool(flag) => metadata.insert(key, flag),
            serde_json::Value::Number(number) => match number.as_i64() {
                Some(integer) => metadata.insert(key, integer),
                None => metadata.insert(key, number.as_f64().unwrap_or(f64::NAN)),
            },
            _ => {}
        }
    }
    payload.insert(METADATA_FIELD, Value::from(metadata));
    PointStruct::new(point_id_of(point.memory_id), point.vector, payload)
}

/// Connection trouble, deadlines and overload are outages the caller retries (503); anything
/// else is a failure to investigate.
fn qdrant_failure(action: &str, error: QdrantError) -> IndexError {
    use tonic::Code;
    let message = format!("qdrant could not {action}: {error}");
    match &error {
        QdrantError::ResponseError { status } => match status.code() {
            Code::Unavailable
            | Code::DeadlineExceeded
            | Code::Cancelled
            | Code::ResourceExhausted
            | Code::Aborted => IndexError::Unavailable(message),
            // The client reports a refused or reset connection as Internal or Unknown with a
            // transport error in the message.
            Code::Internal | Code::Unknown if is_connection_failure(status.message()) => {
                IndexError::Unavailable(message)
            }
            _ => IndexError::Internal(message),
        },
        QdrantError::ResourceExhaustedError { .. } | QdrantError::Io(_) => {
            IndexError::Unavailable(message)
        }
        _ => IndexError::Internal(message),
    }
}

fn is_connection_failure(message: &str) -> bool {
    [
        "Failed to connect",
        "transport error",
        "tcp connect error",
        "connection",
    ]
    .iter()
    .any(|marker| message.contains(marker))
}

#[async_trait]
impl VectorIndex for QdrantVectorIndex {
    async fn upsert(
        &self,
        scope: &ProjectScope,
        points: Vec<IndexedMemory>,
    ) -> Result<(), IndexError> {
        for point in &points {
            self.check_dimension(&point.vector)?;
        }
        // Within one batch the highest version of a memory wins, as it would across batches.
        let mut newest_by_id: HashMap<MemoryId, IndexedMemory> = HashMap::new();
        for point in points {
            match newest_by_id.get(&point.memory_id) {
                Some(kept) if kept.version > point.version => {}
                _ => {
                    newest_by_id.insert(point.memory_id, point);
                }
            }
        }
        // Qdrant's update filter makes the stale-write check atomic on the server: an existing
        // point is only replaced when it belongs to this project and its stored version is not
        // newer. The filter is per request, so points are grouped by version.
        let mut by_version: BTreeMap<i64, Vec<PointStruct>> = BTreeMap::new();
        for point in newest_by_id.into_values() {
            by_version
                .entry(point.version)
                .or_default()
                .push(point_struct(scope, point));
        }
        for (version, points) in by_version {
            let only_older_points_of_this_project = project_filter(
                scope,
                vec![Condition::range(
                    VERSION_FIELD,
                    Range {
                        lte: Some(version as f64),
                        ..Default::default()
                    },
                )],
            );
            self.client
                .upsert_points(
                    UpsertPointsBuilder::new(&self.collection_name, points)
                        .update_filter(only_older_points_of_this_project)
                        .ordering(ClusterLayout::write_ordering())
                        .shard_key_selector_if(self.shard_key_selector(scope))
                        .timeout(self.timeout_secs)
                        .wait(true),
                )
                .await
                .map_err(|error| qdrant_failure("upsert points", error))?;
        }
        Ok(())
    }

    async fn delete(&self, scope: &ProjectScope, ids: Vec<MemoryId>) -> Result<(), IndexError> {
        if ids.is_empty() {
            return Ok(());
        }
        // Deleting by filter (ids AND project) makes a foreign id a no-op by construction.
        let filter = project_filter(
            scope,
            vec![Condition::has_id(ids.into_iter().map(point_id_of))],
        );
        self.client
            .delete_points(
                DeletePointsBuilder::new(&self.collection_name)
                    .points(filter)
                    .ordering(ClusterLayout::write_ordering())
                    .shard_key_selector_if(self.shard_key_selector(scope))
                    .timeout(self.timeout_secs)
                    .wait(true),
            )
            .await
            .map_err(|error| qdrant_failure("delete points", error))?;
        Ok(())
    }

    async fn delete_subject(&self, scope: &ProjectScope, user_id: &str) -> Result<(), IndexError> {
        let filter = project_filter(
            scope,
            vec![Condition::matches(USER_ID_FIELD, user_id.to_string())],
        );
        self.client
            .delete_points(
                DeletePointsBuilder::new(&self.collection_name)
                    .points(filter)
                    .ordering(ClusterLayout::write_ordering())
                    .shard_key_selector_if(self.shard_key_selector(scope))
                    .timeout(self.timeout_secs)
                    .wait(true),
            )
            .await
            .map_err(|error| qdrant_failure("delete a subject's points", error))?;
        Ok(())
    }

    async fn count_points(
        &self,
        scope: &ProjectScope,
        user_id: Option<&str>,
    ) -> Result<u64, IndexError> {
        let conditions = user_id
            .map(|user_id| vec![Condition::matches(USER_ID_FIELD, user_id.to_string())])
            .unwrap_or_default();
        let counted = self
            .client
            .count(
                CountPointsBuilder::new(&self.collection_name)
                    .filter(project_filter(scope, conditions))
                    .shard_key_selector_if(self.shard_key_selector(scope))
                    .exact(true),
            )
            .await
            .map_err(|error| qdrant_failure("count points", error))?;
        Ok(counted.result.map(|result| result.count).unwrap_or(0))
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
        let mut conditions = subject_conditions(
            [query.user_id, query.agent_id, query.session_id],
            &query.kinds,
        );
        if let Some(filter) = &query.filter {
            conditions.push(payload_condition(filter));
        }
        let response = self
            .client
            .query(
                QueryPointsBuilder::new(&self.collection_name)
                    .query(Query::new_nearest(query.vector))
                    .filter(project_filter(scope, conditions))
                    .params(self.layout.search_params())
                    .shard_key_selector_if(self.shard_key_selector(scope))
                    .limit(query.limit as u64)
                    .with_payload(version_only())
                    .timeout(self.timeout_secs),
            )
            .await
            .map_err(|error| qdrant_failure("search", error))?;
        Ok(hits_of(response.result))
    }

    async fn keyword_search(
        &self,
        scope: &ProjectScope,
        query: KeywordQuery,
    ) -> Result<Vec<VectorHit>, IndexError> {
        if query.limit == 0 || query.text.trim().is_empty() {
            return Ok(Vec::new());
        }
        let conditions = subject_conditions(
            [query.user_id, query.agent_id, query.session_id],
            &query.kinds,
        );
        let corpus = project_filter(scope, conditions.clone());
        let mut scored_conditions = conditions;
        if let Some(only_ids) = &query.only_ids {
            scored_conditions.push(Condition::has_id(only_ids.iter().copied().map(point_id_of)));
        }
        if let Some(filter) = &query.filter {
            scored_conditions.push(payload_condition(filter));
        }
        let filter = project_filter(scope, scored_conditions);
        // Term statistics come from the points this query may see, never other projects.
        let params = SearchParams {
            idf: Some(IdfParams {
                corpus: Some(corpus),
            }),
            ..SearchParams::default()
        };
        let response = self
            .client
            .query(
                QueryPointsBuilder::new(&self.collection_name)
                    .query(Query::new_text(TextQueryBuilder::new(query.text)))
                    .using(TEXT_FIELD)
                    .params(params)
                    .filter(filter)
                    .shard_key_selector_if(self.shard_key_selector(scope))
                    .limit(query.limit as u64)
                    .with_payload(version_only())
                    .timeout(self.timeout_secs),
            )
            .await
            .map_err(|error| qdrant_failure("keyword search", error))?;
        Ok(hits_of(response.result))
    }

    async fn versions(
        &self,
        scope: &ProjectScope,
        ids: Vec<MemoryId>,
    ) -> Result<HashMap<MemoryId, i64>, IndexError> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let wanted_count = ids.len() as u32;
        let filter = project_filter(
            scope,
            vec![Condition::has_id(ids.into_iter().map(point_id_of))],
        );
        let response = self
            .client
            .scroll(
                ScrollPointsBuilder::new(&self.collection_name)
                    .filter(filter)
                    .shard_key_selector_if(self.shard_key_selector(scope))
                    .limit(wanted_count)
                    .with_payload(version_only())
                    .with_vectors(false)
                    .timeout(self.timeout_secs),
            )
            .await
            .map_err(|error| qdrant_failure("read point versions", error))?;
        Ok(response
            .result
            .iter()
            .filter_map(|point: &RetrievedPoint| {
                Some((
                    memory_id_of(point.id.as_ref())?,
                    payload_version(&point.payload),
                ))
            })
            .collect())
    }

    async fn points_page(
        &self,
        scope: &ProjectScope,
        from: Option<MemoryId>,
        limit: usize,
    ) -> Result<PointsPage, IndexError> {
        let mut request = ScrollPointsBuilder::new(&self.collection_name)
            .filter(project_filter(scope, Vec::new()))
            .shard_key_selector_if(self.shard_key_selector(scope))
            .limit(limit.clamp(1, u32::MAX as usize) as u32)
            .with_payload(PayloadIncludeSelector {
                fields: vec![VERSION_FIELD.to_string(), LAYOUT_FIELD.to_string()],
            })
            .with_vectors(false)
            .timeout(self.timeout_secs);
        if let Some(from) = from {
            request = request.offset(point_id_of(from));
        }
        let response = self
            .client
            .scroll(request)
            .await
            .map_err(|error| qdrant_failure("scroll points", error))?;
        let points = response
            .result
            .iter()
            .filter_map(|point| {
                // A point of an older layout (no keyword text) counts as stale: rewritten.
                let layout = match point
                    .payload
                    .get(LAYOUT_FIELD)
                    .and_then(|v| v.kind.as_ref())
                {
                    Some(Kind::IntegerValue(layout)) => Some(*layout),
                    _ => None,
                };
                let version = if layout == Some(POINT_LAYOUT) {
                    payload_version(&point.payload)
                } else {
                    i64::MIN
                };
                Some((memory_id_of(point.id.as_ref())?, version))
            })
            .collect();
        Ok(PointsPage {
            points,
            next: memory_id_of(response.next_page_offset.as_ref()),
        })
    }

    /// Every write already waited for the cluster's write-ahead log (`wait=true`).
    async fn flush(&self) -> Result<(), IndexError> {
        Ok(())
    }

    async fn check_ready(&self) -> Result<(), IndexError> {
        self.client
            .health_check()
            .await
            .map_err(|error| qdrant_failure("answer a health check", error))?;
        Ok(())
    }
}

/// The payload indexes of a collection. `project_id` is the tenant key (`is_tenant`
/// co-locates each project's points) and the only field with HNSW links of its own (one
/// subgraph per project); the other filters get keyword indexes, `created_at` a datetime
/// index and `text` the embedded index's tokenization (see `edge::keyword_text_index_params`),
/// none of them with links: a subgraph per end-user, agent, session, kind, day or frequent
/// word would cost graph building and memory for filters answered by scanning their few
/// points or by the project's graph.
fn payload_index_requests(collection_name: &str) -> Vec<CreateFieldIndexCollection> {
    let mut requests = vec![
        CreateFieldIndexCollectionBuilder::new(
            collection_name,
            PROJECT_ID_FIELD,
            FieldType::Keyword,
        )
        .field_index_params(KeywordIndexParamsBuilder::default().is_tenant(true))
        .wait(true)
        .build(),
    ];
    for field in [
        ORGANIZATION_ID_FIELD,
        USER_ID_FIELD,
        AGENT_ID_FIELD,
        SESSION_ID_FIELD,
        KIND_FIELD,
        VISIBILITY_FIELD,
    ] {
        requests.push(
            CreateFieldIndexCollectionBuilder::new(collection_name, field, FieldType::Keyword)
                .field_index_params(KeywordIndexParamsBuilder::default().enable_hnsw(false))
                .wait(true)
                .build(),
        );
    }
    requests.push(
        CreateFieldIndexCollectionBuilder::new(
            collection_name,
            CREATED_AT_FIELD,
            FieldType::Datetime,
        )
        .field_index_params(DatetimeIndexParamsBuilder::default().enable_hnsw(false))
        .wait(true)
        .build(),
    );
    requests.push(
        CreateFieldIndexCollectionBuilder::new(collection_name, TEXT_FIELD, FieldType::Text)
            .field_index_params(
                TextIndexParamsBuilder::new(TokenizerType::Multilingual)
                    .lowercase(true)
                    .stopwords_language("english".to_string())
                    .snowball_stemmer("english".to_string())
                    .bm25_scoring()
                    .enable_hnsw(false),
            )
            .wait(true)
            .build(),
    );
    requests
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload_filter::{PayloadBound, payload_filter_for};
    use engram_core::memory_filter::parse_memory_filter;
    use qdrant_client::qdrant::{condition::ConditionOneOf, r#match::MatchValue};

    /// There is no Qdrant server here: the collection's indexes are checked on the requests
    /// the client sends. Only the tenant field builds HNSW links of its own.
    #[test]
    fn only_the_tenant_index_asks_for_hnsw_links() {
        use qdrant_client::qdrant::payload_index_params::IndexParams;
        let requests = payload_index_requests("engram_test");
        let fields: Vec<&str> = requests
            .iter()
            .map(|request| request.field_name.as_str())
            .collect();
        assert_eq!(
            fields,
            [
                PROJECT_ID_FIELD,
                ORGANIZATION_ID_FIELD,
                USER_ID_FIELD,
                AGENT_ID_FIELD,
                SESSION_ID_FIELD,
                KIND_FIELD,
                VISIBILITY_FIELD,
                CREATED_AT_FIELD,
                TEXT_FIELD,
            ]
        );
        for request in &requests {
            let params = request
                .field_index_params
                .as_ref()
                .and_then(|params| params.index_params.as_ref());
            let (enable_hnsw, is_tenant) = match params {
                Some(IndexParams::KeywordIndexParams(keyword)) => {
                    (keyword.enable_hnsw, keyword.is_tenant)
                }
                Some(IndexParams::DatetimeIndexParams(datetime)) => (datetime.enable_hnsw, None),
                Some(IndexParams::TextIndexParams(text)) => (text.enable_hnsw, None),
                other => panic!("{}: unexpected parameters {other:?}", request.field_name),
            };
            if request.field_name == PROJECT_ID_FIELD {
                assert_eq!(is_tenant, Some(true));
                assert_ne!(enable_hnsw, Some(false), "the tenant field keeps its links");
            } else {
                assert_eq!(enable_hnsw, Some(false), "{}", request.field_name);
            }
            assert_eq!(request.wait, Some(true));
        }
    }

    /// There is no Qdrant server here: the translation is checked on the filter it builds.
    #[test]
    fn a_filter_tree_becomes_the_qdrant_filter_it_means() {
        let filter = parse_memory_filter(
            &serde_json::json!({
                "OR": [{"agent_id": "support"}, {"metadata": {"shared": true}}],
                "NOT": {"categories": {"in": ["secret"]}},
                "occurred_at": {"gte": "2024-07-01T00:00:00Z"}
            }),
            "filters",
        )
        .expect("a valid filter");
        let translation = payload_filter_for(&filter);
        assert!(translation.exact);
        let PayloadBound::Only(payload) = translation.bound else {
            panic!("the filter narrows the search");
        };
        let condition = payload_condition(&payload);
        let Some(ConditionOneOf::Filter(all)) = condition.condition_one_of else {
            panic!("an AND becomes a nested filter: {condition:?}");
        };
        assert_eq!(all.must.len(), 3, "{all:?}");
        let nested = |condition: &Condition| match &condition.condition_one_of {
            Some(ConditionOneOf::Filter(filter)) => filter.clone(),
            other => panic!("expected a nested filter, got {other:?}"),
        };
        let field = |condition: &Condition| match &condition.condition_one_of {
            Some(ConditionOneOf::Field(field)) => field.clone(),
            other => panic!("expected a field condition, got {other:?}"),
        };
        let nested_filters: Vec<Filter> = all
            .must
            .iter()
            .filter(|condition| {
                matches!(condition.condition_one_of, Some(ConditionOneOf::Filter(_)))
            })
            .map(nested)
            .collect();
        let or = nested_filters
            .iter()
            .find(|filter| !filter.should.is_empty())
            .expect("the OR is a nested filter of should conditions");
        assert_eq!(or.should.len(), 2);
        assert_eq!(field(&or.should[0]).key, "agent_id");
        let shared = field(&or.should[1]);
        assert_eq!(shared.key, "metadata.shared");
        assert_eq!(
            shared.r#match.and_then(|wanted| wanted.match_value),
            Some(MatchValue::Boolean(true))
        );
        let not = nested_filters
            .iter()
            .find(|filter| !filter.must_not.is_empty())
            .expect("the NOT is a nested filter of must_not conditions");
        assert_eq!(field(&not.must_not[0]).key, "categories");
        let occurred = all
            .must
            .iter()
            .find(|condition| matches!(condition.condition_one_of, Some(ConditionOneOf::Field(_))))
            .map(field)
            .expect("the time is a field condition");
        assert_eq!(occurred.key, "occurred_us");
        let expected = chrono::DateTime::parse_from_rfc3339("2024-07-01T00:00:00Z")
            .expect("a time")
            .timestamp_micros() as f64;
        assert_eq!(occurred.range.and_then(|range| range.gte), Some(expected));
    }
}
