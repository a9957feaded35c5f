//! `aws_eks_cluster`: an EKS control plane. Creation waits CREATING → ACTIVE (30 minutes by
//! default, `timeouts.create` to change it) with the status on the resource's progress line; a
//! wait that runs out leaves the create pending, and the next `forge up` resumes waiting on the
//! same cluster. Version, endpoint access, authentication mode and logging change in place, one
//! EKS update at a time; deletion waits until the cluster is gone.

use super::{IN_USE, NOT_FOUND, Object, Scope, create_tags, created_or_own, owned, sync_tags, wait_update};
use crate::provider::aws::{Claim, Clients, Poll, delete_then_wait, deleted, error, existing, found, parse, wait_for};
use crate::provider::{Cloud, Created, Ctx, Found, Inspected, Lookups, Observed, ProviderError, Refusal, Resource, Selector, timeout};
use crate::schema::attributes;
use aws_sdk_eks::types::{
    AuthenticationMode, Cluster, ClusterStatus, CreateAccessConfigRequest, LogSetup, LogType, Logging, Update, UpdateAccessConfigRequest,
    VpcConfigRequest,
};
use serde_json::{Value, json};
use std::time::Duration;

/// The `aws_eks_cluster` kind.
pub(crate) struct EksCluster;

attributes! {
    kind EksCluster, spec "aws_eks_cluster", outputs [id = attribute name, name = attribute, arn, endpoint, certificate_authority, oidc_issuer, cluster_security_group_id, vpc_id, version = attribute], extra [timeouts, tags];
    struct Config {
        name: String [replace],
        role_arn: String [replace],
        version: Option<String>,
        subnet_ids: Vec<String> [replace],
        #[serde(default)] security_group_ids: Vec<String> [replace],
        #[serde(default = "yes")] endpoint_public_access: bool,
        #[serde(default)] endpoint_private_access: bool,
        public_access_cidrs: Option<Vec<String>>,
        #[serde(default = "default_authentication_mode")] authentication_mode: String,
        #[serde(default)] logging: Vec<String>,
    }
}

fn yes() -> bool {
    true
}

fn default_authentication_mode() -> String {
    "API_AND_CONFIG_MAP".into()
}

/// The authentication modes in the one order EKS changes them: a cluster goes on, never back.
const MODES: [&str; 3] = ["CONFIG_MAP", "API_AND_CONFIG_MAP", "API"];

/// A control plane takes 10–15 minutes, sometimes more; eksctl waits 25.
const CREATE_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// A version upgrade takes up to about half an hour.
const UPDATE_TIMEOUT: Duration = Duration::from_secs(60 * 60);
const DELETE_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// The control plane log types EKS knows.
const LOG_TYPES: &[&str] = &["api", "audit", "authenticator", "controllerManager", "scheduler"];

/// The cluster named `name`, if it exists.
pub async fn describe(aws: &Clients, name: &str) -> Result<Option<Cluster>, ProviderError> {
    let answer = aws.eks.describe_cluster().name(name).send().await;
    Ok(found(aws, "DescribeCluster", answer, NOT_FOUND)?.and_then(|out| out.cluster().cloned()))
}

/// Whether the cluster is ACTIVE, for [`wait_for`]: a failed or deleting one never will be.
fn active(c: &Cluster) -> Poll {
    match c.status() {
        Some(ClusterStatus::Active) => Poll::Done(()),
        Some(ClusterStatus::Failed) => Poll::Failed(format!("FAILED: {}", c.issues())),
        Some(ClusterStatus::Deleting) => Poll::Failed("is being deleted by someone else".into()),
        status => Poll::Pending(status.map_or("PENDING", |s| s.as_str()).to_owned()),
    }
}

/// Waits until the cluster is ACTIVE again and returns it.
async fn wait_active(ctx: &Ctx, aws: &Clients, name: &str, limit: Duration) -> Result<Cluster, ProviderError> {
    wait_for(ctx, &format!("EKS cluster `{name}`"), limit, || describe(aws, name), active).await
}

