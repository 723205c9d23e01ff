//! Each project's embedding space — which model embeds its text (or whether the client sends
//! the vectors) and which index holds its points — and the index that routes every call there.
//!
//! Vectors of two models cannot be compared, so every space has its own index (one directory
//! of the embedded engine, one collection of a cluster), named after its model. A project
//! lives in exactly one space; storage lets it move only while it holds no memories.

use crate::EngineError;
use crate::project_settings_cache::ProjectSettingsCache;
use async_trait::async_trait;
use engram_core::embedding::client_vectors_model_id;
use engram_core::{MemoryId, ProjectEmbedding, ProjectId, ProjectScope};
use engram_embed::{EmbedError, Embedder};
use engram_index::{
    IndexError, IndexedMemory, KeywordQuery, PointsPage, VectorHit, VectorIndex, VectorQuery,
};
use engram_storage::Storage;
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

// A project's embedding setting comes from the one settings cache: a change made through
// this process is seen at once; other processes (workers) see it within its TTL, and a write
// routed by the old setting fails and is retried from the outbox.

/// Loads an embedder when it is first needed.
pub type EmbedderLoader = Arc<dyn Fn() -> Result<Arc<dyn Embedder>, EmbedError> + Send + Sync>;

/// The opening of one index, as [`IndexOpener`] returns it.
pub type IndexOpening =
    Pin<Box<dyn Future<Output = Result<Arc<dyn VectorIndex>, IndexError>> + Send>>;

/// Opens (creating if needed) the index of one model: `(model id, dimension)`.
pub type IndexOpener = Arc<dyn Fn(String, usize) -> IndexOpening + Send + Sync>;

enum EmbedderSlot {
    Ready(Arc<dyn Embedder>),
    /// Loaded on first use: the local model beside a provider is rarely needed.
    OnFirstUse {
        load: EmbedderLoader,
        loaded: tokio::sync::OnceCell<Arc<dyn Embedder>>,
    },
    /// This process never embeds (a worker): it only needs to know where points go.
    Absent,
}

/// A model this deployment can embed with: its id and dimension are known without loading it.
pub struct EmbeddingModel {
    model_id: String,
    dimension: usize,
    slot: EmbedderSlot,
}

impl EmbeddingModel {
    pub fn ready(embedder: Arc<dyn Embedder>) -> Self {
        Self {
            model_id: embedder.model_id().to_string(),
            dimension: embedder.dimension(),
            slot: EmbedderSlot::Ready(embedder),
        }
    }

    pub fn on_first_use(model_id: &str, dimension: usize, load: EmbedderLoader) -> Self {
        Self {
            model_id: model_id.to_string(),
            dimension,
            slot: EmbedderSlot::OnFirstUse {
                load,
                loaded: tokio::sync::OnceCell::new(),
            },
        }
    }

    /// A model known by name only, in a process that never embeds.
    pub fn identity_only(model_id: &str, dimension: usize) -> Self {
        Self {
            model_id: model_id.to_string(),
            dimension,
            slot: EmbedderSlot::Absent,
        }
    }

    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    pub fn dimension(&self) -> usize {
        self.dimension
    }

    async fn embedder(&self) -> Result<Arc<dyn Embedder>, EngineError> {
        match &self.slot {
            EmbedderSlot::Ready(embedder) => Ok(embedder.clone()),
            EmbedderSlot::OnFirstUse { load, loaded } => {
                let load = load.clone();
                let embedder = loaded
                    .get_or_try_init(|| async move {
                        tokio::task::spawn_blocking(move || load())
                            .await
                            .map_err(|error| EmbedError::Failed(error.to_string()))?
                    })
                    .await?;
                Ok(embedder.clone())
            }
            EmbedderSlot::Absent => Err(EngineError::Internal(format!(
                "this process does not embed with {}",
                self.model_id
            ))),
        }
    }
}

/// The models a deployment offers its projects.
pub struct EmbeddingModels {
    /// What a project with the default setting (`deployment`) embeds with.
    pub deployment: Arc<EmbeddingModel>,
    /// `local`: the built-in model, when this deployment has it (may be `deployment`).
    pub local: Option<Arc<EmbeddingModel>>,
    /// `local` + `multilingual`: the built-in multilingual model, when this deployment has it.
    pub local_multilingual: Option<Arc<EmbeddingModel>>,
    /// `provider`: the OpenAI-compatible provider, when one is configured.
    pub provider: Option<Arc<EmbeddingModel>>,
}

