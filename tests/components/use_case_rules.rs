//! Rules live in the use cases, not in the doors: called straight, as a new door that parsed
//! nothing would call them, the use cases refuse what the HTTP API refuses — with the
//! field named and nothing changed. Real model, real SQLite, real qdrant-edge.

use chrono::{Duration, Utc};
use engram_core::audit::Actor;
use engram_core::audit::AuditFilter;
use engram_core::conversation::MessageRole;
use engram_core::conversation::NewMessage;
use engram_core::usage::UsageGranularity;
use engram_core::usage::{MonthlyBudget, SpendLimits, UsageUnit};
use engram_core::{ExternalId, InvalidInput, Principal};
use engram_embed::{Embedder, LocalEncoder};
use engram_engine::{
    AddMessagesRequest, EngineError, EngineSettings, ListMessagesRequest, MemoryEngine,
    UsageReportRequest,
};
use engram_index::EdgeVectorIndex;
use engram_storage::{ApiKeyPepper, Storage};
use std::sync::Arc;

struct Fixture {
    engine: MemoryEngine,
    /// A project key with every scope, as authentication makes it.
    key: Principal,
    _directory: tempfile::TempDir,
}

async fn fixture() -> Fixture {
    let directory = tempfile::tempdir().unwrap();
    let storage = Storage::connect(&format!(
        "sqlite://{}?mode=rwc",
        directory.path().join("engram.db").display()
    ))
    .await
    .unwrap();
    let model_dir = engram_embed::resolve_model_dir(&engram_tests::workspace_root());
    let embedder: Arc<dyn Embedder> = Arc::new(
        LocalEncoder::load(
            engram_embed::MINILM,
            &model_dir,
            engram_tests::local_model_options(),
        )
        .unwrap(),
    );
    let index = Arc::new(
        EdgeVectorIndex::open(&directory.path().join("index"), embedder.dimension()).unwrap(),
    );
    let pepper = ApiKeyPepper::new(b"pepper".to_vec());
    let engine = MemoryEngine::new(storage.clone(), index, embedder, EngineSettings::default())
        .with_api_key_pepper(pepper.clone());
    let record = storage
        .bootstrap_organization("org", "project", "owner@example.com", "hash", &pepper)
        .await
        .unwrap();
    let (key, _) = engine
        .authenticate(&record.api_key, Actor::system("test"))
        .await
        .unwrap()
        .expect("the bootstrap key authenticates");
    Fixture {
        engine,
        key,
        _directory: directory,
    }
}

/// The fields a refusal names, or a panic saying what came back instead.
fn refused_fields<T>(outcome: Result<T, EngineError>) -> Vec<String> {
    match outcome {
        Err(EngineError::Invalid(InvalidInput(errors))) => {
            errors.into_iter().map(|error| error.field).collect()
        }
        Err(other) => panic!("expected a refusal naming fields, got {other:?}"),
        Ok(_) => panic!("expected a refusal naming fields, got a success"),
    }
}

fn message(content: &str) -> NewMessage {
    NewMessage {
        role: MessageRole::User,
        name: None,
        content: content.to_string(),
        memory_key: None,
        sent_at: Utc::now(),
    }
}

