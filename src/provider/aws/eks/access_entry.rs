//! `aws_eks_access_entry`: an IAM principal's access to an EKS cluster whose authentication
//! mode is `API` or `API_AND_CONFIG_MAP` — the entry (its Kubernetes groups and user name) and
//! the EKS access policies associated with it, cluster-wide or in namespaces. Groups, user
//! name and policies change in place; deleting the entry takes its policies with it.

use super::{NOT_FOUND, Object, create_tags, created_or_own, owned, sync_tags};
use crate::provider::aws::{Claim, Clients, Status, child_id, error, found, parse, split, tolerate};
use crate::provider::{Cloud, Created, Ctx, FieldType, Inspected, Observed, ProviderError, Resource};
use crate::schema::attributes;
use aws_sdk_eks::types::{AccessEntry, AccessScope, AccessScopeType};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};

/// The `aws_eks_access_entry` kind.
pub(crate) struct EksAccessEntry;

attributes! {
    kind EksAccessEntry, spec "aws_eks_access_entry", outputs [id = computed planned_id, arn, principal_arn = attribute], extra [tags];
    struct Config {
        cluster_name: String [replace],
        principal_arn: String [replace],
        #[serde(default)] kubernetes_groups: Vec<String>,
        username: Option<String>,
        #[serde(default)] policies: Vec<Policy>,
    }
}

/// `{ arn = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy", namespaces = ["a"] }`:
/// without namespaces, cluster-wide.
#[derive(Deserialize, serde::Serialize, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
struct Policy {
    arn: String,
    #[serde(default)]
    namespaces: Vec<String>,
}

/// The entry's id, known at plan time from `cluster_name` and `principal_arn`.
fn planned_id(config: &Value, _: Option<&Value>) -> Value {
    match (
        config.get("cluster_name").and_then(Value::as_str),
        config.get("principal_arn").and_then(Value::as_str),
    ) {
        (Some(cluster), Some(principal)) => Value::String(child_id(cluster, principal)),
        _ => Value::Null,
    }
}

impl crate::schema::AttributeType for Policy {
    const TYPE: FieldType = FieldType::Table;
}

impl Policy {
    fn scope(&self) -> AccessScope {
        let kind = if self.namespaces.is_empty() {
            AccessScopeType::Cluster
        } else {
            AccessScopeType::Namespace
        };
        AccessScope::builder()
            .r#type(kind)
            .set_namespaces((!self.namespaces.is_empty()).then(|| self.namespaces.clone()))
            .build()
    }
}

impl Status for AccessEntry {
    /// An entry has no status: it is there or not.
    fn status_name(&self) -> Option<&str> {
        Some("ACTIVE")
    }
}

impl Object for AccessEntry {
    fn tag_map(&self) -> Option<&HashMap<String, String>> {
        self.tags()
    }

    fn issues(&self) -> String {
        String::new()
    }
}

async fn describe(aws: &Clients, cluster: &str, principal: &str) -> Result<Option<AccessEntry>, ProviderError> {
    let answer = aws
        .eks
        .describe_access_entry()
        .cluster_name(cluster)
        .principal_arn(principal)
        .send()
        .await;
    Ok(found(aws, "DescribeAccessEntry", answer, NOT_FOUND)?.and_then(|out| out.access_entry().cloned()))
}

fn outputs(cluster: &str, entry: &AccessEntry) -> Value {
    let principal = entry.principal_arn().unwrap_or_default();
    json!({ "id": child_id(cluster, principal), "arn": entry.access_entry_arn(), "principal_arn": principal })
}

/// The policies associated with the entry now: ARN → namespaces (empty: cluster-wide).
async fn associated(aws: &Clients, cluster: &str, principal: &str) -> Result<BTreeMap<String, Vec<String>>, ProviderError> {
    let listed = aws
        .eks
        .list_associated_access_policies()
        .cluster_name(cluster)
        .principal_arn(principal)
        .send()
        .await
        .map_err(|e| error(aws, "ListAssociatedAccessPolicies", e))?;
    Ok(listed
        .associated_access_policies()
        .iter()
        .filter_map(|p| {
            let mut namespaces = p.access_scope().map(|s| s.namespaces().to_vec()).unwrap_or_default();
            namespaces.sort_unstable();
            Some((p.policy_arn()?.to_owned(), namespaces))
        })
        .collect())
}

