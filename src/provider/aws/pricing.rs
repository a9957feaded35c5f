//! AWS list prices from the Price List Query API (`GetProducts`, its endpoint in us-east-1
//! whatever the stack's region): one call per service and region the rates need, all at once, each
//! filtered so that only the records forge prices by match — EC2 instances Linux, shared
//! tenancy, no pre-installed software, capacity status `Used` (not a reservation's), all the
//! stack's instance types in one `ANY_OF` — and each record's On-Demand term read (never a
//! Reserved one).

use crate::cost::{Prices, Rate};
use aws_sdk_pricing::types::{Filter, FilterType};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// The one region of the Price List API's endpoints that forge calls.
const ENDPOINT_REGION: &str = "us-east-1";

/// How long one price call may take before the plan goes on without prices.
const CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The AWS prices of `rates` (those of other clouds are left alone). A price list that
/// cannot be read makes one line in [`Prices::unavailable`]; a price it does not hold, an
/// entry in [`Prices::missing`].
pub async fn prices(sdk: &aws_config::SdkConfig, rates: &BTreeSet<Rate>) -> Prices {
    let config = aws_sdk_pricing::config::Builder::from(sdk)
        .region(aws_config::Region::new(ENDPOINT_REGION))
        .timeout_config(
            aws_config::timeout::TimeoutConfig::builder()
                .operation_timeout(CALL_TIMEOUT)
                .build(),
        )
        .build();
    let client = aws_sdk_pricing::Client::from_conf(config);
    let mut prices = Prices::default();
    // The questions at once: a plan waits for one round of calls, not one per service.
    let questions = queries(rates).into_iter().map(|(query, wanted)| {
        let client = &client;
        async move { (products(client, &query).await, wanted) }
    });
    for (answer, wanted) in futures::future::join_all(questions).await {
        match answer {
            Ok(records) => {
                for rate in wanted {
                    match records.iter().find_map(|record| price_of(&rate, record)) {
                        Some(usd) => {
                            prices.found.insert(rate, usd);
                        }
                        None => {
                            let asked = asked(&rate);
                            prices.missing.insert(rate, asked);
                        }
                    }
                }
            }
            // One line for the list, however many of its questions failed.
            Err(why) if prices.unavailable.is_empty() => prices.unavailable.push(format!("the AWS Price List API answered {why}")),
            Err(_) => {}
        }
    }
    prices
}

/// One `GetProducts` question: a service code and its filters (field, type, value).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Query {
    service: &'static str,
    filters: Vec<(&'static str, FilterKind, String)>,
}

/// The filter types forge uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum FilterKind {
    TermMatch,
    AnyOf,
}

/// The questions that price `rates`: one per service and region, the rates each answers.
fn queries(rates: &BTreeSet<Rate>) -> BTreeMap<Query, Vec<Rate>> {
    let mut types: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut queries: BTreeMap<Query, Vec<Rate>> = BTreeMap::new();
    let term = |field, value: &str| (field, FilterKind::TermMatch, value.to_owned());
    for rate in rates {
        let query = match rate {
            Rate::Ec2Instance { region, instance_type } => {
                types.entry(region).or_default().insert(instance_type);
                continue;
            }
            Rate::EksCluster { region, .. } => Query {
                service: "AmazonEKS",
                filters: vec![term("regionCode", region)],
            },
            Rate::NatGateway { region } => Query {
                service: "AmazonEC2",
                filters: vec![term("regionCode", region), term("productFamily", "NAT Gateway")],
            },
            Rate::FsxLustre { region, .. } => Query {
                service: "AmazonFSx",
                filters: vec![term("regionCode", region), term("fileSystemType", "Lustre")],
            },
            Rate::EfsStorage { region } => Query {
                service: "AmazonEFS",
                filters: vec![term("regionCode", region), term("storageClass", "General Purpose")],
            },
            _ => continue,
        };
        queries.entry(query).or_default().push(rate.clone());
    }
    for (region, wanted) in types {
        let query = Query {
            service: "AmazonEC2",
            filters: vec![
                term("regionCode", region),
                (
                    "instanceType",
                    FilterKind::AnyOf,
                    wanted.iter().copied().collect::<Vec<_>>().join(","),
                ),
                term("operatingSystem", "Linux"),
                term("tenancy", "Shared"),
                term("preInstalledSw", "NA"),
                term("capacitystatus", "Used"),
            ],
        };
        let rates = wanted
            .iter()
            .map(|t| Rate::Ec2Instance {
                region: region.to_owned(),
                instance_type: (*t).to_owned(),
            })
            .collect();
        queries.insert(query, rates);
    }
    queries
}

