//! What a stack costs to run: each kind's [`Meter`] (what one resource is billed for, an
//! hour) priced from the clouds' own price lists, summed per resource and per stack, for the
//! plan's cost section and `forge cost`. SDK-free: the prices come in as [`Prices`] (read by
//! `provider::pricing` through the disk [`cache`]).

pub mod cache;
pub mod gce;
pub mod render;
pub mod view;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// The hours in a month, as AWS and Google turn monthly rates into hourly ones.
pub const HOURS_PER_MONTH: f64 = 730.0;

/// One list price forge looks up: what is billed, and where. Each variant names its unit.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(tag = "rate", rename_all = "snake_case")]
pub enum Rate {
    /// USD an EC2 instance hour: Linux, shared tenancy, on demand.
    Ec2Instance {
        /// The AWS region (`us-west-2`).
        region: String,
        /// `p5.48xlarge`.
        instance_type: String,
    },
    /// USD an EKS cluster hour; with `extended_support`, the surcharge AWS bills on top of it
    /// for a version past standard support.
    EksCluster {
        /// The AWS region.
        region: String,
        /// The extended-support surcharge, not the cluster hour.
        extended_support: bool,
    },
    /// USD a NAT gateway hour (the data it processes is billed apart, by the GB).
    NatGateway {
        /// The AWS region.
        region: String,
    },
    /// USD a GB-month of FSx for Lustre SSD storage.
    FsxLustre {
        /// The AWS region.
        region: String,
        /// `PERSISTENT_2`, `PERSISTENT_1`, `SCRATCH_2`.
        deployment: String,
        /// MB/s per TiB (a scratch file system's fixed 200).
        throughput: i64,
    },
    /// USD a GB-month of EFS Standard storage.
    EfsStorage {
        /// The AWS region.
        region: String,
    },
    /// USD a vCPU hour of a Compute Engine machine family, on demand.
    GceCore {
        /// The Google Cloud region (`us-central1`).
        region: String,
        /// The family as the price list names it (`A3`, `A3Plus`, `E2`).
        family: String,
    },
    /// USD a GiB-hour of a machine family's memory, on demand.
    GceRam {
        /// The Google Cloud region.
        region: String,
        /// The family as the price list names it.
        family: String,
    },
    /// USD a GPU hour, on demand.
    GceGpu {
        /// The Google Cloud region.
        region: String,
        /// The GPU as the price list names it (`Nvidia H100 80GB GPU`).
        gpu: String,
    },
    /// USD a GKE cluster hour (the cluster management fee).
    GkeCluster {
        /// The Google Cloud region.
        region: String,
    },
    /// USD a GiB-month of Filestore capacity.
    Filestore {
        /// The Google Cloud region.
        region: String,
        /// `BASIC_HDD`, `BASIC_SSD`, `ZONAL`, `REGIONAL`, `ENTERPRISE`.
        tier: String,
    },
}

/// The cloud whose price list holds a rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Cloud {
    /// The AWS Price List Query API.
    Aws,
    /// The Google Cloud Billing Catalog API.
    Google,
}

impl Rate {
    /// Whose price list holds it.
    pub fn cloud(&self) -> Cloud {
        match self {
            Rate::Ec2Instance { .. }
            | Rate::EksCluster { .. }
            | Rate::NatGateway { .. }
            | Rate::FsxLustre { .. }
            | Rate::EfsStorage { .. } => Cloud::Aws,
            _ => Cloud::Google,
        }
    }

    /// Its unit, as prices are shown (`h`, `GB-month`).
    pub fn unit(&self) -> &'static str {
        match self {
            Rate::FsxLustre { .. } | Rate::EfsStorage { .. } => "GB-month",
            Rate::Filestore { .. } => "GiB-month",
            Rate::GceCore { .. } => "vCPU-hour",
            Rate::GceRam { .. } => "GiB-hour",
            Rate::GceGpu { .. } => "GPU-hour",
            _ => "hour",
        }
    }

    /// The rate as one line: the cache's key and what a missing price names.
    pub fn key(&self) -> String {
        serde_json::to_string(self).expect("rates serialize")
    }
}

/// How many of a resource run: the fewest, as planned, the most (an autoscaled node group's
/// min, desired and max; 1, 1, 1 for anything else).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Count {
    /// The fewest.
    pub min: u32,
    /// As planned (a node group's desired size).
    pub planned: u32,
    /// The most.
    pub max: u32,
}

