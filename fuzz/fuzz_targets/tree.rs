//! The budget tree file (DESIGN §6): any text parses or is refused with an error; never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Err(e) = scheduler::sim::parse_tree(text) {
        let _ = e.to_string();
    }
});
