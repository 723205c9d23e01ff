//! The audit trail's domain: who acted (`Actor`), what happened (`NewAuditEvent`, never
//! memory content: ids and digests only) and the hash that chains each organization's events
//! so any edit, insertion or removal of a stored event is detectable.

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};

/// The chain of every organization starts from this hash.
pub const AUDIT_CHAIN_GENESIS: &str =
    "0000000000000000000000000000000000000000000000000000000000000000";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActorKind {
    ApiKey,
    /// An end-user token: the id is `<user id>`, the project is the event's.
    EndUser,
    ConsoleAccount,
    System,
}

impl ActorKind {
    pub const fn as_str(self) -> &'static str {
        match self {
            ActorKind::ApiKey => "api_key",
            ActorKind::EndUser => "end_user",
            ActorKind::ConsoleAccount => "console_account",
            ActorKind::System => "system",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [
            ActorKind::ApiKey,
            ActorKind::EndUser,
            ActorKind::ConsoleAccount,
            ActorKind::System,
        ]
        .into_iter()
        .find(|kind| kind.as_str() == text)
    }
}

/// The door a call came through: set by the door when it builds the caller's origin, and
/// recorded in usage, audit events and recall events.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Channel {
    /// The REST API (`/v1/...`).
    Http,
    /// The admin console's pages.
    Console,
    /// An `engram` command at the command line.
    Cli,
    /// The Mem0-compatible routes.
    Mem0,
    /// The MCP server, with the tool called.
    Mcp { tool: String },
    /// Engram's own background work that no request asked for (sampling, consolidation).
    Job,
}

impl Channel {
    /// Every channel's stored name, in the order reports list them.
    pub const NAMES: [&'static str; 6] = ["http", "console", "cli", "mem0", "mcp", "job"];

    /// The stored name: `http`, `console`, `cli`, `mem0`, `mcp` or `job`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Channel::Http => "http",
            Channel::Console => "console",
            Channel::Cli => "cli",
            Channel::Mem0 => "mem0",
            Channel::Mcp { .. } => "mcp",
            Channel::Job => "job",
        }
    }

    /// The MCP tool called, for `mcp` (none before the call names one: authentication).
    pub fn tool(&self) -> Option<&str> {
        match self {
            Channel::Mcp { tool } if !tool.is_empty() => Some(tool),
            _ => None,
        }
    }

    /// The channel a stored name means (an MCP channel read back has lost its tool).
    pub fn named(name: &str) -> Option<Self> {
        Some(match name {
            "http" => Channel::Http,
            "console" => Channel::Console,
            "cli" => Channel::Cli,
            "mem0" => Channel::Mem0,
            "mcp" => Channel::Mcp {
                tool: String::new(),
            },
            "job" => Channel::Job,
            _ => return None,
        })
    }
}

/// Who did something, and from where: recorded with every change and in the audit log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Actor {
    pub kind: ActorKind,
    pub id: String,
    pub ip: Option<String>,
    pub user_agent: Option<String>,
    pub request_id: Option<String>,
    /// The door the call came through.
    pub channel: Channel,
}

impl Actor {
    /// Engram itself: a background job no request asked for, or maintenance.
    pub fn system(id: &str) -> Self {
        Self {
            kind: ActorKind::System,
            id: id.to_string(),
            ip: None,
            user_agent: None,
            request_id: None,
            channel: Channel::Job,
        }
    }

    /// An operator's command at the command line.
    pub fn command_line(command: &str) -> Self {
        Self {
            channel: Channel::Cli,
            ..Self::system(command)
        }
    }

    /// This actor, having come through `channel`.
    pub fn via(self, channel: Channel) -> Self {
        Self { channel, ..self }
    }

    /// How memory history names this actor: `api_key:<key id>`.
    pub fn label(&self) -> String {
        format!("{}:{}", self.kind.as_str(), self.id)
    }

