//! Usage by who: daily counters per credential, channel, end-user and agent beside the
//! hourly per-credential ones, the default price book's mark, and recall events' channel.
//! Hourly usage written before keeps its figures; it is copied into the daily counters with
//! nothing attributed, so a breakdown of an old period still adds up to its totals.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum UsageDaily {
    Table,
    OrganizationId,
    ProjectId,
    Day,
    Unit,
    Credential,
    Channel,
    EndUser,
    EndUserErased,
    AgentId,
    Quantity,
}

#[derive(DeriveIden)]
enum UsageHourly {
    Table,
    OrganizationId,
    ProjectId,
    HourStart,
    Unit,
    Credential,
    Quantity,
}

#[derive(DeriveIden)]
enum PriceBook {
    Table,
    IsDefault,
}

#[derive(DeriveIden)]
enum RecallEvents {
    Table,
    Channel,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // Absent dimensions are empty strings, not NULL: NULLs never collide in a primary
        // key, and each counter must be one row.
        let text = |column: UsageDaily, length: u32| {
            ColumnDef::new(column)
                .string_len(length)
                .not_null()
                .default("")
                .to_owned()
        };
        manager
            .create_table(
                Table::create()
                    .table(UsageDaily::Table)
                    .if_not_exists()
                    .col(ColumnDef::new(UsageDaily::OrganizationId).uuid().not_null())
                    .col(ColumnDef::new(UsageDaily::ProjectId).uuid().not_null())
                    // The day's first instant (rows copied from hourly counters keep their
                    // hour: readers group by the day it falls in).
                    .col(
                        ColumnDef::new(UsageDaily::Day)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .col(ColumnDef::new(UsageDaily::Unit).string_len(32).not_null())
                    .col(
                        ColumnDef::new(UsageDaily::Credential)
                            .string_len(64)
                            .not_null(),
                    )
                    .col(text(UsageDaily::Channel, 16))
                    // The raw end-user id, until erasure replaces it by the subject digest.
                    .col(text(UsageDaily::EndUser, 255))
                    .col(
                        ColumnDef::new(UsageDaily::EndUserErased)
                            .boolean()
                            .not_null()
                            .default(false),
                    )
                    .col(text(UsageDaily::AgentId, 255))
                    .col(
                        ColumnDef::new(UsageDaily::Quantity)
                            .big_integer()
                            .not_null()
                            .default(0),
                    )
                    .primary_key(
                        Index::create()
                            .col(UsageDaily::ProjectId)
                            .col(UsageDaily::Day)
                            .col(UsageDaily::Unit)
                            .col(UsageDaily::Credential)
                            .col(UsageDaily::Channel)
                            .col(UsageDaily::EndUser)
                            .col(UsageDaily::EndUserErased)
                            .col(UsageDaily::AgentId),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .if_not_exists()
                    .name("usage_daily_by_end_user")
                    .table(UsageDaily::Table)
                    .col(UsageDaily::ProjectId)
                    .col(UsageDaily::EndUser)
                    .to_owned(),
            )
            .await?;
        manager
            .exec_stmt(
                Query::insert()
                    .into_table(UsageDaily::Table)
                    .columns([
                        UsageDaily::OrganizationId,
                        UsageDaily::ProjectId,
                        UsageDaily::Day,
                        UsageDaily::Unit,
                        UsageDaily::Credential,
                        UsageDaily::Quantity,
                    ])
                    .select_from(
                        Query::select()
                            .columns([
                                UsageHourly::OrganizationId,
                                UsageHourly::ProjectId,
                                UsageHourly::HourStart,
                                UsageHourly::Unit,
                                UsageHourly::Credential,
                                UsageHourly::Quantity,
                            ])
                            .from(UsageHourly::Table)
                            .to_owned(),
                    )
                    .map_err(|error| DbErr::Migration(error.to_string()))?
                    .to_owned(),
            )
            .await?;
        // Engram's own work is the `job` channel, as the counters written from now on name
        // it: the day's memory-days sample must stay one counter when it is sampled again.
        manager
            .exec_stmt(
                Query::update()
                    .table(UsageDaily::Table)
                    .value(UsageDaily::Channel, "job")
                    .and_where(Expr::col(UsageDaily::Credential).is_in([
                        "storage",
                        "consolidation",
                        "system:evaluation",
                    ]))
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(PriceBook::Table)
                    .add_column(
                        ColumnDef::new(PriceBook::IsDefault)
                            .boolean()
                            .not_null()
                            .default(false),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(RecallEvents::Table)
                    .add_column(ColumnDef::new(RecallEvents::Channel).string_len(16).null())
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(RecallEvents::Table)
                    .drop_column(RecallEvents::Channel)
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(PriceBook::Table)
                    .drop_column(PriceBook::IsDefault)
                    .to_owned(),
            )
            .await?;
        manager
            .drop_table(Table::drop().table(UsageDaily::Table).to_owned())
            .await
    }
}
