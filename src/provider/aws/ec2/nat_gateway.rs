//! `aws_nat_gateway`: a public NAT gateway. Creation waits until it is `available`; deletion
//! waits until it is `deleted`, so that the EIP behind it (deleted after it, in reverse
//! dependency order) can be released.

use super::{sync_tags, tag_spec};
use crate::provider::aws::{Clients, Poll, error, parse, wait_gone, wait_until};
use crate::provider::{Cloud, Created, Ctx, Observed, ProviderError, Resource};
use crate::schema::attributes;
use aws_sdk_ec2::types::{Filter, NatGatewayState, ResourceType};
use serde_json::{Value, json};
use std::time::Duration;

/// The `aws_nat_gateway` kind.
pub(crate) struct NatGateway;

attributes! {
    kind NatGateway, spec "aws_nat_gateway", outputs [id], extra [tags];
    struct Config {
        subnet_id: String [replace],
        allocation_id: String [replace],
    }
}

/// NAT gateways usually take one to three minutes.
const CREATE_TIMEOUT: Duration = Duration::from_secs(15 * 60);
const DELETE_TIMEOUT: Duration = Duration::from_secs(15 * 60);

async fn state(aws: &Clients, id: &str) -> Result<Option<(NatGatewayState, Option<String>)>, ProviderError> {
    let found = aws.ec2.describe_nat_gateways().nat_gateway_ids(id).send().await;
    match found {
        Ok(out) => Ok(out
            .nat_gateways()
            .first()
            .and_then(|n| n.state().cloned().map(|s| (s, n.failure_message().map(str::to_owned))))),
        Err(e) if crate::provider::aws::code(&e) == Some("NatGatewayNotFound") => Ok(None),
        Err(e) => Err(error(aws, "DescribeNatGateways", e)),
    }
}

/// The gateway an earlier create tagged, unless it is already being deleted.
async fn find_own(ctx: &Ctx, aws: &Clients, token: &str) -> Result<Option<String>, ProviderError> {
    let live = Filter::builder().name("state").values("pending").values("available").build();
    let found = find_own!(filter ctx, aws, token, describe_nat_gateways, nat_gateways, "DescribeNatGateways", live);
    Ok(found.and_then(|n| n.nat_gateway_id().map(str::to_owned)))
}

/// What a read compares: its subnet, its address's allocation and its tags.
fn read_attributes(n: &aws_sdk_ec2::types::NatGateway) -> Value {
    json!({
        "subnet_id": n.subnet_id(),
        "allocation_id": n.nat_gateway_addresses().first().and_then(|a| a.allocation_id()),
        "tags": super::ec2_tags(n.tags()),
    })
}

/// The states of a NAT gateway that is there (not failed, deleting or deleted).
fn live_states() -> Filter {
    Filter::builder().name("state").values("pending").values("available").build()
}

impl Resource for NatGateway {
    /// Its hours (the data it processes is billed apart, by the GB, and not counted).
    fn meter(&self, sight: &crate::cost::Sight) -> Option<crate::cost::Meter> {
        Some(sight.in_aws_region(|region| crate::cost::Meter::Hourly {
            what: "NAT gateway".into(),
            parts: vec![(crate::cost::Rate::NatGateway { region }, 1.0)],
            count: crate::cost::Count::ONE,
            upper_bound: None,
        }))
    }
    /// Passes the create's token as `ClientToken`, and first looks for a gateway an earlier
    /// attempt tagged.
    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let aws = ctx.cloud.aws().await;
        let id = match find_own(ctx, aws, token).await? {
            Some(id) => id,
            None => aws
                .ec2
                .create_nat_gateway()
                .subnet_id(&cfg.subnet_id)
                .allocation_id(&cfg.allocation_id)
                .client_token(token)
                .tag_specifications(tag_spec(ctx, token, ResourceType::Natgateway, config))
                .send()
                .await
                .map_err(|e| error(aws, "CreateNatGateway", e))?
                .nat_gateway()
                .and_then(|n| n.nat_gateway_id())
                .unwrap_or_default()
                .to_owned(),
        };
        wait_until(ctx, CREATE_TIMEOUT, || async {
            Ok(match state(aws, &id).await? {
                Some((NatGatewayState::Available, _)) => Poll::Done(()),
                Some((NatGatewayState::Failed, why)) => Poll::Failed(format!("NAT gateway {id} failed: {}", why.unwrap_or_default())),
                Some((NatGatewayState::Deleting | NatGatewayState::Deleted, _)) => {
                    Poll::Failed(format!("NAT gateway {id} is being deleted by someone else"))
                }
                Some((s, _)) => Poll::Pending(s.as_str().to_owned()),
                None => Poll::Pending("pending".into()),
            })
        })
        .await?;
        Ok(Created {
            outputs: json!({ "id": id }),
            id,
        })
    }

    async fn read(&self, cloud: &Cloud, stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        let aws = cloud.aws().await;
        let live = live_states();
        observe_ec2!(
            filter aws,
            stack,
            ids,
            describe_nat_gateways,
            "nat-gateway-id",
            nat_gateways,
            nat_gateway_id,
            read_attributes,
            live.clone()
        )
    }

    importable_ec2!(
        filter describe_nat_gateways,
        "nat-gateway-id",
        nat_gateways,
        |n: &aws_sdk_ec2::types::NatGateway| json!({ "id": n.nat_gateway_id() }),
        read_attributes,
        live_states()
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

    async fn delete(&self, ctx: &Ctx, id: &str, _config: &Value) -> Result<(), ProviderError> {
        let aws = ctx.cloud.aws().await;
        match aws.ec2.delete_nat_gateway().nat_gateway_id(id).send().await {
            Err(e) if crate::provider::aws::code(&e) == Some("NatGatewayNotFound") => return Ok(()),
            Err(e) => return Err(error(aws, "DeleteNatGateway", e)),
            Ok(_) => {}
        }
        wait_gone(ctx, DELETE_TIMEOUT, || async {
            Ok(state(aws, id)
                .await?
                .filter(|(s, _)| *s != NatGatewayState::Deleted)
                .map(|(s, _)| s.as_str().to_owned()))
        })
        .await
    }
}