/// Where one project's vectors come from and go to.
#[derive(Clone)]
pub struct ProjectSpace {
    pub embedding: ProjectEmbedding,
    /// Stored with each memory, and names the index.
    pub model_id: String,
    pub dimension: usize,
    /// Which of the project's successive spaces this is: a vector computed here is refused
    /// by storage once the project has switched to another.
    pub generation: i64,
    model: Option<Arc<EmbeddingModel>>,
    pub index: Arc<dyn VectorIndex>,
}

impl ProjectSpace {
    /// The embedder of the project; refused for a project that sends its own vectors.
    pub async fn embedder(&self) -> Result<Arc<dyn Embedder>, EngineError> {
        match &self.model {
            Some(model) => model.embedder().await,
            None => Err(client_vectors_refusal(self.dimension)),
        }
    }

    /// The declared dimension when the client sends the vectors.
    pub fn client_dimension(&self) -> Option<u32> {
        self.embedding.client_dimension()
    }
}

fn client_vectors_refusal(dimension: usize) -> EngineError {
    EngineError::EmbeddingUnavailable(format!(
        "this project sends its own vectors ({dimension} dimensions): Engram cannot embed text for it, so send an embedding with the request (file ingest and memory derivation need an embedding model)"
    ))
}

/// Every project's embedding space, resolved from its settings and cached briefly.
pub struct EmbeddingSpaces {
    models: EmbeddingModels,
    open_index: IndexOpener,
    /// By model id; opened on first use.
    indexes: tokio::sync::Mutex<BTreeMap<String, Arc<dyn VectorIndex>>>,
    /// Each project's settings, shared with the recall recorder and the spend guard.
    settings: Arc<ProjectSettingsCache>,
}

impl EmbeddingSpaces {
    pub fn new(storage: Storage, models: EmbeddingModels, open_index: IndexOpener) -> Self {
        Self {
            settings: ProjectSettingsCache::new(storage),
            models,
            open_index,
            indexes: tokio::sync::Mutex::new(BTreeMap::new()),
        }
    }

    /// One space only: `embedder` for every project, points in `index` (tools and tests that
    /// build an engine by hand).
    pub fn single(
        storage: Storage,
        index: Arc<dyn VectorIndex>,
        embedder: Arc<dyn Embedder>,
    ) -> Self {
        let model = Arc::new(EmbeddingModel::ready(embedder));
        let only_model_id = model.model_id.clone();
        let open_index: IndexOpener =
            Arc::new(move |model_id: String, _dimension: usize| -> IndexOpening {
                let index = index.clone();
                let only_model_id = only_model_id.clone();
                Box::pin(async move {
                    if model_id == only_model_id {
                        Ok(index)
                    } else {
                        Err(IndexError::Unavailable(format!(
                            "this engine has one embedding space ({only_model_id}), not {model_id}"
                        )))
                    }
                })
            });
        Self::new(
            storage,
            EmbeddingModels {
                deployment: model.clone(),
                local: Some(model),
                local_multilingual: None,
                provider: None,
            },
            open_index,
        )
    }

    /// The deployment's default model.
    pub fn deployment_model(&self) -> &Arc<EmbeddingModel> {
        &self.models.deployment
    }

    /// The deployment's default embedder (token estimates where no project model applies).
    pub async fn deployment_embedder(&self) -> Result<Arc<dyn Embedder>, EngineError> {
        self.models.deployment.embedder().await
    }

    /// The model behind a setting, or why this deployment cannot offer it. `None`: client
    /// vectors.
    fn model_of(
        &self,
        embedding: ProjectEmbedding,
    ) -> Result<Option<Arc<EmbeddingModel>>, EngineError> {
        match embedding {
            ProjectEmbedding::Deployment => Ok(Some(self.models.deployment.clone())),
            ProjectEmbedding::Local => self.models.local.clone().map(Some).ok_or_else(|| {
                EngineError::EmbeddingUnavailable(
                    "this deployment has no local embedding model".to_string(),
                )
            }),
            ProjectEmbedding::LocalMultilingual => {
                self.models.local_multilingual.clone().map(Some).ok_or_else(|| {
                    EngineError::EmbeddingUnavailable(
                        "this deployment has no multilingual model".to_string(),
                    )
                })
            }
            ProjectEmbedding::Provider => self.models.provider.clone().map(Some).ok_or_else(|| {
                EngineError::EmbeddingUnavailable(
                    "this deployment has no embedding provider configured (ENGRAM_EMBEDDING_BASE_URL)"
                        .to_string(),
                )
            }),
            ProjectEmbedding::ClientVectors { .. } => Ok(None),
        }
    }

