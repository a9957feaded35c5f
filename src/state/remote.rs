//! A stack's state in an object store ([`Objects`]: S3 today), with the local backend's
//! guarantees over the network. Under the state's key `K`:
//! - `K`: the snapshot, replaced only by compare-and-swap on the version read, so a run that
//!   lost the lock can never overwrite another's state; `K.backup`: the one before it;
//! - `K.journal/<lineage>/<serial>`: journal segments, each a group of entries written as a new
//!   object (create-only) before the cloud calls they announce; the segment of serial `n` holds
//!   the entries from `n` on, so a reader finds them without listing (`n = snapshot serial + 1`,
//!   then one past each segment's last entry, until a key is missing);
//! - `K.lock`: the lock, created only if absent, holding who has it and until when (a lease the
//!   holder renews); one whose lease ran out, or whose holder is a dead process of this host,
//!   is taken over by compare-and-swap, so of two runs exactly one gets it. Releasing it writes
//!   it empty, by compare-and-swap too (no store needs a delete); an empty lock is free.

use super::journal::{self, Journal, Sink};
use super::lock::{LockError, LockInfo, LockMode, hostname, new_info, pid_alive};
use super::objects::{Condition, ObjectError, Objects};
use super::store::{Loaded, StateError, parse_snapshot};
use super::{Event, State};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The state of one stack in an object store.
pub struct RemoteStore {
    objects: Arc<dyn Objects>,
    key: String,
    lease: Duration,
    /// The snapshot's version as last read or written: the condition of the next snapshot.
    version: Mutex<Option<String>>,
    /// Segments folded into the state since the snapshot: discarded once a snapshot holds them.
    segments: Arc<Mutex<Vec<String>>>,
    /// The local file a run leaves its state in when the store cannot take it.
    rescue: PathBuf,
}

impl RemoteStore {
    /// The state at `key` in `objects`; locks last `lease` unless renewed; `rescue` is the
    /// local file a run writes its state to when the store cannot take it.
    pub fn new(objects: Arc<dyn Objects>, key: &str, lease: Duration, rescue: PathBuf) -> Self {
        RemoteStore {
            objects,
            key: key.to_owned(),
            lease,
            version: Mutex::new(None),
            segments: Arc::new(Mutex::new(Vec::new())),
            rescue,
        }
    }

    /// The local rescue file of this state.
    pub fn rescue_path(&self) -> &std::path::Path {
        &self.rescue
    }

    /// `s3://bucket/key`.
    pub fn url(&self) -> String {
        self.objects.url(&self.key)
    }

    fn location(&self, key: &str) -> PathBuf {
        PathBuf::from(self.objects.url(key))
    }

    fn read_err(&self, key: &str, e: ObjectError) -> StateError {
        StateError::Remote {
            location: self.objects.url(key),
            message: match e {
                ObjectError::Conflict => "changed while forge read it".into(),
                ObjectError::Failed(message) => message,
            },
        }
    }

    fn segment_key(&self, lineage: uuid::Uuid, serial: u64) -> String {
        format!("{}.journal/{lineage}/{serial:020}", self.key)
    }

    /// Reads the snapshot and folds the journal segments after it.
    pub fn load(&self, stack: &str) -> Result<Loaded, StateError> {
        let snapshot = self.objects.get(&self.key).map_err(|e| self.read_err(&self.key, e))?;
        let existed = snapshot.is_some();
        let mut state = match snapshot {
            Some((bytes, version)) => {
                *self.version.lock().expect("not poisoned") = Some(version);
                parse_snapshot(&bytes, stack, &self.location(&self.key))?
            }
            None => {
                *self.version.lock().expect("not poisoned") = None;
                State::new(stack)
            }
        };
        let mut folded = Vec::new();
        let mut dropped_tail = false;
        loop {
            let key = self.segment_key(state.lineage, state.serial + 1);
            let Some((bytes, _)) = self.objects.get(&key).map_err(|e| self.read_err(&key, e))? else {
                break;
            };
            let (entries, torn) = journal::read_entries(&bytes);
            dropped_tail |= torn;
            let before = state.serial;
            state.replay(entries);
            folded.push(key);
            if state.serial == before {
                break;
            }
        }
        *self.segments.lock().expect("not poisoned") = folded;
        Ok(Loaded {
            state,
            existed,
            dropped_tail,
        })
    }

