//! The genes: one typed field per design choice of the attention kernel.
//!
//! Every gene is either *categorical* (the alleles have no order: `scalar`,
//! `wmma`, `mma`) or *ordered* (tile sizes, stage counts: a mutation moves to a
//! neighbour). Both kinds are plain Rust enums so that an impossible allele
//! cannot be represented; the generic view used by the mutator and the
//! enumerator ([`Gene`], [`Genome::allele_index`], [`Genome::with_allele`]) is
//! derived from the same lists, so there is one source of truth per gene.

use serde::{Deserialize, Serialize};

pub use crate::gene::{Gene, GENES};
use std::fmt;

// The two macros that declare a gene's enum (its alleles, labels and conversions).
#[macro_use]
mod declare;

categorical! {
    /// How a matrix product (Q·Kᵀ or P·V) is computed.
    Math {
        /// CUDA-core FMA (the seeds' v3).
        Scalar => "scalar",
        /// `nvcuda::wmma` 16x16x16 fragments (v5, v6a); fragment layout unspecified.
        Wmma => "wmma",
        /// PTX `mma.sync.m16n8k16` + `ldmatrix` (FlashAttention-2); fragment layout known.
        Mma => "mma",
    }
}

categorical! {
    /// Where an intermediate (P, or the O accumulator) lives between tiles.
    Residence {
        /// Shared memory: any thread may read any row; costs bandwidth and barriers.
        Smem => "smem",
        /// Registers: no round trip, but the owner of each element is fixed by the fragment layout.
        Regs => "regs",
    }
}

categorical! {
    /// How K/V tiles travel from global to shared memory.
    KvLoad {
        /// `ld.global` into registers, then `st.shared`.
        Direct => "direct",
        /// `cp.async` (sm_80+): global to shared without registers, asynchronous.
        CpAsync => "cp_async",
    }
}

categorical! {
    /// Shared-memory layout of the Q, K and V tiles (bank conflicts).
    SmemLayout {
        /// Rows of D halves back to back.
        Plain => "plain",
        /// Each row padded by 16 bytes: ldmatrix rows fall into different banks.
        Padded => "padded",
        /// 16-byte chunk index XOR (row % 8): conflict-free without extra space.
        Swizzled => "swizzled",
    }
}

categorical! {
    /// The exponential of the online softmax.
    ExpFn {
        /// `expf` on `s * scale`.
        Exp => "exp",
        /// `exp2f` with `scale * log2(e)` folded into one FFMA per score.
        Exp2 => "exp2",
        /// `exp2` as above, every other score's exponential by a degree-3 polynomial on
        /// the FMA pipe (the MUFU unit does 16 per clock per SM: at D64 as many as the
        /// tensor cores need).
        Exp2Fma => "exp2_fma",
    }
}

numeric! {
    /// Query rows per CTA (Ampere).
    Tile { T16 => 16, T32 => 32, T64 => 64, T128 => 128 }
}

numeric! {
    /// K/V rows per tile: any multiple of 16 up to 256 (a wgmma's N is a multiple of 8 up
    /// to 256, and P·V takes the tile in k16 steps; FlashAttention-3 picks 80, 112, 144,
    /// 176 and 192 for some head dims). The budgets in the rules decide what fits.
    BlockN {
        N16 => 16, N32 => 32, N48 => 48, N64 => 64, N80 => 80, N96 => 96, N112 => 112,
        N128 => 128, N144 => 144, N160 => 160, N176 => 176, N192 => 192, N208 => 208,
        N224 => 224, N240 => 240, N256 => 256
    }
}

numeric! {
    /// Compute warps per CTA.
    Warps { W1 => 1, W2 => 2, W4 => 4, W8 => 8 }
}

numeric! {
    /// Warps that only stage K/V into shared memory (warp specialisation).
    ProducerWarps { P0 => 0, P1 => 1, P2 => 2 }
}

