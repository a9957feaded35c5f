//! `aws_fsx_lustre`: an FSx for Lustre file system. The create passes the state intent's token
//! as `ClientRequestToken`, so a retried or resumed create gets the file system its first try
//! made, and waits CREATING → AVAILABLE (an hour by default: creation takes up to ~20 minutes,
//! much longer with a large S3 import). Capacity grows and throughput and compression change
//! in place; a shrink, another deployment type, subnet or security groups need a new file
//! system, which deletes the data on it.

use super::{FILE_SYSTEM_NOT_FOUND, create_tags, owned, sync_tags};
use crate::provider::aws::{Clients, Poll, delete_then_wait, error, found, parse, wait_deleted, wait_for};
use crate::provider::{Cloud, Created, Ctx, Inspected, Observed, ProviderError, Resource, timeout};
use crate::schema::attributes;
use aws_sdk_fsx::types::{
    AdministrativeActionType, CreateFileSystemLustreConfiguration, DataCompressionType, DeleteFileSystemLustreConfiguration, FileSystem,
    FileSystemLifecycle, FileSystemType, LustreDeploymentType, Status, UpdateFileSystemLustreConfiguration,
};
use serde_json::{Value, json};
use std::time::Duration;

/// The `aws_fsx_lustre` kind.
pub(crate) struct FsxLustre;

attributes! {
    kind FsxLustre, spec "aws_fsx_lustre", outputs [id, arn, dns_name, mount_name, vpc_id], extra [timeouts, tags];
    struct Config {
        storage_capacity: i32,
        #[serde(default = "default_deployment")] deployment_type: String [replace],
        per_unit_storage_throughput: Option<i32>,
        #[serde(default = "lz4")] data_compression_type: String,
        subnet_id: String [replace],
        #[serde(default)] security_group_ids: Vec<String> [replace],
        file_system_type_version: Option<String> [replace],
        #[serde(default)] final_backup: bool,
    }
}

impl Config {
    fn deployment_type(&self) -> LustreDeploymentType {
        LustreDeploymentType::from(self.deployment_type.as_str())
    }

    fn compression(&self) -> DataCompressionType {
        DataCompressionType::from(self.data_compression_type.as_str())
    }

    fn persistent(&self) -> bool {
        self.deployment_type().as_str().starts_with("PERSISTENT")
    }
}

/// The deployment type when the block names none.
pub const DEFAULT_DEPLOYMENT: &str = "PERSISTENT_2";

fn default_deployment() -> String {
    DEFAULT_DEPLOYMENT.into()
}

/// Compression when the block names none: LZ4, as AWS recommends for Lustre.
fn lz4() -> String {
    "LZ4".into()
}

const CREATE_TIMEOUT: Duration = Duration::from_secs(60 * 60);
const UPDATE_TIMEOUT: Duration = Duration::from_secs(60 * 60);
const DELETE_TIMEOUT: Duration = Duration::from_secs(30 * 60);

async fn describe(aws: &Clients, id: &str) -> Result<Option<FileSystem>, ProviderError> {
    let answer = aws.fsx.describe_file_systems().file_system_ids(id).send().await;
    Ok(found(aws, "DescribeFileSystems", answer, FILE_SYSTEM_NOT_FOUND)?.and_then(|out| out.file_systems().first().cloned()))
}

/// Every file system of the account and region, all pages.
async fn all(aws: &Clients) -> Result<Vec<FileSystem>, ProviderError> {
    Ok(all_pages!(
        aws,
        aws.fsx.describe_file_systems(),
        file_systems,
        "DescribeFileSystems"
    ))
}

/// Why a file system failed, in FSx's words.
fn failure(fs: &FileSystem) -> String {
    let id = fs.file_system_id().unwrap_or_default();
    let state = fs.lifecycle().map_or("FAILED", |l| l.as_str());
    match fs.failure_details().and_then(|f| f.message()) {
        Some(reason) => format!("FSx file system {id} is {state}: {reason}"),
        None => format!("FSx file system {id} is {state}"),
    }
}

/// The newest in-place update FSx reports for the file system, if any.
fn last_update(fs: &FileSystem) -> Option<&aws_sdk_fsx::types::AdministrativeAction> {
    fs.administrative_actions()
        .iter()
        .filter(|a| a.administrative_action_type() == Some(&AdministrativeActionType::FileSystemUpdate))
        .max_by_key(|a| a.request_time().map(|t| (t.secs(), t.subsec_nanos())))
}

/// Whether FSx gave up on the file system (FAILED, MISCONFIGURED): it cannot be repaired.
fn broken(fs: &FileSystem) -> bool {
    matches!(
        fs.lifecycle(),
        Some(FileSystemLifecycle::Failed | FileSystemLifecycle::Misconfigured)
    )
}

