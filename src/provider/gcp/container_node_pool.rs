//! `google_container_node_pool`: a GKE node pool — machine type and GPUs (with GKE's driver
//! installation), a fixed size or autoscaling, node locations, gVNIC and the additional node
//! networks of GPUDirect (TCPX, TCPXO, RDMA: `gpu_direct_strategy`) or GKE's managed DRANET
//! (`accelerator_network_profile = "auto"`), compact placement or a resource policy's
//! (`placement_policy`), reservations and their blocks, spot / flex-start / queued
//! provisioning, disks, labels, taints, node management and the node version. Size,
//! autoscaling (either way: a fixed size and autoscaling are two modes, and drift in one shows
//! as the other's attributes), labels, taints, management and the version (upgrades only)
//! change in place; everything the nodes are made of forces a new pool.
//!
//! forge's mark sits in the pool's VM labels (`forge-stack`, `forge-address`, `forge-token`):
//! a pool made by this block's create, or inline by its cluster's create (the cluster's token),
//! is adopted; any other pool of that name is someone else's. A pool whose create failed
//! (ERROR, e.g. a stockout) is deleted and made again by the next `forge up`.

use super::gke::{self, CHANGE_TIMEOUT, CREATE_TIMEOUT, cluster_of, is_mark, pool_made_by, pool_mark};
use super::marker::split_description;
use super::resumable::{self, Tracked};
use super::{Clients, found};
use crate::provider::{Cloud, Created, Ctx, Observed, ProviderError, Refusal, Resource, parse, timeout};
use crate::schema::{AttributeType, FieldType, attributes};
use google_cloud_container_v1::model::{
    AcceleratorConfig, AdditionalNodeNetworkConfig, EphemeralStorageLocalSsdConfig, GPUDirectConfig, GPUDriverInstallationConfig,
    NodeConfig, NodeLabels, NodeManagement, NodeNetworkConfig, NodePool, NodePoolAutoscaling, NodeTaint, NodeTaints, Operation,
    ReservationAffinity, ResourceLabels, VirtualNIC, gpu_direct_config::GPUDirectStrategy,
    gpu_driver_installation_config::GPUDriverVersion, node_pool, node_taint, reservation_affinity,
};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

/// The `google_container_node_pool` kind.
pub(super) struct ContainerNodePool;

/// One additional node network: a VPC and its subnetwork in the cluster's region.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
pub(super) struct NodeNetwork {
    network: String,
    subnetwork: String,
}

impl AttributeType for NodeNetwork {
    const TYPE: FieldType = FieldType::Table;
}

/// A node taint, with GKE's effect names (`NO_SCHEDULE`, `PREFER_NO_SCHEDULE`, `NO_EXECUTE`).
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
pub(super) struct Taint {
    key: String,
    #[serde(default)]
    value: String,
    effect: String,
}

impl AttributeType for Taint {
    const TYPE: FieldType = FieldType::Table;
}

attributes! {
    kind ContainerNodePool, spec "google_container_node_pool", outputs [id, name = attribute, version, instance_group_urls], extra [timeouts];
    struct Config {
        cluster: String [replace],
        name: String [replace],
        machine_type: String [replace],
        accelerator_type: Option<String> [replace],
        accelerator_count: Option<i64> [replace],
        gpu_driver: Option<String> [replace],
        node_count: Option<i64>,
        min_node_count: Option<i64>,
        max_node_count: Option<i64>,
        #[serde(default)] node_locations: Vec<String> [replace],
        #[serde(default)] gvnic: bool [replace],
        #[serde(default)] additional_networks: Vec<NodeNetwork> [replace],
        placement: Option<String> [replace],
        placement_policy: Option<String> [replace],
        gpu_direct_strategy: Option<String> [replace],
        accelerator_network_profile: Option<String> [replace],
        reservation_affinity: Option<String> [replace],
        reservation: Option<String> [replace],
        #[serde(default)] spot: bool [replace],
        #[serde(default)] flex_start: bool [replace],
        #[serde(default)] queued_provisioning: bool [replace],
        disk_gib: Option<i64> [replace],
        disk_type: Option<String> [replace],
        local_ssd_count: Option<i64> [replace],
        #[serde(default)] labels: BTreeMap<String, String>,
        #[serde(default)] resource_labels: BTreeMap<String, String>,
        #[serde(default)] taints: Vec<Taint>,
        #[serde(default = "yes")] auto_repair: bool,
        #[serde(default = "yes")] auto_upgrade: bool,
        version: Option<String>,
    }
}

