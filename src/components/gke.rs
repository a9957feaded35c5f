//! `gke`: a GKE Standard cluster for training, and its node pools. One block expands to the
//! cluster (VPC-native on the `gcp_vpc`'s ranges, Dataplane V2, workload identity, the
//! Filestore CSI driver when a `filestore` block names it), one node pool per
//! `node_pools.<name>` table, and — for the A3 machine types that use GPUDirect-TCPX/TCPXO —
//! the extra GPU VPC networks they need (TCPX: 4, TCPXO: 8), each with one subnetwork and an
//! internal allow-all firewall rule, shared by all such pools of the cluster, which then gets
//! multi-networking. GPUDirect pools get gVNIC, those networks, compact placement in their
//! zone and the machine's 8 GPUs with GKE's driver installation. A3 Ultra, A4 and A4X pools
//! talk GPUDirect-RDMA instead: see [`super::gke_rdma`].
//!
//! The cluster is created with its first pool inline (the first pool without GPUs, else the
//! first): GKE makes no throwaway `default-pool` that would have to be deleted again.

use super::cidr::Cidr;
use super::gcp_vpc::{region_of, valid_name};
use super::gke_rdma::{self, RdmaMachine, Wiring};
use super::{Component, ComponentError, Expansion, Input, Part, batch, kubernetes, nvidia_dra};
use crate::provider::Selector;
use crate::readiness::{Check, NodeGroup};
use crate::schema::{AttributeType, Block, FieldType, block, did_you_mean};
use serde_json::{Map, Value, json};

/// The component's registration.
pub const COMPONENT: Component = Component {
    name: "gke",
    schema: Gke::FIELDS,
    expand,
};

block! {
    /// A `gke` block. What it hands on to the cluster unread stays a value of the type the
    /// cluster takes.
    struct Gke {
        existing: Option<String>,
        node_pools: Map<String, Value>,
        name: Option<String>,
        location: Option<String>,
        version: Option<Value> as String,
        release_channel: Option<Value> as String,
        vpc: Option<String>,
        network: Option<Value> as String,
        subnetwork: Option<Value> as String,
        pods_range: Option<Value> as String,
        services_range: Option<Value> as String,
        private_nodes: Option<Value> as Bool,
        private_endpoint: Option<Value> as Bool,
        authorized_networks: Option<Value> as List,
        gcs_fuse_csi: Option<Value> as Bool,
        gpu_networks_cidr: Option<String>,
        labels: Option<Value>,
        timeouts: Option<Value>,
        kubernetes: Option<Value>,
    }
}

block! {
    /// A `node_pools.<name>` table of a `gke` block.
    struct PoolBlock {
        machine_type: String,
        size: Value as Size,
        zone: Option<String>,
        reservation: Option<Value> as String,
        reservation_block: Option<Value> as String,
        reservation_sub_block: Option<Value> as String,
        rdma: Option<String>,
        spot: Option<Value> as Bool,
        flex_start: Option<Value> as Bool,
        queued_provisioning: Option<Value> as Bool,
        accelerator: Option<Accelerator>,
        gpu_driver: Option<String>,
        labels: Option<Value>,
        taints: Option<Vec<Taint>>,
        disk_gib: Option<Value> as Integer,
        disk_type: Option<Value> as String,
        local_ssd_count: Option<Value> as Integer,
        auto_repair: Option<Value> as Bool,
        auto_upgrade: Option<Value> as Bool,
        version: Option<Value> as String,
    }
}

/// `accelerator = { type = "nvidia-tesla-t4", count = 1 }`: GPUs attached to an N1 machine.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Accelerator {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default = "one")]
    count: i64,
}

impl AttributeType for Accelerator {
    const TYPE: FieldType = FieldType::Table;
}

/// One GPU, the default count of an `accelerator`.
fn one() -> i64 {
    1
}

/// `{ key = "nvidia.com/gpu", value = "present", effect = "NoSchedule" }`
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Taint {
    key: String,
    #[serde(default)]
    value: String,
    effect: String,
}

/// How a machine type's GPUs network: GPUDirect-TCPX or -TCPXO over this many extra VPCs, or
/// GPUDirect-RDMA ([`gke_rdma`]).
#[derive(Clone, Copy)]
enum GpuDirect {
    None,
    Networks(usize),
    Rdma,
}

