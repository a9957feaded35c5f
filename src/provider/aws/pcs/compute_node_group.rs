//! `aws_pcs_compute_node_group`: a PCS compute node group — the EC2 instances of one or more
//! types that Slurm runs jobs (or a login node) on, launched from a launch template at a numeric
//! version. Creation waits CREATING → ACTIVE (1 hour by default), a CREATE_FAILED group fails
//! with PCS's `errorInfo`. The name and instance types are fixed; scaling, the launch template
//! version, AMI, subnets, instance profile, purchase option and Slurm settings change in place
//! through UpdateComputeNodeGroup. Deletion waits until the group is gone.

use super::{CONFLICT, NOT_FOUND, active, create_tags, pcs_error, slurm_settings, sync_tags};
use crate::provider::aws::{Claim, Clients, child_id, delete_then_wait, deleted, found, live_children, parse, split, wait_for};
use crate::provider::{Cloud, Created, Ctx, FieldType, Observed, ProviderError, Resource, timeout};
use crate::schema::attributes;
use aws_sdk_pcs::types::{
    ComputeNodeGroup, ComputeNodeGroupSlurmConfigurationRequest, CustomLaunchTemplate, InstanceConfig, PurchaseOption,
    ScalingConfigurationRequest, UpdateComputeNodeGroupSlurmConfigurationRequest,
};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

/// The `aws_pcs_compute_node_group` kind.
pub(crate) struct PcsComputeNodeGroup;

attributes! {
    kind PcsComputeNodeGroup, spec "aws_pcs_compute_node_group", outputs [id, group_id, name = attribute, arn], extra [timeouts, tags];
    struct Config {
        cluster_id: String [replace],
        name: String [replace],
        instance_types: Vec<String> [replace],
        subnet_ids: Vec<String>,
        instance_profile_arn: String,
        launch_template_id: String,
        launch_template_version: i64,
        ami_id: Option<String>,
        #[serde(default = "on_demand")] purchase_option: String,
        scaling: Scaling,
        #[serde(default)] slurm_settings: BTreeMap<String, String>,
    }
}

fn on_demand() -> String {
    "ONDEMAND".into()
}

/// `scaling = { min = 0, max = 2 }` (min > 0: static nodes).
#[derive(Deserialize, serde::Serialize, PartialEq, Clone, Copy)]
#[serde(deny_unknown_fields)]
struct Scaling {
    min: i32,
    max: i32,
}

impl crate::schema::AttributeType for Scaling {
    const TYPE: FieldType = FieldType::Table;
}

const CREATE_TIMEOUT: Duration = Duration::from_secs(60 * 60);
const UPDATE_TIMEOUT: Duration = Duration::from_secs(60 * 60);
const DELETE_TIMEOUT: Duration = Duration::from_secs(60 * 60);

async fn get(aws: &Clients, cluster: &str, group: &str) -> Result<Option<ComputeNodeGroup>, ProviderError> {
    let answer = aws
        .pcs
        .get_compute_node_group()
        .cluster_identifier(cluster)
        .compute_node_group_identifier(group)
        .send()
        .await;
    Ok(found(aws, "GetComputeNodeGroup", answer, NOT_FOUND)?.and_then(|out| out.compute_node_group().cloned()))
}

/// The live group in the shape of its config, for drift.
fn attributes(g: &ComputeNodeGroup) -> Value {
    let template = g.custom_launch_template();
    json!({
        "instance_types": g.instance_configs().iter().filter_map(|i| i.instance_type()).collect::<Vec<_>>(),
        "subnet_ids": g.subnet_ids(),
        "instance_profile_arn": g.iam_instance_profile_arn(),
        "launch_template_id": template.map(aws_sdk_pcs::types::CustomLaunchTemplate::id),
        "launch_template_version": template.and_then(|t| t.version().parse::<i64>().ok()),
        "ami_id": g.ami_id(),
        "purchase_option": g.purchase_option().map(aws_sdk_pcs::types::PurchaseOption::as_str),
        "scaling": g.scaling_configuration().map(|s| json!({ "min": s.min_instance_count(), "max": s.max_instance_count() })),
        "slurm_settings": super::settings_of(g.slurm_configuration().map(aws_sdk_pcs::types::ComputeNodeGroupSlurmConfiguration::slurm_custom_settings).unwrap_or_default()),
    })
}

