//! Rules of the code base that keep tenancy safe by construction: only credential
//! verification mints a `ProjectScope`, and no crate but storage can reach a table.

use std::path::{Path, PathBuf};

fn rust_files(directory: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(directory) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = path
            .file_name()
            .and_then(|name| name.to_str())
            .unwrap_or("");
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') && name != "node_modules" {
                rust_files(&path, found);
            }
        } else if name.ends_with(".rs") {
            found.push(path);
        }
    }
}

#[test]
fn only_credential_verification_mints_a_project_scope() {
    let root = engram_tests::workspace_root();
    let mut files = Vec::new();
    rust_files(&root.join("services"), &mut files);
    rust_files(&root.join("web"), &mut files);
    // Places that verify a credential, or create the project they hand a scope for.
    let allowed = [
        "services/core/src/scope.rs",
        "services/storage/src/tenants.rs",
        "services/storage/src/api_keys.rs",
        "services/storage/src/outbox.rs",
        // Task rows are written under the scope of the verified request that queued them.
        "services/storage/src/tasks.rs",
    ];
    let mut offenders = Vec::new();
    for file in &files {
        let relative = file
            .strip_prefix(&root)
            .unwrap_or(file)
            .to_string_lossy()
            .to_string();
        let is_test_code = relative.contains("/tests/") || relative.contains("/benches/");
        if allowed.contains(&relative.as_str()) || is_test_code {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap_or_default();
        if text.contains("from_verified_credential") {
            offenders.push(relative);
        }
    }
    assert!(
        files.len() > 20,
        "the scan found the sources ({} files)",
        files.len()
    );
    assert!(
        offenders.is_empty(),
        "ProjectScope minted outside credential verification: {offenders:?}"
    );
}

#[test]
fn database_entities_are_private_to_the_storage_crate() {
    let root = engram_tests::workspace_root();
    let storage_lib = std::fs::read_to_string(root.join("services/storage/src/lib.rs")).unwrap();
    assert!(
        storage_lib.contains("\nmod entities;"),
        "entities must stay a private module"
    );
    let mut files = Vec::new();
    rust_files(&root.join("services"), &mut files);
    for file in files {
        let relative = file
            .strip_prefix(&root)
            .unwrap_or(&file)
            .to_string_lossy()
            .to_string();
        if relative.starts_with("services/storage/") {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        assert!(
            !text.contains("sea_orm::"),
            "{relative} uses sea_orm directly; go through engram-storage"
        );
    }
}

fn relative_to_root(root: &Path, file: &Path) -> String {
    file.strip_prefix(root)
        .unwrap_or(file)
        .to_string_lossy()
        .to_string()
}

/// The public use cases of `files` whose caller parameter is `caller_parameter`, each with
/// its body: a scan of `pub async fn name(&self, <caller_parameter> …) { body }`.
fn public_use_cases<'text>(
    text: &'text str,
    caller_parameter: &str,
) -> Vec<(&'text str, &'text str)> {
    let mut found = Vec::new();
    for (position, _) in text.match_indices(caller_parameter) {
        let before = &text[..position];
        let Some(start) = before.rfind("fn ") else {
            continue;
        };
        let is_public_use_case =
            before.trim_end().ends_with("&self,") && before[..start].ends_with("pub async ");
        if !is_public_use_case {
            continue;
        }
        let name = before[start + 3..].split('(').next().unwrap_or("");
        let function = text[position..].split("\n    }\n").next().unwrap_or("");
        let body = function
            .split_once(" {\n")
            .map(|(_, body)| body)
            .unwrap_or("");
        found.push((name, body));
    }
    found
}

/// Every engine use case checks the permission table before it does anything: a door that
/// forgets its own check still cannot do more than the table allows. Use cases of the
/// console's account domain take the signed-in member and check its role the same way.
#[test]
fn every_engine_use_case_checks_the_permission_table() {
    // What any signed-in member of the organization may do (no permission in the table).
    // Opening a project of one's own organization is authentication, not an operation: the
    // use cases then called check the table.
    const EVERY_MEMBER_MAY: &[&str] = &[
        "organization_name",
        "organization_projects",
        "principal_in_project",
        // The member's own console language: a preference of their own account.
        "choose_console_language",
    ];
    let root = engram_tests::workspace_root();
    let mut files = Vec::new();
    rust_files(&root.join("services/engine/src/use_cases"), &mut files);
    let mut use_cases = 0;
    let mut member_use_cases = 0;
    let mut operator_use_cases = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        let relative = relative_to_root(&root, file);
        for (name, body) in public_use_cases(&text, "principal: &Principal") {
            use_cases += 1;
            assert!(
                body.trim_start()
                    .starts_with("principal.authorize(Operation::"),
                "the use case {name} in {relative} does not check the permission table first"
            );
        }
        for (name, body) in public_use_cases(&text, "operator: &DeploymentOperator") {
            operator_use_cases += 1;
            assert!(
                body.trim_start()
                    .starts_with("operator.authorize(Operation::"),
                "the operator's use case {name} in {relative} does not check the permission table first"
            );
        }
        for (name, body) in public_use_cases(&text, "member: &ConsoleMember") {
            member_use_cases += 1;
            if EVERY_MEMBER_MAY.contains(&name) {
                continue;
            }
            assert!(
                body.trim_start()
                    .starts_with("member.authorize(Operation::"),
                "the console use case {name} in {relative} does not check the permission table first"
            );
        }
    }
    assert!(
        use_cases >= 60,
        "the scan found the use cases ({use_cases})"
    );
    assert!(
        member_use_cases >= 7,
        "the scan found the console member use cases ({member_use_cases})"
    );
    assert!(
        operator_use_cases >= 4,
        "the scan found the operator's use cases ({operator_use_cases})"
    );
}

