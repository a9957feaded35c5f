//! The `forge` binary: arguments → command on the one async runtime → rendered error → exit code.

use clap::Parser;
use forge::cli::Cli;
use std::io::IsTerminal;
use std::process::ExitCode;

/// How much stack each worker thread gets: the GKE client's request messages are large, and an
/// unoptimized build keeps several of them on the stack of one poll (2 MiB, tokio's default,
/// overflowed there).
const WORKER_STACK_BYTES: usize = 8 << 20;

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
    // The process's one runtime: every cloud call, state store call and wait of the command
    // runs on it.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(WORKER_STACK_BYTES)
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}\nhint: check the process's limits on threads");
            return ExitCode::from(1);
        }
    };
    let result = runtime.block_on(forge::commands::run(cli));
    // Nothing left running is waited for (a Ctrl-C listener, idle connections).
    runtime.shutdown_background();
    match result {
        Ok(exit) => ExitCode::from(exit.code()),
        Err(report) => {
            eprintln!("{report:?}");
            ExitCode::from(1)
        }
    }
}
