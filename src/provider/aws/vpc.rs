//! `aws_vpc`: a VPC with DNS support and hostnames on (EKS needs both).

use super::{Clients, error, own_filters, parse, sync_tags, tag_spec};
use crate::provider::{BoxFuture, Cloud, Created, Ctx, Kind, Observed, ProviderError, Spec};
use crate::schema::attributes;
use aws_sdk_ec2::types::{AttributeBooleanValue, ResourceType};
use serde_json::{Value, json};

/// The `aws_vpc` kind.
pub struct Vpc;

attributes! {
    spec "aws_vpc", outputs ["id", "cidr_block"], extra [tags];
    struct Config {
        cidr_block: String [replace],
        #[serde(default = "yes")] enable_dns_hostnames: bool,
        #[serde(default = "yes")] enable_dns_support: bool,
    }
}

fn yes() -> bool {
    true
}

fn outputs(id: &str, cfg: &Config) -> Value {
    json!({ "id": id, "cidr_block": cfg.cidr_block })
}

async fn set_dns(aws: &Clients, id: &str, cfg: &Config) -> Result<(), ProviderError> {
    let on = |v: bool| AttributeBooleanValue::builder().value(v).build();
    // The API takes one attribute per call; support must be on before hostnames.
    aws.ec2
        .modify_vpc_attribute()
        .vpc_id(id)
        .enable_dns_support(on(cfg.enable_dns_support))
        .send()
        .await
        .map_err(|e| error(aws, "ModifyVpcAttribute", e))?;
    aws.ec2
        .modify_vpc_attribute()
        .vpc_id(id)
        .enable_dns_hostnames(on(cfg.enable_dns_hostnames))
        .send()
        .await
        .map_err(|e| error(aws, "ModifyVpcAttribute", e))?;
    Ok(())
}

/// The VPC an earlier create of this resource tagged, if any.
async fn find_own(ctx: &Ctx, aws: &Clients, token: &str) -> Result<Option<String>, ProviderError> {
    let found = aws
        .ec2
        .describe_vpcs()
        .set_filters(Some(own_filters(ctx, token)))
        .send()
        .await
        .map_err(|e| error(aws, "DescribeVpcs", e))?;
    Ok(found.vpcs().first().and_then(|v| v.vpc_id()).map(str::to_owned))
}

impl Kind for Vpc {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }

    fn planned_outputs(&self, config: &Value, prior: Option<&Value>) -> Value {
        json!({ "id": crate::provider::prior_output(prior, "id"), "cidr_block": config.get("cidr_block").cloned().unwrap_or(Value::Null) })
    }

    /// CreateVpc has no idempotency token: a resumed create first looks for the VPC its first
    /// attempt tagged with this stack and address.
    fn create<'a>(&'a self, ctx: &'a Ctx, token: &'a str, config: &'a Value) -> BoxFuture<'a, Result<Created, ProviderError>> {
        Box::pin(async move {
            let cfg: Config = parse(ctx, config)?;
            let aws = ctx.cloud.aws().await;
            let id = match find_own(ctx, aws, token).await? {
                Some(id) => id,
                None => {
                    let made = aws
                        .ec2
                        .create_vpc()
                        .cidr_block(&cfg.cidr_block)
                        .tag_specifications(tag_spec(ctx, token, ResourceType::Vpc, config))
                        .customize()
                        .config_override(super::once())
                        .send()
                        .await
                        .map_err(|e| error(aws, "CreateVpc", e))?;
                    made.vpc().and_then(|v| v.vpc_id()).unwrap_or_default().to_owned()
                }
            };
            set_dns(aws, &id, &cfg).await?;
            Ok(Created {
                outputs: outputs(&id, &cfg),
                id,
            })
        })
    }

    fn read<'a>(&'a self, cloud: &'a Cloud, stack: &'a str, ids: &'a [String]) -> BoxFuture<'a, Result<Vec<Observed>, ProviderError>> {
        Box::pin(async move {
            let aws = cloud.aws().await;
            observe_ec2!(
                aws,
                stack,
                ids,
                describe_vpcs,
                "vpc-id",
                vpcs,
                vpc_id,
                |v: &aws_sdk_ec2::types::Vpc| { json!({ "cidr_block": v.cidr_block(), "tags": super::ec2_tags(v.tags()) }) }
            )
        })
    }

    fn find<'a>(&'a self, ctx: &'a Ctx, token: &'a str, _config: &'a Value) -> BoxFuture<'a, Result<Option<String>, ProviderError>> {
        Box::pin(async move { find_own(ctx, ctx.cloud.aws().await, token).await })
    }

    fn update<'a>(&'a self, ctx: &'a Ctx, id: &'a str, old: &'a Value, new: &'a Value) -> BoxFuture<'a, Result<Value, ProviderError>> {
        Box::pin(async move {
            let cfg: Config = parse(ctx, new)?;
            let aws = ctx.cloud.aws().await;
            sync_tags(ctx, aws, id, old, new).await?;
            if ["enable_dns_hostnames", "enable_dns_support"]
                .iter()
                .any(|k| old.get(*k) != new.get(*k))
            {
                set_dns(aws, id, &cfg).await?;
            }
            Ok(outputs(id, &cfg))
        })
    }

    fn delete<'a>(&'a self, ctx: &'a Ctx, id: &'a str, _config: &'a Value) -> BoxFuture<'a, Result<(), ProviderError>> {
        Box::pin(async move {
            let aws = ctx.cloud.aws().await;
            match aws.ec2.delete_vpc().vpc_id(id).send().await {
                Ok(_) => Ok(()),
                Err(e) if super::code(&e) == Some("InvalidVpcID.NotFound") => Ok(()),
                Err(e) => Err(super::delete_error(aws, "DeleteVpc", "vpc-id", id, e).await),
            }
        })
    }
}
