//! Property: whatever sequence of operations tenants perform, no response to one project ever
//! contains another project's memory ids or content. Random operation sequences (proptest)
//! over 3 organizations × 2 projects × 3 end-users against one real server: adds, lists
//! (with and without a user filter), searches, and get / edit / delete / history aimed at
//! memories of any project. `ENGRAM_PROPTEST_CASES` sets the number of sequences (1,000 by
//! default; `make proptest-large` runs 10,000).

use engram_tests::{ApiClient, TestServer, run_engram};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

const PROJECTS: usize = 6;
const USERS: [&str; 3] = ["ana", "ben", "chen"];

#[derive(Clone, Debug)]
enum Operation {
    Add { project: usize, user: usize },
    List { project: usize, user: Option<usize> },
    Search { project: usize, user: Option<usize> },
    Get { project: usize, target: usize },
    Edit { project: usize, target: usize },
    Delete { project: usize, target: usize },
    History { project: usize, target: usize },
}

fn operation() -> impl Strategy<Value = Operation> {
    let project = 0..PROJECTS;
    let user = 0..USERS.len();
    let target = any::<usize>();
    prop_oneof![
        3 => (project.clone(), user.clone()).prop_map(|(project, user)| Operation::Add { project, user }),
        1 => (project.clone(), proptest::option::of(user.clone())).prop_map(|(project, user)| Operation::List { project, user }),
        1 => (project.clone(), proptest::option::of(user)).prop_map(|(project, user)| Operation::Search { project, user }),
        2 => (project.clone(), target.clone()).prop_map(|(project, target)| Operation::Get { project, target }),
        1 => (project.clone(), target.clone()).prop_map(|(project, target)| Operation::Edit { project, target }),
        1 => (project.clone(), target.clone()).prop_map(|(project, target)| Operation::Delete { project, target }),
        1 => (project, target).prop_map(|(project, target)| Operation::History { project, target }),
    ]
}

/// What the test knows: each live memory's owner project.
#[derive(Default)]
struct World {
    owner_of: HashMap<String, usize>,
    live: Vec<String>,
}

struct Tenants {
    clients: Vec<ApiClient>,
}

static MARKERS: AtomicU64 = AtomicU64::new(0);

/// Every string in a response: ids must be the project's own, and content markers
/// (`tenant-p<N>-…`) must name the project.
fn check_response(project: usize, body: &Value, world: &World) -> Result<(), TestCaseError> {
    let mut strings = Vec::new();
    collect_strings(body, &mut strings);
    for text in strings {
        if let Some(owner) = world.owner_of.get(text) {
            prop_assert_eq!(
                *owner,
                project,
                "project {} received id {} of project {}",
                project,
                text,
                owner
            );
        }
        for (position, _) in text.match_indices("tenant-p") {
            let digit = text[position + "tenant-p".len()..].chars().next();
            prop_assert_eq!(
                digit,
                char::from_digit(project as u32, 10),
                "project {} received content of another project: {}",
                project,
                text
            );
        }
    }
    Ok(())
}

fn collect_strings<'a>(value: &'a Value, strings: &mut Vec<&'a str>) {
    match value {
        Value::String(text) => strings.push(text),
        Value::Array(items) => items.iter().for_each(|item| collect_strings(item, strings)),
        Value::Object(map) => map.values().for_each(|item| collect_strings(item, strings)),
        _ => {}
    }
}

