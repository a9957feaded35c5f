//! `vpc`: a VPC over several zones — a public and a private subnet per zone (carved without
//! overlap from the VPC's CIDR and tagged for EKS load balancers), an internet gateway, NAT
//! gateways with their EIPs (`single`, `per-zone` or `none`) and route tables. Or, with
//! `existing = "vpc-…"`, a VPC that exists: the VPC and its private subnet in each of `zones`
//! (the one whose route table does not reach an internet gateway) are read, never written;
//! with `public = true` (or `public_subnets`) also its public subnet in each zone.

use super::cidr::Cidr;
use super::{Component, ComponentError, Expansion, Input, Part};
use crate::provider::Selector;
use crate::schema::{Block, block};
use serde_json::{Map, Value, json};

/// The component's registration.
pub const COMPONENT: Component = Component {
    name: "vpc",
    schema: Vpc::FIELDS,
    expand,
};

block! {
    /// A `vpc` block.
    struct Vpc {
        existing: Option<String>,
        subnets: Option<Map<String, Value>>,
        public: Option<bool>,
        public_subnets: Option<Map<String, Value>>,
        cidr: Option<String>,
        zones: Vec<String>,
        nat: Option<String>,
        public_subnet_bits: Option<i64>,
        private_subnet_bits: Option<i64>,
        tags: Option<Value>,
    }
}

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
    let block: Vpc = input.block()?;
    let region = input.providers.aws_region();
    if let Some(id) = &block.existing {
        return existing(input, &block, id, region);
    }
    if let Some(key) = EXISTING_KEYS.iter().find(|k| input.config.contains_key(**k)) {
        return Err(ComponentError::at(
            *key,
            format!("`{key}` picks the subnets of an existing VPC"),
            "add `existing = \"vpc-…\"`, or remove it: forge carves the subnets of a VPC it makes",
        ));
    }
    let Some(cidr) = &block.cidr else {
        return Err(ComponentError::at(
            "cidr",
            "`cidr` is missing",
            "write `cidr = \"10.0.0.0/16\"` for a VPC forge makes, or `existing = \"vpc-…\"` for one that exists",
        ));
    };
    Ok(Layout::new(&block, cidr, region)?.expansion(input.address, &block))
}

/// What a `vpc` block that reads an existing VPC cannot set: how forge would make one.
const LAYOUT_KEYS: &[&str] = &["cidr", "nat", "public_subnet_bits", "private_subnet_bits", "tags"];

/// What only a `vpc` block that reads an existing VPC takes.
const EXISTING_KEYS: &[&str] = &["subnets", "public", "public_subnets"];

