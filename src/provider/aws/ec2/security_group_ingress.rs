//! `aws_security_group_ingress`: inbound rules added to a group that another resource owns.
//! It lets a group be made with the rules it needs to exist (a file system's own ports) while
//! the rules from slower sources (an EKS cluster's security group) follow once those exist,
//! so the file system does not wait for the cluster. Its id is the group's; the rules are
//! compared as single permissions, like `aws_security_group`'s, and the group's own updates
//! leave them alone.

use super::security_group::{Direction, Owner, Rule, atoms, comparable_rules, observe_groups, rule_tags, sync_rules};
use crate::provider::aws::{Clients, error, parse};
use crate::provider::{Cloud, Created, Ctx, Observed, ProviderError, Resource};
use crate::schema::attributes;
use serde_json::{Value, json};
use std::collections::BTreeSet;

/// The `aws_security_group_ingress` kind.
pub(crate) struct SecurityGroupIngress;

attributes! {
    kind SecurityGroupIngress, spec "aws_security_group_ingress", outputs [id = attribute security_group_id];
    struct Config {
        security_group_id: String [replace],
        ingress: Vec<Rule>,
    }
}

/// Whether the group still exists.
async fn exists(aws: &Clients, id: &str) -> Result<bool, ProviderError> {
    match aws.ec2.describe_security_groups().group_ids(id).send().await {
        Ok(out) => Ok(!out.security_groups().is_empty()),
        Err(e) if crate::provider::aws::code(&e) == Some("InvalidGroup.NotFound") => Ok(false),
        Err(e) => Err(error(aws, "DescribeSecurityGroups", e)),
    }
}

impl Resource for SecurityGroupIngress {
    /// Rules that an earlier try already authorized are skipped.
    async fn create(&self, ctx: &Ctx, _token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let aws = ctx.cloud.aws().await;
        let id = cfg.security_group_id;
        sync_rules(
            aws,
            &rule_tags(ctx),
            &id,
            Direction::Ingress,
            &BTreeSet::new(),
            &atoms(&cfg.ingress, &id)?,
        )
        .await?;
        Ok(Created {
            outputs: json!({ "id": id }),
            id,
        })
    }

    /// The groups that still exist and the rules other resources added to them (tagged with
    /// their own address), read as `aws_security_group` reads them; only the recorded groups
    /// are reported (the others are `aws_security_group`'s).
    async fn read(&self, cloud: &Cloud, stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        let groups = observe_groups(cloud.aws().await, stack, ids, Owner::Others).await?;
        Ok(groups
            .into_iter()
            .filter(|g| ids.contains(&g.id))
            .map(|g| Observed {
                attributes: json!({ "ingress": g.attributes["ingress"] }),
                id: g.id,
                address: None,
            })
            .collect())
    }

    fn comparable(&self, id: &str, config: &Value) -> Value {
        comparable_rules(id, config, &["ingress"])
    }

    /// An interrupted create may have authorized some rules: the group is what to clean up.
    async fn find(&self, ctx: &Ctx, _token: &str, config: &Value) -> Result<Option<String>, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let found = exists(ctx.cloud.aws().await, &cfg.security_group_id).await?;
        Ok(found.then_some(cfg.security_group_id))
    }

    async fn update(&self, ctx: &Ctx, id: &str, old: &Value, new: &Value) -> Result<Value, ProviderError> {
        let (before, after): (Config, Config) = (parse(ctx, old)?, parse(ctx, new)?);
        let aws = ctx.cloud.aws().await;
        sync_rules(
            aws,
            &rule_tags(ctx),
            id,
            Direction::Ingress,
            &atoms(&before.ingress, id)?,
            &atoms(&after.ingress, id)?,
        )
        .await?;
        Ok(json!({ "id": id }))
    }

    /// Revokes the rules; a group that is gone took them with it.
    async fn delete(&self, ctx: &Ctx, id: &str, config: &Value) -> Result<(), ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let aws = ctx.cloud.aws().await;
        if !exists(aws, id).await? {
            return Ok(());
        }
        sync_rules(
            aws,
            &rule_tags(ctx),
            id,
            Direction::Ingress,
            &atoms(&cfg.ingress, id)?,
            &BTreeSet::new(),
        )
        .await
    }
}
