//! What a project used and spent, and the limits on it: the same figures for the API and the
//! console (the month so far includes what this server's meter has not written yet).

mod costs;
mod llm_usage;
mod prices;
mod spend_limits;
pub(crate) mod statement;
mod usage_report;

pub(crate) use prices::checked_price;
pub use prices::{NewPriceRequest, PriceBookEntry, PriceBookUnit, price_book_units};
pub use spend_limits::SpendLimitsReport;

pub use usage_report::{UsageReport, UsageReportRequest};

/// Longest window one report may cover, in days past its first.
pub const MAX_REPORT_DAYS: i64 = 366;

/// A report's window (`to` exclusive), checked against the documented report days before
/// storage is asked: a 422 naming `from` or `to`, whichever door the dates came through.
pub(crate) fn check_report_window(
    from: chrono::DateTime<chrono::Utc>,
    to: chrono::DateTime<chrono::Utc>,
) -> Result<(), crate::EngineError> {
    use engram_core::validation::check_report_day;
    let mut errors = Vec::new();
    if let Err(error) = check_report_day("from", from.date_naive()) {
        errors.push(error);
    }
    // The last instant reported is the one before `to`.
    let last_day = to
        .checked_sub_signed(chrono::TimeDelta::seconds(1))
        .map(|last| last.date_naive())
        .unwrap_or(chrono::NaiveDate::MIN);
    if let Err(error) = check_report_day("to", last_day) {
        errors.push(error);
    }
    let first_day = from.date_naive();
    if errors.is_empty() {
        if to <= from || last_day < first_day {
            errors.push(engram_core::FieldError::new(
                "to",
                "must not be before from",
            ));
        } else if (last_day - first_day).num_days() > MAX_REPORT_DAYS {
            errors.push(engram_core::FieldError::new(
                "to",
                format!("at most {MAX_REPORT_DAYS} days per request"),
            ));
        }
    }
    if errors.is_empty() {
        return Ok(());
    }
    Err(engram_core::InvalidInput(errors).into())
}
