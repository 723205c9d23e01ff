//! Read and change a project's settings: PII redaction, retention per kind and per store,
//! derivation, recall events, the relevance floor and the embedding. A change is validated whole (nothing is saved if any
//! field is wrong), an embedding this deployment cannot run is refused before saving, and
//! every in-process cache of the settings forgets the project once it is saved.

use crate::{EngineError, MemoryEngine};
use engram_core::pii::PiiRedaction;
use engram_core::recall::{MAX_RECALL_EVENT_RETENTION_DAYS, RecallEventCapture};
use engram_core::search::RelevanceFloorSetting;
use engram_core::{FieldError, InvalidInput, MemoryKind, Operation, Principal, ProjectEmbedding};
use engram_storage::StorageError;
use engram_storage::governance::ProjectSettings;
use engram_storage::subject_data::{StoreRetention, SubjectStore};
use std::collections::BTreeMap;

/// Longest retention of a kind: 100 years.
pub const MAX_RETENTION_DAYS: u32 = 36_500;

/// A project's embedding as asked: `{"source": "local", "model": "multilingual"}`, …
#[derive(Debug, Clone, Default)]
pub struct EmbeddingChoice {
    pub source: String,
    /// With `local`: `minilm` (the default) or `multilingual`.
    pub model: Option<String>,
    /// With `client`: the length of the vectors.
    pub dimension: Option<i64>,
}

/// What a caller asks to change; `None` leaves a setting as it is.
#[derive(Clone, Debug, Default)]
pub struct ProjectSettingsChange {
    /// `off | mask | reject`
    pub pii_redaction: Option<String>,
    /// Kind name → days (1–[`MAX_RETENTION_DAYS`]) or `None` for no limit; replaces the map.
    pub retention_days: Option<BTreeMap<String, Option<u32>>>,
    pub derive_memories: Option<bool>,
    /// `full | no_text | off`
    pub recall_events: Option<String>,
    pub recall_event_retention_days: Option<i64>,
    /// Store name (`messages`, `session_state`, `feedback`, `files`, `recall_events`) →
    /// days (1–[`MAX_RETENTION_DAYS`]) or `None` for no limit (recall events: back to the
    /// default 30 days); the stores named change, the others stay as they are.
    pub store_retention_days: Option<BTreeMap<String, Option<u32>>>,
    /// The embedding source, its local model and, for client vectors, the dimension.
    pub embedding: Option<EmbeddingChoice>,
    /// `digests | full`
    pub run_capture: Option<String>,
    pub keep_trajectories: Option<bool>,
    /// `"model"` (the embedding model's measured floor) or a number 0–1 (0: none).
    pub relevance_floor: Option<serde_json::Value>,
    /// `shared | private`: the visibility of a new memory that names none.
    pub default_visibility: Option<String>,
    /// Whether an agent's searches take other agents' memories only once verified.
    pub verified_only_from_other_agents: Option<bool>,
    /// Team name → its agents; replaces the project's teams.
    pub agent_teams: Option<BTreeMap<String, Vec<String>>>,
}

impl ProjectSettingsChange {
    /// Whether the change names how long memories or any store's records are kept.
    pub fn changes_retention(&self) -> bool {
        self.retention_days.is_some()
            || self.recall_event_retention_days.is_some()
            || self.store_retention_days.is_some()
    }

