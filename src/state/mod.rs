//! ⑤ State: what forge has built. A snapshot (`state/<stack>.json`, or an object in a bucket)
//! plus an append-only journal beside it; only the apply coordinator writes, and it records an
//! intent before every create or delete so that a crash at any instant leaves a state the next
//! run can finish.

pub mod backend;
#[cfg(feature = "gcp")]
pub mod gcs;
pub mod journal;
pub mod lock;
pub mod objects;
pub mod remote;
#[cfg(feature = "aws")]
pub mod s3;
pub mod store;

pub use backend::{Access, Backend, Held, Store};
pub use journal::{Entry, Event, Journal};
pub use lock::{LockError, LockInfo, StateLock};
pub use store::{LocalStore, StateError};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use uuid::Uuid;

/// The newest state format this forge reads and writes; it refuses to touch newer ones.
/// Version 2 holds read records ([`Status::Read`]): a state gets it with its first read
/// record, so a forge that knows only version 1 refuses that state as too new rather than
/// misreading it; every other state stays at version 1.
pub const STATE_VERSION: u32 = 2;

/// The format of a state without read records.
const PLAIN_VERSION: u32 = 1;

/// The whole state of one stack.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// Format version ([`STATE_VERSION`]).
    pub version: u32,
    /// Identifies this state's history; a saved plan only applies to the lineage it was made on.
    pub lineage: Uuid,
    /// Counts every recorded change; a saved plan only applies at the serial it was made on.
    pub serial: u64,
    /// The stack's name.
    pub stack: String,
    /// The stack's `[outputs]` as of the last apply.
    #[serde(default)]
    pub outputs: Map<String, Value>,
    /// The sha256 of each unpinned bundle (by URL) as first applied: later plans refuse a bundle
    /// whose contents changed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub bundles: BTreeMap<String, String>,
    /// One record per resource, by address (a list in the file).
    #[serde(serialize_with = "records_as_list", deserialize_with = "records_from_list")]
    pub resources: BTreeMap<String, ResourceRecord>,
}

/// What is known of one resource.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceRecord {
    /// Its address in the stack.
    pub address: String,
    /// Its kind.
    pub kind: String,
    /// Whether it exists, or a call on it may have been interrupted.
    pub status: Status,
    /// The cloud's id, once known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The idempotency token of a create in flight; a resumed create passes it again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// The attributes as applied (all references resolved).
    pub config: Value,
    /// What the kind returned.
    pub outputs: Value,
    /// Addresses it depended on when applied: deletes run in the reverse of this order even
    /// when the stack file no longer lists the resource.
    pub dependencies: Vec<String>,
}

/// The life stage of a recorded resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Created and recorded.
    Created,
    /// A create was started; it may or may not have reached the cloud.
    PendingCreate,
    /// A delete was started; the object may still exist.
    PendingDelete,
    /// An object the stack reads (`existing = …`) and forge never changes: its record holds what
    /// the last apply read, and destroy forgets it without a call.
    Read,
}

impl State {
    /// A fresh, empty state with a new lineage.
    pub fn new(stack: &str) -> Self {
        State {
            version: PLAIN_VERSION,
            lineage: Uuid::new_v4(),
            serial: 0,
            stack: stack.to_owned(),
            outputs: Map::new(),
            bundles: BTreeMap::new(),
            resources: BTreeMap::new(),
        }
    }

    /// Applies one journal event and counts it.
    pub fn apply(&mut self, event: Event) {
        self.serial += 1;
        match event {
            Event::Put(record) => {
                if record.status == Status::Read {
                    self.version = self.version.max(STATE_VERSION);
                }
                self.resources.insert(record.address.clone(), record);
            }
            Event::Remove(address) => {
                self.resources.remove(&address);
            }
            Event::Outputs(outputs) => self.outputs = outputs,
            Event::Bundles(bundles) => self.bundles.extend(bundles),
        }
    }

    /// Applies the journal `entries` that continue this state (its lineage, each the next
    /// serial) and passes over the rest.
    pub(crate) fn replay(&mut self, entries: Vec<Entry>) {
        for entry in entries {
            if entry.lineage == self.lineage && entry.serial == self.serial + 1 {
                self.apply(entry.event);
            }
        }
    }

    /// The snapshot's bytes, as every backend writes them: pretty JSON and a final newline.
    pub(crate) fn snapshot(&self) -> Vec<u8> {
        let mut bytes = serde_json::to_vec_pretty(self).expect("state serializes");
        bytes.push(b'\n');
        bytes
    }
}

fn records_as_list<S: Serializer>(records: &BTreeMap<String, ResourceRecord>, s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(records.values())
}

fn records_from_list<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, ResourceRecord>, D::Error> {
    let list = Vec::<ResourceRecord>::deserialize(d)?;
    Ok(list.into_iter().map(|r| (r.address.clone(), r)).collect())
}
