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

use super::{Component, ComponentError, Expansion, Input, Part, instances};
use crate::schema::{Field, FieldType};
use serde_json::{Map, Value, json};

/// The component's registration.
pub const COMPONENT: Component = Component {
    name: "slurm",
    schema: &[
        Field::required("vpc", FieldType::String),
        Field::required("version", FieldType::String),
        Field::required("queues", FieldType::Table),
        Field::optional("ami_id", FieldType::String),
        Field::optional("name", FieldType::String),
        Field::optional("size", FieldType::String),
        Field::optional("login", FieldType::Table),
        Field::optional("slurm_settings", FieldType::Table),
        Field::optional("tags", FieldType::Table),
    ],
    expand,
};

/// The Slurm versions PCS runs.
const VERSIONS: &[&str] = &["24.11", "25.05", "25.11"];

/// PCS's cluster sizes and the most instances each manages.
const SIZES: &[(&str, i64)] = &[("SMALL", 32), ("MEDIUM", 512), ("LARGE", 2048)];

/// The keys of a `queues` table and of `login`.
const QUEUE_KEYS: &[&str] = &[
    "instance_type",
    "nodes",
    "zone",
    "efa",
    "capacity_type",
    "capacity_reservation_id",
    "volume_gib",
    "slurm_settings",
];
const LOGIN_KEYS: &[&str] = &["instance_type", "ssh_cidrs", "zone"];

/// Where each file system the block is a client of is mounted (`/fsx` unless its block says).
const DEFAULT_MOUNT: &str = "/fsx";

/// IMDSv2 hop limit: containers (Enroot / Pyxis) are one hop further than the node's processes.
const IMDS_HOPS: i64 = 2;

/// One queue as written, checked.
struct Queue<'a> {
    name: &'a str,
    instance_type: &'a str,
    min: i64,
    max: i64,
    zone: Option<&'a str>,
    efa: Option<u32>,
    purchase: &'static str,
    reservation: Option<&'a str>,
    body: &'a Map<String, Value>,
}

