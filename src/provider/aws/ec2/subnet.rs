//! `aws_subnet`: a subnet in one availability zone.

use super::{sync_tags, tag_spec};
use crate::provider::aws::{Clients, error, parse};
use crate::provider::{Cloud, Created, Ctx, Found, Lookups, Observed, ProviderError, Resource, Selector};
use crate::schema::attributes;
use aws_sdk_ec2::types::{AttributeBooleanValue, ResourceType};
use serde_json::{Value, json};

/// The `aws_subnet` kind.
pub(crate) struct Subnet;

attributes! {
    kind Subnet, spec "aws_subnet", outputs [id, availability_zone = attribute, cidr_block = attribute], extra [tags];
    struct Config {
        vpc_id: String [replace],
        cidr_block: String [replace],
        availability_zone: Option<String> [replace],
        #[serde(default)] map_public_ip_on_launch: bool,
    }
}

/// A live subnet's outputs, as its create gives them.
fn live_outputs(s: &aws_sdk_ec2::types::Subnet) -> Value {
    json!({ "id": s.subnet_id(), "availability_zone": s.availability_zone(), "cidr_block": s.cidr_block() })
}

/// What a read reports of a subnet.
fn read_attributes(s: &aws_sdk_ec2::types::Subnet) -> Value {
    json!({
        "vpc_id": s.vpc_id(),
        "cidr_block": s.cidr_block(),
        "availability_zone": s.availability_zone(),
        "map_public_ip_on_launch": s.map_public_ip_on_launch(),
        "tags": super::ec2_tags(s.tags()),
    })
}

/// Which of `subnets` (id, VPC) route to an internet gateway: through the route table
/// associated with them, or, for those with none, through their VPC's main route table.
async fn public_subnets(aws: &Clients, subnets: &[(String, String)]) -> Result<std::collections::BTreeSet<String>, ProviderError> {
    use aws_sdk_ec2::types::{Filter, RouteState};
    let vpcs: std::collections::BTreeSet<&str> = subnets.iter().map(|(_, vpc)| vpc.as_str()).collect();
    if vpcs.is_empty() {
        return Ok(Default::default());
    }
    let vpcs: Vec<String> = vpcs.into_iter().map(str::to_owned).collect();
    let mut tables = Vec::new();
    let mut pages = aws
        .ec2
        .describe_route_tables()
        .filters(Filter::builder().name("vpc-id").set_values(Some(vpcs)).build())
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        tables.extend(
            page.map_err(|e| error(aws, "DescribeRouteTables", e))?
                .route_tables()
                .iter()
                .cloned(),
        );
    }
    // An active route to an internet gateway (a blackhole one leads nowhere).
    let to_internet = |t: &aws_sdk_ec2::types::RouteTable| {
        t.routes()
            .iter()
            .any(|r| r.gateway_id().is_some_and(|g| g.starts_with("igw-")) && r.state() != Some(&RouteState::Blackhole))
    };
    let own = |subnet: &str| {
        tables
            .iter()
            .find(|t| t.associations().iter().any(|a| a.subnet_id() == Some(subnet)))
    };
    let main = |vpc: &str| {
        tables
            .iter()
            .find(|t| t.vpc_id() == Some(vpc) && t.associations().iter().any(|a| a.main() == Some(true)))
    };
    Ok(subnets
        .iter()
        .filter(|(subnet, vpc)| own(subnet).or_else(|| main(vpc)).is_some_and(to_internet))
        .map(|(subnet, _)| subnet.clone())
        .collect())
}

/// The subnet an earlier create of this resource tagged, if any.
async fn find_own(ctx: &Ctx, aws: &Clients, token: &str) -> Result<Option<aws_sdk_ec2::types::Subnet>, ProviderError> {
    Ok(find_own!(ctx, aws, token, describe_subnets, subnets, "DescribeSubnets"))
}

