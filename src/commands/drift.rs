//! `forge drift FILE...`: the live cloud against what forge last applied, read-only. No lock is
//! taken and nothing is written; stacks are checked concurrently and the exit code is the worst
//! of them.

use super::Session;
use crate::error::{CommandError, Exit};
use crate::plan::drift::{Drift, IgnoreRules};
use crate::plan::{Action, render};
use miette::Result;
use serde::Serialize;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// The JSON report format (`--json`), documented in docs/drift.md.
pub(super) const REPORT_FORMAT: u32 = 1;

/// How to print the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Format {
    /// Text for people, grouped by resource.
    Text,
    /// JSON (see [`REPORT_FORMAT`]).
    Json,
    /// Markdown for a pull request or issue comment.
    Markdown,
}

/// How one stack came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Outcome {
    /// Live matches applied, and the file matches applied.
    Clean,
    /// Only the stack file differs from what was applied.
    Pending,
    /// Something changed, went or appeared outside forge.
    Drift,
    /// The check could not be made.
    Error,
}

impl Outcome {
    /// The exit code: 0 clean, 3 pending only, 2 drift, 1 error.
    fn exit(self) -> Exit {
        match self {
            Outcome::Clean => Exit::Ok,
            Outcome::Pending => Exit::Pending,
            Outcome::Drift => Exit::Drift,
            Outcome::Error => Exit::Error,
        }
    }
}

/// A change the stack file asks for that was never applied (not drift).
#[derive(Debug, Clone, Serialize)]
pub(super) struct PendingChange {
    /// The resource.
    pub address: String,
    /// Its kind.
    pub kind: String,
    /// What `up` would do.
    pub action: Action,
    /// The attributes that differ from what was applied.
    pub attributes: Vec<String>,
    /// The id of the object an `[[import]]` entry of the stack takes into this block, not
    /// imported yet: `up` reads, marks and records it instead of creating one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub import: Option<String>,
}

/// One stack's report.
#[derive(Debug, Serialize)]
pub(super) struct StackReport {
    /// The stack's name (the file's name when it did not load).
    pub stack: String,
    /// The stack file.
    pub file: String,
    /// The state it read: where, and which backend (`s3://bucket/key (s3)`).
    pub state: Option<String>,
    /// How it came out.
    pub outcome: Outcome,
    /// Its exit code alone.
    pub exit_code: u8,
    /// "apply in progress since …" when a run holds the state's write lock.
    pub apply_in_progress: Option<String>,
    /// What drifted, by class.
    #[serde(flatten)]
    pub drift: Drift,
    /// Class 4: edits of the stack file not applied yet.
    pub pending: Vec<PendingChange>,
    /// Why the check failed.
    pub error: Option<String>,
    /// Wall time of the check.
    pub seconds: f64,
    /// The failure itself, with its hint, for a single stack's run.
    #[serde(skip)]
    failure: Option<miette::Report>,
    /// The `--ignore` entries that named a resource of this stack.
    #[serde(skip)]
    ignores_used: Vec<String>,
}

/// The whole report: one entry per stack file, and the exit code.
#[derive(Debug, Serialize)]
struct Report<'a> {
    format_version: u32,
    exit_code: u8,
    stacks: &'a [StackReport],
}

/// Runs `forge drift`.
pub(super) async fn run(session: &Session, files: &[PathBuf], format: Format, ignore: &[String]) -> Result<Exit> {
    let mut reports: Vec<StackReport> = futures::future::join_all(files.iter().map(|f| check(session, f, ignore))).await;
    if let [only] = &mut reports[..]
        && let Some(failure) = only.failure.take()
    {
        // One stack: the error alone, with its hint, as every command reports it.
        return Err(failure);
    }
    if reports.iter().all(|r| r.outcome != Outcome::Error)
        && let Some(unused) = ignore.iter().find(|i| !reports.iter().any(|r| r.ignores_used.contains(i)))
    {
        return Err(CommandError::new(
            format!("`--ignore {unused}` names no resource of the stacks checked"),
            "write `--ignore ADDRESS` or `--ignore ADDRESS.ATTRIBUTE` (`--ignore aws_vpc.main.tags.team`); `forge state list FILE` lists the addresses",
        )
        .into());
    }
    let text = match format {
        Format::Json => {
            let exit_code = worst(&reports).code();
            serde_json::to_string_pretty(&Report {
                format_version: REPORT_FORMAT,
                exit_code,
                stacks: &reports,
            })
            .expect("reports serialize")
                + "\n"
        }
        Format::Markdown => markdown(&reports),
        Format::Text => text(&reports),
    };
    print!("{text}");
    Ok(worst(&reports))
}

