//! `google_compute_subnetwork`: a regional subnetwork with named secondary ranges (VPC-native
//! GKE takes its pods' and services' addresses from them) and Private Google Access (private
//! nodes reach Google's APIs without external addresses).

use super::{Clients, OPERATION_TIMEOUT, error, insert, not_found, wait_operation};
use crate::provider::{Cloud, Created, Ctx, Observed, ProviderError, Resource, Spec, parse, timeout};
use crate::schema::attributes;
use google_cloud_compute_v1::model::{Subnetwork as Model, SubnetworkSecondaryRange, SubnetworksSetPrivateIpGoogleAccessRequest};
use serde::Deserialize;
use serde_json::{Value, json};

/// The `google_compute_subnetwork` kind.
pub struct Subnetwork;

attributes! {
    spec "google_compute_subnetwork", outputs ["id", "name", "self_link", "region", "gateway_address"], extra [timeouts];
    struct Config {
        name: String [replace],
        network: String [replace],
        ip_cidr_range: String [replace],
        region: Option<String> [replace],
        description: Option<String> [replace],
        #[serde(default)] secondary_ip_ranges: Vec<SecondaryRange>,
        #[serde(default)] private_ip_google_access: bool,
    }
}

/// `{ range_name = "pods", ip_cidr_range = "10.4.0.0/14" }`
#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct SecondaryRange {
    range_name: String,
    ip_cidr_range: String,
}

/// The subnetwork's id: its path below the API root.
fn id(gcp: &Clients, region: &str, name: &str) -> String {
    format!("projects/{}/regions/{region}/subnetworks/{name}", gcp.project)
}

fn outputs(gcp: &Clients, region: &str, subnet: &Model) -> Value {
    let name = subnet.name.as_deref().unwrap_or_default();
    json!({
        "id": id(gcp, region, name),
        "name": name,
        "self_link": subnet.self_link,
        "region": region,
        "gateway_address": subnet.gateway_address,
    })
}

async fn get(gcp: &Clients, region: &str, name: &str) -> Result<Option<Model>, ProviderError> {
    match gcp
        .subnetworks
        .get()
        .set_project(&gcp.project)
        .set_region(region)
        .set_subnetwork(name)
        .send()
        .await
    {
        Ok(subnet) => Ok(Some(subnet)),
        Err(e) if not_found(&e) => Ok(None),
        Err(e) => Err(error(gcp, "subnetworks.get", e)),
    }
}

fn ranges(cfg: &Config) -> Vec<SubnetworkSecondaryRange> {
    cfg.secondary_ip_ranges
        .iter()
        .map(|r| {
            SubnetworkSecondaryRange::new()
                .set_range_name(&r.range_name)
                .set_ip_cidr_range(&r.ip_cidr_range)
        })
        .collect()
}

/// Turns Private Google Access on or off (its own call; a patch cannot change it).
async fn set_google_access(ctx: &Ctx, gcp: &Clients, region: &str, name: &str, on: bool, config: &Value) -> Result<(), ProviderError> {
    let op = gcp
        .subnetworks
        .set_private_ip_google_access()
        .set_project(&gcp.project)
        .set_region(region)
        .set_subnetwork(name)
        .set_request_id(super::fresh_request_id())
        .set_body(SubnetworksSetPrivateIpGoogleAccessRequest::new().set_private_ip_google_access(on))
        .send()
        .await
        .map_err(|e| error(gcp, "subnetworks.setPrivateIpGoogleAccess", e))?;
    wait_operation(
        ctx,
        gcp,
        "subnetworks.setPrivateIpGoogleAccess",
        op,
        timeout(config, "update", OPERATION_TIMEOUT),
    )
    .await?;
    Ok(())
}

