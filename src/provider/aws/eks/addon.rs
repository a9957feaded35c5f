//! `aws_eks_addon`: an EKS add-on (`vpc-cni`, `coredns`, `kube-proxy`, CSI drivers, …). The
//! version is a fixed one, `"latest"` (the newest one DescribeAddonVersions lists for the
//! cluster's Kubernetes version) or left out (EKS's default for that version). Creation waits
//! CREATING → ACTIVE; version, service account role and configuration change in place.

use super::{IN_USE, NOT_FOUND, Object, Scope, create_tags, created_or_own, owned, planned_child_id, sync_tags, wait_update};
use crate::provider::aws::{Claim, Clients, Poll, delete_then_wait, deleted, error, found, parse, wait_for};
use crate::provider::aws::{child_id, live_children, split};
use crate::provider::{Cloud, Created, Ctx, Inspected, Observed, ProviderError, Resource, prior_output, timeout};
use crate::schema::attributes;
use aws_sdk_eks::types::{Addon, AddonStatus, ResolveConflicts};
use serde_json::{Value, json};
use std::time::Duration;

/// The `aws_eks_addon` kind.
pub(crate) struct EksAddon;

attributes! {
    kind EksAddon, spec "aws_eks_addon", outputs [id = computed planned_child_id, name = attribute, arn, version = computed planned_version], extra [timeouts, tags];
    struct Config {
        cluster_name: String [replace],
        name: String [replace],
        version: Option<String>,
        service_account_role_arn: Option<String>,
        configuration_values: Option<String>,
    }
}

const CREATE_TIMEOUT: Duration = Duration::from_secs(20 * 60);
const UPDATE_TIMEOUT: Duration = Duration::from_secs(20 * 60);
const DELETE_TIMEOUT: Duration = Duration::from_secs(20 * 60);

async fn describe(aws: &Clients, cluster: &str, name: &str) -> Result<Option<Addon>, ProviderError> {
    let answer = aws.eks.describe_addon().cluster_name(cluster).addon_name(name).send().await;
    Ok(found(aws, "DescribeAddon", answer, NOT_FOUND)?.and_then(|out| out.addon().cloned()))
}

/// Whether the add-on is ACTIVE, for [`wait_for`]: a failed or degraded one never will be.
fn active(a: &Addon) -> Poll {
    match a.status() {
        Some(AddonStatus::Active) => Poll::Done(()),
        Some(s @ (AddonStatus::CreateFailed | AddonStatus::UpdateFailed | AddonStatus::Degraded)) => {
            Poll::Failed(format!("is {}: {}", s.as_str(), a.issues()))
        }
        status => Poll::Pending(status.map_or("CREATING", |s| s.as_str()).to_owned()),
    }
}

async fn wait_active(ctx: &Ctx, aws: &Clients, cluster: &str, name: &str, limit: Duration) -> Result<Addon, ProviderError> {
    wait_for(ctx, &format!("EKS add-on `{name}`"), limit, || describe(aws, cluster, name), active).await
}

/// The version to ask for: a fixed one as written, `"latest"` resolved for the cluster's
/// Kubernetes version, or none (EKS's default).
async fn resolve_version(aws: &Clients, cluster: &str, name: &str, version: Option<&str>) -> Result<Option<String>, ProviderError> {
    if version != Some("latest") {
        return Ok(version.map(str::to_owned));
    }
    let kubernetes = aws
        .eks
        .describe_cluster()
        .name(cluster)
        .send()
        .await
        .map_err(|e| error(aws, "DescribeCluster", e))?
        .cluster()
        .and_then(|c| c.version())
        .map(str::to_owned);
    let listed = aws
        .eks
        .describe_addon_versions()
        .addon_name(name)
        .set_kubernetes_version(kubernetes.clone())
        .send()
        .await
        .map_err(|e| error(aws, "DescribeAddonVersions", e))?;
    let newest = listed
        .addons()
        .iter()
        .flat_map(aws_sdk_eks::types::AddonInfo::addon_versions)
        .filter_map(|v| v.addon_version())
        .max_by_key(|v| version_key(v));
    match newest {
        Some(v) => Ok(Some(v.to_owned())),
        None => Err(ProviderError::permanent(format!(
            "EKS lists no version of add-on `{name}` for Kubernetes {}; check the add-on's name",
            kubernetes.unwrap_or_default()
        ))),
    }
}

/// Orders `v1.19.0-eksbuild.2` by its numbers.
fn version_key(version: &str) -> Vec<u64> {
    version
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|part| part.parse().ok())
        .collect()
}

fn outputs(cluster: &str, a: &Addon) -> Value {
    let name = a.addon_name().unwrap_or_default();
    json!({ "id": child_id(cluster, name), "name": name, "arn": a.addon_arn(), "version": a.addon_version() })
}

/// The planned `version`: the block's, unless it asks for the latest (known after apply);
/// else as recorded.
fn planned_version(config: &Value, prior: Option<&Value>) -> Value {
    match config.get("version").and_then(Value::as_str) {
        Some(v) if v != "latest" => json!(v),
        _ => prior_output(prior, "version"),
    }
}