/// The worst outcome's exit code: an error, then drift, then pending changes.
fn worst(reports: &[StackReport]) -> Exit {
    reports.iter().map(|r| r.outcome).max().unwrap_or(Outcome::Clean).exit()
}

/// The stack's ignore rules with the `--ignore` entries added that name one of its resources
/// (or one in its `state`), and those entries.
fn ignore_rules(stack: &crate::stack::Stack, state: &crate::state::State, ignore: &[String]) -> (IgnoreRules, Vec<String>) {
    let mut rules = IgnoreRules::of_stack(stack);
    let addresses: Vec<&str> = stack
        .resources
        .iter()
        .map(|r| r.address.as_str())
        .chain(state.resources.keys().map(String::as_str))
        .collect();
    let mut used = Vec::new();
    for entry in ignore {
        if let Some((address, path)) = split_ignore(entry, &addresses) {
            rules.add(address, path);
            used.push(entry.clone());
        }
    }
    (rules, used)
}

/// Splits `ADDR[.ATTR]` at the longest address of the stack it starts with.
fn split_ignore<'e>(entry: &'e str, addresses: &[&str]) -> Option<(&'e str, &'e str)> {
    addresses
        .iter()
        .filter(|a| entry == **a || entry.strip_prefix(**a).is_some_and(|rest| rest.starts_with('.')))
        .max_by_key(|a| a.len())
        .map(|a| (&entry[..a.len()], entry[a.len()..].trim_start_matches('.')))
}

/// Checks one stack.
async fn check(session: &Session, file: &Path, ignore: &[String]) -> StackReport {
    let started = std::time::Instant::now();
    let mut report = StackReport {
        stack: file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default(),
        file: file.display().to_string(),
        state: None,
        outcome: Outcome::Error,
        exit_code: 1,
        apply_in_progress: None,
        drift: Drift::default(),
        pending: Vec::new(),
        error: None,
        seconds: 0.0,
        failure: None,
        ignores_used: Vec::new(),
    };
    let checked = check_loaded(session, file, ignore, &mut report).await;
    if let Err(e) = checked {
        report.error = Some(e.chain().map(ToString::to_string).collect::<Vec<_>>().join(": "));
        report.failure = Some(e);
        report.outcome = Outcome::Error;
    }
    report.exit_code = report.outcome.exit().code();
    report.seconds = started.elapsed().as_secs_f64();
    report
}

