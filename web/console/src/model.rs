//! The data the console shows and the errors it reports, shared by server and browser.
//! Plain serde types with no workspace dependencies, so they compile for wasm as well.

use leptos::server_fn::{
    codec::JsonEncoding,
    error::{FromServerFnError, ServerFnErrorErr},
};
use serde::{Deserialize, Serialize};

/// A correction of a memory as the memory page sends it: the text, and (when given) its
/// metadata as a JSON object and its categories, comma-separated; a reason always.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryCorrection {
    pub content: String,
    pub metadata_json: Option<String>,
    pub categories: Option<String>,
    pub reason: String,
    /// The version the page showed: a change made since is a conflict, never overwritten.
    #[serde(default)]
    pub expected_version: Option<i64>,
}

/// The signed-in console account, as shown in the page header.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsoleAccount {
    pub email: String,
    pub organization_name: String,
    /// `owner | admin | compliance | analyst | developer`
    pub role: String,
    /// The console functions the role may use (`list_memories`, `audit_log`, …), from the
    /// permission table: the navigation offers only the pages among them.
    #[serde(default)]
    pub functions: Vec<String>,
    /// The language the account chose for the console (`en`, `zh`); none: the browser's.
    #[serde(default)]
    pub language: Option<String>,
}

/// A project the signed-in account may inspect.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectSummary {
    pub id: String,
    pub name: String,
}

/// What the memories table asks the backend for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryListQuery {
    pub project_id: String,
    /// Exact `user_id` filter.
    pub user_id: Option<String>,
    /// One of `semantic | episodic | procedural | preference`; `None` means every kind.
    pub kind: Option<String>,
    /// Case-insensitive substring matched against the content *or* the `user_id`.
    pub text: Option<String>,
    /// Upper bound on the rows returned (the console asks for [`MEMORY_PAGE_LIMIT`]).
    pub limit: u32,
    pub agent_id: Option<String>,
    pub session_id: Option<String>,
    /// `active` (default) or `superseded`.
    pub state: Option<String>,
    /// `user_stated | tool_result | model_inferred | manual | file`
    pub source: Option<String>,
    pub category: Option<String>,
    /// `YYYY-MM-DD`, inclusive.
    pub created_from: Option<String>,
    /// `YYYY-MM-DD`, inclusive.
    pub created_to: Option<String>,
    /// When what a memory describes happened (`occurred_at`): `YYYY-MM-DD`, inclusive.
    pub occurred_from: Option<String>,
    /// `YYYY-MM-DD`, inclusive.
    pub occurred_to: Option<String>,
    /// `key=value`: a top-level metadata key equals the value (a number or true/false
    /// compares as one).
    pub metadata: Option<String>,
    /// 0–1: at least this confidence.
    pub min_confidence: Option<String>,
    /// Search by meaning instead of listing: the nearest memories to this text.
    pub meaning: Option<String>,
    /// 0–1: a search by meaning leaves out what scores below it (the relevance cut-off).
    #[serde(default)]
    pub min_score: Option<String>,
    /// The page after this cursor (a [`MemoryPage::next_cursor`]); `None`: the first page.
    pub after: Option<String>,
}

impl MemoryListQuery {
    /// Only a project: every active memory, newest first.
    pub fn for_project(project_id: impl Into<String>, limit: u32) -> Self {
        Self {
            project_id: project_id.into(),
            user_id: None,
            kind: None,
            text: None,
            limit,
            agent_id: None,
            session_id: None,
            state: None,
            source: None,
            category: None,
            created_from: None,
            created_to: None,
            occurred_from: None,
            occurred_to: None,
            metadata: None,
            min_confidence: None,
            meaning: None,
            min_score: None,
            after: None,
        }
    }
}

/// One row of the memories table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemoryRow {
    pub id: String,
    pub user_id: Option<String>,
    pub agent_id: Option<String>,
    pub session_id: Option<String>,
    pub kind: String,
    pub key: Option<String>,
    pub content: String,
    pub state: String,
    pub version: i64,
    /// RFC 3339, UTC.
    pub updated_at: String,
    pub source: String,
    pub categories: Vec<String>,
    pub immutable: bool,
    pub legal_hold: bool,
    /// `private` (its agent only) or `shared` (every agent of the project).
    #[serde(default)]
    pub visibility: String,
    /// For a shared memory, the one team of agents it is shared with; none: every agent.
    #[serde(default)]
    pub shared_with: Option<String>,
    /// Who verified it (`console_account:<id>`, `api_key:<id>`); none: unverified.
    #[serde(default)]
    pub verified_by: Option<String>,
    /// Similarity to the query, for a search by meaning.
    pub score: Option<f32>,
}

/// The rows that matched a [`MemoryListQuery`], newest first.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryPage {
    pub memories: Vec<MemoryRow>,
    pub total_shown: usize,
    /// How many memories the filters match in all (every page); `None` for a search by
    /// meaning, which shows the nearest ones only.
    #[serde(default)]
    pub total_matching: Option<u64>,
    /// Where the next page starts, when more memories match (never for a search by
    /// meaning, which shows the nearest ones only).
    pub next_cursor: Option<String>,
}

