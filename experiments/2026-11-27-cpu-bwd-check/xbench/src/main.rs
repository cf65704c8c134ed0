//! Times what backward FAST does on the host after timing a kernel: for each of the last
//! repeat's calls, rebuild its inputs from its seed (`timed_inputs`) and compute the
//! reference rows it is judged on (`sampled_gradients`). `xbench SPEC CALLS seq|par`:
//! the calls one after another (the gate before this commit) or side by side on rayon's
//! threads (this commit's `time_backward`).

use evo_gates::backward::fast::timed_inputs;
use evo_gates::backward::sampled_gradients;
use evo_genome::Problem;
use rayon::prelude::*;
use std::time::Instant;

fn check(p: &Problem, seed: u64) -> usize {
    let n = (p.batch * p.heads * p.q_len) as usize;
    let inputs = timed_inputs(p, seed, vec![1.0; n]);
    sampled_gradients(&inputs).unwrap().rows_checked()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let p: Problem = args[1].parse().expect("a problem spec");
    let calls: u64 = args[2].parse().expect("a call count");
    let t = Instant::now();
    let rows: usize = match args[3].as_str() {
        "seq" => (0..calls).map(|s| check(&p, s)).sum(),
        "par" => (0..calls).into_par_iter().map(|s| check(&p, s)).sum(),
        other => panic!("seq or par, not {other}"),
    };
    println!(
        "{} {calls} calls {}: {:.2} s ({rows} rows; {} threads)",
        args[1],
        args[3],
        t.elapsed().as_secs_f64(),
        rayon::current_num_threads()
    );
}
