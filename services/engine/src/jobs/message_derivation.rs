//! The message-derivation job's work on one claimed batch: derive memories from the
//! messages (LLM extraction and reconciliation, or verbatim without an LLM) and bill what it
//! wrote and embedded to whoever sent them.

use super::MESSAGE_DERIVATION_LEASE;
use crate::MemoryEngine;
use crate::derivation::DerivationInput;
use chrono::Utc;
use engram_core::Principal;
use engram_core::usage::{UsageAttribution, UsageUnit};
use engram_storage::conversations::DerivationSubject;
use engram_storage::tasks::ClaimedTask;
use engram_storage::usage::UsageIncrement;

/// Earlier messages of the session the LLM sees as context.
const CONTEXT_MESSAGES: u64 = 10;

pub(super) async fn derive_claimed_batch(
    engine: &MemoryEngine,
    principal: &Principal,
    task: &ClaimedTask,
) -> Result<serde_json::Value, String> {
    let storage = &engine.storage;
    let tasks = engine.maintenance_store();
    let subject = task
        .subject
        .as_deref()
        .and_then(DerivationSubject::parse)
        .ok_or_else(|| "the task names no message batch".to_string())?;
    let scope = &task.scope;
    let messages = storage
        .messages_of_batch(scope, subject.batch_id)
        .await
        .map_err(|error| error.to_string())?;
    let Some(first) = messages.first() else {
        // Erased before it was derived: nothing is left to remember.
        return Ok(serde_json::json!({ "changes": [], "note": "the messages were erased" }));
    };
    let earlier = storage
        .messages_before(
            scope,
            &first.session_id,
            [first.user_id.as_deref(), first.agent_id.as_deref()],
            first.id,
            CONTEXT_MESSAGES,
        )
        .await
        .map_err(|error| error.to_string())?;
    // Who asked (credential and channel, kept with the task) for the batch's end-user and
    // agent.
    let attribution = UsageAttribution::from_billing_label(&subject.credential)
        .for_subject(first.user_id.as_deref(), first.agent_id.as_deref());
    let no_metadata = serde_json::Map::new();
    let derivation = super::again_after_space_switch(|| {
        engine.derive_memories(
            scope,
            DerivationInput {
                messages: &messages,
                earlier: &earlier,
                attribution: &attribution,
                batch_id: subject.batch_id,
                may_delete: subject.may_delete,
                metadata: &no_metadata,
                categories: &[],
                expires_at: None,
                visibility: None,
                shared_with: None,
            },
            principal.actor(),
        )
    })
    .await
    .map_err(|error| error.to_string())?;
    // LLM tokens were billed with each call's record; the rest is billed here. Messages
    // erased while the derivation ran belonged to an erased end-user: the rest of the bill
    // names no end-user.
    let erased_meanwhile = storage
        .messages_of_batch(scope, subject.batch_id)
        .await
        .map_err(|error| error.to_string())?
        .is_empty();
    let attribution = if erased_meanwhile {
        UsageAttribution {
            end_user: None,
            ..attribution
        }
    } else {
        attribution
    };
    let increments: Vec<UsageIncrement> = [
        (
            UsageUnit::MemoriesWritten,
            i64::try_from(derivation.memories_written).unwrap_or(i64::MAX),
        ),
        (
            UsageUnit::TokensEmbedded,
            i64::try_from(derivation.tokens_embedded).unwrap_or(i64::MAX),
        ),
    ]
    .into_iter()
    .filter(|(_, quantity)| *quantity > 0)
    .map(|(unit, quantity)| UsageIncrement {
        organization_id: scope.organization_id(),
        project_id: scope.project_id(),
        attribution: attribution.clone(),
        unit,
        at: Utc::now(),
        quantity,
    })
    .collect();
    storage
        .add_usage(&increments)
        .await
        .map_err(|error| error.to_string())?;
    let total = messages.len() as i64;
    tasks
        .task_progress(task.id, total, total, MESSAGE_DERIVATION_LEASE)
        .await
        .map_err(|error| error.to_string())?;
    serde_json::to_value(&derivation).map_err(|error| error.to_string())
}
