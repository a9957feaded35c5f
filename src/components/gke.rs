//! `gke`: a GKE Standard cluster for training, and its node pools. One block expands to the
//! cluster (VPC-native on the `gcp_vpc`'s ranges, Dataplane V2, workload identity, the
//! Filestore CSI driver when a `filestore` block names it), one node pool per
//! `node_pools.<name>` table, and — for the A3 machine types that use GPUDirect — the extra GPU
//! VPC networks they need (TCPX: 4, TCPXO: 8), each with one subnetwork and an internal
//! allow-all firewall rule, shared by all such pools of the cluster, which then gets
//! multi-networking. GPUDirect pools get gVNIC, those networks, compact placement in their
//! zone and the machine's 8 GPUs with GKE's driver installation.
//!
//! The cluster is created with its first pool inline (the first pool without GPUs, else the
//! first): GKE makes no throwaway `default-pool` that would have to be deleted again.

use super::cidr::Cidr;
use super::gcp_vpc::{region_of, valid_name};
use super::{Component, ComponentError, Expansion, Input, Part, batch, kubernetes};
use crate::readiness::{Check, NodeGroup};
use crate::schema::{Field, FieldType, did_you_mean};
use serde_json::{Map, Value, json};

/// The component's registration.
pub const COMPONENT: Component = Component {
    name: "gke",
    schema: &[
        Field::required("node_pools", FieldType::Table),
        Field::optional("name", FieldType::String),
        Field::optional("location", FieldType::String),
        Field::optional("version", FieldType::String),
        Field::optional("release_channel", FieldType::String),
        Field::optional("vpc", FieldType::String),
        Field::optional("network", FieldType::String),
        Field::optional("subnetwork", FieldType::String),
        Field::optional("pods_range", FieldType::String),
        Field::optional("services_range", FieldType::String),
        Field::optional("private_nodes", FieldType::Bool),
        Field::optional("authorized_networks", FieldType::List),
        Field::optional("gcs_fuse_csi", FieldType::Bool),
        Field::optional("gpu_networks_cidr", FieldType::String),
        Field::optional("labels", FieldType::Table),
        Field::optional("timeouts", FieldType::Table),
        Field::optional("kubernetes", FieldType::Table),
    ],
    expand,
};

/// The keys a `node_pools.<name>` table takes.
const POOL_KEYS: &[&str] = &[
    "machine_type",
    "size",
    "zone",
    "reservation",
    "spot",
    "flex_start",
    "queued_provisioning",
    "accelerator",
    "gpu_driver",
    "labels",
    "taints",
    "disk_gib",
    "disk_type",
    "local_ssd_count",
    "auto_repair",
    "auto_upgrade",
];

