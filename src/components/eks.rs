//! `eks`: an EKS cluster whose GPU node groups have EFA wired the way AWS documents it. One
//! block expands to the cluster's IAM role, the cluster on the VPC's private subnets, its OIDC
//! provider, the add-ons, the node IAM role, and per node group: with EFA, a `cluster` placement
//! group (unless a capacity reservation brings its own placement), an EFA security group (all
//! traffic from and to itself) and a launch template with one EFA interface per network card;
//! then the managed node group in its zone's single private subnet.

use super::{Component, ComponentError, Expansion, Input, NamedVpc, Part, batch, instances, kubernetes, nvidia_dra};
use crate::provider::Selector;
use crate::readiness::{Check, NodeGroup};
use crate::schema::{Block, block};
use serde_json::{Map, Value, json};

/// The component's registration.
pub const COMPONENT: Component = Component {
    name: "eks",
    schema: Eks::FIELDS,
    expand,
};

block! {
    /// An `eks` block.
    struct Eks {
        existing: Option<String>,
        name: Option<String>,
        version: Option<String>,
        vpc: Option<String>,
        vpc_id: Option<String>,
        subnet_ids: Option<Value> as List,
        endpoint: Option<String>,
        public_access_cidrs: Option<Vec<String>>,
        authentication_mode: Option<String>,
        logging: Option<Value> as List,
        addons: Option<Vec<String>>,
        oidc_provider: Option<bool>,
        access: Option<Map<String, Value>>,
        nodegroups: Map<String, Value>,
        kubernetes: Option<Value>,
        timeouts: Option<Value>,
        tags: Option<Value>,
    }
}

block! {
    /// A `nodegroups.<name>` table of an `eks` block.
    struct NodeGroupBlock {
        instance_type: Option<String>,
        instance_types: Option<Vec<String>>,
        size: Value as Size,
        zone: Option<String>,
        subnet_id: Option<String>,
        efa: Option<bool>,
        efa_layout: Option<String>,
        placement_group: Option<Value> as BoolOrName,
        capacity_reservation_id: Option<String>,
        capacity_type: Option<String>,
        labels: Option<Value>,
        taints: Option<Vec<Value>>,
        volume_gib: Option<Value> as Integer,
        ami_type: Option<String>,
        kubernetes: Option<Value>,
        timeouts: Option<Value>,
    }
}

/// The Kubernetes version when the block names none. It is written into the cluster's
/// attributes, so a later forge with another default shows the upgrade in the plan.
pub const DEFAULT_VERSION: &str = "1.31";

/// The add-ons a cluster gets when the block lists none.
const DEFAULT_ADDONS: &[&str] = &["vpc-cni", "coredns", "kube-proxy"];

/// Add-ons the nodes need to join (installed before the node groups); the others, CoreDNS
/// first among them, need nodes to run on and are installed after.
const BEFORE_NODES: &[&str] = &["vpc-cni", "kube-proxy", "eks-pod-identity-agent"];

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
    /// The network of the existing cluster the block reads: its VPC and subnets, as read.
    OfCluster { address: &'a str },
}

impl Network<'_> {
    fn vpc_id(&self) -> Value {
        match self {
            Network::Component(vpc) => vpc.output("vpc_id"),
            Network::Existing { vpc_id, .. } => json!(vpc_id),
            Network::OfCluster { address } => json!(format!("${{{address}.cluster.vpc_id}}")),
        }
    }

    fn private_subnets(&self) -> Value {
        match self {
            Network::Component(vpc) => vpc.output("private_subnet_ids"),
            Network::Existing { subnet_ids, .. } => (*subnet_ids).clone(),
            Network::OfCluster { address } => json!(format!("${{{address}.cluster.subnet_ids}}")),
        }
    }
}

/// What an `eks` block that reads an existing cluster cannot set: the cluster's own.
const CLUSTER_KEYS: &[&str] = &[
    "name",
    "version",
    "vpc_id",
    "subnet_ids",
    "endpoint",
    "public_access_cidrs",
    "authentication_mode",
    "logging",
];

/// A node group's size: `2`, or `{ min = 1, max = 4, desired = 2 }` (desired defaults to min).
fn size(key: &str, value: &Value) -> Result<Value, ComponentError> {
    let bad = |message: String| ComponentError::at(key, message, "write `size = 2` or `size = { min = 1, max = 4, desired = 2 }`");
    match value {
        Value::Number(n) => match n.as_i64() {
            Some(n) if (1..=1000).contains(&n) => Ok(json!({ "min": n, "max": n, "desired": n })),
            _ => Err(bad(format!("`{key} = {n}` must be a whole number from 1 to 1000"))),
        },
        Value::Object(range) => {
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
        other => Err(bad(format!(
            "`{key}` must be a number or a table, not {}",
            crate::schema::describe(other)
        ))),
    }
}

/// The AMI type EKS should use for an instance family: NVIDIA for GPU families, Neuron for
/// Trainium and Inferentia, standard otherwise; Arm for Graviton (`c7g`, `g5g`) and for what the
/// facts say is `arm64` (P6e-GB200's Grace).
pub fn ami_type(instance_type: &str, arm64: bool) -> &'static str {
    let family = instance_type.split('.').next().unwrap_or_default();
    let letters: String = family.chars().take_while(char::is_ascii_alphabetic).collect();
    let graviton = family
        .trim_start_matches(char::is_alphabetic)
        .trim_start_matches(|c: char| c.is_ascii_digit())
        .starts_with('g');
    match (letters.as_str(), graviton || arm64) {
        ("p" | "g", false) => "AL2023_x86_64_NVIDIA",
        ("p" | "g", true) => "AL2023_ARM_64_NVIDIA",
        ("trn" | "inf", _) => "AL2023_x86_64_NEURON",
        (_, true) => "AL2023_ARM_64_STANDARD",
        _ => "AL2023_x86_64_STANDARD",
    }
}

