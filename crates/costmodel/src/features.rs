//! What the model sees of a genome on a problem: every gene's allele (of the genome
//! in canonical form, so genes that make no kernel read the same), the kernel's shape
//! (threads, query rows per CTA, shared memory), the problem (lengths, heads, head
//! dim, mask, dtype), and how the two meet: CTAs in the grid, waves over the SMs, the
//! share of a CTA's rows that hold a query (a decode's one row fills 1 of 64 unless
//! grouped heads are packed into the rows) and key tiles per warpgroup, which is what
//! decides between tiles, packing and splits.

use evo_genome::{Dtype, Genome, Problem, Switch, WgSplit};

/// Streaming multiprocessors the wave count is taken over (an H100 SXM's; a feature's
/// scale, not a device fact the model depends on).
const SMS: f64 = 132.0;

/// The feature vector of `genome` on `problem`.
pub fn features(genome: &Genome, problem: &Problem) -> Vec<f64> {
    let g = genome.canonical();
    let mut out: Vec<f64> = g.allele_indices().iter().map(|&i| i as f64).collect();
    let rows = f64::from(g.rows_per_cta().max(1));
    let split = f64::from(g.split_kv.get());
    let block_n = f64::from(g.block_n.get());
    let b = f64::from(problem.batch);
    let h = f64::from(problem.heads);
    let lq = f64::from(problem.q_len);
    let lk = f64::from(problem.kv_len);
    // Packed grouped heads: a CTA's rows are the group's query rows of one K/V head.
    let (grid_heads, head_rows) = if g.pack_gqa == Switch::On {
        (
            f64::from(problem.kv_heads()),
            lq * f64::from(problem.group()),
        )
    } else {
        (h, lq)
    };
    let row_tiles = (head_rows / rows).ceil();
    let ctas = b * grid_heads * row_tiles * split;
    let waves = ctas / SMS;
    // Ways the keys are cut: the splits, and the warpgroups of a CTA that split its keys.
    let key_ways = split
        * match g.wg_split {
            WgSplit::Keys => f64::from(g.consumer_wgs.get()),
            WgSplit::Rows => 1.0,
        };
    out.extend([
        f64::from(g.threads()),
        rows,
        f64::from(g.smem(problem.head_dim).total()) / 1024.0,
        b.log2(),
        h.log2(),
        f64::from(problem.kv_heads()).log2(),
        lq.log2(),
        lk.log2(),
        f64::from(problem.head_dim.get()),
        f64::from(u8::from(problem.causal)),
        problem.window_left.map_or(0.0, |w| f64::from(w + 1).log2()),
        f64::from(u8::from(problem.dtype == Dtype::Bf16)),
        ctas.log2(),
        waves,
        // The last wave's fill: 1 when the grid is a whole number of waves.
        waves / waves.ceil(),
        head_rows / (row_tiles * rows),
        (lk / block_n / key_ways).ceil().log2(),
    ]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_problem_and_the_grid_change_the_features() {
        let g = Genome::baseline();
        let small = Problem::seed();
        let mut long = small;
        long.q_len = 8192;
        long.kv_len = 8192;
        let (a, b) = (features(&g, &small), features(&g, &long));
        assert_eq!(a.len(), b.len());
        assert!(a.iter().all(|v| v.is_finite()));
        assert_ne!(a, b, "a longer sequence must read differently");
        // The genes' part is the same: only the problem and the grid moved.
        assert_eq!(a[..evo_genome::GENES], b[..evo_genome::GENES]);
    }
}
