//! One host cross-check of FAST's device reference, timed on the CPU as FAST makes it:
//! the heads `cross_check_heads` picks, their inputs drawn alone (`Inputs::random_heads`)
//! and candle's reference at the rows `cross_check_rows` picks. Usage: xbench SPEC [SEED]
use evo_gates::inputs::Inputs;
use evo_gates::reference::{cross_check_heads, cross_check_rows, reference_at};
use evo_genome::Problem;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let p: Problem = args[1].parse().expect("a problem spec");
    let seed: u64 = args.get(2).map_or(12345, |s| s.parse().expect("a seed"));
    let t = Instant::now();
    let heads = cross_check_heads(&p, seed);
    let inputs = Inputs::random_heads(&p, seed, 1.0, &heads);
    let draw = t.elapsed().as_secs_f64();
    let per_head = cross_check_rows(&p, seed);
    let r = reference_at(&inputs, |bh| per_head[bh].clone()).expect("the reference");
    let mut kv: Vec<usize> = heads.iter().map(|&bh| p.kv_head(bh)).collect();
    kv.dedup();
    println!(
        "{p} seed {seed}: {} heads, {} K/V heads; draw {draw:.2} s, draw + reference {:.2} s, {} rows",
        heads.len(),
        kv.len(),
        t.elapsed().as_secs_f64(),
        r.rows_checked()
    );
}
