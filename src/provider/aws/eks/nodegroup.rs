//! `aws_eks_nodegroup`: a managed node group. Creation waits CREATING → ACTIVE (40 minutes by
//! default, resumable like the cluster's); scaling, labels and taints change in place through
//! UpdateNodegroupConfig, the launch template version through UpdateNodegroupVersion, each
//! followed to its end with DescribeUpdate. Deletion waits until the group is gone, so the
//! cluster after it can be deleted.

use super::{IN_USE, NOT_FOUND, Object, Scope, create_tags, created_or_own, owned, planned_child_id, sync_tags, wait_update};
use crate::provider::aws::{Claim, Clients, Poll, delete_then_wait, deleted, error, found, parse, wait_for};
use crate::provider::aws::{child_id, split};
use crate::provider::{Cloud, Created, Ctx, FieldType, Inspected, Observed, ProviderError, Resource, timeout};
use crate::schema::attributes;
use aws_sdk_eks::types::{
    AmiTypes, CapacityTypes, LaunchTemplateSpecification, Nodegroup, NodegroupScalingConfig, NodegroupStatus, Taint, TaintEffect, Update,
    UpdateLabelsPayload, UpdateTaintsPayload,
};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

/// The `aws_eks_nodegroup` kind.
pub(crate) struct EksNodegroup;

attributes! {
    kind EksNodegroup, spec "aws_eks_nodegroup", outputs [id = computed planned_child_id, name = attribute, arn, autoscaling_group_name], extra [timeouts, tags];
    struct Config {
        cluster_name: String [replace],
        name: String [replace],
        node_role_arn: String [replace],
        subnet_ids: Vec<String> [replace],
        instance_types: Option<Vec<String>> [replace],
        launch_template_id: Option<String> [replace],
        launch_template_version: Option<i64>,
        ami_type: Option<String> [replace],
        #[serde(default = "on_demand")] capacity_type: String [replace],
        scaling: Scaling,
        #[serde(default)] labels: BTreeMap<String, String>,
        #[serde(default)] taints: Vec<TaintConfig>,
        disk_size: Option<i32> [replace],
    }
}

fn on_demand() -> String {
    "ON_DEMAND".into()
}

/// `scaling = { min = 1, max = 4, desired = 2 }`
#[derive(Deserialize, serde::Serialize, PartialEq, Clone, Copy)]
#[serde(deny_unknown_fields)]
struct Scaling {
    min: i32,
    max: i32,
    desired: i32,
}

impl crate::schema::AttributeType for Scaling {
    const TYPE: FieldType = FieldType::Table;
}

/// `{ key = "nvidia.com/gpu", value = "true", effect = "NO_SCHEDULE" }`
#[derive(Deserialize, serde::Serialize, PartialEq, Clone)]
#[serde(deny_unknown_fields)]
struct TaintConfig {
    key: String,
    value: Option<String>,
    effect: String,
}

impl TaintConfig {
    fn from_sdk(t: &Taint) -> TaintConfig {
        TaintConfig {
            key: t.key().unwrap_or_default().to_owned(),
            value: t.value().map(str::to_owned),
            effect: t.effect().map_or("NO_SCHEDULE", |e| e.as_str()).to_owned(),
        }
    }

    fn to_sdk(&self) -> Result<Taint, ProviderError> {
        const EFFECTS: &[&str] = &["NO_SCHEDULE", "NO_EXECUTE", "PREFER_NO_SCHEDULE"];
        if !EFFECTS.contains(&self.effect.as_str()) {
            return Err(ProviderError::permanent(format!(
                "taint `{}` has `effect = \"{}\"`; expected one of {}",
                self.key,
                self.effect,
                EFFECTS.join(", ")
            )));
        }
        Ok(Taint::builder()
            .key(&self.key)
            .set_value(self.value.clone())
            .effect(TaintEffect::from(self.effect.as_str()))
            .build())
    }
}

/// GPU node groups take several minutes after the instances start; capacity can be slow.
const CREATE_TIMEOUT: Duration = Duration::from_secs(40 * 60);
const UPDATE_TIMEOUT: Duration = Duration::from_secs(60 * 60);
const DELETE_TIMEOUT: Duration = Duration::from_secs(40 * 60);

async fn describe(aws: &Clients, cluster: &str, name: &str) -> Result<Option<Nodegroup>, ProviderError> {
    let answer = aws.eks.describe_nodegroup().cluster_name(cluster).nodegroup_name(name).send().await;
    Ok(found(aws, "DescribeNodegroup", answer, NOT_FOUND)?.and_then(|out| out.nodegroup().cloned()))
}