/// Waits for an update EKS accepted (EKS runs one update of a cluster at a time), then for the
/// cluster to be ACTIVE again; returns it as it is then.
async fn settle(ctx: &Ctx, aws: &Clients, id: &str, update: Option<&Update>, limit: Duration) -> Result<Cluster, ProviderError> {
    if let Some(update) = update.and_then(|u| u.id()) {
        wait_update(ctx, aws, id, Scope::Cluster, update, limit).await?;
    }
    wait_active(ctx, aws, id, limit).await
}

/// The control plane log types the cluster has on.
fn enabled_logs(c: &Cluster) -> std::collections::BTreeSet<&str> {
    c.logging()
        .map(aws_sdk_eks::types::Logging::cluster_logging)
        .unwrap_or_default()
        .iter()
        .filter(|setup| setup.enabled() == Some(true))
        .flat_map(|setup| setup.types().iter().map(LogType::as_str))
        .collect()
}

fn outputs(c: &Cluster) -> Value {
    let name = c.name().unwrap_or_default();
    json!({
        "id": name,
        "name": name,
        "arn": c.arn(),
        "endpoint": c.endpoint(),
        "certificate_authority": c.certificate_authority().and_then(|a| a.data()),
        "oidc_issuer": c.identity().and_then(|i| i.oidc()).and_then(|o| o.issuer()),
        "cluster_security_group_id": c.resources_vpc_config().and_then(|v| v.cluster_security_group_id()),
        "vpc_id": c.resources_vpc_config().and_then(|v| v.vpc_id()),
        "version": c.version(),
    })
}

/// What a look-up reports of an existing cluster, in the block's shape.
fn read_attributes(c: &Cluster) -> Value {
    let vpc = c.resources_vpc_config();
    json!({
        "name": c.name(),
        "role_arn": c.role_arn(),
        "version": c.version(),
        "subnet_ids": vpc.map(aws_sdk_eks::types::VpcConfigResponse::subnet_ids),
        "security_group_ids": vpc.map(aws_sdk_eks::types::VpcConfigResponse::security_group_ids),
        "endpoint_public_access": vpc.map(aws_sdk_eks::types::VpcConfigResponse::endpoint_public_access),
        "endpoint_private_access": vpc.map(aws_sdk_eks::types::VpcConfigResponse::endpoint_private_access),
        "authentication_mode": c.access_config().and_then(|a| a.authentication_mode()).map(aws_sdk_eks::types::AuthenticationMode::as_str),
        "public_access_cidrs": vpc.map(aws_sdk_eks::types::VpcConfigResponse::public_access_cidrs),
        "logging": enabled_logs(c).into_iter().collect::<Vec<_>>(),
        "tags": c.tags(),
    })
}

fn logging(types: &[String]) -> Result<Logging, ProviderError> {
    if let Some(bad) = types.iter().find(|t| !LOG_TYPES.contains(&t.as_str())) {
        return Err(ProviderError::permanent(format!(
            "`logging` has `{bad}`; EKS control plane log types are {}",
            LOG_TYPES.join(", ")
        )));
    }
    let disabled: Vec<LogType> = LOG_TYPES
        .iter()
        .filter(|t| !types.iter().any(|x| x == *t))
        .map(|t| LogType::from(*t))
        .collect();
    let enabled = LogSetup::builder()
        .set_types(Some(types.iter().map(|t| LogType::from(t.as_str())).collect()))
        .enabled(true)
        .build();
    let mut setups = vec![enabled];
    if !disabled.is_empty() {
        setups.push(LogSetup::builder().set_types(Some(disabled)).enabled(false).build());
    }
    Ok(Logging::builder().set_cluster_logging(Some(setups)).build())
}

