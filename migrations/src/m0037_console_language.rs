//! The language the console speaks to each account (`en` or `zh`; none: the browser's
//! `Accept-Language` decides), chosen in the console's top bar.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum ConsoleAccounts {
    Table,
    Language,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(ConsoleAccounts::Table)
                    .add_column(ColumnDef::new(ConsoleAccounts::Language).string().null())
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(ConsoleAccounts::Table)
                    .drop_column(ConsoleAccounts::Language)
                    .to_owned(),
            )
            .await
    }
}
