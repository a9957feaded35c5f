//! The components built into forge, one file each.

pub mod null_layers;
#[cfg(feature = "aws")]
pub mod vpc;
