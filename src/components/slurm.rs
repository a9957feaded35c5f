//! `slurm`: a Slurm cluster on AWS Parallel Computing Service (PCS), NeMo-on-Slurm ready — the
//! PCS cluster, a login node, and per `queues` table a node group of GPU (or Trainium) nodes
//! with EFA in a placement group and a queue over it; the shared file systems that list the
//! block as a client mounted on every node.
//!
//! ```toml
//! [slurm.nemo]
//! vpc = "vpc.main"
//! version = "25.05"
//! ami_id = "ami-0123456789abcdef0"
//! login = { instance_type = "c6i.2xlarge", ssh_cidrs = ["203.0.113.0/24"] }
//!
//! [slurm.nemo.queues.gpu]
//! instance_type = "p5.48xlarge"
//! nodes = { min = 0, max = 2 }
//! zone = "us-west-2c"
//! ```

use super::{Component, ComponentError, Expansion, Input, NamedVpc, Part, instances};
use crate::schema::{Block, block};
use serde_json::{Map, Value, json};

/// The component's registration.
pub const COMPONENT: Component = Component {
    name: "slurm",
    schema: Slurm::FIELDS,
    expand,
};

block! {
    /// A `slurm` block.
    struct Slurm {
        vpc: String,
        version: String,
        queues: Map<String, Value>,
        ami_id: Option<String>,
        name: Option<String>,
        size: Option<String>,
        login: Option<Value>,
        slurm_settings: Option<Value>,
        tags: Option<Value>,
    }
}

block! {
    /// A `queues.<name>` table of a `slurm` block.
    struct QueueBlock {
        instance_type: String,
        nodes: Option<Value> as Size,
        zone: Option<String>,
        efa: Option<bool>,
        efa_layout: Option<String>,
        capacity_type: Option<String>,
        capacity_reservation_id: Option<String>,
        volume_gib: Option<Value> as Integer,
        slurm_settings: Option<Value>,
    }
}

block! {
    /// The `login` table of a `slurm` block.
    struct LoginBlock {
        instance_type: Option<String>,
        ssh_cidrs: Option<Vec<String>>,
        zone: Option<String>,
    }
}

/// The Slurm versions PCS runs.
const VERSIONS: &[&str] = &["24.11", "25.05", "25.11"];

/// PCS's cluster sizes and the most instances each manages.
const SIZES: &[(&str, i64)] = &[("SMALL", 32), ("MEDIUM", 512), ("LARGE", 2048)];

/// IMDSv2 hop limit: containers (Enroot / Pyxis) are one hop further than the node's processes.
const IMDS_HOPS: i64 = 2;

/// One queue as written, checked.
struct Queue<'a> {
    name: &'a str,
    block: QueueBlock,
    min: i64,
    max: i64,
    /// Its EFA devices per node, when it has EFA.
    efa: Option<u32>,
    /// Its launch template's network interfaces, when it has EFA.
    nics: Vec<instances::Nic>,
    purchase: &'static str,
}

