//! `forge plan`: show (and optionally save) what `up` would do.

use super::Session;
use crate::cli::PlanOptions;
use crate::error::{CommandError, Exit};
use crate::plan::{Mode, render};
use crate::state::lock::LockMode;
use miette::Result;
use std::path::Path;

/// Runs `forge plan`.
pub(super) async fn run(session: &Session, file: &Path, options: &PlanOptions) -> Result<Exit> {
    let PlanOptions {
        out,
        json,
        detailed_exitcode,
        destroy,
        refresh,
        skip_in_cluster,
        no_cost,
    } = options;
    let (stack, graph) = match destroy {
        true => session.load(file)?,
        false => session.load_checked(file, true).await?,
    };
    session.announce(&stack.name, &stack.source.name, &stack.state);
    let (_store, _lock, loaded) = session.open_state(&stack.state, &stack.name, &stack.source.name, LockMode::Shared, "plan")?;
    let mode = if *destroy { Mode::Destroy } else { Mode::Apply };
    let drift = if *destroy {
        Default::default()
    } else {
        session.refresh(&loaded.state, &stack, !skip_in_cluster, *refresh).await?
    };
    let imports = if *destroy {
        Vec::new()
    } else {
        super::import::pending(session, &stack, &loaded.state, &drift).await?
    };
    let state = super::import::with_imports(&loaded.state, &imports);
    let mut plan = crate::plan::plan(&stack, &graph, &state, loaded.existed, mode, &session.registry, &drift)?;
    super::import::held_to_blocks(&mut plan, &imports)?;
    plan.imports = imports;
    if *skip_in_cluster {
        plan.skip_in_cluster();
    }
    session.quote(&mut plan, &loaded.state).await?;
    if !no_cost {
        session.cost(&mut plan, &state).await;
    }
    if *json {
        println!("{}", serde_json::to_string_pretty(&plan).expect("plans serialize"));
    } else {
        session.printer.plan(&render::render(&plan));
    }
    if *refresh && !destroy {
        session.dry_run(&plan).await?;
    }
    if let Some(out) = out {
        write_plan(out, &plan)?;
        session.printer.info(&format!(
            "Saved the plan to {}; apply exactly it with `forge up {}`.",
            out.display(),
            out.display()
        ));
    }
    Ok(if *detailed_exitcode && !plan.is_empty() {
        Exit::Changes
    } else {
        Exit::Ok
    })
}

fn write_plan(path: &Path, plan: &crate::plan::Plan) -> Result<()> {
    if path.extension().is_some_and(|e| e == "toml") {
        return Err(CommandError::new(
            format!("refusing to save a plan as `{}`", path.display()),
            "`.toml` names stack files, and `forge up` would read it as one; use another name, e.g. `cluster.plan`",
        )
        .into());
    }
    let tmp = path.with_extension("tmp");
    let bytes = serde_json::to_vec_pretty(plan).expect("plans serialize");
    std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path)).map_err(|e| {
        CommandError::new(
            format!("cannot write the plan to `{}`: {e}", path.display()),
            "check that the directory exists and is writable",
        )
        .into()
    })
}