    /// Writes `state` as the new snapshot if the snapshot is still the one read (the previous
    /// one kept as `K.backup`), then discards the segments it folds in.
    pub fn compact(&self, state: &State) -> Result<(), StateError> {
        let bytes = state.snapshot();
        let mut version = self.version.lock().expect("not poisoned");
        let condition = match version.clone() {
            Some(read) => {
                if let Some((old, _)) = retried(|| self.objects.get(&self.key)).map_err(|e| self.read_err(&self.key, e))? {
                    let backup = format!("{}.backup", self.key);
                    retried(|| self.objects.write(&backup, old.clone(), Condition::Always)).map_err(|e| self.read_err(&backup, e))?;
                }
                Condition::Version(read)
            }
            None => Condition::Absent,
        };
        match retried(|| self.objects.write(&self.key, bytes.clone(), condition.clone())) {
            Ok(new) => *version = Some(new),
            Err(ObjectError::Conflict) => {
                return Err(StateError::Conflict { location: self.url() });
            }
            Err(e) => return Err(self.read_err(&self.key, e)),
        }
        drop(version);
        let folded = std::mem::take(&mut *self.segments.lock().expect("not poisoned"));
        for key in folded {
            // A segment left behind is harmless: no reader starts below the snapshot's serial.
            self.objects.discard(&key);
        }
        Ok(())
    }

    /// Opens the journal of `state`: a first snapshot is written when there is none, so that
    /// the segments' lineage is the snapshot's.
    pub fn journal(&self, state: &State) -> Result<Journal, StateError> {
        if self.version.lock().expect("not poisoned").is_none() {
            self.compact(state)?;
        }
        let sink = Segments {
            objects: self.objects.clone(),
            prefix: format!("{}.journal/{}/", self.key, state.lineage),
            written: self.segments.clone(),
        };
        Ok(Journal::open(self.location(&format!("{}.journal/", self.key)), sink))
    }

    /// Appends entries and waits until they are durable (for one-off changes like `state rm`).
    pub fn record(&self, state: &mut State, events: Vec<Event>) -> Result<(), StateError> {
        self.journal(state)?.commit(state, events)
    }

    /// Takes the lock for a command that writes (`Exclusive`), waiting up to `timeout`;
    /// readers take none (`None`): a plan never blocks an apply. Returns the lock and the
    /// holder it took over, if any.
    pub fn lock(&self, mode: LockMode, operation: &str, timeout: Duration) -> Result<(Option<RemoteLock>, Option<LockInfo>), LockError> {
        if mode == LockMode::Shared {
            return Ok((None, None));
        }
        let key = format!("{}.lock", self.key);
        let io = |e: ObjectError| LockError::Io {
            path: self.location(&key),
            message: match e {
                ObjectError::Conflict => "changed while forge read it".into(),
                ObjectError::Failed(message) => message,
            },
        };
        let info = new_info(operation);
        let lease = |info: &LockInfo| {
            serde_json::to_vec(&Lease {
                info: info.clone(),
                expires: now() + self.lease.as_secs().max(1),
            })
            .expect("leases serialize")
        };
        let deadline = Instant::now() + timeout;
        loop {
            let (version, took_over) = match self.objects.write(&key, lease(&info), Condition::Absent) {
                Ok(version) => (version, None),
                Err(ObjectError::Conflict) => {
                    let Some((bytes, version)) = self.objects.get(&key).map_err(io)? else {
                        continue; // released meanwhile
                    };
                    let held: Option<Lease> = serde_json::from_slice(&bytes).ok();
                    let stale = held
                        .as_ref()
                        .is_none_or(|h| h.expires < now() || (h.info.host == hostname() && !pid_alive(h.info.pid)));
                    if stale {
                        match self.objects.write(&key, lease(&info), Condition::Version(version)) {
                            Ok(version) => (version, held.map(|h| h.info)),
                            Err(ObjectError::Conflict) => continue, // another run took it first
                            Err(e) => return Err(io(e)),
                        }
                    } else if Instant::now() < deadline {
                        std::thread::sleep(Duration::from_millis(250));
                        continue;
                    } else {
                        return Err(LockError::Held(held.expect("a lease that is not stale was read").info));
                    }
                }
                Err(e) => return Err(io(e)),
            };
            let lock = RemoteLock::hold(self.objects.clone(), key.clone(), info.clone(), version, self.lease, lease(&info));
            return Ok((Some(lock), took_over));
        }
    }

    /// Who holds the lock now: a lease that has not run out, of a holder that may be alive.
    pub fn holder(&self) -> Option<LockInfo> {
        let (bytes, _) = self.objects.get(&format!("{}.lock", self.key)).ok()??;
        let held: Lease = serde_json::from_slice(&bytes).ok()?;
        let dead = held.info.host == hostname() && !pid_alive(held.info.pid);
        (held.expires >= now() && !dead).then_some(held.info)
    }