/// How many rows one page of the memories table shows; "Next page" shows the following ones.
pub const MEMORY_PAGE_LIMIT: u32 = 50;

/// The memory kinds the kind filter offers.
pub const MEMORY_KINDS: [&str; 5] = [
    "semantic",
    "episodic",
    "procedural",
    "preference",
    "trajectory",
];

/// An error a console call can end with; it crosses the network to the browser as JSON.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum ConsoleError {
    /// No session, or the session expired.
    #[error("you are not signed in")]
    Unauthorized,
    /// Login with an unknown e-mail or a wrong password (deliberately not saying which).
    #[error("wrong e-mail or password")]
    InvalidCredentials,
    /// Too many failed sign-ins from this browser or address (or too many requests from the
    /// address, or a busy server): wait this long.
    #[error("too many sign-in attempts; try again in {retry_after_seconds} s")]
    TooManyAttempts { retry_after_seconds: u64 },
    /// The project (or other object) does not exist for this account.
    #[error("not found")]
    NotFound,
    /// The account's role does not allow this (analysts and developers never see memory
    /// content).
    #[error("your role ({role}) cannot see this")]
    Forbidden { role: String },
    /// The account's role lacks a permission the request would hand on (a key with a scope
    /// the role cannot exercise itself); names both.
    #[error(
        "your role ({role}) lacks the `{permission}` permission, so it cannot give it to a key"
    )]
    MissingPermission { role: String, permission: String },
    /// The permission table refuses this to the account's role for this object (a
    /// developer rolling a key someone else made); says which permission is missing.
    #[error("{0}")]
    Denied(String),
    /// The input cannot be used (a malformed e-mail, a too-short password); says what to fix.
    #[error("{0}")]
    InvalidInput(String),
    /// A rule forbids the change (e.g. removing the last owner); says which, and carries
    /// the engine's code for it (`conflict`, `legal-hold`, `memory-limit-reached`, …).
    #[error("{message}")]
    Refused { code: String, message: String },
    /// Anything else; the text is shown to the user, so it must not carry secrets.
    #[error("something went wrong: {0}")]
    Internal(String),
}

impl ConsoleError {
    /// A refusal with the engine's `code` for it.
    pub fn refused(code: &str, message: String) -> Self {
        ConsoleError::Refused {
            code: code.to_string(),
            message,
        }
    }

    /// The engine's code for this failure (its error table's, as the HTTP API's problems
    /// carry it): what the console's translation of the failure is chosen by.
    pub fn code(&self) -> &str {
        match self {
            ConsoleError::Unauthorized => "unauthenticated",
            ConsoleError::InvalidCredentials => "wrong-credentials",
            ConsoleError::TooManyAttempts { .. } => "too-many-attempts",
            ConsoleError::NotFound => "not-found",
            ConsoleError::Forbidden { .. } | ConsoleError::Denied(_) => "forbidden",
            ConsoleError::MissingPermission { .. } => "scope-not-grantable",
            ConsoleError::InvalidInput(_) => "validation-failed",
            ConsoleError::Refused { code, .. } => code,
            ConsoleError::Internal(_) => "internal",
        }
    }

    /// The failure as the page's language says it. In Chinese the sentence is chosen by
    /// [`Self::code`]; what the engine adds in words (which field, which memory) follows it
    /// as the engine wrote it.
    pub fn localized(&self) -> String {
        use crate::i18n::{Language, tr, trf};
        if Language::current() == Language::English {
            return self.to_string();
        }
        match self {
            ConsoleError::Unauthorized => tr("you are not signed in").to_string(),
            ConsoleError::InvalidCredentials => tr("wrong e-mail or password").to_string(),
            ConsoleError::TooManyAttempts {
                retry_after_seconds,
            } => trf(
                "too many sign-in attempts; try again in {} s",
                &[retry_after_seconds],
            ),
            ConsoleError::NotFound => tr("not found").to_string(),
            ConsoleError::Forbidden { role } => {
                trf("your role ({}) cannot see this", &[&role_name(role)])
            }
            ConsoleError::MissingPermission { role, permission } => trf(
                "your role ({}) lacks the `{}` permission, so it cannot give it to a key",
                &[&role_name(role), permission],
            ),
            ConsoleError::Denied(detail)
            | ConsoleError::InvalidInput(detail)
            | ConsoleError::Refused {
                message: detail, ..
            }
            | ConsoleError::Internal(detail) => {
                format!("{}{}{detail}", failure_headline(self.code()), tr(": "))
            }
        }
    }
}

/// What a failure with the engine's `code` is, in a few words of the page's language.
fn failure_headline(code: &str) -> &'static str {
    use crate::i18n::tr;
    match code {
        "validation-failed" => tr("The input cannot be used"),
        "forbidden" => tr("Your role may not do this"),
        "version-conflict" => tr("The memory changed meanwhile"),
        "memory-locked" => tr("The memory is immutable or under legal hold"),
        "legal-hold" => tr("Memories of this end-user are under legal hold"),
        "embedding-unavailable" => tr("The embedding model cannot embed this now"),
        "embedding-space-changed" => tr("The project's embedding model changed meanwhile"),
        "memory-limit-reached" => tr("A memory limit is reached"),
        "in-progress" => tr("This is already under way"),
        "scope-not-grantable" => tr("A key cannot get a power its maker lacks"),
        "budget-exceeded" => tr("The monthly budget is spent"),
        "rate-limited" => tr("Too many requests"),
        "quota-exceeded" => tr("A quota is reached"),
        "conflict" => tr("Refused"),
        _ => tr("Something went wrong"),
    }
}