/// How a machine type's GPUs network: GPUDirect-TCPX or -TCPXO over this many extra VPCs.
#[derive(Clone, Copy)]
enum GpuDirect {
    None,
    Networks(usize),
    /// Networked in a way forge does not build yet (A3 Ultra's RDMA network profile, A4).
    NotYet(&'static str),
}

/// Machine types that come with their GPUs: the accelerator, how many, and their GPUDirect.
const GPU_MACHINES: &[(&str, &str, i64, GpuDirect)] = &[
    ("a3-highgpu-1g", "nvidia-h100-80gb", 1, GpuDirect::None),
    ("a3-highgpu-2g", "nvidia-h100-80gb", 2, GpuDirect::None),
    ("a3-highgpu-4g", "nvidia-h100-80gb", 4, GpuDirect::None),
    ("a3-highgpu-8g", "nvidia-h100-80gb", 8, GpuDirect::Networks(4)),
    ("a3-edgegpu-8g", "nvidia-h100-80gb", 8, GpuDirect::Networks(4)),
    ("a3-megagpu-8g", "nvidia-h100-mega-80gb", 8, GpuDirect::Networks(8)),
    (
        "a3-ultragpu-8g",
        "nvidia-h200-141gb",
        8,
        GpuDirect::NotYet("A3 Ultra's GPUs talk over an RDMA network profile"),
    ),
    (
        "a4-highgpu-8g",
        "nvidia-b200",
        8,
        GpuDirect::NotYet("A4's GPUs talk over an RDMA network profile"),
    ),
    ("a2-highgpu-1g", "nvidia-tesla-a100", 1, GpuDirect::None),
    ("a2-highgpu-2g", "nvidia-tesla-a100", 2, GpuDirect::None),
    ("a2-highgpu-4g", "nvidia-tesla-a100", 4, GpuDirect::None),
    ("a2-highgpu-8g", "nvidia-tesla-a100", 8, GpuDirect::None),
    ("a2-megagpu-16g", "nvidia-tesla-a100", 16, GpuDirect::None),
    ("a2-ultragpu-1g", "nvidia-a100-80gb", 1, GpuDirect::None),
    ("a2-ultragpu-2g", "nvidia-a100-80gb", 2, GpuDirect::None),
    ("a2-ultragpu-4g", "nvidia-a100-80gb", 4, GpuDirect::None),
    ("a2-ultragpu-8g", "nvidia-a100-80gb", 8, GpuDirect::None),
    ("g2-standard-4", "nvidia-l4", 1, GpuDirect::None),
    ("g2-standard-8", "nvidia-l4", 1, GpuDirect::None),
    ("g2-standard-12", "nvidia-l4", 1, GpuDirect::None),
    ("g2-standard-16", "nvidia-l4", 1, GpuDirect::None),
    ("g2-standard-24", "nvidia-l4", 2, GpuDirect::None),
    ("g2-standard-32", "nvidia-l4", 1, GpuDirect::None),
    ("g2-standard-48", "nvidia-l4", 4, GpuDirect::None),
    ("g2-standard-96", "nvidia-l4", 8, GpuDirect::None),
];

/// CPU machine families and the vCPU counts they come in (the shapes node pools use).
const CPU_FAMILIES: &[(&str, &[u32])] = &[
    ("e2-standard", &[2, 4, 8, 16, 32]),
    ("e2-highmem", &[2, 4, 8, 16]),
    ("e2-highcpu", &[2, 4, 8, 16, 32]),
    ("n1-standard", &[1, 2, 4, 8, 16, 32, 64, 96]),
    ("n1-highmem", &[2, 4, 8, 16, 32, 64, 96]),
    ("n1-highcpu", &[2, 4, 8, 16, 32, 64, 96]),
    ("n2-standard", &[2, 4, 8, 16, 32, 48, 64, 80, 96, 128]),
    ("n2-highmem", &[2, 4, 8, 16, 32, 48, 64, 80, 96, 128]),
    ("n2-highcpu", &[2, 4, 8, 16, 32, 48, 64, 80, 96]),
    ("n2d-standard", &[2, 4, 8, 16, 32, 48, 64, 80, 96, 128, 224]),
    ("c2-standard", &[4, 8, 16, 30, 60]),
    ("c3-standard", &[4, 8, 22, 44, 88, 176]),
    ("c3-highmem", &[4, 8, 22, 44, 88, 176]),
    ("n4-standard", &[2, 4, 8, 16, 32, 48, 64, 80]),
];

/// Every machine type forge knows (the GPU ones, the CPU families, and E2's shared-core ones).
fn machine_types() -> Vec<String> {
    let mut names: Vec<String> = GPU_MACHINES.iter().map(|m| m.0.to_owned()).collect();
    for (family, sizes) in CPU_FAMILIES {
        names.extend(sizes.iter().map(|n| format!("{family}-{n}")));
    }
    names.extend(["e2-medium", "e2-small", "e2-micro"].map(str::to_owned));
    names
}

/// The GPUs that N1 machines can attach.
const N1_GPUS: &[&str] = &["nvidia-tesla-t4", "nvidia-tesla-v100", "nvidia-tesla-p4", "nvidia-tesla-p100"];

/// GKE's driver installation settings, as blocks write them.
const DRIVERS: &[(&str, &str)] = &[("LATEST", "LATEST"), ("DEFAULT", "DEFAULT"), ("disabled", "INSTALLATION_DISABLED")];

/// The default range the GPU networks' subnetworks are cut from, a /24 each.
const GPU_NETWORKS_CIDR: &str = "192.168.0.0/16";

/// The MTU GPUDirect's networks need.
const GPU_MTU: i64 = 8244;

/// Taint effects: Kubernetes' names and GKE's.
const EFFECTS: &[(&str, &str)] = &[
    ("NoSchedule", "NO_SCHEDULE"),
    ("PreferNoSchedule", "PREFER_NO_SCHEDULE"),
    ("NoExecute", "NO_EXECUTE"),
];

/// One `node_pools.<name>` table, checked.
struct Pool<'a> {
    name: &'a str,
    config: &'a Map<String, Value>,
    gpus: Option<(&'static str, i64)>,
    networks: usize,
    zone: Option<&'a str>,
}

impl Pool<'_> {
    /// Its node count at the `bound` (`min` or `max`) of its `size` (checked by
    /// `check_size`): a fixed size is both.
    fn nodes(&self, bound: &str) -> i64 {
        match self.config.get("size") {
            Some(Value::Object(range)) => range.get(bound).and_then(Value::as_i64),
            other => other.and_then(Value::as_i64),
        }
        .unwrap_or(0)
    }
}

