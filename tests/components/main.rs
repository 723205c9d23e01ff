//! Each crate in-process against real parts (SQLite and PostgreSQL, the Qdrant engine, the
//! model), and the rules of the repository itself (architecture, deployment files).

mod architecture;
mod audit_chain_tampering;
mod cli_traces;
mod deployment;
mod docs;
mod embed_openai_compatible;
mod embed_reference_equivalence;
mod engine_concurrent_indexers;
mod engine_index_outage;
mod gateway_console_login;
mod index_contract;
mod periodic_jobs;
mod storage_repository;
mod use_case_rules;