/// An existing VPC (`existing = "vpc-…"`): the VPC and, per zone, its private subnet (and its
/// public one with `public`), read when forge plans; the same outputs as a VPC forge makes,
/// but the public subnets' unless they are read.
fn existing(input: &Input, block: &Vpc, id: &str, region: Option<&str>) -> Result<Expansion, ComponentError> {
    let id = super::existing_name(id, "a VPC")?;
    if let Some(key) = LAYOUT_KEYS.iter().find(|k| input.config.contains_key(**k)) {
        return Err(ComponentError::at(
            *key,
            format!("`{key}` shapes a VPC forge makes; `{id}` exists, and forge reads it and never changes it"),
            "remove it; `zones` names the zones whose private subnets the stack uses",
        ));
    }
    check_zones(&block.zones, region)
        .map_err(|message| ComponentError::at("zones", message, "list the zones the stack's node groups and file systems use"))?;
    let address = input.address;
    let reference = |local: &str, output: &str| json!(format!("${{{address}.{local}.{output}}}"));
    let mut parts = vec![Part::reading("vpc", "aws_vpc", Selector::Id(id.to_owned()))];
    let mut outputs = Map::new();
    outputs.insert("vpc_id".into(), reference("vpc", "id"));
    outputs.insert("cidr".into(), reference("vpc", "cidr_block"));
    if block.public == Some(false) && block.public_subnets.is_some() {
        return Err(ComponentError::at(
            "public",
            "`public = false` and `public_subnets` contradict each other",
            "remove `public = false` to read the public subnets `public_subnets` names",
        ));
    }
    let public = block.public.unwrap_or(block.public_subnets.is_some());
    let tiers = [("private", "subnets", true), ("public", "public_subnets", public)];
    for (tier, key, _) in tiers.into_iter().filter(|t| t.2) {
        let chosen = if tier == "private" { &block.subnets } else { &block.public_subnets };
        let chosen = chosen.clone().unwrap_or_default();
        if let Some(zone) = chosen.keys().find(|z| !block.zones.contains(z)) {
            return Err(ComponentError::at(
                format!("{key}.{zone}"),
                format!("`{zone}` is not one of `zones`"),
                "name a subnet for a zone the block lists",
            ));
        }
        for zone in &block.zones {
            // The zone's subnet the block names, else its one subnet of the tier.
            let named = match chosen.get(zone) {
                Some(Value::String(subnet)) => Selector::Id(subnet.clone()),
                Some(_) => {
                    return Err(ComponentError::at(
                        format!("{key}.{zone}"),
                        "a subnet id is a string",
                        format!("write `{key} = {{ \"{zone}\" = \"subnet-…\" }}`"),
                    ));
                }
                None => Selector::Where(
                    [("vpc_id", id), ("availability_zone", zone.as_str()), ("tier", tier)]
                        .map(|(k, v)| (k.to_owned(), v.to_owned()))
                        .into(),
                ),
            };
            parts.push(Part::reading(format!("{tier}.{zone}"), "aws_subnet", named));
        }
        let ids: Vec<Value> = block.zones.iter().map(|z| reference(&format!("{tier}.{z}"), "id")).collect();
        outputs.insert(
            format!("{tier}_subnets_by_zone"),
            Value::Object(block.zones.iter().cloned().zip(ids.iter().cloned()).collect()),
        );
        outputs.insert(format!("{tier}_subnet_ids"), Value::Array(ids));
    }
    Ok(Expansion {
        parts,
        outputs,
        ready: Vec::new(),
    })
}

/// The network a block asks for, checked: the VPC's range, its zones, its NAT and each zone's
/// two subnets.
struct Layout<'a> {
    vpc: Cidr,
    zones: &'a [String],
    nat: &'a str,
    private: Vec<Cidr>,
    public: Vec<Cidr>,
}

impl<'a> Layout<'a> {
    fn new(block: &'a Vpc, cidr: &str, region: Option<&str>) -> Result<Self, String> {
        let vpc = Cidr::parse("cidr", cidr, 16..=28, "a VPC")?;
        check_zones(&block.zones, region)?;
        let nat = block.nat.as_deref().unwrap_or("single");
        if !["single", "per-zone", "none"].contains(&nat) {
            return Err(format!("`nat = \"{nat}\"`: expected \"single\", \"per-zone\" or \"none\""));
        }
        let private_prefix = vpc.prefix + subnet_bits(vpc, "private_subnet_bits", block.private_subnet_bits, 4)?;
        let public_prefix = vpc.prefix + subnet_bits(vpc, "public_subnet_bits", block.public_subnet_bits, 8)?;
        let zones = &block.zones;
        let Some((private, public)) = carve(vpc, zones.len(), private_prefix, public_prefix) else {
            return Err(format!(
                "{n} zones need {n} private /{private_prefix} and {n} public /{public_prefix} subnets, more than {vpc} holds; use a larger `cidr`, fewer zones or smaller subnets (`private_subnet_bits`, `public_subnet_bits`)",
                n = zones.len()
            ));
        };
        Ok(Layout {
            vpc,
            zones,
            nat,
            private,
            public,
        })
    }

    /// The zones that get a NAT gateway.
    fn nat_zones(&self) -> &[String] {
        match self.nat {
            "per-zone" => self.zones,
            "single" => &self.zones[..1],
            _ => &[],
        }
    }