fn expand(input: &Input) -> Result<Expansion, ComponentError> {
    let address = input.address;
    let name = match input.text("name") {
        Some(name) => name.to_owned(),
        None => address.split_once('.').map_or(address, |(_, n)| n).replace('_', "-"),
    };
    if !valid_name(&name) || name.len() > 30 {
        return Err(ComponentError::at(
            "name",
            format!("`{name}` cannot name a GKE cluster: lowercase letters, digits and `-`, starting with a letter"),
            "set `name = \"nemo\"` (at most 30 characters: forge adds `-gpu-<n>` to it for GPU networks)",
        ));
    }
    let region = input.providers.get("gcp").and_then(|g| g.get("region")).and_then(Value::as_str);
    let location = match input.text("location").or(region) {
        Some(location) => location.to_owned(),
        None => {
            return Err(ComponentError::at(
                "location",
                "the cluster has no location",
                "set `location = \"us-central1\"` (a regional control plane), or `region` in `[gcp]`",
            ));
        }
    };
    let region = region.map(str::to_owned).unwrap_or_else(|| region_of(&location));
    let network = network(input)?;
    let pools = pools(input, &region)?;
    let networks = pools.iter().map(|p| p.networks).max().unwrap_or(0);
    let gpu_cidrs = gpu_cidrs(input, networks, &network.cidrs)?;

    let reference = |local: &str, output: &str| json!(format!("${{{address}.{local}.{output}}}"));
    let mut parts = Vec::new();
    let mut gpu_networks = Vec::new();
    for (i, cidr) in gpu_cidrs.iter().enumerate() {
        let n = i + 1;
        let net = format!("{name}-gpu-{n}");
        parts.push(part(
            &format!("gpu_network_{n}"),
            "google_compute_network",
            json!({ "name": net, "mtu": GPU_MTU, "auto_create_subnetworks": false, "description": format!("GPUDirect network {n} of GKE cluster {name}") }),
        ));
        parts.push(part(
            &format!("gpu_subnetwork_{n}"),
            "google_compute_subnetwork",
            json!({ "name": format!("{net}-subnet"), "region": region, "network": reference(&format!("gpu_network_{n}"), "self_link"), "ip_cidr_range": cidr.to_string() }),
        ));
        parts.push(part(
            &format!("gpu_firewall_{n}"),
            "google_compute_firewall",
            json!({
                "name": format!("{net}-internal"),
                "network": reference(&format!("gpu_network_{n}"), "self_link"),
                "description": "GPU-to-GPU traffic between the nodes",
                "allow": [{ "protocol": "all" }],
                "source_ranges": [cidr.to_string()],
            }),
        ));
        gpu_networks.push(reference(&format!("gpu_network_{n}"), "name"));
    }

    let timeouts = input.config.get("timeouts").cloned();
    // `[gcp] default_labels` would reach the pools' VM labels only after expansion; the pool
    // created inline with the cluster needs them in the cluster's create.
    let default_labels = input.providers.get("gcp").and_then(|g| g.get("default_labels")).cloned();
    let first = pools.iter().position(|p| p.gpus.is_none()).unwrap_or(0);
    let mut pool_parts = Vec::new();
    for pool in &pools {
        let mut config = pool_config(pool, &reference);
        if let Some(timeouts) = &timeouts {
            config["timeouts"] = timeouts.clone();
        }
        if let Some(labels) = &default_labels {
            config["resource_labels"] = crate::template::quote(labels);
        }
        pool_parts.push(part(&format!("node_pools.{}", pool.name), "google_container_node_pool", config));
    }
    let mut initial = pool_parts[first].config.clone();
    let initial_map = initial.as_object_mut().expect("pool configs are tables");
    initial_map.remove("cluster");
    initial_map.remove("timeouts");
    initial_map.insert("address".into(), json!(format!("{address}.node_pools.{}", pools[first].name)));

    let filestore = super::storage_for(input.components, address).any(|kind| kind == "filestore");
    let mut cluster = json!({
        "name": name,
        "location": location,
        "network": network.network,
        "subnetwork": network.subnetwork,
        "datapath_provider": "ADVANCED_DATAPATH",
        "multi_networking": networks > 0,
        "workload_identity": true,
        "filestore_csi": filestore,
        "initial_node_pool": initial,
    });
    for (key, value) in [("pods_range", &network.pods_range), ("services_range", &network.services_range)] {
        if let Some(value) = value {
            cluster[key] = value.clone();
        }
    }
    for key in [
        "version",
        "release_channel",
        "private_nodes",
        "authorized_networks",
        "gcs_fuse_csi",
        "labels",
        "timeouts",
    ] {
        if let Some(value) = input.config.get(key) {
            cluster[key] = value.clone();
        }
    }
    parts.push(part("cluster", "google_container_cluster", cluster));
    let pool_addresses: Vec<String> = pools.iter().map(|p| format!("{address}.node_pools.{}", p.name)).collect();
    parts.extend(pool_parts);
    let settings = input.config.get("kubernetes");
    kubernetes::check_keys(settings, "kubernetes", kubernetes::GKE_SETTINGS)?;
    let cluster_ref = kubernetes::gke_cluster(address);
    parts.extend(kubernetes::namespaces(input.components, address, &cluster_ref));
    if settings.and_then(|s| s.get("gpudirect")) != Some(&Value::Bool(false)) {
        parts.extend(gpudirect_objects(&pools, &cluster_ref, &reference));
    }
    // On destroy, before the pools go: the load balancers and disks Kubernetes made.
    parts.push(Part {
        local: "k8s.teardown".into(),
        kind: "k8s_teardown",
        config: json!({ "cluster": cluster_ref }),
        depends_on: pool_addresses,
    });
    let gpu_groups: Vec<batch::GpuGroup> = pools
        .iter()
        .filter_map(|p| {
            let (_, per_node) = p.gpus?;
            let nodes = p.nodes("max");
            Some(batch::GpuGroup {
                label: "cloud.google.com/gke-nodepool",
                name: json!(p.name),
                key: p.name.to_owned(),
                resource: "nvidia.com/gpu",
                devices: nodes * per_node,
                tolerations: vec![],
            })
        })
        .collect();
    let batch = batch::batch(input, address, &cluster_ref, &gpu_groups)?;
    parts.extend(batch.parts);
    let ready = readiness(settings, &pools, &cluster_ref, batch.queues)?;

    let mut outputs = Map::new();
    for key in [
        "name",
        "location",
        "endpoint",
        "certificate_authority",
        "version",
        "workload_pool",
        "id",
    ] {
        outputs.insert(key.into(), reference("cluster", key));
    }
    outputs.insert("gpu_networks".into(), Value::Array(gpu_networks.clone()));
    let by_pool: Map<String, Value> = pools
        .iter()
        .map(|p| {
            (
                p.name.to_owned(),
                json!({
                    "name": reference(&format!("node_pools.{}", p.name), "name"),
                    "gpu_networks": gpu_networks[..p.networks],
                }),
            )
        })
        .collect();
    outputs.insert("node_pools".into(), Value::Object(by_pool));
    Ok(Expansion { parts, outputs, ready })
}

