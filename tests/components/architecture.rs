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