numeric! {
    /// Shared-memory pipeline depth for K/V tiles.
    Stages { S1 => 1, S2 => 2, S3 => 3, S4 => 4 }
}

numeric! {
    /// Bytes per global load instruction per thread.
    VecBytes { V4 => 4, V8 => 8, V16 => 16 }
}

numeric! {
    /// CTAs sharing one (query block, head): the KV range is split and recombined by log-sum-exp.
    SplitKv { K1 => 1, K2 => 2, K4 => 4, K8 => 8, K16 => 16, K32 => 32 }
}

numeric! {
    /// `__launch_bounds__` minimum resident blocks per SM.
    MinBlocks { B1 => 1, B2 => 2, B3 => 3, B4 => 4 }
}

numeric! {
    /// `-maxrregcount`; 0 means no cap (written `0` or `"none"` in TOML).
    RegCap { None => 0, R64 => 64, R96 => 96, R128 => 128, R168 => 168, R255 => 255 }
}

categorical! {
    /// The kernel family: which template, and which genes apply (see [`Gene::applies`]).
    Family {
        /// `kernels/attention.cu`: scalar / WMMA / mma.sync math, any warp layout (sm_89, sm_90).
        Ampere => "ampere",
        /// `kernels/attention_sm90.cu`: wgmma, a producer warpgroup staging K/V into an
        /// mbarrier ring, setmaxnreg (sm_90a only).
        Hopper => "hopper",
        /// `kernels/attention_bwd.cu`: the backward pass (dQ, dK, dV), FlashAttention-2's
        /// design: mma.sync m16n8k16 + ldmatrix, a CTA per block of keys whose dK and dV
        /// stay in registers (sm_89, sm_90).
        AmpereBwd => "ampere_bwd",
        /// `kernels/attention_bwd_sm90.cu`: the backward pass, FlashAttention-3's design:
        /// wgmma, a producer warpgroup streaming Q and dO through an mbarrier ring, 64 keys
        /// (and their dK, dV in registers) per consumer warpgroup, or per pair of them
        /// each holding half the columns ([`DkvSplit`]), setmaxnreg (sm_90a only).
        HopperBwd => "hopper_bwd",
    }
}

categorical! {
    /// Backward: how dQ, which every key block of a query row contributes to, is summed.
    DqMode {
        /// The key blocks' CTAs add dS·K into an fp32 accumulator with `atomicAdd`; a
        /// last kernel scales it and writes dQ. Float atomics make the order, and so the
        /// last bits, vary from run to run.
        Atomic => "atomic",
        /// A separate kernel, one CTA per block of query rows, recomputes S, P and dP
        /// over the K/V tiles and sums dS·K in registers: no atomics, bitwise repeatable,
        /// at the price of the recomputation.
        Separate => "separate",
        /// As `atomic`, but each consumer warpgroup stages its 64 x 64 unit of dS·K in
        /// shared memory and one thread adds the whole unit with one bulk reduce-add
        /// (`cp.reduce.async.bulk ... .add.f32`; the accumulator is laid out in units)
        /// instead of `red.global` from registers: an sm_90 instruction, so
        /// `hopper_bwd` only. Not repeatable either.
        TmaReduce => "tma_reduce",
    }
}

// The gene macros own the enum's derives; its default is the value a genome of a
// family it does not apply to holds (and a record leaves out).
#[allow(clippy::derivable_impls)]
impl Default for DqMode {
    fn default() -> DqMode {
        DqMode::Atomic
    }
}

numeric! {
    /// Hopper: consumer warpgroups per CTA, 64 query rows each (block_m = 64 x this).
    ConsumerWgs { C1 => 1, C2 => 2, C3 => 3 }
}

categorical! {
    /// Hopper: how the producer warpgroup fills a K/V (and the Q) stage.
    HopperLoad {
        /// The copy engine: `cp.async.bulk.tensor` on host-built tensor maps, one thread,
        /// 128-byte swizzle and zero fill done by the hardware.
        Tma => "tma",
        /// 128 producer threads with 16-byte `cp.async`, swizzled by address arithmetic.
        CpAsync => "cp_async",
        /// 128 producer threads with 16-byte loads and `st.shared`.
        Direct => "direct",
    }
}

