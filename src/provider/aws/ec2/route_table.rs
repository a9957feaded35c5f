//! `aws_route_table`: a route table, its routes and its subnet associations. Routes and
//! associations change in place.

use super::{sync_tags, tag_spec};
use crate::provider::aws::{Clients, error, parse};
use crate::provider::{Cloud, Created, Ctx, Observed, ProviderError, Resource};
use crate::schema::attributes;
use aws_sdk_ec2::operation::describe_route_tables::builders::DescribeRouteTablesFluentBuilder;
use aws_sdk_ec2::types::{Filter, ResourceType, RouteTable as RouteTableItem};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The `aws_route_table` kind.
pub(crate) struct RouteTable;

attributes! {
    kind RouteTable, spec "aws_route_table", outputs [id], extra [tags];
    struct Config {
        vpc_id: String [replace],
        #[serde(default)] routes: Vec<Route>,
        #[serde(default)] subnet_ids: Vec<String>,
    }
}

/// `{ cidr_block = "0.0.0.0/0", gateway_id = "igw-…" }` or `nat_gateway_id`.
#[derive(Deserialize, serde::Serialize, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
struct Route {
    cidr_block: String,
    gateway_id: Option<String>,
    nat_gateway_id: Option<String>,
}

/// A live table in a block's terms: its VPC, tags, IPv4 routes through a gateway (internet,
/// virtual private, NAT; not the VPC's own `local` route) and explicitly associated subnets.
fn as_written(t: &RouteTableItem) -> Value {
    let routes: Vec<Value> = t
        .routes()
        .iter()
        .filter_map(|r| {
            let mut route = json!({ "cidr_block": r.destination_cidr_block()? });
            match (r.gateway_id().filter(|g| *g != "local"), r.nat_gateway_id()) {
                (Some(gateway), _) => route["gateway_id"] = json!(gateway),
                (None, Some(nat)) => route["nat_gateway_id"] = json!(nat),
                (None, None) => return None,
            }
            Some(route)
        })
        .collect();
    let subnets: Vec<&str> = t
        .associations()
        .iter()
        .filter(|a| a.main() != Some(true))
        .filter_map(|a| a.subnet_id())
        .collect();
    json!({ "vpc_id": t.vpc_id(), "tags": super::ec2_tags(t.tags()), "routes": routes, "subnet_ids": subnets })
}

async fn find_own(ctx: &Ctx, aws: &Clients, token: &str) -> Result<Option<String>, ProviderError> {
    let found = find_own!(ctx, aws, token, describe_route_tables, route_tables, "DescribeRouteTables");
    Ok(found.and_then(|t| t.route_table_id().map(str::to_owned)))
}

/// The explicit subnet associations (subnet id → association id) of the route tables that
/// `describe` finds: a table's own, or those of the table a subnet is in.
async fn associations(aws: &Clients, describe: DescribeRouteTablesFluentBuilder) -> Result<BTreeMap<String, String>, ProviderError> {
    let found = describe.send().await.map_err(|e| error(aws, "DescribeRouteTables", e))?;
    Ok(found
        .route_tables()
        .iter()
        .flat_map(RouteTableItem::associations)
        .filter(|a| a.main() != Some(true))
        .filter_map(|a| Some((a.subnet_id()?.to_owned(), a.route_table_association_id()?.to_owned())))
        .collect())
}

/// Brings routes and associations from `old` to `new` (empty `old` on create).
async fn sync(
    aws: &Clients,
    id: &str,
    old_routes: &[Route],
    new: &Config,
    present: &BTreeMap<String, String>,
) -> Result<(), ProviderError> {
    remove_routes(aws, id, old_routes, &new.routes).await?;
    put_routes(aws, id, old_routes, &new.routes).await?;
    associate(aws, id, present, &new.subnet_ids).await
}

/// Deletes the routes `old` had for CIDR blocks `new` has none for.
async fn remove_routes(aws: &Clients, id: &str, old: &[Route], new: &[Route]) -> Result<(), ProviderError> {
    for gone in old.iter().filter(|r| !new.iter().any(|n| n.cidr_block == r.cidr_block)) {
        let deleted = aws
            .ec2
            .delete_route()
            .route_table_id(id)
            .destination_cidr_block(&gone.cidr_block)
            .send()
            .await;
        crate::provider::aws::tolerate(aws, "DeleteRoute", deleted, &["InvalidRoute.NotFound"])?;
    }
    Ok(())
}

/// Creates the routes of `new` that `old` did not have, and points those that changed where
/// `new` says.
async fn put_routes(aws: &Clients, id: &str, old: &[Route], new: &[Route]) -> Result<(), ProviderError> {
    for route in new {
        let before = old.iter().find(|r| r.cidr_block == route.cidr_block);
        if before == Some(route) {
            continue;
        }
        let replace = || {
            aws.ec2
                .replace_route()
                .route_table_id(id)
                .destination_cidr_block(&route.cidr_block)
                .set_gateway_id(route.gateway_id.clone())
                .set_nat_gateway_id(route.nat_gateway_id.clone())
                .send()
        };
        if before.is_some() {
            replace().await.map_err(|e| error(aws, "ReplaceRoute", e))?;
            continue;
        }
        let created = aws
            .ec2
            .create_route()
            .route_table_id(id)
            .destination_cidr_block(&route.cidr_block)
            .set_gateway_id(route.gateway_id.clone())
            .set_nat_gateway_id(route.nat_gateway_id.clone())
            .send()
            .await;
        match created {
            Ok(_) => {}
            // A route for this CIDR is there already (a resumed create, or added by hand): make
            // it point where the stack says.
            Err(e) if crate::provider::aws::code(&e) == Some("RouteAlreadyExists") => {
                replace().await.map_err(|e| error(aws, "ReplaceRoute", e))?;
            }
            Err(e) => return Err(error(aws, "CreateRoute", e)),
        }
    }
    Ok(())
}

