//! `google_compute_network`: a VPC network in custom mode (forge makes the subnetworks itself),
//! with its MTU (8896 for GPUDirect's extra networks) and routing mode, both changed in place
//! (one `networks.patch`): a new MTU does not take the network and everything on it down.

use super::collection::{self, Scope};
use super::marker::marked_description;
use crate::provider::{Cloud, Created, Ctx, Observed, ProviderError, Resource, parse};
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
        #[serde(default = "default_mtu")] mtu: i64,
        #[serde(default = "regional")] routing_mode: String,
        #[serde(default)] auto_create_subnetworks: bool [replace],
    }
}

fn default_mtu() -> i64 {
    1460
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

fn routing(mode: &str) -> NetworkRoutingConfig {
    NetworkRoutingConfig::new().set_routing_mode(RoutingMode::from(mode))
}

impl Resource for Network {
    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let gcp = ctx.cloud.gcp().await?;
        let body = Model::new()
            .set_name(&cfg.name)
            .set_description(marked_description(ctx, token, cfg.description.as_deref()))
            .set_auto_create_subnetworks(cfg.auto_create_subnetworks)
            .set_mtu(cfg.mtu as i32)
            .set_routing_config(routing(&cfg.routing_mode));
        collection::create::<Networks>(ctx, gcp, token, &Scope::Global, body, config, outputs).await
    }

    async fn read(&self, cloud: &Cloud, stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        collection::read::<Networks>(cloud.gcp().await?, stack, ids, |n, own| {
            json!({
                "name": n.name,
                "description": own,
                "mtu": n.mtu,
                "routing_mode": n.routing_config.as_ref().and_then(|r| r.routing_mode.as_ref()).and_then(|m| m.name()),
                "auto_create_subnetworks": n.auto_create_subnetworks.unwrap_or(false),
            })
        })
        .await
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
        if cfg.mtu != before.mtu {
            body = body.set_mtu(cfg.mtu as i32);
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