fn expand(input: &Input) -> Result<Expansion, ComponentError> {
    let block: Eks = input.block()?;
    let cluster = Cluster::new(input, &block)?;
    let mut parts = match &block.existing {
        Some(name) => vec![Part::reading("cluster", "aws_eks_cluster", Selector::Id(name.clone()))],
        None => cluster.control_plane(&block),
    };
    if cluster.existing && cluster.oidc {
        parts.push(cluster.oidc_provider());
    }
    let (node_role, storage_addons) = cluster.node_role(input);
    parts.push(node_role);
    // An existing cluster may run its storage drivers already: it gets only the add-ons listed.
    let addons = addons(&block, if block.existing.is_some() { Vec::new() } else { storage_addons });
    let before_nodes: Vec<String> = addons
        .iter()
        .filter(|a| BEFORE_NODES.contains(&a.as_str()))
        .map(|a| format!("{}.addon.{a}", cluster.address))
        .collect();

    if block.nodegroups.is_empty() {
        return Err(ComponentError::at(
            "nodegroups",
            "the cluster has no node groups",
            "add one: `[eks.<name>.nodegroups.system]` with `instance_type` and `size`",
        ));
    }
    let mut groups = Vec::new();
    for (name, body) in &block.nodegroups {
        let group = Group::check(name, body, &cluster, input.facts)?;
        let max = group.scaling["max"].as_i64().unwrap_or(0);
        super::fits_capacity_block(
            input,
            group.block.capacity_reservation_id.as_deref(),
            max,
            &format!("nodegroups.{name}.size"),
        )?;
        parts.extend(group.parts(&cluster, &before_nodes)?);
        groups.push(group);
    }
    let nodegroup_addresses: Vec<String> = groups.iter().map(|g| g.address(&cluster)).collect();
    for addon in &addons {
        let after = if BEFORE_NODES.contains(&addon.as_str()) {
            vec![]
        } else {
            nodegroup_addresses.clone()
        };
        parts.push(cluster.part(
            &format!("addon.{addon}"),
            "aws_eks_addon",
            json!({ "cluster_name": cluster.reference("cluster", "name"), "name": addon, "tags": cluster.tags }),
            after,
        ));
    }
    if let Some(access) = &block.access {
        // An existing cluster's mode is its own: EKS says if it takes no entries.
        let mode = (!cluster.existing).then(|| block.authentication_mode.as_deref().unwrap_or("API_AND_CONFIG_MAP"));
        for (local, config) in super::eks_access::entries(access, &cluster.reference("cluster", "name"), &cluster.tags, mode)? {
            parts.push(cluster.part(&local, "aws_eks_access_entry", config, vec![]));
        }
    }
    let served: Vec<ServedGroup> = groups.iter().map(|g| g.served(&cluster)).collect::<Result<_, _>>()?;
    let (in_cluster, ready) = in_cluster(input, &block, &served, &addons)?;
    parts.extend(in_cluster);
    Ok(Expansion {
        parts,
        outputs: outputs(input, &cluster, &groups),
        ready,
    })
}

/// The cluster a block makes or reads: its address and name, tags and network, which every
/// part of it reads.
struct Cluster<'a> {
    address: &'a str,
    name: String,
    tags: Value,
    network: Network<'a>,
    /// Its endpoint's public and private access.
    endpoint: (bool, bool),
    /// Its Kubernetes version (not known at load time for an existing cluster).
    version: Option<&'a str>,
    /// It exists: forge reads it and never changes it.
    existing: bool,
    /// The stack has its IAM OIDC provider (`oidc`): always for a cluster forge makes; for an
    /// existing one, with `oidc_provider = true`.
    oidc: bool,
}

impl<'a> Cluster<'a> {
    /// The block's cluster name and network, checked.
    fn new(input: &'a Input, block: &'a Eks) -> Result<Self, ComponentError> {
        let address = input.address;
        if let Some(existing) = &block.existing {
            return Self::existing(input, block, existing);
        }
        if block.oidc_provider.is_some() {
            return Err(ComponentError::at(
                "oidc_provider",
                "`oidc_provider` is for an existing cluster: forge makes the OIDC provider of each cluster it makes",
                "remove it",
            ));
        }
        let name = block.name.clone().unwrap_or_else(|| address.name().to_owned());
        let network = match (&block.vpc, &block.vpc_id, &block.subnet_ids) {
            (Some(vpc), None, None) => Network::Component(input.named_vpc("vpc", Some(vpc))?),
            (None, Some(vpc_id), Some(subnet_ids)) => Network::Existing { vpc_id, subnet_ids },
            _ => {
                return Err(ComponentError::at(
                    "vpc",
                    "the cluster needs a network: `vpc` or `vpc_id` with `subnet_ids`, not both",
                    "write `vpc = \"vpc.main\"` for a `vpc` block of this stack, or `vpc_id = \"vpc-…\"` and `subnet_ids = [...]` for an existing network",
                ));
            }
        };
        Ok(Cluster {
            address,
            name,
            tags: block.tags.clone().unwrap_or_else(|| json!({})),
            network,
            endpoint: endpoint_access(block.endpoint.as_deref())?,
            version: Some(block.version.as_deref().unwrap_or(DEFAULT_VERSION)),
            existing: false,
            oidc: true,
        })
        .and_then(|cluster| cluster.open_to(block.public_access_cidrs.as_deref()))
    }

    /// The existing cluster `name` the block reads (`existing = "<name>"`): its new node groups
    /// go on the stack's `vpc` block (the cluster's VPC, read or made) when it names one, else
    /// on the cluster's own subnets; what belongs to the cluster itself cannot be set.
    fn existing(input: &'a Input, block: &'a Eks, name: &str) -> Result<Self, ComponentError> {
        let name = super::existing_name(name, "an EKS cluster")?;
        if let Some(key) = CLUSTER_KEYS.iter().find(|k| input.config.contains_key(**k)) {
            return Err(ComponentError::at(
                *key,
                format!("`{key}` belongs to the existing cluster `{name}`, which forge reads and never changes"),
                "remove it: new node groups go on the cluster's own subnets, or on those of `vpc = \"vpc.<name>\"` (a `vpc` block with `existing` for the cluster's VPC), or a group's `subnet_id`",
            ));
        }
        Ok(Cluster {
            address: input.address,
            name: name.rsplit('/').next().unwrap_or(name).to_owned(),
            tags: block.tags.clone().unwrap_or_else(|| json!({})),
            network: match &block.vpc {
                Some(vpc) => Network::Component(input.named_vpc("vpc", Some(vpc))?),
                None => Network::OfCluster { address: input.address },
            },
            endpoint: (true, false),
            version: None,
            existing: true,
            oidc: block.oidc_provider == Some(true),
        })
    }

    /// Checks that `public_access_cidrs` narrows a public endpoint, not a private one.
    fn open_to(self, cidrs: Option<&[String]>) -> Result<Self, ComponentError> {
        if cidrs.is_some() && !self.endpoint.0 {
            return Err(ComponentError::at(
                "public_access_cidrs",
                "`public_access_cidrs` limits who reaches the public endpoint, and this cluster has none (`endpoint = \"private\"`)",
                "write `endpoint = \"both\"` to keep the private endpoint for the nodes and open the public one to these addresses",
            ));
        }
        Ok(self)
    }

