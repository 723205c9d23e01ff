//! The one permission table: every operation of every front door (HTTP API, console, CLI,
//! the Mem0-compatible API and MCP), the permission it needs, and
//! which permissions each kind of principal holds. Engine use cases check it; the OpenAPI
//! document publishes it; the console's role checks are derived from it.

use crate::access::{ApiScope, ApiScopes, ConsoleRole};
use std::fmt;

/// One thing a principal may be allowed to do inside a project (or, for the organization
/// permissions, across an organization's projects).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Permission {
    /// Read memories and what is derived from them: lists, search, history, messages,
    /// session state, files, feedback, recall events.
    ReadMemories,
    /// Add and edit memories, messages, files, session state and feedback.
    WriteMemories,
    /// Delete memories, files and session state.
    DeleteMemories,
    /// Mark a memory verified or withdraw it (`memories:verify`; console owners, admins and
    /// compliance staff).
    VerifyMemories,
    /// Mint end-user tokens: held by every project API key, never by a token.
    MintEndUserTokens,
    /// List, create, revoke and roll the project's API keys; rotate the end-user signing key.
    ManageApiKeys,
    /// Revoke and roll keys someone else made (a console developer manages only their own).
    ManageOthersApiKeys,
    /// Read, verify and export the audit log.
    ReadAuditLog,
    /// Project settings, memory flags (immutable, legal hold), retention and consolidation.
    ManageProjectSettings,
    /// Erase and export one end-user's data; see the progress of those tasks.
    ManageSubjectData,
    /// Usage and cost reports.
    ReadUsage,
    /// Budgets, quotas and recall budgets.
    ManageSpendLimits,
    /// Recall metrics, retrieval profiles and evaluation sets and runs.
    TuneRecall,
    /// Invite, re-role and remove console members.
    ManageMembers,
    /// What spans the organization's projects (reserved for the organization-level
    /// credential, `egk_org_…`, and console owners, admins and compliance staff).
    ManageOrganizationSubjectData,
    /// The deployment itself: organizations, projects, console accounts and the price book,
    /// made at the command line. Only the operator holds it; no key, token or role does.
    OperateDeployment,
    /// Read the prices that apply: every project key, and who reads usage in the console.
    ReadPrices,
    /// Add and withdraw the organization's own prices (console owners and admins).
    ManagePrices,
}

impl Permission {
    pub const ALL: [Permission; 18] = [
        Permission::ReadMemories,
        Permission::WriteMemories,
        Permission::DeleteMemories,
        Permission::VerifyMemories,
        Permission::MintEndUserTokens,
        Permission::ManageApiKeys,
        Permission::ManageOthersApiKeys,
        Permission::ReadAuditLog,
        Permission::ManageProjectSettings,
        Permission::ManageSubjectData,
        Permission::ReadUsage,
        Permission::ManageSpendLimits,
        Permission::TuneRecall,
        Permission::ManageMembers,
        Permission::ManageOrganizationSubjectData,
        Permission::OperateDeployment,
        Permission::ReadPrices,
        Permission::ManagePrices,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Permission::ReadMemories => "read_memories",
            Permission::WriteMemories => "write_memories",
            Permission::DeleteMemories => "delete_memories",
            Permission::VerifyMemories => "verify_memories",
            Permission::MintEndUserTokens => "mint_end_user_tokens",
            Permission::ManageApiKeys => "manage_api_keys",
            Permission::ManageOthersApiKeys => "manage_others_api_keys",
            Permission::ReadAuditLog => "read_audit_log",
            Permission::ManageProjectSettings => "manage_project_settings",
            Permission::ManageSubjectData => "manage_subject_data",
            Permission::ReadUsage => "read_usage",
            Permission::ManageSpendLimits => "manage_spend_limits",
            Permission::TuneRecall => "tune_recall",
            Permission::ManageMembers => "manage_members",
            Permission::ManageOrganizationSubjectData => "manage_organization_subject_data",
            Permission::OperateDeployment => "operate_deployment",
            Permission::ReadPrices => "read_prices",
            Permission::ManagePrices => "manage_prices",
        }
    }

    /// Whether a credential bound to agents may exercise it: what reads, writes or deletes
    /// its agents' data, and what mints or manages credentials within its agents. The rest
    /// (settings, erasure and export, audit, usage, recall tuning) spans every agent.
    pub const fn stays_within_agents(self) -> bool {
        matches!(
            self,
            Permission::ReadMemories
                | Permission::WriteMemories
                | Permission::DeleteMemories
                | Permission::VerifyMemories
                | Permission::MintEndUserTokens
                | Permission::ManageApiKeys
                | Permission::ManageOthersApiKeys
                | Permission::ReadPrices
        )
    }

    /// The project API key scope that grants this permission; `None` when no key scope does
    /// (every key mints end-user tokens; members and organization data are not a project
    /// key's business).
    pub const fn key_scope(self) -> Option<ApiScope> {
        match self {
            Permission::ReadMemories => Some(ApiScope::MemoriesRead),
            Permission::WriteMemories => Some(ApiScope::MemoriesWrite),
            Permission::DeleteMemories => Some(ApiScope::MemoriesDelete),
            Permission::VerifyMemories => Some(ApiScope::MemoriesVerify),
            Permission::ManageApiKeys
            | Permission::ManageOthersApiKeys
            | Permission::ReadAuditLog
            | Permission::ManageProjectSettings
            | Permission::ManageSubjectData
            | Permission::ReadUsage
            | Permission::ManageSpendLimits
            | Permission::TuneRecall => Some(ApiScope::Admin),
            Permission::MintEndUserTokens
            | Permission::ManageMembers
            | Permission::ManageOrganizationSubjectData
            | Permission::OperateDeployment
            | Permission::ReadPrices
            | Permission::ManagePrices => None,
        }
    }

    /// Whether a console member with `role` holds this permission in the projects of their
    /// organization.
    pub const fn granted_to_role(self, role: ConsoleRole) -> bool {
        use ConsoleRole::{Admin, Analyst, Compliance, Developer, Owner};
        match self {
            Permission::ReadMemories
            | Permission::WriteMemories
            | Permission::DeleteMemories
            | Permission::VerifyMemories
            | Permission::ReadAuditLog
            | Permission::ManageProjectSettings
            | Permission::ManageSubjectData
            | Permission::ManageOrganizationSubjectData => {
                matches!(role, Owner | Admin | Compliance)
            }
            Permission::ManageApiKeys => matches!(role, Owner | Admin | Developer),
            Permission::ReadUsage | Permission::ReadPrices => {
                matches!(role, Owner | Admin | Analyst)
            }
            Permission::ManagePrices => matches!(role, Owner | Admin),
            Permission::ManageSpendLimits
            | Permission::ManageMembers
            | Permission::ManageOthersApiKeys => matches!(role, Owner | Admin),
            Permission::TuneRecall => matches!(role, Owner | Admin | Compliance | Analyst),
            // A console member mints end-user tokens through a key, not by themselves.
            Permission::MintEndUserTokens => false,
            // The deployment is the operator's, at the command line.
            Permission::OperateDeployment => false,
        }
    }
}

