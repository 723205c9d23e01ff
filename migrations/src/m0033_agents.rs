//! Memory for teams of agents: a key bound to agents (`api_keys.agents`, a JSON array; `NULL`
//! for every agent), each memory's visibility among the project's agents (every memory that
//! exists at this upgrade is `shared`, as every credential read it before), the project's
//! default for new memories, and the agent of session state and feedback.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum ApiKeys {
    Table,
    Agents,
}

#[derive(DeriveIden)]
enum Memories {
    Table,
    Visibility,
}

#[derive(DeriveIden)]
enum Projects {
    Table,
    DefaultVisibility,
}

#[derive(DeriveIden)]
enum SessionState {
    Table,
    AgentId,
}

#[derive(DeriveIden)]
enum Feedback {
    Table,
    AgentId,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // One column per statement: SQLite adds one at a time.
        let columns = [
            Table::alter()
                .table(ApiKeys::Table)
                .add_column(ColumnDef::new(ApiKeys::Agents).text().null())
                .to_owned(),
            Table::alter()
                .table(Memories::Table)
                .add_column(
                    ColumnDef::new(Memories::Visibility)
                        .string()
                        .not_null()
                        .default("shared"),
                )
                .to_owned(),
            Table::alter()
                .table(Projects::Table)
                .add_column(
                    ColumnDef::new(Projects::DefaultVisibility)
                        .string()
                        .not_null()
                        .default("shared"),
                )
                .to_owned(),
            Table::alter()
                .table(SessionState::Table)
                .add_column(ColumnDef::new(SessionState::AgentId).string().null())
                .to_owned(),
            Table::alter()
                .table(Feedback::Table)
                .add_column(ColumnDef::new(Feedback::AgentId).string().null())
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
                .table(ApiKeys::Table)
                .drop_column(ApiKeys::Agents)
                .to_owned(),
            Table::alter()
                .table(Memories::Table)
                .drop_column(Memories::Visibility)
                .to_owned(),
            Table::alter()
                .table(Projects::Table)
                .drop_column(Projects::DefaultVisibility)
                .to_owned(),
            Table::alter()
                .table(SessionState::Table)
                .drop_column(SessionState::AgentId)
                .to_owned(),
            Table::alter()
                .table(Feedback::Table)
                .drop_column(Feedback::AgentId)
                .to_owned(),
        ];
        for column in columns {
            manager.alter_table(column).await?;
        }
        Ok(())
    }
}
