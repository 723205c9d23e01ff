//! The one place storage turns a scope into SQL conditions: a project's rows, and an
//! end-user token's own rows within it. A new restriction of the scope changes these lines.

use crate::entities::*;
use engram_core::{MemoryScope, ProjectScope};
use sea_orm::{ColumnTrait, Condition, EntityTrait};

/// A table whose rows belong to one project.
pub(crate) trait Tenanted: EntityTrait {
    fn project_column() -> Self::Column;
}

/// A table whose rows may belong to one end-user of the project (`user_id`).
pub(crate) trait EndUserOwned: Tenanted {
    fn end_user_column() -> Self::Column;
}

/// The rows of `scope`'s project.
pub(crate) fn in_project<E: Tenanted>(scope: &ProjectScope) -> Condition {
    Condition::all().add(E::project_column().eq(scope.project_id().as_uuid()))
}

/// The rows `scope` may see: its project's, and for a scope confined to an end-user (an
/// end-user token) only that end-user's.
pub(crate) fn within<E: EndUserOwned>(scope: &MemoryScope) -> Condition {
    in_project::<E>(scope.project()).add_option(
        scope
            .end_user()
            .map(|end_user| E::end_user_column().eq(end_user.as_str())),
    )
}

macro_rules! tenanted {
    ($($table:ident),* $(,)?) => {
        $(impl Tenanted for $table::Entity {
            fn project_column() -> Self::Column {
                $table::Column::ProjectId
            }
        })*
    };
}

macro_rules! end_user_owned {
    ($($table:ident),* $(,)?) => {
        $(impl EndUserOwned for $table::Entity {
            fn end_user_column() -> Self::Column {
                $table::Column::UserId
            }
        })*
    };
}

tenanted!(
    agent_runs,
    api_keys,
    audit_events,
    budget_alerts,
    erasure_ledger,
    eval_cases,
    eval_runs,
    eval_sets,
    feedback,
    files,
    idempotency_answer_memories,
    idempotency_records,
    index_outbox,
    llm_calls,
    memories,
    memory_history,
    memory_tombstones,
    memory_uses,
    recall_events,
    retrieval_profiles,
    run_steps,
    session_messages,
    session_state,
    tasks,
    usage_daily,
    usage_hourly,
);

end_user_owned!(
    agent_runs,
    eval_cases,
    feedback,
    files,
    idempotency_answer_memories,
    memories,
    memory_uses,
    recall_events,
    run_steps,
    session_messages,
    session_state,
);

/// The project row itself.
impl Tenanted for projects::Entity {
    fn project_column() -> Self::Column {
        projects::Column::Id
    }
}
