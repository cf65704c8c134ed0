//! What a kernel module declares about itself (kernels/ABI.md): its launch geometry
//! (`evo_geometry`) and, for kernels that load through the copy engine, the tensor maps
//! it wants (`evo_tensor_maps`), and how those maps are encoded for a buffer.

use crate::error::{driver, RuntimeError};
use cudarc::driver::DeviceRepr;
use evo_genome::{Dtype, HeadDim, Problem};

/// Symbols of the kernel ABI (kernels/ABI.md).
pub const ENTRY_FWD: &str = "evo_attention_fwd";
pub const ENTRY_COMBINE: &str = "evo_attention_combine";
pub const GEOMETRY_SYMBOL: &str = "evo_geometry";
/// A kernel that loads through the copy engine exports this (kernels/ABI.md, "Tensor maps").
pub const TENSOR_MAPS_SYMBOL: &str = "evo_tensor_maps";
/// A kernel that stores O through the copy engine exports this as `{rows}`, the rows of
/// O's box, beside `evo_tensor_maps`; it then takes O's map after V's (kernels/ABI.md).
pub const TENSOR_MAP_O_SYMBOL: &str = "evo_tensor_map_o";
/// A persistent kernel exports this: CTAs per SM (kernels/ABI.md, "Persistent kernels").
pub const PERSISTENT_SYMBOL: &str = "evo_persistent";
/// A kernel of the second ABI (K/V heads and the mask's diagonal and window as
/// arguments) exports this as `{2}`; a module without it is of the first.
pub const ABI_SYMBOL: &str = "evo_abi";
/// A kernel that packs the query heads of a K/V head into one CTA's rows exports this
/// as `{1}` (kernels/ABI.md, "Packed grouped-query heads").
pub const PACK_GQA_SYMBOL: &str = "evo_pack_gqa";
/// A kernel of the second ABI that writes the forward's log-sum-exp when asked exports
/// this as `{1}`; it then takes `float* lse` last in both entry points (kernels/ABI.md,
/// "The log-sum-exp output").
pub const LSE_SYMBOL: &str = "evo_lse";
/// The ABI versions the runtime launches.
pub const ABI_VERSIONS: std::ops::RangeInclusive<u32> = 1..=2;

/// Why a module of the first ABI cannot run at `head_dim` (it states D64 and D128 only),
/// or `None` where it can: the one rule the gates (before building a file) and the
/// runtime (before launching a module) both apply.
pub fn first_abi_refuses(head_dim: HeadDim) -> Option<String> {
    (!HeadDim::FIRST_ABI.contains(&head_dim)).then(|| {
        format!(
            "a kernel of the first ABI (it declares no `{ABI_SYMBOL}`) states head dims 64 \
             and 128 only, not D{head_dim}; D{head_dim} needs the second (kernels/ABI.md)"
        )
    })
}

/// The ABI version a module declares in `evo_abi`, refusing ones the runtime cannot
/// launch.
pub fn abi_version(v: &[i32]) -> Result<u32, String> {
    match v.first() {
        Some(&n) if n >= 1 && ABI_VERSIONS.contains(&(n as u32)) => Ok(n as u32),
        other => Err(format!(
            "{ABI_SYMBOL} declares version {other:?}; this runtime launches versions \
             {}..={}: declare `extern \"C\" __constant__ int {ABI_SYMBOL}[1] = {{2}};` for \
             the signature with K/V heads and the mask (kernels/ABI.md), or nothing for the first",
            ABI_VERSIONS.start(),
            ABI_VERSIONS.end()
        )),
    }
}

