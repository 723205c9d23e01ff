//! What search and consolidation read besides the index: memories with their embeddings (for
//! fusion, diversity and near-duplicate detection), the memories that were true at a past
//! moment (`as_of`), and `always` procedures.

use crate::MaintenanceStore;
use crate::caller_thread_read::{CallerThreadReadError, MAX_CALLER_THREAD_ROWS};
use crate::entities::memories;
use crate::memories::{decode_embedding, memories_of, memory_from_model, subject_condition};
use crate::{Storage, StorageError};
use chrono::{DateTime, Utc};
use engram_core::MemoryScope;
use engram_core::{
    ExternalId, Memory, MemoryId, MemoryKind, MemoryState, ProjectScope, SubjectFilter,
};
use sea_orm::{ColumnTrait, Condition, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use std::collections::HashMap;

/// A memory with the embedding it was indexed with.
#[derive(Clone, Debug)]
pub struct MemoryWithEmbedding {
    pub memory: Memory,
    pub embedding: Vec<f32>,
}

/// Most rows [`Storage::session_positions`] returns for one search: sessions are read in
/// full between their first and last candidate, and a long session with far-apart
/// candidates must not make every search carry it.
pub const MAX_SESSION_SPAN_ROWS: u64 = 2_000;
/// Most sessions [`Storage::session_positions`] reads for one search (an `as_of` search
/// ranks up to 5,000 candidates; one condition per session keeps the SQL small).
pub const MAX_NEIGHBOUR_SESSIONS: usize = 200;

/// A memory whose place in its session a search asks for.
#[derive(Clone, Copy, Debug)]
pub struct SessionMember<'a> {
    pub id: MemoryId,
    /// The session's end-user (`None`: the project's own, no end-user's).
    pub end_user: Option<&'a str>,
    pub session: &'a str,
}

/// How many of a storage handle's candidate reads ran where.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CandidateReads {
    /// On the caller's thread (a SQLite file).
    pub caller_thread: u64,
    /// Through the pool (PostgreSQL, a large read, or the caller's thread could not).
    pub pool: u64,
    /// Connections the reads on the caller's thread opened, or tried to.
    pub caller_thread_opens: u64,
}

/// The counters behind [`CandidateReads`], shared by a handle's clones.
#[derive(Debug, Default)]
pub(crate) struct CandidateReadCounters {
    caller_thread: std::sync::atomic::AtomicU64,
    pool: std::sync::atomic::AtomicU64,
}

#[derive(Clone, Copy)]
enum CandidateRead {
    CallerThread,
    Pool,
}

impl CandidateReadCounters {
    /// One read, in the handle's counters and the process's metric.
    fn count(&self, read: CandidateRead) {
        let (counter, label) = match read {
            CandidateRead::CallerThread => (&self.caller_thread, "caller_thread"),
            CandidateRead::Pool => (&self.pool, "pool"),
        };
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        metrics::counter!(SEARCH_CANDIDATE_READS_TOTAL, "read" => label).increment(1);
    }
}

/// Searches' candidate reads, by where they ran (`read`: `caller_thread` or `pool`).
pub const SEARCH_CANDIDATE_READS_TOTAL: &str = "engram_search_candidate_reads_total";

/// Procedural memories returned at task start carry `"always": true` in their metadata.
pub const ALWAYS_METADATA_KEY: &str = "always";

