//! The audit log: events appended in the same transaction as the change they record (so a
//! change and its audit event commit together or not at all), chained per organization with
//! hashes keyed outside the database and anchored in a file (see [`crate::audit_seal`]), read
//! per project, and verified incrementally by recomputing the chain against the anchor.

use crate::audit_seal::{AnchorLine, AnchorState, AuditSeal, VerifiedCheckpoint};
use crate::entities::{audit_chain_heads, audit_events};
use crate::{Storage, StorageError, WriteTransaction};
use chrono::{DateTime, Utc};
use engram_core::audit::{
    AUDIT_CHAIN_GENESIS, Actor, AuditAction, ChainedFields, NewAuditEvent, chain_hash,
    keyed_chain_hash,
};
pub use engram_core::audit::{AuditEventRecord, AuditFilter, VerificationStart};
use engram_core::{OrganizationId, ProjectScope};
use sea_orm::sea_query::OnConflict;
use sea_orm::{
    ActiveValue::Set, ColumnTrait, ConnectionTrait, DbBackend, EntityTrait, PaginatorTrait,
    QueryFilter, QueryOrder, QuerySelect,
};
use std::collections::HashMap;

const MAX_USER_AGENT_CHARS: usize = 256;
/// Most events `audit_events` returns per page.
pub const MAX_AUDIT_PAGE: u64 = 500;

