//! Governance across the stores: PII redaction before anything is stored or embedded, subject
//! erasure with an independent verification and a receipt, the erasure ledger (a file
//! outside the database, replayed after a restore), subject export and retention sweeps.

use crate::{EngineError, IndexApplier};
use chrono::{DateTime, Utc};
use engram_core::audit::{Actor, AuditAction, NewAuditEvent};
use engram_core::pii::{PiiKind, PiiRedaction, mask_pii};
use engram_core::{FieldError, InvalidInput, MemoryId, ProjectScope};
use engram_index::VectorIndex;
use engram_storage::Storage;
use engram_storage::governance::{ExportedMemory, ProjectSettings};
use engram_storage::subject_data::{StoreRetention, SubjectStore};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Contents up to this size are scanned for personal data inline; larger ones on a
/// blocking thread.
const PII_SCAN_INLINE_BYTES: usize = 64 * 1024;

/// Everything live a project holds about one end-user, store by store.
#[derive(Debug)]
pub struct SubjectExport {
    pub memories: Vec<ExportedMemory>,
    pub messages: Vec<engram_storage::conversations::SessionMessage>,
    pub session_state: Vec<engram_storage::session_state::SessionStateEntry>,
    pub files: Vec<engram_storage::files::FileRecord>,
    pub feedback: Vec<engram_storage::feedback::FeedbackRecord>,
    pub recalls: Vec<engram_storage::recall_quality::RecallEventRecord>,
    /// Every run of the subject with its steps.
    pub runs: Vec<(
        engram_core::runs::RunRecord,
        Vec<engram_core::runs::RunStepRecord>,
    )>,
    /// (set id, case) of every evaluation case about the subject.
    pub evaluation_cases: Vec<(uuid::Uuid, engram_storage::recall_quality::EvalCaseRecord)>,
    /// (run id, per-case result) of those cases in the project's runs.
    pub evaluation_results: Vec<(uuid::Uuid, serde_json::Value)>,
}

impl SubjectExport {
    /// How many records the export holds of a store; `None` for a store exported within
    /// another's records (history in memory lines) or not exported (see the registry).
    pub fn exported(&self, store: SubjectStore) -> Option<usize> {
        match store {
            SubjectStore::Memories => Some(self.memories.len()),
            SubjectStore::Messages => Some(self.messages.len()),
            SubjectStore::SessionState => Some(self.session_state.len()),
            SubjectStore::Files => Some(self.files.len()),
            SubjectStore::Feedback => Some(self.feedback.len()),
            SubjectStore::RecallEvents => Some(self.recalls.len()),
            SubjectStore::Runs => Some(self.runs.len()),
            SubjectStore::EvaluationCases => Some(self.evaluation_cases.len()),
            SubjectStore::EvaluationRuns => Some(self.evaluation_results.len()),
            SubjectStore::History
            | SubjectStore::TaskResults
            | SubjectStore::Idempotency
            | SubjectStore::Index
            | SubjectStore::QueryCache
            | SubjectStore::Usage => None,
        }
    }

    /// How many records each exported store holds, by store name: the audit event's details
    /// and the export's summary line.
    pub fn counts(&self) -> serde_json::Map<String, serde_json::Value> {
        SubjectStore::ALL
            .into_iter()
            .filter_map(|store| {
                let count = self.exported(store)?;
                // The summary named messages `session_messages` before the registry did.
                let name = match store {
                    SubjectStore::Messages => "session_messages",
                    SubjectStore::RecallEvents => "recall_events",
                    _ => store.declaration().name,
                };
                Some((name.to_string(), serde_json::Value::from(count)))
            })
            .collect()
    }
}

/// How many memories one erasure transaction removes.
const ERASURE_BATCH: u64 = 1_000;

/// Where erasures are remembered outside the database, and the key that turns an end-user
/// id into a digest (so neither the ledger nor the audit log holds the id itself).
#[derive(Clone, Default)]
pub struct ErasureLedgerSettings {
    pub ledger_path: Option<PathBuf>,
    pub subject_digest_key: Vec<u8>,
}

impl std::fmt::Debug for ErasureLedgerSettings {
    // The digest key is a secret: never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ErasureLedgerSettings")
            .field("ledger_path", &self.ledger_path)
            .finish_non_exhaustive()
    }
}

/// What an erasure removed, how it was verified, and a digest over all of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErasureReceipt {
    pub subject_digest: String,
    pub project_id: String,
    pub request_id: Option<String>,
    pub started_at: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
    pub removed: ErasureCounts,
    pub verification: ErasureVerification,
    /// Every registered store (`engram_storage::subject_data`), in erasure order: what was
    /// removed and what an independent count found left.
    #[serde(default)]
    pub stores: Vec<StoreErasure>,
    /// SHA-256 of this receipt's JSON without the digest field.
    pub digest: String,
}

/// The receipt of an erasure across an organization: each project's part (with the subject's
/// digest there, which differs per project), the removals per store summed, and what an
/// independent count found left once every project was done.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OrganizationErasureReceipt {
    pub organization_id: String,
    pub request_id: Option<String>,
    pub started_at: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
    pub projects: Vec<ProjectErasure>,
    /// Per registered store, summed over the projects.
    pub removed: std::collections::BTreeMap<String, u64>,
    pub verification: OrganizationErasureVerification,
    /// SHA-256 of this receipt's JSON without the digest field.
    pub digest: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectErasure {
    pub project_id: String,
    pub subject_digest: String,
    pub stores: Vec<StoreErasure>,
    /// The digest of that project's own receipt (its audit event and ledger carry it).
    pub receipt_digest: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrganizationErasureVerification {
    pub verified: bool,
    /// Per registered store, summed over the projects (all zero when verified).
    pub remaining: std::collections::BTreeMap<String, u64>,
}

/// One store's line in the receipt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreErasure {
    pub store: String,
    pub removed: u64,
    pub remaining: u64,
}

