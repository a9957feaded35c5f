//! `aws_autoscaling_schedule`: one one-time scheduled action on an Auto Scaling group — how a
//! node group on a Capacity Block scales up when the block starts and down before it ends.
//! `at` is an RFC 3339 time (a block's `start` or `end`) and `offset_minutes` moves it (`-30`:
//! half an hour before). The action's name is unique per group, so a put is its own
//! idempotency: a resumed create puts it again. EC2 Auto Scaling deletes a one-time action once
//! it has run, so an action that is no longer listed is not drift: it ran, or its group is gone.
//! An action whose time has already passed (a block that started before the node group was
//! made) cannot be scheduled: its create sets the group's sizes at once, as the action would
//! have; an update of one changes nothing, as it ran already.

use crate::provider::aws::{Clients, error, parse};
use crate::provider::{Cloud, Created, Ctx, Observed, ProviderError, Resource};
use crate::schema::attributes;
use aws_sdk_autoscaling::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_autoscaling::primitives::{DateTime, DateTimeFormat};
use aws_sdk_autoscaling::types::ScheduledUpdateGroupAction;
use serde_json::{Value, json};

/// The `aws_autoscaling_schedule` kind.
pub(crate) struct AutoscalingSchedule;

attributes! {
    kind AutoscalingSchedule, spec "aws_autoscaling_schedule", outputs [id = computed action_id, start_time];
    struct Config {
        autoscaling_group_name: String [replace],
        name: String [replace],
        at: String,
        offset_minutes: Option<i64>,
        min_size: Option<i32>,
        max_size: Option<i32>,
        desired_capacity: Option<i32>,
    }
}

/// An action's id: `<group>/<name>`.
fn action_id(config: &Value, _prior: Option<&Value>) -> Value {
    match (
        config.get("autoscaling_group_name").and_then(Value::as_str),
        config.get("name").and_then(Value::as_str),
    ) {
        (Some(group), Some(name)) => json!(format!("{group}/{name}")),
        _ => Value::Null,
    }
}

impl Config {
    /// When the action runs: `at` moved by `offset_minutes`.
    fn start_time(&self) -> Result<DateTime, ProviderError> {
        let at = DateTime::from_str(&self.at, DateTimeFormat::DateTime)
            .map_err(|_| ProviderError::permanent(format!("`at = \"{}\"` is not an RFC 3339 time (`2026-12-02T11:30:00Z`)", self.at)))?;
        Ok(DateTime::from_secs(at.secs() + self.offset_minutes.unwrap_or(0) * 60))
    }

    /// Puts the action, or, when its time has passed and `at_once`, sets the group's sizes at
    /// once (a create: what the action would have done); an update of an action whose time has
    /// passed changes nothing (it ran already). Returns the outputs.
    async fn apply(&self, ctx: &Ctx, aws: &Clients, at_once: bool) -> Result<Value, ProviderError> {
        if self.min_size.is_none() && self.max_size.is_none() && self.desired_capacity.is_none() {
            return Err(ProviderError::permanent(
                "a scheduled action sets at least one of `min_size`, `max_size` and `desired_capacity`",
            ));
        }
        let start = self.start_time()?;
        let when = start.fmt(DateTimeFormat::DateTime).unwrap_or_default();
        let put = aws
            .autoscaling
            .put_scheduled_update_group_action()
            .auto_scaling_group_name(&self.autoscaling_group_name)
            .scheduled_action_name(&self.name)
            .start_time(start)
            .set_min_size(self.min_size)
            .set_max_size(self.max_size)
            .set_desired_capacity(self.desired_capacity)
            .send()
            .await;
        match put {
            Ok(_) => {}
            Err(e) if past(&e) && !at_once => {
                (ctx.status)(&format!("{when} has passed: the action ran already"));
            }
            Err(e) if past(&e) => {
                (ctx.status)(&format!("{when} has passed: setting the group's sizes now"));
                aws.autoscaling
                    .update_auto_scaling_group()
                    .auto_scaling_group_name(&self.autoscaling_group_name)
                    .set_min_size(self.min_size)
                    .set_max_size(self.max_size)
                    .set_desired_capacity(self.desired_capacity)
                    .send()
                    .await
                    .map_err(|e| error(aws, "UpdateAutoScalingGroup", e))?;
            }
            Err(e) => return Err(error(aws, "PutScheduledUpdateGroupAction", e)),
        }
        Ok(json!({ "id": format!("{}/{}", self.autoscaling_group_name, self.name), "start_time": when }))
    }
}

/// Whether EC2 Auto Scaling refused the action for a start time in the past.
fn past<E: ProvideErrorMetadata, R>(e: &SdkError<E, R>) -> bool {
    e.code() == Some("ValidationError") && e.message().is_some_and(|m| m.contains("in the past"))
}

