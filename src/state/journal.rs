//! The append-only journal: one JSON line per state change, made durable in groups. A writer
//! thread collects every line sent while the previous write ran and makes them durable with one
//! more — an fsync of the local file, or one new object of a remote state ([`Sink`]) — so
//! persistence costs O(1) per change however large the state is.

use super::{ResourceRecord, StateError};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread::JoinHandle;
use tokio::sync::watch;
use uuid::Uuid;

/// One state change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Event {
    /// Insert or replace a resource record.
    Put(ResourceRecord),
    /// Forget a resource.
    Remove(String),
    /// Replace the stack outputs.
    Outputs(Map<String, Value>),
    /// Record the digests of bundles (by URL), beside those recorded before.
    Bundles(std::collections::BTreeMap<String, String>),
}

/// A journal line: the event and the serial it brings the state to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The state's lineage; lines of another lineage are ignored.
    pub lineage: Uuid,
    /// The state's serial after this event.
    pub serial: u64,
    /// The change.
    #[serde(flatten)]
    pub event: Event,
}

/// How far the journal is durable, or why it stopped.
#[derive(Debug, Clone, Default)]
struct Durable {
    upto: u64,
    error: Option<String>,
}

/// Where the writer puts each group of lines, durably, before it reports them durable.
pub trait Sink: Send + 'static {
    /// Writes `lines` (whole lines, the first of which brings the state to `first_serial`).
    fn write(&mut self, first_serial: u64, lines: &[u8]) -> Result<(), String>;
}

impl Sink for File {
    fn write(&mut self, _first_serial: u64, lines: &[u8]) -> Result<(), String> {
        self.write_all(lines).and_then(|()| self.sync_data()).map_err(|e| e.to_string())
    }
}

/// A queued line: its ticket, the serial it brings the state to, its bytes.
type Line = (u64, u64, Vec<u8>);

/// A handle on the journal writer.
pub struct Journal {
    path: PathBuf,
    lines: Option<mpsc::Sender<Line>>,
    durable: watch::Receiver<Durable>,
    sent: u64,
    writer: Option<JoinHandle<()>>,
}

/// A promise that a line will be durable: wait on it with [`Journal::wait`].
#[derive(Debug, Clone, Copy)]
pub struct Ticket(u64);

impl Journal {
    /// Starts the writer thread over `sink`; `path` names the journal in errors.
    pub fn open(path: PathBuf, sink: impl Sink) -> Self {
        let (tx, rx) = mpsc::channel::<Line>();
        let (durable_tx, durable_rx) = watch::channel(Durable::default());
        let writer = std::thread::spawn(move || write_loop(sink, rx, durable_tx));
        Journal {
            path,
            lines: Some(tx),
            durable: durable_rx,
            sent: 0,
            writer: Some(writer),
        }
    }

    /// Queues an entry; it is durable once its ticket is.
    pub fn append(&mut self, entry: &Entry) -> Ticket {
        let mut line = serde_json::to_vec(entry).expect("state entries serialize");
        line.push(b'\n');
        self.sent += 1;
        // A send fails only when the writer stopped on an error; `wait` reports that error.
        let _ = self.lines.as_ref().expect("journal open").send((self.sent, entry.serial, line));
        Ticket(self.sent)
    }

    /// Whether the writer stopped on an error: nothing appended from now on becomes durable.
    pub fn failed(&self) -> bool {
        self.durable.borrow().error.is_some()
    }

    /// A way to wait for tickets from another task.
    pub fn waiter(&self) -> Waiter {
        Waiter {
            path: self.path.clone(),
            durable: self.durable.clone(),
        }
    }

    /// Applies `events` to `state`, appends them, and makes them durable (one-off changes like
    /// `state rm`).
    pub fn commit(mut self, state: &mut super::State, events: Vec<Event>) -> Result<(), StateError> {
        for event in events {
            state.apply(event.clone());
            self.append(&Entry {
                lineage: state.lineage,
                serial: state.serial,
                event,
            });
        }
        self.close()
    }

    /// Makes everything appended durable and stops the writer.
    pub fn close(mut self) -> Result<(), StateError> {
        let last = Ticket(self.sent);
        self.lines = None;
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
        self.waiter().check(last)
    }
}

/// Waits until journal lines are durable.
#[derive(Clone)]
pub struct Waiter {
    path: PathBuf,
    durable: watch::Receiver<Durable>,
}

impl Waiter {
    /// Resolves once the ticket's line is on disk; fails if the journal cannot be written.
    pub async fn wait(&mut self, ticket: Ticket) -> Result<(), StateError> {
        let _ = self.durable.wait_for(|d| d.upto >= ticket.0 || d.error.is_some()).await;
        self.check(ticket)
    }

    fn check(&self, ticket: Ticket) -> Result<(), StateError> {
        let d = self.durable.borrow();
        match &d.error {
            Some(e) if d.upto < ticket.0 => Err(StateError::Write {
                path: self.path.clone(),
                message: e.clone(),
            }),
            _ => Ok(()),
        }
    }
}

fn write_loop(mut sink: impl Sink, rx: mpsc::Receiver<Line>, durable: watch::Sender<Durable>) {
    while let Ok((mut upto, first_serial, first)) = rx.recv() {
        let mut batch = first;
        while let Ok((seq, _, line)) = rx.try_recv() {
            batch.extend_from_slice(&line);
            upto = seq;
        }
        let result = sink.write(first_serial, &batch);
        let failed = result.is_err();
        durable.send_modify(|d| match result {
            Ok(()) => d.upto = upto,
            Err(e) => d.error = Some(e),
        });
        if failed {
            return;
        }
    }
}

/// Reads the complete lines of a journal; a torn or garbled tail is dropped, never fatal.
/// Returns the entries and whether anything was dropped.
pub fn read_entries(bytes: &[u8]) -> (Vec<Entry>, bool) {
    let mut entries = Vec::new();
    let mut rest = bytes;
    while let Some(end) = rest.iter().position(|&b| b == b'\n') {
        match serde_json::from_slice::<Entry>(&rest[..end]) {
            Ok(entry) => entries.push(entry),
            Err(_) => return (entries, true),
        }
        rest = &rest[end + 1..];
    }
    (entries, !rest.is_empty())
}
