//! The cluster file (DESIGN §6): hosts and outages; any text parses or is refused, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Ok(cluster) = scheduler::sim::parse_cluster(text) {
        assert!(cluster.nodes.iter().all(|n| n.gpus > 0));
    }
});
