//! Bounded memory per subject: the most live memories an end-user or an agent may hold in a
//! project, what happens to a write that would pass it, and the importance score eviction ranks by.

use crate::FieldError;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

text_enum!(
    /// What a write that would take a subject past its limit does: `refuse` it
    /// (`409 memory-limit-reached`, nothing stored), or make room by deleting the subject's
    /// oldest memories (by creation) or its least important ones ([`importance`]).
    MemoryLimitPolicy {
        Refuse => "refuse",
        EvictOldest => "evict_oldest",
        EvictLeastImportant => "evict_least_important",
    }
);

/// The memory limits of a project, set with its other limits (`PUT /v1/project/limits`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryLimits {
    /// Most live memories of one end-user (all agents together).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_end_user: Option<u32>,
    /// Most live memories of one agent (all end-users together).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_agent: Option<u32>,
    pub policy: MemoryLimitPolicy,
    /// Who set the limits (an actor label, `api_key:<id>`): evictions are deletes by this
    /// policy, authorised by its setter, and audited in its name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_by: Option<String>,
}

/// Highest per-subject limit: evicting the least important memories scores every memory of
/// the subject at each write past the limit.
pub const MAX_MEMORIES_PER_SUBJECT: u32 = 100_000;

impl MemoryLimits {
    /// What is wrong with these limits, one error per field as the API names it.
    pub fn limit_errors(&self) -> Vec<FieldError> {
        let mut errors = Vec::new();
        for (field, limit) in [
            ("memory_limits.per_end_user", self.per_end_user),
            ("memory_limits.per_agent", self.per_agent),
        ] {
            if let Some(limit) = limit
                && !(1..=MAX_MEMORIES_PER_SUBJECT).contains(&limit)
            {
                errors.push(FieldError::new(
                    field,
                    format!("must be between 1 and {MAX_MEMORIES_PER_SUBJECT}"),
                ));
            }
        }
        errors
    }

    /// The limit for one kind of subject.
    pub fn of(&self, subject: &LimitedSubject) -> Option<u32> {
        match subject {
            LimitedSubject::EndUser(_) => self.per_end_user,
            LimitedSubject::Agent(_) => self.per_agent,
        }
    }
}

/// Whose memories a limit counts.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LimitedSubject {
    EndUser(String),
    Agent(String),
}

impl LimitedSubject {
    /// The limit's name as the API spells it.
    pub fn limit_name(&self) -> &'static str {
        match self {
            LimitedSubject::EndUser(_) => "memory_limits.per_end_user",
            LimitedSubject::Agent(_) => "memory_limits.per_agent",
        }
    }

    /// `end-user "alice"` / `agent "support"`, for messages.
    pub fn describe(&self) -> String {
        match self {
            LimitedSubject::EndUser(id) => format!("end-user {id:?}"),
            LimitedSubject::Agent(id) => format!("agent {id:?}"),
        }
    }

    /// The subjects a memory of `user_id` and `agent_id` counts against.
    pub fn of_memory(user_id: Option<&str>, agent_id: Option<&str>) -> Vec<LimitedSubject> {
        let mut subjects = Vec::new();
        if let Some(user_id) = user_id {
            subjects.push(LimitedSubject::EndUser(user_id.to_string()));
        }
        if let Some(agent_id) = agent_id {
            subjects.push(LimitedSubject::Agent(agent_id.to_string()));
        }
        subjects
    }
}

/// What the least-important eviction knows of one memory.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ImportanceSignals {
    /// The later of its last write and its last recall.
    pub last_active_at: DateTime<Utc>,
    /// Times a search, context or run returned it (the memory→recall link).
    pub recalls: u64,
    /// `relevant` ratings of it.
    pub rated_relevant: u64,
    /// `not_relevant` and `wrong` ratings of it.
    pub rated_unhelpful: u64,
}

/// Days idle after which a memory's recency has fallen to 1/e (0.37).
pub const IMPORTANCE_RECENCY_DAYS: f64 = 30.0;

/// How much a memory matters to its subject, for `evict_least_important`:
///
/// `exp(-idle_days / 30) + ln(1 + recalls) + relevant − unhelpful`
///
/// - recency: 1 for a memory written or recalled just now, 0.37 after a month idle;
/// - use: each recall adds less than the one before (10 recalls ≈ 2.4);
/// - feedback: each `relevant` rating adds 1, each `not_relevant` or `wrong` takes 1 away.
///
/// The lowest score is evicted first; ties go to the oldest.
pub fn importance(signals: &ImportanceSignals, now: DateTime<Utc>) -> f64 {
    let idle_days = (now - signals.last_active_at).num_seconds().max(0) as f64 / 86_400.0;
    let recency = (-idle_days / IMPORTANCE_RECENCY_DAYS).exp();
    let usage = (1.0 + signals.recalls as f64).ln();
    let feedback = signals.rated_relevant as f64 - signals.rated_unhelpful as f64;
    recency + usage + feedback
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Duration;

    fn at(days_ago: i64, now: DateTime<Utc>) -> ImportanceSignals {
        ImportanceSignals {
            last_active_at: now - Duration::days(days_ago),
            recalls: 0,
            rated_relevant: 0,
            rated_unhelpful: 0,
        }
    }

    #[test]
    fn recalled_and_well_rated_memories_outrank_idle_ones() {
        let now = Utc::now();
        let idle = importance(&at(60, now), now);
        let fresh = importance(&at(0, now), now);
        let recalled = importance(
            &ImportanceSignals {
                recalls: 5,
                ..at(60, now)
            },
            now,
        );
        let rated = importance(
            &ImportanceSignals {
                rated_relevant: 1,
                ..at(60, now)
            },
            now,
        );
        let wrong = importance(
            &ImportanceSignals {
                rated_unhelpful: 1,
                ..at(0, now)
            },
            now,
        );
        assert!(idle < fresh, "{idle} {fresh}");
        assert!(fresh < recalled, "{fresh} {recalled}");
        assert!(idle < rated && fresh < rated);
        assert!(
            wrong < idle,
            "a wrong memory goes before an idle one: {wrong} {idle}"
        );
    }

    #[test]
    fn limits_outside_the_range_are_named() {
        let limits = MemoryLimits {
            per_end_user: Some(0),
            per_agent: Some(MAX_MEMORIES_PER_SUBJECT + 1),
            policy: MemoryLimitPolicy::Refuse,
            set_by: None,
        };
        let fields: Vec<String> = limits
            .limit_errors()
            .into_iter()
            .map(|error| error.field)
            .collect();
        assert_eq!(
            fields,
            ["memory_limits.per_end_user", "memory_limits.per_agent"]
        );
    }
}
