//! The gates' input generator: Philox4x32-10 (Salmon et al., "Parallel random numbers:
//! as easy as 1, 2, 3", SC 2011), counter-based, so any element of any input can be
//! drawn on its own, on the host or on the device, bit for bit the same.
//!
//! That is what lets FAST draw every timed launch's inputs on the GPU between repeats
//! (a kernel never meets the same inputs twice) while the host can still rebuild the
//! inputs of any launch it chooses to check. `kernels/verify.cu` holds the device copy
//! of [`philox4x32_10`] and [`element_pair`]; `gpu_tests` checks the two agree.
//!
//! Values: each element is the sum of four 16-bit uniforms, centred and scaled to unit
//! variance (Irwin–Hall, n = 4: within ±3.46σ, never zero-heavy), computed in integers
//! and converted with one f32 multiplication, so the host and the device round alike.

use evo_genome::Dtype;

const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

/// Philox4x32 with 10 rounds: four 32-bit words from a 128-bit counter and a 64-bit key.
pub fn philox4x32_10(mut ctr: [u32; 4], mut key: [u32; 2]) -> [u32; 4] {
    for round in 0..10 {
        if round > 0 {
            key[0] = key[0].wrapping_add(W0);
            key[1] = key[1].wrapping_add(W1);
        }
        let p0 = M0 as u64 * ctr[0] as u64;
        let p1 = M1 as u64 * ctr[2] as u64;
        ctr = [
            (p1 >> 32) as u32 ^ ctr[1] ^ key[0],
            p1 as u32,
            (p0 >> 32) as u32 ^ ctr[3] ^ key[1],
            p0 as u32,
        ];
    }
    ctr
}

/// Which tensor of a launch an element belongs to (part of the counter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Tensor {
    Q = 0,
    K = 1,
    V = 2,
}

/// Standard deviation of `2·(u0 + u1 + u2 + u3) − 4·65535` for independent uniform
/// 16-bit `u`: `2·sqrt(4·(65536² − 1)/12)`.
pub fn centred_sum_std() -> f64 {
    2.0 * ((65536.0f64 * 65536.0 - 1.0) / 3.0).sqrt()
}

/// The f32 factor that turns a centred sum into a value of standard deviation `gain`
/// (computed once, on the host, and handed to the device as it is).
pub fn value_scale(gain: f32) -> f32 {
    (gain as f64 / centred_sum_std()) as f32
}

/// The centred sums of elements `2·pair` and `2·pair + 1` of stream `stream` (a
/// [`Tensor`]'s word, or a stream of the backward's) drawn from `seed`.
#[inline]
pub fn element_pair(seed: u64, stream: u32, pair: u64) -> (i32, i32) {
    let w = philox4x32_10(
        [pair as u32, (pair >> 32) as u32, stream, 0],
        [seed as u32, (seed >> 32) as u32],
    );
    let sum = |a: u32, b: u32| -> i32 {
        let s = (a & 0xFFFF) + (a >> 16) + (b & 0xFFFF) + (b >> 16);
        2 * s as i32 - 4 * 65535
    };
    (sum(w[0], w[1]), sum(w[2], w[3]))
}

/// One element's 16-bit value: the centred sum times `scale`, rounded to the dtype.
#[inline]
pub fn element_bits(dtype: Dtype, centred: i32, scale: f32) -> u16 {
    crate::inputs::to_bits(dtype, centred as f32 * scale)
}

/// `out.len()` elements of stream `stream` drawn from `seed`, from element `start` on
/// (even), as the dtype's bits.
pub fn draw_into(out: &mut [u16], dtype: Dtype, seed: u64, stream: u32, start: usize, scale: f32) {
    debug_assert!(start.is_multiple_of(2));
    for (i, pair) in out.chunks_mut(2).enumerate() {
        let (a, b) = element_pair(seed, stream, (start / 2 + i) as u64);
        pair[0] = element_bits(dtype, a, scale);
        if let Some(x) = pair.get_mut(1) {
            *x = element_bits(dtype, b, scale);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn philox_matches_the_random123_known_answers() {
        // kat_vectors of Random123 1.14: philox4x32 10 rounds.
        assert_eq!(
            philox4x32_10([0, 0, 0, 0], [0, 0]),
            [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]
        );
        assert_eq!(
            philox4x32_10([u32::MAX; 4], [u32::MAX; 2]),
            [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]
        );
        assert_eq!(
            philox4x32_10(
                [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
                [0xa409_3822, 0x299f_31d0]
            ),
            [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]
        );
    }

    #[test]
    fn values_have_unit_variance_and_bounded_tails() {
        let n = 1 << 16;
        let mut bits = vec![0u16; n];
        draw_into(
            &mut bits,
            Dtype::F16,
            11,
            Tensor::K as u32,
            0,
            value_scale(1.0),
        );
        let x: Vec<f64> = bits
            .iter()
            .map(|&b| crate::inputs::to_f32(Dtype::F16, b) as f64)
            .collect();
        let mean = x.iter().sum::<f64>() / n as f64;
        let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n as f64;
        assert!(
            mean.abs() < 0.02 && (var - 1.0).abs() < 0.03,
            "{mean} {var}"
        );
        assert!(x.iter().all(|v| v.abs() <= 3.47));
        assert!(x.iter().filter(|v| **v == 0.0).count() < n / 1000);
    }

    #[test]
    fn any_slice_is_the_same_as_the_whole() {
        let mut whole = vec![0u16; 1000];
        draw_into(
            &mut whole,
            Dtype::Bf16,
            3,
            Tensor::V as u32,
            0,
            value_scale(2.0),
        );
        let mut part = vec![0u16; 301];
        draw_into(
            &mut part,
            Dtype::Bf16,
            3,
            Tensor::V as u32,
            500,
            value_scale(2.0),
        );
        assert_eq!(&whole[500..801], &part[..]);
        let mut other = vec![0u16; 1000];
        draw_into(
            &mut other,
            Dtype::Bf16,
            3,
            Tensor::Q as u32,
            0,
            value_scale(2.0),
        );
        assert_ne!(whole, other, "each tensor has its own stream");
    }
}