/// Machine types that come with their GPUs: the accelerator, how many, and their GPUDirect.
const GPU_MACHINES: &[(&str, &str, i64, GpuDirect)] = &[
    ("a3-highgpu-1g", "nvidia-h100-80gb", 1, GpuDirect::None),
    ("a3-highgpu-2g", "nvidia-h100-80gb", 2, GpuDirect::None),
    ("a3-highgpu-4g", "nvidia-h100-80gb", 4, GpuDirect::None),
    ("a3-highgpu-8g", "nvidia-h100-80gb", 8, GpuDirect::Networks(4)),
    ("a3-edgegpu-8g", "nvidia-h100-80gb", 8, GpuDirect::Networks(4)),
    ("a3-megagpu-8g", "nvidia-h100-mega-80gb", 8, GpuDirect::Networks(8)),
    ("a3-ultragpu-8g", "nvidia-h200-141gb", 8, GpuDirect::Rdma),
    ("a4-highgpu-8g", "nvidia-b200", 8, GpuDirect::Rdma),
    ("a4x-highgpu-4g", "nvidia-gb200", 4, GpuDirect::Rdma),
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
    block: PoolBlock,
    /// The GPUs each node has: their type and count (`("", 0)` for an `accelerator`).
    gpus: Option<(&'static str, i64)>,
    /// The GPUDirect-TCPX/TCPXO networks its nodes attach to.
    networks: usize,
    /// Its RDMA machine and how its RDMA NICs are wired, for GPUDirect-RDMA machines.
    rdma: Option<(&'static RdmaMachine, Wiring)>,
}

impl Pool<'_> {
    /// Its node count at the `bound` (`min` or `max`) of its `size` (checked by
    /// `check_size`): a fixed size is both.
    fn nodes(&self, bound: &str) -> i64 {
        match &self.block.size {
            Value::Object(range) => range.get(bound).and_then(Value::as_i64),
            other => other.as_i64(),
        }
        .unwrap_or(0)
    }

    /// The pool as the batch stack's Kueue quota sees it, when it has GPUs.
    fn gpu_group(&self) -> Option<batch::GpuGroup> {
        let (_, per_node) = self.gpus?;
        Some(batch::GpuGroup {
            label: "cloud.google.com/gke-nodepool",
            name: json!(self.name),
            key: self.name.to_owned(),
            resource: "nvidia.com/gpu",
            devices: self.nodes("max") * per_node,
            tolerations: vec![],
        })
    }
}

/// What a `gke` block that reads an existing cluster cannot set: the cluster's own.
const CLUSTER_KEYS: &[&str] = &[
    "name",
    "location",
    "version",
    "release_channel",
    "vpc",
    "network",
    "subnetwork",
    "pods_range",
    "services_range",
    "private_nodes",
    "private_endpoint",
    "authorized_networks",
    "gcs_fuse_csi",
    "labels",
];

/// A cluster that exists (`existing = "projects/p/locations/l/clusters/c"`): read when forge
/// plans, never written; its pools (each a node pool of its own), their in-cluster objects and
/// readiness are added as for a cluster forge makes, but no teardown: what the cluster's other
/// workloads made is theirs. Pools that need GPU networks (GPUDirect-TCPX/TCPXO, RDMA) get
/// them as on a cluster forge makes; the cluster must have multi-networking on, which the
/// plan checks (the pool kind's dry run) once the cluster is read.
fn expand_existing(input: &Input, block: &Gke, path: &str) -> Result<Expansion, ComponentError> {
    let path = super::existing_name(path, "a GKE cluster")?;
    if let Some(key) = CLUSTER_KEYS.iter().find(|k| input.config.contains_key(**k)) {
        return Err(ComponentError::at(
            *key,
            format!("`{key}` belongs to the existing cluster `{path}`, which forge reads and never changes"),
            "remove it: forge adds node pools and in-cluster objects to an existing cluster",
        ));
    }
    let cluster = Cluster::existing(input, path)?;
    let pools = pools(input, block, &cluster.region)?;
    let mut parts = vec![Part::reading("cluster", "google_container_cluster", Selector::Id(path.to_owned()))];
    // The cluster's own ranges are read only when forge plans: `gpu_networks_cidr` (by
    // default a range GKE does not give nodes) must stay clear of them.
    let gpu = GpuNetworks::of(block, &pools, &cluster, &[])?;
    parts.extend(gpu.parts);
    parts.extend(pool_parts(input, block, &pools, &cluster));
    let (in_cluster, ready) = in_cluster(input, block, &pools, &cluster, gpu.rdma.as_ref())?;
    parts.extend(in_cluster);
    Ok(Expansion {
        parts,
        outputs: outputs(&cluster, &pools, gpu.tcp_networks),
        ready,
    })
}

/// The networks a block's GPUDirect pools talk over, with their parts: a VPC, subnetwork and
/// firewall rule per GPUDirect-TCPX/TCPXO network, the RDMA networks, and the workload
/// policy of rack-scale RDMA machines.
struct GpuNetworks {
    parts: Vec<Part>,
    rdma: Option<gke_rdma::Networks>,
    tcp_networks: usize,
}

impl GpuNetworks {
    /// The networks `pools` need, cut from `gpu_networks_cidr` clear of the node network's
    /// ranges `vpc` (as far as they are known when the stack loads).
    fn of(block: &Gke, pools: &[Pool], cluster: &Cluster, vpc: &[(String, Cidr)]) -> Result<GpuNetworks, ComponentError> {
        let networks = pools.iter().map(|p| p.networks).max().unwrap_or(0);
        let rdma = rdma_networks(pools)?;
        let cidrs = gpu_cidrs(block, networks, rdma.as_ref().map_or(0, |r| r.nics), vpc)?;
        let mut parts = cluster.gpu_networks(&cidrs.tcp);
        let reference = |local: &str, output: &str| cluster.reference(local, output);
        if let (Some(rdma), Some(gvnic)) = (&rdma, cidrs.gvnic) {
            parts.extend(rdma.parts(&cluster.name, &cluster.region, gvnic, &cidrs.rdma, &reference));
        }
        if pools.iter().any(|p| p.rdma.is_some_and(|(m, _)| m.rack)) {
            parts.push(gke_rdma::workload_policy(&cluster.name, &cluster.region));
        }
        Ok(GpuNetworks {
            parts,
            rdma,
            tcp_networks: cidrs.tcp.len(),
        })
    }

    /// Whether the cluster needs multi-networking for them.
    fn any(&self) -> bool {
        self.tcp_networks > 0 || self.rdma.is_some()
    }
}

fn expand(input: &Input) -> Result<Expansion, ComponentError> {
    let block: Gke = input.block()?;
    if let Some(path) = &block.existing {
        return expand_existing(input, &block, path);
    }
    check_private_endpoint(&block)?;
    let cluster = Cluster::new(input, &block)?;
    let network = network(input, &block)?;
    let pools = pools(input, &block, &cluster.region)?;
    let gpu = GpuNetworks::of(&block, &pools, &cluster, &network.cidrs)?;
    let multi_networking = gpu.any();
    let mut parts = gpu.parts;
    let pool_parts = pool_parts(input, &block, &pools, &cluster);
    parts.push(cluster.part(input, &block, &network, &pools, &pool_parts, multi_networking));
    parts.extend(pool_parts);
    let (in_cluster, ready) = in_cluster(input, &block, &pools, &cluster, gpu.rdma.as_ref())?;
    parts.extend(in_cluster);
    Ok(Expansion {
        parts,
        outputs: outputs(&cluster, &pools, gpu.tcp_networks),
        ready,
    })
}

/// The RDMA networks of the pools wired with `rdma = "networks"` (see [`gke_rdma::Networks::of`]).
fn rdma_networks(pools: &[Pool]) -> Result<Option<gke_rdma::Networks>, ComponentError> {
    gke_rdma::Networks::of(pools.iter().filter_map(|p| match p.rdma {
        Some((machine, Wiring::Networks)) => Some((p.name, p.block.zone.as_deref().unwrap_or_default(), machine)),
        _ => None,
    }))
}

/// The cluster a block makes or reads: its address, name, location and region.
struct Cluster<'a> {
    address: &'a str,
    name: String,
    location: String,
    region: String,
    /// It exists: forge reads it and never changes it.
    existing: bool,
}

