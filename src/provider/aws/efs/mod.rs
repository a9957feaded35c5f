//! EFS: file systems and their mount targets, one file each, and what they share here: their
//! life cycle states, and when one is available.

pub(super) mod file_system;
pub(super) mod mount_target;

use super::{Poll, Status};
use aws_sdk_efs::types::{FileSystemDescription, MountTargetDescription};

impl Status for FileSystemDescription {
    fn status_name(&self) -> Option<&str> {
        Some(self.life_cycle_state().as_str())
    }
}

impl Status for MountTargetDescription {
    fn status_name(&self) -> Option<&str> {
        Some(self.life_cycle_state().as_str())
    }
}

/// Whether an EFS object (file system, mount target) is `available`, for
/// [`wait_for`](super::wait_for): one in `error` never will be.
pub(super) fn available<T: Status>(found: &T) -> Poll {
    match found.status_name().unwrap_or_default() {
        "available" => Poll::Done(()),
        "error" => Poll::Failed("is in error".into()),
        state => Poll::Pending(state.to_owned()),
    }
}