/// The outcome of recomputing an organization's chain.
#[derive(Clone, Debug, PartialEq)]
pub struct AuditVerification {
    /// Events vouched for: recomputed now, or by an earlier verification this one continued.
    pub events_checked: u64,
    /// Of those, the events of the caller's project.
    pub project_events_checked: u64,
    /// The first event whose stored hash, link or sequence does not match, with its project.
    pub first_broken: Option<BrokenLink>,
    /// The sequence this run started recomputing from (1 for a verification from the start;
    /// later when it continued from the last verified checkpoint).
    pub recomputed_from_sequence: i64,
    /// The newest sequence the anchor outside the database names (`None` without a seal).
    pub anchored_sequence: Option<i64>,
    /// The first keyed event of the chain (`None`: plain hashes only, no seal).
    pub keyed_since: Option<i64>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct BrokenLink {
    pub event_id: i64,
    pub sequence: i64,
    pub project_id: Option<String>,
    pub reason: String,
}

fn chained_fields(model: &audit_events::Model) -> (String, Option<String>) {
    (
        model.organization_id.to_string(),
        model.project_id.map(|project_id| project_id.to_string()),
    )
}

/// The event's hash: keyed when `key` is given, plain otherwise.
fn hash_of(model: &audit_events::Model, previous_hash: &str, key: Option<&[u8]>) -> String {
    let (organization_id, project_id) = chained_fields(model);
    let fields = ChainedFields {
        organization_id: &organization_id,
        sequence: model.sequence,
        project_id: project_id.as_deref(),
        at: model.at,
        actor_type: &model.actor_type,
        actor_id: &model.actor_id,
        action: &model.action,
        target_type: &model.target_type,
        target_ids: &model.target_ids,
        outcome: &model.outcome,
        ip: model.ip.as_deref(),
        user_agent: model.user_agent.as_deref(),
        request_id: model.request_id.as_deref(),
        details: &model.details,
    };
    match key {
        Some(key) => keyed_chain_hash(key, previous_hash, &fields),
        None => chain_hash(previous_hash, &fields),
    }
}

/// Append `event` to the organization's chain inside `transaction`. The chain head row is
/// locked (PostgreSQL `FOR UPDATE`; SQLite has one writer at a time), so concurrent appends
/// line up one after another. With a seal, the hash is keyed and the event is anchored
/// (flushed to the anchor file) before the transaction can commit; a chain still written
/// with plain hashes first gets its `audit.chain_rekeyed` event.
pub(crate) async fn append_audit_event(
    transaction: &WriteTransaction,
    organization_id: OrganizationId,
    scope: Option<&ProjectScope>,
    actor: &Actor,
    event: &NewAuditEvent,
) -> Result<(), StorageError> {
    let mut head = lock_chain_head(transaction, organization_id).await?;
    let seal = transaction.audit_seal().cloned();
    let mut anchor_lines = Vec::new();
    match &seal {
        Some(seal) => {
            rekey_if_plain(
                transaction,
                &mut head,
                organization_id,
                seal,
                &mut anchor_lines,
            )
            .await?;
        }
        // A plain hash after keyed ones would read as tampering: refuse instead.
        None if head.keyed_since.is_some() => {
            return Err(StorageError::Configuration(
                "this organization's audit chain is keyed, and this process has no audit key: \
                 give it the deployment's server secret (ENGRAM_SERVER_SECRET or the data dir)"
                    .to_string(),
            ));
        }
        None => {}
    }
    let stored = insert_chained_event(
        transaction,
        &head,
        organization_id,
        scope,
        actor,
        event,
        seal.as_ref(),
    )
    .await?;
    if seal.is_some() {
        anchor_lines.push(pending_line(&head, &stored));
    }
    head.last_sequence = stored.sequence;
    head.last_hash = stored.hash;
    store_head_and_anchor(transaction, &head, anchor_lines).await
}

/// Switch a chain written with plain hashes to keyed ones: one `audit.chain_rekeyed` event,
/// keyed, links the last plain hash to the keyed chain. A chain with no event yet is keyed
/// from its first.
async fn rekey_if_plain(
    transaction: &WriteTransaction,
    head: &mut audit_chain_heads::Model,
    organization_id: OrganizationId,
    seal: &std::sync::Arc<AuditSeal>,
    anchor_lines: &mut Vec<AnchorLine>,
) -> Result<(), StorageError> {
    if head.keyed_since.is_some() {
        return Ok(());
    }
    head.keyed_since = Some(head.last_sequence + 1);
    if head.last_sequence == 0 {
        return Ok(());
    }
    let rekeyed = NewAuditEvent::success(
        AuditAction::AuditChainRekeyed,
        vec![organization_id.to_string()],
        serde_json::json!({
            "previous_head_sequence": head.last_sequence,
            "previous_head_hash": head.last_hash,
            "hash": "hmac-sha256",
        }),
    );
    let stored = insert_chained_event(
        transaction,
        head,
        organization_id,
        None,
        &Actor::system("audit-chain"),
        &rekeyed,
        Some(seal),
    )
    .await?;
    anchor_lines.push(pending_line(head, &stored));
    head.last_sequence = stored.sequence;
    head.last_hash = stored.hash;
    tracing::info!(
        organization_id = %organization_id,
        keyed_since = stored.sequence,
        "audit chain rekeyed"
    );
    Ok(())
}

/// Record the new head in the database and, before the transaction may commit, in the
/// anchor (flushed to disk): an event the database holds is always anchored.
async fn store_head_and_anchor(
    transaction: &WriteTransaction,
    head: &audit_chain_heads::Model,
    anchor_lines: Vec<AnchorLine>,
) -> Result<(), StorageError> {
    audit_chain_heads::Entity::update_many()
        .col_expr(
            audit_chain_heads::Column::LastSequence,
            sea_orm::sea_query::Expr::value(head.last_sequence),
        )
        .col_expr(
            audit_chain_heads::Column::LastHash,
            sea_orm::sea_query::Expr::value(head.last_hash.clone()),
        )
        .col_expr(
            audit_chain_heads::Column::KeyedSince,
            sea_orm::sea_query::Expr::value(head.keyed_since),
        )
        .filter(audit_chain_heads::Column::OrganizationId.eq(head.organization_id))
        .exec(transaction)
        .await
        .map_err(StorageError::from_db)?;
    if let Some(seal) = transaction.audit_seal() {
        seal.anchor(anchor_lines.clone(), true).await?;
        for line in anchor_lines {
            transaction.appended(line);
        }
    }
    Ok(())
}

fn pending_line(head: &audit_chain_heads::Model, stored: &audit_events::Model) -> AnchorLine {
    AnchorLine {
        organization_id: stored.organization_id,
        sequence: stored.sequence,
        hash: stored.hash.clone(),
        state: AnchorState::Pending,
        keyed_since: head.keyed_since.unwrap_or(1),
    }
}

/// The organization's chain head, created when absent, locked until the transaction ends.
async fn lock_chain_head<C: ConnectionTrait>(
    transaction: &C,
    organization_id: OrganizationId,
) -> Result<audit_chain_heads::Model, StorageError> {
    audit_chain_heads::Entity::insert(audit_chain_heads::ActiveModel {
        organization_id: Set(organization_id.as_uuid()),
        last_sequence: Set(0),
        last_hash: Set(AUDIT_CHAIN_GENESIS.to_string()),
        keyed_since: Set(None),
    })
    .on_conflict(
        OnConflict::column(audit_chain_heads::Column::OrganizationId)
            .do_nothing()
            .to_owned(),
    )
    .exec_without_returning(transaction)
    .await
    .map_err(StorageError::from_db)?;
    let mut head_query = audit_chain_heads::Entity::find_by_id(organization_id.as_uuid());
    if transaction.get_database_backend() == DbBackend::Postgres {
        head_query = head_query.lock_exclusive();
    }
    head_query
        .one(transaction)
        .await
        .map_err(StorageError::from_db)?
        .ok_or_else(|| StorageError::Internal("audit chain head vanished".to_string()))
}

/// An event's details with the door it came through: `channel`, and `tool` for an MCP
/// call. Details that are neither an object nor null (none are) are kept as they are.
fn details_with_channel(
    details: &serde_json::Value,
    channel: &engram_core::audit::Channel,
) -> serde_json::Value {
    let mut details = match details {
        serde_json::Value::Null => serde_json::json!({}),
        details => details.clone(),
    };
    if let Some(object) = details.as_object_mut() {
        object.insert("channel".to_string(), channel.as_str().into());
        if let Some(tool) = channel.tool() {
            object.insert("tool".to_string(), tool.into());
        }
    }
    details
}

/// Insert `event` as the successor of `head`, hashed with the seal's key when given.
async fn insert_chained_event<C: ConnectionTrait>(
    transaction: &C,
    head: &audit_chain_heads::Model,
    organization_id: OrganizationId,
    scope: Option<&ProjectScope>,
    actor: &Actor,
    event: &NewAuditEvent,
    seal: Option<&std::sync::Arc<AuditSeal>>,
) -> Result<audit_events::Model, StorageError> {
    // Microsecond precision: what both databases store, so the hash recomputes exactly.
    let now = Utc::now();
    let at = DateTime::from_timestamp_micros(now.timestamp_micros()).unwrap_or(now);
    let mut model = audit_events::Model {
        id: 0,
        organization_id: organization_id.as_uuid(),
        sequence: head.last_sequence + 1,
        project_id: scope.map(|scope| scope.project_id().as_uuid()),
        at,
        actor_type: actor.kind.as_str().to_string(),
        actor_id: actor.id.chars().take(255).collect(),
        action: event.action.as_str().to_string(),
        target_type: event.action.target_type().to_string(),
        target_ids: serde_json::to_string(&event.target_ids).unwrap_or_else(|_| "[]".into()),
        outcome: event.outcome.as_str().to_string(),
        ip: actor.ip.clone(),
        user_agent: actor
            .user_agent
            .as_ref()
            .map(|agent| agent.chars().take(MAX_USER_AGENT_CHARS).collect()),
        request_id: actor.request_id.clone(),
        details: details_with_channel(&event.details, &actor.channel).to_string(),
        previous_hash: head.last_hash.clone(),
        hash: String::new(),
    };
    model.hash = hash_of(&model, &head.last_hash, seal.map(|seal| seal.key()));
    audit_events::Entity::insert(audit_events::ActiveModel {
        id: sea_orm::ActiveValue::NotSet,
        organization_id: Set(model.organization_id),
        sequence: Set(model.sequence),
        project_id: Set(model.project_id),
        at: Set(model.at),
        actor_type: Set(model.actor_type.clone()),
        actor_id: Set(model.actor_id.clone()),
        action: Set(model.action.clone()),
        target_type: Set(model.target_type.clone()),
        target_ids: Set(model.target_ids.clone()),
        outcome: Set(model.outcome.clone()),
        ip: Set(model.ip.clone()),
        user_agent: Set(model.user_agent.clone()),
        request_id: Set(model.request_id.clone()),
        details: Set(model.details.clone()),
        previous_hash: Set(model.previous_hash.clone()),
        hash: Set(model.hash.clone()),
    })
    .exec_without_returning(transaction)
    .await
    .map_err(StorageError::from_db)?;
    Ok(model)
}

fn record_from_model(model: audit_events::Model) -> AuditEventRecord {
    AuditEventRecord {
        id: model.id,
        sequence: model.sequence,
        project_id: model.project_id.map(|project_id| project_id.to_string()),
        at: model.at,
        actor_type: model.actor_type,
        actor_id: model.actor_id,
        action: model.action,
        target_type: model.target_type,
        target_ids: serde_json::from_str(&model.target_ids).unwrap_or_default(),
        outcome: model.outcome,
        ip: model.ip,
        user_agent: model.user_agent,
        request_id: model.request_id,
        details: serde_json::from_str(&model.details).unwrap_or(serde_json::Value::Null),
        hash: model.hash,
    }
}

impl Storage {
    /// Record an event that is not part of a data change (a login, a console read), in a
    /// transaction of its own. `scope` is the project it concerns, if any.
    pub async fn record_audit_event(
        &self,
        organization_id: OrganizationId,
        scope: Option<&ProjectScope>,
        actor: &Actor,
        event: &NewAuditEvent,
    ) -> Result<(), StorageError> {
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        append_audit_event(&transaction, organization_id, scope, actor, event).await?;
        transaction.commit().await.map_err(StorageError::from_db)
    }