/// Whether a module's `evo_lse` (`v`; `None` when it declares none) makes its entry
/// points take the `lse` argument, refusing values other than 0 and 1 and an `evo_lse`
/// of 1 in a kernel of the first ABI (whose signature has no place for it).
pub fn takes_lse(v: Option<&[i32]>, abi: u32) -> Result<bool, String> {
    match v.map(|v| v.first().copied()) {
        None | Some(Some(0)) => Ok(false),
        Some(Some(1)) if abi >= 2 => Ok(true),
        Some(Some(1)) => Err(format!(
            "`{LSE_SYMBOL}` is {{1}} in a kernel of the first ABI; the `lse` argument follows \
             the second ABI's window_right: declare `{ABI_SYMBOL}` = {{2}} too (kernels/ABI.md)"
        )),
        Some(other) => Err(format!(
            "`{LSE_SYMBOL}` is {other:?}; declare `extern \"C\" __constant__ int \
             {LSE_SYMBOL}[1] = {{1}};` for a kernel that takes `float* lse` last, or nothing"
        )),
    }
}

/// The launch geometry a kernel module declares in `evo_geometry`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Geometry {
    pub block_m: u32,
    pub threads: u32,
    pub smem_bytes: u32,
    pub split_kv: u32,
    pub combine_rows: u32,
    pub combine_threads: u32,
    /// A persistent kernel's grid cap (kernels/ABI.md, "Persistent kernels"): the SMs
    /// times the CTAs per SM it declares in `evo_persistent`; 0 for the ABI's grid.
    pub persistent_grid: u32,
}

impl Geometry {
    /// From the six ints of `evo_geometry`, refusing values no launch can use.
    pub fn from_ints(v: &[i32]) -> Result<Geometry, String> {
        let names = [
            "block_m",
            "threads_per_block",
            "smem_bytes",
            "split_kv",
            "combine_rows_per_block",
            "combine_threads",
        ];
        for (i, name) in names.iter().enumerate() {
            if v[i] < 0 {
                return Err(format!("evo_geometry[{i}] ({name}) is negative ({})", v[i]));
            }
        }
        Ok(Geometry {
            block_m: v[0] as u32,
            threads: v[1] as u32,
            smem_bytes: v[2] as u32,
            split_kv: v[3] as u32,
            combine_rows: v[4] as u32,
            combine_threads: v[5] as u32,
            persistent_grid: 0,
        })
    }

    /// The forward kernel's grid for a problem: one CTA per (query block, head, split),
    /// or for a persistent kernel as many as that or its cap, whichever is fewer, in x
    /// (a multiple of the split, and at least one split's worth, when the splits merge
    /// in a cluster).
    pub fn fwd_grid(&self, p: &Problem) -> (u32, u32, u32) {
        let blocks = p.q_len.div_ceil(self.block_m);
        let heads = p.batch * p.heads;
        if self.persistent_grid > 0 {
            let tiles = u64::from(blocks) * u64::from(heads) * u64::from(self.split_kv);
            let grid = tiles.min(u64::from(self.persistent_grid));
            // Splits merged in a cluster: whole clusters of `split_kv` CTAs, at least one.
            let grid = if self.merges_in_cluster() {
                let s = u64::from(self.split_kv);
                (grid / s * s).max(s)
            } else {
                grid
            };
            (grid as u32, 1, 1)
        } else {
            (blocks, heads, self.split_kv)
        }
    }

    /// Checks the geometry against the device limits.
    pub fn check(&self, max_smem_optin: u32) -> Result<(), String> {
        if self.block_m == 0 {
            return Err("evo_geometry[0] (block_m) is 0".into());
        }
        if !(1..=1024).contains(&self.threads) {
            return Err(format!(
                "evo_geometry[1] (threads_per_block) is {}; it must be 1..=1024",
                self.threads
            ));
        }
        if self.smem_bytes > max_smem_optin {
            return Err(format!(
                "evo_geometry[2] (smem_bytes) is {}, over the device's {} bytes per block",
                self.smem_bytes, max_smem_optin
            ));
        }
        if self.split_kv == 0 {
            return Err("evo_geometry[3] (split_kv) is 0; use 1 for no split".into());
        }
        if self.has_combine()
            && (self.combine_rows == 0 || !(1..=1024).contains(&self.combine_threads))
        {
            return Err(format!(
                "split_kv is {} but the combine geometry (rows {}, threads {}) cannot be \
                 launched; declare both 0 if the kernel merges its splits itself (kernels/ABI.md)",
                self.split_kv, self.combine_rows, self.combine_threads
            ));
        }
        Ok(())
    }

