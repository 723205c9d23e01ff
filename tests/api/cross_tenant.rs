//! Property: whatever sequence of operations tenants and their end-users perform, no response
//! to one project ever contains another project's ids or content, and no response to an
//! end-user token ever contains another end-user's (or the project's own, end-user-less) ids
//! or content. Random operation sequences (proptest) against one real server with
//! 3 organizations × 2 projects; the principals are each project's API key and, in every
//! project, end-user tokens of `ana` and `ben` (`chen` is only ever named by the key). The
//! operations: memories (add, list and search with and without a user filter, a list by a
//! filter tree that names every end-user, the end-users listed as entities, get / edit /
//! delete / history / verify aimed at memories of anyone), conversation messages and
//! session state in a tiny shared set of session ids and keys (so projects and end-users
//! collide on them),
//! files (upload, get), feedback on memories and on recalls, recall events, tasks,
//! evaluation sets, `Idempotency-Key` replays from a tiny shared set of keys and bodies
//! (so principals replay each other's keys), and the Mem0-compatible get, search and
//! entities under `/mem0`. Every id and every content marker the test
//! creates is recorded with the project and end-user it belongs to; content markers carry
//! their owner in the text (`tenant-p<project>-u<user index or x>-m<n>`). A project key may
//! see everything of its own project; a read that names a namespace (a `user_id` filter, a
//! session's namespace) sees only that namespace. `ENGRAM_PROPTEST_CASES` sets the number of
//! sequences (1,000 by default; `make proptest-large` runs 10,000).

use engram_tests::{ApiClient, ApiResponse, TestServer, run_engram};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};

const PROJECTS: usize = 6;
const USERS: [&str; 3] = ["ana", "ben", "chen"];
/// Every project mints tokens for the first this many of `USERS`.
const TOKEN_USERS: usize = 2;
/// Shared by every project and end-user, so their namespaces collide on the ids.
const SESSIONS: [&str; 2] = ["s-1", "s-2"];
const STATE_KEYS: [&str; 2] = ["draft", "plan"];
const IDEMPOTENCY_KEYS: [&str; 2] = ["k-1", "k-2"];
/// Bodies of idempotent adds, the same bytes for every principal: 0 and 1 name no end-user,
/// 2 names `ana` (refused to the tokens of anyone else).
const REPLAY_BODIES: usize = 3;

fn replay_body(variant: usize) -> Value {
    match variant {
        0 => {
            json!({"memories": [{"content": "Shared replay body one: the user drinks green tea."}]})
        }
        1 => {
            json!({"memories": [{"content": "Shared replay body two: the user drinks black coffee."}]})
        }
        _ => {
            json!({"memories": [{"content": "Shared replay body one: the user drinks green tea.", "user_id": USERS[0]}]})
        }
    }
}

fn replay_body_user(variant: usize) -> Option<usize> {
    (variant == 2).then_some(0)
}

/// Who makes a request: a project's API key (`token_of: None`) or its end-user token of
/// `USERS[token_of]`; with `limited`, one of the project's single-scope keys instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Principal {
    project: usize,
    token_of: Option<usize>,
    limited: Option<Limited>,
}

/// A project key holding one scope and not `memories:read`: whatever it may do, no answer it
/// gets carries content (beyond the words its own request sent).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Limited {
    AdminOnly,
    WriteOnly,
}

/// What an operation needs, for the limited keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Needs {
    Read,
    Write,
    Delete,
    Admin,
    /// `admin` and `memories:read` (evaluation cases).
    AdminAndRead,
    /// `memories:verify` and `memories:read` (verifying a memory).
    VerifyAndRead,
}

impl Limited {
    fn permits(self, needs: Needs) -> bool {
        matches!(
            (self, needs),
            (Limited::AdminOnly, Needs::Admin) | (Limited::WriteOnly, Needs::Write)
        )
    }
}

/// Whose a piece of data is: a project and an end-user of it (`None`: no end-user's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Owner {
    project: usize,
    user: Option<usize>,
}

/// What one response may hold: data of `project` and, with `exactly`, only of that end-user
/// (`Some(None)`: only data of no end-user).
#[derive(Clone, Copy, Debug)]
struct Audience {
    project: usize,
    exactly: Option<Option<usize>>,
    /// For an end-user token: every `user_id` in its answers must be its own.
    token_of: Option<usize>,
    /// Whether content may reach it at all (a limited key's answers are content-free).
    content: bool,
}

impl Audience {
    fn admits(&self, owner: Owner) -> bool {
        owner.project == self.project && self.exactly.is_none_or(|user| owner.user == user)
    }
}

impl Principal {
    /// A project key sees its whole project; a token its own end-user's data only.
    fn audience(self) -> Audience {
        Audience {
            project: self.project,
            exactly: self.token_of.map(Some),
            token_of: self.token_of,
            content: self.limited.is_none(),
        }
    }

    /// A read of one namespace (`None`: the namespace of no end-user).
    fn reading(self, namespace: Option<usize>) -> Audience {
        Audience {
            exactly: Some(namespace),
            ..self.audience()
        }
    }

    /// The end-user a write or a namespaced read addresses when it names `requested`: a key
    /// the one it names, a token its own; `Err` (403) when a token names another end-user.
    fn subject(self, requested: Option<usize>) -> Result<Option<usize>, ()> {
        match (self.token_of, requested) {
            (None, requested) => Ok(requested),
            (Some(own), Some(other)) if other != own => Err(()),
            (Some(own), _) => Ok(Some(own)),
        }
    }

    /// A memory list or search with an optional user filter: a key without one sees its
    /// project, otherwise the filter's (or the token's) end-user only.
    fn filtered(self, user: Option<usize>) -> Result<Audience, ()> {
        match (self.token_of, user) {
            (None, None) => Ok(self.audience()),
            _ => self.subject(user).map(|namespace| self.reading(namespace)),
        }
    }

    /// A session read (messages, state): exactly one namespace.
    fn namespace(self, user: Option<usize>) -> Result<Audience, ()> {
        self.subject(user).map(|namespace| self.reading(namespace))
    }

    fn may_see(self, owner: Owner) -> bool {
        self.audience().admits(owner)
    }

    fn is_token(self) -> bool {
        self.token_of.is_some()
    }
}

#[derive(Clone, Debug)]
enum Operation {
    Add {
        by: Principal,
        user: Option<usize>,
    },
    List {
        by: Principal,
        user: Option<usize>,
    },
    Search {
        by: Principal,
        user: Option<usize>,
    },
    /// A list by a filter tree that names every end-user and none (an end-user token's tree
    /// is ANDed with its own user, whatever the tree says).
    QueryByTree {
        by: Principal,
    },
    /// The end-users the project's memories name.
    ListEntities {
        by: Principal,
    },
    Get {
        by: Principal,
        target: usize,
    },
    Edit {
        by: Principal,
        target: usize,
    },
    /// Verify a memory of anyone (`POST /v1/memories/{id}/verify`).
    Verify {
        by: Principal,
        target: usize,
    },
    Delete {
        by: Principal,
        target: usize,
    },
    History {
        by: Principal,
        target: usize,
    },
    PostMessages {
        by: Principal,
        session: usize,
        user: Option<usize>,
    },
    ListMessages {
        by: Principal,
        session: usize,
        user: Option<usize>,
    },
    PutState {
        by: Principal,
        session: usize,
        key: usize,
        user: Option<usize>,
    },
    GetState {
        by: Principal,
        session: usize,
        key: usize,
        user: Option<usize>,
    },
    ListState {
        by: Principal,
        session: usize,
        user: Option<usize>,
    },
    UploadFile {
        by: Principal,
        user: Option<usize>,
    },
    GetFile {
        by: Principal,
        target: usize,
    },
    GiveFeedback {
        by: Principal,
        target: usize,
    },
    ListFeedback {
        by: Principal,
        target: usize,
    },
    RateRecall {
        by: Principal,
        target: usize,
    },
    GetRecall {
        by: Principal,
        target: usize,
    },
    GetTask {
        by: Principal,
        target: usize,
    },
    CreateEvalSet {
        by: Principal,
        user: Option<usize>,
        expected: usize,
    },
    ListEvalSets {
        by: Principal,
    },
    /// The project's usage by end-user (which names them): admin keys only.
    UsageByEndUser {
        by: Principal,
    },
    /// This month's statement (its end-user lines name them): admin keys only.
    StatementByEndUser {
        by: Principal,
    },
    GetEvalSet {
        by: Principal,
        target: usize,
    },
    IdempotentAdd {
        by: Principal,
        key: usize,
        body: usize,
    },
    /// An agent run for an end-user (its task carries a content marker).
    StartRun {
        by: Principal,
        user: Option<usize>,
    },
    GetRun {
        by: Principal,
        target: usize,
    },
    ListRuns {
        by: Principal,
    },
    /// Recorded recalls, newest first.
    ListRecalls {
        by: Principal,
    },
    /// Mem0's `get` (`GET /mem0/v1/memories/{id}/`) aimed at a memory of anyone.
    Mem0Get {
        by: Principal,
        target: usize,
    },
    /// Mem0's v3 search, its filter naming an end-user (or every one).
    Mem0Search {
        by: Principal,
        user: Option<usize>,
    },
    /// Mem0's `users()`: the users, agents, apps and runs memories name.
    Mem0Entities {
        by: Principal,
    },
    /// The MCP tool `get_memory` aimed at a memory of anyone.
    McpGet {
        by: Principal,
        target: usize,
    },
    /// The MCP tool `search_memories`, naming an end-user (or none).
    McpSearch {
        by: Principal,
        user: Option<usize>,
    },
}