/// What one erasure learned on its way, for the stores that follow.
#[derive(Default)]
struct ErasureWork {
    erased_memory_ids: Vec<MemoryId>,
    erased_case_ids: Vec<uuid::Uuid>,
    history_entries: u64,
    index_points_before: u64,
    /// The query-cache epoch this erasure's raise wrote: its verification counts the cached
    /// queries from before it (a later erasure's raise must not count a search made after
    /// this one).
    raised_query_cache_epoch: Option<i64>,
}

impl ErasureWork {
    /// The subject's memory and case ids, taken before anything is erased: the derived
    /// stores (history, per-case results, task results) are found through them.
    async fn of_subject(
        storage: &Storage,
        scope: &ProjectScope,
        user_id: &str,
    ) -> Result<Self, EngineError> {
        Ok(Self {
            erased_memory_ids: storage.memory_ids_of_subject(scope, user_id).await?,
            erased_case_ids: storage.eval_case_ids_of_subject(scope, user_id).await?,
            ..Self::default()
        })
    }

    /// Ids whose mention in a stored task result is the subject's data.
    fn erased_ids(&self) -> std::collections::HashSet<String> {
        self.erased_memory_ids
            .iter()
            .map(MemoryId::to_string)
            .chain(self.erased_case_ids.iter().map(uuid::Uuid::to_string))
            .collect()
    }
}

/// Items removed per store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErasureCounts {
    pub memories: u64,
    pub history_entries: u64,
    pub idempotency_records: u64,
    pub index_points: u64,
    /// Uploaded files about the subject (their text and their record).
    #[serde(default)]
    pub files: u64,
    /// Query embeddings cached in this process (all of them: a cached query may be about the
    /// subject, and the cache does not know whose it is).
    pub query_cache_entries: u64,
    /// Session state values that belonged to the subject.
    pub session_state: u64,
    /// Conversation messages the subject's sessions held.
    pub session_messages: u64,
    /// Feedback on the subject's memories (its text may be about them).
    #[serde(default)]
    pub feedback: u64,
    /// Recall events of the subject's searches (their query text names what they asked).
    pub recall_events: u64,
}

/// What independent queries found left afterwards (all zero when verified).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErasureVerification {
    pub verified: bool,
    pub database_memories_remaining: u64,
    pub history_entries_remaining: u64,
    pub idempotency_records_remaining: u64,
    pub index_points_remaining: u64,
    #[serde(default)]
    pub session_messages_remaining: u64,
    #[serde(default)]
    pub feedback_remaining: u64,
    #[serde(default)]
    pub recall_events_remaining: u64,
}

/// One line of the ledger file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct LedgerLine {
    organization_id: String,
    project_id: String,
    subject_digest: String,
    erased_at: DateTime<Utc>,
}

/// What replaying the ledger found and erased again.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LedgerReplay {
    pub entries: u64,
    pub subjects_erased_again: u64,
    pub memories_erased_again: u64,
}

/// The keyed digest of one end-user of one project.
pub fn subject_digest(key: &[u8], project_id: engram_core::ProjectId, user_id: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update((key.len() as u64).to_be_bytes());
    hasher.update(key);
    hasher.update(project_id.as_uuid().as_bytes());
    hasher.update(user_id.as_bytes());
    hex::encode(hasher.finalize())
}

/// The kinds of personal data in memory `index`'s content as one 422 field error.
fn pii_rejection(field: String, kinds: &BTreeSet<PiiKind>) -> FieldError {
    let names: Vec<&str> = kinds.iter().map(|kind| kind.as_str()).collect();
    FieldError::new(
        field,
        format!(
            "contains personal data ({}); this project rejects it (pii_redaction = reject)",
            names.join(", ")
        ),
    )
}

/// The compliance operations: they need the database and the index, never the embedding
/// model, so a worker runs them without loading it.
pub struct DataGovernance {
    storage: Storage,
    index: Arc<dyn VectorIndex>,
    applier: Arc<IndexApplier>,
    ledger: ErasureLedgerSettings,
    query_cache: Option<crate::query_cache::QueryCache>,
    /// This process's recall event queue, flushed before an erasure deletes events.
    recall_recorder: Option<Arc<crate::recall_events::RecallRecorder>>,
    /// This process's usage meter, flushed before an erasure pseudonymizes usage counters.
    usage_meter: std::sync::OnceLock<crate::metering::UsageMeter>,
    /// Woken when this process queues a background task, so its runner starts at once.
    pub task_queued: Arc<tokio::sync::Notify>,
}

impl DataGovernance {
    pub fn new(
        storage: Storage,
        index: Arc<dyn VectorIndex>,
        applier: Arc<IndexApplier>,
        ledger: ErasureLedgerSettings,
    ) -> Self {
        Self {
            storage,
            index,
            applier,
            ledger,
            query_cache: None,
            recall_recorder: None,
            usage_meter: std::sync::OnceLock::new(),
            task_queued: Arc::new(tokio::sync::Notify::new()),
        }
    }

    /// The in-process recall event queue erasure must flush first (a worker has none).
    pub fn with_recall_recorder(
        mut self,
        recorder: Arc<crate::recall_events::RecallRecorder>,
    ) -> Self {
        self.recall_recorder = Some(recorder);
        self
    }