impl Count {
    /// Exactly one.
    pub const ONE: Count = Count {
        min: 1,
        planned: 1,
        max: 1,
    };
}

/// What one resource is billed for, as its kind reads its attributes.
#[derive(Debug, Clone, PartialEq)]
pub enum Meter {
    /// Billed by the hour: `count` times the sum of each rate × its units an hour.
    Hourly {
        /// What it is, in a few words (`p5.48xlarge`, `1200 GB PERSISTENT_2 at 250 MB/s/TiB`).
        what: String,
        /// Each rate with how many of its units one of the resource uses an hour.
        parts: Vec<(Rate, f64)>,
        /// How many run.
        count: Count,
        /// Spot (or flex-start) capacity: the on-demand price is only what it costs at most.
        upper_bound: Option<String>,
    },
    /// Billed by use forge cannot know (the data an EFS file system holds): the rate is shown,
    /// nothing is counted.
    ByUse {
        /// What is billed.
        what: String,
        /// Its rate.
        rate: Rate,
    },
    /// Paid for apart (instances on a Capacity Block, paid up front): nothing an hour.
    Prepaid {
        /// By what.
        by: String,
    },
    /// Costs money forge does not price yet: listed as unknown, never counted as zero.
    Unpriced {
        /// Why.
        reason: String,
    },
}

impl Meter {
    /// The meter of what cannot be priced before apply: its `what` is known only then.
    pub fn after_apply(what: &str) -> Meter {
        Meter::Unpriced {
            reason: format!("its {what} is known only after apply"),
        }
    }
}

/// What a kind may read to meter one resource: its attributes (and outputs, once made), the
/// stack's AWS region, and attributes of the resources its own refer to.
pub struct Sight<'a> {
    /// The attributes as known (`null`: known after apply).
    pub config: &'a Value,
    /// What the cloud returned, for a resource already made.
    pub outputs: Option<&'a Value>,
    /// The region of the stack's AWS kinds (`[aws] region`, else the standard chain's).
    pub aws_region: Option<&'a str>,
    /// `follow(key, attribute)`: `attribute` of the resource this one's `key` refers to.
    pub follow: &'a dyn Fn(&str, &str) -> Option<Value>,
}

impl Sight<'_> {
    /// The attribute `key` when known (not `null`, not missing).
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.config.get(key).filter(|v| !v.is_null())
    }

    /// The text attribute `key` when known.
    pub fn text(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Value::as_str)
    }

    /// The whole-number attribute `key` when known.
    pub fn number(&self, key: &str) -> Option<i64> {
        self.get(key).and_then(Value::as_i64)
    }

    /// The text output `key`, for a resource already made.
    pub fn output(&self, key: &str) -> Option<&str> {
        self.outputs?.get(key)?.as_str()
    }

    /// Whether any of `keys` is known only after apply (`null`), as opposed to left out.
    pub fn unknown(&self, keys: &[&str]) -> bool {
        keys.iter().any(|k| self.config.get(*k).is_some_and(Value::is_null))
    }

    /// An instance group's meter when something else bills its instances: the Capacity Block
    /// it runs on (`on_block`), or the capacity reservation its launch template targets.
    pub fn prepaid(&self, on_block: bool) -> Option<Meter> {
        let by = if on_block {
            "its Capacity Block"
        } else {
            (self.follow)("launch_template_id", "capacity_reservation_id")?;
            "its capacity reservation"
        };
        Some(Meter::Prepaid { by: by.into() })
    }

    /// `meter(region)` in the stack's AWS region, or why nothing is priced without one.
    pub fn in_aws_region(&self, meter: impl FnOnce(String) -> Meter) -> Meter {
        match self.aws_region {
            Some(region) => meter(region.to_owned()),
            None => Meter::Unpriced {
                reason: "no AWS region: set `region` in `[aws]`, AWS_REGION or the profile's region".into(),
            },
        }
    }
}

/// An EC2 instance group's meter: `count` instances of the first of `types` (one
/// `instance_types` list prices as its first), on demand or, for spot, at most that.
pub fn ec2_instances(region: String, types: &[String], count: Count, spot: bool) -> Meter {
    let Some(first) = types.first() else {
        return Meter::Unpriced {
            reason: "its instance type is known only after apply".into(),
        };
    };
    let what = match types.len() {
        1 => first.clone(),
        n => format!("{first} (first of {n} types)"),
    };
    Meter::Hourly {
        what,
        parts: vec![(
            Rate::Ec2Instance {
                region,
                instance_type: first.clone(),
            },
            1.0,
        )],
        count,
        upper_bound: spot.then(|| "spot, priced on demand".to_owned()),
    }
}