/// The front doors reach storage only through the engine's use cases: no file of the
/// gateway or the console names the storage crate, a storage handle (`.storage`) or the
/// maintenance store, and the gateway cannot: its Cargo.toml has no `engram-storage`
/// dependency.
#[test]
fn front_doors_do_not_reach_storage() {
    let root = engram_tests::workspace_root();
    let mut files = Vec::new();
    rust_files(&root.join("services/gateway/src"), &mut files);
    rust_files(&root.join("web/console/src"), &mut files);
    assert!(
        files.len() > 20,
        "the scan found the sources ({} files)",
        files.len()
    );
    let reaches_storage = |text: &str| {
        text.lines()
            .filter(|line| !line.trim_start().starts_with("//"))
            .any(|line| {
                line.contains("engram_storage")
                    || line.contains("maintenance_store")
                    || line.contains("Principal::console_member")
                    || line.contains("MaintenanceStore")
                    || line.match_indices(".storage").any(|(position, _)| {
                        !line[position + ".storage".len()..]
                            .starts_with(|next: char| next.is_alphanumeric() || next == '_')
                    })
            })
    };
    let mut naming_storage: Vec<String> = files
        .iter()
        .filter(|file| reaches_storage(&std::fs::read_to_string(file).unwrap_or_default()))
        .map(|file| relative_to_root(&root, file))
        .collect();
    naming_storage.sort();
    assert!(
        naming_storage.is_empty(),
        "these front-door files reach storage; call an engine use case instead: {naming_storage:?}"
    );
    for manifest in ["services/gateway/Cargo.toml", "web/console/Cargo.toml"] {
        let text = std::fs::read_to_string(root.join(manifest)).unwrap();
        assert!(
            !text
                .lines()
                .any(|line| line.trim_start().starts_with("engram-storage")),
            "{manifest} depends on engram-storage: a front door must not be able to name it"
        );
    }
}

