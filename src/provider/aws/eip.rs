//! `aws_eip`: an Elastic IP address for a NAT gateway.

use super::{Clients, error, own_filters, sync_tags, tag_spec};
use crate::provider::{BoxFuture, Cloud, Created, Ctx, Field, FieldType, Kind, Observed, ProviderError, Spec};
use aws_sdk_ec2::types::{DomainType, ResourceType};
use serde_json::{Value, json};

/// The `aws_eip` kind.
pub struct Eip;

const SPEC: Spec = Spec {
    name: "aws_eip",
    fields: &[Field::optional("tags", FieldType::Table)],
    outputs: &["id", "public_ip"],
};

async fn find_own(ctx: &Ctx, aws: &Clients, token: &str) -> Result<Option<(String, String)>, ProviderError> {
    let found = aws
        .ec2
        .describe_addresses()
        .set_filters(Some(own_filters(ctx, token)))
        .send()
        .await
        .map_err(|e| error(aws, "DescribeAddresses", e))?;
    Ok(found.addresses().first().map(|a| {
        (
            a.allocation_id().unwrap_or_default().to_owned(),
            a.public_ip().unwrap_or_default().to_owned(),
        )
    }))
}

impl Kind for Eip {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }

    fn planned_outputs(&self, _config: &Value, prior: Option<&Value>) -> Value {
        prior.cloned().unwrap_or_else(|| json!({ "id": null, "public_ip": null }))
    }

    fn create<'a>(&'a self, ctx: &'a Ctx, token: &'a str, config: &'a Value) -> BoxFuture<'a, Result<Created, ProviderError>> {
        Box::pin(async move {
            let aws = ctx.cloud.aws().await;
            let (id, ip) = match find_own(ctx, aws, token).await? {
                Some(found) => found,
                None => {
                    let made = aws
                        .ec2
                        .allocate_address()
                        .domain(DomainType::Vpc)
                        .tag_specifications(tag_spec(ctx, token, ResourceType::ElasticIp, config))
                        .customize()
                        .config_override(super::once())
                        .send()
                        .await
                        .map_err(|e| error(aws, "AllocateAddress", e))?;
                    (
                        made.allocation_id().unwrap_or_default().to_owned(),
                        made.public_ip().unwrap_or_default().to_owned(),
                    )
                }
            };
            Ok(Created {
                outputs: json!({ "id": id, "public_ip": ip }),
                id,
            })
        })
    }

    fn read<'a>(&'a self, cloud: &'a Cloud, stack: &'a str, ids: &'a [String]) -> BoxFuture<'a, Result<Vec<Observed>, ProviderError>> {
        Box::pin(async move {
            let aws = cloud.aws().await;
            observe_ec2!(once aws, stack, ids, describe_addresses, "allocation-id", addresses, allocation_id, |a: &aws_sdk_ec2::types::Address| {
                json!({ "tags": super::ec2_tags(a.tags()) })
            })
        })
    }

    fn find<'a>(&'a self, ctx: &'a Ctx, token: &'a str, _config: &'a Value) -> BoxFuture<'a, Result<Option<String>, ProviderError>> {
        Box::pin(async move { Ok(find_own(ctx, ctx.cloud.aws().await, token).await?.map(|(id, _)| id)) })
    }

    fn update<'a>(&'a self, ctx: &'a Ctx, id: &'a str, old: &'a Value, new: &'a Value) -> BoxFuture<'a, Result<Value, ProviderError>> {
        Box::pin(async move {
            let aws = ctx.cloud.aws().await;
            sync_tags(ctx, aws, id, old, new).await?;
            let found = aws
                .ec2
                .describe_addresses()
                .allocation_ids(id)
                .send()
                .await
                .map_err(|e| error(aws, "DescribeAddresses", e))?;
            Ok(json!({ "id": id, "public_ip": found.addresses().first().and_then(|a| a.public_ip()) }))
        })
    }

    fn delete<'a>(&'a self, ctx: &'a Ctx, id: &'a str, _config: &'a Value) -> BoxFuture<'a, Result<(), ProviderError>> {
        Box::pin(async move {
            let aws = ctx.cloud.aws().await;
            super::tolerate(
                aws,
                "ReleaseAddress",
                aws.ec2.release_address().allocation_id(id).send().await,
                &["InvalidAllocationID.NotFound"],
            )
        })
    }
}