fn authentication_mode(mode: &str) -> Result<AuthenticationMode, ProviderError> {
    match mode {
        "API" | "API_AND_CONFIG_MAP" | "CONFIG_MAP" => Ok(AuthenticationMode::from(mode)),
        other => Err(ProviderError::permanent(format!(
            "`authentication_mode = \"{other}\"`: expected \"API\", \"API_AND_CONFIG_MAP\" or \"CONFIG_MAP\""
        ))),
    }
}

/// When EKS's standard support of each version ends (14 months after its release; then 12
/// months of extended support at a higher cluster-hour rate), from the EKS user guide's release
/// calendar (https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html).
const STANDARD_SUPPORT_ENDS: &[(&str, &str)] = &[
    ("1.28", "2024-11-26"),
    ("1.29", "2025-03-23"),
    ("1.30", "2025-07-23"),
    ("1.31", "2025-11-26"),
    ("1.32", "2026-03-23"),
    ("1.33", "2026-07-29"),
    ("1.34", "2026-12-02"),
    ("1.35", "2027-03-27"),
];

/// Whether `version` is past EKS's standard support at `now`: a version older than the
/// calendar's first is; one newer than its last is not.
fn past_standard_support(version: &str, now: std::time::SystemTime) -> bool {
    let minor = |v: &str| v.split('.').nth(1).and_then(|m| m.parse::<u32>().ok());
    match STANDARD_SUPPORT_ENDS.iter().find(|(v, _)| *v == version) {
        Some((_, ends)) => humantime::parse_rfc3339(&format!("{ends}T00:00:00Z")).is_ok_and(|end| now >= end),
        None => matches!((minor(version), minor(STANDARD_SUPPORT_ENDS[0].0)), (Some(v), Some(first)) if v < first),
    }
}

impl Resource for EksCluster {
    /// Its hours, and once its version (as written, else as EKS reports it) is past standard
    /// support ([`STANDARD_SUPPORT_ENDS`]) the extended-support surcharge on top of them.
    fn meter(&self, sight: &crate::cost::Sight) -> Option<crate::cost::Meter> {
        Some(sight.in_aws_region(|region| {
            let version = sight.text("version").or_else(|| sight.output("version"));
            let extended_support = version.is_some_and(|v| past_standard_support(v, std::time::SystemTime::now()));
            let what = match (version, extended_support) {
                (Some(v), true) => format!("EKS cluster, {v} in extended support"),
                (Some(v), false) => format!("EKS cluster, {v}"),
                (None, _) => "EKS cluster".into(),
            };
            crate::cost::Meter::Hourly {
                what,
                parts: [false, extended_support]
                    .into_iter()
                    .enumerate()
                    .filter(|(i, extended)| *i == 0 || *extended)
                    .map(|(_, extended)| {
                        (
                            crate::cost::Rate::EksCluster {
                                region: region.clone(),
                                extended_support: extended,
                            },
                            1.0,
                        )
                    })
                    .collect(),
                count: crate::cost::Count::ONE,
                upper_bound: None,
            }
        }))
    }
    /// Log types in no order, as EKS keeps them.
    fn comparable(&self, _id: &str, config: &Value) -> Value {
        crate::provider::sorted_lists(config, &["logging"])
    }

    /// A change of `authentication_mode` back towards `CONFIG_MAP`, which EKS refuses.
    fn refusal(&self, before: &Value, after: &Value, _outputs: &Value) -> Option<Refusal> {
        let mode = |config: &Value| {
            config
                .get("authentication_mode")
                .and_then(Value::as_str)
                .unwrap_or("API_AND_CONFIG_MAP")
                .to_owned()
        };
        let (from, to) = (mode(before), mode(after));
        let rank = |m: &str| MODES.iter().position(|x| *x == m);
        (rank(&to)? < rank(&from)?).then(|| Refusal {
            attribute: "authentication_mode",
            message: format!("EKS changes a cluster's authentication mode only onwards (CONFIG_MAP, then API_AND_CONFIG_MAP, then API): this one is {from}, the stack asks for {to}"),
            hint: format!("write `authentication_mode = \"{from}\"`, or let forge make a new cluster"),
        })
    }