/// The `min`, `desired` (else `min`) and `max` of a `scaling` table, when all are known.
pub fn scaling(table: Option<&Value>) -> Option<Count> {
    let field = |key: &str| table?.get(key)?.as_u64().and_then(|n| u32::try_from(n).ok());
    let (min, max) = (field("min")?, field("max")?);
    Some(Count {
        min,
        planned: field("desired").unwrap_or(min),
        max,
    })
}

/// The region a Google location is in: `us-central1-a` → `us-central1`; a region is itself.
pub fn google_region(location: &str) -> String {
    let parts: Vec<&str> = location.split('-').collect();
    match parts.as_slice() {
        [.., last] if parts.len() >= 3 && last.len() == 1 => parts[..parts.len() - 1].join("-"),
        _ => location.to_owned(),
    }
}

/// The prices of a set of rates, as the price lists (or the cache) gave them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Prices {
    /// USD per the rate's unit.
    pub found: BTreeMap<Rate, f64>,
    /// Rates the price list answered for and holds no price of, with what was asked.
    pub missing: BTreeMap<Rate, String>,
    /// Why a cloud's prices could not be read at all (offline, no permission), one line each.
    pub unavailable: Vec<String>,
    /// When the oldest price used was fetched (`YYYY-MM-DD`).
    pub fetched: Option<String>,
}

impl Prices {
    /// Adds what `other` holds; the older fetch date is kept.
    pub fn merge(&mut self, other: Prices) {
        self.found.extend(other.found);
        self.missing.extend(other.missing);
        self.unavailable.extend(other.unavailable);
        self.fetched = match (self.fetched.take(), other.fetched) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}

/// One resource's cost line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Line {
    /// Its address.
    pub address: String,
    /// Its kind.
    pub kind: String,
    /// What is billed, with its count and unit prices (`2 × p5.48xlarge at $55.04/h`).
    pub what: String,
    /// USD an hour as planned; `None` when unknown or not counted.
    pub hourly: Option<f64>,
    /// USD an hour at its fewest and most (an autoscaled node group's min and max).
    pub range: Option<(f64, f64)>,
    /// The hourly price is only an upper bound (spot, flex-start), and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upper_bound: Option<String>,
    /// Why it is not counted (unknown price, billed by use, prepaid).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_counted: Option<String>,
}

/// How a line whose price is unknown says why it is not counted (`price unknown: …`).
const UNKNOWN: &str = "price unknown";

impl Line {
    /// Whether its price is unknown (listed, never counted as zero), as opposed to counted,
    /// billed by use or prepaid.
    pub fn is_unknown(&self) -> bool {
        self.hourly.is_none() && self.not_counted.as_deref().is_some_and(|why| why.starts_with(UNKNOWN))
    }
}

/// What a set of resources costs an hour: each one's line and their total.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// One line per metered resource, by address.
    pub resources: Vec<Line>,
    /// USD an hour, as planned.
    pub hourly: f64,
    /// USD an hour at the fewest and the most.
    pub range: (f64, f64),
    /// Resources whose price is unknown: not in the total.
    pub unknown: usize,
}

impl Estimate {
    /// Prices each metered resource (`(address, kind, meter)`) with `prices`.
    pub fn of(metered: &[view::Metered], prices: &Prices) -> Estimate {
        let mut estimate = Estimate::default();
        for (address, kind, meter) in metered {
            let line = priced(address, kind, meter, prices);
            match line.hourly {
                Some(hourly) => {
                    let (low, high) = line.range.unwrap_or((hourly, hourly));
                    estimate.hourly += hourly;
                    estimate.range.0 += low;
                    estimate.range.1 += high;
                }
                None if line.is_unknown() => estimate.unknown += 1,
                None => {}
            }
            estimate.resources.push(line);
        }
        estimate
    }
}