    /// The actor a [`Self::label`] names, acting now through `channel` for `request_id`
    /// (a policy's setter, in whose name the policy acts); `None` for text no label has.
    pub fn from_label(label: &str, channel: Channel, request_id: Option<String>) -> Option<Self> {
        let (kind, id) = label.split_once(':')?;
        Some(Self {
            kind: ActorKind::parse(kind)?,
            id: id.to_string(),
            ip: None,
            user_agent: None,
            request_id,
            channel,
        })
    }
}

/// What an audit event records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuditAction {
    MemoryCreated,
    MemoryUpdated,
    MemoryDeleted,
    /// A memory was verified, or its verification withdrawn.
    MemoryVerified,
    /// A console page showed memory content.
    MemoryContentViewed,
    ApiKeyCreated,
    ApiKeyRevoked,
    ApiKeyRolled,
    ConsoleLogin,
    ConsoleLoginFailed,
    /// The project's end-user token signing key was replaced: every token it signed is void.
    EndUserSigningKeyRotated,
    ConsoleMemberInvited,
    ConsoleInvitationAccepted,
    ConsoleInvitationRevoked,
    ConsoleMemberRoleChanged,
    ConsoleMemberRemoved,
    ProjectSettingsChanged,
    /// A project with memories started moving to another embedding model.
    EmbeddingChangeStarted,
    /// It switched: searches now use the new model's space.
    EmbeddingSwitched,
    /// The move failed or was replaced; the project stays in its old space.
    EmbeddingChangeAbandoned,
    MemoryFlagsChanged,
    SubjectErasureRequested,
    SubjectErased,
    SubjectExported,
    MemoryExpired,
    /// The project's memory limits deleted a subject's memories to make room for newer ones.
    MemoryEvicted,
    /// Budget, quotas or recall budget of a project changed.
    ProjectLimitsChanged,
    /// The month's cost reached an alert threshold of the project's budget.
    BudgetThresholdReached,
    /// A retention sweep removed a store's records (messages, session state, feedback,
    /// recall events, files) past the project's retention.
    RetentionSwept,
    /// The organization's chain switched from plain to keyed hashes: this event links the
    /// last plain hash to the first keyed one.
    AuditChainRekeyed,
    /// An operator created a project (with its first key) from the command line.
    ProjectCreated,
    /// A price was added to the organization's price book (an override, now or scheduled).
    PriceAdded,
    /// A scheduled price of the organization was withdrawn before it took effect.
    PriceWithdrawn,
}

