//! A unit price in the price book, for the deployment or one organization, applying from a
//! day on.

use super::DeploymentAdmin;
use crate::EngineError;
use crate::use_cases::usage::{NewPriceRequest, checked_price};
use chrono::Utc;
use engram_core::audit::Actor;
use engram_core::usage::{DEFAULT_PRICE_CURRENCY, DEFAULT_PRICES_MICROS, UsageUnit};
use engram_core::{DeploymentOperator, Operation};
use engram_storage::usage::PriceEntry;

pub struct SetPriceRequest {
    /// Unit, price (and how many units it is for), currency and first day.
    pub price: NewPriceRequest,
    /// Only for this organization (an override), by id or exact name; `None`: the
    /// deployment's price.
    pub organization: Option<String>,
}

impl DeploymentAdmin {
    pub async fn set_price_for(
        &self,
        operator: &DeploymentOperator,
        request: SetPriceRequest,
    ) -> Result<PriceEntry, EngineError> {
        operator.authorize(Operation::SetPrice)?;
        let (unit, unit_price_picos, currency, effective_from) =
            checked_price(&request.price, Utc::now())?;
        let organization_id = match request.organization.as_deref() {
            Some(id_or_name) => Some(self.organization(Some(id_or_name), "organization").await?),
            None => None,
        };
        let entry = PriceEntry {
            organization_id,
            unit,
            currency,
            unit_price_picos,
            effective_from,
            is_default: false,
        };
        let actor = Actor::command_line("admin set-price");
        self.while_locked("adding the price", || {
            self.storage.add_price(&entry, &actor)
        })
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
