//! A unit price in the price book, for the deployment or one organization, applying from a
//! day on.

use super::DeploymentAdmin;
use crate::EngineError;
use chrono::{DateTime, NaiveDate, Utc};
use engram_core::usage::{DEFAULT_PRICE_CURRENCY, DEFAULT_PRICES_MICROS, UsageUnit};
use engram_core::{DeploymentOperator, FieldError, InvalidInput, Operation};
use engram_storage::usage::PriceEntry;

pub struct SetPriceRequest {
    /// A usage unit's name (`memories_written`, `searches`, …).
    pub unit: String,
    /// Price of one unit as a decimal, e.g. `0.0004`.
    pub price: String,
    /// ISO 4217, either case.
    pub currency: String,
    /// First day (UTC) the price applies; `None`: today.
    pub effective_from: Option<NaiveDate>,
    /// Only for this organization (an override), by id or exact name; `None`: the
    /// deployment's price.
    pub organization: Option<String>,
}

/// `0.0004` → 400 micros; at most six decimals, never negative.
pub fn parse_price_micros(text: &str) -> Result<i64, String> {
    let text = text.trim();
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if whole.is_empty() && fraction.is_empty() {
        return Err("must be a number such as 0.0004".to_string());
    }
    if !(whole.chars().all(|c| c.is_ascii_digit()) && fraction.chars().all(|c| c.is_ascii_digit()))
    {
        return Err("must be a non-negative decimal number such as 0.0004".to_string());
    }
    if fraction.len() > 6 {
        return Err("has at most six decimals".to_string());
    }
    let whole: i64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| "is too large".to_string())?
    };
    let fraction: i64 = format!("{fraction:0<6}").parse().unwrap_or(0);
    whole
        .checked_mul(1_000_000)
        .and_then(|micros| micros.checked_add(fraction))
        .ok_or_else(|| "is too large".to_string())
}

impl DeploymentAdmin {
    pub async fn set_price_for(
        &self,
        operator: &DeploymentOperator,
        request: SetPriceRequest,
    ) -> Result<PriceEntry, EngineError> {
        operator.authorize(Operation::SetPrice)?;
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
        let price = parse_price_micros(&request.price)
            .map_err(|message| errors.push(FieldError::new("price", message)))
            .ok();
        let currency = request.currency.trim().to_uppercase();
        if currency.len() != 3 || !currency.chars().all(|c| c.is_ascii_alphabetic()) {
            errors.push(FieldError::new(
                "currency",
                "must be a three-letter ISO 4217 code such as USD",
            ));
        }
        let effective_from: Option<DateTime<Utc>> = request
            .effective_from
            .unwrap_or_else(|| Utc::now().date_naive())
            .and_hms_opt(0, 0, 0)
            .map(|midnight| midnight.and_utc());
        if effective_from.is_none() {
            errors.push(FieldError::new("effective_from", "not a valid day"));
        }
        let (Some(unit), Some(unit_price_micros), Some(effective_from), true) =
            (unit, price, effective_from, errors.is_empty())
        else {
            return Err(InvalidInput(errors).into());
        };
        let organization_id = match request.organization.as_deref() {
            Some(id_or_name) => Some(self.organization(Some(id_or_name), "organization").await?),
            None => None,
        };
        let entry = PriceEntry {
            organization_id,
            unit,
            currency,
            unit_price_micros,
            effective_from,
            is_default: false,
        };
        self.while_locked("adding the price", || self.storage.add_price(&entry))
            .await?;
        Ok(entry)
    }
}

impl DeploymentAdmin {
    /// Apply Engram's default price book ([`DEFAULT_PRICES_MICROS`], in USD) to every unit
    /// the deployment has no price for, marked as a default to replace: from today when the
    /// unit was never used (a fresh install shows real money from its first call), else
    /// from tomorrow, so no day that already had usage is re-priced. Returns the units given
    /// a default now (none on every start after the first).
    pub async fn apply_default_prices_for(
        &self,
        operator: &DeploymentOperator,
    ) -> Result<Vec<UsageUnit>, EngineError> {
        operator.authorize(Operation::SetPrice)?;
        self.while_locked("applying the default prices", || {
            self.storage.apply_default_prices(
                &DEFAULT_PRICES_MICROS,
                DEFAULT_PRICE_CURRENCY,
                Utc::now(),
            )
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::parse_price_micros;

    #[test]
    fn prices_are_exact_micros() {
        assert_eq!(parse_price_micros("0.0004").unwrap(), 400);
        assert_eq!(parse_price_micros("2").unwrap(), 2_000_000);
        assert_eq!(parse_price_micros("1.5").unwrap(), 1_500_000);
        assert_eq!(parse_price_micros(".25").unwrap(), 250_000);
        assert!(parse_price_micros("-1").is_err());
        assert!(parse_price_micros("0.0000001").is_err());
        assert!(parse_price_micros("abc").is_err());
        assert!(parse_price_micros("").is_err());
    }
}
