//! The one permission table: every operation of every front door (HTTP API, console, CLI,
//! and rows reserved for the Mem0-compatible API and MCP), the permission it needs, and
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
    /// Mint end-user tokens: held by every project API key, never by a token.
    MintEndUserTokens,
    /// List, create, revoke and roll the project's API keys; rotate the end-user signing key.
    ManageApiKeys,
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
}

impl Permission {
    pub const ALL: [Permission; 13] = [
        Permission::ReadMemories,
        Permission::WriteMemories,
        Permission::DeleteMemories,
        Permission::MintEndUserTokens,
        Permission::ManageApiKeys,
        Permission::ReadAuditLog,
        Permission::ManageProjectSettings,
        Permission::ManageSubjectData,
        Permission::ReadUsage,
        Permission::ManageSpendLimits,
        Permission::TuneRecall,
        Permission::ManageMembers,
        Permission::ManageOrganizationSubjectData,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Permission::ReadMemories => "read_memories",
            Permission::WriteMemories => "write_memories",
            Permission::DeleteMemories => "delete_memories",
            Permission::MintEndUserTokens => "mint_end_user_tokens",
            Permission::ManageApiKeys => "manage_api_keys",
            Permission::ReadAuditLog => "read_audit_log",
            Permission::ManageProjectSettings => "manage_project_settings",
            Permission::ManageSubjectData => "manage_subject_data",
            Permission::ReadUsage => "read_usage",
            Permission::ManageSpendLimits => "manage_spend_limits",
            Permission::TuneRecall => "tune_recall",
            Permission::ManageMembers => "manage_members",
            Permission::ManageOrganizationSubjectData => "manage_organization_subject_data",
        }
    }

    /// The project API key scope that grants this permission; `None` when no key scope does
    /// (every key mints end-user tokens; members and organization data are not a project
    /// key's business).
    pub const fn key_scope(self) -> Option<ApiScope> {
        match self {
            Permission::ReadMemories => Some(ApiScope::MemoriesRead),
            Permission::WriteMemories => Some(ApiScope::MemoriesWrite),
            Permission::DeleteMemories => Some(ApiScope::MemoriesDelete),
            Permission::ManageApiKeys
            | Permission::ReadAuditLog
            | Permission::ManageProjectSettings
            | Permission::ManageSubjectData
            | Permission::ReadUsage
            | Permission::ManageSpendLimits
            | Permission::TuneRecall => Some(ApiScope::Admin),
            Permission::MintEndUserTokens
            | Permission::ManageMembers
            | Permission::ManageOrganizationSubjectData => None,
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
            | Permission::ReadAuditLog
            | Permission::ManageProjectSettings
            | Permission::ManageSubjectData
            | Permission::ManageOrganizationSubjectData => {
                matches!(role, Owner | Admin | Compliance)
            }
            Permission::ManageApiKeys => matches!(role, Owner | Admin | Developer),
            Permission::ReadUsage => matches!(role, Owner | Admin | Analyst),
            Permission::ManageSpendLimits | Permission::ManageMembers => {
                matches!(role, Owner | Admin)
            }
            Permission::TuneRecall => matches!(role, Owner | Admin | Compliance | Analyst),
            // A console member mints end-user tokens through a key, not by themselves.
            Permission::MintEndUserTokens => false,
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
            PrincipalKind::ApiKey(scopes) => {
                permission == Permission::MintEndUserTokens
                    || permission
                        .key_scope()
                        .is_some_and(|scope| scopes.contains(scope))
            }
            // A token never holds `admin` (minting refuses it) and never mints tokens.
            PrincipalKind::EndUserToken(scopes) => permission
                .key_scope()
                .is_some_and(|scope| scope != ApiScope::Admin && scopes.contains(scope)),
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

/// Check `operation` against the table for `principal`.
pub fn authorize(principal: &PrincipalKind, operation: Operation) -> Result<(), PermissionDenied> {
    let permission = operation.required_permission();
    if principal.holds(permission) {
        return Ok(());
    }
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
    /// Reserved: the Mem0 Platform–compatible API (method and path).
    Mem0 {
        method: &'static str,
        path: &'static str,
    },
    /// Reserved: an MCP tool name.
    Mcp(&'static str),
}

macro_rules! operations {
    ($($operation:ident => $permission:ident, $summary:literal, [$($door:expr),* $(,)?];)*) => {
        /// Every use case a principal can ask for.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Operation {
            $($operation,)*
        }

        /// The table: operation, required permission, what it does (for messages), doors.
        pub const OPERATIONS: &[OperationRule] = &[
            $(OperationRule {
                operation: Operation::$operation,
                permission: Permission::$permission,
                summary: $summary,
                doors: &[$($door),*],
            },)*
        ];

        impl Operation {
            pub const fn required_permission(self) -> Permission {
                match self {
                    $(Operation::$operation => Permission::$permission,)*
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

/// One row of the table.
#[derive(Clone, Copy, Debug)]
pub struct OperationRule {
    pub operation: Operation,
    pub permission: Permission,
    pub summary: &'static str,
    pub doors: &'static [Door],
}

const fn http(method: &'static str, path: &'static str) -> Door {
    Door::Http { method, path }
}

const fn mem0(method: &'static str, path: &'static str) -> Door {
    Door::Mem0 { method, path }
}

use Door::{Cli, Console, Mcp};

operations! {
    AddMemories => WriteMemories, "add memories",
        [http("post", "/v1/memories"), mem0("post", "/v1/memories/"), Mcp("add_memory")];
    ListMemories => ReadMemories, "list memories",
        [http("get", "/v1/memories"), Console("list_memories"), mem0("get", "/v1/memories/"), Mcp("get_memories")];
    GetMemory => ReadMemories, "read a memory",
        [http("get", "/v1/memories/{memory_id}"), Console("memory_detail"), mem0("get", "/v1/memories/{memory_id}/")];
    EditMemory => WriteMemories, "edit a memory",
        [http("patch", "/v1/memories/{memory_id}"), Console("correct_memory"), mem0("put", "/v1/memories/{memory_id}/")];
    DeleteMemory => DeleteMemories, "delete a memory",
        [http("delete", "/v1/memories/{memory_id}"), Console("delete_memory"), mem0("delete", "/v1/memories/{memory_id}/"), Mcp("delete_memory")];
    MemoryHistory => ReadMemories, "read a memory's history",
        [http("get", "/v1/memories/{memory_id}/history"), Console("memory_detail"), mem0("get", "/v1/memories/{memory_id}/history/")];
    SearchMemories => ReadMemories, "search memories",
        [http("post", "/v1/memories/search"), Console("list_memories"), mem0("post", "/v2/memories/search/"), Mcp("search_memories")];
    BulkDeleteMemories => DeleteMemories, "delete memories in bulk",
        [Console("bulk_delete"), Console("preview_bulk_delete")];
    SetMemoryFlags => ManageProjectSettings, "set a memory's flags",
        [http("put", "/v1/memories/{memory_id}/flags"), Console("set_memory_flags")];

    GiveMemoryFeedback => WriteMemories, "give feedback on a memory",
        [http("post", "/v1/memories/{memory_id}/feedback")];
    ListMemoryFeedback => ReadMemories, "list a memory's feedback",
        [http("get", "/v1/memories/{memory_id}/feedback")];
    GiveRecallFeedback => WriteMemories, "give feedback on a recall",
        [http("post", "/v1/recalls/{recall_id}/feedback")];
    ListRecallFeedback => ReadMemories, "list a recall's feedback",
        [http("get", "/v1/recalls/{recall_id}/feedback")];

    UploadFile => WriteMemories, "upload a file", [http("post", "/v1/files")];
    GetFile => ReadMemories, "read a file's status", [http("get", "/v1/files/{file_id}")];
    DeleteFile => DeleteMemories, "delete a file", [http("delete", "/v1/files/{file_id}")];

    AddMessages => WriteMemories, "add session messages",
        [http("post", "/v1/sessions/{session_id}/messages")];
    ListMessages => ReadMemories, "list session messages",
        [http("get", "/v1/sessions/{session_id}/messages")];
    GetSessionState => ReadMemories, "read session state",
        [http("get", "/v1/sessions/{session_id}/state/{key}")];
    ListSessionState => ReadMemories, "list session state",
        [http("get", "/v1/sessions/{session_id}/state")];
    PutSessionState => WriteMemories, "write session state",
        [http("put", "/v1/sessions/{session_id}/state/{key}")];
    DeleteSessionState => DeleteMemories, "delete session state",
        [http("delete", "/v1/sessions/{session_id}/state/{key}")];

    GetRecallEvent => ReadMemories, "read a recall event",
        [http("get", "/v1/recalls/{recall_id}")];
    // The console's view of one recall: its figures; query and content only for those who
    // also hold `ReadMemories`.
    InspectRecallEvent => TuneRecall, "inspect a recall's figures", [Console("recall_event")];
    GetRecallMetrics => TuneRecall, "read recall metrics",
        [http("get", "/v1/recall-metrics"), Console("recall_dashboard")];
    ListRetrievalProfiles => TuneRecall, "list retrieval profiles",
        [http("get", "/v1/retrieval-profiles")];
    GetRetrievalProfile => TuneRecall, "read a retrieval profile",
        [http("get", "/v1/retrieval-profiles/{name}")];
    PutRetrievalProfile => TuneRecall, "save a retrieval profile",
        [http("put", "/v1/retrieval-profiles/{name}")];
    DeleteRetrievalProfile => TuneRecall, "delete a retrieval profile",
        [http("delete", "/v1/retrieval-profiles/{name}")];
    CreateEvaluationSet => TuneRecall, "create an evaluation set",
        [http("post", "/v1/eval-sets"), Console("create_evaluation_set")];
    ListEvaluationSets => TuneRecall, "list evaluation sets", [http("get", "/v1/eval-sets")];
    GetEvaluationSet => TuneRecall, "read an evaluation set",
        [http("get", "/v1/eval-sets/{set_id}")];
    AddEvaluationCases => TuneRecall, "add evaluation cases",
        [http("post", "/v1/eval-sets/{set_id}/cases"), http("post", "/v1/eval-sets/{set_id}/cases/import")];
    ListEvaluationCases => TuneRecall, "list evaluation cases",
        [http("get", "/v1/eval-sets/{set_id}/cases")];
    StartEvaluationRun => TuneRecall, "start an evaluation run",
        [http("post", "/v1/eval-sets/{set_id}/runs"), Console("run_evaluation_set")];
    ListEvaluationRuns => TuneRecall, "list evaluation runs",
        [http("get", "/v1/eval-sets/{set_id}/runs")];
    GetEvaluationRun => TuneRecall, "read an evaluation run",
        [http("get", "/v1/eval-sets/{set_id}/runs/{run_id}")];

    ListApiKeys => ManageApiKeys, "list API keys", [http("get", "/v1/keys"), Console("list_keys")];
    CreateApiKey => ManageApiKeys, "create an API key",
        [http("post", "/v1/keys"), Console("create_key"), Cli("keys create")];
    RevokeApiKey => ManageApiKeys, "revoke an API key",
        [http("post", "/v1/keys/{key_id}/revoke"), Console("revoke_key")];
    RollApiKey => ManageApiKeys, "roll an API key",
        [http("post", "/v1/keys/{key_id}/roll"), Console("roll_key")];
    MintEndUserToken => MintEndUserTokens, "mint an end-user token",
        [http("post", "/v1/end-user-tokens")];
    RotateEndUserSigningKey => ManageApiKeys, "rotate the end-user signing key",
        [http("post", "/v1/end-user-tokens/rotate-signing-key")];

    ListAuditEvents => ReadAuditLog, "read the audit log", [http("get", "/v1/audit"), Console("audit_log")];
    VerifyAuditChain => ReadAuditLog, "verify the audit chain", [http("post", "/v1/audit/verify"), Console("audit_log")];
    ExportAuditEvents => ReadAuditLog, "export the audit log",
        [http("get", "/v1/audit/export"), Console("export_audit_csv")];

    GetProjectSettings => ManageProjectSettings, "read the project's settings",
        [http("get", "/v1/project/settings"), Console("governance_settings")];
    UpdateProjectSettings => ManageProjectSettings, "change the project's settings",
        [http("patch", "/v1/project/settings"), Console("save_governance_settings")];
    PreviewRetention => ManageProjectSettings, "preview retention",
        [http("get", "/v1/retention/preview"), Console("governance_settings")];
    SweepRetention => ManageProjectSettings, "sweep expired memories now",
        [Console("sweep_retention_now")];
    RequestConsolidation => ManageProjectSettings, "request a consolidation",
        [http("post", "/v1/consolidations")];
    GetTask => ManageSubjectData, "read a task's status",
        [http("get", "/v1/tasks/{task_id}"), Console("erasure_status")];
    SummarizeSubject => ManageSubjectData, "summarise a subject's data",
        [Console("subject_summary")];
    RequestSubjectErasure => ManageSubjectData, "erase a subject's data",
        [http("post", "/v1/subjects/{user_id}/erasure"), Console("request_erasure")];
    ExportSubject => ManageSubjectData, "export a subject's data",
        [http("get", "/v1/subjects/{user_id}/export"), Console("export_subject")];
    RequestOrganizationSubjectErasure => ManageOrganizationSubjectData,
        "erase a subject's data in every project of the organization",
        [http("post", "/v1/organization/subjects/{user_id}/erasure"), Console("request_organization_erasure")];

    GetUsage => ReadUsage, "read usage", [http("get", "/v1/usage"), Console("usage_overview")];
    GetCosts => ReadUsage, "read costs", [http("get", "/v1/costs"), Console("usage_overview")];
    GetSpendLimits => ReadUsage, "read spend limits",
        [http("get", "/v1/project/limits"), Console("usage_overview")];
    PutSpendLimits => ManageSpendLimits, "change spend limits",
        [http("put", "/v1/project/limits"), Console("save_spend_limits")];

    ListMembers => ManageMembers, "list console members", [Console("list_members")];
    InviteMember => ManageMembers, "invite a console member", [Console("invite_member")];
    ChangeMemberRole => ManageMembers, "change a member's role", [Console("change_member_role")];
    RemoveMember => ManageMembers, "remove a console member",
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

/// HTTP operations in the table that no server serves yet (their use case is an open
/// issue): the OpenAPI check leaves them out.
pub const RESERVED_HTTP_OPERATIONS: &[Operation] = &[];

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