/// A role's name in the page's language.
pub fn role_name(role: &str) -> String {
    use crate::i18n::{term, tr};
    match role {
        "owner" | "admin" | "compliance" | "analyst" | "developer" => term(role),
        _ => tr("unknown role").to_string(),
    }
}

impl FromServerFnError for ConsoleError {
    type Encoder = JsonEncoding;

    // Transport failures (network, (de)serialisation) surface as `Internal` so the page can
    // show them like any other failure.
    fn from_server_fn_error(value: ServerFnErrorErr) -> Self {
        ConsoleError::Internal(value.to_string())
    }
}

/// The account and the projects it can see: everything the page header needs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionInfo {
    pub account: ConsoleAccount,
    pub projects: Vec<ProjectSummary>,
}

/// The memories of one project, with the project the server settled on (the first one
/// when the browser did not choose).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryListing {
    pub project_id: Option<String>,
    pub page: MemoryPage,
}

/// What the audit page asks the backend for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditQuery {
    pub project_id: String,
    /// One of [`AUDIT_ACTIONS`]; `None` means every action.
    pub action: Option<String>,
    pub limit: u32,
    /// Recompute the organization's whole chain from its first event (owners, admins and
    /// compliance; at most once a minute), instead of continuing from the last checkpoint.
    #[serde(default)]
    pub full: bool,
    /// Who acted: an actor id, a member's e-mail address or a key's label.
    #[serde(default)]
    pub actor: Option<String>,
    /// A target id (a memory, a key, an end-user digest, …).
    #[serde(default)]
    pub target: Option<String>,
    /// First day shown, `YYYY-MM-DD` (UTC).
    #[serde(default)]
    pub since: Option<String>,
    /// Last day shown, `YYYY-MM-DD` (UTC), included.
    #[serde(default)]
    pub until: Option<String>,
    /// The page's cursor: events older than this event id.
    #[serde(default)]
    pub before: Option<i64>,
}

/// What the audit page filters by, as its URL and the CSV link carry it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditFilters {
    pub project_id: Option<String>,
    pub action: Option<String>,
    pub actor: Option<String>,
    pub target: Option<String>,
    pub since: Option<String>,
    pub until: Option<String>,
    pub before: Option<i64>,
    #[serde(default)]
    pub full: bool,
}

impl AuditFilters {
    /// The filters as a query string (without the cursor and the full recompute), for the
    /// page's URL and the CSV export.
    pub fn query_string(&self, project_id: &str) -> String {
        let mut pairs = vec![("project", project_id.to_string())];
        for (name, value) in [
            ("action", &self.action),
            ("actor", &self.actor),
            ("target", &self.target),
            ("since", &self.since),
            ("until", &self.until),
        ] {
            if let Some(value) = value.as_ref().filter(|value| !value.trim().is_empty()) {
                pairs.push((name, value.trim().to_string()));
            }
        }
        pairs
            .into_iter()
            .map(|(name, value)| format!("{name}={}", percent_encode(&value)))
            .collect::<Vec<_>>()
            .join("&")
    }
}

/// `text` with everything but unreserved characters percent-encoded (RFC 3986).
pub fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (byte as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

/// One row of the audit table (never memory content).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRow {
    pub id: i64,
    pub sequence: i64,
    /// RFC 3339, UTC.
    pub at: String,
    pub actor_type: String,
    pub actor_id: String,
    pub action: String,
    pub target_ids: Vec<String>,
    pub outcome: String,
    pub ip: Option<String>,
    pub user_agent: Option<String>,
    pub request_id: Option<String>,
    /// Who the actor is, beside the id: a member's e-mail address, a key's label.
    #[serde(default)]
    pub actor_name: Option<String>,
    /// Why, as the person who acted wrote it (corrections, deletions, holds, erasures).
    #[serde(default)]
    pub reason: Option<String>,
    /// Target id → name, for the targets that have one (keys, members, projects).
    #[serde(default)]
    pub target_names: std::collections::BTreeMap<String, String>,
}

/// The recomputed hash chain of the organization.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditChainStatus {
    pub verified: bool,
    pub events_checked: u64,
    /// Where it breaks, when it does.
    pub broken_at_event: Option<i64>,
    pub broken_reason: Option<String>,
    /// The organization's sequence this run started recomputing from (1: from the start).
    #[serde(default)]
    pub recomputed_from_sequence: Option<i64>,
}

/// The audit page's data: newest events first, and the chain's verification.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditListing {
    pub project_id: Option<String>,
    pub events: Vec<AuditRow>,
    pub chain: AuditChainStatus,
    /// The cursor of the next (older) page; `None` on the last page.
    #[serde(default)]
    pub next_before: Option<i64>,
}

/// How many audit events a page of the audit log shows.
pub const AUDIT_PAGE_LIMIT: u32 = 100;

