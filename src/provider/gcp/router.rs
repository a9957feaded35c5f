//! `google_compute_router`: a Cloud Router in one region of a network, with its Cloud NAT
//! gateways (`nats`): private GKE nodes have no external address and reach the internet (image
//! registries, package mirrors) through them.

use super::{Clients, OPERATION_TIMEOUT, error, insert, not_found, wait_operation};
use crate::provider::{Cloud, Created, Ctx, Observed, ProviderError, Resource, Spec, parse, timeout};
use crate::schema::attributes;
use google_cloud_compute_v1::model::router_nat::{NatIpAllocateOption, SourceSubnetworkIpRangesToNat};
use google_cloud_compute_v1::model::{Router as Model, RouterNat};
use serde::Deserialize;
use serde_json::{Value, json};

/// The `google_compute_router` kind.
pub struct Router;

attributes! {
    spec "google_compute_router", outputs ["id", "name", "self_link", "region"], extra [timeouts];
    struct Config {
        name: String [replace],
        network: String [replace],
        region: Option<String> [replace],
        description: Option<String>,
        #[serde(default)] nats: Vec<Nat>,
    }
}

/// `{ name = "nat", source_subnetwork_ip_ranges_to_nat = "ALL_SUBNETWORKS_ALL_IP_RANGES",
/// nat_ip_allocate_option = "AUTO_ONLY" }` (the defaults: every range of every subnetwork,
/// addresses Google allocates).
#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct Nat {
    name: String,
    #[serde(default = "all_ranges")]
    source_subnetwork_ip_ranges_to_nat: String,
    #[serde(default = "auto_only")]
    nat_ip_allocate_option: String,
}

fn all_ranges() -> String {
    "ALL_SUBNETWORKS_ALL_IP_RANGES".into()
}

fn auto_only() -> String {
    "AUTO_ONLY".into()
}

/// The router's id: its path below the API root.
fn id(gcp: &Clients, region: &str, name: &str) -> String {
    format!("projects/{}/regions/{region}/routers/{name}", gcp.project)
}

fn outputs(gcp: &Clients, region: &str, name: &str, router: &Model) -> Value {
    json!({ "id": id(gcp, region, name), "name": name, "self_link": router.self_link, "region": region })
}

async fn get(gcp: &Clients, region: &str, name: &str) -> Result<Option<Model>, ProviderError> {
    match gcp
        .routers
        .get()
        .set_project(&gcp.project)
        .set_region(region)
        .set_router(name)
        .send()
        .await
    {
        Ok(router) => Ok(Some(router)),
        Err(e) if not_found(&e) => Ok(None),
        Err(e) => Err(error(gcp, "routers.get", e)),
    }
}

/// The whole router as the API takes it, for an insert or an update.
fn body(gcp: &Clients, cfg: &Config, region: &str, description: String) -> Model {
    let nats = cfg.nats.iter().map(|n| {
        RouterNat::new()
            .set_name(&n.name)
            .set_source_subnetwork_ip_ranges_to_nat(SourceSubnetworkIpRangesToNat::from(n.source_subnetwork_ip_ranges_to_nat.as_str()))
            .set_nat_ip_allocate_option(NatIpAllocateOption::from(n.nat_ip_allocate_option.as_str()))
    });
    Model::new()
        .set_name(&cfg.name)
        .set_network(super::network_url(gcp, &cfg.network))
        .set_region(region)
        .set_description(description)
        .set_nats(nats)
}

