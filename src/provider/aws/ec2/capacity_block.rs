//! `aws_ec2_capacity_block`: an EC2 Capacity Block for ML, bought — the only kind whose create
//! spends money up front. At plan time it picks the cheapest offering that fits (type, count,
//! days, zone, earliest start) under `max_upfront_usd` and is priced in the plan; `up` buys
//! only with `--allow-purchase`, and only the offering the plan priced.
//!
//! Exactly once: `PurchaseCapacityBlock` takes no idempotency token, so the purchase carries
//! forge's tags with the create's token, and a create that resumes an interrupted one first
//! looks for the block its token bought — repeatedly, for up to `timeouts.create` (a minute
//! by default), as EC2 shows a purchase only some seconds after it — and adopts it. A purchase
//! whose answer is lost is not tried again in the same run: the next run looks for it first.
//! A block cannot be cancelled: `destroy` forgets it (it ends on its own) and says so. Every
//! attribute but the ceiling makes a new block.

use super::capacity_extension;
use super::capacity_reservation::{described, made_with, observed};
use super::tag_spec;
use crate::provider::aws::capacity::{self, Offering, Request};
use crate::provider::aws::{Clients, error, parse};
use crate::provider::{Cloud, Created, Ctx, Observed, ProviderError, Purchase, Refusal, Resource, timeout};
use crate::schema::attributes;
use aws_sdk_ec2::types::{CapacityReservation, CapacityReservationInstancePlatform, ResourceType};
use serde_json::{Value, json};
use std::time::Duration;

/// The `aws_ec2_capacity_block` kind.
pub(crate) struct CapacityBlock;

attributes! {
    kind CapacityBlock, spec "aws_ec2_capacity_block", outputs [id, offering_id, zone, start, end, state, upfront_fee], extra [tags, timeouts];
    struct Config {
        instance_type: String [replace],
        count: u32 [replace],
        days: u32,
        zone: Option<String> [replace],
        start_after: Option<String> [replace],
        max_upfront_usd: u64,
    }
}

/// How long a resumed create looks for the block it may have bought, by default.
const FIND_TIMEOUT: Duration = Duration::from_secs(60);

impl Config {
    fn request(&self) -> Request {
        Request {
            instance_type: self.instance_type.clone(),
            count: self.count,
            days: self.days,
            start_after: self.start_after.clone(),
        }
    }

    /// The cheapest offering on sale in the block's `zone`, if it gives one, and within its
    /// ceiling; an error naming the cheapest when all cost more.
    async fn offering(&self, cloud: &Cloud) -> Result<Offering, ProviderError> {
        let mut offerings = capacity::offerings(cloud, &self.request()).await?;
        // Of an UltraServer type, the fewest, largest UltraServers that make the count: 18
        // P6e-GB200 are one u-p6e-gb200x72, one NVLink domain, not two x36.
        let fewest = offerings.iter().filter_map(|o| o.ultraservers.as_ref().map(|u| u.1)).min();
        offerings.retain(|o| o.ultraservers.as_ref().is_none_or(|u| Some(u.1) == fewest));
        let asked = format!("{} × {} for {} days", self.count, self.instance_type, self.days);
        // Only fees forge can compare with the ceiling (in US dollars) fit.
        let mut fitting = offerings
            .into_iter()
            .filter(|o| self.zone.as_ref().is_none_or(|z| *z == o.zone) && o.upfront_fee.is_finite() && o.currency == "USD");
        let Some(cheapest) = fitting.next() else {
            let zone = self.zone.as_ref().map_or_else(String::new, |z| format!(" in {z}"));
            return Err(ProviderError::permanent(format!(
                "no Capacity Block on sale for {asked}{zone}: try other dates (`start_after`), another zone, a shorter block or fewer instances (`forge capacity search` lists what is on sale)"
            )));
        };
        if cheapest.upfront_fee > self.max_upfront_usd as f64 {
            return Err(ProviderError::permanent(format!(
                "the cheapest Capacity Block for {asked} costs {} upfront ({}, from {}), above `max_upfront_usd = {}`: raise the ceiling, or ask for less",
                crate::plan::render::money(cheapest.upfront_fee, &cheapest.currency),
                cheapest.zone,
                cheapest.start,
                self.max_upfront_usd
            )));
        }
        Ok(cheapest)
    }
}

/// What the plan says an offering buys.
fn purchase(cfg: &Config, o: &Offering) -> Purchase {
    let when = |t: &str| t.get(..16).unwrap_or(t).replace('T', " ");
    Purchase {
        what: format!(
            "a Capacity Block of {} × {} in {}, {} → {} UTC ({} h, offering {})",
            o.count,
            cfg.instance_type,
            o.zone,
            when(&o.start),
            when(&o.end),
            o.hours,
            o.offering_id
        ),
        offer: o.offering_id.clone(),
        upfront: o.upfront_fee,
        currency: o.currency.clone(),
    }
}

