//! `aws_iam_role`: an IAM role with its trust policy, attached managed policies and inline
//! policies. Policies are TOML tables, so they are compared as data, not as text.

use super::{NO_SUCH_ENTITY, gone_ok, iam_owned, policy_json, remove_role};
use crate::provider::aws::{Claim, Clients, error, existing, found, parse};
use crate::provider::{Cloud, Created, Ctx, Found, Inspected, Lookups, Observed, ProviderError, Resource, Selector};
use crate::schema::attributes;
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;

/// The `aws_iam_role` kind.
pub(crate) struct IamRole;

attributes! {
    kind IamRole, spec "aws_iam_role", outputs [id = attribute name, name = attribute, arn, unique_id], extra [tags];
    struct Config {
        name: String [replace],
        assume_role_policy: Value,
        #[serde(default)] managed_policy_arns: Vec<String>,
        #[serde(default)] inline_policies: Map<String, Value>,
        #[serde(default = "super::iam_root_path")] path: String [replace],
        description: Option<String>,
    }
}

fn outputs(role: &aws_sdk_iam::types::Role) -> Value {
    json!({ "id": role.role_name(), "name": role.role_name(), "arn": role.arn(), "unique_id": role.role_id() })
}

/// Attaches, detaches, puts and deletes policies to go from `old` to `new`.
async fn sync_policies(aws: &Clients, name: &str, old: &Config, new: &Config) -> Result<(), ProviderError> {
    let (before, after): (BTreeSet<&String>, BTreeSet<&String>) =
        (old.managed_policy_arns.iter().collect(), new.managed_policy_arns.iter().collect());
    for arn in before.difference(&after) {
        let detached = aws.iam.detach_role_policy().role_name(name).policy_arn(*arn).send().await;
        gone_ok(aws, "DetachRolePolicy", detached)?;
    }
    for arn in after.difference(&before) {
        aws.iam
            .attach_role_policy()
            .role_name(name)
            .policy_arn(*arn)
            .send()
            .await
            .map_err(|e| error(aws, &format!("AttachRolePolicy {arn}"), e))?;
    }
    for policy in old.inline_policies.keys().filter(|k| !new.inline_policies.contains_key(*k)) {
        let deleted = aws.iam.delete_role_policy().role_name(name).policy_name(policy).send().await;
        gone_ok(aws, "DeleteRolePolicy", deleted)?;
    }
    for (policy, document) in new.inline_policies.iter().filter(|(k, v)| old.inline_policies.get(*k) != Some(*v)) {
        aws.iam
            .put_role_policy()
            .role_name(name)
            .policy_name(policy)
            .policy_document(policy_json(document))
            .send()
            .await
            .map_err(|e| error(aws, "PutRolePolicy", e))?;
    }
    Ok(())
}

/// The managed policies attached to the role now, or `None` when there is no such role.
async fn attached(aws: &Clients, name: &str) -> Result<Option<Vec<String>>, ProviderError> {
    let answer = aws.iam.list_attached_role_policies().role_name(name).send().await;
    Ok(found(aws, "ListAttachedRolePolicies", answer, NO_SUCH_ENTITY)?.map(|out| {
        out.attached_policies()
            .iter()
            .filter_map(|p| p.policy_arn().map(str::to_owned))
            .collect()
    }))
}

/// The names of the role's inline policies.
async fn inline_names(aws: &Clients, role: &str) -> Result<Vec<String>, ProviderError> {
    let listed = aws
        .iam
        .list_role_policies()
        .role_name(role)
        .send()
        .await
        .map_err(|e| error(aws, "ListRolePolicies", e))?;
    Ok(listed.policy_names().to_vec())
}

fn nothing_attached() -> Config {
    Config {
        name: String::new(),
        assume_role_policy: Value::Null,
        managed_policy_arns: vec![],
        inline_policies: Map::new(),
        path: super::iam_root_path(),
        description: None,
    }
}

