//! Each project's settings as this process knows them — its project settings (embedding,
//! recall-event capture), spend limits and retrieval profiles — read together at most every
//! few seconds, and forgotten at once when a use case here changes any of them. Other
//! processes see a change within [`PROJECT_SETTINGS_TTL`]. One cache serves the embedding
//! spaces, the recall recorder and the spend guard.

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
}

pub struct ProjectSettingsCache {
    storage: Storage,
    entries: Mutex<HashMap<ProjectId, (Arc<ProjectConfiguration>, Instant)>>,
}

impl ProjectSettingsCache {
    pub fn new(storage: Storage) -> Arc<Self> {
        Arc::new(Self {
            storage,
            entries: Mutex::new(HashMap::new()),
        })
    }

    /// The project's configuration, read again when older than [`PROJECT_SETTINGS_TTL`].
    pub async fn of(
        &self,
        scope: &ProjectScope,
    ) -> Result<Arc<ProjectConfiguration>, StorageError> {
        if let Ok(entries) = self.entries.lock()
            && let Some((configuration, read_at)) = entries.get(&scope.project_id())
            && read_at.elapsed() < PROJECT_SETTINGS_TTL
        {
            return Ok(configuration.clone());
        }
        let configuration = Arc::new(ProjectConfiguration {
            settings: self.storage.project_settings(scope).await?,
            spend_limits: Arc::new(self.storage.spend_limits(scope).await?),
            retrieval_profiles: self.storage.retrieval_profiles(scope).await?,
        });
        if let Ok(mut entries) = self.entries.lock() {
            entries.insert(scope.project_id(), (configuration.clone(), Instant::now()));
        }
        Ok(configuration)
    }

    /// Forget what was read of the project (a use case in this process just changed it).
    pub fn forget(&self, project_id: ProjectId) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.remove(&project_id);
        }
    }
}
