//! `google_container_cluster`: a GKE Standard cluster, VPC-native on named secondary ranges,
//! with Dataplane V2, multi-networking, release channel or version, workload identity, private
//! nodes, a private endpoint and authorized networks, the Filestore and Cloud Storage FUSE CSI add-ons, and labels.
//!
//! A Standard cluster cannot be created without nodes: GKE makes a `default-pool` when no pool
//! is given, which Terraform then deletes — minutes of create and delete for nothing. forge
//! creates the cluster with its first real pool inline (`initial_node_pool`, read by the create
//! only) and forge's mark on it, so the `google_container_node_pool` block of that pool adopts
//! it instead of creating it. GKE has no deletion protection of its own (Terraform's is a
//! client-side flag), so there is none to turn off here.

use super::Clients;
use super::container_node_pool::inline_pool;
use super::gke::{self, CHANGE_TIMEOUT, CREATE_TIMEOUT, cluster_id, cluster_of};
use super::marker::{made_by, marked_description, observed};
use super::resumable::{self, Tracked};
use crate::provider::{Cloud, Created, Ctx, Found, Lookups, Observed, ProviderError, Refusal, Resource, Selector, parse, timeout};
use crate::schema::attributes;
use google_cloud_container_v1::model::{
    AddonsConfig, Cluster, ClusterUpdate, DatapathProvider, GcpFilestoreCsiDriverConfig, GcsFuseCsiDriverConfig, IPAllocationPolicy,
    MasterAuthorizedNetworksConfig, NetworkConfig, Operation, PrivateClusterConfig, ReleaseChannel, WorkloadIdentityConfig, cluster,
    master_authorized_networks_config::CidrBlock, release_channel::Channel,
};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

/// The `google_container_cluster` kind.
pub(super) struct ContainerCluster;

attributes! {
    kind ContainerCluster, spec "google_container_cluster", outputs [id, name = attribute, location = attribute, endpoint, certificate_authority, version, workload_pool, self_link], extra [timeouts];
    struct Config {
        name: String [replace],
        location: String [replace],
        description: Option<String> [replace],
        network: String [replace],
        subnetwork: String [replace],
        pods_range: Option<String> [replace],
        services_range: Option<String> [replace],
        #[serde(default = "advanced_datapath")] datapath_provider: String [replace],
        #[serde(default)] multi_networking: bool,
        release_channel: Option<String>,
        version: Option<String>,
        #[serde(default = "yes")] workload_identity: bool,
        #[serde(default)] private_nodes: bool [replace],
        #[serde(default)] private_endpoint: bool,
        master_cidr: Option<String> [replace],
        authorized_networks: Option<Vec<String>>,
        #[serde(default)] filestore_csi: bool,
        #[serde(default)] gcs_fuse_csi: bool,
        #[serde(default)] labels: BTreeMap<String, String>,
        initial_node_pool: Value [create_only],
    }
}

fn advanced_datapath() -> String {
    "ADVANCED_DATAPATH".into()
}

fn yes() -> bool {
    true
}

/// The project's GKE clusters.
struct Clusters;

impl Tracked for Clusters {
    type Object = Cluster;
    type Operation = Operation;
    const WHAT: &'static str = "GKE cluster";
    const PATH: &'static str = "clusters";
    const MAKING: &'static str = "PROVISIONING";
    const GOING: &'static str = "STOPPING";

    fn error(gcp: &Clients, what: &str, err: google_cloud_compute_v1::Error) -> ProviderError {
        gke::error(gcp, what, err)
    }

    /// Retried while another operation runs on the cluster (see [`gke::refused`]).
    async fn refused(gcp: &Clients, id: &str, what: &str, err: google_cloud_compute_v1::Error) -> ProviderError {
        gke::refused(gcp, what, id, err).await
    }

    async fn get(gcp: &Clients, id: &str) -> Result<Cluster, google_cloud_compute_v1::Error> {
        gcp.container.get_cluster().set_name(id).send().await
    }