async fn run_sequence(
    tenants: &Tenants,
    world: &mut World,
    operations: Vec<Operation>,
) -> Result<(), TestCaseError> {
    for operation in operations {
        match operation {
            Operation::Add { project, user } => {
                let marker = MARKERS.fetch_add(1, Ordering::Relaxed);
                let response = tenants.clients[project]
                    .add(json!([{
                        "content": format!("tenant-p{project}-m{marker}: {} likes item {marker}", USERS[user]),
                        "user_id": USERS[user],
                    }]))
                    .await;
                prop_assert_eq!(response.status, 201, "{}", response.body);
                check_response(project, &response.body, world)?;
                let id = response.body["memories"][0]["id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                world.owner_of.insert(id.clone(), project);
                world.live.push(id);
            }
            Operation::List { project, user } => {
                let query = user
                    .map(|user| format!("?user_id={}&limit=500", USERS[user]))
                    .unwrap_or_else(|| "?limit=500".into());
                let response = tenants.clients[project].list(&query).await;
                prop_assert_eq!(response.status, 200);
                check_response(project, &response.body, world)?;
            }
            Operation::Search { project, user } => {
                let mut body = json!({"query": "which item does the user like?", "top_k": 20});
                if let Some(user) = user {
                    body["user_id"] = json!(USERS[user]);
                }
                let response = tenants.clients[project].search(body).await;
                prop_assert_eq!(response.status, 200, "{}", response.body);
                check_response(project, &response.body, world)?;
            }
            Operation::Get { project, target }
            | Operation::Edit { project, target }
            | Operation::Delete { project, target }
            | Operation::History { project, target } => {
                if world.live.is_empty() {
                    continue;
                }
                let position = target % world.live.len();
                let id = world.live[position].clone();
                let owner = world.owner_of[&id];
                let client = &tenants.clients[project];
                let (response, success) = match operation {
                    Operation::Get { .. } => (client.get(&id).await, 200),
                    Operation::History { .. } => (client.history(&id).await, 200),
                    Operation::Edit { .. } => {
                        let marker = MARKERS.fetch_add(1, Ordering::Relaxed);
                        (
                            client
                                .patch(&id, None, json!({"content": format!("tenant-p{project}-m{marker}: edited")}))
                                .await,
                            200,
                        )
                    }
                    Operation::Delete { .. } => (client.delete(&id).await, 204),
                    _ => unreachable!(),
                };
                if owner == project {
                    prop_assert_eq!(response.status, success, "own memory: {}", response.body);
                    if matches!(operation, Operation::Delete { .. }) {
                        world.live.swap_remove(position);
                    }
                } else {
                    // Another project's memory does not exist here: 404, and untouched.
                    prop_assert_eq!(response.status, 404, "foreign memory: {}", response.body);
                }
                check_response(project, &response.body, world)?;
            }
        }
    }
    Ok(())
}

async fn three_organizations_of_two_projects(server: &TestServer) -> Tenants {
    let mut keys = vec![server.bootstrap.api_key.clone()];
    let (_, second) = server.create_project("second").unwrap();
    keys.push(second);
    for organization in ["beta", "gamma"] {
        let output = run_engram(
            &[
                "admin",
                "create-organization",
                "--data-dir",
                &server.data_dir.display().to_string(),
                "--name",
                organization,
                "--owner-email",
                &format!("owner@{organization}.example"),
                "--projects",
                "2",
            ],
            &[],
        );
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let created: Value = serde_json::from_slice(&output.stdout).unwrap();
        for project in created["projects"].as_array().unwrap() {
            keys.push(project["api_key"].as_str().unwrap().to_string());
        }
    }
    assert_eq!(keys.len(), PROJECTS);
    Tenants {
        clients: keys.iter().map(|key| server.client_with_key(key)).collect(),
    }
}

#[test]
fn no_response_ever_contains_another_projects_ids_or_content() {
    let cases: u32 = std::env::var("ENGRAM_PROPTEST_CASES")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(1_000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let directory = tempfile::tempdir().unwrap();
    // Rate limits off: the property is about isolation, not throttling.
    let server = runtime
        .block_on(TestServer::spawn_with(
            directory.path(),
            &[
                ("ENGRAM_RATE_LIMIT_BURST", "0"),
                ("ENGRAM_RATE_LIMIT_PER_SECOND", "0"),
            ],
        ))
        .unwrap();
    let tenants = runtime.block_on(three_organizations_of_two_projects(&server));
    let world = std::cell::RefCell::new(World::default());
    let mut runner = TestRunner::new(Config {
        cases,
        // Shrinking replays sequences against a server whose data moved on; keep it short.
        max_shrink_iters: 64,
        failure_persistence: None,
        ..Config::default()
    });
    let started = std::time::Instant::now();
    let operations_run = AtomicU64::new(0);
    let result = runner.run(
        &proptest::collection::vec(operation(), 1..12),
        |operations| {
            operations_run.fetch_add(operations.len() as u64, Ordering::Relaxed);
            runtime.block_on(run_sequence(&tenants, &mut world.borrow_mut(), operations))
        },
    );
    eprintln!(
        "cross-tenant property: {cases} sequences, {} operations over 3 organizations × 2 projects × 3 users in {:.1} s; {} memories live at the end",
        operations_run.load(Ordering::Relaxed),
        started.elapsed().as_secs_f64(),
        world.borrow().live.len()
    );
    if let Err(failure) = result {
        panic!("{failure}");
    }
}