fn expand(input: &Input) -> Result<Expansion, ComponentError> {
    let block: Slurm = input.block()?;
    let name = cluster_name(input, &block)?;
    if !VERSIONS.contains(&block.version.as_str()) {
        return Err(ComponentError::at(
            "version",
            format!("PCS does not run Slurm {}", block.version),
            format!("write one of {}", VERSIONS.join(", ")),
        ));
    }
    let Some(ami) = block.ami_id.as_deref() else {
        return Err(ComponentError::at(
            "ami_id",
            "a Slurm cluster on PCS needs a PCS-ready image for its nodes: `ami_id` is missing",
            "build one with the PCS agent, Slurm, the EFA driver, the Lustre client, Enroot and Pyxis (AWS's PCS sample AMI recipes), and write `ami_id = \"ami-…\"`",
        ));
    };
    let vpc = input.named_vpc("vpc", Some(&block.vpc))?;
    let queues = queues(input, &block, &vpc)?;
    let login: Option<LoginBlock> = match &block.login {
        Some(table) => Some(super::read(
            table,
            "login",
            "`login`",
            "`login = { instance_type = \"c6i.2xlarge\" }`",
        )?),
        None => None,
    };
    let total: i64 = queues.iter().map(|q| q.max).sum::<i64>() + i64::from(login.is_some());
    let home_zone = queues
        .iter()
        .find_map(|q| q.block.zone.clone())
        .unwrap_or_else(|| vpc.zones[0].clone());
    let cluster = Cluster {
        address: input.address,
        size: size(block.size.as_deref(), total)?,
        name,
        tags: block.tags.clone().unwrap_or_else(|| json!({})),
        ami,
        user_data: user_data(input, input.address),
        vpc,
        home_zone,
    };
    let ssh_cidrs = login.as_ref().and_then(|l| l.ssh_cidrs.clone()).unwrap_or_default();
    let mut parts = cluster.shared(&block, &ssh_cidrs)?;
    let mut outputs = Map::new();
    if let Some(login) = &login {
        parts.extend(cluster.login(input, login, &ssh_cidrs)?);
        outputs.insert("login_node_group_id".into(), cluster.reference("login.node_group", "group_id"));
        outputs.insert("login".into(), json!(login_command(input, input.address, !ssh_cidrs.is_empty())));
    }
    let mut by_queue = Map::new();
    for q in &queues {
        parts.extend(cluster.queue(q)?);
        let (group_local, _) = group_of(q);
        by_queue.insert(
            q.name.to_owned(),
            json!({ "node_group_id": cluster.reference(&group_local, "group_id"), "queue_id": cluster.reference(&format!("queues.{}.queue", q.name), "queue_id"), "efa_interfaces": q.efa.unwrap_or(0) }),
        );
    }
    outputs.insert("cluster_id".into(), cluster.reference("cluster", "id"));
    outputs.insert("slurmctld_endpoint".into(), cluster.reference("cluster", "slurmctld_endpoint"));
    outputs.insert("cluster_security_group_id".into(), cluster.reference("security_group", "id"));
    outputs.insert("queues".into(), Value::Object(by_queue));
    Ok(Expansion {
        parts,
        outputs,
        ready: Vec::new(),
    })
}

/// The PCS cluster's name: the block's `name`, else its own, checked as PCS names.
fn cluster_name(input: &Input, block: &Slurm) -> Result<String, ComponentError> {
    let name = input.cloud_name(&block.name);
    let valid = name.len() >= 3
        && name.len() <= 40
        && !name.starts_with("pcs_")
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    if !valid {
        return Err(ComponentError::at(
            "name",
            format!("`{name}` cannot name a PCS cluster: 3–40 letters, digits and `-`, starting with a letter"),
            "set `name = \"nemo\"`",
        ));
    }
    Ok(name)
}

/// The PCS cluster size: the block's, checked against the `total` instances it manages, or
/// the smallest that manages them.
fn size(written: Option<&str>, total: i64) -> Result<String, ComponentError> {
    match written {
        Some(size) => match SIZES.iter().find(|(s, _)| *s == size) {
            Some((_, limit)) if total <= *limit => Ok(size.to_owned()),
            Some((_, limit)) => Err(ComponentError::at(
                "size",
                format!("a {size} cluster manages {limit} instances, and the queues' max and the login node come to {total}"),
                "pick a larger `size`, or fewer nodes",
            )),
            None => Err(ComponentError::at(
                "size",
                format!("`size = \"{size}\"` is not a PCS cluster size"),
                "write SMALL (32 instances), MEDIUM (512) or LARGE (2048), or leave it out",
            )),
        },
        None => match SIZES.iter().find(|(_, limit)| total <= *limit) {
            Some((size, _)) => Ok((*size).to_owned()),
            None => Err(ComponentError::at(
                "queues",
                format!("the queues' max come to {total} instances, more than a PCS cluster (LARGE) manages: 2048"),
                "split them across clusters",
            )),
        },
    }
}

/// How many nodes a compute node group scales between, how PCS buys them, and its Slurm
/// settings.
struct Capacity<'a> {
    scaling: Value,
    purchase: &'a str,
    settings: Value,
}

