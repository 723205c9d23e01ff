//! The use cases every front door calls: each takes an authenticated [`Principal`] and a
//! parsed request, checks the permission table, confines an end-user token to its end-user,
//! admits the spend, does the work, meters it and returns a domain result.
//!
//! Adapters (HTTP routes, console server functions, later Mem0 and MCP) parse their own
//! wire format into these requests and render the results; they decide nothing else.

mod add_memories;
mod api_keys;
mod assemble_context;
mod audit;
mod authenticate;
mod compliance;
mod console_accounts;
mod delete_memory;
pub mod deployment;
mod edit_memories;
mod edit_memory;
mod end_user_tokens;
mod evaluation;
mod feedback;
mod files;
mod get_memory;
mod list_entities;
mod list_memories;
mod memory_history;
mod memory_impact;
mod messages;
mod project_settings;
mod query_memories;
mod recall_quality;
mod remember_messages;
mod runs;
pub(crate) mod search_memories;
mod session_state;
pub(crate) mod usage;
mod verify_memory;

pub use add_memories::{AddMemoriesRequest, ClientIdempotencyKey};
pub use api_keys::{
    CreateApiKeyRequest, DEFAULT_ROLL_OVERLAP_SECONDS, MAX_KEY_LABEL_CHARS,
    MAX_ROLL_OVERLAP_SECONDS, RollApiKeyRequest, RolledApiKey,
};
pub use assemble_context::{AssembleContextRequest, AssembledContext, AssembledPart, source_json};
pub(crate) use audit::FullVerificationTimes;
pub use audit::{
    AuditChainReport, AuditNames, BrokenChainLink, FULL_VERIFICATION_INTERVAL, MAX_AUDIT_PAGE,
    MAX_EXPORT_EVENTS, audit_filter_errors,
};
pub use authenticate::AuthenticatedEndUser;
pub use compliance::{
    BulkDeleteOutcome, BulkDeletePreview, DeleteMatchingOutcome, DeleteMatchingRequest,
    FindSubjectsRequest, MAX_BULK_DELETE, MAX_FLAG_REASON_CHARS, MAX_SUBJECT_MATCHES, PastErasure,
    RetentionPreview, SetMemoryFlagsRequest, SubjectMatch, SubjectSummary,
};
pub use console_accounts::{
    CONSOLE_SESSION_LIFETIME, ConsoleAccess, ConsoleMember, ConsoleSessionTokens,
    INVITATION_LIFETIME_DAYS, InvitationOffer, MemberListing, ProjectMonthCost,
};
pub use delete_memory::DeleteMemoryRequest;
pub use edit_memories::MAX_EDITS_PER_REQUEST;
pub use edit_memory::EditMemoryRequest;
pub use end_user_tokens::{MintEndUserTokenRequest, MintedEndUserToken};
pub use evaluation::{
    CreateEvaluationSetRequest, MAX_CASES_PER_SET, MAX_SCHEDULE_SECS, MIN_SCHEDULE_SECS,
    StartEvaluationRunRequest,
};
pub use feedback::{FEEDBACK_RATINGS, FeedbackRequest};
pub use files::UploadFileRequest;
pub use list_entities::{EntityCount, EntityPage, ListEntitiesRequest, MAX_ENTITY_PAGE};
pub use list_memories::ListMemoriesRequest;
pub use memory_impact::{DEFAULT_IMPACT_DAYS, MemoryImpact, MemoryImpactRequest};
pub use messages::{AddMessagesRequest, DERIVATION_WAIT, ListMessagesRequest};
pub use project_settings::{
    EmbeddingChangeReport, EmbeddingChoice, MAX_RETENTION_DAYS, ProjectSettingsChange,
    ProjectSettingsReport, store_retention_days_of, stores_with_retention_days,
};
pub use query_memories::{QueriedMemories, QueryMemoriesRequest};
pub use recall_quality::{ListRecallEventsRequest, PutRetrievalProfileRequest, RecallInspection};
pub use remember_messages::{
    MAX_REMEMBERED_MESSAGES, RememberMessagesRequest, RememberMethod, RememberedMessage,
    RememberedMessages,
};
pub use runs::{ListRunsRequest, RunTimeline};
pub use search_memories::{
    MAX_CONTEXT_TOKENS, RecallBudgetCut, SearchAnswer, SearchMemoriesRequest,
};
pub use session_state::{MAX_STATE_VALUE_BYTES, PutSessionStateRequest, SessionStateAddress};
pub use usage::{
    NewPriceRequest, PriceBookEntry, PriceBookUnit, SpendLimitsReport, UsageReport,
    UsageReportRequest,
};
pub use verify_memory::VerifyMemoryRequest;