/// The actions the audit filter offers: every action the engine records
/// (`engram_core::audit::AuditAction::ALL`, which a test compares with this list).
pub const AUDIT_ACTIONS: [&str; 33] = [
    "memory.created",
    "memory.updated",
    "memory.deleted",
    "memory.verified",
    "memory.content_viewed",
    "api_key.created",
    "api_key.revoked",
    "api_key.rolled",
    "console.login",
    "console.login_failed",
    "end_user_token.signing_key_rotated",
    "console.member_invited",
    "console.invitation_accepted",
    "console.invitation_revoked",
    "console.member_role_changed",
    "console.member_removed",
    "project.settings_changed",
    "project.embedding_change_started",
    "project.embedding_switched",
    "project.embedding_change_abandoned",
    "memory.flags_changed",
    "subject.erasure_requested",
    "subject.erased",
    "subject.exported",
    "memory.expired",
    "memory.evicted",
    "project.limits_changed",
    "project.budget_threshold_reached",
    "project.retention_swept",
    "audit.chain_rekeyed",
    "project.created",
    "organization.price_added",
    "organization.price_withdrawn",
];

/// What a login (or a refresh) hands the browser, each in its own HttpOnly cookie: a
/// short-lived access token, the refresh token that renews it and, after a sign-in, a
/// device token that makes the browser a known device of the account.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionTokens {
    pub access: String,
    pub refresh: String,
    #[serde(default)]
    pub device: Option<String>,
}

impl std::fmt::Debug for SessionTokens {
    // Credentials: never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionTokens { .. }")
    }
}

/// One row of the API keys table (never a secret).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRow {
    pub id: String,
    pub label: String,
    /// `egk_<environment>_<public id>_`
    pub prefix: String,
    pub scopes: Vec<String>,
    /// `active | expired | revoked`
    pub state: String,
    pub created_at: String,
    pub expires_at: Option<String>,
    pub last_used_at: Option<String>,
    /// Who made it: `you`, `console_account:<id>`, `api_key:<id>`, `system:operator`; none
    /// for keys made before makers were recorded.
    #[serde(default)]
    pub created_by: Option<String>,
    /// Whether the viewer may roll or revoke it (a console developer only their own keys).
    #[serde(default)]
    pub manageable: bool,
    /// The agents the key is bound to; empty: every agent.
    #[serde(default)]
    pub agents: Vec<String>,
}

/// The project's API keys, newest first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyListing {
    pub project_id: Option<String>,
    pub keys: Vec<KeyRow>,
}

/// A key just created or rolled: the only time its secret is shown.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewKeySecret {
    pub key: KeyRow,
    pub secret: String,
}

/// What the create form asks for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewKeyRequest {
    pub project_id: String,
    pub label: String,
    pub scopes: Vec<String>,
    /// `live` (default) or `test`.
    #[serde(default)]
    pub environment: Option<String>,
    /// The last day the key works, `YYYY-MM-DD` (UTC); none: it does not expire.
    #[serde(default)]
    pub expires_on: Option<String>,
    /// The agents the key is bound to; none: every agent.
    #[serde(default)]
    pub agents: Option<Vec<String>>,
}

/// The scopes the create form offers.
pub const KEY_SCOPES: [&str; 5] = [
    "memories:read",
    "memories:write",
    "memories:delete",
    "memories:verify",
    "admin",
];

/// Where a console request came from, for the audit log: the client's address, its user
/// agent and the request id.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsoleRequestOrigin {
    pub ip: Option<String>,
    pub user_agent: Option<String>,
    pub request_id: Option<String>,
}

/// Who is calling the backend: the session token of the `engram_console` cookie and where
/// the request came from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConsoleCaller {
    pub session_token: String,
    pub origin: ConsoleRequestOrigin,
}

impl ConsoleCaller {
    pub fn new(session_token: impl Into<String>, origin: ConsoleRequestOrigin) -> Self {
        Self {
            session_token: session_token.into(),
            origin,
        }
    }
}

/// The roles a console member can have, most powerful first.
pub const CONSOLE_ROLES: [&str; 5] = ["owner", "admin", "compliance", "analyst", "developer"];

/// Shortest password an invitee may choose (OWASP: at least 8; we ask for more since
/// the console has no second factor yet).
pub const MIN_PASSWORD_CHARS: usize = 12;

/// How long an invitation link works.
pub const INVITATION_LIFETIME_DAYS: i64 = 7;

/// One row of the members table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberRow {
    pub id: String,
    pub email: String,
    pub role: String,
    /// RFC 3339, UTC.
    pub joined_at: String,
    /// The signed-in account itself (its own role cannot be changed from here).
    pub is_you: bool,
}

/// An invitation not yet accepted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InvitationRow {
    pub id: String,
    pub email: String,
    pub role: String,
    pub expires_at: String,
}

/// The members page's data.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberListing {
    pub members: Vec<MemberRow>,
    pub invitations: Vec<InvitationRow>,
    /// The roles the signed-in account may hand out (admins cannot make owners).
    pub assignable_roles: Vec<String>,
}

