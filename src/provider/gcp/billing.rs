//! Google Cloud list prices from the Cloud Billing Catalog API: the SKUs of each service the
//! rates need (Compute Engine, Kubernetes Engine, Filestore), listed once and all at once, and the rates read
//! from them — the on-demand SKU of the rate's machine family, GPU or tier that serves its
//! region, never a Spot, commitment or Dynamic Workload Scheduler one.

use crate::cost::{Prices, Rate};
use google_cloud_billing_v1::model::Sku;
use std::collections::{BTreeMap, BTreeSet};

/// Compute Engine's service in the catalogue.
const COMPUTE: &str = "6F81-5844-456A";
/// Kubernetes Engine's.
const GKE: &str = "CCD8-9BF1-090E";
/// Filestore's.
const FILESTORE: &str = "D97E-AB26-5D95";

/// The Google prices of `rates` (those of other clouds are left alone), as
/// [`crate::provider::aws::pricing::prices`] gives AWS's.
pub async fn prices(settings: Option<&crate::provider::settings::GcpSettings>, rates: &BTreeSet<Rate>) -> Prices {
    let mut prices = Prices::default();
    let mut services: BTreeMap<&str, Vec<&Rate>> = BTreeMap::new();
    for rate in rates {
        let service = match rate {
            Rate::GceCore { .. } | Rate::GceRam { .. } | Rate::GceGpu { .. } => COMPUTE,
            Rate::GkeCluster { .. } => GKE,
            Rate::Filestore { .. } => FILESTORE,
            _ => continue,
        };
        services.entry(service).or_default().push(rate);
    }
    if services.is_empty() {
        return prices;
    }
    if tokio::time::timeout(LISTING_TIMEOUT, read(settings, services, &mut prices))
        .await
        .is_err()
    {
        prices.unavailable.push(format!(
            "the Cloud Billing Catalog API did not answer within {}s",
            LISTING_TIMEOUT.as_secs()
        ));
    }
    prices
}

/// How long listing the SKUs may take before the plan goes on without them.
const LISTING_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// Reads the prices of each service's rates into `prices`.
async fn read(settings: Option<&crate::provider::settings::GcpSettings>, services: BTreeMap<&str, Vec<&Rate>>, prices: &mut Prices) {
    let catalog = match catalog(settings).await {
        Ok(catalog) => catalog,
        Err(why) => {
            prices.unavailable.push(why);
            return;
        }
    };
    // Every service's SKUs at once: a plan waits for the longest listing, not their sum.
    let listings = services.into_iter().map(|(service, wanted)| {
        let catalog = &catalog;
        async move { (skus(catalog, service).await, wanted) }
    });
    for (listed, wanted) in futures::future::join_all(listings).await {
        let skus = match listed {
            Ok(skus) => skus,
            Err(why) => {
                if prices.unavailable.is_empty() {
                    prices.unavailable.push(format!("the Cloud Billing Catalog API answered {why}"));
                }
                continue;
            }
        };
        for rate in wanted {
            match skus.iter().find(|sku| is_for(sku, rate)).and_then(|sku| unit_price(sku, rate)) {
                Some(usd) => {
                    prices.found.insert(rate.clone(), usd);
                }
                None => {
                    prices.missing.insert(rate.clone(), asked(rate));
                }
            }
        }
    }
}

/// The Catalog client: the endpoint `[gcp] endpoints.cloudbilling` or
/// `CLOUDSDK_API_ENDPOINT_OVERRIDES_CLOUDBILLING`, Google's credentials.
async fn catalog(
    settings: Option<&crate::provider::settings::GcpSettings>,
) -> Result<google_cloud_billing_v1::client::CloudCatalog, String> {
    let credentials = super::credentials()?;
    google_cloud_billing_v1::client::CloudCatalog::builder()
        .with_endpoint(super::endpoint(settings, "cloudbilling"))
        .with_credentials(credentials)
        .with_retry_policy(google_cloud_gax::retry_policy::NeverRetry)
        .build()
        .await
        .map_err(|e| format!("cannot make the Cloud Billing Catalog client: {e}"))
}

