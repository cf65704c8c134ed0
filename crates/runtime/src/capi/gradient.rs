//! The C ABI's gradient calls: the forward that also writes the log-sum-exp, and the
//! backward that takes it (`include/evo.h`). Same boundary as the forward's: a status
//! code, the message per thread, a panic caught.

use super::{boundary, champions, problem_ex, problem_of};
use crate::backward::BwdBuffers;
use crate::error::RuntimeError;
use crate::launch::Buffers;
use std::ffi::{c_int, c_void};

/// See `include/evo.h`.
///
/// # Safety
/// As [`evo_attention_forward`](super::evo_attention_forward); `lse` is checked as the
/// tensors are.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn evo_attention_forward_lse(
    q: *const c_void,
    k: *const c_void,
    v: *const c_void,
    o: *mut c_void,
    lse: *mut f32,
    b: c_int,
    h: c_int,
    hkv: c_int,
    lq: c_int,
    lk: c_int,
    d: c_int,
    dtype: c_int,
    causal: c_int,
    align: c_int,
    window_left: c_int,
    window_right: c_int,
    stream: *mut c_void,
) -> c_int {
    boundary(|| {
        let base = problem_of([b, h, lq, lk, d], dtype, causal)?;
        let p = problem_ex(base, hkv, align, [window_left, window_right])?;
        if lse.is_null() {
            return Err(RuntimeError::InvalidArgument(
                "lse is NULL; pass an fp32 [B, H, Lq] device buffer (or call \
                 evo_attention_forward_ex, which writes no lse)"
                    .into(),
            ));
        }
        let buffers = Buffers {
            q: q as u64,
            k: k as u64,
            v: v as u64,
            o: o as u64,
            ..Buffers::default()
        };
        // SAFETY: the stream is the caller's (this function's contract); the pointers
        // are checked by `forward_with_lse`.
        unsafe {
            champions()?.forward_with_lse(
                &p,
                &buffers,
                Some(lse as u64),
                stream as cudarc::driver::sys::CUstream,
            )
        }
    })
}

/// See `include/evo.h`.
///
/// # Safety
/// As [`evo_attention_forward`](super::evo_attention_forward), for the nine tensors.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn evo_attention_backward(
    q: *const c_void,
    k: *const c_void,
    v: *const c_void,
    o: *const c_void,
    d_o: *const c_void,
    lse: *const f32,
    dq: *mut c_void,
    dk: *mut c_void,
    dv: *mut c_void,
    b: c_int,
    h: c_int,
    hkv: c_int,
    lq: c_int,
    lk: c_int,
    d: c_int,
    dtype: c_int,
    causal: c_int,
    align: c_int,
    window_left: c_int,
    window_right: c_int,
    stream: *mut c_void,
) -> c_int {
    boundary(|| {
        let base = problem_of([b, h, lq, lk, d], dtype, causal)?;
        let p = problem_ex(base, hkv, align, [window_left, window_right])?;
        let buffers = BwdBuffers {
            q: q as u64,
            k: k as u64,
            v: v as u64,
            o: o as u64,
            d_o: d_o as u64,
            lse: lse as u64,
            dq: dq as u64,
            dk: dk as u64,
            dv: dv as u64,
            ws: 0,
        };
        // SAFETY: the stream is the caller's (this function's contract); the pointers
        // are checked by `backward`.
        unsafe { champions()?.backward(&p, &buffers, stream as cudarc::driver::sys::CUstream) }
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::last_error;
    use super::super::Status;
    use super::*;

    #[test]
    fn the_gradient_calls_check_their_arguments_before_any_gpu_work() {
        let null = std::ptr::null::<c_void>();
        // Shape (H, Hkv, D), dtype and align codes, lse pointer.
        let forward = |dtype: c_int, lse: *mut f32| {
            // SAFETY: the arguments are refused before any pointer is read.
            unsafe {
                evo_attention_forward_lse(
                    null,
                    null,
                    null,
                    std::ptr::null_mut(),
                    lse,
                    1,
                    8,
                    2,
                    128,
                    128,
                    64,
                    dtype,
                    1,
                    0,
                    -1,
                    -1,
                    std::ptr::null_mut(),
                )
            }
        };
        assert_eq!(
            forward(0, std::ptr::null_mut()),
            Status::InvalidArgument as c_int
        );
        assert!(last_error().contains("lse is NULL"), "{}", last_error());
        assert_eq!(
            forward(5, std::ptr::null_mut()),
            Status::InvalidArgument as c_int
        );
        assert!(last_error().contains("dtype code 5"), "{}", last_error());
        let backward = |hkv: c_int, d: c_int, align: c_int| {
            let out = std::ptr::null_mut::<c_void>();
            // SAFETY: as above.
            unsafe {
                evo_attention_backward(
                    null,
                    null,
                    null,
                    null,
                    null,
                    std::ptr::null(),
                    out,
                    out,
                    out,
                    2,
                    8,
                    hkv,
                    64,
                    64,
                    d,
                    1,
                    1,
                    align,
                    -1,
                    -1,
                    std::ptr::null_mut(),
                )
            }
        };
        assert_eq!(backward(3, 64, 0), Status::InvalidArgument as c_int);
        assert!(last_error().contains("`kv_heads` is 3"), "{}", last_error());
        assert_eq!(backward(2, 64, 7), Status::InvalidArgument as c_int);
        assert!(last_error().contains("align code 7"), "{}", last_error());
        assert_eq!(backward(2, 80, 0), Status::Unsupported as c_int);
        assert!(last_error().contains("D=80"), "{}", last_error());
    }
}
