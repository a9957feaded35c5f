//! `aws_iam_oidc_provider`: an IAM OpenID Connect provider, e.g. an EKS cluster's issuer for
//! IAM roles for service accounts. Client ids and thumbprints change in place.

use super::{NO_SUCH_ENTITY, gone_ok, iam_owned, made_or_adopted, own_arn};
use crate::provider::aws::{Claim, Clients, error, existing, found, parse};
use crate::provider::{Cloud, Created, Ctx, Inspected, Observed, ProviderError, Resource};
use crate::schema::attributes;
use aws_sdk_iam::operation::create_open_id_connect_provider::CreateOpenIdConnectProviderOutput;
use serde_json::{Value, json};

/// The `aws_iam_oidc_provider` kind.
pub(crate) struct IamOidcProvider;

attributes! {
    kind IamOidcProvider, spec "aws_iam_oidc_provider", outputs [id, arn, url = attribute], extra [tags];
    struct Config {
        url: String [replace],
        #[serde(default = "default_clients")] client_ids: Vec<String>,
        #[serde(default)] thumbprints: Vec<String>,
    }
}

fn default_clients() -> Vec<String> {
    vec!["sts.amazonaws.com".into()]
}

/// The ARNs of the account's OIDC providers (one call: the list has no pages).
async fn arns(aws: &Clients) -> Result<Vec<String>, ProviderError> {
    let list = aws
        .iam
        .list_open_id_connect_providers()
        .send()
        .await
        .map_err(|e| error(aws, "ListOpenIDConnectProviders", e))?;
    Ok(list
        .open_id_connect_provider_list()
        .iter()
        .filter_map(|p| p.arn())
        .map(str::to_owned)
        .collect())
}

/// The ARN of the provider for `url` (IAM stores it without `https://`) and its tags.
async fn provider_for(aws: &Clients, url: &str) -> Result<Option<(String, Vec<aws_sdk_iam::types::Tag>)>, ProviderError> {
    let suffix = format!("oidc-provider/{}", url.trim_start_matches("https://"));
    let Some(arn) = arns(aws).await?.into_iter().find(|arn| arn.ends_with(&suffix)) else {
        return Ok(None);
    };
    let got = aws
        .iam
        .get_open_id_connect_provider()
        .open_id_connect_provider_arn(&arn)
        .send()
        .await
        .map_err(|e| error(aws, "GetOpenIDConnectProvider", e))?;
    Ok(Some((arn, got.tags().to_vec())))
}

/// The ARN of the provider for `url`, and whether this resource owns it.
async fn lookup(ctx: &Ctx, aws: &Clients, url: &str, token: &str) -> Result<Option<(String, bool)>, ProviderError> {
    Ok(provider_for(aws, url).await?.map(|(arn, tags)| {
        let own = iam_owned(ctx, token, &tags);
        (arn, own)
    }))
}

