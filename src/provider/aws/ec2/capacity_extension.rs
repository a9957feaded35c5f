//! Capacity Block extensions: the days a live block gains when its `days` is raised, priced
//! when planned and bought like the block itself — only with `--allow-purchase`, and only the
//! offering the plan priced. `PurchaseCapacityBlockExtension` takes no idempotency token either,
//! so whether a block still lacks days is read from EC2 each time: its end date, and the
//! extensions EC2 has on record (one whose payment is still pending counts), against the end
//! the stack asks for. An interrupted purchase is therefore never bought twice.

use super::capacity_reservation::described;
use crate::provider::aws::{Clients, error};
use crate::provider::{Ctx, ProviderError, Purchase};
use aws_sdk_ec2::types::CapacityBlockExtensionStatus;

/// An hour, in seconds.
const HOUR: i64 = 3600;

/// The hours block `id` lacks to last `days` days from its start: none when its end, or an
/// extension EC2 has on record, reaches that far.
pub(super) async fn missing_hours(aws: &Clients, id: &str, days: u32) -> Result<i64, ProviderError> {
    let block = described(aws, id)
        .await?
        .ok_or_else(|| ProviderError::permanent(format!("Capacity Block `{id}` is not shown by EC2, so it cannot be extended")))?;
    let (Some(start), Some(end)) = (block.start_date(), block.end_date()) else {
        return Err(ProviderError::permanent(format!("EC2 shows no dates for Capacity Block `{id}`")));
    };
    let wanted = start.secs() + i64::from(days) * 24 * HOUR;
    let mut reached = end.secs();
    let mut pages = aws
        .ec2
        .describe_capacity_block_extension_history()
        .capacity_reservation_ids(id)
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| error(aws, "DescribeCapacityBlockExtensionHistory", e))?;
        for extension in page.capacity_block_extensions() {
            let counts = !matches!(
                extension.capacity_block_extension_status(),
                Some(CapacityBlockExtensionStatus::PaymentFailed)
            );
            if let Some(to) = extension.capacity_block_extension_end_date().filter(|_| counts) {
                reached = reached.max(to.secs());
            }
        }
    }
    Ok(((wanted - reached) / HOUR).max(0))
}

/// What extending block `id` to `days` days costs: the cheapest offering in US dollars within
/// `ceiling`, or `None` when it lasts that long already; an error when EC2 sells none or all
/// cost more.
pub(super) async fn quote(
    aws: &Clients,
    id: &str,
    instance_type: &str,
    days: u32,
    ceiling: u64,
) -> Result<Option<Purchase>, ProviderError> {
    let hours = missing_hours(aws, id, days).await?;
    if hours == 0 {
        return Ok(None);
    }
    let mut pages = aws
        .ec2
        .describe_capacity_block_extension_offerings()
        .capacity_reservation_id(id)
        .capacity_block_extension_duration_hours(hours as i32)
        .into_paginator()
        .items()
        .send();
    let mut cheapest: Option<(f64, aws_sdk_ec2::types::CapacityBlockExtensionOffering)> = None;
    while let Some(offering) = pages.next().await {
        let offering = offering.map_err(|e| error(aws, "DescribeCapacityBlockExtensionOfferings", e))?;
        let fee: f64 = offering.upfront_fee().and_then(|f| f.parse().ok()).unwrap_or(f64::NAN);
        if offering.currency_code() == Some("USD") && fee.is_finite() && cheapest.as_ref().is_none_or(|(c, _)| fee < *c) {
            cheapest = Some((fee, offering));
        }
    }
    let Some((fee, offering)) = cheapest else {
        return Err(ProviderError::permanent(format!(
            "EC2 sells no {hours}-hour extension of Capacity Block `{id}` (an ended block cannot be extended, and extensions depend on capacity after its end): keep `days`, or buy another block"
        )));
    };
    let money = crate::plan::render::money(fee, "USD");
    if fee > ceiling as f64 {
        return Err(ProviderError::permanent(format!(
            "extending Capacity Block `{id}` by {hours} h costs {money}, above `max_upfront_usd = {ceiling}`: raise the ceiling, or keep `days`"
        )));
    }
    Ok(Some(Purchase {
        what: format!(
            "an extension of Capacity Block {id} ({} × {instance_type}) by {hours} h, to {} UTC (offering {})",
            offering.instance_count().unwrap_or_default(),
            super::rfc3339(offering.capacity_block_extension_end_date())
                .unwrap_or_default()
                .get(..16)
                .unwrap_or_default()
                .replace('T', " "),
            offering.capacity_block_extension_offering_id().unwrap_or_default()
        ),
        offer: offering.capacity_block_extension_offering_id().unwrap_or_default().to_owned(),
        upfront: fee,
        currency: "USD".into(),
    }))
}

/// Buys the extension offering `quoted` of block `id`. A refusal bought nothing; a purchase
/// without an answer may have gone through, and the next run reads EC2 before it buys.
pub(super) async fn buy(ctx: &Ctx, aws: &Clients, id: &str, quoted: &Purchase) -> Result<(), ProviderError> {
    (ctx.status)(&format!(
        "buying an extension: {}",
        crate::plan::render::money(quoted.upfront, &quoted.currency)
    ));
    let sent = aws
        .ec2
        .purchase_capacity_block_extension()
        .capacity_reservation_id(id)
        .capacity_block_extension_offering_id(&quoted.offer)
        .send()
        .await;
    sent.map(drop)
        .map_err(|e| super::capacity_block::purchase_failed(aws, "PurchaseCapacityBlockExtension", &quoted.offer, e))
}
