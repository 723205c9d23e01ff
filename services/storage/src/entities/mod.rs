//! sea-orm entities, private to the storage crate: code outside it cannot write a query
//! against a table directly, only call the scoped repository functions.

pub(crate) mod agent_runs;
pub(crate) mod api_keys;
pub(crate) mod audit_chain_heads;
pub(crate) mod audit_events;
pub(crate) mod budget_alerts;
pub(crate) mod console_accounts;
pub(crate) mod console_invitations;
pub(crate) mod console_sessions;
pub(crate) mod erasure_ledger;
pub(crate) mod eval_cases;
pub(crate) mod eval_runs;
pub(crate) mod eval_sets;
pub(crate) mod feedback;
pub(crate) mod files;
pub(crate) mod idempotency_answer_memories;
pub(crate) mod idempotency_records;
pub(crate) mod index_outbox;
pub(crate) mod llm_calls;
pub(crate) mod memories;
pub(crate) mod memory_history;
pub(crate) mod memory_reembeddings;
pub(crate) mod memory_tombstones;
pub(crate) mod memory_uses;
pub(crate) mod organizations;
pub(crate) mod price_book;
pub(crate) mod projects;
pub(crate) mod recall_events;
pub(crate) mod retrieval_profiles;
pub(crate) mod run_steps;
pub(crate) mod session_messages;
pub(crate) mod session_state;
pub(crate) mod statement_snapshots;
pub(crate) mod tasks;
pub(crate) mod usage_daily;
pub(crate) mod usage_hourly;
