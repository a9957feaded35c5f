//! Everything a person sees: status lines, the plan, progress bars, the summary. Progress bars
//! on a terminal, plain lines otherwise, nothing with `--quiet`; machine output (`--json`) goes
//! to stdout and everything for people to stderr. The only module that uses indicatif.

use crate::apply::{Observer, Phase};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::HashMap;
use std::io::{BufRead, IsTerminal, Write};
use std::sync::Mutex;
use std::time::Duration;

/// The output policy of one run.
#[derive(Debug, Clone, Copy)]
pub struct Printer {
    quiet: bool,
    verbose: bool,
    color: bool,
    tty: bool,
}

const RED: &str = "\x1b[31m";
const GREEN: &str = "\x1b[32m";
const YELLOW: &str = "\x1b[33m";
const BOLD: &str = "\x1b[1m";
const RESET: &str = "\x1b[0m";

impl Printer {
    /// The policy from the global flags and the environment (`NO_COLOR`, whether stderr is a
    /// terminal).
    pub fn new(quiet: bool, verbose: bool, no_color: bool) -> Self {
        let tty = std::io::stderr().is_terminal();
        let color = tty && !no_color && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
        Printer {
            quiet,
            verbose,
            color,
            tty,
        }
    }

    /// Whether colour is used.
    pub fn color(&self) -> bool {
        self.color
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if self.color {
            format!("{code}{text}{RESET}")
        } else {
            text.to_owned()
        }
    }

    /// A line for people.
    pub fn info(&self, line: &str) {
        if !self.quiet {
            eprintln!("{line}");
        }
    }

    /// Extra detail shown with `-v`.
    pub fn detail(&self, line: &str) {
        if self.verbose && !self.quiet {
            eprintln!("{}", self.paint("\x1b[2m", line));
        }
    }

    /// A warning (shown even with `--quiet`).
    pub fn warn(&self, line: &str) {
        eprintln!("{} {line}", self.paint(YELLOW, "warning:"));
    }

    /// A failure that is reported but does not end the command by itself.
    pub fn error(&self, headline: &str, cause: &str) {
        eprintln!("{} {headline}\n  Caused by: {cause}", self.paint(RED, "error:"));
    }

    /// The rendered plan, coloured by each line's symbol.
    pub fn plan(&self, text: &str) {
        if self.quiet {
            return;
        }
        let mut err = std::io::stderr().lock();
        for line in text.lines() {
            let trimmed = line.trim_start();
            let code = if trimmed.starts_with("-/+") || trimmed.starts_with('~') {
                YELLOW
            } else if trimmed.starts_with('+') {
                GREEN
            } else if trimmed.starts_with('-') {
                RED
            } else if trimmed.starts_with("Plan:") || trimmed.starts_with("No changes") {
                BOLD
            } else {
                ""
            };
            let _ = writeln!(err, "{}", if code.is_empty() { line.to_owned() } else { self.paint(code, line) });
        }
    }

    /// Asks for `yes` on a terminal. Returns `None` when there is no terminal to ask on.
    pub fn confirm(&self, question: &str) -> Option<bool> {
        if !std::io::stdin().is_terminal() || !self.tty {
            return None;
        }
        eprint!("{question}\n  Only `yes` is accepted: ");
        let _ = std::io::stderr().flush();
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer).ok()?;
        Some(answer.trim() == "yes")
    }

    /// The apply progress display for `total` operations.
    pub fn progress(&self, total: usize) -> Progress {
        let multi = MultiProgress::with_draw_target(if self.tty && !self.quiet {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        });
        let overall = multi.add(ProgressBar::new(total as u64));
        overall.set_style(
            ProgressStyle::with_template("{spinner} [{bar:30}] {pos}/{len} done · {elapsed}")
                .expect("valid template")
                .progress_chars("=> "),
        );
        overall.enable_steady_tick(Duration::from_millis(120));
        Progress {
            printer: *self,
            multi,
            overall,
            bars: Mutex::new(HashMap::new()),
        }
    }
}

/// Progress of an apply: an overall bar and one line per resource in flight on a terminal,
/// one line per finished resource otherwise.
pub struct Progress {
    printer: Printer,
    multi: MultiProgress,
    overall: ProgressBar,
    bars: Mutex<HashMap<String, ProgressBar>>,
}

fn verbs(phase: Phase) -> (&'static str, &'static str, &'static str) {
    match phase {
        Phase::Create => ("+", "creating", "created"),
        Phase::Update => ("~", "updating", "updated"),
        Phase::Destroy => ("-", "deleting", "deleted"),
    }
}

impl Progress {
    fn line(&self, text: String) {
        if self.printer.quiet {
            return;
        }
        if self.printer.tty {
            let _ = self.multi.println(text);
        } else {
            eprintln!("{text}");
        }
    }

    /// Removes the bars.
    pub fn finish(&self) {
        self.overall.finish_and_clear();
        let _ = self.multi.clear();
    }
}

impl Observer for Progress {
    fn started(&self, address: &str, phase: Phase) {
        if !self.printer.tty || self.printer.quiet {
            return;
        }
        let (symbol, doing, _) = verbs(phase);
        let bar = self.multi.insert_before(&self.overall, ProgressBar::new_spinner());
        bar.set_style(ProgressStyle::with_template("  {spinner} {prefix} {msg} {elapsed}").expect("valid template"));
        bar.set_prefix(format!("{symbol} {address}"));
        bar.set_message(doing);
        bar.enable_steady_tick(Duration::from_millis(120));
        self.bars.lock().expect("progress lock").insert(address.to_owned(), bar);
    }

    fn status(&self, address: &str, text: &str) {
        match self.bars.lock().expect("progress lock").get(address) {
            Some(bar) => bar.set_message(text.to_owned()),
            None if self.printer.verbose => self.line(format!("  {address}: {text}")),
            None => {}
        }
    }

    fn finished(&self, address: &str, phase: Phase, elapsed: Duration, error: Option<&str>) {
        if let Some(bar) = self.bars.lock().expect("progress lock").remove(address) {
            bar.finish_and_clear();
            self.multi.remove(&bar);
        }
        self.overall.inc(1);
        let (symbol, _, done) = verbs(phase);
        let took = format_duration(elapsed);
        match error {
            None => self.line(format!("  {symbol} {address}: {done} in {took}")),
            Some(_) => self.line(format!("  {} {address}: failed after {took}", self.printer.paint(RED, "!"))),
        }
    }

    fn interrupted(&self, in_flight: usize, second: bool) {
        let text = if second {
            "interrupted again: no longer waiting; calls in flight stay recorded as pending and the next run resumes them".to_owned()
        } else {
            format!("interrupted: starting nothing new, waiting for {in_flight} call(s) in flight (Ctrl-C again to stop waiting)")
        };
        self.line(self.printer.paint(YELLOW, &text));
    }
}

/// `4m12s`, `12.3s`, `0.21s`.
pub fn format_duration(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs >= 60.0 {
        format!("{}m{:02}s", d.as_secs() / 60, d.as_secs() % 60)
    } else if secs >= 10.0 {
        format!("{secs:.1}s")
    } else {
        format!("{secs:.2}s")
    }
}
