//! `gcp_vpc`: the network a private, VPC-native GKE cluster needs — a custom-mode network, one
//! subnetwork in the region with the pods' and services' secondary ranges and Private Google
//! Access, an internal allow-all firewall rule for the nodes' and pods' ranges, and a Cloud
//! Router with Cloud NAT so private nodes reach the internet. Or, with `existing`, a network
//! that exists and its `subnetwork`: read, never written.

use super::cidr::Cidr;
use super::{Component, ComponentError, Expansion, Input, Part};
use crate::provider::Selector;
use crate::schema::{Block, block};
use serde_json::{Value, json};

/// The component's registration.
pub const COMPONENT: Component = Component {
    name: "gcp_vpc",
    schema: GcpVpc::FIELDS,
    expand,
};

block! {
    /// A `gcp_vpc` block.
    struct GcpVpc {
        existing: Option<String>,
        subnetwork: Option<String>,
        pods_range: Option<String>,
        services_range: Option<String>,
        cidr: Option<String>,
        pods_cidr: Option<String>,
        services_cidr: Option<String>,
        name: Option<String>,
        region: Option<String>,
        nat: Option<bool>,
        mtu: Option<i64>,
    }
}

/// The secondary ranges' names in the subnetwork (GKE's `ip_allocation_policy` names them).
const PODS_RANGE: &str = "pods";
const SERVICES_RANGE: &str = "services";

/// Each range: its key, the prefixes it may have, what it is called in errors, and the hint.
const RANGES: &[(&str, u32, u32, &str, &str)] = &[
    (
        "cidr",
        8,
        29,
        "a node subnetwork",
        "write it like \"10.0.0.0/20\"; the three ranges must not overlap",
    ),
    (
        "pods_cidr",
        8,
        21,
        "a pods range",
        "GKE gives each node a /24 for its 110 pods, so a /21 holds 8 nodes' pods; write it like \"10.4.0.0/14\"",
    ),
    (
        "services_cidr",
        8,
        27,
        "a services range",
        "GKE takes no services range smaller than a /27; write it like \"10.8.0.0/20\"",
    ),
];

/// What only a `gcp_vpc` block that reads an existing network takes, and what only one that
/// makes a network takes.
const EXISTING_KEYS: &[&str] = &["subnetwork", "pods_range", "services_range"];
const MADE_KEYS: &[&str] = &["cidr", "pods_cidr", "services_cidr", "name", "nat", "mtu", "region"];

/// An existing network (`existing = "<name or path>"`) and its `subnetwork` (a name in
/// `[gcp] region`, or a path), read when forge plans and never written, with the names of the
/// subnetwork's secondary ranges GKE takes pods and services from (`pods_range`,
/// `services_range`; by default `pods` and `services`, as forge names them).
fn existing(input: &Input, block: &GcpVpc, network: &str) -> Result<Expansion, ComponentError> {
    let network = super::existing_name(network, "a network")?;
    if let Some(key) = MADE_KEYS.iter().find(|k| input.config.contains_key(**k)) {
        return Err(ComponentError::at(
            *key,
            format!("`{key}` shapes a network forge makes; `{network}` exists, and forge reads it and never changes it"),
            "remove it; name the subnetwork the cluster uses with `subnetwork`",
        ));
    }
    let Some(subnetwork) = &block.subnetwork else {
        return Err(ComponentError::at(
            "subnetwork",
            "an existing network needs the `subnetwork` its clusters use",
            "add `subnetwork = \"<name>\"` (in `[gcp] region`), or its path `projects/<p>/regions/<r>/subnetworks/<name>`",
        ));
    };
    let subnetwork = super::existing_name(subnetwork, "a subnetwork")?;
    let address = input.address;
    let reference = |local: &str, output: &str| json!(format!("${{{address}.{local}.{output}}}"));
    let parts = vec![
        Part::reading("network", "google_compute_network", Selector::Id(network.to_owned())),
        Part::reading("subnetwork", "google_compute_subnetwork", Selector::Id(subnetwork.to_owned())),
    ];
    let mut outputs = serde_json::Map::new();
    outputs.insert("network".into(), reference("network", "name"));
    outputs.insert("network_self_link".into(), reference("network", "self_link"));
    outputs.insert("subnetwork".into(), reference("subnetwork", "name"));
    outputs.insert("subnetwork_self_link".into(), reference("subnetwork", "self_link"));
    outputs.insert("pods_range".into(), json!(block.pods_range.as_deref().unwrap_or(PODS_RANGE)));
    outputs.insert(
        "services_range".into(),
        json!(block.services_range.as_deref().unwrap_or(SERVICES_RANGE)),
    );
    Ok(Expansion {
        parts,
        outputs,
        ready: Vec::new(),
    })
}