/// For the pools wired for GPUDirect: a `GKENetworkParamSet` and `Network` per GPU network
/// (`vpc1`…`vpcN`), the NCCL plugin installer and its config for each GPUDirect flavour the
/// pools use, and the NRI device injector.
fn gpudirect_objects(pools: &[Pool], cluster: &str, reference: &dyn Fn(&str, &str) -> Value) -> Vec<Part> {
    let networks = pools.iter().map(|p| p.networks).max().unwrap_or(0);
    if networks == 0 {
        return Vec::new();
    }
    let mut parts = Vec::new();
    for n in 1..=networks {
        let (params, network) = kubernetes::gpu_network(
            n,
            reference(&format!("gpu_network_{n}"), "name"),
            reference(&format!("gpu_subnetwork_{n}"), "name"),
        );
        parts.push(kubernetes::object(format!("k8s.gpudirect.vpc{n}.params"), cluster, params, vec![]));
        parts.push(kubernetes::object(
            format!("k8s.gpudirect.vpc{n}.network"),
            cluster,
            network,
            vec![],
        ));
    }
    let mut all = Vec::new();
    for direct in [&kubernetes::TCPX, &kubernetes::TCPXO] {
        let wired = if direct.flavour == "tcpx" { 4 } else { 8 };
        let accelerators: Vec<String> = pools
            .iter()
            .filter(|p| p.networks == wired)
            .filter_map(|p| p.gpus.map(|g| g.0.to_owned()))
            .fold(Vec::new(), |mut v, a| {
                if !v.contains(&a) {
                    v.push(a);
                }
                v
            });
        if accelerators.is_empty() {
            continue;
        }
        let (installer, config) = kubernetes::nccl_installer(direct, &accelerators, wired);
        parts.push(kubernetes::object(
            format!("k8s.gpudirect.{}_installer", direct.flavour),
            cluster,
            installer,
            vec![],
        ));
        parts.push(kubernetes::object(
            format!("k8s.gpudirect.{}_config", direct.flavour),
            cluster,
            config,
            vec![],
        ));
        all.extend(accelerators);
    }
    parts.push(kubernetes::object(
        "k8s.gpudirect.nri_injector".into(),
        cluster,
        kubernetes::nri_injector(&all),
        vec![],
    ));
    parts
}

