//! `aws_efs_file_system`: an EFS file system (home directories, shared code). The create
//! passes the state intent's token as `CreationToken`, so a retried or resumed create gets the
//! file system its first try made; it waits creating → available. The throughput mode changes
//! in place; the performance mode and encryption need a new file system, which deletes the data.

use super::available;
use crate::provider::aws::{Clients, create_tags, delete_then_wait, deleted, error, found, parse, wait_for};
use crate::provider::{Cloud, Created, Ctx, Inspected, Observed, ProviderError, Resource, timeout};
use crate::schema::attributes;
use aws_sdk_efs::operation::create_file_system::CreateFileSystemError;
use aws_sdk_efs::types::{FileSystemDescription, PerformanceMode, Tag, ThroughputMode};
use serde_json::{Value, json};
use std::time::Duration;

/// The `aws_efs_file_system` kind.
pub(crate) struct EfsFileSystem;

attributes! {
    kind EfsFileSystem, spec "aws_efs_file_system", outputs [id, arn, dns_name], extra [timeouts, tags];
    struct Config {
        #[serde(default = "general_purpose")] performance_mode: String [replace],
        #[serde(default = "elastic")] throughput_mode: String,
        encrypted: Option<bool> [replace],
        kms_key_id: Option<String> [replace],
    }
}

fn general_purpose() -> String {
    "generalPurpose".into()
}

/// Throughput that scales with the load, EFS's recommended mode.
fn elastic() -> String {
    "elastic".into()
}

impl Config {
    fn throughput_mode(&self) -> ThroughputMode {
        ThroughputMode::from(self.throughput_mode.as_str())
    }
}

const CREATE_TIMEOUT: Duration = Duration::from_secs(10 * 60);
const DELETE_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// EFS's error code for a file system that does not exist.
const NOT_FOUND: &str = "FileSystemNotFound";

async fn describe(aws: &Clients, id: &str) -> Result<Option<FileSystemDescription>, ProviderError> {
    let answer = aws.efs.describe_file_systems().file_system_id(id).send().await;
    Ok(found(aws, "DescribeFileSystems", answer, NOT_FOUND)?.and_then(|out| out.file_systems().first().cloned()))
}

/// The file system's DNS name, `fs-….efs.<region>.amazonaws.com`, with the region from its ARN.
fn outputs(fs: &FileSystemDescription) -> Value {
    let id = fs.file_system_id();
    let region = fs.file_system_arn().and_then(|arn| arn.split(':').nth(3)).unwrap_or_default();
    json!({
        "id": id,
        "arn": fs.file_system_arn(),
        "dns_name": format!("{id}.efs.{region}.amazonaws.com"),
    })
}

/// The file system's tags as a table.
fn tag_table(fs: &FileSystemDescription) -> Value {
    crate::provider::aws::tag_table(fs.tags().iter().map(|t| (Some(t.key()), Some(t.value()))))
}

/// What a read compares, with the file system's `tags` as a table.
fn read_attributes(fs: &FileSystemDescription, tags: Value) -> Value {
    json!({
        "performance_mode": fs.performance_mode().as_str(),
        "throughput_mode": fs.throughput_mode().map(ThroughputMode::as_str),
        "tags": tags,
    })
}

impl Resource for EfsFileSystem {
    /// Billed by the data it holds, which a plan cannot know: its rate is shown, not counted.
    fn meter(&self, sight: &crate::cost::Sight) -> Option<crate::cost::Meter> {
        Some(sight.in_aws_region(|region| crate::cost::Meter::ByUse {
            what: "data stored".into(),
            rate: crate::cost::Rate::EfsStorage { region },
        }))
    }
    fn holds_data(&self) -> bool {
        true
    }