    /// A reference to the output `output` of this cluster's part `local`.
    fn reference(&self, local: &str, output: &str) -> Value {
        json!(format!("${{{}.{local}.{output}}}", self.address))
    }

    /// A part of this cluster.
    fn part(&self, local: &str, kind: &'static str, config: Value, depends_on: Vec<String>) -> Part {
        Part {
            local: local.to_owned(),
            kind,
            config,
            depends_on,
            existing: None,
        }
    }

    /// The cluster's IAM role, the cluster on the private subnets, and its OIDC provider.
    fn control_plane(&self, block: &Eks) -> Vec<Part> {
        let (public, private) = self.endpoint;
        let role = json!({
            "name": format!("{}-cluster", self.name),
            "assume_role_policy": { "Version": "2012-10-17", "Statement": [{ "Effect": "Allow", "Principal": { "Service": "eks.amazonaws.com" }, "Action": ["sts:AssumeRole", "sts:TagSession"] }] },
            "managed_policy_arns": [format!("{MANAGED}/AmazonEKSClusterPolicy")],
            "tags": self.tags,
        });
        let mut cluster = json!({
            "name": self.name,
            "role_arn": self.reference("cluster_role", "arn"),
            "version": block.version.as_deref().unwrap_or(DEFAULT_VERSION),
            "subnet_ids": self.network.private_subnets(),
            "endpoint_public_access": public,
            "endpoint_private_access": private,
            "authentication_mode": block.authentication_mode.as_deref().unwrap_or("API_AND_CONFIG_MAP"),
            "logging": block.logging.clone().unwrap_or_else(|| json!([])),
            "tags": self.tags,
        });
        if let Some(cidrs) = &block.public_access_cidrs {
            cluster["public_access_cidrs"] = json!(cidrs);
        }
        if let Some(timeouts) = &block.timeouts {
            cluster["timeouts"] = timeouts.clone();
        }
        vec![
            self.part("cluster_role", "aws_iam_role", role, vec![]),
            self.part("cluster", "aws_eks_cluster", cluster, vec![]),
            self.oidc_provider(),
        ]
    }

    /// The IAM OIDC provider for the cluster's issuer, for IAM roles for service accounts.
    fn oidc_provider(&self) -> Part {
        let oidc = json!({ "url": self.reference("cluster", "oidc_issuer"), "client_ids": ["sts.amazonaws.com"], "tags": self.tags });
        self.part("oidc", "aws_iam_oidc_provider", oidc, vec![])
    }

    /// The nodes' IAM role, with the policy of each storage type that lists this cluster among
    /// its clients; and the CSI driver add-ons those need.
    fn node_role(&self, input: &Input) -> (Part, Vec<String>) {
        let mut policies: Vec<String> = [
            "AmazonEKSWorkerNodePolicy",
            "AmazonEKS_CNI_Policy",
            "AmazonEC2ContainerRegistryReadOnly",
        ]
        .iter()
        .map(|p| format!("{MANAGED}/{p}"))
        .collect();
        let mut drivers = Vec::new();
        for storage in super::storage_for(input.components, self.address) {
            let Some((_, policy, driver)) = CSI_DRIVERS.iter().find(|(kind, ..)| *kind == storage) else {
                continue;
            };
            let policy = format!("{MANAGED}/{policy}");
            if !policies.contains(&policy) {
                policies.push(policy);
                drivers.push((*driver).to_owned());
            }
        }
        let role = json!({
            "name": format!("{}-node", self.name),
            "assume_role_policy": { "Version": "2012-10-17", "Statement": [{ "Effect": "Allow", "Principal": { "Service": "ec2.amazonaws.com" }, "Action": "sts:AssumeRole" }] },
            "managed_policy_arns": policies,
            "tags": self.tags,
        });
        (self.part("node_role", "aws_iam_role", role, vec![]), drivers)
    }
}

/// The cluster endpoint's public and private access, from `endpoint`.
fn endpoint_access(endpoint: Option<&str>) -> Result<(bool, bool), ComponentError> {
    match endpoint.unwrap_or("public") {
        "public" => Ok((true, false)),
        "private" => Ok((false, true)),
        "both" => Ok((true, true)),
        other => Err(ComponentError::at(
            "endpoint",
            format!("`endpoint = \"{other}\"` is not an endpoint access"),
            "expected \"public\", \"private\" or \"both\"",
        )),
    }
}

/// The add-ons: the block's list (or the defaults), then the CSI drivers its storage needs.
fn addons(block: &Eks, storage: Vec<String>) -> Vec<String> {
    let mut addons: Vec<String> = match &block.addons {
        // An existing cluster has its own: forge adds only what the block lists.
        None if block.existing.is_some() => Vec::new(),
        None => DEFAULT_ADDONS.iter().map(|a| (*a).to_owned()).collect(),
        Some(list) => list.clone(),
    };
    for driver in storage {
        if !addons.contains(&driver) {
            addons.push(driver);
        }
    }
    addons
}

/// One node group, checked: what it runs on, how it is placed and networked.
struct Group<'a> {
    name: &'a str,
    block: NodeGroupBlock,
    types: Vec<String>,
    scaling: Value,
    capacity_type: String,
    /// Its EFA devices per node, when it has EFA.
    efa: Option<u32>,
    /// Its launch template's network interfaces, when it has EFA.
    nics: Vec<instances::Nic>,
    /// GPUs or Neuron devices per node (the fewest of its types).
    accelerators: u32,
    placement: Placement,
    subnets: Value,
    ami: String,
    /// The address of the stack's Capacity Block it runs on (`aws_ec2_capacity_block.NAME`),
    /// when `capacity_reservation_id` refers to one: its dates drive the group's schedule.
    capacity_block: Option<String>,
}