/// A block's outputs; with what forge bought, when this run bought it: the offering and fee.
fn outputs(r: &CapacityReservation, bought: Option<&Purchase>) -> Value {
    let mut outputs = json!({
        "id": r.capacity_reservation_id(),
        "zone": r.availability_zone(),
        "start": super::rfc3339(r.start_date()),
        "end": super::rfc3339(r.end_date()),
        "state": r.state().map(aws_sdk_ec2::types::CapacityReservationState::as_str),
    });
    if let Some(p) = bought {
        outputs["offering_id"] = json!(p.offer);
        outputs["upfront_fee"] = json!(p.upfront);
    }
    outputs
}

/// The error of a purchase (`what`) of `offer` that failed: EC2 refused it (or throttled it,
/// doing nothing) and nothing was bought; or no answer came, and it may have gone through —
/// the next run looks before it buys.
pub(super) fn purchase_failed<E>(
    aws: &Clients,
    what: &str,
    offer: &str,
    e: aws_sdk_ec2::error::SdkError<E, aws_sdk_ec2::config::http::HttpResponse>,
) -> ProviderError
where
    E: aws_sdk_ec2::error::ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let answered = matches!(e, aws_sdk_ec2::error::SdkError::ServiceError(_));
    let err = error(aws, what, e);
    if answered && (!err.retryable || err.throttled) {
        return ProviderError::permanent(format!(
            "{} (nothing was bought; an offering no longer on sale needs a new plan)",
            err.message
        ));
    }
    ProviderError::permanent(format!(
        "{what} of offering {offer} has no answer ({}): it may have gone through. Run `forge up --allow-purchase` again: it looks for what was bought before it buys",
        err.message
    ))
}

/// Where a block stands, in words: `scheduled` → `active` → `expired` (or a failed payment).
fn life(r: &CapacityReservation) -> String {
    let date = |d| super::rfc3339(d).unwrap_or_else(|| "?".into());
    let (start, end) = (date(r.start_date()), date(r.end_date()));
    match r.state().map_or("unknown", aws_sdk_ec2::types::CapacityReservationState::as_str) {
        "scheduled" => format!("scheduled: starts {start}, ends {end}"),
        "active" => format!("active until {end}"),
        "expired" => format!(
            "expired since {end}: its capacity is gone, and forge buys no other by itself (remove the block, or `forge state rm` it to plan a new one)"
        ),
        other => format!("{other} ({start} → {end})"),
    }
}