/// The tenant store (`Storage`) answers for one project at a time: each of its public
/// methods takes the project's scope first. Work across projects (the outbox, task claims,
/// sweeps, every project's scope) lives on `MaintenanceStore`, which no front door can name.
/// The few unscoped methods that must come before a scope exists (authentication, console
/// accounts, the organization, the database's health) are listed: a new unscoped method
/// fails until it is scoped, moved to the maintenance store, or listed here with its reason.
#[test]
fn the_tenant_store_takes_the_scope_first() {
    const UNSCOPED: &[(&str, &str)] = &[
        // Authentication: a credential becomes a scope.
        ("verify_api_key", "authentication"),
        // Public key ids of every project (no secret, no content): tells a made-up key id
        // from a real one before any lookup.
        ("api_key_public_ids", "authentication"),
        ("authenticate_api_key", "authentication"),
        ("scope_for_end_user_token", "authentication"),
        ("project_scope_for_console_account", "authentication"),
        // The console's account domain (an organization's members, sessions, invitations).
        ("create_console_session", "console accounts"),
        ("console_session_is_live", "console accounts"),
        ("revoke_console_session", "console accounts"),
        ("rotate_console_refresh_token", "console accounts"),
        ("list_console_members", "console accounts"),
        ("list_pending_console_invitations", "console accounts"),
        ("create_console_invitation", "console accounts"),
        ("pending_console_invitation", "console accounts"),
        ("accept_console_invitation", "console accounts"),
        ("revoke_console_invitation", "console accounts"),
        ("change_console_member_role", "console accounts"),
        ("remove_console_member", "console accounts"),
        ("create_console_account", "console accounts"),
        ("find_console_account", "console accounts"),
        ("console_account", "console accounts"),
        // The organization as a whole (its name, projects, audit chain and prices).
        ("organization_count", "bootstrap"),
        ("bootstrap_organization", "bootstrap"),
        (
            "create_project",
            "a fixture of tests and benches: a project with no operator",
        ),
        ("create_project_as", "the operator's admin command"),
        ("first_organization_id", "the operator's admin command"),
        ("organization_named", "the operator's admin command"),
        ("organization_name", "organization"),
        ("list_projects", "organization"),
        (
            "set_console_account_language",
            "a console account's own preference, by its verified id",
        ),
        ("record_audit_event", "organization audit chain"),
        (
            "candidate_reads",
            "the handle's own read counters: no project's data",
        ),
        (
            "add_usage",
            "the usage meter's flush: each increment carries its scope",
        ),
        (
            "insert_recall_events",
            "the recorder's flush: each event carries its scope",
        ),
        ("add_price", "the operator's price book"),
        (
            "apply_default_prices",
            "the deployment's default price book, at start",
        ),
        ("price_book_for", "the organization's price book"),
        ("price_book_with_ids_for", "the organization's price book"),
        (
            "withdraw_scheduled_price",
            "one of the organization's own prices, found within the organization",
        ),
        (
            "stored_statement",
            "a project's statement by its scope, or the organization's (StatementOf)",
        ),
        (
            "replace_stored_statement",
            "a project's statement by its scope, or the organization's (StatementOf)",
        ),
        (
            "store_statement",
            "a project's statement by its scope, or the organization's (StatementOf)",
        ),
        // The database itself.
        ("durability_violations", "database health"),
        ("applied_migration_count", "database health"),
        ("backend_name", "database health"),
        ("check_ready", "database health"),
    ];
    let root = engram_tests::workspace_root();
    let mut files = Vec::new();
    rust_files(&root.join("services/storage/src"), &mut files);
    let mut scoped = 0;
    let mut offenders = Vec::new();
    for file in &files {
        let relative = relative_to_root(&root, file);
        if relative.contains("/entities/") {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap_or_default();
        let mut in_tenant_store = false;
        for (line_number, line) in text.lines().enumerate() {
            if !line.starts_with(' ') && !line.trim().is_empty() {
                in_tenant_store = line.starts_with("impl Storage {");
            }
            let Some(after) = line
                .strip_prefix("    pub async fn ")
                .or_else(|| line.strip_prefix("    pub fn "))
            else {
                continue;
            };
            if !in_tenant_store {
                continue;
            }
            let name = after.split(['(', '<']).next().unwrap_or("");
            let mut signature = String::new();
            for signature_line in text.lines().skip(line_number) {
                signature.push_str(signature_line);
                signature.push(' ');
                if signature_line.trim_end().ends_with('{') {
                    break;
                }
            }
            let parameters = signature
                .split_once('(')
                .map(|(_, rest)| rest)
                .unwrap_or("")
                .trim_start();
            let Some(after_self) = parameters.strip_prefix("&self") else {
                continue; // a constructor
            };
            let first = after_self.trim_start_matches([',', ' ']);
            if first.starts_with("scope: &ProjectScope")
                || first.starts_with("scope: &MemoryScope")
                || first.starts_with("memory_scope: &MemoryScope")
            {
                scoped += 1;
            } else if !UNSCOPED.iter().any(|(listed, _)| *listed == name) {
                offenders.push(format!("{relative}: {name}"));
            }
        }
    }
    assert!(scoped > 50, "the scan found the scoped methods ({scoped})");
    assert!(
        offenders.is_empty(),
        "public tenant-store methods that do not take the scope first (scope them, move them to MaintenanceStore, or list them with a reason): {offenders:?}"
    );
}

/// Reads of data that belongs to end-users take a `MemoryScope`, so storage adds an end-user
/// token's end-user to the query; use cases and doors get theirs only from the principal.
/// Which reads those are is a property of their type, not a list: every storage method that
/// takes a `&MemoryScope` applies it (through `tenancy::within`, the memories' own query,
/// or the session namespace rule).
#[test]
fn end_user_data_is_read_through_the_memory_scope() {
    const APPLIES_THE_SCOPE: &[&str] = &[
        "tenancy::within",
        "owned_memories_of",
        "owner_within",
        // A memory's history is read only after the memory itself is read within the scope.
        "self.get_memory(",
        // The memories a list filter matches: built on `owned_memories_of`.
        "memories_matching(scope,",
    ];
    let root = engram_tests::workspace_root();
    let mut files = Vec::new();
    rust_files(&root.join("services/storage/src"), &mut files);
    let mut confined = Vec::new();
    let mut unapplied = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        for (start, _) in text.match_indices("\n    pub async fn ") {
            let function = text[start..].split("\n    }\n").next().unwrap_or("");
            let Some((signature, body)) = function.split_once(" {\n") else {
                continue;
            };
            if !signature.contains("&MemoryScope") {
                continue;
            }
            let name = signature
                .trim_start()
                .trim_start_matches("pub async fn ")
                .split(['(', '<'])
                .next()
                .unwrap_or("");
            confined.push(name.to_string());
            if !APPLIES_THE_SCOPE.iter().any(|mark| body.contains(mark)) {
                unapplied.push(format!("{}: {name}", relative_to_root(&root, file)));
            }
        }
    }
    assert!(
        confined.len() >= 12,
        "the scan found the end-user reads: {confined:?}"
    );
    assert!(
        unapplied.is_empty(),
        "storage methods that take a MemoryScope and do not apply it: {unapplied:?}"
    );

    // A whole-project MemoryScope is the engine's own (indexing, derivation, evaluation,
    // edits after the use case's visibility check); no use case or door builds one.
    let mut doors = Vec::new();
    for directory in ["services/engine/src/use_cases", "services/gateway", "web"] {
        rust_files(&root.join(directory), &mut doors);
    }
    let offenders: Vec<String> = doors
        .iter()
        .filter(|file| {
            std::fs::read_to_string(file)
                .unwrap_or_default()
                .contains("project_wide")
        })
        .map(|file| relative_to_root(&root, file))
        .collect();
    assert!(
        doors.len() > 40,
        "the scan found the doors ({})",
        doors.len()
    );
    assert!(
        offenders.is_empty(),
        "a use case or door widens a caller's scope to the whole project: {offenders:?}"
    );
}

