//! The cross-tenant property's agent half: whatever a project's credentials do, no answer to a
//! credential bound to an agent ever holds a memory (its id or its words) that is another
//! agent's private memory, and no end-user token bound to an agent one of another end-user.
//! Random operation sequences (proptest) against one real server and one project whose
//! credentials are its unbound key, a key bound to each of two agents and, for each agent,
//! an end-user token of `ana` bound to it, one agent in the project's one named team.
//! Operations: add (as any agent, private, shared, or shared with the team),
//! list and search (with and without `agent_id` and `include_shared`), context, get, edit,
//! delete, history, a visibility change by the unbound key, Mem0's search and get, MCP's
//! search and get. Every memory is recorded with its end-user, agent and visibility; its words
//! carry a marker (`agentcase-m<n>`) that names it. `ENGRAM_PROPTEST_CASES` / 5 sequences.

use crate::cross_tenant::{collect_strings, expect, ids_in, send};
use engram_tests::{ApiClient, ApiResponse, TestServer};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use reqwest::Method;
use serde_json::json;
use std::collections::HashMap;

const AGENTS: [&str; 2] = ["scout", "scribe"];
const USERS: [&str; 2] = ["ana", "ben"];
/// The project's one named team, and its agents (indexes into `AGENTS`).
const TEAM: &str = "pair";
const TEAM_AGENTS: [usize; 1] = [0];

/// Who asks: the unbound key, a key bound to `AGENTS[n]`, or `ana`'s token bound to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Caller {
    Unbound,
    BoundKey(usize),
    BoundToken(usize),
}

impl Caller {
    fn agent(self) -> Option<usize> {
        match self {
            Caller::Unbound => None,
            Caller::BoundKey(agent) | Caller::BoundToken(agent) => Some(agent),
        }
    }

    fn end_user(self) -> Option<usize> {
        matches!(self, Caller::BoundToken(_)).then_some(0)
    }

    /// Whether this caller may read a memory of `owner`.
    fn sees(self, owner: &Owner) -> bool {
        let agent_sees = match self.agent() {
            None => true,
            Some(agent) => {
                owner.agent == Some(agent)
                    || (owner.shared && (!owner.team || TEAM_AGENTS.contains(&agent)))
            }
        };
        agent_sees && self.end_user().is_none_or(|user| owner.user == Some(user))
    }