    /// Whether the kernel merges its splits itself (a cluster per query block,
    /// kernels/ABI.md "Splits merged in a cluster"): it declares a split and a combine of
    /// 0 rows and 0 threads, and the host launches no combine and gives no workspace.
    pub fn merges_in_cluster(&self) -> bool {
        self.split_kv > 1 && self.combine_rows == 0 && self.combine_threads == 0
    }

    /// Whether a combine kernel follows the forward one.
    pub fn has_combine(&self) -> bool {
        self.split_kv > 1 && !self.merges_in_cluster()
    }
}

/// CTAs per SM a persistent kernel asks for in `evo_persistent` (kernels/ABI.md),
/// refusing counts no SM can hold.
pub fn persistent_ctas(v: &[i32]) -> Result<u32, String> {
    match v.first() {
        Some(&n) if (1..=32).contains(&n) => Ok(n as u32),
        other => Err(format!(
            "{PERSISTENT_SYMBOL} asks for {other:?} CTAs per SM; declare \
             `extern \"C\" __constant__ int {PERSISTENT_SYMBOL}[1] = {{n}};` with n in 1..=32"
        )),
    }
}

/// The tensor maps a copy-engine kernel asks for in `evo_tensor_maps`: rows of the Q
/// box, rows of the K/V box, elements per box row, swizzle bytes (kernels/ABI.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct TensorMapSpec {
    pub q_rows: u32,
    pub kv_rows: u32,
    pub box_cols: u32,
    pub swizzle: u32,
    /// Rows of O's box, for a kernel that stores O by TMA (`evo_tensor_map_o`).
    pub o_rows: Option<u32>,
}

impl TensorMapSpec {
    /// From the four ints of `evo_tensor_maps`, refusing boxes the copy engine rejects.
    pub fn from_ints(v: &[i32]) -> Result<TensorMapSpec, String> {
        if !box_rows_ok(v[0]) || !box_rows_ok(v[1]) {
            return Err(format!(
                "{TENSOR_MAPS_SYMBOL} asks for boxes of {} (Q) and {} (K/V) rows; a box \
                 has 1..=256 rows",
                v[0], v[1]
            ));
        }
        if v[2] != 64 || v[3] != 128 {
            return Err(format!(
                "{TENSOR_MAPS_SYMBOL} asks for {} elements per box row with a {}-byte swizzle; \
                 evo builds 64-element (128-byte) rows with the 128-byte swizzle: declare \
                 {{q_rows, kv_rows, 64, 128}}",
                v[2], v[3]
            ));
        }
        Ok(TensorMapSpec {
            q_rows: v[0] as u32,
            kv_rows: v[1] as u32,
            box_cols: 64,
            swizzle: 128,
            o_rows: None,
        })
    }

    /// With O's map, from the int of `evo_tensor_map_o` (its box rows).
    pub fn with_o(self, v: &[i32]) -> Result<TensorMapSpec, String> {
        match v.first() {
            Some(&r) if box_rows_ok(r) => Ok(TensorMapSpec {
                o_rows: Some(r as u32),
                ..self
            }),
            other => Err(format!(
                "{TENSOR_MAP_O_SYMBOL} asks for O boxes of {other:?} rows; declare \
                 `extern \"C\" __constant__ int {TENSOR_MAP_O_SYMBOL}[1] = {{rows}};` with \
                 rows in 1..=256"
            )),
        }
    }
}

/// Rows a box of the copy engine may have (each side of a box is 1..=256).
fn box_rows_ok(rows: i32) -> bool {
    (1..=256).contains(&rows)
}

