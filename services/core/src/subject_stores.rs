//! The registry of subject data: every store that holds anything about an end-user, the
//! tables and columns that find the subject's rows, and the tables that hold none (with why).
//! Storage's erasure, verification and export walk it; the policy (retention) reads it.

/// A store that holds something about an end-user.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SubjectStore {
    Memories,
    History,
    Messages,
    SessionState,
    Files,
    Feedback,
    RecallEvents,
    /// Agent runs, their steps and the uses of memories they and the subject's recalls made.
    Runs,
    EvaluationCases,
    EvaluationRuns,
    TaskResults,
    Idempotency,
    Index,
    QueryCache,
    /// Daily usage counters that name the end-user (by id, until erased).
    Usage,
}

/// Where a store keeps the subject's rows in the database.
#[derive(Clone, Copy, Debug)]
pub struct SubjectTable {
    pub table: &'static str,
    /// Columns that hold the subject's id, or content about them.
    pub subject_columns: &'static [&'static str],
    /// JSON inside those columns that names or quotes the subject.
    pub json_paths: &'static [&'static str],
}

/// One store: its name in receipts and exports, its tables, and how its rows are found.
#[derive(Clone, Copy, Debug)]
pub struct SubjectStoreDeclaration {
    pub store: SubjectStore,
    /// The store's name in the erasure receipt and the export summary.
    pub name: &'static str,
    /// The `type` of its export lines; `None` when its records are exported as part of
    /// another store's (`exported_within`).
    pub export_type: Option<&'static str>,
    pub tables: &'static [SubjectTable],
    /// How the subject's records are found, erased and counted.
    pub how: &'static str,
    /// How long the store keeps records, and what removes them when that runs out.
    pub retention: StoreRetention,
}

