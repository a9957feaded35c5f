//! `aws_fsx_data_repository_association`: links a path of an FSx for Lustre file system
//! (PERSISTENT_2) to an S3 prefix, with automatic import and export of new, changed and
//! deleted objects. The create passes the state intent's token as `ClientRequestToken` and
//! waits CREATING → AVAILABLE; the import and export policies change in place.

use super::{ASSOCIATION_NOT_FOUND, create_tags, owned, sync_tags};
use crate::provider::aws::{Clients, Poll, delete_then_wait, error, existing, found, parse, wait_for};
use crate::provider::{Cloud, Created, Ctx, Observed, ProviderError, Resource, timeout};
use crate::schema::attributes;
use aws_sdk_fsx::types::{
    AutoExportPolicy, AutoImportPolicy, DataRepositoryAssociation, DataRepositoryLifecycle, EventType, S3DataRepositoryConfiguration,
};
use serde_json::{Value, json};
use std::time::Duration;

/// The `aws_fsx_data_repository_association` kind.
pub(crate) struct FsxDataRepositoryAssociation;

attributes! {
    kind FsxDataRepositoryAssociation, spec "aws_fsx_data_repository_association", outputs [id, arn], extra [timeouts, tags];
    struct Config {
        file_system_id: String [replace],
        file_system_path: String [replace],
        data_repository_path: String [replace],
        #[serde(default)] batch_import_meta_data_on_create: bool [replace],
        imported_file_chunk_size: Option<i32>,
        #[serde(default)] auto_import_events: Vec<String>,
        #[serde(default)] auto_export_events: Vec<String>,
        #[serde(default)] delete_data_in_file_system: bool,
    }
}

impl Config {
    /// The S3 import and export policies.
    fn s3(&self) -> S3DataRepositoryConfiguration {
        let events = |names: &[String]| Some(names.iter().map(|e| EventType::from(e.as_str())).collect());
        S3DataRepositoryConfiguration::builder()
            .auto_import_policy(AutoImportPolicy::builder().set_events(events(&self.auto_import_events)).build())
            .auto_export_policy(AutoExportPolicy::builder().set_events(events(&self.auto_export_events)).build())
            .build()
    }
}

const CREATE_TIMEOUT: Duration = Duration::from_secs(60 * 60);
const UPDATE_TIMEOUT: Duration = Duration::from_secs(30 * 60);
const DELETE_TIMEOUT: Duration = Duration::from_secs(30 * 60);

async fn describe(aws: &Clients, id: &str) -> Result<Option<DataRepositoryAssociation>, ProviderError> {
    let answer = aws.fsx.describe_data_repository_associations().association_ids(id).send().await;
    Ok(
        found(aws, "DescribeDataRepositoryAssociations", answer, ASSOCIATION_NOT_FOUND)?
            .and_then(|out| out.associations().first().cloned()),
    )
}

/// Every association of the account and region, all pages.
async fn all(aws: &Clients) -> Result<Vec<DataRepositoryAssociation>, ProviderError> {
    Ok(all_pages!(
        aws,
        aws.fsx.describe_data_repository_associations(),
        associations,
        "DescribeDataRepositoryAssociations"
    ))
}

/// Whether the association is AVAILABLE, for [`wait_for`]: a failed or misconfigured one never
/// will be.
fn available(a: &DataRepositoryAssociation) -> Poll {
    match a.lifecycle() {
        Some(DataRepositoryLifecycle::Available) => Poll::Done(()),
        Some(l @ (DataRepositoryLifecycle::Failed | DataRepositoryLifecycle::Misconfigured)) => Poll::Failed(format!(
            "is {}: {}",
            l.as_str(),
            a.failure_details().and_then(|f| f.message()).unwrap_or("no reason given")
        )),
        l => Poll::Pending(l.map_or("CREATING", |l| l.as_str()).to_owned()),
    }
}

async fn wait_available(ctx: &Ctx, aws: &Clients, id: &str, limit: Duration) -> Result<DataRepositoryAssociation, ProviderError> {
    wait_for(
        ctx,
        &format!("data repository association {id}"),
        limit,
        || describe(aws, id),
        available,
    )
    .await
}

fn outputs(a: &DataRepositoryAssociation) -> Value {
    json!({ "id": a.association_id(), "arn": a.resource_arn() })
}

impl Resource for FsxDataRepositoryAssociation {
    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let aws = ctx.cloud.aws().await;
        let out = aws
            .fsx
            .create_data_repository_association()
            .client_request_token(token)
            .file_system_id(&cfg.file_system_id)
            .file_system_path(&cfg.file_system_path)
            .data_repository_path(&cfg.data_repository_path)
            .batch_import_meta_data_on_create(cfg.batch_import_meta_data_on_create)
            .set_imported_file_chunk_size(cfg.imported_file_chunk_size)
            .s3(cfg.s3())
            .set_tags(Some(create_tags(ctx, token, config)))
            .send()
            .await
            .map_err(|e| error(aws, "CreateDataRepositoryAssociation", e))?;
        let id = out.association().and_then(|a| a.association_id()).unwrap_or_default().to_owned();
        let association = wait_available(ctx, aws, &id, timeout(config, "create", CREATE_TIMEOUT)).await?;
        Ok(Created {
            outputs: outputs(&association),
            id,
        })
    }

    async fn read(&self, cloud: &Cloud, _stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        let found = all(cloud.aws().await).await?;
        Ok(existing(ids, found.iter().filter_map(|a| a.association_id())))
    }

    async fn find(&self, ctx: &Ctx, token: &str, _config: &Value) -> Result<Option<String>, ProviderError> {
        let found = all(ctx.cloud.aws().await).await?;
        Ok(found
            .iter()
            .find(|a| owned(ctx, token, a.tags()))
            .and_then(|a| a.association_id().map(str::to_owned)))
    }

    async fn update(&self, ctx: &Ctx, id: &str, old: &Value, new: &Value) -> Result<Value, ProviderError> {
        let cfg: Config = parse(ctx, new)?;
        let aws = ctx.cloud.aws().await;
        let limit = timeout(new, "update", UPDATE_TIMEOUT);
        let mut live = wait_available(ctx, aws, id, limit).await?;
        if live.s3() != Some(&cfg.s3())
            || (cfg.imported_file_chunk_size.is_some() && live.imported_file_chunk_size() != cfg.imported_file_chunk_size)
        {
            aws.fsx
                .update_data_repository_association()
                .association_id(id)
                .set_imported_file_chunk_size(cfg.imported_file_chunk_size)
                .s3(cfg.s3())
                .send()
                .await
                .map_err(|e| error(aws, "UpdateDataRepositoryAssociation", e))?;
            live = wait_available(ctx, aws, id, limit).await?;
        }
        sync_tags(ctx, aws, live.resource_arn().unwrap_or_default(), old, new).await?;
        Ok(outputs(&live))
    }

    /// Keeps the files already imported unless `delete_data_in_file_system = true`.
    async fn delete(&self, ctx: &Ctx, id: &str, config: &Value) -> Result<(), ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let aws = ctx.cloud.aws().await;
        let live = || describe(aws, id);
        delete_then_wait(ctx, timeout(config, "delete", DELETE_TIMEOUT), live, || async {
            let deleted = aws
                .fsx
                .delete_data_repository_association()
                .association_id(id)
                .delete_data_in_file_system(cfg.delete_data_in_file_system)
                .send()
                .await;
            crate::provider::aws::tolerate(aws, "DeleteDataRepositoryAssociation", deleted, &[ASSOCIATION_NOT_FOUND]).map(|()| true)
        })
        .await
    }
}