impl Operation {
    fn by(&self) -> Principal {
        match self {
            Operation::Add { by, .. }
            | Operation::List { by, .. }
            | Operation::Search { by, .. }
            | Operation::QueryByTree { by }
            | Operation::ListEntities { by }
            | Operation::Get { by, .. }
            | Operation::Edit { by, .. }
            | Operation::Verify { by, .. }
            | Operation::Delete { by, .. }
            | Operation::History { by, .. }
            | Operation::PostMessages { by, .. }
            | Operation::ListMessages { by, .. }
            | Operation::PutState { by, .. }
            | Operation::GetState { by, .. }
            | Operation::ListState { by, .. }
            | Operation::UploadFile { by, .. }
            | Operation::GetFile { by, .. }
            | Operation::GiveFeedback { by, .. }
            | Operation::ListFeedback { by, .. }
            | Operation::RateRecall { by, .. }
            | Operation::GetRecall { by, .. }
            | Operation::GetTask { by, .. }
            | Operation::CreateEvalSet { by, .. }
            | Operation::ListEvalSets { by }
            | Operation::UsageByEndUser { by }
            | Operation::StatementByEndUser { by }
            | Operation::GetEvalSet { by, .. }
            | Operation::IdempotentAdd { by, .. }
            | Operation::StartRun { by, .. }
            | Operation::GetRun { by, .. }
            | Operation::ListRuns { by }
            | Operation::ListRecalls { by }
            | Operation::Mem0Get { by, .. }
            | Operation::Mem0Search { by, .. }
            | Operation::Mem0Entities { by }
            | Operation::McpGet { by, .. }
            | Operation::McpSearch { by, .. } => *by,
        }
    }

    /// What the operation's (first) request needs.
    fn needs(&self) -> Needs {
        match self {
            Operation::Add { .. }
            | Operation::Edit { .. }
            | Operation::PostMessages { .. }
            | Operation::PutState { .. }
            | Operation::UploadFile { .. }
            | Operation::GiveFeedback { .. }
            | Operation::RateRecall { .. }
            | Operation::IdempotentAdd { .. }
            | Operation::StartRun { .. } => Needs::Write,
            Operation::Delete { .. } => Needs::Delete,
            Operation::Verify { .. } => Needs::VerifyAndRead,
            Operation::GetTask { .. }
            | Operation::ListEvalSets { .. }
            | Operation::UsageByEndUser { .. }
            | Operation::StatementByEndUser { .. }
            | Operation::GetEvalSet { .. } => Needs::Admin,
            Operation::CreateEvalSet { .. } => Needs::AdminAndRead,
            Operation::List { .. }
            | Operation::Search { .. }
            | Operation::QueryByTree { .. }
            | Operation::ListEntities { .. }
            | Operation::Get { .. }
            | Operation::History { .. }
            | Operation::ListMessages { .. }
            | Operation::GetState { .. }
            | Operation::ListState { .. }
            | Operation::GetFile { .. }
            | Operation::ListFeedback { .. }
            | Operation::GetRecall { .. }
            | Operation::GetRun { .. }
            | Operation::ListRuns { .. }
            | Operation::ListRecalls { .. }
            | Operation::Mem0Get { .. }
            | Operation::Mem0Search { .. }
            | Operation::Mem0Entities { .. }
            | Operation::McpGet { .. }
            | Operation::McpSearch { .. } => Needs::Read,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Operation::Add { .. } => "add",
            Operation::List { .. } => "list",
            Operation::Search { .. } => "search",
            Operation::QueryByTree { .. } => "query by tree",
            Operation::ListEntities { .. } => "list entities",
            Operation::Get { .. } => "get",
            Operation::Edit { .. } => "edit",
            Operation::Verify { .. } => "verify",
            Operation::Delete { .. } => "delete",
            Operation::History { .. } => "history",
            Operation::PostMessages { .. } => "post messages",
            Operation::ListMessages { .. } => "list messages",
            Operation::PutState { .. } => "put state",
            Operation::GetState { .. } => "get state",
            Operation::ListState { .. } => "list state",
            Operation::UploadFile { .. } => "upload file",
            Operation::GetFile { .. } => "get file",
            Operation::GiveFeedback { .. } => "give feedback",
            Operation::ListFeedback { .. } => "list feedback",
            Operation::RateRecall { .. } => "rate recall",
            Operation::GetRecall { .. } => "get recall",
            Operation::GetTask { .. } => "get task",
            Operation::CreateEvalSet { .. } => "create eval set",
            Operation::ListEvalSets { .. } => "list eval sets",
            Operation::UsageByEndUser { .. } => "usage by end-user",
            Operation::StatementByEndUser { .. } => "statement by end-user",
            Operation::GetEvalSet { .. } => "get eval set",
            Operation::IdempotentAdd { .. } => "idempotent add",
            Operation::StartRun { .. } => "start run",
            Operation::GetRun { .. } => "get run",
            Operation::ListRuns { .. } => "list runs",
            Operation::ListRecalls { .. } => "list recalls",
            Operation::Mem0Get { .. } => "mem0 get",
            Operation::Mem0Search { .. } => "mem0 search",
            Operation::Mem0Entities { .. } => "mem0 entities",
            Operation::McpGet { .. } => "mcp get_memory",
            Operation::McpSearch { .. } => "mcp search_memories",
        }
    }
}

fn principal() -> impl Strategy<Value = Principal> {
    let who = prop_oneof![
        3 => Just((None, None)),
        3 => (0..TOKEN_USERS).prop_map(|user| (Some(user), None)),
        1 => Just((None, Some(Limited::AdminOnly))),
        1 => Just((None, Some(Limited::WriteOnly))),
    ];
    (0..PROJECTS, who).prop_map(|(project, (token_of, limited))| Principal {
        project,
        token_of,
        limited,
    })
}

fn user() -> impl Strategy<Value = Option<usize>> {
    proptest::option::of(0..USERS.len())
}

