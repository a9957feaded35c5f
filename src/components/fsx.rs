//! `fsx`: an FSx for Lustre file system for a training cluster. One block expands to a
//! security group with Lustre's ports (TCP 988 and 1018–1023) open within itself, the file
//! system in the private subnet of the GPU nodes' zone, the same ports opened to each client
//! cluster's nodes, and optionally a data repository association with an S3 prefix. Each client
//! `eks` block gives its node role the FSx CSI policy and installs the FSx CSI driver (see
//! `eks`). Its `pv_yaml` output is a PersistentVolume and claim for that driver.

use super::{Component, ComponentError, Expansion, Input, Part, kubernetes};
use crate::schema::{Block, block};
use serde_json::{Map, Value, json};

/// The component's registration.
pub const COMPONENT: Component = Component {
    name: "fsx",
    schema: Fsx::FIELDS,
    expand,
};

block! {
    /// An `fsx` block.
    struct Fsx {
        vpc: String,
        zone: String,
        capacity_gib: Option<i64>,
        deployment: Option<String>,
        throughput_per_tib: Option<i64>,
        compression: Option<String>,
        version: Option<String>,
        clients: Option<Value> as List,
        s3: Option<Value>,
        final_backup: Option<Value> as Bool,
        kubernetes: Option<Value>,
        mount_point: Option<String>,
        timeouts: Option<Value>,
        tags: Option<Value>,
    }
}

block! {
    /// The `s3` table of an `fsx` block: its link to an S3 prefix.
    struct S3Link {
        path: String,
        import: Option<bool>,
        export: Option<bool>,
        file_system_path: Option<Value> as String,
    }
}

/// Where a Slurm cluster that is a client mounts the file system (`/fsx` unless its block says).
const DEFAULT_MOUNT: &str = "/fsx";

/// Where the Slurm clusters among the clients of the `fsx` block `config` mount it (they mount
/// it on their nodes themselves).
pub(super) fn mount_point(config: &Map<String, Value>) -> String {
    let block: Option<Fsx> = super::read(&Value::Object(config.clone()), "", "the block", "`[fsx.<name>]`").ok();
    block.and_then(|b| b.mount_point).unwrap_or_else(|| DEFAULT_MOUNT.to_owned())
}

/// The Lustre ports clients and servers talk on: LNET, then the range Lustre uses besides.
const LUSTRE_PORTS: [(u16, u16); 2] = [(988, 988), (1018, 1023)];

/// A deployment type's facts: the throughputs per TiB it offers (none for scratch), its
/// default, and the capacity step after 2400 GiB.
struct Deployment {
    name: &'static str,
    throughputs: &'static [i64],
    default_throughput: Option<i64>,
    step: i64,
}

const DEPLOYMENTS: &[Deployment] = &[
    Deployment {
        name: "PERSISTENT_2",
        throughputs: &[125, 250, 500, 1000],
        default_throughput: Some(250),
        step: 2400,
    },
    Deployment {
        name: "PERSISTENT_1",
        throughputs: &[50, 100, 200],
        default_throughput: Some(200),
        step: 2400,
    },
    Deployment {
        name: "SCRATCH_2",
        throughputs: &[],
        default_throughput: None,
        step: 2400,
    },
    Deployment {
        name: "SCRATCH_1",
        throughputs: &[],
        default_throughput: None,
        step: 3600,
    },
];

/// Whether FSx creates a file system of `gib` with this capacity step: 1200, 2400, then
/// multiples of the step.
pub fn valid_capacity(gib: i64, step: i64) -> bool {
    gib == 1200 || gib == 2400 || (gib > 0 && gib % step == 0)
}

/// The valid capacities nearest `gib`: the largest below it and the smallest above it.
fn sizes_near(gib: i64, step: i64) -> Vec<i64> {
    let below = (1..=gib.max(0)).rev().find(|&g| valid_capacity(g, step));
    let above = (gib.max(0) + 1..).find(|&g| valid_capacity(g, step));
    below.into_iter().chain(above).collect()
}

/// The zones of a client's node groups that name one (EFA groups must): where its GPU nodes are.
fn node_zones(input: &Input, client: &str) -> Vec<String> {
    let groups = input
        .components
        .get(client)
        .and_then(|c| c.get("nodegroups").or_else(|| c.get("queues")))
        .and_then(Value::as_object);
    let mut zones: Vec<String> = groups
        .into_iter()
        .flatten()
        .filter_map(|(_, g)| g.get("zone").and_then(Value::as_str).map(str::to_owned))
        .collect();
    zones.dedup();
    zones
}

