//! Engram's database schema as ordered sea-orm migrations. The same migrations run on
//! SQLite (embedded default) and PostgreSQL (cluster); no backend-specific tables.

pub use sea_orm_migration::prelude::*;

mod m0001_initial_schema;
mod m0002_outbox_claims;
mod m0003_memory_tombstones;
mod m0004_api_key_management;
mod m0005_audit_log;
mod m0006_end_user_token_keys;
mod m0007_console_sessions;
mod m0008_console_invitations;
mod m0009_governance;
mod m0010_usage;
mod m0011_price_book;
mod m0012_spend_limits;
mod m0013_files;
mod m0014_session_state;
mod m0015_session_messages;
mod m0016_feedback;
mod m0017_derive_memories_setting;
mod m0018_project_embedding;
mod m0019_recall_quality;
mod m0020_api_key_lineage;
mod m0021_session_state_per_end_user;
mod m0022_keyed_audit_chain;
mod m0023_store_retention;
mod m0024_api_key_makers;
mod m0025_idempotency_by_index;
mod m0026_query_cache_epoch;
mod m0027_memory_occurred_at;
mod m0028_usage_attribution;
mod m0029_agent_runs;
mod m0030_relevance_floor;
mod m0031_statements_and_fine_prices;
mod m0032_memories_by_session;
mod m0033_agents;
mod m0034_verified_memories;
mod m0035_agent_teams;
mod m0036_reembedding;
mod m0037_console_language;
mod m0038_memories_changed_since;

pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(m0001_initial_schema::Migration),
            Box::new(m0002_outbox_claims::Migration),
            Box::new(m0003_memory_tombstones::Migration),
            Box::new(m0004_api_key_management::Migration),
            Box::new(m0005_audit_log::Migration),
            Box::new(m0006_end_user_token_keys::Migration),
            Box::new(m0007_console_sessions::Migration),
            Box::new(m0008_console_invitations::Migration),
            Box::new(m0009_governance::Migration),
            Box::new(m0010_usage::Migration),
            Box::new(m0011_price_book::Migration),
            Box::new(m0012_spend_limits::Migration),
            Box::new(m0013_files::Migration),
            Box::new(m0014_session_state::Migration),
            Box::new(m0015_session_messages::Migration),
            Box::new(m0016_feedback::Migration),
            Box::new(m0017_derive_memories_setting::Migration),
            Box::new(m0018_project_embedding::Migration),
            Box::new(m0019_recall_quality::Migration),
            Box::new(m0020_api_key_lineage::Migration),
            Box::new(m0021_session_state_per_end_user::Migration),
            Box::new(m0022_keyed_audit_chain::Migration),
            Box::new(m0023_store_retention::Migration),
            Box::new(m0024_api_key_makers::Migration),
            Box::new(m0025_idempotency_by_index::Migration),
            Box::new(m0026_query_cache_epoch::Migration),
            Box::new(m0027_memory_occurred_at::Migration),
            Box::new(m0028_usage_attribution::Migration),
            Box::new(m0029_agent_runs::Migration),
            Box::new(m0030_relevance_floor::Migration),
            Box::new(m0031_statements_and_fine_prices::Migration),
            Box::new(m0032_memories_by_session::Migration),
            Box::new(m0033_agents::Migration),
            Box::new(m0034_verified_memories::Migration),
            Box::new(m0035_agent_teams::Migration),
            Box::new(m0036_reembedding::Migration),
            Box::new(m0037_console_language::Migration),
            Box::new(m0038_memories_changed_since::Migration),
        ]
    }
}
