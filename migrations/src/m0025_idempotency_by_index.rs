//! Stored idempotency answers found by index, never by reading their bodies: each answer's
//! memories and their end-users in `idempotency_answer_memories`, so a delete or an erasure
//! finds the answers that name a memory or a person through an index; an index on when an
//! answer was stored, for its expiry. `indexed` marks the answers already listed there:
//! answers stored before this migration are listed from their bodies when storage opens.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum IdempotencyRecords {
    Table,
    CreatedAt,
    Indexed,
}

#[derive(DeriveIden)]
enum IdempotencyAnswerMemories {
    Table,
    ProjectId,
    IdempotencyKey,
    MemoryId,
    UserId,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(IdempotencyRecords::Table)
                    .add_column(
                        ColumnDef::new(IdempotencyRecords::Indexed)
                            .boolean()
                            .not_null()
                            .default(false),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idempotency_records_by_age")
                    .table(IdempotencyRecords::Table)
                    .col(IdempotencyRecords::CreatedAt)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(IdempotencyAnswerMemories::Table)
                    .col(
                        ColumnDef::new(IdempotencyAnswerMemories::ProjectId)
                            .uuid()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(IdempotencyAnswerMemories::IdempotencyKey)
                            .string()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(IdempotencyAnswerMemories::MemoryId)
                            .uuid()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(IdempotencyAnswerMemories::UserId)
                            .string_len(255)
                            .null(),
                    )
                    .primary_key(
                        Index::create()
                            .col(IdempotencyAnswerMemories::ProjectId)
                            .col(IdempotencyAnswerMemories::IdempotencyKey)
                            .col(IdempotencyAnswerMemories::MemoryId),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idempotency_answers_by_memory")
                    .table(IdempotencyAnswerMemories::Table)
                    .col(IdempotencyAnswerMemories::ProjectId)
                    .col(IdempotencyAnswerMemories::MemoryId)
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idempotency_answers_by_user")
                    .table(IdempotencyAnswerMemories::Table)
                    .col(IdempotencyAnswerMemories::ProjectId)
                    .col(IdempotencyAnswerMemories::UserId)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(
                Table::drop()
                    .table(IdempotencyAnswerMemories::Table)
                    .to_owned(),
            )
            .await?;
        manager
            .drop_index(
                Index::drop()
                    .name("idempotency_records_by_age")
                    .table(IdempotencyRecords::Table)
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(IdempotencyRecords::Table)
                    .drop_column(IdempotencyRecords::Indexed)
                    .to_owned(),
            )
            .await
    }
}
