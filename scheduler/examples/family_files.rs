//! Writes a family member's three input files into a folder, for looking at by hand:
//! `cargo run --release -p scheduler --example family_files -- SEED DAYS INDEX DIR`.
fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let m = &scheduler::sim::family::members(a[0].parse().unwrap(), a[1].parse().unwrap(), None)
        .unwrap()[a[2].parse::<usize>().unwrap()];
    let dir = std::path::Path::new(&a[3]);
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("tree.toml"), &m.scenario.tree_toml).unwrap();
    std::fs::write(dir.join("cluster.toml"), &m.scenario.cluster_toml).unwrap();
    std::fs::write(dir.join("trace.csv"), &m.scenario.trace_csv).unwrap();
}
