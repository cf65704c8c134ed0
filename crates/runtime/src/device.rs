//! The driver, a GPU's context and the caller's pointers, checked before anything runs.
//!
//! cudarc panics when libcuda is missing, so [`driver_present`] is asked first: without
//! a driver every constructor answers [`RuntimeError::NoDevice`], as candle's dummy CUDA
//! backend does, and callers need no `cfg`. A caller's pointer is asked what the driver
//! knows of it (memory type, device, the allocation around it), so that a host pointer,
//! another GPU's buffer or a tensor smaller than its shape is an error, not a fault.

use crate::error::{driver, RuntimeError};
use cudarc::driver::sys as cu;
use cudarc::driver::CudaContext;
use std::ffi::c_void;
use std::sync::Arc;

/// True when the dynamic loader finds libcuda (no symbol is called).
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen libcuda by its usual names; no symbol is called.
    unsafe { cu::is_culib_present() }
}

/// The primary context of GPU `ordinal` (the one PyTorch and the runtime API use, so
/// their pointers are valid in it), or why there is none.
pub fn open_context(ordinal: usize) -> Result<Arc<CudaContext>, RuntimeError> {
    if !driver_present() {
        return Err(RuntimeError::NoDevice(
            "libcuda (the NVIDIA driver library) was not found by the dynamic loader; \
             run on a machine with an NVIDIA driver, with its library directory on \
             LD_LIBRARY_PATH"
                .into(),
        ));
    }
    CudaContext::new(ordinal).map_err(|e| {
        RuntimeError::NoDevice(format!(
            "the driver is present but GPU {ordinal} cannot be opened: {e} \
             (no GPU, or CUDA_VISIBLE_DEVICES hides it)"
        ))
    })
}

/// What the driver knows of one of the caller's pointers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PointerInfo {
    /// The GPU whose memory it is.
    pub ordinal: usize,
    /// Bytes from the pointer to the end of its allocation, when the driver reports the
    /// allocation (memory mapped by the virtual-memory API may not be).
    pub bytes_after: Option<u64>,
}

/// Asks the driver about `ptr`, the tensor `what` (`q`, `k`...); refuses null, host and
/// unknown pointers.
pub fn pointer_info(ptr: u64, what: &str) -> Result<PointerInfo, RuntimeError> {
    if ptr == 0 {
        return Err(RuntimeError::InvalidArgument(format!(
            "{what} is a null pointer"
        )));
    }
    let mut memory_type: u32 = 0;
    let mut ordinal: i32 = -1;
    let mut start: u64 = 0;
    let mut size: usize = 0;
    let mut attributes = [
        cu::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
        cu::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        cu::CUpointer_attribute::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
        cu::CUpointer_attribute::CU_POINTER_ATTRIBUTE_RANGE_SIZE,
    ];
    let mut data: [*mut c_void; 4] = [
        &mut memory_type as *mut u32 as *mut c_void,
        &mut ordinal as *mut i32 as *mut c_void,
        &mut start as *mut u64 as *mut c_void,
        &mut size as *mut usize as *mut c_void,
    ];
    // SAFETY: four attributes, each with a pointer to a live local of the type the
    // driver writes for it (unsigned int, int, CUdeviceptr, size_t); for a pointer the
    // driver does not know it writes defaults and returns success.
    unsafe {
        cu::cuPointerGetAttributes(
            attributes.len() as u32,
            attributes.as_mut_ptr(),
            data.as_mut_ptr(),
            ptr,
        )
    }
    .result()
    .map_err(driver(format!("asking the driver about {what}")))?;
    let device = cu::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32;
    let unified = cu::CUmemorytype::CU_MEMORYTYPE_UNIFIED as u32;
    if memory_type == cu::CUmemorytype::CU_MEMORYTYPE_HOST as u32 {
        return Err(RuntimeError::InvalidArgument(format!(
            "{what} ({ptr:#x}) is host memory; pass a device buffer (a CUDA tensor)"
        )));
    }
    if (memory_type != device && memory_type != unified) || ordinal < 0 {
        return Err(RuntimeError::InvalidArgument(format!(
            "{what} ({ptr:#x}) is not memory the CUDA driver allocated; pass a device \
             buffer (a CUDA tensor)"
        )));
    }
    let bytes_after = (size > 0 && start <= ptr).then(|| start + size as u64 - ptr);
    Ok(PointerInfo {
        ordinal: ordinal as usize,
        bytes_after,
    })
}
