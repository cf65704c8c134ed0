//! The C ABI of `include/evo.h`, what the export's shared library exports.
//!
//! Nothing crosses it but integers and pointers: each function returns a status code
//! and keeps the message of its error per thread for `evo_last_error()`. A panic is
//! caught at the boundary (unwinding into C is undefined) and reported as
//! `EVO_ERROR_INTERNAL`, so a bug in the runtime is an error code, never a crash.

use crate::champions::Champions;
use crate::error::RuntimeError;
use crate::launch::Buffers;
use evo_genome::{Dtype, HeadDim, MaskAlign, Problem};
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

mod gradient;

/// The header `evo export` writes into an export's `include/`.
pub const HEADER: &str = include_str!("../include/evo.h");

/// The environment variable naming the export folder when `evo_init` was not called.
pub const EXPORT_DIR_ENV: &str = "EVO_EXPORT_DIR";

/// The header's status codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum Status {
    Ok = 0,
    InvalidArgument = 1,
    Unsupported = 2,
    NoDevice = 3,
    Export = 4,
    Kernel = 5,
    Cuda = 6,
    Internal = 7,
}

impl Status {
    pub const ALL: [(Status, &'static str); 8] = [
        (Status::Ok, "EVO_OK"),
        (Status::InvalidArgument, "EVO_ERROR_INVALID_ARGUMENT"),
        (Status::Unsupported, "EVO_ERROR_UNSUPPORTED"),
        (Status::NoDevice, "EVO_ERROR_NO_DEVICE"),
        (Status::Export, "EVO_ERROR_EXPORT"),
        (Status::Kernel, "EVO_ERROR_KERNEL"),
        (Status::Cuda, "EVO_ERROR_CUDA"),
        (Status::Internal, "EVO_ERROR_INTERNAL"),
    ];

    fn of(e: &RuntimeError) -> Status {
        match e {
            RuntimeError::NoDevice(_) => Status::NoDevice,
            RuntimeError::Driver { .. } => Status::Cuda,
            RuntimeError::Abi(_) => Status::Kernel,
            RuntimeError::InvalidArgument(_) => Status::InvalidArgument,
            RuntimeError::Unsupported(_) => Status::Unsupported,
            RuntimeError::Export { .. } => Status::Export,
        }
    }
}

/// The loaded export, shared by every thread; `evo_init` replaces it.
static CHAMPIONS: Mutex<Option<Arc<Champions>>> = Mutex::new(None);

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(message: &str) {
    // A message with a NUL byte would be cut there; none of ours has one.
    let text = CString::new(message.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = text);
}

/// Runs `body` at the boundary: its error becomes the status and the thread's message.
fn boundary(body: impl FnOnce() -> Result<(), RuntimeError> + std::panic::UnwindSafe) -> c_int {
    let status = match std::panic::catch_unwind(body) {
        Ok(Ok(())) => {
            set_last_error("");
            Status::Ok
        }
        Ok(Err(e)) => {
            set_last_error(&e.to_string());
            Status::of(&e)
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            set_last_error(&format!("internal error in the evo runtime: {what}"));
            Status::Internal
        }
    };
    status as c_int
}

fn load(dir: PathBuf) -> Result<Arc<Champions>, RuntimeError> {
    let champions = Arc::new(Champions::open(&dir)?);
    let mut slot = CHAMPIONS
        .lock()
        .map_err(|_| RuntimeError::Abi("a call panicked while holding the runtime".into()))?;
    *slot = Some(champions.clone());
    Ok(champions)
}

fn champions() -> Result<Arc<Champions>, RuntimeError> {
    let loaded = CHAMPIONS
        .lock()
        .map_err(|_| RuntimeError::Abi("a call panicked while holding the runtime".into()))?
        .clone();
    match loaded {
        Some(c) => Ok(c),
        None => match std::env::var_os(EXPORT_DIR_ENV) {
            Some(dir) => load(PathBuf::from(dir)),
            None => Err(RuntimeError::InvalidArgument(format!(
                "no export loaded: call evo_init(\"EXPORT_DIR\") or set {EXPORT_DIR_ENV} \
                 to the folder `evo export` wrote"
            ))),
        },
    }
}

/// The problem of the C call's integers, or which one is wrong.
pub fn problem_of(dims: [c_int; 5], dtype: c_int, causal: c_int) -> Result<Problem, RuntimeError> {
    let names = ["B", "H", "Lq", "Lk", "D"];
    let mut v = [0u32; 5];
    for i in 0..5 {
        if dims[i] < 1 {
            return Err(RuntimeError::InvalidArgument(format!(
                "{} is {}; it must be at least 1",
                names[i], dims[i]
            )));
        }
        v[i] = dims[i] as u32;
    }
    let head_dim = HeadDim::try_from(v[4]).map_err(|_| {
        RuntimeError::Unsupported(format!(
            "head dim D={} has no champion (evo builds D=64, 96, 128 and 256)",
            v[4]
        ))
    })?;
    let dtype = match dtype {
        0 => Dtype::F16,
        1 => Dtype::Bf16,
        other => {
            return Err(RuntimeError::InvalidArgument(format!(
                "dtype code {other} is neither EVO_DTYPE_F16 (0) nor EVO_DTYPE_BF16 (1)"
            )))
        }
    };
    Ok(Problem {
        batch: v[0],
        heads: v[1],
        q_len: v[2],
        kv_len: v[3],
        head_dim,
        dtype,
        causal: causal != 0,
        ..Problem::seed()
    })
}

/// See `include/evo.h`.
///
/// # Safety
/// `export_dir` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn evo_init(export_dir: *const c_char) -> c_int {
    boundary(|| {
        if export_dir.is_null() {
            return Err(RuntimeError::InvalidArgument(
                "evo_init: export_dir is NULL; pass the folder `evo export` wrote".into(),
            ));
        }
        // SAFETY: non-null and NUL-terminated (the function's contract).
        let dir = unsafe { CStr::from_ptr(export_dir) };
        let dir = dir.to_str().map_err(|_| {
            RuntimeError::InvalidArgument("evo_init: export_dir is not UTF-8".into())
        })?;
        load(PathBuf::from(dir)).map(|_| ())
    })
}