categorical! {
    /// A scheduling technique switched off or on.
    Switch {
        Off => "off",
        On => "on",
    }
}

numeric! {
    /// Hopper: registers the producer warpgroup keeps under `setmaxnreg` (0: no
    /// reallocation); the consumers take the rest (240 with 2 consumer warpgroups).
    ProducerRegs { None => 0, R24 => 24, R32 => 32, R40 => 40 }
}

/// A complete kernel design: one allele per gene.
///
/// The field order is the canonical gene order (see [`Gene::ALL`]); the
/// canonical id hashes the allele indices in this order, never the TOML text.
///
/// Reading one (`raw::RawGenome`): an Ampere genome must list its 16 genes (a gene
/// silently defaulted would make two kernels look the same); a Hopper genome lists
/// the genes of its family and may leave out the Ampere-only ones, which do not shape
/// its kernel and take their baseline values; so does a backward (`ampere_bwd`,
/// `hopper_bwd`) genome, whose `dq_mode` (and `dkv_split`) may be left out too. That is
/// the records' form (evaluations and lineages leave genes at their default out); a
/// genome FILE a person writes is held to every gene of its family and no other
/// ([`crate::GenomeFile`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, try_from = "crate::raw::RawGenome")]
pub struct Genome {
    pub qk_math: Math,
    pub pv_math: Math,
    pub p_path: Residence,
    pub o_accum: Residence,
    pub block_m: Tile,
    pub block_n: BlockN,
    pub warps: Warps,
    pub producer_warps: ProducerWarps,
    pub kv_load: KvLoad,
    pub stages: Stages,
    pub smem_layout: SmemLayout,
    pub vec_bytes: VecBytes,
    pub exp: ExpFn,
    pub split_kv: SplitKv,
    #[serde(with = "reg_cap_serde")]
    pub reg_cap: RegCap,
    pub min_blocks: MinBlocks,
    /// Added with the Hopper family; absent from older files, which are all Ampere.
    /// Files and records leave genes at their default out, so an Ampere genome is
    /// written with the 16 genes it always had.
    #[serde(default, skip_serializing_if = "is_default")]
    pub family: Family,
    #[serde(default, skip_serializing_if = "is_default")]
    pub consumer_wgs: ConsumerWgs,
    #[serde(default, skip_serializing_if = "is_default")]
    pub hopper_load: HopperLoad,
    #[serde(
        default,
        skip_serializing_if = "is_default",
        with = "producer_regs_serde"
    )]
    pub producer_regs: ProducerRegs,
    /// Hopper: consumer warpgroups take turns issuing their GEMMs (named barriers), so
    /// one's softmax runs under another's GEMMs.
    #[serde(default, skip_serializing_if = "is_default")]
    pub pingpong: Switch,
    /// Hopper: whether tile j+1's Q·Kᵀ is issued before tile j's P·V so its softmax
    /// runs while P·V is on the tensor cores, and whether that continues across the
    /// tiles of a persistent CTA ([`Overlap`]).
    #[serde(default, skip_serializing_if = "is_default")]
    pub softmax_overlap: Overlap,
    /// Hopper: a persistent grid (one CTA per SM) whose CTAs loop over the (query block,
    /// head, split) tiles; the producer loads the next tile's Q and K/V while the
    /// consumers finish the current one, and O is staged in its own shared memory.
    #[serde(default, skip_serializing_if = "is_default")]
    pub persistent: Switch,
    /// Both families: the query heads that share a K/V head (grouped-query attention)
    /// are packed into one CTA's rows, so each K/V tile is loaded once per group
    /// (FlashAttention-3's PackGQA); a problem without groups is unchanged.
    #[serde(default, skip_serializing_if = "is_default")]
    pub pack_gqa: Switch,
    /// Hopper, with `split_kv` 2 to 8: the splits of a query block run as one thread
    /// block cluster and merge their partial O in distributed shared memory, each CTA
    /// storing a slice of the columns; no combine kernel and no global workspace.
    #[serde(default, skip_serializing_if = "is_default")]
    pub cluster_combine: Switch,
    /// Hopper: how a finished tile's O reaches global memory ([`OStore`]); `direct`
    /// frees the persistent grid's O staging buffer for wider K/V tiles.
    #[serde(default, skip_serializing_if = "is_default")]
    pub o_store: OStore,
    /// Hopper: whether the consumer warpgroups split the query rows (64 each) or the
    /// block's K/V tiles ([`WgSplit`]).
    #[serde(default, skip_serializing_if = "is_default")]
    pub wg_split: WgSplit,
    /// Backward: how dQ is summed over the key blocks ([`DqMode`]).
    #[serde(default, skip_serializing_if = "is_default")]
    pub dq_mode: DqMode,
    /// Hopper backward: what a consumer warpgroup's dK and dV cover ([`DkvSplit`]).
    #[serde(default, skip_serializing_if = "is_default")]
    pub dkv_split: DkvSplit,
}