fn yes() -> bool {
    true
}

/// The key of the reservation a SPECIFIC reservation affinity names.
const RESERVATION_KEY: &str = "compute.googleapis.com/reservation-name";

impl Config {
    fn autoscaled(&self) -> bool {
        self.min_node_count.is_some() || self.max_node_count.is_some()
    }

    fn autoscaling(&self) -> NodePoolAutoscaling {
        NodePoolAutoscaling::new()
            .set_enabled(self.autoscaled())
            .set_min_node_count(self.min_node_count.unwrap_or(0) as i32)
            .set_max_node_count(self.max_node_count.unwrap_or(0) as i32)
    }

    fn management(&self) -> NodeManagement {
        NodeManagement::new()
            .set_auto_repair(self.auto_repair)
            .set_auto_upgrade(self.auto_upgrade)
    }

    fn taints(&self) -> Vec<NodeTaint> {
        self.taints
            .iter()
            .map(|t| {
                NodeTaint::new()
                    .set_key(&t.key)
                    .set_value(&t.value)
                    .set_effect(node_taint::Effect::from(t.effect.as_str()))
            })
            .collect()
    }

    /// The pool as a create sends it, its VMs labelled with `mark`.
    fn model(&self, mark: [(String, String); 3]) -> NodePool {
        let mut config = NodeConfig::new()
            .set_machine_type(&self.machine_type)
            .set_labels(self.labels.clone())
            .set_resource_labels(self.resource_labels.clone().into_iter().chain(mark))
            .set_taints(self.taints())
            .set_spot(self.spot);
        if let Some(kind) = &self.accelerator_type {
            let mut accelerator = AcceleratorConfig::new()
                .set_accelerator_type(kind)
                .set_accelerator_count(self.accelerator_count.unwrap_or(1));
            if let Some(driver) = &self.gpu_driver {
                accelerator = accelerator.set_gpu_driver_installation_config(
                    GPUDriverInstallationConfig::new().set_gpu_driver_version(GPUDriverVersion::from(driver.as_str())),
                );
            }
            config = config.set_accelerators([accelerator]);
        }
        if self.gvnic {
            config = config.set_gvnic(VirtualNIC::new().set_enabled(true));
        }
        if let Some(strategy) = &self.gpu_direct_strategy {
            config =
                config.set_gpu_direct_config(GPUDirectConfig::new().set_gpu_direct_strategy(GPUDirectStrategy::from(strategy.as_str())));
        }
        if self.flex_start {
            config = config.set_flex_start(true);
        }
        if let Some(gib) = self.disk_gib {
            config = config.set_disk_size_gb(gib as i32);
        }
        if let Some(disk) = &self.disk_type {
            config = config.set_disk_type(disk);
        }
        if let Some(count) = self.local_ssd_count {
            config = config.set_ephemeral_storage_local_ssd_config(EphemeralStorageLocalSsdConfig::new().set_local_ssd_count(count as i32));
        }
        if let Some(affinity) = self.affinity() {
            config = config.set_reservation_affinity(affinity);
        }
        let mut pool = NodePool::new()
            .set_name(&self.name)
            .set_config(config)
            .set_initial_node_count(self.node_count.or(self.min_node_count).unwrap_or(0) as i32)
            .set_locations(self.node_locations.clone())
            .set_management(self.management());
        if self.autoscaled() {
            pool = pool.set_autoscaling(self.autoscaling());
        }
        if let Some(version) = &self.version {
            pool = pool.set_version(version);
        }
        if !self.additional_networks.is_empty() || self.accelerator_network_profile.is_some() {
            let networks = self.additional_networks.iter().map(|n| {
                AdditionalNodeNetworkConfig::new()
                    .set_network(super::collection::last_segment(&n.network))
                    .set_subnetwork(super::collection::last_segment(&n.subnetwork))
            });
            let mut network = NodeNetworkConfig::new().set_additional_node_network_configs(networks);
            if let Some(profile) = &self.accelerator_network_profile {
                network = network.set_accelerator_network_profile(profile);
            }
            pool = pool.set_network_config(network);
        }
        if self.placement.is_some() || self.placement_policy.is_some() {
            let mut policy = node_pool::PlacementPolicy::new();
            if let Some(placement) = &self.placement {
                policy = policy.set_type(node_pool::placement_policy::Type::from(placement.as_str()));
            }
            if let Some(name) = &self.placement_policy {
                policy = policy.set_policy_name(name);
            }
            pool = pool.set_placement_policy(policy);
        }
        if self.queued_provisioning {
            pool = pool.set_queued_provisioning(node_pool::QueuedProvisioning::new().set_enabled(true));
        }
        pool
    }

