//! A project's relevance floor (`relevance_floor`, thousandths): `NULL` means its embedding
//! model's measured floor — what a new project gets — and every project that exists at this
//! upgrade is set to 0, so its searches answer as before until an admin opts in.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Projects {
    Table,
    RelevanceFloor,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Projects::Table)
                    .add_column(ColumnDef::new(Projects::RelevanceFloor).integer().null())
                    .to_owned(),
            )
            .await?;
        manager
            .exec_stmt(
                Query::update()
                    .table(Projects::Table)
                    .value(Projects::RelevanceFloor, 0)
                    .to_owned(),
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Projects::Table)
                    .drop_column(Projects::RelevanceFloor)
                    .to_owned(),
            )
            .await?;
        Ok(())
    }
}