fn expand(input: &Input) -> Result<Expansion, ComponentError> {
    let address = input.address;
    let block = address.split_once('.').map_or(address, |(_, n)| n);
    let name = input.text("name").map_or_else(|| block.replace('_', "-"), str::to_owned);
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
    let version = input.text("version").unwrap_or_default();
    if !VERSIONS.contains(&version) {
        return Err(ComponentError::at(
            "version",
            format!("PCS does not run Slurm {version}"),
            format!("write one of {}", VERSIONS.join(", ")),
        ));
    }
    let Some(ami) = input.text("ami_id") else {
        return Err(ComponentError::at(
            "ami_id",
            "a Slurm cluster on PCS needs a PCS-ready image for its nodes: `ami_id` is missing",
            "build one with the PCS agent, Slurm, the EFA driver, the Lustre client, Enroot and Pyxis (AWS's PCS sample AMI recipes), and write `ami_id = \"ami-…\"`",
        ));
    };
    let vpc = input.named_vpc("vpc")?;
    let queues = queues(input, &vpc)?;
    let login = input.config.get("login").map(|l| l.as_object().cloned().unwrap_or_default());
    if let Some(login) = &login {
        check_keys(login, "login", LOGIN_KEYS)?;
    }
    let total: i64 = queues.iter().map(|q| q.max).sum::<i64>() + i64::from(login.is_some());
    let size = match input.text("size") {
        Some(size) => match SIZES.iter().find(|(s, _)| *s == size) {
            Some((_, limit)) if total <= *limit => size.to_owned(),
            Some((_, limit)) => {
                return Err(ComponentError::at(
                    "size",
                    format!("a {size} cluster manages {limit} instances, and the queues' max and the login node come to {total}"),
                    "pick a larger `size`, or fewer nodes",
                ));
            }
            None => {
                return Err(ComponentError::at(
                    "size",
                    format!("`size = \"{size}\"` is not a PCS cluster size"),
                    "write SMALL (32 instances), MEDIUM (512) or LARGE (2048), or leave it out",
                ));
            }
        },
        None => match SIZES.iter().find(|(_, limit)| total <= *limit) {
            Some((size, _)) => (*size).to_owned(),
            None => {
                return Err(ComponentError::at(
                    "queues",
                    format!("the queues' max come to {total} instances, more than a PCS cluster (LARGE) manages: 2048"),
                    "split them across clusters",
                ));
            }
        },
    };

    let reference = |part: &str, output: &str| Value::String(format!("${{{address}.{part}.{output}}}"));
    let tags = input.config.get("tags").cloned().unwrap_or_else(|| json!({}));
    let mut parts = Vec::new();
    let mut part = |local: &str, kind: &'static str, config: Value| {
        parts.push(Part {
            local: local.to_owned(),
            kind,
            config,
            depends_on: vec![],
        })
    };

    // One group on the cluster and every node: all traffic within it (Slurm, EFA, Lustre's
    // clients), out anywhere.
    part(
        "security_group",
        "aws_security_group",
        json!({
            "name": format!("{name}-slurm"),
            "description": format!("Slurm cluster {name}: all traffic within the cluster, EFA included"),
            "vpc_id": vpc.output("vpc_id"),
            "ingress": [{ "protocol": "-1", "self": true }],
            "egress": [{ "protocol": "-1", "self": true }, { "protocol": "-1", "cidr_blocks": ["0.0.0.0/0"] }],
            "tags": tags,
        }),
    );
    let ssh_cidrs: Vec<Value> = login
        .as_ref()
        .and_then(|l| l.get("ssh_cidrs"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if !ssh_cidrs.is_empty() {
        part(
            "login_security_group",
            "aws_security_group",
            json!({
                "name": format!("{name}-login"),
                "description": format!("SSH to the login node of Slurm cluster {name}"),
                "vpc_id": vpc.output("vpc_id"),
                "ingress": [{ "protocol": "tcp", "from_port": 22, "to_port": 22, "cidr_blocks": ssh_cidrs }],
                "tags": tags,
            }),
        );
    }
    // PCS takes an instance profile whose role is named AWSPCS… (or has the path /aws-pcs/).
    part(
        "node_role",
        "aws_iam_role",
        json!({
            "name": format!("AWSPCS-{name}-nodes"),
            "assume_role_policy": { "Version": "2012-10-17", "Statement": [{ "Effect": "Allow", "Principal": { "Service": "ec2.amazonaws.com" }, "Action": "sts:AssumeRole" }] },
            "managed_policy_arns": ["arn:aws:iam::aws:policy/AWSPCSComputeNodePolicy", "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"],
            "tags": tags,
        }),
    );
    part(
        "instance_profile",
        "aws_iam_instance_profile",
        json!({ "name": format!("AWSPCS-{name}-nodes"), "role": reference("node_role", "name"), "tags": tags }),
    );
    let home_zone = queues
        .iter()
        .find_map(|q| q.zone)
        .map(str::to_owned)
        .unwrap_or_else(|| vpc.zones[0].clone());
    part(
        "cluster",
        "aws_pcs_cluster",
        json!({
            "name": name,
            "slurm_version": version,
            "size": size,
            "subnet_id": vpc.private_subnet("vpc", &home_zone)?,
            "security_group_ids": [reference("security_group", "id")],
            "slurm_settings": input.config.get("slurm_settings").cloned().unwrap_or_else(|| json!({})),
            "tags": tags,
        }),
    );
    let user_data = user_data(input, address);
    let node_group = |group: &str, types: Value, subnets: Value, template: &str, scaling: Value, purchase: &str, settings: Value| {
        json!({
            "cluster_id": reference("cluster", "id"),
            "name": group,
            "instance_types": types,
            "subnet_ids": subnets,
            "instance_profile_arn": reference("instance_profile", "arn"),
            "launch_template_id": reference(template, "id"),
            "launch_template_version": reference(template, "latest_version"),
            "ami_id": ami,
            "purchase_option": purchase,
            "scaling": scaling,
            "slurm_settings": settings,
            "tags": tags,
        })
    };

    let mut outputs = Map::new();
    if let Some(login) = &login {
        let instance_type = login.get("instance_type").and_then(Value::as_str).unwrap_or("c6i.2xlarge");
        instances::look_up(input.facts, "login.instance_type", &[instance_type])?;
        let zone = login.get("zone").and_then(Value::as_str).unwrap_or(&home_zone);
        let public = !ssh_cidrs.is_empty();
        let subnet = if public {
            vpc.private_subnet("login.zone", zone)?;
            vpc.output(&format!("public_subnets_by_zone.{zone}"))
        } else {
            vpc.private_subnet("login.zone", zone)?
        };
        let mut groups = vec![reference("security_group", "id")];
        if public {
            groups.push(reference("login_security_group", "id"));
        }
        part(
            "login.launch_template",
            "aws_launch_template",
            json!({
                "name": format!("{name}-login"),
                "user_data": user_data,
                "imds_hop_limit": IMDS_HOPS,
                "network_interfaces": [{ "network_card_index": 0, "device_index": 0, "security_groups": groups, "associate_public_ip_address": public }],
                "tags": tags,
            }),
        );
        part(
            "login.node_group",
            "aws_pcs_compute_node_group",
            node_group(
                "login",
                json!([instance_type]),
                json!([subnet]),
                "login.launch_template",
                json!({ "min": 1, "max": 1 }),
                "ONDEMAND",
                json!({}),
            ),
        );
        outputs.insert("login_node_group_id".into(), reference("login.node_group", "group_id"));
        outputs.insert("login".into(), json!(login_command(input, address, public)));
    }

    let mut by_queue = Map::new();
    for q in &queues {
        let local = |what: &str| format!("queues.{}.{what}", q.name);
        let subnets = match q.zone {
            Some(zone) => json!([vpc.private_subnet(&format!("queues.{}.zone", q.name), zone)?]),
            None => vpc.output("private_subnet_ids"),
        };
        let mut template = json!({
            "name": format!("{name}-{}", q.name),
            "user_data": user_data,
            "imds_hop_limit": IMDS_HOPS,
            "tags": tags,
        });
        // The interfaces carry the cluster's group: with interfaces in the template, groups go
        // on each of them, not on the node group.
        let groups = json!([reference("security_group", "id")]);
        template["network_interfaces"] = match q.efa {
            Some(count) => Value::Array(instances::efa_interfaces(count, &groups)),
            None => json!([{ "network_card_index": 0, "device_index": 0, "security_groups": groups }]),
        };
        if let Some(volume) = q.body.get("volume_gib") {
            template["block_devices"] = json!([{ "device_name": "/dev/xvda", "volume_size": volume, "volume_type": "gp3" }]);
        }
        if let Some(reservation) = q.reservation {
            template["capacity_reservation_id"] = json!(reservation);
            template["capacity_block"] = json!(q.purchase == "CAPACITY_BLOCK");
        } else if q.efa.is_some() && q.purchase != "CAPACITY_BLOCK" {
            part(
                &local("placement_group"),
                "aws_placement_group",
                json!({ "name": format!("{name}-{}", q.name), "strategy": "cluster", "tags": tags }),
            );
            template["placement_group"] = reference(&local("placement_group"), "name");
        }
        part(&local("launch_template"), "aws_launch_template", template);
        // The group is named and addressed by its instance type: a new type is a new group,
        // made and taken into the queue before the old one goes (PCS keeps a group a queue
        // uses, so it cannot go first).
        let (group_local, group_name) = group_of(q);
        part(
            &group_local,
            "aws_pcs_compute_node_group",
            node_group(
                &group_name,
                json!([q.instance_type]),
                subnets,
                &local("launch_template"),
                json!({ "min": q.min, "max": q.max }),
                q.purchase,
                q.body.get("slurm_settings").cloned().unwrap_or_else(|| json!({})),
            ),
        );
        part(
            &local("queue"),
            "aws_pcs_queue",
            json!({
                "cluster_id": reference("cluster", "id"),
                "name": q.name,
                "compute_node_group_ids": [reference(&group_local, "group_id")],
                "tags": tags,
            }),
        );
        by_queue.insert(
            q.name.to_owned(),
            json!({ "node_group_id": reference(&group_local, "group_id"), "queue_id": reference(&local("queue"), "queue_id"), "efa_interfaces": q.efa.unwrap_or(0) }),
        );
    }
    outputs.insert("cluster_id".into(), reference("cluster", "id"));
    outputs.insert("slurmctld_endpoint".into(), reference("cluster", "slurmctld_endpoint"));
    outputs.insert("cluster_security_group_id".into(), reference("security_group", "id"));
    outputs.insert("queues".into(), Value::Object(by_queue));
    Ok(Expansion {
        parts,
        outputs,
        ready: Vec::new(),
    })
}

/// A queue's node group: its address below the block (`queues.gpu.node_group_p5_48xlarge`)
/// and its PCS name (`gpu-p5-48xlarge`, or the queue's name and a digest of the type where
/// that passes PCS's 25 characters), both following the instance type.
fn group_of(q: &Queue) -> (String, String) {
    let segment: String = q
        .instance_type
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let readable = format!("{}-{}", q.name, segment.replace('_', "-"));
    let name = if readable.len() <= 25 {
        readable
    } else {
        use sha2::Digest;
        let digest = format!("{:x}", sha2::Sha256::digest(q.instance_type.as_bytes()));
        format!("{}-{}", &q.name[..q.name.len().min(18)], &digest[..6])
    };
    (format!("queues.{}.node_group_{segment}", q.name), name)
}

/// How to reach the login node: its instance, found by the tag PCS puts on a node group's
/// instances, then SSH to its public address (with `ssh_cidrs`) or an SSM session.
fn login_command(input: &Input, address: &str, public: bool) -> String {
    let region = input
        .providers
        .get("aws")
        .and_then(|a| a.get("region"))
        .and_then(Value::as_str)
        .map(|r| format!(" --region {r}"))
        .unwrap_or_default();
    let (field, run) = if public {
        ("PublicIpAddress", "ssh ec2-user@")
    } else {
        ("InstanceId", "aws ssm start-session --target ")
    };
    format!(
        "{run}$(aws ec2 describe-instances{region} --filters Name=tag:aws:pcs:compute-node-group-id,Values=${{{address}.login.node_group.group_id}} Name=instance-state-name,Values=running --query 'Reservations[0].Instances[0].{field}' --output text)"
    )
}

/// The `queues` tables, checked: a type that exists, nodes in order, EFA (by default where the
/// type has it) only in one zone, a zone of the VPC, a reservation not with SPOT.
fn queues<'a>(input: &'a Input, vpc: &super::NamedVpc) -> Result<Vec<Queue<'a>>, ComponentError> {
    let tables = input.config.get("queues").and_then(Value::as_object);
    let Some(tables) = tables.filter(|t| !t.is_empty()) else {
        return Err(ComponentError::at(
            "queues",
            "a Slurm cluster needs at least one queue",
            "add `[slurm.<name>.queues.gpu]` with `instance_type = \"p5.48xlarge\"`",
        ));
    };
    let mut queues = Vec::new();
    for (name, body) in tables {
        let key = |k: &str| format!("queues.{name}.{k}");
        let Some(body) = body.as_object() else {
            return Err(ComponentError::at(
                format!("queues.{name}"),
                format!("queue `{name}` must be a table"),
                "write `[slurm.<name>.queues.<queue>]`",
            ));
        };
        check_keys(body, &format!("queues.{name}"), QUEUE_KEYS)?;
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
        let Some(instance_type) = body.get("instance_type").and_then(Value::as_str) else {
            return Err(ComponentError::at(
                key("instance_type"),
                format!("queue `{name}` names no instance type"),
                "add `instance_type = \"p5.48xlarge\"`",
            ));
        };
        let looked = instances::look_up(input.facts, &key("instance_type"), &[instance_type])?;
        let (min, max) = match body.get("nodes") {
            None => (0, 1),
            Some(Value::Number(n)) if n.as_i64().is_some_and(|n| n >= 1) => (n.as_i64().unwrap_or(1), n.as_i64().unwrap_or(1)),
            Some(Value::Object(range)) => {
                let get = |k: &str| range.get(k).and_then(Value::as_i64);
                match (get("min"), get("max")) {
                    (Some(min), Some(max)) if 0 <= min && min <= max && max >= 1 => (min, max),
                    (Some(min), Some(max)) => {
                        return Err(ComponentError::at(
                            key("nodes"),
                            format!("queue `{name}`: nodes min {min} and max {max} are out of order"),
                            "min ≤ max, and max ≥ 1",
                        ));
                    }
                    _ => {
                        return Err(ComponentError::at(
                            key("nodes"),
                            "`nodes` needs whole numbers `min` and `max`",
                            "write `nodes = { min = 0, max = 2 }`, or `nodes = 2` for static nodes",
                        ));
                    }
                }
            }
            Some(_) => {
                return Err(ComponentError::at(
                    key("nodes"),
                    "`nodes` must be a count or `{ min, max }`",
                    "write `nodes = 2` (static) or `nodes = { min = 0, max = 2 }`",
                ));
            }
        };
        let supports = looked.efa_interfaces.unwrap_or(0);
        let efa = match body.get("efa") {
            None => (supports > 0).then_some(supports),
            Some(Value::Bool(false)) => None,
            Some(Value::Bool(true)) if supports > 0 => Some(supports),
            Some(Value::Bool(true)) => {
                return Err(ComponentError::at(
                    key("efa"),
                    format!("`{instance_type}` has no EFA forge knows of"),
                    "leave `efa` out, or pick an EFA type (p4d, p5, trn1)",
                ));
            }
            Some(_) => {
                return Err(ComponentError::at(
                    key("efa"),
                    "`efa` must be true or false",
                    "write `efa = false` to leave EFA out",
                ));
            }
        };
        let zone = body.get("zone").and_then(Value::as_str);
        if let Some(zone) = zone {
            vpc.private_subnet(&key("zone"), zone)?;
        }
        if efa.is_some() && zone.is_none() {
            return Err(ComponentError::at(
                format!("queues.{name}"),
                format!("EFA queue `{name}` has no `zone`"),
                "EFA traffic must stay in one subnet and one placement group: add `zone = \"us-west-2c\"` (a zone of the VPC that offers the type)",
            ));
        }
        if let Some(zone) = zone
            && input.facts.offered(instance_type, zone) == Some(false)
        {
            return Err(ComponentError::at(
                key("zone"),
                format!("zone `{zone}` does not offer `{instance_type}`"),
                format!(
                    "zones that offer it: {}",
                    input.facts.zones(instance_type).unwrap_or_default().join(", ")
                ),
            ));
        }
        let purchase = match body.get("capacity_type").and_then(Value::as_str) {
            None | Some("ON_DEMAND") | Some("ONDEMAND") => "ONDEMAND",
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
        let reservation = body.get("capacity_reservation_id").and_then(Value::as_str);
        if reservation.is_some() && purchase == "SPOT" {
            return Err(ComponentError::at(
                key("capacity_reservation_id"),
                "a capacity reservation does not take SPOT instances",
                "drop `capacity_type = \"SPOT\"`, or the reservation",
            ));
        }
        if purchase == "CAPACITY_BLOCK" && reservation.is_none() {
            return Err(ComponentError::at(
                key("capacity_type"),
                "a Capacity Block queue needs the block's reservation",
                "add `capacity_reservation_id = \"cr-…\"`",
            ));
        }
        queues.push(Queue {
            name,
            instance_type,
            min,
            max,
            zone,
            efa,
            purchase,
            reservation,
            body,
        });
    }
    Ok(queues)
}

fn check_keys(table: &Map<String, Value>, path: &str, allowed: &[&str]) -> Result<(), ComponentError> {
    match table.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(extra) => Err(ComponentError::at(
            format!("{path}.{extra}"),
            format!("`{path}` has no setting `{extra}`"),
            crate::schema::suggestion(extra, allowed),
        )),
        None => Ok(()),
    }
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
        let mount_point = config.get("mount_point").and_then(Value::as_str).unwrap_or(DEFAULT_MOUNT);
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
