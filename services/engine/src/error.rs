//! Engine failures in the terms a caller acts on: missing, conflicting, invalid, or a
//! dependency (database, index, embedder) that is down.

use engram_core::InvalidInput;
use engram_embed::EmbedError;
use engram_index::IndexError;
use engram_storage::StorageError;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// Nothing of this kind with this id for the caller (in its project, and for an end-user
    /// token of its end-user); the kind names the problem code, never an id.
    #[error("no {0} with this id")]
    NotFound(engram_core::NotFoundKind),
    #[error("version conflict: the memory is at version {current_version}")]
    VersionConflict { current_version: i64 },
    #[error("the idempotency key was already used with a different request")]
    IdempotencyKeyReused,
    /// A retry whose first answer named a memory deleted since (its content went with it).
    #[error("the first answer for this idempotency key named a memory deleted since")]
    IdempotentResultErased,
    #[error(transparent)]
    Invalid(#[from] InvalidInput),
    #[error("database unavailable: {0}")]
    StorageUnavailable(String),
    /// Another process held the database's write lock longer than the caller would wait;
    /// nothing was changed (the CLI's admin commands beside a serving process).
    #[error("{0}; nothing was changed")]
    DatabaseLocked(String),
    #[error("vector index unavailable: {0}")]
    IndexUnavailable(String),
    #[error("embedding model unavailable: {0}")]
    EmbedderUnavailable(String),
    /// The project's embedding setting rules this out (client vectors cannot be embedded by
    /// Engram; a model this deployment does not offer); the message says why.
    #[error("{0}")]
    EmbeddingUnavailable(String),
    /// The memory is immutable or under legal hold; the message says which.
    #[error("{0}")]
    Locked(String),
    /// Subject erasure refused: these memories of the subject are under legal hold.
    #[error("{} memories of this subject are under legal hold", memory_ids.len())]
    SubjectHeld {
        memory_ids: Vec<engram_core::MemoryId>,
    },
    /// The configured LLM failed or answered something unusable.
    #[error("{0}")]
    LlmUnavailable(String),
    /// The permission table does not let the caller do this; the message names what is
    /// missing and what the caller holds.
    #[error("{0}")]
    Forbidden(String),
    /// The request conflicts with the project's current state (traffic shares that would
    /// pass 100 %); the message says how.
    #[error("{0}")]
    Conflict(String),
    /// A write embedded in the project's old space arrived after it switched models: nothing
    /// was stored; sent again, it is embedded in the new space.
    #[error(
        "the project's embedding model changed while this was being written: nothing was stored; send it again"
    )]
    EmbeddingSpaceChanged,
    /// The thing is still being worked on (a file being ingested); the message says what to
    /// wait for.
    #[error("{0}")]
    InProgress(String),
    /// A key would hold (or a revoked key holds) a scope the caller cannot exercise itself.
    #[error("the caller lacks the `{missing}` scope, so it cannot give it to a key")]
    ScopeNotGrantable {
        missing: engram_core::ApiScope,
        /// What the caller holds (its key's scopes, its console role), for the message.
        caller: engram_core::permissions::PrincipalKind,
    },
    /// The project's memory limits refuse the write: a subject would pass its limit and the
    /// policy refuses, or no room can be made; the message says which subject and why.
    #[error("{0}")]
    MemoryLimitReached(String),
    /// A spend limit of the project (budget, quota, rate quota) refuses the request.
    #[error("the project's {} is reached", reached.limit)]
    LimitReached {
        reached: Box<engram_core::usage::LimitReached>,
        /// The budget's currency, for `monthly_budget`.
        currency: Option<String>,
    },
    /// No valid credential or session: the caller must sign in (again); the message says so.
    #[error("{0}")]
    Unauthenticated(String),
    /// A sign-in with an unknown e-mail or a wrong password (deliberately not saying which).
    #[error("wrong e-mail or password")]
    WrongCredentials,
    /// Too many failed sign-ins for this e-mail: refused for a while, right password or not.
    #[error("too many failed sign-ins; try again in {retry_after_seconds} s")]
    TooManyAttempts { retry_after_seconds: u64 },
    /// Too much work of this kind is already running or queued (password hashing during a
    /// storm of sign-ins): refused at once, try again shortly.
    #[error("the server is busy; try again in {retry_after_seconds} s")]
    Busy { retry_after_seconds: u64 },
    #[error("internal error: {0}")]
    Internal(String),
}