    /// The in-process usage meter erasure must flush first (a worker has none); set once,
    /// when the engine is given its meter.
    pub(crate) fn flush_usage_meter_before_erasure(&self, meter: crate::metering::UsageMeter) {
        let _ = self.usage_meter.set(meter);
    }

    /// The in-process query cache erasure must empty (a worker has none).
    pub fn with_query_cache(mut self, query_cache: crate::query_cache::QueryCache) -> Self {
        self.query_cache = Some(query_cache);
        self
    }

    /// The store of work across projects (task claims, sweeps), for the workers.
    pub fn maintenance_store(&self) -> &engram_storage::MaintenanceStore {
        self.applier.maintenance_store()
    }

    /// Apply the project's PII rule to contents about to be stored: masked in place, or a
    /// 422 naming each offending field (`field_of(index)`) and the kinds found.
    pub(crate) async fn redact_personal_data(
        &self,
        scope: &ProjectScope,
        contents: &mut [String],
        field_of: impl Fn(usize) -> String,
    ) -> Result<(), EngineError> {
        let settings = self.storage.project_settings(scope).await?;
        if settings.pii_redaction == PiiRedaction::Off {
            return Ok(());
        }
        // Linear, but a large request (up to 100 × 32 KiB) is scanned on a blocking thread
        // rather than an async worker that other requests wait on.
        let total_bytes: usize = contents.iter().map(String::len).sum();
        let scanned: Vec<_> = if total_bytes > PII_SCAN_INLINE_BYTES {
            let owned = contents.to_vec();
            tokio::task::spawn_blocking(move || {
                owned.iter().map(|content| mask_pii(content)).collect()
            })
            .await
            .map_err(|error| EngineError::Internal(error.to_string()))?
        } else {
            contents.iter().map(|content| mask_pii(content)).collect()
        };
        match settings.pii_redaction {
            PiiRedaction::Off => Ok(()),
            PiiRedaction::Mask => {
                for (content, (masked, findings)) in contents.iter_mut().zip(scanned) {
                    if !findings.is_empty() {
                        *content = masked;
                    }
                }
                Ok(())
            }
            PiiRedaction::Reject => {
                let mut errors = Vec::new();
                for (index, (_, findings)) in scanned.into_iter().enumerate() {
                    let kinds: BTreeSet<PiiKind> =
                        findings.into_iter().map(|finding| finding.kind).collect();
                    if !kinds.is_empty() {
                        errors.push(pii_rejection(field_of(index), &kinds));
                    }
                }
                if errors.is_empty() {
                    Ok(())
                } else {
                    Err(EngineError::Invalid(InvalidInput(errors)))
                }
            }
        }
    }

    pub(crate) async fn project_settings(
        &self,
        scope: &ProjectScope,
    ) -> Result<ProjectSettings, EngineError> {
        Ok(self.storage.project_settings(scope).await?)
    }

    /// The digest the ledger and audit log use for `user_id` in this project.
    pub(crate) fn subject_digest(&self, scope: &ProjectScope, user_id: &str) -> String {
        let digest = subject_digest(&self.ledger.subject_digest_key, scope.project_id(), user_id);
        // The request's span (which never carries the id itself) names whom it was about by
        // this digest; outside a request span this records nothing.
        tracing::Span::current().record("subject_digest", digest.as_str());
        digest
    }

    /// The erasure runner's work on a claimed subject-erasure task, as the operator of its
    /// project through the permission table.
    pub async fn run_subject_erasure_task(
        &self,
        task: &engram_storage::tasks::ClaimedTask,
        user_id: &str,
        progress: impl FnMut(u64, u64) + Send,
    ) -> Result<ErasureReceipt, EngineError> {
        let principal = engram_core::Principal::operator(task.scope, "subject-erasure")
            .for_request(task.request_id.clone());
        principal.authorize(engram_core::Operation::EraseSubject)?;
        self.erase_subject(
            &task.scope,
            user_id,
            task.request_id.clone(),
            principal.actor(),
            progress,
        )
        .await
    }

    /// The erasure runner's work on a claimed erasure across the task's organization.
    pub async fn run_organization_erasure_task(
        &self,
        task: &engram_storage::tasks::ClaimedTask,
        user_id: &str,
        progress: impl FnMut(u64, u64) + Send,
    ) -> Result<OrganizationErasureReceipt, EngineError> {
        let principal =
            engram_core::Principal::operator(task.scope, "organization-subject-erasure")
                .for_request(task.request_id.clone());
        principal.authorize(engram_core::Operation::EraseOrganizationSubject)?;
        self.erase_subject_in_organization(
            task.scope.organization_id(),
            user_id,
            task.request_id.clone(),
            principal.actor(),
            progress,
        )
        .await
    }