/// Every record `query` matches, over all pages, parsed; or what went wrong.
async fn products(client: &aws_sdk_pricing::Client, query: &Query) -> Result<Vec<Value>, String> {
    let filters = query
        .filters
        .iter()
        .map(|(field, kind, value)| {
            let kind = match kind {
                FilterKind::TermMatch => FilterType::TermMatch,
                FilterKind::AnyOf => FilterType::AnyOf,
            };
            Filter::builder()
                .field(*field)
                .r#type(kind)
                .value(value)
                .build()
                .expect("filters have every field")
        })
        .collect();
    let mut pages = client
        .get_products()
        .service_code(query.service)
        .format_version("aws_v1")
        .set_filters(Some(filters))
        .into_paginator()
        .send();
    let mut records = Vec::new();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| {
            use aws_sdk_pricing::error::ProvideErrorMetadata;
            match (e.code(), e.message()) {
                (Some(code), Some(message)) => format!("{code}: {message}"),
                (Some(code), None) => code.to_owned(),
                _ => aws_sdk_pricing::error::DisplayErrorContext(&e).to_string(),
            }
        })?;
        for item in page.price_list() {
            records.push(serde_json::from_str(item).map_err(|e| format!("a PriceList item that is not JSON ({e})"))?);
        }
    }
    Ok(records)
}

/// The attribute `name` of a record's product.
fn attribute<'r>(record: &'r Value, name: &str) -> Option<&'r str> {
    record.pointer(&format!("/product/attributes/{name}"))?.as_str()
}

/// The USD price of `rate` in `record`, when the record is that rate's: its On-Demand term's
/// first price dimension.
fn price_of(rate: &Rate, record: &Value) -> Option<f64> {
    let usage = attribute(record, "usagetype").unwrap_or_default();
    let matches = match rate {
        Rate::Ec2Instance { instance_type, .. } => attribute(record, "instanceType") == Some(instance_type),
        Rate::EksCluster { extended_support, .. } => usage.ends_with(if *extended_support {
            "AmazonEKS-Hours:extendedSupport"
        } else {
            "AmazonEKS-Hours:perCluster"
        }),
        Rate::NatGateway { .. } => usage.ends_with("NatGateway-Hours"),
        Rate::FsxLustre {
            deployment, throughput, ..
        } => {
            attribute(record, "deploymentOption").is_some_and(|d| d.eq_ignore_ascii_case(deployment))
                && attribute(record, "throughputCapacity") == Some(throughput.to_string().as_str())
                && attribute(record, "storageType") == Some("SSD")
        }
        Rate::EfsStorage { .. } => usage == "TimedStorage-ByteHrs" || usage.ends_with("-TimedStorage-ByteHrs"),
        _ => false,
    };
    if !matches {
        return None;
    }
    let term = record.pointer("/terms/OnDemand")?.as_object()?.values().next()?;
    let dimension = term.get("priceDimensions")?.as_object()?.values().next()?;
    // A record at $0 (a type sold only reserved) or not a number is no price.
    let usd: f64 = dimension.pointer("/pricePerUnit/USD")?.as_str()?.parse().ok()?;
    (usd.is_finite() && usd > 0.0).then_some(usd)
}

/// What was asked, for a price the list does not hold.
fn asked(rate: &Rate) -> String {
    match rate {
        Rate::Ec2Instance { region, instance_type } => format!("Linux on-demand {instance_type} in {region}"),
        Rate::EksCluster { region, extended_support } => {
            format!(
                "EKS {} cluster hour in {region}",
                if *extended_support { "extended-support" } else { "standard" }
            )
        }
        Rate::NatGateway { region } => format!("NAT gateway hour in {region}"),
        Rate::FsxLustre {
            region,
            deployment,
            throughput,
        } => format!("FSx for Lustre {deployment} {throughput} MB/s/TiB storage in {region}"),
        Rate::EfsStorage { region } => format!("EFS Standard storage in {region}"),
        other => other.key(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_instance_types_of_a_region_are_asked_in_one_call() {
        let rates = BTreeSet::from([
            Rate::Ec2Instance {
                region: "us-west-2".into(),
                instance_type: "p5.48xlarge".into(),
            },
            Rate::Ec2Instance {
                region: "us-west-2".into(),
                instance_type: "c5.2xlarge".into(),
            },
            Rate::NatGateway {
                region: "us-west-2".into(),
            },
            Rate::EksCluster {
                region: "us-west-2".into(),
                extended_support: true,
            },
            Rate::EksCluster {
                region: "us-west-2".into(),
                extended_support: false,
            },
        ]);
        let queries = queries(&rates);
        assert_eq!(queries.len(), 3);
        let ec2 = queries.keys().find(|q| q.filters.iter().any(|f| f.0 == "instanceType")).unwrap();
        assert!(
            ec2.filters
                .contains(&("instanceType", FilterKind::AnyOf, "c5.2xlarge,p5.48xlarge".into()))
        );
    }
}
