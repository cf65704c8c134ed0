//! The inputs a snapshot runs on: Q, K and V drawn from a seed by a generator simple
//! enough to write down, so that any machine, and any program, draws the same bits.
//!
//! Element `n` of tensor `t` (Q = 0, K = 1, V = 2; each `[B, H, L, D]`, contiguous) is
//! the little-endian `u32` word `w` at bytes `4n..4n+4` of the BLAKE3 extendable output
//! of the 9 bytes `seed as u64 little-endian ‖ t`, hashed in derive-key mode with the
//! context [`CONTEXT`]; its value is
//!
//! ```text
//! ((w >> 8) as i32 - 2^23) as f32 * ((sqrt(3) / 2^23) as f32)
//! ```
//!
//! rounded to the dtype (to nearest, ties to even): uniform on [-√3, √3), unit variance
//! like the gates' inputs. In Python: `blake3.blake3(seed.to_bytes(8, "little") +
//! bytes([t]), derive_key_context=CONTEXT).digest(4 * n)`.
//!
//! Uniform rather than normal because a normal sample needs `log` and `cos`, whose last
//! bit differs between math libraries; every step above is exact or one IEEE rounding.
//! BLAKE3 rather than the gates' Philox because this crate is below the gates and
//! hashes the outputs with BLAKE3 already. A tensor is a prefix of its stream, so the
//! inputs of a shape do not depend on the other shapes of the snapshot.

use evo_genome::{Dtype, Problem};

/// The generator's name, recorded in every snapshot: a checker that draws otherwise
/// refuses the file instead of comparing outputs of different inputs.
pub const GENERATOR: &str = "blake3-xof-uniform-sqrt3-v1";

/// BLAKE3's derive-key context of the generator.
pub const CONTEXT: &str = "evo snapshot inputs v1";

/// Q, K and V of one problem as the dtype's bits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inputs {
    pub q: Vec<u16>,
    pub k: Vec<u16>,
    pub v: Vec<u16>,
}

impl Inputs {
    /// The inputs of `p` drawn from `seed`.
    pub fn draw(p: &Problem, seed: u64) -> Inputs {
        Inputs {
            q: draw(p.dtype, seed, 0, p.q_elems()),
            k: draw(p.dtype, seed, 1, p.kv_elems()),
            v: draw(p.dtype, seed, 2, p.kv_elems()),
        }
    }

    /// BLAKE3 of Q ‖ K ‖ V (little-endian bytes), in hex: the snapshot records it, so a
    /// checker whose generator drifted says so rather than blaming the kernel.
    pub fn hash(&self) -> String {
        let mut hasher = blake3::Hasher::new();
        for tensor in [&self.q, &self.k, &self.v] {
            hash_elements(&mut hasher, tensor);
        }
        hasher.finalize().to_hex().to_string()
    }
}

/// Feeds 16-bit elements to `hasher` as their little-endian bytes, whatever the host's
/// byte order.
pub fn hash_elements(hasher: &mut blake3::Hasher, elements: &[u16]) {
    let mut bytes = [0u8; 8192];
    for block in elements.chunks(bytes.len() / 2) {
        for (pair, x) in bytes.chunks_exact_mut(2).zip(block) {
            pair.copy_from_slice(&x.to_le_bytes());
        }
        hasher.update(&bytes[..block.len() * 2]);
    }
}

/// The first `n` elements of tensor `tensor`'s stream.
fn draw(dtype: Dtype, seed: u64, tensor: u8, n: usize) -> Vec<u16> {
    let mut hasher = blake3::Hasher::new_derive_key(CONTEXT);
    hasher.update(&seed.to_le_bytes());
    hasher.update(&[tensor]);
    let mut stream = hasher.finalize_xof();
    let scale = (3f64.sqrt() / (1u64 << 23) as f64) as f32;
    let mut words = [0u8; 16384];
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let take = (n - out.len()).min(words.len() / 4);
        stream.fill(&mut words[..take * 4]);
        out.extend(words[..take * 4].chunks_exact(4).map(|w| {
            let w = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
            to_bits(dtype, ((w >> 8) as i32 - (1 << 23)) as f32 * scale)
        }));
    }
    out
}

/// An f32 rounded to the dtype, to nearest (ties to even).
fn to_bits(dtype: Dtype, x: f32) -> u16 {
    match dtype {
        Dtype::F16 => half::f16::from_f32(x).to_bits(),
        Dtype::Bf16 => half::bf16::from_f32(x).to_bits(),
    }
}

/// The value of one element of the dtype, exactly.
pub fn to_f32(dtype: Dtype, bits: u16) -> f32 {
    match dtype {
        Dtype::F16 => half::f16::from_bits(bits).to_f32(),
        Dtype::Bf16 => half::bf16::from_bits(bits).to_f32(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stream_is_the_documented_blake3_output() {
        // The module's recipe, spelled out for element 5 of K (seed 7).
        let mut hasher = blake3::Hasher::new_derive_key(CONTEXT);
        hasher.update(&[7, 0, 0, 0, 0, 0, 0, 0, 1]);
        let mut bytes = [0u8; 24];
        hasher.finalize_xof().fill(&mut bytes);
        let w = u32::from_le_bytes(bytes[20..24].try_into().unwrap());
        let x = ((w >> 8) as i32 - (1 << 23)) as f32 * (3f64.sqrt() / 8388608.0) as f32;
        assert_eq!(
            draw(Dtype::Bf16, 7, 1, 6)[5],
            half::bf16::from_f32(x).to_bits()
        );
        // Pinned, so that a change of the generator cannot pass unnoticed: snapshots
        // recorded before it would no longer check.
        let p: Problem = "1,1,4,4,64,f16".parse().unwrap();
        assert_eq!(
            &Inputs::draw(&p, 1).hash()[..16],
            PINNED_HASH,
            "the generator changed: raise GENERATOR's version"
        );
    }

    const PINNED_HASH: &str = "e953cabfc9a556f3";

    #[test]
    fn values_are_uniform_with_unit_variance() {
        let x: Vec<f64> = draw(Dtype::F16, 3, 2, 1 << 16)
            .into_iter()
            .map(|b| to_f32(Dtype::F16, b) as f64)
            .collect();
        let mean = x.iter().sum::<f64>() / x.len() as f64;
        let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / x.len() as f64;
        assert!(
            mean.abs() < 0.02 && (var - 1.0).abs() < 0.02,
            "{mean} {var}"
        );
        // √3 = 1.7321 rounds to f16's 1.7324 at most.
        assert!(x.iter().all(|v| v.abs() <= 1.7325));
    }

    #[test]
    fn a_tensor_is_a_prefix_of_its_stream_and_tensors_differ() {
        let long = draw(Dtype::Bf16, 9, 0, 10_000);
        assert_eq!(&long[..4099], &draw(Dtype::Bf16, 9, 0, 4099)[..]);
        assert_ne!(&long[..64], &draw(Dtype::Bf16, 9, 1, 64)[..]);
        assert_ne!(&long[..64], &draw(Dtype::Bf16, 10, 0, 64)[..]);
    }
}
