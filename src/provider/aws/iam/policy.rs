//! `aws_iam_policy`: a customer-managed IAM policy. A document change publishes a new default
//! version (the oldest spare one is deleted first when IAM's five are used up).

use super::{NO_SUCH_ENTITY, gone_ok, iam_owned, made_or_adopted, own_arn, policy_json};
use crate::provider::aws::{Claim, Clients, error, existing, found, parse};
use crate::provider::{Cloud, Created, Ctx, Inspected, Observed, ProviderError, Resource};
use crate::schema::attributes;
use aws_sdk_iam::operation::create_policy::CreatePolicyOutput;
use aws_sdk_iam::types::PolicyScopeType;
use serde_json::{Value, json};

/// The `aws_iam_policy` kind.
pub(crate) struct IamPolicy;

attributes! {
    kind IamPolicy, spec "aws_iam_policy", outputs [id, arn, name = attribute], extra [tags];
    struct Config {
        name: String [replace],
        policy: Value,
        #[serde(default = "super::iam_root_path")] path: String [replace],
        description: Option<String> [replace],
    }
}

/// The ARN of this account's policy named `name`, with whether this resource owns it.
async fn lookup(ctx: &Ctx, aws: &Clients, name: &str, token: &str) -> Result<Option<(String, bool)>, ProviderError> {
    let mut pages = aws.iam.list_policies().scope(PolicyScopeType::Local).into_paginator().send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| error(aws, "ListPolicies", e))?;
        if let Some(arn) = page.policies().iter().find(|p| p.policy_name() == Some(name)).and_then(|p| p.arn()) {
            let tags = aws
                .iam
                .list_policy_tags()
                .policy_arn(arn)
                .send()
                .await
                .map_err(|e| error(aws, "ListPolicyTags", e))?;
            return Ok(Some((arn.to_owned(), iam_owned(ctx, token, tags.tags()))));
        }
    }
    Ok(None)
}