    async fn delete(gcp: &Clients, id: &str) -> Result<Operation, google_cloud_compute_v1::Error> {
        gcp.container.delete_cluster().set_name(id).send().await
    }

    async fn wait(ctx: &Ctx, gcp: &Clients, what: &str, op: Operation, limit: Duration) -> Result<(), ProviderError> {
        gke::wait_operation(ctx, gcp, what, op, limit).await
    }

    fn state(c: &Cluster) -> Option<&str> {
        c.status.name()
    }

    /// RUNNING, or DEGRADED: up, with a warning GKE shows.
    fn ready(c: &Cluster) -> bool {
        matches!(c.status, cluster::Status::Running | cluster::Status::Degraded)
    }

    fn broken(c: &Cluster) -> bool {
        c.status == cluster::Status::Error
    }

    fn failure(gcp: &Clients, id: &str, c: &Cluster) -> String {
        format!(
            "GKE cluster `{id}` is in ERROR: {} ({})",
            gke::conditions(&c.conditions),
            gcp.container_context
        )
    }
}

/// The cluster `id` names, or `None`.
pub async fn get(gcp: &Clients, id: &str) -> Result<Option<Cluster>, ProviderError> {
    resumable::get::<Clusters>(gcp, id).await
}

fn outputs(id: &str, c: &Cluster) -> Value {
    json!({
        "id": id,
        "name": c.name,
        "location": c.location,
        "endpoint": c.endpoint,
        "certificate_authority": c.master_auth.as_ref().map(|a| a.cluster_ca_certificate.clone()),
        "version": c.current_master_version,
        "workload_pool": c.workload_identity_config.as_ref().map(|w| w.workload_pool.clone()).filter(|p| !p.is_empty()),
        "self_link": c.self_link,
    })
}

#[allow(deprecated)] // GKE's API still takes and reports these, as gcloud and Terraform use them.
fn authorized(networks: &Option<Vec<String>>) -> MasterAuthorizedNetworksConfig {
    MasterAuthorizedNetworksConfig::new()
        .set_enabled(networks.is_some())
        .set_cidr_blocks(networks.iter().flatten().map(|c| CidrBlock::new().set_cidr_block(c)))
}

fn addons(cfg: &Config) -> AddonsConfig {
    AddonsConfig::new()
        .set_gcp_filestore_csi_driver_config(GcpFilestoreCsiDriverConfig::new().set_enabled(cfg.filestore_csi))
        .set_gcs_fuse_csi_driver_config(GcsFuseCsiDriverConfig::new().set_enabled(cfg.gcs_fuse_csi))
}

fn workload_identity(gcp: &Clients, on: bool) -> WorkloadIdentityConfig {
    WorkloadIdentityConfig::new().set_workload_pool(if on {
        format!("{}.svc.id.goog", gcp.project)
    } else {
        String::new()
    })
}