impl Resource for IamOidcProvider {
    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let aws = ctx.cloud.aws().await;
        let claim = Claim::new(ctx, token, "IAM OIDC provider", &cfg.url);
        let made = aws
            .iam
            .create_open_id_connect_provider()
            .url(&cfg.url)
            .set_client_id_list(Some(cfg.client_ids.clone()))
            .set_thumbprint_list(Some(cfg.thumbprints.clone()))
            .set_tags(Some(super::iam_create_tags(ctx, token, config)))
            .send()
            .await;
        let arn = |out: CreateOpenIdConnectProviderOutput| out.open_id_connect_provider_arn().unwrap_or_default().to_owned();
        let lookup = lookup(ctx, aws, &cfg.url, token);
        let arn = made_or_adopted(aws, &claim, "CreateOpenIDConnectProvider", made, arn, lookup).await?;
        Ok(Created {
            outputs: json!({ "id": arn, "arn": arn, "url": cfg.url }),
            id: arn,
        })
    }

    /// Client ids and thumbprints in no order, as IAM keeps them.
    fn comparable(&self, _id: &str, config: &Value) -> Value {
        crate::provider::sorted_lists(config, &["client_ids", "thumbprints"])
    }

    /// Thumbprints the block leaves out are IAM's own (it fills them in at create).
    fn kept_when_left_out(&self) -> &'static [&'static str] {
        &["thumbprints"]
    }

    /// IAM has one provider per issuer URL: one that is not this block's (another tool's,
    /// another stack's) would fail the create, so the plan says so first.
    async fn dry_run(&self, ctx: &Ctx, config: &Value) -> Result<Option<String>, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let Some((arn, tags)) = provider_for(ctx.cloud.aws().await, &cfg.url).await? else {
            return Ok(None);
        };
        let owner = super::iam_mark(&tags);
        if owner
            .as_ref()
            .is_some_and(|(stack, address)| *stack == ctx.stack && *address == ctx.address)
        {
            return Ok(None);
        }
        let whose = owner.map_or_else(
            || "made outside forge".to_owned(),
            |(stack, address)| format!("forge stack `{stack}`'s `{address}`"),
        );
        Ok(Some(format!(
            "IAM has an OIDC provider for {} already ({arn}, {whose}), and takes one per issuer: use that one (on an `eks` block with `existing`, remove `oidc_provider = true`)",
            cfg.url
        )))
    }

    async fn read(&self, cloud: &Cloud, _stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        let arns = arns(cloud.aws().await).await?;
        Ok(existing(ids, arns.iter().map(String::as_str)))
    }

    fn importable(&self) -> bool {
        true
    }

    /// The provider by ARN: its URL (IAM keeps it without `https://`), clients and thumbprints.
    async fn inspect(&self, cloud: &Cloud, id: &str) -> Result<Option<Inspected>, ProviderError> {
        let aws = cloud.aws().await;
        let answer = aws.iam.get_open_id_connect_provider().open_id_connect_provider_arn(id).send().await;
        Ok(found(aws, "GetOpenIDConnectProvider", answer, NO_SUCH_ENTITY)?.map(|p| {
            let url = p.url().map(|u| {
                if u.starts_with("https://") {
                    u.to_owned()
                } else {
                    format!("https://{u}")
                }
            });
            Inspected {
                outputs: json!({ "id": id, "arn": id, "url": url }),
                attributes: json!({
                    "url": url,
                    "client_ids": p.client_id_list(),
                    "thumbprints": p.thumbprint_list(),
                    "tags": super::iam_tag_table(p.tags()),
                }),
                mark: super::iam_mark(p.tags()),
            }
        }))
    }

    async fn mark(&self, ctx: &Ctx, id: &str, token: &str) -> Result<(), ProviderError> {
        let aws = ctx.cloud.aws().await;
        aws.iam
            .tag_open_id_connect_provider()
            .open_id_connect_provider_arn(id)
            .set_tags(Some(super::mark_tags(ctx, token)))
            .send()
            .await
            .map_err(|e| error(aws, "TagOpenIDConnectProvider", e))?;
        Ok(())
    }

    async fn find(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Option<String>, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        Ok(own_arn(lookup(ctx, ctx.cloud.aws().await, &cfg.url, token).await?))
    }

    async fn update(&self, ctx: &Ctx, id: &str, old: &Value, new: &Value) -> Result<Value, ProviderError> {
        let (before, after): (Config, Config) = (parse(ctx, old)?, parse(ctx, new)?);
        let aws = ctx.cloud.aws().await;
        for client in before.client_ids.iter().filter(|c| !after.client_ids.contains(c)) {
            aws.iam
                .remove_client_id_from_open_id_connect_provider()
                .open_id_connect_provider_arn(id)
                .client_id(client)
                .send()
                .await
                .map_err(|e| error(aws, "RemoveClientIDFromOpenIDConnectProvider", e))?;
        }
        for client in after.client_ids.iter().filter(|c| !before.client_ids.contains(c)) {
            aws.iam
                .add_client_id_to_open_id_connect_provider()
                .open_id_connect_provider_arn(id)
                .client_id(client)
                .send()
                .await
                .map_err(|e| error(aws, "AddClientIDToOpenIDConnectProvider", e))?;
        }
        // Without `thumbprints` IAM keeps its own: forge sets them only when the block does.
        if new.get("thumbprints").is_some() && before.thumbprints != after.thumbprints {
            aws.iam
                .update_open_id_connect_provider_thumbprint()
                .open_id_connect_provider_arn(id)
                .set_thumbprint_list(Some(after.thumbprints.clone()))
                .send()
                .await
                .map_err(|e| error(aws, "UpdateOpenIDConnectProviderThumbprint", e))?;
        }
        sync_iam_tags!(
            ctx,
            aws,
            old,
            new,
            untag_open_id_connect_provider,
            tag_open_id_connect_provider,
            open_id_connect_provider_arn(id)
        );
        Ok(json!({ "id": id, "arn": id, "url": after.url }))
    }

    async fn delete(&self, ctx: &Ctx, id: &str, _config: &Value) -> Result<(), ProviderError> {
        let aws = ctx.cloud.aws().await;
        let deleted = aws
            .iam
            .delete_open_id_connect_provider()
            .open_id_connect_provider_arn(id)
            .send()
            .await;
        gone_ok(aws, "DeleteOpenIDConnectProvider", deleted)
    }
}
