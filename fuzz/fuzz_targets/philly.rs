//! The Philly trace converter: any CSV converts or is refused, and what it writes parses back.
#![no_main]
use libfuzzer_sys::fuzz_target;
use scheduler::sim::{philly, SimInput};

fuzz_target!(|text: &str| {
    if let Ok(c) = philly::convert(text, 3) {
        let s = &c.scenario;
        SimInput::parse(&s.tree_toml, &s.cluster_toml, &s.trace_csv)
            .expect("the converter writes files the simulator reads");
    }
});