impl<'a> Group<'a> {
    /// Reads and checks the table `nodegroups.<name>`.
    fn check(name: &'a str, body: &Value, cluster: &Cluster, facts: &crate::facts::Facts) -> Result<Self, ComponentError> {
        let at = format!("nodegroups.{name}");
        let key = |k: &str| format!("{at}.{k}");
        let block: NodeGroupBlock = super::read(
            body,
            &at,
            &format!("node group `{name}`"),
            &format!("`[eks.<name>.nodegroups.{name}]` with `instance_type` and `size`"),
        )?;
        let scaling = size(&key("size"), &block.size)?;
        let capacity_type = capacity(name, &block, &key)?;
        let types = types(name, &block, &key)?;
        if instances::ultraserver(&types[0]) {
            ultraserver(&types[0], &block, &scaling, cluster.version, &key)?;
        }
        let typed: Vec<&str> = types.iter().map(String::as_str).collect();
        let looked_at = key(if block.instance_type.is_some() {
            "instance_type"
        } else {
            "instance_types"
        });
        let looked = instances::look_up(facts, &looked_at, &typed)?;
        let efa = efa(name, &block, &types, looked.efa_interfaces(), &key)?;
        let nics = instances::nics(&types[0], &looked, efa.is_some(), block.efa_layout.as_deref(), &key("efa_layout"))?;
        let efa = efa.map(|_| instances::efa_devices(&nics));
        let placement = placement(name, &block, efa.is_some(), &key)?;
        let subnets = subnets(name, &block, &cluster.network, &key)?;
        if let Some(zone) = &block.zone {
            offered(facts, &typed, zone, &key("zone"))?;
        }
        if let Some(timeouts) = &block.timeouts {
            check_timeouts(&key("timeouts"), timeouts)?;
        }
        let arm64 = looked.first.is_some_and(|t| t.arm64);
        let ami = block.ami_type.clone().unwrap_or_else(|| ami_type(&types[0], arm64).to_owned());
        let capacity_block = block
            .capacity_reservation_id
            .as_deref()
            .and_then(super::capacity_block)
            .filter(|_| capacity_type == "CAPACITY_BLOCK");
        let group = Group {
            capacity_block,
            name,
            types,
            scaling,
            capacity_type,
            efa,
            nics,
            accelerators: looked.accelerators.unwrap_or(0),
            placement,
            subnets,
            ami,
            block,
        };
        if group.needs_template() && group.types.len() > 1 {
            return Err(ComponentError::at(
                key("instance_types"),
                format!(
                    "node group `{name}` needs a launch template (EFA, a placement group or a reservation), which takes one instance type"
                ),
                "write one `instance_type`",
            ));
        }
        Ok(group)
    }

    /// The address below the cluster's of this group's part `what`.
    fn local(&self, what: &str) -> String {
        format!("nodegroups.{}.{what}", self.name)
    }

    /// The full address of its managed node group.
    fn address(&self, cluster: &Cluster) -> String {
        format!("{}.{}", cluster.address, self.local("nodegroup"))
    }

    /// Whether it launches from a launch template of its own.
    fn needs_template(&self) -> bool {
        self.efa.is_some() || self.block.capacity_reservation_id.is_some() || self.placement != Placement::None
    }

    /// Its placement group, EFA security group and launch template when it needs them, and
    /// the managed node group, after the add-ons the nodes need to join.
    fn parts(&self, cluster: &Cluster, before_nodes: &[String]) -> Result<Vec<Part>, ComponentError> {
        let mut parts = Vec::new();
        let mut nodegroup = json!({
            "cluster_name": cluster.reference("cluster", "name"),
            "name": self.name,
            "node_role_arn": cluster.reference("node_role", "arn"),
            "subnet_ids": self.subnets,
            "ami_type": self.ami,
            "capacity_type": self.capacity_type,
            "scaling": match self.capacity_block {
                // Nothing runs before the block starts: its schedule scales the group.
                Some(_) => json!({ "min": 0, "max": self.scaling["max"], "desired": 0 }),
                None => self.scaling.clone(),
            },
            "labels": self.block.labels.clone().unwrap_or_else(|| json!({})),
            "taints": self.block.taints.clone().unwrap_or_default(),
            "tags": cluster.tags,
        });
        if let Some(timeouts) = &self.block.timeouts {
            nodegroup["timeouts"] = timeouts.clone();
        }
        if self.needs_template() {
            parts.extend(self.template_parts(cluster));
            nodegroup["launch_template_id"] = cluster.reference(&self.local("launch_template"), "id");
            nodegroup["launch_template_version"] = cluster.reference(&self.local("launch_template"), "latest_version");
        } else {
            nodegroup["instance_types"] = json!(self.types);
            if let Some(volume) = &self.block.volume_gib {
                nodegroup["disk_size"] = volume.clone();
            }
        }
        parts.push(cluster.part(&self.local("nodegroup"), "aws_eks_nodegroup", nodegroup, before_nodes.to_vec()));
        if let Some(block) = &self.capacity_block {
            parts.extend(self.schedule_parts(cluster, block));
        }
        Ok(parts)
    }

    /// The scheduled actions of a group on the stack's Capacity Block `block`: up to its size
    /// when the block starts, down to 0 before it ends — 30 minutes before, when EC2 starts
    /// ending a block's instances; 60 for UltraServers, whose users must end them themselves.
    fn schedule_parts(&self, cluster: &Cluster, block: &str) -> Vec<Part> {
        let group_name = cluster.reference(&self.local("nodegroup"), "autoscaling_group_name");
        let drain = if instances::ultraserver(&self.types[0]) { 60 } else { 30 };
        let action = |local: &str, at: &str, offset: i64, desired: &Value, after: Vec<String>| {
            cluster.part(
                &self.local(local),
                "aws_autoscaling_schedule",
                json!({
                    "autoscaling_group_name": group_name,
                    "name": format!("forge-{local}"),
                    "at": format!("${{{block}.{at}}}"),
                    "offset_minutes": offset,
                    "desired_capacity": desired,
                }),
                after,
            )
        };
        // The end after the start: when both have passed, the group ends at 0.
        let start = format!("{}.{}", cluster.address, self.local("block_start"));
        vec![
            action("block_start", "start", 0, &self.scaling["desired"], vec![]),
            action("block_end", "end", -drain, &json!(0), vec![start]),
        ]
    }

    /// The launch template, and the placement group and EFA security group it names.
    fn template_parts(&self, cluster: &Cluster) -> Vec<Part> {
        let mut parts = Vec::new();
        let resource_name = format!("{}-{}", cluster.name, self.name);
        let mut template = json!({
            "name": resource_name,
            "instance_type": self.types[0],
            "tags": cluster.tags,
        });
        match &self.placement {
            Placement::None => {}
            Placement::Own => {
                parts.push(cluster.part(
                    &self.local("placement_group"),
                    "aws_placement_group",
                    json!({ "name": resource_name, "strategy": "cluster", "tags": cluster.tags }),
                    vec![],
                ));
                template["placement_group"] = cluster.reference(&self.local("placement_group"), "name");
            }
            Placement::Existing(group) => template["placement_group"] = json!(group),
        }
        if self.efa.is_some() {
            parts.push(cluster.part(
                &self.local("efa_security_group"),
                "aws_security_group",
                json!({
                    "name": format!("{resource_name}-efa"),
                    "description": format!("EFA for node group {} of {}: all traffic to and from itself", self.name, cluster.name),
                    // An existing cluster's own VPC, whatever `vpc` names.
                    "vpc_id": if cluster.existing { cluster.reference("cluster", "vpc_id") } else { cluster.network.vpc_id() },
                    "ingress": [{ "protocol": "-1", "self": true }],
                    "egress": [{ "protocol": "-1", "self": true }],
                    "tags": cluster.tags,
                }),
                vec![],
            ));
            let groups = json!([
                cluster.reference(&self.local("efa_security_group"), "id"),
                cluster.reference("cluster", "cluster_security_group_id")
            ]);
            template["network_interfaces"] = Value::Array(instances::interfaces(&self.nics, &groups));
        }
        if let Some(reservation) = &self.block.capacity_reservation_id {
            template["capacity_reservation_id"] = json!(reservation);
            template["capacity_block"] = json!(self.capacity_type == "CAPACITY_BLOCK");
        }
        if let Some(volume) = &self.block.volume_gib {
            template["block_devices"] = json!([{ "device_name": "/dev/xvda", "volume_size": volume, "volume_type": "gp3" }]);
        }
        parts.push(cluster.part(&self.local("launch_template"), "aws_launch_template", template, vec![]));
        parts
    }