/// The cost section of a plan: what the stack runs once applied, and what the plan changes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PlanCost {
    /// What the stack runs once the plan is applied.
    pub after: Estimate,
    /// USD an hour the stack runs before it (what the state holds).
    pub before_hourly: f64,
    /// USD an hour the plan adds (negative: saves).
    pub change_hourly: f64,
    /// USD the plan's purchases charge up front (Capacity Blocks), non-refundable.
    pub upfront: f64,
    /// When the oldest price used was fetched (`YYYY-MM-DD`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetched: Option<String>,
    /// Why prices could not be read (offline, no permission), one line per price list.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unavailable: Vec<String>,
}

impl PlanCost {
    /// The plan's cost from what the state runs (`before`) and what the stack will run
    /// (`after`), priced with `prices`, and what its purchases charge up front.
    pub fn new(before: &[view::Metered], after: &[view::Metered], prices: &Prices, upfront: f64) -> PlanCost {
        let before = Estimate::of(before, prices);
        let after = Estimate::of(after, prices);
        PlanCost {
            change_hourly: change(&before, &after),
            before_hourly: before.hourly,
            after,
            upfront,
            fetched: prices.fetched.clone(),
            unavailable: prices.unavailable.clone(),
        }
    }
}

/// What going from `before` to `after` changes an hour, resource by resource: one that is
/// added or removed counts whole, one whose price is unknown on either side not at all (it is
/// listed as unknown), so an unknown price never shows as a saving or a cost.
fn change(before: &Estimate, after: &Estimate) -> f64 {
    let priced = |estimate: &Estimate| -> BTreeMap<String, Option<f64>> {
        estimate
            .resources
            .iter()
            .filter(|l| l.hourly.is_some() || l.is_unknown())
            .map(|l| (l.address.clone(), l.hourly))
            .collect()
    };
    let (before, after) = (priced(before), priced(after));
    let addresses: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    addresses
        .into_iter()
        .map(|a| match (before.get(a), after.get(a)) {
            (Some(None), _) | (_, Some(None)) => 0.0,
            (b, a) => a.copied().flatten().unwrap_or(0.0) - b.copied().flatten().unwrap_or(0.0),
        })
        .sum()
}

/// `$55.04`, `$0.045`, `$0.3452`: cents, or up to four places under a dollar.
pub fn dollars(amount: f64) -> String {
    if amount.abs() < 1.0 && amount != 0.0 {
        let text = format!("{amount:.4}");
        let trimmed = text.trim_end_matches('0');
        let places = trimmed.split_once('.').map_or(0, |(_, f)| f.len());
        format!("${trimmed}{}", "0".repeat(2usize.saturating_sub(places)))
    } else {
        format!("${}", thousands(amount, 2))
    }
}

/// `80358.4` → `80,358.40` with `places` decimals, rounded half away from zero (a fee of
/// $0.125 is `0.13`).
pub fn thousands(amount: f64, places: usize) -> String {
    let scale = 10f64.powi(i32::try_from(places).unwrap_or(i32::MAX));
    let text = format!("{:.*}", places, (amount.abs() * scale).round() / scale);
    let (whole, fraction) = text.split_once('.').map_or((text.as_str(), None), |(w, f)| (w, Some(f)));
    let mut grouped = String::new();
    for (i, digit) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    let sign = if amount < 0.0 && text.chars().any(|c| c.is_ascii_digit() && c != '0') {
        "-"
    } else {
        ""
    };
    match fraction {
        Some(f) => format!("{sign}{grouped}.{f}"),
        None => format!("{sign}{grouped}"),
    }
}

