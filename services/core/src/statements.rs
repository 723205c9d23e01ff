//! A month's statement: what a project or an organization used, at which prices, for how
//! much, against which budget — provisional while the month is open, stored once it closes.

use crate::usage::{BillingMonth, BreakdownValue, CostBreakdownRow, CostRow, Picos, UsageUnit};
use chrono::{DateTime, Duration, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How long after its month ends a statement closes: late usage of the month's last hour (a
/// gateway's unwritten second, a job finishing) is in by then.
pub const STATEMENT_CLOSES_AFTER: Duration = Duration::hours(1);

/// `2026-11` → the month; anything else is `None`.
pub fn parse_statement_month(text: &str) -> Option<BillingMonth> {
    let (year, month) = text.split_once('-')?;
    let digits = |part: &str, length: usize| {
        part.len() == length && part.chars().all(|c| c.is_ascii_digit())
    };
    if !digits(year, 4) || !digits(month, 2) {
        return None;
    }
    let day = NaiveDate::from_ymd_opt(year.parse().ok()?, month.parse().ok()?, 1)?;
    Some(BillingMonth::containing(
        day.and_time(chrono::NaiveTime::MIN).and_utc(),
    ))
}

/// When `month`'s statement closes.
pub fn closes_at(month: BillingMonth) -> DateTime<Utc> {
    month.resets_at() + STATEMENT_CLOSES_AFTER
}

/// Who a statement is for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StatementParty {
    pub id: String,
    pub name: String,
}

/// One unit at one price: a unit whose price changed during the month has a line per price.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StatementLine {
    pub unit: String,
    pub quantity: i64,
    /// `None`: the price book had no price for the unit (the line costs nothing).
    pub currency: Option<String>,
    /// Price of one unit, exact (`0.00000002`).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub unit_price: Option<Picos>,
    /// The day the price took effect.
    pub price_from: Option<NaiveDate>,
    /// Whether the price is Engram's default book rather than one set by a person.
    pub default_price: bool,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub cost: Picos,
    /// `cost` rounded to the nearest millionth.
    pub cost_micros: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StatementTotal {
    pub currency: String,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub cost: Picos,
    pub cost_micros: i64,
}

/// A budget alert of the month.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StatementAlert {
    pub threshold_percent: u8,
    pub reached_at: DateTime<Utc>,
}

/// A project's monthly budget against the month's cost in its currency.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StatementBudget {
    pub project_id: String,
    pub currency: String,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub amount: Picos,
    /// Whether requests stopped at the budget; `None` where the month's budget is known
    /// only from its alerts (a month stored long after it closed).
    pub hard_cap: Option<bool>,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub spent: Picos,
    /// Spent as a share of the budget, in percent (rounded down); `None` for a 0 budget.
    pub percent_used: Option<u64>,
    pub alerts: Vec<StatementAlert>,
}

/// Usage and cost of one unit for one value of a dimension (`by`): a key, an end-user, an
/// agent, a channel or, on an organization's statement, a project.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StatementBreakdownLine {
    /// `key`, `end_user`, `agent`, `channel` or `project`.
    pub by: String,
    /// The key's credential (`key:<id>`, `console:<account>`, `storage`), the end-user id,
    /// the agent id, the channel or the project id; `None` where the calls named none.
    pub value: Option<String>,
    /// For an erased end-user: the subject digest that replaced the id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub erased_subject: Option<String>,
    /// The project the line is about, on an organization's statement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
    pub unit: String,
    pub quantity: i64,
    pub currency: Option<String>,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub cost: Picos,
    pub cost_micros: i64,
}

/// A month's statement.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Statement {
    /// `2026-11`.
    pub month: String,
    pub organization: StatementParty,
    /// The project; `None` on the organization's statement (every project of it).
    pub project: Option<StatementParty>,
    /// True until the month closes (one hour after it ends): the figures may still change.
    pub provisional: bool,
    pub closes_at: DateTime<Utc>,
    /// When these figures were computed (for a closed month: when it was stored).
    pub generated_at: DateTime<Utc>,
    pub lines: Vec<StatementLine>,
    pub totals: Vec<StatementTotal>,
    pub budgets: Vec<StatementBudget>,
    pub breakdowns: Vec<StatementBreakdownLine>,
}

