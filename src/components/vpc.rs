//! `vpc`: a VPC over several zones — a public and a private subnet per zone (carved without
//! overlap from the VPC's CIDR and tagged for EKS load balancers), an internet gateway, NAT
//! gateways with their EIPs (`single`, `per-zone` or `none`) and route tables.

use super::cidr::Cidr;
use super::{Component, ComponentError, Expansion, Input, Part};
use crate::schema::{Field, FieldType};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// The component's registration.
pub const COMPONENT: Component = Component {
    name: "vpc",
    schema: &[
        Field::required("cidr", FieldType::String),
        Field::required("zones", FieldType::List),
        Field::optional("nat", FieldType::String),
        Field::optional("public_subnet_bits", FieldType::Integer),
        Field::optional("private_subnet_bits", FieldType::Integer),
        Field::optional("tags", FieldType::Table),
    ],
    expand,
};

/// Carves `zones` private blocks from the bottom of `vpc` and `zones` public blocks from the
/// top, so zone `i`'s subnets keep their ranges when zones are added after it. `None` when the
/// two meet.
fn carve(vpc: Cidr, zones: usize, private_prefix: u32, public_prefix: u32) -> Option<(Vec<Cidr>, Vec<Cidr>)> {
    let (base, end) = (u64::from(vpc.base), u64::from(vpc.base) + vpc.size());
    let (private_size, public_size) = (1u64 << (32 - private_prefix), 1u64 << (32 - public_prefix));
    let zones = zones as u64;
    if base + zones * private_size > end.checked_sub(zones * public_size)? {
        return None;
    }
    let block = |start: u64, prefix| u32::try_from(start).ok().map(|base| Cidr { base, prefix });
    let private = (0..zones)
        .map(|i| block(base + i * private_size, private_prefix))
        .collect::<Option<_>>()?;
    let public = (0..zones)
        .map(|i| block(end - (i + 1) * public_size, public_prefix))
        .collect::<Option<_>>()?;
    Some((private, public))
}

fn expand(input: &Input) -> Result<Expansion, ComponentError> {
    Ok(network(input.address, input.config, input.providers)?)
}