    /// The model id and dimension a setting stands for in this deployment.
    pub fn identity_of(&self, embedding: ProjectEmbedding) -> Result<(String, usize), EngineError> {
        Ok(match (embedding, self.model_of(embedding)?) {
            (ProjectEmbedding::ClientVectors { dimension }, _) => {
                (client_vectors_model_id(dimension), dimension as usize)
            }
            (_, Some(model)) => (model.model_id.clone(), model.dimension),
            (_, None) => {
                return Err(EngineError::Internal(
                    "a model setting resolved to no model".to_string(),
                ));
            }
        })
    }

    /// Checks that this deployment can serve a setting before it is saved: the model is
    /// configured, and the local model loads.
    pub async fn check_available(&self, embedding: ProjectEmbedding) -> Result<(), EngineError> {
        if let Some(model) = self.model_of(embedding)?
            && !matches!(model.slot, EmbedderSlot::Absent)
        {
            model.embedder().await?;
        }
        Ok(())
    }

    /// Each project's settings as this process knows them: the one cache that the recall
    /// recorder and the spend guard read too, forgotten at once on every change here.
    pub fn settings_cache(&self) -> &Arc<ProjectSettingsCache> {
        &self.settings
    }

    async fn project_embedding(
        &self,
        scope: &ProjectScope,
    ) -> Result<ProjectEmbedding, EngineError> {
        Ok(self.settings.of(scope).await?.settings.embedding)
    }

    /// The project's space: its model (if Engram embeds for it) and its index.
    pub async fn space_for(&self, scope: &ProjectScope) -> Result<ProjectSpace, EngineError> {
        let configuration = self.settings.of(scope).await?;
        let settings = &configuration.settings;
        self.space_of(settings.embedding, settings.embedding_generation)
            .await
    }

    /// The space an embedding setting means here (a project's, or the one it moves to).
    pub async fn space_of(
        &self,
        embedding: ProjectEmbedding,
        generation: i64,
    ) -> Result<ProjectSpace, EngineError> {
        let model = self.model_of(embedding)?;
        let (model_id, dimension) = self.identity_of(embedding)?;
        let index = self.index_for_model(&model_id, dimension).await?;
        Ok(ProjectSpace {
            embedding,
            model_id,
            dimension,
            generation,
            model,
            index,
        })
    }

    async fn index_for_model(
        &self,
        model_id: &str,
        dimension: usize,
    ) -> Result<Arc<dyn VectorIndex>, IndexError> {
        let mut indexes = self.indexes.lock().await;
        if let Some(index) = indexes.get(model_id) {
            return Ok(index.clone());
        }
        let index = (self.open_index)(model_id.to_string(), dimension).await?;
        tracing::info!(
            model = model_id,
            dimension,
            "vector index of an embedding space opened"
        );
        indexes.insert(model_id.to_string(), index.clone());
        Ok(index)
    }

    /// Opens the index of the deployment's default model (at start, so a broken index is
    /// reported before anything is served).
    pub async fn open_deployment_index(&self) -> Result<Arc<dyn VectorIndex>, EngineError> {
        let model = self.models.deployment.clone();
        Ok(self
            .index_for_model(&model.model_id, model.dimension)
            .await?)
    }

    /// The index of the space the project is moving to, while a move is under way.
    async fn index_being_filled(
        &self,
        scope: &ProjectScope,
    ) -> Result<Option<Arc<dyn VectorIndex>>, IndexError> {
        let configuration = self.settings.of(scope).await.map_err(|error| {
            IndexError::Unavailable(format!("the project's settings cannot be read: {error}"))
        })?;
        let Some(change) = configuration.settings.embedding_change else {
            return Ok(None);
        };
        // A target this deployment cannot open holds nothing of this process's making.
        let Ok((model_id, dimension)) = self.identity_of(change.to) else {
            return Ok(None);
        };
        Ok(Some(self.index_for_model(&model_id, dimension).await?))
    }

    async fn opened_indexes(&self) -> Vec<Arc<dyn VectorIndex>> {
        self.indexes.lock().await.values().cloned().collect()
    }

    /// Refuses to serve data whose vectors do not belong to their project's space (the
    /// deployment's model changed under stored data): searching them would compare vectors of
    /// two models. Opens the index of every space in use.
    pub async fn check_stored_vectors(
        &self,
        maintenance: &engram_storage::MaintenanceStore,
    ) -> Result<(), EngineError> {
        let scopes: HashMap<ProjectId, ProjectScope> = maintenance
            .all_project_scopes()
            .await?
            .into_iter()
            .map(|scope| (scope.project_id(), scope))
            .collect();
        for (project_id, stored_model) in maintenance.embedding_models_by_project().await? {
            let Some(scope) = scopes.get(&project_id) else {
                continue;
            };
            let embedding = self.project_embedding(scope).await?;
            let (model_id, dimension) = self.identity_of(embedding)?;
            if stored_model != model_id {
                return Err(EngineError::EmbeddingUnavailable(format!(
                    "project {project_id} holds memories embedded with {stored_model:?}, but its embedding setting ({}) means {model_id:?} in this deployment: vectors of different models cannot be searched together; configure the data's model (or use a fresh data dir / database)",
                    embedding.source()
                )));
            }
            self.index_for_model(&model_id, dimension).await?;
        }
        Ok(())
    }
}