    /// Whether this caller may change (edit, delete) a memory it sees.
    fn changes(self, owner: &Owner) -> bool {
        self.agent().is_none_or(|agent| owner.agent == Some(agent))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Owner {
    user: Option<usize>,
    agent: Option<usize>,
    shared: bool,
    /// Shared with `TEAM` only.
    team: bool,
}

#[derive(Clone, Debug)]
enum Step {
    Add {
        by: Caller,
        user: Option<usize>,
        agent: Option<usize>,
        shared: bool,
        team: bool,
    },
    List {
        by: Caller,
        agent: Option<usize>,
    },
    Search {
        by: Caller,
        agent: Option<usize>,
        include_shared: bool,
    },
    Context {
        by: Caller,
    },
    Get {
        by: Caller,
        target: usize,
    },
    Edit {
        by: Caller,
        target: usize,
    },
    Delete {
        by: Caller,
        target: usize,
    },
    History {
        by: Caller,
        target: usize,
    },
    /// The unbound key makes a memory private or shared.
    Reshare {
        target: usize,
        shared: bool,
    },
    Mem0Search {
        by: Caller,
    },
    Mem0Get {
        by: Caller,
        target: usize,
    },
    McpSearch {
        by: Caller,
    },
    McpGet {
        by: Caller,
        target: usize,
    },
}

fn caller() -> impl Strategy<Value = Caller> {
    prop_oneof![
        Just(Caller::Unbound),
        (0..AGENTS.len()).prop_map(Caller::BoundKey),
        (0..AGENTS.len()).prop_map(Caller::BoundToken),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    let agent = proptest::option::of(0..AGENTS.len());
    prop_oneof![
        3 => (caller(), proptest::option::of(0..USERS.len()), agent.clone(), any::<bool>(), any::<bool>())
            .prop_map(|(by, user, agent, shared, team)| Step::Add { by, user, agent, shared, team }),
        2 => (caller(), agent.clone()).prop_map(|(by, agent)| Step::List { by, agent }),
        2 => (caller(), agent, any::<bool>()).prop_map(|(by, agent, include_shared)| {
            Step::Search { by, agent, include_shared }
        }),
        1 => caller().prop_map(|by| Step::Context { by }),
        2 => (caller(), any::<usize>()).prop_map(|(by, target)| Step::Get { by, target }),
        1 => (caller(), any::<usize>()).prop_map(|(by, target)| Step::Edit { by, target }),
        1 => (caller(), any::<usize>()).prop_map(|(by, target)| Step::Delete { by, target }),
        1 => (caller(), any::<usize>()).prop_map(|(by, target)| Step::History { by, target }),
        1 => (any::<usize>(), any::<bool>()).prop_map(|(target, shared)| Step::Reshare { target, shared }),
        1 => caller().prop_map(|by| Step::Mem0Search { by }),
        1 => (caller(), any::<usize>()).prop_map(|(by, target)| Step::Mem0Get { by, target }),
        1 => caller().prop_map(|by| Step::McpSearch { by }),
        1 => (caller(), any::<usize>()).prop_map(|(by, target)| Step::McpGet { by, target }),
    ]
}

struct Credentials {
    unbound: ApiClient,
    keys: Vec<ApiClient>,
    tokens: Vec<ApiClient>,
}

impl Credentials {
    fn of(&self, caller: Caller) -> &ApiClient {
        match caller {
            Caller::Unbound => &self.unbound,
            Caller::BoundKey(agent) => &self.keys[agent],
            Caller::BoundToken(agent) => &self.tokens[agent],
        }
    }
}

#[derive(Default)]
struct Memories {
    owner_of: HashMap<String, Owner>,
    /// Marker → memory id.
    marked: HashMap<String, String>,
    /// Every memory ever written, deleted ones too (a target may be gone).
    ids: Vec<String>,
    deleted: std::collections::HashSet<String>,
    markers: u64,
    responses: u64,
    refused: u64,
}

impl Memories {
    fn marker(&mut self) -> String {
        self.markers += 1;
        format!("agentcase-m{}", self.markers)
    }

    fn target(&self, target: usize) -> Option<(String, Owner)> {
        if self.ids.is_empty() {
            return None;
        }
        let id = self.ids[target % self.ids.len()].clone();
        let owner = self.owner_of[&id];
        Some((id, owner))
    }

    /// No id or marker in the answer is of a memory `by` may not read.
    fn check(
        &mut self,
        by: Caller,
        what: &str,
        response: &ApiResponse,
    ) -> Result<(), TestCaseError> {
        let mut strings = Vec::new();
        collect_strings(&response.body, &mut strings);
        for text in strings {
            for id in ids_in(text) {
                if let Some(owner) = self.owner_of.get(id) {
                    prop_assert!(
                        by.sees(owner),
                        "{what}: {by:?} received the id of a memory of {owner:?}: {}",
                        response.body
                    );
                }
            }
            for (position, _) in text.match_indices("agentcase-m") {
                let marker: String = text[position..]
                    .chars()
                    .take_while(|character| character.is_ascii_alphanumeric() || *character == '-')
                    .collect();
                if let Some(owner) = self
                    .marked
                    .get(&marker)
                    .and_then(|id| self.owner_of.get(id))
                {
                    prop_assert!(
                        by.sees(owner),
                        "{what}: {by:?} received the words of a memory of {owner:?}: {}",
                        response.body
                    );
                }
            }
        }
        self.responses += 1;
        Ok(())
    }
}

/// The status a read of a memory of `owner` answers `by`.
fn read_status(by: Caller, owner: &Owner, live: bool) -> u16 {
    if live && by.sees(owner) { 200 } else { 404 }
}

async fn run_steps(
    credentials: &Credentials,
    memories: &mut Memories,
    steps: Vec<Step>,
) -> Result<(), TestCaseError> {
    for step in steps {
        run_step(credentials, memories, step).await?;
    }
    Ok(())
}

async fn run_step(
    credentials: &Credentials,
    memories: &mut Memories,
    step: Step,
) -> Result<(), TestCaseError> {
    match step {
        Step::Add {
            by,
            user,
            agent,
            shared,
            team,
        } => {
            // A bound credential writes as its agent; a token as its end-user.
            let agent = by.agent().or(agent);
            let user = by.end_user().or(user);
            let shared = shared || agent.is_none();
            let team = team && shared;
            let marker = memories.marker();
            let mut memory = json!({
                "content": format!("{marker}: the customer likes green tea"),
                "visibility": if shared { "shared" } else { "private" },
            });
            if team {
                memory["shared_with"] = json!(TEAM);
            }
            if let (Some(user), Caller::Unbound | Caller::BoundKey(_)) = (user, by) {
                memory["user_id"] = json!(USERS[user]);
            }
            if let (Some(agent), Caller::Unbound) = (agent, by) {
                memory["agent_id"] = json!(AGENTS[agent]);
            }
            let response = credentials.of(by).add(json!([memory])).await;
            expect(&response, &[201], "add")?;
            let id = response.body["memories"][0]["id"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let owner = Owner {
                user,
                agent,
                shared,
                team,
            };
            memories.owner_of.insert(id.clone(), owner);
            memories.marked.insert(marker, id.clone());
            memories.ids.push(id);
            memories.check(by, "add", &response)?;
        }
        Step::List { by, agent } => {
            let mut path = "/v1/memories?limit=100".to_string();
            if let Some(agent) = agent {
                path.push_str(&format!("&agent_id={}", AGENTS[agent]));
            }
            let response = send(credentials.of(by), Method::GET, &path, None).await;
            expect(&response, &[200], "list")?;
            memories.check(by, "list", &response)?;
        }
        Step::Search {
            by,
            agent,
            include_shared,
        } => {
            let mut body =
                json!({"query": "what does the customer like?", "top_k": 50, "min_score": 0});
            if let Some(agent) = agent {
                body["agent_id"] = json!(AGENTS[agent]);
                body["include_shared"] = json!(include_shared);
            }
            let response = credentials.of(by).search(body).await;
            expect(&response, &[200, 403], "search")?;
            memories.check(by, "search", &response)?;
        }
        Step::Context { by } => {
            let mut body = json!({"query": "what does the customer like?", "token_budget": 2000});
            if by.end_user().is_none() {
                body["user_id"] = json!(USERS[0]);
            }
            let response = send(credentials.of(by), Method::POST, "/v1/context", Some(&body)).await;
            expect(&response, &[200], "context")?;
            memories.check(by, "context", &response)?;
        }
        Step::Get { by, target } | Step::History { by, target } | Step::Mem0Get { by, target } => {
            let Some((id, owner)) = memories.target(target) else {
                return Ok(());
            };
            let path = match step {
                Step::Get { .. } => format!("/v1/memories/{id}"),
                Step::History { .. } => format!("/v1/memories/{id}/history"),
                _ => format!("/mem0/v1/memories/{id}/"),
            };
            let response = send(credentials.of(by), Method::GET, &path, None).await;
            expect(
                &response,
                &[read_status(by, &owner, !memories.deleted.contains(&id))],
                &path,
            )?;
            memories.check(by, "get", &response)?;
        }
        Step::Edit { by, target } | Step::Delete { by, target } => {
            let Some((id, owner)) = memories.target(target) else {
                return Ok(());
            };
            let live = !memories.deleted.contains(&id);
            let editing = matches!(step, Step::Edit { .. });
            let wanted = match read_status(by, &owner, live) {
                200 if !by.changes(&owner) => 403,
                200 if !editing => 204,
                status => status,
            };
            let response = if editing {
                let marker = memories.marker();
                memories.marked.insert(marker.clone(), id.clone());
                credentials
                    .of(by)
                    .patch(
                        &id,
                        None,
                        json!({"content": format!("{marker}: the customer now likes oolong")}),
                    )
                    .await
            } else {
                credentials.of(by).delete(&id).await
            };
            expect(
                &response,
                &[wanted],
                if editing { "edit" } else { "delete" },
            )?;
            if wanted == 403 {
                memories.refused += 1;
            }
            if !editing && (200..300).contains(&response.status) {
                memories.deleted.insert(id);
            }
            memories.check(by, "edit or delete", &response)?;
        }
        Step::Reshare { target, shared } => {
            let Some((id, owner)) = memories.target(target) else {
                return Ok(());
            };
            if memories.deleted.contains(&id) || owner.agent.is_none() {
                return Ok(());
            }
            let response = credentials
                .unbound
                .patch(
                    &id,
                    None,
                    json!({"visibility": if shared { "shared" } else { "private" }}),
                )
                .await;
            expect(&response, &[200], "visibility change")?;
            // Made private, it is shared with no team; shared again, it keeps its team.
            memories.owner_of.insert(
                id,
                Owner {
                    shared,
                    team: shared && owner.team,
                    ..owner
                },
            );
        }
        Step::Mem0Search { by } => {
            let named = match by.end_user() {
                Some(own) => json!(USERS[own]),
                None => json!({"in": USERS}),
            };
            let body = json!({"query": "what does the customer like?", "filters": {"user_id": named}, "top_k": 50});
            let response = send(
                credentials.of(by),
                Method::POST,
                "/mem0/v3/memories/search/",
                Some(&body),
            )
            .await;
            expect(&response, &[200], "mem0 search")?;
            memories.check(by, "mem0 search", &response)?;
        }
        Step::McpSearch { by } => {
            let response = credentials
                .of(by)
                .mcp_tool(
                    "search_memories",
                    json!({"query": "what does the customer like?", "top_k": 50}),
                )
                .await;
            memories.check(by, "mcp search", &response)?;
        }
        Step::McpGet { by, target } => {
            let Some((id, _)) = memories.target(target) else {
                return Ok(());
            };
            let response = credentials
                .of(by)
                .mcp_tool("get_memory", json!({"memory_id": id}))
                .await;
            memories.check(by, "mcp get", &response)?;
        }
    }
    Ok(())
}

async fn credentials_of_one_project(server: &TestServer) -> Credentials {
    let unbound = server.client();
    let members: Vec<&str> = TEAM_AGENTS.iter().map(|agent| AGENTS[*agent]).collect();
    let teams = send(
        &unbound,
        Method::PATCH,
        "/v1/project/settings",
        Some(&json!({"agent_teams": {TEAM: members}})),
    )
    .await;
    assert_eq!(teams.status, 200, "{}", teams.body);
    let mut keys = Vec::new();
    let mut tokens = Vec::new();
    for agent in AGENTS {
        let made = send(
            &unbound,
            Method::POST,
            "/v1/keys",
            Some(&json!({
                "label": agent,
                "scopes": ["memories:read", "memories:write", "memories:delete"],
                "agents": [agent],
            })),
        )
        .await;
        assert_eq!(made.status, 201, "{}", made.body);
        let key = server.client_with_key(made.body["secret"].as_str().unwrap());
        let minted = send(
            &key,
            Method::POST,
            "/v1/end-user-tokens",
            Some(&json!({"user_id": USERS[0], "scopes": ["memories:read", "memories:write", "memories:delete"], "ttl_seconds": 86_400})),
        )
        .await;
        assert_eq!(minted.status, 201, "{}", minted.body);
        tokens.push(server.client_with_key(minted.body["token"].as_str().unwrap()));
        keys.push(key);
    }
    Credentials {
        unbound,
        keys,
        tokens,
    }
}

#[test]
fn no_answer_to_an_agent_bound_credential_holds_another_agents_private_memory() {
    let cases = crate::cross_tenant::proptest_cases().map_or(200, |cases| (cases / 5).max(1));
    let (runtime, _directory, server) = crate::cross_tenant::property_server();
    let credentials = runtime.block_on(credentials_of_one_project(&server));
    let memories = std::cell::RefCell::new(Memories::default());
    let mut runner = TestRunner::new(Config {
        cases,
        max_shrink_iters: 64,
        failure_persistence: None,
        ..Config::default()
    });
    let started = std::time::Instant::now();
    let result = runner.run(&proptest::collection::vec(step(), 3..9), |steps| {
        runtime.block_on(run_steps(&credentials, &mut memories.borrow_mut(), steps))
    });
    let memories = memories.borrow();
    eprintln!(
        "cross-agent property: {cases} sequences, {} responses checked, {} memories written ({} deleted), {} changes of another agent's memory refused, in {:.1} s",
        memories.responses,
        memories.ids.len(),
        memories.deleted.len(),
        memories.refused,
        started.elapsed().as_secs_f64()
    );
    if let Err(failure) = result {
        panic!("{failure}");
    }
}