fn network(address: &str, config: &Map<String, Value>, providers: &BTreeMap<String, Value>) -> Result<Expansion, String> {
    let vpc = Cidr::parse(
        "cidr",
        config.get("cidr").and_then(Value::as_str).unwrap_or_default(),
        16..=28,
        "a VPC",
    )?;
    let zones: Vec<String> = config
        .get("zones")
        .and_then(Value::as_array)
        .map(|z| {
            z.iter()
                .map(|v| {
                    v.as_str()
                        .map(str::to_owned)
                        .ok_or("`zones` must be a list of zone names, e.g. [\"us-west-2a\"]")
                })
                .collect()
        })
        .transpose()?
        .unwrap_or_default();
    if zones.is_empty() {
        return Err("`zones` is empty: name at least one availability zone".into());
    }
    for (i, zone) in zones.iter().enumerate() {
        if zones[..i].contains(zone) {
            return Err(format!("zone `{zone}` is listed twice in `zones`"));
        }
        let region = providers.get("aws").and_then(|a| a.get("region")).and_then(Value::as_str);
        // `us-west-2a`, and Local Zones such as `us-west-2-lax-1a`, start with their region.
        let in_region = |r: &str| {
            zone.strip_prefix(r)
                .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_lowercase() || c == '-'))
        };
        let first_region = zones[0].trim_end_matches(|c: char| c.is_ascii_lowercase());
        match region {
            Some(r) if !in_region(r) => return Err(format!("zone `{zone}` is not in the region `{r}` set in `[aws]`")),
            None if !in_region(first_region) => return Err(format!("zones `{}` and `{zone}` are in different regions", zones[0])),
            _ => {}
        }
    }
    let nat = config.get("nat").and_then(Value::as_str).unwrap_or("single");
    if !["single", "per-zone", "none"].contains(&nat) {
        return Err(format!("`nat = \"{nat}\"`: expected \"single\", \"per-zone\" or \"none\""));
    }
    let bits = |key: &str, default: u32| -> Result<u32, String> {
        let most = 28 - vpc.prefix;
        let (b, given) = match config.get(key) {
            None => (i64::from(default), false),
            Some(v) => (v.as_i64().ok_or_else(|| format!("`{key}` must be a whole number"))?, true),
        };
        if (1..=i64::from(most)).contains(&b) {
            return Ok(u32::try_from(b).expect("in range"));
        }
        let origin = if given {
            format!("`{key} = {b}`")
        } else {
            format!("the default `{key}` of {b}")
        };
        Err(format!(
            "{origin} does not fit a /{} VPC: subnets are at most /28, so `{key}` must be 1 to {most}",
            vpc.prefix
        ))
    };
    let (private_prefix, public_prefix) = (
        vpc.prefix + bits("private_subnet_bits", 4)?,
        vpc.prefix + bits("public_subnet_bits", 8)?,
    );
    let Some((private_blocks, public_blocks)) = carve(vpc, zones.len(), private_prefix, public_prefix) else {
        return Err(format!(
            "{n} zones need {n} private /{private_prefix} and {n} public /{public_prefix} subnets, more than {vpc} holds; use a larger `cidr`, fewer zones or smaller subnets (`private_subnet_bits`, `public_subnet_bits`)",
            n = zones.len()
        ));
    };

    let tags = config.get("tags").cloned().unwrap_or_else(|| json!({}));
    let with_tags = |extra: Value| {
        let mut t = tags.as_object().cloned().unwrap_or_default();
        t.extend(extra.as_object().cloned().unwrap_or_default());
        Value::Object(t)
    };
    let name = address.rsplit('.').next().unwrap_or(address);
    let reference = |local: &str, attr: &str| json!(format!("${{{address}.{local}.{attr}}}"));
    let part = |local: String, kind: &'static str, config: Value| Part {
        local,
        kind,
        config,
        depends_on: vec![],
    };
    let mut parts = vec![
        part(
            "vpc".into(),
            "aws_vpc",
            json!({ "cidr_block": vpc.to_string(), "tags": with_tags(json!({ "Name": name })) }),
        ),
        part(
            "igw".into(),
            "aws_internet_gateway",
            json!({ "vpc_id": reference("vpc", "id"), "tags": with_tags(json!({ "Name": name })) }),
        ),
    ];
    for (i, zone) in zones.iter().enumerate() {
        parts.push(part(
            format!("public.{zone}"),
            "aws_subnet",
            json!({ "vpc_id": reference("vpc", "id"), "cidr_block": public_blocks[i].to_string(), "availability_zone": zone, "map_public_ip_on_launch": true,
                    "tags": with_tags(json!({ "Name": format!("{name}-public-{zone}"), "kubernetes.io/role/elb": "1" })) }),
        ));
        parts.push(part(
            format!("private.{zone}"),
            "aws_subnet",
            json!({ "vpc_id": reference("vpc", "id"), "cidr_block": private_blocks[i].to_string(), "availability_zone": zone,
                    "tags": with_tags(json!({ "Name": format!("{name}-private-{zone}"), "kubernetes.io/role/internal-elb": "1" })) }),
        ));
    }
    let public_ids: Vec<Value> = zones.iter().map(|z| reference(&format!("public.{z}"), "id")).collect();
    parts.push(part(
        "public_routes".into(),
        "aws_route_table",
        json!({ "vpc_id": reference("vpc", "id"), "routes": [{ "cidr_block": "0.0.0.0/0", "gateway_id": reference("igw", "id") }], "subnet_ids": public_ids, "tags": with_tags(json!({ "Name": format!("{name}-public") })) }),
    ));
    let nat_zones: Vec<&String> = match nat {
        "per-zone" => zones.iter().collect(),
        "single" => vec![&zones[0]],
        _ => vec![],
    };
    for zone in &nat_zones {
        parts.push(part(
            format!("nat_ip.{zone}"),
            "aws_eip",
            json!({ "tags": with_tags(json!({ "Name": format!("{name}-nat-{zone}") })) }),
        ));
        let mut gateway = part(
            format!("nat.{zone}"),
            "aws_nat_gateway",
            json!({ "subnet_id": reference(&format!("public.{zone}"), "id"), "allocation_id": reference(&format!("nat_ip.{zone}"), "id"), "tags": with_tags(json!({ "Name": format!("{name}-{zone}") })) }),
        );
        // A NAT gateway needs the internet gateway attached first.
        gateway.depends_on.push(format!("{address}.igw"));
        parts.push(gateway);
    }
    for zone in &zones {
        let nat_zone = if nat == "per-zone" {
            Some(zone)
        } else {
            nat_zones.first().copied()
        };
        let routes: Vec<Value> = nat_zone
            .map(|z| json!({ "cidr_block": "0.0.0.0/0", "nat_gateway_id": reference(&format!("nat.{z}"), "id") }))
            .into_iter()
            .collect();
        parts.push(part(
            format!("private_routes.{zone}"),
            "aws_route_table",
            json!({ "vpc_id": reference("vpc", "id"), "routes": routes, "subnet_ids": [reference(&format!("private.{zone}"), "id")], "tags": with_tags(json!({ "Name": format!("{name}-private-{zone}") })) }),
        ));
    }
    let by_zone = |kind: &str| Value::Object(zones.iter().map(|z| (z.clone(), reference(&format!("{kind}.{z}"), "id"))).collect());
    let mut outputs = Map::new();
    outputs.insert("vpc_id".into(), reference("vpc", "id"));
    outputs.insert("cidr".into(), json!(vpc.to_string()));
    outputs.insert("public_subnet_ids".into(), Value::Array(public_ids));
    outputs.insert(
        "private_subnet_ids".into(),
        Value::Array(zones.iter().map(|z| reference(&format!("private.{z}"), "id")).collect()),
    );
    outputs.insert("public_subnets_by_zone".into(), by_zone("public"));
    outputs.insert("private_subnets_by_zone".into(), by_zone("private"));
    Ok(Expansion {
        parts,
        outputs,
        ready: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(config: Value, region: Option<&str>) -> Result<Expansion, String> {
        let providers = region
            .map(|r| BTreeMap::from([("aws".to_owned(), json!({ "region": r }))]))
            .unwrap_or_default();
        crate::components::expand_alone(expand, "vpc.main", config, &providers).map_err(|e| e.message)
    }

    #[test]
    fn carves_non_overlapping_aligned_subnets() {
        let out = run(
            json!({ "cidr": "10.0.0.0/16", "zones": ["us-west-2a", "us-west-2b", "us-west-2c"] }),
            Some("us-west-2"),
        )
        .unwrap();
        let cidrs: Vec<&str> = out
            .parts
            .iter()
            .filter(|p| p.kind == "aws_subnet")
            .map(|p| p.config["cidr_block"].as_str().unwrap())
            .collect();
        assert_eq!(
            cidrs,
            [
                "10.0.255.0/24",
                "10.0.0.0/20",
                "10.0.254.0/24",
                "10.0.16.0/20",
                "10.0.253.0/24",
                "10.0.32.0/20"
            ]
        );
        let four = run(
            json!({ "cidr": "10.0.0.0/16", "zones": ["us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d"] }),
            None,
        )
        .unwrap();
        let first_three: Vec<&str> = four
            .parts
            .iter()
            .filter(|p| p.kind == "aws_subnet")
            .take(6)
            .map(|p| p.config["cidr_block"].as_str().unwrap())
            .collect();
        assert_eq!(first_three, cidrs, "adding a zone moves no existing subnet");
        assert_eq!(
            out.parts.iter().filter(|p| p.kind == "aws_nat_gateway").count(),
            1,
            "nat = single by default"
        );
        assert_eq!(
            out.outputs["private_subnets_by_zone"]["us-west-2b"],
            json!("${vpc.main.private.us-west-2b.id}")
        );
        let per_zone = run(
            json!({ "cidr": "10.0.0.0/16", "zones": ["us-west-2a", "us-west-2b"], "nat": "per-zone" }),
            None,
        )
        .unwrap();
        assert_eq!(per_zone.parts.iter().filter(|p| p.kind == "aws_eip").count(), 2);
        let none = run(json!({ "cidr": "10.0.0.0/16", "zones": ["us-west-2a"], "nat": "none" }), None).unwrap();
        assert!(none.parts.iter().all(|p| p.kind != "aws_nat_gateway"));
    }

    #[test]
    fn rejects_what_cannot_work() {
        let err = |config: Value| run(config, Some("us-west-2")).unwrap_err();
        assert!(err(json!({ "cidr": "10.0.0.1/16", "zones": ["us-west-2a"] })).contains("did you mean \"10.0.0.0/16\""));
        assert!(err(json!({ "cidr": "10.0.0/16", "zones": ["us-west-2a"] })).contains("not an IPv4 CIDR block"));
        assert!(err(json!({ "cidr": "10.0.0.0/33", "zones": ["us-west-2a"] })).contains("between /16 and /28"));
        assert!(err(json!({ "cidr": "10.0.0.0/16", "zones": ["us-east-1a"] })).contains("not in the region `us-west-2`"));
        assert!(err(json!({ "cidr": "10.0.0.0/16", "zones": ["us-west-2a", "us-west-2a"] })).contains("listed twice"));
        assert!(err(json!({ "cidr": "10.0.0.0/24", "zones": ["us-west-2a", "us-west-2b", "us-west-2c"], "private_subnet_bits": 2, "public_subnet_bits": 3 })).contains("more than 10.0.0.0/24 holds"));
        assert!(err(json!({ "cidr": "10.0.0.0/16", "zones": ["us-west-2a"], "nat": "two" })).contains("expected \"single\""));
        assert!(err(json!({ "cidr": "10.0.0.0/16", "zones": ["us-west-2a"], "private_subnet_bits": -2 })).contains("must be 1 to 12"));
        assert!(
            err(json!({ "cidr": "10.0.0.0/16", "zones": ["us-west-2a"], "public_subnet_bits": 99999999999i64 }))
                .contains("must be 1 to 12")
        );
        assert!(err(json!({ "cidr": "10.0.0.0/22", "zones": ["us-west-2a"] })).contains("the default `public_subnet_bits` of 8"));
        assert!(
            run(json!({ "cidr": "10.0.0.0/16", "zones": ["us-west-2-lax-1a"] }), Some("us-west-2")).is_ok(),
            "Local Zones are in their region"
        );
    }
}
