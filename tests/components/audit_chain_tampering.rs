//! The keyed, anchored audit chain against someone who can write the database but holds
//! neither the deployment's key nor the anchor: every way of rewriting history — an edit (even
//! with every plain hash recomputed), a deletion in the middle, the newest event deleted, an
//! insertion, a reordering — is detected and named, on SQLite and on PostgreSQL; a chain
//! written before the upgrade keeps its hashes and is joined by one `audit.chain_rekeyed`
//! event; verification continues from its checkpoint and fails closed without its anchor.

use engram_core::ProjectScope;
use engram_core::audit::{
    AUDIT_CHAIN_GENESIS, Actor, AuditAction, ChainedFields, NewAuditEvent, chain_hash,
};
use engram_migrations::sea_orm::{ConnectionTrait, Database, DatabaseConnection, Statement};
use engram_storage::{AuditSeal, AuditVerification, Storage, VerificationStart};
use std::path::{Path, PathBuf};

const KEY: &[u8] = b"the deployment's audit chain key, never in the database";

struct Deployment {
    url: String,
    anchor: PathBuf,
    _directory: tempfile::TempDir,
}

impl Deployment {
    async fn sqlite() -> Self {
        let directory = tempfile::tempdir().unwrap();
        let url = format!(
            "sqlite://{}?mode=rwc",
            directory.path().join("engram.db").display()
        );
        Self {
            url,
            anchor: directory.path().join("audit-anchor.jsonl"),
            _directory: directory,
        }
    }

    async fn postgres() -> Self {
        let directory = tempfile::tempdir().unwrap();
        Self {
            url: engram_test_postgres::fresh_database_url().await,
            anchor: directory.path().join("audit-anchor.jsonl"),
            _directory: directory,
        }
    }

    /// The storage of a server of this deployment: its key, its anchor.
    async fn sealed_storage(&self) -> Storage {
        Storage::connect(&self.url)
            .await
            .unwrap()
            .with_audit_seal(AuditSeal::open(KEY.to_vec(), self.anchor.clone()).unwrap())
            .await
            .unwrap()
    }

    /// What the intruder holds: the database, nothing else.
    async fn database(&self) -> DatabaseConnection {
        Database::connect(&self.url).await.unwrap()
    }
}

macro_rules! on_both_databases {
    ($scenario:ident) => {
        mod $scenario {
            #[tokio::test]
            async fn sqlite() {
                super::$scenario(super::Deployment::sqlite().await).await;
            }
            #[tokio::test]
            async fn postgres() {
                super::$scenario(super::Deployment::postgres().await).await;
            }
        }
    };
}

async fn project(storage: &Storage) -> ProjectScope {
    let pepper = engram_storage::ApiKeyPepper::new(b"test pepper".to_vec());
    let organization_id = storage
        .bootstrap_organization("org", "first", "owner@example.com", "hash", &pepper)
        .await
        .unwrap()
        .organization_id;
    let (_, key) = storage
        .create_project(organization_id, "project", &pepper)
        .await
        .unwrap();
    storage
        .authenticate_api_key(&key, &pepper)
        .await
        .unwrap()
        .unwrap()
}

async fn record_events(storage: &Storage, scope: &ProjectScope, count: usize) {
    for index in 0..count {
        storage
            .record_audit_event(
                scope.organization_id(),
                Some(scope),
                &Actor::system("test"),
                &NewAuditEvent::success(
                    AuditAction::MemoryContentViewed,
                    vec![format!("memory-{index}")],
                    serde_json::json!({ "index": index }),
                ),
            )
            .await
            .unwrap();
    }
}

async fn execute(database: &DatabaseConnection, sql: &str) {
    database.execute_unprepared(sql).await.unwrap();
}