/// The readiness check of the cluster: every node of each GPU pool reports its GPUs (GKE
/// installs the driver and its device plugin itself) and its Kueue queue is Active, unless
/// `wait_ready = false`.
fn readiness(settings: Option<&Value>, pools: &[Pool], cluster: &str, queues: Vec<String>) -> Result<Vec<Check>, ComponentError> {
    let Some(timeout) = kubernetes::wait_ready(settings)? else {
        return Ok(vec![]);
    };
    let driver_off = |p: &Pool| p.config.get("gpu_driver").and_then(Value::as_str) == Some("disabled");
    let node_pools: Vec<NodeGroup> = pools
        .iter()
        .filter(|p| !driver_off(p))
        .filter_map(|p| {
            let (_, gpus) = p.gpus?;
            Some(NodeGroup {
                label: "cloud.google.com/gke-nodepool".into(),
                name: p.name.to_string(),
                nodes: p.nodes("min"),
                devices: [("nvidia.com/gpu".to_owned(), gpus.into())].into(),
            })
        })
        .collect();
    if node_pools.is_empty() && queues.is_empty() {
        return Ok(vec![]);
    }
    Ok(vec![Check {
        timeout,
        node_groups: node_pools,
        queues,
        ..Check::of(cluster)
    }])
}

fn part(local: &str, kind: &'static str, config: Value) -> Part {
    Part {
        local: local.into(),
        kind,
        config,
        depends_on: vec![],
    }
}

/// Where the cluster's nodes live: a `gcp_vpc` block's network, subnetwork and ranges, or
/// the ones the block names; and the ranges a `gcp_vpc` uses (the GPU networks must not
/// overlap them).
struct Network {
    network: Value,
    subnetwork: Value,
    pods_range: Option<Value>,
    services_range: Option<Value>,
    cidrs: Vec<(String, Cidr)>,
}

fn network(input: &Input) -> Result<Network, ComponentError> {
    let given = |key: &str| input.config.get(key).cloned();
    if input.text("vpc").is_none() {
        let (Some(network), Some(subnetwork)) = (given("network"), given("subnetwork")) else {
            return Err(ComponentError::at(
                "vpc",
                "the cluster has no network",
                "write `vpc = \"gcp_vpc.main\"` (a `gcp_vpc` block of this stack), or `network` and `subnetwork` with `pods_range` and `services_range`",
            ));
        };
        return Ok(Network {
            network,
            subnetwork,
            pods_range: given("pods_range"),
            services_range: given("services_range"),
            cidrs: Vec::new(),
        });
    }
    let (vpc, config) = input.named_block("vpc", "gcp_vpc")?;
    let cidrs = ["cidr", "pods_cidr", "services_cidr"]
        .iter()
        .filter_map(|key| {
            let text = config.get(*key)?.as_str()?;
            Some((format!("{vpc}.{key}"), Cidr::parse(key, text, 0..=32, "a range").ok()?))
        })
        .collect();
    let output = |name: &str| json!(format!("${{{vpc}.{name}}}"));
    Ok(Network {
        network: output("network_self_link"),
        subnetwork: output("subnetwork_self_link"),
        pods_range: Some(given("pods_range").unwrap_or_else(|| output("pods_range"))),
        services_range: Some(given("services_range").unwrap_or_else(|| output("services_range"))),
        cidrs,
    })
}

