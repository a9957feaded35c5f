//! forge's integration tests, one binary (one link of the SDKs, one emulator launcher):
//! the real `forge` binary and the official SDKs against the repo's emulators (`support`), by
//! topic. `cargo test --test it aws::eks` runs one topic.

mod support;

#[cfg(feature = "aws")]
mod aws;
mod cli;
mod engine;
#[cfg(feature = "gcp")]
mod gcp;
#[cfg(feature = "aws")]
mod kubernetes;
mod stack_fuzz;
#[cfg(all(feature = "aws", feature = "gcp"))]
mod state;
