//! `forge completions SHELL`: a shell completion script on stdout.

use crate::cli::Cli;
use crate::error::Exit;
use clap::CommandFactory;
use miette::Result;

/// Runs `forge completions`.
pub(super) fn run(shell: clap_complete::Shell) -> Result<Exit> {
    clap_complete::generate(shell, &mut Cli::command(), "forge", &mut std::io::stdout());
    Ok(Exit::Ok)
}
