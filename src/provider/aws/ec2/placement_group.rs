//! `aws_placement_group`: a placement group — `cluster` for EFA node groups (all instances on
//! one network spine), `partition` or `spread`.

use super::tag_spec;
use crate::provider::aws::{Clients, error, found, parse};
use crate::provider::{Cloud, Created, Ctx, Observed, ProviderError, Resource};
use crate::schema::attributes;
use aws_sdk_ec2::types::{PlacementStrategy, ResourceType};
use serde_json::{Value, json};

/// The `aws_placement_group` kind.
pub(crate) struct PlacementGroup;

attributes! {
    kind PlacementGroup, spec "aws_placement_group", outputs [id = attribute name, name = attribute, group_id], extra [tags];
    struct Config {
        name: String [replace],
        #[serde(default = "default_strategy")] strategy: String [replace],
        partition_count: Option<i32> [replace],
    }
}

fn default_strategy() -> String {
    "cluster".into()
}

/// The group named `name`: its id and whether the create with `token` made it.
async fn lookup(ctx: &Ctx, aws: &Clients, name: &str, token: Option<&str>) -> Result<Option<(String, bool)>, ProviderError> {
    let answer = aws.ec2.describe_placement_groups().group_names(name).send().await;
    Ok(
        found(aws, "DescribePlacementGroups", answer, "InvalidPlacementGroup.Unknown")?.and_then(|out| {
            out.placement_groups().first().map(|g| {
                let tag = |k: &str| g.tags().iter().find(|t| t.key() == Some(k)).and_then(|t| t.value());
                (
                    g.group_id().unwrap_or(name).to_owned(),
                    token.is_some_and(|t| crate::provider::aws::made_by(ctx, t, tag)),
                )
            })
        }),
    )
}

/// What a read compares: name, strategy, partitions and tags.
fn read_attributes(g: &aws_sdk_ec2::types::PlacementGroup) -> Value {
    json!({
        "name": g.group_name(),
        "strategy": g.strategy().map(PlacementStrategy::as_str),
        "partition_count": g.partition_count(),
        "tags": super::ec2_tags(g.tags()),
    })
}

impl Resource for PlacementGroup {
    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let strategy = match cfg.strategy.as_str() {
            "cluster" | "partition" | "spread" => PlacementStrategy::from(cfg.strategy.as_str()),
            other => {
                return Err(ProviderError::permanent(format!(
                    "`strategy = \"{other}\"`: expected \"cluster\", \"partition\" or \"spread\""
                )));
            }
        };
        let aws = ctx.cloud.aws().await;
        let made = aws
            .ec2
            .create_placement_group()
            .group_name(&cfg.name)
            .strategy(strategy)
            .set_partition_count(cfg.partition_count)
            .tag_specifications(tag_spec(ctx, token, ResourceType::PlacementGroup, config))
            .send()
            .await;
        let group_id = match made {
            Ok(out) => out.placement_group().and_then(|g| g.group_id()).unwrap_or(&cfg.name).to_owned(),
            Err(e) if crate::provider::aws::code(&e) == Some("InvalidPlacementGroup.Duplicate") => {
                match lookup(ctx, aws, &cfg.name, Some(token)).await? {
                    Some((id, true)) => id,
                    _ => {
                        return Err(ProviderError::permanent(format!(
                            "a placement group named `{}` already exists and was not created by `{}`",
                            cfg.name, ctx.address
                        )));
                    }
                }
            }
            Err(e) => return Err(error(aws, "CreatePlacementGroup", e)),
        };
        Ok(Created {
            outputs: json!({ "id": cfg.name, "name": cfg.name, "group_id": group_id }),
            id: cfg.name,
        })
    }

    async fn read(&self, cloud: &Cloud, stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        let aws = cloud.aws().await;
        observe_ec2!(once aws, stack, ids, describe_placement_groups, "group-name", placement_groups, group_name, read_attributes)
    }

    // The group by name, its id with it.
    importable_ec2!(
        describe_placement_groups,
        "group-name",
        placement_groups,
        |g: &aws_sdk_ec2::types::PlacementGroup| json!({ "id": g.group_name(), "name": g.group_name(), "group_id": g.group_id() }),
        read_attributes
    );

    async fn mark(&self, ctx: &Ctx, id: &str, token: &str) -> Result<(), ProviderError> {
        let aws = ctx.cloud.aws().await;
        let (group_id, _) = lookup(ctx, aws, id, None)
            .await?
            .ok_or_else(|| ProviderError::permanent(format!("placement group `{id}` no longer exists")))?;
        super::mark(ctx, aws, &group_id, token).await
    }

    async fn find(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Option<String>, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        Ok(lookup(ctx, ctx.cloud.aws().await, &cfg.name, Some(token))
            .await?
            .filter(|(_, owned)| *owned)
            .map(|_| cfg.name))
    }

    async fn update(&self, ctx: &Ctx, id: &str, old: &Value, new: &Value) -> Result<Value, ProviderError> {
        let aws = ctx.cloud.aws().await;
        let (group_id, _) = lookup(ctx, aws, id, None).await?.ok_or_else(|| {
            ProviderError::permanent(format!(
                "placement group `{id}` no longer exists, so its tags cannot change; run `forge up` again to make it anew"
            ))
        })?;
        super::sync_tags(ctx, aws, &group_id, old, new).await?;
        Ok(json!({ "id": id, "name": id, "group_id": group_id }))
    }

    async fn delete(&self, ctx: &Ctx, id: &str, _config: &Value) -> Result<(), ProviderError> {
        let aws = ctx.cloud.aws().await;
        crate::provider::aws::tolerate(
            aws,
            "DeletePlacementGroup",
            aws.ec2.delete_placement_group().group_name(id).send().await,
            &["InvalidPlacementGroup.Unknown"],
        )
    }
}
