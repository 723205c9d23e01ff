//! How Engram lays out its collection on a Qdrant cluster and routes each request: the
//! collection's settings, the shard a project's points live in, and the search and write
//! parameters. Pure: built from the options and checked on what the client would send.
//!
//! There is no Qdrant server in the test environment, so every choice here is unit-tested on
//! the requests it builds, and argued (not measured) in `infra/CAPACITY.md`.

use crate::{QUANTIZATION_QUANTILE, RESCORE_OVERSAMPLING};
use engram_core::{ProjectId, ProjectScope};
use qdrant_client::qdrant::{
    CollectionClusterInfoResponse, CreateCollection, CreateCollectionBuilder, CreateShardKey,
    CreateShardKeyBuilder, Distance, HnswConfigDiffBuilder, Memory, PayloadStorageParams,
    QuantizationSearchParamsBuilder, QuantizationType, ReplicaState, ScalarQuantizationBuilder,
    SearchParams, ShardKey, ShardKeySelector, ShardingMethod, VectorParamsBuilder, WriteOrdering,
    WriteOrderingType,
};

/// The shard key every project without a shard of its own lives in (tiered sharding).
pub const SHARED_SHARD_KEY: &str = "shared";

/// How a collection Engram creates spreads its points over the cluster's shards.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ClusterSharding {
    /// Qdrant spreads points over `shard_number` shards by id: every project is in every shard,
    /// and a search asks them all. Right for many projects of similar size.
    #[default]
    Automatic,
    /// Tiered multitenancy: projects share one shard (`SHARED_SHARD_KEY`) until an operator gives
    /// a large project a shard key of its own, then its searches and writes go to its shards
    /// only. Qdrant keeps the shared key to a single shard, so the shared projects must fit on
    /// one node.
    Tiered,
}

/// Where a collection Engram creates keeps its vectors.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ClusterVectorStorage {
    /// Float vectors on disk (memory-mapped), an int8 copy in RAM that searches use, and the
    /// best candidates re-scored on the float vectors: a quarter of the RAM for vectors.
    #[default]
    DiskWithInt8InRam,
    /// Float vectors in RAM, no quantization: four times the RAM, no re-scoring reads.
    Ram,
}

/// HNSW graph and search settings: Qdrant's `m` and `ef_construct`, and the `hnsw_ef`
/// `engram bench-scale` measured on the embedded index (see `tests/BENCHMARKS.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HnswSettings {
    /// Links per point in each project's graph.
    pub m: u64,
    /// Candidates considered while building the graph.
    pub ef_construct: u64,
    /// Candidates kept while searching the graph (Qdrant's `hnsw_ef`).
    pub search_ef: u64,
}

impl HnswSettings {
    /// The `hnsw_ef` chosen by measurement: recall@10 against exact search at 100k and 1M
    /// memories in `tests/BENCHMARKS.md`.
    pub const MEASURED_SEARCH_EF: u64 = 128;
}

impl Default for HnswSettings {
    fn default() -> Self {
        Self {
            m: 16,
            ef_construct: 100,
            search_ef: Self::MEASURED_SEARCH_EF,
        }
    }
}

/// The layout of a collection and the routing of each request, from the deployment's options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterLayout {
    pub sharding: ClusterSharding,
    /// Shards of an automatically sharded collection, or of each dedicated shard key.
    pub shard_number: u32,
    pub replication_factor: u32,
    /// Replicas that must have a write before it is acknowledged (and the outbox entry cleared).
    pub write_consistency_factor: u32,
    pub vector_storage: ClusterVectorStorage,
    pub hnsw: HnswSettings,
    /// Projects that get a shard key of their own (tiered sharding only).
    pub dedicated_shard_projects: Vec<ProjectId>,
}