impl fmt::Display for Permission {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

/// Who is asking, as far as permissions go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PrincipalKind {
    /// A project API key with its scopes.
    ApiKey(ApiScopes),
    /// An end-user token: the scopes it was minted with, confined to one end-user.
    EndUserToken(ApiScopes),
    /// A console member of the project's organization.
    ConsoleMember(ConsoleRole),
    /// The operator at the command line, holding the database: everything.
    Operator,
}

impl PrincipalKind {
    pub fn holds(&self, permission: Permission) -> bool {
        match self {
            // Every key mints end-user tokens (within its scopes) and reads its prices.
            PrincipalKind::ApiKey(scopes) => {
                matches!(
                    permission,
                    Permission::MintEndUserTokens | Permission::ReadPrices
                ) || permission
                    .key_scope()
                    .is_some_and(|scope| scopes.contains(scope))
            }
            // A token never holds `admin` or `memories:verify` (minting refuses both: an
            // end-user does not vouch for an agent's conclusions) and never mints tokens.
            PrincipalKind::EndUserToken(scopes) => permission.key_scope().is_some_and(|scope| {
                !matches!(scope, ApiScope::Admin | ApiScope::MemoriesVerify)
                    && scopes.contains(scope)
            }),
            PrincipalKind::ConsoleMember(role) => permission.granted_to_role(*role),
            PrincipalKind::Operator => true,
        }
    }

    /// What the principal is, for messages: "this API key", "this end-user token", …
    pub fn describe(&self) -> String {
        match self {
            PrincipalKind::ApiKey(_) => "this API key".to_string(),
            PrincipalKind::EndUserToken(_) => "this end-user token".to_string(),
            PrincipalKind::ConsoleMember(role) => format!("the console role `{}`", role.as_str()),
            PrincipalKind::Operator => "the operator".to_string(),
        }
    }

    /// What it holds, for messages: its key scopes, or its role's permissions.
    pub fn held_names(&self) -> Vec<String> {
        match self {
            PrincipalKind::ApiKey(scopes) | PrincipalKind::EndUserToken(scopes) => scopes.names(),
            _ => Permission::ALL
                .into_iter()
                .filter(|permission| self.holds(*permission))
                .map(|permission| permission.as_str().to_string())
                .collect(),
        }
    }
}

/// A refusal: the principal lacks the permission an operation needs.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PermissionDenied {
    pub operation: Operation,
    pub permission: Permission,
    pub message: String,
}

