//! `aws_internet_gateway`: an internet gateway attached to a VPC.

use super::{sync_tags, tag_spec};
use crate::provider::aws::{Clients, error, parse};
use crate::provider::{Cloud, Created, Ctx, Observed, ProviderError, Resource};
use crate::schema::attributes;
use aws_sdk_ec2::types::{InternetGateway as InternetGatewayItem, ResourceType};
use serde_json::{Value, json};

/// The `aws_internet_gateway` kind.
pub(crate) struct InternetGateway;

attributes! {
    kind InternetGateway, spec "aws_internet_gateway", outputs [id], extra [tags];
    struct Config {
        vpc_id: String [replace],
    }
}

/// What a read compares: the VPC it is attached to, and its tags.
fn read_attributes(g: &InternetGatewayItem) -> Value {
    json!({
        "vpc_id": g.attachments().first().and_then(|a| a.vpc_id()),
        "tags": super::ec2_tags(g.tags()),
    })
}

async fn find_own(ctx: &Ctx, aws: &Clients, token: &str) -> Result<Option<String>, ProviderError> {
    let found = find_own!(
        ctx,
        aws,
        token,
        describe_internet_gateways,
        internet_gateways,
        "DescribeInternetGateways"
    );
    Ok(found.and_then(|g| g.internet_gateway_id().map(str::to_owned)))
}

impl Resource for InternetGateway {
    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let aws = ctx.cloud.aws().await;
        let id = match find_own(ctx, aws, token).await? {
            Some(id) => id,
            None => aws
                .ec2
                .create_internet_gateway()
                .tag_specifications(tag_spec(ctx, token, ResourceType::InternetGateway, config))
                .send()
                .await
                .map_err(|e| error(aws, "CreateInternetGateway", e))?
                .internet_gateway()
                .and_then(|g| g.internet_gateway_id())
                .unwrap_or_default()
                .to_owned(),
        };
        match aws
            .ec2
            .attach_internet_gateway()
            .internet_gateway_id(&id)
            .vpc_id(&cfg.vpc_id)
            .send()
            .await
        {
            Err(e) if crate::provider::aws::code(&e) != Some("Resource.AlreadyAssociated") => {
                return Err(error(aws, "AttachInternetGateway", e));
            }
            Err(_) => {
                // Attached already: fine when it is to this VPC (a resumed create).
                let found = aws
                    .ec2
                    .describe_internet_gateways()
                    .internet_gateway_ids(&id)
                    .send()
                    .await
                    .map_err(|e| error(aws, "DescribeInternetGateways", e))?;
                let vpcs: Vec<&str> = found
                    .internet_gateways()
                    .iter()
                    .flat_map(InternetGatewayItem::attachments)
                    .filter_map(|a| a.vpc_id())
                    .collect();
                if !vpcs.contains(&cfg.vpc_id.as_str()) {
                    return Err(ProviderError::permanent(format!(
                        "internet gateway {id} is attached to {} instead of {}; detach it or let forge replace it",
                        vpcs.join(", "),
                        cfg.vpc_id
                    )));
                }
            }
            Ok(_) => {}
        }
        Ok(Created {
            outputs: json!({ "id": id }),
            id,
        })
    }

    async fn read(&self, cloud: &Cloud, stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        let aws = cloud.aws().await;
        observe_ec2!(
            aws,
            stack,
            ids,
            describe_internet_gateways,
            "internet-gateway-id",
            internet_gateways,
            internet_gateway_id,
            read_attributes
        )
    }

    importable_ec2!(
        describe_internet_gateways,
        "internet-gateway-id",
        internet_gateways,
        |g: &InternetGatewayItem| json!({ "id": g.internet_gateway_id() }),
        read_attributes
    );

    async fn mark(&self, ctx: &Ctx, id: &str, token: &str) -> Result<(), ProviderError> {
        super::mark(ctx, ctx.cloud.aws().await, id, token).await
    }

    async fn find(&self, ctx: &Ctx, token: &str, _config: &Value) -> Result<Option<String>, ProviderError> {
        find_own(ctx, ctx.cloud.aws().await, token).await
    }

    async fn update(&self, ctx: &Ctx, id: &str, old: &Value, new: &Value) -> Result<Value, ProviderError> {
        sync_tags(ctx, ctx.cloud.aws().await, id, old, new).await?;
        Ok(json!({ "id": id }))
    }

    async fn delete(&self, ctx: &Ctx, id: &str, config: &Value) -> Result<(), ProviderError> {
        let aws = ctx.cloud.aws().await;
        if let Some(vpc) = config.get("vpc_id").and_then(Value::as_str) {
            crate::provider::aws::tolerate(
                aws,
                "DetachInternetGateway",
                aws.ec2.detach_internet_gateway().internet_gateway_id(id).vpc_id(vpc).send().await,
                &["Gateway.NotAttached", "InvalidInternetGatewayID.NotFound"],
            )?;
        }
        crate::provider::aws::tolerate(
            aws,
            "DeleteInternetGateway",
            aws.ec2.delete_internet_gateway().internet_gateway_id(id).send().await,
            &["InvalidInternetGatewayID.NotFound"],
        )
    }
}
