//! `eks`: an EKS cluster whose GPU node groups have EFA wired the way AWS documents it. One
//! block expands to the cluster's IAM role, the cluster on the VPC's private subnets, its OIDC
//! provider, the add-ons, the node IAM role, and per node group: with EFA, a `cluster` placement
//! group (unless a capacity reservation brings its own placement), an EFA security group (all
//! traffic from and to itself) and a launch template with one EFA interface per network card;
//! then the managed node group in its zone's single private subnet.

use super::{Component, ComponentError, Expansion, Input, NamedVpc, Part, batch, instances, kubernetes};
use crate::readiness::{Check, NodeGroup};
use crate::schema::{Field, FieldType};
use serde_json::{Map, Value, json};

/// The component's registration.
pub const COMPONENT: Component = Component {
    name: "eks",
    schema: &[
        Field::optional("name", FieldType::String),
        Field::optional("version", FieldType::String),
        Field::optional("vpc", FieldType::String),
        Field::optional("vpc_id", FieldType::String),
        Field::optional("subnet_ids", FieldType::List),
        Field::optional("endpoint", FieldType::String),
        Field::optional("authentication_mode", FieldType::String),
        Field::optional("logging", FieldType::List),
        Field::optional("addons", FieldType::List),
        Field::required("nodegroups", FieldType::Table),
        Field::optional("kubernetes", FieldType::Table),
        Field::optional("timeouts", FieldType::Table),
        Field::optional("tags", FieldType::Table),
    ],
    expand,
};

/// The Kubernetes version when the block names none. It is written into the cluster's
/// attributes, so a later forge with another default shows the upgrade in the plan.
pub const DEFAULT_VERSION: &str = "1.31";

/// The add-ons a cluster gets when the block lists none.
const DEFAULT_ADDONS: &[&str] = &["vpc-cni", "coredns", "kube-proxy"];

/// Add-ons the nodes need to join (installed before the node groups); the others, CoreDNS
/// first among them, need nodes to run on and are installed after.
const BEFORE_NODES: &[&str] = &["vpc-cni", "kube-proxy", "eks-pod-identity-agent"];

/// What a node group accepts.
const NODEGROUP_KEYS: &[&str] = &[
    "instance_type",
    "instance_types",
    "size",
    "zone",
    "subnet_id",
    "efa",
    "placement_group",
    "capacity_reservation_id",
    "capacity_type",
    "labels",
    "taints",
    "volume_gib",
    "ami_type",
    "kubernetes",
    "timeouts",
];

const MANAGED: &str = "arn:aws:iam::aws:policy";

/// Per storage component type: the AWS-managed policy its CSI driver needs on the nodes (with
/// its IAM path), and the driver's add-on.
const CSI_DRIVERS: &[(&str, &str, &str)] = &[
    ("fsx", "AmazonFSxFullAccess", "aws-fsx-csi-driver"),
    ("efs", "service-role/AmazonEFSCSIDriverPolicy", "aws-efs-csi-driver"),
];

/// Where the cluster's network comes from.
enum Network<'a> {
    /// A `vpc` component of this stack.
    Component(NamedVpc<'a>),
    /// An existing network: its VPC and subnets.
    Existing { vpc_id: &'a str, subnet_ids: &'a Value },
}

impl Network<'_> {
    fn vpc_id(&self) -> Value {
        match self {
            Network::Component(vpc) => vpc.output("vpc_id"),
            Network::Existing { vpc_id, .. } => json!(vpc_id),
        }
    }

    fn private_subnets(&self) -> Value {
        match self {
            Network::Component(vpc) => vpc.output("private_subnet_ids"),
            Network::Existing { subnet_ids, .. } => (*subnet_ids).clone(),
        }
    }
}