impl Resource for Subnet {
    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let aws = ctx.cloud.aws().await;
        let subnet = match find_own(ctx, aws, token).await? {
            Some(existing) => existing,
            None => aws
                .ec2
                .create_subnet()
                .vpc_id(&cfg.vpc_id)
                .cidr_block(&cfg.cidr_block)
                .set_availability_zone(cfg.availability_zone.clone())
                .tag_specifications(tag_spec(ctx, token, ResourceType::Subnet, config))
                .send()
                .await
                .map_err(|e| error(aws, "CreateSubnet", e))?
                .subnet()
                .cloned()
                .ok_or_else(|| ProviderError::permanent("CreateSubnet returned no subnet"))?,
        };
        let id = subnet.subnet_id().unwrap_or_default().to_owned();
        if cfg.map_public_ip_on_launch {
            let on = AttributeBooleanValue::builder().value(true).build();
            aws.ec2
                .modify_subnet_attribute()
                .subnet_id(&id)
                .map_public_ip_on_launch(on)
                .send()
                .await
                .map_err(|e| error(aws, "ModifySubnetAttribute", e))?;
        }
        let outputs = json!({ "id": id, "availability_zone": subnet.availability_zone(), "cidr_block": cfg.cidr_block });
        Ok(Created { id, outputs })
    }

    async fn read(&self, cloud: &Cloud, stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        let aws = cloud.aws().await;
        observe_ec2!(aws, stack, ids, describe_subnets, "subnet-id", subnets, subnet_id, read_attributes)
    }

    importable_ec2!(describe_subnets, "subnet-id", subnets, live_outputs, read_attributes);

    async fn mark(&self, ctx: &Ctx, id: &str, token: &str) -> Result<(), ProviderError> {
        super::mark(ctx, ctx.cloud.aws().await, id, token).await
    }

    fn lookups(&self) -> Lookups {
        Lookups {
            id: Some("a subnet id, subnet-…"),
            tags: true,
            attributes: &[
                ("vpc_id", "a VPC id"),
                ("availability_zone", "a zone name"),
                ("tier", "\"private\" or \"public\""),
            ],
        }
    }

    /// By id, tags, or VPC and zone (one Describe); by `tier` also the VPC's route tables: a
    /// subnet is public when its route table (its own, else the VPC's main one) routes to an
    /// internet gateway.
    async fn look_up(&self, cloud: &Cloud, selector: &Selector) -> Result<Vec<Found>, ProviderError> {
        let aws = cloud.aws().await;
        let tier = match selector {
            Selector::Where(values) => values.get("tier").map(String::as_str),
            _ => None,
        };
        if let Some(other) = tier.filter(|t| !["private", "public"].contains(t)) {
            return Err(ProviderError::permanent(format!(
                "`tier` is \"private\" or \"public\", not \"{other}\""
            )));
        }
        let found: Result<Vec<Found>, ProviderError> = look_up_ec2!(aws, selector, describe_subnets, "subnet-id", subnets, |s| Found {
            id: s.subnet_id().unwrap_or_default().to_owned(),
            outputs: live_outputs(s),
            attributes: read_attributes(s),
        });
        let mut found = found?;
        if let Some(tier) = tier {
            let subnets: Vec<(String, String)> = found
                .iter()
                .filter_map(|f| Some((f.id.clone(), f.attributes["vpc_id"].as_str()?.to_owned())))
                .collect();
            let public = public_subnets(aws, &subnets).await?;
            found.retain(|f| public.contains(&f.id) == (tier == "public"));
            for f in &mut found {
                f.attributes["tier"] = json!(tier);
            }
        }
        Ok(found)
    }

    async fn find(&self, ctx: &Ctx, token: &str, _config: &Value) -> Result<Option<String>, ProviderError> {
        Ok(find_own(ctx, ctx.cloud.aws().await, token)
            .await?
            .and_then(|s| s.subnet_id().map(str::to_owned)))
    }

    async fn update(&self, ctx: &Ctx, id: &str, old: &Value, new: &Value) -> Result<Value, ProviderError> {
        let cfg: Config = parse(ctx, new)?;
        let aws = ctx.cloud.aws().await;
        sync_tags(ctx, aws, id, old, new).await?;
        if old.get("map_public_ip_on_launch") != new.get("map_public_ip_on_launch") {
            let value = AttributeBooleanValue::builder().value(cfg.map_public_ip_on_launch).build();
            aws.ec2
                .modify_subnet_attribute()
                .subnet_id(id)
                .map_public_ip_on_launch(value)
                .send()
                .await
                .map_err(|e| error(aws, "ModifySubnetAttribute", e))?;
        }
        let described = aws
            .ec2
            .describe_subnets()
            .subnet_ids(id)
            .send()
            .await
            .map_err(|e| error(aws, "DescribeSubnets", e))?;
        let zone = described.subnets().first().and_then(|s| s.availability_zone()).map(str::to_owned);
        Ok(json!({ "id": id, "availability_zone": zone, "cidr_block": cfg.cidr_block }))
    }

    async fn delete(&self, ctx: &Ctx, id: &str, _config: &Value) -> Result<(), ProviderError> {
        let aws = ctx.cloud.aws().await;
        let result = aws.ec2.delete_subnet().subnet_id(id).send().await;
        super::delete_outcome(aws, "DeleteSubnet", "InvalidSubnetID.NotFound", "subnet-id", id, result).await
    }
}