/// The `/24` of each GPU network, cut from `gpu_networks_cidr`, checked against the VPC's.
fn gpu_cidrs(input: &Input, count: usize, vpc: &[(String, Cidr)]) -> Result<Vec<Cidr>, ComponentError> {
    if count == 0 {
        return Ok(Vec::new());
    }
    let text = input.text("gpu_networks_cidr").unwrap_or(GPU_NETWORKS_CIDR);
    let hint = "give the GPU networks a range of their own, e.g. `gpu_networks_cidr = \"192.168.0.0/16\"`; forge takes one /24 per network from it";
    let block = Cidr::parse("gpu_networks_cidr", text, 8..=20, "a range for the GPU networks")
        .map_err(|m| ComponentError::at("gpu_networks_cidr", m, hint))?;
    let cidrs: Vec<Cidr> = (1..=count).filter_map(|i| block.subnet(24, i as u32)).collect();
    if cidrs.len() < count {
        return Err(ComponentError::at(
            "gpu_networks_cidr",
            format!("`{block}` has no room for {count} /24 networks"),
            hint,
        ));
    }
    for cidr in &cidrs {
        if let Some((key, other)) = vpc.iter().find(|(_, other)| other.overlaps(*cidr)) {
            return Err(ComponentError::at(
                "gpu_networks_cidr",
                format!("the GPU network range `{cidr}` overlaps `{key} = \"{other}\"`"),
                hint,
            ));
        }
    }
    Ok(cidrs)
}