/// Whether the node group is ACTIVE, for [`wait_for`]: a failed, degraded or deleting one never
/// will be.
fn active(n: &Nodegroup) -> Poll {
    match n.status() {
        Some(NodegroupStatus::Active) => Poll::Done(()),
        Some(s @ (NodegroupStatus::CreateFailed | NodegroupStatus::Degraded)) => Poll::Failed(format!("is {}: {}", s.as_str(), n.issues())),
        Some(NodegroupStatus::Deleting) => Poll::Failed("is being deleted by someone else".into()),
        status => Poll::Pending(status.map_or("CREATING", |s| s.as_str()).to_owned()),
    }
}

async fn wait_active(ctx: &Ctx, aws: &Clients, cluster: &str, name: &str, limit: Duration) -> Result<Nodegroup, ProviderError> {
    wait_for(
        ctx,
        &format!("EKS node group `{name}`"),
        limit,
        || describe(aws, cluster, name),
        active,
    )
    .await
}

/// Waits for an update EKS accepted, then for the group to be ACTIVE; returns it as it is then.
async fn settle(
    ctx: &Ctx,
    aws: &Clients,
    cluster: &str,
    name: &str,
    update: Option<&Update>,
    limit: Duration,
) -> Result<Nodegroup, ProviderError> {
    if let Some(update) = update.and_then(|u| u.id()) {
        wait_update(ctx, aws, cluster, Scope::Nodegroup(name), update, limit).await?;
    }
    wait_active(ctx, aws, cluster, name, limit).await
}

fn outputs(cluster: &str, n: &Nodegroup) -> Value {
    let name = n.nodegroup_name().unwrap_or_default();
    let group = n.resources().and_then(|r| r.auto_scaling_groups().first()).and_then(|g| g.name());
    json!({ "id": child_id(cluster, name), "name": name, "arn": n.nodegroup_arn(), "autoscaling_group_name": group })
}

fn scaling(s: Scaling) -> Result<NodegroupScalingConfig, ProviderError> {
    if !(s.min <= s.desired && s.desired <= s.max) {
        return Err(ProviderError::permanent(format!(
            "`scaling = {{ min = {}, max = {}, desired = {} }}`: min ≤ desired ≤ max must hold",
            s.min, s.max, s.desired
        )));
    }
    Ok(NodegroupScalingConfig::builder()
        .min_size(s.min)
        .max_size(s.max)
        .desired_size(s.desired)
        .build())
}

