//! Costs as text for people: the plan's cost section, and `forge cost`'s text and markdown.

use super::{Estimate, HOURS_PER_MONTH, Line, PlanCost, dollars, thousands};
use std::fmt::Write;

/// `+$110.08/h (+$80,358/month at 730 h)`, signed when `signed`.
fn hourly_and_monthly(hourly: f64, signed: bool) -> String {
    let sign = |v: f64| match (signed, v < 0.0) {
        (true, false) => "+",
        (_, true) => "-",
        (false, false) => "",
    };
    format!(
        "{}{}/h ({}${}/month at {} h)",
        sign(hourly),
        dollars(hourly.abs()),
        sign(hourly),
        thousands(hourly.abs() * HOURS_PER_MONTH, 0),
        HOURS_PER_MONTH
    )
}

/// A line's cost column: `$110.08/h`, `$55.04–$220.16/h`, or why it is not counted.
fn cost_column(line: &Line) -> String {
    match (line.hourly, line.range, &line.not_counted) {
        (Some(hourly), Some((low, high)), _) => format!("{}/h ({}–{})", dollars(hourly), dollars(low), dollars(high)),
        (Some(hourly), None, _) => format!("{}/h", dollars(hourly)),
        (None, _, Some(why)) => why.clone(),
        (None, _, None) => "unknown".into(),
    }
}

/// A counted line's share of the total (`99%`), to see where the money goes; blank otherwise.
fn share(line: &Line, total: f64) -> String {
    match line.hourly {
        Some(hourly) if total > 0.0 => format!("{:>3.0}%", hourly / total * 100.0),
        _ => String::new(),
    }
}

/// The estimate's lines, aligned, each with its share of the total and its note; then the
/// total.
fn lines(out: &mut String, estimate: &Estimate) {
    let width = estimate.resources.iter().map(|l| l.address.len()).max().unwrap_or(0);
    let what_width = estimate.resources.iter().map(|l| l.what.chars().count()).max().unwrap_or(0);
    for line in &estimate.resources {
        let bound = line
            .upper_bound
            .as_ref()
            .map(|why| format!("  (at most: {why})"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  {:width$}  {:what_width$}  {:>4}  {}{bound}",
            line.address,
            line.what,
            share(line, estimate.hourly),
            cost_column(line)
        );
    }
    let unknown = match estimate.unknown {
        0 => String::new(),
        1 => "; 1 price unknown, not counted".into(),
        n => format!("; {n} prices unknown, not counted"),
    };
    let range = match estimate.range {
        (low, high) if (high - low).abs() > 1e-9 => format!(", {}–{}/h as node groups scale", dollars(low), dollars(high)),
        _ => String::new(),
    };
    let _ = writeln!(out, "  Total: {}{range}{unknown}", hourly_and_monthly(estimate.hourly, false));
}

/// The plan's cost section: what each priced resource costs an hour once applied, the total,
/// and the change this plan makes (`Cost: +$110.08/h …; Capacity Block: … upfront`).
pub fn plan(cost: &PlanCost) -> String {
    let mut out = String::new();
    let fetched = cost.fetched.as_deref().map(|d| format!(", fetched {d}")).unwrap_or_default();
    if !cost.after.resources.is_empty() {
        let _ = writeln!(out, "\nWhat the stack will run costs (on-demand list prices{fetched}):");
        lines(&mut out, &cost.after);
    }
    for why in &cost.unavailable {
        let _ = writeln!(out, "Prices unavailable: {}.", why.trim_end_matches('.'));
    }
    let upfront = match cost.upfront {
        0.0 => String::new(),
        fee => format!("; Capacity Block: {} upfront, non-refundable", dollars(fee)),
    };
    let _ = writeln!(out, "Cost: {}{upfront}", hourly_and_monthly(cost.change_hourly, true));
    out
}

/// `forge cost`'s text for one stack.
pub fn stack(name: &str, file: &str, estimate: &Estimate, fetched: Option<&str>) -> String {
    let mut out = String::new();
    let fetched = fetched.map(|d| format!(", prices fetched {d}")).unwrap_or_default();
    let _ = writeln!(out, "{name} ({file}{fetched}):");
    if estimate.resources.is_empty() {
        let _ = writeln!(out, "  nothing recorded that costs money by the hour");
        return out;
    }
    lines(&mut out, estimate);
    out
}

/// `forge cost --markdown` for one stack: a table a nightly job can post.
pub fn markdown(name: &str, file: &str, estimate: &Estimate) -> String {
    let mut out = format!("### {name} (`{file}`)\n\n| resource | kind | what | share | $/hour | $/month |\n|---|---|---|---:|---:|---:|\n");
    for line in &estimate.resources {
        let (hourly, monthly) = match line.hourly {
            Some(h) => (dollars(h), format!("${}", thousands(h * HOURS_PER_MONTH, 0))),
            None => (line.not_counted.clone().unwrap_or_else(|| "unknown".into()), String::new()),
        };
        let share = share(line, estimate.hourly);
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} | {hourly} | {monthly} |",
            line.address,
            line.kind,
            line.what,
            share.trim()
        );
    }
    let _ = writeln!(
        out,
        "| **total** | | | | **{}** | **${}** |",
        dollars(estimate.hourly),
        thousands(estimate.hourly * HOURS_PER_MONTH, 0)
    );
    if estimate.unknown > 0 {
        let _ = writeln!(out, "\n{} price(s) unknown, not counted.", estimate.unknown);
    }
    out
}