/// The cluster a block makes, and what all its node groups share.
struct Cluster<'a> {
    address: &'a str,
    name: String,
    size: String,
    tags: Value,
    ami: &'a str,
    user_data: String,
    vpc: NamedVpc<'a>,
    /// The zone of the cluster's controller: the first queue's with a zone, else the VPC's first.
    home_zone: String,
}

impl Cluster<'_> {
    /// A reference to the output `output` of this cluster's part `local`.
    fn reference(&self, local: &str, output: &str) -> Value {
        Value::String(format!("${{{}.{local}.{output}}}", self.address))
    }

    /// The security groups, the nodes' role and instance profile, and the PCS cluster.
    fn shared(&self, block: &Slurm, ssh_cidrs: &[String]) -> Result<Vec<Part>, ComponentError> {
        let name = &self.name;
        let tags = &self.tags;
        // One group on the cluster and every node: all traffic within it (Slurm, EFA,
        // Lustre's clients), out anywhere.
        let mut parts = vec![Part::new(
            "security_group",
            "aws_security_group",
            json!({
                "name": format!("{name}-slurm"),
                "description": format!("Slurm cluster {name}: all traffic within the cluster, EFA included"),
                "vpc_id": self.vpc.output("vpc_id"),
                "ingress": [{ "protocol": "-1", "self": true }],
                "egress": [{ "protocol": "-1", "self": true }, { "protocol": "-1", "cidr_blocks": ["0.0.0.0/0"] }],
                "tags": tags,
            }),
        )];
        if !ssh_cidrs.is_empty() {
            parts.push(Part::new(
                "login_security_group",
                "aws_security_group",
                json!({
                    "name": format!("{name}-login"),
                    "description": format!("SSH to the login node of Slurm cluster {name}"),
                    "vpc_id": self.vpc.output("vpc_id"),
                    "ingress": [{ "protocol": "tcp", "from_port": 22, "to_port": 22, "cidr_blocks": ssh_cidrs }],
                    "tags": tags,
                }),
            ));
        }
        // PCS takes an instance profile whose role is named AWSPCS… (or has the path /aws-pcs/).
        parts.push(Part::new(
            "node_role",
            "aws_iam_role",
            json!({
                "name": format!("AWSPCS-{name}-nodes"),
                "assume_role_policy": { "Version": "2012-10-17", "Statement": [{ "Effect": "Allow", "Principal": { "Service": "ec2.amazonaws.com" }, "Action": "sts:AssumeRole" }] },
                "managed_policy_arns": ["arn:aws:iam::aws:policy/AWSPCSComputeNodePolicy", "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"],
                "tags": tags,
            }),
        ));
        parts.push(Part::new(
            "instance_profile",
            "aws_iam_instance_profile",
            json!({ "name": format!("AWSPCS-{name}-nodes"), "role": self.reference("node_role", "name"), "tags": tags }),
        ));
        parts.push(Part::new(
            "cluster",
            "aws_pcs_cluster",
            json!({
                "name": name,
                "slurm_version": block.version,
                "size": self.size,
                "subnet_id": self.vpc.private_subnet("vpc", &self.home_zone)?,
                "security_group_ids": [self.reference("security_group", "id")],
                "slurm_settings": block.slurm_settings.clone().unwrap_or_else(|| json!({})),
                "tags": tags,
            }),
        ));
        Ok(parts)
    }

    /// A compute node group of this cluster, launched from `template`.
    fn node_group(&self, group: &str, instance_type: &str, subnets: Value, template: &str, capacity: Capacity) -> Value {
        let Capacity {
            scaling,
            purchase,
            settings,
        } = capacity;
        json!({
            "cluster_id": self.reference("cluster", "id"),
            "name": group,
            "instance_types": [instance_type],
            "subnet_ids": subnets,
            "instance_profile_arn": self.reference("instance_profile", "arn"),
            "launch_template_id": self.reference(template, "id"),
            "launch_template_version": self.reference(template, "latest_version"),
            "ami_id": self.ami,
            "purchase_option": purchase,
            "scaling": scaling,
            "slurm_settings": settings,
            "tags": self.tags,
        })
    }

    /// The login node's launch template and node group of one instance: public with
    /// `ssh_cidrs`, else private (reached through SSM).
    fn login(&self, input: &Input, login: &LoginBlock, ssh_cidrs: &[String]) -> Result<Vec<Part>, ComponentError> {
        let instance_type = login.instance_type.as_deref().unwrap_or("c6i.2xlarge");
        instances::look_up(input.facts, "login.instance_type", &[instance_type])?;
        let zone = login.zone.as_deref().unwrap_or(&self.home_zone);
        let public = !ssh_cidrs.is_empty();
        let private = self.vpc.private_subnet("login.zone", zone)?;
        let subnet = if public {
            if !self.vpc.public {
                return Err(ComponentError::at(
                    "login.ssh_cidrs",
                    format!(
                        "a login node open to `ssh_cidrs` needs a public subnet, and `{}` reads an existing VPC without its public subnets",
                        self.vpc.address
                    ),
                    format!(
                        "add `public = true` to `[{}]` (each zone's subnet routed to an internet gateway), or remove `ssh_cidrs` for a private login node reached through SSM",
                        self.vpc.address
                    ),
                ));
            }
            self.vpc.output(&format!("public_subnets_by_zone.{zone}"))
        } else {
            private
        };
        let mut groups = vec![self.reference("security_group", "id")];
        if public {
            groups.push(self.reference("login_security_group", "id"));
        }
        let template = json!({
            "name": format!("{}-login", self.name),
            "user_data": self.user_data,
            "imds_hop_limit": IMDS_HOPS,
            "network_interfaces": [{ "network_card_index": 0, "device_index": 0, "security_groups": groups, "associate_public_ip_address": public }],
            "tags": self.tags,
        });
        let scaling = json!({ "min": 1, "max": 1 });
        let capacity = Capacity {
            scaling,
            purchase: "ONDEMAND",
            settings: json!({}),
        };
        let group = self.node_group("login", instance_type, json!([subnet]), "login.launch_template", capacity);
        Ok(vec![
            Part::new("login.launch_template", "aws_launch_template", template),
            Part::new("login.node_group", "aws_pcs_compute_node_group", group),
        ])
    }

    /// A queue's launch template (EFA interfaces, its reservation or a placement group), its
    /// node group and the queue.
    fn queue(&self, q: &Queue) -> Result<Vec<Part>, ComponentError> {
        let local = |what: &str| format!("queues.{}.{what}", q.name);
        let mut parts = Vec::new();
        let subnets = match &q.block.zone {
            Some(zone) => json!([self.vpc.private_subnet(&format!("queues.{}.zone", q.name), zone)?]),
            None => self.vpc.output("private_subnet_ids"),
        };
        let mut template = json!({
            "name": format!("{}-{}", self.name, q.name),
            "user_data": self.user_data,
            "imds_hop_limit": IMDS_HOPS,
            "tags": self.tags,
        });
        // The interfaces carry the cluster's group: with interfaces in the template, groups go
        // on each of them, not on the node group.
        let groups = json!([self.reference("security_group", "id")]);
        template["network_interfaces"] = match q.efa {
            Some(_) => Value::Array(instances::interfaces(&q.nics, &groups)),
            None => json!([{ "network_card_index": 0, "device_index": 0, "security_groups": groups }]),
        };
        if let Some(volume) = &q.block.volume_gib {
            template["block_devices"] = json!([{ "device_name": "/dev/xvda", "volume_size": volume, "volume_type": "gp3" }]);
        }
        if let Some(reservation) = &q.block.capacity_reservation_id {
            template["capacity_reservation_id"] = json!(reservation);
            template["capacity_block"] = json!(q.purchase == "CAPACITY_BLOCK");
        } else if q.efa.is_some() && q.purchase != "CAPACITY_BLOCK" {
            parts.push(Part::new(
                local("placement_group"),
                "aws_placement_group",
                json!({ "name": format!("{}-{}", self.name, q.name), "strategy": "cluster", "tags": self.tags }),
            ));
            template["placement_group"] = self.reference(&local("placement_group"), "name");
        }
        parts.push(Part::new(local("launch_template"), "aws_launch_template", template));
        // The group is named and addressed by its instance type: a new type is a new group,
        // made and taken into the queue before the old one goes (PCS keeps a group a queue
        // uses, so it cannot go first).
        let (group_local, group_name) = group_of(q);
        let settings = q.block.slurm_settings.clone().unwrap_or_else(|| json!({}));
        let scaling = json!({ "min": q.min, "max": q.max });
        let capacity = Capacity {
            scaling,
            purchase: q.purchase,
            settings,
        };
        let group = self.node_group(&group_name, &q.block.instance_type, subnets, &local("launch_template"), capacity);
        parts.push(Part::new(&group_local, "aws_pcs_compute_node_group", group));
        parts.push(Part::new(
            local("queue"),
            "aws_pcs_queue",
            json!({
                "cluster_id": self.reference("cluster", "id"),
                "name": q.name,
                "compute_node_group_ids": [self.reference(&group_local, "group_id")],
                "tags": self.tags,
            }),
        ));
        Ok(parts)
    }
}

