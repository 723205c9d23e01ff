//! Named teams of agents: which of a project's agents a name groups, so a memory can be
//! shared with one team (`shared_with`) rather than with every agent.

use crate::{ExternalId, FieldError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Most teams a project may name.
pub const MAX_TEAMS: usize = 32;
/// Most agents in one team.
pub const MAX_AGENTS_PER_TEAM: usize = 64;

/// A project's teams: team name → its agents (sorted, once each). Stored and shown as that
/// object.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AgentTeams(BTreeMap<String, Vec<String>>);

impl AgentTeams {
    /// The teams as a request names them, or every problem under `field.<team>`.
    pub fn parse(
        teams: &BTreeMap<String, Vec<String>>,
        field: &str,
    ) -> Result<Self, Vec<FieldError>> {
        let mut errors = Vec::new();
        if teams.len() > MAX_TEAMS {
            errors.push(FieldError::new(
                field,
                format!("at most {MAX_TEAMS} teams, got {}", teams.len()),
            ));
        }
        let mut parsed = BTreeMap::new();
        for (name, agents) in teams {
            let team_field = format!("{field}.{name}");
            if let Err(message) = ExternalId::parse(name) {
                errors.push(FieldError::new(
                    team_field.clone(),
                    format!("team name {message}"),
                ));
            }
            if agents.is_empty() || agents.len() > MAX_AGENTS_PER_TEAM {
                errors.push(FieldError::new(
                    team_field.clone(),
                    format!("a team has 1–{MAX_AGENTS_PER_TEAM} agents"),
                ));
            }
            let mut members = Vec::new();
            for (position, agent) in agents.iter().enumerate() {
                match ExternalId::parse(agent) {
                    Ok(agent) => members.push(agent.as_str().to_string()),
                    Err(message) => errors.push(FieldError::new(
                        format!("{team_field}[{position}]"),
                        message,
                    )),
                }
            }
            members.sort();
            members.dedup();
            parsed.insert(name.clone(), members);
        }
        if errors.is_empty() {
            Ok(Self(parsed))
        } else {
            Err(errors)
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn contains(&self, team: &str) -> bool {
        self.0.contains_key(team)
    }

    /// Team name → agents.
    pub fn teams(&self) -> &BTreeMap<String, Vec<String>> {
        &self.0
    }

    /// The teams any of `agents` belongs to, sorted.
    pub fn teams_of<'a>(&self, agents: impl IntoIterator<Item = &'a str>) -> Vec<String> {
        let agents: Vec<&str> = agents.into_iter().collect();
        self.0
            .iter()
            .filter(|(_, members)| {
                members
                    .iter()
                    .any(|member| agents.contains(&member.as_str()))
            })
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// The team names, for messages: `finance, ops` (or `none`).
    pub fn names(&self) -> String {
        if self.0.is_empty() {
            return "none".to_string();
        }
        self.0.keys().cloned().collect::<Vec<_>>().join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agent_belongs_to_the_teams_that_name_it() {
        let teams = AgentTeams::parse(
            &BTreeMap::from([
                (
                    "finance".to_string(),
                    vec!["ledger".into(), "billing".into()],
                ),
                ("care".to_string(), vec!["support".into(), "billing".into()]),
            ]),
            "agent_teams",
        )
        .unwrap();
        assert_eq!(teams.teams_of(["billing"]), vec!["care", "finance"]);
        assert_eq!(teams.teams_of(["ledger", "planner"]), vec!["finance"]);
        assert!(teams.teams_of(["planner"]).is_empty());
        assert_eq!(teams.teams()["finance"], vec!["billing", "ledger"]);
    }

    #[test]
    fn bad_teams_are_named_by_field() {
        let errors = AgentTeams::parse(
            &BTreeMap::from([
                ("empty".to_string(), vec![]),
                ("ok".to_string(), vec!["".to_string()]),
            ]),
            "agent_teams",
        )
        .unwrap_err();
        let fields: Vec<&str> = errors.iter().map(|error| error.field.as_str()).collect();
        assert_eq!(fields, ["agent_teams.empty", "agent_teams.ok[0]"]);
    }
}