    /// A page of `scope`'s project's events, oldest first.
    pub async fn audit_events(
        &self,
        scope: &ProjectScope,
        filter: &AuditFilter,
    ) -> Result<Vec<AuditEventRecord>, StorageError> {
        let project_condition = if filter.include_organization_events {
            sea_orm::Condition::any()
                .add(crate::tenancy::in_project::<audit_events::Entity>(scope))
                .add(
                    sea_orm::Condition::all()
                        .add(
                            audit_events::Column::OrganizationId
                                .eq(scope.organization_id().as_uuid()),
                        )
                        .add(audit_events::Column::ProjectId.is_null()),
                )
        } else {
            sea_orm::Condition::all().add(crate::tenancy::in_project::<audit_events::Entity>(scope))
        };
        let mut query = audit_events::Entity::find().filter(project_condition);
        if let Some(action) = &filter.action {
            query = query.filter(audit_events::Column::Action.eq(action.as_str()));
        }
        if let Some(actor_id) = &filter.actor_id {
            query = query.filter(audit_events::Column::ActorId.eq(actor_id.as_str()));
        }
        if let Some(target_id) = &filter.target_id {
            // Target ids are stored as a JSON array of quoted ids.
            query = query.filter(
                audit_events::Column::TargetIds.contains(format!("\"{target_id}\"").as_str()),
            );
        }
        if let Some(since) = filter.since {
            query = query.filter(audit_events::Column::At.gte(since));
        }
        if let Some(until) = filter.until {
            query = query.filter(audit_events::Column::At.lt(until));
        }
        if let Some(after_id) = filter.after_id {
            query = if filter.newest_first {
                query.filter(audit_events::Column::Id.lt(after_id))
            } else {
                query.filter(audit_events::Column::Id.gt(after_id))
            };
        }
        query = if filter.newest_first {
            query.order_by_desc(audit_events::Column::Id)
        } else {
            query.order_by_asc(audit_events::Column::Id)
        };
        let models = query
            .limit(filter.limit.clamp(1, MAX_AUDIT_PAGE))
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(models.into_iter().map(record_from_model).collect())
    }

