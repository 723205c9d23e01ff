//! Engram's database schema as ordered sea-orm migrations. The same migrations run on
//! SQLite (embedded default) and PostgreSQL (cluster); no backend-specific tables.

pub use sea_orm_migration::prelude::*;

mod m0001_initial_schema;

pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![Box::new(m0001_initial_schema::Migration)]
    }
}
