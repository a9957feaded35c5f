//! `forge cost FILE...`: what each stack's recorded state costs to run now, per resource, at the
//! clouds' list prices; text, JSON or Markdown (for a nightly job to post). Read-only: no lock,
//! no write.

use super::Session;
use crate::cost::{Estimate, HOURS_PER_MONTH, render};
use miette::Result;
use serde::Serialize;
use std::path::PathBuf;

/// The JSON report format (`--json`), documented in docs/cost.md.
const REPORT_FORMAT: u32 = 1;

/// How to print the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Format {
    /// Text for people.
    Text,
    /// JSON (see [`REPORT_FORMAT`]).
    Json,
    /// Markdown for a pull request or issue comment.
    Markdown,
}

/// One stack's cost.
#[derive(Debug, Serialize)]
struct StackCost {
    /// The stack's name.
    stack: String,
    /// The stack file.
    file: String,
    /// What its recorded resources cost.
    #[serde(flatten)]
    estimate: Estimate,
    /// USD a month at that rate (730 hours).
    monthly: f64,
    /// When the oldest price used was fetched.
    #[serde(skip_serializing_if = "Option::is_none")]
    fetched: Option<String>,
    /// Why prices could not be read.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    unavailable: Vec<String>,
}

/// The whole report.
#[derive(Debug, Serialize)]
struct Report<'a> {
    format_version: u32,
    /// USD an hour, all stacks.
    hourly: f64,
    /// USD a month, all stacks.
    monthly: f64,
    stacks: &'a [StackCost],
}

/// Runs `forge cost`.
pub(super) async fn run(session: &Session, files: &[PathBuf], format: Format) -> Result<crate::error::Exit> {
    let mut stacks = Vec::new();
    for file in files {
        let (stack, _graph) = session.load(file)?;
        let loaded = super::open_store(&stack.state)?.load(&stack.name)?;
        let aws = loaded.state.resources.values().any(|r| r.kind.starts_with("aws_"));
        let region = session.aws_region(&stack.providers, aws).await;
        let metered = crate::cost::view::of_state(&loaded.state, &session.registry, region.as_deref());
        let rates = crate::cost::rates(metered.iter().map(|(_, _, meter)| meter));
        let prices = crate::provider::prices::prices(&session.cloud(&stack.providers), &rates).await;
        let estimate = Estimate::of(&metered, &prices);
        stacks.push(StackCost {
            stack: stack.name.clone(),
            file: file.display().to_string(),
            monthly: estimate.hourly * HOURS_PER_MONTH,
            estimate,
            fetched: prices.fetched,
            unavailable: prices.unavailable,
        });
    }
    let hourly: f64 = stacks.iter().map(|s| s.estimate.hourly).sum();
    let text = match format {
        Format::Json => {
            let report = Report {
                format_version: REPORT_FORMAT,
                hourly,
                monthly: hourly * HOURS_PER_MONTH,
                stacks: &stacks,
            };
            serde_json::to_string_pretty(&report).expect("reports serialize") + "\n"
        }
        Format::Markdown => stacks
            .iter()
            .map(|s| render::markdown(&s.stack, &s.file, &s.estimate) + &unavailable(s))
            .collect::<Vec<_>>()
            .join("\n"),
        Format::Text => {
            let mut text: String = stacks
                .iter()
                .map(|s| render::stack(&s.stack, &s.file, &s.estimate, s.fetched.as_deref()) + &unavailable(s))
                .collect();
            if stacks.len() > 1 {
                text += &format!("All {} stacks: {}/h\n", stacks.len(), crate::cost::dollars(hourly));
            }
            text
        }
    };
    print!("{text}");
    Ok(crate::error::Exit::Ok)
}

/// The line that says why a stack's prices could not be read.
fn unavailable(stack: &StackCost) -> String {
    stack
        .unavailable
        .iter()
        .map(|why| format!("Prices unavailable: {}.\n", why.trim_end_matches('.')))
        .collect()
}