impl<'a> Cluster<'a> {
    /// The block's cluster name and location, checked.
    fn new(input: &'a Input, block: &Gke) -> Result<Self, ComponentError> {
        let address = input.address;
        let name = input.cloud_name(&block.name);
        if !valid_name(&name) || name.len() > 30 {
            return Err(ComponentError::at(
                "name",
                format!("`{name}` cannot name a GKE cluster: lowercase letters, digits and `-`, starting with a letter"),
                "set `name = \"nemo\"` (at most 30 characters: forge adds `-gpu-<n>` to it for GPU networks)",
            ));
        }
        let region = input.providers.gcp_region();
        let Some(location) = block.location.as_deref().or(region).map(str::to_owned) else {
            return Err(ComponentError::at(
                "location",
                "the cluster has no location",
                "set `location = \"us-central1\"` (a regional control plane), or `region` in `[gcp]`",
            ));
        };
        let region = region.map_or_else(|| region_of(&location), str::to_owned);
        Ok(Cluster {
            address,
            name,
            location,
            region,
            existing: false,
        })
    }

    /// The existing cluster at `path` (`projects/p/locations/l/clusters/c`).
    fn existing(input: &'a Input, path: &str) -> Result<Self, ComponentError> {
        let segments: Vec<&str> = path.split('/').collect();
        let [_, _, "locations", location, "clusters", name] = segments[..] else {
            return Err(ComponentError::at(
                "existing",
                format!("`{path}` is not a GKE cluster's path"),
                "write `existing = \"projects/<project>/locations/<location>/clusters/<name>\"`",
            ));
        };
        Ok(Cluster {
            address: input.address,
            name: name.to_owned(),
            location: location.to_owned(),
            region: input.providers.gcp_region().map_or_else(|| region_of(location), str::to_owned),
            existing: true,
        })
    }

    /// A reference to the output `output` of this cluster's part `local`.
    fn reference(&self, local: &str, output: &str) -> Value {
        json!(format!("${{{}.{local}.{output}}}", self.address))
    }

    /// Per GPU network (one per `/24` of `cidrs`): the network, its subnetwork and its
    /// internal allow-all firewall rule.
    fn gpu_networks(&self, cidrs: &[Cidr]) -> Vec<Part> {
        let mut parts = Vec::new();
        for (i, cidr) in cidrs.iter().enumerate() {
            let n = i + 1;
            let net = format!("{}-gpu-{n}", self.name);
            let network = self.reference(&format!("gpu_network_{n}"), "self_link");
            parts.push(Part::new(
                format!("gpu_network_{n}"),
                "google_compute_network",
                json!({ "name": net, "mtu": GPU_MTU, "auto_create_subnetworks": false, "description": format!("GPUDirect network {n} of GKE cluster {}", self.name) }),
            ));
            parts.push(Part::new(
                format!("gpu_subnetwork_{n}"),
                "google_compute_subnetwork",
                json!({ "name": format!("{net}-subnet"), "region": self.region, "network": network, "ip_cidr_range": cidr.to_string() }),
            ));
            parts.push(Part::new(
                format!("gpu_firewall_{n}"),
                "google_compute_firewall",
                json!({
                    "name": format!("{net}-internal"),
                    "network": network,
                    "description": "GPU-to-GPU traffic between the nodes",
                    "allow": [{ "protocol": "all" }],
                    "source_ranges": [cidr.to_string()],
                }),
            ));
        }
        parts
    }