impl Resource for Subnetwork {
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
            "gateway_address": prior_or("gateway_address"),
        })
    }

    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let gcp = ctx.cloud.gcp().await?;
        let region = gcp.region_of(cfg.region.as_deref())?;
        let found = get(gcp, &region, &cfg.name).await?;
        let subnet = match super::claim(ctx, token, "subnetwork", &cfg.name, found, |s| s.description.as_deref())? {
            Some(subnet) => subnet,
            None => {
                let body = Model::new()
                    .set_name(&cfg.name)
                    .set_description(super::marked_description(ctx, token, cfg.description.as_deref()))
                    .set_network(super::network_url(gcp, &cfg.network))
                    .set_ip_cidr_range(&cfg.ip_cidr_range)
                    .set_secondary_ip_ranges(ranges(&cfg))
                    .set_private_ip_google_access(cfg.private_ip_google_access);
                let limit = timeout(config, "create", OPERATION_TIMEOUT);
                insert(ctx, gcp, "subnetworks.insert", token, limit, |request| {
                    let call = gcp.subnetworks.insert().set_project(&gcp.project).set_region(&region);
                    call.set_request_id(request).set_body(body.clone()).send()
                })
                .await?;
                get(gcp, &region, &cfg.name)
                    .await?
                    .ok_or_else(|| super::vanished(gcp, "subnetwork", &cfg.name))?
            }
        };
        Ok(Created {
            id: id(gcp, &region, &cfg.name),
            outputs: outputs(gcp, &region, &subnet),
        })
    }

    async fn read(&self, cloud: &Cloud, stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        let gcp = cloud.gcp().await?;
        let mut listed = Vec::new();
        for region in super::regions(gcp, ids) {
            let request = gcp.subnetworks.list().set_project(&gcp.project).set_region(&region);
            listed.extend(list_all!(gcp, request.set_filter(super::stack_filter(stack)), "subnetworks.list"));
        }
        let key = |s: &Model| {
            let region = super::last_segment(s.region.as_deref().unwrap_or_default());
            (id(gcp, region, s.name.as_deref().unwrap_or_default()), s.description.clone())
        };
        let by_id = |id: String| async move {
            let (region, name) = super::regional_parts(&id);
            get(gcp, region, name).await
        };
        super::observe(stack, ids, listed, by_id, key, |s, own| {
            json!({
                "name": s.name,
                "description": own,
                "network": s.network.as_deref().map(super::last_segment),
                "ip_cidr_range": s.ip_cidr_range,
                "region": s.region.as_deref().map(super::last_segment),
                "secondary_ip_ranges": s.secondary_ip_ranges.iter().map(|r| json!({ "range_name": r.range_name, "ip_cidr_range": r.ip_cidr_range })).collect::<Vec<_>>(),
                "private_ip_google_access": s.private_ip_google_access.unwrap_or(false),
            })
        })
        .await
    }

    fn comparable(&self, _id: &str, config: &Value) -> Value {
        super::network_by_name(config)
    }

    async fn find(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Option<String>, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let gcp = ctx.cloud.gcp().await?;
        let region = gcp.region_of(cfg.region.as_deref())?;
        let found = get(gcp, &region, &cfg.name).await?;
        Ok(found
            .filter(|s| super::made_by(ctx, token, s.description.as_deref()))
            .map(|_| id(gcp, &region, &cfg.name)))
    }

    /// Secondary ranges change by a patch (with the subnetwork's current fingerprint), Private
    /// Google Access by its own call.
    async fn update(&self, ctx: &Ctx, id: &str, old: &Value, new: &Value) -> Result<Value, ProviderError> {
        let cfg: Config = parse(ctx, new)?;
        let gcp = ctx.cloud.gcp().await?;
        let (region, name) = super::regional_parts(id);
        if old.get("secondary_ip_ranges") != new.get("secondary_ip_ranges") {
            let live = get(gcp, region, name)
                .await?
                .ok_or_else(|| super::vanished(gcp, "subnetwork", name))?;
            let body = Model::new()
                .set_secondary_ip_ranges(ranges(&cfg))
                .set_or_clear_fingerprint(live.fingerprint);
            let op = gcp
                .subnetworks
                .patch()
                .set_project(&gcp.project)
                .set_region(region)
                .set_subnetwork(name)
                .set_request_id(super::fresh_request_id())
                .set_body(body)
                .send()
                .await
                .map_err(|e| error(gcp, "subnetworks.patch", e))?;
            wait_operation(ctx, gcp, "subnetworks.patch", op, timeout(new, "update", OPERATION_TIMEOUT)).await?;
        }
        if old.get("private_ip_google_access") != new.get("private_ip_google_access") {
            set_google_access(ctx, gcp, region, name, cfg.private_ip_google_access, new).await?;
        }
        let subnet = get(gcp, region, name)
            .await?
            .ok_or_else(|| super::vanished(gcp, "subnetwork", name))?;
        Ok(outputs(gcp, region, &subnet))
    }

    async fn delete(&self, ctx: &Ctx, id: &str, config: &Value) -> Result<(), ProviderError> {
        let gcp = ctx.cloud.gcp().await?;
        let (region, name) = super::regional_parts(id);
        let sent = gcp
            .subnetworks
            .delete()
            .set_project(&gcp.project)
            .set_region(region)
            .set_subnetwork(name)
            .set_request_id(super::fresh_request_id())
            .send()
            .await;
        super::deleted(ctx, gcp, "subnetworks.delete", config, sent).await
    }
}