    /// The VPC's parts and outputs.
    fn expansion(&self, address: &str, block: &Vpc) -> Expansion {
        let names = Names {
            address,
            name: address.rsplit('.').next().unwrap_or(address),
            tags: block.tags.clone().unwrap_or_else(|| json!({})),
        };
        let mut parts = vec![
            names.part(
                "vpc",
                "aws_vpc",
                json!({ "cidr_block": self.vpc.to_string() }),
                json!({ "Name": names.name }),
            ),
            names.part(
                "igw",
                "aws_internet_gateway",
                json!({ "vpc_id": names.reference("vpc", "id") }),
                json!({ "Name": names.name }),
            ),
        ];
        parts.extend(self.subnets(&names));
        parts.extend(self.routes(&names));
        Expansion {
            parts,
            outputs: self.outputs(&names),
            ready: Vec::new(),
        }
    }

    /// A public and a private subnet per zone, tagged for EKS's load balancers.
    fn subnets(&self, names: &Names) -> Vec<Part> {
        let mut parts = Vec::new();
        let vpc_id = names.reference("vpc", "id");
        for (i, zone) in self.zones.iter().enumerate() {
            let name = names.name;
            parts.push(names.part(
                &format!("public.{zone}"),
                "aws_subnet",
                json!({ "vpc_id": vpc_id, "cidr_block": self.public[i].to_string(), "availability_zone": zone, "map_public_ip_on_launch": true }),
                json!({ "Name": format!("{name}-public-{zone}"), "kubernetes.io/role/elb": "1" }),
            ));
            parts.push(names.part(
                &format!("private.{zone}"),
                "aws_subnet",
                json!({ "vpc_id": vpc_id, "cidr_block": self.private[i].to_string(), "availability_zone": zone }),
                json!({ "Name": format!("{name}-private-{zone}"), "kubernetes.io/role/internal-elb": "1" }),
            ));
        }
        parts
    }

    /// The public route table through the internet gateway; the NAT gateways with their
    /// addresses; per zone a private route table through its NAT gateway (or the one).
    fn routes(&self, names: &Names) -> Vec<Part> {
        let name = names.name;
        let vpc_id = names.reference("vpc", "id");
        let public_ids: Vec<Value> = self.zones.iter().map(|z| names.reference(&format!("public.{z}"), "id")).collect();
        let mut parts = vec![names.part(
            "public_routes",
            "aws_route_table",
            json!({ "vpc_id": vpc_id, "routes": [{ "cidr_block": "0.0.0.0/0", "gateway_id": names.reference("igw", "id") }], "subnet_ids": public_ids }),
            json!({ "Name": format!("{name}-public") }),
        )];
        for zone in self.nat_zones() {
            parts.push(names.part(
                &format!("nat_ip.{zone}"),
                "aws_eip",
                json!({}),
                json!({ "Name": format!("{name}-nat-{zone}") }),
            ));
            let mut gateway = names.part(
                &format!("nat.{zone}"),
                "aws_nat_gateway",
                json!({ "subnet_id": names.reference(&format!("public.{zone}"), "id"), "allocation_id": names.reference(&format!("nat_ip.{zone}"), "id") }),
                json!({ "Name": format!("{name}-{zone}") }),
            );
            // A NAT gateway needs the internet gateway attached first.
            gateway.depends_on.push(format!("{}.igw", names.address));
            parts.push(gateway);
        }
        for zone in self.zones {
            let nat_zone = if self.nat == "per-zone" {
                Some(zone)
            } else {
                self.nat_zones().first()
            };
            let routes: Vec<Value> = nat_zone
                .map(|z| json!({ "cidr_block": "0.0.0.0/0", "nat_gateway_id": names.reference(&format!("nat.{z}"), "id") }))
                .into_iter()
                .collect();
            parts.push(names.part(
                &format!("private_routes.{zone}"),
                "aws_route_table",
                json!({ "vpc_id": vpc_id, "routes": routes, "subnet_ids": [names.reference(&format!("private.{zone}"), "id")] }),
                json!({ "Name": format!("{name}-private-{zone}") }),
            ));
        }
        parts
    }

