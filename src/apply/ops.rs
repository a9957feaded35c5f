//! The operations of an apply and their order. A replace is two operations (destroy, then
//! create); dependencies come from the stack for creates and updates and, reversed, from the
//! state's recorded dependencies for deletes.

use crate::plan::{Action, Plan};
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// What an operation does to its resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Make it.
    Create,
    /// Change it in place.
    Update,
    /// Delete it.
    Destroy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Waiting,
    Running(Instant),
    Done,
    Failed,
    Skipped,
}

#[derive(Debug)]
struct Op {
    change: usize,
    phase: Phase,
    waits_for: usize,
    dependents: Vec<usize>,
    stage: Stage,
}

/// The operations as a DAG with a ready queue.
#[derive(Debug)]
pub(super) struct OpGraph {
    ops: Vec<Op>,
    ready: VecDeque<usize>,
}

/// Kahn's algorithm: true when every node can be ordered.
fn acyclic(nodes: usize, edges: impl Iterator<Item = (usize, usize)> + Clone) -> bool {
    let mut waits = vec![0usize; nodes];
    let mut out = vec![Vec::new(); nodes];
    for (from, to) in edges {
        waits[to] += 1;
        out[from].push(to);
    }
    let mut ready: Vec<usize> = (0..nodes).filter(|&n| waits[n] == 0).collect();
    let mut seen = 0;
    while let Some(n) = ready.pop() {
        seen += 1;
        for &m in &out[n] {
            waits[m] -= 1;
            if waits[m] == 0 {
                ready.push(m);
            }
        }
    }
    seen == nodes
}

impl OpGraph {
    /// Builds the operations of `plan` and their edges.
    pub(super) fn build(plan: &Plan) -> Self {
        let mut ops = Vec::with_capacity(plan.changes.len());
        let mut main = vec![None; plan.changes.len()];
        let mut destroy = vec![None; plan.changes.len()];
        let mut new_op = |change, phase| {
            ops.push(Op {
                change,
                phase,
                waits_for: 0,
                dependents: Vec::new(),
                stage: Stage::Waiting,
            });
            ops.len() - 1
        };
        for (i, c) in plan.changes.iter().enumerate() {
            if matches!(c.action, Action::Delete | Action::Replace) {
                destroy[i] = Some(new_op(i, Phase::Destroy));
            }
            match c.action {
                Action::Create | Action::Replace => main[i] = Some(new_op(i, Phase::Create)),
                Action::Update => main[i] = Some(new_op(i, Phase::Update)),
                Action::Delete => {}
            }
        }
        let by_address: HashMap<&str, usize> = plan.changes.iter().enumerate().map(|(i, c)| (c.address.as_str(), i)).collect();
        let mut edges = Vec::new();
        for (y, c) in plan.changes.iter().enumerate() {
            if let (Some(d), Some(m)) = (destroy[y], main[y]) {
                edges.push((d, m, false));
            }
            if let Some(y_main) = main[y] {
                for dep in &c.depends_on {
                    if let Some(x_main) = by_address.get(dep.as_str()).and_then(|&x| main[x]) {
                        edges.push((x_main, y_main, false));
                    }
                }
            }
            for dep in &c.prior_depends_on {
                let Some(&x) = by_address.get(dep.as_str()) else { continue };
                let Some(x_destroy) = destroy[x] else { continue };
                match (destroy[y], main[y]) {
                    (Some(y_destroy), _) => edges.push((y_destroy, x_destroy, false)),
                    // Soft: stop using a removed object before deleting it, unless that closes a cycle.
                    (None, Some(y_main)) if plan.changes[x].action == Action::Delete => edges.push((y_main, x_destroy, true)),
                    _ => {}
                }
            }
        }
        if !acyclic(ops.len(), edges.iter().map(|&(from, to, _)| (from, to))) {
            edges.retain(|&(_, _, soft)| !soft);
        }
        for (from, to, _) in edges {
            ops[from].dependents.push(to);
            ops[to].waits_for += 1;
        }
        let ready = ops.iter().enumerate().filter(|(_, o)| o.waits_for == 0).map(|(i, _)| i).collect();
        OpGraph { ops, ready }
    }

    /// Takes the next operation whose dependencies are done, and marks it running.
    pub(super) fn next_ready(&mut self) -> Option<usize> {
        let op = self.ready.pop_front()?;
        self.ops[op].stage = Stage::Running(Instant::now());
        Some(op)
    }

    /// Starts a taken operation's clock again, when it actually starts (after waiting for its
    /// serialization key).
    pub(super) fn restart_clock(&mut self, op: usize) {
        self.ops[op].stage = Stage::Running(Instant::now());
    }

    /// The resource address and phase of an operation.
    pub(super) fn describe(&self, plan: &Plan, op: usize) -> (String, Phase) {
        (plan.changes[self.ops[op].change].address.clone(), self.ops[op].phase)
    }

    /// The index of the plan change an operation belongs to.
    pub(super) fn change_of(&self, op: usize) -> usize {
        self.ops[op].change
    }

    /// How long a running operation has run.
    pub(super) fn elapsed(&self, op: usize) -> Duration {
        match self.ops[op].stage {
            Stage::Running(since) => since.elapsed(),
            _ => Duration::ZERO,
        }
    }

    /// Marks an operation done and readies its dependents. True when it was the last
    /// operation of its change (so the change is complete).
    pub(super) fn complete(&mut self, op: usize) -> bool {
        self.ops[op].stage = Stage::Done;
        for i in 0..self.ops[op].dependents.len() {
            let d = self.ops[op].dependents[i];
            self.ops[d].waits_for -= 1;
            if self.ops[d].waits_for == 0 && self.ops[d].stage == Stage::Waiting {
                self.ready.push_back(d);
            }
        }
        let change = self.ops[op].change;
        !self.ops[op].dependents.iter().any(|&d| self.ops[d].change == change)
    }

    /// Marks an operation failed and everything behind it skipped; returns the skipped ones.
    pub(super) fn prune(&mut self, op: usize) -> Vec<usize> {
        self.ops[op].stage = Stage::Failed;
        let mut skipped = Vec::new();
        let mut stack = self.ops[op].dependents.clone();
        while let Some(d) = stack.pop() {
            if self.ops[d].stage == Stage::Waiting {
                self.ops[d].stage = Stage::Skipped;
                skipped.push(d);
                stack.extend(self.ops[d].dependents.iter().copied());
            }
        }
        skipped
    }

    /// Operations neither finished, failed nor skipped (left by Ctrl-C).
    pub(super) fn unfinished_count(&self) -> usize {
        self.ops.iter().filter(|o| o.stage == Stage::Waiting).count()
    }
}
