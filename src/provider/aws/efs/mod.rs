//! EFS: file systems and their mount targets, one file each.

pub mod file_system;
pub mod mount_target;
