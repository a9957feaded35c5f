//! `forge state list|show|rm|unlock`.

use super::Session;
use crate::cli::StateCommand;
use crate::error::{CommandError, Exit};
use crate::schema::suggestion;
use crate::stack::Stack;
use crate::state::lock::LockMode;
use crate::state::store::Loaded;
use crate::state::{Backend, Event, Held, LocalStore, Store};
use miette::Result;
use std::path::Path;

/// Runs a `forge state` subcommand.
pub(super) fn run(session: &Session, cmd: StateCommand) -> Result<Exit> {
    match cmd {
        StateCommand::List { file } => {
            let (_store, _lock, loaded) = open(session, &file, LockMode::Shared, "state list")?;
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
            let (_store, _lock, loaded) = open(session, &file, LockMode::Shared, "state show")?;
            let record = find(&loaded.state, &address)?;
            println!("{}", serde_json::to_string_pretty(record).expect("json"));
            Ok(Exit::Ok)
        }
        StateCommand::Rm { file, address } => {
            let (store, _lock, loaded) = open(session, &file, LockMode::Exclusive, "state rm")?;
            let mut state = loaded.state;
            let record = find(&state, &address)?;
            let (id, read) = (record.id.clone(), record.status == crate::state::Status::Read);
            store.record(&mut state, vec![Event::Remove(address.clone())])?;
            store.compact(&state)?;
            let id = id.as_deref().unwrap_or("no id recorded");
            session.printer.info(&if read {
                format!("Removed `{address}` from the state: forge forgets what it read of {id}, which it never managed; the next plan reads it again if the stack still says `existing`.")
            } else {
                format!("Removed `{address}` from the state. Its cloud object ({id}) still exists and forge no longer manages it; the next `forge up` creates a new one if the stack still declares it.")
            });
            Ok(Exit::Ok)
        }
        StateCommand::Unlock { file, lock_id, force } => {
            let stack = announced(session, &file)?;
            let info = super::open_store(&stack.state)?.unlock(&lock_id, force)?;
            session.printer.info(&format!("Released the lock held by {info}."));
            Ok(Exit::Ok)
        }
        StateCommand::Push { file, from } => copy(session, &file, Direction::Push, from),
        StateCommand::Pull { file } => copy(session, &file, Direction::Pull, None),
    }
}

/// The stack in `file`, once it is said which stack and state the command works on.
fn announced(session: &Session, file: &Path) -> Result<Stack> {
    let (stack, _) = session.load(file)?;
    session.announce(&stack.name, &stack.source.name, &stack.state);
    Ok(stack)
}

/// The state of the stack in `file` ([`announced`]), locked (`mode`) for `operation` and loaded.
fn open(session: &Session, file: &Path, mode: LockMode, operation: &str) -> Result<(Store, Held, Loaded)> {
    let stack = announced(session, file)?;
    session.open_state(&stack.state, &stack.name, &stack.source.name, mode, operation)
}

/// Which way `state push|pull` copies.
#[derive(Clone, Copy, PartialEq)]
enum Direction {
    /// Local file → remote state.
    Push,
    /// Remote state → local file.
    Pull,
}

/// Copies the state between the local file (`from`, else `[state] path`) and the remote
/// backend, both locked, refusing to overwrite a state of another lineage or with a newer
/// serial. A pushed rescue file is removed.
fn copy(session: &Session, file: &Path, direction: Direction, from: Option<std::path::PathBuf>) -> Result<Exit> {
    let stack = announced(session, file)?;
    if matches!(stack.state, Backend::Local { .. }) {
        return Err(CommandError::new(
            format!(
                "`{}` keeps its state locally: there is no remote state to copy to or from",
                stack.source.name
            ),
            "set `[state] backend = \"s3\"` (or `\"gcs\"`) and `bucket` first",
        )
        .into());
    }
    let local_path = from.unwrap_or_else(|| stack.state.path().to_owned());
    let local = Store::Local(LocalStore::new(&local_path));
    let remote = super::open_store(&stack.state)?;
    let (from, to, from_name, to_name) = match direction {
        Direction::Push => (&local, &remote, local_path.display().to_string(), stack.state.location()),
        Direction::Pull => (&remote, &local, stack.state.location(), local_path.display().to_string()),
    };
    let (from_lock, _) = from.lock(LockMode::Exclusive, "state copy", session.global.lock_timeout)?;
    let (_to_lock, _) = to.lock(LockMode::Exclusive, "state copy", session.global.lock_timeout)?;
    let source = from.load(&stack.name)?;
    if !source.existed {
        return Err(CommandError::new(
            format!("`{from_name}` holds no state to copy"),
            "check `[state]` and the stack's name",
        )
        .into());
    }
    let target = to.load(&stack.name)?;
    let (s, t) = (&source.state, &target.state);
    if target.existed {
        if t.lineage != s.lineage {
            return Err(CommandError::new(
                format!("`{to_name}` holds another state (lineage {}), not a copy of `{from_name}` (lineage {})", t.lineage, s.lineage),
                "forge never overwrites a state of another lineage: point `[state]` elsewhere, or remove that state by hand if it is a leftover",
            )
            .into());
        }
        if t.serial > s.serial {
            return Err(CommandError::new(
                format!(
                    "`{to_name}` is newer (serial {}) than `{from_name}` (serial {})",
                    t.serial, s.serial
                ),
                "copy the other way, or run from the newer state",
            )
            .into());
        }
    }
    to.compact(s)?;
    let rescued = direction == Direction::Push && remote.rescue_path() == Some(local_path.as_path());
    if rescued {
        drop(from_lock);
        let _ = std::fs::remove_file(LocalStore::new(&local_path).lock_path());
        std::fs::remove_file(&local_path).map_err(|e| {
            CommandError::new(
                format!("pushed, but cannot remove the rescue file `{from_name}`: {e}"),
                "remove it by hand: forge refuses to change the stack while it exists",
            )
        })?;
    }
    let next = match direction {
        Direction::Push if rescued => "the rescue file is removed: forge runs from the bucket again".to_owned(),
        Direction::Push => {
            format!("forge now uses it; the local files at {from_name} are left as they were: remove them once you trust the copy")
        }
        Direction::Pull => "set `[state] backend = \"local\"` to run from it".into(),
    };
    session.printer.info(&format!(
        "Copied the state of `{}` ({} resources, serial {}, lineage {}) from {from_name} to {to_name}; {next}.",
        stack.name,
        s.resources.len(),
        s.serial,
        s.lineage
    ));
    Ok(Exit::Ok)
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