    /// What the device plugins, the batch queues and the readiness check need of it.
    fn served(&self, cluster: &Cluster) -> Result<ServedGroup, ComponentError> {
        let bound = |b: &str| self.scaling[b].as_i64().unwrap_or(0);
        Ok(ServedGroup {
            name: self.name.to_owned(),
            types: self.types.clone(),
            taints: self.block.taints.clone().unwrap_or_default(),
            nodes: bound("desired"),
            devices: bound("max") * i64::from(self.accelerators),
            efa: self.efa,
            plugins: group_plugins(
                self.block.kubernetes.as_ref(),
                &format!("nodegroups.{}.kubernetes", self.name),
                &self.ami,
                self.efa.is_some(),
            )?,
            address: self.address(cluster),
            starts: self.capacity_block.as_ref().map(|block| format!("${{{block}.start}}")),
            ends: self.capacity_block.as_ref().map(|block| format!("${{{block}.end}}")),
        })
    }
}

/// The group's capacity type, checked with the reservation it needs.
fn capacity(name: &str, block: &NodeGroupBlock, key: &dyn Fn(&str) -> String) -> Result<String, ComponentError> {
    let capacity_type = block.capacity_type.as_deref().unwrap_or("ON_DEMAND");
    if !["ON_DEMAND", "SPOT", "CAPACITY_BLOCK"].contains(&capacity_type) {
        return Err(ComponentError::at(
            key("capacity_type"),
            format!("`capacity_type = \"{capacity_type}\"` is not a capacity type"),
            "expected \"ON_DEMAND\", \"SPOT\" or \"CAPACITY_BLOCK\"",
        ));
    }
    let reservation = block.capacity_reservation_id.is_some();
    if capacity_type == "CAPACITY_BLOCK" && !reservation {
        return Err(ComponentError::at(
            key("capacity_type"),
            format!("node group `{name}` runs on a Capacity Block but names no reservation"),
            "add `capacity_reservation_id = \"cr-…\"`: the Capacity Block's reservation id",
        ));
    }
    if reservation && block.zone.is_none() && block.subnet_id.is_none() {
        return Err(ComponentError::at(
            key("capacity_reservation_id"),
            format!("node group `{name}` uses a capacity reservation but names no `zone`"),
            "a reservation is in one availability zone: add `zone = \"…\"` (the reservation's)",
        ));
    }
    Ok(capacity_type.to_owned())
}

/// The group's instance types: its `instance_type`, or its `instance_types`.
fn types(name: &str, block: &NodeGroupBlock, key: &dyn Fn(&str) -> String) -> Result<Vec<String>, ComponentError> {
    match (&block.instance_type, &block.instance_types) {
        (Some(t), None) => Ok(vec![t.clone()]),
        (None, Some(list)) => Ok(list.clone()),
        (Some(_), Some(_)) => Err(ComponentError::at(
            key("instance_types"),
            format!("node group `{name}` sets both `instance_type` and `instance_types`"),
            "use `instance_type` for one type, `instance_types` for several (SPOT diversification)",
        )),
        (None, None) => Err(ComponentError::at(
            key("instance_type"),
            format!("node group `{name}` names no instance type"),
            "add `instance_type = \"p5.48xlarge\"` (or `instance_types = [...]`)",
        )),
    }
}

/// The instances of the smallest UltraServer (`u-p6e-gb200x36`: 9; `x72` is 18).
const ULTRASERVER_INSTANCES: i64 = 9;

/// The rules EKS sets for a node group of an UltraServer type (P6e-GB200): its Capacity Block
/// (`capacity_type = "CAPACITY_BLOCK"` with the block's reservation), whole UltraServers of 9
/// or 18 instances, and Kubernetes 1.33 or later (DRA).
fn ultraserver(
    instance_type: &str,
    block: &NodeGroupBlock,
    scaling: &Value,
    version: Option<&str>,
    key: &dyn Fn(&str) -> String,
) -> Result<(), ComponentError> {
    if block.capacity_type.as_deref() != Some("CAPACITY_BLOCK") || block.capacity_reservation_id.is_none() {
        return Err(ComponentError::at(
            key(match block.capacity_type.as_deref() {
                Some("CAPACITY_BLOCK") | None => "instance_type",
                Some(_) => "capacity_type",
            }),
            format!("`{instance_type}` comes only as UltraServers, from Capacity Blocks"),
            "set `capacity_type = \"CAPACITY_BLOCK\"` and `capacity_reservation_id = \"cr-…\"`, the reservation of the UltraServer Capacity Block",
        ));
    }
    let counts = ["min", "max", "desired"].map(|b| scaling[b].as_i64().unwrap_or(0));
    if counts.iter().any(|n| n % ULTRASERVER_INSTANCES != 0) {
        return Err(ComponentError::at(
            key("size"),
            format!(
                "`{instance_type}` nodes come as whole UltraServers of 9 or 18 instances, not {}",
                counts[2]
            ),
            "write `size = 9` (a u-p6e-gb200x36) or `size = 18` (a u-p6e-gb200x72)",
        ));
    }
    let minor = version.and_then(|v| v.strip_prefix("1.")).and_then(|m| m.parse::<u32>().ok());
    if minor.is_some_and(|m| m < 33) {
        return Err(ComponentError::at(
            "version",
            format!(
                "`{instance_type}` needs Kubernetes 1.33 or later on EKS (Dynamic Resource Allocation for its NVLink domains), and the cluster is on {}",
                version.unwrap_or_default()
            ),
            "write `version = \"1.33\"` or later",
        ));
    }
    Ok(())
}