/// An invitation just created: its link is shown once, to be sent to the invitee.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewInvitation {
    pub invitation: InvitationRow,
    /// `https://<console host>/console/invite?token=…` (the path alone when the host is unknown).
    pub link_path: String,
}

/// What the invitation page shows before the invitee picks a password.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InvitationPreview {
    pub email: String,
    pub organization_name: String,
    pub role: String,
}

/// The memory sources the filter offers.
pub const MEMORY_SOURCES: [&str; 5] = [
    "user_stated",
    "tool_result",
    "model_inferred",
    "manual",
    "file",
];

/// One piece of a word diff between two versions of a memory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiffPart {
    /// `same | added | removed`
    pub change: String,
    pub text: String,
}

/// One version in a memory's history, with what changed since the one before.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryRow {
    pub version: i64,
    /// `created | updated | superseded`
    pub event: String,
    pub content: Option<String>,
    pub actor: String,
    pub reason: Option<String>,
    pub at: String,
    /// Word diff against the previous version's content (empty when it did not change).
    pub diff: Vec<DiffPart>,
}

/// A memory's page: the memory, its provenance and its history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemoryDetail {
    pub project_id: String,
    pub memory: MemoryRow,
    pub confidence: f64,
    pub created_at: String,
    /// When what it describes happened (`occurred_at`).
    #[serde(default)]
    pub occurred_at: String,
    /// Who created it (an API key, an end-user, a console account), from its history.
    pub created_by: Option<String>,
    pub metadata_json: String,
    pub expires_at: Option<String>,
    pub history: Vec<HistoryRow>,
    /// What used it lately: shown before a correction or deletion is confirmed.
    #[serde(default)]
    pub impact: MemoryImpactSummary,
}

/// How often a memory was used in the last [`IMPACT_DAYS`] days, and its latest uses.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryImpactSummary {
    pub recalls: u64,
    pub contexts: u64,
    pub runs: u64,
    /// Newest first, at most [`IMPACT_USES_SHOWN`].
    pub uses: Vec<ImpactUseRow>,
}

/// Days the memory page counts uses over.
pub const IMPACT_DAYS: i64 = 30;
/// Latest uses listed on the memory page.
pub const IMPACT_USES_SHOWN: u64 = 20;

/// One use of a memory: `returned` by a search, `packed` into a context, `injected` into a run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImpactUseRow {
    pub kind: String,
    pub version: i64,
    pub at: String,
    pub recall_id: Option<String>,
    pub run_id: Option<String>,
    pub user_id: Option<String>,
}

/// One agent run in a list.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRow {
    pub run_id: String,
    pub task: String,
    pub user_id: Option<String>,
    pub agent_id: Option<String>,
    pub session_id: Option<String>,
    /// `open`, `ended` or `expired`.
    pub status: String,
    pub outcome: Option<String>,
    pub created_at: String,
    pub step_count: u32,
    pub trajectory_memory_id: Option<String>,
}

/// A page of a project's runs, newest first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunListing {
    pub project_id: Option<String>,
    pub runs: Vec<RunRow>,
    pub next_cursor: Option<String>,
}

/// A memory a step names, as it was then and as it is now.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepMemory {
    pub memory_id: String,
    /// The version the step used.
    pub version: i64,
    /// Its text at that version, where the history keeps it.
    pub content_then: Option<String>,
    pub now_version: Option<i64>,
    pub now_state: Option<String>,
    pub deleted: bool,
}

/// One step of a run's timeline.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunStepRow {
    pub seq: u32,
    /// `model_call`, `tool_call`, `note`, `memory_write`, `search`, `context`, `feedback`.
    pub step_type: String,
    pub at: String,
    /// One line on what happened (model and tokens, tool, rating, …).
    pub summary: String,
    /// Texts the step kept (prompt, completion, arguments, result, note): (label, text).
    pub texts: Vec<(String, String)>,
    pub memories: Vec<StepMemory>,
    /// The recall (search or context) the step names, for the drill-down.
    pub recall_id: Option<String>,
}

/// A run with its timeline.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunTimelineDetail {
    pub run: RunRow,
    pub steps: Vec<RunStepRow>,
}

/// One recorded recall in a list.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RecallRow {
    pub recall_id: String,
    pub at: String,
    pub user_id: Option<String>,
    pub session_id: Option<String>,
    /// `search` or `context`.
    pub purpose: String,
    pub profile: String,
    pub result_count: u32,
    pub top_score: Option<f64>,
    pub run_id: Option<String>,
    /// `None` when the project keeps no query text.
    pub query: Option<String>,
}

/// What the Recalls list filters on.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecallListQuery {
    pub project_id: String,
    pub user_id: Option<String>,
    pub session_id: Option<String>,
    pub memory_id: Option<String>,
    pub run_id: Option<String>,
    pub before: Option<String>,
}

/// A page of a project's recalls, newest first.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RecallListing {
    pub project_id: Option<String>,
    pub recalls: Vec<RecallRow>,
    pub next_cursor: Option<String>,
}

/// What a bulk delete by filter would remove.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BulkDeletePreview {
    pub matching: u64,
    /// Of those, immutable or held ones, which are kept.
    pub locked: u64,
}