/// See `include/evo.h`.
///
/// # Safety
/// `stream` is null or a live `CUstream` of the GPU that holds the tensors; no other
/// work writes the tensors during the call. The pointers are checked by the driver.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn evo_attention_forward(
    q: *const c_void,
    k: *const c_void,
    v: *const c_void,
    o: *mut c_void,
    b: c_int,
    h: c_int,
    lq: c_int,
    lk: c_int,
    d: c_int,
    dtype: c_int,
    causal: c_int,
    stream: *mut c_void,
) -> c_int {
    boundary(|| {
        let p = problem_of([b, h, lq, lk, d], dtype, causal)?;
        // SAFETY: the function's contract.
        unsafe { forward_on(&p, [q, k, v, o as *const c_void], stream) }
    })
}

/// The champion for `p` on the caller's `[q, k, v, o]` and stream.
///
/// # Safety
/// As [`evo_attention_forward`]'s: `stream` is null or a live stream of the tensors'
/// GPU; the pointers themselves are checked by [`Champions::forward`].
unsafe fn forward_on(
    p: &Problem,
    [q, k, v, o]: [*const c_void; 4],
    stream: *mut c_void,
) -> Result<(), RuntimeError> {
    let buffers = Buffers {
        q: q as u64,
        k: k as u64,
        v: v as u64,
        o: o as u64,
        ..Buffers::default()
    };
    // SAFETY: the stream is the caller's (this function's contract); `forward` checks
    // the pointers.
    unsafe { champions()?.forward(p, &buffers, stream as cudarc::driver::sys::CUstream) }
}

/// The problem of `evo_attention_forward_ex`'s extra integers on top of [`problem_of`]'s.
pub fn problem_ex(
    base: Problem,
    kv_heads: c_int,
    align: c_int,
    window: [c_int; 2],
) -> Result<Problem, RuntimeError> {
    if kv_heads < 1 {
        return Err(RuntimeError::InvalidArgument(format!(
            "Hkv is {kv_heads}; it must be at least 1 (H for multi-head attention)"
        )));
    }
    let align = match align {
        0 => MaskAlign::TopLeft,
        1 => MaskAlign::BottomRight,
        other => {
            return Err(RuntimeError::InvalidArgument(format!(
                "align code {other} is neither EVO_ALIGN_TOP_LEFT (0) nor \
                 EVO_ALIGN_BOTTOM_RIGHT (1)"
            )))
        }
    };
    let side = |w: c_int, name: &str| match w {
        -1 => Ok(None),
        w if w >= 0 => Ok(Some(w as u32)),
        w => Err(RuntimeError::InvalidArgument(format!(
            "{name} is {w}; pass a width of 0 or more keys, or -1 for no bound"
        ))),
    };
    let p = Problem {
        kv_heads: (kv_heads as u32 != base.heads).then_some(kv_heads as u32),
        align,
        window_left: side(window[0], "window_left")?,
        window_right: side(window[1], "window_right")?,
        ..base
    };
    p.validate().map_err(RuntimeError::InvalidArgument)?;
    Ok(p)
}

/// See `include/evo.h`.
///
/// # Safety
/// As [`evo_attention_forward`].
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn evo_attention_forward_ex(
    q: *const c_void,
    k: *const c_void,
    v: *const c_void,
    o: *mut c_void,
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
        // SAFETY: the function's contract.
        unsafe { forward_on(&p, [q, k, v, o as *const c_void], stream) }
    })
}