    /// Seal the audit chain with `seal`: from now on every appended event is keyed and
    /// anchored. Chains still written with plain hashes are rekeyed at once, so an
    /// organization with no new activity is anchored too.
    pub async fn with_audit_seal(mut self, seal: AuditSeal) -> Result<Self, StorageError> {
        let seal = std::sync::Arc::new(seal);
        self.audit_seal = Some(seal.clone());
        let plain_chains = audit_chain_heads::Entity::find()
            .filter(audit_chain_heads::Column::KeyedSince.is_null())
            .filter(audit_chain_heads::Column::LastSequence.gt(0))
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        for plain_chain in plain_chains {
            let organization_id = OrganizationId::from_uuid(plain_chain.organization_id);
            let _permit = self.write_permit().await;
            let transaction = self.begin_write().await?;
            let mut head = lock_chain_head(&transaction, organization_id).await?;
            let mut anchor_lines = Vec::new();
            rekey_if_plain(
                &transaction,
                &mut head,
                organization_id,
                &seal,
                &mut anchor_lines,
            )
            .await?;
            if !anchor_lines.is_empty() {
                store_head_and_anchor(&transaction, &head, anchor_lines).await?;
            }
            transaction.commit().await.map_err(StorageError::from_db)?;
        }
        Ok(self)
    }