impl Resource for EksNodegroup {
    /// Its instances, as many as it is scaled to (min–max): the type in `instance_types` or
    /// in its launch template; nothing an hour on a Capacity Block or a capacity reservation,
    /// which bill the instances themselves.
    fn meter(&self, sight: &crate::cost::Sight) -> Option<crate::cost::Meter> {
        use crate::cost::Meter;
        Some(sight.in_aws_region(|region| {
            let capacity = sight.text("capacity_type").unwrap_or("ON_DEMAND");
            if let Some(prepaid) = sight.prepaid(capacity == "CAPACITY_BLOCK") {
                return prepaid;
            }
            let types: Vec<String> = match sight.get("instance_types").and_then(Value::as_array) {
                Some(types) => types.iter().filter_map(|t| t.as_str().map(str::to_owned)).collect(),
                None => (sight.follow)("launch_template_id", "instance_type")
                    .and_then(|t| t.as_str().map(str::to_owned))
                    .into_iter()
                    .collect(),
            };
            if sight.unknown(&["instance_types"]) || types.iter().any(|t| t.contains("${")) {
                return Meter::after_apply("instance type");
            }
            let Some(count) = crate::cost::scaling(sight.get("scaling")) else {
                return Meter::after_apply("size");
            };
            crate::cost::ec2_instances(region, &types, count, capacity == "SPOT")
        }))
    }
    /// Passes the create's token as `clientRequestToken`; a group of that name that an earlier
    /// try of this create made (its `forge:token` tag) is adopted and waited for.
    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let aws = ctx.cloud.aws().await;
        let template = cfg.launch_template_id.as_ref().map(|id| {
            LaunchTemplateSpecification::builder()
                .id(id)
                .set_version(cfg.launch_template_version.map(|v| v.to_string()))
                .build()
        });
        let made = aws
            .eks
            .create_nodegroup()
            .cluster_name(&cfg.cluster_name)
            .nodegroup_name(&cfg.name)
            .node_role(&cfg.node_role_arn)
            .set_subnets(Some(cfg.subnet_ids.clone()))
            .set_instance_types(cfg.instance_types.clone())
            .set_launch_template(template)
            .set_ami_type(cfg.ami_type.as_deref().map(AmiTypes::from))
            .capacity_type(CapacityTypes::from(cfg.capacity_type.as_str()))
            .scaling_config(scaling(cfg.scaling)?)
            .set_labels(Some(cfg.labels.clone().into_iter().collect()))
            .set_taints(Some(cfg.taints.iter().map(TaintConfig::to_sdk).collect::<Result<_, _>>()?))
            .set_disk_size(cfg.disk_size)
            .client_request_token(token)
            .set_tags(Some(create_tags(ctx, token, config)))
            .send()
            .await;
        let claim = Claim::new(ctx, token, "EKS node group", &cfg.name);
        created_or_own(&claim, aws, "CreateNodegroup", made, || describe(aws, &cfg.cluster_name, &cfg.name)).await?;
        let group = wait_active(ctx, aws, &cfg.cluster_name, &cfg.name, timeout(config, "create", CREATE_TIMEOUT)).await?;
        Ok(Created {
            outputs: outputs(&cfg.cluster_name, &group),
            id: child_id(&cfg.cluster_name, &cfg.name),
        })
    }

    /// One ListNodegroups per cluster the ids name.
    /// EKS has no batch Describe: one DescribeNodegroup per node group, all at once.
    async fn read(&self, cloud: &Cloud, _stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        let aws = cloud.aws().await;
        let found = futures::future::try_join_all(ids.iter().map(|id| async move {
            let (cluster, name) = split(id);
            Ok::<_, ProviderError>(describe(aws, cluster, name).await?.map(|n| Observed {
                id: id.clone(),
                address: None,
                attributes: json!({
                    "scaling": n.scaling_config().map(|s| json!({ "min": s.min_size(), "max": s.max_size(), "desired": s.desired_size() })),
                    "labels": n.labels(),
                    "tags": n.tags(),
                }),
            }))
        }))
        .await?;
        Ok(found.into_iter().flatten().collect())
    }

    fn importable(&self) -> bool {
        true
    }

    /// The group `cluster/name`, in the block's terms.
    async fn inspect(&self, cloud: &Cloud, id: &str) -> Result<Option<Inspected>, ProviderError> {
        let (cluster, name) = split(id);
        Ok(describe(cloud.aws().await, cluster, name).await?.map(|n| {
            let template = n.launch_template();
            Inspected {
                outputs: outputs(cluster, &n),
                attributes: json!({
                    "cluster_name": n.cluster_name(),
                    "name": n.nodegroup_name(),
                    "node_role_arn": n.node_role(),
                    "subnet_ids": n.subnets(),
                    "instance_types": n.instance_types(),
                    "launch_template_id": template.and_then(LaunchTemplateSpecification::id),
                    "launch_template_version": template.and_then(LaunchTemplateSpecification::version).and_then(|v| v.parse::<i64>().ok()),
                    "ami_type": n.ami_type().map(AmiTypes::as_str),
                    "capacity_type": n.capacity_type().map(CapacityTypes::as_str),
                    "scaling": n.scaling_config().map(|s| json!({ "min": s.min_size(), "max": s.max_size(), "desired": s.desired_size() })),
                    "labels": n.labels(),
                    "taints": n.taints().iter().map(TaintConfig::from_sdk).map(|t| json!({ "key": t.key, "value": t.value, "effect": t.effect })).collect::<Vec<_>>(),
                    "disk_size": n.disk_size(),
                    "tags": n.tags(),
                }),
                mark: super::mark_of(n.tags()),
            }
        }))
    }

    async fn mark(&self, ctx: &Ctx, id: &str, token: &str) -> Result<(), ProviderError> {
        let (cluster, name) = split(id);
        let aws = ctx.cloud.aws().await;
        let group = describe(aws, cluster, name).await?;
        let arn = crate::provider::aws::still_there(
            &format!("the EKS node group `{id}`"),
            group.as_ref().and_then(Nodegroup::nodegroup_arn),
        )?;
        super::mark(ctx, aws, arn, token).await
    }

    /// A size range leaves the desired size to the cluster autoscaler.
    fn ignored_by_default(&self, config: &Value) -> Vec<String> {
        let scaling = config.get("scaling");
        let bound = |key: &str| scaling.and_then(|s| s.get(key));
        if bound("min") == bound("max") {
            Vec::new()
        } else {
            vec!["scaling.desired".into()]
        }
    }

    async fn find(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Option<String>, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let found = describe(ctx.cloud.aws().await, &cfg.cluster_name, &cfg.name).await?;
        Ok(found
            .filter(|n| owned(ctx, token, n.tags()))
            .map(|_| child_id(&cfg.cluster_name, &cfg.name)))
    }

    /// Compares with the live node group (an update that failed or ran out of time half-way
    /// is picked up where the group stands): scaling, labels and taints in one
    /// UpdateNodegroupConfig, then the launch template version; each waited for.
    async fn update(&self, ctx: &Ctx, id: &str, old: &Value, new: &Value) -> Result<Value, ProviderError> {
        let (was, cfg): (Config, Config) = (parse(ctx, old)?, parse(ctx, new)?);
        let (cluster, name) = split(id);
        let aws = ctx.cloud.aws().await;
        let limit = timeout(new, "update", UPDATE_TIMEOUT);
        let mut live = wait_active(ctx, aws, cluster, name, limit).await?;
        let live_scaling = live.scaling_config();
        let now = (
            live_scaling.and_then(aws_sdk_eks::types::NodegroupScalingConfig::min_size),
            live_scaling.and_then(aws_sdk_eks::types::NodegroupScalingConfig::max_size),
            live_scaling.and_then(aws_sdk_eks::types::NodegroupScalingConfig::desired_size),
        );
        // The desired size an autoscaler set stays, within the new bounds, unless the stack
        // changed its own desired size.
        let desired = match now.2 {
            Some(live_desired) if was.scaling.desired == cfg.scaling.desired => live_desired.clamp(cfg.scaling.min, cfg.scaling.max),
            _ => cfg.scaling.desired,
        };
        let target = Scaling { desired, ..cfg.scaling };
        let mut call = aws.eks.update_nodegroup_config().cluster_name(cluster).nodegroup_name(name);
        let mut changed = false;
        if now != (Some(target.min), Some(target.max), Some(target.desired)) {
            call = call.scaling_config(scaling(target)?);
            changed = true;
        }
        let live_labels = live.labels().cloned().unwrap_or_default();
        let removed: Vec<String> = live_labels.keys().filter(|k| !cfg.labels.contains_key(*k)).cloned().collect();
        let set: std::collections::HashMap<String, String> = cfg
            .labels
            .iter()
            .filter(|(k, v)| live_labels.get(*k) != Some(v))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !removed.is_empty() || !set.is_empty() {
            call = call.labels(
                UpdateLabelsPayload::builder()
                    .set_add_or_update_labels((!set.is_empty()).then_some(set))
                    .set_remove_labels((!removed.is_empty()).then_some(removed))
                    .build(),
            );
            changed = true;
        }
        let live_taints: Vec<TaintConfig> = live.taints().iter().map(TaintConfig::from_sdk).collect();
        // A taint is one per key and effect: a new value is an add-or-update, not a removal.
        let removed = live_taints
            .iter()
            .filter(|t| !cfg.taints.iter().any(|n| (&n.key, &n.effect) == (&t.key, &t.effect)))
            .map(TaintConfig::to_sdk)
            .collect::<Result<Vec<_>, _>>()?;
        let added = cfg
            .taints
            .iter()
            .filter(|t| !live_taints.contains(t))
            .map(TaintConfig::to_sdk)
            .collect::<Result<Vec<_>, _>>()?;
        if !removed.is_empty() || !added.is_empty() {
            call = call.taints(
                UpdateTaintsPayload::builder()
                    .set_add_or_update_taints((!added.is_empty()).then_some(added))
                    .set_remove_taints((!removed.is_empty()).then_some(removed))
                    .build(),
            );
            changed = true;
        }
        if changed {
            let out = call.send().await.map_err(|e| error(aws, "UpdateNodegroupConfig", e))?;
            live = settle(ctx, aws, cluster, name, out.update(), limit).await?;
        }
        let live_version = live.launch_template().and_then(|t| t.version()).map(str::to_owned);
        if let (Some(template), Some(version)) = (&cfg.launch_template_id, cfg.launch_template_version)
            && live_version != Some(version.to_string())
        {
            let spec = LaunchTemplateSpecification::builder()
                .id(template)
                .version(version.to_string())
                .build();
            let out = aws
                .eks
                .update_nodegroup_version()
                .cluster_name(cluster)
                .nodegroup_name(name)
                .launch_template(spec)
                .send()
                .await
                .map_err(|e| error(aws, "UpdateNodegroupVersion", e))?;
            live = settle(ctx, aws, cluster, name, out.update(), limit).await?;
        }
        sync_tags(ctx, aws, live.nodegroup_arn().unwrap_or_default(), old, new).await?;
        Ok(outputs(cluster, &live))
    }

    async fn delete(&self, ctx: &Ctx, id: &str, config: &Value) -> Result<(), ProviderError> {
        let (cluster, name) = split(id);
        let aws = ctx.cloud.aws().await;
        let live = || describe(aws, cluster, name);
        delete_then_wait(ctx, timeout(config, "delete", DELETE_TIMEOUT), live, || async {
            let answer = aws.eks.delete_nodegroup().cluster_name(cluster).nodegroup_name(name).send().await;
            deleted(aws, "DeleteNodegroup", NOT_FOUND, IN_USE, answer)
        })
        .await
    }
}
