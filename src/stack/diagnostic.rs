//! Errors in a stack file: a message, the exact span in the file (miette renders it with
//! file:line:column), a label and a hint.

use miette::{NamedSource, SourceSpan};
use std::ops::Range;
use std::sync::Arc;

/// A problem found in a stack file.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[error("{message}")]
pub struct StackError {
    /// First line of the error, lowercase, addresses in backticks.
    pub message: String,
    #[source_code]
    source_code: NamedSource<Arc<str>>,
    #[label("{label}")]
    span: Option<SourceSpan>,
    label: String,
    #[help]
    help: Option<String>,
}

impl StackError {
    /// The 1-based line and column the error points at, if it points anywhere.
    pub fn line_col(&self) -> Option<(usize, usize)> {
        let offset = self.span?.offset();
        let text: &str = self.source_code.inner();
        let before = &text[..offset.min(text.len())];
        let line = before.matches('\n').count() + 1;
        let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
        Some((line, col))
    }
}

/// The stack file's text and name, for building errors that point into it.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// The path as the user gave it.
    pub name: String,
    /// The whole text.
    pub text: Arc<str>,
}

impl SourceFile {
    /// An error at `span` (or at no place, when `None`).
    pub fn error(
        &self,
        span: Option<Range<usize>>,
        message: impl Into<String>,
        label: impl Into<String>,
        help: Option<String>,
    ) -> StackError {
        StackError {
            message: message.into(),
            source_code: NamedSource::new(&self.name, self.text.clone()),
            span: span.map(Into::into),
            label: label.into(),
            help,
        }
    }
}
