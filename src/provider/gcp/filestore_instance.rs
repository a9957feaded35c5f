//! `google_filestore_instance`: a Filestore NFS server with one file share, on a VPC network.
//! The tier decides where it lives (BASIC_HDD, BASIC_SSD and ZONAL in a zone; REGIONAL and
//! ENTERPRISE in a region). Capacity grows in place; a shrink, like any replacement, deletes
//! the data, so the plan marks it and `forge up` refuses it without `--allow-data-loss`.
//! Description, labels and deletion protection change in place, in one patch.

use super::marker::{made_by, mark_of, marked_description, observed, remarked_description, split_description};
use super::operation::wait_done;
use super::resumable::{self, Tracked};
use super::{Clients, error_in};
use crate::provider::{Cloud, Created, Ctx, Inspected, Observed, ProviderError, Resource, parse, timeout};
use crate::schema::attributes;
use google_cloud_filestore_v1::model::{FileShareConfig, Instance, NetworkConfig, instance, network_config};
use google_cloud_longrunning::model::Operation;
use google_cloud_longrunning::model::operation::Result as Outcome;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

/// The `google_filestore_instance` kind.
pub(super) struct FilestoreInstance;

attributes! {
    kind FilestoreInstance, spec "google_filestore_instance", outputs [id, name = attribute, ip_address, share = computed planned_share, capacity_gib = attribute], extra [timeouts];
    struct Config {
        name: String [replace],
        location: String [replace],
        tier: String [replace],
        description: Option<String>,
        #[serde(default = "default_share")] share_name: String [replace],
        capacity_gib: i64,
        network: String [replace],
        connect_mode: Option<String> [replace],
        reserved_ip_range: Option<String> [replace],
        #[serde(default)] labels: BTreeMap<String, String>,
        #[serde(default)] deletion_protection: bool,
    }
}

/// The planned `share`: the block's `share_name`, else the default.
fn planned_share(config: &Value, _: Option<&Value>) -> Value {
    config.get("share_name").cloned().unwrap_or_else(|| json!(default_share()))
}

fn default_share() -> String {
    "share".into()
}

/// Filestore takes a few minutes to make or change an instance, up to half an hour.
const OPERATION_TIMEOUT: Duration = Duration::from_secs(30 * 60);

fn error(gcp: &Clients, what: &str, err: google_cloud_compute_v1::Error) -> ProviderError {
    error_in(&gcp.filestore_context, what, err)
}

/// Waits until the long-running operation `op` is done (at most `limit`) and fails with its
/// error, if it has one.
async fn wait_operation(ctx: &Ctx, gcp: &Clients, what: &str, op: Operation, limit: Duration) -> Result<(), ProviderError> {
    let name = op.name.clone();
    let done = wait_done(
        ctx,
        limit,
        op,
        |op| op.done,
        |_| "RUNNING".into(),
        || async {
            let sent = gcp.filestore.get_operation().set_name(&name).send().await;
            sent.map_err(|e| error(gcp, "operations.get", e))
        },
    )
    .await?;
    match done.result {
        Some(Outcome::Error(status)) => Err(ProviderError::permanent(format!(
            "{what}: the operation failed: {} ({})",
            status.message, gcp.filestore_context
        ))),
        _ => Ok(()),
    }
}

/// The project's Filestore instances.
struct Instances;

impl Tracked for Instances {
    type Object = Instance;
    type Operation = Operation;
    const WHAT: &'static str = "Filestore instance";
    const PATH: &'static str = "instances";
    const MAKING: &'static str = "CREATING";
    const GOING: &'static str = "DELETING";

    fn error(gcp: &Clients, what: &str, err: google_cloud_compute_v1::Error) -> ProviderError {
        error(gcp, what, err)
    }

    async fn get(gcp: &Clients, id: &str) -> Result<Instance, google_cloud_compute_v1::Error> {
        gcp.filestore.get_instance().set_name(id).send().await
    }

    async fn delete(gcp: &Clients, id: &str) -> Result<Operation, google_cloud_compute_v1::Error> {
        gcp.filestore.delete_instance().set_name(id).send().await
    }

    async fn wait(ctx: &Ctx, gcp: &Clients, what: &str, op: Operation, limit: Duration) -> Result<(), ProviderError> {
        wait_operation(ctx, gcp, what, op, limit).await
    }

    fn state(i: &Instance) -> Option<&str> {
        i.state.name()
    }

    fn ready(i: &Instance) -> bool {
        i.state == instance::State::Ready
    }

    fn broken(i: &Instance) -> bool {
        i.state == instance::State::Error
    }

    fn failure(gcp: &Clients, id: &str, i: &Instance) -> String {
        format!(
            "Filestore instance `{id}` is in ERROR: {} ({})",
            i.status_message, gcp.filestore_context
        )
    }
}