/// The lines of a month's daily costs: one per unit and price in effect, in the order of
/// the units, then of the prices' dates.
pub fn statement_lines(rows: &[CostRow]) -> Vec<StatementLine> {
    type LineKey = (UsageUnit, Option<(DateTime<Utc>, String, i64, bool)>);
    let mut lines: BTreeMap<LineKey, (i64, Picos)> = BTreeMap::new();
    for row in rows {
        let price = row.price.as_ref().map(|price| {
            (
                price.effective_from,
                price.currency.clone(),
                price.unit_price_picos,
                price.is_default,
            )
        });
        let line = lines.entry((row.unit, price)).or_default();
        line.0 = line.0.saturating_add(row.quantity);
        line.1 += row.cost;
    }
    lines
        .into_iter()
        .map(|((unit, price), (quantity, cost))| StatementLine {
            unit: unit.as_str().to_string(),
            quantity,
            currency: price.as_ref().map(|price| price.1.clone()),
            unit_price: price.as_ref().map(|price| Picos(i128::from(price.2))),
            price_from: price.as_ref().map(|price| price.0.date_naive()),
            default_price: price.as_ref().is_some_and(|price| price.3),
            cost,
            cost_micros: cost.micros(),
        })
        .collect()
}

/// Totals per currency of `lines`.
pub fn statement_totals(lines: &[StatementLine]) -> Vec<StatementTotal> {
    let mut totals: BTreeMap<String, Picos> = BTreeMap::new();
    for line in lines {
        if let Some(currency) = &line.currency {
            *totals.entry(currency.clone()).or_default() += line.cost;
        }
    }
    totals
        .into_iter()
        .map(|(currency, cost)| StatementTotal {
            currency,
            cost_micros: cost.micros(),
            cost,
        })
        .collect()
}

/// The breakdown lines by `by` of a month's daily rows: one per value, unit and currency.
pub fn statement_breakdown(
    by: &str,
    rows: &[CostBreakdownRow],
    project_id: Option<&str>,
) -> Vec<StatementBreakdownLine> {
    let mut grouped: BTreeMap<(BreakdownValue, UsageUnit, Option<String>), (i64, Picos)> =
        BTreeMap::new();
    for row in rows {
        let currency = row.cost.price.as_ref().map(|price| price.currency.clone());
        let entry = grouped
            .entry((row.value.clone(), row.cost.unit, currency))
            .or_default();
        entry.0 = entry.0.saturating_add(row.cost.quantity);
        entry.1 += row.cost.cost;
    }
    grouped
        .into_iter()
        .map(|((value, unit, currency), (quantity, cost))| {
            let (value, erased_subject) = match value {
                BreakdownValue::Unattributed => (None, None),
                BreakdownValue::Named(name) => (Some(name), None),
                BreakdownValue::ErasedEndUser(digest) => (None, Some(digest)),
            };
            StatementBreakdownLine {
                by: by.to_string(),
                value,
                erased_subject,
                project_id: project_id.map(str::to_string),
                unit: unit.as_str().to_string(),
                quantity,
                currency,
                cost,
                cost_micros: cost.micros(),
            }
        })
        .collect()
}

impl Statement {
    /// The end-user `user_id` of `project_id` replaced by the subject `digest` in its
    /// breakdown lines: what an erasure does to a stored statement, keeping every figure.
    /// Returns whether anything changed.
    pub fn pseudonymize_end_user(&mut self, project_id: &str, user_id: &str, digest: &str) -> bool {
        let own_project = self.project.as_ref().map(|project| project.id.clone());
        let mut changed = false;
        for line in &mut self.breakdowns {
            if is_end_user_line_of(line, own_project.as_deref(), project_id)
                && line.value.as_deref() == Some(user_id)
            {
                line.value = None;
                line.erased_subject = Some(digest.to_string());
                changed = true;
            }
        }
        changed
    }

    /// Whether any breakdown line names `user_id` of `project_id`.
    pub fn names_end_user(&self, project_id: &str, user_id: &str) -> bool {
        self.end_users_of(project_id).any(|named| named == user_id)
    }

    /// The end-user ids the breakdown lines name for `project_id` (an erased one is named
    /// by digest, so it is not among them).
    pub fn end_users_of<'a>(&'a self, project_id: &'a str) -> impl Iterator<Item = &'a str> {
        let own_project = self.project.as_ref().map(|project| project.id.as_str());
        self.breakdowns
            .iter()
            .filter(move |line| is_end_user_line_of(line, own_project, project_id))
            .filter_map(|line| line.value.as_deref())
    }
}