/// A queue's node group: its address below the block (`queues.gpu.node_group_p5_48xlarge`)
/// and its PCS name (`gpu-p5-48xlarge`, or the queue's name and a digest of the type where
/// that passes PCS's 25 characters), both following the instance type.
fn group_of(q: &Queue) -> (String, String) {
    let segment: String = q
        .block
        .instance_type
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let readable = format!("{}-{}", q.name, segment.replace('_', "-"));
    let name = if readable.len() <= 25 {
        readable
    } else {
        use sha2::Digest;
        let digest = format!("{:x}", sha2::Sha256::digest(q.block.instance_type.as_bytes()));
        format!("{}-{}", &q.name[..q.name.len().min(18)], &digest[..6])
    };
    (format!("queues.{}.node_group_{segment}", q.name), name)
}

/// How to reach the login node: its instance, found by the tag PCS puts on a node group's
/// instances, then SSH to its public address (with `ssh_cidrs`) or an SSM session.
fn login_command(input: &Input, address: &str, public: bool) -> String {
    let region = input.providers.aws_region().map(|r| format!(" --region {r}")).unwrap_or_default();
    let (field, run) = if public {
        ("PublicIpAddress", "ssh ec2-user@")
    } else {
        ("InstanceId", "aws ssm start-session --target ")
    };
    format!(
        "{run}$(aws ec2 describe-instances{region} --filters Name=tag:aws:pcs:compute-node-group-id,Values=${{{address}.login.node_group.group_id}} Name=instance-state-name,Values=running --query 'Reservations[0].Instances[0].{field}' --output text)"
    )
}

