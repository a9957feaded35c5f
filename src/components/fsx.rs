//! `fsx`: an FSx for Lustre file system for a training cluster. One block expands to a
//! security group with Lustre's ports (TCP 988 and 1018–1023) open within itself, the file
//! system in the private subnet of the GPU nodes' zone, the same ports opened to each client
//! cluster's nodes, and optionally a data repository association with an S3 prefix. Each client
//! `eks` block gives its node role the FSx CSI policy and installs the FSx CSI driver (see
//! `eks`). Its `pv_yaml` output is a PersistentVolume and claim for that driver.

use super::{Component, ComponentError, Expansion, Input, Part, kubernetes};
use crate::schema::{Field, FieldType};
use serde_json::{Map, Value, json};

/// The component's registration.
pub const COMPONENT: Component = Component {
    name: "fsx",
    schema: &[
        Field::required("vpc", FieldType::String),
        Field::required("zone", FieldType::String),
        Field::optional("capacity_gib", FieldType::Integer),
        Field::optional("deployment", FieldType::String),
        Field::optional("throughput_per_tib", FieldType::Integer),
        Field::optional("compression", FieldType::String),
        Field::optional("version", FieldType::String),
        Field::optional("clients", FieldType::List),
        Field::optional("s3", FieldType::Table),
        Field::optional("final_backup", FieldType::Bool),
        Field::optional("kubernetes", FieldType::Table),
        Field::optional("mount_point", FieldType::String),
        Field::optional("timeouts", FieldType::Table),
        Field::optional("tags", FieldType::Table),
    ],
    expand,
};

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
fn association(input: &Input, deployment: &str, file_system: &str) -> Result<Option<Value>, ComponentError> {
    let Some(s3) = input.config.get("s3") else {
        return Ok(None);
    };
    let bad = |key: &str, message: String| {
        ComponentError::at(
            format!("s3.{key}"),
            message,
            "write `s3 = { path = \"s3://bucket/prefix\", import = true, export = true }` (`file_system_path` defaults to \"/\")",
        )
    };
    let table = s3.as_object().ok_or_else(|| bad("path", "`s3` must be a table".into()))?;
    if let Some(extra) = table
        .keys()
        .find(|k| !["path", "import", "export", "file_system_path"].contains(&k.as_str()))
    {
        return Err(bad(extra, format!("`s3` has no attribute `{extra}`")));
    }
    let path = match table.get("path").and_then(Value::as_str) {
        Some(p) if p.starts_with("s3://") && p.len() > 5 => p,
        Some(p) => return Err(bad("path", format!("`s3.path = \"{p}\"` is not an S3 path"))),
        None => return Err(bad("path", "`s3` has no `path`".into())),
    };
    if deployment != "PERSISTENT_2" {
        return Err(ComponentError::at(
            "s3",
            format!("an S3 link needs a PERSISTENT_2 file system, not {deployment}"),
            "use `deployment = \"PERSISTENT_2\"`, or drop `s3`",
        ));
    }
    let flag = |key: &str, default: bool| match table.get(key) {
        None => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(bad(key, format!("`s3.{key}` must be true or false"))),
    };
    let events = |on: bool| if on { json!(["NEW", "CHANGED", "DELETED"]) } else { json!([]) };
    let import = flag("import", true)?;
    Ok(Some(json!({
        "file_system_id": format!("${{{file_system}.id}}"),
        "file_system_path": table.get("file_system_path").cloned().unwrap_or_else(|| json!("/")),
        "data_repository_path": path,
        "batch_import_meta_data_on_create": import,
        "auto_import_events": events(import),
        "auto_export_events": events(flag("export", false)?),
        "tags": input.config.get("tags").cloned().unwrap_or_else(|| json!({})),
    })))
}