fn operation() -> impl Strategy<Value = Operation> {
    let session = 0..SESSIONS.len();
    let key = 0..STATE_KEYS.len();
    prop_oneof![
        3 => (principal(), user()).prop_map(|(by, user)| Operation::Add { by, user }),
        1 => (principal(), user()).prop_map(|(by, user)| Operation::List { by, user }),
        1 => (principal(), user()).prop_map(|(by, user)| Operation::Search { by, user }),
        1 => principal().prop_map(|by| Operation::QueryByTree { by }),
        1 => principal().prop_map(|by| Operation::ListEntities { by }),
        2 => (principal(), any::<usize>()).prop_map(|(by, target)| Operation::Get { by, target }),
        1 => (principal(), any::<usize>()).prop_map(|(by, target)| Operation::Edit { by, target }),
        1 => (principal(), any::<usize>()).prop_map(|(by, target)| Operation::Verify { by, target }),
        1 => (principal(), any::<usize>()).prop_map(|(by, target)| Operation::Delete { by, target }),
        1 => (principal(), any::<usize>()).prop_map(|(by, target)| Operation::History { by, target }),
        2 => (principal(), session.clone(), user())
            .prop_map(|(by, session, user)| Operation::PostMessages { by, session, user }),
        1 => (principal(), session.clone(), user())
            .prop_map(|(by, session, user)| Operation::ListMessages { by, session, user }),
        2 => (principal(), session.clone(), key.clone(), user())
            .prop_map(|(by, session, key, user)| Operation::PutState { by, session, key, user }),
        1 => (principal(), session.clone(), key, user())
            .prop_map(|(by, session, key, user)| Operation::GetState { by, session, key, user }),
        1 => (principal(), session, user())
            .prop_map(|(by, session, user)| Operation::ListState { by, session, user }),
        1 => (principal(), user()).prop_map(|(by, user)| Operation::UploadFile { by, user }),
        1 => (principal(), any::<usize>()).prop_map(|(by, target)| Operation::GetFile { by, target }),
        1 => (principal(), any::<usize>()).prop_map(|(by, target)| Operation::GiveFeedback { by, target }),
        1 => (principal(), any::<usize>()).prop_map(|(by, target)| Operation::ListFeedback { by, target }),
        1 => (principal(), any::<usize>()).prop_map(|(by, target)| Operation::RateRecall { by, target }),
        1 => (principal(), any::<usize>()).prop_map(|(by, target)| Operation::GetRecall { by, target }),
        1 => (principal(), any::<usize>()).prop_map(|(by, target)| Operation::GetTask { by, target }),
        1 => (principal(), user(), 0..3usize)
            .prop_map(|(by, user, expected)| Operation::CreateEvalSet { by, user, expected }),
        1 => principal().prop_map(|by| Operation::ListEvalSets { by }),
        1 => principal().prop_map(|by| Operation::UsageByEndUser { by }),
        1 => principal().prop_map(|by| Operation::StatementByEndUser { by }),
        1 => (principal(), any::<usize>()).prop_map(|(by, target)| Operation::GetEvalSet { by, target }),
        2 => (principal(), 0..IDEMPOTENCY_KEYS.len(), 0..REPLAY_BODIES)
            .prop_map(|(by, key, body)| Operation::IdempotentAdd { by, key, body }),
        1 => (principal(), user()).prop_map(|(by, user)| Operation::StartRun { by, user }),
        1 => (principal(), any::<usize>()).prop_map(|(by, target)| Operation::GetRun { by, target }),
        1 => principal().prop_map(|by| Operation::ListRuns { by }),
        1 => principal().prop_map(|by| Operation::ListRecalls { by }),
        1 => (principal(), any::<usize>()).prop_map(|(by, target)| Operation::Mem0Get { by, target }),
        1 => (principal(), user()).prop_map(|(by, user)| Operation::Mem0Search { by, user }),
        1 => principal().prop_map(|by| Operation::Mem0Entities { by }),
        1 => (principal(), any::<usize>()).prop_map(|(by, target)| Operation::McpGet { by, target }),
        1 => (principal(), user()).prop_map(|(by, user)| Operation::McpSearch { by, user }),
    ]
}

#[derive(Default)]
struct Tally {
    operations: u64,
    skipped: u64,
    responses: u64,
}

/// What the test knows: the owner of every id it saw created (memories, messages, files,
/// tasks, feedback, recalls, evaluation sets), and what can be aimed at.
#[derive(Default)]
struct World {
    owner_of: HashMap<String, Owner>,
    /// Memories not deleted.
    live: Vec<String>,
    /// Memories deleted: an idempotent answer naming one of them is erased.
    deleted: std::collections::HashSet<String>,
    files: Vec<String>,
    tasks: Vec<String>,
    recalls: Vec<String>,
    runs: Vec<String>,
    eval_sets: Vec<String>,
    /// Per principal and idempotency key: the body variant first sent and the ids answered.
    replays: HashMap<(Principal, usize), (usize, Vec<String>)>,
    tally: BTreeMap<&'static str, Tally>,
    /// Operations of the single-scope keys: refused beyond their scope, served within it.
    limited_refused: u64,
    limited_served: u64,
}

impl World {
    fn own(&mut self, id: &str, owner: Owner) {
        if !id.is_empty() {
            self.owner_of.insert(id.to_string(), owner);
        }
    }
}

struct Tenants {
    keys: Vec<ApiClient>,
    /// Per project, the tokens of `USERS[..TOKEN_USERS]`.
    tokens: Vec<Vec<ApiClient>>,
    /// Per project, its `admin`-only and its `memories:write`-only key.
    admin_keys: Vec<ApiClient>,
    write_keys: Vec<ApiClient>,
}

impl Tenants {
    fn client(&self, by: Principal) -> &ApiClient {
        match (by.limited, by.token_of) {
            (Some(Limited::AdminOnly), _) => &self.admin_keys[by.project],
            (Some(Limited::WriteOnly), _) => &self.write_keys[by.project],
            (None, None) => &self.keys[by.project],
            (None, Some(user)) => &self.tokens[by.project][user],
        }
    }
}

static MARKERS: AtomicU64 = AtomicU64::new(0);

/// A unique content marker that names its owner.
fn marker(owner: Owner) -> String {
    let number = MARKERS.fetch_add(1, Ordering::Relaxed);
    let user = owner
        .user
        .and_then(|user| char::from_digit(user as u32, 10))
        .unwrap_or('x');
    format!("tenant-p{}-u{user}-m{number}", owner.project)
}

fn name_of(user: Option<usize>) -> &'static str {
    user.map_or("the team", |user| USERS[user])
}

/// `&user_id=…` (or `?user_id=…` with `first`) for a named end-user, else nothing.
/// A filter tree naming every end-user, and memories of none.
fn every_user_tree() -> Value {
    let mut any: Vec<Value> = USERS.iter().map(|user| json!({"user_id": user})).collect();
    any.push(json!({"NOT": {"user_id": "*"}}));
    json!({"filters": {"OR": any}, "limit": 500})
}

fn user_parameter(user: Option<usize>, first: bool) -> String {
    match user {
        Some(user) => format!("{}user_id={}", if first { '?' } else { '&' }, USERS[user]),
        None => String::new(),
    }
}

fn pick(list: &[String], target: usize) -> Option<String> {
    (!list.is_empty()).then(|| list[target % list.len()].clone())
}

fn ids_at(body: &Value, list: &str) -> Vec<String> {
    body[list]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item["id"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) async fn send(
    client: &ApiClient,
    method: Method,
    path: &str,
    body: Option<&Value>,
) -> ApiResponse {
    let mut request = client.request(method, path);
    if let Some(body) = body {
        request = request.json(body);
    }
    client.send(request).await
}

pub(crate) fn expect(
    response: &ApiResponse,
    wanted: &[u16],
    what: &str,
) -> Result<(), TestCaseError> {
    prop_assert!(
        wanted.contains(&response.status),
        "{}: status {} where {:?} was expected: {}",
        what,
        response.status,
        wanted,
        response.body
    );
    Ok(())
}

fn looks_like_uuid(window: &[u8]) -> bool {
    window.iter().enumerate().all(|(position, byte)| {
        if matches!(position, 8 | 13 | 18 | 23) {
            *byte == b'-'
        } else {
            byte.is_ascii_hexdigit()
        }
    })
}

/// The string itself and every UUID written inside it (a detail or history text naming an id).
pub(crate) fn ids_in(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let embedded = (0..bytes.len().saturating_sub(35))
        .filter(move |&start| looks_like_uuid(&bytes[start..start + 36]))
        .map(move |start| &text[start..start + 36])
        .filter(move |id| id.len() != text.len());
    std::iter::once(text).chain(embedded)
}

/// Every string in a response: each known id must be one the audience may see (ids the
/// request itself named, `echoed`, excepted), and each content marker must name the
/// audience's project and, for a token or a namespaced read, its end-user. A token's answer
/// names no `user_id` but its own.
fn check_response(
    audience: Audience,
    body: &Value,
    world: &World,
    echoed: &[&str],
) -> Result<(), TestCaseError> {
    let mut strings = Vec::new();
    collect_strings(body, &mut strings);
    for text in strings {
        for id in ids_in(text) {
            if echoed.contains(&id) {
                continue;
            }
            if let Some(owner) = world.owner_of.get(id) {
                prop_assert!(
                    audience.admits(*owner),
                    "{:?} received id {} of {:?}: {}",
                    audience,
                    id,
                    owner,
                    text
                );
            }
        }
        for (position, _) in text.match_indices("tenant-p") {
            let rest = &text[position + "tenant-p".len()..];
            let whole: String = text[position..]
                .chars()
                .take_while(|character| character.is_ascii_alphanumeric() || *character == '-')
                .collect();
            // An evaluation set's name is the tuner's, not an end-user's words.
            let set_name = text[..position].ends_with("set:");
            prop_assert!(
                audience.content || set_name || echoed.contains(&whole.as_str()),
                "{:?} may not read content yet received {}: {}",
                audience,
                whole,
                text
            );
            let project = rest.chars().next().and_then(|digit| digit.to_digit(10));
            prop_assert_eq!(
                project,
                Some(audience.project as u32),
                "{:?} received content of another project: {}",
                audience,
                text
            );
            let tag = rest[1..]
                .strip_prefix("-u")
                .and_then(|tagged| tagged.chars().next());
            if let (Some(tag), Some(wanted)) = (tag, audience.exactly) {
                let user = tag.to_digit(10).map(|user| user as usize);
                prop_assert_eq!(
                    user,
                    wanted,
                    "{:?} received content of another end-user (or of none): {}",
                    audience,
                    text
                );
            }
        }
    }
    if let Some(own) = audience.token_of {
        check_user_ids(body, USERS[own])?;
    }
    Ok(())
}

fn check_user_ids(value: &Value, own: &str) -> Result<(), TestCaseError> {
    match value {
        Value::Object(map) => {
            for (key, item) in map {
                if key == "user_id"
                    && let Value::String(user) = item
                {
                    prop_assert_eq!(
                        user.as_str(),
                        own,
                        "the token of {} received data of end-user {}",
                        own,
                        user
                    );
                }
                check_user_ids(item, own)?;
            }
        }
        Value::Array(items) => {
            for item in items {
                check_user_ids(item, own)?;
            }
        }
        _ => {}
    }
    Ok(())
}

pub(crate) fn collect_strings<'a>(value: &'a Value, strings: &mut Vec<&'a str>) {
    match value {
        Value::String(text) => strings.push(text),
        Value::Array(items) => items.iter().for_each(|item| collect_strings(item, strings)),
        Value::Object(map) => map.values().for_each(|item| collect_strings(item, strings)),
        _ => {}
    }
}