/// The `queues` tables, checked, in the order written.
fn queues<'a>(input: &Input, block: &'a Slurm, vpc: &NamedVpc) -> Result<Vec<Queue<'a>>, ComponentError> {
    if block.queues.is_empty() {
        return Err(ComponentError::at(
            "queues",
            "a Slurm cluster needs at least one queue",
            "add `[slurm.<name>.queues.gpu]` with `instance_type = \"p5.48xlarge\"`",
        ));
    }
    let queues = block
        .queues
        .iter()
        .map(|(name, table)| queue(input, name, table, vpc))
        .collect::<Result<Vec<_>, _>>()?;
    for q in queues.iter().filter(|q| instances::ultraserver(&q.block.instance_type)) {
        ultraserver_queue(q, &block.version)?;
    }
    Ok(queues)
}

/// PCS serves UltraServer queues (P6e-GB200) from Capacity Blocks only, on Slurm 25.05 or
/// later (its topology plugin and the IMEX prolog).
fn ultraserver_queue(q: &Queue, version: &str) -> Result<(), ComponentError> {
    let instance_type = &q.block.instance_type;
    if q.purchase != "CAPACITY_BLOCK" {
        return Err(ComponentError::at(
            format!(
                "queues.{}.{}",
                q.name,
                if q.block.capacity_type.is_some() {
                    "capacity_type"
                } else {
                    "instance_type"
                }
            ),
            format!("`{instance_type}` comes only as UltraServers, from Capacity Blocks"),
            "set `capacity_type = \"CAPACITY_BLOCK\"` and `capacity_reservation_id = \"cr-…\"`, the reservation of the UltraServer Capacity Block",
        ));
    }
    if version == "24.11" {
        return Err(ComponentError::at(
            "version",
            format!("PCS serves `{instance_type}` UltraServer queues on Slurm 25.05 or later, and the cluster runs {version}"),
            "write `version = \"25.05\"` or later",
        ));
    }
    Ok(())
}