impl ClusterLayout {
    /// The collection Engram creates when it is absent. Graphs are built per project only
    /// (`m` 0, `payload_m` on the tenant field): every search is confined to one project, so
    /// a global graph across tenants would cost build time and memory that no search uses.
    pub fn create_collection(&self, collection_name: &str, dimension: usize) -> CreateCollection {
        let mut vectors = VectorParamsBuilder::new(dimension as u64, Distance::Cosine);
        if self.vector_storage == ClusterVectorStorage::DiskWithInt8InRam {
            vectors = vectors.memory(Memory::Cold).quantization_config(
                ScalarQuantizationBuilder::default()
                    .r#type(QuantizationType::Int8.into())
                    .quantile(QUANTIZATION_QUANTILE)
                    .memory(Memory::Pinned),
            );
        }
        let mut collection = CreateCollectionBuilder::new(collection_name)
            .vectors_config(vectors)
            .hnsw_config(
                HnswConfigDiffBuilder::default()
                    .m(0)
                    .payload_m(self.hnsw.m)
                    .ef_construct(self.hnsw.ef_construct),
            )
            // Memory text and filters stay on disk; the payload indexes answer the filters.
            .payload(PayloadStorageParams {
                memory: Some(Memory::Cold.into()),
            })
            .replication_factor(self.replication_factor.max(1))
            .write_consistency_factor(self.write_consistency_factor.max(1));
        collection = match self.sharding {
            ClusterSharding::Automatic => collection.shard_number(self.shard_number.max(1)),
            // Custom sharding: each shard key brings its own shards (see `create_shard_key`).
            ClusterSharding::Tiered => collection.sharding_method(ShardingMethod::Custom.into()),
        };
        collection.build()
    }

    /// The shared shard key of a tiered collection: one shard, as Qdrant requires of a
    /// fallback.
    pub fn create_shared_shard_key(&self) -> CreateShardKey {
        CreateShardKeyBuilder::default()
            .shard_key(SHARED_SHARD_KEY.to_string())
            .shards_number(1)
            .replication_factor(self.replication_factor.max(1))
            .build()
    }

    /// A dedicated project's shard key. It starts `Partial`: searches keep going to the shared
    /// shard until the project's points are copied over, then Qdrant marks it active.
    pub fn create_dedicated_shard_key(&self, project_id: ProjectId) -> CreateShardKey {
        CreateShardKeyBuilder::default()
            .shard_key(dedicated_shard_key(project_id))
            .shards_number(self.shard_number.max(1))
            .replication_factor(self.replication_factor.max(1))
            .initial_state(ReplicaState::Partial)
            .build()
    }

    /// Where a request about `scope` goes: nowhere in particular for an automatically sharded
    /// collection; for a tiered one, the project's own shard key when it exists and is active,
    /// else the shared one. `sharding` is the collection's actual method, which may differ from
    /// the options (an existing collection keeps its own).
    pub fn shard_key_selector(
        sharding: ClusterSharding,
        scope: &ProjectScope,
    ) -> Option<ShardKeySelector> {
        project_shard_key_selector(sharding, scope.project_id())
    }

    /// Graph search parameters: the measured `hnsw_ef`, and re-scoring on the float vectors
    /// when they are quantized. `idf` (keyword search) is added by the caller.
    pub fn search_params(&self) -> SearchParams {
        let mut params = SearchParams {
            hnsw_ef: Some(self.hnsw.search_ef),
            ..SearchParams::default()
        };
        if self.vector_storage == ClusterVectorStorage::DiskWithInt8InRam {
            params.quantization = Some(
                QuantizationSearchParamsBuilder::default()
                    .rescore(true)
                    .oversampling(RESCORE_OVERSAMPLING)
                    .build(),
            );
        }
        params
    }

    /// Every write waits until `write_consistency_factor` replicas have it (`wait=true`, set by
    /// the caller) and goes through the shard's current leader (`Medium`), so replicas apply a
    /// point's writes in one order except around a leader change. Order across a leader change
    /// does not matter here: an upsert only replaces an older version of its point, and a write
    /// that raced a deletion is followed by the applier's re-check that deletes again. `Strong`
    /// would instead refuse writes while the permanent leader is down.
    pub fn write_ordering() -> WriteOrdering {
        WriteOrdering {
            r#type: WriteOrderingType::Medium as i32,
        }
    }
}

