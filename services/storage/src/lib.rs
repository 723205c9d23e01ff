//! Metadata store: sea-orm entities and repositories for SQLite and PostgreSQL, outbox.
