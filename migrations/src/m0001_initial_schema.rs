//! The initial schema: tenants, console accounts, API keys, memories with their history,
//! the index outbox and idempotency records.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend, Statement};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Organizations {
    Table,
    Id,
    Name,
    CreatedAt,
}

#[derive(DeriveIden)]
enum Projects {
    Table,
    Id,
    OrganizationId,
    Name,
    CreatedAt,
}

#[derive(DeriveIden)]
enum ConsoleAccounts {
    Table,
    Id,
    OrganizationId,
    Email,
    PasswordHash,
    Role,
    CreatedAt,
}

#[derive(DeriveIden)]
enum ApiKeys {
    Table,
    Id,
    OrganizationId,
    ProjectId,
    PublicId,
    SecretHash,
    Label,
    CreatedAt,
    RevokedAt,
}

#[derive(DeriveIden)]
enum Memories {
    Table,
    Id,
    OrganizationId,
    ProjectId,
    UserId,
    AgentId,
    SessionId,
    Kind,
    Key,
    Content,
    Metadata,
    Categories,
    Source,
    Confidence,
    State,
    Version,
    CreatedAt,
    UpdatedAt,
    ValidFrom,
    ValidTo,
    ExpiresAt,
    EmbeddingModel,
    Embedding,
    ContentHash,
}

#[derive(DeriveIden)]
enum MemoryHistory {
    Table,
    Id,
    MemoryId,
    ProjectId,
    Version,
    Event,
    Content,
    Actor,
    Reason,
    At,
}

#[derive(DeriveIden)]
enum IndexOutbox {
    Table,
    Id,
    OrganizationId,
    ProjectId,
    MemoryId,
    CreatedAt,
    Attempts,
    LastError,
}

#[derive(DeriveIden)]
enum IdempotencyRecords {
    Table,
    ProjectId,
    IdempotencyKey,
    RequestFingerprint,
    ResponseStatus,
    ResponseBody,
    CreatedAt,
}

fn uuid_primary_key<T: IntoIden>(column: T) -> ColumnDef {
    ColumnDef::new(column)
        .uuid()
        .not_null()
        .primary_key()
        .to_owned()
}

