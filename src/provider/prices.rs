//! The list prices a cost needs ([`crate::cost`]): the fresh ones from the cache, the rest from
//! each cloud's price list (one listing per service and region), recorded in the cache.

use super::Cloud;
use crate::cost::cache::PriceCache;
use crate::cost::{Prices, Rate};
use std::collections::BTreeSet;

/// The prices of `rates`. Never fails: a price list that cannot be read says why in
/// [`Prices::unavailable`], and its rates stay unknown.
pub async fn prices(cloud: &Cloud, rates: &BTreeSet<Rate>) -> Prices {
    let now = std::time::SystemTime::now();
    let mut cache = match PriceCache::load() {
        Ok(cache) => cache,
        Err(why) => {
            return Prices {
                unavailable: vec![why],
                ..Default::default()
            };
        }
    };
    let (aws, google) = endpoints(cloud, rates).await;
    let source = |rate: &Rate| match rate.cloud() {
        crate::cost::Cloud::Aws => aws.clone(),
        crate::cost::Cloud::Google => google.clone(),
    };
    let (mut prices, stale) = cache.fresh(rates, now, &source);
    if stale.is_empty() {
        return prices;
    }
    let mut answered = Prices::default();
    let wants = |cloud| stale.iter().any(|r| r.cloud() == cloud);
    if wants(crate::cost::Cloud::Aws) {
        #[cfg(feature = "aws")]
        answered.merge(super::aws::pricing::prices(&cloud.aws().await.sdk, &stale).await);
        #[cfg(not(feature = "aws"))]
        answered.unavailable.push("this forge is built without AWS".into());
    }
    if wants(crate::cost::Cloud::Google) {
        #[cfg(feature = "gcp")]
        answered.merge(super::gcp::billing::prices(cloud.settings.gcp.as_ref(), &stale).await);
        #[cfg(not(feature = "gcp"))]
        answered.unavailable.push("this forge is built without Google Cloud".into());
    }
    cache.record(&answered, now, &source);
    if !answered.found.is_empty() {
        answered.fetched = Some(humantime::format_rfc3339_seconds(now).to_string()[..10].to_owned());
    }
    prices.merge(answered);
    prices
}

/// The endpoints of the AWS and Google price lists, as the clients will call them: what the
/// cache keeps each price under (AWS's read only when `rates` need it: it loads AWS's
/// configuration).
#[cfg_attr(not(any(feature = "aws", feature = "gcp")), allow(unused_variables))]
async fn endpoints(cloud: &Cloud, rates: &BTreeSet<Rate>) -> (String, String) {
    #[cfg(feature = "aws")]
    let aws = if !rates.iter().any(|r| r.cloud() == crate::cost::Cloud::Aws) {
        String::new()
    } else if let Some(url) = std::env::var("AWS_ENDPOINT_URL_PRICING").ok().filter(|v| !v.is_empty()) {
        url
    } else {
        let sdk = &cloud.aws().await.sdk;
        sdk.endpoint_url()
            .unwrap_or("https://api.pricing.us-east-1.amazonaws.com")
            .to_owned()
    };
    #[cfg(not(feature = "aws"))]
    let aws = String::new();
    #[cfg(feature = "gcp")]
    let google = super::gcp::endpoint(cloud.settings.gcp.as_ref(), "cloudbilling");
    #[cfg(not(feature = "gcp"))]
    let google = String::new();
    (aws, google)
}