/// The action `name` on `group`, as listed (empty when it is not: it ran, or never was).
async fn listed(aws: &Clients, group: &str, name: &str) -> Result<Vec<ScheduledUpdateGroupAction>, ProviderError> {
    Ok(all_pages!(
        aws,
        aws.autoscaling
            .describe_scheduled_actions()
            .auto_scaling_group_name(group)
            .scheduled_action_names(name),
        scheduled_update_group_actions,
        "DescribeScheduledActions"
    ))
}

/// The group and the action's name of an id.
fn split(id: &str) -> (&str, &str) {
    id.rsplit_once('/').unwrap_or((id, ""))
}

impl Resource for AutoscalingSchedule {
    /// The time as EC2 Auto Scaling keeps it (to the second, UTC).
    fn comparable(&self, _id: &str, config: &Value) -> Value {
        let mut live = json!({});
        for key in ["min_size", "max_size", "desired_capacity"] {
            if let Some(v) = config.get(key) {
                live[key] = v.clone();
            }
        }
        if let Ok(cfg) = serde_json::from_value::<Config>(config.clone())
            && let Ok(start) = cfg.start_time()
        {
            live["start_time"] = json!(start.fmt(DateTimeFormat::DateTime).unwrap_or_default());
        }
        live
    }

    async fn create(&self, ctx: &Ctx, _token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let outputs = cfg.apply(ctx, ctx.cloud.aws().await, true).await?;
        Ok(Created {
            id: format!("{}/{}", cfg.autoscaling_group_name, cfg.name),
            outputs,
        })
    }

    /// One DescribeScheduledActions per group (all pages). A listed action is compared; one
    /// that is not listed has run (EC2 Auto Scaling deletes it then) or went with its group, and
    /// is reported with nothing to compare: neither is drift.
    async fn read(&self, cloud: &Cloud, _stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        let aws = cloud.aws().await;
        let mut groups: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
        for id in ids {
            let (group, name) = split(id);
            groups.entry(group).or_default().push(name);
        }
        let mut observed = Vec::new();
        for (group, names) in groups {
            let listed = all_pages!(
                aws,
                aws.autoscaling
                    .describe_scheduled_actions()
                    .auto_scaling_group_name(group)
                    .set_scheduled_action_names(Some(names.iter().map(|n| (*n).to_owned()).collect())),
                scheduled_update_group_actions,
                "DescribeScheduledActions"
            );
            for name in names {
                let action = listed.iter().find(|a| a.scheduled_action_name() == Some(name));
                let mut attributes = json!({});
                if let Some(a) = action {
                    let live = [
                        (
                            "start_time",
                            json!(a.start_time().and_then(|t| t.fmt(DateTimeFormat::DateTime).ok())),
                        ),
                        ("min_size", json!(a.min_size())),
                        ("max_size", json!(a.max_size())),
                        ("desired_capacity", json!(a.desired_capacity())),
                    ];
                    for (key, value) in live.into_iter().filter(|(_, v)| !v.is_null()) {
                        attributes[key] = value;
                    }
                }
                observed.push(Observed {
                    id: format!("{group}/{name}"),
                    address: None,
                    attributes,
                });
            }
        }
        Ok(observed)
    }

    /// The action of this name on the group, if listed (an interrupted create's put went
    /// through); a resumed create puts it again either way.
    async fn find(&self, ctx: &Ctx, _token: &str, config: &Value) -> Result<Option<String>, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let aws = ctx.cloud.aws().await;
        let listed = listed(aws, &cfg.autoscaling_group_name, &cfg.name).await?;
        Ok((!listed.is_empty()).then(|| format!("{}/{}", cfg.autoscaling_group_name, cfg.name)))
    }

    /// A put with the same name replaces the action.
    async fn update(&self, ctx: &Ctx, _id: &str, _old: &Value, new: &Value) -> Result<Value, ProviderError> {
        let cfg: Config = parse(ctx, new)?;
        cfg.apply(ctx, ctx.cloud.aws().await, false).await
    }

    /// Deletes the action if it is still listed (one that ran is gone already).
    async fn delete(&self, ctx: &Ctx, id: &str, _config: &Value) -> Result<(), ProviderError> {
        let aws = ctx.cloud.aws().await;
        let (group, name) = split(id);
        if listed(aws, group, name).await?.is_empty() {
            return Ok(());
        }
        let deleted = aws
            .autoscaling
            .delete_scheduled_action()
            .auto_scaling_group_name(group)
            .scheduled_action_name(name)
            .send()
            .await;
        match deleted {
            // It ran (and went) between the look and the delete.
            Err(e) if e.code() == Some("ValidationError") && listed(aws, group, name).await?.is_empty() => Ok(()),
            Err(e) => Err(error(aws, "DeleteScheduledAction", e)),
            Ok(_) => Ok(()),
        }
    }
}
