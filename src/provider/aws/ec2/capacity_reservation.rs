//! `aws_ec2_capacity_reservation`: an On-Demand Capacity Reservation — instances of one type
//! held in one zone, billed at the On-Demand rate while it is active, used or not. Node groups
//! target it by its `cr-…` id; it may hold its instances in a `cluster` placement group
//! (`placement_group`, a name forge turns into the ARN EC2 takes). Its count and end change in place
//! (`ModifyCapacityReservation`); the type, zone, platform and tenancy make a new one; destroy
//! cancels it (`CancelCapacityReservation`), which stops the billing.

use super::tag_spec;
use crate::provider::aws::{Clients, error, parse, tolerate};
use crate::provider::{Cloud, Created, Ctx, Observed, ProviderError, Resource};
use crate::schema::attributes;
use aws_sdk_ec2::primitives::{DateTime, DateTimeFormat};
use aws_sdk_ec2::types::{CapacityReservation, CapacityReservationInstancePlatform, EndDateType, Filter, ResourceType};
use serde_json::{Value, json};

/// The `aws_ec2_capacity_reservation` kind.
pub(crate) struct CapacityReservationKind;

attributes! {
    kind CapacityReservationKind, spec "aws_ec2_capacity_reservation", outputs [id, state], extra [tags];
    struct Config {
        instance_type: String [replace],
        zone: String [replace],
        count: u32,
        end_date: Option<String>,
        #[serde(default = "linux")] instance_platform: String [replace],
        placement_group: Option<String> [replace],
    }
}

fn linux() -> String {
    "Linux/UNIX".into()
}

impl Config {
    /// `end_date` as EC2 takes it: a time (a date is its midnight, UTC), or none (`unlimited`).
    fn end(&self) -> Result<Option<DateTime>, ProviderError> {
        let Some(text) = &self.end_date else { return Ok(None) };
        let full = if text.len() == 10 {
            format!("{text}T00:00:00Z")
        } else {
            text.clone()
        };
        DateTime::from_str(&full, DateTimeFormat::DateTime).map(Some).map_err(|_| {
            ProviderError::permanent(format!(
                "`end_date = \"{text}\"` is not a date: write `2026-12-31` or `2026-12-31T12:00:00Z`"
            ))
        })
    }
}

fn outputs(r: &CapacityReservation) -> Value {
    json!({
        "id": r.capacity_reservation_id(),
        "state": r.state().map(aws_sdk_ec2::types::CapacityReservationState::as_str),
    })
}

/// The reservation `id` (On-Demand or a Capacity Block's), if EC2 shows it.
pub(super) async fn described(aws: &Clients, id: &str) -> Result<Option<CapacityReservation>, ProviderError> {
    let answer = aws.ec2.describe_capacity_reservations().capacity_reservation_ids(id).send().await;
    let found = crate::provider::aws::found(aws, "DescribeCapacityReservations", answer, "InvalidCapacityReservationId.NotFound")?;
    Ok(found.and_then(|out| out.capacity_reservations().first().cloned()))
}

/// The recorded reservations (`ids`) of the stack `stack` that EC2 shows, found by forge's
/// stack tag (every page; On-Demand and Capacity Blocks alike), each with the attributes
/// `attributes` reads of it — `None` to count it as gone.
pub(super) async fn observed(
    aws: &Clients,
    stack: &str,
    ids: &[String],
    attributes: impl Fn(&CapacityReservation) -> Option<Value>,
) -> Result<Vec<Observed>, ProviderError> {
    let filter = Filter::builder().name("tag:forge:stack").values(stack).build();
    let mut pages = aws
        .ec2
        .describe_capacity_reservations()
        .filters(filter)
        .into_paginator()
        .items()
        .send();
    let mut seen = Vec::new();
    while let Some(item) = pages.next().await {
        let r = item.map_err(|e| error(aws, "DescribeCapacityReservations", e))?;
        let id = r.capacity_reservation_id().unwrap_or_default().to_owned();
        if let Some(attributes) = attributes(&r).filter(|_| ids.contains(&id)) {
            seen.push(Observed {
                attributes,
                address: None,
                id,
            });
        }
    }
    Ok(seen)
}

/// The reservation the create with `token` made (or bought), if EC2 shows it.
pub(super) async fn made_with(ctx: &Ctx, aws: &Clients, token: &str) -> Result<Option<CapacityReservation>, ProviderError> {
    Ok(find_own!(
        ctx,
        aws,
        token,
        describe_capacity_reservations,
        capacity_reservations,
        "DescribeCapacityReservations"
    ))
}

/// The ARN of the placement group `group` names: an ARN as it is, a name looked up (EC2 takes
/// a reservation's placement group by ARN only).
async fn placement_group_arn(aws: &Clients, group: &str) -> Result<String, ProviderError> {
    if group.starts_with("arn:") {
        return Ok(group.to_owned());
    }
    let answer = aws.ec2.describe_placement_groups().group_names(group).send().await;
    let found = crate::provider::aws::found(aws, "DescribePlacementGroups", answer, "InvalidPlacementGroup.Unknown")?;
    found
        .and_then(|out| out.placement_groups().first().and_then(|g| g.group_arn().map(str::to_owned)))
        .ok_or_else(|| {
            ProviderError::permanent(format!(
                "placement group `{group}` does not exist: a reservation goes into an existing `cluster` placement group"
            ))
        })
}