    /// The cluster, created with its first pool inline (the first without GPUs, else the
    /// first): `pool_parts` are the pools' parts, in the pools' order.
    fn part(&self, input: &Input, block: &Gke, network: &Network, pools: &[Pool], pool_parts: &[Part], multi_networking: bool) -> Part {
        let first = pools.iter().position(|p| p.gpus.is_none()).unwrap_or(0);
        let mut initial = pool_parts[first].config.clone();
        let initial_map = initial.as_object_mut().expect("pool configs are tables");
        initial_map.remove("cluster");
        initial_map.remove("timeouts");
        initial_map.insert(
            "address".into(),
            json!(format!("{}.node_pools.{}", self.address, pools[first].name)),
        );
        let filestore = super::storage_for(input.components, self.address).any(|kind| kind == "filestore");
        let mut cluster = json!({
            "name": self.name,
            "location": self.location,
            "network": network.network,
            "subnetwork": network.subnetwork,
            "datapath_provider": "ADVANCED_DATAPATH",
            "multi_networking": multi_networking,
            "workload_identity": true,
            "filestore_csi": filestore,
            "initial_node_pool": initial,
        });
        let handed_on = [
            ("pods_range", &network.pods_range),
            ("services_range", &network.services_range),
            ("version", &block.version),
            ("release_channel", &block.release_channel),
            ("private_nodes", &block.private_nodes),
            ("private_endpoint", &block.private_endpoint),
            ("authorized_networks", &block.authorized_networks),
            ("gcs_fuse_csi", &block.gcs_fuse_csi),
            ("labels", &block.labels),
            ("timeouts", &block.timeouts),
        ];
        super::hand_on(&mut cluster, &handed_on);
        Part::new("cluster", "google_container_cluster", cluster)
    }
}

/// One `google_container_node_pool` part per pool, with the block's `timeouts` and `[gcp]
/// default_labels` (which would reach the pools' VM labels only after expansion, but the pool
/// created inline with the cluster needs them in the cluster's create).
fn pool_parts(input: &Input, block: &Gke, pools: &[Pool], cluster: &Cluster) -> Vec<Part> {
    let default_labels = input.providers.gcp.as_ref().and_then(|g| g.default_labels.as_ref());
    pools
        .iter()
        .map(|pool| {
            let mut config = pool_config(pool, &|local, output| cluster.reference(local, output));
            if let Some(timeouts) = &block.timeouts {
                config["timeouts"] = timeouts.clone();
            }
            if let Some(labels) = default_labels {
                config["resource_labels"] = crate::template::quote(&Value::Object(labels.clone()));
            }
            Part::new(format!("node_pools.{}", pool.name), "google_container_node_pool", config)
        })
        .collect()
}

/// The cluster's in-cluster objects — namespaces, GPUDirect's, the teardown, the batch
/// stack — and its readiness check.
fn in_cluster(
    input: &Input,
    block: &Gke,
    pools: &[Pool],
    cluster: &Cluster,
    rdma: Option<&gke_rdma::Networks>,
) -> Result<(Vec<Part>, Vec<Check>), ComponentError> {
    let address = cluster.address;
    let settings = block.kubernetes.as_ref();
    kubernetes::check_keys(settings, "kubernetes", kubernetes::GKE_SETTINGS)?;
    let cluster_ref = kubernetes::gke_cluster(address);
    let mut parts = kubernetes::namespaces(input.components, address, &cluster_ref);
    if settings.and_then(|s| s.get("gpudirect")) != Some(&Value::Bool(false)) {
        let reference = |local: &str, output: &str| cluster.reference(local, output);
        parts.extend(gpudirect_objects(pools, &cluster_ref, &reference));
        parts.extend(rdma.map(|r| r.objects(&cluster_ref, &reference)).unwrap_or_default());
        let rdma_pools: Vec<(&RdmaMachine, &str)> = pools.iter().filter_map(|p| Some((p.rdma?.0, p.gpus?.0))).collect();
        parts.extend(gke_rdma::gib_installers(&cluster_ref, &rdma_pools));
    }
    parts.extend(dra_driver(settings, pools, &cluster_ref)?);
    // On destroy, before the pools go: the load balancers and disks Kubernetes made — not in
    // an existing cluster, whose other workloads' objects are theirs.
    if !cluster.existing {
        parts.push(Part {
            local: "k8s.teardown".into(),
            kind: "k8s_teardown",
            config: json!({ "cluster": cluster_ref }),
            depends_on: pools.iter().map(|p| format!("{address}.node_pools.{}", p.name)).collect(),
            existing: None,
        });
    }
    let gpu_groups: Vec<batch::GpuGroup> = pools.iter().filter_map(Pool::gpu_group).collect();
    let batch = batch::batch(input, address, &cluster_ref, &gpu_groups)?;
    parts.extend(batch.parts);
    let ready = readiness(settings, pools, &cluster_ref, batch.queues)?;
    Ok((parts, ready))
}

