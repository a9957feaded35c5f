//! Components: one block that expands into several resources. A component is one function
//! from its config to resources and outputs; addresses of what it makes sit under its own.
//! The stack loader expands them; the ones built into forge are listed here, one file each.

#[cfg(any(feature = "aws", feature = "gcp"))]
pub mod batch;
#[cfg(any(feature = "aws", feature = "gcp"))]
pub mod cidr;
#[cfg(feature = "aws")]
pub mod efs;
#[cfg(feature = "aws")]
pub mod eks;
#[cfg(feature = "aws")]
pub mod eks_access;
#[cfg(feature = "aws")]
pub mod fsx;
#[cfg(feature = "gcp")]
pub mod filestore;
#[cfg(feature = "gcp")]
pub mod gcp_vpc;
#[cfg(feature = "gcp")]
pub mod gke;
#[cfg(feature = "gcp")]
pub mod gke_rdma;
#[cfg(feature = "aws")]
pub mod instances;
#[cfg(any(feature = "aws", feature = "gcp"))]
pub mod nvidia_dra;
#[cfg(any(feature = "aws", feature = "gcp"))]
pub mod k8s_manifest;
#[cfg(any(feature = "aws", feature = "gcp"))]
pub mod kubernetes;
#[cfg(any(feature = "aws", feature = "gcp"))]
pub mod manifests;
pub mod null_layers;
#[cfg(feature = "aws")]
pub mod slurm;
#[cfg(feature = "aws")]
pub mod vpc;

use crate::facts::Facts;
use crate::provider::Selector;
use crate::provider::settings::Providers;
use crate::schema::{Block, Field, Misfit};
use crate::template::Address;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// A resource a component makes.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    /// The address below the component's (`l0.n3` in `null_layers.r.l0.n3`).
    pub local: String,
    /// The kind.
    pub kind: &'static str,
    /// Its attributes, as a template (references use full addresses).
    pub config: Value,
    /// Full addresses it must follow besides its references.
    pub depends_on: Vec<String>,
    /// The object it reads instead of making one (an `eks` block's existing cluster, a `vpc`
    /// block's subnets): its `config` is then empty.
    pub existing: Option<Selector>,
}

impl Part {
    /// A part with no ordering besides its references.
    pub fn new(local: impl Into<String>, kind: &'static str, config: Value) -> Part {
        Part {
            local: local.into(),
            kind,
            config,
            depends_on: vec![],
            existing: None,
        }
    }

    /// A part that reads the existing object `selector` names, and never writes it.
    pub fn reading(local: impl Into<String>, kind: &'static str, selector: Selector) -> Part {
        Part {
            existing: Some(selector),
            ..Part::new(local, kind, Value::Object(Map::new()))
        }
    }
}

/// What a component expands to.
#[derive(Debug, Clone, PartialEq)]
pub struct Expansion {
    /// The resources.
    pub parts: Vec<Part>,
    /// Outputs readable as `${<component address>.<name>}`: templates over the parts.
    pub outputs: Map<String, Value>,
    /// Readiness checks `up` makes at the end (their strings templates over the parts).
    pub ready: Vec<crate::readiness::Check>,
}

/// What a component's expansion sees.
pub struct Input<'a> {
    /// The component's own address (`eks.train`).
    pub address: &'a Address,
    /// Its attributes, with variables substituted.
    pub config: &'a Map<String, Value>,
    /// The stack's `[aws]` / `[gcp]` settings.
    pub providers: &'a Providers,
    /// The other component blocks of the stack, by address, as written (so `eks` can check a
    /// zone against the `vpc` it names).
    pub components: &'a BTreeMap<String, Map<String, Value>>,
    /// The stack's resource blocks (`aws_ec2_capacity_block.p5`), by address, as written (so a
    /// queue can check its size against the Capacity Block it runs on).
    pub blocks: &'a BTreeMap<String, Map<String, Value>>,
    /// What forge knows about instance types, from AWS or its built-in table.
    pub facts: &'a Facts,
}

/// The stack's Capacity Block that a `capacity_reservation_id` refers to, by address:
/// `${aws_ec2_capacity_block.NAME.id}` gives `aws_ec2_capacity_block.NAME`.
pub fn capacity_block(reservation: &str) -> Option<String> {
    let name = reservation.strip_prefix("${aws_ec2_capacity_block.")?.strip_suffix(".id}")?;
    (!name.is_empty() && !name.contains(['.', '{', '}', '$'])).then(|| format!("aws_ec2_capacity_block.{name}"))
}