/// The group's EFA interfaces per node when it has EFA: by default when its one type supports
/// it; asked for, only when it does, with one type and a zone.
fn efa(
    name: &str,
    block: &NodeGroupBlock,
    types: &[String],
    interfaces: Option<u32>,
    key: &dyn Fn(&str) -> String,
) -> Result<Option<u32>, ComponentError> {
    let supported = interfaces.unwrap_or(0) > 0;
    if !block.efa.unwrap_or(supported && block.instance_type.is_some()) {
        return Ok(None);
    }
    if !supported {
        let why = match interfaces {
            Some(_) => format!("`{}` has no EFA support", types[0]),
            None => format!("forge cannot tell how many EFA interfaces `{}` takes without asking AWS", types[0]),
        };
        return Err(ComponentError::at(
            key("efa"),
            format!("node group `{name}` asks for EFA, but {why}"),
            "use an EFA type (p4d/p4de 4 interfaces, p5/p5e 32, p5en 16, trn1 8, trn1n/trn2 16), set `efa = false`, or run with AWS credentials so forge can ask",
        ));
    }
    if block.instance_types.is_some() {
        return Err(ComponentError::at(
            key("instance_types"),
            format!(
                "EFA node group `{name}` takes its instance type from its launch template, so the node group cannot list `instance_types` too"
            ),
            "write one `instance_type`: the launch template's EFA interfaces are laid out for that type",
        ));
    }
    if block.zone.is_none() {
        return Err(ComponentError::at(
            format!("nodegroups.{name}"),
            format!("EFA node group `{name}` has no `zone`"),
            "EFA traffic must stay in one subnet: add `zone = \"us-west-2c\"` (a zone of the VPC that offers the instance type)",
        ));
    }
    Ok(interfaces)
}

/// Where a node group's instances are placed.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Placement {
    /// Wherever EC2 puts them (or where their capacity reservation does).
    None,
    /// In a `cluster` placement group of their own, which the block makes.
    Own,
    /// In an existing placement group, by name.
    Existing(String),
}

/// The group's placement (`placement_group = true | false | "<existing group>"`): by default a
/// `cluster` placement group of its own with EFA — never with a capacity reservation or
/// Capacity Block, which brings its own placement (forcing one breaks the launch).
fn placement(name: &str, block: &NodeGroupBlock, efa: bool, key: &dyn Fn(&str) -> String) -> Result<Placement, ComponentError> {
    let own_placement = block.capacity_reservation_id.is_some();
    let wanted = match &block.placement_group {
        None if efa && !own_placement => Placement::Own,
        None | Some(Value::Bool(false)) => Placement::None,
        Some(Value::Bool(true)) => Placement::Own,
        Some(Value::String(group)) if !group.is_empty() => Placement::Existing(group.clone()),
        Some(other) => {
            return Err(ComponentError::at(
                key("placement_group"),
                format!(
                    "`placement_group` must be true, false or a placement group's name, not {}",
                    crate::schema::describe(other)
                ),
                "write `placement_group = true` for one of the block's own, or the name of an existing one",
            ));
        }
    };
    if own_placement && wanted != Placement::None {
        return Err(ComponentError::at(
            key("placement_group"),
            format!("node group `{name}` asks for a placement group and also uses a capacity reservation"),
            "a capacity reservation or Capacity Block brings its own placement: drop `placement_group`",
        ));
    }
    Ok(wanted)
}

/// The group's subnets: its `subnet_id`, its zone's private subnet, or all private subnets.
fn subnets(name: &str, block: &NodeGroupBlock, network: &Network, key: &dyn Fn(&str) -> String) -> Result<Value, ComponentError> {
    match (network, &block.zone, &block.subnet_id) {
        (_, _, Some(subnet)) => Ok(json!([subnet])),
        (Network::Component(vpc), Some(zone), None) => Ok(json!([vpc.private_subnet(&key("zone"), zone)?])),
        (Network::Existing { .. } | Network::OfCluster { .. }, Some(_), None) => Err(ComponentError::at(
            key("zone"),
            format!("node group `{name}` is pinned to a zone in an existing network, but forge cannot tell which subnet is that zone's"),
            "add `subnet_id = \"subnet-…\"`: the private subnet in that zone",
        )),
        (_, None, None) => Ok(network.private_subnets()),
    }
}

/// An error at `key` when the facts say `zone` does not offer one of `types`.
fn offered(facts: &crate::facts::Facts, types: &[&str], zone: &str, key: &str) -> Result<(), ComponentError> {
    for t in types {
        if facts.offered(t, zone) == Some(false) {
            let offered = facts.zones(t).unwrap_or_default();
            return Err(ComponentError::at(
                key,
                format!("zone `{zone}` does not offer `{t}`"),
                if offered.is_empty() {
                    "no zone of this region offers it: pick another region or type".to_owned()
                } else {
                    format!("zones that offer it: {}", offered.join(", "))
                },
            ));
        }
    }
    Ok(())
}

/// The cluster's in-cluster objects — device plugins, namespaces, the teardown, the batch
/// stack — and its readiness check.
fn in_cluster(input: &Input, block: &Eks, served: &[ServedGroup], addons: &[String]) -> Result<(Vec<Part>, Vec<Check>), ComponentError> {
    let address = input.address;
    let settings = block.kubernetes.as_ref();
    kubernetes::check_keys(settings, "kubernetes", kubernetes::CLUSTER_SETTINGS)?;
    let cluster_ref = kubernetes::eks_cluster(address);
    let mut parts = device_plugins(address, settings, served, &region(input), &cluster_ref)?;
    parts.extend(dra_driver(settings, served, &cluster_ref)?);
    parts.extend(kubernetes::namespaces(input.components, address, &cluster_ref));
    // On destroy, before the node groups and add-ons go: the load balancers and volumes that
    // Kubernetes made in the VPC. Not in an existing cluster: what its other workloads made
    // is theirs, and the cluster stays.
    if block.existing.is_none() {
        let teardown_after = served
            .iter()
            .map(|g| g.address.clone())
            .chain(addons.iter().map(|a| format!("{address}.addon.{a}")))
            .collect();
        parts.push(Part {
            local: "k8s.teardown".into(),
            kind: "k8s_teardown",
            config: json!({ "cluster": cluster_ref }),
            depends_on: teardown_after,
            existing: None,
        });
    }
    let gpu_groups: Vec<batch::GpuGroup> = served.iter().filter(|g| g.devices > 0).map(ServedGroup::gpu_group).collect();
    let batch = batch::batch(input, address, &cluster_ref, &gpu_groups)?;
    parts.extend(batch.parts);
    let ready = readiness(settings, served, &cluster_ref, batch.queues)?;
    Ok((parts, ready))
}