fn expand(input: &Input) -> Result<Expansion, ComponentError> {
    let block: GcpVpc = input.block()?;
    if let Some(network) = &block.existing {
        return existing(input, &block, network);
    }
    if let Some(key) = EXISTING_KEYS.iter().find(|k| input.config.contains_key(**k)) {
        return Err(ComponentError::at(
            *key,
            format!("`{key}` names part of an existing network"),
            "add `existing = \"<network>\"`, or remove it: forge names what it makes",
        ));
    }
    let address = input.address;
    let name = network_name(input.cloud_name(&block.name))?;
    let ranges = ranges(&block)?;
    let mtu = block.mtu.unwrap_or(1460);
    if !(1300..=8896).contains(&mtu) {
        return Err(ComponentError::at(
            "mtu",
            format!("`mtu = {mtu}` is not an MTU Google Cloud networks take"),
            "use 1300 to 8896 (1460 by default; 8896 for jumbo frames)",
        ));
    }
    let region = block.region.as_deref().or(input.providers.gcp_region());
    let reference = |local: &str, output: &str| json!(format!("${{{address}.{local}.{output}}}"));
    let [cidr, pods, services] = ranges.map(|r| r.to_string());
    let with_region = |mut config: Value| {
        if let Some(region) = &region {
            config["region"] = json!(region);
        }
        config
    };
    let mut parts = vec![
        Part::new(
            "network",
            "google_compute_network",
            json!({ "name": name, "mtu": mtu, "auto_create_subnetworks": false, "routing_mode": "REGIONAL" }),
        ),
        Part::new(
            "subnetwork",
            "google_compute_subnetwork",
            with_region(json!({
                "name": format!("{name}-subnet"),
                "network": reference("network", "self_link"),
                "ip_cidr_range": cidr,
                "secondary_ip_ranges": [
                    { "range_name": PODS_RANGE, "ip_cidr_range": pods },
                    { "range_name": SERVICES_RANGE, "ip_cidr_range": services },
                ],
                "private_ip_google_access": true,
            })),
        ),
        Part::new(
            "internal",
            "google_compute_firewall",
            json!({
                "name": format!("{name}-internal"),
                "network": reference("network", "self_link"),
                "description": "Traffic between the nodes and pods of the network",
                "allow": [{ "protocol": "all" }],
                "source_ranges": [cidr, pods],
            }),
        ),
    ];
    if block.nat.unwrap_or(true) {
        parts.push(Part::new(
            "router",
            "google_compute_router",
            with_region(json!({
                "name": format!("{name}-router"),
                "network": reference("network", "self_link"),
                "nats": [{ "name": format!("{name}-nat") }],
            })),
        ));
    }
    let mut outputs = serde_json::Map::new();
    outputs.insert("network".into(), reference("network", "name"));
    outputs.insert("network_self_link".into(), reference("network", "self_link"));
    outputs.insert("subnetwork".into(), reference("subnetwork", "name"));
    outputs.insert("subnetwork_self_link".into(), reference("subnetwork", "self_link"));
    outputs.insert("pods_range".into(), json!(PODS_RANGE));
    outputs.insert("services_range".into(), json!(SERVICES_RANGE));
    Ok(Expansion {
        parts,
        outputs,
        ready: Vec::new(),
    })
}

/// The networks' `name`, checked as Google names.
fn network_name(name: String) -> Result<String, ComponentError> {
    if !valid_name(&name) || name.len() > 50 {
        return Err(ComponentError::at(
            "name",
            format!(
                "`{name}` cannot name Google Cloud networks: names are lowercase letters, digits and `-`, start with a letter and end with a letter or digit"
            ),
            "set `name = \"nemo-a3\"` (at most 50 characters: forge adds `-subnet`, `-internal`, `-router` to it)",
        ));
    }
    Ok(name)
}

