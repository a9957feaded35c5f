//! `forge output`: the stack's outputs as of the last apply.

use super::Session;
use crate::error::{CommandError, Exit};
use crate::stack::diagnostic::suggestion;
use crate::state::lock::LockMode;
use miette::Result;
use serde_json::Value;
use std::path::Path;

/// Runs `forge output`.
pub fn run(session: &Session, file: &Path, name: Option<&str>, json: bool) -> Result<Exit> {
    let (stack, _) = session.load(file)?;
    session.announce(&stack.name, &stack.source.name, &stack.state);
    let (_store, _lock, loaded) = session.open_state(&stack.state, &stack.name, LockMode::Shared, "output")?;
    let outputs = &loaded.state.outputs;
    let Some(name) = name else {
        if json {
            println!("{}", serde_json::to_string_pretty(outputs).expect("json"));
        } else if outputs.is_empty() {
            session
                .printer
                .info("No outputs: declare them under `[outputs]` and run `forge up`.");
        } else {
            for (k, v) in outputs {
                println!("{k} = {}", crate::plan::render::value(v));
            }
        }
        return Ok(Exit::Ok);
    };
    let Some(value) = outputs.get(name) else {
        let names: Vec<&str> = outputs.keys().map(String::as_str).collect();
        let hint = if stack.outputs.contains_key(name) {
            "it is declared but not applied yet: run `forge up`".to_owned()
        } else {
            suggestion(name, &names)
        };
        return Err(CommandError::new(format!("no output `{name}` in the state of `{}`", stack.name), hint).into());
    };
    match value {
        Value::String(s) if !json => println!("{s}"),
        other => println!("{}", serde_json::to_string_pretty(other).expect("json")),
    }
    Ok(Exit::Ok)
}