impl AuditAction {
    pub const ALL: [AuditAction; 33] = [
        AuditAction::MemoryCreated,
        AuditAction::MemoryUpdated,
        AuditAction::MemoryDeleted,
        AuditAction::MemoryVerified,
        AuditAction::MemoryContentViewed,
        AuditAction::ApiKeyCreated,
        AuditAction::ApiKeyRevoked,
        AuditAction::ApiKeyRolled,
        AuditAction::ConsoleLogin,
        AuditAction::ConsoleLoginFailed,
        AuditAction::EndUserSigningKeyRotated,
        AuditAction::ConsoleMemberInvited,
        AuditAction::ConsoleInvitationAccepted,
        AuditAction::ConsoleInvitationRevoked,
        AuditAction::ConsoleMemberRoleChanged,
        AuditAction::ConsoleMemberRemoved,
        AuditAction::ProjectSettingsChanged,
        AuditAction::EmbeddingChangeStarted,
        AuditAction::EmbeddingSwitched,
        AuditAction::EmbeddingChangeAbandoned,
        AuditAction::MemoryFlagsChanged,
        AuditAction::SubjectErasureRequested,
        AuditAction::SubjectErased,
        AuditAction::SubjectExported,
        AuditAction::MemoryExpired,
        AuditAction::MemoryEvicted,
        AuditAction::ProjectLimitsChanged,
        AuditAction::BudgetThresholdReached,
        AuditAction::RetentionSwept,
        AuditAction::AuditChainRekeyed,
        AuditAction::ProjectCreated,
        AuditAction::PriceAdded,
        AuditAction::PriceWithdrawn,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            AuditAction::MemoryCreated => "memory.created",
            AuditAction::MemoryUpdated => "memory.updated",
            AuditAction::MemoryVerified => "memory.verified",
            AuditAction::MemoryDeleted => "memory.deleted",
            AuditAction::MemoryContentViewed => "memory.content_viewed",
            AuditAction::ApiKeyCreated => "api_key.created",
            AuditAction::ApiKeyRevoked => "api_key.revoked",
            AuditAction::ApiKeyRolled => "api_key.rolled",
            AuditAction::ConsoleLogin => "console.login",
            AuditAction::ConsoleLoginFailed => "console.login_failed",
            AuditAction::EndUserSigningKeyRotated => "end_user_token.signing_key_rotated",
            AuditAction::ConsoleMemberInvited => "console.member_invited",
            AuditAction::ConsoleInvitationAccepted => "console.invitation_accepted",
            AuditAction::ConsoleInvitationRevoked => "console.invitation_revoked",
            AuditAction::ConsoleMemberRoleChanged => "console.member_role_changed",
            AuditAction::ConsoleMemberRemoved => "console.member_removed",
            AuditAction::ProjectSettingsChanged => "project.settings_changed",
            AuditAction::EmbeddingChangeStarted => "project.embedding_change_started",
            AuditAction::EmbeddingSwitched => "project.embedding_switched",
            AuditAction::EmbeddingChangeAbandoned => "project.embedding_change_abandoned",
            AuditAction::MemoryFlagsChanged => "memory.flags_changed",
            AuditAction::SubjectErasureRequested => "subject.erasure_requested",
            AuditAction::SubjectErased => "subject.erased",
            AuditAction::SubjectExported => "subject.exported",
            AuditAction::MemoryExpired => "memory.expired",
            AuditAction::MemoryEvicted => "memory.evicted",
            AuditAction::ProjectLimitsChanged => "project.limits_changed",
            AuditAction::BudgetThresholdReached => "project.budget_threshold_reached",
            AuditAction::RetentionSwept => "project.retention_swept",
            AuditAction::AuditChainRekeyed => "audit.chain_rekeyed",
            AuditAction::ProjectCreated => "project.created",
            AuditAction::PriceAdded => "organization.price_added",
            AuditAction::PriceWithdrawn => "organization.price_withdrawn",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|action| action.as_str() == text)
    }

    pub const fn target_type(self) -> &'static str {
        match self {
            AuditAction::MemoryCreated
            | AuditAction::MemoryUpdated
            | AuditAction::MemoryDeleted
            | AuditAction::MemoryVerified
            | AuditAction::MemoryContentViewed => "memory",
            AuditAction::ApiKeyCreated | AuditAction::ApiKeyRevoked | AuditAction::ApiKeyRolled => {
                "api_key"
            }
            AuditAction::ConsoleLogin
            | AuditAction::ConsoleLoginFailed
            | AuditAction::ConsoleInvitationAccepted
            | AuditAction::ConsoleMemberRoleChanged
            | AuditAction::ConsoleMemberRemoved => "console_account",
            AuditAction::ConsoleMemberInvited | AuditAction::ConsoleInvitationRevoked => {
                "console_invitation"
            }
            AuditAction::ProjectSettingsChanged
            | AuditAction::EmbeddingChangeStarted
            | AuditAction::EmbeddingSwitched
            | AuditAction::EmbeddingChangeAbandoned
            | AuditAction::ProjectLimitsChanged
            | AuditAction::BudgetThresholdReached
            | AuditAction::RetentionSwept
            | AuditAction::ProjectCreated => "project",
            AuditAction::AuditChainRekeyed => "audit_chain",
            AuditAction::MemoryFlagsChanged
            | AuditAction::MemoryExpired
            | AuditAction::MemoryEvicted => "memory",
            AuditAction::SubjectErasureRequested
            | AuditAction::SubjectErased
            | AuditAction::SubjectExported => "subject",
            AuditAction::EndUserSigningKeyRotated => "project",
            AuditAction::PriceAdded | AuditAction::PriceWithdrawn => "price",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuditOutcome {
    Success,
    Failure,
}

impl AuditOutcome {
    pub const fn as_str(self) -> &'static str {
        match self {
            AuditOutcome::Success => "success",
            AuditOutcome::Failure => "failure",
        }
    }
}