fn session() -> ExternalId {
    ExternalId::parse("rules").unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_batches_are_held_to_their_limits_by_the_use_case() {
    // `_directory` is bound so the database outlives the test (a `..` would drop it here).
    let Fixture {
        engine,
        key,
        _directory,
    } = fixture().await;
    let add = |messages: Vec<NewMessage>| AddMessagesRequest {
        session_id: session(),
        user_id: None,
        agent_id: None,
        messages,
        derive_memories: Some(false),
        wait: false,
    };
    let too_many = (0..101).map(|n| message(&format!("message {n}"))).collect();
    assert_eq!(
        refused_fields(engine.add_messages_for(&key, add(too_many)).await),
        ["messages"]
    );
    assert_eq!(
        refused_fields(engine.add_messages_for(&key, add(Vec::new())).await),
        ["messages"]
    );
    let oversized = "x".repeat(engram_core::limits::MAX_CONTENT_BYTES + 1);
    assert_eq!(
        refused_fields(
            engine
                .add_messages_for(
                    &key,
                    add(vec![message("fine"), message("  "), message(&oversized)])
                )
                .await
        ),
        ["messages[1].content", "messages[2].content"]
    );
    let page = |limit| ListMessagesRequest {
        session_id: session(),
        user_id: None,
        after: None,
        limit,
    };
    // Nothing was stored by the refused batches.
    let (stored, _) = engine.list_messages_for(&key, page(500)).await.unwrap();
    assert!(stored.is_empty(), "a refused batch stored {stored:?}");
    assert_eq!(
        refused_fields(engine.list_messages_for(&key, page(501)).await),
        ["limit"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spend_limits_report_windows_and_audit_filters_are_checked_below_the_door() {
    // `_directory` is bound so the database outlives the test (a `..` would drop it here).
    let Fixture {
        engine,
        key,
        _directory,
    } = fixture().await;
    let mut limits = SpendLimits {
        monthly_budget: Some(MonthlyBudget {
            amount_micros: -1,
            currency: "dollars".to_string(),
            alert_thresholds_percent: vec![0],
            hard_cap: true,
        }),
        requests_per_minute: Some(0),
        ..Default::default()
    };
    limits.monthly_quotas.insert(UsageUnit::MemoryDays, 10);
    limits.recall.max_tokens = Some(100_001);
    let mut fields = refused_fields(engine.put_spend_limits_for(&key, limits).await);
    fields.sort();
    assert_eq!(
        fields,
        [
            "monthly_budget.alert_thresholds_percent[0]",
            "monthly_budget.amount_micros",
            "monthly_budget.currency",
            "monthly_quotas.memory_days",
            "recall.max_tokens",
            "requests_per_minute",
        ]
    );
    // Refused, it changed nothing.
    let saved = engine.spend_limits_for(&key).await.unwrap();
    assert!(saved.limits.monthly_budget.is_none(), "{:?}", saved.limits);

    let now = Utc::now();
    assert_eq!(
        refused_fields(
            engine
                .usage_report_for(
                    &key,
                    UsageReportRequest {
                        from: now,
                        to: now - Duration::days(2),
                        granularity: UsageGranularity::Day,
                        by: None,
                    },
                )
                .await
        ),
        ["to"]
    );
    assert_eq!(
        refused_fields(
            engine
                .usage_report_for(
                    &key,
                    UsageReportRequest {
                        from: now - Duration::days(400),
                        to: now,
                        granularity: UsageGranularity::Day,
                        by: None,
                    },
                )
                .await
        ),
        ["to"]
    );
    assert!(
        engine
            .usage_report_for(
                &key,
                UsageReportRequest {
                    from: now - Duration::days(30),
                    to: now,
                    granularity: UsageGranularity::Day,
                    by: None,
                },
            )
            .await
            .is_ok()
    );
    // A breakdown is daily: asked for by the hour, it names the granularity.
    assert_eq!(
        refused_fields(
            engine
                .usage_report_for(
                    &key,
                    UsageReportRequest {
                        from: now - Duration::days(30),
                        to: now,
                        granularity: UsageGranularity::Hour,
                        by: Some(engram_core::usage::UsageBreakdown::Agent),
                    },
                )
                .await
        ),
        ["granularity"]
    );

    let filter = AuditFilter {
        action: Some("no_such_action".to_string()),
        limit: 0,
        since: Some(now),
        until: Some(now - Duration::hours(1)),
        ..Default::default()
    };
    assert_eq!(
        refused_fields(engine.list_audit_events_for(&key, filter.clone()).await),
        ["action", "limit", "until"]
    );
    // The export pages by itself: only what the caller filters by is checked.
    assert_eq!(
        refused_fields(engine.export_audit_events_for(&key, filter).await),
        ["action", "until"]
    );
    assert!(
        engine
            .export_audit_events_for(&key, AuditFilter::default())
            .await
            .is_ok(),
        "an export with no filter (the console's) is served"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_erasure_a_person_confirmed_wrongly_is_refused_by_the_use_case() {
    // `_directory` is bound so the database outlives the test (a `..` would drop it here).
    let Fixture {
        engine,
        key,
        _directory,
    } = fixture().await;
    let subject = ExternalId::parse("erin").unwrap();
    assert_eq!(
        refused_fields(
            engine
                .request_subject_erasure_for(&key, &subject, Some("erin-typo"))
                .await
        ),
        ["confirm"]
    );
    // Confirmed (the console), or with no confirmation asked (the API): queued.
    let task = engine
        .request_subject_erasure_for(&key, &subject, Some(" erin "))
        .await
        .unwrap();
    assert_eq!(task.kind, engram_core::TaskKind::SubjectErasure);
    let unasked = engine
        .request_subject_erasure_for(&key, &ExternalId::parse("ezra").unwrap(), None)
        .await;
    assert!(
        unasked.is_ok(),
        "an erasure with no confirmation asked is queued: {:?}",
        unasked.err()
    );
}
