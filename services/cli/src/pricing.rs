//! `engram admin set-price`: add a unit price to the price book, for the deployment or one
//! organization, applying from a date on; prints the entry as JSON.

use anyhow::{Context, Result};
use clap::Args;
use engram_core::DeploymentOperator;
use engram_engine::NewPriceRequest;
use engram_engine::deployment::{DeploymentAdmin, SetPriceRequest};

#[derive(Debug, Args)]
pub struct SetPriceArgs {
    #[command(flatten)]
    pub deployment: crate::config::AdminDeploymentArgs,
    /// A usage unit: `memories_written`, `searches`, `tokens_embedded`, `memory_days`,
    /// `file_bytes`, `llm_tokens_in` or `llm_tokens_out`.
    #[arg(long)]
    pub unit: String,
    /// The price of `--per` units, e.g. `0.0004` (exact to a trillionth per unit).
    #[arg(long)]
    pub price: String,
    /// How many units `--price` is for: 1, 1000 or 1000000 (token prices are often quoted
    /// per million).
    #[arg(long, default_value_t = 1)]
    pub per: u64,
    /// ISO 4217 code, e.g. `USD`.
    #[arg(long, default_value = "USD")]
    pub currency: String,
    /// First day (UTC, `YYYY-MM-DD`) the price applies, today or later; default: today.
    #[arg(long)]
    pub effective_from: Option<String>,
    /// Only for this organization (an override), by id or exact name; default: the
    /// deployment's price.
    #[arg(long, alias = "organization")]
    pub organization_id: Option<String>,
}

pub async fn set_price_command(arguments: SetPriceArgs) -> Result<()> {
    let effective_from = match &arguments.effective_from {
        Some(text) => Some(
            chrono::NaiveDate::parse_from_str(text.trim(), "%Y-%m-%d")
                .context("--effective-from must be a date as YYYY-MM-DD")?,
        ),
        None => None,
    };
    let storage = arguments.deployment.open_sealed_storage().await?;
    // No key is made: the pepper is never used, so the command needs no server secret.
    let admin = DeploymentAdmin::new(
        storage.clone(),
        engram_storage::ApiKeyPepper::new(Vec::new()),
        crate::config::admin_lock_patience(),
    );
    let entry = admin
        .set_price_for(
            &DeploymentOperator::at_the_command_line("admin set-price"),
            SetPriceRequest {
                price: NewPriceRequest {
                    unit: arguments.unit.clone(),
                    price: arguments.price.clone(),
                    per: Some(arguments.per),
                    currency: arguments.currency.clone(),
                    effective_from,
                },
                organization: arguments.organization_id.clone(),
            },
        )
        .await
        .map_err(crate::config::admin_refusal)?;
    println!(
        "{}",
        serde_json::json!({
            "unit": entry.unit.as_str(),
            "currency": entry.currency,
            "unit_price": entry.unit_price().decimal(),
            "unit_price_micros": entry.unit_price().micros(),
            "effective_from": entry.effective_from.date_naive().to_string(),
            "organization_id": entry.organization_id.map(|id| id.to_string()),
        })
    );
    storage.close().await?;
    Ok(())
}