impl Resource for Router {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }

    fn planned_outputs(&self, config: &Value, prior: Option<&Value>) -> Value {
        let prior_or = |key: &str| crate::provider::prior_output(prior, key);
        json!({
            "id": prior_or("id"),
            "name": config.get("name"),
            "self_link": prior_or("self_link"),
            "region": config.get("region").cloned().unwrap_or_else(|| prior_or("region")),
        })
    }

    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let gcp = ctx.cloud.gcp().await?;
        let region = gcp.region_of(cfg.region.as_deref())?;
        let found = get(gcp, &region, &cfg.name).await?;
        let router = match super::claim(ctx, token, "router", &cfg.name, found, |r| r.description.as_deref())? {
            Some(router) => router,
            None => {
                let body = body(
                    gcp,
                    &cfg,
                    &region,
                    super::marked_description(ctx, token, cfg.description.as_deref()),
                );
                insert(
                    ctx,
                    gcp,
                    "routers.insert",
                    token,
                    timeout(config, "create", OPERATION_TIMEOUT),
                    |request| {
                        let call = gcp.routers.insert().set_project(&gcp.project).set_region(&region);
                        call.set_request_id(request).set_body(body.clone()).send()
                    },
                )
                .await?;
                get(gcp, &region, &cfg.name)
                    .await?
                    .ok_or_else(|| super::vanished(gcp, "router", &cfg.name))?
            }
        };
        Ok(Created {
            id: id(gcp, &region, &cfg.name),
            outputs: outputs(gcp, &region, &cfg.name, &router),
        })
    }

    async fn read(&self, cloud: &Cloud, stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        let gcp = cloud.gcp().await?;
        let mut listed = Vec::new();
        for region in super::regions(gcp, ids) {
            let request = gcp.routers.list().set_project(&gcp.project).set_region(&region);
            listed.extend(list_all!(gcp, request.set_filter(super::stack_filter(stack)), "routers.list"));
        }
        let key = |r: &Model| {
            let region = super::last_segment(r.region.as_deref().unwrap_or_default());
            (id(gcp, region, r.name.as_deref().unwrap_or_default()), r.description.clone())
        };
        let by_id = |id: String| async move {
            let (region, name) = super::regional_parts(&id);
            get(gcp, region, name).await
        };
        super::observe(stack, ids, listed, by_id, key, |r, own| {
            let nats: Vec<Value> = r
                .nats
                .iter()
                .map(|n| {
                    json!({
                        "name": n.name,
                        "source_subnetwork_ip_ranges_to_nat": n.source_subnetwork_ip_ranges_to_nat.as_ref().and_then(|s| s.name()),
                        "nat_ip_allocate_option": n.nat_ip_allocate_option.as_ref().and_then(|o| o.name()),
                    })
                })
                .collect();
            json!({
                "name": r.name,
                "network": r.network.as_deref().map(super::last_segment),
                "region": r.region.as_deref().map(super::last_segment),
                "description": own,
                "nats": nats,
            })
        })
        .await
    }

    /// NAT gateways compare with their defaults filled in, as the API reports them.
    fn comparable(&self, _id: &str, config: &Value) -> Value {
        let mut config = super::network_by_name(config);
        if let Some(nats) = config.get_mut("nats").and_then(Value::as_array_mut) {
            for nat in nats.iter_mut().filter_map(Value::as_object_mut) {
                nat.entry("source_subnetwork_ip_ranges_to_nat")
                    .or_insert_with(|| json!(all_ranges()));
                nat.entry("nat_ip_allocate_option").or_insert_with(|| json!(auto_only()));
            }
        }
        config
    }

    async fn find(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Option<String>, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let gcp = ctx.cloud.gcp().await?;
        let region = gcp.region_of(cfg.region.as_deref())?;
        let found = get(gcp, &region, &cfg.name).await?;
        Ok(found
            .filter(|r| super::made_by(ctx, token, r.description.as_deref()))
            .map(|_| id(gcp, &region, &cfg.name)))
    }

    /// Sends the whole router (an update, not a patch: a patch cannot remove the last NAT).
    async fn update(&self, ctx: &Ctx, id: &str, _old: &Value, new: &Value) -> Result<Value, ProviderError> {
        let cfg: Config = parse(ctx, new)?;
        let gcp = ctx.cloud.gcp().await?;
        let (region, name) = super::regional_parts(id);
        let live = get(gcp, region, name).await?.ok_or_else(|| super::vanished(gcp, "router", name))?;
        let description = super::remarked_description(live.description.as_deref(), cfg.description.as_deref());
        let op = gcp
            .routers
            .update()
            .set_project(&gcp.project)
            .set_region(region)
            .set_router(name)
            .set_request_id(super::fresh_request_id())
            .set_body(body(gcp, &cfg, region, description))
            .send()
            .await
            .map_err(|e| error(gcp, "routers.update", e))?;
        wait_operation(ctx, gcp, "routers.update", op, timeout(new, "update", OPERATION_TIMEOUT)).await?;
        let router = get(gcp, region, name).await?.ok_or_else(|| super::vanished(gcp, "router", name))?;
        Ok(outputs(gcp, region, name, &router))
    }

    async fn delete(&self, ctx: &Ctx, id: &str, config: &Value) -> Result<(), ProviderError> {
        let gcp = ctx.cloud.gcp().await?;
        let (region, name) = super::regional_parts(id);
        let sent = gcp
            .routers
            .delete()
            .set_project(&gcp.project)
            .set_region(region)
            .set_router(name)
            .set_request_id(super::fresh_request_id())
            .send()
            .await;
        super::deleted(ctx, gcp, "routers.delete", config, sent).await
    }
}
