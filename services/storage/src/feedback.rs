//! Feedback on recalled memories: a rating (`relevant`, `not_relevant`, `wrong`) with an
//! optional text, for one memory and/or one recall, and the correction it led to; removed
//! with the end-user the memory belongs to.

use crate::entities::feedback;
use crate::{Storage, StorageError};
use chrono::Utc;
use engram_core::MemoryScope;
pub use engram_core::feedback::FeedbackRecord;
use engram_core::{MemoryId, ProjectScope};
use sea_orm::{
    ActiveValue::Set, ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder,
};
use uuid::Uuid;

/// Feedback to store.
#[derive(Clone, Debug, PartialEq)]
pub struct NewFeedback {
    pub memory_id: Option<MemoryId>,
    pub recall_id: Option<Uuid>,
    /// The end-user of the memory (subject erasure removes the feedback with it).
    pub user_id: Option<String>,
    pub rating: String,
    pub text: Option<String>,
    pub credential: String,
    /// What the feedback changed (a correction applied by the LLM), if anything.
    pub correction: Option<serde_json::Value>,
    /// The agent it came from: a credential bound to agents gives feedback as one of them.
    pub agent_id: Option<String>,
}

pub(crate) fn record(model: feedback::Model) -> FeedbackRecord {
    FeedbackRecord {
        id: model.id,
        memory_id: model.memory_id.map(MemoryId::from_uuid),
        recall_id: model.recall_id,
        user_id: model.user_id,
        rating: model.rating,
        text: model.text,
        correction: model.correction,
        created_at: model.created_at,
    }
}

fn feedback_of(scope: &ProjectScope) -> sea_orm::Select<feedback::Entity> {
    feedback::Entity::find().filter(crate::tenancy::in_project::<feedback::Entity>(scope))
}

impl Storage {
    pub async fn record_feedback(
        &self,
        scope: &ProjectScope,
        new_feedback: NewFeedback,
    ) -> Result<FeedbackRecord, StorageError> {
        let _permit = self.write_permit().await;
        let model = feedback::ActiveModel {
            id: Set(Uuid::now_v7()),
            organization_id: Set(scope.organization_id().as_uuid()),
            project_id: Set(scope.project_id().as_uuid()),
            memory_id: Set(new_feedback.memory_id.map(|id| id.as_uuid())),
            recall_id: Set(new_feedback.recall_id),
            user_id: Set(new_feedback.user_id),
            rating: Set(new_feedback.rating),
            text: Set(new_feedback.text),
            credential: Set(new_feedback.credential),
            correction: Set(new_feedback.correction),
            created_at: Set(Utc::now()),
            agent_id: Set(new_feedback.agent_id),
        };
        let inserted = feedback::Entity::insert(model)
            .exec_with_returning(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(record(inserted))
    }

    /// Feedback on one memory, oldest first.
    pub async fn feedback_on_memory(
        &self,
        memory_scope: &MemoryScope,
        memory_id: MemoryId,
    ) -> Result<Vec<FeedbackRecord>, StorageError> {
        Ok(feedback_of(memory_scope.project())
            .filter(crate::tenancy::within::<feedback::Entity>(memory_scope))
            .filter(feedback::Column::MemoryId.eq(memory_id.as_uuid()))
            .order_by_asc(feedback::Column::Id)
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?
            .into_iter()
            .map(record)
            .collect())
    }

    /// Feedback on one recall, oldest first.
    pub async fn feedback_on_recall(
        &self,
        memory_scope: &MemoryScope,
        recall_id: Uuid,
    ) -> Result<Vec<FeedbackRecord>, StorageError> {
        let mut query = feedback_of(memory_scope.project());
        query = query.filter(crate::tenancy::within::<feedback::Entity>(memory_scope));
        Ok(query
            .filter(feedback::Column::RecallId.eq(recall_id))
            .order_by_asc(feedback::Column::Id)
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?
            .into_iter()
            .map(record)
            .collect())
    }

    /// Every feedback of an end-user in the project, oldest first (subject export).
    pub async fn feedback_of_subject(
        &self,
        scope: &ProjectScope,
        user_id: &str,
    ) -> Result<Vec<FeedbackRecord>, StorageError> {
        Ok(feedback_of(scope)
            .filter(feedback::Column::UserId.eq(user_id))
            .order_by_asc(feedback::Column::Id)
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?
            .into_iter()
            .map(record)
            .collect())
    }

    /// Remove the feedback on an end-user's memories (subject erasure).
    pub async fn delete_feedback_of_subject(
        &self,
        scope: &ProjectScope,
        user_id: &str,
    ) -> Result<u64, StorageError> {
        let _permit = self.write_permit().await;
        let deleted = feedback::Entity::delete_many()
            .filter(crate::tenancy::in_project::<feedback::Entity>(scope))
            .filter(feedback::Column::UserId.eq(user_id))
            .exec(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(deleted.rows_affected)
    }

    /// Feedback of an end-user still stored (erasure verification).
    pub async fn count_feedback_of_subject(
        &self,
        scope: &ProjectScope,
        user_id: &str,
    ) -> Result<u64, StorageError> {
        feedback_of(scope)
            .filter(feedback::Column::UserId.eq(user_id))
            .count(&self.connection)
            .await
            .map_err(StorageError::from_db)
    }
}
