//! The paging cursors the API hands out and takes back (`next_cursor`): memories page by
//! memory id, messages by message id, audit events by sequence number. Parsing never panics.

use crate::MemoryId;
use crate::validation::FieldError;

const NOT_A_CURSOR: &str = "is not a cursor returned by this API";

/// A memory list's cursor: the id of the last memory of the previous page.
pub fn parse_memory_cursor(text: &str, field: &str) -> Result<MemoryId, FieldError> {
    text.parse::<MemoryId>()
        .map_err(|_| FieldError::new(field, NOT_A_CURSOR))
}

/// A message page's cursor: the id of the last message of the previous page.
pub fn parse_message_cursor(text: &str, field: &str) -> Result<uuid::Uuid, FieldError> {
    text.parse::<uuid::Uuid>()
        .map_err(|_| FieldError::new(field, "expected a message id from next_cursor"))
}

/// An audit page's cursor: the sequence number of the last event of the previous page.
pub fn parse_audit_cursor(text: &str, field: &str) -> Result<i64, FieldError> {
    match text.parse::<i64>() {
        Ok(after_id) if after_id >= 0 => Ok(after_id),
        _ => Err(FieldError::new(field, NOT_A_CURSOR)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_strangers_are_refused_by_field() {
        let id = MemoryId::generate();
        assert_eq!(parse_memory_cursor(&id.to_string(), "cursor").unwrap(), id);
        assert_eq!(parse_audit_cursor("42", "cursor").unwrap(), 42);
        for bad in ["", "-1", "9223372036854775808", "abc"] {
            assert_eq!(
                parse_audit_cursor(bad, "query.cursor").unwrap_err().field,
                "query.cursor"
            );
        }
        assert!(parse_memory_cursor("not-an-id", "cursor").is_err());
        assert!(parse_message_cursor("1", "after").is_err());
    }
}
