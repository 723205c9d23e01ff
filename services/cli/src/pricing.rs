//! `engram admin set-price`: add a unit price to the price book, for the deployment or one
//! organization, applying from a date on; prints the entry as JSON.

use anyhow::{Context, Result};
use clap::Args;
use engram_core::usage::UsageUnit;
use engram_storage::usage::PriceEntry;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct SetPriceArgs {
    #[arg(long, env = "ENGRAM_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,
    #[arg(long, env = "ENGRAM_DATABASE_URL", hide_env_values = true, value_parser = crate::config::secret)]
    pub database_url: Option<secrecy::SecretString>,
    #[arg(long, env = "ENGRAM_ALLOW_UNSAFE_DURABILITY", default_value_t = false)]
    pub allow_unsafe_durability: bool,
    /// `memories_written` or `searches`.
    #[arg(long)]
    pub unit: String,
    /// Price of one unit, e.g. `0.0004`.
    #[arg(long)]
    pub price: String,
    /// ISO 4217 code, e.g. `USD`.
    #[arg(long, default_value = "USD")]
    pub currency: String,
    /// First day (UTC, `YYYY-MM-DD`) the price applies; default: today.
    #[arg(long)]
    pub effective_from: Option<String>,
    /// Only for this organization (an override); default: the deployment's price.
    #[arg(long)]
    pub organization_id: Option<String>,
}

/// `0.0004` → 400 micros; at most six decimals, never negative.
pub fn parse_price_micros(text: &str) -> Result<i64> {
    let text = text.trim();
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    anyhow::ensure!(
        !whole.is_empty() || !fraction.is_empty(),
        "--price must be a number such as 0.0004"
    );
    anyhow::ensure!(
        whole.chars().all(|c| c.is_ascii_digit()) && fraction.chars().all(|c| c.is_ascii_digit()),
        "--price must be a non-negative decimal number such as 0.0004"
    );
    anyhow::ensure!(fraction.len() <= 6, "--price has at most six decimals");
    let whole: i64 = if whole.is_empty() {
        0
    } else {
        whole.parse().context("--price is too large")?
    };
    let fraction: i64 = format!("{fraction:0<6}").parse().unwrap_or(0);
    whole
        .checked_mul(1_000_000)
        .and_then(|micros| micros.checked_add(fraction))
        .context("--price is too large")
}

pub async fn set_price_command(arguments: SetPriceArgs) -> Result<()> {
    let unit = UsageUnit::parse(&arguments.unit).with_context(|| {
        format!(
            "--unit must be one of {}",
            UsageUnit::ALL.map(UsageUnit::as_str).join(", ")
        )
    })?;
    let unit_price_micros = parse_price_micros(&arguments.price)?;
    let currency = arguments.currency.trim().to_uppercase();
    anyhow::ensure!(
        currency.len() == 3 && currency.chars().all(|c| c.is_ascii_alphabetic()),
        "--currency must be a three-letter ISO 4217 code such as USD"
    );
    let effective_from = match &arguments.effective_from {
        Some(text) => chrono::NaiveDate::parse_from_str(text.trim(), "%Y-%m-%d")
            .context("--effective-from must be a date as YYYY-MM-DD")?,
        None => chrono::Utc::now().date_naive(),
    }
    .and_hms_opt(0, 0, 0)
    .map(|midnight| midnight.and_utc())
    .context("invalid date")?;
    let organization_id = match &arguments.organization_id {
        Some(text) => Some(
            text.parse::<engram_core::OrganizationId>()
                .map_err(|_| anyhow::anyhow!("--organization-id is not an organization id"))?,
        ),
        None => None,
    };
    let database_url = crate::config::database_url_for(
        crate::config::exposed(&arguments.database_url).as_deref(),
        &arguments.data_dir,
    );
    let storage = crate::config::open_sealed_storage(
        &database_url,
        arguments.allow_unsafe_durability,
        &arguments.data_dir,
        None,
    )
    .await?;
    let entry = PriceEntry {
        organization_id,
        unit,
        currency: currency.clone(),
        unit_price_micros,
        effective_from,
    };
    crate::config::retry_while_busy("adding the price", || storage.add_price(&entry)).await?;
    println!(
        "{}",
        serde_json::json!({
            "unit": unit.as_str(),
            "currency": currency,
            "unit_price_micros": unit_price_micros,
            "effective_from": effective_from.date_naive().to_string(),
            "organization_id": organization_id.map(|id| id.to_string()),
        })
    );
    Ok(())
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
