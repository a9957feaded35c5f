//! `filestore`: a Filestore NFS share for GKE clusters. One block expands to one instance on
//! the `gcp_vpc`'s network; capacity and location are checked against the tier at load time,
//! and each client `gke` block gets the Filestore CSI driver. Its `pv_yaml` output is a
//! PersistentVolume and claim for that driver.

use super::gcp_vpc::{region_of, valid_name};
use super::{Component, ComponentError, Expansion, Input, Part, kubernetes};
use crate::schema::{Block, block};
use serde_json::{Map, Value, json};

/// The component's registration.
pub const COMPONENT: Component = Component {
    name: "filestore",
    schema: Filestore::FIELDS,
    expand,
};

block! {
    /// A `filestore` block.
    struct Filestore {
        capacity_gib: i64,
        vpc: Option<String>,
        network: Option<Value> as String,
        tier: Option<String>,
        zone: Option<String>,
        name: Option<String>,
        share: Option<String>,
        clients: Option<Value> as List,
        labels: Option<Value>,
        deletion_protection: Option<Value> as Bool,
        kubernetes: Option<Value>,
        timeouts: Option<Value>,
    }
}

/// A tier's facts: smallest and largest capacity (GiB), whether it lives in a zone, and
/// whether it is a basic tier (any size in range; only grows).
struct Tier {
    name: &'static str,
    min: i64,
    max: i64,
    zonal: bool,
    basic: bool,
}

const TIERS: &[Tier] = &[
    Tier {
        name: "BASIC_HDD",
        min: 1024,
        max: 65433,
        zonal: true,
        basic: true,
    },
    Tier {
        name: "BASIC_SSD",
        min: 2560,
        max: 65433,
        zonal: true,
        basic: true,
    },
    Tier {
        name: "ZONAL",
        min: 1024,
        max: 102400,
        zonal: true,
        basic: false,
    },
    Tier {
        name: "REGIONAL",
        min: 1024,
        max: 102400,
        zonal: false,
        basic: false,
    },
    Tier {
        name: "ENTERPRISE",
        min: 1024,
        max: 10240,
        zonal: false,
        basic: false,
    },
];

/// The Filestore CSI driver, which GKE installs when the cluster asks.
const DRIVER: &str = "filestore.csi.storage.gke.io";

fn expand(input: &Input) -> Result<Expansion, ComponentError> {
    let block: Filestore = input.block()?;
    let address = input.address;
    let name = input.cloud_name(&block.name);
    if !valid_name(&name) || name.len() > 63 {
        return Err(ComponentError::at(
            "name",
            format!("`{name}` cannot name a Filestore instance: lowercase letters, digits and `-`, starting with a letter"),
            "set `name = \"shared\"`",
        ));
    }
    let tier_name = block.tier.as_deref().unwrap_or("ENTERPRISE");
    let Some(tier) = TIERS.iter().find(|t| t.name == tier_name) else {
        let names: Vec<&str> = TIERS.iter().map(|t| t.name).collect();
        return Err(ComponentError::at(
            "tier",
            format!("`tier = \"{tier_name}\"` is not a Filestore tier forge makes"),
            crate::schema::suggestion(tier_name, &names),
        ));
    };
    check_capacity(tier, block.capacity_gib)?;
    let region = input.providers.gcp_region();
    let location = location(tier, block.zone.as_deref(), region)?;
    let network = match (&block.vpc, &block.network) {
        (Some(_), _) => {
            let (vpc, _) = input.named_block("vpc", block.vpc.as_deref(), "gcp_vpc")?;
            json!(format!("${{{vpc}.network_self_link}}"))
        }
        (None, Some(network)) => network.clone(),
        (None, None) => {
            return Err(ComponentError::at(
                "vpc",
                "the instance has no network",
                "write `vpc = \"gcp_vpc.main\"` (a `gcp_vpc` block of this stack), or `network = \"…\"`",
            ));
        }
    };
    let clients = input.clients(block.clients.as_ref(), &["gke"])?;
    let share = share(block.share.as_deref())?;
    let mut config = json!({
        "name": name,
        "location": location,
        "tier": tier.name,
        "share_name": share,
        "capacity_gib": block.capacity_gib,
        "network": network,
    });
    super::hand_on(
        &mut config,
        &[
            ("labels", &block.labels),
            ("deletion_protection", &block.deletion_protection),
            ("timeouts", &block.timeouts),
        ],
    );
    let parts = vec![Part {
        local: "instance".into(),
        kind: "google_filestore_instance",
        config,
        depends_on: vec![],
        existing: None,
    }];
    let reference = |output: &str| json!(format!("${{{address}.instance.{output}}}"));
    let mut outputs = Map::new();
    for key in ["ip_address", "share", "capacity_gib", "id", "name"] {
        outputs.insert(key.into(), reference(key));
    }
    let volume = kubernetes::SharedVolume {
        driver: DRIVER,
        capacity_gib: block.capacity_gib,
        handle: json!(format!("modeInstance/{location}/{name}/{share}")),
        attributes: [
            ("ip".to_owned(), json!(format!("${{{address}.instance.ip_address}}"))),
            ("volume".to_owned(), json!(share)),
        ]
        .into_iter()
        .collect(),
        mount_options: &[],
    };
    let mounted = kubernetes::mount(address, block.kubernetes.as_ref(), &clients, volume, kubernetes::gke_cluster)?;
    Ok(mounted.expansion(parts, outputs))
}

