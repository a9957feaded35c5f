//! `google_compute_subnetwork`: a regional subnetwork with named secondary ranges (VPC-native
//! GKE takes its pods' and services' addresses from them) and Private Google Access (private
//! nodes reach Google's APIs without external addresses).

use super::collection::{self, Scope, network_url};
use super::marker::marked_description;
use super::operation::fresh_request_id;
use crate::provider::{Cloud, Created, Ctx, Found, Lookups, Observed, ProviderError, Resource, Selector, parse};
use crate::schema::attributes;
use google_cloud_compute_v1::model::{Subnetwork as Model, SubnetworkSecondaryRange, SubnetworksSetPrivateIpGoogleAccessRequest};
use serde::Deserialize;
use serde_json::{Value, json};

/// The `google_compute_subnetwork` kind.
pub(super) struct Subnetwork;

attributes! {
    kind Subnetwork, spec "google_compute_subnetwork", outputs [id, name = attribute, self_link, region = attribute, gateway_address], extra [timeouts];
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
#[derive(Deserialize, serde::Serialize, Clone)]
#[serde(deny_unknown_fields)]
struct SecondaryRange {
    range_name: String,
    ip_cidr_range: String,
}

compute_collection!(
    /// The subnetworks of a region.
    Subnetworks: Model, subnetworks.set_subnetwork, "subnetwork", set_region);

fn outputs(id: &str, subnet: &Model) -> Value {
    json!({
        "id": id,
        "name": subnet.name,
        "self_link": subnet.self_link,
        "region": Scope::of_id(id).0.location(),
        "gateway_address": subnet.gateway_address,
    })
}

/// What a read reports of a subnetwork, given its own part of the description.
fn read_attributes(s: &Model, own: &str) -> Value {
    let ranges: Vec<Value> = s
        .secondary_ip_ranges
        .iter()
        .map(|r| json!({ "range_name": r.range_name, "ip_cidr_range": r.ip_cidr_range }))
        .collect();
    json!({
        "name": s.name,
        "description": own,
        "network": s.network.as_deref().map(collection::last_segment),
        "ip_cidr_range": s.ip_cidr_range,
        "region": s.region.as_deref().map(collection::last_segment),
        "secondary_ip_ranges": ranges,
        "private_ip_google_access": s.private_ip_google_access.unwrap_or(false),
    })
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

impl Resource for Subnetwork {
    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let gcp = ctx.cloud.gcp().await?;
        let scope = Scope::of::<Subnetworks>(gcp, cfg.region.as_deref())?;
        let body = Model::new()
            .set_name(&cfg.name)
            .set_description(marked_description(ctx, token, cfg.description.as_deref()))
            .set_network(network_url(gcp, &cfg.network))
            .set_ip_cidr_range(&cfg.ip_cidr_range)
            .set_secondary_ip_ranges(ranges(&cfg))
            .set_private_ip_google_access(cfg.private_ip_google_access);
        collection::create::<Subnetworks>(ctx, gcp, token, &scope, body, config, outputs).await
    }

    async fn read(&self, cloud: &Cloud, stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        collection::read::<Subnetworks>(cloud.gcp().await?, stack, ids, read_attributes).await
    }

    fn lookups(&self) -> Lookups {
        Lookups {
            id: Some("a subnetwork name (in [gcp] region), or its path projects/…/regions/…/subnetworks/…"),
            tags: false,
            attributes: &[],
        }
    }

    async fn look_up(&self, cloud: &Cloud, selector: &Selector) -> Result<Vec<Found>, ProviderError> {
        collection::look_up::<Subnetworks>(cloud.gcp().await?, selector, outputs, read_attributes).await
    }

    fn comparable(&self, _id: &str, config: &Value) -> Value {
        collection::network_by_name(config)
    }

    /// Removing the last secondary range needs a new subnetwork: the client leaves an empty
    /// list out of the patch, so a patch cannot say "none".
    fn forces_replacement(&self, attribute: &str, before: Option<&Value>, after: Option<&Value>) -> bool {
        let empty = |v: Option<&Value>| v.and_then(Value::as_array).is_none_or(Vec::is_empty);
        SPEC.replaces(attribute) || (attribute == "secondary_ip_ranges" && empty(after) && !empty(before))
    }

    async fn find(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Option<String>, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        collection::find::<Subnetworks>(ctx, token, &cfg.name, cfg.region.as_deref()).await
    }

    /// Secondary ranges change by a patch (with the subnetwork's current fingerprint), Private
    /// Google Access by its own call.
    async fn update(&self, ctx: &Ctx, id: &str, old: &Value, new: &Value) -> Result<Value, ProviderError> {
        let cfg: Config = parse(ctx, new)?;
        let gcp = ctx.cloud.gcp().await?;
        let (scope, name) = Scope::of_id(id);
        let subnet = collection::reread::<Subnetworks>(gcp, id).await?;
        let mut seen = outputs(id, &subnet);
        if old.get("secondary_ip_ranges") != new.get("secondary_ip_ranges") {
            let body = Model::new()
                .set_secondary_ip_ranges(ranges(&cfg))
                .set_or_clear_fingerprint(subnet.fingerprint);
            let call = gcp
                .subnetworks
                .patch()
                .set_project(&gcp.project)
                .set_region(scope.location())
                .set_subnetwork(name);
            let call = call.set_request_id(fresh_request_id()).set_body(body);
            seen = collection::changed::<Subnetworks>(ctx, gcp, "subnetworks.patch", id, call.send(), new, outputs).await?;
        }
        if old.get("private_ip_google_access") != new.get("private_ip_google_access") {
            let body = SubnetworksSetPrivateIpGoogleAccessRequest::new().set_private_ip_google_access(cfg.private_ip_google_access);
            let call = gcp
                .subnetworks
                .set_private_ip_google_access()
                .set_project(&gcp.project)
                .set_region(scope.location());
            let call = call.set_subnetwork(name).set_request_id(fresh_request_id()).set_body(body);
            seen =
                collection::changed::<Subnetworks>(ctx, gcp, "subnetworks.setPrivateIpGoogleAccess", id, call.send(), new, outputs).await?;
        }
        Ok(seen)
    }

    async fn delete(&self, ctx: &Ctx, id: &str, config: &Value) -> Result<(), ProviderError> {
        collection::delete::<Subnetworks>(ctx, ctx.cloud.gcp().await?, id, config).await
    }
}
