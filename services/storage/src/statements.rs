//! Closed monthly statements, stored once and read back as stored: a project's under its
//! scope, an organization's under its id. Only an erasure rewrites one (the end-user's id).

use crate::entities::statement_snapshots;
use crate::{Storage, StorageError};
use chrono::{DateTime, Utc};
use engram_core::statements::Statement;
use engram_core::usage::BillingMonth;
use engram_core::{OrganizationId, ProjectScope};
use sea_orm::{ActiveValue::Set, ColumnTrait, EntityTrait, QueryFilter};

/// The `statement_of` of an organization's own statement.
const ORGANIZATION: &str = "organization";

/// Whose statement: one project's, or its organization's.
#[derive(Clone, Copy, Debug)]
pub enum StatementOf<'a> {
    Project(&'a ProjectScope),
    Organization(OrganizationId),
}

impl StatementOf<'_> {
    fn organization_id(&self) -> OrganizationId {
        match self {
            StatementOf::Project(scope) => scope.organization_id(),
            StatementOf::Organization(id) => *id,
        }
    }

    fn key(&self) -> String {
        match self {
            StatementOf::Project(scope) => scope.project_id().to_string(),
            StatementOf::Organization(_) => ORGANIZATION.to_string(),
        }
    }
}

impl Storage {
    /// The stored statement of `month`, if the month was closed.
    pub async fn stored_statement(
        &self,
        of: StatementOf<'_>,
        month: BillingMonth,
    ) -> Result<Option<Statement>, StorageError> {
        let row = statement_snapshots::Entity::find()
            .filter(statement_snapshots::Column::OrganizationId.eq(of.organization_id().as_uuid()))
            .filter(statement_snapshots::Column::StatementOf.eq(of.key()))
            .filter(statement_snapshots::Column::Month.eq(month.label()))
            .one(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        row.map(|row| parse_body(&row.body)).transpose()
    }

    /// Store a closed month's statement; when another process stored it first, theirs is
    /// kept and returned (a statement is written once).
    pub async fn store_statement(
        &self,
        of: StatementOf<'_>,
        month: BillingMonth,
        statement: &Statement,
        closed_at: DateTime<Utc>,
    ) -> Result<Statement, StorageError> {
        let body = serde_json::to_string(statement)
            .map_err(|error| StorageError::Internal(format!("statement: {error}")))?;
        let inserted = {
            let _permit = self.write_permit().await;
            statement_snapshots::Entity::insert(statement_snapshots::ActiveModel {
                id: Set(uuid::Uuid::now_v7()),
                organization_id: Set(of.organization_id().as_uuid()),
                project_id: Set(match of {
                    StatementOf::Project(scope) => Some(scope.project_id().as_uuid()),
                    StatementOf::Organization(_) => None,
                }),
                statement_of: Set(of.key()),
                month: Set(month.label()),
                body: Set(body),
                closed_at: Set(closed_at),
            })
            .exec_without_returning(&self.connection)
            .await
        };
        match inserted {
            Ok(_) => Ok(statement.clone()),
            Err(error) if crate::error::is_unique_violation(&error) => self
                .stored_statement(of, month)
                .await?
                .ok_or_else(|| StorageError::Internal("statement vanished".to_string())),
            Err(error) => Err(StorageError::from_db(error)),
        }
    }

    /// Replace a stored statement by `statement`: only to put an erased end-user's digest
    /// where an erasure that ran while it was computed left their id (the figures are the
    /// same). `NotFound` when none is stored.
    pub async fn replace_stored_statement(
        &self,
        of: StatementOf<'_>,
        month: BillingMonth,
        statement: &Statement,
    ) -> Result<(), StorageError> {
        let body = serde_json::to_string(statement)
            .map_err(|error| StorageError::Internal(format!("statement: {error}")))?;
        let _permit = self.write_permit().await;
        let replaced = statement_snapshots::Entity::update_many()
            .col_expr(
                statement_snapshots::Column::Body,
                sea_orm::sea_query::Expr::value(body),
            )
            .filter(statement_snapshots::Column::OrganizationId.eq(of.organization_id().as_uuid()))
            .filter(statement_snapshots::Column::StatementOf.eq(of.key()))
            .filter(statement_snapshots::Column::Month.eq(month.label()))
            .exec(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        if replaced.rows_affected == 0 {
            return Err(StorageError::NotFound(engram_core::NotFoundKind::Statement));
        }
        Ok(())
    }

    /// The stored statements of the project and of its organization that name `user_id`
    /// as an end-user of the project.
    pub(crate) async fn statements_naming(
        &self,
        connection: &impl sea_orm::ConnectionTrait,
        scope: &ProjectScope,
        user_id: &str,
    ) -> Result<Vec<(statement_snapshots::Model, Statement)>, StorageError> {
        let project_id = scope.project_id().to_string();
        let rows = statement_snapshots::Entity::find()
            .filter(
                statement_snapshots::Column::OrganizationId.eq(scope.organization_id().as_uuid()),
            )
            .filter(
                statement_snapshots::Column::StatementOf
                    .is_in([project_id.clone(), ORGANIZATION.to_string()]),
            )
            .all(connection)
            .await
            .map_err(StorageError::from_db)?;
        let mut naming = Vec::new();
        for row in rows {
            let statement = parse_body(&row.body)?;
            if statement.names_end_user(&project_id, user_id) {
                naming.push((row, statement));
            }
        }
        Ok(naming)
    }

    /// Replace `user_id` by the subject digest in every stored statement naming it, inside
    /// the erasure's transaction. Returns the statements changed.
    pub(crate) async fn pseudonymize_statements(
        &self,
        transaction: &impl sea_orm::ConnectionTrait,
        scope: &ProjectScope,
        user_id: &str,
        subject_digest: &str,
    ) -> Result<u64, StorageError> {
        let project_id = scope.project_id().to_string();
        let naming = self.statements_naming(transaction, scope, user_id).await?;
        let changed = naming.len() as u64;
        for (row, mut statement) in naming {
            statement.pseudonymize_end_user(&project_id, user_id, subject_digest);
            let body = serde_json::to_string(&statement)
                .map_err(|error| StorageError::Internal(format!("statement: {error}")))?;
            statement_snapshots::Entity::update_many()
                .col_expr(
                    statement_snapshots::Column::Body,
                    sea_orm::sea_query::Expr::value(body),
                )
                .filter(statement_snapshots::Column::Id.eq(row.id))
                .exec(transaction)
                .await
                .map_err(StorageError::from_db)?;
        }
        Ok(changed)
    }
}

fn parse_body(body: &str) -> Result<Statement, StorageError> {
    serde_json::from_str(body)
        .map_err(|error| StorageError::Internal(format!("stored statement: {error}")))
}