/// The block an interrupted create with `token` may have bought: looked for every two seconds
/// until `limit` has passed.
async fn bought_before(ctx: &Ctx, aws: &Clients, token: &str, limit: Duration) -> Result<Option<CapacityReservation>, ProviderError> {
    let started = std::time::Instant::now();
    loop {
        if let Some(block) = made_with(ctx, aws, token).await? {
            return Ok(Some(block));
        }
        if started.elapsed() >= limit {
            return Ok(None);
        }
        (ctx.status)(&format!(
            "looking for the block an interrupted run may have bought (EC2 shows a purchase after some seconds), up to {}s",
            limit.as_secs()
        ));
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

impl Resource for CapacityBlock {
    /// Bought: a block the refresh does not see is not bought again.
    fn paid_for(&self) -> bool {
        true
    }

    /// A new block: the cheapest fitting offering within the ceiling. A bought one (`existing`)
    /// whose `days` were raised: the cheapest extension within the ceiling, or nothing when
    /// EC2 shows it extended already. A block whose values are not all known yet cannot be
    /// priced, so it cannot be planned.
    async fn quote(&self, ctx: &Ctx, config: &Value, existing: Option<&str>) -> Result<Option<Purchase>, ProviderError> {
        if config.is_null() {
            return Err(ProviderError::permanent(
                "a Capacity Block is priced when planned, and this one's attributes refer to values known only after apply: write them as values",
            ));
        }
        let cfg: Config = parse(ctx, config)?;
        if let Some(id) = existing {
            let aws = ctx.cloud.aws().await;
            return capacity_extension::quote(aws, id, &cfg.instance_type, cfg.days, cfg.max_upfront_usd).await;
        }
        let offering = cfg.offering(&ctx.cloud).await?;
        Ok(Some(purchase(&cfg, &offering)))
    }

    /// A bought block's `end` follows its `days` from its recorded `start`, so what refers to
    /// it (a node group's scale-down) is planned with the extended end.
    fn planned_outputs(&self, config: &Value, prior: Option<&Value>) -> Value {
        let mut planned = crate::provider::Declared::spec(self).planned_outputs(config, prior);
        let start = prior
            .and_then(|p| p.get("start"))
            .and_then(Value::as_str)
            .and_then(|s| aws_sdk_ec2::primitives::DateTime::from_str(s, aws_sdk_ec2::primitives::DateTimeFormat::DateTime).ok());
        if let (Some(start), Some(days)) = (start, config.get("days").and_then(Value::as_i64)) {
            let end = aws_sdk_ec2::primitives::DateTime::from_secs(start.secs() + days * 24 * 3600);
            planned["end"] = json!(super::rfc3339(Some(&end)));
        }
        planned
    }

    /// A block cannot be shortened.
    fn refusal(&self, before: &Value, after: &Value, _outputs: &Value) -> Option<Refusal> {
        let days = |config: &Value| config.get("days").and_then(Value::as_u64);
        let (Some(was), Some(now)) = (days(before), days(after)) else {
            return None;
        };
        (now < was).then(|| Refusal {
            attribute: "days",
            message: format!(
                "a Capacity Block cannot be shortened ({was} → {now} days): EC2 refunds nothing and ends a block only at its end"
            ),
            hint: format!("keep `days = {was}`, or remove the block (forge forgets it; it runs to its end)"),
        })
    }

    /// Adopts what an interrupted create bought, else buys the offering the plan priced —
    /// that one and no other — tagged with `token`.
    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let aws = ctx.cloud.aws().await;
        if ctx.resumed
            && let Some(block) = bought_before(ctx, aws, token, timeout(config, "create", FIND_TIMEOUT)).await?
        {
            let id = block.capacity_reservation_id().unwrap_or_default().to_owned();
            return Ok(Created {
                outputs: outputs(&block, None),
                id,
            });
        }
        let Some(quoted) = &ctx.quoted else {
            return Err(ProviderError::permanent(
                "the plan priced no offering for this block, and forge buys only what a plan priced: plan again",
            ));
        };
        (ctx.status)(&format!("buying {}", crate::plan::render::money(quoted.upfront, &quoted.currency)));
        let sent = aws
            .ec2
            .purchase_capacity_block()
            .capacity_block_offering_id(&quoted.offer)
            .instance_platform(CapacityReservationInstancePlatform::LinuxUnix)
            .tag_specifications(tag_spec(ctx, token, ResourceType::CapacityReservation, config))
            .send()
            .await;
        let answer = sent.map_err(|e| purchase_failed(aws, "PurchaseCapacityBlock", &quoted.offer, e))?;
        let block = answer
            .capacity_reservation()
            .ok_or_else(|| ProviderError::permanent("EC2 answered the purchase without its capacity reservation"))?;
        Ok(Created {
            outputs: outputs(block, Some(quoted)),
            id: block.capacity_reservation_id().unwrap_or_default().to_owned(),
        })
    }

    /// The stack's blocks, by forge's stack tag: their type, count and tags, and where each
    /// stands in its life.
    async fn read(&self, cloud: &Cloud, stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        observed(cloud.aws().await, stack, ids, |r| {
            Some(json!({
                "instance_type": r.instance_type(),
                "count": r.total_instance_count(),
                "tags": super::ec2_tags(r.tags()),
                (crate::plan::drift::LIFE): life(r),
            }))
        })
        .await
    }

    async fn find(&self, ctx: &Ctx, token: &str, _config: &Value) -> Result<Option<String>, ProviderError> {
        let aws = ctx.cloud.aws().await;
        let block = made_with(ctx, aws, token).await?;
        Ok(block.and_then(|b| b.capacity_reservation_id().map(str::to_owned)))
    }

    /// Raised `days`: buys the extension the plan priced (none when EC2 shows the block
    /// extended already), then checks the block lasts that long. The tags; the ceiling changes
    /// nothing in the cloud: it matters only when buying.
    async fn update(&self, ctx: &Ctx, id: &str, old: &Value, new: &Value) -> Result<Value, ProviderError> {
        let aws = ctx.cloud.aws().await;
        let (was, cfg): (Config, Config) = (parse(ctx, old)?, parse(ctx, new)?);
        if cfg.days != was.days {
            if let Some(quoted) = &ctx.quoted {
                capacity_extension::buy(ctx, aws, id, quoted).await?;
            }
            let missing = capacity_extension::missing_hours(aws, id, cfg.days).await?;
            if missing > 0 {
                return Err(ProviderError::permanent(format!(
                    "Capacity Block `{id}` lacks {missing} h of its {} days: the plan priced no extension (plan again), or EC2 does not show the one bought yet (run `forge up --allow-purchase` again: it reads the block before it buys)",
                    cfg.days
                )));
            }
        }
        super::sync_tags(ctx, aws, id, old, new).await?;
        let block = described(aws, id)
            .await?
            .ok_or_else(|| ProviderError::permanent(format!("Capacity Block `{id}` is gone")))?;
        Ok(outputs(&block, None))
    }

    /// A Capacity Block cannot be cancelled: forge forgets it, and it ends on its own.
    async fn delete(&self, ctx: &Ctx, id: &str, _config: &Value) -> Result<(), ProviderError> {
        (ctx.status)(&format!(
            "Capacity Block {id} cannot be cancelled (EC2 refunds none): forgotten; it runs until its end"
        ));
        Ok(())
    }
}