/// Whether the file system has settled, for [`wait_for`]: AVAILABLE with no in-place update
/// running, or [`broken`].
fn settled(fs: &FileSystem) -> Poll {
    if broken(fs) {
        return Poll::Done(());
    }
    let updating = last_update(fs)
        .and_then(|a| a.status())
        .filter(|s| matches!(s, Status::Pending | Status::InProgress))
        .map(|s| format!("update {}", s.as_str()));
    match (fs.lifecycle(), updating) {
        (Some(FileSystemLifecycle::Available), None) => Poll::Done(()),
        (Some(FileSystemLifecycle::Available), Some(update)) => Poll::Pending(update),
        (lifecycle, _) => Poll::Pending(lifecycle.map_or("CREATING", |l| l.as_str()).to_owned()),
    }
}

/// Waits until the file system settles ([`settled`]) and returns it as it is then.
async fn wait_settled(ctx: &Ctx, aws: &Clients, id: &str, limit: Duration) -> Result<FileSystem, ProviderError> {
    wait_for(ctx, &format!("FSx file system {id}"), limit, || describe(aws, id), settled).await
}

/// [`wait_settled`], with a broken file system as an error that gives FSx's reason.
async fn wait_usable(ctx: &Ctx, aws: &Clients, id: &str, limit: Duration) -> Result<FileSystem, ProviderError> {
    let fs = wait_settled(ctx, aws, id, limit).await?;
    if broken(&fs) {
        return Err(ProviderError::permanent(failure(&fs)));
    }
    Ok(fs)
}

/// Sends CreateFileSystem with `request_token`; FSx answers a repeated token with the file
/// system the first call made.
async fn send_create(
    ctx: &Ctx,
    aws: &Clients,
    token: &str,
    request_token: &str,
    cfg: &Config,
    config: &Value,
) -> Result<FileSystem, ProviderError> {
    let lustre = CreateFileSystemLustreConfiguration::builder()
        .deployment_type(cfg.deployment_type())
        .set_per_unit_storage_throughput(cfg.per_unit_storage_throughput)
        .data_compression_type(cfg.compression())
        .build();
    let out = aws
        .fsx
        .create_file_system()
        .client_request_token(request_token)
        .file_system_type(FileSystemType::Lustre)
        .storage_capacity(cfg.storage_capacity)
        .subnet_ids(&cfg.subnet_id)
        .set_security_group_ids(Some(cfg.security_group_ids.clone()))
        .set_file_system_type_version(cfg.file_system_type_version.clone())
        .lustre_configuration(lustre)
        .set_tags(Some(create_tags(ctx, token, config)))
        .send()
        .await
        .map_err(|e| error(aws, "CreateFileSystem", e))?;
    out.file_system()
        .cloned()
        .ok_or_else(|| ProviderError::transient("CreateFileSystem answered without a file system"))
}

/// Starts deleting a file system (a persistent one without a final backup unless asked).
async fn start_delete(aws: &Clients, id: &str, persistent: bool, final_backup: bool) -> Result<(), ProviderError> {
    let lustre = persistent.then(|| {
        DeleteFileSystemLustreConfiguration::builder()
            .skip_final_backup(!final_backup)
            .build()
    });
    crate::provider::aws::tolerate(
        aws,
        "DeleteFileSystem",
        aws.fsx
            .delete_file_system()
            .file_system_id(id)
            .set_lustre_configuration(lustre)
            .send()
            .await,
        &[FILE_SYSTEM_NOT_FOUND],
    )
}

/// What a read compares, with the file system's `tags` as a table.
fn read_attributes(fs: &FileSystem, tags: Value) -> Value {
    let lustre = fs.lustre_configuration();
    json!({
        "storage_capacity": fs.storage_capacity(),
        "deployment_type": lustre.and_then(|l| l.deployment_type()).map(LustreDeploymentType::as_str),
        "per_unit_storage_throughput": lustre.and_then(aws_sdk_fsx::types::LustreFileSystemConfiguration::per_unit_storage_throughput),
        "data_compression_type": lustre.and_then(|l| l.data_compression_type()).map(DataCompressionType::as_str),
        "subnet_id": fs.subnet_ids().first(),
        "tags": tags,
    })
}

fn outputs(fs: &FileSystem) -> Value {
    json!({
        "id": fs.file_system_id(),
        "arn": fs.resource_arn(),
        "dns_name": fs.dns_name(),
        "mount_name": fs.lustre_configuration().and_then(|l| l.mount_name()),
        "vpc_id": fs.vpc_id(),
    })
}

