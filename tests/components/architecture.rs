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

/// Every engine use case checks the permission table before it does anything: a door that
/// forgets its own check still cannot do more than the table allows.
#[test]
fn every_engine_use_case_checks_the_permission_table() {
    let root = engram_tests::workspace_root();
    let mut files = Vec::new();
    rust_files(&root.join("services/engine/src/use_cases"), &mut files);
    let mut use_cases = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        let relative = relative_to_root(&root, file);
        for (position, _) in text.match_indices("principal: &Principal,") {
            let function = text[position..].split("\n    }\n").next().unwrap_or("");
            let before = &text[..position];
            let is_public_use_case = before.trim_end().ends_with("&self,")
                && before
                    .rfind("fn ")
                    .is_some_and(|start| before[..start].ends_with("pub async "));
            if !is_public_use_case {
                continue;
            }
            use_cases += 1;
            let body = function
                .split_once(" {\n")
                .map(|(_, body)| body)
                .unwrap_or("");
            assert!(
                body.trim_start()
                    .starts_with("principal.authorize(Operation::"),
                "a use case in {relative} does not check the permission table first"
            );
        }
    }
    assert!(use_cases >= 7, "the scan found the use cases ({use_cases})");
}

/// The front doors reach storage only through the engine's use cases: no file names the
/// storage crate or a storage handle (`.storage`). Files not yet moved are listed; the list
/// only shrinks (a listed file that no longer reaches storage fails too, so it is taken
/// off), and a new file reaching storage fails.
#[test]
fn front_doors_do_not_reach_storage_beyond_the_files_not_yet_moved() {
    const NOT_YET_MOVED: &[&str] = &[
        "services/gateway/src/console.rs",
        "services/gateway/src/console/recall.rs",
        "services/gateway/src/console/usage.rs",
    ];
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
    let new_offenders: Vec<&String> = naming_storage
        .iter()
        .filter(|file| !NOT_YET_MOVED.contains(&file.as_str()))
        .collect();
    assert!(
        new_offenders.is_empty(),
        "these front-door files reach storage; call an engine use case instead: {new_offenders:?}"
    );
    let moved: Vec<&&str> = NOT_YET_MOVED
        .iter()
        .filter(|file| !naming_storage.iter().any(|named| named == *file))
        .collect();
    assert!(
        moved.is_empty(),
        "these files no longer reach storage: take them off NOT_YET_MOVED: {moved:?}"
    );
}
