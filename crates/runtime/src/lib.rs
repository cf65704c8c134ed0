//! evo's runtime: an attention kernel of kernels/ABI.md as a library, for the gates and
//! for users of an export.
//!
//! It is the one place that turns a module into launches: load a CUBIN or PTX
//! ([`AttentionModule::load`]), read what the module declares (`evo_geometry`,
//! `evo_tensor_maps`: [`abi`]), encode the tensor maps, size the split-KV workspace and
//! launch the forward kernel and the combine on any stream, on device pointers the
//! caller owns ([`launch`]). The gates launch through it and keep only what measures;
//! an export's users reach it through [`Champions`] (dispatch by the champions' table),
//! the C ABI of `include/evo.h` ([`capi`], this crate built as a cdylib) and the Python
//! module `evo export` writes on top of that. [`snapshot`] records an export's outputs
//! and checks them on another machine.
//!
//! Without a driver or a GPU every constructor returns [`RuntimeError::NoDevice`] with
//! the reason, never a panic ([`driver_present`] is asked before cudarc is touched).

pub mod abi;
pub mod backward;
pub mod capi;
mod champions;
mod device;
mod error;
pub mod export;
pub mod launch;
mod module;
pub mod snapshot;

pub use abi::{encode_tensor_map, Geometry, TensorMapArg, TensorMapSpec, TensorMaps};
pub use backward::{bwd_workspace_len, BackwardModule, BwdBuffers, BwdGeometry};
pub use champions::Champions;
pub use device::{driver_present, open_context, pointer_info, PointerInfo};
pub use error::{driver, driver_message, RuntimeError};
pub use export::{Export, Manifest};
pub use launch::{launch, workspace_len, Args, Buffers, CombineArgs, FwdArgs, ShapeArgs};
pub use module::{function, packed_view, AttentionModule, ModuleImage};