/// The nodes', pods' and services' ranges, each of its size and none overlapping another.
fn ranges(block: &GcpVpc) -> Result<[Cidr; 3], ComponentError> {
    let written = [&block.cidr, &block.pods_cidr, &block.services_cidr];
    let mut checked: Vec<(&str, Cidr)> = Vec::new();
    for ((key, shortest, longest, what, hint), text) in RANGES.iter().zip(written) {
        let Some(text) = text else {
            return Err(ComponentError::at(
                *key,
                format!("`{key}` is missing"),
                format!("{hint}; or read a network that exists with `existing = \"<network>\"`"),
            ));
        };
        let cidr = Cidr::parse(key, text, *shortest..=*longest, what).map_err(|message| ComponentError::at(*key, message, *hint))?;
        if let Some((other, range)) = checked.iter().find(|(_, r)| r.overlaps(cidr)) {
            return Err(ComponentError::at(
                *key,
                format!("`{key} = \"{cidr}\"` overlaps `{other} = \"{range}\"`"),
                "pick ranges that share no address: nodes, pods and services each need their own",
            ));
        }
        checked.push((key, cidr));
    }
    Ok([checked[0].1, checked[1].1, checked[2].1])
}

/// The region of a zone (`us-central1-c` → `us-central1`); a region is its own.
pub(super) fn region_of(location: &str) -> String {
    match location.rsplit_once('-') {
        Some((region, zone)) if zone.len() == 1 => region.to_owned(),
        _ => location.to_owned(),
    }
}

/// Whether `name` is a Google Cloud resource name (RFC 1035).
pub(super) fn valid_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    bytes.first().is_some_and(u8::is_ascii_lowercase)
        && bytes.last().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::components::expand_alone;
    use crate::provider::settings::{GcpSettings, Providers};

    fn expand_with(config: Value) -> Result<Expansion, ComponentError> {
        let gcp = GcpSettings {
            project: Some("p".to_owned()),
            region: Some("us-central1".to_owned()),
            ..GcpSettings::default()
        };
        let providers = Providers {
            gcp: Some(gcp),
            ..Providers::default()
        };
        expand_alone(expand, "gcp_vpc.main", config, &providers)
    }

    #[test]
    fn expands_to_network_subnetwork_firewall_and_nat() {
        let expansion = expand_with(json!({ "cidr": "10.0.0.0/20", "pods_cidr": "10.4.0.0/14", "services_cidr": "10.8.0.0/20" })).unwrap();
        let kinds: Vec<(&str, &str)> = expansion.parts.iter().map(|p| (p.local.as_str(), p.kind)).collect();
        assert_eq!(
            kinds,
            [
                ("network", "google_compute_network"),
                ("subnetwork", "google_compute_subnetwork"),
                ("internal", "google_compute_firewall"),
                ("router", "google_compute_router"),
            ]
        );
        let subnet = &expansion.parts[1].config;
        assert_eq!(subnet["region"], "us-central1");
        assert_eq!(
            subnet["secondary_ip_ranges"][0],
            json!({ "range_name": "pods", "ip_cidr_range": "10.4.0.0/14" })
        );
        assert_eq!(expansion.parts[2].config["source_ranges"], json!(["10.0.0.0/20", "10.4.0.0/14"]));
        assert_eq!(expansion.outputs["pods_range"], "pods");
        let without_nat =
            expand_with(json!({ "cidr": "10.0.0.0/20", "pods_cidr": "10.4.0.0/14", "services_cidr": "10.8.0.0/20", "nat": false }))
                .unwrap();
        assert_eq!(without_nat.parts.len(), 3);
    }

    #[test]
    fn bad_ranges_point_at_their_key() {
        let overlapping =
            expand_with(json!({ "cidr": "10.0.0.0/20", "pods_cidr": "10.0.0.0/14", "services_cidr": "10.8.0.0/20" })).unwrap_err();
        assert_eq!(overlapping.key.as_deref(), Some("pods_cidr"));
        let small = expand_with(json!({ "cidr": "10.0.0.0/20", "pods_cidr": "10.4.0.0/24", "services_cidr": "10.8.0.0/20" })).unwrap_err();
        assert_eq!(small.key.as_deref(), Some("pods_cidr"));
        assert!(small.message.contains("between /8 and /21"), "{}", small.message);
        let bad = expand_with(json!({ "cidr": "10.0.0/20", "pods_cidr": "10.4.0.0/14", "services_cidr": "10.8.0.0/20" })).unwrap_err();
        assert_eq!(bad.key.as_deref(), Some("cidr"));
    }
}
