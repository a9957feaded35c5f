//! `forge output`: the stack's outputs as of the last apply, or one output of a component or
//! attribute of a resource (`fsx.data.pv_yaml`, `aws_vpc.main.id`) read from the state.

use super::Session;
use crate::error::{CommandError, Exit};
use crate::schema::suggestion;
use crate::stack::Stack;
use crate::state::State;
use crate::state::lock::LockMode;
use miette::Result;
use serde_json::Value;
use std::path::Path;

/// Runs `forge output`.
pub(super) fn run(session: &Session, file: &Path, name: Option<&str>, json: bool) -> Result<Exit> {
    let (stack, _) = session.load(file)?;
    session.announce(&stack.name, &stack.source.name, &stack.state);
    let (_store, _lock, loaded) = session.open_state(&stack.state, &stack.name, &stack.source.name, LockMode::Shared, "output")?;
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
    let attribute = || attribute(&stack, &loaded.state, name);
    let Some(value) = outputs.get(name).cloned().or_else(attribute) else {
        let names: Vec<&str> = outputs.keys().map(String::as_str).collect();
        let hint = if stack.outputs.contains_key(name) {
            "it is declared but not applied yet: run `forge up`".to_owned()
        } else {
            suggestion(name, &names)
        };
        return Err(CommandError::new(format!("no output `{name}` in the state of `{}`", stack.name), hint).into());
    };
    match &value {
        Value::String(s) if !json => println!("{s}"),
        other => println!("{}", serde_json::to_string_pretty(other).expect("json")),
    }
    Ok(Exit::Ok)
}

/// A component's output (`fsx.data.pv_yaml`) or a resource's attribute (`aws_vpc.main.id`) as
/// the state has it; `None` when the name is neither, or it is not applied yet.
fn attribute(stack: &Stack, state: &State, name: &str) -> Option<Value> {
    let segments: Vec<String> = name.split('.').map(str::to_owned).collect();
    let component = (2..segments.len()).rev().find_map(|split| {
        let outputs = stack.component_outputs.get(&segments[..split].join("."))?;
        crate::template::get_path(&Value::Object(outputs.clone()), &segments[split..]).cloned()
    });
    let template = component.unwrap_or_else(|| Value::String(format!("${{{name}}}")));
    crate::apply::evaluate(state, &template).ok().filter(|v| !v.is_null())
}