fn project_shard_key_selector(
    sharding: ClusterSharding,
    project_id: ProjectId,
) -> Option<ShardKeySelector> {
    match sharding {
        ClusterSharding::Automatic => None,
        ClusterSharding::Tiered => Some(ShardKeySelector {
            shard_keys: vec![dedicated_shard_key(project_id)],
            fallback: Some(shared_shard_key()),
        }),
    }
}

/// The shard key of a project with a shard of its own: its id.
pub fn dedicated_shard_key(project_id: ProjectId) -> ShardKey {
    ShardKey::from(project_id.as_uuid().to_string())
}

/// The shard key the projects without a shard of their own share.
pub fn shared_shard_key() -> ShardKey {
    ShardKey::from(SHARED_SHARD_KEY.to_string())
}

/// The sharding method of an existing collection, as its stored configuration says.
pub fn sharding_of(sharding_method: Option<i32>) -> ClusterSharding {
    match sharding_method.and_then(|method| ShardingMethod::try_from(method).ok()) {
        Some(ShardingMethod::Custom) => ClusterSharding::Tiered,
        _ => ClusterSharding::Automatic,
    }
}

/// Whether a shard key's every replica, local or remote, is active: only then do the
/// project's searches go to it, and may its copies in the shared shard go.
pub fn shard_key_is_active(cluster: &CollectionClusterInfoResponse, wanted: &ShardKey) -> bool {
    let mut replicas = replicas_of(cluster, wanted).peekable();
    replicas.peek().is_some() && replicas.all(|(_, state)| state == ReplicaState::Active as i32)
}

/// The (shard id, state) of every replica, local or remote, of the shards of `wanted`.
fn replicas_of<'a>(
    cluster: &'a CollectionClusterInfoResponse,
    wanted: &'a ShardKey,
) -> impl Iterator<Item = (u32, i32)> + 'a {
    let local = cluster
        .local_shards
        .iter()
        .map(|shard| (shard.shard_key.as_ref(), shard.shard_id, shard.state));
    let remote = cluster
        .remote_shards
        .iter()
        .map(|shard| (shard.shard_key.as_ref(), shard.shard_id, shard.state));
    local
        .chain(remote)
        .filter(move |(key, _, _)| *key == Some(wanted))
        .map(|(_, shard_id, state)| (shard_id, state))
}