/// Checks that a group of at most `nodes` instances (`key`: its size attribute) fits the
/// stack's Capacity Block its `reservation` refers to, when it refers to one whose `count` is
/// written as a number: a block holds that many instances and no more.
pub fn fits_capacity_block(input: &Input, reservation: Option<&str>, nodes: i64, key: &str) -> Result<(), ComponentError> {
    let Some(address) = reservation.and_then(capacity_block) else {
        return Ok(());
    };
    let Some(count) = input.blocks.get(&address).and_then(|b| b.get("count")).and_then(Value::as_i64) else {
        return Ok(());
    };
    if nodes > count {
        return Err(ComponentError::at(
            key,
            format!("`{key}` reaches {nodes} nodes, but its Capacity Block `{address}` holds {count} instances"),
            format!("at most {count} nodes, or a larger block (`count` on `{address}`)"),
        ));
    }
    Ok(())
}

/// A component's complaint about its config: what is wrong and, when one attribute is to
/// blame, its path in the block (`nodegroups.gpu.zone`), so the error points at it.
#[derive(Debug, Clone, PartialEq)]
pub struct ComponentError {
    /// The attribute's dotted path below the block, if one is to blame.
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
    /// How to fix it, when there is more to say than the message.
    pub hint: Option<String>,
}

impl ComponentError {
    /// An error about one attribute.
    pub fn at(key: impl Into<String>, message: impl Into<String>, hint: impl Into<String>) -> Self {
        ComponentError {
            key: Some(key.into()),
            message: message.into(),
            hint: Some(hint.into()),
        }
    }
}

impl From<String> for ComponentError {
    fn from(message: String) -> Self {
        ComponentError {
            key: None,
            message,
            hint: None,
        }
    }
}

impl From<&str> for ComponentError {
    fn from(message: &str) -> Self {
        message.to_owned().into()
    }
}

/// Sets in `config` each of `attributes` that the block gives, as written: what a component
/// hands on to a resource unread (`None`: left out, the resource's default holds).
pub fn hand_on(config: &mut Value, attributes: &[(&str, &Option<Value>)]) {
    for (key, value) in attributes {
        if let Some(value) = value {
            config[*key] = value.clone();
        }
    }
}

/// Reads the table `value`, found at `at` in the block (`nodegroups.gpu`; empty for the block
/// itself), into `T`. It is held to `T`'s fields first ([`crate::schema::misfit`]: the checks a
/// written block gets), so the error names the key, says what is wrong and how to fix it;
/// `what` names the table in messages (``node group `gpu` ``) and `example` shows one.
pub fn read<T: Block>(value: &Value, at: &str, what: &str, example: &str) -> Result<T, ComponentError> {
    let key = |name: &str| if at.is_empty() { name.to_owned() } else { format!("{at}.{name}") };
    let Some(table) = value.as_object() else {
        return Err(ComponentError::at(
            at,
            format!("{what} must be a table, not {}", crate::schema::describe(value)),
            format!("write {example}"),
        ));
    };
    if let Some(misfit) = crate::schema::misfit(T::FIELDS, &[], table) {
        let names: Vec<&str> = T::FIELDS.iter().map(|f| f.name).collect();
        return Err(match misfit {
            Misfit::Unknown(name) => ComponentError::at(
                key(&name),
                format!("{what} has no attribute `{name}`"),
                crate::schema::suggestion(&name, &names),
            ),
            Misfit::Missing(name) => {
                let ty = T::FIELDS.iter().find(|f| f.name == name).map_or("a value", |f| f.ty.describe());
                ComponentError::at(
                    key(name),
                    format!("{what}: `{name}` is missing"),
                    format!("add `{name} = …` ({ty})"),
                )
            }
            Misfit::Mistyped(name, ty, _) => ComponentError::at(
                key(name),
                format!("{what}: {misfit}"),
                format!("write `{name}` as {}", ty.describe()),
            ),
        });
    }
    <T as serde::Deserialize>::deserialize(value).map_err(|e| ComponentError::at(at, format!("{what}: {e}"), format!("write {example}")))
}

/// A `vpc` block of the stack that a component names in `vpc = "vpc.main"`.
pub struct NamedVpc<'a> {
    /// Its address.
    pub address: &'a str,
    /// The zones it spans, in order.
    pub zones: Vec<String>,
    /// Whether it has public subnets: one forge makes, or an existing one that reads them
    /// (`public = true`, `public_subnets`).
    pub public: bool,
}