impl EngineError {
    /// The stable code of this failure, as every door reports it (API problems' `code`, the
    /// console's errors, MCP tool errors): a table here, so no adapter remaps a failure.
    pub fn code(&self) -> &'static str {
        match self {
            EngineError::NotFound(kind) => kind.code(),
            EngineError::VersionConflict { .. } => "version-conflict",
            EngineError::IdempotencyKeyReused => "idempotency-key-reused",
            EngineError::IdempotentResultErased => "idempotent-result-erased",
            EngineError::Invalid(_) => "validation-failed",
            EngineError::StorageUnavailable(_) => "database-unavailable",
            EngineError::DatabaseLocked(_) => "database-locked",
            EngineError::IndexUnavailable(_) => "index-unavailable",
            EngineError::EmbedderUnavailable(_) => "embedder-unavailable",
            EngineError::EmbeddingUnavailable(_) => "embedding-unavailable",
            EngineError::Locked(_) => "memory-locked",
            EngineError::SubjectHeld { .. } => "legal-hold",
            EngineError::LlmUnavailable(_) => "llm-unavailable",
            EngineError::Forbidden(_) => "forbidden",
            EngineError::Conflict(_) => "conflict",
            EngineError::EmbeddingSpaceChanged => "embedding-space-changed",
            EngineError::MemoryLimitReached(_) => "memory-limit-reached",
            EngineError::InProgress(_) => "in-progress",
            EngineError::ScopeNotGrantable { .. } => "scope-not-grantable",
            EngineError::LimitReached { reached, .. } => match reached.limit.as_str() {
                "monthly_budget" => "budget-exceeded",
                "requests_per_minute" => "rate-limited",
                _ => "quota-exceeded",
            },
            EngineError::Unauthenticated(_) => "unauthenticated",
            EngineError::WrongCredentials => "wrong-credentials",
            EngineError::TooManyAttempts { .. } => "too-many-attempts",
            EngineError::Busy { .. } => "server-busy",
            EngineError::Internal(_) => "internal",
        }
    }
}

impl From<engram_core::permissions::PermissionDenied> for EngineError {
    fn from(denied: engram_core::permissions::PermissionDenied) -> Self {
        EngineError::Forbidden(denied.message)
    }
}

/// Another agent is a 403 naming it; no agent from a credential of several is a 422 on the
/// field.
impl From<engram_core::principal::OutsideAgents> for EngineError {
    fn from(outside: engram_core::principal::OutsideAgents) -> Self {
        match &outside {
            engram_core::principal::OutsideAgents::Other { .. } => {
                EngineError::Forbidden(outside.to_string())
            }
            engram_core::principal::OutsideAgents::Unnamed { field, agents } => {
                EngineError::Invalid(engram_core::InvalidInput(vec![
                    engram_core::FieldError::new(
                        field.clone(),
                        format!(
                            "required: this credential is bound to agents {agents}; name one of them"
                        ),
                    ),
                ]))
            }
        }
    }
}

impl From<engram_core::principal::OutsideEndUser> for EngineError {
    fn from(outside: engram_core::principal::OutsideEndUser) -> Self {
        EngineError::Forbidden(outside.to_string())
    }
}

impl From<StorageError> for EngineError {
    fn from(error: StorageError) -> Self {
        match error {
            StorageError::NotFound(kind) => EngineError::NotFound(kind),
            StorageError::VersionConflict { current_version } => {
                EngineError::VersionConflict { current_version }
            }
            StorageError::IdempotencyKeyReused => EngineError::IdempotencyKeyReused,
            StorageError::Unavailable(message) | StorageError::Busy(message) => {
                EngineError::StorageUnavailable(message)
            }
            StorageError::Refused(message) => EngineError::Locked(message),
            StorageError::AnotherAgents(message) => EngineError::Forbidden(message),
            error @ StorageError::ProjectNotEmpty { .. } => {
                EngineError::EmbeddingUnavailable(error.to_string())
            }
            StorageError::EmbeddingSpaceChanged => EngineError::EmbeddingSpaceChanged,
            error @ StorageError::EmbeddingChangeUnderWay(_) => {
                EngineError::Conflict(error.to_string())
            }
            other => EngineError::Internal(other.to_string()),
        }
    }
}

impl From<IndexError> for EngineError {
    fn from(error: IndexError) -> Self {
        match error {
            IndexError::Unavailable(message) => EngineError::IndexUnavailable(message),
            other => EngineError::Internal(other.to_string()),
        }
    }
}

impl From<EmbedError> for EngineError {
    fn from(error: EmbedError) -> Self {
        match error {
            EmbedError::Unavailable(message) | EmbedError::ModelMissing(message) => {
                EngineError::EmbedderUnavailable(message)
            }
            other => EngineError::Internal(other.to_string()),
        }
    }
}