/// The scope lattice in the gateway's reference page is the permission table's own: computed by
/// `scope_table_markdown`, carried verbatim between its markers, so the docs cannot promise
/// a credential more (or less) than the engine allows.
#[test]
fn the_documented_scope_table_is_the_permission_tables() {
    let readme =
        std::fs::read_to_string(engram_tests::workspace_root().join("services/gateway/README.md"))
            .unwrap_or_default();
    let documented = readme
        .split_once("<!-- scope-table:start -->\n")
        .and_then(|(_, rest)| rest.split_once("<!-- scope-table:end -->"))
        .map(|(table, _)| table)
        .unwrap_or("<the README has no scope-table markers>");
    let computed = engram_core::permissions::scope_table_markdown();
    assert_eq!(
        documented, computed,
        "services/gateway/README.md's scope table is stale; the permission table says:\n{computed}"
    );
}

/// Storage builds its tenant and end-user conditions in one place, `tenancy.rs`, from the
/// scope: a new restriction of the scope changes that file. A filter on `project_id` or on
/// the end-user written anywhere else fails here (the few listed work across projects from
/// rows already read, with no scope to apply).
#[test]
fn storage_filters_by_scope_in_one_place() {
    const ACROSS_PROJECTS: &[&str] = &[
        // Purging expired idempotency answers: project ids come from the rows being purged.
        "idempotency_records::Column::ProjectId.eq(record.project_id)",
        "idempotency_answer_memories::Column::ProjectId.eq(*project_id)",
        "idempotency_records::Column::ProjectId.eq(*project_id)",
    ];
    let root = engram_tests::workspace_root();
    let mut files = Vec::new();
    rust_files(&root.join("services/storage/src"), &mut files);
    let mut by_hand = Vec::new();
    let mut helper_uses = 0;
    for file in &files {
        let relative = relative_to_root(&root, file);
        if relative.ends_with("/tenancy.rs") {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap_or_default();
        helper_uses += text.matches("tenancy::in_project::<").count()
            + text.matches("tenancy::within::<").count();
        for (number, line) in text.lines().enumerate() {
            let project_filter = line.contains("Column::ProjectId.eq(")
                || line.contains("projects::Column::Id.eq(scope")
                || line.contains("find_by_id(scope.project_id()");
            let end_user_filter = line.contains("Column::UserId.eq(end_user");
            if (project_filter || end_user_filter)
                && !ACROSS_PROJECTS.iter().any(|allowed| line.contains(allowed))
            {
                by_hand.push(format!("{relative}:{}: {}", number + 1, line.trim()));
            }
        }
    }
    assert!(
        helper_uses > 100,
        "the scan found the scoped queries ({helper_uses})"
    );
    assert!(
        by_hand.is_empty(),
        "hand-written scope filters; build them with crate::tenancy instead: {by_hand:#?}"
    );
}

/// The engine's public surface is its use cases: every public method of `MemoryEngine`,
/// `DataGovernance` and `DeploymentAdmin` takes its caller (`principal: &Principal`, the
/// console's `member`, or the deployment's `operator` at the command line),
/// or is a named entry point listed here with what it is for. A method that takes a bare
/// scope (the raw machinery a door or job could call around the permission table) fails.
#[test]
fn the_engines_public_methods_are_its_use_cases() {
    const NAMED_ENTRY_POINTS: &[(&str, &str)] = &[
        ("new", "construction"),
        ("with_embedding_spaces", "construction"),
        ("with_end_user_token_keys", "construction"),
        ("with_api_key_pepper", "construction"),
        ("with_usage_meter", "construction"),
        ("with_recall_recorder", "construction"),
        ("with_query_cache", "construction"),
        (
            "authenticate",
            "authentication: makes the principal of a presented credential",
        ),
        (
            "knows_api_key",
            "authentication: a forged key spends its client's budget first",
        ),
        (
            "console_access",
            "the console account domain, whose use cases take the member",
        ),
        (
            "readiness",
            "the service's health: whether the database and index answer",
        ),
        (
            "run_file_ingest_task",
            "job: runs as the operator, through the table",
        ),
        (
            "run_message_derivation_task",
            "job: runs as the operator, through the table",
        ),
        (
            "run_consolidation_task",
            "job: runs as the operator, through the table",
        ),
        (
            "run_reembedding_task",
            "job: runs as the operator, through the table",
        ),
        (
            "run_evaluation_task",
            "job: runs as the operator, through the table",
        ),
        (
            "run_subject_erasure_task",
            "job: runs as the operator, through the table",
        ),
        (
            "run_organization_erasure_task",
            "job: runs as the operator, through the table",
        ),
        (
            "run_retention_sweep",
            "job: runs as the operator, through the table",
        ),
        (
            "close_statements",
            "job: runs as the operator, through the table",
        ),
        (
            "replay_erasure_ledger",
            "start-up: erased subjects of a restored database",
        ),
        (
            "maintenance_store",
            "jobs: task claims and sweeps across projects",
        ),
        ("task_queued", "jobs: wakes the task runners"),
        ("applier", "jobs: the indexer's and reconciler's handle"),
        (
            "data_governance",
            "jobs: the erasure runner's and retention sweeper's handle",
        ),
        (
            "flush_before_exit",
            "shutdown: recall events and the index flushed",
        ),
        ("clear_query_cache", "benches: cold queries"),
    ];
    let root = engram_tests::workspace_root();
    let mut files = Vec::new();
    rust_files(&root.join("services/engine/src"), &mut files);
    let mut use_cases = 0;
    let mut entry_points = Vec::new();
    let mut raw = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        for block in [
            "impl MemoryEngine {",
            "impl crate::MemoryEngine {",
            "impl DataGovernance {",
            "impl DeploymentAdmin {",
        ] {
            for (start, _) in text.match_indices(&format!("\n{block}")) {
                let body = &text[start + block.len() + 1..];
                let body = body.split("\n}\n").next().unwrap_or("");
                for line_start in body.match_indices("\n    pub ").map(|(at, _)| at) {
                    let signature: String = body[line_start..]
                        .split(") ->")
                        .next()
                        .unwrap_or("")
                        .split(" {")
                        .next()
                        .unwrap_or("")
                        .to_string();
                    let Some(name) = signature
                        .split("fn ")
                        .nth(1)
                        .and_then(|rest| rest.split(['(', '<']).next())
                    else {
                        continue;
                    };
                    if signature.contains("principal: &Principal")
                        || signature.contains("member: &ConsoleMember")
                        || signature.contains("operator: &DeploymentOperator")
                    {
                        use_cases += 1;
                    } else if NAMED_ENTRY_POINTS.iter().any(|(entry, _)| *entry == name) {
                        entry_points.push(name.to_string());
                    } else {
                        raw.push(format!("{}: {name}", relative_to_root(&root, file)));
                    }
                }
            }
        }
    }
    eprintln!(
        "engine surface: {use_cases} use cases taking their caller, {} named entry points",
        entry_points.len()
    );
    assert!(
        use_cases >= 60,
        "the scan found the use cases ({use_cases})"
    );
    assert!(
        raw.is_empty(),
        "public engine methods that take no principal and are no named entry point (make them pub(crate), or a use case): {raw:?}"
    );
}