impl NamedVpc<'_> {
    /// A reference to one of its outputs.
    pub fn output(&self, name: &str) -> Value {
        Value::String(format!("${{{}.{name}}}", self.address))
    }

    /// A reference to its private subnet in `zone`, or an error at `key` when it has no such zone.
    pub fn private_subnet(&self, key: &str, zone: &str) -> Result<Value, ComponentError> {
        if !self.zones.iter().any(|z| z == zone) {
            return Err(ComponentError::at(
                key,
                format!("zone `{zone}` is not one of `{}`'s zones ({})", self.address, self.zones.join(", ")),
                format!("pick one of them, or add `{zone}` to `{}.zones`", self.address),
            ));
        }
        Ok(self.output(&format!("private_subnets_by_zone.{zone}")))
    }
}

impl Input<'_> {
    /// The cloud name of what the block makes: its `name`, else the block's own name with
    /// `_` as `-` (the clouds' names take no `_`).
    pub fn cloud_name(&self, name: &Option<String>) -> String {
        name.clone().unwrap_or_else(|| self.address.name().replace('_', "-"))
    }

    /// The block itself, read into its declared struct (see [`read`]).
    pub fn block<T: Block>(&self) -> Result<T, ComponentError> {
        let example = format!("`[{}.<name>]`", self.address.kind());
        read(&Value::Object(self.config.clone()), "", "the block", &example)
    }

    /// The `vpc` block `named` by the attribute `key`, or an error that lists the stack's.
    pub fn named_vpc(&self, key: &str, named: Option<&str>) -> Result<NamedVpc<'_>, ComponentError> {
        let (vpc, config) = self.named_block(key, named, "vpc")?;
        let zones = config
            .get("zones")
            .and_then(Value::as_array)
            .map(|z| z.iter().filter_map(Value::as_str).map(str::to_owned).collect())
            .unwrap_or_default();
        let public = !config.contains_key("existing")
            || config
                .get("public")
                .and_then(Value::as_bool)
                .unwrap_or(config.contains_key("public_subnets"));
        Ok(NamedVpc {
            address: vpc,
            zones,
            public,
        })
    }

    /// The block of type `kind` (`vpc`, `gcp_vpc`) `named` by the attribute `key`: its
    /// address and attributes, or an error that lists the stack's blocks of that type.
    pub fn named_block(&self, key: &str, named: Option<&str>, kind: &str) -> Result<(&str, &Map<String, Value>), ComponentError> {
        let Some(named) = named else {
            return Err(ComponentError::at(
                key,
                format!("`{key}` is missing"),
                format!("write `{key} = \"{kind}.main\"`: a `{kind}` block of this stack"),
            ));
        };
        let prefix = format!("{kind}.");
        match self.components.get_key_value(named).filter(|_| named.starts_with(&prefix)) {
            Some((address, config)) => Ok((address.as_str(), config)),
            None => {
                let known: Vec<&str> = self
                    .components
                    .keys()
                    .filter(|k| k.starts_with(&prefix))
                    .map(String::as_str)
                    .collect();
                Err(ComponentError::at(
                    key,
                    format!("`{key} = \"{named}\"` names no `{kind}` block of this stack"),
                    crate::schema::suggestion(named, &known),
                ))
            }
        }
    }

    /// The cluster blocks of the types `clusters` (`eks`, `gke`, `slurm`) that the block's
    /// `clients` list (`listed`), checked to exist.
    pub fn clients<'v>(&self, listed: Option<&'v Value>, clusters: &[&str]) -> Result<Vec<&'v str>, ComponentError> {
        let of_type = |k: &str| clusters.iter().any(|c| k.split_once('.').is_some_and(|(kind, _)| kind == *c));
        let known: Vec<&str> = self.components.keys().map(String::as_str).filter(|k| of_type(k)).collect();
        let cluster = clusters.join("` or `");
        let mut clients = Vec::new();
        for item in listed.and_then(Value::as_array).into_iter().flatten() {
            match item.as_str() {
                Some(c) if known.contains(&c) => clients.push(c),
                Some(c) => {
                    return Err(ComponentError::at(
                        "clients",
                        format!("`clients` lists `{c}`, which is no `{cluster}` block of this stack"),
                        crate::schema::suggestion(c, &known),
                    ));
                }
                None => {
                    return Err(ComponentError::at(
                        "clients",
                        format!("`clients` lists `{cluster}` blocks by address"),
                        format!("e.g. `clients = [\"{}.train\"]`", clusters[0]),
                    ));
                }
            }
        }
        Ok(clients)
    }
}