/// A node group's size: `2`, or `{ min = 1, max = 4, desired = 2 }` (desired defaults to min).
fn size(key: &str, value: Option<&Value>) -> Result<Value, ComponentError> {
    let bad = |message: String| ComponentError::at(key, message, "write `size = 2` or `size = { min = 1, max = 4, desired = 2 }`");
    match value {
        Some(Value::Number(n)) => match n.as_i64() {
            Some(n) if (1..=1000).contains(&n) => Ok(json!({ "min": n, "max": n, "desired": n })),
            _ => Err(bad(format!("`{key} = {n}` must be a whole number from 1 to 1000"))),
        },
        Some(Value::Object(range)) => {
            if let Some(extra) = range.keys().find(|k| !["min", "max", "desired"].contains(&k.as_str())) {
                return Err(bad(format!("`{key}` has `{extra}`; a size range has `min`, `max` and `desired`")));
            }
            let get = |k: &str| range.get(k).and_then(Value::as_i64);
            let (Some(min), Some(max)) = (get("min"), get("max")) else {
                return Err(bad(format!("`{key}` needs whole numbers `min` and `max`")));
            };
            let desired = get("desired").unwrap_or(min);
            if !(0 <= min && min <= desired && desired <= max && max >= 1) {
                return Err(bad(format!(
                    "`{key}` = {{ min = {min}, max = {max}, desired = {desired} }}: min ≤ desired ≤ max must hold (and max ≥ 1)"
                )));
            }
            Ok(json!({ "min": min, "max": max, "desired": desired }))
        }
        None => Err(bad(format!("`{key}` is missing: how many nodes?"))),
        Some(other) => Err(bad(format!(
            "`{key}` must be a number or a table, not {}",
            crate::schema::describe(other)
        ))),
    }
}

/// The AMI type EKS should use for an instance family: NVIDIA for GPU families, Neuron for
/// Trainium and Inferentia, standard otherwise; Arm for Graviton (`c7g`, `g5g`).
pub fn ami_type(instance_type: &str) -> &'static str {
    let family = instance_type.split('.').next().unwrap_or_default();
    let letters: String = family.chars().take_while(char::is_ascii_alphabetic).collect();
    let graviton = family
        .trim_start_matches(char::is_alphabetic)
        .trim_start_matches(|c: char| c.is_ascii_digit())
        .starts_with('g');
    match (letters.as_str(), graviton) {
        ("p" | "g", false) => "AL2023_x86_64_NVIDIA",
        ("g", true) => "AL2023_ARM_64_NVIDIA",
        ("trn" | "inf", _) => "AL2023_x86_64_NEURON",
        (_, true) => "AL2023_ARM_64_STANDARD",
        _ => "AL2023_x86_64_STANDARD",
    }
}

