//! A seeded property test of the stack parser: arbitrary text and mutations of valid stacks
//! must load or fail with a located error, never panic; what loads must also graph and plan.

use forge::plan::{Mode, plan};
use forge::provider::Registry;
use forge::state::State;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

const SEEDS: &[&str] = &[
    include_str!("../../examples/hello.toml"),
    "[stack]\nname = \"f\"\n[vars]\nn = 2\nl = [1, 2]\n[outputs]\no = \"${null.a.triggers.n}\"\n[null.a]\ntriggers = { n = \"${var.n}\", l = \"${var.l}\", s = \"x-${var.n}-$${lit}\" }\n[null.b]\ntriggers = { a = \"${null.a.id}\", deep = \"${null.a.triggers.l.1}\" }\ndepends_on = [\"null.a\"]\n",
    "[stack]\nname = \"g\"\n[null_layers.g]\nlayers = 3\nwidth = 4\n[null.tail]\ntriggers = { ids = \"${null_layers.g.last_ids}\", first = \"${null_layers.g.last_ids.0}\" }\ndepends_on = [\"null_layers.g\"]\n",
];

const TOKENS: &[&str] = &[
    "${",
    "}",
    "[",
    "]",
    "\"",
    "=",
    ".",
    "\n",
    "null",
    "var",
    "depends_on",
    "${null.a.id}",
    "${var.n}",
    "[null.z]",
    "{",
    ",",
    "0",
    "-1",
    "true",
    "$${",
    "#",
    "'''",
    "\\u0000",
];

fn check(text: &str) {
    let registry = Registry::builtin();
    if let Ok(stack) = forge::stack::load_str("fuzz.toml", text, &[], &registry, &forge::facts::Facts::builtin())
        && let Ok(graph) = forge::graph::build(&stack)
    {
        let _ = plan(
            &stack,
            &graph,
            &State::new(&stack.name),
            false,
            Mode::Apply,
            &registry,
            &Default::default(),
        );
    }
}

fn runner(cases: u32) -> TestRunner {
    let seed: [u8; 32] = *b"forge-stack-parser-fuzz-seed-001";
    TestRunner::new_with_rng(
        Config {
            cases,
            failure_persistence: None,
            ..Config::default()
        },
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed),
    )
}

#[test]
fn arbitrary_text_never_panics() {
    runner(2000)
        .run(&".{0,400}", |text| {
            check(&text);
            Ok(())
        })
        .unwrap();
}

#[test]
fn mutated_stacks_never_panic() {
    let edit = (
        0..SEEDS.len(),
        prop::collection::vec((any::<prop::sample::Index>(), 0..TOKENS.len(), 0..3usize), 1..6),
    );
    runner(4000)
        .run(&edit, |(seed, edits)| {
            let mut text = SEEDS[seed].to_owned();
            for (at, token, op) in edits {
                let mut pos = at.index(text.len() + 1);
                while !text.is_char_boundary(pos) {
                    pos -= 1;
                }
                match op {
                    0 => text.insert_str(pos, TOKENS[token]),
                    1 => text.truncate(pos),
                    _ => {
                        let end = (pos + TOKENS[token].len()).min(text.len());
                        let end = (end..=text.len()).find(|&e| text.is_char_boundary(e)).unwrap_or(text.len());
                        text.replace_range(pos..end, "");
                    }
                }
            }
            check(&text);
            Ok(())
        })
        .unwrap();
}

#[test]
fn the_seeds_themselves_load() {
    let registry = Registry::builtin();
    for seed in SEEDS {
        let stack = forge::stack::load_str("seed.toml", seed, &[], &registry, &forge::facts::Facts::builtin()).unwrap();
        forge::graph::build(&stack).unwrap();
    }
}