// The gene macros own the enum's derives; its default is the value a file written
// before the gene existed implies.
#[allow(clippy::derivable_impls)]
impl Default for Switch {
    fn default() -> Switch {
        Switch::Off
    }
}

categorical! {
    /// Hopper: how a consumer warpgroup's softmax overlaps its GEMMs.
    Overlap {
        /// S = Q·Kᵀ, softmax, O += P·V, one tile at a time.
        Off => "off",
        /// Tile j+1's Q·Kᵀ is issued before tile j's P·V, and its softmax runs while
        /// P·V is on the tensor cores (FlashAttention-3's intra-warpgroup overlap).
        On => "on",
        /// `on`, continued across the tiles of a persistent CTA: the next tile's first
        /// Q·Kᵀ is issued with this tile's last P·V, its softmax runs under that P·V,
        /// and this tile's epilogue follows; Q is double-buffered and O is staged in
        /// the finished tile's Q slot.
        Chained => "chained",
    }
}

// The enum's derives are the `categorical!` macro's, which has no `Default`.
#[allow(clippy::derivable_impls)]
impl Default for Overlap {
    fn default() -> Overlap {
        Overlap::Off
    }
}

categorical! {
    /// Hopper: the epilogue's path for O / l (one split; split and cluster-merging
    /// kernels write their shares directly either way).
    OStore {
        /// Staged in swizzled shared memory, then stored in whole 16-byte chunks of a row:
        /// in the warpgroup's Q rows, or, persistent, in a Q-sized buffer of its own.
        Staged => "staged",
        /// Stored from the accumulator registers, 16 bytes a lane after a transpose inside
        /// each quad (shuffles); no staging buffer.
        Direct => "direct",
        /// Staged as `staged`, then stored by the copy engine: one thread of the
        /// warpgroup issues a TMA store per 64-column block (O's tensor map) and the
        /// warpgroup goes on; a persistent CTA waits for it only before its next
        /// epilogue.
        Tma => "tma",
    }
}

// The enum's derives are the `categorical!` macro's, which has no `Default`.
#[allow(clippy::derivable_impls)]
impl Default for OStore {
    fn default() -> OStore {
        OStore::Staged
    }
}

categorical! {
    /// Hopper: what the consumer warpgroups divide among themselves.
    WgSplit {
        /// The query rows: warpgroup c computes rows 64c..64c+63 of the block over
        /// every K/V tile.
        Rows => "rows",
        /// The K/V tiles: every warpgroup computes the block's 64 rows over the tiles
        /// it % consumer_wgs == c, with its own softmax and O, merged in shared memory
        /// at the end of the stream; each stage is computed by one warpgroup, so one
        /// holds it only for its own tiles (a decode: a few live rows, a long stream).
        Keys => "keys",
    }
}

