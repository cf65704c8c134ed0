//! Random inputs for one launch: Q, K, V as the kernel's 16-bit elements, and their
//! exact f32 upcasts for the reference.
//!
//! Inputs are drawn fresh for every launch by the counter-based generator of
//! [`crate::philox`] from a seed recorded in the report, so a failure can be replayed
//! bit for bit, and the device draws the same bits (FAST draws its timed inputs there).
//! Values have zero mean and unit variance (never zeros: zeros hide unwritten outputs
//! and wrong indexing); the large-logit cases multiply Q so that scores reach
//! |s| > 100, where a softmax without the running max overflows `expf` (fp32
//! overflows past exp(88.7)).

use crate::philox::{draw_into, value_scale, Tensor};
use evo_genome::{Dtype, Problem};
use rayon::prelude::*;

/// Elements per chunk an input tensor is drawn in (in parallel; `CHUNK` is even).
pub const CHUNK: usize = 1 << 16;

/// The bit pattern the output is filled with before every launch: a quiet NaN with a
/// payload no arithmetic produces (canonical NaNs are 0x7E00/0x7FFF for f16 and
/// 0x7FC0/0x7FFF for bf16), so an element still holding it was never written.
pub fn poison_bits(dtype: Dtype) -> u16 {
    match dtype {
        Dtype::F16 => 0x7E5A,
        Dtype::Bf16 => 0x7FA5,
    }
}

/// Elements of the guard region after O: a whole 128 x 128 tile stored one tile past
/// the end still lands in it.
pub const GUARD_ELEMS: usize = 128 * 128;

/// The pattern of O's guard region: a NaN (f16) / huge (bf16) bit pattern no rounding
/// of attention produces, distinct from the poison so the two regions are told apart.
pub const GUARD_BITS: u16 = 0x7D3C;

/// The pattern of the split-KV workspace's guard (f32 elements after ws_o and ws_lse).
pub const GUARD_F32_BITS: u32 = 0x7FA5_3C3C;

/// A poisoned O followed by its guard region: what every output buffer is reset to.
pub fn fresh_output(problem: &Problem) -> Vec<u16> {
    let mut o = vec![poison_bits(problem.dtype); problem.q_elems() + GUARD_ELEMS];
    o[problem.q_elems()..].fill(GUARD_BITS);
    o
}

/// Where the guard region `guard` (after `region`) no longer holds `pattern`: `None`
/// when intact, else how many elements were overwritten and the first offset.
pub fn guard_breach<T: PartialEq + Copy>(region: &str, guard: &[T], pattern: T) -> Option<String> {
    let hit: Vec<usize> = (0..guard.len()).filter(|&i| guard[i] != pattern).collect();
    hit.first().map(|first| {
        format!(
            "wrote past the end of {region}: {} of the {} guard elements after it were \
             overwritten, the first {} past the end",
            hit.len(),
            guard.len(),
            first
        )
    })
}

/// Rounds an f32 to the dtype; returns the bits.
pub fn to_bits(dtype: Dtype, x: f32) -> u16 {
    match dtype {
        Dtype::F16 => half::f16::from_f32(x).to_bits(),
        Dtype::Bf16 => half::bf16::from_f32(x).to_bits(),
    }
}

/// The f32 value of a 16-bit element.
///
/// f16 goes through a table of all 65,536 values (256 KB, built once from `half`'s
/// conversion): GREEN and FAST's verification convert every output element, tens of
/// millions per kernel, and the table is several times faster than converting each
/// (`tests::the_f16_table_is_halfs_conversion` checks every entry). bf16 is a shift.
#[inline]
pub fn to_f32(dtype: Dtype, bits: u16) -> f32 {
    match dtype {
        Dtype::F16 => f16_table()[bits as usize],
        Dtype::Bf16 => f32::from_bits((bits as u32) << 16),
    }
}

fn f16_table() -> &'static [f32; 1 << 16] {
    static TABLE: std::sync::OnceLock<Box<[f32; 1 << 16]>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = Box::new([0f32; 1 << 16]);
        for (bits, v) in t.iter_mut().enumerate() {
            *v = half::f16::from_bits(bits as u16).to_f32();
        }
        t
    })
}

/// Q, K and V of one launch.
#[derive(Debug, Clone)]
pub struct Inputs {
    pub problem: Problem,
    /// The seed the three tensors were drawn from.
    pub seed: u64,
    /// The factor Q was drawn with (1 for ordinary cases): with the problem and the
    /// seed, it determines the tensors.
    pub q_gain: f32,
    pub q: Vec<u16>,
    pub k: Vec<u16>,
    pub v: Vec<u16>,
}

impl Inputs {
    /// Q, K, V of unit variance drawn from `seed`; Q is multiplied by `q_gain` (1 for
    /// ordinary cases). Streams 0, 1 and 2 of [`draw_stream`].
    pub fn random(problem: &Problem, seed: u64, q_gain: f32) -> Inputs {
        let dtype = problem.dtype;
        Inputs {
            problem: *problem,
            seed,
            q_gain,
            q: draw_stream(dtype, seed, Tensor::Q as u32, problem.q_elems(), q_gain),
            k: draw_stream(dtype, seed, Tensor::K as u32, problem.kv_elems(), 1.0),
            v: draw_stream(dtype, seed, Tensor::V as u32, problem.kv_elems(), 1.0),
        }
    }

