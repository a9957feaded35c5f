//! The state lock: an OS file lock (`flock`) on `<state>.lock`, which the kernel releases when
//! the holder dies, plus a record of who holds it (lock id, user@host, pid, operation, start).
//! A record left behind by a dead process on this host is stale: it is reported and taken over.

use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// Who holds the lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockInfo {
    /// Pass it to `forge state unlock`.
    pub id: String,
    /// `user@host`.
    pub who: String,
    /// The host, to tell whether `pid` can be checked here.
    pub host: String,
    /// The holder's process id.
    pub pid: u32,
    /// The command (`up`, `destroy`, `state rm`).
    pub operation: String,
    /// When it was taken (RFC 3339).
    pub started: String,
}

impl std::fmt::Display for LockInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "`{}` by {} (pid {}) since {} (lock id {})",
            self.operation, self.who, self.pid, self.started, self.id
        )
    }
}

/// Readers share the lock; commands that change state take it alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockMode {
    /// `plan`, `output`, `state list|show`.
    Shared,
    /// `up`, `destroy`, `state rm`.
    Exclusive,
}

/// A lock problem.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum LockError {
    /// Someone else holds it.
    #[error("the state is locked: {0}")]
    #[diagnostic(help(
        "wait for that run to finish, or pass `--lock-timeout 5m` to wait for it; if it is dead, `forge state unlock FILE <lock id>` releases it"
    ))]
    Held(LockInfo),
    /// Held by a command that recorded no holder (a reader).
    #[error("the state is in use by another forge command that is reading it")]
    #[diagnostic(help("try again in a moment, or pass `--lock-timeout 1m` to wait"))]
    Busy,
    /// Left by a process on another host that forge cannot check.
    #[error("the state is locked from another host: {0}")]
    #[diagnostic(help("if that run is gone, release the lock with `forge state unlock FILE <lock id>`"))]
    OtherHost(LockInfo),
    /// `unlock` of a live holder without `--force`.
    #[error("refusing to unlock: {0} is still running")]
    #[diagnostic(help("stop that process first, or pass `--force` if you are sure it no longer touches this state"))]
    Alive(LockInfo),
    /// `unlock` with the wrong id.
    #[error("lock id `{given}` does not match the lock held: {held}")]
    #[diagnostic(help("copy the lock id from the message that reported the lock"))]
    WrongId {
        /// The id given.
        given: String,
        /// The lock.
        held: LockInfo,
    },
    /// `unlock` with nothing to unlock.
    #[error("the state is not locked")]
    NotLocked,
    /// The lock file could not be used.
    #[error("cannot use the state lock `{}`: {message}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        message: String,
    },
}

/// A held lock; dropping it releases the lock and clears the holder record.
#[derive(Debug)]
pub struct StateLock {
    file: File,
    mode: LockMode,
    /// The holder record (exclusive locks only).
    pub info: Option<LockInfo>,
}

impl Drop for StateLock {
    fn drop(&mut self) {
        if self.mode == LockMode::Exclusive {
            let _ = self.file.set_len(0);
        }
        let _ = self.file.unlock();
    }
}

fn io_err(path: &Path, e: impl std::fmt::Display) -> LockError {
    LockError::Io {
        path: path.to_owned(),
        message: e.to_string(),
    }
}

fn open(path: &Path) -> Result<File, LockError> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map_err(|e| io_err(path, e))
}

/// The recorded holder, if any.
pub fn read_info(path: &Path) -> Option<LockInfo> {
    let mut text = String::new();
    File::open(path).ok()?.read_to_string(&mut text).ok()?;
    serde_json::from_str(&text).ok()
}

/// This machine's name.
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes a NUL-terminated name.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown-host".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

pub fn pid_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else { return false };
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid, 0) == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM) }
}

/// Who holds the write lock now, read without taking any lock: the recorded holder when it
/// still runs (or runs on another host, where that cannot be checked). A record a crashed run
/// left behind is not a holder.
pub fn holder(path: &Path) -> Option<LockInfo> {
    read_info(path).filter(|i| i.host != hostname() || pid_alive(i.pid))
}

