//! `aws_iam_instance_profile`: an instance profile holding one role.

use super::{NO_SUCH_ENTITY, gone_ok, iam_owned, remove_role};
use crate::provider::aws::{Claim, Clients, error, existing, found, parse};
use crate::provider::{Cloud, Created, Ctx, Inspected, Observed, ProviderError, Resource};
use crate::schema::attributes;
use serde_json::{Value, json};

/// The `aws_iam_instance_profile` kind.
pub(crate) struct IamInstanceProfile;

attributes! {
    kind IamInstanceProfile, spec "aws_iam_instance_profile", outputs [id = attribute name, name = attribute, arn], extra [tags];
    struct Config {
        name: String [replace],
        role: String,
        #[serde(default = "super::iam_root_path")] path: String [replace],
    }
}

/// The profile's ARN and role names, or `None` when there is no such profile.
async fn roles(aws: &Clients, name: &str) -> Result<Option<(String, Vec<String>)>, ProviderError> {
    let answer = aws.iam.get_instance_profile().instance_profile_name(name).send().await;
    Ok(found(aws, "GetInstanceProfile", answer, NO_SUCH_ENTITY)?.and_then(|out| {
        out.instance_profile()
            .map(|p| (p.arn().to_owned(), p.roles().iter().map(|r| r.role_name().to_owned()).collect()))
    }))
}

async fn owned(ctx: &Ctx, aws: &Clients, name: &str, token: &str) -> Result<bool, ProviderError> {
    let tags = aws
        .iam
        .list_instance_profile_tags()
        .instance_profile_name(name)
        .send()
        .await
        .map_err(|e| error(aws, "ListInstanceProfileTags", e))?;
    Ok(iam_owned(ctx, token, tags.tags()))
}

/// Adds `role` to the profile `name` unless it is among the roles `present` there.
async fn add_role(aws: &Clients, name: &str, role: &str, present: &[String]) -> Result<(), ProviderError> {
    if !present.iter().any(|r| r == role) {
        aws.iam
            .add_role_to_instance_profile()
            .instance_profile_name(name)
            .role_name(role)
            .send()
            .await
            .map_err(|e| error(aws, "AddRoleToInstanceProfile", e))?;
    }
    Ok(())
}

impl Resource for IamInstanceProfile {
    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let aws = ctx.cloud.aws().await;
        let claim = Claim::new(ctx, token, "IAM instance profile", &cfg.name);
        let made = aws
            .iam
            .create_instance_profile()
            .instance_profile_name(&cfg.name)
            .path(&cfg.path)
            .set_tags(Some(super::iam_create_tags(ctx, token, config)))
            .send()
            .await;
        // The ARN comes from the create's answer: a read right after may not see it yet.
        let made_arn = match made {
            Ok(out) => out.instance_profile().map(|p| p.arn().to_owned()),
            Err(e) if crate::provider::aws::code(&e) == Some("EntityAlreadyExists") => {
                if !owned(ctx, aws, &cfg.name, token).await? {
                    return Err(claim.refusal());
                }
                None
            }
            Err(e) => return Err(error(aws, "CreateInstanceProfile", e)),
        };
        let (live_arn, present) = roles(aws, &cfg.name).await?.unwrap_or_default();
        let arn = made_arn.unwrap_or(live_arn);
        add_role(aws, &cfg.name, &cfg.role, &present).await?;
        Ok(Created {
            outputs: json!({ "id": cfg.name, "name": cfg.name, "arn": arn }),
            id: cfg.name,
        })
    }

    async fn read(&self, cloud: &Cloud, _stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        let aws = cloud.aws().await;
        let profiles = all_pages!(aws, aws.iam.list_instance_profiles(), instance_profiles, "ListInstanceProfiles");
        Ok(existing(
            ids,
            profiles.iter().map(aws_sdk_iam::types::InstanceProfile::instance_profile_name),
        ))
    }

    fn importable(&self) -> bool {
        true
    }

    /// The profile by name, with its role (the first, where someone put several).
    async fn inspect(&self, cloud: &Cloud, id: &str) -> Result<Option<Inspected>, ProviderError> {
        let aws = cloud.aws().await;
        let answer = aws.iam.get_instance_profile().instance_profile_name(id).send().await;
        Ok(found(aws, "GetInstanceProfile", answer, NO_SUCH_ENTITY)?
            .and_then(|out| out.instance_profile().cloned())
            .map(|p| Inspected {
                outputs: json!({ "id": p.instance_profile_name(), "name": p.instance_profile_name(), "arn": p.arn() }),
                attributes: json!({
                    "name": p.instance_profile_name(),
                    "path": p.path(),
                    "role": p.roles().first().map(aws_sdk_iam::types::Role::role_name),
                    "tags": super::iam_tag_table(p.tags()),
                }),
                mark: super::iam_mark(p.tags()),
            }))
    }

    async fn mark(&self, ctx: &Ctx, id: &str, token: &str) -> Result<(), ProviderError> {
        let aws = ctx.cloud.aws().await;
        aws.iam
            .tag_instance_profile()
            .instance_profile_name(id)
            .set_tags(Some(super::mark_tags(ctx, token)))
            .send()
            .await
            .map_err(|e| error(aws, "TagInstanceProfile", e))?;
        Ok(())
    }

    async fn find(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Option<String>, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let aws = ctx.cloud.aws().await;
        Ok(match roles(aws, &cfg.name).await? {
            Some(_) if owned(ctx, aws, &cfg.name, token).await? => Some(cfg.name),
            _ => None,
        })
    }

    async fn update(&self, ctx: &Ctx, id: &str, old: &Value, new: &Value) -> Result<Value, ProviderError> {
        let (before, after): (Config, Config) = (parse(ctx, old)?, parse(ctx, new)?);
        let aws = ctx.cloud.aws().await;
        if before.role != after.role {
            // Work from what is live: a swap interrupted halfway (old role removed, new one
            // not yet added) then finishes instead of failing on the old role forever.
            let (_, present) = roles(aws, id).await?.unwrap_or_default();
            for role in present.iter().filter(|r| **r != after.role) {
                remove_role(aws, id, role).await?;
            }
            add_role(aws, id, &after.role, &present).await?;
        }
        sync_iam_tags!(
            ctx,
            aws,
            old,
            new,
            untag_instance_profile,
            tag_instance_profile,
            instance_profile_name(id)
        );
        let arn = roles(aws, id).await?.map(|(arn, _)| arn);
        Ok(json!({ "id": id, "name": id, "arn": arn }))
    }

    async fn delete(&self, ctx: &Ctx, id: &str, _config: &Value) -> Result<(), ProviderError> {
        let aws = ctx.cloud.aws().await;
        let Some((_, present)) = roles(aws, id).await? else { return Ok(()) };
        for role in present {
            aws.iam
                .remove_role_from_instance_profile()
                .instance_profile_name(id)
                .role_name(role)
                .send()
                .await
                .map_err(|e| error(aws, "RemoveRoleFromInstanceProfile", e))?;
        }
        let deleted = aws.iam.delete_instance_profile().instance_profile_name(id).send().await;
        gone_ok(aws, "DeleteInstanceProfile", deleted)
    }
}
