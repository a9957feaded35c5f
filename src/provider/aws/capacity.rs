//! EC2 Capacity Blocks for ML: the offerings EC2 sells for a type, a size and a duration
//! (`DescribeCapacityBlockOfferings`), checked against EC2's rules before any call so that a
//! request EC2 would refuse says why at once. Blocks are sold by the day from 1 to 14 days, then
//! by the week up to 182; a block holds 1 to 64 instances, or whole UltraServers (P6e-GB200:
//! `u-p6e-gb200x36` of 9 instances or `u-p6e-gb200x72` of 18; Trn2: 4), and starts and ends at
//! 11:30 UTC.

use super::error;
use crate::provider::{Cloud, ProviderError};
use aws_sdk_ec2::primitives::{DateTime, DateTimeFormat as Format};

/// The UltraServers EC2 sells Capacity Blocks of: an instance type of theirs, the UltraServer
/// type EC2 names, and the instances in one.
const ULTRASERVERS: [(&str, &str, u32); 3] = [
    ("p6e-gb200.36xlarge", "u-p6e-gb200x72", 18),
    ("p6e-gb200.36xlarge", "u-p6e-gb200x36", 9),
    ("trn2u.48xlarge", "u-trn2x64", 4),
];

/// The most instances one Capacity Block holds.
const MAX_INSTANCES: u32 = 64;

/// What a search asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The instance type (`p5.48xlarge`; an UltraServer's instance type buys whole UltraServers).
    pub instance_type: String,
    /// How many instances.
    pub count: u32,
    /// How many days.
    pub days: u32,
    /// The earliest start, as RFC 3339 (`2026-12-01T00:00:00Z`).
    pub start_after: Option<String>,
}

/// One offering, as EC2 sells it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Offering {
    /// `cb-…`: what a purchase names.
    pub offering_id: String,
    /// The zone its instances run in.
    pub zone: String,
    /// When it starts (RFC 3339, UTC).
    pub start: String,
    /// When it ends.
    pub end: String,
    /// Its length in hours.
    pub hours: i32,
    /// Its instances.
    pub count: i32,
    /// The fee, charged up front when bought, in `currency`.
    pub upfront_fee: f64,
    /// The fee's currency (`USD`).
    pub currency: String,
    /// The UltraServer type and how many, for an UltraServer offering.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ultraservers: Option<(String, i32)>,
}

/// Why a request is not one EC2 would take: the flag to blame, and what to write instead.
#[derive(Debug, Clone, PartialEq)]
pub struct Refused {
    /// The flag or attribute (`days`).
    pub key: &'static str,
    /// What is wrong.
    pub message: String,
    /// What EC2 takes.
    pub hint: String,
}

impl Request {
    /// The request, checked against EC2's rules: the duration's steps, the block's size, an
    /// UltraServer type's whole UltraServers, a readable start.
    pub fn check(&self) -> Result<(), Refused> {
        let days = self.days;
        let sold = (1..=14).contains(&days) || (days.is_multiple_of(7) && (21..=182).contains(&days));
        if !sold {
            let week = days.div_ceil(7) * 7;
            let near = if days > 182 {
                "182".to_owned()
            } else {
                format!("14 or {}", week.max(21))
            };
            return Err(Refused {
                key: "days",
                message: format!("EC2 sells no Capacity Block of {days} days"),
                hint: format!("blocks last 1 to 14 days, then whole weeks up to 182 days: use {near}"),
            });
        }
        let servers: Vec<(&str, &str, u32)> = ULTRASERVERS.iter().copied().filter(|(t, _, _)| *t == self.instance_type).collect();
        if let Some(smallest) = servers.iter().map(|(_, _, size)| *size).min() {
            if self.ultraservers().is_empty() {
                let kinds: Vec<String> = servers
                    .iter()
                    .map(|(_, ultraserver, size)| format!("whole {ultraserver} UltraServers ({size} instances each)"))
                    .collect();
                return Err(Refused {
                    key: "count",
                    message: format!("{} is not a number of {}", self.count, kinds.join(" or ")),
                    hint: format!("buy whole UltraServers: a count of {smallest}, {}, …", smallest * 2),
                });
            }
        } else if !(1..=MAX_INSTANCES).contains(&self.count) {
            return Err(Refused {
                key: "count",
                message: format!("a Capacity Block holds 1 to {MAX_INSTANCES} instances, not {}", self.count),
                hint: "split a larger fleet into several blocks (EC2 allows 256 instances across an account's blocks)".into(),
            });
        }
        if let Some(start) = &self.start_after {
            start_date(start)?;
        }
        Ok(())
    }

    /// The UltraServers of its instance type that its count is a whole number of: the
    /// UltraServer type EC2 names and how many; none for a type sold by the instance.
    fn ultraservers(&self) -> Vec<(&'static str, u32)> {
        ULTRASERVERS
            .iter()
            .filter(|(t, _, size)| *t == self.instance_type && self.count > 0 && self.count.is_multiple_of(*size))
            .map(|(_, ultraserver, size)| (*ultraserver, self.count / size))
            .collect()
    }
}

