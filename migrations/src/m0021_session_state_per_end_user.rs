//! Session state per end-user: the same session id and key name one value per end-user (and
//! one for no end-user), so two end-users who share a session id never read or overwrite each
//! other's values. The key gains `owner` (the end-user id, or '' for none); rows written
//! before keep their stored user_id as their owner. SQLite cannot change a primary key, so
//! the table is rebuilt (on PostgreSQL too: one path for both).

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden, Clone, Copy)]
enum SessionState {
    Table,
    OrganizationId,
    ProjectId,
    SessionId,
    Owner,
    Key,
    Value,
    Version,
    UserId,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum SessionStateRebuilt {
    Table,
}

fn table_with_key(name: impl IntoIden + 'static, with_owner: bool) -> TableCreateStatement {
    let mut table = Table::create();
    table
        .table(name)
        .col(
            ColumnDef::new(SessionState::OrganizationId)
                .uuid()
                .not_null(),
        )
        .col(ColumnDef::new(SessionState::ProjectId).uuid().not_null())
        .col(
            ColumnDef::new(SessionState::SessionId)
                .string_len(255)
                .not_null(),
        );
    if with_owner {
        table.col(
            ColumnDef::new(SessionState::Owner)
                .string_len(255)
                .not_null()
                .default(""),
        );
    }
    table
        .col(ColumnDef::new(SessionState::Key).string_len(255).not_null())
        .col(ColumnDef::new(SessionState::Value).json().not_null())
        .col(
            ColumnDef::new(SessionState::Version)
                .big_integer()
                .not_null(),
        )
        .col(ColumnDef::new(SessionState::UserId).string_len(255).null())
        .col(
            ColumnDef::new(SessionState::CreatedAt)
                .timestamp_with_time_zone()
                .not_null(),
        )
        .col(
            ColumnDef::new(SessionState::UpdatedAt)
                .timestamp_with_time_zone()
                .not_null(),
        );
    let mut key = Index::create();
    key.col(SessionState::ProjectId)
        .col(SessionState::SessionId);
    if with_owner {
        key.col(SessionState::Owner);
    }
    key.col(SessionState::Key);
    table.primary_key(&mut key);
    table.to_owned()
}

const SHARED_COLUMNS: [SessionState; 9] = [
    SessionState::OrganizationId,
    SessionState::ProjectId,
    SessionState::SessionId,
    SessionState::Key,
    SessionState::Value,
    SessionState::Version,
    SessionState::UserId,
    SessionState::CreatedAt,
    SessionState::UpdatedAt,
];

/// Runs `statements` in one transaction on one connection: a pooled SQLite connection other
/// than the one that dropped the old table would still see it in its cached schema and refuse
/// the rename, and a rebuild half done must not stay behind.
async fn in_one_transaction(
    manager: &SchemaManager<'_>,
    statements: Vec<sea_orm_migration::sea_orm::Statement>,
) -> Result<(), DbErr> {
    use sea_orm_migration::sea_orm::{ConnectionTrait, TransactionTrait};
    let transaction = manager.get_connection().begin().await?;
    for statement in statements {
        transaction.execute(statement).await?;
    }
    transaction.commit().await
}

fn by_user_index() -> IndexCreateStatement {
    Index::create()
        .name("session_state_by_user")
        .table(SessionState::Table)
        .col(SessionState::ProjectId)
        .col(SessionState::UserId)
        .to_owned()
}

fn swap_in_rebuilt_table(
    backend: sea_orm_migration::sea_orm::DatabaseBackend,
    fill: InsertStatement,
) -> Vec<sea_orm_migration::sea_orm::Statement> {
    vec![
        backend.build(&fill),
        backend.build(&Table::drop().table(SessionState::Table).to_owned()),
        backend.build(
            &Table::rename()
                .table(SessionStateRebuilt::Table, SessionState::Table)
                .to_owned(),
        ),
        backend.build(&by_user_index()),
    ]
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let backend = manager.get_database_backend();
        let mut columns: Vec<SessionState> = SHARED_COLUMNS.to_vec();
        columns.push(SessionState::Owner);
        let owner_of_row: SimpleExpr = Func::coalesce([
            SimpleExpr::from(Expr::col(SessionState::UserId)),
            SimpleExpr::from(Expr::val("")),
        ])
        .into();
        let select = Query::select()
            .columns(SHARED_COLUMNS)
            .from(SessionState::Table)
            .expr(owner_of_row)
            .to_owned();
        let fill = Query::insert()
            .into_table(SessionStateRebuilt::Table)
            .columns(columns)
            .select_from(select)
            .map_err(|error| DbErr::Migration(error.to_string()))?
            .to_owned();
        let mut statements = vec![backend.build(&table_with_key(SessionStateRebuilt::Table, true))];
        statements.extend(swap_in_rebuilt_table(backend, fill));
        in_one_transaction(manager, statements).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // Values of several owners under one session and key cannot all survive the old
        // key: the newest is kept.
        let backend = manager.get_database_backend();
        let select = Query::select()
            .columns(SHARED_COLUMNS)
            .from(SessionState::Table)
            .order_by(SessionState::UpdatedAt, Order::Desc)
            .to_owned();
        let fill = Query::insert()
            .into_table(SessionStateRebuilt::Table)
            .columns(SHARED_COLUMNS)
            .select_from(select)
            .map_err(|error| DbErr::Migration(error.to_string()))?
            .on_conflict(
                OnConflict::columns([
                    SessionState::ProjectId,
                    SessionState::SessionId,
                    SessionState::Key,
                ])
                .do_nothing()
                .to_owned(),
            )
            .to_owned();
        let mut statements =
            vec![backend.build(&table_with_key(SessionStateRebuilt::Table, false))];
        statements.extend(swap_in_rebuilt_table(backend, fill));
        in_one_transaction(manager, statements).await
    }
}
