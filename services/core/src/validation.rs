//! Parsing of caller-supplied values into types that can only hold valid data, and the
//! field-level error list that bad input produces.

use crate::limits::MAX_EXTERNAL_ID_CHARS;
use serde::{Deserialize, Serialize};
use std::fmt;

/// One problem with one input field, e.g. `memories[3].content`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Every field problem found in one input; never empty.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", summary(.0))]
pub struct InvalidInput(pub Vec<FieldError>);

fn summary(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(|error| format!("{}: {}", error.field, error.message))
        .collect::<Vec<_>>()
        .join("; ")
}

impl InvalidInput {
    pub fn single(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self(vec![FieldError::new(field, message)])
    }
}

/// An id chosen by the client (`user_id`, `agent_id`, `session_id`, `key`): 1–255
/// characters, no control characters.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct ExternalId(String);

impl ExternalId {
    pub fn parse(text: &str) -> Result<Self, String> {
        let characters = text.chars().count();
        if characters == 0 {
            return Err("must not be empty".to_string());
        }
        if characters > MAX_EXTERNAL_ID_CHARS {
            return Err(format!(
                "must be at most {MAX_EXTERNAL_ID_CHARS} characters, got {characters}"
            ));
        }
        if text.chars().any(char::is_control) {
            return Err("must not contain control characters".to_string());
        }
        Ok(Self(text.to_string()))
    }

    /// Parse a field, recording a problem under `field` when it is invalid.
    pub fn parse_field(
        text: Option<&str>,
        field: &str,
        errors: &mut Vec<FieldError>,
    ) -> Option<Self> {
        let text = text?;
        match Self::parse(text) {
            Ok(id) => Some(id),
            Err(message) => {
                errors.push(FieldError::new(field, message));
                None
            }
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for ExternalId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for ExternalId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// A report's day, checked against [`crate::limits::EARLIEST_REPORT_DAY`] and [`crate::limits::LATEST_REPORT_DAY`] before
/// anything adds to it or subtracts from it (a date near chrono's own limits would overflow).
pub fn check_report_day(field: &str, day: chrono::NaiveDate) -> Result<(), FieldError> {
    let bound = |(year, month, date): (i32, u32, u32)| {
        chrono::NaiveDate::from_ymd_opt(year, month, date).unwrap_or_default()
    };
    if day < bound(crate::limits::EARLIEST_REPORT_DAY)
        || day > bound(crate::limits::LATEST_REPORT_DAY)
    {
        return Err(FieldError::new(
            field,
            "must be a day from 1970-01-01 to 9999-12-31",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_days_keep_to_their_range() {
        let day = |text: &str| chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").unwrap();
        assert!(check_report_day("from", day("1970-01-01")).is_ok());
        assert!(check_report_day("to", day("9999-12-31")).is_ok());
        assert!(check_report_day("from", day("1969-12-31")).is_err());
        assert!(check_report_day("to", day("+10000-01-01")).is_err());
        let refusal = check_report_day("from", day("-262143-01-01")).unwrap_err();
        assert_eq!(refusal.field, "from");
    }

    #[test]
    fn external_id_bounds() {
        assert!(ExternalId::parse("").is_err());
        assert!(ExternalId::parse(&"a".repeat(255)).is_ok());
        assert!(ExternalId::parse(&"a".repeat(256)).is_err());
        assert!(
            ExternalId::parse(&"é".repeat(255)).is_ok(),
            "limit counts characters, not bytes"
        );
        assert!(ExternalId::parse("a\nb").is_err());
    }
}
