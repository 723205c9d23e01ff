//! Named teams of agents: a project's teams (team name → its agents, none at this upgrade)
//! and, per memory, the team a shared memory is shared with (`NULL`: every agent).

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Memories {
    Table,
    SharedWith,
}

#[derive(DeriveIden)]
enum Projects {
    Table,
    AgentTeams,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // One column per statement: SQLite adds one at a time.
        let columns = [
            Table::alter()
                .table(Memories::Table)
                .add_column(ColumnDef::new(Memories::SharedWith).string().null())
                .to_owned(),
            Table::alter()
                .table(Projects::Table)
                .add_column(
                    ColumnDef::new(Projects::AgentTeams)
                        .json()
                        .not_null()
                        .default("{}"),
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
                .drop_column(Memories::SharedWith)
                .to_owned(),
            Table::alter()
                .table(Projects::Table)
                .drop_column(Projects::AgentTeams)
                .to_owned(),
        ];
        for column in columns {
            manager.alter_table(column).await?;
        }
        Ok(())
    }
}
