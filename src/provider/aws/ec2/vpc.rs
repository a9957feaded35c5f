//! `aws_vpc`: a VPC with DNS support and hostnames on (EKS needs both).

use super::{sync_tags, tag_spec};
use crate::provider::aws::{Clients, error, parse};
use crate::provider::{Cloud, Created, Ctx, Found, Inspected, Lookups, Observed, ProviderError, Resource, Selector};
use crate::schema::attributes;
use aws_sdk_ec2::types::{AttributeBooleanValue, ResourceType, VpcAttributeName};
use serde_json::{Value, json};

/// The `aws_vpc` kind.
pub(crate) struct Vpc;

attributes! {
    kind Vpc, spec "aws_vpc", outputs [id, cidr_block = attribute], extra [tags];
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

/// A live VPC's outputs, as its create gives them.
fn live_outputs(v: &aws_sdk_ec2::types::Vpc) -> Value {
    json!({ "id": v.vpc_id(), "cidr_block": v.cidr_block() })
}

/// What a read reports of a VPC.
fn read_attributes(v: &aws_sdk_ec2::types::Vpc) -> Value {
    json!({ "cidr_block": v.cidr_block(), "tags": super::ec2_tags(v.tags()) })
}

async fn set_dns(aws: &Clients, id: &str, cfg: &Config) -> Result<(), ProviderError> {
    let on = |v: bool| AttributeBooleanValue::builder().value(v).build();
    let modify = || aws.ec2.modify_vpc_attribute().vpc_id(id);
    // The API takes one attribute per call; support must be on before hostnames.
    for call in [
        modify().enable_dns_support(on(cfg.enable_dns_support)),
        modify().enable_dns_hostnames(on(cfg.enable_dns_hostnames)),
    ] {
        call.send().await.map_err(|e| error(aws, "ModifyVpcAttribute", e))?;
    }
    Ok(())
}

/// The VPC an earlier create of this resource tagged, if any.
async fn find_own(ctx: &Ctx, aws: &Clients, token: &str) -> Result<Option<String>, ProviderError> {
    let found = find_own!(ctx, aws, token, describe_vpcs, vpcs, "DescribeVpcs");
    Ok(found.and_then(|v| v.vpc_id().map(str::to_owned)))
}

impl Resource for Vpc {
    /// CreateVpc has no idempotency token: a resumed create first looks for the VPC its first
    /// attempt tagged with this stack and address.
    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
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
    }

    async fn read(&self, cloud: &Cloud, stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        let aws = cloud.aws().await;
        observe_ec2!(aws, stack, ids, describe_vpcs, "vpc-id", vpcs, vpc_id, read_attributes)
    }

    fn importable(&self) -> bool {
        true
    }

    /// The VPC with its DNS settings (one DescribeVpcAttribute each).
    async fn inspect(&self, cloud: &Cloud, id: &str) -> Result<Option<Inspected>, ProviderError> {
        let aws = cloud.aws().await;
        let found: Result<Option<Inspected>, ProviderError> =
            inspect_ec2!(aws, id, describe_vpcs, "vpc-id", vpcs, live_outputs, read_attributes);
        let Some(mut found) = found? else { return Ok(None) };
        for (key, attribute) in [
            ("enable_dns_support", VpcAttributeName::EnableDnsSupport),
            ("enable_dns_hostnames", VpcAttributeName::EnableDnsHostnames),
        ] {
            let out = aws
                .ec2
                .describe_vpc_attribute()
                .vpc_id(id)
                .attribute(attribute)
                .send()
                .await
                .map_err(|e| error(aws, "DescribeVpcAttribute", e))?;
            let on = out
                .enable_dns_support()
                .or(out.enable_dns_hostnames())
                .and_then(aws_sdk_ec2::types::AttributeBooleanValue::value);
            found.attributes[key] = json!(on);
        }
        Ok(Some(found))
    }

    async fn mark(&self, ctx: &Ctx, id: &str, token: &str) -> Result<(), ProviderError> {
        super::mark(ctx, ctx.cloud.aws().await, id, token).await
    }

    fn lookups(&self) -> Lookups {
        Lookups {
            id: Some("a VPC id, vpc-…"),
            tags: true,
            attributes: &[],
        }
    }

    async fn look_up(&self, cloud: &Cloud, selector: &Selector) -> Result<Vec<Found>, ProviderError> {
        let aws = cloud.aws().await;
        look_up_ec2!(aws, selector, describe_vpcs, "vpc-id", vpcs, |v| Found {
            id: v.vpc_id().unwrap_or_default().to_owned(),
            outputs: live_outputs(v),
            attributes: read_attributes(v),
        })
    }

    async fn find(&self, ctx: &Ctx, token: &str, _config: &Value) -> Result<Option<String>, ProviderError> {
        find_own(ctx, ctx.cloud.aws().await, token).await
    }

    async fn update(&self, ctx: &Ctx, id: &str, old: &Value, new: &Value) -> Result<Value, ProviderError> {
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
    }

    async fn delete(&self, ctx: &Ctx, id: &str, _config: &Value) -> Result<(), ProviderError> {
        let aws = ctx.cloud.aws().await;
        let result = aws.ec2.delete_vpc().vpc_id(id).send().await;
        super::delete_outcome(aws, "DeleteVpc", "InvalidVpcID.NotFound", "vpc-id", id, result).await
    }
}