    /// The VPC's id and range, and its subnets' ids: all, and by zone.
    fn outputs(&self, names: &Names) -> Map<String, Value> {
        let ids = |kind: &str| -> Vec<Value> { self.zones.iter().map(|z| names.reference(&format!("{kind}.{z}"), "id")).collect() };
        let by_zone = |kind: &str| Value::Object(self.zones.iter().cloned().zip(ids(kind)).collect());
        let mut outputs = Map::new();
        outputs.insert("vpc_id".into(), names.reference("vpc", "id"));
        outputs.insert("cidr".into(), json!(self.vpc.to_string()));
        outputs.insert("public_subnet_ids".into(), Value::Array(ids("public")));
        outputs.insert("private_subnet_ids".into(), Value::Array(ids("private")));
        outputs.insert("public_subnets_by_zone".into(), by_zone("public"));
        outputs.insert("private_subnets_by_zone".into(), by_zone("private"));
        outputs
    }
}

/// How the block's parts are addressed, named and tagged.
struct Names<'a> {
    address: &'a str,
    /// The block's own name (`main` of `vpc.main`), which names the parts in the console.
    name: &'a str,
    tags: Value,
}

impl Names<'_> {
    /// A reference to the output `output` of the part `local`.
    fn reference(&self, local: &str, output: &str) -> Value {
        json!(format!("${{{}.{local}.{output}}}", self.address))
    }

    /// A part whose `tags` are the block's with `extra` over them.
    fn part(&self, local: &str, kind: &'static str, mut config: Value, extra: Value) -> Part {
        let mut tags = self.tags.as_object().cloned().unwrap_or_default();
        tags.extend(extra.as_object().cloned().unwrap_or_default());
        config["tags"] = Value::Object(tags);
        Part {
            local: local.to_owned(),
            kind,
            config,
            depends_on: vec![],
            existing: None,
        }
    }
}

/// The zones: at least one, none twice, all in the stack's region (or the first zone's).
fn check_zones(zones: &[String], region: Option<&str>) -> Result<(), String> {
    if zones.is_empty() {
        return Err("`zones` is empty: name at least one availability zone".into());
    }
    let first_region = zones[0].trim_end_matches(|c: char| c.is_ascii_lowercase());
    for (i, zone) in zones.iter().enumerate() {
        if zones[..i].contains(zone) {
            return Err(format!("zone `{zone}` is listed twice in `zones`"));
        }
        // `us-west-2a`, and Local Zones such as `us-west-2-lax-1a`, start with their region.
        let in_region = |r: &str| {
            zone.strip_prefix(r)
                .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_lowercase() || c == '-'))
        };
        match region {
            Some(r) if !in_region(r) => return Err(format!("zone `{zone}` is not in the region `{r}` set in `[aws]`")),
            None if !in_region(first_region) => return Err(format!("zones `{}` and `{zone}` are in different regions", zones[0])),
            _ => {}
        }
    }
    Ok(())
}

/// The bits a subnet's prefix adds to the VPC's: `given`, else `default`; subnets are at most
/// /28.
fn subnet_bits(vpc: Cidr, key: &str, given: Option<i64>, default: u32) -> Result<u32, String> {
    let most = 28 - vpc.prefix;
    let bits = given.unwrap_or(i64::from(default));
    if (1..=i64::from(most)).contains(&bits) {
        return Ok(u32::try_from(bits).expect("in range"));
    }
    let origin = if given.is_some() {
        format!("`{key} = {bits}`")
    } else {
        format!("the default `{key}` of {bits}")
    };
    Err(format!(
        "{origin} does not fit a /{} VPC: subnets are at most /28, so `{key}` must be 1 to {most}",
        vpc.prefix
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::settings::{AwsSettings, Providers};

    fn run(config: Value, region: Option<&str>) -> Result<Expansion, String> {
        let aws = region.map(|r| AwsSettings {
            region: Some(r.to_owned()),
            ..AwsSettings::default()
        });
        let providers = Providers {
            aws,
            ..Providers::default()
        };
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