/// NVIDIA's DRA driver with IMEX (`kubernetes = { nvidia_dra_driver = … }`) for the NVLink
/// domains of the A4X pools: on by default where the cluster has one, `false` leaves it out,
/// a version pins it. Its kubelet plugin tolerates GKE's GPU taint, the taint GKE puts on Arm
/// nodes, and the pools'.
fn dra_driver(settings: Option<&Value>, pools: &[Pool], cluster_ref: &str) -> Result<Vec<Part>, ComponentError> {
    let racks: Vec<&Pool> = pools.iter().filter(|p| p.rdma.is_some_and(|(m, _)| m.rack)).collect();
    let version = match kubernetes::switch(settings, "kubernetes", "nvidia_dra_driver")? {
        kubernetes::Switch::Off => return Ok(Vec::new()),
        kubernetes::Switch::Default if racks.is_empty() => return Ok(Vec::new()),
        kubernetes::Switch::On(_) if racks.is_empty() => {
            return Err(ComponentError::at(
                "kubernetes.nvidia_dra_driver",
                "the cluster has no A4X pool (`a4x-highgpu-4g`) for NVIDIA's DRA driver to serve: its kubelet plugin would run on no node",
                "remove `nvidia_dra_driver`, or add an `a4x-highgpu-4g` pool",
            ));
        }
        kubernetes::Switch::On(Some(version)) => version,
        _ => nvidia_dra::DEFAULT_VERSION.to_owned(),
    };
    let mut types: Vec<String> = racks.iter().map(|p| p.block.machine_type.clone()).collect();
    types.dedup();
    let mut taints = vec![
        json!({ "key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule" }),
        json!({ "key": "kubernetes.io/arch", "value": "arm64", "effect": "NoSchedule" }),
    ];
    for taint in racks.iter().flat_map(|p| p.block.taints.iter().flatten()) {
        taints.push(json!({ "key": taint.key, "value": taint.value, "effect": taint.effect }));
    }
    Ok(nvidia_dra::driver(cluster_ref, &types, &taints, &version, &nvidia_dra::GKE))
}

/// The block's outputs: the cluster's, its GPU networks, and per pool its name and the GPU
/// networks it uses.
fn outputs(cluster: &Cluster, pools: &[Pool], networks: usize) -> Map<String, Value> {
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
        outputs.insert(key.into(), cluster.reference("cluster", key));
    }
    let gpu_networks: Vec<Value> = (1..=networks)
        .map(|n| cluster.reference(&format!("gpu_network_{n}"), "name"))
        .collect();
    outputs.insert("gpu_networks".into(), Value::Array(gpu_networks.clone()));
    let by_pool: Map<String, Value> = pools
        .iter()
        .map(|p| {
            (
                p.name.to_owned(),
                json!({
                    "name": cluster.reference(&format!("node_pools.{}", p.name), "name"),
                    "gpu_networks": gpu_networks[..p.networks],
                }),
            )
        })
        .collect();
    outputs.insert("node_pools".into(), Value::Object(by_pool));
    outputs
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
            &format!("vpc{n}"),
            reference(&format!("gpu_network_{n}"), "name"),
            reference(&format!("gpu_subnetwork_{n}"), "name"),
            "NetDevice",
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
    kubernetes::check_waits(settings)?;
    let Some(timeout) = kubernetes::wait_ready(settings)? else {
        return Ok(vec![]);
    };
    let driver_off = |p: &Pool| p.block.gpu_driver.as_deref() == Some("disabled");
    let node_pools: Vec<NodeGroup> = pools
        .iter()
        .filter(|p| !driver_off(p))
        .filter_map(|p| {
            let (_, gpus) = p.gpus?;
            Some(NodeGroup {
                label: "cloud.google.com/gke-nodepool".into(),
                name: p.name.to_string(),
                nodes: p.nodes("min"),
                devices: [("nvidia.com/gpu".to_owned(), gpus)].into(),
                ultraserver: None,
                starts: None,
                ends: None,
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

fn network(input: &Input, block: &Gke) -> Result<Network, ComponentError> {
    if block.vpc.is_none() {
        let (Some(network), Some(subnetwork)) = (&block.network, &block.subnetwork) else {
            return Err(ComponentError::at(
                "vpc",
                "the cluster has no network",
                "write `vpc = \"gcp_vpc.main\"` (a `gcp_vpc` block of this stack), or `network` and `subnetwork` with `pods_range` and `services_range`",
            ));
        };
        return Ok(Network {
            network: network.clone(),
            subnetwork: subnetwork.clone(),
            pods_range: block.pods_range.clone(),
            services_range: block.services_range.clone(),
            cidrs: Vec::new(),
        });
    }
    let (vpc, config) = input.named_block("vpc", block.vpc.as_deref(), "gcp_vpc")?;
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
        pods_range: Some(block.pods_range.clone().unwrap_or_else(|| output("pods_range"))),
        services_range: Some(block.services_range.clone().unwrap_or_else(|| output("services_range"))),
        cidrs,
    })
}

/// The ranges of the GPU networks, cut from `gpu_networks_cidr`: a /24 per TCPX/TCPXO network
/// (the 2nd to the 9th), a /24 for the RDMA nodes' gVNIC network (the 1st), and for the RDMA
/// VPC's subnetworks a range each of a sixteenth of it from its middle on (a /20 each of a /16:
/// a subnetwork holds an address of every node).
struct GpuCidrs {
    tcp: Vec<Cidr>,
    gvnic: Option<Cidr>,
    rdma: Vec<Cidr>,
}

/// The ranges of `tcp` TCPX/TCPXO networks and of `rdma_nics` RDMA subnetworks (with the
/// gVNIC network when there are any), checked against each other and the VPC's.
fn gpu_cidrs(block: &Gke, tcp: usize, rdma_nics: usize, vpc: &[(String, Cidr)]) -> Result<GpuCidrs, ComponentError> {
    if tcp == 0 && rdma_nics == 0 {
        return Ok(GpuCidrs {
            tcp: Vec::new(),
            gvnic: None,
            rdma: Vec::new(),
        });
    }
    let text = block.gpu_networks_cidr.as_deref().unwrap_or(GPU_NETWORKS_CIDR);
    let hint = "give the GPU networks a range of their own, e.g. `gpu_networks_cidr = \"192.168.0.0/16\"`; forge takes a /24 per GPUDirect-TCPX network and a sixteenth per RDMA subnetwork from it";
    let range = Cidr::parse("gpu_networks_cidr", text, 8..=20, "a range for the GPU networks")
        .map_err(|m| ComponentError::at("gpu_networks_cidr", m, hint))?;
    let cut = |prefix: u32, indexes: std::ops::Range<usize>| -> Result<Vec<Cidr>, ComponentError> {
        let count = indexes.len();
        let cidrs: Vec<Cidr> = indexes.filter_map(|i| range.subnet(prefix, i as u32)).collect();
        if cidrs.len() < count {
            return Err(ComponentError::at(
                "gpu_networks_cidr",
                format!("`{range}` has no room for the GPU networks' {count} /{prefix} ranges"),
                hint,
            ));
        }
        Ok(cidrs)
    };
    let cidrs = GpuCidrs {
        tcp: cut(24, 1..tcp + 1)?,
        gvnic: cut(24, 0..usize::from(rdma_nics > 0))?.first().copied(),
        rdma: cut(range.prefix + 4, 8..8 + rdma_nics)?,
    };
    let all: Vec<Cidr> = cidrs.tcp.iter().chain(&cidrs.gvnic).chain(&cidrs.rdma).copied().collect();
    for (i, cidr) in all.iter().enumerate() {
        if let Some((key, other)) = vpc.iter().find(|(_, other)| other.overlaps(*cidr)) {
            return Err(ComponentError::at(
                "gpu_networks_cidr",
                format!("the GPU network range `{cidr}` overlaps `{key} = \"{other}\"`"),
                hint,
            ));
        }
        if let Some(other) = all[..i].iter().find(|other| other.overlaps(*cidr)) {
            return Err(ComponentError::at(
                "gpu_networks_cidr",
                format!("`{range}` is too small for its GPU networks: `{other}` and `{cidr}` overlap"),
                hint,
            ));
        }
    }
    Ok(cidrs)
}

/// The `node_pools` tables, checked, in the order written.
fn pools<'a>(input: &Input, block: &'a Gke, region: &str) -> Result<Vec<Pool<'a>>, ComponentError> {
    if block.node_pools.is_empty() {
        return Err(ComponentError::at(
            "node_pools",
            "the cluster has no node pools",
            "add one: `[gke.<name>.node_pools.system]` with `machine_type = \"e2-standard-8\"` and `size = 4`",
        ));
    }
    let known = machine_types();
    let pools = block
        .node_pools
        .iter()
        .map(|(name, table)| pool(input.address, name, table, &known, region))
        .collect::<Result<Vec<_>, _>>()?;
    check_auto_upgrade(block, &pools)?;
    check_rdma_versions(block, &pools)?;
    Ok(pools)
}

