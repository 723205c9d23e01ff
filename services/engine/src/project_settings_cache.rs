//! Each project's settings as this process knows them — its project settings (embedding,
//! recall-event capture), spend limits, retrieval profiles and query-cache epoch — read
//! together at most every few seconds, and forgotten at once when a use case here changes
//! any of them. Other processes see a change within [`PROJECT_SETTINGS_TTL`]. One cache
//! serves the embedding spaces, the recall recorder and the spend guard.

use engram_core::usage::SpendLimits;
use engram_core::{ProjectId, ProjectScope};
use engram_storage::governance::ProjectSettings;
use engram_storage::recall_quality::RetrievalProfileRecord;
use engram_storage::{Storage, StorageError};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long another process's change may go unseen here.
pub const PROJECT_SETTINGS_TTL: Duration = Duration::from_secs(5);

/// Everything a project has configured that searches, writes and spend checks consult.
#[derive(Debug)]
pub struct ProjectConfiguration {
    pub settings: ProjectSettings,
    pub spend_limits: Arc<SpendLimits>,
    pub retrieval_profiles: Vec<RetrievalProfileRecord>,
    /// The profiles that take a share of the searches naming none, parsed once:
    /// (name, tuning, share).
    pub traffic: Vec<(String, crate::profiles::SearchTuning, f64)>,
    /// Raised by every erasure of the project: query embeddings cached under an older one are
    /// dropped.
    pub query_cache_epoch: i64,
}

#[derive(Default)]
struct Entries {
    read: HashMap<ProjectId, (Arc<ProjectConfiguration>, Instant)>,
    /// Bumped by every `forget`: a read that started before a change must not store what it
    /// read after the change was made (it would bring the old settings back for a TTL).
    generation: HashMap<ProjectId, u64>,
}

pub struct ProjectSettingsCache {
    storage: Storage,
    entries: Mutex<Entries>,
}

impl ProjectSettingsCache {
    pub fn new(storage: Storage) -> Arc<Self> {
        Arc::new(Self {
            storage,
            entries: Mutex::new(Entries::default()),
        })
    }

    /// The project's configuration, read again when older than [`PROJECT_SETTINGS_TTL`].
    pub async fn of(
        &self,
        scope: &ProjectScope,
    ) -> Result<Arc<ProjectConfiguration>, StorageError> {
        let project_id = scope.project_id();
        let generation_before = match self.entries.lock() {
            Ok(entries) => {
                if let Some((configuration, read_at)) = entries.read.get(&project_id)
                    && read_at.elapsed() < PROJECT_SETTINGS_TTL
                {
                    return Ok(configuration.clone());
                }
                entries.generation.get(&project_id).copied().unwrap_or(0)
            }
            Err(_) => 0,
        };
        let engram_storage::governance::ProjectRowConfiguration {
            settings,
            spend_limits,
            query_cache_epoch,
        } = self.storage.project_configuration(scope).await?;
        let retrieval_profiles = self.storage.retrieval_profiles(scope).await?;
        let traffic = retrieval_profiles
            .iter()
            .filter(|profile| profile.traffic_share > 0.0)
            .filter_map(|profile| {
                let tuning =
                    crate::profiles::SearchTuning::parse(&profile.parameters, "parameters").ok()?;
                Some((profile.name.clone(), tuning, profile.traffic_share))
            })
            .collect();
        let configuration = Arc::new(ProjectConfiguration {
            settings,
            spend_limits: Arc::new(spend_limits),
            retrieval_profiles,
            traffic,
            query_cache_epoch,
        });
        if let Ok(mut entries) = self.entries.lock()
            && entries.generation.get(&project_id).copied().unwrap_or(0) == generation_before
        {
            entries
                .read
                .insert(project_id, (configuration.clone(), Instant::now()));
        }
        Ok(configuration)
    }

    /// Forget what was read of the project (a use case in this process just changed it).
    pub fn forget(&self, project_id: ProjectId) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.read.remove(&project_id);
            *entries.generation.entry(project_id).or_default() += 1;
        }
    }
}