    /// Verify the chain of `scope`'s organization (a chain spans its projects) and report the
    /// first event that does not match — edited, missing, inserted, reordered — or a chain
    /// that disagrees with its anchor (newest events removed, events added behind it, the
    /// anchor gone). Reads only: writers are never blocked.
    pub async fn verify_audit_chain(
        &self,
        scope: &ProjectScope,
        start: VerificationStart,
    ) -> Result<AuditVerification, StorageError> {
        let organization_id = scope.organization_id().as_uuid();
        let own_project = Some(scope.project_id().as_uuid());
        let Some(seal) = self.audit_seal.clone() else {
            return self.verify_plain_chain(organization_id, own_project).await;
        };
        let anchored_before = match seal.anchored_head(organization_id) {
            Ok(anchored) => anchored,
            Err(reason) => {
                return Ok(ChainWalk::from_genesis().failed(
                    own_project,
                    anchor_broken(reason),
                    None,
                ));
            }
        };
        if anchored_before.is_none() {
            // Nothing to key the walk by: a chain with events but no anchored head is not
            // vouched for, whatever its hashes say.
            let stored_events = audit_events::Entity::find()
                .filter(audit_events::Column::OrganizationId.eq(organization_id))
                .count(&self.connection)
                .await
                .map_err(StorageError::from_db)?;
            if stored_events > 0 {
                return Ok(ChainWalk::from_genesis().failed(
                    own_project,
                    no_anchored_head(0, stored_events),
                    None,
                ));
            }
        }
        let keyed_since = anchored_before.as_ref().and_then(|head| head.keyed_since);
        let mut walk = ChainWalk::from_genesis();
        if start == VerificationStart::LastCheckpoint
            && let Some(checkpoint) = seal.checkpoint(organization_id)
        {
            if self
                .checkpoint_still_holds(organization_id, &checkpoint)
                .await?
            {
                walk = ChainWalk::from_checkpoint(checkpoint);
            } else {
                seal.forget_checkpoint(organization_id);
            }
        }
        let recomputed_from_sequence = walk.expected_sequence;
        let anchored_newest_before = anchored_before
            .as_ref()
            .map_or(0, crate::audit_seal::AnchoredHead::newest_sequence);
        if let Some(broken) = self
            .walk_chain(
                organization_id,
                &mut walk,
                keyed_since,
                seal.key(),
                anchored_newest_before,
            )
            .await?
        {
            return Ok(walk.failed(own_project, broken, keyed_since));
        }
        // Two readings of the anchor bracket the walk, so appends running meanwhile raise no
        // false alarm: every event committed before the walk began was anchored as committed
        // before it too (the `removed` check uses the first reading), and every event the walk
        // read was anchored before it committed (the `behind` check uses the second).
        let anchored_after = match seal.anchored_head(organization_id) {
            Ok(anchored) => anchored,
            Err(reason) => {
                return Ok(walk.failed(own_project, anchor_broken(reason), keyed_since));
            }
        };
        let last_sequence = walk.last_sequence();
        let anchor_disagrees = |sequence: i64, reason: String| BrokenLink {
            event_id: 0,
            sequence,
            project_id: None,
            reason,
        };
        let Some(head) = anchored_after else {
            if last_sequence == 0 {
                return Ok(walk.passed(own_project, recomputed_from_sequence, None, keyed_since));
            }
            return Ok(walk.failed(
                own_project,
                no_anchored_head(last_sequence, last_sequence as u64),
                keyed_since,
            ));
        };
        if let Some((sequence, reason)) = &head.rewound {
            return Ok(walk.failed(
                own_project,
                anchor_disagrees(*sequence, reason.clone()),
                keyed_since,
            ));
        }
        let committed_before = anchored_before.and_then(|before| before.committed);
        if let Some((committed_sequence, committed_hash)) = &committed_before {
            if last_sequence < *committed_sequence {
                return Ok(walk.failed(
                    own_project,
                    anchor_disagrees(
                        *committed_sequence,
                        format!(
                            "the chain ends at sequence {last_sequence} but the anchor records sequence {committed_sequence}: the newest events were removed"
                        ),
                    ),
                    keyed_since,
                ));
            }
            let stored_hash = audit_events::Entity::find()
                .filter(audit_events::Column::OrganizationId.eq(organization_id))
                .filter(audit_events::Column::Sequence.eq(*committed_sequence))
                .one(&self.connection)
                .await
                .map_err(StorageError::from_db)?
                .map(|model| model.hash);
            if stored_hash.as_deref() != Some(committed_hash.as_str()) {
                return Ok(walk.failed(
                    own_project,
                    anchor_disagrees(
                        *committed_sequence,
                        format!(
                            "event {committed_sequence} does not carry the hash the anchor records for it: the chain was rewritten"
                        ),
                    ),
                    keyed_since,
                ));
            }
        }
        if last_sequence > head.newest_sequence() {
            return Ok(walk.failed(
                own_project,
                anchor_disagrees(
                    last_sequence,
                    format!(
                        "the chain continues to sequence {last_sequence} past the anchored head (sequence {}): events were inserted behind the anchor",
                        head.newest_sequence()
                    ),
                ),
                keyed_since,
            ));
        }
        if let Some((pending_sequence, pending_hash)) = &head.pending
            && *pending_sequence == last_sequence
            && walk.previous_hash != *pending_hash
        {
            return Ok(walk.failed(
                own_project,
                anchor_disagrees(
                    last_sequence,
                    format!(
                        "event {last_sequence} does not carry the hash the anchor records for it: the chain was rewritten"
                    ),
                ),
                keyed_since,
            ));
        }
        if last_sequence > 0 {
            seal.set_checkpoint(
                organization_id,
                VerifiedCheckpoint {
                    sequence: last_sequence,
                    hash: walk.previous_hash.clone(),
                    events_per_project: walk.events_per_project.clone(),
                },
            );
        }
        Ok(walk.passed(
            own_project,
            recomputed_from_sequence,
            Some(head.newest_sequence()),
            keyed_since,
        ))
    }