/// Check `operation` against the table for `principal`: every permission it needs must be
/// held; a refusal names the first that is not.
pub fn authorize(principal: &PrincipalKind, operation: Operation) -> Result<(), PermissionDenied> {
    let Some(permission) = operation
        .required_permissions()
        .iter()
        .copied()
        .find(|permission| !principal.holds(*permission))
    else {
        return Ok(());
    };
    let needed = match permission.key_scope() {
        Some(scope)
            if matches!(
                principal,
                PrincipalKind::ApiKey(_) | PrincipalKind::EndUserToken(_)
            ) =>
        {
            format!("the `{scope}` scope")
        }
        _ => format!("the `{permission}` permission"),
    };
    let message = match principal {
        PrincipalKind::EndUserToken(_) if permission.key_scope() == Some(ApiScope::Admin) => {
            format!(
                "{} cannot {}: that needs a project API key with {needed}",
                principal.describe(),
                operation.summary()
            )
        }
        PrincipalKind::EndUserToken(_) if permission == Permission::MintEndUserTokens => format!(
            "{} cannot {}: that needs a project API key",
            principal.describe(),
            operation.summary()
        ),
        _ => format!(
            "{} lacks {needed} needed to {}; it holds: {}",
            principal.describe(),
            operation.summary(),
            principal.held_names().join(", ")
        ),
    };
    Err(PermissionDenied {
        operation,
        permission,
        message,
    })
}

/// A front door through which an operation is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Door {
    /// The HTTP API: method and path template as the OpenAPI document writes them.
    Http {
        method: &'static str,
        path: &'static str,
    },
    /// A console server function (the `ConsoleBackend` method).
    Console(&'static str),
    /// A CLI subcommand.
    Cli(&'static str),
    /// The Mem0 Platform–compatible API (method and path, trailing slash included).
    Mem0 {
        method: &'static str,
        path: &'static str,
    },
    /// An MCP tool of the `/mcp` server.
    Mcp(&'static str),
    /// A background job of the operator (its name in `ENGRAM_JOBS` and the role lists).
    Job(&'static str),
}

macro_rules! operations {
    ($($operation:ident => $permission:ident $(+ $also:ident)*, $content:ident, $summary:literal, [$($door:expr),* $(,)?];)*) => {
        /// Every use case a principal can ask for.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Operation {
            $($operation,)*
        }

        /// The table: operation, required permissions, whether its answer carries content,
        /// what it does (for messages), doors.
        pub const OPERATIONS: &[OperationRule] = &[
            $(OperationRule {
                operation: Operation::$operation,
                permission: Permission::$permission,
                also: &[$(Permission::$also),*],
                content: AnswerContent::$content,
                summary: $summary,
                doors: &[$($door),*],
            },)*
        ];

        impl Operation {
            /// The first (the operation's own) permission it needs.
            pub const fn required_permission(self) -> Permission {
                match self {
                    $(Operation::$operation => Permission::$permission,)*
                }
            }

            /// Every permission it needs, its own first: all must be held.
            pub const fn required_permissions(self) -> &'static [Permission] {
                match self {
                    $(Operation::$operation => &[Permission::$permission $(, Permission::$also)*],)*
                }
            }

            /// Whether (and how) its answer may carry content.
            pub const fn content(self) -> AnswerContent {
                match self {
                    $(Operation::$operation => AnswerContent::$content,)*
                }
            }

            /// What the operation does, as a verb phrase: "add memories".
            pub const fn summary(self) -> &'static str {
                match self {
                    $(Operation::$operation => $summary,)*
                }
            }
        }
    };
}

/// Whether an operation's answer may carry content: memory, query, message, state and file
/// text, derivation and feedback results, exports. Content reaches only a principal that
/// holds [`Permission::ReadMemories`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnswerContent {
    /// Ids, counts, states, settings, figures: never content.
    None,
    /// May carry content: a principal without `ReadMemories` gets the content-free form (a
    /// memory without `content` and `metadata`, marked `content_omitted`; counts instead of
    /// query texts; no derivation or feedback text).
    ForReaders,
    /// Is content: the operation needs `ReadMemories` besides its own permission.
    Content,
}

impl AnswerContent {
    pub const fn as_str(self) -> &'static str {
        match self {
            AnswerContent::None => "none",
            AnswerContent::ForReaders => "content-free without read",
            AnswerContent::Content => "content (needs read)",
        }
    }
}

/// One row of the table.
#[derive(Clone, Copy, Debug)]
pub struct OperationRule {
    pub operation: Operation,
    pub permission: Permission,
    /// Permissions needed besides `permission`.
    pub also: &'static [Permission],
    pub content: AnswerContent,
    pub summary: &'static str,
    pub doors: &'static [Door],
}

const fn http(method: &'static str, path: &'static str) -> Door {
    Door::Http { method, path }
}