    /// [`Inputs::random`]'s values at the query heads `bh` of `heads` (each `b·H + h`)
    /// and at the K/V heads they read, zeros elsewhere: what a host reference of those
    /// heads alone needs, without drawing the rest (a decode batch's K and V run to
    /// gigabytes). The zeros are never touched, so they cost no memory until read; such
    /// inputs serve a host reference only, never a launch.
    pub fn random_heads(problem: &Problem, seed: u64, q_gain: f32, heads: &[usize]) -> Inputs {
        let p = problem;
        let d = p.head_dim.get() as usize;
        let (q_head, kv_head) = (p.q_len as usize * d, p.kv_len as usize * d);
        let (mut q, mut k, mut v) = (
            vec![0u16; p.q_elems()],
            vec![0u16; p.kv_elems()],
            vec![0u16; p.kv_elems()],
        );
        let kv_heads: Vec<usize> = heads.iter().map(|&bh| p.kv_head(bh)).collect();
        let dtype = p.dtype;
        // One head a task; a head's slice starts at an even element (D is even), as
        // `draw_into` asks, and holds the values the whole tensor's draw puts there.
        let draw = |t: &mut [u16], stream: Tensor, len: usize, wanted: &[usize], gain: f32| {
            let scale = value_scale(gain);
            t.par_chunks_mut(len)
                .enumerate()
                .filter(|(i, _)| wanted.contains(i))
                .for_each(|(i, out)| draw_into(out, dtype, seed, stream as u32, i * len, scale));
        };
        draw(&mut q, Tensor::Q, q_head, heads, q_gain);
        draw(&mut k, Tensor::K, kv_head, &kv_heads, 1.0);
        draw(&mut v, Tensor::V, kv_head, &kv_heads, 1.0);
        Inputs {
            problem: *problem,
            seed,
            q_gain,
            q,
            k,
            v,
        }
    }

    pub fn q_f32(&self) -> Vec<f32> {
        upcast(self.problem.dtype, &self.q)
    }
    pub fn k_f32(&self) -> Vec<f32> {
        upcast(self.problem.dtype, &self.k)
    }
    pub fn v_f32(&self) -> Vec<f32> {
        upcast(self.problem.dtype, &self.v)
    }
}

/// `n` elements of Philox stream `stream` (a [`Tensor`]'s word, or one of the
/// backward's) drawn from `seed` with standard deviation `gain`, as the dtype's bits.
///
/// Chunks of [`CHUNK`] elements are drawn in parallel; the generator is counter based,
/// so the values do not depend on the number of threads.
pub fn draw_stream(dtype: Dtype, seed: u64, stream: u32, n: usize, gain: f32) -> Vec<u16> {
    let scale = value_scale(gain);
    let mut out = vec![0u16; n];
    out.par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(c, chunk)| draw_into(chunk, dtype, seed, stream, c * CHUNK, scale));
    out
}

/// The f32 values of a tensor's 16-bit elements.
pub fn upcast(dtype: Dtype, bits: &[u16]) -> Vec<f32> {
    bits.iter().map(|&b| to_f32(dtype, b)).collect()
}

/// The seed of launch `launch` of the case keyed `case` under a run seed: distinct per
/// launch so the second launch of a case sees new inputs.
pub fn launch_seed(run_seed: u64, case: u64, launch: usize) -> u64 {
    run_seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(case.wrapping_mul(0x100))
        .wrapping_add(launch as u64)
}

/// A stable key of a case's label (FNV-1a), so a case gets the same inputs whatever
/// its position in a suite (kernels that skip a case still share the rest's inputs).
pub fn case_key(label: &str) -> u64 {
    label.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_f16_table_is_halfs_conversion() {
        let reference = |dtype, bits| match dtype {
            Dtype::F16 => half::f16::from_bits(bits).to_f32(),
            Dtype::Bf16 => half::bf16::from_bits(bits).to_f32(),
        };
        for dtype in Dtype::ALL {
            for bits in 0..=u16::MAX {
                let (a, b) = (to_f32(dtype, bits), reference(dtype, bits));
                assert!(
                    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                    "{dtype:?} {bits:#06x}: {a} vs {b}"
                );
            }
        }
    }

    #[test]
    fn poison_is_a_nan_that_rounding_never_produces() {
        for dtype in Dtype::ALL {
            let p = poison_bits(dtype);
            assert!(to_f32(dtype, p).is_nan());
            assert_ne!(to_bits(dtype, f32::NAN), p);
            assert_ne!(to_bits(dtype, -f32::NAN), p);
        }
    }

    #[test]
    fn same_seed_same_inputs_new_seed_new_inputs() {
        let p = Problem::seed();
        let a = Inputs::random(&p, 7, 1.0);
        let b = Inputs::random(&p, 7, 1.0);
        let c = Inputs::random(&p, launch_seed(7, 0, 1), 1.0);
        assert_eq!(a.q, b.q);
        assert_ne!(a.q, c.q);
        let q = a.q_f32();
        let mean = q.iter().sum::<f32>() / q.len() as f32;
        let var = q.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>() / q.len() as f32;
        assert!(
            mean.abs() < 0.02 && (var - 1.0).abs() < 0.05,
            "mean {mean} var {var}"
        );
    }

    #[test]
    fn launch_seeds_differ_across_cases_and_launches() {
        let seeds: std::collections::BTreeSet<u64> = (0..12)
            .flat_map(|c| (0..2).map(move |l| launch_seed(42, case_key(&format!("case {c}")), l)))
            .collect();
        assert_eq!(seeds.len(), 24);
    }
}
