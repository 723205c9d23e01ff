//! Edit one memory: new content is re-embedded (and paid for), an expiry schedules a
//! deletion, `expected_version` guards against overwriting someone else's change.

use crate::{EditedMemory, EngineError, MemoryEdit, MemoryEngine};
use engram_core::principal::Credential;
use engram_core::usage::{PlannedSpend, UsageUnit};
use engram_core::{FieldError, InvalidInput, MemoryId, Operation, Principal};

#[derive(Clone, Debug)]
pub struct EditMemoryRequest {
    pub memory_id: MemoryId,
    pub edit: MemoryEdit,
    /// The new content's vector, for a project that sends its own.
    pub client_vector: Option<Vec<f32>>,
    pub expected_version: Option<i64>,
}

impl MemoryEdit {
    /// What is wrong with the edit against the documented limits (named as the API names
    /// the fields). Every door's edit is held to them by the edit use case.
    pub fn limit_errors(&self) -> Vec<FieldError> {
        use engram_core::memory::{categories_errors, content_errors, metadata_errors};
        let mut errors = Vec::new();
        if self.content.is_none()
            && self.metadata.is_none()
            && self.categories.is_none()
            && self.expires_at.is_none()
            && self.occurred_at.is_none()
            && self.visibility.is_none()
            && self.shared_with.is_none()
        {
            errors.push(FieldError::new(
                "body",
                "nothing to change: give content, metadata, categories, expires_at, occurred_at, visibility or shared_with",
            ));
        }
        if let Some(error) = engram_core::memory::occurred_at_error("occurred_at", self.occurred_at)
        {
            errors.push(error);
        }
        if let Some(content) = &self.content {
            errors.extend(content_errors("content", content));
        }
        if let Some(metadata) = &self.metadata {
            errors.extend(metadata_errors("metadata", metadata));
        }
        if let Some(categories) = &self.categories {
            errors.extend(categories_errors("categories", categories));
        }
        if let Some(reason) = &self.reason
            && reason.chars().count() > engram_core::limits::MAX_REASON_CHARS
        {
            errors.push(FieldError::new(
                "reason",
                format!(
                    "must be at most {} characters",
                    engram_core::limits::MAX_REASON_CHARS
                ),
            ));
        }
        errors
    }
}

impl MemoryEngine {
    pub async fn edit_memory_for(
        &self,
        principal: &Principal,
        request: EditMemoryRequest,
    ) -> Result<EditedMemory, EngineError> {
        principal.authorize(Operation::EditMemory)?;
        let limit_errors = request.edit.limit_errors();
        if !limit_errors.is_empty() {
            return Err(InvalidInput(limit_errors).into());
        }
        let mut request = request;
        request.edit.reason = crate::use_cases::reason_of(principal, request.edit.reason.take())?;
        // Setting an expiry on a stored memory schedules its deletion, however far ahead;
        // clearing one cancels a deletion someone who may delete scheduled. Either is a
        // deletion decision: refused (and the expiry stays) without what deleting needs.
        if request.edit.expires_at.is_some() && !principal.may(Operation::ChangeMemoryExpiry) {
            let action = if matches!(request.edit.expires_at, Some(Some(_))) {
                "setting an expiry on a stored memory schedules its deletion"
            } else {
                "clearing an expiry cancels a scheduled deletion"
            };
            return Err(InvalidInput(vec![FieldError::new(
                "expires_at",
                format!("{action}: that needs the `memories:delete` scope"),
            )])
            .into());
        }
        let current = self.changeable_memory(principal, request.memory_id).await?;
        if request.edit.visibility == Some(engram_core::Visibility::Private)
            && current.agent_id.is_none()
        {
            return Err(InvalidInput(vec![FieldError::new(
                "visibility",
                "`private` needs an agent: this memory has no `agent_id`, so only `shared` fits it",
            )])
            .into());
        }
        // A memory shared with a team is shared; one made private is shared with no team.
        if let Some(Some(team)) = &request.edit.shared_with {
            let settings = self.spaces.settings_cache().of(principal.scope()).await?;
            if let Some(message) = crate::pipeline::team_error(
                team,
                request.edit.visibility,
                &settings.settings.agent_teams,
            ) {
                return Err(InvalidInput(vec![FieldError::new("shared_with", message)]).into());
            }
            request.edit.visibility = Some(engram_core::Visibility::Shared);
        }
        if request.edit.visibility == Some(engram_core::Visibility::Private) {
            request.edit.shared_with = Some(None);
        }
        if request.edit.keep_app_id
            && let Some(metadata) = request.edit.metadata.as_mut()
        {
            use engram_core::memory_filter::APP_ID_METADATA_KEY;
            if let Some(app_id) = current.metadata.get(APP_ID_METADATA_KEY)
                && !metadata.contains_key(APP_ID_METADATA_KEY)
            {
                metadata.insert(APP_ID_METADATA_KEY.to_string(), app_id.clone());
            }
        }
        let reembeds = request.edit.content.is_some();
        // A console member's correction is rectification, a duty no spend limit may block:
        // metered, never refused.
        let rectification = matches!(principal.credential(), Credential::ConsoleAccount { .. });
        if reembeds && !rectification {
            self.spend_guard
                .admit(
                    principal.scope(),
                    &[PlannedSpend {
                        unit: UsageUnit::TokensEmbedded,
                        quantity: 1,
                    }],
                )
                .await?;
        }
        let edited = self
            .edit_memory_with_vector(
                principal.scope(),
                request.memory_id,
                request.edit,
                request.client_vector,
                request.expected_version,
                principal.actor(),
            )
            .await?;
        if reembeds {
            let attribution = principal.usage_attribution().for_subject(
                edited.memory.user_id.as_ref().map(|id| id.as_str()),
                edited.memory.agent_id.as_ref().map(|id| id.as_str()),
            );
            self.meter.record(
                principal.scope(),
                &attribution,
                UsageUnit::TokensEmbedded,
                edited.tokens_embedded,
            );
        }
        Ok(EditedMemory {
            memory: principal.shown(Operation::EditMemory, edited.memory),
            ..edited
        })
    }
}