    /// `forge state unlock ID`: releases the lock if `id` is its id and its holder is gone
    /// (or, with `force`, in any case).
    pub fn unlock(&self, id: &str, force: bool) -> Result<LockInfo, LockError> {
        let key = format!("{}.lock", self.key);
        let io = |message: String| LockError::Io {
            path: self.location(&key),
            message,
        };
        let Some((bytes, version)) = self
            .objects
            .get(&key)
            .map_err(|e| io(format!("{e:?}")))?
            .filter(|(b, _)| !b.is_empty())
        else {
            return Err(LockError::NotLocked);
        };
        let held: Lease = serde_json::from_slice(&bytes).map_err(|e| io(format!("not a forge lock: {e}")))?;
        if held.info.id != id {
            return Err(LockError::WrongId {
                given: id.to_owned(),
                held: held.info,
            });
        }
        if held.expires >= now() && held.info.host == hostname() && pid_alive(held.info.pid) && !force {
            return Err(LockError::Alive(held.info));
        }
        self.objects
            .write(&key, Vec::new(), Condition::Version(version))
            .map_err(|e| io(format!("{e:?}")))?;
        Ok(held.info)
    }
}

/// The lock object's contents: the holder and when its lease runs out (Unix seconds).
#[derive(Serialize, Deserialize)]
struct Lease {
    #[serde(flatten)]
    info: LockInfo,
    expires: u64,
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// A held remote lock: a thread renews its lease (compare-and-swap on the version it wrote)
/// every third of the lease; dropping it stops the renewals and releases the lock (writes it
/// empty, if it is still the version this run wrote).
pub struct RemoteLock {
    /// The holder record.
    pub info: LockInfo,
    objects: Arc<dyn Objects>,
    key: String,
    version: Arc<Mutex<String>>,
    stop: Option<mpsc::Sender<()>>,
    renewer: Option<std::thread::JoinHandle<()>>,
}

impl RemoteLock {
    fn hold(objects: Arc<dyn Objects>, key: String, info: LockInfo, version: String, lease: Duration, record: Vec<u8>) -> Self {
        let version = Arc::new(Mutex::new(version));
        let (stop, stopped) = mpsc::channel::<()>();
        let renewer = {
            let (objects, key, version) = (objects.clone(), key.clone(), version.clone());
            let info = info.clone();
            std::thread::spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(lease / 3) {
                    let current = version.lock().expect("not poisoned").clone();
                    let renewed = serde_json::to_vec(&Lease {
                        info: info.clone(),
                        expires: now() + lease.as_secs().max(1),
                    })
                    .unwrap_or_else(|_| record.clone());
                    match objects.write(&key, renewed, Condition::Version(current)) {
                        Ok(next) => *version.lock().expect("not poisoned") = next,
                        // Taken over (this run stalled past its lease): the snapshot's
                        // compare-and-swap and the create-only segments stop this run's writes.
                        Err(ObjectError::Conflict) => return,
                        Err(ObjectError::Failed(_)) => {}
                    }
                }
            })
        };
        RemoteLock {
            info,
            objects,
            key,
            version,
            stop: Some(stop),
            renewer: Some(renewer),
        }
    }
}

impl Drop for RemoteLock {
    fn drop(&mut self) {
        self.stop.take();
        if let Some(renewer) = self.renewer.take() {
            let _ = renewer.join();
        }
        let version = self.version.lock().expect("not poisoned").clone();
        let _ = self.objects.write(&self.key, Vec::new(), Condition::Version(version));
    }
}

/// How often a write of the journal or the snapshot is tried.
const ATTEMPTS: u32 = 6;

/// The journal's sink: each group of entries is a new segment object, created only if absent.
struct Segments {
    objects: Arc<dyn Objects>,
    prefix: String,
    written: Arc<Mutex<Vec<String>>>,
}

impl Sink for Segments {
    fn write(&mut self, first_serial: u64, lines: &[u8]) -> Result<(), String> {
        let key = format!("{}{first_serial:020}", self.prefix);
        match retried(|| self.objects.write(&key, lines.to_vec(), Condition::Absent)) {
            Ok(_) => {
                self.written.lock().expect("not poisoned").push(key);
                Ok(())
            }
            Err(ObjectError::Conflict) => Err(format!(
                "{} was written by another run: someone else is changing this state",
                self.objects.url(&key)
            )),
            Err(ObjectError::Failed(message)) => Err(message),
        }
    }
}

