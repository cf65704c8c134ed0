//! What a snapshot keeps of one output O: its rows cut into at most [`MAX_CHUNKS`] runs
//! of consecutive rows, and per run a BLAKE3 hash of its bytes, its f64 sum and sum of
//! squares, and [`SAMPLES_PER_CHUNK`] values of one of its rows.
//!
//! Every row is covered by a hash and the sums, but values are kept of one row per
//! chunk only: the largest class (B1 H16 L8192 D128) has 131,072 rows, whose hashes
//! alone would make the file megabytes; a shape of at most [`MAX_CHUNKS`] rows keeps
//! every row on its own. The hash answers "bit for bit the same?" for the common case
//! (the same kernel on the same kind of GPU); the sums and samples judge the rest.

use crate::snapshot::inputs::{hash_elements, to_f32};
use evo_genome::{Dtype, Problem};
use serde::{Deserialize, Serialize};
use std::ops::Range;

/// Chunks per output at most: with [`SAMPLES_PER_CHUNK`] values each, the snapshot of an
/// export's seven classes in two dtypes takes 244 KB.
pub const MAX_CHUNKS: u64 = 64;

/// Values sampled from each chunk's sample row, spread over the row from its first
/// column to its last.
pub const SAMPLES_PER_CHUNK: u32 = 8;

/// One output, summarised.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputSummary {
    /// Rows of O, B·H·Lq, in memory order: row `r` is (b, h, i) = (r / (H·Lq),
    /// r / Lq mod H, r mod Lq).
    pub rows: u64,
    /// Elements per row: D.
    pub row_len: u32,
    /// Consecutive rows per chunk (the last chunk may have fewer).
    pub rows_per_chunk: u64,
    /// The columns sampled in every chunk's sample row.
    pub sample_cols: Vec<u32>,
    pub chunks: Vec<ChunkSummary>,
}

/// One run of consecutive rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChunkSummary {
    /// BLAKE3 of the chunk's elements as little-endian bytes, in hex.
    pub hash: String,
    /// Σ O and Σ O² over the chunk's elements, in f64, in memory order.
    pub sum: f64,
    pub sum_sq: f64,
    /// The row the samples are taken from: the chunk's middle row.
    pub sample_row: u64,
    /// The sample row's values at the summary's `sample_cols`.
    pub samples: Vec<f32>,
}

impl OutputSummary {
    /// The summary of `output`, the O of `p` (`B·H·Lq·D` elements).
    pub fn of(p: &Problem, output: &[u16]) -> OutputSummary {
        let rows = p.batch as u64 * p.heads as u64 * p.q_len as u64;
        let row_len = p.head_dim.get();
        debug_assert_eq!(output.len() as u64, rows * row_len as u64);
        let rows_per_chunk = rows.div_ceil(MAX_CHUNKS).max(1);
        let sample_cols = sample_cols(row_len);
        let mut summary = OutputSummary {
            rows,
            row_len,
            rows_per_chunk,
            sample_cols,
            chunks: Vec::new(),
        };
        for k in 0..rows.div_ceil(rows_per_chunk) as usize {
            let range = summary.chunk_rows(k);
            let (hash, sum, sum_sq) = chunk_stats(p.dtype, summary.elements(output, &range));
            let sample_row = range.start + (range.end - range.start) / 2;
            let samples = summary
                .sample_cols
                .iter()
                .map(|&c| summary.value(p.dtype, output, sample_row, c))
                .collect();
            summary.chunks.push(ChunkSummary {
                hash,
                sum,
                sum_sq,
                sample_row,
                samples,
            });
        }
        summary
    }

    /// The rows of chunk `k`.
    pub fn chunk_rows(&self, k: usize) -> Range<u64> {
        let start = k as u64 * self.rows_per_chunk;
        start..(start + self.rows_per_chunk).min(self.rows)
    }

    /// The elements of `rows` in `output`.
    pub fn elements<'a>(&self, output: &'a [u16], rows: &Range<u64>) -> &'a [u16] {
        let d = self.row_len as usize;
        &output[rows.start as usize * d..rows.end as usize * d]
    }

    /// The value at (`row`, `col`) of `output`.
    pub fn value(&self, dtype: Dtype, output: &[u16], row: u64, col: u32) -> f32 {
        to_f32(
            dtype,
            output[row as usize * self.row_len as usize + col as usize],
        )
    }
}

/// [`SAMPLES_PER_CHUNK`] columns from 0 to `d - 1`, evenly spaced (fewer when `d` is
/// smaller).
fn sample_cols(d: u32) -> Vec<u32> {
    let mut cols: Vec<u32> = (0..SAMPLES_PER_CHUNK)
        .map(|j| j * (d - 1) / (SAMPLES_PER_CHUNK - 1))
        .collect();
    cols.dedup();
    cols
}

/// A run of elements' hash, sum and sum of squares.
pub fn chunk_stats(dtype: Dtype, elements: &[u16]) -> (String, f64, f64) {
    let mut hasher = blake3::Hasher::new();
    hash_elements(&mut hasher, elements);
    let (mut sum, mut sum_sq) = (0f64, 0f64);
    for &bits in elements {
        let x = to_f32(dtype, bits) as f64;
        sum += x;
        sum_sq += x * x;
    }
    (hasher.finalize().to_hex().to_string(), sum, sum_sq)
}

/// Row `row` of `p`'s O as `b=.. h=.. i=..`.
pub fn row_name(p: &Problem, row: u64) -> String {
    let lq = p.q_len as u64;
    let (b, h, i) = (
        row / (p.heads as u64 * lq),
        row / lq % p.heads as u64,
        row % lq,
    );
    format!("row {row} (b={b} h={h} i={i})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_outputs_keep_every_row_large_ones_chunk_them() {
        let small: Problem = "1,2,16,16,64,f16".parse().unwrap();
        let o = vec![0x3C00u16; small.q_elems()]; // 1.0 everywhere
        let s = OutputSummary::of(&small, &o);
        assert_eq!((s.rows, s.rows_per_chunk, s.chunks.len()), (32, 1, 32));
        assert_eq!(s.sample_cols, vec![0, 9, 18, 27, 36, 45, 54, 63]);
        assert_eq!((s.chunks[3].sum, s.chunks[3].sum_sq), (64.0, 64.0));
        assert_eq!(s.chunks[3].sample_row, 3);
        assert_eq!(s.chunks[3].samples, vec![1.0; 8]);
        assert_eq!(s.chunks[0].hash, s.chunks[31].hash);

        let large: Problem = "1,3,1000,77,128,bf16".parse().unwrap();
        let o = vec![0u16; large.q_elems()];
        let s = OutputSummary::of(&large, &o);
        assert_eq!((s.rows, s.rows_per_chunk, s.chunks.len()), (3000, 47, 64));
        assert_eq!(s.chunk_rows(63), 2961..3000);
        assert_eq!(s.chunks[63].sample_row, 2961 + 19);
        assert_eq!(*s.sample_cols.last().unwrap(), 127);
    }

    #[test]
    fn rows_are_named_by_batch_head_and_query() {
        let p: Problem = "2,3,10,10,64,f16".parse().unwrap();
        assert_eq!(row_name(&p, 0), "row 0 (b=0 h=0 i=0)");
        assert_eq!(row_name(&p, 47), "row 47 (b=1 h=1 i=7)");
    }
}
