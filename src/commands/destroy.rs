//! `forge destroy`: delete everything the state holds, dependents first.

use super::{Consent, Session};
use crate::error::Exit;
use crate::plan::Mode;
use crate::state::lock::LockMode;
use miette::Result;
use std::path::Path;

/// Runs `forge destroy`. Destroying is the request itself, so the plan's data losses need no
/// further flag.
pub(super) async fn run(session: &Session, file: &Path, yes: bool) -> Result<Exit> {
    let (stack, graph) = session.load(file)?;
    session.announce(&stack.name, &stack.source.name, &stack.state);
    let (store, _lock, loaded) = session.open_state(&stack.state, &stack.name, &stack.source.name, LockMode::Exclusive, "destroy")?;
    let plan = crate::plan::plan(
        &stack,
        &graph,
        &loaded.state,
        loaded.existed,
        Mode::Destroy,
        &session.registry,
        &Default::default(),
    )?;
    session
        .apply(
            &plan,
            &store,
            loaded,
            Consent {
                yes,
                data_loss: true,
                purchase: false,
            },
        )
        .await?;
    Ok(Exit::Ok)
}