/// What a bulk delete removed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BulkDeleteOutcome {
    pub deleted: u64,
    pub skipped_locked: u64,
}

/// Most memories one bulk delete may remove.
pub const BULK_DELETE_LIMIT: u64 = 10_000;

/// One end-user of a project, as the subjects page shows them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubjectSummary {
    pub project_id: String,
    pub user_id: String,
    pub memories: u64,
    pub held_memory_ids: Vec<String>,
    /// Every store of the registry of subject data with how many records it holds of them.
    #[serde(default)]
    pub stores: Vec<StoreCount>,
    /// Erasures of this end-user already done in the project, newest first.
    #[serde(default)]
    pub erasures: Vec<PastErasureRow>,
}

/// A finished erasure on the subjects page: when, and its receipt (JSON as recorded).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PastErasureRow {
    /// "2026-12-04 15:20 UTC".
    pub erased_at: String,
    pub receipt: String,
}

/// An end-user a lookup found, with how many of their memories matched it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubjectMatchRow {
    pub user_id: String,
    pub memories: u64,
}

/// One store's line on the subjects page.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreCount {
    pub store: String,
    pub records: u64,
}

/// A subject erasure task and, once done, its receipt.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErasureStatus {
    pub project_id: String,
    pub task_id: String,
    /// Across every project of the organization (progress counts projects), not one.
    #[serde(default)]
    pub organization_wide: bool,
    /// `queued | running | succeeded | failed`
    pub status: String,
    pub done: i64,
    pub total: i64,
    pub verified: Option<bool>,
    pub removed_memories: Option<u64>,
    pub digest: Option<String>,
    /// The whole receipt, pretty-printed.
    pub receipt: Option<String>,
    pub error: Option<String>,
}

/// The memories page's filters, as the browser sends them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryFilters {
    pub project_id: Option<String>,
    pub text: Option<String>,
    pub kind: Option<String>,
    pub user_id: Option<String>,
    pub agent_id: Option<String>,
    pub session_id: Option<String>,
    pub state: Option<String>,
    pub source: Option<String>,
    pub category: Option<String>,
    pub created_from: Option<String>,
    pub created_to: Option<String>,
    pub occurred_from: Option<String>,
    pub occurred_to: Option<String>,
    pub metadata: Option<String>,
    pub min_confidence: Option<String>,
    pub meaning: Option<String>,
    /// 0–1: a search by meaning leaves out what scores below it.
    #[serde(default)]
    pub min_score: Option<String>,
}

/// The project's governance settings and what the next retention sweep would remove.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GovernanceSettings {
    pub project_id: String,
    /// `off | mask | reject`
    pub pii_redaction: String,
    /// (kind, days) for every kind; `None` keeps memories of that kind until deleted.
    pub retention_days: Vec<(String, Option<u32>)>,
    pub preview: RetentionPreview,
    /// The relevance floor as set: `model` (the embedding model's measured floors) or a
    /// number from 0 to 1.
    pub relevance_floor: String,
    /// The floor searches apply now, with three decimals.
    pub relevance_floor_in_effect: String,
    /// The floor for a question naming someone no memory mentions, with three decimals;
    /// `None` when there is none (a number set is the one floor).
    pub relevance_floor_for_unmentioned_names: Option<String>,
    /// The project's embedding model (whose measured floor `model` means).
    pub embedding_model: String,
    /// The move to another embedding model under way, if any.
    pub embedding_change: Option<EmbeddingMove>,
}

/// A project's move to another embedding model: searches use the current one until the task
/// has embedded every memory into the new space.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmbeddingMove {
    /// The model id its memories will carry.
    pub to_model: String,
    pub task_id: String,
    pub memories_embedded: i64,
    pub memories: i64,
}

/// The retention dry run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetentionPreview {
    pub would_delete: u64,
    pub by_kind: Vec<(String, u64)>,
    /// The first ids, oldest first.
    pub memory_ids: Vec<String>,
}

/// The PII modes the settings page offers.
pub const PII_MODES: [&str; 3] = ["off", "mask", "reject"];

/// One day of the usage page: a quantity per unit (in [`UsageOverview::units`] order) and
/// the day's cost.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageDay {
    /// `2026-11-30`
    pub day: String,
    pub quantities: Vec<i64>,
    pub cost_micros: i64,
}

/// A project's cost this month, for the organization's ranking.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectCost {
    pub project_id: String,
    pub name: String,
    pub cost_micros: i64,
}

/// The month so far against the project's budget.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MonthBudget {
    /// `2026-11`
    pub month: String,
    pub days_in_month: u32,
    /// Days elapsed, today included.
    pub day_of_month: u32,
    /// Cost to the end of each elapsed day (the burn-down's line).
    pub cumulative_micros: Vec<i64>,
    pub spent_micros: i64,
    pub forecast_micros: i64,
    pub budget_micros: Option<i64>,
    pub hard_cap: bool,
    /// (threshold %, when) of each alert raised this month.
    pub alerts: Vec<(u8, String)>,
    /// (unit, used this month, monthly quota if any).
    pub quotas: Vec<(String, i64, Option<u64>)>,
}