use crate::{EngineError, MemoryEngine};
use engram_core::{Memory, MemoryId, Principal};

/// A refusal of a store that keeps names unique or shares bounded (a taken name, shares
/// that would pass 1) is a conflict with the project's current state, not a locked memory.
pub(crate) fn conflict_on_refusal(error: engram_storage::StorageError) -> EngineError {
    match error {
        engram_storage::StorageError::Refused(message) => EngineError::Conflict(message),
        other => other.into(),
    }
}

/// A task's or a feedback's result in its content-free form: a derivation's or correction's
/// `content` and the LLM's `reason` (written about the content), and per-case evaluation
/// results, are left out wherever they sit; ids, actions and counts stay.
pub(crate) fn strip_content_fields(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(object) => {
            object.remove("content");
            object.remove("reason");
            object.remove("per_case");
            object.values_mut().for_each(strip_content_fields);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(strip_content_fields),
        _ => {}
    }
}

/// The reason a person gives for a change: required, trimmed, and refused (never cut) past
/// the documented [`engram_core::limits::MAX_REASON_CHARS`].
pub(crate) fn required_reason(reason: &str) -> Result<String, EngineError> {
    // Counted as sent, before surrounding space is trimmed (what a published `maxLength` says).
    let too_long = reason.chars().count() > engram_core::limits::MAX_REASON_CHARS;
    let reason = reason.trim();
    if reason.is_empty() {
        return Err(engram_core::InvalidInput::single("reason", "give a reason").into());
    }
    if too_long {
        return Err(engram_core::InvalidInput::single(
            "reason",
            format!(
                "must be at most {} characters",
                engram_core::limits::MAX_REASON_CHARS
            ),
        )
        .into());
    }
    Ok(reason.to_string())
}

/// The reason kept with a change: a person (a console member) must give one; a key may.
/// Either way it is trimmed and held to [`required_reason`]'s length.
pub(crate) fn reason_of(
    principal: &Principal,
    reason: Option<String>,
) -> Result<Option<String>, EngineError> {
    if matches!(
        principal.credential(),
        engram_core::principal::Credential::ConsoleAccount { .. }
    ) {
        return required_reason(reason.as_deref().unwrap_or("")).map(Some);
    }
    match reason.as_deref().map(str::trim) {
        Some(reason) if !reason.is_empty() => required_reason(reason).map(Some),
        _ => Ok(None),
    }
}

impl MemoryEngine {
    /// The memory, if it exists for this caller: another project's memory, or for an
    /// end-user token another end-user's, is not found.
    pub(crate) async fn visible_memory(
        &self,
        principal: &Principal,
        memory_id: MemoryId,
    ) -> Result<Memory, EngineError> {
        // Storage confines the read to an end-user token's end-user by the scope's type.
        Ok(self
            .storage
            .get_memory(principal.memory_scope(), memory_id)
            .await?)
    }

    /// A memory the caller may change or delete: one it sees and, for a credential bound to
    /// agents, one of its agents (a memory shared by another agent is read, not owned).
    pub(crate) async fn changeable_memory(
        &self,
        principal: &Principal,
        memory_id: MemoryId,
    ) -> Result<Memory, EngineError> {
        let memory = self.visible_memory(principal, memory_id).await?;
        refuse_other_agents_memory(principal, &memory)?;
        Ok(memory)
    }
}

/// A 403 for a credential bound to agents asked to change a memory of another agent.
pub(crate) fn refuse_other_agents_memory(
    principal: &Principal,
    memory: &Memory,
) -> Result<(), EngineError> {
    refuse_other_agents_row(
        principal,
        memory.agent_id.as_ref().map(|agent| agent.as_str()),
        &format!("memory {}", memory.id),
    )
}

/// A 403 for a credential bound to agents asked to change `what` (`memory …`, `run …`,
/// `file …`), a row of `agent_id`: it reads other agents' shared rows and rows of no agent,
/// and changes only its own agents'.
pub(crate) fn refuse_other_agents_row(
    principal: &Principal,
    agent_id: Option<&str>,
    what: &str,
) -> Result<(), EngineError> {
    if principal.may_change_agents_row(agent_id) {
        return Ok(());
    }
    Err(EngineError::Forbidden(format!(
        "{what} is {}: this credential, bound to agents {}, may read it but not change or delete it",
        agent_id.map_or_else(
            || "the project's (of no agent)".to_string(),
            |agent| format!("agent {agent:?}'s")
        ),
        principal
            .agents()
            .map(|agents| agents.describe())
            .unwrap_or_default()
    )))
}