    /// The reservation affinity: a named reservation, or ANY / NONE.
    fn affinity(&self) -> Option<ReservationAffinity> {
        let kind = match (&self.reservation, self.reservation_affinity.as_deref()) {
            (Some(_), _) | (None, Some("SPECIFIC")) => "SPECIFIC_RESERVATION",
            (None, Some("ANY")) => "ANY_RESERVATION",
            (None, Some("NONE")) => "NO_RESERVATION",
            (None, Some(other)) => other,
            (None, None) => return None,
        };
        let mut affinity = ReservationAffinity::new().set_consume_reservation_type(reservation_affinity::Type::from(kind));
        if let Some(name) = &self.reservation {
            affinity = affinity.set_key(RESERVATION_KEY).set_values([name]);
        }
        Some(affinity)
    }
}

/// The pool a cluster is created with (its `initial_node_pool`: this kind's attributes but
/// `cluster`, and `address`, the block that manages the pool afterwards), marked with the
/// cluster create's `token`.
pub(super) fn inline_pool(ctx: &Ctx, token: &str, initial: &Value) -> Result<NodePool, ProviderError> {
    let mut attributes = initial.as_object().cloned().unwrap_or_default();
    let address = attributes
        .remove("address")
        .and_then(|a| a.as_str().map(str::to_owned))
        .unwrap_or_default();
    attributes.insert("cluster".into(), json!(""));
    let cfg: Config = parse(ctx, &Value::Object(attributes))?;
    let owner = Ctx {
        stack: ctx.stack.clone(),
        address,
        status: ctx.status.clone(),
        cloud: ctx.cloud.clone(),
        resumed: ctx.resumed,
        quoted: None,
    };
    Ok(cfg.model(pool_mark(&owner, token)))
}

/// The node pools of the project's GKE clusters.
struct Pools;

impl Tracked for Pools {
    type Object = NodePool;
    type Operation = Operation;
    const WHAT: &'static str = "node pool";
    const PATH: &'static str = "nodePools";
    const MAKING: &'static str = "PROVISIONING";
    const GOING: &'static str = "STOPPING";

    fn error(gcp: &Clients, what: &str, err: google_cloud_compute_v1::Error) -> ProviderError {
        gke::error(gcp, what, err)
    }

    /// Retried while another operation runs on the cluster (see [`gke::refused`]).
    async fn refused(gcp: &Clients, id: &str, what: &str, err: google_cloud_compute_v1::Error) -> ProviderError {
        gke::refused(gcp, what, id, err).await
    }

    async fn get(gcp: &Clients, id: &str) -> Result<NodePool, google_cloud_compute_v1::Error> {
        gcp.container.get_node_pool().set_name(id).send().await
    }

    async fn delete(gcp: &Clients, id: &str) -> Result<Operation, google_cloud_compute_v1::Error> {
        gcp.container.delete_node_pool().set_name(id).send().await
    }

    async fn wait(ctx: &Ctx, gcp: &Clients, what: &str, op: Operation, limit: Duration) -> Result<(), ProviderError> {
        gke::wait_operation(ctx, gcp, what, op, limit).await
    }

    fn state(p: &NodePool) -> Option<&str> {
        p.status.name()
    }

    fn ready(p: &NodePool) -> bool {
        p.status == node_pool::Status::Running
    }

    fn broken(p: &NodePool) -> bool {
        p.status == node_pool::Status::Error
    }