    /// Whether the checkpoint's event still carries its hash and the chain up to it still has
    /// as many events as sequences (nothing removed or inserted before it).
    async fn checkpoint_still_holds(
        &self,
        organization_id: uuid::Uuid,
        checkpoint: &VerifiedCheckpoint,
    ) -> Result<bool, StorageError> {
        let events_up_to_checkpoint = audit_events::Entity::find()
            .filter(audit_events::Column::OrganizationId.eq(organization_id))
            .filter(audit_events::Column::Sequence.lte(checkpoint.sequence))
            .count(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        if events_up_to_checkpoint != checkpoint.sequence as u64 {
            return Ok(false);
        }
        let stored = audit_events::Entity::find()
            .filter(audit_events::Column::OrganizationId.eq(organization_id))
            .filter(audit_events::Column::Sequence.eq(checkpoint.sequence))
            .one(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(stored.is_some_and(|model| model.hash == checkpoint.hash))
    }

    /// Recompute the events after `walk`'s position, in sequence order, page by page; the
    /// first that does not match is returned, named.
    async fn walk_chain(
        &self,
        organization_id: uuid::Uuid,
        walk: &mut ChainWalk,
        keyed_since: Option<i64>,
        key: &[u8],
        anchored_newest: i64,
    ) -> Result<Option<BrokenLink>, StorageError> {
        loop {
            let page = audit_events::Entity::find()
                .filter(audit_events::Column::OrganizationId.eq(organization_id))
                .filter(audit_events::Column::Sequence.gte(walk.expected_sequence - 1))
                .order_by_asc(audit_events::Column::Sequence)
                .order_by_asc(audit_events::Column::Id)
                .limit(1001)
                .all(&self.connection)
                .await
                .map_err(StorageError::from_db)?;
            // The page starts at the last verified event (when there is one) so a second
            // event claiming its sequence is seen.
            let mut events = page.into_iter().peekable();
            if events.peek().is_some_and(|model| {
                model.sequence == walk.expected_sequence - 1 && model.hash == walk.previous_hash
            }) {
                events.next();
            }
            let events: Vec<audit_events::Model> = events.collect();
            if events.is_empty() {
                return Ok(None);
            }
            let page_is_full = events.len() >= 1000;
            for (index, model) in events.iter().enumerate() {
                let key = keyed_since
                    .is_some_and(|since| model.sequence >= since)
                    .then_some(key);
                if let Some(reason) =
                    walk.mismatch(model, events.get(index + 1), key, anchored_newest)
                {
                    return Ok(Some(BrokenLink {
                        event_id: model.id,
                        sequence: model.sequence,
                        project_id: model.project_id.map(|project_id| project_id.to_string()),
                        reason,
                    }));
                }
                walk.advance(model);
            }
            if !page_is_full {
                return Ok(None);
            }
        }
    }

    /// The chain before the audit seal existed (and in tests without one): plain hashes, and
    /// the database's own chain head as the only record of the newest event.
    async fn verify_plain_chain(
        &self,
        organization_id: uuid::Uuid,
        own_project: Option<uuid::Uuid>,
    ) -> Result<AuditVerification, StorageError> {
        let mut walk = ChainWalk::from_genesis();
        if let Some(broken) = self
            .walk_chain(organization_id, &mut walk, None, &[], i64::MAX)
            .await?
        {
            return Ok(walk.failed(own_project, broken, None));
        }
        let last_sequence = walk.last_sequence();
        let head = audit_chain_heads::Entity::find_by_id(organization_id)
            .one(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        if let Some(head) = head
            && (head.last_sequence != last_sequence || head.last_hash != walk.previous_hash)
        {
            let reason = format!(
                "the chain ends at sequence {last_sequence} but its head records {}: newest events were removed",
                head.last_sequence
            );
            return Ok(walk.failed(
                own_project,
                BrokenLink {
                    event_id: 0,
                    sequence: head.last_sequence,
                    project_id: None,
                    reason,
                },
                None,
            ));
        }
        Ok(walk.passed(own_project, 1, None, None))
    }
}

/// The anchor names nothing of an organization whose chain holds `events`.
fn no_anchored_head(sequence: i64, events: u64) -> BrokenLink {
    BrokenLink {
        event_id: 0,
        sequence,
        project_id: None,
        reason: format!(
            "the anchor records no head for this organization, but the database holds {events} events: the anchor was replaced, or the events were written without it"
        ),
    }
}

fn anchor_broken(reason: String) -> BrokenLink {
    BrokenLink {
        event_id: 0,
        sequence: 0,
        project_id: None,
        reason: format!("{reason}: the chain cannot be vouched for"),
    }
}

/// Where a verification has got to: the next sequence it expects, the hash that event must
/// link to, and what it has vouched for so far.
struct ChainWalk {
    expected_sequence: i64,
    previous_hash: String,
    events_per_project: HashMap<Option<uuid::Uuid>, u64>,
}

impl ChainWalk {
    fn from_genesis() -> Self {
        Self {
            expected_sequence: 1,
            previous_hash: AUDIT_CHAIN_GENESIS.to_string(),
            events_per_project: HashMap::new(),
        }
    }

    fn from_checkpoint(checkpoint: VerifiedCheckpoint) -> Self {
        Self {
            expected_sequence: checkpoint.sequence + 1,
            previous_hash: checkpoint.hash,
            events_per_project: checkpoint.events_per_project,
        }
    }

    fn last_sequence(&self) -> i64 {
        self.expected_sequence - 1
    }

    /// Why `model` is not the chain's next event, if it is not. `next` (the event after it)
    /// tells an inserted event from an edited one: it links past the intruder.
    fn mismatch(
        &self,
        model: &audit_events::Model,
        next: Option<&audit_events::Model>,
        key: Option<&[u8]>,
        anchored_newest: i64,
    ) -> Option<String> {
        let expected = self.expected_sequence;
        if model.sequence < expected {
            return Some(format!(
                "a second event claims sequence {}: an event was inserted",
                model.sequence
            ));
        }
        if model.sequence > expected {
            let missing = if model.sequence - expected == 1 {
                format!("event {expected} is missing")
            } else {
                format!("events {expected} to {} are missing", model.sequence - 1)
            };
            return Some(format!(
                "sequence {} where {expected} was expected: {missing}, deleted from the middle of the chain",
                model.sequence
            ));
        }
        if model.previous_hash != self.previous_hash {
            return Some(
                "its link does not match the previous event's hash: events were reordered, or one was inserted before it"
                    .to_string(),
            );
        }
        if hash_of(model, &self.previous_hash, key) == model.hash {
            return None;
        }
        let kind = if key.is_some() { "keyed hash" } else { "hash" };
        if next.is_some_and(|next| next.previous_hash == self.previous_hash) {
            return Some(format!(
                "its content does not match its {kind} and the next event links past it: the event was inserted"
            ));
        }
        if model.sequence > anchored_newest {
            return Some(format!(
                "its content does not match its {kind} and it is newer than the anchored head (sequence {anchored_newest}): the event was inserted"
            ));
        }
        Some(format!(
            "its content does not match its {kind}: the event was edited"
        ))
    }

    fn advance(&mut self, model: &audit_events::Model) {
        self.expected_sequence = model.sequence + 1;
        self.previous_hash = model.hash.clone();
        *self.events_per_project.entry(model.project_id).or_default() += 1;
    }

    fn counts(&self, own_project: Option<uuid::Uuid>) -> (u64, u64) {
        (
            self.events_per_project.values().sum(),
            self.events_per_project
                .get(&own_project)
                .copied()
                .unwrap_or(0),
        )
    }

    fn failed(
        &self,
        own_project: Option<uuid::Uuid>,
        broken: BrokenLink,
        keyed_since: Option<i64>,
    ) -> AuditVerification {
        let (events_checked, project_events_checked) = self.counts(own_project);
        AuditVerification {
            events_checked,
            project_events_checked,
            first_broken: Some(broken),
            recomputed_from_sequence: 1,
            anchored_sequence: None,
            keyed_since,
        }
    }

    fn passed(
        &self,
        own_project: Option<uuid::Uuid>,
        recomputed_from_sequence: i64,
        anchored_sequence: Option<i64>,
        keyed_since: Option<i64>,
    ) -> AuditVerification {
        let (events_checked, project_events_checked) = self.counts(own_project);
        AuditVerification {
            events_checked,
            project_events_checked,
            first_broken: None,
            recomputed_from_sequence,
            anchored_sequence,
            keyed_since,
        }
    }
}
