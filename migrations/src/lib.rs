//! Database schema migrations (sea-orm-migration).