/// Whether `line` is an end-user line of `project_id` (on a project's statement the lines
/// carry no project: they are `own_project`'s).
fn is_end_user_line_of(
    line: &StatementBreakdownLine,
    own_project: Option<&str>,
    project_id: &str,
) -> bool {
    line.by == "end_user" && line.project_id.as_deref().or(own_project) == Some(project_id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::usage::PriceEntry;
    use chrono::TimeZone;

    fn day(date: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, date, 0, 0, 0).unwrap()
    }

    fn row(date: u32, quantity: i64, picos: Option<i64>, from: u32) -> CostRow {
        let price = picos.map(|picos| PriceEntry {
            organization_id: None,
            unit: UsageUnit::Searches,
            currency: "USD".to_string(),
            unit_price_picos: picos,
            effective_from: day(from),
            is_default: false,
        });
        CostRow {
            day: day(date),
            unit: UsageUnit::Searches,
            quantity,
            cost: price.as_ref().map_or(Picos::ZERO, |price| {
                Picos::times(price.unit_price(), quantity)
            }),
            price,
        }
    }

    #[test]
    fn a_price_change_mid_month_gives_the_unit_a_line_per_price_and_the_totals_add_up() {
        let rows = [
            row(2, 10, Some(400_000_000), 1),
            row(3, 5, Some(400_000_000), 1),
            row(20, 7, Some(20_000), 15),
        ];
        let lines = statement_lines(&rows);
        assert_eq!(lines.len(), 2);
        assert_eq!(
            (lines[0].quantity, lines[0].cost.decimal()),
            (15, "0.006".to_string())
        );
        assert_eq!(
            (lines[1].quantity, lines[1].cost.decimal()),
            (7, "0.00000014".to_string())
        );
        let totals = statement_totals(&lines);
        assert_eq!(totals.len(), 1);
        assert_eq!(totals[0].cost.decimal(), "0.00600014");
        assert_eq!(totals[0].cost_micros, 6_000);
    }

    #[test]
    fn months_parse_only_as_yyyy_mm_and_close_an_hour_after_they_end() {
        let november = parse_statement_month("2026-11").unwrap();
        assert_eq!(november.label(), "2026-11");
        assert_eq!(
            closes_at(november),
            Utc.with_ymd_and_hms(2026, 12, 1, 1, 0, 0).unwrap()
        );
        for wrong in [
            "2026-13",
            "2026-1",
            "26-11",
            "2026/11",
            "",
            "2026-11-01",
            "2026-+1",
        ] {
            assert!(parse_statement_month(wrong).is_none(), "{wrong}");
        }
    }

    #[test]
    fn an_erased_end_user_keeps_every_figure_under_their_digest() {
        let line = |value: &str, project: Option<&str>| StatementBreakdownLine {
            by: "end_user".to_string(),
            value: Some(value.to_string()),
            erased_subject: None,
            project_id: project.map(str::to_string),
            unit: "searches".to_string(),
            quantity: 4,
            currency: Some("USD".to_string()),
            cost: Picos(2_000_000_000),
            cost_micros: 2_000,
        };
        let mut statement = Statement {
            month: "2026-11".to_string(),
            organization: StatementParty {
                id: "o".to_string(),
                name: "Org".to_string(),
            },
            project: None,
            provisional: false,
            closes_at: day(1),
            generated_at: day(1),
            lines: Vec::new(),
            totals: Vec::new(),
            budgets: Vec::new(),
            breakdowns: vec![
                line("ann", Some("p1")),
                line("ann", Some("p2")),
                line("ben", Some("p1")),
            ],
        };
        assert!(statement.names_end_user("p1", "ann"));
        assert!(statement.pseudonymize_end_user("p1", "ann", "d1gest"));
        assert!(!statement.names_end_user("p1", "ann"));
        // Another project's ann is another person.
        assert!(statement.names_end_user("p2", "ann"));
        let erased = &statement.breakdowns[0];
        assert_eq!(
            (erased.value.as_deref(), erased.erased_subject.as_deref()),
            (None, Some("d1gest"))
        );
        assert_eq!((erased.quantity, erased.cost), (4, Picos(2_000_000_000)));
        // Stored and read back, exactly.
        let text = serde_json::to_string(&statement).unwrap();
        assert!(text.contains("\"cost\":\"0.002\""), "{text}");
        assert_eq!(serde_json::from_str::<Statement>(&text).unwrap(), statement);
    }
}