/// An event to append. `details` is content-free by construction of its callers: versions,
/// counts and SHA-256 digests of content, never the content.
#[derive(Clone, Debug)]
pub struct NewAuditEvent {
    pub action: AuditAction,
    pub outcome: AuditOutcome,
    pub target_ids: Vec<String>,
    pub details: serde_json::Value,
}

impl NewAuditEvent {
    pub fn success(
        action: AuditAction,
        target_ids: Vec<String>,
        details: serde_json::Value,
    ) -> Self {
        Self {
            action,
            outcome: AuditOutcome::Success,
            target_ids,
            details,
        }
    }
}

/// Every field of a stored event that the chain protects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainedFields<'a> {
    pub organization_id: &'a str,
    pub sequence: i64,
    pub project_id: Option<&'a str>,
    pub at: DateTime<Utc>,
    pub actor_type: &'a str,
    pub actor_id: &'a str,
    pub action: &'a str,
    pub target_type: &'a str,
    pub target_ids: &'a str,
    pub outcome: &'a str,
    pub ip: Option<&'a str>,
    pub user_agent: Option<&'a str>,
    pub request_id: Option<&'a str>,
    pub details: &'a str,
}

/// SHA-256 over the previous event's hash and this event's fields, each length-prefixed so
/// no two different events serialise alike. The plain hash of events written before the
/// chain was keyed: anyone can recompute it, so it proves order, not authorship.
pub fn chain_hash(previous_hash: &str, fields: &ChainedFields<'_>) -> String {
    let mut hasher = Sha256::new();
    feed_chained_fields(&mut hasher, previous_hash, fields);
    hex::encode(hasher.finalize())
}

/// HMAC-SHA-256, under a key the database does not hold, over the same input as
/// [`chain_hash`]: whoever can write the database but lacks the key cannot recompute it, so
/// a rewritten event cannot be made to verify.
#[expect(
    clippy::expect_used,
    reason = "HMAC takes a key of any length: it cannot fail"
)]
pub fn keyed_chain_hash(key: &[u8], previous_hash: &str, fields: &ChainedFields<'_>) -> String {
    use hmac::Mac;
    let mut mac =
        <hmac::Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC accepts a key of any length");
    feed_chained_fields(&mut mac, previous_hash, fields);
    hex::encode(mac.finalize().into_bytes())
}

