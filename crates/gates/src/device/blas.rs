//! The two products of attention as cuBLAS strided-batched GEMMs, one (b, h) per batch
//! entry, for row-major tensors: the cuBLAS hybrid runs them on 16-bit data, the
//! verifier's reference in fp32. cuBLAS is column-major: a row-major [Lq, Lk] S is the
//! column-major Sᵀ (Lk x Lq) = K·Qᵀ, and a row-major [Lq, D] O is Oᵀ = Vᵀ·Pᵀ.

use crate::error::GateError;
use cudarc::cublas::sys::{cublasComputeType_t, cublasGemmAlgo_t, cublasOperation_t, cudaDataType};
use cudarc::cublas::{result, CudaBlas};

/// Sizes and element types of the products of `batch` heads.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Products {
    pub lq: i32,
    pub lk: i32,
    pub d: i32,
    pub batch: i32,
    /// The batch entries read one K and V head (the query heads of one group in
    /// grouped-query attention: a stride of 0); else one head each.
    pub kv_shared: bool,
    /// Q, K, V (and P in the second product).
    pub inputs: cudaDataType,
    pub scores: cudaDataType,
    pub output: cudaDataType,
    pub compute: cublasComputeType_t,
}

fn blas_err(during: &str) -> impl FnOnce(result::CublasError) -> GateError {
    let during = during.to_string();
    move |e| GateError::Blas {
        during,
        message: format!("{e:?}"),
    }
}

impl Products {
    /// Elements between the K (or V) heads of consecutive batch entries.
    fn kv_stride(&self) -> i64 {
        if self.kv_shared {
            0
        } else {
            self.lk as i64 * self.d as i64
        }
    }

    /// S = Q·Kᵀ (unscaled) into `s`, Lq·Lk per head.
    ///
    /// # Safety
    /// `q`, `k` and `s` are live device buffers of at least `batch` heads of Q [Lq, D],
    /// K [Lk, D] (one head when `kv_shared`; elements of `inputs`) and S [Lq, Lk]
    /// (elements of `scores`).
    pub unsafe fn scores(
        &self,
        blas: &CudaBlas,
        q: u64,
        k: u64,
        s: u64,
        what: &str,
    ) -> Result<(), GateError> {
        let (lq, lk, d) = (self.lq, self.lk, self.d);
        let (one, zero) = (1.0f32, 0.0f32);
        // SAFETY: the caller's buffers; A = K read transposed, B = Q, C = Sᵀ.
        unsafe {
            result::gemm_strided_batched_ex(
                *blas.handle(),
                cublasOperation_t::CUBLAS_OP_T,
                cublasOperation_t::CUBLAS_OP_N,
                lk,
                lq,
                d,
                (&one) as *const f32 as *const _,
                k as *const _,
                self.inputs,
                d,
                self.kv_stride(),
                q as *const _,
                self.inputs,
                d,
                (lq as i64) * (d as i64),
                (&zero) as *const f32 as *const _,
                s as *mut _,
                self.scores,
                lk,
                (lq as i64) * (lk as i64),
                self.batch,
                self.compute,
                cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(blas_err(&format!("{what}'s Q·Kᵀ")))
    }

    /// O = P·V into `o`, Lq·D per head; P holds elements of `inputs`.
    ///
    /// # Safety
    /// `p`, `v` and `o` are live device buffers of at least `batch` heads of P [Lq, Lk],
    /// V [Lk, D] (one head when `kv_shared`; elements of `inputs`) and O [Lq, D]
    /// (elements of `output`).
    pub unsafe fn weighted_sum(
        &self,
        blas: &CudaBlas,
        p: u64,
        v: u64,
        o: u64,
        what: &str,
    ) -> Result<(), GateError> {
        let (lq, lk, d) = (self.lq, self.lk, self.d);
        let (one, zero) = (1.0f32, 0.0f32);
        // SAFETY: the caller's buffers; A = V (D x Lk column-major), B = P (Lk x Lq
        // column-major), C = Oᵀ, neither transposed.
        unsafe {
            result::gemm_strided_batched_ex(
                *blas.handle(),
                cublasOperation_t::CUBLAS_OP_N,
                cublasOperation_t::CUBLAS_OP_N,
                d,
                lq,
                lk,
                (&one) as *const f32 as *const _,
                v as *const _,
                self.inputs,
                d,
                self.kv_stride(),
                p as *const _,
                self.inputs,
                lk,
                (lq as i64) * (lk as i64),
                (&zero) as *const f32 as *const _,
                o as *mut _,
                self.output,
                d,
                (lq as i64) * (d as i64),
                self.batch,
                self.compute,
                cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(blas_err(&format!("{what}'s P·V")))
    }
}