fn outputs(id: &str, i: &Instance) -> Value {
    let share = i.file_shares.first();
    json!({
        "id": id,
        "name": id.rsplit('/').next(),
        "ip_address": i.networks.first().and_then(|n| n.ip_addresses.first()),
        "share": share.map(|s| s.name.clone()),
        "capacity_gib": share.map(|s| s.capacity_gb),
    })
}

/// The instance as a create sends it.
fn body(ctx: &Ctx, token: &str, cfg: &Config) -> Instance {
    let mut network = NetworkConfig::new()
        .set_network(super::collection::last_segment(&cfg.network))
        .set_modes([network_config::AddressMode::ModeIpv4]);
    if let Some(mode) = &cfg.connect_mode {
        network = network.set_connect_mode(network_config::ConnectMode::from(mode.as_str()));
    }
    if let Some(range) = &cfg.reserved_ip_range {
        network = network.set_reserved_ip_range(range);
    }
    Instance::new()
        .set_description(marked_description(ctx, token, cfg.description.as_deref()))
        .set_tier(instance::Tier::from(cfg.tier.as_str()))
        .set_file_shares([FileShareConfig::new().set_name(&cfg.share_name).set_capacity_gb(cfg.capacity_gib)])
        .set_networks([network])
        .set_labels(cfg.labels.clone())
        .set_deletion_protection_enabled(cfg.deletion_protection)
}

/// What the kind compares of a live instance, in its block's terms.
fn attributes(i: &Instance, own: &str) -> Value {
    let share = i.file_shares.first();
    let network = i.networks.first();
    json!({
        "name": i.name.rsplit('/').next(),
        "tier": i.tier.name(),
        "description": own,
        "share_name": share.map(|s| s.name.clone()),
        "capacity_gib": share.map(|s| s.capacity_gb),
        "network": network.map(|n| super::collection::last_segment(&n.network).to_owned()),
        "labels": i.labels,
        "deletion_protection": i.deletion_protection_enabled,
    })
}

fn instance_id(gcp: &Clients, cfg: &Config) -> String {
    format!("projects/{}/locations/{}/instances/{}", gcp.project, cfg.location, cfg.name)
}

impl Resource for FilestoreInstance {
    /// Its capacity by the GiB-month at its tier, as an hourly share of the month.
    fn meter(&self, sight: &crate::cost::Sight) -> Option<crate::cost::Meter> {
        use crate::cost::{Count, HOURS_PER_MONTH, Meter, Rate};
        let (Some(location), Some(tier), Some(gib)) = (sight.text("location"), sight.text("tier"), sight.number("capacity_gib")) else {
            return Some(Meter::Unpriced {
                reason: "its location, tier or capacity is known only after apply".into(),
            });
        };
        Some(Meter::Hourly {
            what: format!("{gib} GiB {tier}"),
            parts: vec![(
                Rate::Filestore {
                    region: crate::cost::google_region(location),
                    tier: tier.to_owned(),
                },
                gib as f64 / HOURS_PER_MONTH,
            )],
            count: Count::ONE,
            upper_bound: None,
        })
    }
    /// Capacity grows in place; a shrink needs a new instance.
    fn forces_replacement(&self, attribute: &str, before: Option<&Value>, after: Option<&Value>) -> bool {
        match attribute {
            "capacity_gib" => matches!((before.and_then(Value::as_i64), after.and_then(Value::as_i64)), (Some(b), Some(a)) if a < b),
            _ => SPEC.replaces(attribute),
        }
    }

    fn holds_data(&self) -> bool {
        true
    }

    fn comparable(&self, _id: &str, config: &Value) -> Value {
        super::collection::network_by_name(config)
    }

