//! forge: a declarative TOML stack becomes a DAG of cloud resources, diffed against stored
//! state and applied concurrently in dependency order.
//!
//! ```text
//! cluster.toml ─stack::load─▶ Stack ─graph::build─▶ ResourceGraph ─┐
//!                                                                  ├─ plan::plan ─▶ Plan ─▶ apply::run ─▶ State'
//! state store ─LocalStore::load (under lock)─▶ State ─────────────┘                          │
//!      ▲────────── journal: an intent before every create or delete, the result after ───────┘
//! ```
//!
//! Modules in pipeline order: [`stack`] ① reads the file, [`graph`] ② orders it, [`plan`] ③
//! diffs it against [`state`] ⑤, [`apply`] ④ runs the plan through the [`provider`] kinds.
//! Below them all: [`schema`] (what blocks accept), [`template`] (`${…}` references),
//! [`facts`] (what the clouds say about instance types, gathered once per run),
//! [`readiness`] (what a ready cluster is, as the components say it) and [`cost`] (what the
//! plan and the state cost to run, from the clouds' price lists).

// Stack errors carry the source text and a span; they are built once, on the cold path.
#![allow(clippy::result_large_err)]

pub mod schema;
pub mod template;
pub mod facts;
pub mod readiness;
pub mod stack;
pub mod graph;
pub mod plan;
pub mod cost;
pub mod apply;
pub mod state;
pub mod provider;
pub mod components;
pub mod cli;
pub mod commands;
pub mod error;
pub mod output;