/// The cluster as the create sends it, with its first node pool inline.
#[allow(deprecated)] // private nodes and authorized networks as gcloud and Terraform set them
fn body(ctx: &Ctx, gcp: &Clients, token: &str, cfg: &Config) -> Result<Cluster, ProviderError> {
    let mut policy = IPAllocationPolicy::new().set_use_ip_aliases(true);
    if let Some(range) = &cfg.pods_range {
        policy = policy.set_cluster_secondary_range_name(range);
    }
    if let Some(range) = &cfg.services_range {
        policy = policy.set_services_secondary_range_name(range);
    }
    let mut cluster = Cluster::new()
        .set_name(&cfg.name)
        .set_description(marked_description(ctx, token, cfg.description.as_deref()))
        .set_network(super::collection::last_segment(&cfg.network))
        .set_subnetwork(super::collection::last_segment(&cfg.subnetwork))
        .set_ip_allocation_policy(policy)
        .set_network_config(
            NetworkConfig::new()
                .set_datapath_provider(DatapathProvider::from(cfg.datapath_provider.as_str()))
                .set_enable_multi_networking(cfg.multi_networking),
        )
        .set_addons_config(addons(cfg))
        .set_resource_labels(cfg.labels.clone())
        .set_node_pools([inline_pool(ctx, token, &cfg.initial_node_pool)?]);
    if let Some(channel) = &cfg.release_channel {
        cluster = cluster.set_release_channel(ReleaseChannel::new().set_channel(Channel::from(channel.as_str())));
    }
    if let Some(version) = &cfg.version {
        cluster = cluster.set_initial_cluster_version(version);
    }
    if cfg.workload_identity {
        cluster = cluster.set_workload_identity_config(workload_identity(gcp, true));
    }
    if cfg.private_nodes {
        let mut private = PrivateClusterConfig::new()
            .set_enable_private_nodes(true)
            .set_enable_private_endpoint(cfg.private_endpoint);
        if let Some(cidr) = &cfg.master_cidr {
            private = private.set_master_ipv4_cidr_block(cidr);
        }
        cluster = cluster.set_private_cluster_config(private);
    }
    if cfg.authorized_networks.is_some() {
        cluster = cluster.set_master_authorized_networks_config(authorized(&cfg.authorized_networks));
    }
    Ok(cluster)
}

/// What the kind compares of a live cluster, in its block's terms.
#[allow(deprecated)] // private nodes and authorized networks as gcloud and Terraform read them
fn attributes(c: &Cluster, own: &str) -> Value {
    let addons = c.addons_config.as_ref();
    let network = c.network_config.as_ref();
    let authorized = c.master_authorized_networks_config.as_ref().filter(|a| a.enabled);
    json!({
        "name": c.name,
        "location": c.location,
        "description": own,
        "network": c.network,
        "subnetwork": c.subnetwork,
        "pods_range": c.ip_allocation_policy.as_ref().map(|p| p.cluster_secondary_range_name.clone()).filter(|r| !r.is_empty()),
        "services_range": c.ip_allocation_policy.as_ref().map(|p| p.services_secondary_range_name.clone()).filter(|r| !r.is_empty()),
        "datapath_provider": network.and_then(|n| n.datapath_provider.name()),
        "multi_networking": network.is_some_and(|n| n.enable_multi_networking),
        "release_channel": c.release_channel.as_ref().and_then(|r| r.channel.name()),
        "workload_identity": c.workload_identity_config.as_ref().is_some_and(|w| !w.workload_pool.is_empty()),
        "private_nodes": c.private_cluster_config.as_ref().is_some_and(|p| p.enable_private_nodes),
        "private_endpoint": c.private_cluster_config.as_ref().is_some_and(|p| p.enable_private_endpoint),
        "authorized_networks": authorized.map(|a| a.cidr_blocks.iter().map(|b| b.cidr_block.clone()).collect::<Vec<_>>()),
        "filestore_csi": addons.and_then(|a| a.gcp_filestore_csi_driver_config.as_ref()).is_some_and(|f| f.enabled),
        "gcs_fuse_csi": addons.and_then(|a| a.gcs_fuse_csi_driver_config.as_ref()).is_some_and(|f| f.enabled),
        "labels": c.resource_labels,
    })
}

impl Resource for ContainerCluster {
    /// GKE's cluster management fee, by the hour.
    fn meter(&self, sight: &crate::cost::Sight) -> Option<crate::cost::Meter> {
        let Some(location) = sight.text("location") else {
            return Some(crate::cost::Meter::Unpriced {
                reason: "its location is known only after apply".into(),
            });
        };
        Some(crate::cost::Meter::Hourly {
            what: "GKE cluster".into(),
            parts: vec![(
                crate::cost::Rate::GkeCluster {
                    region: crate::cost::google_region(location),
                },
                1.0,
            )],
            count: crate::cost::Count::ONE,
            upper_bound: None,
        })
    }
    fn comparable(&self, _id: &str, config: &Value) -> Value {
        let mut config = super::collection::network_by_name(config);
        if let Some(subnetwork) = config.get("subnetwork").and_then(Value::as_str) {
            config["subnetwork"] = json!(super::collection::last_segment(subnetwork));
        }
        config
    }

