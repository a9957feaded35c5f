//! `forge graph`: the stack's graph as text, Graphviz dot, Mermaid or JSON.

use super::ResourceGraph;
use crate::stack::Stack;
use serde_json::json;
use std::fmt::Write;

/// The output formats of `forge graph`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// One line per resource, in apply order, with what it waits for.
    Text,
    /// Graphviz `dot`.
    Dot,
    /// A Mermaid flowchart (renders in GitHub Markdown).
    Mermaid,
    /// `{ "nodes": [...], "edges": [[from, to], ...] }`.
    Json,
}

/// Renders the graph; edges point from a dependency to its dependent.
pub fn render(stack: &Stack, graph: &ResourceGraph, format: Format) -> String {
    let ordered = graph.order().iter().map(|&i| &stack.resources[i]);
    let mut out = String::new();
    match format {
        Format::Text => {
            for r in ordered {
                let _ = match r.depends_on.as_slice() {
                    [] => writeln!(out, "{} ({})", r.address, r.kind),
                    deps => writeln!(out, "{} ({}) <- {}", r.address, r.kind, deps.join(", ")),
                };
            }
        }
        Format::Dot => {
            out.push_str("digraph forge {\n  rankdir = LR;\n  node [shape = box];\n");
            for r in ordered {
                let _ = writeln!(out, "  \"{}\";", r.address);
                for d in &r.depends_on {
                    let _ = writeln!(out, "  \"{d}\" -> \"{}\";", r.address);
                }
            }
            out.push_str("}\n");
        }
        Format::Mermaid => {
            out.push_str("flowchart LR\n");
            let id = |a: &str| a.replace(['.', '-'], "_");
            for r in ordered {
                let _ = writeln!(out, "  {}[\"{}\"]", id(&r.address), r.address);
                for d in &r.depends_on {
                    let _ = writeln!(out, "  {} --> {}", id(d), id(&r.address));
                }
            }
        }
        Format::Json => {
            let nodes: Vec<_> = ordered.clone().map(|r| json!({ "address": r.address, "kind": r.kind })).collect();
            let edges: Vec<_> = ordered
                .flat_map(|r| r.depends_on.iter().map(move |d| json!([d, r.address])))
                .collect();
            out = serde_json::to_string_pretty(&json!({ "nodes": nodes, "edges": edges })).expect("json") + "\n";
        }
    }
    out
}