/// The `node_pools` tables, checked, in the order written.
fn pools<'a>(input: &'a Input, region: &str) -> Result<Vec<Pool<'a>>, ComponentError> {
    let Some(tables) = input.config.get("node_pools").and_then(Value::as_object).filter(|t| !t.is_empty()) else {
        return Err(ComponentError::at(
            "node_pools",
            "the cluster has no node pools",
            "add one: `[gke.<name>.node_pools.system]` with `machine_type = \"e2-standard-8\"` and `size = 4`",
        ));
    };
    let known = machine_types();
    let mut pools = Vec::new();
    for (name, config) in tables {
        let at = |key: &str| format!("node_pools.{name}.{key}");
        let Some(config) = config.as_object() else {
            return Err(ComponentError::at(
                format!("node_pools.{name}"),
                "a node pool is a table",
                format!("write `[{}.node_pools.{name}]` with `machine_type` and `size`", input.address),
            ));
        };
        if !valid_name(name) || name.len() > 40 {
            return Err(ComponentError::at(
                format!("node_pools.{name}"),
                format!("`{name}` cannot name a node pool: lowercase letters, digits and `-`, starting with a letter, at most 40"),
                "rename the table",
            ));
        }
        if let Some(key) = config.keys().find(|k| !POOL_KEYS.contains(&k.as_str())) {
            return Err(ComponentError::at(
                at(key),
                format!("unknown node pool key `{key}`"),
                crate::schema::suggestion(key, POOL_KEYS),
            ));
        }
        let machine = config.get("machine_type").and_then(Value::as_str).ok_or_else(|| {
            ComponentError::at(
                at("machine_type"),
                "`machine_type` is missing",
                "e.g. `machine_type = \"a3-highgpu-8g\"`",
            )
        })?;
        if !known.iter().any(|k| k == machine) {
            let hint = match did_you_mean(machine, known.iter().map(String::as_str)) {
                Some(best) => format!("did you mean `{best}`?"),
                None => "use a machine type of Compute Engine, e.g. `e2-standard-8` or `a3-highgpu-8g`".into(),
            };
            return Err(ComponentError::at(
                at("machine_type"),
                format!("unknown machine type `{machine}`"),
                hint,
            ));
        }
        let fixed = GPU_MACHINES.iter().find(|m| m.0 == machine);
        if let Some((_, _, _, GpuDirect::NotYet(why))) = fixed {
            return Err(ComponentError::at(
                at("machine_type"),
                format!("forge does not build `{machine}` node pools yet: {why}, which forge does not set up"),
                "use `a3-highgpu-8g` (GPUDirect-TCPX) or `a3-megagpu-8g` (GPUDirect-TCPXO), or make this pool outside forge",
            ));
        }
        if config.contains_key("accelerator") && fixed.is_some() {
            return Err(ComponentError::at(
                at("accelerator"),
                format!("`{machine}` comes with its own GPUs; it takes no `accelerator`"),
                "remove `accelerator`: forge gives the pool the machine's GPUs and GKE's driver installation",
            ));
        }
        let networks = match fixed {
            Some((_, _, _, GpuDirect::Networks(n))) => *n,
            _ => 0,
        };
        let zone = config.get("zone").and_then(Value::as_str);
        match zone {
            None if networks > 0 => {
                return Err(ComponentError::at(
                    at("zone"),
                    format!("`{machine}` pools need a `zone`: their GPUDirect nodes are placed compactly, in one zone"),
                    format!("add e.g. `zone = \"{region}-c\"`: a zone of {region} that has the machines (or your reservation)"),
                ));
            }
            Some(zone) if region_of(zone) != region || zone == region => {
                return Err(ComponentError::at(
                    at("zone"),
                    format!("zone `{zone}` is not in the cluster's region {region}"),
                    format!("use a zone of {region}, like `{region}-c`"),
                ));
            }
            _ => {}
        }
        check_size(config, &at)?;
        if config.contains_key("reservation") && config.get("spot") == Some(&Value::Bool(true)) {
            return Err(ComponentError::at(
                at("reservation"),
                "a pool takes either a `reservation` or `spot = true`, not both",
                "reserved capacity is not spot capacity: drop one of them",
            ));
        }
        let gpus = fixed.map(|m| (m.1, m.2)).or(config.get("accelerator").map(|_| ("", 0)));
        if config.contains_key("accelerator") {
            check_accelerator(config, machine, &at)?;
        }
        if let Some(driver) = config.get("gpu_driver").and_then(Value::as_str)
            && !DRIVERS.iter().any(|(k, _)| *k == driver)
        {
            let names: Vec<&str> = DRIVERS.iter().map(|d| d.0).collect();
            return Err(ComponentError::at(
                at("gpu_driver"),
                format!("`gpu_driver = \"{driver}\"` is not a driver installation GKE knows"),
                crate::schema::suggestion(driver, &names),
            ));
        }
        check_taints(config, &at)?;
        pools.push(Pool {
            name,
            config,
            gpus,
            networks,
            zone,
        });
    }
    Ok(pools)
}

fn check_size(config: &Map<String, Value>, at: &dyn Fn(&str) -> String) -> Result<(), ComponentError> {
    let hint = "write `size = 4` for a fixed size, or `size = { min = 0, max = 8 }` to autoscale";
    match config.get("size") {
        None => Err(ComponentError::at(at("size"), "`size` is missing", hint)),
        Some(Value::Number(n)) if n.as_i64().is_some_and(|n| (0..=1000).contains(&n)) => Ok(()),
        Some(Value::Object(range)) => {
            let bound = |key: &str| range.get(key).and_then(Value::as_i64);
            match (bound("min"), bound("max")) {
                (Some(min), Some(max)) if 0 <= min && min <= max && max >= 1 && range.len() == 2 => Ok(()),
                (Some(min), Some(max)) if min > max => Err(ComponentError::at(
                    at("size"),
                    format!("`size` is out of order: min {min} is above max {max}"),
                    hint,
                )),
                _ => Err(ComponentError::at(
                    at("size"),
                    "`size` takes `min` and `max`, 0 ≤ min ≤ max, max ≥ 1",
                    hint,
                )),
            }
        }
        Some(_) => Err(ComponentError::at(
            at("size"),
            "`size` must be a node count (0 to 1000) or a `{ min, max }` table",
            hint,
        )),
    }
}

