//! Outbox claims: a worker leases the entries it is applying, so any number of workers can
//! share one outbox (PostgreSQL claims with `FOR UPDATE SKIP LOCKED`) and a crashed worker's
//! entries return to the pool when its lease runs out.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum IndexOutbox {
    Table,
    ClaimedBy,
    ClaimedUntil,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // One column per statement: SQLite's ALTER TABLE adds one column at a time.
        manager
            .alter_table(
                Table::alter()
                    .table(IndexOutbox::Table)
                    .add_column(
                        ColumnDef::new(IndexOutbox::ClaimedBy)
                            .string_len(120)
                            .null(),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(IndexOutbox::Table)
                    .add_column(
                        ColumnDef::new(IndexOutbox::ClaimedUntil)
                            .timestamp_with_time_zone()
                            .null(),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for column in [IndexOutbox::ClaimedUntil, IndexOutbox::ClaimedBy] {
            manager
                .alter_table(
                    Table::alter()
                        .table(IndexOutbox::Table)
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}
