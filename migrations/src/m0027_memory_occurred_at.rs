//! Event time: when what a memory describes happened (`occurred_at`), distinct from when it
//! was written. Existing memories are dated by their write time.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Memories {
    Table,
    OccurredAt,
    CreatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // SQLite adds a NOT NULL column only with a constant default; every row is then
        // dated by its write time, and every write sets the column itself.
        manager
            .alter_table(
                Table::alter()
                    .table(Memories::Table)
                    .add_column(
                        ColumnDef::new(Memories::OccurredAt)
                            .timestamp_with_time_zone()
                            .not_null()
                            .default("1970-01-01 00:00:00+00:00"),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .exec_stmt(
                Query::update()
                    .table(Memories::Table)
                    .value(Memories::OccurredAt, Expr::col(Memories::CreatedAt))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Memories::Table)
                    .drop_column(Memories::OccurredAt)
                    .to_owned(),
            )
            .await
    }
}