/// NVIDIA's DRA driver with IMEX (`kubernetes = { nvidia_dra_driver = … }`), for the
/// multi-node NVLink domains of the UltraServer groups (`ComputeDomain`s): on by default where
/// the cluster has one, `false` leaves it out, a version pins it.
fn dra_driver(settings: Option<&Value>, served: &[ServedGroup], cluster_ref: &str) -> Result<Vec<Part>, ComponentError> {
    let groups: Vec<&ServedGroup> = served
        .iter()
        .filter(|g| g.types.iter().any(|t| instances::ultraserver(t)))
        .collect();
    let version = match kubernetes::switch(settings, "kubernetes", "nvidia_dra_driver")? {
        kubernetes::Switch::Off => return Ok(Vec::new()),
        kubernetes::Switch::Default if groups.is_empty() => return Ok(Vec::new()),
        kubernetes::Switch::On(_) if groups.is_empty() => {
            return Err(ComponentError::at(
                "kubernetes.nvidia_dra_driver",
                "the cluster has no UltraServer node group (`p6e-gb200`) for NVIDIA's DRA driver to serve: its kubelet plugin would run on no node",
                "remove `nvidia_dra_driver`, or add a node group of `p6e-gb200.36xlarge` UltraServers",
            ));
        }
        kubernetes::Switch::On(Some(version)) => version,
        _ => nvidia_dra::DEFAULT_VERSION.to_owned(),
    };
    let types: Vec<String> = groups.iter().flat_map(|g| g.types.iter().cloned()).collect();
    let taints: Vec<Value> = groups.iter().flat_map(|g| g.taints.iter().cloned()).collect();
    Ok(nvidia_dra::driver(cluster_ref, &types, &taints, &version, &nvidia_dra::EKS))
}

/// The stack's AWS region: `[aws] region`, else the environment's, else us-east-1.
fn region(input: &Input) -> String {
    input
        .providers
        .aws_region()
        .map(str::to_owned)
        .or_else(|| std::env::var("AWS_REGION").ok())
        .or_else(|| std::env::var("AWS_DEFAULT_REGION").ok())
        .unwrap_or_else(|| "us-east-1".into())
}

/// The block's outputs: the cluster's, its node role's and OIDC provider's, and per node group.
fn outputs(input: &Input, cluster: &Cluster, groups: &[Group]) -> Map<String, Value> {
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
        outputs.insert(key.into(), cluster.reference("cluster", key));
    }
    outputs.insert("node_role_arn".into(), cluster.reference("node_role", "arn"));
    outputs.insert("node_role_name".into(), cluster.reference("node_role", "name"));
    if cluster.oidc {
        outputs.insert("oidc_provider_arn".into(), cluster.reference("oidc", "arn"));
    }
    outputs.insert("region".into(), input.providers.aws_region().map_or(Value::Null, Value::from));
    let by_group = groups
        .iter()
        .map(|g| {
            let output = json!({ "name": cluster.reference(&g.local("nodegroup"), "name"), "efa_interfaces": g.efa.unwrap_or(0) });
            (g.name.to_owned(), output)
        })
        .collect();
    outputs.insert("nodegroups".into(), Value::Object(by_group));
    outputs
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
    /// When its Capacity Block starts (a template over the block's `start`), if it runs on one.
    starts: Option<String>,
    /// When that block ends (its `end`).
    ends: Option<String>,
}