/// Loads, reads and compares one stack into `report`.
async fn check_loaded(session: &Session, file: &Path, ignore: &[String], report: &mut StackReport) -> Result<()> {
    let (stack, graph) = session.load_checked(file, false).await?;
    let store = super::open_store(&stack.state)?;
    let loaded = store.load(&stack.name)?;
    let (rules, ignores_used) = ignore_rules(&stack, &loaded.state, ignore);
    report.stack.clone_from(&stack.name);
    report.state = Some(format!("{} ({})", stack.state.location(), stack.state.name()));
    report.ignores_used = ignores_used;
    report.apply_in_progress = store.holder().map(|h| {
        format!(
            "apply in progress since {} (`{}` by {}, pid {})",
            h.started, h.operation, h.who, h.pid
        )
    });
    let mut drift = session.observe(&loaded.state, &stack, &rules, true).await?;
    let mut read = Drift::default();
    session.read_existing(&stack, &loaded.state, &mut read, true, &rules).await?;
    drift.read_changed = std::mem::take(&mut read.read_changed);
    drift.read_gone = std::mem::take(&mut read.read_gone);
    // What `up` would do, from the state alone (the reads as found now): nothing to say while
    // an object the stack reads is gone.
    let plan = if drift.read_gone.is_empty() {
        Some(crate::plan::plan(
            &stack,
            &graph,
            &loaded.state,
            loaded.existed,
            crate::plan::Mode::Apply,
            &session.registry,
            &read,
        )?)
    } else {
        None
    };
    report.pending = plan
        .iter()
        .flat_map(|p| &p.changes)
        .map(|c| PendingChange {
            address: c.address.clone(),
            kind: c.kind.clone(),
            action: c.action,
            attributes: match (&c.before, &c.after) {
                (Some(b), Some(a)) => crate::plan::diff::changed_attributes(b, a).into_iter().collect(),
                _ => Vec::new(),
            },
            import: stack
                .imports
                .iter()
                .find(|i| i.to == c.address && !loaded.state.resources.contains_key(&i.to))
                .map(|i| i.id.clone()),
        })
        .collect();
    report.outcome = if !drift.is_empty() {
        Outcome::Drift
    } else if !report.pending.is_empty() {
        Outcome::Pending
    } else {
        Outcome::Clean
    };
    report.drift = drift;
    Ok(())
}

/// What one stack's result says in a word.
fn verdict(r: &StackReport) -> &'static str {
    match r.outcome {
        Outcome::Clean => "no drift",
        Outcome::Pending => "pending changes only",
        Outcome::Drift => "drift",
        Outcome::Error => "error",
    }
}

/// The report as text for people: per stack, its drift grouped by resource, then its pending
/// changes apart; then one summary table.
fn text(reports: &[StackReport]) -> String {
    let mut out = String::new();
    for r in reports {
        let _ = writeln!(out, "stack `{}` ({}): {}", r.stack, r.file, verdict(r));
        if let Some(state) = r.state.as_ref().filter(|s| !s.ends_with("(local)")) {
            let _ = writeln!(out, "  state: {state}");
        }
        if let Some(lock) = &r.apply_in_progress {
            let _ = writeln!(out, "  note: {lock}; what it changes may show here until it finishes");
        }
        if let Some(error) = &r.error {
            let _ = writeln!(out, "  error: {error}");
        }
        out.push_str(&render::drift(&r.drift));
        for life in &r.drift.lives {
            let _ = writeln!(out, "  {} ({}) is {}", life.address, life.id, life.state);
        }
        if r.drift.ignored > 0 {
            let _ = writeln!(out, "  ({} difference(s) left out by ignore rules)", r.drift.ignored);
        }
        if !r.pending.is_empty() {
            let _ = writeln!(out, "  pending changes (the stack file differs from what was applied; not drift):");
            for p in &r.pending {
                let _ = match &p.import {
                    Some(id) => writeln!(out, "    <= import {} ({}, {id})", p.address, p.kind),
                    None => writeln!(out, "    {} {} ({}){}", p.action.symbol(), p.address, p.kind, attributes_note(p)),
                };
            }
        }
        out.push('\n');
    }
    out.push_str(&table(reports, false));
    out
}

fn attributes_note(p: &PendingChange) -> String {
    if p.attributes.is_empty() {
        String::new()
    } else {
        format!(": {}", p.attributes.join(", "))
    }
}