const fn mem0(method: &'static str, path: &'static str) -> Door {
    Door::Mem0 { method, path }
}

use Door::{Cli, Console, Job, Mcp};

operations! {
    AddMemories => WriteMemories, ForReaders, "add memories",
        [http("post", "/v1/memories"), mem0("post", "/v3/memories/add/"), mem0("post", "/v1/memories/"), Mcp("add_memory")];
    ListMemories => ReadMemories, Content, "list memories",
        [http("get", "/v1/memories"), http("post", "/v1/memories/query"), Console("list_memories"),
         mem0("post", "/v3/memories/"), mem0("post", "/v2/memories/"), mem0("get", "/v1/memories/"),
         mem0("post", "/v1/exports/"), mem0("post", "/v1/exports/get/"), Mcp("list_memories")];
    GetMemory => ReadMemories, Content, "read a memory",
        [http("get", "/v1/memories/{memory_id}"), Console("memory_detail"), mem0("get", "/v1/memories/{memory_id}/"), Mcp("get_memory")];
    EditMemory => WriteMemories, ForReaders, "edit a memory",
        [http("patch", "/v1/memories/{memory_id}"), Console("correct_memory"), Console("set_memory_visibility"), mem0("put", "/v1/memories/{memory_id}/"), mem0("put", "/v1/batch/"), Mcp("update_memory")];
    // Part of an edit, checked by the edit when it names `expires_at`: setting an expiry
    // schedules a deletion, clearing one cancels a deletion someone scheduled.
    ChangeMemoryExpiry => WriteMemories + DeleteMemories, None, "change or clear a memory's expiry", [];
    DeleteMemory => DeleteMemories, None, "delete a memory",
        [http("delete", "/v1/memories/{memory_id}"), Console("delete_memory"), mem0("delete", "/v1/memories/{memory_id}/"), Mcp("delete_memory")];
    MemoryHistory => ReadMemories, Content, "read a memory's history",
        [http("get", "/v1/memories/{memory_id}/history"), Console("memory_detail"), mem0("get", "/v1/memories/{memory_id}/history/"), Mcp("memory_history")];
    SearchMemories => ReadMemories, Content, "search memories",
        [http("post", "/v1/memories/search"), Console("list_memories"), mem0("post", "/v3/memories/search/"),
         mem0("post", "/v2/memories/search/"), mem0("post", "/v1/memories/search/"), Mcp("search_memories")];
    BulkDeleteMemories => DeleteMemories, None, "delete memories in bulk",
        [http("post", "/v1/memories/bulk-delete"), Console("bulk_delete"), Console("preview_bulk_delete"),
         mem0("delete", "/v1/memories/"), mem0("delete", "/v1/batch/"), mem0("delete", "/v2/entities/{entity_type}/{entity_id}/"),
         Mcp("delete_all_memories")];
    // Part of a bulk delete, checked when its filter tests text or metadata: how many match
    // would otherwise reveal content to a key that may not read it.
    BulkDeleteMemoriesByContent => DeleteMemories + ReadMemories, Content, "delete memories in bulk by their text or metadata", [];
    // End-user, agent, session and application ids with their counts: application ids come
    // from the metadata, and who has memories is for readers of memories.
    ListEntities => ReadMemories, Content, "list the entities memories name",
        [http("get", "/v1/entities"), mem0("get", "/v1/entities/")];
    // A reviewer's or a supervisor's word that an agent's conclusion holds (or no longer).
    // Vouching for words needs reading them.
    VerifyMemory => VerifyMemories + ReadMemories, Content, "verify a memory",
        [http("post", "/v1/memories/{memory_id}/verify"), Console("verify_memory")];
    SetMemoryFlags => ManageProjectSettings, ForReaders, "set a memory's flags",
        [http("put", "/v1/memories/{memory_id}/flags"), Console("set_memory_flags")];

    GiveMemoryFeedback => WriteMemories, ForReaders, "give feedback on a memory",
        [http("post", "/v1/memories/{memory_id}/feedback"), mem0("post", "/v1/feedback/")];
    ListMemoryFeedback => ReadMemories, Content, "list a memory's feedback",
        [http("get", "/v1/memories/{memory_id}/feedback")];
    GiveRecallFeedback => WriteMemories, ForReaders, "give feedback on a recall",
        [http("post", "/v1/recalls/{recall_id}/feedback")];
    ListRecallFeedback => ReadMemories, Content, "list a recall's feedback",
        [http("get", "/v1/recalls/{recall_id}/feedback")];

    UploadFile => WriteMemories, None, "upload a file", [http("post", "/v1/files")];
    GetFile => ReadMemories, Content, "read a file's status", [http("get", "/v1/files/{file_id}")];
    DeleteFile => DeleteMemories, None, "delete a file", [http("delete", "/v1/files/{file_id}")];

    AddMessages => WriteMemories, ForReaders, "add session messages",
        [http("post", "/v1/sessions/{session_id}/messages")];
    ListMessages => ReadMemories, Content, "list session messages",
        [http("get", "/v1/sessions/{session_id}/messages")];
    GetSessionState => ReadMemories, Content, "read session state",
        [http("get", "/v1/sessions/{session_id}/state/{key}"), Mcp("get_state")];
    ListSessionState => ReadMemories, Content, "list session state",
        [http("get", "/v1/sessions/{session_id}/state"), Mcp("get_state")];
    // Answers with the value the caller itself just sent, never another one.
    PutSessionState => WriteMemories, None, "write session state",
        [http("put", "/v1/sessions/{session_id}/state/{key}"), Mcp("set_state")];
    DeleteSessionState => DeleteMemories, None, "delete session state",
        [http("delete", "/v1/sessions/{session_id}/state/{key}")];

    GetRecallEvent => ReadMemories, Content, "read a recall event",
        [http("get", "/v1/recalls/{recall_id}")];
    ListRecallEvents => ReadMemories, Content, "list recall events",
        [http("get", "/v1/recalls"), Console("recall_list")];

    // The context to inject for one step: procedures, session state, memories and recent
    // messages packed into a token budget, with provenance.
    AssembleContext => ReadMemories, Content, "assemble a context",
        [http("post", "/v1/context"), Mcp("get_context")];
    // The run's task and metadata are content: a writer that may not read gets ids and times.
    StartRun => WriteMemories, ForReaders, "start a run", [http("post", "/v1/runs"), Mcp("start_run")];
    // Answers with the step the caller itself just sent (texts kept where capture is on).
    AddRunStep => WriteMemories, None, "record a run step",
        [http("post", "/v1/runs/{agent_run_id}/steps"), Mcp("record_step")];
    // Ending may keep the run's tool steps as a `trajectory` memory: a write.
    EndRun => WriteMemories, ForReaders, "end a run", [http("post", "/v1/runs/{agent_run_id}/end"), Mcp("end_run")];
    ListRuns => ReadMemories, Content, "list runs", [http("get", "/v1/runs"), Console("run_list")];
    GetRun => ReadMemories, Content, "read a run's timeline",
        [http("get", "/v1/runs/{agent_run_id}"), Console("run_timeline")];
    // Counts for a person about to correct or delete; the list for readers.
    MemoryImpact => ReadMemories, Content, "read a memory's impact",
        [http("get", "/v1/memories/{memory_id}/impact"), Console("memory_detail")];
    // The console's view of one recall: its figures; query and content only for those who
    // also hold `ReadMemories`.
    InspectRecallEvent => TuneRecall, ForReaders, "inspect a recall's figures", [Console("recall_event")];
    GetRecallMetrics => TuneRecall, ForReaders, "read recall metrics",
        [http("get", "/v1/recall-metrics"), Console("recall_dashboard")];
    ListRetrievalProfiles => TuneRecall, None, "list retrieval profiles",
        [http("get", "/v1/retrieval-profiles")];
    GetRetrievalProfile => TuneRecall, None, "read a retrieval profile",
        [http("get", "/v1/retrieval-profiles/{name}")];
    PutRetrievalProfile => TuneRecall, None, "save a retrieval profile",
        [http("put", "/v1/retrieval-profiles/{name}")];
    DeleteRetrievalProfile => TuneRecall, None, "delete a retrieval profile",
        [http("delete", "/v1/retrieval-profiles/{name}")];
    // A set created with cases also needs what adding cases needs (checked by the use case).
    CreateEvaluationSet => TuneRecall, None, "create an evaluation set",
        [http("post", "/v1/eval-sets"), Console("create_evaluation_set")];
    ListEvaluationSets => TuneRecall, None, "list evaluation sets", [http("get", "/v1/eval-sets")];
    GetEvaluationSet => TuneRecall, None, "read an evaluation set",
        [http("get", "/v1/eval-sets/{set_id}")];
    // A case probes memory content (its query against expected ids or texts).
    AddEvaluationCases => TuneRecall + ReadMemories, Content, "add evaluation cases",
        [http("post", "/v1/eval-sets/{set_id}/cases"), http("post", "/v1/eval-sets/{set_id}/cases/import")];
    ListEvaluationCases => TuneRecall + ReadMemories, Content, "list evaluation cases",
        [http("get", "/v1/eval-sets/{set_id}/cases")];
    StartEvaluationRun => TuneRecall, None, "start an evaluation run",
        [http("post", "/v1/eval-sets/{set_id}/runs"), Console("run_evaluation_set")];
    ListEvaluationRuns => TuneRecall, ForReaders, "list evaluation runs",
        [http("get", "/v1/eval-sets/{set_id}/runs")];
    GetEvaluationRun => TuneRecall, ForReaders, "read an evaluation run",
        [http("get", "/v1/eval-sets/{set_id}/runs/{run_id}")];

    ListApiKeys => ManageApiKeys, None, "list API keys", [http("get", "/v1/keys"), Console("list_keys")];
    CreateApiKey => ManageApiKeys, None, "create an API key",
        [http("post", "/v1/keys"), Console("create_key"), Cli("keys create")];
    RevokeApiKey => ManageApiKeys, None, "revoke an API key",
        [http("post", "/v1/keys/{key_id}/revoke"), Console("revoke_key")];
    RollApiKey => ManageApiKeys, None, "roll an API key",
        [http("post", "/v1/keys/{key_id}/roll"), Console("roll_key")];
    // Part of revoking and rolling, checked when the key was made by someone else: a
    // console developer manages only the keys they made.
    ManageOthersApiKeys => ManageApiKeys + ManageOthersApiKeys, None, "manage an API key someone else made", [];
    MintEndUserToken => MintEndUserTokens, None, "mint an end-user token",
        [http("post", "/v1/end-user-tokens")];
    RotateEndUserSigningKey => ManageApiKeys, None, "rotate the end-user signing key",
        [http("post", "/v1/end-user-tokens/rotate-signing-key")];

    ListAuditEvents => ReadAuditLog, None, "read the audit log", [http("get", "/v1/audit"), Console("audit_log")];
    VerifyAuditChain => ReadAuditLog, None, "verify the audit chain", [http("post", "/v1/audit/verify"), Console("audit_log")];
    // Part of a verification asked to start from the first event: it re-hashes every
    // project's events, so it is the organization's (console owners, admins, compliance).
    VerifyWholeAuditChain => ReadAuditLog + ManageOrganizationSubjectData, None,
        "recompute the organization's whole audit chain", [];
    ExportAuditEvents => ReadAuditLog, None, "export the audit log",
        [http("get", "/v1/audit/export"), Console("export_audit_csv")];

    GetProjectSettings => ManageProjectSettings, None, "read the project's settings",
        [http("get", "/v1/project/settings"), Console("governance_settings"),
         mem0("get", "/api/v1/orgs/organizations/{org_id}/projects/{project_id}/")];
    UpdateProjectSettings => ManageProjectSettings, None, "change the project's settings",
        [http("patch", "/v1/project/settings"), Console("save_governance_settings")];
    // Part of a settings change that names a retention: retention deletes.
    ChangeRetention => ManageProjectSettings + DeleteMemories, None, "change how long memories and records are kept", [];
    PreviewRetention => ManageProjectSettings, None, "preview retention",
        [http("get", "/v1/retention/preview"), Console("governance_settings")];
    SweepRetention => ManageProjectSettings + DeleteMemories, None, "sweep expired memories now",
        [Console("sweep_retention_now"), Job("retention-sweeper")];
    RequestConsolidation => ManageProjectSettings, None, "request a consolidation",
        [http("post", "/v1/consolidations")];
    GetTask => ManageSubjectData, ForReaders, "read a task's status",
        [http("get", "/v1/tasks/{task_id}"), Console("erasure_status")];
    // Finding subjects by a metadata value also needs `ListMemories` (its use case asks).
    SummarizeSubject => ManageSubjectData, None, "summarise a subject's data",
        [Console("subject_summary"), Console("find_subjects")];
    RequestSubjectErasure => ManageSubjectData + DeleteMemories, None, "erase a subject's data",
        [http("post", "/v1/subjects/{user_id}/erasure"), Console("request_erasure")];
    ExportSubject => ManageSubjectData + ReadMemories, Content, "export a subject's data",
        [http("get", "/v1/subjects/{user_id}/export"), Console("export_subject")];
    RequestOrganizationSubjectErasure => ManageOrganizationSubjectData + DeleteMemories, None,
        "erase a subject's data in every project of the organization",
        [http("post", "/v1/organization/subjects/{user_id}/erasure"), Console("request_organization_erasure")];

    // The operator's background jobs: each runs one project's queued work through the same
    // table, so a job holds what its work needs and nothing is done without a row.
    IngestFile => WriteMemories, None, "store an uploaded file's chunks as memories",
        [Job("file-ingest")];
    DeriveFromMessages => WriteMemories, None, "derive memories from session messages",
        [Job("message-derivation")];
    ConsolidateMemories => WriteMemories + DeleteMemories, None, "consolidate a project's memories",
        [Job("consolidation-runner")];
    RunEvaluation => TuneRecall, None, "run a queued evaluation",
        [Job("evaluation-runner")];
    ReembedProject => WriteMemories, None, "move a project's memories to another embedding model",
        [Job("reembedding-runner")];
    EraseSubject => ManageSubjectData + DeleteMemories, None, "run a queued subject erasure",
        [Job("erasure-runner")];
    EraseOrganizationSubject => ManageOrganizationSubjectData + DeleteMemories, None,
        "run a queued erasure across the organization", [Job("erasure-runner")];

    // The operator's commands: the deployment's tenants, accounts and prices.
    CreateOrganization => OperateDeployment, None, "create an organization with its owner",
        [Cli("admin create-organization")];
    CreateProject => OperateDeployment, None, "create a project with its first key",
        [Cli("admin create-project")];
    CreateMember => OperateDeployment, None, "add a console account to an organization",
        [Cli("admin create-member")];
    SetPrice => OperateDeployment, None, "add a price to the price book",
        [Cli("admin set-price")];

    GetUsage => ReadUsage, None, "read usage", [http("get", "/v1/usage"), Console("usage_overview")];
    GetCosts => ReadUsage, None, "read costs", [http("get", "/v1/costs"), Console("usage_overview")];
    GetSpendLimits => ReadUsage, None, "read spend limits",
        [http("get", "/v1/project/limits"), Console("usage_overview")];
    PutSpendLimits => ManageSpendLimits, None, "change spend limits",
        [http("put", "/v1/project/limits"), Console("save_spend_limits")];

    GetPrices => ReadPrices, None, "read the prices that apply",
        [http("get", "/v1/prices"), Console("price_book")];
    AddOrganizationPrice => ManagePrices, None, "add a price to the organization's price book",
        [Console("add_organization_price")];
    WithdrawOrganizationPrice => ManagePrices, None, "withdraw a scheduled price of the organization",
        [Console("withdraw_organization_price")];
    GetStatement => ReadUsage, None, "read a project's monthly statement",
        [http("get", "/v1/statements/{month}")];
    CloseStatements => ReadUsage, None, "store each project's statement of the month that closed",
        [Job("statement-closer")];
    GetOrganizationStatement => ReadUsage, None, "read the organization's monthly statement",
        [Console("organization_statement"), Console("organization_statement_csv")];

    ListMembers => ManageMembers, None, "list console members", [Console("list_members")];
    InviteMember => ManageMembers, None, "invite a console member", [Console("invite_member")];
    ChangeMemberRole => ManageMembers, None, "change a member's role", [Console("change_member_role")];
    RemoveMember => ManageMembers, None, "remove a console member",
        [Console("remove_member"), Console("revoke_invitation")];
}