/// The budget settings form, as text so the page can show what was typed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpendLimitsForm {
    pub project_id: String,
    /// Decimal amount, e.g. `250.00`; empty: no budget.
    pub budget_amount: String,
    pub currency: String,
    /// Comma separated percentages, e.g. `50, 80, 100`.
    pub alert_thresholds: String,
    pub hard_cap: bool,
    pub requests_per_minute: String,
    pub quota_memories_written: String,
    pub quota_searches: String,
    pub quota_tokens_embedded: String,
    pub quota_file_bytes: String,
    pub recall_max_results: String,
    pub recall_max_tokens: String,
    /// Most live memories per end-user; empty: no limit.
    pub memory_per_end_user: String,
    /// Most live memories per agent; empty: no limit.
    pub memory_per_agent: String,
    /// `refuse`, `evict_oldest` or `evict_least_important`.
    pub memory_policy: String,
}

/// Everything the usage and cost page shows for one project.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageOverview {
    pub project_id: String,
    pub project_name: String,
    /// Currency of the costs shown (the budget's, else the price book's).
    pub currency: String,
    /// Unit names, in the order of [`UsageDay::quantities`].
    pub units: Vec<String>,
    /// Every day of the range, oldest first, days without usage included.
    pub days: Vec<UsageDay>,
    pub range_cost_micros: i64,
    pub month: MonthBudget,
    /// The organization's projects by cost this month, highest first.
    pub top_projects: Vec<ProjectCost>,
    pub limits: SpendLimitsForm,
    /// Owners and admins may change the limits; analysts see them.
    pub can_edit_limits: bool,
    /// LLM calls and tokens per model over the range.
    pub llm_by_model: Vec<LlmModelUsage>,
    /// The range's cost by key, end-user, agent and channel: the top ten of each.
    pub breakdowns: Vec<UsageBreakdownTop>,
    /// Some cost of the range is priced by Engram's default price book (a placeholder).
    pub default_prices: bool,
}

/// The ten who cost most over the usage page's range, for one breakdown.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageBreakdownTop {
    /// `key`, `end_user`, `agent` or `channel`.
    pub by: String,
    /// Highest cost first, at most ten.
    pub entries: Vec<BreakdownEntry>,
    /// How many more were left out of the ten.
    pub more: usize,
}

/// One key, end-user, agent or channel over the range.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BreakdownEntry {
    /// The key id, end-user id (`erased …` for an erased one), agent id or channel;
    /// `none named` where calls named none.
    pub label: String,
    pub cost_micros: i64,
    /// Searches over the range.
    pub searches: i64,
    /// Memories written over the range.
    pub memories_written: i64,
}

/// One model's LLM calls over the usage page's range.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LlmModelUsage {
    pub model: String,
    pub calls: i64,
    pub failed_calls: i64,
    pub tokens_in: i64,
    pub tokens_out: i64,
}

/// Day ranges the usage page offers.
pub const USAGE_RANGES: [u32; 3] = [7, 30, 90];

/// The recall-quality page of one project over a date range.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RecallDashboard {
    pub project_id: String,
    pub project_name: String,
    /// First and last day shown (`YYYY-MM-DD`, inclusive).
    pub from: String,
    pub to: String,
    /// `hour` or `day`: the width of each point of the time charts.
    pub bucket: String,
    pub totals: RecallTotals,
    /// Oldest first, empty buckets included.
    pub buckets: Vec<RecallBucket>,
    /// Searches whose best score fell in [0, 0.1), [0.1, 0.2), … [0.9, 1].
    pub top_score_bins: Vec<u64>,
    pub empty_queries: Vec<EmptyQueryRow>,
    pub profiles: Vec<ProfileRow>,
    pub evaluations: Vec<EvaluationHistory>,
    /// Whether query texts and memory contents are shown (roles that may read content).
    pub shows_content: bool,
    /// More events than are read at once: figures are over the newest.
    pub truncated: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RecallTotals {
    pub searches: u64,
    pub empty: u64,
    pub empty_rate: Option<f64>,
    pub p50_ms: Option<f64>,
    pub p95_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub mean_top_score: Option<f64>,
    pub ratings: u64,
    pub precision: Option<f64>,
    pub recalled_memories: u64,
    pub superseded_or_corrected: u64,
    pub corrected_share: Option<f64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RecallBucket {
    /// `2026-11-30` or `2026-11-30 14:00`.
    pub label: String,
    pub searches: u64,
    pub empty_rate: Option<f64>,
    pub p50_ms: Option<f64>,
    pub p95_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    /// Precision of the feedback on this bucket's recalls.
    pub precision: Option<f64>,
}

/// A query that found nothing, with its newest recall to drill into.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EmptyQueryRow {
    /// `None`: the project keeps no query text, or the viewer may not read it.
    pub query: Option<String>,
    pub count: u64,
    pub last_seen: String,
    pub recall_id: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProfileRow {
    pub profile: String,
    pub searches: u64,
    pub empty_rate: Option<f64>,
    pub p95_ms: Option<f64>,
    pub mean_top_score: Option<f64>,
    pub precision: Option<f64>,
}

/// An evaluation set and its runs, oldest first.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EvaluationHistory {
    pub set_id: String,
    pub name: String,
    pub k: u32,
    pub cases: u64,
    pub runs: Vec<EvaluationPoint>,
    /// The newest run that compared two profiles.
    pub comparison: Option<ProfileComparison>,
}