/// The tensor maps of one call, in the signature's order: Q, K and V's, then O's for a
/// kernel that stores O by TMA.
#[derive(Clone, Copy)]
pub struct TensorMaps {
    pub q: TensorMapArg,
    pub k: TensorMapArg,
    pub v: TensorMapArg,
    pub o: Option<TensorMapArg>,
}

/// A `CUtensorMap` passed by value as a `__grid_constant__` kernel parameter.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub struct TensorMapArg(pub(crate) [u64; 16]);

// SAFETY: a plain 128-byte, 64-byte-aligned value that the kernel reads as its
// `const __grid_constant__ CUtensorMap` parameter (the driver copies the bytes).
unsafe impl DeviceRepr for TensorMapArg {}

/// The shape of one tensor's 3-D tiled map, innermost first, as `cuTensorMapEncodeTiled`
/// takes it: global dims (D, L, B*heads), the byte strides of dims 1 and 2, the box.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TiledMapShape {
    pub dims: [u64; 3],
    pub strides: [u64; 2],
    pub boxes: [u32; 3],
}

impl TiledMapShape {
    /// The map of a [B, heads, L, D] tensor of 16-bit elements with boxes of
    /// `spec.box_cols` x `rows` x 1. The inner dimension is the real D, whatever the
    /// box: at D96 a row takes two 64-column boxes and the second one's columns 96..127
    /// lie out of bounds, so the copy engine writes zeros there (the Hopper template's
    /// padded tiles); at D256 a row takes four.
    pub fn of(p: &Problem, (len, heads): (u32, u32), rows: u32, spec: &TensorMapSpec) -> Self {
        let d = u64::from(p.head_dim.get());
        TiledMapShape {
            dims: [d, u64::from(len), u64::from(p.batch * heads)],
            strides: [d * 2, u64::from(len) * d * 2],
            boxes: [spec.box_cols, rows, 1],
        }
    }

    /// Boxes that cover one row of D elements.
    pub fn boxes_per_row(&self) -> u64 {
        self.dims[0].div_ceil(u64::from(self.boxes[0]))
    }

    /// The requirements `cuTensorMapEncodeTiled` documents for a 16-bit, non-interleaved
    /// map with the 128-byte swizzle, checked before the driver sees the map (so a
    /// shape it would refuse is named here, and CPU tests can check every head dim).
    pub fn check(&self) -> Result<(), String> {
        if self.dims.iter().any(|&d| d == 0 || d > 1 << 32) {
            return Err(format!(
                "tensor map dims {:?}: each must be 1..=2^32",
                self.dims
            ));
        }
        if self
            .strides
            .iter()
            .any(|&s| !s.is_multiple_of(16) || s >= 1 << 40)
        {
            return Err(format!(
                "tensor map strides {:?} bytes: each must be a multiple of 16 below 2^40",
                self.strides
            ));
        }
        if self.boxes.iter().any(|&b| b == 0 || b > 256) {
            return Err(format!(
                "tensor map box {:?}: each side must be 1..=256",
                self.boxes
            ));
        }
        let inner_bytes = self.boxes[0] * 2;
        if !inner_bytes.is_multiple_of(16) || inner_bytes > 128 {
            return Err(format!(
                "tensor map box rows of {inner_bytes} bytes: with the 128-byte swizzle a \
                 box row is a multiple of 16 bytes, at most 128"
            ));
        }
        Ok(())
    }
}

