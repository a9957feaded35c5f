//! `forge capacity search`: the EC2 Capacity Block offerings for an instance type, a count and a
//! duration, cheapest first, as a table or JSON. It buys nothing.

use super::Session;
use crate::cli::CapacitySearch;
use crate::error::{CommandError, Exit};
use miette::Result;

/// Runs `forge capacity search`.
#[cfg(feature = "aws")]
pub(super) async fn search(session: &Session, args: &CapacitySearch) -> Result<Exit> {
    use crate::provider::aws::capacity::{self, Request};
    use crate::provider::settings::{AwsSettings, Providers};
    let request = Request {
        instance_type: args.instance_type.clone(),
        count: args.count,
        days: args.days,
        start_after: args.start_after.clone(),
    };
    if let Err(refused) = request.check() {
        return Err(CommandError::new(format!("`--{}`: {}", refused.key.replace('_', "-"), refused.message), refused.hint).into());
    }
    let mut providers = match &args.file {
        Some(file) => session.load(file)?.0.providers,
        None => Providers::default(),
    };
    if let Some(region) = &args.region {
        let settings = providers.aws.get_or_insert_with(AwsSettings::default);
        settings.region = Some(region.clone());
    }
    let cloud = session.cloud(&providers);
    let mut offerings = capacity::offerings(&cloud, &request).await.map_err(|e| {
        CommandError::new(
            format!("cannot list Capacity Block offerings: {}", e.message),
            "check the region (`--region`) and that the caller may call ec2:DescribeCapacityBlockOfferings",
        )
    })?;
    if !args.zones.is_empty() {
        offerings.retain(|o| args.zones.contains(&o.zone));
    }
    let region = cloud
        .aws()
        .await
        .sdk
        .region()
        .map_or_else(|| "(no region)".to_owned(), ToString::to_string);
    if args.json {
        let answer = serde_json::json!({
            "region": region,
            "instance_type": request.instance_type,
            "count": request.count,
            "days": request.days,
            "offerings": offerings,
        });
        println!("{}", serde_json::to_string_pretty(&answer).expect("offerings serialize"));
    } else {
        print!("{}", table(&request, &region, &offerings));
    }
    Ok(Exit::Ok)
}

/// Without the AWS SDK, nothing to search with.
#[cfg(not(feature = "aws"))]
pub(super) async fn search(_: &Session, _: &CapacitySearch) -> Result<Exit> {
    Err(CommandError::new(
        "this forge was built without AWS (`--no-default-features`)",
        "build it with the `aws` feature (the default)",
    )
    .into())
}

/// The offerings as a table, with what was asked for and what the fee means.
#[cfg(feature = "aws")]
fn table(
    request: &crate::provider::aws::capacity::Request,
    region: &str,
    offerings: &[crate::provider::aws::capacity::Offering],
) -> String {
    let asked = format!(
        "{} × {}, {} day{} ({} h), in {region}",
        request.count,
        request.instance_type,
        request.days,
        if request.days == 1 { "" } else { "s" },
        request.days * 24
    );
    if offerings.is_empty() {
        return format!(
            "No Capacity Block offerings for {asked}: try other dates (`--start-after`), a shorter block, fewer instances or another region.\n"
        );
    }
    let mut text = format!("Capacity Block offerings for {asked}, cheapest first:\n");
    text.push_str(&format!(
        "  {:<12} {:<17} {:<17} {:>5} {:>5} {:>16}  {}\n",
        "ZONE", "START (UTC)", "END (UTC)", "HOURS", "COUNT", "UPFRONT FEE", "OFFERING"
    ));
    for o in offerings {
        let when = |t: &str| t.get(..16).unwrap_or(t).replace('T', " ");
        text.push_str(&format!(
            "  {:<12} {:<17} {:<17} {:>5} {:>5} {:>16}  {}\n",
            o.zone,
            when(&o.start),
            when(&o.end),
            o.hours,
            o.count,
            crate::plan::render::money(o.upfront_fee, &o.currency),
            o.offering_id
        ));
    }
    text.push_str("The fee is charged up front when a block is bought, and is not refunded.\n");
    text
}