/// The vector index the rest of the engine sees: every call goes to the index of the
/// project's space. Deletes and counts also cover every other open index, so erasure and its
/// verification can never miss a point left in a space the project used before.
pub struct RoutedVectorIndex {
    spaces: Arc<EmbeddingSpaces>,
}

impl RoutedVectorIndex {
    pub fn new(spaces: Arc<EmbeddingSpaces>) -> Self {
        Self { spaces }
    }

    async fn index_of(&self, scope: &ProjectScope) -> Result<Arc<dyn VectorIndex>, IndexError> {
        match self.spaces.space_for(scope).await {
            Ok(space) => Ok(space.index),
            Err(EngineError::IndexUnavailable(message)) => Err(IndexError::Unavailable(message)),
            // The setting cannot be read or served right now: the outbox retries later.
            Err(error) => Err(IndexError::Unavailable(format!(
                "the project's embedding space cannot be resolved: {error}"
            ))),
        }
    }

    /// The project's index first, then the one a move of the project is filling (opened
    /// here if no other call did: a delete or an erasure must reach it in every process),
    /// then every other open one.
    async fn every_index(
        &self,
        scope: &ProjectScope,
    ) -> Result<Vec<Arc<dyn VectorIndex>>, IndexError> {
        let own = self.index_of(scope).await?;
        let mut indexes = vec![own.clone()];
        if let Some(filling) = self.spaces.index_being_filled(scope).await?
            && !Arc::ptr_eq(&filling, &own)
        {
            indexes.push(filling);
        }
        for index in self.spaces.opened_indexes().await {
            if !indexes.iter().any(|listed| Arc::ptr_eq(listed, &index)) {
                indexes.push(index);
            }
        }
        Ok(indexes)
    }
}

#[async_trait]
impl VectorIndex for RoutedVectorIndex {
    async fn upsert(
        &self,
        scope: &ProjectScope,
        points: Vec<IndexedMemory>,
    ) -> Result<(), IndexError> {
        self.index_of(scope).await?.upsert(scope, points).await
    }

    async fn delete(&self, scope: &ProjectScope, ids: Vec<MemoryId>) -> Result<(), IndexError> {
        for index in self.every_index(scope).await? {
            index.delete(scope, ids.clone()).await?;
        }
        Ok(())
    }

    async fn search(
        &self,
        scope: &ProjectScope,
        query: VectorQuery,
    ) -> Result<Vec<VectorHit>, IndexError> {
        self.index_of(scope).await?.search(scope, query).await
    }

    async fn keyword_search(
        &self,
        scope: &ProjectScope,
        query: KeywordQuery,
    ) -> Result<Vec<VectorHit>, IndexError> {
        self.index_of(scope)
            .await?
            .keyword_search(scope, query)
            .await
    }

    async fn versions(
        &self,
        scope: &ProjectScope,
        ids: Vec<MemoryId>,
    ) -> Result<HashMap<MemoryId, i64>, IndexError> {
        self.index_of(scope).await?.versions(scope, ids).await
    }

    async fn points_page(
        &self,
        scope: &ProjectScope,
        from: Option<MemoryId>,
        limit: usize,
    ) -> Result<PointsPage, IndexError> {
        self.index_of(scope)
            .await?
            .points_page(scope, from, limit)
            .await
    }

    async fn delete_subject(&self, scope: &ProjectScope, user_id: &str) -> Result<(), IndexError> {
        for index in self.every_index(scope).await? {
            index.delete_subject(scope, user_id).await?;
        }
        Ok(())
    }

    async fn count_points(
        &self,
        scope: &ProjectScope,
        user_id: Option<&str>,
    ) -> Result<u64, IndexError> {
        let mut total = 0;
        for index in self.every_index(scope).await? {
            total += index.count_points(scope, user_id).await?;
        }
        Ok(total)
    }

    async fn flush(&self) -> Result<(), IndexError> {
        for index in self.spaces.opened_indexes().await {
            index.flush().await?;
        }
        Ok(())
    }

    async fn check_ready(&self) -> Result<(), IndexError> {
        for index in self.spaces.opened_indexes().await {
            index.check_ready().await?;
        }
        Ok(())
    }
}