/// The GKE versions the RDMA pools need: managed DRANET's, and for A4X pools the DRA that
/// NVIDIA's driver needs; the cluster's `version` (and a pool's own, when it pins one) must be
/// them or later.
fn check_rdma_versions(block: &Gke, pools: &[Pool]) -> Result<(), ComponentError> {
    for pool in pools {
        let Some((machine, wiring)) = pool.rdma else { continue };
        let at = |key: &str| format!("node_pools.{}.{key}", pool.name);
        let mut needs = Vec::new();
        if wiring == Wiring::Dranet {
            let what = format!("pool `{}`'s managed DRANET (`rdma = \"dranet\"`)", pool.name);
            needs.push((gke_rdma::DRANET_VERSION, at("rdma"), what));
        }
        if machine.rack {
            let what = format!(
                "`{}` pool `{}` (NVIDIA's DRA driver, for its NVLink domains)",
                machine.name, pool.name
            );
            needs.push((gke_rdma::DRA_VERSION, at("machine_type"), what));
        }
        for (minimum, unpinned, what) in needs {
            gke_rdma::check_version(block.version.as_ref(), minimum, &unpinned, &what)?;
            if let Some(version) = &pool.block.version {
                gke_rdma::check_version(Some(version), minimum, &unpinned, &what).map_err(|e| ComponentError {
                    key: Some(at("version")),
                    ..e
                })?;
            }
        }
    }
    Ok(())
}

/// A private endpoint needs private nodes, as GKE says at create.
fn check_private_endpoint(block: &Gke) -> Result<(), ComponentError> {
    let on = |v: &Option<Value>| v == &Some(Value::Bool(true));
    if on(&block.private_endpoint) && !on(&block.private_nodes) {
        return Err(ComponentError::at(
            "private_endpoint",
            "`private_endpoint = true` needs private nodes: GKE refuses a private endpoint on a cluster whose nodes have public addresses",
            "add `private_nodes = true`",
        ));
    }
    Ok(())
}