/// The operator principal holds every permission, so only the engine's jobs and the CLI's
/// commands make one (and only the CLI the deployment's operator, who creates tenants); a
/// front door that did could do anything.
#[test]
fn only_jobs_and_the_cli_act_as_the_operator() {
    let root = engram_tests::workspace_root();
    let allowed = [
        "services/core/src/principal.rs",
        "services/engine/src/jobs/mod.rs",
        "services/engine/src/governance.rs",
    ];
    let mut files = Vec::new();
    rust_files(&root.join("services"), &mut files);
    rust_files(&root.join("web"), &mut files);
    let offenders: Vec<String> = files
        .iter()
        .map(|file| relative_to_root(&root, file))
        .filter(|relative| {
            !allowed.contains(&relative.as_str()) && !relative.starts_with("services/cli/")
        })
        .filter(|relative| {
            std::fs::read_to_string(root.join(relative))
                .unwrap_or_default()
                .contains("Principal::operator(")
        })
        .collect();
    let deployment_operators: Vec<String> = files
        .iter()
        .map(|file| relative_to_root(&root, file))
        .filter(|relative| {
            relative != "services/core/src/principal.rs" && !relative.starts_with("services/cli/")
        })
        .filter(|relative| {
            std::fs::read_to_string(root.join(relative))
                .unwrap_or_default()
                .contains("DeploymentOperator::at_the_command_line(")
        })
        .collect();
    assert!(
        deployment_operators.is_empty(),
        "the deployment's operator is made outside the CLI: {deployment_operators:?}"
    );
    assert!(
        offenders.is_empty(),
        "the operator principal is made outside the engine's jobs and the CLI: {offenders:?}"
    );
}

