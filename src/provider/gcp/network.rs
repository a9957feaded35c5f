//! `google_compute_network`: a VPC network in custom mode (forge makes the subnetworks itself),
//! with its MTU (8896 for GPUDirect's extra networks) and routing mode.

use super::{Clients, OPERATION_TIMEOUT, error, insert, not_found, wait_operation};
use crate::provider::{Cloud, Created, Ctx, Observed, ProviderError, Resource, Spec, parse, timeout};
use crate::schema::attributes;
use google_cloud_compute_v1::model::network_routing_config::RoutingMode;
use google_cloud_compute_v1::model::{Network as Model, NetworkRoutingConfig};
use serde_json::{Value, json};

/// The `google_compute_network` kind.
pub struct Network;

attributes! {
    spec "google_compute_network", outputs ["id", "name", "self_link"], extra [timeouts];
    struct Config {
        name: String [replace],
        description: Option<String> [replace],
        #[serde(default = "default_mtu")] mtu: i64 [replace],
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

/// The network's id: its path below the API root.
fn id(gcp: &Clients, name: &str) -> String {
    format!("projects/{}/global/networks/{name}", gcp.project)
}

fn outputs(gcp: &Clients, network: &Model) -> Value {
    let name = network.name.as_deref().unwrap_or_default();
    json!({ "id": id(gcp, name), "name": name, "self_link": network.self_link })
}

async fn get(gcp: &Clients, name: &str) -> Result<Option<Model>, ProviderError> {
    match gcp.networks.get().set_project(&gcp.project).set_network(name).send().await {
        Ok(network) => Ok(Some(network)),
        Err(e) if not_found(&e) => Ok(None),
        Err(e) => Err(error(gcp, "networks.get", e)),
    }
}

fn routing(mode: &str) -> NetworkRoutingConfig {
    NetworkRoutingConfig::new().set_routing_mode(RoutingMode::from(mode))
}

impl Resource for Network {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }

    fn planned_outputs(&self, config: &Value, prior: Option<&Value>) -> Value {
        json!({
            "id": crate::provider::prior_output(prior, "id"),
            "name": config.get("name"),
            "self_link": crate::provider::prior_output(prior, "self_link"),
        })
    }

    /// Inserts with the create's token as `requestId`; a network of this name that an earlier
    /// try of this create made is adopted, anyone else's is an error.
    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let gcp = ctx.cloud.gcp().await?;
        if let Some(network) = super::claim(ctx, token, "network", &cfg.name, get(gcp, &cfg.name).await?, |n| {
            n.description.as_deref()
        })? {
            return Ok(Created {
                id: id(gcp, &cfg.name),
                outputs: outputs(gcp, &network),
            });
        }
        let body = Model::new()
            .set_name(&cfg.name)
            .set_description(super::marked_description(ctx, token, cfg.description.as_deref()))
            .set_auto_create_subnetworks(cfg.auto_create_subnetworks)
            .set_mtu(cfg.mtu as i32)
            .set_routing_config(routing(&cfg.routing_mode));
        let limit = timeout(config, "create", OPERATION_TIMEOUT);
        insert(ctx, gcp, "networks.insert", token, limit, |request| {
            gcp.networks
                .insert()
                .set_project(&gcp.project)
                .set_request_id(request)
                .set_body(body.clone())
                .send()
        })
        .await?;
        let network = get(gcp, &cfg.name)
            .await?
            .ok_or_else(|| super::vanished(gcp, "network", &cfg.name))?;
        Ok(Created {
            id: id(gcp, &cfg.name),
            outputs: outputs(gcp, &network),
        })
    }

    async fn read(&self, cloud: &Cloud, stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        let gcp = cloud.gcp().await?;
        let request = gcp.networks.list().set_project(&gcp.project).set_filter(super::stack_filter(stack));
        let listed = list_all!(gcp, request, "networks.list");
        let key = |n: &Model| (id(gcp, n.name.as_deref().unwrap_or_default()), n.description.clone());
        super::observe(
            stack,
            ids,
            listed,
            |id| async move { get(gcp, super::last_segment(&id)).await },
            key,
            |n, own| {
                json!({
                    "name": n.name,
                    "description": own,
                    "mtu": n.mtu,
                    "routing_mode": n.routing_config.as_ref().and_then(|r| r.routing_mode.as_ref()).and_then(|m| m.name()),
                    "auto_create_subnetworks": n.auto_create_subnetworks,
                })
            },
        )
        .await
    }

    async fn find(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Option<String>, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let gcp = ctx.cloud.gcp().await?;
        let found = get(gcp, &cfg.name).await?;
        Ok(found
            .filter(|n| super::made_by(ctx, token, n.description.as_deref()))
            .map(|_| id(gcp, &cfg.name)))
    }

    /// Only the routing mode changes in place (a patch).
    async fn update(&self, ctx: &Ctx, _id: &str, _old: &Value, new: &Value) -> Result<Value, ProviderError> {
        let cfg: Config = parse(ctx, new)?;
        let gcp = ctx.cloud.gcp().await?;
        let op = gcp
            .networks
            .patch()
            .set_project(&gcp.project)
            .set_network(&cfg.name)
            .set_request_id(super::fresh_request_id())
            .set_body(Model::new().set_routing_config(routing(&cfg.routing_mode)))
            .send()
            .await
            .map_err(|e| error(gcp, "networks.patch", e))?;
        wait_operation(ctx, gcp, "networks.patch", op, timeout(new, "update", OPERATION_TIMEOUT)).await?;
        let network = get(gcp, &cfg.name)
            .await?
            .ok_or_else(|| super::vanished(gcp, "network", &cfg.name))?;
        Ok(outputs(gcp, &network))
    }

    /// A network that still has subnetworks, firewall rules or routers fails its delete
    /// operation "in use": retried with backoff while they go, then reported naming them.
    async fn delete(&self, ctx: &Ctx, id: &str, config: &Value) -> Result<(), ProviderError> {
        let gcp = ctx.cloud.gcp().await?;
        let name = super::last_segment(id);
        let sent = gcp
            .networks
            .delete()
            .set_project(&gcp.project)
            .set_network(name)
            .set_request_id(super::fresh_request_id())
            .send()
            .await;
        super::deleted(ctx, gcp, "networks.delete", config, sent).await
    }
}