/// The blocks (storage: `fsx.*`, `efs.*`, `filestore.*`) whose `clients` list the cluster block
/// at `address`, with their attributes.
pub fn blocks_serving<'a>(
    components: &'a BTreeMap<String, Map<String, Value>>,
    address: &'a str,
) -> impl Iterator<Item = (&'a str, &'a Map<String, Value>)> + 'a {
    components
        .iter()
        .filter(move |(_, config)| {
            config
                .get("clients")
                .and_then(Value::as_array)
                .is_some_and(|c| c.iter().any(|x| x.as_str() == Some(address)))
        })
        .map(|(block, config)| (block.as_str(), config))
}

/// The types of the storage blocks serving the cluster block at `address` (see
/// [`blocks_serving`]): that cluster's nodes get the CSI driver and its IAM policy for each.
pub fn storage_for<'a>(components: &'a BTreeMap<String, Map<String, Value>>, address: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    blocks_serving(components, address).map(|(block, _)| block.split('.').next().unwrap_or_default())
}

/// TCP rules for each port range, all from one source: `("self", true)` or
/// `("security_groups", [...])`.
pub fn tcp_rules(ports: &[(u16, u16)], source: &str, from: &Value) -> Vec<Value> {
    ports
        .iter()
        .map(|(first, last)| {
            let mut rule = serde_json::json!({ "protocol": "tcp", "from_port": first, "to_port": last });
            rule[source] = from.clone();
            rule
        })
        .collect()
}

/// Per client cluster, a `client_rules.<cluster>` part that opens `ports` on the security group
/// `group` to the cluster's security group, which every node of it carries.
pub fn client_rules(group: &Value, clients: &[&str], ports: &[(u16, u16)]) -> Vec<Part> {
    clients
        .iter()
        .map(|client| Part {
            local: format!("client_rules.{}", client.split_once('.').map_or(*client, |(_, n)| n)),
            kind: "aws_security_group_ingress",
            config: serde_json::json!({
                "security_group_id": group,
                "ingress": tcp_rules(ports, "security_groups", &serde_json::json!([format!("${{{client}.cluster_security_group_id}}")])),
            }),
            depends_on: vec![],
            existing: None,
        })
        .collect()
}

/// An `existing = "…"` of a component block, checked as every `existing` is
/// ([`crate::stack::existing_literal`]).
pub fn existing_name<'a>(value: &'a str, what: &str) -> Result<&'a str, ComponentError> {
    match crate::stack::existing_literal(&Value::String(value.to_owned())) {
        Ok(_) => Ok(value),
        Err(_) => Err(ComponentError::at(
            "existing",
            format!("`existing` must name {what} when the stack loads, not `{value}`"),
            "write the name or id itself, or `${var.…}`: forge reads the object when it plans, before anything is applied",
        )),
    }
}

/// Expands one component block (see [`Component::expand`]).
pub type ExpandFn = fn(&Input) -> Result<Expansion, ComponentError>;

/// A component type.
pub struct Component {
    /// The block type (`vpc`, `eks`, `null_layers`).
    pub name: &'static str,
    /// The attributes its block accepts.
    pub schema: &'static [Field],
    /// Expands one block; an `Err` says what is wrong with its config.
    pub expand: ExpandFn,
}

/// Every component built into this binary.
pub fn builtin() -> &'static [Component] {
    &[
        null_layers::COMPONENT,
        #[cfg(feature = "aws")]
        vpc::COMPONENT,
        #[cfg(feature = "aws")]
        eks::COMPONENT,
        #[cfg(feature = "aws")]
        fsx::COMPONENT,
        #[cfg(feature = "aws")]
        efs::COMPONENT,
        #[cfg(feature = "gcp")]
        gcp_vpc::COMPONENT,
        #[cfg(feature = "gcp")]
        gke::COMPONENT,
        #[cfg(feature = "gcp")]
        filestore::COMPONENT,
        #[cfg(feature = "aws")]
        slurm::COMPONENT,
        #[cfg(any(feature = "aws", feature = "gcp"))]
        k8s_manifest::COMPONENT,
    ]
}

/// The component for a block type.
pub fn find(name: &str) -> Option<&'static Component> {
    builtin().iter().find(|c| c.name == name)
}

/// Expands `config` with `expand` in an otherwise empty stack (for the components' unit tests).
#[cfg(test)]
pub(crate) fn expand_alone(expand: ExpandFn, address: &str, config: Value, providers: &Providers) -> Result<Expansion, ComponentError> {
    let config = config.as_object().cloned().unwrap_or_default();
    expand(&Input {
        address: &Address::new(address),
        config: &config,
        providers,
        components: &BTreeMap::new(),
        blocks: &BTreeMap::new(),
        facts: &Facts::builtin(),
    })
}