fn expand(input: &Input) -> Result<Expansion, ComponentError> {
    let Input {
        address,
        config,
        providers,
        components,
        facts,
    } = input;
    let string = |key: &str| config.get(key).and_then(Value::as_str);
    let cluster_name = string("name")
        .unwrap_or_else(|| address.split_once('.').map_or(address, |(_, n)| n))
        .to_owned();
    let reference = |local: &str, output: &str| json!(format!("${{{address}.{local}.{output}}}"));
    let tags = config.get("tags").cloned().unwrap_or_else(|| json!({}));

    let network = match (string("vpc"), string("vpc_id"), config.get("subnet_ids")) {
        (Some(_), None, None) => {
            let vpc = input.named_vpc("vpc")?;
            Network::Component(vpc)
        }
        (None, Some(vpc_id), Some(subnet_ids)) => Network::Existing { vpc_id, subnet_ids },
        _ => {
            return Err(ComponentError::at(
                "vpc",
                "the cluster needs a network: `vpc` or `vpc_id` with `subnet_ids`, not both",
                "write `vpc = \"vpc.main\"` for a `vpc` block of this stack, or `vpc_id = \"vpc-…\"` and `subnet_ids = [...]` for an existing network",
            ));
        }
    };
    let (public, private) = match string("endpoint").unwrap_or("public") {
        "public" => (true, false),
        "private" => (false, true),
        "both" => (true, true),
        other => {
            return Err(ComponentError::at(
                "endpoint",
                format!("`endpoint = \"{other}\"` is not an endpoint access"),
                "expected \"public\", \"private\" or \"both\"",
            ));
        }
    };

    let mut parts = Vec::new();
    let part = |local: &str, kind: &'static str, config: Value, depends_on: Vec<String>| Part {
        local: local.to_owned(),
        kind,
        config,
        depends_on,
    };
    parts.push(part(
        "cluster_role",
        "aws_iam_role",
        json!({
            "name": format!("{cluster_name}-cluster"),
            "assume_role_policy": { "Version": "2012-10-17", "Statement": [{ "Effect": "Allow", "Principal": { "Service": "eks.amazonaws.com" }, "Action": ["sts:AssumeRole", "sts:TagSession"] }] },
            "managed_policy_arns": [format!("{MANAGED}/AmazonEKSClusterPolicy")],
            "tags": tags,
        }),
        vec![],
    ));
    let mut cluster = json!({
        "name": cluster_name,
        "role_arn": reference("cluster_role", "arn"),
        "version": string("version").unwrap_or(DEFAULT_VERSION),
        "subnet_ids": network.private_subnets(),
        "endpoint_public_access": public,
        "endpoint_private_access": private,
        "authentication_mode": string("authentication_mode").unwrap_or("API_AND_CONFIG_MAP"),
        "logging": config.get("logging").cloned().unwrap_or_else(|| json!([])),
        "tags": tags,
    });
    if let Some(timeouts) = config.get("timeouts") {
        cluster["timeouts"] = timeouts.clone();
    }
    parts.push(part("cluster", "aws_eks_cluster", cluster, vec![]));
    parts.push(part(
        "oidc",
        "aws_iam_oidc_provider",
        json!({ "url": reference("cluster", "oidc_issuer"), "client_ids": ["sts.amazonaws.com"], "tags": tags }),
        vec![],
    ));
    // Storage blocks that list this cluster as a client: the CSI driver for each type, and
    // the policy it needs on the nodes.
    let mut node_policies: Vec<String> = [
        "AmazonEKSWorkerNodePolicy",
        "AmazonEKS_CNI_Policy",
        "AmazonEC2ContainerRegistryReadOnly",
    ]
    .iter()
    .map(|p| format!("{MANAGED}/{p}"))
    .collect();
    let mut storage_addons = Vec::new();
    for storage in super::storage_for(components, address) {
        let Some((policy, driver)) = CSI_DRIVERS.iter().find(|(kind, ..)| *kind == storage).map(|(_, p, d)| (p, d)) else {
            continue;
        };
        let policy = format!("{MANAGED}/{policy}");
        if !node_policies.contains(&policy) {
            node_policies.push(policy);
            storage_addons.push((*driver).to_owned());
        }
    }
    parts.push(part(
        "node_role",
        "aws_iam_role",
        json!({
            "name": format!("{cluster_name}-node"),
            "assume_role_policy": { "Version": "2012-10-17", "Statement": [{ "Effect": "Allow", "Principal": { "Service": "ec2.amazonaws.com" }, "Action": "sts:AssumeRole" }] },
            "managed_policy_arns": node_policies,
            "tags": tags,
        }),
        vec![],
    ));

    let addons: Vec<String> = match config.get("addons") {
        None => DEFAULT_ADDONS.iter().map(|a| (*a).to_owned()).collect(),
        Some(list) => list
            .as_array()
            .into_iter()
            .flatten()
            .map(|a| {
                a.as_str().map(str::to_owned).ok_or_else(|| {
                    ComponentError::at(
                        "addons",
                        "`addons` lists add-on names as strings",
                        "e.g. `addons = [\"vpc-cni\", \"coredns\", \"kube-proxy\", \"aws-efs-csi-driver\"]`",
                    )
                })
            })
            .collect::<Result<_, _>>()?,
    };
    let mut addons = addons;
    addons.extend(storage_addons.into_iter().filter(|d| !addons.contains(d)).collect::<Vec<_>>());
    let before_nodes: Vec<String> = addons
        .iter()
        .filter(|a| BEFORE_NODES.contains(&a.as_str()))
        .map(|a| format!("{address}.addon.{a}"))
        .collect();

    let Some(nodegroups) = config.get("nodegroups").and_then(Value::as_object).filter(|n| !n.is_empty()) else {
        return Err(ComponentError::at(
            "nodegroups",
            "the cluster has no node groups",
            "add one: `[eks.<name>.nodegroups.system]` with `instance_type` and `size`",
        ));
    };
    let mut nodegroup_outputs = Map::new();
    let mut nodegroup_addresses = Vec::new();
    let mut served_by = Vec::new();
    for (ng, body) in nodegroups {
        let key = |k: &str| format!("nodegroups.{ng}.{k}");
        let Some(body) = body.as_object() else {
            return Err(ComponentError::at(
                format!("nodegroups.{ng}"),
                format!("node group `{ng}` must be a table"),
                format!("write `[eks.<name>.nodegroups.{ng}]` with `instance_type` and `size`"),
            ));
        };
        if let Some(extra) = body.keys().find(|k| !NODEGROUP_KEYS.contains(&k.as_str())) {
            return Err(ComponentError::at(
                key(extra),
                format!("node group `{ng}` has no attribute `{extra}`"),
                crate::schema::suggestion(extra, NODEGROUP_KEYS),
            ));
        }
        let text = |k: &str| body.get(k).and_then(Value::as_str);
        let instance_type = text("instance_type");
        let instance_types = body.get("instance_types");
        let scaling = size(&key("size"), body.get("size"))?;
        let capacity_type = text("capacity_type").unwrap_or("ON_DEMAND");
        if !["ON_DEMAND", "SPOT", "CAPACITY_BLOCK"].contains(&capacity_type) {
            return Err(ComponentError::at(
                key("capacity_type"),
                format!("`capacity_type = \"{capacity_type}\"` is not a capacity type"),
                "expected \"ON_DEMAND\", \"SPOT\" or \"CAPACITY_BLOCK\"",
            ));
        }
        let reservation = text("capacity_reservation_id");
        if capacity_type == "CAPACITY_BLOCK" && reservation.is_none() {
            return Err(ComponentError::at(
                key("capacity_type"),
                format!("node group `{ng}` runs on a Capacity Block but names no reservation"),
                "add `capacity_reservation_id = \"cr-…\"`: the Capacity Block's reservation id",
            ));
        }
        let own_placement = reservation.is_some();
        if reservation.is_some() && text("zone").is_none() && text("subnet_id").is_none() {
            return Err(ComponentError::at(
                key("capacity_reservation_id"),
                format!("node group `{ng}` uses a capacity reservation but names no `zone`"),
                "a reservation is in one availability zone: add `zone = \"…\"` (the reservation's)",
            ));
        }

        let types: Vec<&str> = match (instance_type, instance_types) {
            (Some(t), None) => vec![t],
            (None, Some(list)) => list.as_array().into_iter().flatten().filter_map(Value::as_str).collect(),
            (Some(_), Some(_)) => {
                return Err(ComponentError::at(
                    key("instance_types"),
                    format!("node group `{ng}` sets both `instance_type` and `instance_types`"),
                    "use `instance_type` for one type, `instance_types` for several (SPOT diversification)",
                ));
            }
            (None, None) => {
                return Err(ComponentError::at(
                    key("instance_type"),
                    format!("node group `{ng}` names no instance type"),
                    "add `instance_type = \"p5.48xlarge\"` (or `instance_types = [...]`)",
                ));
            }
        };
        let looked = instances::look_up(
            facts,
            &key(if instance_type.is_some() {
                "instance_type"
            } else {
                "instance_types"
            }),
            &types,
        )?;
        let (efa_count, accelerators) = (looked.efa_interfaces, looked.accelerators);
        let supports_efa = efa_count.unwrap_or(0) > 0;
        let efa = match body.get("efa") {
            None => supports_efa && instance_type.is_some(),
            Some(Value::Bool(wanted)) => *wanted,
            Some(other) => {
                return Err(ComponentError::at(
                    key("efa"),
                    format!("`efa` must be true or false, not {}", crate::schema::describe(other)),
                    "write `efa = true` or `efa = false`",
                ));
            }
        };
        if efa && !supports_efa {
            let why = match efa_count {
                Some(_) => format!("`{}` has no EFA support", types[0]),
                None => format!("forge cannot tell how many EFA interfaces `{}` takes without asking AWS", types[0]),
            };
            return Err(ComponentError::at(
                key("efa"),
                format!("node group `{ng}` asks for EFA, but {why}"),
                "use an EFA type (p4d/p4de 4 interfaces, p5/p5e 32, p5en 16, trn1 8, trn1n/trn2 16), set `efa = false`, or run with AWS credentials so forge can ask",
            ));
        }
        if efa && instance_types.is_some() {
            return Err(ComponentError::at(
                key("instance_types"),
                format!(
                    "EFA node group `{ng}` takes its instance type from its launch template, so the node group cannot list `instance_types` too"
                ),
                "write one `instance_type`: the launch template's EFA interfaces are laid out for that type",
            ));
        }
        let zone = text("zone");
        if efa && zone.is_none() {
            return Err(ComponentError::at(
                format!("nodegroups.{ng}"),
                format!("EFA node group `{ng}` has no `zone`"),
                "EFA traffic must stay in one subnet: add `zone = \"us-west-2c\"` (a zone of the VPC that offers the instance type)",
            ));
        }
        let placement_group = match body.get("placement_group") {
            None => efa && !own_placement,
            Some(Value::Bool(true)) if own_placement => {
                return Err(ComponentError::at(
                    key("placement_group"),
                    format!("node group `{ng}` asks for a placement group and also uses a capacity reservation"),
                    "a capacity reservation or Capacity Block brings its own placement: drop `placement_group`",
                ));
            }
            Some(Value::Bool(wanted)) => *wanted,
            Some(other) => {
                return Err(ComponentError::at(
                    key("placement_group"),
                    format!("`placement_group` must be true or false, not {}", crate::schema::describe(other)),
                    "write `placement_group = true` or `false`",
                ));
            }
        };
        let subnets = match (&network, zone, text("subnet_id")) {
            (_, _, Some(subnet)) => json!([subnet]),
            (Network::Component(vpc), Some(zone), None) => json!([vpc.private_subnet(&key("zone"), zone)?]),
            (Network::Existing { .. }, Some(_), None) => {
                return Err(ComponentError::at(
                    key("zone"),
                    format!(
                        "node group `{ng}` is pinned to a zone in an existing network, but forge cannot tell which subnet is that zone's"
                    ),
                    "add `subnet_id = \"subnet-…\"`: the private subnet in that zone",
                ));
            }
            (_, None, None) => network.private_subnets(),
        };
        if let Some(zone) = zone {
            for t in &types {
                if facts.offered(t, zone) == Some(false) {
                    let offered = facts.zones(t).unwrap_or_default();
                    return Err(ComponentError::at(
                        key("zone"),
                        format!("zone `{zone}` does not offer `{t}`"),
                        if offered.is_empty() {
                            "no zone of this region offers it: pick another region or type".to_owned()
                        } else {
                            format!("zones that offer it: {}", offered.join(", "))
                        },
                    ));
                }
            }
        }
        let timeouts = match body.get("timeouts") {
            Some(t) => {
                check_timeouts(&key("timeouts"), t)?;
                Some(t.clone())
            }
            None => None,
        };

        let local = |what: &str| format!("nodegroups.{ng}.{what}");
        let resource_name = format!("{cluster_name}-{ng}");
        let ami = text("ami_type").unwrap_or_else(|| ami_type(types[0]));
        served_by.push(ServedGroup {
            name: ng.clone(),
            types: types.iter().map(|t| (*t).to_owned()).collect(),
            taints: body.get("taints").and_then(Value::as_array).cloned().unwrap_or_default(),
            nodes: scaling["desired"].as_i64().unwrap_or(0),
            devices: scaling["max"].as_i64().unwrap_or(0) * i64::from(accelerators.unwrap_or(0)),
            efa: efa.then(|| efa_count.unwrap_or(0)),
            plugins: group_plugins(body.get("kubernetes"), &key("kubernetes"), ami, efa)?,
            address: format!("{address}.{}", local("nodegroup")),
        });
        let mut nodegroup = json!({
            "cluster_name": reference("cluster", "name"),
            "name": ng,
            "node_role_arn": reference("node_role", "arn"),
            "subnet_ids": subnets,
            "ami_type": ami,
            "capacity_type": capacity_type,
            "scaling": scaling,
            "labels": body.get("labels").cloned().unwrap_or_else(|| json!({})),
            "taints": body.get("taints").cloned().unwrap_or_else(|| json!([])),
            "tags": tags,
        });
        if let Some(t) = timeouts {
            nodegroup["timeouts"] = t;
        }
        let needs_template = efa || reservation.is_some() || placement_group;
        if needs_template && types.len() > 1 {
            return Err(ComponentError::at(
                key("instance_types"),
                format!(
                    "node group `{ng}` needs a launch template (EFA, a placement group or a reservation), which takes one instance type"
                ),
                "write one `instance_type`",
            ));
        }
        if needs_template {
            let mut template = json!({
                "name": resource_name,
                "instance_type": types[0],
                "tags": tags,
            });
            if placement_group {
                parts.push(part(
                    &local("placement_group"),
                    "aws_placement_group",
                    json!({ "name": resource_name, "strategy": "cluster", "tags": tags }),
                    vec![],
                ));
                template["placement_group"] = reference(&local("placement_group"), "name");
            }
            if efa {
                let count = efa_count.unwrap_or(0);
                parts.push(part(
                    &local("efa_security_group"),
                    "aws_security_group",
                    json!({
                        "name": format!("{resource_name}-efa"),
                        "description": format!("EFA for node group {ng} of {cluster_name}: all traffic to and from itself"),
                        "vpc_id": network.vpc_id(),
                        "ingress": [{ "protocol": "-1", "self": true }],
                        "egress": [{ "protocol": "-1", "self": true }],
                        "tags": tags,
                    }),
                    vec![],
                ));
                let groups = json!([
                    reference(&local("efa_security_group"), "id"),
                    reference("cluster", "cluster_security_group_id")
                ]);
                template["network_interfaces"] = Value::Array(instances::efa_interfaces(count, &groups));
            }
            if let Some(reservation) = reservation {
                template["capacity_reservation_id"] = json!(reservation);
                template["capacity_block"] = json!(capacity_type == "CAPACITY_BLOCK");
            }
            if let Some(volume) = body.get("volume_gib") {
                template["block_devices"] = json!([{ "device_name": "/dev/xvda", "volume_size": volume, "volume_type": "gp3" }]);
            }
            parts.push(part(&local("launch_template"), "aws_launch_template", template, vec![]));
            nodegroup["launch_template_id"] = reference(&local("launch_template"), "id");
            nodegroup["launch_template_version"] = reference(&local("launch_template"), "latest_version");
        } else {
            nodegroup["instance_types"] = json!(types);
            if let Some(volume) = body.get("volume_gib") {
                nodegroup["disk_size"] = volume.clone();
            }
        }
        parts.push(part(&local("nodegroup"), "aws_eks_nodegroup", nodegroup, before_nodes.clone()));
        nodegroup_addresses.push(format!("{address}.{}", local("nodegroup")));
        nodegroup_outputs.insert(
            ng.clone(),
            json!({ "name": reference(&local("nodegroup"), "name"), "efa_interfaces": if efa { efa_count.unwrap_or(0) } else { 0 } }),
        );
    }

    for addon in &addons {
        let after = if BEFORE_NODES.contains(&addon.as_str()) {
            vec![]
        } else {
            nodegroup_addresses.clone()
        };
        parts.push(part(
            &format!("addon.{addon}"),
            "aws_eks_addon",
            json!({ "cluster_name": reference("cluster", "name"), "name": addon, "tags": tags }),
            after,
        ));
    }

    let settings = config.get("kubernetes");
    kubernetes::check_keys(settings, "kubernetes", kubernetes::CLUSTER_SETTINGS)?;
    let region = providers
        .get("aws")
        .and_then(|a| a.get("region"))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| std::env::var("AWS_REGION").ok())
        .or_else(|| std::env::var("AWS_DEFAULT_REGION").ok())
        .unwrap_or_else(|| "us-east-1".into());
    let cluster_ref = kubernetes::eks_cluster(address);
    parts.extend(device_plugins(address, settings, &served_by, &region, &cluster_ref)?);
    parts.extend(kubernetes::namespaces(components, address, &cluster_ref));
    // On destroy, before the node groups and add-ons go: the load balancers and volumes that
    // Kubernetes made in the VPC.
    let teardown_after = nodegroup_addresses
        .iter()
        .cloned()
        .chain(addons.iter().map(|a| format!("{address}.addon.{a}")))
        .collect();
    parts.push(part(
        "k8s.teardown",
        "k8s_teardown",
        json!({ "cluster": cluster_ref }),
        teardown_after,
    ));
    let gpu_groups: Vec<batch::GpuGroup> = served_by
        .iter()
        .filter(|g| g.devices > 0)
        .map(|g| batch::GpuGroup {
            label: "eks.amazonaws.com/nodegroup",
            name: json!(format!("${{{}.name}}", g.address)),
            key: g.name.clone(),
            resource: if g.plugins.contains(&kubernetes::NEURON.key) {
                kubernetes::NEURON.resource
            } else {
                kubernetes::NVIDIA.resource
            },
            devices: g.devices,
            tolerations: g.taints.iter().map(kubernetes::toleration).collect(),
        })
        .collect();
    let batch = batch::batch(input, address, &cluster_ref, &gpu_groups)?;
    parts.extend(batch.parts);
    let ready = readiness(settings, &served_by, &cluster_ref, batch.queues)?;

    let mut outputs = Map::new();
    for key in [
        "name",
        "arn",
        "endpoint",
        "certificate_authority",
        "oidc_issuer",
        "cluster_security_group_id",
        "version",
    ] {
        outputs.insert(key.into(), reference("cluster", key));
    }
    outputs.insert("node_role_arn".into(), reference("node_role", "arn"));
    outputs.insert("node_role_name".into(), reference("node_role", "name"));
    outputs.insert("oidc_provider_arn".into(), reference("oidc", "arn"));
    outputs.insert(
        "region".into(),
        providers.get("aws").and_then(|a| a.get("region")).cloned().unwrap_or(Value::Null),
    );
    outputs.insert("nodegroups".into(), Value::Object(nodegroup_outputs));
    Ok(Expansion { parts, outputs, ready })
}