/// Disassociates the subnets `present` (subnet id → association id) has that `subnets` does
/// not, and associates those it lacks.
async fn associate(aws: &Clients, id: &str, present: &BTreeMap<String, String>, subnets: &[String]) -> Result<(), ProviderError> {
    for (subnet, association) in present.iter().filter(|(s, _)| !subnets.contains(s)) {
        aws.ec2
            .disassociate_route_table()
            .association_id(association)
            .send()
            .await
            .map_err(|e| error(aws, &format!("DisassociateRouteTable ({subnet})"), e))?;
    }
    for subnet in subnets.iter().filter(|s| !present.contains_key(*s)) {
        match aws.ec2.associate_route_table().route_table_id(id).subnet_id(subnet).send().await {
            Ok(_) => {}
            // The subnet is associated with another table: move it here.
            Err(e) if crate::provider::aws::code(&e) == Some("Resource.AlreadyAssociated") => {
                let by_subnet = Filter::builder().name("association.subnet-id").values(subnet).build();
                let elsewhere = associations(aws, aws.ec2.describe_route_tables().filters(by_subnet)).await?;
                let Some(association) = elsewhere.get(subnet) else {
                    return Err(error(aws, "AssociateRouteTable", e));
                };
                aws.ec2
                    .replace_route_table_association()
                    .association_id(association)
                    .route_table_id(id)
                    .send()
                    .await
                    .map_err(|e| error(aws, "ReplaceRouteTableAssociation", e))?;
            }
            Err(e) => return Err(error(aws, "AssociateRouteTable", e)),
        }
    }
    Ok(())
}

impl Resource for RouteTable {
    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let aws = ctx.cloud.aws().await;
        let (id, present) = match find_own(ctx, aws, token).await? {
            Some(id) => {
                let present = associations(aws, aws.ec2.describe_route_tables().route_table_ids(&id)).await?;
                (id, present)
            }
            None => {
                let made = aws
                    .ec2
                    .create_route_table()
                    .vpc_id(&cfg.vpc_id)
                    .tag_specifications(tag_spec(ctx, token, ResourceType::RouteTable, config))
                    .send()
                    .await
                    .map_err(|e| error(aws, "CreateRouteTable", e))?;
                (
                    made.route_table().and_then(|t| t.route_table_id()).unwrap_or_default().to_owned(),
                    BTreeMap::new(),
                )
            }
        };
        sync(aws, &id, &[], &cfg, &present).await?;
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
            describe_route_tables,
            "route-table-id",
            route_tables,
            route_table_id,
            |t: &RouteTableItem| json!({ "vpc_id": t.vpc_id(), "tags": super::ec2_tags(t.tags()) })
        )
    }

    // The table with its routes through gateways and its subnets, as a block writes them.
    importable_ec2!(
        describe_route_tables,
        "route-table-id",
        route_tables,
        |t: &RouteTableItem| json!({ "id": t.route_table_id() }),
        as_written
    );

    async fn mark(&self, ctx: &Ctx, id: &str, token: &str) -> Result<(), ProviderError> {
        super::mark(ctx, ctx.cloud.aws().await, id, token).await
    }

    async fn find(&self, ctx: &Ctx, token: &str, _config: &Value) -> Result<Option<String>, ProviderError> {
        find_own(ctx, ctx.cloud.aws().await, token).await
    }

    async fn update(&self, ctx: &Ctx, id: &str, old: &Value, new: &Value) -> Result<Value, ProviderError> {
        let (before, after): (Config, Config) = (parse(ctx, old)?, parse(ctx, new)?);
        let aws = ctx.cloud.aws().await;
        sync_tags(ctx, aws, id, old, new).await?;
        let present = if before.subnet_ids == after.subnet_ids {
            before.subnet_ids.iter().map(|s| (s.clone(), String::new())).collect()
        } else {
            associations(aws, aws.ec2.describe_route_tables().route_table_ids(id)).await?
        };
        sync(aws, id, &before.routes, &after, &present).await?;
        Ok(json!({ "id": id }))
    }

    async fn delete(&self, ctx: &Ctx, id: &str, _config: &Value) -> Result<(), ProviderError> {
        let aws = ctx.cloud.aws().await;
        let present = match aws.ec2.describe_route_tables().route_table_ids(id).send().await {
            Err(e) if crate::provider::aws::code(&e) == Some("InvalidRouteTableID.NotFound") => return Ok(()),
            Err(e) => return Err(error(aws, "DescribeRouteTables", e)),
            Ok(_) => associations(aws, aws.ec2.describe_route_tables().route_table_ids(id)).await?,
        };
        for association in present.values() {
            crate::provider::aws::tolerate(
                aws,
                "DisassociateRouteTable",
                aws.ec2.disassociate_route_table().association_id(association).send().await,
                &["InvalidAssociationID.NotFound"],
            )?;
        }
        crate::provider::aws::tolerate(
            aws,
            "DeleteRouteTable",
            aws.ec2.delete_route_table().route_table_id(id).send().await,
            &["InvalidRouteTableID.NotFound"],
        )
    }
}
