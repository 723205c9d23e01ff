//! Console invitations: an owner or admin invites an e-mail address with a role; the invitee
//! follows a one-time link (its token stored only as a SHA-256) and chooses a password.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum ConsoleInvitations {
    Table,
    Id,
    OrganizationId,
    Email,
    Role,
    TokenHash,
    InvitedBy,
    CreatedAt,
    ExpiresAt,
    AcceptedAt,
    RevokedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(ConsoleInvitations::Table)
                    .if_not_exists()
                    .col(
                        ColumnDef::new(ConsoleInvitations::Id)
                            .uuid()
                            .not_null()
                            .primary_key(),
                    )
                    .col(
                        ColumnDef::new(ConsoleInvitations::OrganizationId)
                            .uuid()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(ConsoleInvitations::Email)
                            .string_len(320)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(ConsoleInvitations::Role)
                            .string_len(32)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(ConsoleInvitations::TokenHash)
                            .string_len(64)
                            .not_null()
                            .unique_key(),
                    )
                    .col(
                        ColumnDef::new(ConsoleInvitations::InvitedBy)
                            .uuid()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(ConsoleInvitations::CreatedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(ConsoleInvitations::ExpiresAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(ConsoleInvitations::AcceptedAt)
                            .timestamp_with_time_zone()
                            .null(),
                    )
                    .col(
                        ColumnDef::new(ConsoleInvitations::RevokedAt)
                            .timestamp_with_time_zone()
                            .null(),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("console_invitations_organization")
                    .table(ConsoleInvitations::Table)
                    .col(ConsoleInvitations::OrganizationId)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(ConsoleInvitations::Table).to_owned())
            .await
    }
}