/// Associates the policies `wanted` lists that are not associated so (a new scope replaces the
/// old one), and disassociates the others.
async fn sync_policies(aws: &Clients, cluster: &str, principal: &str, wanted: &[Policy]) -> Result<(), ProviderError> {
    let live = associated(aws, cluster, principal).await?;
    let sorted = |p: &Policy| {
        let mut namespaces = p.namespaces.clone();
        namespaces.sort_unstable();
        namespaces
    };
    for policy in wanted.iter().filter(|p| live.get(&p.arn) != Some(&sorted(p))) {
        aws.eks
            .associate_access_policy()
            .cluster_name(cluster)
            .principal_arn(principal)
            .policy_arn(&policy.arn)
            .access_scope(policy.scope())
            .send()
            .await
            .map_err(|e| error(aws, &format!("AssociateAccessPolicy {}", policy.arn), e))?;
    }
    for arn in live.keys().filter(|arn| !wanted.iter().any(|p| &p.arn == *arn)) {
        let answer = aws
            .eks
            .disassociate_access_policy()
            .cluster_name(cluster)
            .principal_arn(principal)
            .policy_arn(arn)
            .send()
            .await;
        tolerate(aws, "DisassociateAccessPolicy", answer, &[NOT_FOUND])?;
    }
    Ok(())
}

impl Resource for EksAccessEntry {
    /// Groups, policies and each policy's namespaces in no order, as EKS keeps them.
    fn comparable(&self, _id: &str, config: &Value) -> Value {
        let mut config = crate::provider::sorted_lists(config, &["kubernetes_groups"]);
        if let Some(policies) = config.get_mut("policies").and_then(Value::as_array_mut) {
            for policy in policies.iter_mut() {
                *policy = crate::provider::sorted_lists(policy, &["namespaces"]);
            }
            policies.sort_by(|a, b| a.get("arn").map(Value::to_string).cmp(&b.get("arn").map(Value::to_string)));
        }
        config
    }