fn check_accelerator(config: &Map<String, Value>, machine: &str, at: &dyn Fn(&str) -> String) -> Result<(), ComponentError> {
    let accelerator = config.get("accelerator").and_then(Value::as_object);
    let kind = accelerator.and_then(|a| a.get("type")).and_then(Value::as_str);
    let count = accelerator.and_then(|a| a.get("count")).and_then(Value::as_i64).unwrap_or(1);
    let fits = machine.starts_with("n1-") && kind.is_some_and(|k| N1_GPUS.contains(&k)) && [1, 2, 4, 8].contains(&count);
    if fits {
        return Ok(());
    }
    Err(ComponentError::at(
        at("accelerator"),
        format!("`{machine}` cannot attach {count} × `{}`", kind.unwrap_or("?")),
        format!(
            "attached GPUs go on N1 machines: `accelerator = {{ type = \"nvidia-tesla-t4\", count = 1 }}` (types: {}); A2, A3 and G2 machines come with theirs",
            N1_GPUS.join(", ")
        ),
    ))
}

fn check_taints(config: &Map<String, Value>, at: &dyn Fn(&str) -> String) -> Result<(), ComponentError> {
    let hint = "write `taints = [{ key = \"nvidia.com/gpu\", value = \"present\", effect = \"NoSchedule\" }]`";
    for taint in config.get("taints").and_then(Value::as_array).into_iter().flatten() {
        let effect = taint.get("effect").and_then(Value::as_str).unwrap_or_default();
        if taint.get("key").and_then(Value::as_str).is_none() || !EFFECTS.iter().any(|(k, g)| *k == effect || *g == effect) {
            return Err(ComponentError::at(
                at("taints"),
                "each taint needs a `key` and an `effect` Kubernetes knows",
                hint,
            ));
        }
    }
    Ok(())
}

/// A pool's `google_container_node_pool` attributes.
fn pool_config(pool: &Pool, reference: &dyn Fn(&str, &str) -> Value) -> Value {
    let c = pool.config;
    let mut config = json!({
        "cluster": reference("cluster", "id"),
        "name": pool.name,
        "machine_type": c.get("machine_type"),
    });
    match c.get("size") {
        Some(Value::Object(range)) => {
            config["min_node_count"] = range["min"].clone();
            config["max_node_count"] = range["max"].clone();
        }
        Some(count) => config["node_count"] = count.clone(),
        None => {}
    }
    if let Some(zone) = pool.zone {
        config["node_locations"] = json!([zone]);
    }
    let driver = c.get("gpu_driver").and_then(Value::as_str).unwrap_or("LATEST");
    let driver = DRIVERS.iter().find(|d| d.0 == driver).map_or("LATEST", |d| d.1);
    match (pool.gpus, c.get("accelerator")) {
        (_, Some(accelerator)) => {
            config["accelerator_type"] = accelerator["type"].clone();
            config["accelerator_count"] = accelerator.get("count").cloned().unwrap_or(json!(1));
            config["gpu_driver"] = json!(driver);
        }
        (Some((kind, count)), None) => {
            config["accelerator_type"] = json!(kind);
            config["accelerator_count"] = json!(count);
            config["gpu_driver"] = json!(driver);
        }
        (None, None) => {}
    }
    if pool.networks > 0 {
        config["gvnic"] = json!(true);
        config["placement"] = json!("COMPACT");
        config["additional_networks"] = Value::Array(
            (1..=pool.networks)
                .map(|n| {
                    json!({
                        "network": reference(&format!("gpu_network_{n}"), "name"),
                        "subnetwork": reference(&format!("gpu_subnetwork_{n}"), "name"),
                    })
                })
                .collect(),
        );
    }
    for key in [
        "reservation",
        "spot",
        "flex_start",
        "queued_provisioning",
        "labels",
        "disk_gib",
        "disk_type",
        "local_ssd_count",
        "auto_repair",
        "auto_upgrade",
    ] {
        if let Some(value) = c.get(key) {
            config[key] = value.clone();
        }
    }
    if let Some(taints) = c.get("taints").and_then(Value::as_array) {
        config["taints"] = Value::Array(
            taints
                .iter()
                .map(|t| {
                    let effect = t["effect"].as_str().unwrap_or_default();
                    let effect = EFFECTS.iter().find(|(k, _)| *k == effect).map_or(effect, |e| e.1);
                    json!({ "key": t["key"], "value": t.get("value").cloned().unwrap_or(json!("")), "effect": effect })
                })
                .collect(),
        );
    }
    config
}
