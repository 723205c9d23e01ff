//! The audit log: events appended in the same transaction as the change they record (so a
//! change and its audit event commit together or not at all), chained per organization, read
//! per project, and verified by recomputing the chain.

use crate::entities::{audit_chain_heads, audit_events};
use crate::{Storage, StorageError};
use chrono::{DateTime, Utc};
use engram_core::audit::{AUDIT_CHAIN_GENESIS, Actor, ChainedFields, NewAuditEvent, chain_hash};
use engram_core::{OrganizationId, ProjectScope};
use sea_orm::sea_query::OnConflict;
use sea_orm::{
    ActiveValue::Set, ColumnTrait, ConnectionTrait, DbBackend, EntityTrait, QueryFilter,
    QueryOrder, QuerySelect,
};

const MAX_USER_AGENT_CHARS: usize = 256;
/// Most events `audit_events` returns per page.
pub const MAX_AUDIT_PAGE: u64 = 500;

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

/// The outcome of recomputing an organization's chain.
#[derive(Clone, Debug, PartialEq)]
pub struct AuditVerification {
    pub events_checked: u64,
    /// Of those, the events of the caller's project.
    pub project_events_checked: u64,
    /// The first event whose stored hash, link or sequence does not match, with its project.
    pub first_broken: Option<BrokenLink>,
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

fn hash_of(model: &audit_events::Model, previous_hash: &str) -> String {
    let (organization_id, project_id) = chained_fields(model);
    chain_hash(
        previous_hash,
        &ChainedFields {
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
        },
    )
}

/// Append `event` to the organization's chain inside `transaction`. The chain head row is
/// locked (PostgreSQL `FOR UPDATE`; SQLite has one writer at a time), so concurrent appends
/// line up one after another.
pub(crate) async fn append_audit_event<C: ConnectionTrait>(
    transaction: &C,
    organization_id: OrganizationId,
    scope: Option<&ProjectScope>,
    actor: &Actor,
    event: &NewAuditEvent,
) -> Result<(), StorageError> {
    audit_chain_heads::Entity::insert(audit_chain_heads::ActiveModel {
        organization_id: Set(organization_id.as_uuid()),
        last_sequence: Set(0),
        last_hash: Set(AUDIT_CHAIN_GENESIS.to_string()),
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
    let head = head_query
        .one(transaction)
        .await
        .map_err(StorageError::from_db)?
        .ok_or_else(|| StorageError::Internal("audit chain head vanished".to_string()))?;

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
        details: event.details.to_string(),
        previous_hash: head.last_hash.clone(),
        hash: String::new(),
    };
    model.hash = hash_of(&model, &head.last_hash);
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
    audit_chain_heads::Entity::update_many()
        .col_expr(
            audit_chain_heads::Column::LastSequence,
            sea_orm::sea_query::Expr::value(model.sequence),
        )
        .col_expr(
            audit_chain_heads::Column::LastHash,
            sea_orm::sea_query::Expr::value(model.hash),
        )
        .filter(audit_chain_heads::Column::OrganizationId.eq(organization_id.as_uuid()))
        .exec(transaction)
        .await
        .map_err(StorageError::from_db)?;
    Ok(())
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
                .add(audit_events::Column::ProjectId.eq(scope.project_id().as_uuid()))
                .add(
                    sea_orm::Condition::all()
                        .add(
                            audit_events::Column::OrganizationId
                                .eq(scope.organization_id().as_uuid()),
                        )
                        .add(audit_events::Column::ProjectId.is_null()),
                )
        } else {
            sea_orm::Condition::all()
                .add(audit_events::Column::ProjectId.eq(scope.project_id().as_uuid()))
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

    /// Recompute the whole chain of `scope`'s organization (a chain spans its projects) and
    /// report the first event that does not match: an edited field, a removed or inserted
    /// event, or a chain head that points elsewhere.
    pub async fn verify_audit_chain(
        &self,
        scope: &ProjectScope,
    ) -> Result<AuditVerification, StorageError> {
        let organization_id = scope.organization_id().as_uuid();
        let mut previous_hash = AUDIT_CHAIN_GENESIS.to_string();
        let mut expected_sequence = 1;
        let mut events_checked = 0u64;
        let mut project_events_checked = 0u64;
        let own_project = scope.project_id().as_uuid();
        let mut after_id = 0i64;
        loop {
            let page = audit_events::Entity::find()
                .filter(audit_events::Column::OrganizationId.eq(organization_id))
                .filter(audit_events::Column::Id.gt(after_id))
                .order_by_asc(audit_events::Column::Id)
                .limit(1000)
                .all(&self.connection)
                .await
                .map_err(StorageError::from_db)?;
            let Some(last) = page.last() else {
                break;
            };
            after_id = last.id;
            for model in page {
                let broken = |reason: String| BrokenLink {
                    event_id: model.id,
                    sequence: model.sequence,
                    project_id: model.project_id.map(|project_id| project_id.to_string()),
                    reason,
                };
                if model.sequence != expected_sequence {
                    return Ok(AuditVerification {
                        events_checked,
                        project_events_checked,
                        first_broken: Some(broken(format!(
                            "sequence {} where {expected_sequence} was expected: an event is missing or was inserted",
                            model.sequence
                        ))),
                    });
                }
                if model.previous_hash != previous_hash {
                    return Ok(AuditVerification {
                        events_checked,
                        project_events_checked,
                        first_broken: Some(broken(
                            "its link does not match the previous event's hash".to_string(),
                        )),
                    });
                }
                let recomputed = hash_of(&model, &previous_hash);
                if recomputed != model.hash {
                    return Ok(AuditVerification {
                        events_checked,
                        project_events_checked,
                        first_broken: Some(broken(
                            "its content does not match its hash: the event was edited".to_string(),
                        )),
                    });
                }
                previous_hash = model.hash.clone();
                expected_sequence += 1;
                events_checked += 1;
                if model.project_id == Some(own_project) {
                    project_events_checked += 1;
                }
            }
        }
        // The head must point at the last event: removing the newest events is detected.
        let head = audit_chain_heads::Entity::find_by_id(organization_id)
            .one(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        if let Some(head) = head
            && (head.last_sequence != expected_sequence - 1 || head.last_hash != previous_hash)
        {
            return Ok(AuditVerification {
                events_checked,
                project_events_checked,
                first_broken: Some(BrokenLink {
                    event_id: 0,
                    sequence: head.last_sequence,
                    project_id: None,
                    reason: format!(
                        "the chain ends at sequence {} but its head records {}: newest events were removed",
                        expected_sequence - 1,
                        head.last_sequence
                    ),
                }),
            });
        }
        Ok(AuditVerification {
            events_checked,
            project_events_checked,
            first_broken: None,
        })
    }
}