/// One UpdateFileSystem with `lustre` settings or a new capacity, then the wait for it.
async fn update_once(
    ctx: &Ctx,
    aws: &Clients,
    id: &str,
    capacity: Option<i32>,
    lustre: Option<UpdateFileSystemLustreConfiguration>,
    limit: Duration,
) -> Result<FileSystem, ProviderError> {
    aws.fsx
        .update_file_system()
        .file_system_id(id)
        .set_storage_capacity(capacity)
        .set_lustre_configuration(lustre)
        .send()
        .await
        .map_err(|e| error(aws, "UpdateFileSystem", e))?;
    let fs = wait_usable(ctx, aws, id, limit).await?;
    if let Some(action) = last_update(&fs).filter(|a| a.status() == Some(&Status::Failed)) {
        return Err(ProviderError::permanent(format!(
            "FSx could not update file system {id}: {}",
            action.failure_details().and_then(|f| f.message()).unwrap_or("no reason given")
        )));
    }
    Ok(fs)
}

impl Resource for FsxLustre {
    /// Its storage by the GB-month at its deployment type and throughput tier (a scratch file
    /// system's is 200 MB/s/TiB), as an hourly share of the month.
    fn meter(&self, sight: &crate::cost::Sight) -> Option<crate::cost::Meter> {
        use crate::cost::{Count, HOURS_PER_MONTH, Meter, Rate};
        Some(sight.in_aws_region(|region| {
            let deployment = sight.text("deployment_type").map_or_else(default_deployment, str::to_owned);
            let throughput = sight
                .number("per_unit_storage_throughput")
                .or((deployment == "SCRATCH_2").then_some(200));
            if deployment == "SCRATCH_1" {
                return Meter::Unpriced {
                    reason: "forge does not price SCRATCH_1 file systems".into(),
                };
            }
            let (Some(gb), Some(throughput)) = (sight.number("storage_capacity"), throughput) else {
                return Meter::Unpriced {
                    reason: "its capacity or throughput is known only after apply".into(),
                };
            };
            Meter::Hourly {
                what: format!("{gb} GB {deployment} at {throughput} MB/s/TiB"),
                parts: vec![(
                    Rate::FsxLustre {
                        region,
                        deployment,
                        throughput,
                    },
                    gb as f64 / HOURS_PER_MONTH,
                )],
                count: Count::ONE,
                upper_bound: None,
            }
        }))
    }
    /// Capacity only grows in place: a smaller one needs a new file system.
    fn forces_replacement(&self, attribute: &str, before: Option<&Value>, after: Option<&Value>) -> bool {
        match attribute {
            "storage_capacity" => matches!((before.and_then(Value::as_i64), after.and_then(Value::as_i64)), (Some(b), Some(a)) if a < b),
            _ => SPEC.replaces(attribute),
        }
    }

    fn holds_data(&self) -> bool {
        true
    }

