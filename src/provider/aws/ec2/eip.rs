//! `aws_eip`: an Elastic IP address for a NAT gateway.

use super::{sync_tags, tag_spec};
use crate::provider::aws::{Clients, error};
use crate::provider::{Cloud, Created, Ctx, Declared, Field, FieldType, Observed, Output, ProviderError, Resource, Spec};
use aws_sdk_ec2::types::{DomainType, ResourceType};
use serde_json::{Value, json};

/// The `aws_eip` kind.
pub(crate) struct Eip;

const SPEC: Spec = Spec {
    name: "aws_eip",
    fields: &[Field::optional("tags", FieldType::Table)],
    outputs: &[Output::cloud("id"), Output::cloud("public_ip")],
};

impl Declared for Eip {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
}

async fn find_own(ctx: &Ctx, aws: &Clients, token: &str) -> Result<Option<(String, String)>, ProviderError> {
    let found = find_own!(ctx, aws, token, describe_addresses, addresses, "DescribeAddresses");
    Ok(found.map(|a| {
        (
            a.allocation_id().unwrap_or_default().to_owned(),
            a.public_ip().unwrap_or_default().to_owned(),
        )
    }))
}

/// What a read compares: its tags.
fn read_attributes(a: &aws_sdk_ec2::types::Address) -> Value {
    json!({ "tags": super::ec2_tags(a.tags()) })
}

impl Resource for Eip {
    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let aws = ctx.cloud.aws().await;
        let (id, ip) = match find_own(ctx, aws, token).await? {
            Some(found) => found,
            None => {
                let made = aws
                    .ec2
                    .allocate_address()
                    .domain(DomainType::Vpc)
                    .tag_specifications(tag_spec(ctx, token, ResourceType::ElasticIp, config))
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
    }

    async fn read(&self, cloud: &Cloud, stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        let aws = cloud.aws().await;
        observe_ec2!(once aws, stack, ids, describe_addresses, "allocation-id", addresses, allocation_id, read_attributes)
    }

    importable_ec2!(
        describe_addresses,
        "allocation-id",
        addresses,
        |a: &aws_sdk_ec2::types::Address| json!({ "id": a.allocation_id(), "public_ip": a.public_ip() }),
        read_attributes
    );

    async fn mark(&self, ctx: &Ctx, id: &str, token: &str) -> Result<(), ProviderError> {
        super::mark(ctx, ctx.cloud.aws().await, id, token).await
    }

    async fn find(&self, ctx: &Ctx, token: &str, _config: &Value) -> Result<Option<String>, ProviderError> {
        Ok(find_own(ctx, ctx.cloud.aws().await, token).await?.map(|(id, _)| id))
    }

    async fn update(&self, ctx: &Ctx, id: &str, old: &Value, new: &Value) -> Result<Value, ProviderError> {
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
    }

    async fn delete(&self, ctx: &Ctx, id: &str, _config: &Value) -> Result<(), ProviderError> {
        let aws = ctx.cloud.aws().await;
        crate::provider::aws::tolerate(
            aws,
            "ReleaseAddress",
            aws.ec2.release_address().allocation_id(id).send().await,
            &["InvalidAllocationID.NotFound"],
        )
    }
}