    fn serialization_key(&self, config: &Value) -> Option<String> {
        let text = |key: &str| config.get(key).and_then(Value::as_str).unwrap_or_default();
        Some(gke::serialization_key(text("location"), text("name")))
    }

    /// A `version` of an earlier minor version than the control plane runs.
    fn refusal(&self, before: &Value, after: &Value, outputs: &Value) -> Option<Refusal> {
        gke::downgrade(
            before,
            after,
            outputs,
            "the control plane",
            "an earlier version needs a new cluster",
        )
    }

    /// Creates the cluster with its first pool, or resumes the create that made it (see
    /// [`resumable::create`]).
    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let gcp = ctx.cloud.gcp().await?;
        let id = cluster_id(gcp, &cfg.location, &cfg.name);
        let limit = timeout(config, "create", CREATE_TIMEOUT);
        let parent = format!("projects/{}/locations/{}", gcp.project, cfg.location);
        let owned = |c: &Cluster| made_by(ctx, token, Some(&c.description));
        let c = resumable::create::<Clusters, _>(ctx, gcp, &id, &cfg.name, limit, owned, || {
            let body = body(ctx, gcp, token, &cfg)?;
            Ok(gcp.container.create_cluster().set_parent(&parent).set_cluster(body).send())
        })
        .await?;
        Ok(Created {
            outputs: outputs(&id, &c),
            id,
        })
    }

    /// One list of every location's clusters: the recorded ones, and the others that carry
    /// this stack's mark. A recorded cluster the list does not show is gone.
    async fn read(&self, cloud: &Cloud, stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        let gcp = cloud.gcp().await?;
        let listed = gcp
            .container
            .list_clusters()
            .set_parent(format!("projects/{}/locations/-", gcp.project))
            .send()
            .await
            .map_err(|e| gke::error(gcp, "clusters.list", e))?;
        let mut seen = Vec::new();
        for c in listed.clusters.iter().filter(|c| c.status != cluster::Status::Stopping) {
            let id = cluster_id(gcp, &c.location, &c.name);
            seen.extend(observed(stack, ids, id, &c.description, |own| attributes(c, own)));
        }
        Ok(seen)
    }

    fn lookups(&self) -> Lookups {
        Lookups {
            id: Some("a cluster's path, projects/…/locations/…/clusters/…"),
            tags: false,
            attributes: &[],
        }
    }

    /// An existing cluster by its path, in the stack's project: one get. One that is not
    /// RUNNING is an error: pools cannot be added to it.
    async fn look_up(&self, cloud: &Cloud, selector: &Selector) -> Result<Vec<Found>, ProviderError> {
        let Selector::Id(id) = selector else {
            return Err(ProviderError::permanent("GKE finds clusters by path: name the cluster"));
        };
        let gcp = cloud.gcp().await?;
        let (location, name) = gke::cluster_of(id);
        if location.is_empty() || name.is_empty() || !id.starts_with("projects/") {
            return Err(ProviderError::permanent(format!(
                "`{id}` is not a cluster's path: write `projects/<project>/locations/<location>/clusters/<name>`"
            )));
        }
        let canonical = cluster_id(gcp, location, name);
        if canonical != *id {
            return Err(ProviderError::permanent(format!(
                "`{id}` is not in the stack's project `{}` (`[gcp] project`): forge reads existing clusters there",
                gcp.project
            )));
        }
        let Some(c) = get(gcp, id).await? else {
            return Ok(Vec::new());
        };
        if c.status != cluster::Status::Running {
            return Err(ProviderError::permanent(format!(
                "the GKE cluster `{name}` is {}, not RUNNING",
                c.status.name().unwrap_or("in an unknown state")
            )));
        }
        Ok(vec![Found {
            outputs: outputs(id, &c),
            attributes: attributes(&c, &c.description),
            id: id.clone(),
        }])
    }

    async fn find(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Option<String>, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let gcp = ctx.cloud.gcp().await?;
        let id = cluster_id(gcp, &cfg.location, &cfg.name);
        resumable::find::<Clusters>(gcp, id, |c| made_by(ctx, token, Some(&c.description))).await
    }

    /// Each changed setting is one GKE update (GKE takes one field per request), waited for
    /// before the next; labels go through `setResourceLabels` with the current fingerprint.
    async fn update(&self, ctx: &Ctx, id: &str, old: &Value, new: &Value) -> Result<Value, ProviderError> {
        let before: Config = parse(ctx, old)?;
        let cfg: Config = parse(ctx, new)?;
        let gcp = ctx.cloud.gcp().await?;
        let limit = timeout(new, "update", CHANGE_TIMEOUT);
        let mut updates = Vec::new();
        if cfg.version != before.version
            && let Some(version) = &cfg.version
        {
            updates.push(ClusterUpdate::new().set_desired_master_version(version));
        }
        if cfg.release_channel != before.release_channel {
            let channel = Channel::from(cfg.release_channel.as_deref().unwrap_or("UNSPECIFIED"));
            updates.push(ClusterUpdate::new().set_desired_release_channel(ReleaseChannel::new().set_channel(channel)));
        }
        if cfg.multi_networking != before.multi_networking {
            updates.push(ClusterUpdate::new().set_desired_enable_multi_networking(cfg.multi_networking));
        }
        if cfg.workload_identity != before.workload_identity {
            updates.push(ClusterUpdate::new().set_desired_workload_identity_config(workload_identity(gcp, cfg.workload_identity)));
        }
        if (cfg.filestore_csi, cfg.gcs_fuse_csi) != (before.filestore_csi, before.gcs_fuse_csi) {
            updates.push(ClusterUpdate::new().set_desired_addons_config(addons(&cfg)));
        }
        #[allow(deprecated)]
        if cfg.private_endpoint != before.private_endpoint {
            updates.push(ClusterUpdate::new().set_desired_enable_private_endpoint(cfg.private_endpoint));
        }
        #[allow(deprecated)]
        if cfg.authorized_networks != before.authorized_networks {
            updates.push(ClusterUpdate::new().set_desired_master_authorized_networks_config(authorized(&cfg.authorized_networks)));
        }
        for update in updates {
            let call = gcp.container.update_cluster().set_name(id).set_update(update);
            gke::changed(ctx, gcp, "clusters.update", id, call.send(), limit).await?;
        }
        if cfg.labels != before.labels {
            let live = get(gcp, id).await?.ok_or_else(|| gone(id))?;
            let call = gcp
                .container
                .set_labels()
                .set_name(id)
                .set_resource_labels(cfg.labels.clone())
                .set_label_fingerprint(live.label_fingerprint);
            gke::changed(ctx, gcp, "clusters.setResourceLabels", id, call.send(), limit).await?;
        }
        let c = resumable::wait_ready::<Clusters>(ctx, gcp, id, limit).await?;
        Ok(outputs(id, &c))
    }

    /// Deleting the cluster deletes what is left of its node pools.
    async fn delete(&self, ctx: &Ctx, id: &str, config: &Value) -> Result<(), ProviderError> {
        let gcp = ctx.cloud.gcp().await?;
        resumable::delete::<Clusters>(ctx, gcp, id, timeout(config, "delete", CHANGE_TIMEOUT)).await
    }
}

/// The error for a cluster that vanished under an update.
fn gone(id: &str) -> ProviderError {
    let (location, name) = cluster_of(id);
    ProviderError::permanent(format!(
        "the GKE cluster `{name}` in {location} is gone; run `forge up` again to create it"
    ))
}