impl Resource for IamPolicy {
    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let aws = ctx.cloud.aws().await;
        let claim = Claim::new(ctx, token, "IAM policy", &cfg.name);
        let made = aws
            .iam
            .create_policy()
            .policy_name(&cfg.name)
            .path(&cfg.path)
            .policy_document(policy_json(&cfg.policy))
            .set_description(cfg.description.clone())
            .set_tags(Some(super::iam_create_tags(ctx, token, config)))
            .send()
            .await;
        let arn = |out: CreatePolicyOutput| out.policy().and_then(|p| p.arn()).unwrap_or_default().to_owned();
        let arn = made_or_adopted(aws, &claim, "CreatePolicy", made, arn, lookup(ctx, aws, &cfg.name, token)).await?;
        Ok(Created {
            outputs: json!({ "id": arn, "arn": arn, "name": cfg.name }),
            id: arn,
        })
    }

    async fn read(&self, cloud: &Cloud, _stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        let aws = cloud.aws().await;
        let policies = all_pages!(aws, aws.iam.list_policies().scope(PolicyScopeType::Local), policies, "ListPolicies");
        Ok(existing(ids, policies.iter().filter_map(|p| p.arn())))
    }

    fn importable(&self) -> bool {
        true
    }

    /// The policy by ARN, with its default version's document.
    async fn inspect(&self, cloud: &Cloud, id: &str) -> Result<Option<Inspected>, ProviderError> {
        let aws = cloud.aws().await;
        let answer = aws.iam.get_policy().policy_arn(id).send().await;
        let Some(policy) = found(aws, "GetPolicy", answer, NO_SUCH_ENTITY)?.and_then(|out| out.policy().cloned()) else {
            return Ok(None);
        };
        let version = aws
            .iam
            .get_policy_version()
            .policy_arn(id)
            .version_id(policy.default_version_id().unwrap_or("v1"))
            .send()
            .await
            .map_err(|e| error(aws, "GetPolicyVersion", e))?;
        let document = version
            .policy_version()
            .and_then(|v| v.document())
            .map(super::policy_value)
            .transpose()?;
        Ok(Some(Inspected {
            outputs: json!({ "id": id, "arn": id, "name": policy.policy_name() }),
            attributes: json!({
                "name": policy.policy_name(),
                "path": policy.path(),
                "description": policy.description(),
                "policy": document,
                "tags": super::iam_tag_table(policy.tags()),
            }),
            mark: super::iam_mark(policy.tags()),
        }))
    }

    async fn mark(&self, ctx: &Ctx, id: &str, token: &str) -> Result<(), ProviderError> {
        let aws = ctx.cloud.aws().await;
        aws.iam
            .tag_policy()
            .policy_arn(id)
            .set_tags(Some(super::mark_tags(ctx, token)))
            .send()
            .await
            .map_err(|e| error(aws, "TagPolicy", e))?;
        Ok(())
    }

    async fn find(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Option<String>, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        Ok(own_arn(lookup(ctx, ctx.cloud.aws().await, &cfg.name, token).await?))
    }

    async fn update(&self, ctx: &Ctx, id: &str, old: &Value, new: &Value) -> Result<Value, ProviderError> {
        let (before, after): (Config, Config) = (parse(ctx, old)?, parse(ctx, new)?);
        let aws = ctx.cloud.aws().await;
        if before.policy != after.policy {
            let versions = aws
                .iam
                .list_policy_versions()
                .policy_arn(id)
                .send()
                .await
                .map_err(|e| error(aws, "ListPolicyVersions", e))?;
            let mut spare: Vec<_> = versions.versions().iter().filter(|v| !v.is_default_version()).collect();
            spare.sort_by_key(|v| v.create_date().map(aws_smithy_types::DateTime::secs));
            if versions.versions().len() >= 5
                && let Some(oldest) = spare.first().and_then(|v| v.version_id())
            {
                aws.iam
                    .delete_policy_version()
                    .policy_arn(id)
                    .version_id(oldest)
                    .send()
                    .await
                    .map_err(|e| error(aws, "DeletePolicyVersion", e))?;
            }
            aws.iam
                .create_policy_version()
                .policy_arn(id)
                .policy_document(policy_json(&after.policy))
                .set_as_default(true)
                .send()
                .await
                .map_err(|e| error(aws, "CreatePolicyVersion", e))?;
        }
        sync_iam_tags!(ctx, aws, old, new, untag_policy, tag_policy, policy_arn(id));
        Ok(json!({ "id": id, "arn": id, "name": after.name }))
    }

    async fn delete(&self, ctx: &Ctx, id: &str, _config: &Value) -> Result<(), ProviderError> {
        let aws = ctx.cloud.aws().await;
        let answer = aws.iam.list_policy_versions().policy_arn(id).send().await;
        let Some(versions) = found(aws, "ListPolicyVersions", answer, NO_SUCH_ENTITY)? else {
            return Ok(());
        };
        // IAM refuses to delete an attached policy: detach it from whatever still uses it
        // (a replace runs before the roles that use it are updated).
        let users = aws
            .iam
            .list_entities_for_policy()
            .policy_arn(id)
            .send()
            .await
            .map_err(|e| error(aws, "ListEntitiesForPolicy", e))?;
        for role in users.policy_roles().iter().filter_map(|r| r.role_name()) {
            let detached = aws.iam.detach_role_policy().role_name(role).policy_arn(id).send().await;
            gone_ok(aws, "DetachRolePolicy", detached)?;
        }
        for user in users.policy_users().iter().filter_map(|u| u.user_name()) {
            let detached = aws.iam.detach_user_policy().user_name(user).policy_arn(id).send().await;
            gone_ok(aws, "DetachUserPolicy", detached)?;
        }
        for group in users.policy_groups().iter().filter_map(|g| g.group_name()) {
            let detached = aws.iam.detach_group_policy().group_name(group).policy_arn(id).send().await;
            gone_ok(aws, "DetachGroupPolicy", detached)?;
        }
        for version in versions
            .versions()
            .iter()
            .filter(|v| !v.is_default_version())
            .filter_map(|v| v.version_id())
        {
            aws.iam
                .delete_policy_version()
                .policy_arn(id)
                .version_id(version)
                .send()
                .await
                .map_err(|e| error(aws, "DeletePolicyVersion", e))?;
        }
        gone_ok(aws, "DeletePolicy", aws.iam.delete_policy().policy_arn(id).send().await)
    }
}