/// What the device plugins and the readiness checks need of one node group.
struct ServedGroup {
    name: String,
    types: Vec<String>,
    taints: Vec<Value>,
    nodes: i64,
    /// Its GPUs or Neuron devices at its largest: the most nodes × each node's.
    devices: i64,
    /// Its EFA interfaces per node, when it has EFA.
    efa: Option<u32>,
    /// The device plugins it gets (their keys).
    plugins: Vec<&'static str>,
    address: String,
}

/// The device plugins a node group gets: by default NVIDIA's on an NVIDIA AMI, EFA's with EFA,
/// Neuron's on a Neuron AMI; its `kubernetes = { <plugin> = false }` leaves one out, `true`
/// adds one.
fn group_plugins(settings: Option<&Value>, path: &str, ami: &str, efa: bool) -> Result<Vec<&'static str>, ComponentError> {
    let keys: Vec<&str> = kubernetes::DEVICE_PLUGINS.iter().map(|p| p.key).collect();
    kubernetes::check_keys(settings, path, &keys)?;
    let mut plugins = Vec::new();
    for plugin in kubernetes::DEVICE_PLUGINS {
        let default = match plugin.key {
            "nvidia_device_plugin" => ami.contains("NVIDIA"),
            "efa_device_plugin" => efa,
            _ => ami.contains("NEURON"),
        };
        let on = match kubernetes::switch(settings, path, plugin.key)? {
            kubernetes::Switch::Default => default,
            kubernetes::Switch::Off => false,
            kubernetes::Switch::On(None) => true,
            kubernetes::Switch::On(Some(_)) => {
                return Err(ComponentError::at(
                    format!("{path}.{}", plugin.key),
                    "a node group turns a device plugin on or off; its version is the cluster's",
                    format!(
                        "write `{} = true` here, and the version in the cluster's `kubernetes` table",
                        plugin.key
                    ),
                ));
            }
        };
        if on {
            plugins.push(plugin.key);
        }
    }
    Ok(plugins)
}

