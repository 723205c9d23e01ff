//! The memory pipeline: embed and store new memories with their outbox entries, apply them
//! to the vector index (read-your-writes), and answer scoped searches hydrated from the DB.

pub mod api_key_cache;
pub mod console_credentials;
pub mod consolidation;
pub mod derivation;
pub mod embedding_spaces;
pub mod end_user_tokens;
mod error;
pub mod evaluation;
pub mod governance;
pub mod indexing;
pub mod jobs;
pub mod llm;
pub mod login_throttle;
mod memory_limits;
pub mod metering;
pub mod password_work;
mod pipeline;
pub mod profiles;
pub mod project_settings_cache;
pub mod query_cache;
pub mod recall_events;
pub mod recall_metrics;
mod search;
mod search_request;
pub mod spend_guard;
pub mod use_cases;

pub use embedding_spaces::{
    EmbedderLoader, EmbeddingModel, EmbeddingModels, EmbeddingSpaces, IndexOpener, IndexOpening,
    ProjectSpace,
};
pub use engram_core::NewMemory;
pub use error::EngineError;
pub use governance::{
    DataGovernance, ErasureCounts, ErasureLedgerSettings, ErasureReceipt, ErasureVerification,
    LedgerReplay, OrganizationErasureReceipt, ProjectErasure, StoreErasure, SubjectExport,
};
pub use indexing::{IndexApplier, ReconcileReport};
pub use metering::UsageMeter;
pub use pipeline::{AddOutcome, EditedMemory, EngineSettings, MemoryEdit, MemoryEngine};
pub use search::{
    ContextSection, ContextSource, DEFAULT_KEYWORD_WEIGHT, DEFAULT_RECENCY_WEIGHT, FusionMethod,
    MAX_ALWAYS_PROCEDURES, PackedContext, PackedSection, PackedSections, RankingSignals,
    RetrievalMode, SearchHit, SearchOutcome, SearchRequest, SearchTimings, memory_line,
    pack_context, pack_sections,
};
pub use spend_guard::{SpendGuard, format_micros};
pub use use_cases::deployment;
pub use use_cases::{
    AddMemoriesRequest, AddMessagesRequest, AssembleContextRequest, AssembledContext,
    AssembledPart, AuditChainReport, AuditNames, AuthenticatedEndUser, BrokenChainLink,
    BulkDeleteOutcome, BulkDeletePreview, CONSOLE_SESSION_LIFETIME, ClientIdempotencyKey,
    ConsoleAccess, ConsoleMember, ConsoleSessionTokens, CreateApiKeyRequest,
    CreateEvaluationSetRequest, DEFAULT_IMPACT_DAYS, DEFAULT_ROLL_OVERLAP_SECONDS, DERIVATION_WAIT,
    DeleteMatchingOutcome, DeleteMatchingRequest, DeleteMemoryRequest, EditMemoryRequest,
    EmbeddingChangeReport, EmbeddingChoice, EntityCount, EntityPage, FEEDBACK_RATINGS,
    FeedbackRequest, FindSubjectsRequest, INVITATION_LIFETIME_DAYS, InvitationOffer,
    ListEntitiesRequest, ListMemoriesRequest, ListMessagesRequest, ListRecallEventsRequest,
    ListRunsRequest, MAX_AUDIT_PAGE, MAX_BULK_DELETE, MAX_CASES_PER_SET, MAX_CONTEXT_TOKENS,
    MAX_EDITS_PER_REQUEST, MAX_ENTITY_PAGE, MAX_EXPORT_EVENTS, MAX_FLAG_REASON_CHARS,
    MAX_KEY_LABEL_CHARS, MAX_RETENTION_DAYS, MAX_ROLL_OVERLAP_SECONDS, MAX_SCHEDULE_SECS,
    MAX_STATE_VALUE_BYTES, MAX_SUBJECT_MATCHES, MIN_SCHEDULE_SECS, MemberListing, MemoryImpact,
    MemoryImpactRequest, MintEndUserTokenRequest, MintedEndUserToken, NewPriceRequest, PastErasure,
    PriceBookEntry, PriceBookUnit, ProjectMonthCost, ProjectSettingsChange, ProjectSettingsReport,
    PutRetrievalProfileRequest, PutSessionStateRequest, QueriedMemories, QueryMemoriesRequest,
    RecallBudgetCut, RecallInspection, RememberMessagesRequest, RememberMethod, RememberedMessage,
    RememberedMessages, RetentionPreview, RollApiKeyRequest, RolledApiKey, RunTimeline,
    SearchAnswer, SearchMemoriesRequest, SessionStateAddress, SetMemoryFlagsRequest,
    SpendLimitsReport, StartEvaluationRunRequest, SubjectMatch, SubjectSummary, UploadFileRequest,
    UsageReport, UsageReportRequest, VerifyMemoryRequest, audit_filter_errors, source_json,
    store_retention_days_of, stores_with_retention_days,
};