impl Resource for EksAddon {
    /// Passes the create's token as `clientRequestToken`; an add-on that an earlier try of
    /// this create made (its `forge:token` tag) is adopted and waited for.
    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let aws = ctx.cloud.aws().await;
        let version = resolve_version(aws, &cfg.cluster_name, &cfg.name, cfg.version.as_deref()).await?;
        let made = aws
            .eks
            .create_addon()
            .cluster_name(&cfg.cluster_name)
            .addon_name(&cfg.name)
            .set_addon_version(version)
            .set_service_account_role_arn(cfg.service_account_role_arn.clone())
            .set_configuration_values(cfg.configuration_values.clone())
            .resolve_conflicts(ResolveConflicts::Overwrite)
            .client_request_token(token)
            .set_tags(Some(create_tags(ctx, token, config)))
            .send()
            .await;
        let claim = Claim::new(ctx, token, "EKS add-on", &cfg.name);
        created_or_own(&claim, aws, "CreateAddon", made, || describe(aws, &cfg.cluster_name, &cfg.name)).await?;
        let addon = wait_active(ctx, aws, &cfg.cluster_name, &cfg.name, timeout(config, "create", CREATE_TIMEOUT)).await?;
        Ok(Created {
            outputs: outputs(&cfg.cluster_name, &addon),
            id: child_id(&cfg.cluster_name, &cfg.name),
        })
    }

    /// One ListAddons per cluster the ids name.
    async fn read(&self, cloud: &Cloud, _stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        let aws = cloud.aws().await;
        live_children(ids, |cluster| async move { members!(eks aws, list_addons, addons, cluster) })
            .await
            .map(Observed::existing)
    }

    fn importable(&self) -> bool {
        true
    }

    /// The add-on `cluster/name`, in the block's terms.
    async fn inspect(&self, cloud: &Cloud, id: &str) -> Result<Option<Inspected>, ProviderError> {
        let (cluster, name) = split(id);
        let blank = |v: Option<&str>| v.filter(|s| !s.is_empty()).map(str::to_owned);
        Ok(describe(cloud.aws().await, cluster, name).await?.map(|a| Inspected {
            outputs: outputs(cluster, &a),
            attributes: json!({
                "cluster_name": a.cluster_name(),
                "name": a.addon_name(),
                "version": a.addon_version(),
                "service_account_role_arn": blank(a.service_account_role_arn()),
                "configuration_values": blank(a.configuration_values()),
                "tags": a.tags(),
            }),
            mark: super::mark_of(a.tags()),
        }))
    }

    async fn mark(&self, ctx: &Ctx, id: &str, token: &str) -> Result<(), ProviderError> {
        let (cluster, name) = split(id);
        let aws = ctx.cloud.aws().await;
        let addon = describe(aws, cluster, name).await?;
        let arn = crate::provider::aws::still_there(&format!("the EKS add-on `{id}`"), addon.as_ref().and_then(Addon::addon_arn))?;
        super::mark(ctx, aws, arn, token).await
    }

    async fn find(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Option<String>, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let found = describe(ctx.cloud.aws().await, &cfg.cluster_name, &cfg.name).await?;
        Ok(found
            .filter(|a| owned(ctx, token, a.tags()))
            .map(|_| child_id(&cfg.cluster_name, &cfg.name)))
    }

    /// Compares with the live add-on, so an update that failed or ran out of time is picked up
    /// where the add-on stands.
    async fn update(&self, ctx: &Ctx, id: &str, old: &Value, new: &Value) -> Result<Value, ProviderError> {
        let cfg: Config = parse(ctx, new)?;
        let (cluster, name) = split(id);
        let aws = ctx.cloud.aws().await;
        let limit = timeout(new, "update", UPDATE_TIMEOUT);
        let mut live = wait_active(ctx, aws, cluster, name, limit).await?;
        let version = resolve_version(aws, cluster, name, cfg.version.as_deref()).await?;
        let blank = |v: Option<&str>| v.filter(|s| !s.is_empty()).map(str::to_owned);
        if version.as_deref().is_some_and(|v| live.addon_version() != Some(v))
            || blank(live.service_account_role_arn()) != cfg.service_account_role_arn
            || blank(live.configuration_values()) != cfg.configuration_values
        {
            let out = aws
                .eks
                .update_addon()
                .cluster_name(cluster)
                .addon_name(name)
                .set_addon_version(version)
                .service_account_role_arn(cfg.service_account_role_arn.clone().unwrap_or_default())
                .configuration_values(cfg.configuration_values.clone().unwrap_or_default())
                .resolve_conflicts(ResolveConflicts::Overwrite)
                .send()
                .await
                .map_err(|e| error(aws, "UpdateAddon", e))?;
            if let Some(update) = out.update().and_then(|u| u.id()) {
                wait_update(ctx, aws, cluster, Scope::Addon(name), update, limit).await?;
            }
            live = wait_active(ctx, aws, cluster, name, limit).await?;
        }
        sync_tags(ctx, aws, live.addon_arn().unwrap_or_default(), old, new).await?;
        Ok(outputs(cluster, &live))
    }

    async fn delete(&self, ctx: &Ctx, id: &str, config: &Value) -> Result<(), ProviderError> {
        let (cluster, name) = split(id);
        let aws = ctx.cloud.aws().await;
        let live = || describe(aws, cluster, name);
        delete_then_wait(ctx, timeout(config, "delete", DELETE_TIMEOUT), live, || async {
            let answer = aws.eks.delete_addon().cluster_name(cluster).addon_name(name).send().await;
            deleted(aws, "DeleteAddon", NOT_FOUND, IN_USE, answer)
        })
        .await
    }
}
