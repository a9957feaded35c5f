//! `forge state list|show|rm|unlock`.

use super::Session;
use crate::cli::StateCommand;
use crate::error::{CommandError, Exit};
use crate::schema::suggestion;
use crate::state::lock::LockMode;
use crate::state::{Event, Store};
use miette::Result;

/// Runs a `forge state` subcommand.
pub fn run(session: &Session, cmd: StateCommand) -> Result<Exit> {
    match cmd {
        StateCommand::List { file } => {
            let (stack, _) = session.load(&file)?;
            session.announce(&stack.name, &stack.source.name, &stack.state);
            let (_store, _lock, loaded) = session.open_state(&stack.state, &stack.name, LockMode::Shared, "state list")?;
            for r in loaded.state.resources.values() {
                println!(
                    "{}\t{}\t{}\t{}",
                    r.address,
                    r.kind,
                    serde_json::to_value(r.status).expect("json").as_str().unwrap_or("?"),
                    r.id.as_deref().unwrap_or("-")
                );
            }
            Ok(Exit::Ok)
        }
        StateCommand::Show { file, address } => {
            let (stack, _) = session.load(&file)?;
            session.announce(&stack.name, &stack.source.name, &stack.state);
            let (_store, _lock, loaded) = session.open_state(&stack.state, &stack.name, LockMode::Shared, "state show")?;
            let record = find(&loaded.state, &address)?;
            println!("{}", serde_json::to_string_pretty(record).expect("json"));
            Ok(Exit::Ok)
        }
        StateCommand::Rm { file, address } => {
            let (stack, _) = session.load(&file)?;
            session.announce(&stack.name, &stack.source.name, &stack.state);
            let (store, _lock, loaded) = session.open_state(&stack.state, &stack.name, LockMode::Exclusive, "state rm")?;
            let mut state = loaded.state;
            let id = find(&state, &address)?.id.clone();
            store.record(&mut state, vec![Event::Remove(address.clone())])?;
            store.compact(&state)?;
            session.printer.info(&format!(
                "Removed `{address}` from the state. Its cloud object ({}) still exists and forge no longer manages it; the next `forge up` creates a new one if the stack still declares it.",
                id.as_deref().unwrap_or("no id recorded")
            ));
            Ok(Exit::Ok)
        }
        StateCommand::Unlock { file, lock_id, force } => {
            let (stack, _) = session.load(&file)?;
            session.announce(&stack.name, &stack.source.name, &stack.state);
            let info = Store::open(&stack.state)?.unlock(&lock_id, force)?;
            session.printer.info(&format!("Released the lock held by {info}."));
            Ok(Exit::Ok)
        }
    }
}

fn find<'s>(state: &'s crate::state::State, address: &str) -> Result<&'s crate::state::ResourceRecord> {
    state.resources.get(address).ok_or_else(|| {
        let known: Vec<&str> = state.resources.keys().map(String::as_str).collect();
        CommandError::new(
            format!("no resource `{address}` in the state of `{}`", state.stack),
            suggestion(address, &known),
        )
        .into()
    })
}