/// How long a store keeps records, and what removes them when that runs out. The retention
/// sweep walks the registry: a store with `ProjectDays` is swept by age.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreRetention {
    /// Per memory kind (`retention_days`) and each memory's own `expires_at`.
    MemoryKinds,
    /// The project's `store_retention_days.<name>` (unset: kept until deleted or erased;
    /// recall events: `recall_event_retention_days`, default 30), counted from `age_column`.
    ProjectDays { age_column: &'static str },
    /// Goes with the records it belongs to, for the reason given.
    WithItsSource(&'static str),
    /// Kept until deleted or erased, for the reason given.
    UntilDeleted(&'static str),
}

impl SubjectStore {
    /// Every store, in erasure order: what is derived from the subject's memories and cases
    /// (stored answers, task results, per-case results) before them, so an erasure that
    /// fails halfway and is retried still finds the ids those name; the sources of new
    /// memories (messages, files) before the memories, so a derivation or ingest cannot
    /// write one behind the erasure; the index after the rows.
    pub const ALL: [SubjectStore; 15] = [
        SubjectStore::Idempotency,
        SubjectStore::TaskResults,
        SubjectStore::EvaluationRuns,
        SubjectStore::Messages,
        SubjectStore::Files,
        SubjectStore::SessionState,
        SubjectStore::Feedback,
        SubjectStore::RecallEvents,
        SubjectStore::Runs,
        SubjectStore::EvaluationCases,
        SubjectStore::Memories,
        SubjectStore::History,
        SubjectStore::Usage,
        SubjectStore::Index,
        SubjectStore::QueryCache,
    ];

    /// The store a receipt, export or setting names `name`.
    pub fn named(name: &str) -> Option<SubjectStore> {
        Self::ALL
            .into_iter()
            .find(|store| store.declaration().name == name)
    }

    /// The stores a project sets a retention in days for (`store_retention_days`), recall
    /// events included.
    pub fn swept_by_age() -> impl Iterator<Item = SubjectStore> {
        Self::ALL.into_iter().filter(|store| {
            matches!(
                store.declaration().retention,
                StoreRetention::ProjectDays { .. }
            )
        })
    }

    pub fn declaration(self) -> SubjectStoreDeclaration {
        let declare = |name, export_type, tables, how, retention| SubjectStoreDeclaration {
            store: self,
            name,
            export_type,
            tables,
            how,
            retention,
        };
        match self {
            SubjectStore::Memories => declare(
                "memories",
                Some("memory"),
                &[SubjectTable {
                    table: "memories",
                    subject_columns: &["user_id", "content", "metadata", "embedding"],
                    json_paths: &[],
                }],
                "every memory row with the subject's user_id, in every state; erased in batches with a content-free tombstone each",
                StoreRetention::MemoryKinds,
            ),
            SubjectStore::History => declare(
                "history",
                None,
                &[SubjectTable {
                    table: "memory_history",
                    subject_columns: &["memory_id", "content", "reason"],
                    json_paths: &[],
                }],
                "the versions of the subject's memories (by memory_id); exported inside each memory line, erased with its memory",
                StoreRetention::WithItsSource("versions are removed with their memory"),
            ),
            SubjectStore::Messages => declare(
                "messages",
                Some("message"),
                &[SubjectTable {
                    table: "session_messages",
                    subject_columns: &["user_id", "content", "name"],
                    json_paths: &[],
                }],
                "conversation messages with the subject's user_id",
                StoreRetention::ProjectDays {
                    age_column: "created_at",
                },
            ),
            SubjectStore::SessionState => declare(
                "session_state",
                Some("state"),
                &[SubjectTable {
                    table: "session_state",
                    subject_columns: &["user_id", "owner", "value"],
                    json_paths: &[],
                }],
                "session values with the subject's user_id",
                StoreRetention::ProjectDays {
                    age_column: "updated_at",
                },
            ),
            SubjectStore::Files => declare(
                "files",
                Some("file"),
                &[SubjectTable {
                    table: "files",
                    subject_columns: &["user_id", "name", "body"],
                    json_paths: &[],
                }],
                "uploaded files with the subject's user_id (their chunks are memories)",
                StoreRetention::ProjectDays {
                    age_column: "updated_at",
                },
            ),
            SubjectStore::Feedback => declare(
                "feedback",
                Some("feedback"),
                &[SubjectTable {
                    table: "feedback",
                    subject_columns: &["user_id", "text", "correction"],
                    json_paths: &["$.correction.content"],
                }],
                "feedback with the subject's user_id",
                StoreRetention::ProjectDays {
                    age_column: "created_at",
                },
            ),
            SubjectStore::RecallEvents => declare(
                "recall_events",
                Some("recall"),
                &[SubjectTable {
                    table: "recall_events",
                    subject_columns: &["user_id", "query_text", "filters", "results"],
                    json_paths: &["$.filters.metadata"],
                }],
                "recall events of searches with the subject's user_id",
                StoreRetention::ProjectDays {
                    age_column: "created_at",
                },
            ),
            SubjectStore::Runs => declare(
                "runs",
                Some("run"),
                &[
                    SubjectTable {
                        table: "agent_runs",
                        subject_columns: &["user_id", "task", "metadata", "outcome"],
                        json_paths: &[],
                    },
                    SubjectTable {
                        table: "run_steps",
                        subject_columns: &["user_id", "detail"],
                        json_paths: &[
                            "$.prompt",
                            "$.completion",
                            "$.arguments",
                            "$.result",
                            "$.text",
                        ],
                    },
                    SubjectTable {
                        table: "memory_uses",
                        subject_columns: &["user_id", "memory_id"],
                        json_paths: &[],
                    },
                ],
                "agent runs with the subject's user_id, their steps (texts only where run capture was full) and the uses of memories by the subject's runs and recalls; a run's steps and uses carry its user_id",
                StoreRetention::ProjectDays {
                    age_column: "created_at",
                },
            ),
            SubjectStore::EvaluationCases => declare(
                "evaluation_cases",
                Some("evaluation_case"),
                &[SubjectTable {
                    table: "eval_cases",
                    subject_columns: &["user_id", "query", "expected_contents", "filters"],
                    json_paths: &["$.filters.metadata"],
                }],
                "labelled queries with the subject's user_id",
                StoreRetention::UntilDeleted(
                    "a test set labelled by the project's staff: removed by deleting its set, or by erasing the subject",
                ),
            ),
            SubjectStore::EvaluationRuns => declare(
                "evaluation_runs",
                Some("evaluation_result"),
                &[SubjectTable {
                    table: "eval_runs",
                    subject_columns: &["metrics", "comparison"],
                    json_paths: &[
                        "$.metrics.per_case[?(@.case_id)]",
                        "$.comparison.second_metrics.per_case[?(@.case_id)]",
                    ],
                }],
                "per-case results (with the query text) of the subject's evaluation cases, by case id; erasure removes those entries and keeps the run's figures",
                StoreRetention::WithItsSource(
                    "per-case results are removed with their evaluation set, and scrubbed when the subject is erased",
                ),
            ),
            SubjectStore::TaskResults => declare(
                "task_results",
                None,
                &[SubjectTable {
                    table: "tasks",
                    subject_columns: &["subject", "result"],
                    json_paths: &["$..memory_id", "$..content", "$.metrics.per_case"],
                }],
                "results of background tasks that name the subject's memories or evaluation cases (derivations quote content); erasure blanks them. Exported as the memories they describe. An erasure task holds the user_id in subject only until it finishes",
                StoreRetention::UntilDeleted(
                    "the record of a background task; erasing the subject blanks what names them",
                ),
            ),
            SubjectStore::Idempotency => declare(
                "idempotency",
                None,
                &[
                    SubjectTable {
                        table: "idempotency_records",
                        subject_columns: &["idempotency_key", "response_body"],
                        json_paths: &["$.memories[*].user_id", "$.memories[*].content"],
                    },
                    SubjectTable {
                        table: "idempotency_answer_memories",
                        subject_columns: &["user_id", "memory_id"],
                        json_paths: &[],
                    },
                ],
                "stored answers naming the subject (\"user_id\"); erasure blanks them so a retry gets 409 and writes nothing. Exported as the memories they hold",
                StoreRetention::WithItsSource(
                    "stored answers expire with their key, and a deleted, expired or erased memory's content is blanked from them at once",
                ),
            ),
            SubjectStore::Index => declare(
                "index",
                None,
                &[],
                "vector index points with the subject's user_id in their payload; exported as the memories they index",
                StoreRetention::WithItsSource("points are removed with their memory"),
            ),
            SubjectStore::Usage => declare(
                "usage",
                None,
                &[
                    SubjectTable {
                        table: "usage_daily",
                        subject_columns: &["end_user"],
                        json_paths: &[],
                    },
                    SubjectTable {
                        table: "statement_snapshots",
                        subject_columns: &["body"],
                        json_paths: &["$.breakdowns[*].value"],
                    },
                ],
                "daily usage counters (units per credential, channel and agent) and the stored monthly statements' end-user lines that name the subject's user_id; erasure replaces the id by the subject digest and keeps the quantities and amounts, so totals, past reports and closed statements do not change. Not exported: unit counts, no content",
                StoreRetention::UntilDeleted(
                    "billing records: kept for invoices and cost reports; erasing the subject pseudonymizes them",
                ),
            ),
            SubjectStore::QueryCache => declare(
                "query_cache",
                None,
                &[],
                "query embeddings cached in each process, keyed by the project's erasure epoch (whose they are is unknown): erasure raises the epoch and drops the project's entries here, and every other process drops its older ones when it reads the epoch with the project's settings, never answering from them",
                StoreRetention::WithItsSource(
                    "entries are short-lived and dropped when memories change",
                ),
            ),
        }
    }
}

/// Tables that hold nothing about an end-user, each with the reason.
pub const TABLES_WITHOUT_SUBJECT_DATA: &[(&str, &str)] = &[
    (
        "organizations",
        "tenants: names and settings of organizations",
    ),
    ("projects", "projects' names and settings"),
    (
        "console_accounts",
        "staff accounts of the console, not end-users",
    ),
    ("console_sessions", "staff sign-in sessions"),
    ("console_invitations", "invitations of staff"),
    (
        "api_keys",
        "project API keys: labels, scopes, digests of secrets",
    ),
    (
        "index_outbox",
        "ids of memories whose index points must change; no content",
    ),
    (
        "memory_reembeddings",
        "vectors of memories being moved to another embedding model, no text and no user: deleted with their memory (foreign key), at the switch, or when the move is abandoned",
    ),
    (
        "memory_tombstones",
        "id and last version of deleted memories; no content, no user",
    ),
    (
        "audit_events",
        "end-users appear only as keyed digests (with the client address and user agent of their requests); memory events carry ids and content digests",
    ),
    (
        "audit_chain_heads",
        "the newest hash of each organization's audit chain",
    ),
    ("erasure_ledger", "erased subjects as keyed digests"),
    (
        "usage_hourly",
        "metered units per hour and credential (a key; an end-user token counts under the key that minted it, never by end-user)",
    ),
    (
        "llm_calls",
        "model, purpose and token counts of LLM calls; no prompt, no user",
    ),
    ("price_book", "prices per unit"),
    ("budget_alerts", "budget thresholds crossed per month"),
    ("retrieval_profiles", "named search parameters"),
    ("eval_sets", "evaluation sets' names, depth and schedule"),
    ("seaql_migrations", "which migrations ran"),
];
