//! candle's own attention in f32, the reference the op is checked against, and GREEN's
//! two error measures (crates/gates/src/tolerance.rs): the largest absolute error, which
//! catches one wrong row or tile, and the relative Frobenius error, which catches an
//! error spread thinly everywhere.

use candle_core::{DType, Result, Tensor, D};

/// `softmax(q kᵀ / sqrt(D) + mask) v` in f32 on the 16-bit inputs as given (GREEN's
/// reference), a few heads at a time so the scores stay under 2^27 floats.
pub fn attention(q: &Tensor, k: &Tensor, v: &Tensor, causal: bool) -> Result<Tensor> {
    let (b, h, lq, d) = q.dims4()?;
    let lk = k.dim(2)?;
    let flat = |t: &Tensor, len: usize| {
        t.to_dtype(DType::F32)?
            .contiguous()?
            .reshape((b * h, len, d))
    };
    let (q, k, v) = (flat(q, lq)?, flat(k, lk)?, flat(v, lk)?);
    let scale = 1.0 / (d as f64).sqrt();
    let mask = if causal {
        let rows: Vec<f32> = (0..lq)
            .flat_map(|i| (0..lk).map(move |j| if j > i { f32::NEG_INFINITY } else { 0.0 }))
            .collect();
        Some(Tensor::from_vec(rows, (1, lq, lk), q.device())?)
    } else {
        None
    };
    let step = ((1usize << 27) / (lq * lk).max(1)).max(1);
    let mut out = Vec::new();
    for first in (0..b * h).step_by(step) {
        let n = step.min(b * h - first);
        let (q, k, v) = (
            q.narrow(0, first, n)?,
            k.narrow(0, first, n)?,
            v.narrow(0, first, n)?,
        );
        let mut scores = (q.matmul(&k.t()?)? * scale)?;
        if let Some(mask) = &mask {
            scores = scores.broadcast_add(mask)?;
        }
        let exp = scores
            .broadcast_sub(&scores.max_keepdim(D::Minus1)?)?
            .exp()?;
        let probs = exp.broadcast_div(&exp.sum_keepdim(D::Minus1)?)?;
        out.push(probs.matmul(&v)?);
    }
    Tensor::cat(&out, 0)?.reshape((b, h, lq, d))
}

/// The largest |o − ref| and ‖o − ref‖_F / ‖ref‖_F, GREEN's two measures (`o` in any
/// float dtype).
pub fn errors(o: &Tensor, reference: &Tensor) -> Result<(f64, f64)> {
    // Sums in f64: over 10^8 elements an f32 sum would blur the figure it reports.
    let (o, reference) = (o.to_dtype(DType::F64)?, reference.to_dtype(DType::F64)?);
    let diff = (o - &reference)?;
    let max_abs = diff.abs()?.max_all()?.to_scalar::<f64>()?;
    let diff_sq = diff.sqr()?.sum_all()?.to_scalar::<f64>()?;
    let ref_sq = reference.sqr()?.sum_all()?.to_scalar::<f64>()?;
    Ok((max_abs, (diff_sq / ref_sq).sqrt()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    fn tensor(values: &[f32], dims: (usize, usize, usize, usize)) -> Tensor {
        Tensor::from_slice(values, dims, &Device::Cpu).unwrap()
    }

    #[test]
    fn the_first_causal_query_sees_only_the_first_key_and_zero_scores_average() {
        // Zero queries score every key alike: each output row is the mean of the rows
        // of v it sees, which the causal mask cuts to the first i + 1.
        let q = tensor(&[0.0; 6], (1, 1, 3, 2));
        let v = tensor(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], (1, 1, 3, 2));
        let causal = attention(&q, &q, &v, true).unwrap();
        let rows = causal.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        assert_eq!(rows, [1.0, 2.0, 2.0, 3.0, 3.0, 4.0]);
        let full = attention(&q, &q, &v, false).unwrap();
        let rows = full.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        assert_eq!(rows, [3.0, 4.0, 3.0, 4.0, 3.0, 4.0]);
    }

    #[test]
    fn the_errors_are_the_largest_and_the_relative_frobenius() {
        let expected = tensor(&[3.0, 4.0], (1, 1, 1, 2));
        let got = tensor(&[3.0, 4.5], (1, 1, 1, 2));
        let (max_abs, rel_frob) = errors(&got, &expected).unwrap();
        assert_eq!(max_abs, 0.5);
        assert!((rel_frob - 0.1).abs() < 1e-12, "{rel_frob}");
    }
}