/// No pool turns auto-upgrade off on a cluster in a release channel (GKE's `REGULAR` when the
/// block names none): GKE upgrades such a cluster's pools itself and refuses the pool.
fn check_auto_upgrade(block: &Gke, pools: &[Pool]) -> Result<(), ComponentError> {
    let channel = match &block.release_channel {
        None => "REGULAR",
        Some(Value::String(channel)) if !channel.contains("${") => channel.as_str(),
        Some(_) => return Ok(()),
    };
    let off = pools.iter().find(|p| p.block.auto_upgrade == Some(Value::Bool(false)));
    match off {
        Some(pool) if channel != "UNSPECIFIED" => Err(ComponentError::at(
            format!("node_pools.{}.auto_upgrade", pool.name),
            format!(
                "`node_pools.{}.auto_upgrade = false`: the cluster is in the {channel} release channel, whose node pools GKE upgrades itself; it refuses to turn that off",
                pool.name
            ),
            "remove `auto_upgrade = false`, or take the cluster out of release channels with `release_channel = \"UNSPECIFIED\"` (and pin its `version`)",
        )),
        _ => Ok(()),
    }
}

/// The table `node_pools.<name>`, checked.
fn pool<'a>(address: &str, name: &'a str, table: &Value, known: &[String], region: &str) -> Result<Pool<'a>, ComponentError> {
    let at = |key: &str| format!("node_pools.{name}.{key}");
    if !valid_name(name) || name.len() > 40 {
        return Err(ComponentError::at(
            format!("node_pools.{name}"),
            format!("`{name}` cannot name a node pool: lowercase letters, digits and `-`, starting with a letter, at most 40"),
            "rename the table",
        ));
    }
    let block: PoolBlock = super::read(
        table,
        &format!("node_pools.{name}"),
        &format!("node pool `{name}`"),
        &format!("`[{address}.node_pools.{name}]` with `machine_type` and `size`"),
    )?;
    let machine = block.machine_type.as_str();
    let fixed = machine_of(machine, known, &at)?;
    if block.accelerator.is_some() && fixed.is_some() {
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
    let rdma_machine = gke_rdma::machine(machine);
    let rdma = rdma_machine.zip(gke_rdma::wiring(block.rdma.as_deref(), rdma_machine, machine, &at("rdma"))?);
    check_zone(&block, machine, networks > 0 || rdma.is_some(), region, &at)?;
    if block.reservation_block.is_some() && block.reservation.is_none() {
        return Err(ComponentError::at(
            at("reservation_block"),
            "`reservation_block` names a block of a reservation, and the pool has no `reservation`",
            "add `reservation = \"<name>\"`: the reservation the block belongs to",
        ));
    }
    if block.reservation_sub_block.is_some() && block.reservation_block.is_none() {
        return Err(ComponentError::at(
            at("reservation_sub_block"),
            "`reservation_sub_block` names a sub-block of a reservation block, and the pool has no `reservation_block`",
            "add `reservation_block = \"<name>\"`: the block the sub-block belongs to",
        ));
    }
    check_size(&block.size, &at)?;
    if block.reservation.is_some() && block.spot == Some(Value::Bool(true)) {
        return Err(ComponentError::at(
            at("reservation"),
            "a pool takes either a `reservation` or `spot = true`, not both",
            "reserved capacity is not spot capacity: drop one of them",
        ));
    }
    if let Some(accelerator) = &block.accelerator {
        check_accelerator(accelerator, machine, &at)?;
    }
    if let Some(driver) = &block.gpu_driver
        && !DRIVERS.iter().any(|(k, _)| k == driver)
    {
        let names: Vec<&str> = DRIVERS.iter().map(|d| d.0).collect();
        return Err(ComponentError::at(
            at("gpu_driver"),
            format!("`gpu_driver = \"{driver}\"` is not a driver installation GKE knows"),
            crate::schema::suggestion(driver, &names),
        ));
    }
    check_taints(&block, &at)?;
    let gpus = fixed.map(|m| (m.1, m.2)).or(block.accelerator.as_ref().map(|_| ("", 0)));
    Ok(Pool {
        name,
        block,
        gpus,
        networks,
        rdma,
    })
}

/// The machine type, known to forge and built by it: its GPUs and GPUDirect when it comes
/// with GPUs.
fn machine_of(
    machine: &str,
    known: &[String],
    at: &dyn Fn(&str) -> String,
) -> Result<Option<&'static (&'static str, &'static str, i64, GpuDirect)>, ComponentError> {
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
    Ok(GPU_MACHINES.iter().find(|m| m.0 == machine))
}

/// A pool's zone: in the cluster's region, and set where GPUDirect places nodes compactly
/// (`gpudirect`: TCPX, TCPXO and RDMA pools).
fn check_zone(block: &PoolBlock, machine: &str, gpudirect: bool, region: &str, at: &dyn Fn(&str) -> String) -> Result<(), ComponentError> {
    match block.zone.as_deref() {
        None if gpudirect => Err(ComponentError::at(
            at("zone"),
            format!("`{machine}` pools need a `zone`: their GPUDirect nodes are placed compactly, in one zone"),
            format!("add e.g. `zone = \"{region}-c\"`: a zone of {region} that has the machines (or your reservation)"),
        )),
        Some(zone) if region_of(zone) != region || zone == region => Err(ComponentError::at(
            at("zone"),
            format!("zone `{zone}` is not in the cluster's region {region}"),
            format!("use a zone of {region}, like `{region}-c`"),
        )),
        _ => Ok(()),
    }
}