/// One DaemonSet per device plugin that any node group gets (unless the cluster's `kubernetes`
/// table turns it off), scheduled on those groups only; the Neuron plugin with its RBAC.
fn device_plugins(
    address: &str,
    settings: Option<&Value>,
    groups: &[ServedGroup],
    region: &str,
    cluster: &str,
) -> Result<Vec<Part>, ComponentError> {
    let mut parts = Vec::new();
    for plugin in kubernetes::DEVICE_PLUGINS {
        let version = match kubernetes::switch(settings, "kubernetes", plugin.key)? {
            kubernetes::Switch::Off => continue,
            kubernetes::Switch::On(Some(v)) => v,
            _ => plugin.version.to_owned(),
        };
        let mut served = kubernetes::Served::default();
        for g in groups.iter().filter(|g| g.plugins.contains(&plugin.key)) {
            served.groups.push(g.name.clone());
            served.instance_types.extend(
                g.types
                    .iter()
                    .filter(|t| !served.instance_types.contains(t))
                    .cloned()
                    .collect::<Vec<_>>(),
            );
            served.tolerations.extend(g.taints.iter().map(kubernetes::toleration));
        }
        if served.groups.is_empty() {
            continue;
        }
        let image = match plugin.key {
            "nvidia_device_plugin" => format!("nvcr.io/nvidia/k8s-device-plugin:{version}"),
            "efa_device_plugin" => format!("{}/eks/aws-efa-k8s-device-plugin:{version}", kubernetes::eks_registry(region)),
            _ => format!("public.ecr.aws/neuron/neuron-device-plugin:{version}"),
        };
        let local = format!("k8s.{}", plugin.key);
        let mut after = Vec::new();
        if plugin.key == kubernetes::NEURON.key {
            for (part, manifest) in kubernetes::neuron_rbac() {
                let rbac_local = format!("{local}.{part}");
                after.push(format!("{address}.{rbac_local}"));
                parts.push(kubernetes::object(rbac_local, cluster, manifest, vec![]));
            }
        }
        let manifest = kubernetes::device_plugin(plugin, &image, "eks.amazonaws.com/nodegroup", &served);
        parts.push(kubernetes::object(format!("{local}.daemonset"), cluster, manifest, after));
    }
    Ok(parts)
}

