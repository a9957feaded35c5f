//! forge: a declarative TOML stack becomes a DAG of cloud resources, diffed against stored
//! state and applied concurrently in dependency order.
//!
//! ```text
//! cluster.toml ─stack::load─▶ Stack ─graph::build─▶ ResourceGraph ─┐
//!                                                                  ├─ plan::plan ─▶ Plan ─▶ apply::run ─▶ State'
//! state store ─StateStore::load (under lock)─▶ State ─────────────┘                          │
//!      ▲───────────── journal: an intent before every cloud call, the result after ───────────┘
//! ```

pub mod stack;
pub mod provider;
pub mod components;
pub mod state;