/// Whether a shard transfer into one of the key's shards is under way (a project's copy from
/// the shared shard, say). A partial key without one needs its copy asked for again.
pub fn shard_key_is_receiving(cluster: &CollectionClusterInfoResponse, wanted: &ShardKey) -> bool {
    let shard_ids: Vec<u32> = replicas_of(cluster, wanted)
        .map(|(shard_id, _)| shard_id)
        .collect();
    cluster
        .shard_transfers
        .iter()
        .any(|transfer| shard_ids.contains(&transfer.to_shard_id.unwrap_or(transfer.shard_id)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use qdrant_client::qdrant::{
        LocalShardInfo, RemoteShardInfo, ShardTransferInfo, quantization_config::Quantization,
        shard_key, vectors_config,
    };

    fn layout(sharding: ClusterSharding, vector_storage: ClusterVectorStorage) -> ClusterLayout {
        ClusterLayout {
            sharding,
            shard_number: 3,
            replication_factor: 2,
            write_consistency_factor: 2,
            vector_storage,
            hnsw: HnswSettings::default(),
            dedicated_shard_projects: Vec::new(),
        }
    }

    /// Whether `key` names a keyword shard key equal to `name`.
    fn is_shard_key(key: Option<&ShardKey>, name: &str) -> bool {
        matches!(
            key.and_then(|key| key.key.as_ref()),
            Some(shard_key::Key::Keyword(keyword)) if keyword == name
        )
    }

    fn new_project_id() -> ProjectId {
        ProjectId::from_uuid(uuid::Uuid::now_v7())
    }

    /// What a new collection asks of the cluster by default: float vectors on disk with an int8
    /// copy pinned in RAM, payloads on disk, per-project graphs only, the replication asked for.
    #[test]
    fn a_new_collection_keeps_floats_on_disk_int8_in_ram_and_graphs_per_project() {
        let request = layout(
            ClusterSharding::Automatic,
            ClusterVectorStorage::DiskWithInt8InRam,
        )
        .create_collection("engram_minilm", 384);
        let Some(vectors_config::Config::Params(vectors)) = request
            .vectors_config
            .as_ref()
            .and_then(|config| config.config.clone())
        else {
            panic!("one unnamed vector: {request:?}");
        };
        assert_eq!(vectors.size, 384);
        assert_eq!(vectors.memory, Some(Memory::Cold as i32), "floats on disk");
        let Some(Quantization::Scalar(scalar)) = vectors
            .quantization_config
            .as_ref()
            .and_then(|config| config.quantization)
        else {
            panic!("int8 scalar quantization: {vectors:?}");
        };
        assert_eq!(scalar.r#type, QuantizationType::Int8 as i32);
        assert_eq!(
            scalar.memory,
            Some(Memory::Pinned as i32),
            "int8 copy in RAM"
        );
        let hnsw = request.hnsw_config.expect("graph settings");
        assert_eq!(hnsw.m, Some(0), "no global graph across projects");
        assert_eq!(hnsw.payload_m, Some(16), "each project's graph");
        assert_eq!(hnsw.ef_construct, Some(100));
        assert_eq!(
            request.payload.and_then(|payload| payload.memory),
            Some(Memory::Cold as i32),
            "payloads on disk"
        );
        assert_eq!(request.shard_number, Some(3));
        assert_eq!(request.replication_factor, Some(2));
        assert_eq!(request.write_consistency_factor, Some(2));
        assert_eq!(request.sharding_method, None, "automatic sharding");

        let in_ram = layout(ClusterSharding::Automatic, ClusterVectorStorage::Ram)
            .create_collection("engram_minilm", 384);
        let Some(vectors_config::Config::Params(vectors)) =
            in_ram.vectors_config.and_then(|config| config.config)
        else {
            panic!("one unnamed vector");
        };
        assert_eq!(vectors.memory, None);
        assert_eq!(vectors.quantization_config, None);
    }

    /// Searches use the measured `hnsw_ef` and re-score quantized candidates on the floats.
    #[test]
    fn searches_rescore_quantized_candidates_with_the_measured_ef() {
        let quantized = layout(
            ClusterSharding::Automatic,
            ClusterVectorStorage::DiskWithInt8InRam,
        )
        .search_params();
        assert_eq!(quantized.hnsw_ef, Some(128));
        let quantization = quantized.quantization.expect("quantization parameters");
        assert_eq!(quantization.rescore, Some(true));
        assert_eq!(quantization.oversampling, Some(2.0));
        assert_eq!(quantized.exact, None, "graph search, not a scan");

        let in_ram = layout(ClusterSharding::Automatic, ClusterVectorStorage::Ram).search_params();
        assert_eq!(in_ram.quantization, None);
    }

    /// A tiered collection is custom-sharded; a project's requests name its own key and fall
    /// back to the shared one; an automatically sharded collection gets no selector at all.
    #[test]
    fn tiered_sharding_routes_a_project_to_its_own_key_with_the_shared_one_as_fallback() {
        let tiered = layout(
            ClusterSharding::Tiered,
            ClusterVectorStorage::DiskWithInt8InRam,
        );
        let request = tiered.create_collection("engram_minilm", 384);
        assert_eq!(request.sharding_method, Some(ShardingMethod::Custom as i32));
        assert_eq!(request.shard_number, None, "shards come with each key");

        let shared = tiered.create_shared_shard_key();
        assert!(is_shard_key(shared.shard_key.as_ref(), SHARED_SHARD_KEY));
        assert_eq!(
            shared.shards_number,
            Some(1),
            "Qdrant's fallback is one shard"
        );
        assert_eq!(shared.initial_state, None, "active from the start");

        let project_id = new_project_id();
        let dedicated = tiered.create_dedicated_shard_key(project_id);
        let project_key = project_id.as_uuid().to_string();
        assert!(is_shard_key(dedicated.shard_key.as_ref(), &project_key));
        assert_eq!(dedicated.shards_number, Some(3));
        assert_eq!(dedicated.replication_factor, Some(2));
        assert_eq!(
            dedicated.initial_state,
            Some(ReplicaState::Partial as i32),
            "searches stay on the shared shard until the copy is done"
        );

        let selector = project_shard_key_selector(ClusterSharding::Tiered, project_id)
            .expect("a tiered collection routes by project");
        assert_eq!(selector.shard_keys.len(), 1);
        assert!(is_shard_key(selector.shard_keys.first(), &project_key));
        assert!(is_shard_key(selector.fallback.as_ref(), SHARED_SHARD_KEY));
        assert_eq!(
            project_shard_key_selector(ClusterSharding::Automatic, project_id),
            None
        );
        assert_eq!(
            sharding_of(Some(ShardingMethod::Custom as i32)),
            ClusterSharding::Tiered
        );
        assert_eq!(sharding_of(None), ClusterSharding::Automatic);
    }

    /// A dedicated key counts as active only when every replica of it is.
    #[test]
    fn a_dedicated_shard_is_active_only_when_every_replica_is() {
        let project_id = new_project_id();
        let key = dedicated_shard_key(project_id);
        let local = |state: ReplicaState, key: &ShardKey| LocalShardInfo {
            shard_id: 1,
            points_count: 10,
            state: state as i32,
            shard_key: Some(key.clone()),
        };
        let remote = |state: ReplicaState, key: &ShardKey| RemoteShardInfo {
            shard_id: 2,
            peer_id: 7,
            state: state as i32,
            shard_key: Some(key.clone()),
        };
        let cluster = |local_shards, remote_shards| CollectionClusterInfoResponse {
            peer_id: 1,
            shard_count: 2,
            local_shards,
            remote_shards,
            shard_transfers: Vec::new(),
            resharding_operations: Vec::new(),
            time: 0.0,
        };
        let shared = shared_shard_key();
        assert!(shard_key_is_active(
            &cluster(
                vec![local(ReplicaState::Active, &key)],
                vec![remote(ReplicaState::Active, &key)]
            ),
            &key
        ));
        assert!(!shard_key_is_active(
            &cluster(
                vec![local(ReplicaState::Active, &key)],
                vec![remote(ReplicaState::Partial, &key)]
            ),
            &key
        ));
        assert!(
            !shard_key_is_active(
                &cluster(vec![local(ReplicaState::Active, &shared)], Vec::new()),
                &key
            ),
            "a key with no shard is not active"
        );

        // A partial key is receiving while a transfer into one of its shards runs.
        let mut copying = cluster(
            vec![local(ReplicaState::Active, &shared)],
            vec![remote(ReplicaState::Partial, &key)],
        );
        assert!(!shard_key_is_receiving(&copying, &key));
        copying.shard_transfers.push(ShardTransferInfo {
            shard_id: 1,
            to_shard_id: Some(2),
            from: 1,
            to: 7,
            sync: false,
        });
        assert!(shard_key_is_receiving(&copying, &key));
        assert!(!shard_key_is_receiving(&copying, &shared));
    }

    #[test]
    fn writes_go_through_the_current_leader() {
        assert_eq!(
            ClusterLayout::write_ordering().r#type,
            WriteOrderingType::Medium as i32
        );
    }
}
