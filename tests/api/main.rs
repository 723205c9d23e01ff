//! The HTTP API end to end: each module spawns the real `engram serve` (or a cluster of
//! `gateway` and `worker` processes) and talks to it as a client would.

mod access;
mod access_holes;
mod attribution;
mod audit;
mod bad_input;
mod cluster;
mod compliance;
mod console_matrix;
mod console_members;
mod console_roles;
mod console_sessions;
mod conversations;
mod crash_harness;
mod cross_tenant;
mod durability;
mod embedding_spaces;
mod end_user_tokens;
mod files;
mod filters;
mod hostile_traffic;
mod isolation;
mod mcp_server;
mod mem0_compat;
mod memories_api;
mod published_contract;
mod recall;
mod recall_quality;
mod runs;
mod security_matrix;
mod service;
mod sessions;
mod statements;
mod teams_of_agents;
mod usage;
