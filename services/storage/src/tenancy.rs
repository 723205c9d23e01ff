//! The one place storage turns a scope into SQL conditions: a project's rows, an end-user
//! token's own rows within it, and an agent-bound credential's agents' rows and what is
//! shared with them. A new restriction of the scope changes these lines.

use crate::entities::*;
use engram_core::{AgentRestriction, MemoryScope, ProjectScope, Visibility};
use sea_orm::sea_query::Query;
use sea_orm::{ColumnTrait, Condition, EntityTrait};

/// A table whose rows belong to one project.
pub(crate) trait Tenanted: EntityTrait {
    fn project_column() -> Self::Column;
}

/// A table whose rows may belong to one end-user of the project (`user_id`) and be seen by
/// some of its agents only.
pub(crate) trait EndUserOwned: Tenanted {
    fn end_user_column() -> Self::Column;

    /// The rows a credential bound to `agents` may see.
    fn seen_by_agents(agents: &AgentRestriction) -> Condition;
}

/// The rows of `scope`'s project.
pub(crate) fn in_project<E: Tenanted>(scope: &ProjectScope) -> Condition {
    Condition::all().add(E::project_column().eq(scope.project_id().as_uuid()))
}

/// The rows `scope` may see: its project's, for a scope confined to an end-user (an
/// end-user token) only that end-user's, and for a scope bound to agents only theirs and
/// what is shared with them.
pub(crate) fn within<E: EndUserOwned>(scope: &MemoryScope) -> Condition {
    in_project::<E>(scope.project())
        .add_option(
            scope
                .end_user()
                .map(|end_user| E::end_user_column().eq(end_user.as_str())),
        )
        .add_option(scope.agents().map(E::seen_by_agents))
}

/// The rows of `scope`'s agents, for the tables of end-user data that storage reads by
/// project and end-user by hand (the end-user confinement applied with `owner_within`): every
/// row when the scope is bound to no agent.
pub(crate) fn seen_by_agents_of<E: EndUserOwned>(scope: &MemoryScope) -> Condition {
    Condition::all().add_option(scope.agents().map(E::seen_by_agents))
}

fn agent_ids(agents: &AgentRestriction) -> Vec<String> {
    agents
        .agents()
        .iter()
        .map(|agent| agent.as_str().to_string())
        .collect()
}

/// A row of one of `agents`, or (unless the scope is for changes) of no agent: the
/// project's own, which every agent reads.
fn agent_or_none<C: ColumnTrait>(agent_column: C, agents: &AgentRestriction) -> Condition {
    Condition::any()
        .add(agent_column.is_in(agent_ids(agents)))
        .add_option(agents.with_shared().then(|| agent_column.is_null()))
}

/// A memory of one of `agents`, or (unless the scope is for changes) one shared with every
/// agent or with a team of one of them.
fn memory_seen_by(agents: &AgentRestriction) -> Condition {
    let shared_with_them = || {
        Condition::all()
            .add(memories::Column::Visibility.eq(Visibility::Shared.as_str()))
            .add(
                Condition::any()
                    .add(memories::Column::SharedWith.is_null())
                    .add(memories::Column::SharedWith.is_in(agents.teams().to_vec())),
            )
    };
    Condition::any()
        .add(memories::Column::AgentId.is_in(agent_ids(agents)))
        .add_option(agents.with_shared().then(shared_with_them))
}

/// Rows about a memory (`memory_column`) that `agents` may see.
fn about_memory_seen_by<C: ColumnTrait>(memory_column: C, agents: &AgentRestriction) -> Condition {
    Condition::all().add(
        memory_column.in_subquery(
            Query::select()
                .column(memories::Column::Id)
                .from(memories::Entity)
                .cond_where(memory_seen_by(agents))
                .to_owned(),
        ),
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

/// `$table` keeps its end-user in `user_id`, and `$agents` says which rows an agent-bound
/// credential sees.
macro_rules! end_user_owned {
    ($($table:ident => $agents:expr),* $(,)?) => {
        $(impl EndUserOwned for $table::Entity {
            fn end_user_column() -> Self::Column {
                $table::Column::UserId
            }

            fn seen_by_agents(agents: &AgentRestriction) -> Condition {
                let rule: fn(&AgentRestriction) -> Condition = $agents;
                rule(agents)
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
    memory_reembeddings,
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
    agent_runs => |agents| agent_or_none(agent_runs::Column::AgentId, agents),
    eval_cases => |agents| agent_or_none(eval_cases::Column::AgentId, agents),
    feedback => |agents| agent_or_none(feedback::Column::AgentId, agents),
    files => |agents| agent_or_none(files::Column::AgentId, agents),
    idempotency_answer_memories => |agents| {
        about_memory_seen_by(idempotency_answer_memories::Column::MemoryId, agents)
    },
    memories => memory_seen_by,
    memory_uses => |agents| about_memory_seen_by(memory_uses::Column::MemoryId, agents),
    recall_events => |agents| agent_or_none(recall_events::Column::AgentId, agents),
    // A run's steps are seen with their run.
    run_steps => |agents| {
        Condition::all().add(
            run_steps::Column::RunId.in_subquery(
                Query::select()
                    .column(agent_runs::Column::Id)
                    .from(agent_runs::Entity)
                    .cond_where(agent_or_none(agent_runs::Column::AgentId, agents))
                    .to_owned(),
            ),
        )
    },
    session_messages => |agents| agent_or_none(session_messages::Column::AgentId, agents),
    session_state => |agents| agent_or_none(session_state::Column::AgentId, agents),
);

/// The project row itself.
impl Tenanted for projects::Entity {
    fn project_column() -> Self::Column {
        projects::Column::Id
    }
}