/// Checks one response and counts it.
fn checked(
    world: &mut World,
    kind: &'static str,
    audience: Audience,
    response: &ApiResponse,
    echoed: &[&str],
) -> Result<(), TestCaseError> {
    check_response(audience, &response.body, world, echoed).map_err(|failure| {
        TestCaseError::fail(format!(
            "{kind} (status {}): {failure}; body: {}",
            response.status, response.body
        ))
    })?;
    world.tally.entry(kind).or_default().responses += 1;
    Ok(())
}

async fn run_sequence(
    tenants: &Tenants,
    world: &mut World,
    operations: Vec<Operation>,
) -> Result<(), TestCaseError> {
    for operation in operations {
        let kind = operation.kind();
        let performed = run_operation(tenants, world, operation).await?;
        let tally = world.tally.entry(kind).or_default();
        if performed {
            tally.operations += 1;
        } else {
            tally.skipped += 1;
        }
    }
    Ok(())
}

/// The body of a request a limited key sends beyond its scope.
enum RefusedBody {
    None,
    Json(Value),
    Markdown(&'static str),
}

/// The MCP tool and arguments an MCP operation calls; `None` for any other operation, or
/// when there is nothing to aim it at yet.
fn mcp_call(world: &World, operation: &Operation) -> Option<(&'static str, Value)> {
    match operation {
        Operation::McpGet { target, .. } => {
            Some(("get_memory", json!({"id": pick(&world.live, *target)?})))
        }
        Operation::McpSearch { by, user } => {
            let mut arguments = json!({"query": "which item does the user like?", "top_k": 20});
            // A token names its own end-user (naming another is refused, as on /v1).
            if let Some(user) = by.token_of.or(*user) {
                arguments["user_id"] = json!(USERS[user]);
            }
            Some(("search_memories", arguments))
        }
        _ => None,
    }
}

/// The request `operation` sends, for a limited key that lacks what it needs: refused (403)
/// before anything is looked up, so any target of the world will do. `None` when there is
/// nothing to aim it at yet.
fn refused_request(world: &World, operation: &Operation) -> Option<(Method, String, RefusedBody)> {
    use RefusedBody::{Json, Markdown};
    let memory = |target: usize| pick(&world.live, target);
    let session = |session: usize| format!("/v1/sessions/{}", SESSIONS[session]);
    let json = |value: Value| Json(value);
    Some(match operation {
        Operation::Add { .. } | Operation::IdempotentAdd { .. } => (
            Method::POST,
            "/v1/memories".to_string(),
            json(json!({"memories": [{"content": "A refused write."}]})),
        ),
        Operation::List { .. } => (Method::GET, "/v1/memories".to_string(), RefusedBody::None),
        Operation::Search { .. } => (
            Method::POST,
            "/v1/memories/search".to_string(),
            json(json!({"query": "anything"})),
        ),
        Operation::QueryByTree { .. } => (
            Method::POST,
            "/v1/memories/query".to_string(),
            json(every_user_tree()),
        ),
        Operation::ListEntities { .. } => (
            Method::GET,
            "/v1/entities?type=user".to_string(),
            RefusedBody::None,
        ),
        Operation::Get { target, .. } => (
            Method::GET,
            format!("/v1/memories/{}", memory(*target)?),
            RefusedBody::None,
        ),
        Operation::Edit { target, .. } => (
            Method::PATCH,
            format!("/v1/memories/{}", memory(*target)?),
            json(json!({"content": "A refused edit."})),
        ),
        Operation::Delete { target, .. } => (
            Method::DELETE,
            format!("/v1/memories/{}", memory(*target)?),
            RefusedBody::None,
        ),
        Operation::Verify { target, .. } => (
            Method::POST,
            format!("/v1/memories/{}/verify", memory(*target)?),
            json(json!({"reason": "A refused verification."})),
        ),
        Operation::History { target, .. } => (
            Method::GET,
            format!("/v1/memories/{}/history", memory(*target)?),
            RefusedBody::None,
        ),
        Operation::PostMessages { session: at, .. } => (
            Method::POST,
            format!("{}/messages", session(*at)),
            json(
                json!({"messages": [{"role": "user", "content": "A refused message."}], "derive_memories": false}),
            ),
        ),
        Operation::ListMessages { session: at, .. } => (
            Method::GET,
            format!("{}/messages", session(*at)),
            RefusedBody::None,
        ),
        Operation::PutState {
            session: at, key, ..
        } => (
            Method::PUT,
            format!("{}/state/{}", session(*at), STATE_KEYS[*key]),
            json(json!({"value": "refused"})),
        ),
        Operation::GetState {
            session: at, key, ..
        } => (
            Method::GET,
            format!("{}/state/{}", session(*at), STATE_KEYS[*key]),
            RefusedBody::None,
        ),
        Operation::ListState { session: at, .. } => (
            Method::GET,
            format!("{}/state", session(*at)),
            RefusedBody::None,
        ),
        Operation::UploadFile { .. } => (
            Method::POST,
            "/v1/files?name=refused.md".to_string(),
            Markdown("# Refused\n\nA refused upload.\n"),
        ),
        Operation::GetFile { target, .. } => (
            Method::GET,
            format!("/v1/files/{}", pick(&world.files, *target)?),
            RefusedBody::None,
        ),
        Operation::GiveFeedback { target, .. } => (
            Method::POST,
            format!("/v1/memories/{}/feedback", memory(*target)?),
            json(json!({"rating": "relevant"})),
        ),
        Operation::ListFeedback { target, .. } => (
            Method::GET,
            format!("/v1/memories/{}/feedback", memory(*target)?),
            RefusedBody::None,
        ),
        Operation::RateRecall { target, .. } => (
            Method::POST,
            format!("/v1/recalls/{}/feedback", pick(&world.recalls, *target)?),
            json(json!({"rating": "relevant"})),
        ),
        Operation::GetRecall { target, .. } => (
            Method::GET,
            format!("/v1/recalls/{}", pick(&world.recalls, *target)?),
            RefusedBody::None,
        ),
        Operation::GetTask { target, .. } => (
            Method::GET,
            format!("/v1/tasks/{}", pick(&world.tasks, *target)?),
            RefusedBody::None,
        ),
        Operation::CreateEvalSet { .. } => (
            Method::POST,
            "/v1/eval-sets".to_string(),
            json(json!({"name": "refused", "cases": [{"query": "q", "expected_contents": ["x"]}]})),
        ),
        Operation::ListEvalSets { .. } => {
            (Method::GET, "/v1/eval-sets".to_string(), RefusedBody::None)
        }
        Operation::UsageByEndUser { .. } => (
            Method::GET,
            "/v1/usage?by=end_user".to_string(),
            RefusedBody::None,
        ),
        Operation::StatementByEndUser { .. } => {
            (Method::GET, this_months_statement(), RefusedBody::None)
        }
        Operation::GetEvalSet { target, .. } => (
            Method::GET,
            format!("/v1/eval-sets/{}", pick(&world.eval_sets, *target)?),
            RefusedBody::None,
        ),
        Operation::StartRun { .. } => (
            Method::POST,
            "/v1/runs".to_string(),
            json(json!({"task": "A refused run."})),
        ),
        Operation::GetRun { target, .. } => (
            Method::GET,
            format!("/v1/runs/{}", pick(&world.runs, *target)?),
            RefusedBody::None,
        ),
        Operation::ListRuns { .. } => (Method::GET, "/v1/runs".to_string(), RefusedBody::None),
        Operation::ListRecalls { .. } => {
            (Method::GET, "/v1/recalls".to_string(), RefusedBody::None)
        }
        Operation::Mem0Get { target, .. } => (
            Method::GET,
            format!("/mem0/v1/memories/{}/", memory(*target)?),
            RefusedBody::None,
        ),
        Operation::Mem0Search { .. } => (
            Method::POST,
            "/mem0/v3/memories/search/".to_string(),
            json(json!({"query": "anything", "filters": {"user_id": "*"}})),
        ),
        Operation::Mem0Entities { .. } => (
            Method::GET,
            "/mem0/v1/entities/".to_string(),
            RefusedBody::None,
        ),
        // A tool's refusal is a result, not a status: `run_operation` calls it itself.
        Operation::McpGet { .. } | Operation::McpSearch { .. } => return None,
    })
}

/// One operation; `false` when there was nothing to aim it at yet.
async fn run_operation(
    tenants: &Tenants,
    world: &mut World,
    operation: Operation,
) -> Result<bool, TestCaseError> {
    let kind = operation.kind();
    let by = operation.by();
    if let Some(limited) = by.limited
        && !limited.permits(operation.needs())
    {
        if let Some((tool, arguments)) = mcp_call(world, &operation) {
            let response = tenants.client(by).mcp_tool(tool, arguments).await;
            expect(
                &response,
                &[403],
                "an MCP tool beyond a single-scope key's scope",
            )?;
            checked(world, kind, by.audience(), &response, &[])?;
            world.limited_refused += 1;
            return Ok(true);
        }
        let Some((method, path, body)) = refused_request(world, &operation) else {
            return Ok(false);
        };
        let client = tenants.client(by);
        let response = match body {
            RefusedBody::None => send(client, method, &path, None).await,
            RefusedBody::Json(body) => send(client, method, &path, Some(&body)).await,
            RefusedBody::Markdown(text) => {
                client
                    .send(
                        client
                            .request(method, &path)
                            .header("content-type", "text/markdown")
                            .body(text),
                    )
                    .await
            }
        };
        expect(&response, &[403], "a single-scope key beyond its scope")?;
        checked(world, kind, by.audience(), &response, &[])?;
        world.limited_refused += 1;
        return Ok(true);
    }
    if by.limited.is_some() {
        world.limited_served += 1;
    }
    match operation {
        Operation::Add { by, user } => {
            let subject = by.subject(user);
            let owner = Owner {
                project: by.project,
                user: subject.unwrap_or(user),
            };
            let mut memory = json!({
                "content": format!("{}: {} likes this item", marker(owner), name_of(owner.user)),
            });
            if let Some(user) = user {
                memory["user_id"] = json!(USERS[user]);
            }
            let response = tenants.client(by).add(json!([memory])).await;
            let Ok(subject) = subject else {
                expect(&response, &[403], "a token writing for another end-user")?;
                checked(world, kind, by.audience(), &response, &[])?;
                return Ok(true);
            };
            expect(&response, &[201], "add")?;
            checked(world, kind, by.audience(), &response, &[])?;
            for id in ids_at(&response.body, "memories") {
                world.own(
                    &id,
                    Owner {
                        project: by.project,
                        user: subject,
                    },
                );
                world.live.push(id);
            }
        }
        Operation::List { by, user } => {
            let query = format!("?limit=500{}", user_parameter(user, false));
            let response = tenants.client(by).list(&query).await;
            let (audience, wanted) = match by.filtered(user) {
                Ok(audience) => (audience, 200),
                Err(()) => (by.audience(), 403),
            };
            expect(&response, &[wanted], "list")?;
            checked(world, kind, audience, &response, &[])?;
        }
        Operation::Search { by, user } => {
            // The query is kept in the recall event, whose end-user is the search's subject.
            let asker = Owner {
                project: by.project,
                user: by.subject(user).unwrap_or(user),
            };
            let query = format!("{}: which item does the user like?", marker(asker));
            let mut body = json!({"query": query, "top_k": 20});
            if let Some(user) = user {
                body["user_id"] = json!(USERS[user]);
            }
            let response = tenants.client(by).search(body).await;
            let (audience, wanted) = match by.filtered(user) {
                Ok(audience) => (audience, 200),
                Err(()) => (by.audience(), 403),
            };
            expect(&response, &[wanted], "search")?;
            checked(world, kind, audience, &response, &[])?;
            if let (200, Some(recall_id), Ok(subject)) = (
                response.status,
                response.body["recall_id"].as_str(),
                by.subject(user),
            ) {
                world.own(
                    recall_id,
                    Owner {
                        project: by.project,
                        user: subject,
                    },
                );
                world.recalls.push(recall_id.to_string());
            }
        }
        Operation::QueryByTree { by } => {
            let client = tenants.client(by);
            let response = client
                .send(
                    client
                        .request(Method::POST, "/v1/memories/query")
                        .json(&every_user_tree()),
                )
                .await;
            expect(&response, &[200], "query by tree")?;
            checked(world, kind, by.audience(), &response, &[])?;
        }
        Operation::ListEntities { by } => {
            let client = tenants.client(by);
            let response = client
                .send(client.request(Method::GET, "/v1/entities?type=user&limit=500"))
                .await;
            expect(&response, &[200], "list entities")?;
            checked(world, kind, by.audience(), &response, &[])?;
            if let Some(own) = by.token_of {
                let named: Vec<&str> = response.body["entities"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|entity| entity["id"].as_str())
                    .collect();
                if named.iter().any(|name| *name != USERS[own]) {
                    return Err(TestCaseError::fail(format!(
                        "an end-user token of {} learned of other end-users: {named:?}",
                        USERS[own]
                    )));
                }
            }
        }
        Operation::Get { by, target }
        | Operation::Edit { by, target }
        | Operation::Verify { by, target }
        | Operation::Delete { by, target }
        | Operation::History { by, target } => {
            if world.live.is_empty() {
                return Ok(false);
            }
            let position = target % world.live.len();
            let id = world.live[position].clone();
            let owner = world.owner_of[&id];
            let visible = by.may_see(owner);
            let client = tenants.client(by);
            let (response, success) = match operation {
                Operation::Get { .. } => (client.get(&id).await, 200),
                Operation::History { .. } => (client.history(&id).await, 200),
                Operation::Edit { .. } => {
                    let content = format!("{}: edited", marker(owner));
                    (
                        client.patch(&id, None, json!({"content": content})).await,
                        200,
                    )
                }
                Operation::Delete { .. } => (client.delete(&id).await, 204),
                Operation::Verify { .. } => {
                    let request = client
                        .request(Method::POST, &format!("/v1/memories/{id}/verify"))
                        .json(&json!({"reason": "checked against the source"}));
                    (client.send(request).await, 200)
                }
                _ => unreachable!(),
            };
            if matches!(operation, Operation::Delete { .. }) && by.is_token() {
                // The tokens hold no `memories:delete`.
                expect(&response, &[403], "a token deleting")?;
            } else if matches!(operation, Operation::Verify { .. }) && by.is_token() {
                // A token never holds `memories:verify`.
                expect(&response, &[403], "a token verifying")?;
            } else if matches!(operation, Operation::Verify { .. }) && visible {
                // The key verifies what someone else wrote; what it wrote itself is a 403.
                expect(&response, &[200, 403], "verifying own project's memory")?;
            } else if visible {
                expect(&response, &[success], "own memory")?;
                if matches!(operation, Operation::Delete { .. }) {
                    world.live.swap_remove(position);
                    world.deleted.insert(id.clone());
                }
            } else {
                // Another project's (or end-user's) memory does not exist here: 404, untouched.
                expect(&response, &[404], "foreign memory")?;
            }
            checked(world, kind, by.audience(), &response, &[id.as_str()])?;
        }
        Operation::PostMessages { by, session, user } => {
            let subject = by.subject(user);
            let owner = Owner {
                project: by.project,
                user: subject.unwrap_or(user),
            };
            let said = marker(owner);
            let mut body = json!({
                "messages": [{
                    "role": "user",
                    "content": format!("{said}: {} says hello in {}", name_of(owner.user), SESSIONS[session]),
                }],
                "derive_memories": false,
            });
            if let Some(user) = user {
                body["user_id"] = json!(USERS[user]);
            }
            let path = format!("/v1/sessions/{}/messages", SESSIONS[session]);
            let response = send(tenants.client(by), Method::POST, &path, Some(&body)).await;
            let (audience, wanted) = match subject {
                Ok(namespace) => (by.reading(namespace), 201),
                Err(()) => (by.audience(), 403),
            };
            expect(&response, &[wanted], "post messages")?;
            // The answer repeats the message it stored: the caller's own words.
            checked(world, kind, audience, &response, &[said.as_str()])?;
            if response.status == 201 {
                for id in ids_at(&response.body, "messages") {
                    world.own(&id, owner);
                }
            }
        }
        Operation::ListMessages { by, session, user } => {
            let path = format!(
                "/v1/sessions/{}/messages?limit=500{}",
                SESSIONS[session],
                user_parameter(user, false)
            );
            let response = send(tenants.client(by), Method::GET, &path, None).await;
            let (audience, wanted) = match by.namespace(user) {
                Ok(audience) => (audience, 200),
                Err(()) => (by.audience(), 403),
            };
            expect(&response, &[wanted], "list messages")?;
            checked(world, kind, audience, &response, &[])?;
        }
        Operation::PutState {
            by,
            session,
            key,
            user,
        } => {
            let subject = by.subject(user);
            let owner = Owner {
                project: by.project,
                user: subject.unwrap_or(user),
            };
            let value = marker(owner);
            let mut body = json!({"value": value});
            if let Some(user) = user {
                body["user_id"] = json!(USERS[user]);
            }
            let path = format!(
                "/v1/sessions/{}/state/{}",
                SESSIONS[session], STATE_KEYS[key]
            );
            let response = send(tenants.client(by), Method::PUT, &path, Some(&body)).await;
            match subject {
                Ok(namespace) => {
                    expect(&response, &[200, 201], "put state")?;
                    // The answer repeats the value just written: the caller's own.
                    checked(
                        world,
                        kind,
                        by.reading(namespace),
                        &response,
                        &[value.as_str()],
                    )?;
                }
                Err(()) => {
                    expect(
                        &response,
                        &[403],
                        "a token writing another end-user's state",
                    )?;
                    checked(world, kind, by.audience(), &response, &[])?;
                }
            }
        }
        Operation::GetState {
            by,
            session,
            key,
            user,
        } => {
            let path = format!(
                "/v1/sessions/{}/state/{}{}",
                SESSIONS[session],
                STATE_KEYS[key],
                user_parameter(user, true)
            );
            let response = send(tenants.client(by), Method::GET, &path, None).await;
            match by.namespace(user) {
                Ok(audience) => {
                    expect(&response, &[200, 404], "get state")?;
                    checked(world, kind, audience, &response, &[])?;
                }
                Err(()) => {
                    expect(
                        &response,
                        &[403],
                        "a token reading another end-user's state",
                    )?;
                    checked(world, kind, by.audience(), &response, &[])?;
                }
            }
        }
        Operation::ListState { by, session, user } => {
            let path = format!(
                "/v1/sessions/{}/state{}",
                SESSIONS[session],
                user_parameter(user, true)
            );
            let response = send(tenants.client(by), Method::GET, &path, None).await;
            let (audience, wanted) = match by.namespace(user) {
                Ok(audience) => (audience, 200),
                Err(()) => (by.audience(), 403),
            };
            expect(&response, &[wanted], "list state")?;
            checked(world, kind, audience, &response, &[])?;
        }
        Operation::UploadFile { by, user } => {
            let subject = by.subject(user);
            let owner = Owner {
                project: by.project,
                user: subject.unwrap_or(user),
            };
            let text = format!(
                "# Notes\n\n{}: {} keeps notes about the garden.\n",
                marker(owner),
                name_of(owner.user)
            );
            let client = tenants.client(by);
            let response = client
                .send(
                    client
                        .request(
                            Method::POST,
                            &format!("/v1/files?name=x.md{}", user_parameter(user, false)),
                        )
                        .header("content-type", "text/markdown")
                        .body(text),
                )
                .await;
            let Ok(subject) = subject else {
                expect(&response, &[403], "a token uploading for another end-user")?;
                checked(world, kind, by.audience(), &response, &[])?;
                return Ok(true);
            };
            expect(&response, &[202], "upload file")?;
            checked(world, kind, by.reading(subject), &response, &[])?;
            // The ingest runs in the background; its ids are learnt from later reads.
            if let Some(file_id) = response.body["file"]["id"].as_str() {
                world.own(file_id, owner);
                world.files.push(file_id.to_string());
            }
            if let Some(task_id) = response.body["task"]["id"].as_str() {
                world.own(task_id, owner);
                world.tasks.push(task_id.to_string());
            }
        }
        Operation::GetFile { by, target } => {
            let Some(id) = pick(&world.files, target) else {
                return Ok(false);
            };
            let owner = world.owner_of[&id];
            let visible = by.may_see(owner);
            let path = format!("/v1/files/{id}");
            let response = send(tenants.client(by), Method::GET, &path, None).await;
            expect(&response, &[if visible { 200 } else { 404 }], "get file")?;
            checked(world, kind, by.audience(), &response, &[id.as_str()])?;
            if response.status == 200 {
                // The memories its chunks became are the file owner's.
                let chunks: Vec<String> = response.body["memory_ids"]
                    .as_array()
                    .map(|ids| {
                        ids.iter()
                            .filter_map(|id| id.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default();
                for chunk in chunks {
                    if !world.owner_of.contains_key(&chunk) {
                        world.own(&chunk, owner);
                        world.live.push(chunk);
                    }
                }
            }
        }
        Operation::GiveFeedback { by, target } | Operation::ListFeedback { by, target } => {
            let Some(id) = pick(&world.live, target) else {
                return Ok(false);
            };
            let owner = world.owner_of[&id];
            let visible = by.may_see(owner);
            let path = format!("/v1/memories/{id}/feedback");
            let client = tenants.client(by);
            let giving = matches!(operation, Operation::GiveFeedback { .. });
            let words = marker(owner);
            let response = if giving {
                // Feedback on a memory belongs to the memory's end-user.
                let body = json!({"rating": "relevant", "text": format!("{words}: spot on")});
                send(client, Method::POST, &path, Some(&body)).await
            } else {
                send(client, Method::GET, &path, None).await
            };
            let success = if giving { 201 } else { 200 };
            expect(
                &response,
                &[if visible { success } else { 404 }],
                "memory feedback",
            )?;
            checked(
                world,
                kind,
                by.audience(),
                &response,
                &[id.as_str(), words.as_str()],
            )?;
            if giving
                && response.status == 201
                && let Some(feedback_id) = response.body["id"].as_str()
            {
                world.own(feedback_id, owner);
            }
        }
        Operation::RateRecall { by, target } => {
            let Some(recall_id) = pick(&world.recalls, target) else {
                return Ok(false);
            };
            let visible = by.may_see(world.owner_of[&recall_id]);
            // Feedback on a recall as a whole belongs to the person whose search it rates (so
            // it is exported and erased with them), else the rater's token's end-user.
            let owner = Owner {
                project: by.project,
                user: world.owner_of[&recall_id].user.or(by.token_of),
            };
            let path = format!("/v1/recalls/{recall_id}/feedback");
            let client = tenants.client(by);
            let words = marker(owner);
            let body = json!({"rating": "relevant", "text": format!("{words}: good answer")});
            let given = send(client, Method::POST, &path, Some(&body)).await;
            expect(&given, &[if visible { 201 } else { 404 }], "rate recall")?;
            checked(
                world,
                kind,
                by.audience(),
                &given,
                &[recall_id.as_str(), words.as_str()],
            )?;
            if given.status == 201
                && let Some(feedback_id) = given.body["id"].as_str()
            {
                world.own(feedback_id, owner);
            }
            let listed = send(client, Method::GET, &path, None).await;
            // A recall the caller may not see does not exist for it, feedback and all; a
            // write-only key reads no feedback.
            let wanted = match (by.limited, visible) {
                (Some(_), _) => 403,
                (None, true) => 200,
                (None, false) => 404,
            };
            expect(&listed, &[wanted], "recall feedback")?;
            checked(world, kind, by.audience(), &listed, &[recall_id.as_str()])?;
        }
        Operation::GetRecall { by, target } => {
            let Some(recall_id) = pick(&world.recalls, target) else {
                return Ok(false);
            };
            let visible = by.may_see(world.owner_of[&recall_id]);
            let path = format!("/v1/recalls/{recall_id}");
            let response = send(tenants.client(by), Method::GET, &path, None).await;
            expect(&response, &[if visible { 200 } else { 404 }], "get recall")?;
            checked(world, kind, by.audience(), &response, &[recall_id.as_str()])?;
        }
        Operation::GetTask { by, target } => {
            let Some(task_id) = pick(&world.tasks, target) else {
                return Ok(false);
            };
            let own_project = world.owner_of[&task_id].project == by.project;
            let path = format!("/v1/tasks/{task_id}");
            let response = send(tenants.client(by), Method::GET, &path, None).await;
            let wanted = match (by.is_token(), own_project) {
                (true, _) => 403, // tasks need `admin`
                (false, true) => 200,
                (false, false) => 404,
            };
            expect(&response, &[wanted], "get task")?;
            checked(world, kind, by.audience(), &response, &[task_id.as_str()])?;
        }
        Operation::CreateEvalSet { by, user, expected } => {
            // Expected ids are the project's own (a key sees all of them).
            let expected_ids: Vec<String> = world
                .live
                .iter()
                .rev()
                .filter(|id| {
                    world
                        .owner_of
                        .get(*id)
                        .is_some_and(|owner| owner.project == by.project)
                })
                .take(expected)
                .cloned()
                .collect();
            let set_owner = Owner {
                project: by.project,
                user: None,
            };
            let query_marker = marker(Owner {
                project: by.project,
                user,
            });
            let mut case = json!({
                "query": format!("{query_marker}: what does {} like?", name_of(user)),
                "expected_contents": [query_marker],
            });
            if !expected_ids.is_empty() {
                case["expected_memory_ids"] = json!(expected_ids);
            }
            if let Some(user) = user {
                case["user_id"] = json!(USERS[user]);
            }
            let body = json!({"name": format!("set:{} set", marker(set_owner)), "cases": [case]});
            let response = send(
                tenants.client(by),
                Method::POST,
                "/v1/eval-sets",
                Some(&body),
            )
            .await;
            // Evaluation sets need `admin`, which no token holds.
            expect(
                &response,
                &[if by.is_token() { 403 } else { 201 }],
                "create eval set",
            )?;
            let echoed: Vec<&str> = expected_ids.iter().map(String::as_str).collect();
            checked(world, kind, by.audience(), &response, &echoed)?;
            if response.status == 201
                && let Some(set_id) = response.body["id"].as_str()
            {
                world.own(set_id, set_owner);
                world.eval_sets.push(set_id.to_string());
            }
        }
        Operation::UsageByEndUser { by } => {
            let response = send(
                tenants.client(by),
                Method::GET,
                "/v1/usage?by=end_user",
                None,
            )
            .await;
            expect(
                &response,
                &[if by.is_token() { 403 } else { 200 }],
                "usage by end-user",
            )?;
            checked(world, kind, by.audience(), &response, &[])?;
        }
        Operation::StatementByEndUser { by } => {
            let response = send(
                tenants.client(by),
                Method::GET,
                &this_months_statement(),
                None,
            )
            .await;
            expect(
                &response,
                &[if by.is_token() { 403 } else { 200 }],
                "statement by end-user",
            )?;
            checked(world, kind, by.audience(), &response, &[])?;
        }
        Operation::StartRun { by, user } => {
            let subject = by.subject(user);
            let owner = Owner {
                project: by.project,
                user: subject.unwrap_or(user),
            };
            let mut body = json!({"task": format!("{}: plan the garden", marker(owner))});
            if let Some(user) = user {
                body["user_id"] = json!(USERS[user]);
            }
            let response = send(tenants.client(by), Method::POST, "/v1/runs", Some(&body)).await;
            let Ok(subject) = subject else {
                expect(
                    &response,
                    &[403],
                    "a token starting a run for another end-user",
                )?;
                checked(world, kind, by.audience(), &response, &[])?;
                return Ok(true);
            };
            expect(&response, &[201], "start run")?;
            checked(world, kind, by.reading(subject), &response, &[])?;
            if let Some(run_id) = response.body["run_id"].as_str() {
                world.own(run_id, owner);
                world.runs.push(run_id.to_string());
            }
        }
        Operation::GetRun { by, target } => {
            let Some(run_id) = pick(&world.runs, target) else {
                return Ok(false);
            };
            let visible = by.may_see(world.owner_of[&run_id]);
            let path = format!("/v1/runs/{run_id}");
            let response = send(tenants.client(by), Method::GET, &path, None).await;
            expect(&response, &[if visible { 200 } else { 404 }], "get run")?;
            checked(world, kind, by.audience(), &response, &[run_id.as_str()])?;
        }
        Operation::ListRuns { by } => {
            let response = send(tenants.client(by), Method::GET, "/v1/runs?limit=200", None).await;
            expect(&response, &[200], "list runs")?;
            checked(world, kind, by.audience(), &response, &[])?;
        }
        Operation::ListRecalls { by } => {
            let response = send(
                tenants.client(by),
                Method::GET,
                "/v1/recalls?limit=200",
                None,
            )
            .await;
            expect(&response, &[200], "list recalls")?;
            checked(world, kind, by.audience(), &response, &[])?;
        }
        // The Mem0-compatible door (under `/mem0`, where the same bearer credentials work).
        Operation::Mem0Get { by, target } => {
            let Some(id) = pick(&world.live, target) else {
                return Ok(false);
            };
            let owner = world.owner_of[&id];
            let path = format!("/mem0/v1/memories/{id}/");
            let response = send(tenants.client(by), Method::GET, &path, None).await;
            let wanted = if by.may_see(owner) { 200 } else { 404 };
            expect(&response, &[wanted], "mem0 get")?;
            checked(world, kind, by.audience(), &response, &[id.as_str()])?;
        }
        Operation::Mem0Search { by, user } => {
            // A token names its own end-user (the recall event it records keeps the filter
            // as sent, and the token reads it back); a key names one or every end-user.
            let named = match (by.token_of, user) {
                (Some(own), _) => json!(USERS[own]),
                (None, Some(user)) => json!(USERS[user]),
                (None, None) => json!({"in": USERS}),
            };
            let body = json!({
                "query": "which item does the user like?",
                "filters": {"user_id": named},
                "top_k": 20,
            });
            let path = "/mem0/v3/memories/search/";
            let response = send(tenants.client(by), Method::POST, path, Some(&body)).await;
            // A token's search is its end-user's whatever the filter names.
            expect(&response, &[200], "mem0 search")?;
            checked(world, kind, by.audience(), &response, &[])?;
        }
        Operation::Mem0Entities { by } => {
            let path = "/mem0/v1/entities/";
            let response = send(tenants.client(by), Method::GET, path, None).await;
            expect(&response, &[200], "mem0 entities")?;
            checked(world, kind, by.audience(), &response, &[])?;
            if let Some(own) = by.token_of {
                let named: Vec<&str> = response.body["results"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|entity| entity["type"] == "user")
                    .filter_map(|entity| entity["name"].as_str())
                    .collect();
                if named.iter().any(|name| *name != USERS[own]) {
                    return Err(TestCaseError::fail(format!(
                        "an end-user token of {} learned of other end-users through Mem0: {named:?}",
                        USERS[own]
                    )));
                }
            }
        }
        // The MCP door: the same use cases, a tool's refusal an `isError` result.
        Operation::McpGet { by, target } => {
            let Some(id) = pick(&world.live, target) else {
                return Ok(false);
            };
            let owner = world.owner_of[&id];
            let response = tenants
                .client(by)
                .mcp_tool("get_memory", json!({"id": id}))
                .await;
            let wanted = if by.may_see(owner) { 200 } else { 404 };
            expect(&response, &[wanted], "mcp get_memory")?;
            checked(world, kind, by.audience(), &response, &[id.as_str()])?;
        }
        Operation::McpSearch { .. } => {
            let Some((tool, arguments)) = mcp_call(world, &operation) else {
                return Ok(false);
            };
            let response = tenants.client(by).mcp_tool(tool, arguments).await;
            expect(&response, &[200], "mcp search_memories")?;
            checked(world, kind, by.audience(), &response, &[])?;
        }
        Operation::ListEvalSets { by } => {
            let response = send(tenants.client(by), Method::GET, "/v1/eval-sets", None).await;
            expect(
                &response,
                &[if by.is_token() { 403 } else { 200 }],
                "list eval sets",
            )?;
            checked(world, kind, by.audience(), &response, &[])?;
        }
        Operation::GetEvalSet { by, target } => {
            let Some(set_id) = pick(&world.eval_sets, target) else {
                return Ok(false);
            };
            let wanted = match (by.is_token(), world.owner_of[&set_id].project == by.project) {
                (true, _) => 403,
                (false, true) => 200,
                (false, false) => 404,
            };
            for (path, content) in [
                (format!("/v1/eval-sets/{set_id}"), false),
                (format!("/v1/eval-sets/{set_id}/cases"), true),
            ] {
                let response = send(tenants.client(by), Method::GET, &path, None).await;
                // Cases are content: an admin-only key is refused them.
                let wanted = if content && by.limited.is_some() {
                    403
                } else {
                    wanted
                };
                expect(&response, &[wanted], &path)?;
                checked(world, kind, by.audience(), &response, &[set_id.as_str()])?;
            }
        }
        Operation::IdempotentAdd { by, key, body } => {
            let client = tenants.client(by);
            let response = client
                .send(
                    client
                        .request(Method::POST, "/v1/memories")
                        .header("Idempotency-Key", IDEMPOTENCY_KEYS[key])
                        .json(&replay_body(body)),
                )
                .await;
            let Ok(subject) = by.subject(replay_body_user(body)) else {
                expect(
                    &response,
                    &[403],
                    "a token replaying a body of another end-user",
                )?;
                checked(world, kind, by.audience(), &response, &[])?;
                return Ok(true);
            };
            let ids = ids_at(&response.body, "memories");
            let first = world.replays.get(&(by, key)).cloned();
            match &first {
                // The same principal, key and body, a memory of the first answer deleted
                // since: the answer went with its content, and nothing is written.
                Some((first_body, first_ids))
                    if *first_body == body
                        && first_ids.iter().any(|id| world.deleted.contains(id)) =>
                {
                    expect(&response, &[409], "idempotent replay of a deleted write")?;
                    prop_assert!(ids.is_empty(), "{}", response.body);
                }
                // The same principal, key and body: the first answer again.
                Some((first_body, first_ids)) if *first_body == body => {
                    expect(&response, &[201], "idempotent replay")?;
                    prop_assert_eq!(&ids, first_ids, "a replay answers the first write");
                }
                // The same principal and key with another body: refused.
                Some(_) => expect(&response, &[422], "idempotency key reused")?,
                // A key this principal never used (whoever else did): a write of its own.
                None => {
                    expect(&response, &[201], "first use of an idempotency key")?;
                    prop_assert!(
                        !ids.is_empty() && ids.iter().all(|id| !world.owner_of.contains_key(id)),
                        "{:?} using {} for the first time got ids already answered to someone: {}",
                        by,
                        IDEMPOTENCY_KEYS[key],
                        response.body
                    );
                    prop_assert_eq!(
                        response.body["memories"][0]["user_id"].as_str(),
                        subject.map(|user| USERS[user]),
                        "the write belongs to its end-user: {}",
                        response.body
                    );
                }
            }
            checked(world, kind, by.audience(), &response, &[])?;
            if first.is_none() {
                for id in &ids {
                    world.own(
                        id,
                        Owner {
                            project: by.project,
                            user: subject,
                        },
                    );
                    world.live.push(id.clone());
                }
                world.replays.insert((by, key), (body, ids));
            }
        }
    }
    Ok(true)
}

/// Each project's API key (all scopes) and its end-user tokens.
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
    let keys: Vec<ApiClient> = keys.iter().map(|key| server.client_with_key(key)).collect();
    let mut tokens = Vec::new();
    for key in &keys {
        let mut of_project = Vec::new();
        for user in &USERS[..TOKEN_USERS] {
            let minted = send(
                key,
                Method::POST,
                "/v1/end-user-tokens",
                Some(&json!({
                    "user_id": user,
                    "scopes": ["memories:read", "memories:write"],
                    // The longest allowed: a 10,000-sequence run outlasts the default hour.
                    "ttl_seconds": 86_400,
                })),
            )
            .await;
            assert_eq!(minted.status, 201, "{}", minted.body);
            of_project.push(server.client_with_key(minted.body["token"].as_str().unwrap()));
        }
        tokens.push(of_project);
    }
    let mut admin_keys = Vec::new();
    let mut write_keys = Vec::new();
    for key in &keys {
        for (scope, keys_of_scope) in [
            ("admin", &mut admin_keys),
            ("memories:write", &mut write_keys),
        ] {
            let created = send(
                key,
                Method::POST,
                "/v1/keys",
                Some(&json!({"label": format!("{scope} only"), "scopes": [scope]})),
            )
            .await;
            assert_eq!(created.status, 201, "{}", created.body);
            keys_of_scope.push(server.client_with_key(created.body["secret"].as_str().unwrap()));
        }
    }
    Tenants {
        keys,
        tokens,
        admin_keys,
        write_keys,
    }
}

/// `ENGRAM_PROPTEST_CASES`, when set.
pub(crate) fn proptest_cases() -> Option<u32> {
    std::env::var("ENGRAM_PROPTEST_CASES")
        .ok()
        .and_then(|text| text.parse().ok())
}

/// The runtime and the server a property runs its sequences against. Rate limits off (per
/// key and per end-user): a property is about isolation, not throttling. No scheduled
/// consolidation merging the look-alike memories midway.
pub(crate) fn property_server() -> (tokio::runtime::Runtime, tempfile::TempDir, TestServer) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let directory = tempfile::tempdir().unwrap();
    let server = runtime
        .block_on(TestServer::spawn_with(
            directory.path(),
            &[
                ("ENGRAM_RATE_LIMIT_BURST", "0"),
                ("ENGRAM_RATE_LIMIT_PER_SECOND", "0"),
                ("ENGRAM_END_USER_RATE_LIMIT_BURST", "0"),
                ("ENGRAM_END_USER_RATE_LIMIT_PER_SECOND", "0"),
                ("ENGRAM_CONSOLIDATION_INTERVAL_SECS", "0"),
            ],
        ))
        .unwrap();
    (runtime, directory, server)
}

#[test]
fn no_response_ever_contains_another_projects_or_end_users_ids_or_content() {
    let cases = proptest_cases().unwrap_or(1_000);
    let (runtime, _directory, server) = property_server();
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
    let sequences_run = AtomicU64::new(0);
    let operations_run = AtomicU64::new(0);
    let result = runner.run(
        &proptest::collection::vec(operation(), 3..9),
        |operations| {
            sequences_run.fetch_add(1, Ordering::Relaxed);
            operations_run.fetch_add(operations.len() as u64, Ordering::Relaxed);
            runtime.block_on(run_sequence(&tenants, &mut world.borrow_mut(), operations))
        },
    );
    let world = world.borrow();
    let responses: u64 = world.tally.values().map(|tally| tally.responses).sum();
    eprintln!(
        "cross-tenant property: {} sequences ({cases} cases asked), {} operations, {responses} responses checked, over 3 organizations × 2 projects × (1 key, an admin-only and a write-only key, {TOKEN_USERS} end-user tokens) in {:.1} s; {} memories live, {} ids tracked at the end",
        sequences_run.load(Ordering::Relaxed),
        operations_run.load(Ordering::Relaxed),
        started.elapsed().as_secs_f64(),
        world.live.len(),
        world.owner_of.len(),
    );
    eprintln!(
        "  single-scope keys (admin only, write only): {} operations refused beyond their scope, {} served content-free",
        world.limited_refused, world.limited_served
    );
    for (kind, tally) in &world.tally {
        eprintln!(
            "  {kind:<16} {:>7} run {:>6} skipped (nothing to aim at) {:>7} responses checked",
            tally.operations, tally.skipped, tally.responses
        );
    }
    if let Err(failure) = result {
        panic!("{failure}");
    }
}

/// `/v1/statements/<this month>`: the month whose statement names the world's end-users.
fn this_months_statement() -> String {
    format!("/v1/statements/{}", chrono::Utc::now().format("%Y-%m"))
}