    /// GKE's message, and for a stockout what to do.
    fn failure(gcp: &Clients, _id: &str, p: &NodePool) -> String {
        let message = gke::conditions(&p.conditions);
        let hint = if gke::stockout(&message) {
            format!(" — {}", gke::STOCKOUT_HINT)
        } else {
            String::new()
        };
        format!("node pool `{}` is in ERROR: {message}{hint} ({})", p.name, gcp.container_context)
    }
}

/// The create token in the mark of the cluster `cluster` (an inline pool carries it).
async fn cluster_token(gcp: &Clients, cluster: &str) -> Result<Option<String>, ProviderError> {
    let sent = gcp.container.get_cluster().set_name(cluster).send().await;
    let live = found(sent, |e| gke::error(gcp, "clusters.get", e))?;
    Ok(live.and_then(|c| split_description(&c.description).1?.remove("forge:token")))
}

/// Whether the pool `p` carries the mark of the create with `token`, or of its cluster's
/// create (`cluster`: that create's token, which a pool created inline with it carries).
fn made_by(ctx: &Ctx, token: &str, cluster: Option<&str>, p: &NodePool) -> bool {
    let mut tokens = vec![token];
    tokens.extend(cluster);
    p.config.as_ref().is_some_and(|c| pool_made_by(ctx, &tokens, &c.resource_labels))
}

fn outputs(id: &str, p: &NodePool) -> Value {
    json!({ "id": id, "name": p.name, "version": p.version, "instance_group_urls": p.instance_group_urls })
}

/// The nodes per zone of a pool of a fixed size, which GKE's pool does not show: its first
/// zone's managed instance group's target size. `None` for an autoscaled pool (the
/// autoscaler's size is never drift; its `node_count` is absent: the kind's `presence`) or
/// one without a group yet.
async fn size(gcp: &Clients, p: &NodePool) -> Result<Option<i32>, ProviderError> {
    let autoscaled = p.autoscaling.as_ref().is_some_and(|a| a.enabled);
    // …/projects/<p>/zones/<zone>/instanceGroupManagers/<name>
    let Some(url) = p.instance_group_urls.first().filter(|_| !autoscaled) else {
        return Ok(None);
    };
    let segments: Vec<&str> = url.rsplit('/').take(4).collect();
    let [name, _, zone, _] = segments.as_slice() else {
        return Ok(None);
    };
    let sent = gcp
        .instance_group_managers
        .get()
        .set_project(&gcp.project)
        .set_zone(*zone)
        .set_instance_group_manager(*name)
        .send()
        .await;
    let group = found(sent, |e| super::error(gcp, "instanceGroupManagers.get", e))?;
    Ok(group.and_then(|group| group.target_size))
}

