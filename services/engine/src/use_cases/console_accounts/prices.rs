//! The organization's price book in the console: what applies (read by those who read
//! usage), and the organization's own prices — added now or scheduled, withdrawn before they
//! take effect — by owners and admins, every change audited.

use super::{ConsoleAccess, ConsoleMember};
use crate::EngineError;
use crate::use_cases::usage::{NewPriceRequest, PriceBookUnit, checked_price, price_book_units};
use chrono::Utc;
use engram_core::usage::PriceEntry;
use engram_core::{FieldError, InvalidInput, Operation};

impl ConsoleAccess {
    /// Every unit's price today and the prices scheduled, for the member's organization.
    pub async fn price_book_for(
        &self,
        member: &ConsoleMember,
    ) -> Result<Vec<PriceBookUnit>, EngineError> {
        member.authorize(Operation::GetPrices)?;
        let book = self
            .storage
            .price_book_with_ids_for(member.organization_id())
            .await?;
        Ok(price_book_units(&book, Utc::now()))
    }

    /// Add a price of the member's organization (it takes over from the deployment's from
    /// its first day, which is today or later). Returns the entry's id.
    pub async fn add_organization_price_for(
        &self,
        member: &ConsoleMember,
        request: NewPriceRequest,
    ) -> Result<String, EngineError> {
        member.authorize(Operation::AddOrganizationPrice)?;
        let (unit, unit_price_picos, currency, effective_from) =
            checked_price(&request, Utc::now())?;
        let entry = PriceEntry {
            organization_id: Some(member.organization_id()),
            unit,
            currency,
            unit_price_picos,
            effective_from,
            is_default: false,
        };
        let id = self.storage.add_price(&entry, member.actor()).await?;
        Ok(id.to_string())
    }

    /// Withdraw a price of the member's organization that has not taken effect yet.
    pub async fn withdraw_organization_price_for(
        &self,
        member: &ConsoleMember,
        price_id: &str,
    ) -> Result<(), EngineError> {
        member.authorize(Operation::WithdrawOrganizationPrice)?;
        let Ok(price_id) = uuid::Uuid::parse_str(price_id.trim()) else {
            return Err(
                InvalidInput(vec![FieldError::new("price_id", "must be a price's id")]).into(),
            );
        };
        self.storage
            .withdraw_scheduled_price(
                member.organization_id(),
                price_id,
                Utc::now(),
                member.actor(),
            )
            .await?;
        Ok(())
    }
}