fn timestamp<T: IntoIden>(column: T) -> ColumnDef {
    ColumnDef::new(column)
        .timestamp_with_time_zone()
        .not_null()
        .to_owned()
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Organizations::Table)
                    .col(uuid_primary_key(Organizations::Id))
                    .col(ColumnDef::new(Organizations::Name).string().not_null())
                    .col(timestamp(Organizations::CreatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(Projects::Table)
                    .col(uuid_primary_key(Projects::Id))
                    .col(ColumnDef::new(Projects::OrganizationId).uuid().not_null())
                    .col(ColumnDef::new(Projects::Name).string().not_null())
                    .col(timestamp(Projects::CreatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .from(Projects::Table, Projects::OrganizationId)
                            .to(Organizations::Table, Organizations::Id),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(ConsoleAccounts::Table)
                    .col(uuid_primary_key(ConsoleAccounts::Id))
                    .col(
                        ColumnDef::new(ConsoleAccounts::OrganizationId)
                            .uuid()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(ConsoleAccounts::Email)
                            .string()
                            .not_null()
                            .unique_key(),
                    )
                    .col(
                        ColumnDef::new(ConsoleAccounts::PasswordHash)
                            .string()
                            .not_null(),
                    )
                    .col(ColumnDef::new(ConsoleAccounts::Role).string().not_null())
                    .col(timestamp(ConsoleAccounts::CreatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .from(ConsoleAccounts::Table, ConsoleAccounts::OrganizationId)
                            .to(Organizations::Table, Organizations::Id),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(ApiKeys::Table)
                    .col(uuid_primary_key(ApiKeys::Id))
                    .col(ColumnDef::new(ApiKeys::OrganizationId).uuid().not_null())
                    .col(ColumnDef::new(ApiKeys::ProjectId).uuid().not_null())
                    .col(
                        ColumnDef::new(ApiKeys::PublicId)
                            .string()
                            .not_null()
                            .unique_key(),
                    )
                    .col(ColumnDef::new(ApiKeys::SecretHash).string().not_null())
                    .col(ColumnDef::new(ApiKeys::Label).string().not_null())
                    .col(timestamp(ApiKeys::CreatedAt))
                    .col(
                        ColumnDef::new(ApiKeys::RevokedAt)
                            .timestamp_with_time_zone()
                            .null(),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .from(ApiKeys::Table, ApiKeys::ProjectId)
                            .to(Projects::Table, Projects::Id),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(Memories::Table)
                    .col(uuid_primary_key(Memories::Id))
                    .col(ColumnDef::new(Memories::OrganizationId).uuid().not_null())
                    .col(ColumnDef::new(Memories::ProjectId).uuid().not_null())
                    .col(ColumnDef::new(Memories::UserId).string().null())
                    .col(ColumnDef::new(Memories::AgentId).string().null())
                    .col(ColumnDef::new(Memories::SessionId).string().null())
                    .col(ColumnDef::new(Memories::Kind).string().not_null())
                    .col(ColumnDef::new(Memories::Key).string().null())
                    .col(ColumnDef::new(Memories::Content).text().not_null())
                    .col(ColumnDef::new(Memories::Metadata).json().not_null())
                    .col(ColumnDef::new(Memories::Categories).json().not_null())
                    .col(ColumnDef::new(Memories::Source).string().not_null())
                    .col(ColumnDef::new(Memories::Confidence).double().not_null())
                    .col(ColumnDef::new(Memories::State).string().not_null())
                    .col(ColumnDef::new(Memories::Version).big_integer().not_null())
                    .col(timestamp(Memories::CreatedAt))
                    .col(timestamp(Memories::UpdatedAt))
                    .col(timestamp(Memories::ValidFrom))
                    .col(
                        ColumnDef::new(Memories::ValidTo)
                            .timestamp_with_time_zone()
                            .null(),
                    )
                    .col(
                        ColumnDef::new(Memories::ExpiresAt)
                            .timestamp_with_time_zone()
                            .null(),
                    )
                    .col(ColumnDef::new(Memories::EmbeddingModel).string().not_null())
                    .col(ColumnDef::new(Memories::Embedding).binary().not_null())
                    .col(ColumnDef::new(Memories::ContentHash).string().not_null())
                    .foreign_key(
                        ForeignKey::create()
                            .from(Memories::Table, Memories::ProjectId)
                            .to(Projects::Table, Projects::Id),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("memories_project_state_id")
                    .table(Memories::Table)
                    .col(Memories::ProjectId)
                    .col(Memories::State)
                    .col(Memories::Id)
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("memories_project_user")
                    .table(Memories::Table)
                    .col(Memories::ProjectId)
                    .col(Memories::UserId)
                    .to_owned(),
            )
            .await?;
        // At most one active memory per (project, user, agent, key): the database enforces the
        // supersede rule, so two concurrent writers of the same key cannot both win.
        let one_active_per_key = "CREATE UNIQUE INDEX memories_one_active_per_key ON memories \
             (project_id, COALESCE(user_id, ''), COALESCE(agent_id, ''), key) \
             WHERE state = 'active' AND key IS NOT NULL";
        let connection = manager.get_connection();
        let backend: DbBackend = manager.get_database_backend();
        connection
            .execute(Statement::from_string(backend, one_active_per_key))
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(MemoryHistory::Table)
                    .col(
                        ColumnDef::new(MemoryHistory::Id)
                            .big_integer()
                            .not_null()
                            .auto_increment()
                            .primary_key(),
                    )
                    .col(ColumnDef::new(MemoryHistory::MemoryId).uuid().not_null())
                    .col(ColumnDef::new(MemoryHistory::ProjectId).uuid().not_null())
                    .col(
                        ColumnDef::new(MemoryHistory::Version)
                            .big_integer()
                            .not_null(),
                    )
                    .col(ColumnDef::new(MemoryHistory::Event).string().not_null())
                    .col(ColumnDef::new(MemoryHistory::Content).text().null())
                    .col(ColumnDef::new(MemoryHistory::Actor).string().not_null())
                    .col(ColumnDef::new(MemoryHistory::Reason).text().null())
                    .col(timestamp(MemoryHistory::At))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("memory_history_memory")
                    .table(MemoryHistory::Table)
                    .col(MemoryHistory::MemoryId)
                    .col(MemoryHistory::Version)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(IndexOutbox::Table)
                    .col(
                        ColumnDef::new(IndexOutbox::Id)
                            .big_integer()
                            .not_null()
                            .auto_increment()
                            .primary_key(),
                    )
                    .col(
                        ColumnDef::new(IndexOutbox::OrganizationId)
                            .uuid()
                            .not_null(),
                    )
                    .col(ColumnDef::new(IndexOutbox::ProjectId).uuid().not_null())
                    .col(ColumnDef::new(IndexOutbox::MemoryId).uuid().not_null())
                    .col(timestamp(IndexOutbox::CreatedAt))
                    .col(
                        ColumnDef::new(IndexOutbox::Attempts)
                            .integer()
                            .not_null()
                            .default(0),
                    )
                    .col(ColumnDef::new(IndexOutbox::LastError).text().null())
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(IdempotencyRecords::Table)
                    .col(
                        ColumnDef::new(IdempotencyRecords::ProjectId)
                            .uuid()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(IdempotencyRecords::IdempotencyKey)
                            .string()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(IdempotencyRecords::RequestFingerprint)
                            .string()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(IdempotencyRecords::ResponseStatus)
                            .integer()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(IdempotencyRecords::ResponseBody)
                            .text()
                            .not_null(),
                    )
                    .col(timestamp(IdempotencyRecords::CreatedAt))
                    .primary_key(
                        Index::create()
                            .col(IdempotencyRecords::ProjectId)
                            .col(IdempotencyRecords::IdempotencyKey),
                    )
                    .to_owned(),
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in [
            IdempotencyRecords::Table.into_iden(),
            IndexOutbox::Table.into_iden(),
            MemoryHistory::Table.into_iden(),
            Memories::Table.into_iden(),
            ApiKeys::Table.into_iden(),
            ConsoleAccounts::Table.into_iden(),
            Projects::Table.into_iden(),
            Organizations::Table.into_iden(),
        ] {
            manager
                .drop_table(Table::drop().table(table).to_owned())
                .await?;
        }
        Ok(())
    }
}