    /// A file system that ends FAILED is deleted again (it cannot be repaired) and the error
    /// says why; the next run makes a new one. A repeated token that brings back such a file
    /// system waits for it to go and creates with a token derived from it.
    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let aws = ctx.cloud.aws().await;
        let mut fs = send_create(ctx, aws, token, token, &cfg, config).await?;
        if broken(&fs) || fs.lifecycle() == Some(&FileSystemLifecycle::Deleting) {
            let old = fs.file_system_id().unwrap_or_default().to_owned();
            start_delete(aws, &old, cfg.persistent(), false).await?;
            wait_deleted(ctx, DELETE_TIMEOUT, || describe(aws, &old)).await?;
            fs = send_create(ctx, aws, token, &format!("{token}-{old}"), &cfg, config).await?;
        }
        let id = fs.file_system_id().unwrap_or_default().to_owned();
        let fs = wait_settled(ctx, aws, &id, timeout(config, "create", CREATE_TIMEOUT)).await?;
        if broken(&fs) {
            start_delete(aws, &id, cfg.persistent(), false).await?;
            return Err(ProviderError::permanent(format!(
                "{}; forge is deleting the failed file system: fix the cause (for port 988, the security group's rules) and run `forge up` again",
                failure(&fs)
            )));
        }
        Ok(Created { id, outputs: outputs(&fs) })
    }

    /// One DescribeFileSystems (all pages) for the recorded file systems and those tagged with
    /// the stack (asking by id fails the whole call when one is gone).
    async fn read(&self, cloud: &Cloud, stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        let found = all(cloud.aws().await).await?;
        Ok(found
            .iter()
            .filter(|fs| fs.file_system_type() == Some(&aws_sdk_fsx::types::FileSystemType::Lustre))
            .filter_map(|fs| {
                let tags = crate::provider::aws::tag_table(fs.tags().iter().map(|t| (t.key(), t.value())));
                crate::provider::aws::listed(stack, ids, fs.file_system_id()?.to_owned(), tags, |tags| read_attributes(fs, tags))
            })
            .collect())
    }

    fn importable(&self) -> bool {
        true
    }

    /// The Lustre file system `id` (another type of file system is not one), with the
    /// security groups of its network interfaces (one DescribeNetworkInterfaces).
    async fn inspect(&self, cloud: &Cloud, id: &str) -> Result<Option<Inspected>, ProviderError> {
        let aws = cloud.aws().await;
        let Some(fs) = describe(aws, id)
            .await?
            .filter(|fs| fs.file_system_type() == Some(&FileSystemType::Lustre))
        else {
            return Ok(None);
        };
        let tags = crate::provider::aws::tag_table(fs.tags().iter().map(|t| (t.key(), t.value())));
        let mut attributes = read_attributes(&fs, tags);
        if !fs.network_interface_ids().is_empty() {
            let interfaces = aws
                .ec2
                .describe_network_interfaces()
                .set_network_interface_ids(Some(fs.network_interface_ids().to_vec()))
                .send()
                .await
                .map_err(|e| error(aws, "DescribeNetworkInterfaces", e))?;
            let groups: std::collections::BTreeSet<&str> = interfaces
                .network_interfaces()
                .iter()
                .flat_map(aws_sdk_ec2::types::NetworkInterface::groups)
                .filter_map(aws_sdk_ec2::types::GroupIdentifier::group_id)
                .collect();
            attributes["security_group_ids"] = json!(groups);
        }
        attributes["file_system_type_version"] = json!(fs.file_system_type_version());
        Ok(Some(Inspected {
            outputs: outputs(&fs),
            attributes,
            mark: super::mark_of(fs.tags()),
        }))
    }

    async fn mark(&self, ctx: &Ctx, id: &str, token: &str) -> Result<(), ProviderError> {
        let aws = ctx.cloud.aws().await;
        let fs = describe(aws, id).await?;
        let arn = crate::provider::aws::still_there(&format!("the file system `{id}`"), fs.as_ref().and_then(FileSystem::resource_arn))?;
        super::mark(ctx, aws, arn, token).await
    }

    async fn find(&self, ctx: &Ctx, token: &str, _config: &Value) -> Result<Option<String>, ProviderError> {
        let found = all(ctx.cloud.aws().await).await?;
        Ok(found
            .iter()
            .find(|fs| owned(ctx, token, fs.tags()) && fs.lifecycle() != Some(&FileSystemLifecycle::Deleting))
            .and_then(|fs| fs.file_system_id().map(str::to_owned)))
    }

    /// Compares with the live file system, one update at a time (FSx runs one): capacity,
    /// then throughput, then compression.
    async fn update(&self, ctx: &Ctx, id: &str, old: &Value, new: &Value) -> Result<Value, ProviderError> {
        let cfg: Config = parse(ctx, new)?;
        let aws = ctx.cloud.aws().await;
        let limit = timeout(new, "update", UPDATE_TIMEOUT);
        let mut live = wait_usable(ctx, aws, id, limit).await?;
        if live.storage_capacity().is_some_and(|c| c < cfg.storage_capacity) {
            live = update_once(ctx, aws, id, Some(cfg.storage_capacity), None, limit).await?;
        }
        let lustre = live.lustre_configuration();
        if let Some(throughput) = cfg
            .per_unit_storage_throughput
            .filter(|t| lustre.and_then(aws_sdk_fsx::types::LustreFileSystemConfiguration::per_unit_storage_throughput) != Some(*t))
        {
            let change = UpdateFileSystemLustreConfiguration::builder()
                .per_unit_storage_throughput(throughput)
                .build();
            live = update_once(ctx, aws, id, None, Some(change), limit).await?;
        }
        if live.lustre_configuration().and_then(|l| l.data_compression_type()) != Some(&cfg.compression()) {
            let change = UpdateFileSystemLustreConfiguration::builder()
                .data_compression_type(cfg.compression())
                .build();
            live = update_once(ctx, aws, id, None, Some(change), limit).await?;
        }
        sync_tags(ctx, aws, live.resource_arn().unwrap_or_default(), old, new).await?;
        Ok(outputs(&live))
    }

    /// Skips the final backup of a persistent file system unless `final_backup = true`.
    async fn delete(&self, ctx: &Ctx, id: &str, config: &Value) -> Result<(), ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let aws = ctx.cloud.aws().await;
        let live = || describe(aws, id);
        delete_then_wait(ctx, timeout(config, "delete", DELETE_TIMEOUT), live, || async {
            start_delete(aws, id, cfg.persistent(), cfg.final_backup).await.map(|()| true)
        })
        .await
    }
}