fn expand(input: &Input) -> Result<Expansion, ComponentError> {
    let address = input.address;
    let name = address.split_once('.').map_or(address, |(_, n)| n);
    let vpc = input.named_vpc("vpc")?;
    let zone = input.text("zone").unwrap_or_default();
    let subnet = vpc.private_subnet("zone", zone)?;
    let clients = input.clients(&["eks", "slurm"])?;
    for client in &clients {
        let zones = node_zones(input, client);
        if !zones.is_empty() && !zones.iter().any(|z| z == zone) {
            return Err(ComponentError::at(
                "zone",
                format!("zone `{zone}` holds none of `{client}`'s zoned node groups ({})", zones.join(", ")),
                "put the file system in the zone of the GPU nodes it serves: traffic across zones is slower and billed",
            ));
        }
    }

    let deployment_name = input.text("deployment").unwrap_or(crate::provider::aws::FSX_DEFAULT_DEPLOYMENT);
    let Some(deployment) = DEPLOYMENTS.iter().find(|d| d.name == deployment_name) else {
        let names: Vec<&str> = DEPLOYMENTS.iter().map(|d| d.name).collect();
        return Err(ComponentError::at(
            "deployment",
            format!("`deployment = \"{deployment_name}\"` is not an FSx for Lustre deployment type"),
            format!("expected one of {}", names.join(", ")),
        ));
    };
    let capacity = input.config.get("capacity_gib").and_then(Value::as_i64).unwrap_or(1200);
    if !valid_capacity(capacity, deployment.step) {
        let near: Vec<String> = sizes_near(capacity, deployment.step).iter().map(i64::to_string).collect();
        return Err(ComponentError::at(
            "capacity_gib",
            format!("{deployment_name} cannot have {capacity} GiB"),
            format!(
                "FSx for Lustre takes 1200, 2400, then steps of {} GiB; the nearest valid sizes are {} GiB",
                deployment.step,
                near.join(" and ")
            ),
        ));
    }
    let throughput = match (
        input.config.get("throughput_per_tib").and_then(Value::as_i64),
        deployment.default_throughput,
    ) {
        (Some(t), _) if deployment.throughputs.contains(&t) => Some(t),
        (Some(t), None) => {
            return Err(ComponentError::at(
                "throughput_per_tib",
                format!("{deployment_name} has no throughput setting (asked for {t} MB/s per TiB)"),
                "drop `throughput_per_tib`, or use a PERSISTENT deployment",
            ));
        }
        (Some(t), Some(_)) => {
            let offered: Vec<String> = deployment.throughputs.iter().map(i64::to_string).collect();
            return Err(ComponentError::at(
                "throughput_per_tib",
                format!("{deployment_name} offers no throughput of {t} MB/s per TiB"),
                format!("pick one of {}", offered.join(", ")),
            ));
        }
        (None, default) => default,
    };
    let compression = input.text("compression").unwrap_or("LZ4");
    if !["LZ4", "NONE"].contains(&compression) {
        return Err(ComponentError::at(
            "compression",
            format!("`compression = \"{compression}\"` is not a Lustre compression"),
            "expected \"LZ4\" or \"NONE\"",
        ));
    }

    let tags = input.config.get("tags").cloned().unwrap_or_else(|| json!({}));
    let reference = |local: &str, output: &str| json!(format!("${{{address}.{local}.{output}}}"));
    let mut parts = vec![Part {
        local: "security_group".into(),
        kind: "aws_security_group",
        config: json!({
            "name": format!("{name}-lustre"),
            "description": format!("FSx for Lustre {name}: TCP 988 and 1018-1023 within the file system and from its clients"),
            "vpc_id": vpc.output("vpc_id"),
            "ingress": super::tcp_rules(&LUSTRE_PORTS, "self", &json!(true)),
            "tags": tags,
        }),
        depends_on: vec![],
    }];
    let mut file_system = json!({
        "storage_capacity": capacity,
        "deployment_type": deployment_name,
        "data_compression_type": compression,
        "subnet_id": subnet,
        "security_group_ids": [reference("security_group", "id")],
        "file_system_type_version": input.text("version").unwrap_or("2.15"),
        "tags": tags,
    });
    if let Some(t) = throughput {
        file_system["per_unit_storage_throughput"] = json!(t);
    }
    for key in ["final_backup", "timeouts"] {
        if let Some(v) = input.config.get(key) {
            file_system[key] = v.clone();
        }
    }
    parts.push(Part {
        local: "file_system".into(),
        kind: "aws_fsx_lustre",
        config: file_system,
        depends_on: vec![],
    });
    parts.extend(super::client_rules(&reference("security_group", "id"), &clients, &LUSTRE_PORTS));
    let file_system_address = format!("{address}.file_system");
    if let Some(link) = association(input, deployment_name, &file_system_address)? {
        parts.push(Part {
            local: "s3".into(),
            kind: "aws_fsx_data_repository_association",
            config: link,
            depends_on: vec![],
        });
    }

    let mut outputs = Map::new();
    for key in ["id", "dns_name", "mount_name"] {
        outputs.insert(key.into(), reference("file_system", key));
    }
    outputs.insert("security_group_id".into(), reference("security_group", "id"));
    let volume = kubernetes::SharedVolume {
        driver: "fsx.csi.aws.com",
        capacity_gib: capacity,
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
        input.config.get("kubernetes"),
        &kubernetes_clients,
        volume,
        kubernetes::eks_cluster,
    )?;
    Ok(mounted.expansion(parts, outputs))
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
