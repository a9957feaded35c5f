//! `aws_efs_mount_target`: where an EFS file system is reachable in one subnet. Its id is
//! `<file system>/<mount target>`, so the existence check asks once per file system. A file
//! system has at most one mount target per zone, which makes a retried create safe: EFS
//! answers MountTargetConflict, and the one in that subnet is adopted. Security groups change
//! in place.

use super::available;
use crate::provider::aws::{Clients, child_id, delete_then_wait, error, live_children, parse, split, wait_for};
use crate::provider::{Cloud, Created, Ctx, Observed, ProviderError, Resource, timeout};
use crate::schema::attributes;
use aws_sdk_efs::types::MountTargetDescription;
use serde_json::{Value, json};
use std::time::Duration;

/// The `aws_efs_mount_target` kind.
pub(crate) struct EfsMountTarget;

attributes! {
    kind EfsMountTarget, spec "aws_efs_mount_target", outputs [id, ip_address, zone], extra [timeouts];
    struct Config {
        file_system_id: String [replace],
        subnet_id: String [replace],
        #[serde(default)] security_groups: Vec<String>,
    }
}

const CREATE_TIMEOUT: Duration = Duration::from_secs(10 * 60);
const DELETE_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// The file system's mount targets; `None` when the file system is gone.
async fn of_file_system(aws: &Clients, file_system: &str) -> Result<Option<Vec<MountTargetDescription>>, ProviderError> {
    let mut found = Vec::new();
    let mut pages = aws.efs.describe_mount_targets().file_system_id(file_system).into_paginator().send();
    while let Some(page) = pages.next().await {
        match page {
            Ok(page) => found.extend(page.mount_targets().iter().cloned()),
            Err(e) if crate::provider::aws::code(&e) == Some("FileSystemNotFound") => return Ok(None),
            Err(e) => return Err(error(aws, "DescribeMountTargets", e)),
        }
    }
    Ok(Some(found))
}

/// The mount target `id` (`<file system>/<mount target>`), if it still exists.
async fn describe(aws: &Clients, id: &str) -> Result<Option<MountTargetDescription>, ProviderError> {
    let (file_system, target) = split(id);
    Ok(of_file_system(aws, file_system)
        .await?
        .unwrap_or_default()
        .into_iter()
        .find(|m| m.mount_target_id() == target))
}

fn outputs(id: &str, m: &MountTargetDescription) -> Value {
    json!({ "id": id, "ip_address": m.ip_address(), "zone": m.availability_zone_name() })
}

impl Resource for EfsMountTarget {
    async fn create(&self, ctx: &Ctx, _token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let aws = ctx.cloud.aws().await;
        let made = aws
            .efs
            .create_mount_target()
            .file_system_id(&cfg.file_system_id)
            .subnet_id(&cfg.subnet_id)
            .set_security_groups(Some(cfg.security_groups.clone()))
            .send()
            .await;
        let target = match made {
            Ok(m) => m.mount_target_id().to_owned(),
            Err(e) if crate::provider::aws::code(&e) == Some("MountTargetConflict") => {
                let existing = of_file_system(aws, &cfg.file_system_id).await?.unwrap_or_default();
                match existing.iter().find(|m| m.subnet_id() == cfg.subnet_id) {
                    Some(m) => m.mount_target_id().to_owned(),
                    None => return Err(error(aws, "CreateMountTarget", e)),
                }
            }
            Err(e) => return Err(error(aws, "CreateMountTarget", e)),
        };
        let id = child_id(&cfg.file_system_id, &target);
        let limit = timeout(config, "create", CREATE_TIMEOUT);
        let live = wait_for(ctx, &format!("EFS mount target {id}"), limit, || describe(aws, &id), available).await?;
        Ok(Created {
            outputs: outputs(&id, &live),
            id,
        })
    }

    /// One DescribeMountTargets per file system the ids name.
    async fn read(&self, cloud: &Cloud, _stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        let aws = cloud.aws().await;
        live_children(ids, |file_system| async move {
            Ok(of_file_system(aws, &file_system)
                .await?
                .map(|targets| targets.iter().map(|m| m.mount_target_id().to_owned()).collect()))
        })
        .await
        .map(Observed::existing)
    }

    /// The mount target in the block's subnet: the file system is this stack's, and holds at
    /// most one per zone.
    async fn find(&self, ctx: &Ctx, _token: &str, config: &Value) -> Result<Option<String>, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let existing = of_file_system(ctx.cloud.aws().await, &cfg.file_system_id)
            .await?
            .unwrap_or_default();
        Ok(existing
            .iter()
            .find(|m| m.subnet_id() == cfg.subnet_id)
            .map(|m| child_id(&cfg.file_system_id, m.mount_target_id())))
    }

    async fn update(&self, ctx: &Ctx, id: &str, _old: &Value, new: &Value) -> Result<Value, ProviderError> {
        let cfg: Config = parse(ctx, new)?;
        let aws = ctx.cloud.aws().await;
        aws.efs
            .modify_mount_target_security_groups()
            .mount_target_id(split(id).1)
            .set_security_groups(Some(cfg.security_groups.clone()))
            .send()
            .await
            .map_err(|e| error(aws, "ModifyMountTargetSecurityGroups", e))?;
        let live = wait_for(
            ctx,
            &format!("EFS mount target {id}"),
            CREATE_TIMEOUT,
            || describe(aws, id),
            available,
        )
        .await?;
        Ok(outputs(id, &live))
    }

    async fn delete(&self, ctx: &Ctx, id: &str, config: &Value) -> Result<(), ProviderError> {
        let aws = ctx.cloud.aws().await;
        let live = || describe(aws, id);
        delete_then_wait(ctx, timeout(config, "delete", DELETE_TIMEOUT), live, || async {
            let deleted = aws.efs.delete_mount_target().mount_target_id(split(id).1).send().await;
            crate::provider::aws::tolerate(aws, "DeleteMountTarget", deleted, &["MountTargetNotFound"]).map(|()| true)
        })
        .await
    }
}