    /// Passes the create's token as `clientRequestToken`; an entry an earlier try of this
    /// create made (its `forge:token` tag) is adopted, anyone else's refused.
    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let aws = ctx.cloud.aws().await;
        let made = aws
            .eks
            .create_access_entry()
            .cluster_name(&cfg.cluster_name)
            .principal_arn(&cfg.principal_arn)
            .set_kubernetes_groups(Some(cfg.kubernetes_groups.clone()))
            .set_username(cfg.username.clone())
            .client_request_token(token)
            .set_tags(Some(create_tags(ctx, token, config)))
            .send()
            .await;
        let claim = Claim::new(ctx, token, "EKS access entry", &cfg.principal_arn);
        created_or_own(&claim, aws, "CreateAccessEntry", made, || {
            describe(aws, &cfg.cluster_name, &cfg.principal_arn)
        })
        .await?;
        sync_policies(aws, &cfg.cluster_name, &cfg.principal_arn, &cfg.policies).await?;
        let entry = describe(aws, &cfg.cluster_name, &cfg.principal_arn)
            .await?
            .ok_or_else(|| ProviderError::permanent(format!("the access entry of {} went while it was made", cfg.principal_arn)))?;
        Ok(Created {
            outputs: outputs(&cfg.cluster_name, &entry),
            id: child_id(&cfg.cluster_name, &cfg.principal_arn),
        })
    }

    /// EKS has no batch read: one DescribeAccessEntry per entry, all at once.
    async fn read(&self, cloud: &Cloud, _stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        let aws = cloud.aws().await;
        let found = futures::future::try_join_all(ids.iter().map(|id| async move {
            let (cluster, principal) = split(id);
            Ok::<_, ProviderError>(describe(aws, cluster, principal).await?.map(|e| Observed {
                id: id.clone(),
                address: None,
                attributes: crate::provider::sorted_lists(
                    &json!({ "kubernetes_groups": e.kubernetes_groups(), "tags": e.tags() }),
                    &["kubernetes_groups"],
                ),
            }))
        }))
        .await?;
        Ok(found.into_iter().flatten().collect())
    }

    fn importable(&self) -> bool {
        true
    }

    /// The entry `cluster/principal ARN` with its access policies.
    async fn inspect(&self, cloud: &Cloud, id: &str) -> Result<Option<Inspected>, ProviderError> {
        let (cluster, principal) = split(id);
        let aws = cloud.aws().await;
        let Some(entry) = describe(aws, cluster, principal).await? else {
            return Ok(None);
        };
        let policies: Vec<Value> = associated(aws, cluster, principal)
            .await?
            .into_iter()
            .map(|(arn, namespaces)| {
                if namespaces.is_empty() {
                    json!({ "arn": arn })
                } else {
                    json!({ "arn": arn, "namespaces": namespaces })
                }
            })
            .collect();
        Ok(Some(Inspected {
            outputs: outputs(cluster, &entry),
            attributes: json!({
                "cluster_name": entry.cluster_name(),
                "principal_arn": entry.principal_arn(),
                "kubernetes_groups": entry.kubernetes_groups(),
                "username": entry.username(),
                "policies": policies,
                "tags": entry.tags(),
            }),
            mark: super::mark_of(entry.tags()),
        }))
    }

    async fn mark(&self, ctx: &Ctx, id: &str, token: &str) -> Result<(), ProviderError> {
        let (cluster, principal) = split(id);
        let aws = ctx.cloud.aws().await;
        let entry = describe(aws, cluster, principal).await?;
        let arn = crate::provider::aws::still_there(
            &format!("the access entry `{id}`"),
            entry.as_ref().and_then(AccessEntry::access_entry_arn),
        )?;
        super::mark(ctx, aws, arn, token).await
    }

    async fn find(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Option<String>, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let found = describe(ctx.cloud.aws().await, &cfg.cluster_name, &cfg.principal_arn).await?;
        Ok(found
            .filter(|e| owned(ctx, token, e.tags()))
            .map(|_| child_id(&cfg.cluster_name, &cfg.principal_arn)))
    }

    /// Groups and user name with one UpdateAccessEntry (EKS keeps a user name it is not given:
    /// taking `username` out of the block leaves the one set); policies against what is
    /// associated now.
    async fn update(&self, ctx: &Ctx, id: &str, old: &Value, new: &Value) -> Result<Value, ProviderError> {
        let (was, cfg): (Config, Config) = (parse(ctx, old)?, parse(ctx, new)?);
        let (cluster, principal) = split(id);
        let aws = ctx.cloud.aws().await;
        if was.kubernetes_groups != cfg.kubernetes_groups || was.username != cfg.username {
            aws.eks
                .update_access_entry()
                .cluster_name(cluster)
                .principal_arn(principal)
                .set_kubernetes_groups(Some(cfg.kubernetes_groups.clone()))
                .set_username(cfg.username.clone())
                .send()
                .await
                .map_err(|e| error(aws, "UpdateAccessEntry", e))?;
        }
        sync_policies(aws, cluster, principal, &cfg.policies).await?;
        let entry = describe(aws, cluster, principal).await?.ok_or_else(|| {
            ProviderError::permanent(format!(
                "the access entry of {principal} is gone; run `forge up` again to make it anew"
            ))
        })?;
        sync_tags(ctx, aws, entry.access_entry_arn().unwrap_or_default(), old, new).await?;
        Ok(outputs(cluster, &entry))
    }

    /// Deletes the entry and, with it, its policies; one whose cluster is gone is gone.
    async fn delete(&self, ctx: &Ctx, id: &str, _config: &Value) -> Result<(), ProviderError> {
        let (cluster, principal) = split(id);
        let aws = ctx.cloud.aws().await;
        let answer = aws
            .eks
            .delete_access_entry()
            .cluster_name(cluster)
            .principal_arn(principal)
            .send()
            .await;
        tolerate(aws, "DeleteAccessEntry", answer, &[NOT_FOUND])
    }
}
