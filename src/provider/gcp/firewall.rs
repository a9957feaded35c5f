//! `google_compute_firewall`: one firewall rule of a network — direction, priority, what it
//! allows or denies, from and to which ranges and tags. Everything but its name, network and
//! direction changes in place (an update that sends the whole rule).

use super::{Clients, OPERATION_TIMEOUT, error, insert, not_found, wait_operation};
use crate::provider::{Cloud, Created, Ctx, Observed, ProviderError, Resource, Spec, parse, timeout};
use crate::schema::attributes;
use google_cloud_compute_v1::model::Firewall as Model;
use google_cloud_compute_v1::model::firewall::{Allowed, Denied, Direction};
use serde::Deserialize;
use serde_json::{Value, json};

/// The `google_compute_firewall` kind.
pub struct Firewall;

attributes! {
    spec "google_compute_firewall", outputs ["id", "name", "self_link"], extra [timeouts];
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
#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct Rule {
    protocol: String,
    #[serde(default)]
    ports: Vec<String>,
}

/// The rule's id: its path below the API root.
fn id(gcp: &Clients, name: &str) -> String {
    format!("projects/{}/global/firewalls/{name}", gcp.project)
}

fn outputs(gcp: &Clients, name: &str, rule: &Model) -> Value {
    json!({ "id": id(gcp, name), "name": name, "self_link": rule.self_link })
}

async fn get(gcp: &Clients, name: &str) -> Result<Option<Model>, ProviderError> {
    match gcp.firewalls.get().set_project(&gcp.project).set_firewall(name).send().await {
        Ok(rule) => Ok(Some(rule)),
        Err(e) if not_found(&e) => Ok(None),
        Err(e) => Err(error(gcp, "firewalls.get", e)),
    }
}

/// The whole rule as the API takes it, for an insert or an update.
fn body(gcp: &Clients, cfg: &Config, description: String) -> Model {
    Model::new()
        .set_name(&cfg.name)
        .set_network(super::network_url(gcp, &cfg.network))
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

    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let gcp = ctx.cloud.gcp().await?;
        let found = get(gcp, &cfg.name).await?;
        let rule = match super::claim(ctx, token, "firewall rule", &cfg.name, found, |r| r.description.as_deref())? {
            Some(rule) => rule,
            None => {
                let body = body(gcp, &cfg, super::marked_description(ctx, token, cfg.description.as_deref()));
                insert(
                    ctx,
                    gcp,
                    "firewalls.insert",
                    token,
                    timeout(config, "create", OPERATION_TIMEOUT),
                    |request| {
                        gcp.firewalls
                            .insert()
                            .set_project(&gcp.project)
                            .set_request_id(request)
                            .set_body(body.clone())
                            .send()
                    },
                )
                .await?;
                get(gcp, &cfg.name)
                    .await?
                    .ok_or_else(|| super::vanished(gcp, "firewall rule", &cfg.name))?
            }
        };
        Ok(Created {
            id: id(gcp, &cfg.name),
            outputs: outputs(gcp, &cfg.name, &rule),
        })
    }

    async fn read(&self, cloud: &Cloud, stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        let gcp = cloud.gcp().await?;
        let request = gcp
            .firewalls
            .list()
            .set_project(&gcp.project)
            .set_filter(super::stack_filter(stack));
        let listed = list_all!(gcp, request, "firewalls.list");
        let key = |r: &Model| (id(gcp, r.name.as_deref().unwrap_or_default()), r.description.clone());
        super::observe(
            stack,
            ids,
            listed,
            |id| async move { get(gcp, super::last_segment(&id)).await },
            key,
            |r, own| {
                json!({
                    "name": r.name,
                    "network": r.network.as_deref().map(super::last_segment),
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
            },
        )
        .await
    }

    fn comparable(&self, _id: &str, config: &Value) -> Value {
        super::network_by_name(config)
    }

    async fn find(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Option<String>, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let gcp = ctx.cloud.gcp().await?;
        let found = get(gcp, &cfg.name).await?;
        Ok(found
            .filter(|r| super::made_by(ctx, token, r.description.as_deref()))
            .map(|_| id(gcp, &cfg.name)))
    }

    /// Sends the whole rule (an update, not a patch: a patch cannot empty a list), keeping the
    /// marker the live rule carries.
    async fn update(&self, ctx: &Ctx, id: &str, _old: &Value, new: &Value) -> Result<Value, ProviderError> {
        let cfg: Config = parse(ctx, new)?;
        let gcp = ctx.cloud.gcp().await?;
        let name = super::last_segment(id);
        let live = get(gcp, name).await?.ok_or_else(|| super::vanished(gcp, "firewall rule", name))?;
        let description = super::remarked_description(live.description.as_deref(), cfg.description.as_deref());
        let op = gcp
            .firewalls
            .update()
            .set_project(&gcp.project)
            .set_firewall(name)
            .set_request_id(super::fresh_request_id())
            .set_body(body(gcp, &cfg, description))
            .send()
            .await
            .map_err(|e| error(gcp, "firewalls.update", e))?;
        wait_operation(ctx, gcp, "firewalls.update", op, timeout(new, "update", OPERATION_TIMEOUT)).await?;
        let rule = get(gcp, name).await?.ok_or_else(|| super::vanished(gcp, "firewall rule", name))?;
        Ok(outputs(gcp, name, &rule))
    }

    async fn delete(&self, ctx: &Ctx, id: &str, config: &Value) -> Result<(), ProviderError> {
        let gcp = ctx.cloud.gcp().await?;
        let name = super::last_segment(id);
        let sent = gcp
            .firewalls
            .delete()
            .set_project(&gcp.project)
            .set_firewall(name)
            .set_request_id(super::fresh_request_id())
            .send()
            .await;
        super::deleted(ctx, gcp, "firewalls.delete", config, sent).await
    }
}