/// The S3 link: `s3 = { path = "s3://bucket/prefix", import = true, export = true }`.
fn association(block: &Fsx, deployment: &str, file_system: &str) -> Result<Option<Value>, ComponentError> {
    let Some(s3) = &block.s3 else {
        return Ok(None);
    };
    let example = "`s3 = { path = \"s3://bucket/prefix\", import = true, export = true }` (`file_system_path` defaults to \"/\")";
    let link: S3Link = super::read(s3, "s3", "`s3`", example)?;
    if !(link.path.starts_with("s3://") && link.path.len() > 5) {
        return Err(ComponentError::at(
            "s3.path",
            format!("`s3.path = \"{}\"` is not an S3 path", link.path),
            format!("write {example}"),
        ));
    }
    if deployment != "PERSISTENT_2" {
        return Err(ComponentError::at(
            "s3",
            format!("an S3 link needs a PERSISTENT_2 file system, not {deployment}"),
            "use `deployment = \"PERSISTENT_2\"`, or drop `s3`",
        ));
    }
    let events = |on: bool| if on { json!(["NEW", "CHANGED", "DELETED"]) } else { json!([]) };
    let import = link.import.unwrap_or(true);
    Ok(Some(json!({
        "file_system_id": format!("${{{file_system}.id}}"),
        "file_system_path": link.file_system_path.unwrap_or_else(|| json!("/")),
        "data_repository_path": link.path,
        "batch_import_meta_data_on_create": import,
        "auto_import_events": events(import),
        "auto_export_events": events(link.export.unwrap_or(false)),
        "tags": block.tags.clone().unwrap_or_else(|| json!({})),
    })))
}

fn expand(input: &Input) -> Result<Expansion, ComponentError> {
    let block: Fsx = input.block()?;
    let address = input.address;
    let name = address.name();
    let vpc = input.named_vpc("vpc", Some(&block.vpc))?;
    let subnet = vpc.private_subnet("zone", &block.zone)?;
    let clients = input.clients(block.clients.as_ref(), &["eks", "slurm"])?;
    check_clients_zone(input, &clients, &block.zone)?;
    let sizing = Sizing::of(&block)?;

    let tags = block.tags.clone().unwrap_or_else(|| json!({}));
    let reference = |local: &str, output: &str| json!(format!("${{{address}.{local}.{output}}}"));
    let security_group = json!({
        "name": format!("{name}-lustre"),
        "description": format!("FSx for Lustre {name}: TCP 988 and 1018-1023 within the file system and from its clients"),
        "vpc_id": vpc.output("vpc_id"),
        "ingress": super::tcp_rules(&LUSTRE_PORTS, "self", &json!(true)),
        "tags": tags,
    });
    let mut file_system = json!({
        "storage_capacity": sizing.capacity,
        "deployment_type": sizing.deployment.name,
        "data_compression_type": sizing.compression,
        "subnet_id": subnet,
        "security_group_ids": [reference("security_group", "id")],
        "file_system_type_version": block.version.as_deref().unwrap_or("2.15"),
        "tags": tags,
    });
    if let Some(t) = sizing.throughput {
        file_system["per_unit_storage_throughput"] = json!(t);
    }
    super::hand_on(
        &mut file_system,
        &[("final_backup", &block.final_backup), ("timeouts", &block.timeouts)],
    );
    let mut parts = vec![
        Part::new("security_group", "aws_security_group", security_group),
        Part::new("file_system", "aws_fsx_lustre", file_system),
    ];
    parts.extend(super::client_rules(&reference("security_group", "id"), &clients, &LUSTRE_PORTS));
    let file_system_address = format!("{address}.file_system");
    if let Some(link) = association(&block, sizing.deployment.name, &file_system_address)? {
        parts.push(Part::new("s3", "aws_fsx_data_repository_association", link));
    }

    let mut outputs = Map::new();
    for key in ["id", "dns_name", "mount_name"] {
        outputs.insert(key.into(), reference("file_system", key));
    }
    outputs.insert("security_group_id".into(), reference("security_group", "id"));
    let volume = kubernetes::SharedVolume {
        driver: "fsx.csi.aws.com",
        capacity_gib: sizing.capacity,
        handle: json!(format!("${{{file_system_address}.id}}")),
        attributes: [
            ("dnsname".to_owned(), json!(format!("${{{file_system_address}.dns_name}}"))),
            ("mountname".to_owned(), json!(format!("${{{file_system_address}.mount_name}}"))),
        ]
        .into_iter()
        .collect(),
        mount_options: &["flock"],
    };
    // Slurm clusters mount it on their nodes themselves (their user data); EKS ones get a volume.
    let kubernetes_clients: Vec<&str> = clients.iter().copied().filter(|c| c.starts_with("eks.")).collect();
    let mounted = kubernetes::mount(
        address,
        block.kubernetes.as_ref(),
        &kubernetes_clients,
        volume,
        kubernetes::eks_cluster,
    )?;
    Ok(mounted.expansion(parts, outputs))
}

