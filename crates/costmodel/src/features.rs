//! What the model sees of a genome on a problem: every gene's allele (of the genome
//! in canonical form, so genes that make no kernel read the same) but `dkv_split`'s
//! ([`GENE_FEATURES`]), the kernel's shape (threads, query rows per CTA, shared memory),
//! the problem (lengths, heads, head dim, mask, dtype), and how the two meet: CTAs in
//! the grid, waves over the SMs, the share of a CTA's rows that hold a query (a decode's
//! one row fills 1 of 64 unless grouped heads are packed into the rows) and key tiles
//! per warpgroup, which is what decides between tiles, packing and splits.

use evo_genome::{
    rules::hopper_bwd_block_n, Dtype, Family, Gene, Genome, Problem, Switch, WgSplit,
};

/// The genes whose alleles open the feature vector: all but `dkv_split`, the Hopper
/// backward's split of dK and dV, which its keys per CTA (the `block_n` the key-tile
/// feature reads) and `consumer_wgs` tell exactly. Left out so that a forward genome's
/// features are the ones it had before the gene came (a column constant over every
/// forward record still moves the forest's random choice of features, and with it the
/// replay figures trained on the records), as a forward search's draws stay the same.
pub const GENE_FEATURES: usize = evo_genome::GENES - 1;

/// Streaming multiprocessors the wave count is taken over (an H100 SXM's; a feature's
/// scale, not a device fact the model depends on).
const SMS: f64 = 132.0;

/// The feature vector of `genome` on `problem`.
pub fn features(genome: &Genome, problem: &Problem) -> Vec<f64> {
    let g = genome.canonical();
    let mut out: Vec<f64> = Gene::ALL
        .iter()
        .zip(g.allele_indices())
        .filter(|(gene, _)| **gene != Gene::DkvSplit)
        .map(|(_, i)| i as f64)
        .collect();
    let rows = f64::from(g.rows_per_cta().max(1));
    let split = f64::from(g.split_kv.get());
    // Keys per CTA: `hopper_bwd`'s are 64 per consumer warpgroup, or per pair of them
    // (block_n is no gene of that family).
    let block_n = f64::from(if g.family == Family::HopperBwd {
        hopper_bwd_block_n(&g)
    } else {
        g.block_n.get()
    });
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
        assert_eq!(a[..GENE_FEATURES], b[..GENE_FEATURES]);
    }

    #[test]
    fn the_dkv_split_is_read_through_the_keys_per_cta() {
        use evo_genome::{ConsumerWgs, DkvSplit, Tile};
        let keys = Genome {
            family: Family::HopperBwd,
            block_m: Tile::T64,
            consumer_wgs: ConsumerWgs::C2,
            ..Genome::baseline()
        };
        let columns = Genome {
            dkv_split: DkvSplit::Columns,
            ..keys
        };
        let p = Problem::seed();
        let (k, c) = (features(&keys, &p), features(&columns, &p));
        assert_eq!(k.len(), c.len());
        // Same genes' part (the gene is not a column of its own), different keys per
        // CTA (128 against 64: twice the key tiles) and shared memory.
        assert_eq!(k[..GENE_FEATURES], c[..GENE_FEATURES]);
        assert_ne!(k, c);
        assert_eq!(c.last().unwrap() - k.last().unwrap(), 1.0);
        // A forward genome's features do not read the gene at all.
        let fwd = Genome::baseline();
        let fwd_columns = Genome {
            dkv_split: DkvSplit::Columns,
            ..fwd
        };
        assert_eq!(features(&fwd, &p), features(&fwd_columns, &p));
    }
}