impl Resource for IamRole {
    /// IAM names are unique per account: a resumed create adopts the role its first attempt
    /// made (recognised by its tags) and refuses anyone else's.
    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let aws = ctx.cloud.aws().await;
        let claim = Claim::new(ctx, token, "IAM role", &cfg.name);
        let made = aws
            .iam
            .create_role()
            .role_name(&cfg.name)
            .path(&cfg.path)
            .assume_role_policy_document(policy_json(&cfg.assume_role_policy))
            .set_description(cfg.description.clone())
            .set_tags(Some(super::iam_create_tags(ctx, token, config)))
            .send()
            .await;
        let role = match made {
            Ok(out) => out.role().cloned(),
            Err(e) if crate::provider::aws::code(&e) == Some("EntityAlreadyExists") => {
                let existing = aws
                    .iam
                    .get_role()
                    .role_name(&cfg.name)
                    .send()
                    .await
                    .map_err(|e| error(aws, "GetRole", e))?
                    .role()
                    .cloned();
                let found = existing.map(|role| {
                    let own = iam_owned(ctx, token, role.tags());
                    (role, own)
                });
                Some(claim.adopt(found)?)
            }
            Err(e) => return Err(error(aws, "CreateRole", e)),
        };
        let role = role.ok_or_else(|| ProviderError::permanent("CreateRole returned no role"))?;
        sync_policies(aws, &cfg.name, &nothing_attached(), &cfg).await?;
        Ok(Created {
            id: cfg.name.clone(),
            outputs: outputs(&role),
        })
    }

    async fn read(&self, cloud: &Cloud, _stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        let aws = cloud.aws().await;
        let roles = all_pages!(aws, aws.iam.list_roles(), roles, "ListRoles");
        Ok(existing(ids, roles.iter().map(aws_sdk_iam::types::Role::role_name)))
    }

    fn importable(&self) -> bool {
        true
    }

    /// The role by name with everything a block sets: its trust policy and description, its
    /// managed policies and its inline ones (a GetRolePolicy each).
    async fn inspect(&self, cloud: &Cloud, id: &str) -> Result<Option<Inspected>, ProviderError> {
        let aws = cloud.aws().await;
        let answer = aws.iam.get_role().role_name(id).send().await;
        let Some(role) = found(aws, "GetRole", answer, NO_SUCH_ENTITY)?.and_then(|out| out.role().cloned()) else {
            return Ok(None);
        };
        let trust = role.assume_role_policy_document().map(super::policy_value).transpose()?;
        let mut inline = Map::new();
        for name in inline_names(aws, id).await? {
            let policy = aws
                .iam
                .get_role_policy()
                .role_name(id)
                .policy_name(&name)
                .send()
                .await
                .map_err(|e| error(aws, "GetRolePolicy", e))?;
            inline.insert(name, super::policy_value(policy.policy_document())?);
        }
        Ok(Some(Inspected {
            outputs: outputs(&role),
            attributes: json!({
                "name": role.role_name(),
                "path": role.path(),
                "description": role.description(),
                "assume_role_policy": trust,
                "managed_policy_arns": attached(aws, id).await?.unwrap_or_default(),
                "inline_policies": inline,
                "tags": super::iam_tag_table(role.tags()),
            }),
            mark: super::iam_mark(role.tags()),
        }))
    }

    async fn mark(&self, ctx: &Ctx, id: &str, token: &str) -> Result<(), ProviderError> {
        let aws = ctx.cloud.aws().await;
        aws.iam
            .tag_role()
            .role_name(id)
            .set_tags(Some(super::mark_tags(ctx, token)))
            .send()
            .await
            .map_err(|e| error(aws, "TagRole", e))?;
        Ok(())
    }

    fn lookups(&self) -> Lookups {
        Lookups {
            id: Some("a role name, or its ARN"),
            tags: false,
            attributes: &[],
        }
    }

    /// An existing role by name (an ARN's last segment): one GetRole.
    async fn look_up(&self, cloud: &Cloud, selector: &Selector) -> Result<Vec<Found>, ProviderError> {
        let Selector::Id(id) = selector else {
            return Err(ProviderError::permanent("IAM lists no roles by tag: name the role"));
        };
        let name = id.rsplit('/').next().unwrap_or(id);
        let aws = cloud.aws().await;
        let answer = aws.iam.get_role().role_name(name).send().await;
        Ok(found(aws, "GetRole", answer, NO_SUCH_ENTITY)?
            .and_then(|out| out.role().cloned())
            // An ARN names one account's role: the same name in another account is not it.
            .filter(|role| !id.starts_with("arn:") || role.arn() == id)
            .map(|role| Found {
                id: role.role_name().to_owned(),
                outputs: outputs(&role),
                attributes: json!({
                    "name": role.role_name(),
                    "path": role.path(),
                    "description": role.description(),
                    "tags": super::iam_tag_table(role.tags()),
                }),
            })
            .into_iter()
            .collect())
    }

    async fn find(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Option<String>, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let aws = ctx.cloud.aws().await;
        let answer = aws.iam.get_role().role_name(&cfg.name).send().await;
        Ok(found(aws, "GetRole", answer, NO_SUCH_ENTITY)?.and_then(|out| {
            out.role()
                .filter(|r| iam_owned(ctx, token, r.tags()))
                .map(|r| r.role_name().to_owned())
        }))
    }

    async fn update(&self, ctx: &Ctx, id: &str, old: &Value, new: &Value) -> Result<Value, ProviderError> {
        let (before, after): (Config, Config) = (parse(ctx, old)?, parse(ctx, new)?);
        let aws = ctx.cloud.aws().await;
        if before.assume_role_policy != after.assume_role_policy {
            aws.iam
                .update_assume_role_policy()
                .role_name(id)
                .policy_document(policy_json(&after.assume_role_policy))
                .send()
                .await
                .map_err(|e| error(aws, "UpdateAssumeRolePolicy", e))?;
        }
        if before.description != after.description {
            aws.iam
                .update_role()
                .role_name(id)
                .description(after.description.clone().unwrap_or_default())
                .send()
                .await
                .map_err(|e| error(aws, "UpdateRole", e))?;
        }
        // Attachments are compared with what is live: a replaced policy keeps its ARN but was
        // detached when its old self was deleted, and someone may have detached one by hand.
        let live = attached(aws, id).await?.unwrap_or_default();
        sync_policies(
            aws,
            id,
            &Config {
                managed_policy_arns: live,
                ..before
            },
            &after,
        )
        .await?;
        sync_iam_tags!(ctx, aws, old, new, untag_role, tag_role, role_name(id));
        let role = aws
            .iam
            .get_role()
            .role_name(id)
            .send()
            .await
            .map_err(|e| error(aws, "GetRole", e))?;
        Ok(role.role().map_or_else(|| json!({ "id": id, "name": id }), outputs))
    }

    /// Leaves its instance profiles, detaches and deletes its policies (whatever IAM lists, not
    /// only what the stack declared), then deletes the role.
    async fn delete(&self, ctx: &Ctx, id: &str, _config: &Value) -> Result<(), ProviderError> {
        let aws = ctx.cloud.aws().await;
        let Some(attached) = attached(aws, id).await? else { return Ok(()) };
        // IAM refuses to delete a role still in an instance profile.
        let profiles = aws
            .iam
            .list_instance_profiles_for_role()
            .role_name(id)
            .send()
            .await
            .map_err(|e| error(aws, "ListInstanceProfilesForRole", e))?;
        for profile in profiles.instance_profiles() {
            remove_role(aws, profile.instance_profile_name(), id).await?;
        }
        let inline = inline_names(aws, id).await?;
        let present = Config {
            managed_policy_arns: attached,
            inline_policies: inline.into_iter().map(|n| (n, Value::Null)).collect(),
            ..nothing_attached()
        };
        sync_policies(aws, id, &present, &nothing_attached()).await?;
        gone_ok(aws, "DeleteRole", aws.iam.delete_role().role_name(id).send().await)
    }
}
