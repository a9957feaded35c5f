//! `aws_internet_gateway`: an internet gateway attached to a VPC.

use super::{Clients, error, own_filters, parse, sync_tags, tag_spec};
use crate::provider::{BoxFuture, Cloud, Created, Ctx, Kind, Observed, ProviderError, Spec};
use crate::schema::attributes;
use aws_sdk_ec2::types::ResourceType;
use serde_json::{Value, json};

/// The `aws_internet_gateway` kind.
pub struct InternetGateway;

attributes! {
    spec "aws_internet_gateway", outputs ["id"], extra [tags];
    struct Config {
        vpc_id: String [replace],
    }
}

async fn find_own(ctx: &Ctx, aws: &Clients, token: &str) -> Result<Option<String>, ProviderError> {
    let found = aws
        .ec2
        .describe_internet_gateways()
        .set_filters(Some(own_filters(ctx, token)))
        .send()
        .await
        .map_err(|e| error(aws, "DescribeInternetGateways", e))?;
    Ok(found
        .internet_gateways()
        .first()
        .and_then(|g| g.internet_gateway_id())
        .map(str::to_owned))
}

impl Kind for InternetGateway {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }

    fn planned_outputs(&self, _config: &Value, prior: Option<&Value>) -> Value {
        json!({ "id": crate::provider::prior_output(prior, "id") })
    }

    fn create<'a>(&'a self, ctx: &'a Ctx, token: &'a str, config: &'a Value) -> BoxFuture<'a, Result<Created, ProviderError>> {
        Box::pin(async move {
            let cfg: Config = parse(ctx, config)?;
            let aws = ctx.cloud.aws().await;
            let id = match find_own(ctx, aws, token).await? {
                Some(id) => id,
                None => aws
                    .ec2
                    .create_internet_gateway()
                    .tag_specifications(tag_spec(ctx, token, ResourceType::InternetGateway, config))
                    .customize()
                    .config_override(super::once())
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
                Err(e) if super::code(&e) != Some("Resource.AlreadyAssociated") => return Err(error(aws, "AttachInternetGateway", e)),
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
                        .flat_map(|g| g.attachments())
                        .filter_map(|a| a.vpc_id())
                        .collect();
                    if !vpcs.contains(&cfg.vpc_id.as_str()) {
                        return Err(ProviderError {
                            message: format!(
                                "internet gateway {id} is attached to {} instead of {}; detach it or let forge replace it",
                                vpcs.join(", "),
                                cfg.vpc_id
                            ),
                            retryable: false,
                        });
                    }
                }
                Ok(_) => {}
            }
            Ok(Created {
                outputs: json!({ "id": id }),
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
                describe_internet_gateways,
                "internet-gateway-id",
                internet_gateways,
                internet_gateway_id,
                |g: &aws_sdk_ec2::types::InternetGateway| json!({
                    "vpc_id": g.attachments().first().and_then(|a| a.vpc_id()),
                    "tags": super::ec2_tags(g.tags()),
                })
            )
        })
    }

    fn find<'a>(&'a self, ctx: &'a Ctx, token: &'a str, _config: &'a Value) -> BoxFuture<'a, Result<Option<String>, ProviderError>> {
        Box::pin(async move { find_own(ctx, ctx.cloud.aws().await, token).await })
    }

    fn update<'a>(&'a self, ctx: &'a Ctx, id: &'a str, old: &'a Value, new: &'a Value) -> BoxFuture<'a, Result<Value, ProviderError>> {
        Box::pin(async move {
            sync_tags(ctx, ctx.cloud.aws().await, id, old, new).await?;
            Ok(json!({ "id": id }))
        })
    }

    fn delete<'a>(&'a self, ctx: &'a Ctx, id: &'a str, config: &'a Value) -> BoxFuture<'a, Result<(), ProviderError>> {
        Box::pin(async move {
            let aws = ctx.cloud.aws().await;
            if let Some(vpc) = config.get("vpc_id").and_then(Value::as_str) {
                super::tolerate(
                    aws,
                    "DetachInternetGateway",
                    aws.ec2.detach_internet_gateway().internet_gateway_id(id).vpc_id(vpc).send().await,
                    &["Gateway.NotAttached", "InvalidInternetGatewayID.NotFound"],
                )?;
            }
            super::tolerate(
                aws,
                "DeleteInternetGateway",
                aws.ec2.delete_internet_gateway().internet_gateway_id(id).send().await,
                &["InvalidInternetGatewayID.NotFound"],
            )
        })
    }
}
