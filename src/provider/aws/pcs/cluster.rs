//! `aws_pcs_cluster`: an AWS PCS cluster, the Slurm controller of a Slurm cluster. Creation waits
//! CREATING → ACTIVE (2 hours by default: AWS quotes 10–15 minutes); PCS lets one cluster be
//! CREATING at a time per region, so creates are serialized and its quota answer retried. The
//! name, size, subnet, security groups and Slurm version are fixed at creation (the SDK forge
//! builds with has no scheduler update); the Slurm settings and the scale-down idle time change
//! in place. Deletion waits until it is gone (its node groups and queues go first).

use super::{CONFLICT, NOT_FOUND, active, create_tags, pcs_error, slurm_settings, sync_tags};
use crate::provider::aws::{Claim, Clients, delete_then_wait, deleted, existing, found, parse, wait_for};
use crate::provider::{Cloud, Created, Ctx, Observed, ProviderError, Resource, timeout};
use crate::schema::attributes;
use aws_sdk_pcs::types::{
    AccountingMode, AccountingRequest, Cluster, ClusterSlurmConfigurationRequest, EndpointType, NetworkingRequest, SchedulerRequest,
    SchedulerType, Size, UpdateClusterSlurmConfigurationRequest,
};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

/// The `aws_pcs_cluster` kind.
pub(crate) struct PcsCluster;

attributes! {
    kind PcsCluster, spec "aws_pcs_cluster", outputs [id, name = attribute, arn, slurmctld_endpoint, slurmctld_port, auth_key_secret_arn], extra [timeouts, tags];
    struct Config {
        name: String [replace],
        slurm_version: String [replace],
        size: String [replace],
        subnet_id: String [replace],
        #[serde(default)] security_group_ids: Vec<String> [replace],
        scale_down_idle_seconds: Option<i32>,
        #[serde(default)] slurm_settings: BTreeMap<String, String>,
        accounting: Option<bool> [replace],
    }
}

const CREATE_TIMEOUT: Duration = Duration::from_secs(2 * 60 * 60);
const UPDATE_TIMEOUT: Duration = Duration::from_secs(60 * 60);
const DELETE_TIMEOUT: Duration = Duration::from_secs(60 * 60);

/// The cluster `identifier` (id or name), or `None`.
pub(crate) async fn get(aws: &Clients, identifier: &str) -> Result<Option<Cluster>, ProviderError> {
    let answer = aws.pcs.get_cluster().cluster_identifier(identifier).send().await;
    Ok(found(aws, "GetCluster", answer, NOT_FOUND)?.and_then(|out| out.cluster().cloned()))
}