    fn apply_to(self, settings: &mut ProjectSettings) -> Result<(), InvalidInput> {
        let mut errors = Vec::new();
        if let Some(mode) = &self.pii_redaction {
            match PiiRedaction::parse(mode) {
                Some(mode) => settings.pii_redaction = mode,
                None => errors.push(FieldError::new(
                    "pii_redaction",
                    "must be one of off, mask, reject",
                )),
            }
        }
        if let Some(retention_days) = &self.retention_days {
            let mut replacement = BTreeMap::new();
            for (kind_name, days) in retention_days {
                let field = format!("retention_days.{kind_name}");
                let Ok(kind) = kind_name.parse::<MemoryKind>() else {
                    errors.push(FieldError::new(
                        field,
                        format!("unknown kind; one of {}", MemoryKind::allowed_values()),
                    ));
                    continue;
                };
                match days {
                    None => {}
                    Some(days) if (1..=MAX_RETENTION_DAYS).contains(days) => {
                        replacement.insert(kind, *days);
                    }
                    Some(_) => errors.push(FieldError::new(
                        field,
                        format!("must be 1–{MAX_RETENTION_DAYS} days, or null for no limit"),
                    )),
                }
            }
            settings.retention_days = replacement;
        }
        if let Some(derive_memories) = self.derive_memories {
            settings.derive_memories = derive_memories;
        }
        if let Some(capture) = &self.recall_events {
            match RecallEventCapture::parse(capture) {
                Some(capture) => settings.recall_events = capture,
                None => errors.push(FieldError::new(
                    "recall_events",
                    "must be one of full, no_text, off",
                )),
            }
        }
        if let Some(days) = self.recall_event_retention_days {
            match u32::try_from(days) {
                Ok(days) if (1..=MAX_RECALL_EVENT_RETENTION_DAYS).contains(&days) => {
                    settings.recall_event_retention_days = days;
                }
                _ => errors.push(FieldError::new(
                    "recall_event_retention_days",
                    format!("must be 1–{MAX_RECALL_EVENT_RETENTION_DAYS} days"),
                )),
            }
        }
        if let Some(store_retention_days) = &self.store_retention_days {
            apply_store_retention(store_retention_days, settings, &mut errors);
        }
        if let Some(verified_only) = self.verified_only_from_other_agents {
            settings.verified_only_from_other_agents = verified_only;
        }
        if let Some(teams) = &self.agent_teams {
            match engram_core::agent_teams::AgentTeams::parse(teams, "agent_teams") {
                Ok(teams) => settings.agent_teams = teams,
                Err(team_errors) => errors.extend(team_errors),
            }
        }
        if let Some(visibility) = &self.default_visibility {
            match visibility.parse() {
                Ok(visibility) => settings.default_visibility = visibility,
                Err(message) => errors.push(FieldError::new("default_visibility", message)),
            }
        }
        if let Some(capture) = &self.run_capture {
            match capture.parse() {
                Ok(capture) => settings.run_capture = capture,
                Err(message) => errors.push(FieldError::new("run_capture", message)),
            }
        }
        if let Some(keep) = self.keep_trajectories {
            settings.keep_trajectories = keep;
        }
        if let Some(floor) = &self.relevance_floor {
            match RelevanceFloorSetting::parse(floor, "relevance_floor") {
                Ok(floor) => settings.relevance_floor = floor,
                Err(error) => errors.push(error),
            }
        }
        if let Some(choice) = &self.embedding {
            match ProjectEmbedding::parse(
                &choice.source,
                choice.model.as_deref(),
                choice.dimension,
                "embedding",
            ) {
                Ok(embedding) => settings.embedding = embedding,
                Err(error) => errors.push(error),
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(InvalidInput(errors))
        }
    }
}

/// The stores a retention in days can be set for, by the names the registry gives them,
/// with the most days each accepts.
pub fn stores_with_retention_days() -> Vec<(&'static str, u32)> {
    SubjectStore::swept_by_age()
        .map(|store| (store.declaration().name, most_retention_days(store)))
        .collect()
}

fn most_retention_days(store: SubjectStore) -> u32 {
    if store == SubjectStore::RecallEvents {
        MAX_RECALL_EVENT_RETENTION_DAYS
    } else {
        MAX_RETENTION_DAYS
    }
}

/// Every store swept by age with its days (`None`: until deleted or erased).
pub fn store_retention_days_of(settings: &ProjectSettings) -> BTreeMap<String, Option<u32>> {
    SubjectStore::swept_by_age()
        .map(|store| {
            (
                store.declaration().name.to_string(),
                settings.retention_days_of(store),
            )
        })
        .collect()
}

fn apply_store_retention(
    requested: &BTreeMap<String, Option<u32>>,
    settings: &mut ProjectSettings,
    errors: &mut Vec<FieldError>,
) {
    for (name, days) in requested {
        let field = format!("store_retention_days.{name}");
        let Some(store) = SubjectStore::named(name).filter(|store| {
            matches!(
                store.declaration().retention,
                StoreRetention::ProjectDays { .. }
            )
        }) else {
            errors.push(FieldError::new(
                field,
                format!(
                    "unknown store; one of {}",
                    stores_with_retention_days()
                        .iter()
                        .map(|(name, _)| *name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
            continue;
        };
        let most = most_retention_days(store);
        match (store, days) {
            (_, Some(days)) if !(1..=most).contains(days) => errors.push(FieldError::new(
                field,
                format!("must be 1–{most} days, or null for no limit"),
            )),
            (SubjectStore::RecallEvents, Some(days)) => {
                settings.recall_event_retention_days = *days
            }
            (SubjectStore::RecallEvents, None) => {
                settings.recall_event_retention_days =
                    engram_core::recall::DEFAULT_RECALL_EVENT_RETENTION_DAYS;
            }
            (_, Some(days)) => {
                settings.store_retention_days.insert(store, *days);
            }
            (_, None) => {
                settings.store_retention_days.remove(&store);
            }
        }
    }
}

impl MemoryEngine {
    pub async fn project_settings_for(
        &self,
        principal: &Principal,
    ) -> Result<ProjectSettingsReport, EngineError> {
        principal.authorize(Operation::GetProjectSettings)?;
        let settings = self.storage.project_settings(principal.scope()).await?;
        self.settings_report(principal.scope(), settings).await
    }

    /// The model id and dimension of `embedding`; a model the deployment stopped offering
    /// reads as `unavailable`, dimension 0.
    fn identity_or_unavailable(&self, embedding: engram_core::ProjectEmbedding) -> (String, usize) {
        self.spaces
            .identity_of(embedding)
            .unwrap_or_else(|_| ("unavailable".to_string(), 0))
    }

    /// The settings with the model and dimension their embedding setting means here.
    async fn settings_report(
        &self,
        scope: &engram_core::ProjectScope,
        settings: ProjectSettings,
    ) -> Result<ProjectSettingsReport, EngineError> {
        let (embedding_model, embedding_dimension) =
            self.identity_or_unavailable(settings.embedding);
        let relevance_floor = settings.relevance_floor.effective(&embedding_model);
        let unmentioned_name_floor = settings
            .relevance_floor
            .for_unmentioned_names(&embedding_model);
        let embedding_change = match settings.embedding_change {
            Some(change) => {
                let (model, dimension) = self.identity_or_unavailable(change.to);
                let task = self.storage.task(scope, change.task_id).await?;
                Some(EmbeddingChangeReport {
                    to: change.to,
                    model,
                    dimension,
                    task_id: change.task_id,
                    memories_embedded: task.as_ref().map_or(0, |task| task.progress_done),
                    memories: task.as_ref().map_or(0, |task| task.progress_total),
                })
            }
            None => None,
        };
        Ok(ProjectSettingsReport {
            settings,
            embedding_model,
            embedding_dimension,
            relevance_floor,
            unmentioned_name_floor,
            embedding_change,
        })
    }

    /// The settings as saved.
    pub async fn update_project_settings_for(
        &self,
        principal: &Principal,
        change: ProjectSettingsChange,
    ) -> Result<ProjectSettingsReport, EngineError> {
        principal.authorize(Operation::UpdateProjectSettings)?;
        // Retention deletes: a change of how long anything is kept needs what deleting
        // needs, and refused, it changes nothing.
        if change.changes_retention() {
            principal.authorize(Operation::ChangeRetention)?;
        }
        let scope = principal.scope();
        let mut settings = self.storage.project_settings(scope).await?;
        let in_use = settings.embedding;
        let changes_embedding = change.embedding.is_some();
        change.apply_to(&mut settings)?;
        let requested = settings.embedding;
        // Before saving: a model this deployment cannot run is refused, not discovered later
        // (only when the change names one: a stored model the deployment no longer offers
        // must not block a change of PII or retention).
        if changes_embedding {
            self.spaces.check_available(requested).await?;
        }
        let under_way = settings.embedding_change;
        if changes_embedding
            && let Some(under_way) = under_way
            && requested != in_use
            && requested != under_way.to
        {
            return Err(EngineError::Conflict(
                engram_core::governance::move_under_way(
                    under_way.to.stored_source(),
                    under_way.task_id,
                ),
            ));
        }
        let actor = principal.actor();
        // Back to the embedding in use: the move under way is cancelled first; if it switched
        // meanwhile, nothing is saved and the caller learns where the project is now.
        if changes_embedding
            && requested == in_use
            && let Some(under_way) = under_way
        {
            let cancelled = self
                .storage
                .abandon_embedding_change(
                    scope,
                    under_way.task_id,
                    "cancelled: the embedding was set back to the one in use",
                    actor,
                )
                .await?;
            if !cancelled {
                self.forget_project_settings(scope.project_id());
                return Err(EngineError::Conflict(format!(
                    "the move to the {} embedding ended before it could be cancelled: read the settings for where the project is now",
                    under_way.to.stored_source()
                )));
            }
        }
        match self
            .storage
            .update_project_settings(scope, &settings, actor)
            .await
        {
            Ok(_) => {}
            // Memories hold vectors of the space in use: a task moves them to the new space
            // while searches keep the old one, and the rest of the change is saved. The move
            // starts first: refused (another one won the race), nothing is saved.
            Err(StorageError::ProjectNotEmpty { .. }) => {
                if requested.client_dimension().is_some() {
                    return Err(EngineError::Conflict(
                        "a project with memories cannot move to client-supplied vectors: Engram cannot embed its memories for them".to_string(),
                    ));
                }
                if under_way.is_none() {
                    self.storage
                        .start_embedding_change(
                            scope,
                            requested,
                            actor.request_id.as_deref(),
                            actor,
                        )
                        .await?;
                    self.governance.task_queued.notify_one();
                }
                settings.embedding = in_use;
                self.storage
                    .update_project_settings(scope, &settings, actor)
                    .await?;
            }
            Err(other) => return Err(other.into()),
        }
        self.forget_project_settings(scope.project_id());
        let saved = self.storage.project_settings(scope).await?;
        self.settings_report(scope, saved).await
    }
}

/// A project's settings as a door shows them: with the embedding model and dimension its
/// embedding setting means in this deployment.
#[derive(Clone, Debug)]
pub struct ProjectSettingsReport {
    pub settings: ProjectSettings,
    /// The model id stored with each memory (`client-vectors-<dimension>` for client vectors).
    pub embedding_model: String,
    /// Length of every vector.
    pub embedding_dimension: usize,
    /// The floor searches apply when they set no `min_score` (the setting resolved).
    pub relevance_floor: f32,
    /// The floor for a query naming what no memory within reach mentions (0: none).
    pub unmentioned_name_floor: f32,
    /// The move to another embedding under way: searches use the current one until it ends.
    pub embedding_change: Option<EmbeddingChangeReport>,
}

/// A project's move to another embedding, as a door shows it.
#[derive(Clone, Debug)]
pub struct EmbeddingChangeReport {
    pub to: ProjectEmbedding,
    /// The model id its memories will carry, and its dimension.
    pub model: String,
    pub dimension: usize,
    /// The task doing it: its progress counts memories embedded.
    pub task_id: uuid::Uuid,
    /// The task's progress: memories embedded into the new space so far, of `memories`.
    pub memories_embedded: i64,
    pub memories: i64,
}