// The enum's derives are the `categorical!` macro's, which has no `Default`.
#[allow(clippy::derivable_impls)]
impl Default for WgSplit {
    fn default() -> WgSplit {
        WgSplit::Rows
    }
}

categorical! {
    /// Hopper backward: how the consumer warpgroups share the CTA's keys and the columns
    /// of their dK and dV.
    DkvSplit {
        /// Each warpgroup owns 64 keys and holds their dK and dV over every stored
        /// column in its registers (block_n = 64 x consumer_wgs).
        Keys => "keys",
        /// The warpgroups work in pairs on 64 keys: each computes Sᵀ and dPᵀ for half of
        /// the step's query rows, leaves Pᵀ and dSᵀ in shared memory, and after the
        /// consumers' barrier holds dK and dV of half the stored columns
        /// (FlashAttention-3's D256 layout; block_n = 64 x consumer_wgs / 2).
        Columns => "columns",
    }
}

// The enum's derives are the `categorical!` macro's, which has no `Default`.
#[allow(clippy::derivable_impls)]
impl Default for DkvSplit {
    fn default() -> DkvSplit {
        DkvSplit::Keys
    }
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

/// `producer_regs` reads `"none"`, `0` or a register count; writes `"none"` or the number.
pub(crate) mod producer_regs_serde {
    use super::ProducerRegs;
    use serde::{de::Error, Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    #[serde(untagged)]
    enum Repr {
        Number(u32),
        Word(String),
    }

    pub fn serialize<S: Serializer>(r: &ProducerRegs, s: S) -> Result<S::Ok, S::Error> {
        match r {
            ProducerRegs::None => "none".serialize(s),
            other => other.get().serialize(s),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ProducerRegs, D::Error> {
        match Repr::deserialize(d)? {
            Repr::Number(n) => ProducerRegs::try_from(n).map_err(D::Error::custom),
            Repr::Word(w) if w == "none" => Ok(ProducerRegs::None),
            Repr::Word(w) => Err(D::Error::custom(format!(
                "\"{w}\" is not an allele of ProducerRegs; expected \"none\", 24, 32 or 40"
            ))),
        }
    }
}

// The gene macros own the enum's derives; its default is the value a file written
// before the gene existed implies.
#[allow(clippy::derivable_impls)]
impl Default for Family {
    fn default() -> Family {
        Family::Ampere
    }
}

/// The Hopper genes' values in an Ampere genome (and in files written before them).
impl Default for ConsumerWgs {
    fn default() -> ConsumerWgs {
        ConsumerWgs::C2
    }
}

// The gene macros own the enum's derives; its default is the value a file written
// before the gene existed implies.
#[allow(clippy::derivable_impls)]
impl Default for HopperLoad {
    fn default() -> HopperLoad {
        HopperLoad::Tma
    }
}

// The gene macros own the enum's derives; its default is the value a file written
// before the gene existed implies.
#[allow(clippy::derivable_impls)]
impl Default for ProducerRegs {
    fn default() -> ProducerRegs {
        ProducerRegs::None
    }
}

/// `reg_cap` reads `"none"`, `0` or one of the caps; it writes `"none"` or the number.
pub(crate) mod reg_cap_serde {
    use super::RegCap;
    use serde::{de::Error, Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    #[serde(untagged)]
    enum Repr {
        Number(u32),
        Word(String),
    }

    pub fn serialize<S: Serializer>(cap: &RegCap, s: S) -> Result<S::Ok, S::Error> {
        match cap {
            RegCap::None => "none".serialize(s),
            other => other.get().serialize(s),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<RegCap, D::Error> {
        match Repr::deserialize(d)? {
            Repr::Number(n) => RegCap::try_from(n).map_err(D::Error::custom),
            Repr::Word(w) if w == "none" => Ok(RegCap::None),
            Repr::Word(w) => Err(D::Error::custom(format!(
                "\"{w}\" is not an allele of RegCap; expected \"none\", 64, 96, 128, 168 or 255"
            ))),
        }
    }
}

impl Genome {
    /// Compute threads plus producer threads per CTA (backward: of the main kernel,
    /// and of the dq kernel, which has as many).
    pub fn threads(&self) -> u32 {
        match self.family {
            Family::Ampere => (self.warps.get() + self.producer_warps.get()) * 32,
            Family::Hopper => (self.consumer_wgs.get() + 1) * 128,
            Family::AmpereBwd => self.warps.get() * 32,
            Family::HopperBwd => (self.consumer_wgs.get() + 1) * 128,
        }
    }

    /// Query rows per CTA: block_m (Ampere), 64 per consumer warpgroup (Hopper); for the
    /// backward, the query rows of one step of the main kernel's loop (and, for
    /// `ampere_bwd`, of a dq CTA; `hopper_bwd`'s dq CTA has 64 per consumer warpgroup).
    pub fn rows_per_cta(&self) -> u32 {
        match self.family {
            Family::Ampere | Family::AmpereBwd | Family::HopperBwd => self.block_m.get(),
            Family::Hopper if self.wg_split == WgSplit::Keys => 64,
            Family::Hopper => 64 * self.consumer_wgs.get(),
        }
    }

    /// The genes that shape this genome's kernel, in canonical order.
    pub fn genes(&self) -> Vec<Gene> {
        Gene::ALL
            .into_iter()
            .filter(|g| g.applies(self.family))
            .collect()
    }

    /// The same kernel with every gene that does not apply to its family at its
    /// baseline value: two genomes are the same kernel exactly when their canonical
    /// forms are equal (and their ids, which hash only the genes that apply).
    pub fn canonical(&self) -> Genome {
        let base = Genome::baseline();
        let mut g = *self;
        for gene in Gene::ALL {
            if !gene.applies(self.family) {
                g = g.with_allele(gene, base.allele_index(gene));
            }
        }
        g
    }

    /// The genes on which two genomes differ, in canonical order.
    pub fn diff(&self, other: &Genome) -> Vec<Gene> {
        Gene::ALL
            .into_iter()
            .filter(|&g| self.allele_index(g) != other.allele_index(g))
            .collect()
    }

    /// The genes on which two genomes differ and that shape `other`'s kernel: a move
    /// from the Ampere family to Hopper lists the family and the Hopper genes, not the
    /// Ampere genes it left behind (they no longer make any kernel).
    pub fn design_diff(&self, other: &Genome) -> Vec<Gene> {
        self.diff(other)
            .into_iter()
            .filter(|g| g.applies(other.family))
            .collect()
    }

    /// A plain, always-valid starting point: the seeds' scalar kernel shape.
    pub fn baseline() -> Genome {
        Genome {
            qk_math: Math::Scalar,
            pv_math: Math::Scalar,
            p_path: Residence::Smem,
            o_accum: Residence::Smem,
            block_m: Tile::T32,
            block_n: BlockN::N32,
            warps: Warps::W4,
            producer_warps: ProducerWarps::P0,
            kv_load: KvLoad::Direct,
            stages: Stages::S1,
            smem_layout: SmemLayout::Plain,
            vec_bytes: VecBytes::V4,
            exp: ExpFn::Exp,
            split_kv: SplitKv::K1,
            reg_cap: RegCap::None,
            min_blocks: MinBlocks::B1,
            family: Family::Ampere,
            consumer_wgs: ConsumerWgs::C2,
            hopper_load: HopperLoad::Tma,
            producer_regs: ProducerRegs::None,
            pingpong: Switch::Off,
            softmax_overlap: Overlap::Off,
            persistent: Switch::Off,
            pack_gqa: Switch::Off,
            cluster_combine: Switch::Off,
            o_store: OStore::Staged,
            wg_split: WgSplit::Rows,
            dq_mode: DqMode::Atomic,
            dkv_split: DkvSplit::Keys,
        }
    }
}
