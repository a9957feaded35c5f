//! `forge validate`: check a stack file without reading state or calling a cloud.

use super::Session;
use crate::error::Exit;
use miette::Result;
use std::collections::BTreeSet;
use std::path::Path;

/// Runs `forge validate`.
pub(super) fn run(session: &Session, file: &Path) -> Result<Exit> {
    let (stack, graph) = session.load(file)?;
    let kinds: BTreeSet<&str> = stack.resources.iter().map(|r| r.kind.as_str()).collect();
    session.printer.info(&format!(
        "The stack `{}` is valid: {} resources of {} kind(s), {} dependencies, no cycles.",
        stack.name,
        stack.resources.len(),
        kinds.len(),
        graph.edge_count()
    ));
    Ok(Exit::Ok)
}