impl Storage {
    /// The active memories among `ids`, with their embeddings.
    pub async fn active_memories_with_embeddings(
        &self,
        scope: &MemoryScope,
        ids: &[MemoryId],
    ) -> Result<HashMap<MemoryId, MemoryWithEmbedding>, StorageError> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let candidates = crate::memories::owned_memories_of(scope)
            .filter(memories::Column::State.eq(MemoryState::Active.as_str()))
            .filter(memories::Column::Id.is_in(ids.iter().map(|id| id.as_uuid())));
        let models = self.read_candidates(candidates, ids.len()).await?;
        models
            .into_iter()
            .map(|model| {
                let found = with_embedding(model)?;
                Ok((found.memory.id, found))
            })
            .collect()
    }

    /// The memories `candidates` selects (at most `rows_at_most`): on the caller's thread
    /// when the database is a SQLite file and the read is small, else through the pool.
    async fn read_candidates(
        &self,
        candidates: sea_orm::Select<memories::Entity>,
        rows_at_most: usize,
    ) -> Result<Vec<memories::Model>, StorageError> {
        if let Some(reader) = self.caller_thread_reader.as_deref()
            && rows_at_most <= MAX_CALLER_THREAD_ROWS
        {
            match reader.memories(&candidates) {
                Ok(models) => {
                    self.candidate_reads.count(CandidateRead::CallerThread);
                    return Ok(models);
                }
                // Another connection holds a lock the reader would wait for; the pool waits.
                Err(CallerThreadReadError::Busy) => {
                    tracing::debug!("candidate read found the database busy; using the pool");
                }
                Err(CallerThreadReadError::Closed | CallerThreadReadError::OpenFailedRecently) => {}
                Err(error) => {
                    // Once: a row in an odd form would otherwise warn on every search; the
                    // metric's `pool` count keeps counting.
                    static WARNED: std::sync::atomic::AtomicBool =
                        std::sync::atomic::AtomicBool::new(false);
                    if !WARNED.swap(true, std::sync::atomic::Ordering::Relaxed) {
                        tracing::warn!(%error, "candidate read on the caller's thread failed; using the pool (warned once)");
                    }
                }
            }
        }
        self.candidate_reads.count(CandidateRead::Pool);
        candidates
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)
    }

    /// How this handle's searches have read their candidates so far (what
    /// `engram_search_candidate_reads_total` counts for the whole process).
    pub fn candidate_reads(&self) -> CandidateReads {
        CandidateReads {
            caller_thread: self
                .candidate_reads
                .caller_thread
                .load(std::sync::atomic::Ordering::Relaxed),
            pool: self
                .candidate_reads
                .pool
                .load(std::sync::atomic::Ordering::Relaxed),
            caller_thread_opens: self
                .caller_thread_reader
                .as_deref()
                .map_or(0, crate::caller_thread_read::CallerThreadReader::opens),
        }
    }

    /// Where each of `members` stands in its session, in write order: a position counted
    /// from the first member of that session, over every memory of the session in between
    /// (active ones; superseded ones too with `include_superseded`, for a search `as_of` a
    /// past moment). A session is one end-user's (sessions are kept per end-user), so only
    /// positions of the same end-user and session compare. Members alone in their session
    /// get none (they have no neighbour among them), and so do the sessions past the first
    /// [`MAX_NEIGHBOUR_SESSIONS`] and past the first [`MAX_SESSION_SPAN_ROWS`] rows read.
    pub async fn session_positions(
        &self,
        scope: &MemoryScope,
        members: &[SessionMember<'_>],
        include_superseded: bool,
    ) -> Result<HashMap<MemoryId, usize>, StorageError> {
        /// The first and last member of one session, and how many members it has.
        struct Span<'a> {
            end_user: Option<&'a str>,
            session: &'a str,
            first: MemoryId,
            last: MemoryId,
            members: usize,
        }
        // In the order sessions first appear among the members; found by (end-user, session).
        let mut spans: Vec<Span<'_>> = Vec::new();
        let mut span_of: HashMap<(Option<&str>, &str), usize> = HashMap::new();
        for member in members {
            match span_of.get(&(member.end_user, member.session)) {
                Some(&index) => {
                    let span = &mut spans[index];
                    span.first = span.first.min(member.id);
                    span.last = span.last.max(member.id);
                    span.members += 1;
                }
                None => {
                    span_of.insert((member.end_user, member.session), spans.len());
                    spans.push(Span {
                        end_user: member.end_user,
                        session: member.session,
                        first: member.id,
                        last: member.id,
                        members: 1,
                    });
                }
            }
        }
        let mut in_spans = Condition::any();
        let mut shared = 0;
        for span in &spans {
            if span.members < 2 {
                continue;
            }
            if shared == MAX_NEIGHBOUR_SESSIONS {
                break;
            }
            shared += 1;
            in_spans = in_spans.add(
                Condition::all()
                    // The session's owner (a subject condition; the scope is applied below).
                    .add(match span.end_user {
                        Some(owner) => memories::Column::UserId.eq(owner),
                        None => memories::Column::UserId.is_null(),
                    })
                    .add(memories::Column::SessionId.eq(span.session))
                    .add(memories::Column::Id.gte(span.first.as_uuid()))
                    .add(memories::Column::Id.lte(span.last.as_uuid())),
            );
        }
        if shared == 0 {
            return Ok(HashMap::new());
        }
        let states: &[MemoryState] = match include_superseded {
            true => &[MemoryState::Active, MemoryState::Superseded],
            false => &[MemoryState::Active],
        };
        let rows: Vec<(uuid::Uuid, Option<String>, Option<String>)> =
            crate::memories::owned_memories_of(scope)
                .filter(memories::Column::State.is_in(states.iter().map(|state| state.as_str())))
                .filter(in_spans)
                .select_only()
                .column(memories::Column::Id)
                .column(memories::Column::UserId)
                .column(memories::Column::SessionId)
                .order_by_asc(memories::Column::UserId)
                .order_by_asc(memories::Column::SessionId)
                .order_by_asc(memories::Column::Id)
                .limit(MAX_SESSION_SPAN_ROWS + 1)
                .into_tuple()
                .all(&self.connection)
                .await
                .map_err(StorageError::from_db)?;
        // Past the cap the last session read may be cut short: it gets no positions.
        let cut_session = (rows.len() as u64 > MAX_SESSION_SPAN_ROWS)
            .then(|| {
                rows.last()
                    .map(|(_, end_user, session)| (end_user, session))
            })
            .flatten();
        let wanted: std::collections::HashSet<MemoryId> =
            members.iter().map(|member| member.id).collect();
        let mut positions = HashMap::new();
        let mut current = None;
        let mut position = 0;
        for (id, end_user, session) in &rows {
            let key = (end_user, session);
            if cut_session == Some(key) {
                break;
            }
            if current != Some(key) {
                current = Some(key);
                position = 0;
            }
            let id = MemoryId::from_uuid(*id);
            if wanted.contains(&id) {
                positions.insert(id, position);
            }
            position += 1;
        }
        Ok(positions)
    }

    /// One page of the project's active memories with their embeddings, newest first,
    /// starting after `after` (consolidation walks the project with it).
    pub async fn active_memories_with_embeddings_page(
        &self,
        scope: &ProjectScope,
        after: Option<MemoryId>,
        limit: u64,
    ) -> Result<Vec<MemoryWithEmbedding>, StorageError> {
        let mut query =
            memories_of(scope).filter(memories::Column::State.eq(MemoryState::Active.as_str()));
        if let Some(after) = after {
            query = query.filter(memories::Column::Id.lt(after.as_uuid()));
        }
        let models = query
            .order_by_desc(memories::Column::Id)
            .limit(limit.max(1))
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        models.into_iter().map(with_embedding).collect()
    }

    /// Memories of `subject` that were valid at `as_of`: created by then, and either still
    /// active or superseded only later. Deleted memories are not history anyone may recall.
    /// The newest `limit` (by validity start), with their embeddings.
    pub async fn memories_valid_at(
        &self,
        scope: &MemoryScope,
        subject: &SubjectFilter,
        kinds: &[MemoryKind],
        as_of: DateTime<Utc>,
        limit: u64,
    ) -> Result<Vec<MemoryWithEmbedding>, StorageError> {
        let mut query = crate::memories::owned_memories_of(scope)
            .filter(subject_condition(subject))
            .filter(memories::Column::State.is_in([
                MemoryState::Active.as_str(),
                MemoryState::Superseded.as_str(),
            ]))
            .filter(memories::Column::ValidFrom.lte(as_of))
            .filter(
                Condition::any()
                    .add(memories::Column::ValidTo.is_null())
                    .add(memories::Column::ValidTo.gt(as_of)),
            );
        if !kinds.is_empty() {
            query =
                query.filter(memories::Column::Kind.is_in(kinds.iter().map(|kind| kind.as_str())));
        }
        let models = query
            .order_by_desc(memories::Column::ValidFrom)
            .limit(limit)
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        models.into_iter().map(with_embedding).collect()
    }

    /// Active procedural memories marked `"always": true` that apply to this user and agent:
    /// those of the user (or of no user) and of the agent (or of no agent), oldest first.
    pub async fn always_procedures(
        &self,
        scope: &MemoryScope,
        user_id: Option<&ExternalId>,
        agent_id: Option<&ExternalId>,
        limit: usize,
    ) -> Result<Vec<Memory>, StorageError> {
        let applies_to = |column: memories::Column, wanted: Option<&ExternalId>| match wanted {
            Some(wanted) => Condition::any()
                .add(column.is_null())
                .add(column.eq(wanted.as_str())),
            None => Condition::all().add(column.is_null()),
        };
        // Metadata is JSON text on SQLite and JSON on PostgreSQL: the flag is checked here,
        // over at most a few hundred procedures.
        let models = crate::memories::owned_memories_of(scope)
            .filter(memories::Column::State.eq(MemoryState::Active.as_str()))
            .filter(memories::Column::Kind.eq(MemoryKind::Procedural.as_str()))
            .filter(applies_to(memories::Column::UserId, user_id))
            .filter(applies_to(memories::Column::AgentId, agent_id))
            .order_by_asc(memories::Column::CreatedAt)
            .limit(MAX_PROCEDURES_SCANNED)
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        let mut procedures = Vec::new();
        for model in models {
            let memory = memory_from_model(model)?;
            let always =
                memory.metadata.get(ALWAYS_METADATA_KEY) == Some(&serde_json::Value::Bool(true));
            let expired = memory
                .expires_at
                .is_some_and(|expires_at| expires_at <= Utc::now());
            if always && !expired {
                procedures.push(memory);
                if procedures.len() >= limit {
                    break;
                }
            }
        }
        Ok(procedures)
    }
}

const MAX_PROCEDURES_SCANNED: u64 = 500;

fn with_embedding(model: memories::Model) -> Result<MemoryWithEmbedding, StorageError> {
    let embedding = decode_embedding(&model.embedding);
    Ok(MemoryWithEmbedding {
        memory: memory_from_model(model)?,
        embedding,
    })
}

impl MaintenanceStore {
    /// Which embedding models the searchable (active or superseded) memories of each
    /// project were embedded with, across every project: start-up refuses to serve a
    /// project whose vectors do not belong to its embedding space.
    pub async fn embedding_models_by_project(
        &self,
    ) -> Result<Vec<(engram_core::ProjectId, String)>, StorageError> {
        let rows = memories::Entity::find()
            .select_only()
            .column(memories::Column::ProjectId)
            .column(memories::Column::EmbeddingModel)
            .filter(memories::Column::State.ne(MemoryState::Deleted.as_str()))
            .distinct()
            .into_tuple::<(uuid::Uuid, String)>()
            .all(&self.storage.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(rows
            .into_iter()
            .map(|(project_id, model)| (engram_core::ProjectId::from_uuid(project_id), model))
            .collect())
    }
}