    /// Creates the instance, or resumes the create that made it (see [`resumable::create`]).
    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let gcp = ctx.cloud.gcp().await?;
        let id = instance_id(gcp, &cfg);
        let limit = timeout(config, "create", OPERATION_TIMEOUT);
        let owned = |i: &Instance| made_by(ctx, token, Some(&i.description));
        let i = resumable::create::<Instances, _>(ctx, gcp, &id, &cfg.name, limit, owned, || {
            let call = gcp
                .filestore
                .create_instance()
                .set_parent(format!("projects/{}/locations/{}", gcp.project, cfg.location))
                .set_instance_id(&cfg.name)
                .set_instance(body(ctx, token, &cfg));
            Ok(call.send())
        })
        .await?;
        Ok(Created {
            outputs: outputs(&id, &i),
            id,
        })
    }

    /// One list of every location's instances, filtered by forge's mark.
    async fn read(&self, cloud: &Cloud, stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        use google_cloud_gax::paginator::ItemPaginator as _;
        let gcp = cloud.gcp().await?;
        let mut items = gcp
            .filestore
            .list_instances()
            .set_parent(format!("projects/{}/locations/-", gcp.project))
            .by_item();
        let mut seen = Vec::new();
        while let Some(item) = items.next().await {
            let i = item.map_err(|e| error(gcp, "instances.list", e))?;
            if i.state != instance::State::Deleting {
                seen.extend(observed(stack, ids, i.name.clone(), &i.description, |own| attributes(&i, own)));
            }
        }
        Ok(seen)
    }

    fn importable(&self) -> bool {
        true
    }

    /// The instance by path (`projects/<p>/locations/<zone>/instances/<name>`), its own
    /// description apart from a forge mark.
    async fn inspect(&self, cloud: &Cloud, id: &str) -> Result<Option<Inspected>, ProviderError> {
        let gcp = cloud.gcp().await?;
        Ok(resumable::get::<Instances>(gcp, id).await?.map(|i| {
            let (own, _) = split_description(&i.description);
            let mut attributes = attributes(&i, &own);
            attributes["location"] = json!(id.split('/').nth(3));
            Inspected {
                outputs: outputs(id, &i),
                attributes,
                mark: mark_of(&i.description),
            }
        }))
    }

    /// Filestore instances carry forge's mark in their description, after their own: one patch.
    async fn mark(&self, ctx: &Ctx, id: &str, token: &str) -> Result<(), ProviderError> {
        let gcp = ctx.cloud.gcp().await?;
        let live = resumable::get::<Instances>(gcp, id)
            .await?
            .ok_or_else(|| ProviderError::permanent(format!("the Filestore instance `{id}` no longer exists")))?;
        let (own, _) = split_description(&live.description);
        let op = gcp
            .filestore
            .update_instance()
            .set_instance(
                Instance::new()
                    .set_name(id)
                    .set_description(marked_description(ctx, token, Some(&own))),
            )
            .set_update_mask(google_cloud_wkt::FieldMask::default().set_paths(["description"]))
            .send()
            .await
            .map_err(|e| error(gcp, "instances.patch", e))?;
        wait_operation(ctx, gcp, "instances.patch", op, OPERATION_TIMEOUT).await
    }

    async fn find(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Option<String>, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let gcp = ctx.cloud.gcp().await?;
        let id = instance_id(gcp, &cfg);
        resumable::find::<Instances>(gcp, id, |i| made_by(ctx, token, Some(&i.description))).await
    }

    /// One patch of what changed: capacity (growing), description, labels, deletion protection.
    async fn update(&self, ctx: &Ctx, id: &str, old: &Value, new: &Value) -> Result<Value, ProviderError> {
        let before: Config = parse(ctx, old)?;
        let cfg: Config = parse(ctx, new)?;
        let gcp = ctx.cloud.gcp().await?;
        let limit = timeout(new, "update", OPERATION_TIMEOUT);
        let live = resumable::get::<Instances>(gcp, id)
            .await?
            .ok_or_else(|| ProviderError::permanent(format!("the Filestore instance `{id}` is gone; run `forge up` again to create it")))?;
        let mut instance = Instance::new().set_name(id);
        let mut paths = Vec::new();
        if cfg.capacity_gib != before.capacity_gib {
            instance = instance.set_file_shares([FileShareConfig::new().set_name(&cfg.share_name).set_capacity_gb(cfg.capacity_gib)]);
            paths.push("file_shares");
        }
        if cfg.description != before.description {
            instance = instance.set_description(remarked_description(Some(&live.description), cfg.description.as_deref()));
            paths.push("description");
        }
        if cfg.labels != before.labels {
            instance = instance.set_labels(cfg.labels.clone());
            paths.push("labels");
        }
        if cfg.deletion_protection != before.deletion_protection {
            instance = instance.set_deletion_protection_enabled(cfg.deletion_protection);
            paths.push("deletion_protection_enabled");
        }
        if !paths.is_empty() {
            let op = gcp
                .filestore
                .update_instance()
                .set_instance(instance)
                .set_update_mask(google_cloud_wkt::FieldMask::default().set_paths(paths))
                .send()
                .await
                .map_err(|e| error(gcp, "instances.patch", e))?;
            wait_operation(ctx, gcp, "instances.patch", op, limit).await?;
        }
        let i = resumable::wait_ready::<Instances>(ctx, gcp, id, limit).await?;
        Ok(outputs(id, &i))
    }

    /// An instance with deletion protection on is refused by Filestore, whose message says so.
    async fn delete(&self, ctx: &Ctx, id: &str, config: &Value) -> Result<(), ProviderError> {
        let gcp = ctx.cloud.gcp().await?;
        resumable::delete::<Instances>(ctx, gcp, id, timeout(config, "delete", OPERATION_TIMEOUT)).await
    }
}