/// See `include/evo.h`.
#[no_mangle]
pub extern "C" fn evo_last_error() -> *const c_char {
    // The pointer stays valid until this thread's next call replaces the message.
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// See `include/evo.h`.
#[no_mangle]
pub extern "C" fn evo_version() -> *const c_char {
    static VERSION: &CStr =
        match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
            Ok(v) => v,
            Err(_) => panic!("the version has no NUL byte"),
        };
    VERSION.as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn last_error() -> String {
        // SAFETY: evo_last_error returns a NUL-terminated string owned by this thread.
        unsafe { CStr::from_ptr(evo_last_error()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn the_header_declares_every_export_and_status_code() {
        for prototype in [
            "int evo_init(const char* export_dir);",
            "int evo_attention_forward(const void* q, const void* k, const void* v, void* o,",
            "int B, int H, int Lq, int Lk, int D, int dtype, int causal,",
            "int evo_attention_forward_ex(const void* q, const void* k, const void* v, void* o,",
            "int B, int H, int Hkv, int Lq, int Lk, int D, int dtype, int causal,",
            "int align, int window_left, int window_right, void* stream);",
            "int evo_attention_forward_lse(const void* q, const void* k, const void* v, void* o,",
            "float* lse, int B, int H, int Hkv, int Lq, int Lk, int D, int dtype,",
            "int evo_attention_backward(const void* q, const void* k, const void* v,",
            "const void* o, const void* dO, const float* lse,",
            "void* dQ, void* dK, void* dV,",
            "int causal, int align, int window_left, int window_right, void* stream);",
            "const char* evo_last_error(void);",
            "const char* evo_version(void);",
        ] {
            assert!(HEADER.contains(prototype), "evo.h lacks `{prototype}`");
        }
        for (status, name) in Status::ALL {
            let line = format!("#define {name} {}", status as i32);
            assert!(HEADER.contains(&line), "evo.h lacks `{line}`");
        }
        assert!(HEADER.contains("#define EVO_DTYPE_F16 0"));
        assert!(HEADER.contains("#define EVO_DTYPE_BF16 1"));
        assert!(HEADER.contains("#define EVO_ALIGN_TOP_LEFT 0"));
        assert!(HEADER.contains("#define EVO_ALIGN_BOTTOM_RIGHT 1"));
    }

    #[test]
    fn bad_arguments_are_codes_with_messages_never_crashes() {
        // Null tensors with a shape of `heads` heads and dtype code `dtype`.
        let call = |heads: c_int, dtype: c_int| {
            // SAFETY: null pointers are what is tested; the runtime checks them first.
            unsafe {
                evo_attention_forward(
                    std::ptr::null(),
                    std::ptr::null(),
                    std::ptr::null(),
                    std::ptr::null_mut(),
                    1,
                    heads,
                    512,
                    512,
                    64,
                    dtype,
                    0,
                    std::ptr::null_mut(),
                )
            }
        };
        assert_eq!(call(8, 2), Status::InvalidArgument as c_int);
        assert!(last_error().contains("dtype code 2"), "{}", last_error());
        assert_eq!(call(0, 0), Status::InvalidArgument as c_int);
        assert!(last_error().contains("H is 0"), "{}", last_error());
        // SAFETY: a null export_dir is refused before it is read.
        assert_eq!(
            unsafe { evo_init(std::ptr::null()) },
            Status::InvalidArgument as c_int
        );
        let missing = CString::new("/nonexistent/evo-export").unwrap();
        // SAFETY: a NUL-terminated string.
        assert_eq!(
            unsafe { evo_init(missing.as_ptr()) },
            Status::Export as c_int
        );
        assert!(last_error().contains("manifest.json"), "{}", last_error());
    }

    #[test]
    fn an_uncovered_head_dim_is_unsupported_and_the_version_is_the_crates() {
        let e = problem_of([1, 8, 512, 512, 80], 0, 0).unwrap_err();
        assert_eq!(Status::of(&e), Status::Unsupported);
        assert!(e.to_string().contains("D=80"), "{e}");
        let p = problem_of([2, 16, 77, 1000, 128], 1, 1).unwrap();
        assert_eq!(p.spec(), "2,16,77,1000,128,bf16,causal");
        let gqa = problem_ex(p, 4, 1, [256, -1]).unwrap();
        assert_eq!(
            gqa.spec(),
            "2,16,77,1000,128,bf16,causal=br,kv=4,window=256:"
        );
        let bad = |hkv, align, w| problem_ex(p, hkv, align, w).unwrap_err().to_string();
        assert!(bad(3, 0, [-1, -1]).contains("`kv_heads` is 3"));
        assert!(bad(4, 2, [-1, -1]).contains("align code 2"));
        assert!(bad(4, 0, [-5, -1]).contains("window_left is -5"));
        // SAFETY: a static NUL-terminated string.
        let v = unsafe { CStr::from_ptr(evo_version()) };
        assert_eq!(v.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
    }
}
