//! The prices that apply to a project's organization (`GET /v1/prices`, the console's price
//! book): per unit the price in effect today and those scheduled, and the one validation of
//! a new price every door that adds one goes through.

use crate::{EngineError, MemoryEngine};
use chrono::{DateTime, NaiveDate, Utc};
use engram_core::usage::{Picos, PriceEntry, UsageUnit, parse_unit_price};
use engram_core::{FieldError, InvalidInput, Operation, Principal};
use engram_storage::usage::price_in_effect;

/// One entry of the price book as its readers see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PriceBookEntry {
    pub id: String,
    pub unit: UsageUnit,
    pub currency: String,
    pub unit_price: Picos,
    pub effective_from: NaiveDate,
    /// `organization` (the organization's own price), `deployment` (the operator's) or
    /// `default` (Engram's default book, a placeholder).
    pub source: &'static str,
}

/// A unit's price today and the prices scheduled for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PriceBookUnit {
    pub unit: UsageUnit,
    /// `None`: nothing prices the unit today.
    pub current: Option<PriceBookEntry>,
    /// Prices that take effect after today, soonest first.
    pub scheduled: Vec<PriceBookEntry>,
}

impl MemoryEngine {
    /// The prices that apply to the caller's project: any project key may read them.
    pub async fn prices_for(
        &self,
        principal: &Principal,
    ) -> Result<Vec<PriceBookUnit>, EngineError> {
        principal.authorize(Operation::GetPrices)?;
        let book = self
            .storage
            .price_book_with_ids_for(principal.scope().organization_id())
            .await?;
        Ok(price_book_units(&book, Utc::now()))
    }
}

/// Every unit's price in effect at `now` and its scheduled prices, from the organization's
/// book (the deployment's entries and the organization's own).
pub fn price_book_units(
    book: &[(uuid::Uuid, PriceEntry)],
    now: DateTime<Utc>,
) -> Vec<PriceBookUnit> {
    let entries: Vec<PriceEntry> = book.iter().map(|(_, entry)| entry.clone()).collect();
    let view = |(id, entry): &(uuid::Uuid, PriceEntry)| PriceBookEntry {
        id: id.to_string(),
        unit: entry.unit,
        currency: entry.currency.clone(),
        unit_price: entry.unit_price(),
        effective_from: entry.effective_from.date_naive(),
        source: match (entry.organization_id.is_some(), entry.is_default) {
            (true, _) => "organization",
            (false, false) => "deployment",
            (false, true) => "default",
        },
    };
    UsageUnit::ALL
        .into_iter()
        .map(|unit| {
            let current = price_in_effect(&entries, unit, now)
                .and_then(|current| book.iter().find(|(_, entry)| *entry == current))
                .map(view);
            let mut scheduled: Vec<PriceBookEntry> = book
                .iter()
                .filter(|(_, entry)| entry.unit == unit && entry.effective_from > now)
                .map(view)
                .collect();
            scheduled.sort_by_key(|entry| entry.effective_from);
            PriceBookUnit {
                unit,
                current,
                scheduled,
            }
        })
        .collect()
}

/// A price as a person writes it.
#[derive(Clone, Debug, Default)]
pub struct NewPriceRequest {
    /// A usage unit's name (`memories_written`, `searches`, …).
    pub unit: String,
    /// The price as a decimal, e.g. `0.0004`, for `per` units.
    pub price: String,
    /// How many units `price` is for: 1, 1000 or 1000000 (`None`: 1).
    pub per: Option<u64>,
    /// ISO 4217, either case.
    pub currency: String,
    /// First day (UTC) the price applies; `None`: today. Never before today.
    pub effective_from: Option<NaiveDate>,
}

/// The checked parts of a new price: unit, price per unit in trillionths, currency, first
/// instant. A past first day is refused: adding a price never re-prices a day that is over.
pub(crate) fn checked_price(
    request: &NewPriceRequest,
    now: DateTime<Utc>,
) -> Result<(UsageUnit, i64, String, DateTime<Utc>), EngineError> {
    let mut errors = Vec::new();
    let unit = UsageUnit::parse(request.unit.trim());
    if unit.is_none() {
        errors.push(FieldError::new(
            "unit",
            format!(
                "must be one of {}",
                UsageUnit::ALL.map(UsageUnit::as_str).join(", ")
            ),
        ));
    }
    let per = request.per.unwrap_or(1);
    let price = parse_unit_price(&request.price, per)
        .map_err(|message| {
            let field = if message.starts_with("is quoted per") {
                "per"
            } else {
                "price"
            };
            errors.push(FieldError::new(field, message));
        })
        .ok();
    let currency = request.currency.trim().to_uppercase();
    if currency.len() != 3 || !currency.chars().all(|c| c.is_ascii_alphabetic()) {
        errors.push(FieldError::new(
            "currency",
            "must be a three-letter ISO 4217 code such as USD",
        ));
    }
    let today = now.date_naive();
    let first_day = request.effective_from.unwrap_or(today);
    if first_day < today {
        errors.push(FieldError::new(
            "effective_from",
            format!(
                "must be today ({today}) or later: a new price never re-prices a day that is over"
            ),
        ));
    }
    let effective_from = first_day
        .and_hms_opt(0, 0, 0)
        .map(|midnight| midnight.and_utc());
    let (Some(unit), Some(price), Some(effective_from), true) =
        (unit, price, effective_from, errors.is_empty())
    else {
        return Err(InvalidInput(errors).into());
    };
    Ok((unit, price, currency, effective_from))
}