/// `(id, sequence)` of the organization's events, in sequence order (read the way the
/// audit page reads them).
async fn events(storage: &Storage, scope: &ProjectScope) -> Vec<(i64, i64)> {
    let mut events: Vec<(i64, i64)> = storage
        .audit_events(
            scope,
            &engram_storage::AuditFilter {
                include_organization_events: true,
                limit: 500,
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .iter()
        .map(|event| (event.id, event.sequence))
        .collect();
    events.sort_by_key(|(_, sequence)| *sequence);
    events
}

async fn verify_from_start(storage: &Storage, scope: &ProjectScope) -> AuditVerification {
    storage
        .verify_audit_chain(scope, VerificationStart::Genesis)
        .await
        .unwrap()
}

fn assert_broken(verification: &AuditVerification, named: &str, sequence: Option<i64>) -> String {
    let broken = verification
        .first_broken
        .as_ref()
        .unwrap_or_else(|| panic!("the tampering went unnoticed: {verification:?}"));
    assert!(
        broken.reason.contains(named),
        "expected the break to be named {named:?}: {broken:?}"
    );
    if let Some(sequence) = sequence {
        assert_eq!(broken.sequence, sequence, "{broken:?}");
    }
    broken.reason.clone()
}

/// Six events, verified once (so a checkpoint exists), then one tampering per fresh chain.
async fn chain_of_six(deployment: &Deployment) -> (Storage, ProjectScope, DatabaseConnection) {
    let storage = deployment.sealed_storage().await;
    let scope = project(&storage).await;
    record_events(&storage, &scope, 6).await;
    let verification = storage
        .verify_audit_chain(&scope, VerificationStart::LastCheckpoint)
        .await
        .unwrap();
    assert_eq!(verification.first_broken, None, "{verification:?}");
    assert_eq!(
        verification.keyed_since,
        Some(1),
        "a new chain is keyed from its start"
    );
    (storage, scope, deployment.database().await)
}

async fn an_edit_is_detected_even_with_every_plain_hash_recomputed(deployment: Deployment) {
    let (storage, scope, database) = chain_of_six(&deployment).await;
    let organization_id = scope.organization_id();
    let chain = events(&storage, &scope).await;
    let (victim_id, victim_sequence) = chain[2];
    // The intruder rewrites what event 3 says, then recomputes, with the public algorithm,
    // the hash of every event from there and the chain head: what defeated an unkeyed chain.
    execute(
        &database,
        &format!(
            "UPDATE audit_events SET target_ids = '[\"someone-else\"]' WHERE id = {victim_id}"
        ),
    )
    .await;
    let backend = database.get_database_backend();
    let rows = database
        .query_all(Statement::from_string(
            backend,
            "SELECT id, sequence, project_id, at, actor_type, actor_id, action, target_type, \
                 target_ids, outcome, ip, user_agent, request_id, details, previous_hash \
                 FROM audit_events ORDER BY sequence"
                .to_string(),
        ))
        .await
        .unwrap();
    let mut previous_hash = AUDIT_CHAIN_GENESIS.to_string();
    for row in rows {
        let id: i64 = row.try_get_by_index(0).unwrap();
        let sequence: i64 = row.try_get_by_index(1).unwrap();
        let project_id: Option<uuid::Uuid> = row.try_get_by_index(2).unwrap();
        let at: chrono::DateTime<chrono::Utc> = row.try_get_by_index(3).unwrap();
        let text = |index: usize| row.try_get_by_index::<String>(index).unwrap();
        let optional = |index: usize| row.try_get_by_index::<Option<String>>(index).unwrap();
        if sequence < victim_sequence {
            previous_hash = storage_hash_of(&database, id).await;
            continue;
        }
        let organization = organization_id.to_string();
        let project = project_id.map(|id| id.to_string());
        let (ip, user_agent, request_id) = (optional(10), optional(11), optional(12));
        let fields = ChainedFields {
            organization_id: &organization,
            sequence,
            project_id: project.as_deref(),
            at,
            actor_type: &text(4),
            actor_id: &text(5),
            action: &text(6),
            target_type: &text(7),
            target_ids: &text(8),
            outcome: &text(9),
            ip: ip.as_deref(),
            user_agent: user_agent.as_deref(),
            request_id: request_id.as_deref(),
            details: &text(13),
        };
        let forged = chain_hash(&previous_hash, &fields);
        execute(
            &database,
            &format!(
                "UPDATE audit_events SET previous_hash = '{previous_hash}', hash = '{forged}' WHERE id = {id}"
            ),
        )
        .await;
        previous_hash = forged;
    }
    execute(
        &database,
        &format!("UPDATE audit_chain_heads SET last_hash = '{previous_hash}'"),
    )
    .await;
    let verification = verify_from_start(&storage, &scope).await;
    assert_broken(&verification, "edited", Some(victim_sequence));
    assert_eq!(
        verification.events_checked, 2,
        "events 1 and 2 still verify"
    );
}
on_both_databases!(an_edit_is_detected_even_with_every_plain_hash_recomputed);

async fn storage_hash_of(database: &DatabaseConnection, id: i64) -> String {
    let backend = database.get_database_backend();
    database
        .query_one(Statement::from_string(
            backend,
            format!("SELECT hash FROM audit_events WHERE id = {id}"),
        ))
        .await
        .unwrap()
        .unwrap()
        .try_get_by_index(0)
        .unwrap()
}

async fn a_deletion_in_the_middle_is_detected(deployment: Deployment) {
    let (storage, scope, database) = chain_of_six(&deployment).await;
    let chain = events(&storage, &scope).await;
    execute(
        &database,
        &format!("DELETE FROM audit_events WHERE id = {}", chain[3].0),
    )
    .await;
    // Even the incremental verification notices: the count up to its checkpoint fell.
    let verification = storage
        .verify_audit_chain(&scope, VerificationStart::LastCheckpoint)
        .await
        .unwrap();
    let reason = assert_broken(&verification, "missing", Some(5));
    assert!(reason.contains("event 4 is missing"), "{reason}");
}
on_both_databases!(a_deletion_in_the_middle_is_detected);

async fn the_newest_event_deleted_is_detected_by_the_anchor(deployment: Deployment) {
    let (storage, scope, database) = chain_of_six(&deployment).await;
    let chain = events(&storage, &scope).await;
    let (newest_id, _) = chain[5];
    let previous_hash = storage_hash_of(&database, chain[4].0).await;
    // The intruder also moves the database's own chain head back: only the anchor remains.
    execute(
        &database,
        &format!("DELETE FROM audit_events WHERE id = {newest_id}"),
    )
    .await;
    execute(
        &database,
        &format!("UPDATE audit_chain_heads SET last_sequence = 5, last_hash = '{previous_hash}'"),
    )
    .await;
    let verification = storage
        .verify_audit_chain(&scope, VerificationStart::LastCheckpoint)
        .await
        .unwrap();
    assert_broken(&verification, "the newest events were removed", Some(6));
    assert_broken(
        &verify_from_start(&storage, &scope).await,
        "the newest events were removed",
        Some(6),
    );
}
on_both_databases!(the_newest_event_deleted_is_detected_by_the_anchor);

/// The newest events deleted and the database's head moved back — then Engram appends again
/// at the freed sequence (or, with the head set below zero, at sequences no walk reads): the
/// anchor saw an append that does not go beyond an event it knows committed.
async fn a_rewound_head_is_detected_after_the_next_append(deployment: Deployment) {
    for (tampering, head) in [("deleted newest", 5), ("negative head", -1000)] {
        let deployment = if head == 5 {
            Deployment {
                url: deployment.url.clone(),
                anchor: deployment.anchor.clone(),
                _directory: tempfile::tempdir().unwrap(),
            }
        } else {
            match deployment.url.starts_with("sqlite") {
                true => Deployment::sqlite().await,
                false => Deployment::postgres().await,
            }
        };
        let (storage, scope, database) = chain_of_six(&deployment).await;
        let chain = events(&storage, &scope).await;
        if head == 5 {
            let previous_hash = storage_hash_of(&database, chain[4].0).await;
            execute(
                &database,
                &format!("DELETE FROM audit_events WHERE id = {}", chain[5].0),
            )
            .await;
            execute(
                &database,
                &format!(
                    "UPDATE audit_chain_heads SET last_sequence = 5, last_hash = '{previous_hash}'"
                ),
            )
            .await;
        } else {
            execute(
                &database,
                "UPDATE audit_chain_heads SET last_sequence = -1000",
            )
            .await;
        }
        record_events(&storage, &scope, 1).await;
        let verification = verify_from_start(&storage, &scope).await;
        let reason = assert_broken(&verification, "rewound", Some(6));
        println!("{tampering}: {reason}");
    }
}
on_both_databases!(a_rewound_head_is_detected_after_the_next_append);

async fn an_insertion_is_detected(deployment: Deployment) {
    let (storage, scope, database) = chain_of_six(&deployment).await;
    let chain = events(&storage, &scope).await;
    let newest_hash = storage_hash_of(&database, chain[5].0).await;
    // A forged seventh event, linked properly, with a hash the intruder cannot key.
    execute(
        &database,
        &format!(
            "INSERT INTO audit_events (organization_id, sequence, project_id, at, actor_type, \
             actor_id, action, target_type, target_ids, outcome, ip, user_agent, request_id, \
             details, previous_hash, hash) SELECT organization_id, 7, project_id, at, actor_type, \
             actor_id, 'memory.deleted', target_type, target_ids, outcome, ip, user_agent, \
             request_id, details, '{newest_hash}', '{}' FROM audit_events WHERE id = {}",
            "f".repeat(64),
            chain[5].0,
        ),
    )
    .await;
    let verification = storage
        .verify_audit_chain(&scope, VerificationStart::LastCheckpoint)
        .await
        .unwrap();
    assert_broken(&verification, "inserted", Some(7));
}
on_both_databases!(an_insertion_is_detected);

async fn a_reordering_is_detected(deployment: Deployment) {
    let (storage, scope, database) = chain_of_six(&deployment).await;
    let chain = events(&storage, &scope).await;
    let ((third, _), (fourth, _)) = (chain[2], chain[3]);
    // Swap events 3 and 4 (through a free sequence: the pair is unique).
    execute(
        &database,
        &format!("UPDATE audit_events SET sequence = 1000 WHERE id = {third}"),
    )
    .await;
    execute(
        &database,
        &format!("UPDATE audit_events SET sequence = 3 WHERE id = {fourth}"),
    )
    .await;
    execute(
        &database,
        &format!("UPDATE audit_events SET sequence = 4 WHERE id = {third}"),
    )
    .await;
    let verification = verify_from_start(&storage, &scope).await;
    assert_broken(&verification, "reordered", Some(3));
}
on_both_databases!(a_reordering_is_detected);

/// The chain of a deployment upgraded from plain hashes: the old events keep theirs, one
/// anchored `audit.chain_rekeyed` event links the old head to the keyed chain, and the
/// verification after that is incremental, from its checkpoint.
async fn a_plain_chain_is_rekeyed_once_and_verified_incrementally(deployment: Deployment) {
    let before_the_upgrade = Storage::connect(&deployment.url).await.unwrap();
    let scope = project(&before_the_upgrade).await;
    record_events(&before_the_upgrade, &scope, 3).await;
    let database = deployment.database().await;
    let plain_hashes: Vec<String> = {
        let mut hashes = Vec::new();
        for (id, _) in events(&before_the_upgrade, &scope).await {
            hashes.push(storage_hash_of(&database, id).await);
        }
        hashes
    };
    before_the_upgrade.close().await.unwrap();

    let storage = deployment.sealed_storage().await;
    let verification = verify_from_start(&storage, &scope).await;
    assert_eq!(verification.first_broken, None, "{verification:?}");
    assert_eq!(verification.keyed_since, Some(4), "{verification:?}");
    assert_eq!(verification.events_checked, 4);
    assert_eq!(verification.anchored_sequence, Some(4));
    let rekeyed = storage
        .audit_events(
            &scope,
            &engram_storage::AuditFilter {
                action: Some("audit.chain_rekeyed".to_string()),
                include_organization_events: true,
                limit: 10,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(rekeyed.len(), 1, "{rekeyed:?}");
    assert_eq!(rekeyed[0].sequence, 4);
    assert_eq!(rekeyed[0].details["previous_head_sequence"], 3);
    assert_eq!(
        rekeyed[0].details["previous_head_hash"],
        plain_hashes[2].as_str()
    );
    // Opening the deployment again does not rekey again.
    drop(storage);
    let storage = deployment.sealed_storage().await;
    record_events(&storage, &scope, 2).await;
    let first = storage
        .verify_audit_chain(&scope, VerificationStart::LastCheckpoint)
        .await
        .unwrap();
    assert_eq!(first.first_broken, None, "{first:?}");
    assert_eq!(
        first.recomputed_from_sequence, 1,
        "a new process starts from the start"
    );
    record_events(&storage, &scope, 2).await;
    let next = storage
        .verify_audit_chain(&scope, VerificationStart::LastCheckpoint)
        .await
        .unwrap();
    assert_eq!(next.first_broken, None, "{next:?}");
    assert_eq!(
        next.recomputed_from_sequence, 7,
        "continues after the checkpoint at 6"
    );
    assert_eq!(next.events_checked, 8);
    assert_eq!(next.anchored_sequence, Some(8));
    for (id, _) in events(&storage, &scope).await.iter().take(3) {
        assert!(plain_hashes.contains(&storage_hash_of(&database, *id).await));
    }
}
on_both_databases!(a_plain_chain_is_rekeyed_once_and_verified_incrementally);

/// Without its anchor — gone, or replaced by an empty one — the chain cannot be vouched for.
async fn verification_fails_closed_without_the_anchor(deployment: Deployment) {
    let (storage, scope, _database) = chain_of_six(&deployment).await;
    std::fs::remove_file(&deployment.anchor).unwrap();
    let verification = storage
        .verify_audit_chain(&scope, VerificationStart::LastCheckpoint)
        .await
        .unwrap();
    assert_broken(&verification, "is missing", None);
    std::fs::write(&deployment.anchor, b"").unwrap();
    let verification = verify_from_start(&storage, &scope).await;
    assert_broken(&verification, "the anchor records no head", None);
    assert_anchor_lines_name_no_content(&deployment.anchor);
}
on_both_databases!(verification_fails_closed_without_the_anchor);

fn assert_anchor_lines_name_no_content(anchor: &Path) {
    let text = std::fs::read_to_string(anchor).unwrap_or_default();
    assert!(!text.contains("memory-"), "{text}");
}
