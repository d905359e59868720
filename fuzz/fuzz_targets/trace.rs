//! The trace CSV against a fixed tree; a parsed trace must also be accepted by `SimInput::new`
//! or refused with an error (a workload larger than the cluster), never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use scheduler::sim::{parse_cluster, parse_trace, parse_tree, SimInput};

const TREE: &str = "[shares]\n\"a\" = 1\n\"a/x\" = 3\n\"a/y\" = 1\n\"b\" = 1\n";
const CLUSTER: &str = "[[nodes]]\ncount = 2\ngpus_per_node = 8\n";

fuzz_target!(|text: &str| {
    let tree = parse_tree(TREE).expect("the fixed tree parses");
    if let Ok(rows) = parse_trace(text, &tree) {
        let cluster = parse_cluster(CLUSTER).expect("the fixed cluster parses");
        let _ = SimInput::new(tree, cluster, rows);
    }
});
