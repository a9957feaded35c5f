//! `aws_pcs_queue`: a PCS queue — a Slurm partition over one or more compute node groups.
//! Creation waits CREATING → ACTIVE (1 hour by default); the node groups and Slurm settings
//! change in place through UpdateQueue; the name is fixed. Deletion waits until it is gone, so
//! its node groups can go after it.

use super::{CONFLICT, NOT_FOUND, active, create_tags, pcs_error, slurm_settings, sync_tags};
use crate::provider::aws::{Claim, Clients, child_id, delete_then_wait, deleted, found, live_children, parse, split, wait_for};
use crate::provider::{Cloud, Created, Ctx, Observed, ProviderError, Resource, timeout};
use crate::schema::attributes;
use aws_sdk_pcs::types::{ComputeNodeGroupConfiguration, Queue, QueueSlurmConfigurationRequest, UpdateQueueSlurmConfigurationRequest};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

/// The `aws_pcs_queue` kind.
pub(crate) struct PcsQueue;

attributes! {
    kind PcsQueue, spec "aws_pcs_queue", outputs [id, queue_id, name = attribute, arn], extra [timeouts, tags];
    struct Config {
        cluster_id: String [replace],
        name: String [replace],
        compute_node_group_ids: Vec<String>,
        #[serde(default)] slurm_settings: BTreeMap<String, String>,
    }
}

const CREATE_TIMEOUT: Duration = Duration::from_secs(60 * 60);
const UPDATE_TIMEOUT: Duration = Duration::from_secs(60 * 60);
const DELETE_TIMEOUT: Duration = Duration::from_secs(60 * 60);

async fn get(aws: &Clients, cluster: &str, queue: &str) -> Result<Option<Queue>, ProviderError> {
    let answer = aws.pcs.get_queue().cluster_identifier(cluster).queue_identifier(queue).send().await;
    Ok(found(aws, "GetQueue", answer, NOT_FOUND)?.and_then(|out| out.queue().cloned()))
}

/// The live queue in the shape of its config, for drift.
fn attributes(q: &Queue) -> Value {
    json!({
        "compute_node_group_ids": q.compute_node_group_configurations().iter().filter_map(|c| c.compute_node_group_id()).collect::<Vec<_>>(),
        "slurm_settings": super::settings_of(q.slurm_configuration().map(aws_sdk_pcs::types::QueueSlurmConfiguration::slurm_custom_settings).unwrap_or_default()),
    })
}

fn outputs(q: &Queue) -> Value {
    json!({ "id": child_id(q.cluster_id(), q.id()), "queue_id": q.id(), "name": q.name(), "arn": q.arn() })
}

/// The node groups as PCS takes them; `ids` are the groups' PCS ids.
fn configurations(ids: &[String]) -> Vec<ComputeNodeGroupConfiguration> {
    ids.iter()
        .map(|id| ComputeNodeGroupConfiguration::builder().compute_node_group_id(id).build())
        .collect()
}

impl Resource for PcsQueue {
    /// Passes the create's token as `clientToken`; a queue of this name that an earlier try
    /// made (its `forge:token` tag) is adopted and waited for.
    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let aws = ctx.cloud.aws().await;
        let made = aws
            .pcs
            .create_queue()
            .cluster_identifier(&cfg.cluster_id)
            .queue_name(&cfg.name)
            .set_compute_node_group_configurations(Some(configurations(&cfg.compute_node_group_ids)))
            .slurm_configuration(
                QueueSlurmConfigurationRequest::builder()
                    .set_slurm_custom_settings(Some(slurm_settings(&cfg.slurm_settings)?))
                    .build(),
            )
            .client_token(token)
            .set_tags(Some(create_tags(ctx, token, config)))
            .send()
            .await;
        let claim = Claim::new(ctx, token, "PCS queue", &cfg.name);
        let limit = timeout(config, "create", CREATE_TIMEOUT);
        let queue = super::created_and_active(&claim, aws, "CreateQueue", made, limit, || get(aws, &cfg.cluster_id, &cfg.name)).await?;
        Ok(Created {
            id: child_id(queue.cluster_id(), queue.id()),
            outputs: outputs(&queue),
        })
    }

    /// One ListQueues (all pages) per cluster the ids name, then a GetQueue per live queue
    /// (PCS lists no attributes) for drift.
    async fn read(&self, cloud: &Cloud, _stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        let aws = cloud.aws().await;
        let live = live_children(ids, |cluster| async move { members!(pcs aws, list_queues, queues, &cluster) }).await?;
        super::observe(live, |cluster, member| async move { get(aws, &cluster, &member).await }, attributes).await
    }

    async fn find(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Option<String>, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let aws = ctx.cloud.aws().await;
        let found = super::own(ctx, aws, token, get(aws, &cfg.cluster_id, &cfg.name).await?).await?;
        Ok(found.map(|q| child_id(q.cluster_id(), q.id())))
    }

    /// Compares with the live queue; one UpdateQueue with what differs.
    async fn update(&self, ctx: &Ctx, id: &str, old: &Value, new: &Value) -> Result<Value, ProviderError> {
        let cfg: Config = parse(ctx, new)?;
        let (cluster, queue) = split(id);
        let aws = ctx.cloud.aws().await;
        let limit = timeout(new, "update", UPDATE_TIMEOUT);
        let what = format!("PCS queue `{}`", cfg.name);
        let mut live = wait_for(ctx, &what, limit, || get(aws, cluster, queue), active).await?;
        let groups: Vec<String> = live
            .compute_node_group_configurations()
            .iter()
            .filter_map(|c| c.compute_node_group_id().map(str::to_owned))
            .collect();
        let settings = super::settings_of(
            live.slurm_configuration()
                .map(aws_sdk_pcs::types::QueueSlurmConfiguration::slurm_custom_settings)
                .unwrap_or_default(),
        );
        if groups != cfg.compute_node_group_ids || settings != cfg.slurm_settings {
            aws.pcs
                .update_queue()
                .cluster_identifier(cluster)
                .queue_identifier(queue)
                .set_compute_node_group_configurations(Some(configurations(&cfg.compute_node_group_ids)))
                .slurm_configuration(
                    UpdateQueueSlurmConfigurationRequest::builder()
                        .set_slurm_custom_settings(Some(slurm_settings(&cfg.slurm_settings)?))
                        .build(),
                )
                .client_token(uuid::Uuid::new_v4().to_string())
                .send()
                .await
                .map_err(|e| pcs_error(aws, "UpdateQueue", e))?;
            live = wait_for(ctx, &what, limit, || get(aws, cluster, queue), active).await?;
        }
        sync_tags(ctx, aws, live.arn(), old, new).await?;
        Ok(outputs(&live))
    }

    async fn delete(&self, ctx: &Ctx, id: &str, config: &Value) -> Result<(), ProviderError> {
        let (cluster, queue) = split(id);
        let aws = ctx.cloud.aws().await;
        let live = || get(aws, cluster, queue);
        delete_then_wait(ctx, timeout(config, "delete", DELETE_TIMEOUT), live, || async {
            let answer = aws
                .pcs
                .delete_queue()
                .cluster_identifier(cluster)
                .queue_identifier(queue)
                .client_token(uuid::Uuid::new_v4().to_string())
                .send()
                .await;
            deleted(aws, "DeleteQueue", NOT_FOUND, CONFLICT, answer)
        })
        .await
    }
}
