//! An index of each project's memories by when they last changed, so the periodic reconciler
//! reads only the memories written, edited or deleted since its last pass.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Memories {
    Table,
    ProjectId,
    UpdatedAt,
}

const INDEX_NAME: &str = "memories_project_updated";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_index(
                // On a large PostgreSQL table, an operator may build it first with
                // `CREATE INDEX CONCURRENTLY memories_project_updated ON memories (project_id,
                // updated_at)` so writes are not held up; this then finds it.
                Index::create()
                    .if_not_exists()
                    .name(INDEX_NAME)
                    .table(Memories::Table)
                    .col(Memories::ProjectId)
                    .col(Memories::UpdatedAt)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_index(
                Index::drop()
                    .name(INDEX_NAME)
                    .table(Memories::Table)
                    .to_owned(),
            )
            .await
    }
}
