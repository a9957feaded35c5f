//! Exit codes and the errors that end a command.

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Success, or no changes.
    Ok,
    /// Changes present (`plan --detailed-exitcode`).
    Changes,
    /// `drift`: something changed, went or appeared outside forge.
    Drift,
    /// `drift`: only the stack file differs from what was applied.
    Pending,
    /// `drift` of several stacks: at least one could not be checked (each is reported).
    Error,
}

impl Exit {
    /// The process exit code (errors exit with 1).
    pub fn code(self) -> u8 {
        match self {
            Exit::Ok => 0,
            Exit::Error => 1,
            Exit::Changes | Exit::Drift => 2,
            Exit::Pending => 3,
        }
    }
}

/// A command-level error with a hint.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[error("{message}")]
pub struct CommandError {
    /// First line, lowercase, addresses in backticks.
    pub message: String,
    /// What to do about it.
    #[help]
    pub hint: Option<String>,
}

impl CommandError {
    /// An error with a hint.
    pub fn new(message: impl Into<String>, hint: impl Into<String>) -> Self {
        CommandError {
            message: message.into(),
            hint: Some(hint.into()),
        }
    }
}