/// Where the instance lives: its `zone` for a zonal tier (in the `[gcp]` region), else the
/// region.
fn location(tier: &Tier, zone: Option<&str>, region: Option<&str>) -> Result<String, ComponentError> {
    match (tier.zonal, zone) {
        (true, Some(zone)) => match region.filter(|r| region_of(zone) != *r || zone == *r) {
            Some(region) => Err(ComponentError::at(
                "zone",
                format!("zone `{zone}` is not in the region {region} of `[gcp]`"),
                format!("use a zone of {region}, like `{region}-c`: the one your GPU nodes are in"),
            )),
            None => Ok(zone.to_owned()),
        },
        (true, None) => Err(ComponentError::at(
            "zone",
            format!("tier {} lives in one zone: `zone` is missing", tier.name),
            "add `zone = \"us-central1-c\"`, the zone of the nodes that mount it (or use tier REGIONAL or ENTERPRISE)",
        )),
        (false, Some(_)) => Err(ComponentError::at(
            "zone",
            format!("tier {} is regional: it takes no `zone`", tier.name),
            "remove `zone` (it lives in the `[gcp]` region), or use a zonal tier (ZONAL, BASIC_SSD, BASIC_HDD)",
        )),
        (false, None) => region.map(str::to_owned).ok_or_else(|| {
            ComponentError::at(
                "tier",
                format!("tier {} lives in a region, and `[gcp]` names none", tier.name),
                "set `region` in `[gcp]`",
            )
        }),
    }
}

/// The file share's name (`share` by default), checked.
fn share(written: Option<&str>) -> Result<String, ComponentError> {
    let share = written.unwrap_or("share");
    let valid = share.len() <= 16
        && share.starts_with(|c: char| c.is_ascii_lowercase())
        && share.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !valid {
        return Err(ComponentError::at(
            "share",
            format!(
                "`share = \"{share}\"` cannot name a file share: lowercase letters, digits and `_`, starting with a letter, at most 16"
            ),
            "e.g. `share = \"data\"`",
        ));
    }
    Ok(share.to_owned())
}

/// Capacity within the tier's range and, on the tiers that are not basic, in its steps
/// (256 GiB below 10 TiB, 2.5 TiB from there).
fn check_capacity(tier: &Tier, capacity: i64) -> Result<(), ComponentError> {
    let step = if tier.basic {
        1
    } else if capacity < 10240 {
        256
    } else {
        2560
    };
    let hint = format!(
        "{} takes {} to {} GiB{}",
        tier.name,
        tier.min,
        tier.max,
        if tier.basic {
            String::new()
        } else {
            format!(", in steps of {step} GiB here")
        }
    );
    if capacity < tier.min || capacity > tier.max {
        return Err(ComponentError::at(
            "capacity_gib",
            format!("`capacity_gib = {capacity}` is out of range"),
            hint,
        ));
    }
    if capacity % step != 0 {
        let lower = capacity / step * step;
        return Err(ComponentError::at(
            "capacity_gib",
            format!("`capacity_gib = {capacity}` is not a size {} makes", tier.name),
            format!("{hint}: use {lower} or {}", lower + step),
        ));
    }
    Ok(())
}