fn feed_chained_fields(
    hasher: &mut impl sha2::digest::Update,
    previous_hash: &str,
    fields: &ChainedFields<'_>,
) {
    let at = fields
        .at
        .to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    let sequence = fields.sequence.to_string();
    let parts: [Option<&str>; 15] = [
        Some(previous_hash),
        Some(fields.organization_id),
        Some(&sequence),
        fields.project_id,
        Some(&at),
        Some(fields.actor_type),
        Some(fields.actor_id),
        Some(fields.action),
        Some(fields.target_type),
        Some(fields.target_ids),
        Some(fields.outcome),
        fields.ip,
        fields.user_agent,
        fields.request_id,
        Some(fields.details),
    ];
    for part in parts {
        match part {
            Some(text) => {
                hasher.update(&(text.len() as u64).to_be_bytes());
                hasher.update(text.as_bytes());
            }
            None => hasher.update(&u64::MAX.to_be_bytes()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields<'a>(action: &'a str, project_id: Option<&'a str>) -> ChainedFields<'a> {
        ChainedFields {
            organization_id: "org",
            sequence: 1,
            project_id,
            at: DateTime::parse_from_rfc3339("2026-11-30T12:00:00Z")
                .unwrap()
                .with_timezone(&Utc),
            actor_type: "api_key",
            actor_id: "k1",
            action,
            target_type: "memory",
            target_ids: "[\"m1\"]",
            outcome: "success",
            ip: None,
            user_agent: None,
            request_id: Some("r1"),
            details: "{}",
        }
    }

    #[test]
    fn any_field_or_link_change_changes_the_hash() {
        let base = chain_hash(AUDIT_CHAIN_GENESIS, &fields("memory.created", Some("p")));
        assert_eq!(base.len(), 64);
        assert_ne!(
            base,
            chain_hash(AUDIT_CHAIN_GENESIS, &fields("memory.deleted", Some("p")))
        );
        assert_ne!(
            base,
            chain_hash(AUDIT_CHAIN_GENESIS, &fields("memory.created", None))
        );
        assert_ne!(
            base,
            chain_hash(&base, &fields("memory.created", Some("p")))
        );
        // Absent and empty are different.
        assert_ne!(
            chain_hash(AUDIT_CHAIN_GENESIS, &fields("memory.created", None)),
            chain_hash(AUDIT_CHAIN_GENESIS, &fields("memory.created", Some("")))
        );
        assert_eq!(
            base,
            chain_hash(AUDIT_CHAIN_GENESIS, &fields("memory.created", Some("p")))
        );
    }

    #[test]
    fn keyed_hashes_depend_on_the_key_and_differ_from_plain_ones() {
        let event = fields("memory.created", Some("p"));
        let keyed = keyed_chain_hash(b"key", AUDIT_CHAIN_GENESIS, &event);
        assert_eq!(keyed.len(), 64);
        assert_eq!(keyed, keyed_chain_hash(b"key", AUDIT_CHAIN_GENESIS, &event));
        assert_ne!(
            keyed,
            keyed_chain_hash(b"other", AUDIT_CHAIN_GENESIS, &event)
        );
        assert_ne!(keyed, chain_hash(AUDIT_CHAIN_GENESIS, &event));
        assert_ne!(
            keyed,
            keyed_chain_hash(
                b"key",
                AUDIT_CHAIN_GENESIS,
                &fields("memory.deleted", Some("p"))
            )
        );
    }
}

/// A stored event as readers see it.
#[derive(Clone, Debug, PartialEq)]
pub struct AuditEventRecord {
    pub id: i64,
    pub sequence: i64,
    pub project_id: Option<String>,
    pub at: DateTime<Utc>,
    pub actor_type: String,
    pub actor_id: String,
    pub action: String,
    pub target_type: String,
    pub target_ids: Vec<String>,
    pub outcome: String,
    pub ip: Option<String>,
    pub user_agent: Option<String>,
    pub request_id: Option<String>,
    pub details: serde_json::Value,
    pub hash: String,
}

/// Which events to read (all conditions must hold).
#[derive(Clone, Debug, Default)]
pub struct AuditFilter {
    pub action: Option<String>,
    pub actor_id: Option<String>,
    pub target_id: Option<String>,
    pub since: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
    /// Events after this id (the cursor; with `newest_first`, before it).
    pub after_id: Option<i64>,
    pub limit: u64,
    /// Newest first (the console's view) instead of oldest first.
    pub newest_first: bool,
    /// Also the organization's events that belong to no project (console logins), for the
    /// organization's own console; never for a project key.
    pub include_organization_events: bool,
}

/// Where a verification starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerificationStart {
    /// From the last checkpoint this process verified (its event and the count of events up
    /// to it are re-checked); from the start when there is none.
    LastCheckpoint,
    /// Recompute every event from the genesis.
    Genesis,
}
