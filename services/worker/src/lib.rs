//! Background loops: outbox indexer.
