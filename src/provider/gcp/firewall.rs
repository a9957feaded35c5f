//! `google_compute_firewall`: one firewall rule of a network — direction, priority, what it
//! allows or denies, from and to which ranges and tags. Everything but its name, network and
//! direction changes in place (an update that sends the whole rule).

use super::Clients;
use super::collection::{self, Scope, network_url};
use super::marker::{marked_description, remarked_description};
use super::operation::fresh_request_id;
use crate::provider::{Cloud, Created, Ctx, Observed, ProviderError, Resource, parse};
use crate::schema::attributes;
use google_cloud_compute_v1::model::Firewall as Model;
use google_cloud_compute_v1::model::firewall::{Allowed, Denied, Direction};
use serde::Deserialize;
use serde_json::{Value, json};

/// The `google_compute_firewall` kind.
pub(super) struct Firewall;

attributes! {
    kind Firewall, spec "google_compute_firewall", outputs [id, name = attribute, self_link], extra [timeouts];
    struct Config {
        name: String [replace],
        network: String [replace],
        description: Option<String>,
        #[serde(default = "ingress")] direction: String [replace],
        #[serde(default = "default_priority")] priority: i64,
        #[serde(default)] allow: Vec<Rule>,
        #[serde(default)] deny: Vec<Rule>,
        #[serde(default)] source_ranges: Vec<String>,
        #[serde(default)] destination_ranges: Vec<String>,
        #[serde(default)] source_tags: Vec<String>,
        #[serde(default)] target_tags: Vec<String>,
        #[serde(default)] disabled: bool,
    }
}

fn ingress() -> String {
    "INGRESS".into()
}

fn default_priority() -> i64 {
    1000
}

/// `{ protocol = "tcp", ports = ["22", "6000-7000"] }`; `protocol = "all"` for every protocol.
#[derive(Deserialize, serde::Serialize, Clone)]
#[serde(deny_unknown_fields)]
struct Rule {
    protocol: String,
    #[serde(default)]
    ports: Vec<String>,
}

compute_collection!(
    /// The project's firewall rules.
    Firewalls: Model, firewalls.set_firewall, "firewall rule");

fn outputs(id: &str, rule: &Model) -> Value {
    json!({ "id": id, "name": rule.name, "self_link": rule.self_link })
}

/// The whole rule as the API takes it, for an insert or an update.
fn body(gcp: &Clients, cfg: &Config, description: String) -> Model {
    Model::new()
        .set_name(&cfg.name)
        .set_network(network_url(gcp, &cfg.network))
        .set_description(description)
        .set_direction(Direction::from(cfg.direction.as_str()))
        .set_priority(cfg.priority as i32)
        .set_allowed(
            cfg.allow
                .iter()
                .map(|r| Allowed::new().set_ip_protocol(&r.protocol).set_ports(r.ports.clone())),
        )
        .set_denied(
            cfg.deny
                .iter()
                .map(|r| Denied::new().set_ip_protocol(&r.protocol).set_ports(r.ports.clone())),
        )
        .set_source_ranges(cfg.source_ranges.clone())
        .set_destination_ranges(cfg.destination_ranges.clone())
        .set_source_tags(cfg.source_tags.clone())
        .set_target_tags(cfg.target_tags.clone())
        .set_disabled(cfg.disabled)
}

/// Rules as the block writes them.
fn rules<'r>(rules: impl Iterator<Item = (Option<&'r String>, &'r Vec<String>)>) -> Vec<Value> {
    rules
        .map(|(protocol, ports)| {
            let mut rule = json!({ "protocol": protocol });
            if !ports.is_empty() {
                rule["ports"] = json!(ports);
            }
            rule
        })
        .collect()
}

impl Resource for Firewall {
    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let gcp = ctx.cloud.gcp().await?;
        let body = body(gcp, &cfg, marked_description(ctx, token, cfg.description.as_deref()));
        collection::create::<Firewalls>(ctx, gcp, token, &Scope::Global, body, config, outputs).await
    }

    async fn read(&self, cloud: &Cloud, stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        collection::read::<Firewalls>(cloud.gcp().await?, stack, ids, |r, own| {
            json!({
                "name": r.name,
                "network": r.network.as_deref().map(collection::last_segment),
                "description": own,
                "direction": r.direction.as_ref().and_then(|d| d.name()),
                "priority": r.priority,
                "allow": rules(r.allowed.iter().map(|a| (a.ip_protocol.as_ref(), &a.ports))),
                "deny": rules(r.denied.iter().map(|d| (d.ip_protocol.as_ref(), &d.ports))),
                "source_ranges": r.source_ranges,
                "destination_ranges": r.destination_ranges,
                "source_tags": r.source_tags,
                "target_tags": r.target_tags,
                "disabled": r.disabled.unwrap_or(false),
            })
        })
        .await
    }

    /// The network by name, and rules without an empty `ports` (Compute keeps none).
    fn comparable(&self, _id: &str, config: &Value) -> Value {
        let mut config = collection::network_by_name(config);
        for list in ["allow", "deny"] {
            for rule in config.get_mut(list).and_then(Value::as_array_mut).into_iter().flatten() {
                if let Some(rule) = rule.as_object_mut()
                    && rule.get("ports").and_then(Value::as_array).is_some_and(Vec::is_empty)
                {
                    rule.remove("ports");
                }
            }
        }
        config
    }

    async fn find(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Option<String>, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        collection::find::<Firewalls>(ctx, token, &cfg.name, None).await
    }

    /// Sends the whole rule (an update, not a patch: a patch cannot empty a list), keeping the
    /// mark the live rule carries.
    async fn update(&self, ctx: &Ctx, id: &str, _old: &Value, new: &Value) -> Result<Value, ProviderError> {
        let cfg: Config = parse(ctx, new)?;
        let gcp = ctx.cloud.gcp().await?;
        let live = collection::reread::<Firewalls>(gcp, id).await?;
        let description = remarked_description(live.description.as_deref(), cfg.description.as_deref());
        let call = gcp.firewalls.update().set_project(&gcp.project).set_firewall(&cfg.name);
        let call = call.set_request_id(fresh_request_id()).set_body(body(gcp, &cfg, description));
        collection::changed::<Firewalls>(ctx, gcp, "firewalls.update", id, call.send(), new, outputs).await
    }

    async fn delete(&self, ctx: &Ctx, id: &str, config: &Value) -> Result<(), ProviderError> {
        collection::delete::<Firewalls>(ctx, ctx.cloud.gcp().await?, id, config).await
    }
}