/// A start given as a date (`2026-12-01`, midnight UTC) or an RFC 3339 time.
fn start_date(text: &str) -> Result<DateTime, Refused> {
    let full = if text.len() == 10 {
        format!("{text}T00:00:00Z")
    } else {
        text.to_owned()
    };
    DateTime::from_str(&full, Format::DateTime).map_err(|_| Refused {
        key: "start_after",
        message: format!("`{text}` is not a date"),
        hint: "write a date, `2026-12-01`, or a time, `2026-12-01T08:00:00Z`".into(),
    })
}

/// The offerings EC2 has for `request` (checked first: see [`Request::check`]), cheapest first.
pub async fn offerings(cloud: &Cloud, request: &Request) -> Result<Vec<Offering>, ProviderError> {
    request
        .check()
        .map_err(|r| ProviderError::permanent(format!("{}: {}", r.message, r.hint)))?;
    let aws = cloud.aws().await;
    let start = match &request.start_after {
        Some(start) => Some(start_date(start).map_err(|r| ProviderError::permanent(r.message))?),
        None => None,
    };
    // One search per UltraServer type the count makes up (18 P6e-GB200: one x72 or two x36),
    // or one by the instance.
    let servers: Vec<Option<(&str, u32)>> = match request.ultraservers() {
        servers if servers.is_empty() => vec![None],
        servers => servers.into_iter().map(Some).collect(),
    };
    let mut found = Vec::new();
    for server in servers {
        let call = aws
            .ec2
            .describe_capacity_block_offerings()
            .capacity_duration_hours((request.days * 24) as i32)
            .set_start_date_range(start);
        let call = match server {
            Some((ultraserver, count)) => call.ultraserver_type(ultraserver).ultraserver_count(count as i32),
            None => call.instance_type(&request.instance_type).instance_count(request.count as i32),
        };
        let mut pages = call.into_paginator().items().send();
        while let Some(item) = pages.next().await {
            let offering = item.map_err(|e| error(aws, "DescribeCapacityBlockOfferings", e))?;
            let date = |d: Option<&DateTime>| d.and_then(|d| d.fmt(Format::DateTime).ok()).unwrap_or_default();
            found.push(Offering {
                offering_id: offering.capacity_block_offering_id().unwrap_or_default().to_owned(),
                zone: offering.availability_zone().unwrap_or_default().to_owned(),
                start: date(offering.start_date()),
                end: date(offering.end_date()),
                hours: offering.capacity_block_duration_hours().unwrap_or_default(),
                count: offering.instance_count().unwrap_or_default(),
                upfront_fee: offering.upfront_fee().and_then(|f| f.parse().ok()).unwrap_or(f64::NAN),
                currency: offering.currency_code().unwrap_or("USD").to_owned(),
                ultraservers: offering
                    .ultraserver_type()
                    .map(|u| (u.to_owned(), offering.ultraserver_count().unwrap_or_default())),
            });
        }
    }
    found.sort_by(|a, b| a.upfront_fee.total_cmp(&b.upfront_fee).then_with(|| a.start.cmp(&b.start)));
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(instance_type: &str, count: u32, days: u32) -> Request {
        Request {
            instance_type: instance_type.into(),
            count,
            days,
            start_after: None,
        }
    }

    #[test]
    fn durations_are_days_to_fourteen_then_weeks_to_182() {
        for days in [1, 7, 14, 21, 28, 182] {
            assert_eq!(request("p5.48xlarge", 2, days).check(), Ok(()), "{days}");
        }
        for (days, hint) in [(0, "14 or 21"), (15, "14 or 21"), (22, "14 or 28"), (183, "182"), (190, "182")] {
            let refused = request("p5.48xlarge", 2, days).check().unwrap_err();
            assert_eq!(refused.key, "days");
            assert!(refused.hint.ends_with(hint), "{days}: {}", refused.hint);
        }
    }

    #[test]
    fn a_block_holds_one_to_64_instances_or_whole_ultraservers() {
        assert_eq!(request("p5.48xlarge", 65, 7).check().unwrap_err().key, "count");
        assert_eq!(request("p5.48xlarge", 0, 7).check().unwrap_err().key, "count");
        assert_eq!(request("p6e-gb200.36xlarge", 36, 7).check(), Ok(()));
        assert_eq!(
            request("p6e-gb200.36xlarge", 18, 7).ultraservers(),
            vec![("u-p6e-gb200x72", 1), ("u-p6e-gb200x36", 2)]
        );
        assert_eq!(request("p6e-gb200.36xlarge", 9, 7).ultraservers(), vec![("u-p6e-gb200x36", 1)]);
        assert_eq!(request("p6e-gb200.36xlarge", 20, 7).check().unwrap_err().key, "count");
        assert_eq!(request("trn2u.48xlarge", 8, 7).check(), Ok(()));
    }

    #[test]
    fn a_start_is_a_date_or_a_time() {
        let mut r = request("p5.48xlarge", 2, 7);
        r.start_after = Some("2026-12-01".into());
        assert_eq!(r.check(), Ok(()));
        r.start_after = Some("2026-12-01T08:00:00Z".into());
        assert_eq!(r.check(), Ok(()));
        r.start_after = Some("next week".into());
        assert_eq!(r.check().unwrap_err().key, "start_after");
    }
}
