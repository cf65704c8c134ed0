//! FAST's host cross-check of the device reference, timed on the CPU: every head (the selection before this commit: every
//! tensor drawn whole, every (b, h) read, one row each at least) and the new one (a
//! bounded set of heads, drawn alone). Usage: xbench SPEC [all|bounded]
use evo_gates::inputs::Inputs;
use evo_gates::reference::{cross_check_heads, cross_check_rows, reference_at};
use evo_genome::Problem;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let p: Problem = args[1].parse().unwrap();
    let seed = 12345u64;
    let t = Instant::now();
    let (inputs, rows_total) = if args[2] == "all" {
        let inputs = Inputs::random(&p, seed, 1.0);
        let draw = t.elapsed().as_secs_f64();
        let r = reference_at(&inputs, |bh| vec![(bh as u32 * 7919) % p.q_len]).unwrap();
        (draw, r.rows_checked())
    } else {
        let heads = cross_check_heads(&p, seed);
        let inputs = Inputs::random_heads(&p, seed, 1.0, &heads);
        let draw = t.elapsed().as_secs_f64();
        let per_head = cross_check_rows(&p, seed);
        let r = reference_at(&inputs, |bh| per_head[bh].clone()).unwrap();
        (draw, r.rows_checked())
    };
    println!(
        "{} {}: draw {:.2} s, draw + reference {:.2} s, {} rows",
        p, args[2], inputs, t.elapsed().as_secs_f64(), rows_total
    );
}