/// The table `queues.<name>`, checked: a type that exists, nodes in order, EFA (by default
/// where the type has it) only in one zone, a zone of the VPC, a reservation not with SPOT.
fn queue<'a>(input: &Input, name: &'a str, table: &Value, vpc: &NamedVpc) -> Result<Queue<'a>, ComponentError> {
    let key = |k: &str| format!("queues.{name}.{k}");
    let block: QueueBlock = super::read(
        table,
        &format!("queues.{name}"),
        &format!("queue `{name}`"),
        "`[slurm.<name>.queues.<queue>]` with `instance_type`",
    )?;
    let valid = name.len() >= 3
        && name.len() <= 25
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    if !valid {
        return Err(ComponentError::at(
            format!("queues.{name}"),
            format!("`{name}` cannot name a PCS queue: 3–25 letters, digits and `-`, starting with a letter"),
            "rename the table, e.g. `[slurm.nemo.queues.gpu]`",
        ));
    }
    let instance_type = block.instance_type.as_str();
    let looked = instances::look_up(input.facts, &key("instance_type"), &[instance_type])?;
    let (min, max) = nodes(name, block.nodes.as_ref(), &key)?;
    super::fits_capacity_block(input, block.capacity_reservation_id.as_deref(), max, &key("nodes"))?;
    let supports = looked.efa_interfaces().unwrap_or(0);
    let efa = match block.efa {
        None => (supports > 0).then_some(supports),
        Some(false) => None,
        Some(true) if supports > 0 => Some(supports),
        Some(true) => {
            return Err(ComponentError::at(
                key("efa"),
                format!("`{instance_type}` has no EFA forge knows of"),
                "leave `efa` out, or pick an EFA type (p4d, p5, trn1)",
            ));
        }
    };
    check_zone(input, name, &block, efa.is_some(), vpc, &key)?;
    let purchase = purchase(&block, &key)?;
    let nics = instances::nics(
        instance_type,
        &looked,
        efa.is_some(),
        block.efa_layout.as_deref(),
        &key("efa_layout"),
    )?;
    Ok(Queue {
        name,
        efa: efa.map(|_| instances::efa_devices(&nics)),
        nics,
        block,
        min,
        max,
        purchase,
    })
}

/// A queue's `nodes`: `2` static nodes, or `{ min, max }` (0 to 1 when left out).
fn nodes(name: &str, nodes: Option<&Value>, key: &dyn Fn(&str) -> String) -> Result<(i64, i64), ComponentError> {
    match nodes {
        None => Ok((0, 1)),
        Some(Value::Number(n)) if n.as_i64().is_some_and(|n| n >= 1) => Ok((n.as_i64().unwrap_or(1), n.as_i64().unwrap_or(1))),
        Some(Value::Object(range)) => {
            let get = |k: &str| range.get(k).and_then(Value::as_i64);
            match (get("min"), get("max")) {
                (Some(min), Some(max)) if 0 <= min && min <= max && max >= 1 => Ok((min, max)),
                (Some(min), Some(max)) => Err(ComponentError::at(
                    key("nodes"),
                    format!("queue `{name}`: nodes min {min} and max {max} are out of order"),
                    "min ≤ max, and max ≥ 1",
                )),
                _ => Err(ComponentError::at(
                    key("nodes"),
                    "`nodes` needs whole numbers `min` and `max`",
                    "write `nodes = { min = 0, max = 2 }`, or `nodes = 2` for static nodes",
                )),
            }
        }
        Some(_) => Err(ComponentError::at(
            key("nodes"),
            "`nodes` must be a count or `{ min, max }`",
            "write `nodes = 2` (static) or `nodes = { min = 0, max = 2 }`",
        )),
    }
}

