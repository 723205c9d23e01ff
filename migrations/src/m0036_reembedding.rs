//! Moving a project with memories to another embedding model: where the move stands on the
//! project (the model it goes to, the task doing it, and a generation raised at each switch
//! so a write embedded before the switch cannot land after it), and the new vectors staged
//! beside their memories until the switch copies them in.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Projects {
    Table,
    EmbeddingGeneration,
    EmbeddingTargetSource,
    EmbeddingTargetTask,
}

#[derive(DeriveIden)]
enum Memories {
    Table,
    Id,
}

#[derive(DeriveIden)]
enum MemoryReembeddings {
    Table,
    MemoryId,
    OrganizationId,
    ProjectId,
    ContentHash,
    EmbeddingModel,
    Embedding,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // One column per statement: SQLite adds one at a time.
        let columns = [
            Table::alter()
                .table(Projects::Table)
                .add_column(
                    ColumnDef::new(Projects::EmbeddingGeneration)
                        .big_integer()
                        .not_null()
                        .default(0),
                )
                .to_owned(),
            Table::alter()
                .table(Projects::Table)
                .add_column(
                    ColumnDef::new(Projects::EmbeddingTargetSource)
                        .string()
                        .null(),
                )
                .to_owned(),
            Table::alter()
                .table(Projects::Table)
                .add_column(ColumnDef::new(Projects::EmbeddingTargetTask).uuid().null())
                .to_owned(),
        ];
        for column in columns {
            manager.alter_table(column).await?;
        }
        // A staged vector goes with its memory: deleting or erasing the memory deletes it.
        manager
            .create_table(
                Table::create()
                    .table(MemoryReembeddings::Table)
                    .col(
                        ColumnDef::new(MemoryReembeddings::MemoryId)
                            .uuid()
                            .not_null()
                            .primary_key(),
                    )
                    .col(
                        ColumnDef::new(MemoryReembeddings::OrganizationId)
                            .uuid()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(MemoryReembeddings::ProjectId)
                            .uuid()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(MemoryReembeddings::ContentHash)
                            .string()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(MemoryReembeddings::EmbeddingModel)
                            .string()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(MemoryReembeddings::Embedding)
                            .binary()
                            .not_null(),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .from(MemoryReembeddings::Table, MemoryReembeddings::MemoryId)
                            .to(Memories::Table, Memories::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("memory_reembeddings_by_project")
                    .table(MemoryReembeddings::Table)
                    .col(MemoryReembeddings::ProjectId)
                    .col(MemoryReembeddings::MemoryId)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(MemoryReembeddings::Table).to_owned())
            .await?;
        let columns = [
            Projects::EmbeddingGeneration,
            Projects::EmbeddingTargetSource,
            Projects::EmbeddingTargetTask,
        ];
        for column in columns {
            manager
                .alter_table(
                    Table::alter()
                        .table(Projects::Table)
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}