/// The readiness check of the cluster: every node of each group that gets a device plugin
/// reports the plugin's device (EFA: as many as the group's interfaces), unless
/// `kubernetes = { wait_ready = false }`; `wait_ready = "45m"` sets how long `up` waits.
fn readiness(settings: Option<&Value>, groups: &[ServedGroup], cluster: &str, queues: Vec<String>) -> Result<Vec<Check>, ComponentError> {
    let Some(timeout) = kubernetes::wait_ready(settings)? else {
        return Ok(vec![]);
    };
    let node_groups: Vec<NodeGroup> = groups
        .iter()
        .filter(|g| !g.plugins.is_empty() && g.nodes > 0)
        .map(|g| NodeGroup {
            label: "eks.amazonaws.com/nodegroup".into(),
            name: format!("${{{}.name}}", g.address),
            nodes: g.nodes,
            devices: kubernetes::DEVICE_PLUGINS
                .iter()
                .filter(|p| g.plugins.contains(&p.key))
                .map(|p| {
                    (
                        p.resource.to_owned(),
                        if p.key == kubernetes::EFA.key {
                            g.efa.unwrap_or(0).into()
                        } else {
                            0
                        },
                    )
                })
                .collect(),
        })
        .collect();
    if node_groups.is_empty() && queues.is_empty() {
        return Ok(vec![]);
    }
    Ok(vec![Check {
        timeout,
        node_groups,
        queues,
        ..Check::of(cluster)
    }])
}

