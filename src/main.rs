//! The `forge` binary: arguments → command → rendered error → exit code.

use clap::Parser;
use forge::cli::Cli;
use std::io::IsTerminal;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let color = !cli.global.no_color && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stderr().is_terminal();
    let _ = miette::set_hook(Box::new(move |_| {
        let mut theme = if color {
            miette::GraphicalTheme::unicode()
        } else {
            miette::GraphicalTheme::unicode_nocolor()
        };
        theme.characters.error = "error:".into();
        Box::new(miette::GraphicalReportHandler::new_themed(theme).with_width(100))
    }));
    match forge::commands::run(cli) {
        Ok(exit) => ExitCode::from(exit.code()),
        Err(report) => {
            eprintln!("{report:?}");
            ExitCode::from(1)
        }
    }
}
