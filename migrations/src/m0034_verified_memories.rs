//! Verified conclusions: when a memory was verified and by whom (`NULL`: unverified, which
//! every memory that exists at this upgrade is), and whether a project's searches take
//! other agents' memories only once verified (off for every project).

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Memories {
    Table,
    VerifiedAt,
    VerifiedBy,
}

#[derive(DeriveIden)]
enum Projects {
    Table,
    VerifiedOnlyFromOtherAgents,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // One column per statement: SQLite adds one at a time.
        let columns = [
            Table::alter()
                .table(Memories::Table)
                .add_column(
                    ColumnDef::new(Memories::VerifiedAt)
                        .timestamp_with_time_zone()
                        .null(),
                )
                .to_owned(),
            Table::alter()
                .table(Memories::Table)
                .add_column(ColumnDef::new(Memories::VerifiedBy).string().null())
                .to_owned(),
            Table::alter()
                .table(Projects::Table)
                .add_column(
                    ColumnDef::new(Projects::VerifiedOnlyFromOtherAgents)
                        .boolean()
                        .not_null()
                        .default(false),
                )
                .to_owned(),
        ];
        for column in columns {
            manager.alter_table(column).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let columns = [
            Table::alter()
                .table(Memories::Table)
                .drop_column(Memories::VerifiedAt)
                .to_owned(),
            Table::alter()
                .table(Memories::Table)
                .drop_column(Memories::VerifiedBy)
                .to_owned(),
            Table::alter()
                .table(Projects::Table)
                .drop_column(Projects::VerifiedOnlyFromOtherAgents)
                .to_owned(),
        ];
        for column in columns {
            manager.alter_table(column).await?;
        }
        Ok(())
    }
}