fn outputs(g: &ComputeNodeGroup) -> Value {
    json!({ "id": child_id(g.cluster_id(), g.id()), "group_id": g.id(), "name": g.name(), "arn": g.arn() })
}

fn build<T, E: std::fmt::Display>(built: Result<T, E>) -> Result<T, ProviderError> {
    built.map_err(|e| ProviderError::permanent(e.to_string()))
}

fn scaling(cfg: &Config) -> ScalingConfigurationRequest {
    ScalingConfigurationRequest::builder()
        .min_instance_count(cfg.scaling.min)
        .max_instance_count(cfg.scaling.max)
        .build()
}

fn launch_template(cfg: &Config) -> Result<CustomLaunchTemplate, ProviderError> {
    build(
        CustomLaunchTemplate::builder()
            .id(&cfg.launch_template_id)
            .version(cfg.launch_template_version.to_string())
            .build(),
    )
}

impl Resource for PcsComputeNodeGroup {
    /// Its instances: Slurm scales the group from `min` (as planned) to `max`; spot when its
    /// purchase option says so; nothing an hour on a Capacity Block or a capacity reservation,
    /// which bill the instances themselves.
    fn meter(&self, sight: &crate::cost::Sight) -> Option<crate::cost::Meter> {
        use crate::cost::Meter;
        Some(sight.in_aws_region(|region| {
            let purchase = sight.text("purchase_option").unwrap_or("ONDEMAND");
            if let Some(prepaid) = sight.prepaid(purchase == "CAPACITY_BLOCK") {
                return prepaid;
            }
            if sight.unknown(&["instance_types", "scaling"]) {
                return Meter::after_apply("instance type or size");
            }
            let types: Vec<String> = sight
                .get("instance_types")
                .and_then(Value::as_array)
                .map(|types| types.iter().filter_map(|t| t.as_str().map(str::to_owned)).collect())
                .unwrap_or_default();
            let Some(count) = crate::cost::scaling(sight.get("scaling")) else {
                return Meter::after_apply("size");
            };
            crate::cost::ec2_instances(region, &types, count, purchase == "SPOT")
        }))
    }
    /// Passes the create's token as `clientToken`; a group of this name that an earlier try
    /// made (its `forge:token` tag) is adopted and waited for.
    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let aws = ctx.cloud.aws().await;
        let instances = cfg
            .instance_types
            .iter()
            .map(|t| InstanceConfig::builder().instance_type(t).build())
            .collect();
        let made = aws
            .pcs
            .create_compute_node_group()
            .cluster_identifier(&cfg.cluster_id)
            .compute_node_group_name(&cfg.name)
            .set_subnet_ids(Some(cfg.subnet_ids.clone()))
            .iam_instance_profile_arn(&cfg.instance_profile_arn)
            .custom_launch_template(launch_template(&cfg)?)
            .set_ami_id(cfg.ami_id.clone())
            .purchase_option(PurchaseOption::from(cfg.purchase_option.as_str()))
            .scaling_configuration(scaling(&cfg))
            .set_instance_configs(Some(instances))
            .slurm_configuration(
                ComputeNodeGroupSlurmConfigurationRequest::builder()
                    .set_slurm_custom_settings(Some(slurm_settings(&cfg.slurm_settings)?))
                    .build(),
            )
            .client_token(token)
            .set_tags(Some(create_tags(ctx, token, config)))
            .send()
            .await;
        let claim = Claim::new(ctx, token, "PCS compute node group", &cfg.name);
        let limit = timeout(config, "create", CREATE_TIMEOUT);
        let group = super::created_and_active(&claim, aws, "CreateComputeNodeGroup", made, limit, || {
            get(aws, &cfg.cluster_id, &cfg.name)
        })
        .await?;
        Ok(Created {
            id: child_id(group.cluster_id(), group.id()),
            outputs: outputs(&group),
        })
    }

    /// One ListComputeNodeGroups (all pages) per cluster the ids name, then a
    /// GetComputeNodeGroup per live group (PCS lists no attributes) for drift.
    async fn read(&self, cloud: &Cloud, _stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        let aws = cloud.aws().await;
        let live = live_children(ids, |cluster| async move {
            members!(pcs aws, list_compute_node_groups, compute_node_groups, &cluster)
        })
        .await?;
        super::observe(live, |cluster, member| async move { get(aws, &cluster, &member).await }, attributes).await
    }

    async fn find(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Option<String>, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let aws = ctx.cloud.aws().await;
        let found = super::own(ctx, aws, token, get(aws, &cfg.cluster_id, &cfg.name).await?).await?;
        Ok(found.map(|g| child_id(g.cluster_id(), g.id())))
    }

    /// Compares with the live group, so an update that failed or ran out of time is picked up
    /// where the group stands; one UpdateComputeNodeGroup with what differs.
    async fn update(&self, ctx: &Ctx, id: &str, old: &Value, new: &Value) -> Result<Value, ProviderError> {
        let cfg: Config = parse(ctx, new)?;
        let (cluster, group) = split(id);
        let aws = ctx.cloud.aws().await;
        let limit = timeout(new, "update", UPDATE_TIMEOUT);
        let what = format!("PCS compute node group `{}`", cfg.name);
        let mut live = wait_for(ctx, &what, limit, || get(aws, cluster, group), active).await?;
        let live_scaling = live
            .scaling_configuration()
            .map(|s| (s.min_instance_count(), s.max_instance_count()));
        let live_template = live.custom_launch_template().map(|t| (t.id().to_owned(), t.version().to_owned()));
        let live_settings = super::settings_of(
            live.slurm_configuration()
                .map(aws_sdk_pcs::types::ComputeNodeGroupSlurmConfiguration::slurm_custom_settings)
                .unwrap_or_default(),
        );
        let mut update = aws
            .pcs
            .update_compute_node_group()
            .cluster_identifier(cluster)
            .compute_node_group_identifier(group);
        let mut changed = false;
        if live_scaling != Some((cfg.scaling.min, cfg.scaling.max)) {
            update = update.scaling_configuration(scaling(&cfg));
            changed = true;
        }
        if live_template != Some((cfg.launch_template_id.clone(), cfg.launch_template_version.to_string())) {
            update = update.custom_launch_template(launch_template(&cfg)?);
            changed = true;
        }
        if live.ami_id() != cfg.ami_id.as_deref() {
            update = update.ami_id(cfg.ami_id.clone().unwrap_or_default());
            changed = true;
        }
        if live.subnet_ids() != cfg.subnet_ids.as_slice() {
            update = update.set_subnet_ids(Some(cfg.subnet_ids.clone()));
            changed = true;
        }
        if live.iam_instance_profile_arn() != cfg.instance_profile_arn {
            update = update.iam_instance_profile_arn(&cfg.instance_profile_arn);
            changed = true;
        }
        if live.purchase_option().map(aws_sdk_pcs::types::PurchaseOption::as_str) != Some(cfg.purchase_option.as_str()) {
            update = update.purchase_option(PurchaseOption::from(cfg.purchase_option.as_str()));
            changed = true;
        }
        if live_settings != cfg.slurm_settings {
            update = update.slurm_configuration(
                UpdateComputeNodeGroupSlurmConfigurationRequest::builder()
                    .set_slurm_custom_settings(Some(slurm_settings(&cfg.slurm_settings)?))
                    .build(),
            );
            changed = true;
        }
        if changed {
            update
                .client_token(uuid::Uuid::new_v4().to_string())
                .send()
                .await
                .map_err(|e| pcs_error(aws, "UpdateComputeNodeGroup", e))?;
            live = wait_for(ctx, &what, limit, || get(aws, cluster, group), active).await?;
        }
        sync_tags(ctx, aws, live.arn(), old, new).await?;
        Ok(outputs(&live))
    }

    async fn delete(&self, ctx: &Ctx, id: &str, config: &Value) -> Result<(), ProviderError> {
        let (cluster, group) = split(id);
        let aws = ctx.cloud.aws().await;
        let live = || get(aws, cluster, group);
        delete_then_wait(ctx, timeout(config, "delete", DELETE_TIMEOUT), live, || async {
            let answer = aws
                .pcs
                .delete_compute_node_group()
                .cluster_identifier(cluster)
                .compute_node_group_identifier(group)
                .client_token(uuid::Uuid::new_v4().to_string())
                .send()
                .await;
            deleted(aws, "DeleteComputeNodeGroup", NOT_FOUND, CONFLICT, answer)
        })
        .await
    }
}