    /// EFS answers a repeated creation token with FileSystemAlreadyExists and the id of the
    /// file system that token made: that one is adopted.
    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let aws = ctx.cloud.aws().await;
        let tags = create_tags(ctx, token, config)
            .into_iter()
            .filter_map(|(k, v)| Tag::builder().key(k).value(v).build().ok());
        let made = aws
            .efs
            .create_file_system()
            .creation_token(token)
            .performance_mode(PerformanceMode::from(cfg.performance_mode.as_str()))
            .throughput_mode(cfg.throughput_mode())
            .encrypted(cfg.encrypted.unwrap_or(true))
            .set_kms_key_id(cfg.kms_key_id.clone())
            .set_tags(Some(tags.collect()))
            .send()
            .await;
        let id = match made {
            Ok(fs) => fs.file_system_id().to_owned(),
            Err(e) => match e.as_service_error() {
                Some(CreateFileSystemError::FileSystemAlreadyExists(taken)) => taken.file_system_id().to_owned(),
                _ => return Err(error(aws, "CreateFileSystem", e)),
            },
        };
        let limit = timeout(config, "create", CREATE_TIMEOUT);
        let fs = wait_for(ctx, &format!("EFS file system {id}"), limit, || describe(aws, &id), available).await?;
        Ok(Created { outputs: outputs(&fs), id })
    }

    /// One DescribeFileSystems (all pages) for the recorded file systems and those tagged with
    /// the stack.
    async fn read(&self, cloud: &Cloud, stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        let aws = cloud.aws().await;
        let found = all_pages!(aws, aws.efs.describe_file_systems(), file_systems, "DescribeFileSystems");
        Ok(found
            .iter()
            .filter_map(|fs| {
                crate::provider::aws::listed(stack, ids, fs.file_system_id().to_owned(), tag_table(fs), |tags| {
                    read_attributes(fs, tags)
                })
            })
            .collect())
    }

    fn importable(&self) -> bool {
        true
    }

    /// The file system `id` with its encryption, as a block writes them.
    async fn inspect(&self, cloud: &Cloud, id: &str) -> Result<Option<Inspected>, ProviderError> {
        Ok(describe(cloud.aws().await, id).await?.map(|fs| {
            let mut attributes = read_attributes(&fs, tag_table(&fs));
            attributes["encrypted"] = json!(fs.encrypted());
            attributes["kms_key_id"] = json!(fs.kms_key_id());
            Inspected {
                outputs: outputs(&fs),
                attributes,
                mark: crate::provider::aws::mark_in(|k| fs.tags().iter().find(|t| t.key() == k).map(Tag::value)),
            }
        }))
    }

    /// One TagResource of forge's mark ([`crate::provider::aws::mark_tags`]).
    async fn mark(&self, ctx: &Ctx, id: &str, token: &str) -> Result<(), ProviderError> {
        let aws = ctx.cloud.aws().await;
        let tags = crate::provider::aws::mark_tags(ctx, token).map(|(k, v)| Tag::builder().key(k).value(v).build());
        aws.efs
            .tag_resource()
            .resource_id(id)
            .set_tags(Some(
                tags.into_iter()
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| ProviderError::permanent(e.to_string()))?,
            ))
            .send()
            .await
            .map_err(|e| error(aws, "TagResource", e))?;
        Ok(())
    }

    /// The file system made with this creation token, if any.
    async fn find(&self, ctx: &Ctx, token: &str, _config: &Value) -> Result<Option<String>, ProviderError> {
        let aws = ctx.cloud.aws().await;
        let out = aws
            .efs
            .describe_file_systems()
            .creation_token(token)
            .send()
            .await
            .map_err(|e| error(aws, "DescribeFileSystems", e))?;
        Ok(out.file_systems().first().map(|fs| fs.file_system_id().to_owned()))
    }

    async fn update(&self, ctx: &Ctx, id: &str, old: &Value, new: &Value) -> Result<Value, ProviderError> {
        let cfg: Config = parse(ctx, new)?;
        let aws = ctx.cloud.aws().await;
        let what = format!("EFS file system {id}");
        let mut live = wait_for(ctx, &what, CREATE_TIMEOUT, || describe(aws, id), available).await?;
        if live.throughput_mode() != Some(&cfg.throughput_mode()) {
            aws.efs
                .update_file_system()
                .file_system_id(id)
                .throughput_mode(cfg.throughput_mode())
                .send()
                .await
                .map_err(|e| error(aws, "UpdateFileSystem", e))?;
            live = wait_for(ctx, &what, CREATE_TIMEOUT, || describe(aws, id), available).await?;
        }
        let (removed, changed) = crate::provider::aws::tag_changes(ctx, old, new);
        let set = (!changed.is_empty()).then(|| {
            changed
                .into_iter()
                .filter_map(|(k, v)| Tag::builder().key(k).value(v).build().ok())
                .collect::<Vec<_>>()
        });
        retag!(aws, efs, untag_resource, tag_resource, resource_id(id), removed, set);
        Ok(outputs(&live))
    }

    /// EFS refuses while mount targets remain (they go first in the graph, but take a while to
    /// disappear): that answer is retried.
    async fn delete(&self, ctx: &Ctx, id: &str, config: &Value) -> Result<(), ProviderError> {
        let aws = ctx.cloud.aws().await;
        let live = || describe(aws, id);
        delete_then_wait(ctx, timeout(config, "delete", DELETE_TIMEOUT), live, || async {
            let answer = aws.efs.delete_file_system().file_system_id(id).send().await;
            deleted(aws, "DeleteFileSystem", NOT_FOUND, "FileSystemInUse", answer)
        })
        .await
    }
}
