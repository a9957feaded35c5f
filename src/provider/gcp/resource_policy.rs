//! `google_compute_resource_policy`: a regional Compute resource policy — forge makes the
//! workload policies a GKE node pool names in its placement (A4X pools: `HIGH_THROUGHPUT` with
//! accelerator topology `1x72`, one NVL72 rack's 18 machines). A policy cannot change: every
//! attribute forces a new one, and a policy a pool still uses cannot go before the pool.

use super::collection::{self, Scope};
use super::marker::marked_description;
use crate::provider::{Cloud, Created, Ctx, Observed, ProviderError, Resource, parse};
use crate::schema::{AttributeType, FieldType, attributes};
use google_cloud_compute_v1::model::resource_policy_workload_policy::Type;
use google_cloud_compute_v1::model::{ResourcePolicy as Model, ResourcePolicyWorkloadPolicy};
use serde::Deserialize;
use serde_json::{Value, json};

/// The `google_compute_resource_policy` kind.
pub(super) struct ResourcePolicy;

/// `{ type = "HIGH_THROUGHPUT", accelerator_topology = "1x72" }`: how a managed instance
/// group places its machines, and the accelerator topology they must form.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct WorkloadPolicy {
    #[serde(rename = "type")]
    kind: String,
    accelerator_topology: Option<String>,
}

impl AttributeType for WorkloadPolicy {
    const TYPE: FieldType = FieldType::Table;
}

attributes! {
    kind ResourcePolicy, spec "google_compute_resource_policy", outputs [id, name = attribute, self_link, region = attribute], extra [timeouts];
    struct Config {
        name: String [replace],
        region: Option<String> [replace],
        description: Option<String> [replace],
        workload_policy: WorkloadPolicy [replace],
    }
}

compute_collection!(
    /// The resource policies of a region.
    ResourcePolicies: Model, resource_policies.set_resource_policy, "resource policy", set_region);

fn outputs(id: &str, policy: &Model) -> Value {
    json!({ "id": id, "name": policy.name, "self_link": policy.self_link, "region": Scope::of_id(id).0.location() })
}

impl Resource for ResourcePolicy {
    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let gcp = ctx.cloud.gcp().await?;
        let scope = Scope::of::<ResourcePolicies>(gcp, cfg.region.as_deref())?;
        let mut workload = ResourcePolicyWorkloadPolicy::new().set_type(Type::from(cfg.workload_policy.kind.as_str()));
        if let Some(topology) = &cfg.workload_policy.accelerator_topology {
            workload = workload.set_accelerator_topology(topology);
        }
        let body = Model::new()
            .set_name(&cfg.name)
            .set_description(marked_description(ctx, token, cfg.description.as_deref()))
            .set_workload_policy(workload);
        collection::create::<ResourcePolicies>(ctx, gcp, token, &scope, body, config, outputs).await
    }

    async fn read(&self, cloud: &Cloud, stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        collection::read::<ResourcePolicies>(cloud.gcp().await?, stack, ids, |p, own| {
            let workload = p.workload_policy.as_ref().map(|w| {
                let mut seen = json!({ "type": w.r#type.as_ref().and_then(|t| t.name()) });
                if let Some(topology) = &w.accelerator_topology {
                    seen["accelerator_topology"] = json!(topology);
                }
                seen
            });
            json!({
                "name": p.name,
                "region": p.region.as_deref().map(collection::last_segment),
                "description": own,
                "workload_policy": workload,
            })
        })
        .await
    }

    async fn find(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Option<String>, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        collection::find::<ResourcePolicies>(ctx, token, &cfg.name, cfg.region.as_deref()).await
    }

    /// Never called: every attribute forces a new policy.
    async fn update(&self, _ctx: &Ctx, id: &str, _old: &Value, _new: &Value) -> Result<Value, ProviderError> {
        Err(ProviderError::permanent(format!(
            "resource policy `{id}` cannot change in place; forge replaces it"
        )))
    }

    /// A policy a node pool still uses fails its delete "in use": retried while the pool goes.
    async fn delete(&self, ctx: &Ctx, id: &str, config: &Value) -> Result<(), ProviderError> {
        collection::delete::<ResourcePolicies>(ctx, ctx.cloud.gcp().await?, id, config).await
    }
}
