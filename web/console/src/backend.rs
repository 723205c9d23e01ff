//! The seam between the console and the rest of Engram: the gateway implements
//! [`ConsoleBackend`] and hands it to [`crate::console_router`]; the console never touches storage.

use crate::model::{
    AuditListing, AuditQuery, BulkDeleteOutcome, BulkDeletePreview, ConsoleAccount, ConsoleCaller,
    ConsoleError, ConsoleRequestOrigin, ErasureStatus, GovernanceSettings, InvitationPreview,
    KeyListing, MemberListing, MemoryDetail, MemoryListQuery, MemoryPage, NewInvitation,
    NewKeyRequest, NewKeySecret, ProjectSummary, SessionTokens, SpendLimitsForm, SubjectSummary,
    UsageOverview,
};
use crate::model::{
    NewPriceForm, PriceBook, RecallDashboard, RecallEventDetail, RecallListQuery, RecallListing,
    RunListing, RunTimelineDetail, StatementPage,
};

/// Everything the console needs from the service, keyed by the caller: the opaque session
/// token that [`ConsoleBackend::login`] issued (kept in the `engram_console` cookie) and the
/// request's origin, which the audit log records.
///
/// Implementations own authentication, tenant scoping and auditing (every call of
/// `list_memories` is a console read of memory content).
#[async_trait::async_trait]
pub trait ConsoleBackend: Send + Sync + 'static {
    /// Verify e-mail + password; on success a new session's access and refresh tokens and
    /// a device token. `device_token` is the browser's from an earlier sign-in, if any: a
    /// known browser is throttled only by its own failures.
    ///
    /// Tokens must consist of cookie-safe characters (e.g. hex or base64url); anything
    /// else is refused with [`ConsoleError::Internal`] rather than written into a header.
    async fn login(
        &self,
        email: String,
        password: String,
        device_token: Option<String>,
        origin: &ConsoleRequestOrigin,
    ) -> Result<SessionTokens, ConsoleError>;

    /// End the session of this access token at once; unknown or expired tokens are ignored.
    async fn logout(&self, caller: &ConsoleCaller);

    /// Exchange a refresh token for a new pair (the old one stops working). `None` when it
    /// is unknown, expired, revoked, or was already used (which also ends its session).
    async fn refresh(&self, refresh_token: &str) -> Option<SessionTokens>;

    /// The account behind a live session, `None` when the token is unknown or expired.
    async fn current_account(&self, caller: &ConsoleCaller) -> Option<ConsoleAccount>;

    /// Speak `language` (`en`, `zh`; empty: the browser's) to the session's account from now on.
    async fn choose_language(
        &self,
        caller: &ConsoleCaller,
        language: &str,
    ) -> Result<(), ConsoleError>;

    /// Projects visible to the session's account, in display order (the first one is the
    /// console's default). [`ConsoleError::Unauthorized`] when the session is not live.
    async fn list_projects(
        &self,
        caller: &ConsoleCaller,
    ) -> Result<Vec<ProjectSummary>, ConsoleError>;

    /// Memories of one project matching the query, newest first, at most `query.limit`.
    /// [`ConsoleError::NotFound`] for a project the account cannot see.
    async fn list_memories(
        &self,
        caller: &ConsoleCaller,
        query: MemoryListQuery,
    ) -> Result<MemoryPage, ConsoleError>;

    /// The project's audit events (and the organization's own, such as console logins),
    /// newest first, with the verification of the organization's hash chain.
    async fn audit_log(
        &self,
        caller: &ConsoleCaller,
        query: AuditQuery,
    ) -> Result<AuditListing, ConsoleError>;

    /// The project's audit events that `query` matches (every page of them; its limit and
    /// cursor are not used) as CSV, for download.
    async fn export_audit_csv(
        &self,
        caller: &ConsoleCaller,
        query: AuditQuery,
    ) -> Result<String, ConsoleError>;

    /// The project's API keys (owners, admins and developers).
    async fn list_keys(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
    ) -> Result<KeyListing, ConsoleError>;

    /// Create a key; its secret is in the answer only.
    async fn create_key(
        &self,
        caller: &ConsoleCaller,
        request: NewKeyRequest,
    ) -> Result<NewKeySecret, ConsoleError>;

    /// Revoke a key at once.
    async fn revoke_key(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        key_id: &str,
    ) -> Result<(), ConsoleError>;

    /// Replace a key; the old one keeps working for a day.
    async fn roll_key(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        key_id: &str,
    ) -> Result<NewKeySecret, ConsoleError>;

    /// The organization's members and pending invitations (owners and admins).
    async fn list_members(&self, caller: &ConsoleCaller) -> Result<MemberListing, ConsoleError>;

    /// Invite an e-mail address with a role; the link is in the answer only.
    async fn invite_member(
        &self,
        caller: &ConsoleCaller,
        email: &str,
        role: &str,
    ) -> Result<NewInvitation, ConsoleError>;

    /// Withdraw a pending invitation.
    async fn revoke_invitation(
        &self,
        caller: &ConsoleCaller,
        invitation_id: &str,
    ) -> Result<(), ConsoleError>;

    /// Give a member another role (never one's own; only owners touch owners).
    async fn change_member_role(
        &self,
        caller: &ConsoleCaller,
        member_id: &str,
        role: &str,
    ) -> Result<(), ConsoleError>;

    /// Remove a member; their sessions end at once.
    async fn remove_member(
        &self,
        caller: &ConsoleCaller,
        member_id: &str,
    ) -> Result<(), ConsoleError>;

    /// Who an invitation link is for; [`ConsoleError::NotFound`] when it is unknown, used,
    /// withdrawn or expired. Needs no session.
    async fn preview_invitation(&self, token: &str) -> Result<InvitationPreview, ConsoleError>;

    /// Accept an invitation with a new password: the account is created and signed in.
    async fn accept_invitation(
        &self,
        token: &str,
        password: String,
        origin: &ConsoleRequestOrigin,
    ) -> Result<SessionTokens, ConsoleError>;

    /// One memory with provenance and history (a console read of content: audited).
    async fn memory_detail(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        memory_id: &str,
    ) -> Result<MemoryDetail, ConsoleError>;

    /// Correct a memory's content; the reason is mandatory and kept in its history.
    async fn correct_memory(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        memory_id: &str,
        correction: crate::model::MemoryCorrection,
    ) -> Result<(), ConsoleError>;

    /// Delete one memory, with the reason kept in the audit log.
    async fn delete_memory(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        memory_id: &str,
        reason: String,
    ) -> Result<(), ConsoleError>;

    /// Set or clear the immutable and legal-hold flags (`None` leaves one as it is).
    async fn set_memory_flags(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        memory_id: &str,
        immutable: Option<bool>,
        legal_hold: Option<bool>,
        reason: String,
    ) -> Result<(), ConsoleError>;

    /// Make a memory `private` (its agent only) or `shared` (every agent of the project),
    /// with the reason kept in its history.
    async fn set_memory_visibility(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        memory_id: &str,
        visibility: String,
        reason: String,
    ) -> Result<(), ConsoleError>;

    /// Verify a memory (`verified`) or withdraw its verification, with the reason kept in its
    /// history.
    async fn verify_memory(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        memory_id: &str,
        verified: bool,
        reason: String,
    ) -> Result<(), ConsoleError>;

    /// How many memories a filter matches, for a bulk delete's confirmation.
    async fn preview_bulk_delete(
        &self,
        caller: &ConsoleCaller,
        query: MemoryListQuery,
    ) -> Result<BulkDeletePreview, ConsoleError>;

    /// Delete what the filter matches, if it still matches `expected` memories.
    async fn bulk_delete(
        &self,
        caller: &ConsoleCaller,
        query: MemoryListQuery,
        expected: u64,
        reason: String,
    ) -> Result<BulkDeleteOutcome, ConsoleError>;

    /// One end-user of a project: how many memories, and which are held.
    async fn subject_summary(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        user_id: &str,
    ) -> Result<SubjectSummary, ConsoleError>;

    /// The end-users whose id starts with `id_prefix`, or with a memory carrying the metadata
    /// `key=value` of `metadata`, or both.
    async fn find_subjects(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        id_prefix: Option<String>,
        metadata: Option<String>,
    ) -> Result<Vec<crate::model::SubjectMatchRow>, ConsoleError>;

    /// Start erasing an end-user (refused while memories are held, or when `confirm` does not
    /// repeat the id).
    async fn request_erasure(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        user_id: &str,
        confirm: &str,
    ) -> Result<ErasureStatus, ConsoleError>;

    /// Start erasing an end-user in every project of the caller's organization (refused while
    /// memories are held in any); followed through `erasure_status` in `project_id`.
    async fn request_organization_erasure(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        user_id: &str,
        confirm: &str,
    ) -> Result<ErasureStatus, ConsoleError>;

    /// Progress or receipt of an erasure task.
    async fn erasure_status(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        task_id: &str,
    ) -> Result<ErasureStatus, ConsoleError>;

    /// Everything live about an end-user as NDJSON (audited).
    async fn export_subject(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        user_id: &str,
    ) -> Result<String, ConsoleError>;

    /// PII redaction, retention per kind and the retention dry run.
    async fn governance_settings(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
    ) -> Result<GovernanceSettings, ConsoleError>;

    /// Save PII redaction and retention days per kind (`None`: no limit).
    async fn save_governance_settings(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        pii_redaction: &str,
        retention_days: Vec<(String, Option<u32>)>,
        relevance_floor: &str,
    ) -> Result<(), ConsoleError>;

    /// Run the retention sweep of the project now; returns how many memories it removed.
    async fn sweep_retention_now(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
    ) -> Result<u64, ConsoleError>;

    /// Usage per day and unit over the last `days` days, cost, the month against the budget,
    /// the organization's top projects and the limits (owners, admins and analysts).
    /// The recall-quality page of a project between two days (`YYYY-MM-DD`, inclusive):
    /// figures, time charts, queries that found nothing, profiles and evaluation history.
    async fn recall_dashboard(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        from: &str,
        to: &str,
    ) -> Result<RecallDashboard, ConsoleError>;

    /// Create an evaluation set with the cases of a JSONL text (one case per line).
    async fn create_evaluation_set(
        &self,
        caller: &ConsoleCaller,
        form: crate::model::NewEvaluationSetForm,
    ) -> Result<(), ConsoleError>;

    /// Queue a run of an evaluation set now (its own profile).
    async fn run_evaluation_set(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        set_id: &str,
    ) -> Result<(), ConsoleError>;

    /// One recall event with its results, for the drill-down.
    async fn recall_event(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        recall_id: &str,
    ) -> Result<RecallEventDetail, ConsoleError>;

    async fn usage_overview(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        days: u32,
    ) -> Result<UsageOverview, ConsoleError>;

    /// The organization's price book: every unit's price today and those scheduled.
    async fn price_book(&self, caller: &ConsoleCaller) -> Result<PriceBook, ConsoleError>;

    /// Add a price of the organization (owners and admins); returns its id.
    async fn add_organization_price(
        &self,
        caller: &ConsoleCaller,
        form: NewPriceForm,
    ) -> Result<String, ConsoleError>;

    /// Withdraw a price of the organization before it takes effect (owners and admins).
    async fn withdraw_organization_price(
        &self,
        caller: &ConsoleCaller,
        price_id: &str,
    ) -> Result<(), ConsoleError>;

    /// The organization's statement of `month` (`YYYY-MM`; empty: this month).
    async fn organization_statement(
        &self,
        caller: &ConsoleCaller,
        month: &str,
    ) -> Result<StatementPage, ConsoleError>;

    /// The same statement as CSV.
    async fn organization_statement_csv(
        &self,
        caller: &ConsoleCaller,
        month: &str,
    ) -> Result<String, ConsoleError>;

    /// Replace the project's budget, quotas and recall budget (owners and admins).
    async fn save_spend_limits(
        &self,
        caller: &ConsoleCaller,
        form: SpendLimitsForm,
    ) -> Result<(), ConsoleError>;

    /// The project's agent runs, newest first, of one end-user and status when given.
    async fn run_list(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        user_id: Option<String>,
        status: Option<String>,
        before: Option<String>,
    ) -> Result<RunListing, ConsoleError>;

    /// One run's timeline with each memory as it was then and is now (a content view,
    /// audited).
    async fn run_timeline(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        run_id: &str,
    ) -> Result<RunTimelineDetail, ConsoleError>;

    /// The project's recorded recalls (searches and contexts), newest first, filtered.
    async fn recall_list(
        &self,
        caller: &ConsoleCaller,
        query: RecallListQuery,
    ) -> Result<RecallListing, ConsoleError>;
}