fn priced(address: &str, kind: &str, meter: &Meter, prices: &Prices) -> Line {
    let mut line = Line {
        address: address.to_owned(),
        kind: kind.to_owned(),
        what: String::new(),
        hourly: None,
        range: None,
        upper_bound: None,
        not_counted: None,
    };
    match meter {
        Meter::Hourly {
            what,
            parts,
            count,
            upper_bound,
        } => {
            let unknown: Vec<&Rate> = parts
                .iter()
                .map(|(rate, _)| rate)
                .filter(|r| !prices.found.contains_key(*r))
                .collect();
            let units: Vec<String> = parts
                .iter()
                .filter_map(|(rate, _)| Some(format!("{}/{}", dollars(*prices.found.get(rate)?), rate.unit())))
                .collect();
            let counted = if count.min == count.max && count.planned == 1 {
                what.clone()
            } else if count.min == count.max {
                format!("{} × {what}", count.planned)
            } else {
                format!("{} × {what} ({}–{})", count.planned, count.min, count.max)
            };
            line.what = match units.len() {
                0 => counted,
                _ => format!("{counted} at {}", units.join(" + ")),
            };
            if !unknown.is_empty() {
                let mut why: Vec<String> = unknown.iter().map(|r| why_unknown(r, prices)).collect();
                why.dedup();
                line.not_counted = Some(format!("{UNKNOWN}: {}", why.join("; ")));
                return line;
            }
            let one: f64 = parts.iter().map(|(rate, units)| prices.found[rate] * units).sum();
            line.hourly = Some(one * f64::from(count.planned));
            if count.min != count.max {
                line.range = Some((one * f64::from(count.min), one * f64::from(count.max)));
            }
            line.upper_bound.clone_from(upper_bound);
        }
        Meter::ByUse { what, rate } => {
            line.what = match prices.found.get(rate) {
                Some(price) => format!("{what} at {}/{}", dollars(*price), rate.unit()),
                None => what.clone(),
            };
            line.not_counted = Some("billed by use".into());
        }
        Meter::Prepaid { by } => {
            line.what = format!("paid for by {by}");
            line.not_counted = Some("prepaid".into());
        }
        Meter::Unpriced { reason } => {
            line.what = "not priced".into();
            line.not_counted = Some(format!("{UNKNOWN}: {reason}"));
        }
    }
    line
}

/// Why a rate has no price: the price list holds none, or could not be read.
fn why_unknown(rate: &Rate, prices: &Prices) -> String {
    match prices.missing.get(rate) {
        Some(asked) => format!("the price list has no {asked}"),
        None => format!(
            "the {} price list was not read",
            if rate.cloud() == Cloud::Aws { "AWS" } else { "Google" }
        ),
    }
}

/// The rates a set of meters needs priced.
pub fn rates<'m>(meters: impl IntoIterator<Item = &'m Meter>) -> BTreeSet<Rate> {
    let mut rates = BTreeSet::new();
    for meter in meters {
        match meter {
            Meter::Hourly { parts, .. } => rates.extend(parts.iter().map(|(rate, _)| rate.clone())),
            Meter::ByUse { rate, .. } => {
                rates.insert(rate.clone());
            }
            Meter::Prepaid { .. } | Meter::Unpriced { .. } => {}
        }
    }
    rates
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p5() -> Rate {
        Rate::Ec2Instance {
            region: "us-west-2".into(),
            instance_type: "p5.48xlarge".into(),
        }
    }

    fn hourly(count: Count) -> Meter {
        Meter::Hourly {
            what: "p5.48xlarge".into(),
            parts: vec![(p5(), 1.0)],
            count,
            upper_bound: None,
        }
    }

    #[test]
    fn a_node_group_costs_its_size_times_its_price_and_ranges_over_min_to_max() {
        let prices = Prices {
            found: BTreeMap::from([(p5(), 55.04)]),
            ..Default::default()
        };
        let metered = vec![(
            "eks.g".to_owned(),
            "aws_eks_nodegroup".to_owned(),
            hourly(Count {
                min: 1,
                planned: 2,
                max: 4,
            }),
        )];
        let estimate = Estimate::of(&metered, &prices);
        assert_eq!(estimate.hourly, 110.08);
        assert_eq!(estimate.range, (55.04, 220.16));
        assert_eq!(estimate.resources[0].what, "2 × p5.48xlarge (1–4) at $55.04/hour");
    }

    #[test]
    fn an_unknown_price_is_listed_and_never_counted_as_zero() {
        let metered = vec![("eks.g".to_owned(), "aws_eks_nodegroup".to_owned(), hourly(Count::ONE))];
        let estimate = Estimate::of(&metered, &Prices::default());
        assert_eq!(estimate.unknown, 1);
        assert_eq!(estimate.resources[0].hourly, None);
        assert!(
            estimate.resources[0]
                .not_counted
                .as_deref()
                .unwrap()
                .contains("the AWS price list was not read")
        );
    }

    #[test]
    fn money_reads_with_thousands_and_cents() {
        assert_eq!(dollars(80358.4), "$80,358.40");
        assert_eq!(dollars(0.045), "$0.045");
        assert_eq!(dollars(0.6), "$0.60");
        assert_eq!(thousands(-1234.5, 2), "-1,234.50");
        assert_eq!(thousands(0.125, 2), "0.13");
        assert_eq!(google_region("us-central1-a"), "us-central1");
        assert_eq!(google_region("us-central1"), "us-central1");
    }
}
