//! `google_compute_router`: a Cloud Router in one region of a network, with its Cloud NAT
//! gateways (`nats`): private GKE nodes have no external address and reach the internet (image
//! registries, package mirrors) through them.

use super::Clients;
use super::collection::{self, Scope, network_url};
use super::marker::{marked_description, remarked_description};
use super::operation::fresh_request_id;
use crate::provider::{Cloud, Created, Ctx, Observed, ProviderError, Resource, parse};
use crate::schema::attributes;
use google_cloud_compute_v1::model::router_nat::{NatIpAllocateOption, SourceSubnetworkIpRangesToNat};
use google_cloud_compute_v1::model::{Router as Model, RouterNat};
use serde::Deserialize;
use serde_json::{Value, json};

/// The `google_compute_router` kind.
pub(super) struct Router;

attributes! {
    kind Router, spec "google_compute_router", outputs [id, name = attribute, self_link, region = attribute], extra [timeouts];
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
#[derive(Deserialize, serde::Serialize, Clone)]
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

compute_collection!(
    /// The routers of a region.
    Routers: Model, routers.set_router, "router", set_region);

fn outputs(id: &str, router: &Model) -> Value {
    json!({ "id": id, "name": router.name, "self_link": router.self_link, "region": Scope::of_id(id).0.location() })
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
        .set_network(network_url(gcp, &cfg.network))
        .set_region(region)
        .set_description(description)
        .set_nats(nats)
}

impl Resource for Router {
    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let gcp = ctx.cloud.gcp().await?;
        let scope = Scope::of::<Routers>(gcp, cfg.region.as_deref())?;
        let description = marked_description(ctx, token, cfg.description.as_deref());
        let body = body(gcp, &cfg, scope.location(), description);
        collection::create::<Routers>(ctx, gcp, token, &scope, body, config, outputs).await
    }

    async fn read(&self, cloud: &Cloud, stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        collection::read::<Routers>(cloud.gcp().await?, stack, ids, |r, own| {
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
                "network": r.network.as_deref().map(collection::last_segment),
                "region": r.region.as_deref().map(collection::last_segment),
                "description": own,
                "nats": nats,
            })
        })
        .await
    }

    /// NAT gateways compare with their defaults filled in, as the API reports them.
    fn comparable(&self, _id: &str, config: &Value) -> Value {
        let mut config = collection::network_by_name(config);
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
        collection::find::<Routers>(ctx, token, &cfg.name, cfg.region.as_deref()).await
    }

    /// Sends the whole router (an update, not a patch: a patch cannot remove the last NAT).
    async fn update(&self, ctx: &Ctx, id: &str, _old: &Value, new: &Value) -> Result<Value, ProviderError> {
        let cfg: Config = parse(ctx, new)?;
        let gcp = ctx.cloud.gcp().await?;
        let (scope, name) = Scope::of_id(id);
        let live = collection::reread::<Routers>(gcp, id).await?;
        let description = remarked_description(live.description.as_deref(), cfg.description.as_deref());
        let call = gcp
            .routers
            .update()
            .set_project(&gcp.project)
            .set_region(scope.location())
            .set_router(name);
        let call = call
            .set_request_id(fresh_request_id())
            .set_body(body(gcp, &cfg, scope.location(), description));
        collection::changed::<Routers>(ctx, gcp, "routers.update", id, call.send(), new, outputs).await
    }

    async fn delete(&self, ctx: &Ctx, id: &str, config: &Value) -> Result<(), ProviderError> {
        collection::delete::<Routers>(ctx, ctx.cloud.gcp().await?, id, config).await
    }
}
