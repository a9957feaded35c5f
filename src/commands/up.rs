//! `forge up FILE|PLAN`: make the cloud match the stack, or apply a saved plan exactly.

use super::{Consent, Session};
use crate::error::{CommandError, Exit};
use crate::plan::{Mode, PLAN_FORMAT, Plan};
use crate::state::lock::LockMode;
use miette::Result;
use std::path::Path;

/// What `forge up` does besides applying the plan.
pub(super) struct Steps {
    /// Read the live resources first.
    pub refresh: bool,
    /// End by waiting until the clusters are ready for work.
    pub wait_ready: bool,
    /// Apply (and read) the in-cluster objects; `false` is `--skip-in-cluster`.
    pub in_cluster: bool,
    /// Show what the plan costs; `false` is `--no-cost`.
    pub cost: bool,
}

/// Runs `forge up`.
pub(super) async fn run(session: &Session, file: &Path, consent: Consent, steps: Steps) -> Result<Exit> {
    let Steps {
        refresh,
        wait_ready,
        in_cluster,
        cost,
    } = steps;
    if let Some(plan) = read_saved_plan(file)? {
        if !in_cluster {
            return Err(CommandError::new(
                "`--skip-in-cluster` does not apply to a saved plan: it is applied exactly as made",
                format!("make the plan with `forge plan --skip-in-cluster --out {}`", file.display()),
            )
            .into());
        }
        session.announce(&plan.stack, &plan.stack_file, &plan.state);
        let (store, _lock, loaded) = session.open_state(&plan.state, &plan.stack, &plan.stack_file, LockMode::Exclusive, "up")?;
        let lineage = loaded.existed.then_some(loaded.state.lineage);
        if lineage != plan.state_lineage || loaded.state.serial != plan.state_serial {
            return Err(CommandError::new(
                format!(
                    "saved plan is stale: it was made at state serial {} and the state is now at serial {}",
                    plan.state_serial, loaded.state.serial
                ),
                format!(
                    "the state changed since the plan was made; make a new one with `forge plan {} --out {}`",
                    plan.stack_file,
                    file.display()
                ),
            )
            .into());
        }
        let state = session.apply(&plan, &store, loaded, Consent { yes: true, ..consent }).await?;
        return ready_after(session, wait_ready, &plan, &state).await;
    }
    let (stack, graph) = session.load_checked(file, true).await?;
    session.announce(&stack.name, &stack.source.name, &stack.state);
    let (store, _lock, loaded) = session.open_state(&stack.state, &stack.name, &stack.source.name, LockMode::Exclusive, "up")?;
    let drift = session.refresh(&loaded.state, &stack, in_cluster, refresh).await?;
    let imports = super::import::pending(session, &stack, &loaded.state, &drift).await?;
    let state = super::import::with_imports(&loaded.state, &imports);
    let mut plan = crate::plan::plan(&stack, &graph, &state, loaded.existed, Mode::Apply, &session.registry, &drift)?;
    super::import::held_to_blocks(&mut plan, &imports)?;
    plan.imports = imports;
    if !in_cluster {
        plan.skip_in_cluster();
    }
    session.quote(&mut plan, &loaded.state).await?;
    if cost {
        session.cost(&mut plan, &state).await;
    }
    if refresh {
        session.dry_run(&plan).await?;
    }
    let state = session.apply(&plan, &store, loaded, consent).await?;
    ready_after(session, wait_ready, &plan, &state).await
}

/// After a successful apply (and unless `--no-wait-ready`), the plan's readiness checks,
/// against the state the apply saved.
async fn ready_after(session: &Session, wait_ready: bool, plan: &Plan, state: &crate::state::State) -> Result<Exit> {
    if !wait_ready || plan.readiness.is_empty() {
        return Ok(Exit::Ok);
    }
    wait_until_ready(session, plan, state).await
}

/// Waits for the plan's readiness checks, evaluated against the applied state, and prints
/// what each cluster reports; fails naming what is missing where.
#[cfg(any(feature = "aws", feature = "gcp"))]
async fn wait_until_ready(session: &Session, plan: &Plan, state: &crate::state::State) -> Result<Exit> {
    let mut checks = Vec::new();
    for template in &plan.readiness {
        let template = serde_json::to_value(template).expect("checks serialize");
        let value = crate::apply::evaluate(state, &template)
            .map_err(|e| CommandError::new(format!("cannot evaluate a readiness check: {e}"), "run `forge up` again"))?;
        let check: crate::readiness::Check = serde_json::from_value(value).map_err(|e| {
            CommandError::new(
                format!("a readiness check is malformed: {e}"),
                "this is a bug in forge; please report it",
            )
        })?;
        checks.push(check);
    }
    let checks = crate::provider::k8s::ready::by_cluster(checks);
    let which = match checks.len() {
        1 => "the cluster is".to_owned(),
        n => format!("the {n} clusters are"),
    };
    session
        .printer
        .info(&format!("Waiting until {which} ready for work (skip with --no-wait-ready)"));
    let cloud = session.cloud(&plan.providers);
    let printer = &session.printer;
    let status = |line: &str| printer.detail(line);
    let found = tokio::select! {
        found = crate::provider::k8s::ready::wait(&cloud, &checks, &status) => found,
        _ = tokio::signal::ctrl_c() => {
            return Err(CommandError::new(
                "interrupted while waiting for the clusters to be ready; everything is applied",
                "run `forge up` again to re-check, or pass `--no-wait-ready`",
            )
            .into());
        }
    };
    match found {
        Ok(lines) => {
            for line in lines {
                session.printer.info(&format!("Ready: {line}"));
            }
            Ok(Exit::Ok)
        }
        Err(e) => Err(CommandError::new(
            e.message,
            "the cloud objects are applied; see why the devices or claims are missing (`kubectl describe node`, the device plugin pods' logs), then run `forge up` again to re-check",
        )
        .into()),
    }
}

/// Without a cloud, no cluster to wait for.
#[cfg(not(any(feature = "aws", feature = "gcp")))]
async fn wait_until_ready(_: &Session, _: &Plan, _: &crate::state::State) -> Result<Exit> {
    Ok(Exit::Ok)
}

/// A saved plan, or `None` when the file is a stack file (`.toml`).
fn read_saved_plan(file: &Path) -> Result<Option<Plan>> {
    if file.extension().is_some_and(|e| e == "toml") {
        return Ok(None);
    }
    let text = std::fs::read_to_string(file).map_err(|e| {
        CommandError::new(
            format!("cannot read `{}`: {e}", file.display()),
            "give a stack file (`.toml`) or a plan saved with `forge plan --out`",
        )
    })?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|_| {
        CommandError::new(
            format!("`{}` is neither a stack file (`.toml`) nor a saved plan", file.display()),
            "stack files end in `.toml`; saved plans come from `forge plan FILE --out PLAN`",
        )
    })?;
    let format = value.get("format_version").and_then(serde_json::Value::as_u64);
    if format != Some(u64::from(PLAN_FORMAT)) {
        return Err(CommandError::new(
            format!(
                "`{}` is not a plan this forge can apply (format {})",
                file.display(),
                format.map_or("missing".into(), |f| f.to_string())
            ),
            "make the plan again with this forge's `forge plan --out`",
        )
        .into());
    }
    let plan = serde_json::from_value(value).map_err(|e| {
        CommandError::new(
            format!("`{}` is a damaged plan: {e}", file.display()),
            "make the plan again with `forge plan --out`",
        )
    })?;
    Ok(Some(plan))
}