fn check_size(size: &Value, at: &dyn Fn(&str) -> String) -> Result<(), ComponentError> {
    let hint = "write `size = 4` for a fixed size, or `size = { min = 0, max = 8 }` to autoscale";
    match size {
        Value::Number(n) if n.as_i64().is_some_and(|n| (0..=1000).contains(&n)) => Ok(()),
        Value::Object(range) => {
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
        _ => Err(ComponentError::at(
            at("size"),
            "`size` must be a node count (0 to 1000) or a `{ min, max }` table",
            hint,
        )),
    }
}

fn check_accelerator(accelerator: &Accelerator, machine: &str, at: &dyn Fn(&str) -> String) -> Result<(), ComponentError> {
    let Accelerator { kind, count } = accelerator;
    let fits = machine.starts_with("n1-") && N1_GPUS.contains(&kind.as_str()) && [1, 2, 4, 8].contains(count);
    if fits {
        return Ok(());
    }
    Err(ComponentError::at(
        at("accelerator"),
        format!("`{machine}` cannot attach {count} × `{kind}`"),
        format!(
            "attached GPUs go on N1 machines: `accelerator = {{ type = \"nvidia-tesla-t4\", count = 1 }}` (types: {}); A2, A3 and G2 machines come with theirs",
            N1_GPUS.join(", ")
        ),
    ))
}

fn check_taints(block: &PoolBlock, at: &dyn Fn(&str) -> String) -> Result<(), ComponentError> {
    let known = |effect: &str| EFFECTS.iter().any(|(k, g)| *k == effect || *g == effect);
    if block.taints.iter().flatten().any(|taint| !known(&taint.effect)) {
        return Err(ComponentError::at(
            at("taints"),
            "each taint needs a `key` and an `effect` Kubernetes knows",
            "write `taints = [{ key = \"nvidia.com/gpu\", value = \"present\", effect = \"NoSchedule\" }]`",
        ));
    }
    Ok(())
}

/// The attributes of a GPUDirect-RDMA pool of `machine`: gVNIC; GKE's RDMA strategy where it
/// applies; its NICs on forge's RDMA networks or GKE's managed DRANET; placed by the cluster's
/// workload policy (A4X), else compactly unless a reservation places it; a Hyperdisk boot disk
/// where the machine needs one.
fn rdma_config(config: &mut Value, b: &PoolBlock, machine: &RdmaMachine, wiring: Wiring, reference: &dyn Fn(&str, &str) -> Value) {
    config["gvnic"] = json!(true);
    if machine.strategy {
        config["gpu_direct_strategy"] = json!("RDMA");
    }
    match wiring {
        Wiring::Networks => config["additional_networks"] = gke_rdma::Networks::attached(machine, reference),
        Wiring::Dranet => config["accelerator_network_profile"] = json!("auto"),
    }
    if machine.rack {
        config["placement_policy"] = reference("workload_policy", "name");
    } else if b.reservation.is_none() {
        config["placement"] = json!("COMPACT");
    }
    if machine.hyperdisk && b.disk_type.is_none() {
        config["disk_type"] = json!("hyperdisk-balanced");
    }
}

/// A pool's `google_container_node_pool` attributes.
fn pool_config(pool: &Pool, reference: &dyn Fn(&str, &str) -> Value) -> Value {
    let b = &pool.block;
    let mut config = json!({
        "cluster": reference("cluster", "id"),
        "name": pool.name,
        "machine_type": b.machine_type,
    });
    match &b.size {
        Value::Object(range) => {
            config["min_node_count"] = range["min"].clone();
            config["max_node_count"] = range["max"].clone();
        }
        count => config["node_count"] = count.clone(),
    }
    if let Some(zone) = &b.zone {
        config["node_locations"] = json!([zone]);
    }
    let driver = b.gpu_driver.as_deref().unwrap_or("LATEST");
    let driver = DRIVERS.iter().find(|d| d.0 == driver).map_or("LATEST", |d| d.1);
    let gpus = match (&b.accelerator, pool.gpus) {
        (Some(Accelerator { kind, count }), _) => Some((kind.as_str(), *count)),
        (None, gpus) => gpus,
    };
    if let Some((kind, count)) = gpus {
        config["accelerator_type"] = json!(kind);
        config["accelerator_count"] = json!(count);
        config["gpu_driver"] = json!(driver);
    }
    if let Some((machine, wiring)) = pool.rdma {
        rdma_config(&mut config, b, machine, wiring, reference);
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
    let handed_on = [
        ("reservation", &b.reservation),
        ("spot", &b.spot),
        ("flex_start", &b.flex_start),
        ("queued_provisioning", &b.queued_provisioning),
        ("labels", &b.labels),
        ("disk_gib", &b.disk_gib),
        ("disk_type", &b.disk_type),
        ("local_ssd_count", &b.local_ssd_count),
        ("auto_repair", &b.auto_repair),
        ("auto_upgrade", &b.auto_upgrade),
        ("version", &b.version),
    ];
    super::hand_on(&mut config, &handed_on);
    if let (Some(Value::String(reservation)), Some(Value::String(name))) = (&b.reservation, &b.reservation_block) {
        config["reservation"] = match &b.reservation_sub_block {
            Some(Value::String(sub)) => json!(format!("{reservation}/reservationBlocks/{name}/reservationSubBlocks/{sub}")),
            _ => json!(format!("{reservation}/reservationBlocks/{name}")),
        };
    }
    if let Some(taints) = &b.taints {
        config["taints"] = Value::Array(
            taints
                .iter()
                .map(|t| {
                    let effect = EFFECTS.iter().find(|(k, _)| *k == t.effect).map_or(t.effect.as_str(), |e| e.1);
                    json!({ "key": t.key, "value": t.value, "effect": effect })
                })
                .collect(),
        );
    }
    config
}
