//! The message-derivation runner: claims `message_derivation` tasks, derives memories from
//! their batch of messages (LLM extraction and reconciliation, or verbatim without an LLM),
//! and bills what it wrote and embedded to whoever sent the messages. It needs the model
//! (and the LLM), so it runs where the engine does (serve and gateway).

use chrono::Utc;
use engram_core::usage::UsageUnit;
use engram_engine::MemoryEngine;
use engram_engine::derivation::DerivationInput;
use engram_storage::conversations::DerivationSubject;
use engram_storage::tasks::ClaimedTask;
use engram_storage::usage::UsageIncrement;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

const TASK_LEASE: Duration = Duration::from_secs(300);
/// Earlier messages of the session the LLM sees as context.
const CONTEXT_MESSAGES: u64 = 10;

pub async fn run_message_derivation_runner(
    engine: Arc<MemoryEngine>,
    shutdown: watch::Receiver<bool>,
) {
    crate::tasks::serve_tasks(
        engine.maintenance_store().clone(),
        engine.governance().task_queued.clone(),
        &[engram_core::TaskKind::MessageDerivation],
        TASK_LEASE,
        shutdown,
        |task| {
            let engine = engine.clone();
            async move { derive_claimed_batch(&engine, &task).await }
        },
    )
    .await;
}

async fn derive_claimed_batch(
    engine: &MemoryEngine,
    task: &ClaimedTask,
) -> Result<serde_json::Value, String> {
    let storage = engine.maintenance_store();
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
            first.user_id.as_deref(),
            first.id,
            CONTEXT_MESSAGES,
        )
        .await
        .map_err(|error| error.to_string())?;
    let mut actor = engram_core::audit::Actor::system("message-derivation");
    actor.request_id = task.request_id.clone();
    let derivation = engine
        .derive_memories(
            scope,
            DerivationInput {
                messages: &messages,
                earlier: &earlier,
                credential: &subject.credential,
                batch_id: subject.batch_id,
                may_delete: subject.may_delete,
            },
            &actor,
        )
        .await
        .map_err(|error| error.to_string())?;
    // LLM tokens were billed with each call's record; the rest is billed here.
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
        credential: subject.credential.clone(),
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
    storage
        .task_progress(task.id, total, total, TASK_LEASE)
        .await
        .map_err(|error| error.to_string())?;
    serde_json::to_value(&derivation).map_err(|error| error.to_string())
}