/// Encodes the 3-D map (D, L, B*heads) of one [B, heads, L, D] tensor: boxes of
/// `spec.box_cols` x `rows` x 1, 128-byte swizzle, zeros for elements past L (so the
/// partial tile of a head never reads the next head's rows) and past D (D96's padded
/// tiles; [`TiledMapShape::of`]). `len` and `heads` are the tensor's (`p.q_len`,
/// `p.heads` for Q; `p.kv_len`, `p.kv_heads()` for K and V). The driver must be present
/// ([`crate::driver_present`]).
pub fn encode_tensor_map(
    base: u64,
    p: &Problem,
    (len, heads): (u32, u32),
    rows: u32,
    spec: &TensorMapSpec,
) -> Result<TensorMapArg, RuntimeError> {
    use cudarc::driver::sys as cu;
    let shape = TiledMapShape::of(p, (len, heads), rows, spec);
    shape
        .check()
        .map_err(|e| RuntimeError::Abi(format!("{p}: {e}")))?;
    let TiledMapShape {
        dims,
        strides,
        boxes,
    } = shape;
    let element_strides = [1u32; 3];
    let dtype = match p.dtype {
        Dtype::F16 => cu::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        Dtype::Bf16 => cu::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
    };
    let mut map = cu::CUtensorMap_st { opaque: [0; 16] };
    // SAFETY: every pointer refers to a live local array of the length the rank (3)
    // implies; `base` is a device allocation of B*H*len*D 16-bit elements.
    let status = unsafe {
        cu::cuTensorMapEncodeTiled(
            &mut map,
            dtype,
            3,
            base as *mut std::ffi::c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            boxes.as_ptr(),
            element_strides.as_ptr(),
            cu::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            cu::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
            cu::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            cu::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    status.result().map_err(driver(format!(
        "encoding a tensor map for {p} (box {}x{rows})",
        spec.box_cols
    )))?;
    Ok(TensorMapArg(map.opaque))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_is_checked_against_the_device() {
        let ok = Geometry::from_ints(&[64, 128, 40960, 1, 0, 0]).unwrap();
        assert!(ok.check(227 * 1024).is_ok());
        assert!(ok.check(32 * 1024).unwrap_err().contains("smem_bytes"));
        let split = Geometry::from_ints(&[64, 128, 0, 4, 4, 0]).unwrap();
        assert!(split.check(227 * 1024).unwrap_err().contains("combine"));
        let combined = Geometry::from_ints(&[64, 128, 0, 4, 4, 128]).unwrap();
        assert!(combined.check(227 * 1024).is_ok());
        assert!(combined.has_combine() && !combined.merges_in_cluster());
        // A combine of 0 rows and 0 threads: the kernel merges its splits itself.
        let cluster = Geometry::from_ints(&[64, 128, 0, 4, 0, 0]).unwrap();
        assert!(cluster.check(227 * 1024).is_ok());
        assert!(cluster.merges_in_cluster() && !cluster.has_combine());
        assert!(!ok.merges_in_cluster() && !ok.has_combine());
        assert!(Geometry::from_ints(&[64, -1, 0, 1, 0, 0])
            .unwrap_err()
            .contains("threads_per_block"));
        let zero = Geometry::from_ints(&[64, 128, 0, 0, 0, 0]).unwrap();
        assert!(zero.check(1 << 20).unwrap_err().contains("split_kv"));
    }

    #[test]
    fn a_persistent_grid_of_cluster_merged_splits_is_whole_clusters() {
        // B1 H8 L512 with 64-row blocks and 4 splits: 8 x 8 x 4 = 256 tiles.
        let p: Problem = "1,8,512,512,64,f16".parse().unwrap();
        let mut g = Geometry::from_ints(&[64, 256, 0, 4, 0, 0]).unwrap();
        assert_eq!(g.fwd_grid(&p), (8, 8, 4));
        for (cap, grid) in [(132, 132), (130, 128), (1000, 256), (3, 4), (1, 4)] {
            g.persistent_grid = cap;
            assert_eq!(g.fwd_grid(&p), (grid, 1, 1), "cap {cap}");
        }
        // With a combine kernel the cap is the grid, whatever the split.
        let mut k = Geometry::from_ints(&[64, 256, 0, 4, 4, 128]).unwrap();
        k.persistent_grid = 130;
        assert_eq!(k.fwd_grid(&p), (130, 1, 1));
    }

    /// The Hopper template loads a row of D elements as ceil(D / 64) boxes of 64 columns
    /// (kernels/attention_sm90.cu, `kColBlocks`) from a map whose inner dimension is the
    /// real D: at D96 the second box's columns 96..127 are out of bounds (zero-filled).
    #[test]
    fn tensor_maps_cover_every_head_dim_with_64_column_boxes() {
        let spec = TensorMapSpec::from_ints(&[128, 80, 64, 128]).unwrap();
        for (d, boxes_per_row) in [(64, 1), (96, 2), (128, 2), (256, 4)] {
            let p: Problem = format!("2,8,1000,777,{d},bf16,kv=2").parse().unwrap();
            let q = TiledMapShape::of(&p, (p.q_len, p.heads), spec.q_rows, &spec);
            let kv = TiledMapShape::of(&p, (p.kv_len, p.kv_heads()), spec.kv_rows, &spec);
            let d = d as u64;
            assert_eq!(q.dims, [d, 1000, 16], "D{d}");
            assert_eq!(q.strides, [d * 2, 1000 * d * 2], "D{d}");
            assert_eq!(q.boxes, [64, 128, 1], "D{d}");
            assert_eq!(kv.dims, [d, 777, 4], "D{d}");
            assert_eq!(kv.strides, [d * 2, 777 * d * 2], "D{d}");
            assert_eq!(kv.boxes, [64, 80, 1], "D{d}");
            assert_eq!(q.boxes_per_row(), boxes_per_row, "D{d}");
            assert_eq!(kv.boxes_per_row(), boxes_per_row, "D{d}");
            q.check().unwrap();
            kv.check().unwrap();
        }
    }

    #[test]
    fn tensor_map_shapes_the_driver_refuses_are_named() {
        let spec = TensorMapSpec::from_ints(&[64, 64, 64, 128]).unwrap();
        let p: Problem = "1,1,64,64,96,f16".parse().unwrap();
        let ok = TiledMapShape::of(&p, (64, 1), 64, &spec);
        ok.check().unwrap();
        let odd_stride = TiledMapShape {
            strides: [100, 6400],
            ..ok
        };
        assert!(odd_stride.check().unwrap_err().contains("multiple of 16"));
        let wide = TiledMapShape {
            boxes: [128, 64, 1],
            ..ok
        };
        assert!(wide.check().unwrap_err().contains("at most 128"));
    }

    #[test]
    fn evo_lse_is_0_or_1_and_needs_the_second_abi() {
        assert_eq!(takes_lse(None, 2), Ok(false));
        assert_eq!(takes_lse(None, 1), Ok(false));
        assert_eq!(takes_lse(Some(&[0]), 2), Ok(false));
        assert_eq!(takes_lse(Some(&[1]), 2), Ok(true));
        assert!(takes_lse(Some(&[1]), 1).unwrap_err().contains("first ABI"));
        assert!(takes_lse(Some(&[2]), 2).unwrap_err().contains("= {1};"));
    }

    #[test]
    fn tensor_map_boxes_are_checked() {
        let spec = TensorMapSpec::from_ints(&[128, 64, 64, 128]).unwrap();
        assert_eq!((spec.q_rows, spec.kv_rows), (128, 64));
        assert!(TensorMapSpec::from_ints(&[0, 64, 64, 128])
            .unwrap_err()
            .contains("1..=256"));
        assert!(TensorMapSpec::from_ints(&[64, 64, 32, 128])
            .unwrap_err()
            .contains("{q_rows, kv_rows, 64, 128}"));
        assert_eq!(spec.o_rows, None);
        assert_eq!(spec.with_o(&[64]).unwrap().o_rows, Some(64));
        for bad in [0, 257, -1] {
            assert!(spec.with_o(&[bad]).unwrap_err().contains("rows in 1..=256"));
        }
    }
}