/// Two profiles over one evaluation set, figure by figure.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProfileComparison {
    pub run_at: String,
    pub first_profile: String,
    pub second_profile: String,
    pub rows: Vec<ComparisonRow>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ComparisonRow {
    pub figure: String,
    pub first: f64,
    pub second: f64,
    /// second − first, with its 95 % interval.
    pub difference: f64,
    pub low: f64,
    pub high: f64,
    /// The interval excludes 0.
    pub significant: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EvaluationPoint {
    pub run_id: String,
    /// `2026-11-30 14:05`.
    pub at: String,
    pub profile: String,
    pub trigger: String,
    pub hit_at_k: f64,
    pub mrr: f64,
    pub ndcg_at_k: f64,
    pub regression: bool,
    pub regression_reasons: Vec<String>,
}

/// One search as recorded, for the drill-down.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RecallEventDetail {
    pub project_id: String,
    pub recall_id: String,
    pub created_at: String,
    pub query: Option<String>,
    pub user_id: Option<String>,
    pub agent_id: Option<String>,
    pub session_id: Option<String>,
    pub profile: String,
    pub retrieval: String,
    /// The filters and ranking parameters, as pretty JSON.
    pub filters: String,
    pub results: Vec<RecalledMemoryRow>,
    pub total_ms: f64,
    /// (stage, milliseconds) in pipeline order.
    pub stages: Vec<(String, f64)>,
    pub trace_id: Option<String>,
    pub shows_content: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RecalledMemoryRow {
    pub rank: u32,
    pub score: f64,
    pub memory_id: String,
    /// `None` when the viewer may not read content, or the memory is gone.
    pub content: Option<String>,
    /// `active`, `superseded`, `deleted`, or `gone` when it no longer exists.
    pub state: String,
}

/// The console's form for a new evaluation set, as typed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewEvaluationSetForm {
    pub project_id: String,
    pub name: String,
    /// Empty: 10.
    pub k: String,
    /// Empty: on request only.
    pub schedule_hours: String,
    /// One case per line, as `POST /v1/eval-sets/{id}/cases/import` takes them.
    pub cases_jsonl: String,
}

/// One price of the price book, as the prices page lists it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PriceRow {
    pub id: String,
    pub currency: String,
    /// Price of one unit, exact (`0.00000002`).
    pub unit_price: String,
    /// First day it applies, `YYYY-MM-DD`.
    pub effective_from: String,
    /// `organization`, `deployment` or `default`.
    pub source: String,
}

/// A unit's price today and the prices scheduled for it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnitPrices {
    pub unit: String,
    pub current: Option<PriceRow>,
    pub scheduled: Vec<PriceRow>,
}

/// The organization's price book.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PriceBook {
    pub organization: String,
    /// Today (UTC), the earliest first day a new price may have.
    pub today: String,
    pub units: Vec<UnitPrices>,
    /// Owners and admins add and withdraw the organization's prices; analysts read them.
    pub can_edit: bool,
}

/// A new price of the organization, as typed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewPriceForm {
    pub unit: String,
    pub price: String,
    /// `1`, `1000` or `1000000`: how many units the price is for.
    pub per: String,
    pub currency: String,
    /// `YYYY-MM-DD`; empty: today.
    pub effective_from: String,
}

/// One line of a statement: a unit at one price.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatementLineRow {
    pub unit: String,
    pub quantity: i64,
    pub currency: Option<String>,
    pub unit_price: Option<String>,
    pub price_from: Option<String>,
    pub default_price: bool,
    /// Exact (`0.00000006`).
    pub cost: String,
}

/// A project's budget on a statement.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatementBudgetRow {
    pub project: String,
    pub currency: String,
    pub amount: String,
    pub spent: String,
    pub percent_used: Option<u64>,
    pub hard_cap: bool,
    /// (threshold %, when) of each alert of the month.
    pub alerts: Vec<(u8, String)>,
}

/// Cost and usage of one value of a breakdown, all units together.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatementBreakdownRow {
    /// `project`, `key`, `end_user`, `agent` or `channel`.
    pub by: String,
    /// The project's name (on every row of the organization's statement).
    pub project: String,
    /// The key's label, the end-user or agent id, the channel; `(none)` where calls named
    /// none; `erased <digest>` for an erased end-user.
    pub label: String,
    pub currency: Option<String>,
    /// Exact cost in `currency`.
    pub cost: String,
    /// (unit, quantity) of every unit it used.
    pub quantities: Vec<(String, i64)>,
}

/// The organization's statement of a month, as the statement page shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatementPage {
    pub month: String,
    pub organization: String,
    pub provisional: bool,
    pub closes_at: String,
    pub generated_at: String,
    pub lines: Vec<StatementLineRow>,
    /// (currency, exact total).
    pub totals: Vec<(String, String)>,
    pub budgets: Vec<StatementBudgetRow>,
    pub breakdowns: Vec<StatementBreakdownRow>,
    /// The months the page offers, newest first (`YYYY-MM`).
    pub months: Vec<String>,
}