impl Operation {
    /// The operation served at `method` and `path` (the OpenAPI path template) of the HTTP
    /// API, if any.
    pub fn for_http(method: &str, path: &str) -> Option<Operation> {
        OPERATIONS.iter().find_map(|rule| {
            rule.doors
                .iter()
                .any(|door| {
                    matches!(door, Door::Http { method: door_method, path: door_path }
                        if door_method.eq_ignore_ascii_case(method) && *door_path == path)
                })
                .then_some(rule.operation)
        })
    }
}

/// The scope lattice as one Markdown table, computed from the permission table: for each
/// key scope, the end-user token and each console role, what it can read, write, delete and
/// mint. The docs carry it verbatim (a test compares them), so they cannot drift.
pub fn scope_table_markdown() -> String {
    let yes_no = |held: bool| if held { "yes" } else { "no" };
    let mut rows = vec![
        "| principal | reads content | writes | deletes | verifies | erases, changes retention | exports a subject | admin work (keys, audit, settings, usage, recall tuning) | mints API keys with | rolls or revokes |".to_string(),
        "|---|---|---|---|---|---|---|---|---|---|".to_string(),
    ];
    let mut principals: Vec<(String, PrincipalKind, Vec<String>)> = ApiScope::ALL
        .into_iter()
        .map(|scope| {
            let scopes = ApiScopes::from_scopes([scope]);
            (
                format!("key `{}`", scope.as_str()),
                PrincipalKind::ApiKey(scopes.clone()),
                scopes.names(),
            )
        })
        .collect();
    principals.push((
        "end-user token (read, write)".to_string(),
        PrincipalKind::EndUserToken(ApiScopes::from_scopes([
            ApiScope::MemoriesRead,
            ApiScope::MemoriesWrite,
        ])),
        Vec::new(),
    ));
    for role in ConsoleRole::ALL {
        principals.push((
            format!("console `{}`", role.as_str()),
            PrincipalKind::ConsoleMember(role),
            role.grantable_api_scopes().names(),
        ));
    }
    for (name, kind, grantable) in principals {
        let may = |operation: Operation| authorize(&kind, operation).is_ok();
        let reads = kind.holds(Permission::ReadMemories);
        let rolls = if may(Operation::RollApiKey) && may(Operation::ManageOthersApiKeys) {
            "any key within what it mints"
        } else if may(Operation::RollApiKey) {
            "only keys it made"
        } else {
            "no"
        };
        let mints = if !may(Operation::CreateApiKey) || grantable.is_empty() {
            "no".to_string()
        } else {
            grantable
                .iter()
                .map(|scope| format!("`{scope}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let reads = if reads {
            "yes"
        } else {
            "no: content-free answers"
        };
        rows.push(format!(
            "| {name} | {reads} | {} | {} | {} | {} | {} | {} | {mints} | {rolls} |",
            yes_no(may(Operation::AddMemories)),
            yes_no(may(Operation::DeleteMemory)),
            yes_no(may(Operation::VerifyMemory)),
            yes_no(may(Operation::RequestSubjectErasure) && may(Operation::ChangeRetention)),
            yes_no(may(Operation::ExportSubject)),
            yes_no(may(Operation::ListAuditEvents) || may(Operation::GetUsage)),
        ));
    }
    rows.join("\n") + "\n"
}

/// HTTP operations in the table that no server serves yet (their use case is an open
/// issue): the OpenAPI check leaves them out.
pub const RESERVED_HTTP_OPERATIONS: &[Operation] = &[];

/// The console functions a member of `role` may use, in table order: each `Console` door
/// whose first operation (the row that names it first: the function's own) needs only
/// permissions the role holds. The console offers a page only when its function is here.
pub fn console_functions_for(role: ConsoleRole) -> Vec<&'static str> {
    let member = PrincipalKind::ConsoleMember(role);
    let mut seen: Vec<&'static str> = Vec::new();
    let mut allowed = Vec::new();
    for rule in OPERATIONS {
        for door in rule.doors {
            let Door::Console(function) = door else {
                continue;
            };
            if seen.contains(function) {
                continue;
            }
            seen.push(function);
            if rule
                .operation
                .required_permissions()
                .iter()
                .all(|permission| member.holds(*permission))
            {
                allowed.push(*function);
            }
        }
    }
    allowed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_end_user_token_never_holds_admin_work_nor_mints_tokens() {
        let token = PrincipalKind::EndUserToken(ApiScopes::all());
        for permission in Permission::ALL {
            let expected = matches!(
                permission,
                Permission::ReadMemories | Permission::WriteMemories | Permission::DeleteMemories
            );
            assert_eq!(token.holds(permission), expected, "{permission}");
        }
        let refusal = authorize(&token, Operation::ListApiKeys).err();
        assert!(refusal.is_some_and(|refusal| refusal.message.contains("end-user token")));
    }

    #[test]
    fn a_key_holds_what_its_scopes_grant_and_mints_tokens() {
        let read_only = PrincipalKind::ApiKey(ApiScopes::from_scopes([ApiScope::MemoriesRead]));
        assert!(authorize(&read_only, Operation::SearchMemories).is_ok());
        assert!(authorize(&read_only, Operation::MintEndUserToken).is_ok());
        let refusal = authorize(&read_only, Operation::AddMemories).err();
        assert!(refusal.is_some_and(|refusal| refusal.message.contains("`memories:write` scope")));
        let admin = PrincipalKind::ApiKey(ApiScopes::from_scopes([ApiScope::Admin]));
        assert!(authorize(&admin, Operation::GetUsage).is_ok());
        // Admin work is not memory content: an admin-only key cannot search.
        assert!(authorize(&admin, Operation::SearchMemories).is_err());
    }

    #[test]
    fn an_operation_whose_answer_is_content_needs_read() {
        for rule in OPERATIONS {
            let needs_read = rule
                .operation
                .required_permissions()
                .contains(&Permission::ReadMemories);
            assert_eq!(
                rule.content == AnswerContent::Content,
                needs_read,
                "{:?}: an answer that is content needs `ReadMemories`, and only such an answer",
                rule.operation
            );
        }
        let admin = PrincipalKind::ApiKey(ApiScopes::from_scopes([ApiScope::Admin]));
        assert!(authorize(&admin, Operation::ExportSubject).is_err());
        assert!(authorize(&admin, Operation::RequestSubjectErasure).is_err());
        assert!(authorize(&admin, Operation::ChangeRetention).is_err());
        let developer = PrincipalKind::ConsoleMember(ConsoleRole::Developer);
        assert!(authorize(&developer, Operation::RollApiKey).is_ok());
        assert!(authorize(&developer, Operation::ManageOthersApiKeys).is_err());
    }

    #[test]
    fn every_http_door_names_one_operation() {
        let mut seen = std::collections::HashSet::new();
        for rule in OPERATIONS {
            for door in rule.doors {
                if let Door::Http { method, path } = door {
                    assert!(
                        seen.insert((*method, *path)),
                        "{method} {path} is in the table twice"
                    );
                    assert_eq!(Operation::for_http(method, path), Some(rule.operation));
                }
            }
        }
    }
}
