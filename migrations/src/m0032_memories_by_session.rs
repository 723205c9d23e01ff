//! An index of memories by end-user and session in write order: search reads the memories
//! between two candidates of one session to tell which are neighbours (turns a few writes
//! apart).

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Memories {
    Table,
    ProjectId,
    UserId,
    SessionId,
    Id,
}

const INDEX_NAME: &str = "memories_project_user_session_id";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_index(
                Index::create()
                    .name(INDEX_NAME)
                    .table(Memories::Table)
                    .col(Memories::ProjectId)
                    .col(Memories::UserId)
                    .col(Memories::SessionId)
                    .col(Memories::Id)
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