fn outputs(c: &Cluster) -> Value {
    let slurmctld = c.endpoints().iter().find(|e| e.r#type() == &EndpointType::Slurmctld);
    json!({
        "id": c.id(),
        "name": c.name(),
        "arn": c.arn(),
        "slurmctld_endpoint": slurmctld.map(aws_sdk_pcs::types::Endpoint::private_ip_address),
        "slurmctld_port": slurmctld.map(aws_sdk_pcs::types::Endpoint::port),
        "auth_key_secret_arn": c.slurm_configuration().and_then(|s| s.auth_key()).map(aws_sdk_pcs::types::SlurmAuthKey::secret_arn),
    })
}

impl Resource for PcsCluster {
    /// PCS bills its Slurm controller by the hour, a fee forge does not read yet.
    fn meter(&self, _sight: &crate::cost::Sight) -> Option<crate::cost::Meter> {
        Some(crate::cost::Meter::Unpriced {
            reason: "forge does not read PCS's controller fee yet".into(),
        })
    }
    /// One cluster CREATING at a time per region and account, as PCS allows.
    fn serialization_key(&self, _config: &Value) -> Option<String> {
        Some("aws_pcs_cluster create".into())
    }

    /// Passes the create's token as `clientToken`; a cluster of this name that an earlier try
    /// made (its `forge:token` tag) is adopted and waited for.
    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let aws = ctx.cloud.aws().await;
        let size = Size::from(cfg.size.as_str());
        let mut slurm = ClusterSlurmConfigurationRequest::builder()
            .set_scale_down_idle_time_in_seconds(cfg.scale_down_idle_seconds)
            .set_slurm_custom_settings(Some(slurm_settings(&cfg.slurm_settings)?));
        if cfg.accounting == Some(true) {
            let accounting = AccountingRequest::builder()
                .mode(AccountingMode::Standard)
                .build()
                .map_err(|e| ProviderError::permanent(e.to_string()))?;
            slurm = slurm.accounting(accounting);
        }
        let made = aws
            .pcs
            .create_cluster()
            .cluster_name(&cfg.name)
            .scheduler(
                SchedulerRequest::builder()
                    .r#type(SchedulerType::Slurm)
                    .version(&cfg.slurm_version)
                    .build()
                    .map_err(|e| ProviderError::permanent(e.to_string()))?,
            )
            .size(size)
            .networking(
                NetworkingRequest::builder()
                    .subnet_ids(&cfg.subnet_id)
                    .set_security_group_ids(Some(cfg.security_group_ids.clone()))
                    .build(),
            )
            .slurm_configuration(slurm.build())
            .client_token(token)
            .set_tags(Some(create_tags(ctx, token, config)))
            .send()
            .await;
        let claim = Claim::new(ctx, token, "PCS cluster", &cfg.name);
        let limit = timeout(config, "create", CREATE_TIMEOUT);
        let cluster = super::created_and_active(&claim, aws, "CreateCluster", made, limit, || get(aws, &cfg.name)).await?;
        Ok(Created {
            id: cluster.id().to_owned(),
            outputs: outputs(&cluster),
        })
    }

    /// One ListClusters (all pages).
    async fn read(&self, cloud: &Cloud, _stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        let aws = cloud.aws().await;
        let listed = all_pages!(aws, aws.pcs.list_clusters(), clusters, "ListClusters");
        Ok(existing(ids, listed.iter().map(aws_sdk_pcs::types::ClusterSummary::id)))
    }

    async fn find(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Option<String>, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let aws = ctx.cloud.aws().await;
        let found = super::own(ctx, aws, token, get(aws, &cfg.name).await?).await?;
        Ok(found.map(|c| c.id().to_owned()))
    }

    /// The Slurm settings and scale-down time through UpdateCluster; tags.
    async fn update(&self, ctx: &Ctx, id: &str, old: &Value, new: &Value) -> Result<Value, ProviderError> {
        let (before, cfg): (Config, Config) = (parse(ctx, old)?, parse(ctx, new)?);
        let aws = ctx.cloud.aws().await;
        let limit = timeout(new, "update", UPDATE_TIMEOUT);
        let what = format!("PCS cluster `{}`", cfg.name);
        let mut live = wait_for(ctx, &what, limit, || get(aws, id), active).await?;
        if before.slurm_settings != cfg.slurm_settings || before.scale_down_idle_seconds != cfg.scale_down_idle_seconds {
            let slurm = UpdateClusterSlurmConfigurationRequest::builder()
                .set_scale_down_idle_time_in_seconds(cfg.scale_down_idle_seconds)
                .set_slurm_custom_settings(Some(slurm_settings(&cfg.slurm_settings)?))
                .build();
            aws.pcs
                .update_cluster()
                .cluster_identifier(id)
                .slurm_configuration(slurm)
                .client_token(uuid::Uuid::new_v4().to_string())
                .send()
                .await
                .map_err(|e| pcs_error(aws, "UpdateCluster", e))?;
            live = wait_for(ctx, &what, limit, || get(aws, id), active).await?;
        }
        sync_tags(ctx, aws, live.arn(), old, new).await?;
        Ok(outputs(&live))
    }

    async fn delete(&self, ctx: &Ctx, id: &str, config: &Value) -> Result<(), ProviderError> {
        let aws = ctx.cloud.aws().await;
        let live = || get(aws, id);
        delete_then_wait(ctx, timeout(config, "delete", DELETE_TIMEOUT), live, || async {
            let answer = aws
                .pcs
                .delete_cluster()
                .cluster_identifier(id)
                .client_token(uuid::Uuid::new_v4().to_string())
                .send()
                .await;
            deleted(aws, "DeleteCluster", NOT_FOUND, CONFLICT, answer)
        })
        .await
    }
}