/// A queue's zone: one of the VPC's that offers its type, and set where it has EFA.
fn check_zone(
    input: &Input,
    name: &str,
    block: &QueueBlock,
    efa: bool,
    vpc: &NamedVpc,
    key: &dyn Fn(&str) -> String,
) -> Result<(), ComponentError> {
    let instance_type = block.instance_type.as_str();
    let Some(zone) = block.zone.as_deref() else {
        if efa {
            return Err(ComponentError::at(
                format!("queues.{name}"),
                format!("EFA queue `{name}` has no `zone`"),
                "EFA traffic must stay in one subnet and one placement group: add `zone = \"us-west-2c\"` (a zone of the VPC that offers the type)",
            ));
        }
        return Ok(());
    };
    vpc.private_subnet(&key("zone"), zone)?;
    if input.facts.offered(instance_type, zone) == Some(false) {
        return Err(ComponentError::at(
            key("zone"),
            format!("zone `{zone}` does not offer `{instance_type}`"),
            format!(
                "zones that offer it: {}",
                input.facts.zones(instance_type).unwrap_or_default().join(", ")
            ),
        ));
    }
    Ok(())
}

/// A queue's PCS purchase option, checked with its reservation.
fn purchase(block: &QueueBlock, key: &dyn Fn(&str) -> String) -> Result<&'static str, ComponentError> {
    let purchase = match block.capacity_type.as_deref() {
        None | Some("ON_DEMAND" | "ONDEMAND") => "ONDEMAND",
        Some("SPOT") => "SPOT",
        Some("CAPACITY_BLOCK") => "CAPACITY_BLOCK",
        Some(other) => {
            return Err(ComponentError::at(
                key("capacity_type"),
                format!("`capacity_type = \"{other}\"` is not a PCS purchase option"),
                "write ON_DEMAND, SPOT or CAPACITY_BLOCK",
            ));
        }
    };
    let reservation = block.capacity_reservation_id.is_some();
    if reservation && purchase == "SPOT" {
        return Err(ComponentError::at(
            key("capacity_reservation_id"),
            "a capacity reservation does not take SPOT instances",
            "drop `capacity_type = \"SPOT\"`, or the reservation",
        ));
    }
    if purchase == "CAPACITY_BLOCK" && !reservation {
        return Err(ComponentError::at(
            key("capacity_type"),
            "a Capacity Block queue needs the block's reservation",
            "add `capacity_reservation_id = \"cr-…\"`",
        ));
    }
    Ok(purchase)
}

/// The nodes' user data, MIME multi-part as PCS wants it: a shell script (run after the node
/// registers, before slurmd starts) that mounts each FSx for Lustre file system listing the
/// block as a client — the Lustre client installed if the image lacks it — and keeps the mount
/// in /etc/fstab.
fn user_data(input: &Input, address: &str) -> String {
    let mut script = String::from("#!/bin/bash\nset -euo pipefail\n");
    let mut any = false;
    for (block, config) in super::blocks_serving(input.components, address) {
        if !block.starts_with("fsx.") {
            continue;
        }
        any = true;
        let mount_point = super::fsx::mount_point(config);
        let source = format!("${{{block}.dns_name}}@tcp:/${{{block}.mount_name}}");
        script.push_str(&format!(
            "mkdir -p {mount_point}\n\
             mount -t lustre -o relatime,flock {source} {mount_point}\n\
             grep -q ' {mount_point} lustre ' /etc/fstab || echo '{source} {mount_point} lustre defaults,relatime,flock,_netdev,x-systemd.automount,x-systemd.requires=network.service 0 0' >> /etc/fstab\n"
        ));
    }
    if any {
        script = script.replacen(
            "set -euo pipefail\n",
            "set -euo pipefail\ncommand -v mount.lustre >/dev/null || dnf install -y lustre-client || amazon-linux-extras install -y lustre || (apt-get update && apt-get install -y \"lustre-client-modules-$(uname -r)\")\n",
            1,
        );
    }
    format!(
        "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"==FORGE==\"\n\n--==FORGE==\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n{script}\n--==FORGE==--\n"
    )
}