/// Runs `call` until it succeeds or conflicts, trying a failing call [`ATTEMPTS`] times with
/// backoff: about 8 s (beside the client's own retries) before a run stops on an outage.
fn retried<T>(mut call: impl FnMut() -> Result<T, ObjectError>) -> Result<T, ObjectError> {
    let mut delay = Duration::from_millis(250);
    for _ in 1..ATTEMPTS {
        match call() {
            Err(ObjectError::Failed(_)) => {
                std::thread::sleep(delay);
                delay *= 2;
            }
            done => return done,
        }
    }
    call()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::store::tests::record;
    use std::collections::BTreeMap;

    /// Objects in memory, versioned by a counter: what the remote state's logic needs.
    #[derive(Default)]
    struct Memory {
        objects: Mutex<BTreeMap<String, (Vec<u8>, u64)>>,
        next: Mutex<u64>,
    }

    impl Objects for Memory {
        fn url(&self, key: &str) -> String {
            format!("mem://{key}")
        }
        fn get(&self, key: &str) -> Result<Option<(Vec<u8>, String)>, ObjectError> {
            Ok(self.objects.lock().unwrap().get(key).map(|(b, v)| (b.clone(), v.to_string())))
        }
        fn put(&self, key: &str, bytes: Vec<u8>, condition: Condition) -> Result<String, ObjectError> {
            let mut objects = self.objects.lock().unwrap();
            let current = objects.get(key).map(|(_, v)| v.to_string());
            let holds = match &condition {
                Condition::Always => true,
                Condition::Absent => current.is_none(),
                Condition::Version(v) => current.as_ref() == Some(v),
            };
            if !holds {
                return Err(ObjectError::Conflict);
            }
            let mut next = self.next.lock().unwrap();
            *next += 1;
            objects.insert(key.to_owned(), (bytes, *next));
            Ok(next.to_string())
        }
        fn discard(&self, key: &str) {
            self.objects.lock().unwrap().remove(key);
        }
    }

    #[test]
    fn segments_fold_over_the_snapshot_and_a_changed_snapshot_is_a_conflict() {
        let objects: Arc<dyn Objects> = Arc::new(Memory::default());
        let store = RemoteStore::new(objects.clone(), "s/state.json", Duration::from_secs(60), PathBuf::new());
        let mut state = store.load("s").unwrap().state;
        store.record(&mut state, vec![Event::Put(record("null.a"))]).unwrap();
        store.record(&mut state, vec![Event::Put(record("null.b"))]).unwrap();
        // Another reader folds the snapshot and both segments, without listing.
        let other = RemoteStore::new(objects.clone(), "s/state.json", Duration::from_secs(60), PathBuf::new());
        let loaded = other.load("s").unwrap();
        assert_eq!(loaded.state, state);
        assert!(loaded.existed);
        // It writes a snapshot; the first store's snapshot is now stale: writing another state
        // over it is a conflict, and the other's stands.
        other.compact(&loaded.state).unwrap();
        let mut diverged = state.clone();
        diverged.apply(Event::Put(record("null.c")));
        assert!(matches!(store.compact(&diverged), Err(StateError::Conflict { .. })));
        assert_eq!(
            RemoteStore::new(objects, "s/state.json", Duration::from_secs(60), PathBuf::new())
                .load("s")
                .unwrap()
                .state,
            state
        );
    }

    #[test]
    fn a_held_lock_names_its_holder_and_readers_take_none() {
        let objects: Arc<dyn Objects> = Arc::new(Memory::default());
        let store = RemoteStore::new(objects.clone(), "s/state.json", Duration::from_secs(60), PathBuf::new());
        let (first, _) = store.lock(LockMode::Exclusive, "up", Duration::ZERO).unwrap();
        let Err(LockError::Held(holder)) = store.lock(LockMode::Exclusive, "up", Duration::ZERO) else {
            panic!("a second run took a held lock");
        };
        assert_eq!(holder.id, first.as_ref().unwrap().info.id);
        assert!(
            store.lock(LockMode::Shared, "plan", Duration::ZERO).unwrap().0.is_none(),
            "readers take no lock"
        );
        drop(first);
        assert!(
            objects.get("s/state.json.lock").unwrap().unwrap().0.is_empty(),
            "released: written empty"
        );
        assert!(store.holder().is_none());
        assert!(matches!(store.unlock("any", false), Err(LockError::NotLocked)));
        let (again, took_over) = store.lock(LockMode::Exclusive, "up", Duration::ZERO).unwrap();
        assert!(
            again.is_some() && took_over.is_none(),
            "an empty lock is free, and taking it is no takeover"
        );
    }
}