impl Resource for CapacityReservationKind {
    /// A reservation bills its instances at the on-demand rate whether they run or not (node
    /// groups on it are not billed again); forge reads Linux prices only.
    fn meter(&self, sight: &crate::cost::Sight) -> Option<crate::cost::Meter> {
        use crate::cost::{Count, Meter};
        Some(sight.in_aws_region(|region| {
            if sight.text("instance_platform").is_some_and(|p| p != linux()) {
                return Meter::Unpriced {
                    reason: "forge reads Linux prices only".into(),
                };
            }
            let count = sight.number("count").and_then(|n| u32::try_from(n).ok());
            let (Some(instance_type), Some(count)) = (sight.text("instance_type"), count) else {
                return Meter::after_apply("instance type or count");
            };
            let count = Count {
                min: count,
                planned: count,
                max: count,
            };
            crate::cost::ec2_instances(region, &[instance_type.to_owned()], count, false)
        }))
    }
    /// `end_date` as EC2 reads it back: a date is its midnight, UTC; `placement_group` by name.
    fn comparable(&self, _id: &str, config: &Value) -> Value {
        let mut config = config.clone();
        if let Some(date) = config.get("end_date").and_then(Value::as_str).filter(|d| d.len() == 10) {
            config["end_date"] = json!(format!("{date}T00:00:00Z"));
        }
        if let Some(group) = config.get("placement_group").and_then(Value::as_str) {
            config["placement_group"] = json!(group.rsplit('/').next().unwrap_or(group));
        }
        config
    }

    /// Creates it with the create's token as EC2's idempotency token, so a retried or resumed
    /// create gets the same reservation.
    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let aws = ctx.cloud.aws().await;
        let end = cfg.end()?;
        let placement = match &cfg.placement_group {
            Some(group) => Some(placement_group_arn(aws, group).await?),
            None => None,
        };
        let made = aws
            .ec2
            .create_capacity_reservation()
            .client_token(token)
            .set_placement_group_arn(placement)
            .instance_type(&cfg.instance_type)
            .availability_zone(&cfg.zone)
            .instance_count(cfg.count as i32)
            .instance_platform(CapacityReservationInstancePlatform::from(cfg.instance_platform.as_str()))
            .end_date_type(if end.is_some() {
                EndDateType::Limited
            } else {
                EndDateType::Unlimited
            })
            .set_end_date(end)
            .tag_specifications(tag_spec(ctx, token, ResourceType::CapacityReservation, config))
            .send()
            .await
            .map_err(|e| error(aws, "CreateCapacityReservation", e))?;
        let r = made
            .capacity_reservation()
            .ok_or_else(|| ProviderError::permanent("EC2 answered CreateCapacityReservation without the reservation"))?;
        Ok(Created {
            outputs: outputs(r),
            id: r.capacity_reservation_id().unwrap_or_default().to_owned(),
        })
    }

    /// The stack's reservations (by forge's stack tag; Capacity Blocks are the other kind's).
    async fn read(&self, cloud: &Cloud, stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        observed(cloud.aws().await, stack, ids, |r| {
            // An expired reservation ended as asked: not gone, so not made again.
            let state = r.state().map(aws_sdk_ec2::types::CapacityReservationState::as_str);
            if matches!(state, Some("cancelled" | "failed")) {
                return None;
            }
            Some(json!({
                "instance_type": r.instance_type(),
                "zone": r.availability_zone(),
                "count": r.total_instance_count(),
                "end_date": super::rfc3339(r.end_date()),
                "instance_platform": r.instance_platform().map(CapacityReservationInstancePlatform::as_str),
                "placement_group": r.placement_group_arn().map(|arn| arn.rsplit('/').next().unwrap_or(arn)),
                "tags": super::ec2_tags(r.tags()),
            }))
        })
        .await
    }

    async fn find(&self, ctx: &Ctx, token: &str, _config: &Value) -> Result<Option<String>, ProviderError> {
        let own = made_with(ctx, ctx.cloud.aws().await, token).await?;
        Ok(own.and_then(|r| r.capacity_reservation_id().map(str::to_owned)))
    }

    /// The count and the end, in one `ModifyCapacityReservation`; the tags after.
    async fn update(&self, ctx: &Ctx, id: &str, old: &Value, new: &Value) -> Result<Value, ProviderError> {
        let before: Config = parse(ctx, old)?;
        let cfg: Config = parse(ctx, new)?;
        let aws = ctx.cloud.aws().await;
        if (cfg.count, &cfg.end_date) != (before.count, &before.end_date) {
            let end = cfg.end()?;
            aws.ec2
                .modify_capacity_reservation()
                .capacity_reservation_id(id)
                .instance_count(cfg.count as i32)
                .end_date_type(if end.is_some() {
                    EndDateType::Limited
                } else {
                    EndDateType::Unlimited
                })
                .set_end_date(end)
                .send()
                .await
                .map_err(|e| error(aws, "ModifyCapacityReservation", e))?;
        }
        super::sync_tags(ctx, aws, id, old, new).await?;
        let r = described(aws, id)
            .await?
            .ok_or_else(|| ProviderError::permanent(format!("capacity reservation `{id}` is gone")))?;
        Ok(outputs(&r))
    }

    /// Cancels it; one already cancelled, expired or gone is a success.
    async fn delete(&self, ctx: &Ctx, id: &str, _config: &Value) -> Result<(), ProviderError> {
        let aws = ctx.cloud.aws().await;
        let state = described(aws, id).await?.and_then(|r| r.state().map(|s| s.as_str().to_owned()));
        if matches!(state.as_deref(), None | Some("cancelled" | "expired" | "failed")) {
            return Ok(());
        }
        tolerate(
            aws,
            "CancelCapacityReservation",
            aws.ec2.cancel_capacity_reservation().capacity_reservation_id(id).send().await,
            &["InvalidCapacityReservationId.NotFound"],
        )
    }
}
