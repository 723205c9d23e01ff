//! The documentation holds: the README stays a few screens, and every page's `make`
//! targets, `engram` flags, `ENGRAM_*` variables, crates and links exist.

use engram_tests::workspace_root;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// Every Markdown page of the repository (generated and fetched trees left out; the LLM
/// prompts are prompts, not documentation).
fn doc_pages() -> Vec<PathBuf> {
    fn walk(directory: &Path, found: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(directory) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().to_string();
            if path.is_dir() {
                let skipped = name.starts_with('.')
                    || ["target", "node_modules", "data", "prompts", "fuzz"]
                        .contains(&name.as_str());
                if !skipped {
                    walk(&path, found);
                }
            } else if name.ends_with(".md") {
                found.push(path);
            }
        }
    }
    let root = workspace_root();
    let mut pages = vec![root.join("README.md")];
    for directory in ["services", "web", "infra", "helm", "tests", "migrations"] {
        walk(&root.join(directory), &mut pages);
    }
    pages.sort();
    assert!(pages.len() >= 10, "the scan found the pages: {pages:?}");
    pages
}

fn relative(path: &Path) -> String {
    path.strip_prefix(workspace_root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Words after `prefix` in `text`, made of `allowed` characters.
fn words_after(text: &str, prefix: &str, allowed: impl Fn(char) -> bool) -> Vec<String> {
    text.match_indices(prefix)
        .filter(|(position, _)| {
            // A whole word: `make test`, not `remake test`.
            text[..*position]
                .chars()
                .next_back()
                .is_none_or(|before| !before.is_alphanumeric() && before != '_' && before != '-')
        })
        .map(|(position, _)| {
            text[position + prefix.len()..]
                .chars()
                .take_while(|c| allowed(*c))
                .collect::<String>()
        })
        .filter(|word| !word.is_empty())
        .collect()
}

#[test]
fn the_readme_is_a_few_screens_and_links_every_reference_page() {
    let readme = read(&workspace_root().join("README.md"));
    let lines = readme.lines().count();
    assert!(
        lines <= 250,
        "README.md has {lines} lines; reference goes in the pages it links"
    );
    for page in [
        "services/ARCHITECTURE.md",
        "services/gateway/README.md",
        "services/engine/README.md",
        "services/storage/README.md",
        "services/cli/README.md",
        "infra/README.md",
        "helm/engram/README.md",
        "tests/README.md",
    ] {
        assert!(
            readme.contains(&format!("]({page}")),
            "README.md links {page}"
        );
        assert!(workspace_root().join(page).exists(), "{page} exists");
    }
}

#[test]
fn every_make_target_the_docs_name_exists() {
    let makefile = read(&workspace_root().join("Makefile"));
    let targets: BTreeSet<String> = makefile
        .lines()
        .filter_map(|line| line.split_once(':').map(|(name, _)| name))
        .filter(|name| {
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        })
        .map(str::to_string)
        .collect();
    assert!(
        targets.contains("test") && targets.contains("run"),
        "{targets:?}"
    );
    let mut unknown = Vec::new();
    for page in doc_pages() {
        // `make x` in inline code, and `make x` lines of code blocks (prose says "make sure").
        let text = read(&page);
        let mut in_code = false;
        let mut code_lines = String::new();
        for line in text.lines() {
            if line.trim_start().starts_with("```") {
                in_code = !in_code;
            } else if in_code && line.trim_start().starts_with("make ") {
                code_lines.push_str(&format!("`{}\n", line.trim_start()));
            }
        }
        let named = words_after(&format!("{text}\n{code_lines}"), "`make ", |c| {
            c.is_ascii_alphanumeric() || c == '-'
        });
        for target in named {
            if !targets.contains(&target) {
                unknown.push(format!("{}: make {target}", relative(&page)));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "the docs name make targets the Makefile lacks: {unknown:?}"
    );
}

/// The long flags the `engram` binary accepts: clap's `long` (the field's name with dashes,
/// or the name given) and its aliases, read from the CLI's sources.
fn flags_the_binary_takes() -> BTreeSet<String> {
    let mut flags = BTreeSet::from(["--help".to_string(), "--version".to_string()]);
    let directory = workspace_root().join("services/cli/src");
    for entry in std::fs::read_dir(&directory).unwrap().flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        let mut attribute: Option<String> = None;
        for line in text.lines() {
            let trimmed = line.trim();
            if let Some(open) = attribute.as_mut()
                && !open.ends_with(")]")
            {
                open.push_str(trimmed);
                continue;
            }
            if trimmed.starts_with("#[arg(") {
                attribute = Some(trimmed.to_string());
                continue;
            }
            if trimmed.starts_with("///") || trimmed.starts_with("#[") {
                continue;
            }
            let Some(taken) = attribute.take() else {
                continue;
            };
            if !taken.contains("long") {
                continue;
            }
            let field = trimmed
                .trim_start_matches("pub ")
                .split(':')
                .next()
                .unwrap_or_default()
                .trim();
            let named = words_after(&taken, "long = \"", |c| c != '"');
            match named.first() {
                Some(name) => flags.insert(format!("--{name}")),
                None => flags.insert(format!("--{}", field.replace('_', "-"))),
            };
            for alias in words_after(&taken, "alias = \"", |c| c != '"') {
                flags.insert(format!("--{alias}"));
            }
        }
    }
    flags
}

#[test]
fn every_engram_flag_the_docs_name_exists() {
    let flags = flags_the_binary_takes();
    assert!(
        flags.contains("--data-dir") && flags.contains("--audit-anchor"),
        "the scan read the CLI's flags: {flags:?}"
    );
    // Flags of other tools the pages show beside Engram's, each with its tool.
    let foreign = [
        "--build",                // docker compose up --build
        "--dry-run",              // kubectl apply --dry-run=server
        "--set",                  // helm lint --set
        "--nocapture",            // cargo test -- --nocapture
        "--test",                 // cargo test --test api
        "--workspace",            // cargo test --workspace
        "--transport",            // claude mcp add --transport http
        "--header",               // claude mcp add --header "Authorization: Bearer …"
        "--url",                  // codex mcp add engram --url …
        "--bearer-token-env-var", // codex mcp add … --bearer-token-env-var
    ];
    let mut unknown = Vec::new();
    for page in doc_pages() {
        let text = read(&page);
        for flag in words_after(&text, "--", |c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'
        }) {
            let flag = format!("--{}", flag.trim_end_matches('-'));
            if flag.len() <= 3 || foreign.contains(&flag.as_str()) {
                continue;
            }
            if !flags.contains(&flag) {
                unknown.push(format!("{}: {flag}", relative(&page)));
            }
        }
    }
    unknown.sort();
    unknown.dedup();
    assert!(
        unknown.is_empty(),
        "the docs name flags engram does not take: {unknown:?}"
    );
}

/// Variables the tests, the Makefile and the scripts read (not the binary).
fn variables_of_the_tooling() -> BTreeSet<String> {
    let root = workspace_root();
    let mut texts = vec![read(&root.join("Makefile"))];
    for directory in [
        "scripts",
        "tests/src",
        "tests/api",
        "tests/components",
        "tests/browser",
        ".ci",
    ] {
        if let Ok(entries) = std::fs::read_dir(root.join(directory)) {
            // This file names variables as examples; it vouches for none.
            for entry in entries
                .flatten()
                .filter(|entry| entry.file_name() != "docs.rs")
            {
                texts.push(std::fs::read_to_string(entry.path()).unwrap_or_default());
            }
        }
    }
    texts
        .iter()
        .flat_map(|text| {
            words_after(text, "ENGRAM_", |c| {
                c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'
            })
        })
        .map(|name| format!("ENGRAM_{}", name.trim_end_matches('_')))
        .collect()
}

#[test]
fn every_variable_the_docs_name_exists_and_every_one_the_binary_reads_is_documented() {
    let binary = crate::deployment::variables_the_binary_reads();
    let tooling = variables_of_the_tooling();
    let mut documented = BTreeSet::new();
    let mut unknown = Vec::new();
    for page in doc_pages() {
        let text = read(&page);
        for name in words_after(&text, "ENGRAM_", |c| {
            c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'
        }) {
            // `ENGRAM_EMBEDDING_*` names a family: some variable must start with it.
            if name.ends_with('_') && text.contains(&format!("ENGRAM_{name}*")) {
                let prefix = format!("ENGRAM_{name}");
                if !binary
                    .iter()
                    .chain(&tooling)
                    .any(|known| known.starts_with(&prefix))
                {
                    unknown.push(format!("{}: {prefix}*", relative(&page)));
                }
                continue;
            }
            let name = format!("ENGRAM_{}", name.trim_end_matches('_'));
            if !binary.contains(&name) && !tooling.contains(&name) {
                unknown.push(format!("{}: {name}", relative(&page)));
            }
            documented.insert(name);
        }
    }
    unknown.sort();
    unknown.dedup();
    assert!(
        unknown.is_empty(),
        "the docs name variables nothing reads: {unknown:?}"
    );
    let undocumented: Vec<&String> = binary
        .iter()
        .filter(|name| name.starts_with("ENGRAM_") && !documented.contains(*name))
        .collect();
    assert!(
        undocumented.is_empty(),
        "the binary reads variables no page documents: {undocumented:?}"
    );
}

#[test]
fn the_architecture_page_names_every_crate() {
    let root = workspace_root();
    let manifest = read(&root.join("Cargo.toml"));
    let members_start = manifest.find("members = [").expect("workspace members");
    let members_end = members_start + manifest[members_start..].find(']').unwrap_or_default();
    let members: Vec<String> = manifest[members_start..members_end]
        .lines()
        .filter_map(|line| line.trim().strip_prefix('"'))
        .filter_map(|line| line.split('"').next())
        .map(str::to_string)
        .collect();
    assert!(members.len() >= 10, "the workspace's members: {members:?}");
    let page = read(&root.join("services/ARCHITECTURE.md"));
    let missing: Vec<&String> = members
        .iter()
        .filter(|member| !page.contains(&format!("`{member}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "services/ARCHITECTURE.md does not name {missing:?}"
    );
}

/// GitHub's anchor of a heading: lowercase, punctuation dropped, spaces as dashes.
fn anchor_of(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors_in(text: &str) -> BTreeSet<String> {
    let mut in_code = false;
    let mut anchors = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if !in_code && line.starts_with('#') {
            anchors.insert(anchor_of(line.trim_start_matches('#')));
        }
    }
    anchors
}

#[test]
fn every_link_between_pages_resolves() {
    let root = workspace_root().canonicalize().unwrap();
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in doc_pages() {
        let text = read(&page);
        let directory = page.parent().unwrap_or(&root).to_path_buf();
        for target in words_after(&text, "](", |c| c != ')' && !c.is_whitespace()) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((path, anchor)) => (path.to_string(), Some(anchor.to_string())),
                None => (target.clone(), None),
            };
            let file = if path.is_empty() {
                page.clone()
            } else {
                directory.join(&path)
            };
            let Ok(file) = file.canonicalize() else {
                broken.push(format!("{}: {target} (no such file)", relative(&page)));
                continue;
            };
            if !file.starts_with(&root) {
                continue; // ../shared: the design documents beside the checkout
            }
            checked += 1;
            if let Some(anchor) = anchor
                && file.extension().is_some_and(|extension| extension == "md")
                && !anchors_in(&read(&file)).contains(&anchor)
            {
                broken.push(format!("{}: {target} (no such heading)", relative(&page)));
            }
        }
    }
    assert!(checked >= 20, "the scan followed the links ({checked})");
    assert!(broken.is_empty(), "broken links: {broken:?}");
}
