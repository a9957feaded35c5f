//! `google_compute_network`: a VPC network in custom mode (forge makes the subnetworks itself),
//! with its MTU (8244 for GPUDirect-TCPX's extra networks) and routing mode, both changed in
//! place (one `networks.patch`): a new MTU does not take the network and everything on it down.
//! A network made with a `network_profile` (`us-central1-b-vpc-roce`: the RDMA VPC of A3 Ultra,
//! A4 and A4X) is zonal and takes only RDMA NICs; its profile is fixed at create, and its MTU
//! defaults to the profile's 8896.

use super::collection::{self, Scope};
use super::marker::marked_description;
use crate::provider::{Cloud, Created, Ctx, Found, Lookups, Observed, ProviderError, Resource, Selector, parse};
use crate::schema::attributes;
use google_cloud_compute_v1::model::network_routing_config::RoutingMode;
use google_cloud_compute_v1::model::{Network as Model, NetworkRoutingConfig};
use serde_json::{Value, json};

/// The `google_compute_network` kind.
pub(super) struct Network;

attributes! {
    kind Network, spec "google_compute_network", outputs [id, name = attribute, self_link], extra [timeouts];
    struct Config {
        name: String [replace],
        description: Option<String> [replace],
        mtu: Option<i64>,
        #[serde(default = "regional")] routing_mode: String,
        #[serde(default)] auto_create_subnetworks: bool [replace],
        network_profile: Option<String> [replace],
    }
}

/// The MTU of a network made with an RDMA profile when the block gives none.
const RDMA_MTU: i64 = 8896;

impl Config {
    /// The MTU given, else Compute's default: 8896 on a network with a (RDMA) profile, else 1460.
    fn mtu(&self) -> i64 {
        self.mtu.unwrap_or(if self.network_profile.is_some() { RDMA_MTU } else { 1460 })
    }
}

/// A network profile as the API takes it: a bare profile name (`us-central1-b-vpc-roce`) in
/// the project's global profiles; a path or URL as given (a path without its project is a 400).
fn profile_path(project: &str, profile: &str) -> String {
    if profile.contains('/') {
        profile.to_owned()
    } else {
        format!("projects/{project}/global/networkProfiles/{profile}")
    }
}

fn regional() -> String {
    "REGIONAL".into()
}

compute_collection!(
    /// The project's networks.
    Networks: Model, networks.set_network, "network");

fn outputs(id: &str, network: &Model) -> Value {
    json!({ "id": id, "name": network.name, "self_link": network.self_link })
}

/// What a read reports of a network, given its own part of the description.
fn read_attributes(n: &Model, own: &str) -> Value {
    json!({
        "name": n.name,
        "description": own,
        "mtu": n.mtu,
        "routing_mode": n.routing_config.as_ref().and_then(|r| r.routing_mode.as_ref()).and_then(|m| m.name()),
        "auto_create_subnetworks": n.auto_create_subnetworks.unwrap_or(false),
        "network_profile": n.network_profile.as_deref().map(collection::last_segment),
    })
}

fn routing(mode: &str) -> NetworkRoutingConfig {
    NetworkRoutingConfig::new().set_routing_mode(RoutingMode::from(mode))
}

impl Resource for Network {
    /// The MTU the network gets when the block gives none, and the profile by name, as read.
    fn comparable(&self, _id: &str, config: &Value) -> Value {
        let mut config = config.clone();
        if config.get("mtu").is_none() {
            config["mtu"] = json!(if config.get("network_profile").is_some() { RDMA_MTU } else { 1460 });
        }
        if let Some(profile) = config.get("network_profile").and_then(Value::as_str) {
            config["network_profile"] = json!(collection::last_segment(profile));
        }
        config
    }

    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let gcp = ctx.cloud.gcp().await?;
        let body = Model::new()
            .set_name(&cfg.name)
            .set_description(marked_description(ctx, token, cfg.description.as_deref()))
            .set_auto_create_subnetworks(cfg.auto_create_subnetworks)
            .set_mtu(cfg.mtu() as i32)
            .set_routing_config(routing(&cfg.routing_mode))
            .set_or_clear_network_profile(cfg.network_profile.as_deref().map(|p| profile_path(&gcp.project, p)));
        collection::create::<Networks>(ctx, gcp, token, &Scope::Global, body, config, outputs).await
    }

    async fn read(&self, cloud: &Cloud, stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        collection::read::<Networks>(cloud.gcp().await?, stack, ids, read_attributes).await
    }

    fn lookups(&self) -> Lookups {
        Lookups {
            id: Some("a network name, or its path projects/…/global/networks/…"),
            tags: false,
            attributes: &[],
        }
    }

    async fn look_up(&self, cloud: &Cloud, selector: &Selector) -> Result<Vec<Found>, ProviderError> {
        collection::look_up::<Networks>(cloud.gcp().await?, selector, outputs, read_attributes).await
    }

    async fn find(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Option<String>, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        collection::find::<Networks>(ctx, token, &cfg.name, None).await
    }

    /// The routing mode and the MTU change in place: one patch of what changed (Compute
    /// applies a new MTU to the network's VMs as they restart).
    async fn update(&self, ctx: &Ctx, id: &str, old: &Value, new: &Value) -> Result<Value, ProviderError> {
        let before: Config = parse(ctx, old)?;
        let cfg: Config = parse(ctx, new)?;
        let gcp = ctx.cloud.gcp().await?;
        let mut body = Model::new();
        if cfg.routing_mode != before.routing_mode {
            body = body.set_routing_config(routing(&cfg.routing_mode));
        }
        if cfg.mtu() != before.mtu() {
            body = body.set_mtu(cfg.mtu() as i32);
        }
        let call = gcp
            .networks
            .patch()
            .set_project(&gcp.project)
            .set_network(&cfg.name)
            .set_request_id(super::operation::fresh_request_id())
            .set_body(body);
        collection::changed::<Networks>(ctx, gcp, "networks.patch", id, call.send(), new, outputs).await
    }

    /// A network that still has subnetworks, firewall rules or routers fails its delete
    /// operation "in use": retried while they go, then reported naming them.
    async fn delete(&self, ctx: &Ctx, id: &str, config: &Value) -> Result<(), ProviderError> {
        collection::delete::<Networks>(ctx, ctx.cloud.gcp().await?, id, config).await
    }
}