/// An error when the file system's zone holds none of a client's zoned node groups.
fn check_clients_zone(input: &Input, clients: &[&str], zone: &str) -> Result<(), ComponentError> {
    for client in clients {
        let zones = node_zones(input, client);
        if !zones.is_empty() && !zones.iter().any(|z| z == zone) {
            return Err(ComponentError::at(
                "zone",
                format!("zone `{zone}` holds none of `{client}`'s zoned node groups ({})", zones.join(", ")),
                "put the file system in the zone of the GPU nodes it serves: traffic across zones is slower and billed",
            ));
        }
    }
    Ok(())
}

/// The file system's deployment type, capacity, throughput and compression, checked.
struct Sizing {
    deployment: &'static Deployment,
    capacity: i64,
    throughput: Option<i64>,
    compression: String,
}

impl Sizing {
    fn of(block: &Fsx) -> Result<Sizing, ComponentError> {
        let name = block.deployment.as_deref().unwrap_or(crate::provider::aws::FSX_DEFAULT_DEPLOYMENT);
        let Some(deployment) = DEPLOYMENTS.iter().find(|d| d.name == name) else {
            let names: Vec<&str> = DEPLOYMENTS.iter().map(|d| d.name).collect();
            return Err(ComponentError::at(
                "deployment",
                format!("`deployment = \"{name}\"` is not an FSx for Lustre deployment type"),
                format!("expected one of {}", names.join(", ")),
            ));
        };
        let capacity = block.capacity_gib.unwrap_or(1200);
        if !valid_capacity(capacity, deployment.step) {
            let near: Vec<String> = sizes_near(capacity, deployment.step).iter().map(i64::to_string).collect();
            return Err(ComponentError::at(
                "capacity_gib",
                format!("{name} cannot have {capacity} GiB"),
                format!(
                    "FSx for Lustre takes 1200, 2400, then steps of {} GiB; the nearest valid sizes are {} GiB",
                    deployment.step,
                    near.join(" and ")
                ),
            ));
        }
        let compression = block.compression.as_deref().unwrap_or("LZ4");
        if !["LZ4", "NONE"].contains(&compression) {
            return Err(ComponentError::at(
                "compression",
                format!("`compression = \"{compression}\"` is not a Lustre compression"),
                "expected \"LZ4\" or \"NONE\"",
            ));
        }
        Ok(Sizing {
            deployment,
            capacity,
            throughput: throughput(deployment, block.throughput_per_tib)?,
            compression: compression.to_owned(),
        })
    }
}

/// The throughput per TiB: one the deployment offers, else its default (none for scratch).
fn throughput(deployment: &Deployment, asked: Option<i64>) -> Result<Option<i64>, ComponentError> {
    let name = deployment.name;
    match (asked, deployment.default_throughput) {
        (Some(t), _) if deployment.throughputs.contains(&t) => Ok(Some(t)),
        (Some(t), None) => Err(ComponentError::at(
            "throughput_per_tib",
            format!("{name} has no throughput setting (asked for {t} MB/s per TiB)"),
            "drop `throughput_per_tib`, or use a PERSISTENT deployment",
        )),
        (Some(t), Some(_)) => {
            let offered: Vec<String> = deployment.throughputs.iter().map(i64::to_string).collect();
            Err(ComponentError::at(
                "throughput_per_tib",
                format!("{name} offers no throughput of {t} MB/s per TiB"),
                format!("pick one of {}", offered.join(", ")),
            ))
        }
        (None, default) => Ok(default),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacities_follow_the_steps() {
        for gib in [1200, 2400, 4800, 7200, 24000] {
            assert!(valid_capacity(gib, 2400), "{gib}");
        }
        for gib in [0, 1000, 1800, 3600, 6000] {
            assert!(!valid_capacity(gib, 2400), "{gib}");
        }
        assert!(valid_capacity(3600, 3600));
        assert_eq!(sizes_near(3000, 2400), [2400, 4800]);
        assert_eq!(sizes_near(100, 2400), [1200]);
        assert_eq!(sizes_near(5000, 3600), [3600, 7200]);
    }
}