/// A node group's `timeouts` (the loader checks the block's own).
fn check_timeouts(key: &str, timeouts: &Value) -> Result<(), ComponentError> {
    let Some(table) = timeouts.as_object() else {
        return Err(ComponentError::at(
            key,
            format!("`{key}` must be a table"),
            "write e.g. `timeouts = { create = \"1h\" }`",
        ));
    };
    for (operation, value) in table {
        if let Some((message, hint)) = crate::schema::timeout_problem(operation, value) {
            return Err(ComponentError::at(
                format!("{key}.{operation}"),
                format!("`{key}.{operation}`: {message}"),
                hint,
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ami_type_follows_the_family() {
        assert_eq!(ami_type("p5.48xlarge"), "AL2023_x86_64_NVIDIA");
        assert_eq!(ami_type("p4de.24xlarge"), "AL2023_x86_64_NVIDIA");
        assert_eq!(ami_type("g6e.12xlarge"), "AL2023_x86_64_NVIDIA");
        assert_eq!(ami_type("g5g.xlarge"), "AL2023_ARM_64_NVIDIA");
        assert_eq!(ami_type("trn1n.32xlarge"), "AL2023_x86_64_NEURON");
        assert_eq!(ami_type("inf2.48xlarge"), "AL2023_x86_64_NEURON");
        assert_eq!(ami_type("c7g.2xlarge"), "AL2023_ARM_64_STANDARD");
        assert_eq!(ami_type("c5.2xlarge"), "AL2023_x86_64_STANDARD");
    }

    #[test]
    fn sizes_are_checked() {
        assert_eq!(size("size", Some(&json!(2))).unwrap(), json!({"min": 2, "max": 2, "desired": 2}));
        assert_eq!(
            size("size", Some(&json!({"min": 1, "max": 4}))).unwrap(),
            json!({"min": 1, "max": 4, "desired": 1})
        );
        let err = size("nodegroups.gpu.size", Some(&json!({"min": 3, "max": 2, "desired": 4}))).unwrap_err();
        assert_eq!(err.key.as_deref(), Some("nodegroups.gpu.size"));
        assert!(err.message.contains("min ≤ desired ≤ max"), "{}", err.message);
    }
}
