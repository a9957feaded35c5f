//! `forge graph`: print the dependency graph.

use super::Session;
use crate::error::Exit;
use crate::graph::render::{Format, render};
use miette::Result;
use std::path::Path;

/// Runs `forge graph`.
pub(super) async fn run(session: &Session, file: &Path, format: Format) -> Result<Exit> {
    let (stack, graph) = session.load_checked(file, false).await?;
    print!("{}", render(&stack, &graph, format));
    Ok(Exit::Ok)
}