/// The summary table, plain or Markdown.
fn table(reports: &[StackReport], markdown: bool) -> String {
    let header = ["stack", "changed", "deleted", "unmanaged", "pending", "result", "exit", "time"];
    let rows: Vec<[String; 8]> = reports
        .iter()
        .map(|r| {
            [
                r.stack.clone(),
                (r.drift.changed.len() + r.drift.read_changed.len()).to_string(),
                (r.drift.deleted.len() + r.drift.read_gone.len()).to_string(),
                r.drift.unmanaged.len().to_string(),
                r.pending.len().to_string(),
                verdict(r).to_owned(),
                r.exit_code.to_string(),
                format!("{:.2}s", r.seconds),
            ]
        })
        .collect();
    let mut out = String::new();
    if markdown {
        let _ = writeln!(out, "| {} |", header.join(" | "));
        let _ = writeln!(out, "|{}", "---|".repeat(header.len()));
        for row in &rows {
            let _ = writeln!(out, "| {} |", row.join(" | "));
        }
        return out;
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|i| rows.iter().map(|r| r[i].len()).chain([header[i].len()]).max().unwrap_or(0))
        .collect();
    let line = |cells: Vec<&str>| {
        cells
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<w$}", w = widths[i]))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_owned()
    };
    let _ = writeln!(out, "{}", line(header.to_vec()));
    for row in &rows {
        let _ = writeln!(out, "{}", line(row.iter().map(String::as_str).collect()));
    }
    out
}

/// The report as Markdown: a summary table, then a section per stack with drift, pending
/// changes, or objects whose life the cloud runs (a Capacity Block's state).
fn markdown(reports: &[StackReport]) -> String {
    let mut out = String::from("## forge drift\n\n");
    out.push_str(&table(reports, true));
    for r in reports.iter().filter(|r| r.outcome != Outcome::Clean || !r.drift.lives.is_empty()) {
        let _ = writeln!(out, "\n### `{}` — {}\n", r.stack, verdict(r));
        if let Some(lock) = &r.apply_in_progress {
            let _ = writeln!(out, "> {lock}\n");
        }
        if let Some(error) = &r.error {
            let _ = writeln!(out, "```\n{error}\n```");
        }
        if !r.drift.is_empty() {
            let _ = writeln!(out, "| class | resource | id | what |\n|---|---|---|---|");
            let changed = r.drift.changed.iter().map(|c| ("changed outside forge", c));
            let read = r.drift.read_changed.iter().map(|c| ("existing, changed where used", c));
            for (class, c) in changed.chain(read) {
                let what: Vec<String> = c.attributes.iter().flat_map(render::attribute_drift).collect();
                let _ = writeln!(out, "| {class} | `{}` | `{}` | {} |", c.address, c.id, cell(&what.join("<br>")));
            }
            for d in &r.drift.deleted {
                let _ = writeln!(out, "| deleted outside forge | `{}` | `{}` | |", d.address, d.id);
            }
            for u in &r.drift.unmanaged {
                let _ = writeln!(
                    out,
                    "| unmanaged | `{}` ({}) | `{}` | tagged for this stack, not in its state |",
                    u.tagged_address, u.kind, u.id
                );
            }
            for g in &r.drift.read_gone {
                let _ = writeln!(
                    out,
                    "| existing, gone | `{}` | `{}` | nothing matches its `existing` |",
                    g.address, g.id
                );
            }
        }
        for life in &r.drift.lives {
            let _ = writeln!(out, "\n- `{}` (`{}`) is {}", life.address, life.id, cell(&life.state));
        }
        if !r.pending.is_empty() {
            let _ = writeln!(out, "\nPending changes (not drift):\n");
            for p in &r.pending {
                let _ = match &p.import {
                    Some(id) => writeln!(out, "- `<= import` `{}` (`{id}`)", p.address),
                    None => writeln!(out, "- `{}` `{}`{}", p.action.symbol(), p.address, cell(&attributes_note(p))),
                };
            }
        }
    }
    out
}

/// Text made safe for a Markdown table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ignore_entries_split_at_the_longest_address() {
        let addresses = ["eks.main.cluster", "eks.main.cluster_role", "aws_vpc.main"];
        assert_eq!(
            split_ignore("aws_vpc.main.tags.team", &addresses),
            Some(("aws_vpc.main", "tags.team"))
        );
        assert_eq!(split_ignore("aws_vpc.main", &addresses), Some(("aws_vpc.main", "")));
        assert_eq!(
            split_ignore("eks.main.cluster_role.tags", &addresses),
            Some(("eks.main.cluster_role", "tags"))
        );
        assert_eq!(split_ignore("aws_vpc.mainly", &addresses), None);
    }
}
