//! Reads an `evaluations.jsonl` on stdin and counts its genomes and its distinct kernels
//! (family and the template's defines at D64 f16, the seed shape's), so that a search
//! whose genomes differ only in genes its kernels ignore would show compiles it could
//! share. Usage: zcat s8/runs/c2k/evaluations.jsonl.gz | cargo run --release
use std::collections::{HashMap, HashSet};
use std::io::BufRead;

fn main() {
    let mut ids = HashSet::new();
    let mut kernels: HashMap<String, usize> = HashMap::new();
    let mut n = 0;
    for line in std::io::stdin().lock().lines() {
        let v: serde_json::Value = serde_json::from_str(&line.expect("a line")).expect("JSON");
        let e = &v["evaluation"];
        let g: evo_genome::Genome =
            serde_json::from_value(e["genome"].clone()).expect("a genome");
        ids.insert(e["genome_id"].as_str().expect("an id").to_string());
        let d = evo_codegen::defines(&g, evo_genome::HeadDim::D64, evo_genome::Dtype::F16);
        *kernels.entry(format!("{:?} {:?}", g.family, d.flags())).or_default() += 1;
        n += 1;
    }
    println!(
        "{n} evaluations, {} distinct genome ids, {} distinct kernels (family and defines)",
        ids.len(),
        kernels.len()
    );
}