/// What the kind compares of a live pool, in its block's terms.
fn attributes(p: &NodePool) -> Value {
    let config = p.config.clone().unwrap_or_default();
    let accelerator = config.accelerators.first();
    let autoscaling = p.autoscaling.as_ref().filter(|a| a.enabled);
    let labels: BTreeMap<&String, &String> = config.resource_labels.iter().filter(|(k, _)| !is_mark(k)).collect();
    let taints: Vec<Value> = config
        .taints
        .iter()
        .map(|t| json!({ "key": t.key, "value": t.value, "effect": t.effect.name() }))
        .collect();
    let mut seen = json!({
        "name": p.name,
        "machine_type": config.machine_type,
        "accelerator_type": accelerator.map(|a| a.accelerator_type.clone()),
        "accelerator_count": accelerator.map(|a| a.accelerator_count),
        "node_locations": p.locations,
        "gvnic": config.gvnic.as_ref().is_some_and(|g| g.enabled),
        "additional_networks": p.network_config.as_ref().map(|n| n.additional_node_network_configs.iter()
            .map(|a| json!({ "network": a.network, "subnetwork": a.subnetwork })).collect::<Vec<_>>()).unwrap_or_default(),
        "placement": p.placement_policy.as_ref().and_then(|pp| pp.r#type.name()).filter(|t| *t != "TYPE_UNSPECIFIED"),
        "placement_policy": p.placement_policy.as_ref().map(|pp| pp.policy_name.as_str()).filter(|n| !n.is_empty()),
        "gpu_direct_strategy": config.gpu_direct_config.as_ref().and_then(|g| g.gpu_direct_strategy.as_ref()).and_then(|s| s.name()),
        "accelerator_network_profile": p.network_config.as_ref().map(|n| n.accelerator_network_profile.as_str()).filter(|a| !a.is_empty()),
        "spot": config.spot,
        "labels": config.labels,
        "resource_labels": labels,
        "taints": taints,
        "auto_repair": p.management.as_ref().is_some_and(|m| m.auto_repair),
        "auto_upgrade": p.management.as_ref().is_some_and(|m| m.auto_upgrade),
    });
    if let Some(a) = autoscaling {
        seen["min_node_count"] = json!(a.min_node_count);
        seen["max_node_count"] = json!(a.max_node_count);
    }
    seen
}

impl Resource for ContainerNodePool {
    /// Its machines' vCPUs, memory and GPUs, as many as the pool runs in each of its zones
    /// (autoscaled: min–max); spot and flex-start capacity priced on demand as the most it
    /// costs; nothing an hour on a specific reservation, which bills the machines itself.
    fn meter(&self, sight: &crate::cost::Sight) -> Option<crate::cost::Meter> {
        use crate::cost::{Count, Meter};
        if sight.text("reservation").is_some() {
            return Some(Meter::Prepaid {
                by: "its reservation".into(),
            });
        }
        let location = sight
            .text("cluster")
            .and_then(|path| path.split("/locations/").nth(1)?.split('/').next().map(str::to_owned))
            .or_else(|| (sight.follow)("cluster", "location")?.as_str().map(str::to_owned));
        let (Some(location), Some(machine_type)) = (location, sight.text("machine_type")) else {
            return Some(Meter::after_apply("location or machine type"));
        };
        if sight.unknown(&["node_count", "min_node_count", "max_node_count", "node_locations"]) {
            return Some(Meter::after_apply("size"));
        }
        let region = crate::cost::google_region(&location);
        let parts = match crate::cost::gce::machine(&region, machine_type) {
            Ok(parts) => parts,
            Err(reason) => return Some(Meter::Unpriced { reason }),
        };
        if sight.text("accelerator_type").is_some() && !parts.iter().any(|(rate, _)| matches!(rate, crate::cost::Rate::GceGpu { .. })) {
            return Some(Meter::Unpriced {
                reason: "forge does not price GPUs attached to a pool's machines yet".into(),
            });
        }
        // Its nodes are per zone: its own zones, else its cluster's — one for a zonal cluster,
        // GKE's default of three for a regional one.
        let zones = match sight.get("node_locations").and_then(Value::as_array) {
            Some(zones) if !zones.is_empty() => zones.len() as u32,
            _ if region == location => 3,
            _ => 1,
        };
        let per_zone = |key: &str| sight.number(key).and_then(|n| u32::try_from(n).ok());
        let (min, max) = (per_zone("min_node_count"), per_zone("max_node_count"));
        let planned = per_zone("node_count").or(min).unwrap_or(0);
        let count = Count {
            min: min.unwrap_or(planned) * zones,
            planned: planned * zones,
            max: max.unwrap_or(planned) * zones,
        };
        let flag = |key: &str| sight.get(key) == Some(&Value::Bool(true));
        let upper_bound = if flag("spot") {
            Some("spot, priced on demand".to_owned())
        } else if flag("flex_start") || flag("queued_provisioning") {
            Some("flex-start, priced on demand".to_owned())
        } else {
            None
        };
        Some(Meter::Hourly {
            what: match zones {
                1 => machine_type.to_owned(),
                n => format!("{machine_type} in {n} zones"),
            },
            parts,
            count,
            upper_bound,
        })
    }
    /// Networks and subnetworks as GKE reports them: by name.
    fn comparable(&self, _id: &str, config: &Value) -> Value {
        let mut config = config.clone();
        if let Some(networks) = config.get_mut("additional_networks").and_then(Value::as_array_mut) {
            for network in networks {
                for key in ["network", "subnetwork"] {
                    if let Some(link) = network.get(key).and_then(Value::as_str) {
                        network[key] = json!(super::collection::last_segment(link));
                    }
                }
            }
        }
        if let Some(taints) = config.get_mut("taints").and_then(Value::as_array_mut) {
            for taint in taints.iter_mut().filter(|t| t.get("value").is_none()) {
                taint["value"] = json!("");
            }
        }
        config
    }

    /// The cluster's: GKE runs one operation at a time on a cluster and its pools.
    fn serialization_key(&self, config: &Value) -> Option<String> {
        let (location, name) = cluster_of(config.get("cluster").and_then(Value::as_str)?);
        Some(gke::serialization_key(location, name))
    }

    /// A fixed size or autoscaling: the attributes of the mode the pool is not in are absent,
    /// so a pool switched to the other mode outside forge shows as drift of both modes'.
    fn presence(&self) -> &'static [&'static str] {
        &["node_count", "min_node_count", "max_node_count"]
    }

    /// A `version` of an earlier minor version than the pool runs.
    fn refusal(&self, before: &Value, after: &Value, outputs: &Value) -> Option<Refusal> {
        gke::downgrade(
            before,
            after,
            outputs,
            "a node pool",
            "an earlier version needs a new pool (another `name`)",
        )
    }

    /// An autoscaled pool's size is the autoscaler's.
    fn ignored_by_default(&self, config: &Value) -> Vec<String> {
        if config.get("min_node_count").is_some() || config.get("max_node_count").is_some() {
            vec!["node_count".into()]
        } else {
            Vec::new()
        }
    }

    /// A pool on additional networks (GPUDirect) needs its cluster's multi-networking, which
    /// GKE takes only with Dataplane V2: a cluster forge reads (`existing`) may lack it, so the
    /// plan says so before the networks and the pool are made.
    async fn dry_run(&self, ctx: &Ctx, config: &Value) -> Result<Option<String>, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        if cfg.additional_networks.is_empty() {
            return Ok(None);
        }
        let gcp = ctx.cloud.gcp().await?;
        let Some(cluster) = super::container_cluster::get(gcp, &cfg.cluster).await? else {
            return Ok(None);
        };
        let network = cluster.network_config.as_ref();
        // A cluster of this stack gets multi-networking from its own block, in the same apply.
        let (_, mark) = split_description(&cluster.description);
        let ours = mark.is_some_and(|m| m.get("forge:stack") == Some(&ctx.stack));
        if ours || network.is_some_and(|n| n.enable_multi_networking) {
            return Ok(None);
        }
        let (location, name) = cluster_of(&cfg.cluster);
        let dataplane_v2 = network.and_then(|n| n.datapath_provider.name()) == Some("ADVANCED_DATAPATH");
        Ok(Some(format!(
            "node pool `{}` talks GPUDirect over {} additional networks, and cluster `{name}` has multi-networking off{}: turn it on (`gcloud container clusters update {name} --location {location} --enable-multi-networking`), or put the pool on a cluster forge makes",
            cfg.name,
            cfg.additional_networks.len(),
            if dataplane_v2 {
                ""
            } else {
                " (it also needs GKE Dataplane V2, which is set when a cluster is made)"
            }
        )))
    }

    /// Creates the pool, or resumes the create that made it (see [`resumable::create`]).
    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let gcp = ctx.cloud.gcp().await?;
        let id = format!("{}/nodePools/{}", cfg.cluster, cfg.name);
        let limit = timeout(config, "create", CREATE_TIMEOUT);
        let cluster = cluster_token(gcp, &cfg.cluster).await?;
        let owned = |p: &NodePool| made_by(ctx, token, cluster.as_deref(), p);
        let p = resumable::create::<Pools, _>(ctx, gcp, &id, &cfg.name, limit, owned, || {
            let pool = cfg.model(pool_mark(ctx, token));
            Ok(gcp.container.create_node_pool().set_parent(&cfg.cluster).set_node_pool(pool).send())
        })
        .await?;
        Ok(Created {
            outputs: outputs(&id, &p),
            id,
        })
    }

    /// One list per cluster of the recorded pools (a pool outside the state goes with its
    /// cluster, whose read reports it), and the size of each pool of a fixed size.
    async fn read(&self, cloud: &Cloud, _stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        let gcp = cloud.gcp().await?;
        let clusters: std::collections::BTreeSet<&str> = ids.iter().filter_map(|id| id.split("/nodePools/").next()).collect();
        let mut seen = Vec::new();
        for cluster in clusters {
            let sent = gcp.container.list_node_pools().set_parent(cluster).send().await;
            let Some(listed) = found(sent, |e| gke::error(gcp, "nodePools.list", e))? else {
                continue;
            };
            for p in listed.node_pools.iter().filter(|p| p.status != node_pool::Status::Stopping) {
                let id = format!("{cluster}/nodePools/{}", p.name);
                if ids.contains(&id) {
                    let mut attributes = attributes(p);
                    if let Some(size) = size(gcp, p).await? {
                        attributes["node_count"] = json!(size);
                    }
                    seen.push(Observed {
                        attributes,
                        address: None,
                        id,
                    });
                }
            }
        }
        Ok(seen)
    }

    async fn find(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Option<String>, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let gcp = ctx.cloud.gcp().await?;
        let id = format!("{}/nodePools/{}", cfg.cluster, cfg.name);
        let cluster = cluster_token(gcp, &cfg.cluster).await?;
        resumable::find::<Pools>(gcp, id, |p| made_by(ctx, token, cluster.as_deref(), p)).await
    }

    /// Autoscaling, size (set again when autoscaling is turned off: the pool keeps the
    /// autoscaler's), management, the version, and labels and taints (one node pool update),
    /// each waited for before the next.
    async fn update(&self, ctx: &Ctx, id: &str, old: &Value, new: &Value) -> Result<Value, ProviderError> {
        let before: Config = parse(ctx, old)?;
        let cfg: Config = parse(ctx, new)?;
        let gcp = ctx.cloud.gcp().await?;
        let limit = timeout(new, "update", CHANGE_TIMEOUT);
        let client = &gcp.container;
        if (cfg.min_node_count, cfg.max_node_count) != (before.min_node_count, before.max_node_count) {
            let call = client.set_node_pool_autoscaling().set_name(id).set_autoscaling(cfg.autoscaling());
            gke::changed(ctx, gcp, "nodePools.setAutoscaling", id, call.send(), limit).await?;
        }
        let autoscaling_off = before.autoscaled() && !cfg.autoscaled();
        if let Some(count) = cfg.node_count.filter(|count| before.node_count != Some(*count) || autoscaling_off) {
            let call = client.set_node_pool_size().set_name(id).set_node_count(count as i32);
            gke::changed(ctx, gcp, "nodePools.setSize", id, call.send(), limit).await?;
        }
        if (cfg.auto_repair, cfg.auto_upgrade) != (before.auto_repair, before.auto_upgrade) {
            let call = client.set_node_pool_management().set_name(id).set_management(cfg.management());
            gke::changed(ctx, gcp, "nodePools.setManagement", id, call.send(), limit).await?;
        }
        if cfg.version != before.version
            && let Some(version) = &cfg.version
        {
            let call = client.update_node_pool().set_name(id).set_node_version(version);
            gke::changed(ctx, gcp, "nodePools.update", id, call.send(), limit).await?;
        }
        if (&cfg.labels, &cfg.resource_labels, &cfg.taints) != (&before.labels, &before.resource_labels, &before.taints) {
            let live = resumable::get::<Pools>(gcp, id).await?.and_then(|p| p.config).unwrap_or_default();
            let mark = live.resource_labels.into_iter().filter(|(k, _)| is_mark(k));
            let call = client
                .update_node_pool()
                .set_name(id)
                .set_labels(NodeLabels::new().set_labels(cfg.labels.clone()))
                .set_resource_labels(ResourceLabels::new().set_labels(cfg.resource_labels.clone().into_iter().chain(mark)))
                .set_taints(NodeTaints::new().set_taints(cfg.taints()));
            gke::changed(ctx, gcp, "nodePools.update", id, call.send(), limit).await?;
        }
        let p = resumable::wait_ready::<Pools>(ctx, gcp, id, limit).await?;
        Ok(outputs(id, &p))
    }

    async fn delete(&self, ctx: &Ctx, id: &str, config: &Value) -> Result<(), ProviderError> {
        let gcp = ctx.cloud.gcp().await?;
        resumable::delete::<Pools>(ctx, gcp, id, timeout(config, "delete", CHANGE_TIMEOUT)).await
    }
}
