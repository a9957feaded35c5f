//! EFS: file systems and their mount targets, one file each.

pub(super) mod file_system;
pub(super) mod mount_target;