/// Every SKU of `service`, over all pages.
async fn skus(catalog: &google_cloud_billing_v1::client::CloudCatalog, service: &str) -> Result<Vec<Sku>, String> {
    use google_cloud_gax::paginator::Paginator;
    let mut pages = catalog
        .list_skus()
        .set_parent(format!("services/{service}"))
        .set_page_size(5000)
        .by_page();
    let mut skus = Vec::new();
    while let Some(page) = pages.next().await {
        skus.extend(page.map_err(|e| e.to_string())?.skus);
    }
    Ok(skus)
}

/// Whether `sku` is the on-demand price of `rate` in its region.
fn is_for(sku: &Sku, rate: &Rate) -> bool {
    let on_demand = sku.category.as_ref().is_some_and(|c| c.usage_type == "OnDemand") && !sku.description.contains("DWS");
    let serves = |region: &str| sku.service_regions.iter().any(|r| r == region);
    let text = sku.description.as_str();
    on_demand
        && match rate {
            Rate::GceCore { region, family } => serves(region) && text.starts_with(&format!("{family} Instance Core running in ")),
            Rate::GceRam { region, family } => serves(region) && text.starts_with(&format!("{family} Instance Ram running in ")),
            Rate::GceGpu { region, gpu } => serves(region) && text.starts_with(&format!("{gpu} running in ")),
            // The cluster fee is the same everywhere: its SKUs serve `global`.
            Rate::GkeCluster { region } => {
                (serves(region) || serves("global")) && matches!(text, "Regional Kubernetes Clusters" | "Zonal Kubernetes Clusters")
            }
            Rate::Filestore { region, tier } => {
                serves(region) && tier_name(tier).is_some_and(|name| text.starts_with(&format!("Filestore Capacity {name}")))
            }
            _ => false,
        }
}

/// A Filestore tier as its capacity SKUs name it: Basic HDD is `Standard`, Basic SSD
/// `Premium`, Regional and Enterprise share one (https://cloud.google.com/filestore/pricing).
fn tier_name(tier: &str) -> Option<&'static str> {
    match tier {
        "BASIC_HDD" | "STANDARD" => Some("Standard"),
        "BASIC_SSD" | "PREMIUM" => Some("Premium"),
        "ZONAL" | "HIGH_SCALE_SSD" => Some("Zonal and High Scale"),
        "REGIONAL" | "ENTERPRISE" => Some("Regional and Enterprise"),
        _ => None,
    }
}

/// The SKU's first tier's unit price in USD (`units` + `nanos`) per the rate's unit: a
/// Filestore SKU billed by the GiB-hour is turned into GiB-months; a SKU in a unit forge does
/// not expect for the rate has no price.
fn unit_price(sku: &Sku, rate: &Rate) -> Option<f64> {
    let expression = sku.pricing_info.first()?.pricing_expression.as_ref()?;
    // The first tier that costs anything (a free first tier is not the rate).
    let tier = expression
        .tiered_rates
        .iter()
        .find(|t| t.unit_price.as_ref().is_some_and(|m| m.units > 0 || m.nanos > 0))?;
    let money = tier.unit_price.as_ref().filter(|m| m.currency_code == "USD")?;
    let usd = money.units as f64 + f64::from(money.nanos) / 1e9;
    let per = match (rate, expression.usage_unit.as_str()) {
        (Rate::Filestore { .. }, "GiBy.mo") | (Rate::GceRam { .. }, "GiBy.h") => 1.0,
        (Rate::Filestore { .. }, "GiBy.h") => crate::cost::HOURS_PER_MONTH,
        (Rate::GceCore { .. } | Rate::GceGpu { .. } | Rate::GkeCluster { .. }, "h") => 1.0,
        _ => return None,
    };
    Some(usd * per)
}

/// What was asked, for a price the catalogue does not hold.
fn asked(rate: &Rate) -> String {
    match rate {
        Rate::GceCore { region, family } => format!("on-demand {family} core SKU in {region}"),
        Rate::GceRam { region, family } => format!("on-demand {family} RAM SKU in {region}"),
        Rate::GceGpu { region, gpu } => format!("on-demand {gpu} SKU in {region}"),
        Rate::GkeCluster { region } => format!("GKE cluster fee in {region}"),
        Rate::Filestore { region, tier } => format!("Filestore {tier} capacity SKU in {region}"),
        other => other.key(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_read_as_the_catalogue_names_them() {
        assert_eq!(tier_name("BASIC_HDD"), Some("Standard"));
        assert_eq!(tier_name("ENTERPRISE"), Some("Regional and Enterprise"));
        assert_eq!(tier_name(""), None);
    }
}