/// The CLI and the worker are doors too: they reach data through the engine's use cases and
/// named job entry points, never a storage handle of the engine's. (The engine no longer
/// hands one out; this keeps it so.) The files that open storage themselves are listed.
#[test]
fn the_cli_and_the_worker_reach_no_storage_of_the_engine() {
    let root = engram_tests::workspace_root();
    let mut files = Vec::new();
    rust_files(&root.join("services/cli/src"), &mut files);
    rust_files(&root.join("services/worker/src"), &mut files);
    let offenders: Vec<String> = files
        .iter()
        .filter(|file| {
            std::fs::read_to_string(file)
                .unwrap_or_default()
                .lines()
                .filter(|line| !line.trim_start().starts_with("//"))
                .any(|line| {
                    line.contains(".storage()")
                        || line.contains(".governance()")
                        || line.contains(".embedding_spaces()")
                })
        })
        .map(|file| relative_to_root(&root, file))
        .collect();
    assert!(
        files.len() > 15,
        "the scan found the sources ({})",
        files.len()
    );
    assert!(
        offenders.is_empty(),
        "these CLI or worker files reach the engine's machinery: {offenders:?}"
    );
}

/// The types a door reads (records, filters, settings) are domain types and live in core;
/// the engine publishes its use cases, never storage's types under its own name. A door that
/// needs a record names `engram_core::<module>::<Type>`.
#[test]
fn the_engine_re_exports_nothing_of_storage() {
    let root = engram_tests::workspace_root();
    let mut files = Vec::new();
    rust_files(&root.join("services/engine/src"), &mut files);
    assert!(
        files.len() > 20,
        "the scan found the sources ({})",
        files.len()
    );
    let mut re_exports: Vec<String> = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        // A `pub use` runs to its semicolon. (A `pub use crate::…` of a module that itself
        // re-exports storage is caught there: every engine file is scanned.)
        for statement in text.split(';') {
            let statement = statement.trim_start();
            let statement = statement
                .lines()
                .filter(|line| !line.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join(" ");
            let statement = statement.trim_start();
            if statement.starts_with("pub use engram_storage") {
                re_exports.push(format!(
                    "{}: {}",
                    relative_to_root(&root, file),
                    statement.split_whitespace().collect::<Vec<_>>().join(" ")
                ));
            }
        }
    }
    assert!(
        re_exports.is_empty(),
        "the engine publishes storage's types; move the domain type to core: {re_exports:?}"
    );
}

/// The console's audit filter offers every action the engine records, by the same names.
#[test]
fn the_consoles_audit_filter_offers_every_recorded_action() {
    let recorded: Vec<&str> = engram_core::audit::AuditAction::ALL
        .iter()
        .map(|action| action.as_str())
        .collect();
    assert_eq!(engram_console::model::AUDIT_ACTIONS.to_vec(), recorded);
}

/// The languages an account may choose (the engine's) are the languages the console speaks,
/// by the same tags: a choice the console could not honour is refused before it is saved.
#[test]
fn the_console_speaks_every_language_an_account_may_choose() {
    use engram_console::i18n::Language;
    let chosen: Vec<&str> = engram_core::ConsoleLanguage::ALL
        .iter()
        .map(|language| language.as_str())
        .collect();
    let spoken: Vec<&str> = [Language::English, Language::Chinese]
        .iter()
        .map(|language| language.tag())
        .collect();
    assert_eq!(chosen, spoken);
    for tag in chosen {
        assert_eq!(Language::from_tag(tag).map(Language::tag), Some(tag));
    }
}