    /// Passes the create's token as `clientRequestToken`; a cluster of that name made by an
    /// earlier try of this create (its `forge:token` tag) is adopted and waited for.
    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let aws = ctx.cloud.aws().await;
        let vpc = VpcConfigRequest::builder()
            .set_subnet_ids(Some(cfg.subnet_ids.clone()))
            .set_security_group_ids(Some(cfg.security_group_ids.clone()))
            .endpoint_public_access(cfg.endpoint_public_access)
            .endpoint_private_access(cfg.endpoint_private_access)
            .set_public_access_cidrs(cfg.public_access_cidrs.clone())
            .build();
        let access = CreateAccessConfigRequest::builder()
            .authentication_mode(authentication_mode(&cfg.authentication_mode)?)
            .bootstrap_cluster_creator_admin_permissions(true)
            .build();
        let made = aws
            .eks
            .create_cluster()
            .name(&cfg.name)
            .role_arn(&cfg.role_arn)
            .set_version(cfg.version.clone())
            .resources_vpc_config(vpc)
            .access_config(access)
            .logging(logging(&cfg.logging)?)
            .client_request_token(token)
            .set_tags(Some(create_tags(ctx, token, config)))
            .send()
            .await;
        let claim = Claim::new(ctx, token, "EKS cluster", &cfg.name);
        created_or_own(&claim, aws, "CreateCluster", made, || describe(aws, &cfg.name)).await?;
        let cluster = wait_active(ctx, aws, &cfg.name, timeout(config, "create", CREATE_TIMEOUT)).await?;
        Ok(Created {
            outputs: outputs(&cluster),
            id: cfg.name,
        })
    }

    async fn read(&self, cloud: &Cloud, _stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        let aws = cloud.aws().await;
        let clusters = all_pages!(aws, aws.eks.list_clusters(), clusters, "ListClusters");
        Ok(existing(ids, clusters.iter().map(String::as_str)))
    }

    fn importable(&self) -> bool {
        true
    }

    async fn inspect(&self, cloud: &Cloud, id: &str) -> Result<Option<Inspected>, ProviderError> {
        Ok(describe(cloud.aws().await, id).await?.map(|c| Inspected {
            outputs: outputs(&c),
            attributes: read_attributes(&c),
            mark: super::mark_of(c.tags()),
        }))
    }

    async fn mark(&self, ctx: &Ctx, id: &str, token: &str) -> Result<(), ProviderError> {
        let aws = ctx.cloud.aws().await;
        let cluster = describe(aws, id).await?;
        let arn = crate::provider::aws::still_there(&format!("the EKS cluster `{id}`"), cluster.as_ref().and_then(Cluster::arn))?;
        super::mark(ctx, aws, arn, token).await
    }

    fn lookups(&self) -> Lookups {
        Lookups {
            id: Some("a cluster name, or its ARN"),
            tags: false,
            attributes: &[],
        }
    }

    /// An existing cluster by name (an ARN's last segment): one DescribeCluster. One that is
    /// not ACTIVE is an error: node groups and add-ons cannot join it.
    async fn look_up(&self, cloud: &Cloud, selector: &Selector) -> Result<Vec<Found>, ProviderError> {
        let Selector::Id(id) = selector else {
            return Err(ProviderError::permanent("EKS lists no clusters by tag: name the cluster"));
        };
        let name = id.rsplit('/').next().unwrap_or(id);
        let Some(cluster) = describe(cloud.aws().await, name)
            .await?
            .filter(|c| !id.starts_with("arn:") || c.arn() == Some(id.as_str()))
        else {
            return Ok(Vec::new());
        };
        if let Poll::Failed(why) | Poll::Pending(why) = active(&cluster) {
            return Err(ProviderError::permanent(format!("the EKS cluster `{name}` is not ACTIVE: {why}")));
        }
        Ok(vec![Found {
            id: name.to_owned(),
            outputs: outputs(&cluster),
            attributes: read_attributes(&cluster),
        }])
    }

    async fn find(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Option<String>, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let found = describe(ctx.cloud.aws().await, &cfg.name).await?;
        Ok(found.filter(|c| owned(ctx, token, c.tags())).map(|_| cfg.name))
    }

    /// One EKS update at a time, each waited for before the next is sent: version, endpoint
    /// access, authentication mode, logging; then tags. Each is compared with the live cluster,
    /// not with the recorded attributes, so an update that failed or ran out of time half-way
    /// is picked up where the cluster stands on the next run.
    async fn update(&self, ctx: &Ctx, id: &str, old: &Value, new: &Value) -> Result<Value, ProviderError> {
        let cfg: Config = parse(ctx, new)?;
        let aws = ctx.cloud.aws().await;
        let limit = timeout(new, "update", UPDATE_TIMEOUT);
        let mut live = wait_active(ctx, aws, id, limit).await?;
        if let Some(version) = cfg.version.as_deref().filter(|v| live.version() != Some(*v)) {
            let out = aws.eks.update_cluster_version().name(id).version(version).send().await;
            let out = out.map_err(|e| error(aws, "UpdateClusterVersion", e))?;
            live = settle(ctx, aws, id, out.update(), limit).await?;
        }
        let endpoints = live
            .resources_vpc_config()
            .map(|v| (v.endpoint_public_access(), v.endpoint_private_access()));
        let cidrs = live
            .resources_vpc_config()
            .map(aws_sdk_eks::types::VpcConfigResponse::public_access_cidrs);
        let cidrs_differ = cfg.public_access_cidrs.as_deref().is_some_and(|want| cidrs != Some(want));
        if endpoints != Some((cfg.endpoint_public_access, cfg.endpoint_private_access)) || cidrs_differ {
            let vpc = VpcConfigRequest::builder()
                .endpoint_public_access(cfg.endpoint_public_access)
                .endpoint_private_access(cfg.endpoint_private_access)
                .set_public_access_cidrs(cfg.public_access_cidrs.clone())
                .build();
            let out = aws.eks.update_cluster_config().name(id).resources_vpc_config(vpc).send().await;
            let out = out.map_err(|e| error(aws, "UpdateClusterConfig", e))?;
            live = settle(ctx, aws, id, out.update(), limit).await?;
        }
        let mode = live
            .access_config()
            .and_then(|a| a.authentication_mode())
            .map(aws_sdk_eks::types::AuthenticationMode::as_str);
        if mode.is_some_and(|m| m != cfg.authentication_mode) {
            let access = UpdateAccessConfigRequest::builder()
                .authentication_mode(authentication_mode(&cfg.authentication_mode)?)
                .build();
            let out = aws.eks.update_cluster_config().name(id).access_config(access).send().await;
            let out = out.map_err(|e| error(aws, "UpdateClusterConfig", e))?;
            live = settle(ctx, aws, id, out.update(), limit).await?;
        }
        if enabled_logs(&live) != cfg.logging.iter().map(String::as_str).collect() {
            let out = aws
                .eks
                .update_cluster_config()
                .name(id)
                .logging(logging(&cfg.logging)?)
                .send()
                .await;
            let out = out.map_err(|e| error(aws, "UpdateClusterConfig", e))?;
            live = settle(ctx, aws, id, out.update(), limit).await?;
        }
        sync_tags(ctx, aws, live.arn().unwrap_or_default(), old, new).await?;
        Ok(outputs(&live))
    }

    async fn delete(&self, ctx: &Ctx, id: &str, config: &Value) -> Result<(), ProviderError> {
        let aws = ctx.cloud.aws().await;
        let live = || describe(aws, id);
        delete_then_wait(ctx, timeout(config, "delete", DELETE_TIMEOUT), live, || async {
            let answer = aws.eks.delete_cluster().name(id).send().await;
            deleted(aws, "DeleteCluster", NOT_FOUND, IN_USE, answer)
        })
        .await
    }
}