    /// Store the project's statement of the latest closed month, unless it is stored
    /// already (the statement closer's work; a read after closing stores it too). Returns
    /// whether one was stored now.
    pub async fn close_statements(
        &self,
        scope: &ProjectScope,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<bool, EngineError> {
        let principal = engram_core::Principal::operator(*scope, "statement-closer");
        principal.authorize(engram_core::Operation::CloseStatements)?;
        crate::use_cases::usage::statement::close_latest_month(
            &self.storage,
            principal.scope(),
            now,
        )
        .await
    }

    /// The retention sweeper's work on one project; returns how many records it removed.
    pub async fn run_retention_sweep(&self, scope: &ProjectScope) -> Result<u64, EngineError> {
        let principal = engram_core::Principal::operator(*scope, "retention-sweeper");
        principal.authorize(engram_core::Operation::SweepRetention)?;
        self.sweep_retention(principal.scope()).await
    }

    /// Erase everything about one end-user of the project from every store, verify with
    /// independent queries that nothing remains, write the ledger (file, then database and
    /// audit log) and return the receipt. `progress(done, total)` is called per batch.
    /// Refused (`Refused`) while any of the subject's memories is under legal hold.
    pub(crate) async fn erase_subject(
        &self,
        scope: &ProjectScope,
        user_id: &str,
        request_id: Option<String>,
        actor: &Actor,
        progress: impl FnMut(u64, u64) + Send,
    ) -> Result<ErasureReceipt, EngineError> {
        self.erase_subject_with(scope, user_id, request_id, actor, progress, true)
            .await
            .map(|(receipt, _)| receipt)
    }

    /// `append_ledger_line` is false when replaying the ledger, which already names the
    /// subject: a replay after every restore must not grow the file.
    async fn erase_subject_with(
        &self,
        scope: &ProjectScope,
        user_id: &str,
        request_id: Option<String>,
        actor: &Actor,
        mut progress: impl FnMut(u64, u64) + Send,
        append_ledger_line: bool,
    ) -> Result<(ErasureReceipt, ErasureWork), EngineError> {
        let started_at = Utc::now();
        let held = self
            .storage
            .held_memories_of_subject(scope, user_id)
            .await?;
        if !held.is_empty() {
            return Err(EngineError::SubjectHeld { memory_ids: held });
        }
        let total = self.storage.count_subject_memories(scope, user_id).await?;
        let mut work = ErasureWork::of_subject(&self.storage, scope, user_id).await?;
        progress(0, total);
        // Every registered store, in the registry's order: a store added to the registry
        // cannot be left out here (the match below is exhaustive).
        let mut stores = Vec::with_capacity(SubjectStore::ALL.len());
        for store in SubjectStore::ALL {
            let removed = self
                .erase_store(store, scope, user_id, &mut work, total, &mut progress)
                .await?;
            stores.push((store, removed));
        }
        self.index.flush().await?;
        self.applier.work_available.notify_one();
        // Then an independent count of what is left, store by store.
        let mut receipts = Vec::with_capacity(stores.len());
        for (store, removed) in stores {
            let remaining = self.count_remaining(store, scope, user_id, &work).await?;
            receipts.push(StoreErasure {
                store: store.declaration().name.to_string(),
                removed,
                remaining,
            });
        }
        let count_of = |store: SubjectStore, remaining: bool| {
            let name = store.declaration().name;
            receipts
                .iter()
                .find(|receipt| receipt.store == name)
                .map(|receipt| {
                    if remaining {
                        receipt.remaining
                    } else {
                        receipt.removed
                    }
                })
                .unwrap_or(0)
        };
        let removed = ErasureCounts {
            memories: count_of(SubjectStore::Memories, false),
            history_entries: count_of(SubjectStore::History, false),
            idempotency_records: count_of(SubjectStore::Idempotency, false),
            index_points: count_of(SubjectStore::Index, false),
            files: count_of(SubjectStore::Files, false),
            query_cache_entries: count_of(SubjectStore::QueryCache, false),
            session_state: count_of(SubjectStore::SessionState, false),
            session_messages: count_of(SubjectStore::Messages, false),
            feedback: count_of(SubjectStore::Feedback, false),
            recall_events: count_of(SubjectStore::RecallEvents, false),
        };
        let verification = ErasureVerification {
            verified: receipts.iter().all(|receipt| receipt.remaining == 0),
            database_memories_remaining: count_of(SubjectStore::Memories, true),
            history_entries_remaining: count_of(SubjectStore::History, true),
            idempotency_records_remaining: count_of(SubjectStore::Idempotency, true),
            index_points_remaining: count_of(SubjectStore::Index, true),
            session_messages_remaining: count_of(SubjectStore::Messages, true),
            feedback_remaining: count_of(SubjectStore::Feedback, true),
            recall_events_remaining: count_of(SubjectStore::RecallEvents, true),
        };
        let digest_of_subject = self.subject_digest(scope, user_id);
        let mut receipt = ErasureReceipt {
            subject_digest: digest_of_subject.clone(),
            project_id: scope.project_id().to_string(),
            request_id,
            started_at,
            finished_at: Utc::now(),
            removed,
            verification,
            stores: receipts,
            digest: String::new(),
        };
        receipt.digest = sha256_of_json_without_digest(&receipt);
        if !verification.verified {
            let left: Vec<String> = receipt
                .stores
                .iter()
                .filter(|store| store.remaining > 0)
                .map(|store| format!("{} {}", store.remaining, store.store))
                .collect();
            return Err(EngineError::Internal(format!(
                "erasure verification failed: {} remain",
                left.join(", ")
            )));
        }
        if append_ledger_line {
            self.append_to_ledger_file(scope, &digest_of_subject, receipt.finished_at)?;
        }
        let receipt_json = serde_json::to_value(&receipt)
            .map_err(|error| EngineError::Internal(error.to_string()))?;
        self.storage
            .record_erasure(scope, &digest_of_subject, &receipt_json, actor)
            .await?;
        Ok((receipt, work))
    }

    /// Erase one end-user from every project of an organization: refused before anything is
    /// erased while any of their memories in any project is held; then each project in turn
    /// (each with its own receipt, ledger line and audit event), then an independent count of
    /// every registered store in every project. `progress(done, total)` counts projects.
    pub(crate) async fn erase_subject_in_organization(
        &self,
        organization_id: engram_core::OrganizationId,
        user_id: &str,
        request_id: Option<String>,
        actor: &Actor,
        mut progress: impl FnMut(u64, u64) + Send,
    ) -> Result<OrganizationErasureReceipt, EngineError> {
        let started_at = Utc::now();
        let scopes = self
            .maintenance_store()
            .project_scopes_of_organization(organization_id)
            .await?;
        self.refuse_while_held(&scopes, user_id).await?;
        let total = scopes.len() as u64;
        progress(0, total);
        let mut erased = Vec::with_capacity(scopes.len());
        for (done, scope) in scopes.iter().enumerate() {
            let (receipt, work) = self
                .erase_subject_with(scope, user_id, request_id.clone(), actor, |_, _| {}, true)
                .await?;
            erased.push((scope, receipt, work));
            progress(done as u64 + 1, total);
        }
        // Counted again only now, when every project is done: nothing of the subject is left
        // anywhere in the organization at one moment.
        let mut projects = Vec::with_capacity(erased.len());
        let mut removed = std::collections::BTreeMap::<String, u64>::new();
        let mut remaining = std::collections::BTreeMap::<String, u64>::new();
        for (scope, receipt, work) in &erased {
            for store in SubjectStore::ALL {
                let name = store.declaration().name.to_string();
                let left = self.count_remaining(store, scope, user_id, work).await?;
                *remaining.entry(name.clone()).or_default() += left;
                let removed_here = receipt
                    .stores
                    .iter()
                    .find(|line| line.store == name)
                    .map_or(0, |line| line.removed);
                *removed.entry(name).or_default() += removed_here;
            }
            projects.push(ProjectErasure {
                project_id: scope.project_id().to_string(),
                subject_digest: receipt.subject_digest.clone(),
                stores: receipt.stores.clone(),
                receipt_digest: receipt.digest.clone(),
            });
        }
        let verified = remaining.values().all(|left| *left == 0);
        let mut receipt = OrganizationErasureReceipt {
            organization_id: organization_id.to_string(),
            request_id,
            started_at,
            finished_at: Utc::now(),
            projects,
            removed,
            verification: OrganizationErasureVerification {
                verified,
                remaining,
            },
            digest: String::new(),
        };
        receipt.digest = sha256_of_json_without_digest(&receipt);
        if !verified {
            return Err(EngineError::Internal(
                "organization erasure verification failed: something of the subject remains"
                    .to_string(),
            ));
        }
        Ok(receipt)
    }

    /// Refused (`SubjectHeld`, naming them) while any of the subject's memories in these
    /// projects is under legal hold.
    pub(crate) async fn refuse_while_held(
        &self,
        scopes: &[ProjectScope],
        user_id: &str,
    ) -> Result<(), EngineError> {
        for scope in scopes {
            let held = self
                .storage
                .held_memories_of_subject(scope, user_id)
                .await?;
            if !held.is_empty() {
                return Err(EngineError::SubjectHeld { memory_ids: held });
            }
        }
        Ok(())
    }

    /// Erase the subject from one store; returns how many records it removed.
    async fn erase_store(
        &self,
        store: SubjectStore,
        scope: &ProjectScope,
        user_id: &str,
        work: &mut ErasureWork,
        total: u64,
        progress: &mut (impl FnMut(u64, u64) + Send),
    ) -> Result<u64, EngineError> {
        let storage = &self.storage;
        Ok(match store {
            // First the stored answers that name the subject (deleting a memory would also
            // erase the answers naming it, but then they would not be counted as the
            // subject's).
            SubjectStore::Idempotency => {
                storage
                    .erase_subject_idempotency_records(scope, user_id)
                    .await?
            }
            SubjectStore::Memories => {
                // Counted in the index itself, not assumed from the database: some memories
                // may never have been indexed, and a restored index may hold points without
                // rows.
                work.index_points_before = self.index.count_points(scope, Some(user_id)).await?;
                let mut known: std::collections::HashSet<MemoryId> =
                    work.erased_memory_ids.iter().copied().collect();
                let mut removed = 0;
                loop {
                    let (ids, history_entries) = storage
                        .erase_subject_batch(scope, user_id, ERASURE_BATCH)
                        .await?;
                    if ids.is_empty() {
                        break;
                    }
                    removed += ids.len() as u64;
                    work.history_entries += history_entries;
                    // The outbox entries written with the batch repair the index should this
                    // fail.
                    self.index.delete(scope, ids.clone()).await?;
                    // Written since the ids were taken (a concurrent write of the subject's).
                    for id in ids {
                        if known.insert(id) {
                            work.erased_memory_ids.push(id);
                        }
                    }
                    progress(removed, total.max(removed));
                }
                removed
            }
            SubjectStore::History => work.history_entries,
            SubjectStore::Files => storage.delete_files_of_subject(scope, user_id).await?,
            SubjectStore::SessionState => {
                storage
                    .delete_session_state_of_subject(scope, user_id)
                    .await?
            }
            SubjectStore::Messages => {
                storage
                    .delete_session_messages_of_subject(scope, user_id)
                    .await?
            }
            SubjectStore::Feedback => storage.delete_feedback_of_subject(scope, user_id).await?,
            SubjectStore::Usage => {
                // Units still pending in this process are written first, then renamed.
                // A failed write fails the step (the erasure is retried), so no unit naming the
                // subject is written after the renaming.
                if let Some(meter) = self.usage_meter.get() {
                    meter.flush_now().await?;
                }
                let digest = self.subject_digest(scope, user_id);
                storage
                    .pseudonymize_usage_of_subject(scope, user_id, &digest)
                    .await?
            }
            SubjectStore::RecallEvents => {
                // Events still queued in this process are stored first, then erased.
                if let Some(recorder) = &self.recall_recorder {
                    recorder.flush().await;
                }
                storage
                    .delete_recall_events_of_subject(scope, user_id)
                    .await?
            }
            SubjectStore::Runs => {
                // Uses of the subject's memories recorded under no end-user (a project key's
                // search for everyone) go too: they are about the subject's memories.
                storage
                    .delete_runs_of_subject(scope, user_id, &work.erased_memory_ids)
                    .await?
            }
            SubjectStore::EvaluationCases => {
                let deleted = storage.delete_eval_cases_of_subject(scope, user_id).await?;
                for id in &deleted {
                    if !work.erased_case_ids.contains(id) {
                        work.erased_case_ids.push(*id);
                    }
                }
                deleted.len() as u64
            }
            SubjectStore::EvaluationRuns => {
                storage
                    .erase_eval_results_of_cases(scope, &work.erased_case_ids)
                    .await?
            }
            SubjectStore::TaskResults => {
                storage
                    .erase_task_results_naming(scope, &work.erased_ids())
                    .await?
            }
            SubjectStore::Index => {
                // Points whose memory row was already gone (e.g. a restore mixed old and new
                // copies).
                self.index.delete_subject(scope, user_id).await?;
                work.index_points_before
            }
            SubjectStore::QueryCache => {
                // Whose a cached query is is unknown: the project's entries go, here at once
                // and in every other process (gateways included) once it reads the raised
                // epoch with the project's settings — a search there never answers from an
                // entry of an older epoch.
                let epoch = storage.raise_query_cache_epoch(scope).await?;
                work.raised_query_cache_epoch = Some(epoch);
                match &self.query_cache {
                    Some(cache) => cache.erase_project(scope.project_id(), epoch),
                    None => 0,
                }
            }
        })
    }

    /// An independent count of what is left of the subject in one store.
    async fn count_remaining(
        &self,
        store: SubjectStore,
        scope: &ProjectScope,
        user_id: &str,
        work: &ErasureWork,
    ) -> Result<u64, EngineError> {
        let storage = &self.storage;
        Ok(match store {
            SubjectStore::Idempotency => {
                storage
                    .count_idempotency_records_naming_subject(scope, user_id)
                    .await?
            }
            SubjectStore::Memories => storage.count_subject_memories(scope, user_id).await?,
            SubjectStore::History => {
                storage
                    .count_history_of_memories(scope, &work.erased_memory_ids)
                    .await?
            }
            SubjectStore::Files => storage.count_files_of_subject(scope, user_id).await?,
            SubjectStore::SessionState => {
                storage
                    .count_session_state_of_subject(scope, user_id)
                    .await?
            }
            SubjectStore::Messages => {
                storage
                    .count_session_messages_of_subject(scope, user_id)
                    .await?
            }
            SubjectStore::Feedback => storage.count_feedback_of_subject(scope, user_id).await?,
            SubjectStore::Usage => storage.count_usage_of_subject(scope, user_id).await?,
            SubjectStore::RecallEvents => {
                storage
                    .count_recall_events_of_subject(scope, user_id)
                    .await?
            }
            SubjectStore::Runs => {
                storage
                    .count_runs_of_subject(scope, user_id, &work.erased_memory_ids)
                    .await?
            }
            SubjectStore::EvaluationCases => {
                storage.count_eval_cases_of_subject(scope, user_id).await?
            }
            SubjectStore::EvaluationRuns => storage
                .eval_results_of_cases(scope, &work.erased_case_ids)
                .await?
                .len() as u64,
            SubjectStore::TaskResults => {
                storage
                    .count_task_results_naming(scope, &work.erased_ids())
                    .await?
            }
            SubjectStore::Index => self.index.count_points(scope, Some(user_id)).await?,
            // What this process still holds of the project from before the erasure's epoch
            // (what a search cached since belongs to that later search). Other processes
            // are not counted here: the epoch they check keeps them from answering with it.
            SubjectStore::QueryCache => match &self.query_cache {
                Some(cache) => {
                    let epoch = match work.raised_query_cache_epoch {
                        Some(epoch) => epoch,
                        None => self.storage.query_cache_epoch(scope).await?,
                    };
                    cache.count_before(scope.project_id(), epoch)
                }
                None => 0,
            },
        })
    }

    /// What the project holds of one end-user, store by store in the registry's order (the
    /// process's query cache left out: whose its entries are is unknown): the same counts an
    /// erasure's verification makes, taken before anything is erased.
    pub(crate) async fn subject_holdings(
        &self,
        scope: &ProjectScope,
        user_id: &str,
    ) -> Result<Vec<(&'static str, u64)>, EngineError> {
        let work = ErasureWork::of_subject(&self.storage, scope, user_id).await?;
        let mut holdings = Vec::with_capacity(SubjectStore::ALL.len());
        for store in SubjectStore::ALL {
            if store == SubjectStore::QueryCache {
                continue;
            }
            let held = self.count_remaining(store, scope, user_id, &work).await?;
            holdings.push((store.declaration().name, held));
        }
        Ok(holdings)
    }

    /// Append one line to the ledger file and make it durable before the erasure is
    /// reported done.
    fn append_to_ledger_file(
        &self,
        scope: &ProjectScope,
        digest_of_subject: &str,
        erased_at: DateTime<Utc>,
    ) -> Result<(), EngineError> {
        let Some(path) = &self.ledger.ledger_path else {
            return Ok(());
        };
        let line = LedgerLine {
            organization_id: scope.organization_id().to_string(),
            project_id: scope.project_id().to_string(),
            subject_digest: digest_of_subject.to_string(),
            erased_at,
        };
        let mut text = serde_json::to_string(&line)
            .map_err(|error| EngineError::Internal(error.to_string()))?;
        text.push('\n');
        let ledger_failure = |error: std::io::Error| {
            EngineError::Internal(format!("erasure ledger {}: {error}", path.display()))
        };
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(ledger_failure)?;
        file.write_all(text.as_bytes()).map_err(ledger_failure)?;
        file.sync_all().map_err(ledger_failure)
    }

    /// After a restore: every subject the ledger file names that has memories again (its
    /// digest matches a `user_id` of the project) is erased again, and the index follows.
    pub async fn replay_erasure_ledger(&self) -> Result<LedgerReplay, EngineError> {
        let Some(path) = self.ledger.ledger_path.clone() else {
            return Ok(LedgerReplay::default());
        };
        let lines = read_ledger(&path)?;
        let mut replay = LedgerReplay {
            entries: lines.len() as u64,
            ..Default::default()
        };
        let mut by_project: std::collections::BTreeMap<(String, String), BTreeSet<String>> =
            Default::default();
        for line in lines {
            by_project
                .entry((line.organization_id, line.project_id))
                .or_default()
                .insert(line.subject_digest);
        }
        for ((organization_id, project_id), digests) in by_project {
            let (Ok(organization_id), Ok(project_id)) =
                (organization_id.parse(), project_id.parse())
            else {
                tracing::warn!("ignored an erasure ledger line with malformed ids");
                continue;
            };
            let Some(scope) = self
                .maintenance_store()
                .project_scope_for_erasure_ledger(organization_id, project_id)
                .await?
            else {
                continue;
            };
            for user_id in self.storage.subjects_of_project(&scope).await? {
                if !digests.contains(&self.subject_digest(&scope, &user_id)) {
                    continue;
                }
                let actor = Actor::system("erasure-ledger-replay");
                let before = self
                    .storage
                    .count_subject_memories(&scope, &user_id)
                    .await?;
                match self
                    .erase_subject_with(&scope, &user_id, None, &actor, |_, _| {}, false)
                    .await
                {
                    Ok(_) => {
                        replay.subjects_erased_again += 1;
                        replay.memories_erased_again += before;
                    }
                    Err(error) => {
                        tracing::error!(%error, project_id = %scope.project_id(), "erasure ledger replay failed for a subject");
                    }
                }
            }
        }
        if replay.subjects_erased_again > 0 {
            tracing::warn!(
                subjects = replay.subjects_erased_again,
                memories = replay.memories_erased_again,
                "erasure ledger replay removed restored data of erased subjects"
            );
        }
        Ok(replay)
    }

    /// Everything live about one end-user: memories with their history.
    pub(crate) async fn export_subject(
        &self,
        scope: &ProjectScope,
        user_id: &str,
        actor: &Actor,
    ) -> Result<SubjectExport, EngineError> {
        let mut exported = SubjectExport {
            memories: self.storage.export_subject(scope, user_id).await?,
            messages: self
                .storage
                .session_messages_of_subject(scope, user_id)
                .await?,
            session_state: self
                .storage
                .session_state_of_subject(scope, user_id)
                .await?,
            files: self.storage.files_of_subject(scope, user_id).await?,
            feedback: self.storage.feedback_of_subject(scope, user_id).await?,
            recalls: self
                .storage
                .recall_events_of_subject(scope, user_id)
                .await?,
            runs: self.storage.runs_of_subject(scope, user_id).await?,
            evaluation_cases: self.storage.eval_cases_of_subject(scope, user_id).await?,
            evaluation_results: Vec::new(),
        };
        let case_ids: Vec<uuid::Uuid> = exported
            .evaluation_cases
            .iter()
            .map(|(_, case)| case.id)
            .collect();
        exported.evaluation_results = self.storage.eval_results_of_cases(scope, &case_ids).await?;
        self.storage
            .record_audit_event(
                scope.organization_id(),
                Some(scope),
                actor,
                &NewAuditEvent::success(
                    AuditAction::SubjectExported,
                    vec![self.subject_digest(scope, user_id)],
                    serde_json::Value::Object(exported.counts()),
                ),
            )
            .await?;
        Ok(exported)
    }

    /// Delete the given memories (a console bulk delete by filter) with a reason; immutable
    /// and held ones are skipped. Returns (deleted, skipped).
    pub(crate) async fn delete_memories_in_bulk(
        &self,
        scope: &ProjectScope,
        memory_ids: &[MemoryId],
        reason: &str,
        actor: &Actor,
    ) -> Result<(u64, u64), EngineError> {
        let mut deleted = 0u64;
        for chunk in memory_ids.chunks(500) {
            let removed = self
                .storage
                .delete_memories_in_bulk(scope, chunk, reason, actor)
                .await?;
            deleted += removed.len() as u64;
            self.index.delete(scope, removed).await?;
        }
        self.applier.work_available.notify_one();
        Ok((deleted, memory_ids.len() as u64 - deleted))
    }

    /// The bulk delete of the project's memory limits: `memory_ids` go from the database and
    /// the index in the name of `limit_setter` (immutable and held ones never). Returns how
    /// many went.
    pub(crate) async fn evict_memories(
        &self,
        scope: &ProjectScope,
        memory_ids: &[MemoryId],
        eviction: &engram_storage::governance::Eviction,
        limit_setter: &Actor,
    ) -> Result<u64, EngineError> {
        let mut evicted = 0u64;
        for chunk in memory_ids.chunks(500) {
            let removed = self
                .storage
                .evict_memories(scope, chunk, eviction, limit_setter)
                .await?;
            evicted += removed.len() as u64;
            self.index.delete(scope, removed).await?;
        }
        self.applier.work_available.notify_one();
        Ok(evicted)
    }

    /// What the next retention sweep of the project removes, without removing it.
    pub(crate) async fn retention_preview(
        &self,
        scope: &ProjectScope,
        limit: u64,
    ) -> Result<Vec<(MemoryId, engram_core::MemoryKind)>, EngineError> {
        let settings = self.storage.project_settings(scope).await?;
        Ok(self
            .storage
            .memories_due_for_retention(scope, &settings, Utc::now(), limit)
            .await?)
    }

    /// Hard-delete what the project's retention rules say is due, store by store as the
    /// registry of subject data declares it: memories by kind and `expires_at` (from the
    /// database and the index, in bounded batches), then every store kept for a number of
    /// days (messages, session state, feedback, files, recall events). Each removal is
    /// audited and counted in `engram_retention_deleted_total{store}`. Returns how many
    /// records were removed in all.
    pub(crate) async fn sweep_retention(&self, scope: &ProjectScope) -> Result<u64, EngineError> {
        let settings = self.storage.project_settings(scope).await?;
        let mut removed = 0u64;
        for store in SubjectStore::ALL {
            let removed_from_store = match store.declaration().retention {
                StoreRetention::MemoryKinds => {
                    self.sweep_expired_memories(scope, &settings).await?
                }
                StoreRetention::ProjectDays { .. } => match settings.retention_days_of(store) {
                    Some(days) => {
                        self.storage
                            .remove_records_past_retention(scope, store, days, Utc::now())
                            .await?
                    }
                    None => 0,
                },
                StoreRetention::WithItsSource(_) | StoreRetention::UntilDeleted(_) => 0,
            };
            if removed_from_store > 0 {
                let name = store.declaration().name;
                metrics::counter!("engram_retention_deleted_total", "store" => name)
                    .increment(removed_from_store);
                tracing::info!(project_id = %scope.project_id(), store = name, removed = removed_from_store, "retention sweep removed expired records");
            }
            removed += removed_from_store;
        }
        Ok(removed)
    }

    /// What the next sweep removes from each store kept for a number of days.
    pub(crate) async fn retention_preview_of_stores(
        &self,
        scope: &ProjectScope,
    ) -> Result<Vec<(&'static str, Option<u32>, u64)>, EngineError> {
        let settings = self.storage.project_settings(scope).await?;
        let mut stores = Vec::new();
        for store in SubjectStore::swept_by_age() {
            let days = settings.retention_days_of(store);
            let due = match days {
                Some(days) => {
                    self.storage
                        .count_records_past_retention(scope, store, days, Utc::now())
                        .await?
                }
                None => 0,
            };
            stores.push((store.declaration().name, days, due));
        }
        Ok(stores)
    }

    /// Memories past their kind's retention or their own `expires_at`, from the database
    /// and the index, in bounded batches.
    async fn sweep_expired_memories(
        &self,
        scope: &ProjectScope,
        settings: &ProjectSettings,
    ) -> Result<u64, EngineError> {
        let actor = Actor::system("retention");
        let mut removed = 0u64;
        loop {
            let due = self
                .storage
                .memories_due_for_retention(scope, settings, Utc::now(), 500)
                .await?;
            if due.is_empty() {
                break;
            }
            let ids: Vec<MemoryId> = due.iter().map(|(id, _)| *id).collect();
            let expired = self.storage.expire_memories(scope, &ids, &actor).await?;
            if expired.is_empty() {
                break;
            }
            removed += expired.len() as u64;
            self.index.delete(scope, expired).await?;
        }
        if removed > 0 {
            self.applier.work_available.notify_one();
        }
        Ok(removed)
    }
}

/// SHA-256 of a receipt's JSON without its `digest` field.
fn sha256_of_json_without_digest(receipt: &impl Serialize) -> String {
    let mut value = serde_json::to_value(receipt).unwrap_or_default();
    if let Some(object) = value.as_object_mut() {
        object.remove("digest");
    }
    hex::encode(Sha256::digest(value.to_string().as_bytes()))
}

fn read_ledger(path: &Path) -> Result<Vec<LedgerLine>, EngineError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => {
            return Err(EngineError::Internal(format!(
                "cannot read the erasure ledger {}: {error}",
                path.display()
            )));
        }
    };
    Ok(text
        .lines()
        .filter(|line| !line.trim().is_empty())
        .filter_map(|line| match serde_json::from_str(line) {
            Ok(parsed) => Some(parsed),
            Err(error) => {
                // A torn last line (crash mid-append) is skipped; its erasure had not been
                // reported done.
                tracing::warn!(%error, "skipped an unreadable erasure ledger line");
                None
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subject_digests_depend_on_key_project_and_id() {
        let project = engram_core::ProjectId::generate();
        let other_project = engram_core::ProjectId::generate();
        let digest = subject_digest(b"key", project, "alice");
        assert_eq!(digest.len(), 64);
        assert_eq!(digest, subject_digest(b"key", project, "alice"));
        assert_ne!(digest, subject_digest(b"other key", project, "alice"));
        assert_ne!(digest, subject_digest(b"key", other_project, "alice"));
        assert_ne!(digest, subject_digest(b"key", project, "alicf"));
        assert!(!digest.contains("alice"));
    }
}