/// Takes the lock, waiting up to `timeout`. Returns the lock and, when a stale holder record
/// was taken over, that record (so the caller can say so).
pub fn acquire(path: &Path, mode: LockMode, operation: &str, timeout: Duration) -> Result<(StateLock, Option<LockInfo>), LockError> {
    let mut file = open(path)?;
    let deadline = Instant::now() + timeout;
    loop {
        let attempt = match mode {
            LockMode::Shared => file.try_lock_shared(),
            LockMode::Exclusive => file.try_lock(),
        };
        match attempt {
            Ok(()) => break,
            Err(TryLockError::WouldBlock) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Err(TryLockError::WouldBlock) => {
                // A record left by a dead writer while the lock is held means a reader holds it.
                let holder = read_info(path).filter(|i| i.host != hostname() || pid_alive(i.pid));
                return Err(holder.map_or(LockError::Busy, LockError::Held));
            }
            Err(TryLockError::Error(e)) => return Err(io_err(path, e)),
        }
    }
    let left_behind = read_info(path);
    if let Some(info) = &left_behind
        && info.host != hostname()
    {
        let _ = file.unlock();
        return Err(LockError::OtherHost(info.clone()));
    }
    if mode == LockMode::Shared {
        return Ok((StateLock { file, mode, info: None }, left_behind));
    }
    let info = new_info(operation);
    let record = serde_json::to_vec(&info).expect("lock info serializes");
    file.set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| file.write_all(&record))
        .and_then(|()| file.sync_data())
        .map_err(|e| io_err(path, e))?;
    Ok((
        StateLock {
            file,
            mode,
            info: Some(info),
        },
        left_behind,
    ))
}

/// A new holder record for this process running `operation`.
pub fn new_info(operation: &str) -> LockInfo {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "unknown".into());
    let host = hostname();
    LockInfo {
        id: uuid::Uuid::new_v4().to_string(),
        who: format!("{user}@{host}"),
        host,
        pid: std::process::id(),
        operation: operation.to_owned(),
        started: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
    }
}

/// `forge state unlock ID`: releases a lock whose holder is gone (or, with `force`, any).
pub fn unlock(path: &Path, id: &str, force: bool) -> Result<LockInfo, LockError> {
    let info = read_info(path).ok_or(LockError::NotLocked)?;
    if info.id != id {
        return Err(LockError::WrongId {
            given: id.to_owned(),
            held: info,
        });
    }
    let file = open(path)?;
    let held = matches!(file.try_lock(), Err(TryLockError::WouldBlock));
    if held && info.host == hostname() && pid_alive(info.pid) && !force {
        return Err(LockError::Alive(info));
    }
    if held {
        // The holder keeps its lock on the old file; a new file lets the next run proceed.
        std::fs::remove_file(path).map_err(|e| io_err(path, e))?;
    } else {
        file.set_len(0).map_err(|e| io_err(path, e))?;
    }
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exclusive_excludes_and_stale_records_are_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.lock");
        let (first, stale) = acquire(&path, LockMode::Exclusive, "up", Duration::ZERO).unwrap();
        assert!(stale.is_none());
        let held = acquire(&path, LockMode::Shared, "plan", Duration::from_millis(120)).unwrap_err();
        assert!(matches!(held, LockError::Held(ref i) if i.operation == "up"));
        // A crashed holder: the kernel lock is gone but its record stays.
        let record = std::fs::read(&path).unwrap();
        drop(first);
        std::fs::write(&path, &record).unwrap();
        let (_second, stale) = acquire(&path, LockMode::Exclusive, "up", Duration::ZERO).unwrap();
        assert_eq!(stale.unwrap().operation, "up");
    }

    #[test]
    fn unlock_refuses_a_live_holder_unless_forced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.lock");
        let (lock, _) = acquire(&path, LockMode::Exclusive, "up", Duration::ZERO).unwrap();
        let id = lock.info.clone().unwrap().id;
        assert!(matches!(unlock(&path, "nope", false), Err(LockError::WrongId { .. })));
        assert!(matches!(unlock(&path, &id, false), Err(LockError::Alive(_))));
        unlock(&path, &id, true).unwrap();
        assert!(acquire(&path, LockMode::Exclusive, "up", Duration::ZERO).is_ok());
    }
}