impl ServedGroup {
    /// The group as the batch stack's Kueue quota sees it.
    fn gpu_group(&self) -> batch::GpuGroup {
        batch::GpuGroup {
            label: "eks.amazonaws.com/nodegroup",
            name: json!(format!("${{{}.name}}", self.address)),
            key: self.name.clone(),
            resource: if self.plugins.contains(&kubernetes::NEURON.key) {
                kubernetes::NEURON.resource
            } else {
                kubernetes::NVIDIA.resource
            },
            devices: self.devices,
            tolerations: self.taints.iter().map(kubernetes::toleration).collect(),
        }
    }
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
    kubernetes::check_waits(settings)?;
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
            ultraserver: g.types.iter().find(|t| instances::ultraserver(t)).cloned(),
            starts: g.starts.clone(),
            ends: g.ends.clone(),
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
        if let Some((message, hint)) = crate::schema::timeout_problem("eks", operation, value) {
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
    use crate::provider::settings::Providers;

    #[test]
    fn an_ultraserver_group_needs_its_capacity_block_whole_servers_and_kubernetes_1_33() {
        let expand_with = |version: &str, group: Value| {
            let config = json!({ "version": version, "vpc_id": "vpc-1", "subnet_ids": ["subnet-1"], "nodegroups": { "gb": group } });
            crate::components::expand_alone(expand, "eks.train", config, &Providers::default())
        };
        let block = json!({ "instance_type": "p6e-gb200.36xlarge", "size": 9, "zone": "us-west-2a", "subnet_id": "subnet-1",
                            "capacity_type": "CAPACITY_BLOCK", "capacity_reservation_id": "cr-1" });
        let with = |key: &str, value: Value| {
            let mut changed = block.clone();
            changed[key] = value;
            changed
        };
        let on_demand = expand_with("1.33", with("capacity_type", json!("ON_DEMAND"))).unwrap_err();
        assert_eq!(on_demand.key.as_deref(), Some("nodegroups.gb.capacity_type"));
        let old = expand_with("1.32", block.clone()).unwrap_err();
        assert_eq!(old.key.as_deref(), Some("version"));
        let odd = expand_with("1.33", with("size", json!(4))).unwrap_err();
        assert_eq!(odd.key.as_deref(), Some("nodegroups.gb.size"));
        let parts = expand_with("1.33", block).unwrap().parts;
        let template = parts.iter().find(|p| p.local.ends_with("gb.launch_template")).unwrap();
        let nics = template.config["network_interfaces"].as_array().unwrap();
        assert_eq!(nics.len(), 17);
        assert_eq!(
            (nics[0]["interface_type"].as_str(), nics[1]["interface_type"].as_str()),
            (Some("efa"), Some("efa-only"))
        );
        assert!(
            parts.iter().all(|p| p.kind != "aws_placement_group"),
            "the Capacity Block brings its own placement"
        );
        let group = parts.iter().find(|p| p.local.ends_with("gb.nodegroup")).unwrap();
        assert_eq!(group.config["ami_type"], "AL2023_ARM_64_NVIDIA");
    }

    #[test]
    fn a_group_on_the_stacks_capacity_block_starts_at_zero_and_follows_the_blocks_dates() {
        let expand_with = |instance_type: &str, size: i64, reservation: &str| {
            let group = json!({ "instance_type": instance_type, "size": size, "zone": "us-west-2a", "subnet_id": "subnet-1",
                                "capacity_type": "CAPACITY_BLOCK", "capacity_reservation_id": reservation });
            let config = json!({ "version": "1.33", "vpc_id": "vpc-1", "subnet_ids": ["subnet-1"], "nodegroups": { "gpu": group } });
            crate::components::expand_alone(expand, "eks.train", config, &Providers::default()).unwrap()
        };
        let expansion = expand_with("p5.48xlarge", 2, "${aws_ec2_capacity_block.p5.id}");
        let part = |local: &str| {
            expansion
                .parts
                .iter()
                .find(|p| p.local == format!("nodegroups.gpu.{local}"))
                .unwrap()
        };
        assert_eq!(part("nodegroup").config["scaling"], json!({ "min": 0, "max": 2, "desired": 0 }));
        let (start, end) = (&part("block_start").config, &part("block_end").config);
        assert_eq!(start["at"], "${aws_ec2_capacity_block.p5.start}");
        assert_eq!(
            (start["offset_minutes"].as_i64(), start["desired_capacity"].as_i64()),
            (Some(0), Some(2))
        );
        assert_eq!(end["at"], "${aws_ec2_capacity_block.p5.end}");
        assert_eq!(
            (end["offset_minutes"].as_i64(), end["desired_capacity"].as_i64()),
            (Some(-30), Some(0))
        );
        assert_eq!(
            start["autoscaling_group_name"],
            "${eks.train.nodegroups.gpu.nodegroup.autoscaling_group_name}"
        );
        let check = &expansion.ready[0].node_groups[0];
        assert_eq!(
            (check.nodes, check.starts.as_deref()),
            (2, Some("${aws_ec2_capacity_block.p5.start}"))
        );

        let ultra = expand_with("p6e-gb200.36xlarge", 18, "${aws_ec2_capacity_block.gb.id}");
        let end = ultra.parts.iter().find(|p| p.local == "nodegroups.gpu.block_end").unwrap();
        assert_eq!(
            end.config["offset_minutes"], -60,
            "UltraServer users end their instances an hour before the end"
        );

        let by_id = expand_with("p5.48xlarge", 2, "cr-0123456789abcdef0");
        let group = by_id.parts.iter().find(|p| p.local == "nodegroups.gpu.nodegroup").unwrap();
        assert_eq!(
            group.config["scaling"]["desired"], 2,
            "a block named by id has no dates forge knows"
        );
        assert!(by_id.parts.iter().all(|p| p.kind != "aws_autoscaling_schedule"));
    }

    #[test]
    fn a_node_group_can_join_an_existing_placement_group() {
        let group = json!({ "instance_type": "p5.48xlarge", "size": 2, "zone": "us-west-2a", "subnet_id": "subnet-1",
                            "placement_group": "shared-p5" });
        let config = json!({ "vpc_id": "vpc-1", "subnet_ids": ["subnet-1"], "nodegroups": { "gpu": group } });
        let parts = crate::components::expand_alone(expand, "eks.train", config, &Providers::default())
            .unwrap()
            .parts;
        assert!(parts.iter().all(|p| p.kind != "aws_placement_group"));
        let template = parts.iter().find(|p| p.local.ends_with("gpu.launch_template")).unwrap();
        assert_eq!(template.config["placement_group"], "shared-p5");
    }

    #[test]
    fn ami_type_follows_the_family() {
        assert_eq!(ami_type("p5.48xlarge", false), "AL2023_x86_64_NVIDIA");
        assert_eq!(ami_type("p4de.24xlarge", false), "AL2023_x86_64_NVIDIA");
        assert_eq!(ami_type("g6e.12xlarge", false), "AL2023_x86_64_NVIDIA");
        assert_eq!(ami_type("g5g.xlarge", false), "AL2023_ARM_64_NVIDIA");
        assert_eq!(ami_type("trn1n.32xlarge", false), "AL2023_x86_64_NEURON");
        assert_eq!(ami_type("inf2.48xlarge", false), "AL2023_x86_64_NEURON");
        assert_eq!(ami_type("c7g.2xlarge", false), "AL2023_ARM_64_STANDARD");
        assert_eq!(ami_type("c5.2xlarge", false), "AL2023_x86_64_STANDARD");
        assert_eq!(ami_type("p6e-gb200.36xlarge", true), "AL2023_ARM_64_NVIDIA");
    }

    #[test]
    fn a_node_group_is_held_to_its_declared_fields() {
        let expand_with = |group: Value| {
            let config = json!({ "vpc_id": "vpc-1", "subnet_ids": ["subnet-1"], "nodegroups": { "gpu": group } });
            crate::components::expand_alone(expand, "eks.train", config, &Providers::default()).unwrap_err()
        };
        let unknown = expand_with(json!({ "instance_typ": "c5.2xlarge", "size": 1 }));
        assert_eq!(unknown.key.as_deref(), Some("nodegroups.gpu.instance_typ"));
        assert_eq!(unknown.message, "node group `gpu` has no attribute `instance_typ`");
        assert_eq!(unknown.hint.as_deref(), Some("did you mean `instance_type`?"));
        let missing = expand_with(json!({ "instance_type": "c5.2xlarge" }));
        assert_eq!(missing.key.as_deref(), Some("nodegroups.gpu.size"));
        assert_eq!(missing.message, "node group `gpu`: `size` is missing");
        let mistyped = expand_with(json!({ "instance_type": "c5.2xlarge", "size": 1, "efa": "yes" }));
        assert_eq!(mistyped.key.as_deref(), Some("nodegroups.gpu.efa"));
        assert_eq!(mistyped.message, "node group `gpu`: `efa` must be a boolean, not a string");
        let deeper = expand_with(json!({ "instance_types": ["c5.2xlarge", 5], "size": 1 }));
        assert_eq!(deeper.key.as_deref(), Some("nodegroups.gpu"));
        assert!(
            deeper.message.starts_with("node group `gpu`: invalid type: integer `5`"),
            "{}",
            deeper.message
        );
    }

    #[test]
    fn sizes_are_checked() {
        assert_eq!(size("size", &json!(2)).unwrap(), json!({"min": 2, "max": 2, "desired": 2}));
        assert_eq!(
            size("size", &json!({"min": 1, "max": 4})).unwrap(),
            json!({"min": 1, "max": 4, "desired": 1})
        );
        let err = size("nodegroups.gpu.size", &json!({"min": 3, "max": 2, "desired": 4})).unwrap_err();
        assert_eq!(err.key.as_deref(), Some("nodegroups.gpu.size"));
        assert!(err.message.contains("min ≤ desired ≤ max"), "{}", err.message);
    }
}
