//! `efs`: an EFS file system for home directories and shared code. One block expands to a
//! security group, the file system, a mount target in the private subnet of each of the VPC's
//! zones, and NFS (TCP 2049) opened to each client cluster's nodes. Each client `eks` block
//! gives its node role the EFS CSI policy and installs the EFS CSI driver (see `eks`). Its
//! `pv_yaml` output is a PersistentVolume and claim for that driver.

use super::{Component, ComponentError, Expansion, Input, Part, kubernetes};
use crate::schema::{Block, block};
use serde_json::{Map, Value, json};

/// The component's registration.
pub const COMPONENT: Component = Component {
    name: "efs",
    schema: Efs::FIELDS,
    expand,
};

block! {
    /// An `efs` block.
    struct Efs {
        vpc: String,
        clients: Option<Value> as List,
        kubernetes: Option<Value>,
        performance_mode: Option<String>,
        throughput_mode: Option<String>,
        encrypted: Option<Value> as Bool,
        timeouts: Option<Value>,
        tags: Option<Value>,
    }
}

/// NFS.
const NFS_PORT: u16 = 2049;

/// The size a claim asks for: EFS grows by itself, but Kubernetes wants a number.
const CLAIM_GIB: i64 = 100;

fn expand(input: &Input) -> Result<Expansion, ComponentError> {
    let block: Efs = input.block()?;
    let address = input.address;
    let name = address.name();
    let vpc = input.named_vpc("vpc", Some(&block.vpc))?;
    let clients = input.clients(block.clients.as_ref(), &["eks"])?;
    let choice = |key: &str, written: &Option<String>, allowed: &[&str], default: &'static str| -> Result<Value, ComponentError> {
        match written.as_deref() {
            None => Ok(json!(default)),
            Some(v) if allowed.contains(&v) => Ok(json!(v)),
            Some(v) => Err(ComponentError::at(
                key,
                format!("`{key} = \"{v}\"` is not an EFS {}", key.replace('_', " ")),
                format!("expected one of {}", allowed.join(", ")),
            )),
        }
    };
    let tags = block.tags.clone().unwrap_or_else(|| json!({}));
    let reference = |local: &str, output: &str| json!(format!("${{{address}.{local}.{output}}}"));

    let mut file_system = json!({
        "performance_mode": choice("performance_mode", &block.performance_mode, &["generalPurpose", "maxIO"], "generalPurpose")?,
        "throughput_mode": choice("throughput_mode", &block.throughput_mode, &["elastic", "bursting", "provisioned"], "elastic")?,
        "encrypted": block.encrypted.clone().unwrap_or(json!(true)),
        "tags": tags,
    });
    if let Some(t) = &block.timeouts {
        file_system["timeouts"] = t.clone();
    }
    let mut parts = vec![
        Part {
            local: "security_group".into(),
            kind: "aws_security_group",
            config: json!({
                "name": format!("{name}-efs"),
                "description": format!("EFS {name}: NFS from its clients"),
                "vpc_id": vpc.output("vpc_id"),
                "tags": tags,
            }),
            depends_on: vec![],
            existing: None,
        },
        Part {
            local: "file_system".into(),
            kind: "aws_efs_file_system",
            config: file_system,
            depends_on: vec![],
            existing: None,
        },
    ];
    for zone in &vpc.zones {
        parts.push(Part {
            local: format!("mount_targets.{zone}"),
            kind: "aws_efs_mount_target",
            config: json!({
                "file_system_id": reference("file_system", "id"),
                "subnet_id": vpc.private_subnet("vpc", zone)?,
                "security_groups": [reference("security_group", "id")],
            }),
            depends_on: vec![],
            existing: None,
        });
    }
    parts.extend(super::client_rules(
        &reference("security_group", "id"),
        &clients,
        &[(NFS_PORT, NFS_PORT)],
    ));

    let file_system_address = format!("{address}.file_system");
    let mut outputs = Map::new();
    for key in ["id", "arn", "dns_name"] {
        outputs.insert(key.into(), reference("file_system", key));
    }
    outputs.insert("security_group_id".into(), reference("security_group", "id"));
    let volume = kubernetes::SharedVolume {
        driver: "efs.csi.aws.com",
        capacity_gib: CLAIM_GIB,
        handle: json!(format!("${{{file_system_address}.id}}")),
        attributes: Map::new(),
        mount_options: &[],
    };
    let mounted = kubernetes::mount(address, block.kubernetes.as_ref(), &clients, volume, kubernetes::eks_cluster)?;
    Ok(mounted.expansion(parts, outputs))
}
