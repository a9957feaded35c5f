//! ② The resource graph: a petgraph DAG over the stack's resources, edges from a dependency to
//! its dependents. Built in one function; a cycle is an error that prints the cycle. No I/O.

pub mod render;

use crate::stack::{Stack, StackError};
use petgraph::algo::{tarjan_scc, toposort};
use petgraph::graph::{DiGraph, NodeIndex};
use std::collections::HashMap;

/// A checked, acyclic graph of a stack's resources.
#[derive(Debug)]
pub struct ResourceGraph {
    graph: DiGraph<usize, ()>,
    order: Vec<usize>,
}

impl ResourceGraph {
    /// Resource indexes (into `Stack::resources`) in dependency order: every resource comes
    /// after everything it depends on.
    pub fn order(&self) -> &[usize] {
        &self.order
    }

    /// Number of edges.
    pub fn edge_count(&self) -> usize {
        self.graph.edge_count()
    }
}

/// Builds the graph; fails with the cycle when there is one.
pub fn build(stack: &Stack) -> Result<ResourceGraph, StackError> {
    let mut graph = DiGraph::with_capacity(stack.resources.len(), stack.resources.len() * 2);
    let mut index = HashMap::with_capacity(stack.resources.len());
    for (i, r) in stack.resources.iter().enumerate() {
        index.insert(r.address.as_str(), graph.add_node(i));
    }
    for (i, r) in stack.resources.iter().enumerate() {
        for dep in &r.depends_on {
            graph.add_edge(index[dep.as_str()], NodeIndex::new(i), ());
        }
    }
    match toposort(&graph, None) {
        Ok(nodes) => Ok(ResourceGraph {
            order: nodes.into_iter().map(|n| graph[n]).collect(),
            graph,
        }),
        Err(_) => Err(cycle_error(stack, &graph)),
    }
}

fn cycle_error(stack: &Stack, graph: &DiGraph<usize, ()>) -> StackError {
    let component = tarjan_scc(graph)
        .into_iter()
        .find(|scc| scc.len() > 1 || graph.contains_edge(scc[0], scc[0]))
        .expect("toposort found a cycle");
    let cycle = find_cycle(graph, &component);
    let names: Vec<&str> = cycle.iter().map(|&n| stack.resources[graph[n]].address.as_str()).collect();
    let start = &stack.resources[graph[cycle[0]]];
    stack.source.error(
        Some(start.span.clone()),
        format!(
            "dependency cycle: {}",
            names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(" -> ")
        ),
        "this resource depends on itself through the cycle",
        Some(format!(
            "remove one reference or `depends_on` entry along the cycle, e.g. the one in `{}` that names `{}`",
            names[0], names[1]
        )),
    )
}

/// A path `a -> … -> a` inside one strongly connected component, read as "depends on",
/// starting at the resource declared first.
fn find_cycle(graph: &DiGraph<usize, ()>, component: &[NodeIndex]) -> Vec<NodeIndex> {
    let start = *component.iter().min_by_key(|&&n| graph[n]).expect("non-empty");
    let inside: std::collections::HashSet<_> = component.iter().copied().collect();
    let mut parent: HashMap<NodeIndex, NodeIndex> = HashMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(n) = queue.pop_front() {
        for dep in graph.neighbors_directed(n, petgraph::Direction::Incoming) {
            if dep == start {
                let mut path = vec![start, n];
                let mut cur = n;
                while cur != start {
                    cur = parent[&cur];
                    path.push(cur);
                }
                if n == start {
                    path.truncate(2);
                }
                path.reverse();
                return path;
            }
            if inside.contains(&dep) && !parent.contains_key(&dep) {
                parent.insert(dep, n);
                queue.push_back(dep);
            }
        }
    }
    unreachable!("a strongly connected component holds a cycle through each node")
}

#[cfg(test)]
mod tests {
    use crate::provider::Registry;
    use crate::stack::load_str;

    fn stack(body: &str) -> crate::stack::Stack {
        load_str(
            "t.toml",
            &format!("[stack]\nname = \"t\"\n{body}"),
            &[],
            &Registry::builtin(),
            &crate::facts::Facts::builtin(),
        )
        .unwrap()
    }

    #[test]
    fn orders_dependencies_first() {
        let s = stack("[null.c]\ntriggers = { x = \"${null.b.id}\" }\n[null.b]\ndepends_on = [\"null.a\"]\n[null.a]\n");
        let g = super::build(&s).unwrap();
        let names: Vec<&str> = g.order().iter().map(|&i| s.resources[i].address.as_str()).collect();
        assert_eq!(names, ["null.a", "null.b", "null.c"]);
    }

    #[test]
    fn reports_the_cycle_path() {
        let s = stack(
            "[null.a]\ndepends_on = [\"null.c\"]\n[null.b]\ndepends_on = [\"null.a\"]\n[null.c]\ntriggers = { x = \"${null.b.id}\" }\n",
        );
        let err = super::build(&s).unwrap_err();
        assert_eq!(err.message, "dependency cycle: `null.a` -> `null.c` -> `null.b` -> `null.a`");
        let own = stack("[null.a]\ntriggers = { x = \"${null.a.id}\" }\n");
        assert_eq!(super::build(&own).unwrap_err().message, "dependency cycle: `null.a` -> `null.a`");
    }
}
