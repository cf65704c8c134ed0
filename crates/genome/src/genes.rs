//! The genes: one typed field per design choice of the attention kernel.
//!
//! Every gene is either *categorical* (the alleles have no order: `scalar`,
//! `wmma`, `mma`) or *ordered* (tile sizes, stage counts: a mutation moves to a
//! neighbour). Both kinds are plain Rust enums so that an impossible allele
//! cannot be represented; the generic view used by the mutator and the
//! enumerator ([`Gene`], [`Genome::allele_index`], [`Genome::with_allele`]) is
//! derived from the same lists, so there is one source of truth per gene.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Declares an enum gene whose alleles serialize as lowercase strings.
macro_rules! categorical {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident => $label:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum $name {
            $($(#[$vdoc])* #[serde(rename = $label)] $variant),+
        }

        impl $name {
            /// Every allele, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The allele's name as written in genome TOML files.
            pub fn label(self) -> &'static str {
                match self { $($name::$variant => $label),+ }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.label())
            }
        }
    };
}

/// Declares an enum gene whose alleles serialize as integers (tile sizes, counts).
macro_rules! numeric {
    ($(#[$doc:meta])* $name:ident { $($variant:ident => $value:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "u32", into = "u32")]
        pub enum $name {
            $($variant),+
        }

        impl $name {
            /// Every allele, smallest first.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The allele's numeric value.
            pub fn get(self) -> u32 {
                match self { $($name::$variant => $value),+ }
            }
        }

        impl TryFrom<u32> for $name {
            type Error = String;
            fn try_from(v: u32) -> Result<Self, String> {
                match v {
                    $($value => Ok($name::$variant),)+
                    other => Err(format!(
                        "{other} is not an allele of {}; expected one of {}",
                        stringify!($name),
                        [$($value.to_string()),+].join(", ")
                    )),
                }
            }
        }

        impl From<$name> for u32 {
            fn from(v: $name) -> u32 { v.get() }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.get())
            }
        }
    };
}

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
    }
}

numeric! {
    /// Query rows per CTA, or K/V rows per tile.
    Tile { T16 => 16, T32 => 32, T64 => 64, T128 => 128 }
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
    SplitKv { K1 => 1, K2 => 2, K4 => 4, K8 => 8 }
}

numeric! {
    /// `__launch_bounds__` minimum resident blocks per SM.
    MinBlocks { B1 => 1, B2 => 2, B3 => 3, B4 => 4 }
}

numeric! {
    /// `-maxrregcount`; 0 means no cap (written `0` or `"none"` in TOML).
    RegCap { None => 0, R64 => 64, R96 => 96, R128 => 128, R168 => 168, R255 => 255 }
}

/// A complete kernel design: one allele per gene.
///
/// The field order is the canonical gene order (see [`Gene::ALL`]); the
/// canonical id hashes the allele indices in this order, never the TOML text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Genome {
    pub qk_math: Math,
    pub pv_math: Math,
    pub p_path: Residence,
    pub o_accum: Residence,
    pub block_m: Tile,
    pub block_n: Tile,
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
}

/// `reg_cap` reads `"none"`, `0` or one of the caps; it writes `"none"` or the number.
mod reg_cap_serde {
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

/// The name of a gene, for the generic operations (mutation, crossover, enumeration).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Gene {
    QkMath,
    PvMath,
    PPath,
    OAccum,
    BlockM,
    BlockN,
    Warps,
    ProducerWarps,
    KvLoad,
    Stages,
    SmemLayout,
    VecBytes,
    Exp,
    SplitKv,
    RegCap,
    MinBlocks,
}

impl Gene {
    /// All genes in canonical order.
    pub const ALL: [Gene; 16] = [
        Gene::QkMath,
        Gene::PvMath,
        Gene::PPath,
        Gene::OAccum,
        Gene::BlockM,
        Gene::BlockN,
        Gene::Warps,
        Gene::ProducerWarps,
        Gene::KvLoad,
        Gene::Stages,
        Gene::SmemLayout,
        Gene::VecBytes,
        Gene::Exp,
        Gene::SplitKv,
        Gene::RegCap,
        Gene::MinBlocks,
    ];

    /// The field name used in TOML and reports.
    pub fn name(self) -> &'static str {
        match self {
            Gene::QkMath => "qk_math",
            Gene::PvMath => "pv_math",
            Gene::PPath => "p_path",
            Gene::OAccum => "o_accum",
            Gene::BlockM => "block_m",
            Gene::BlockN => "block_n",
            Gene::Warps => "warps",
            Gene::ProducerWarps => "producer_warps",
            Gene::KvLoad => "kv_load",
            Gene::Stages => "stages",
            Gene::SmemLayout => "smem_layout",
            Gene::VecBytes => "vec_bytes",
            Gene::Exp => "exp",
            Gene::SplitKv => "split_kv",
            Gene::RegCap => "reg_cap",
            Gene::MinBlocks => "min_blocks",
        }
    }

    /// Parses a gene's field name.
    pub fn from_name(name: &str) -> Option<Gene> {
        Gene::ALL.into_iter().find(|g| g.name() == name)
    }

    /// Ordered genes mutate to a neighbouring allele; categorical ones to any other.
    pub fn is_ordered(self) -> bool {
        !matches!(
            self,
            Gene::QkMath
                | Gene::PvMath
                | Gene::PPath
                | Gene::OAccum
                | Gene::KvLoad
                | Gene::SmemLayout
                | Gene::Exp
        )
    }

    /// Number of alleles.
    pub fn allele_count(self) -> usize {
        self.allele_labels().len()
    }

    /// The alleles as written in TOML, in index order.
    pub fn allele_labels(self) -> Vec<String> {
        fn labels<T: fmt::Display>(all: &[T]) -> Vec<String> {
            all.iter().map(|a| a.to_string()).collect()
        }
        match self {
            Gene::QkMath | Gene::PvMath => labels(Math::ALL),
            Gene::PPath | Gene::OAccum => labels(Residence::ALL),
            Gene::BlockM | Gene::BlockN => labels(Tile::ALL),
            Gene::Warps => labels(Warps::ALL),
            Gene::ProducerWarps => labels(ProducerWarps::ALL),
            Gene::KvLoad => labels(KvLoad::ALL),
            Gene::Stages => labels(Stages::ALL),
            Gene::SmemLayout => labels(SmemLayout::ALL),
            Gene::VecBytes => labels(VecBytes::ALL),
            Gene::Exp => labels(ExpFn::ALL),
            Gene::SplitKv => labels(SplitKv::ALL),
            Gene::RegCap => RegCap::ALL
                .iter()
                .map(|c| match c {
                    RegCap::None => "none".to_string(),
                    c => c.to_string(),
                })
                .collect(),
            Gene::MinBlocks => labels(MinBlocks::ALL),
        }
    }
}

impl fmt::Display for Gene {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

fn index_of<T: PartialEq>(all: &[T], v: &T) -> usize {
    all.iter()
        .position(|a| a == v)
        .expect("every allele is listed in ALL")
}

impl Genome {
    /// The allele index of one gene (position in that gene's allele list).
    pub fn allele_index(&self, gene: Gene) -> usize {
        match gene {
            Gene::QkMath => index_of(Math::ALL, &self.qk_math),
            Gene::PvMath => index_of(Math::ALL, &self.pv_math),
            Gene::PPath => index_of(Residence::ALL, &self.p_path),
            Gene::OAccum => index_of(Residence::ALL, &self.o_accum),
            Gene::BlockM => index_of(Tile::ALL, &self.block_m),
            Gene::BlockN => index_of(Tile::ALL, &self.block_n),
            Gene::Warps => index_of(Warps::ALL, &self.warps),
            Gene::ProducerWarps => index_of(ProducerWarps::ALL, &self.producer_warps),
            Gene::KvLoad => index_of(KvLoad::ALL, &self.kv_load),
            Gene::Stages => index_of(Stages::ALL, &self.stages),
            Gene::SmemLayout => index_of(SmemLayout::ALL, &self.smem_layout),
            Gene::VecBytes => index_of(VecBytes::ALL, &self.vec_bytes),
            Gene::Exp => index_of(ExpFn::ALL, &self.exp),
            Gene::SplitKv => index_of(SplitKv::ALL, &self.split_kv),
            Gene::RegCap => index_of(RegCap::ALL, &self.reg_cap),
            Gene::MinBlocks => index_of(MinBlocks::ALL, &self.min_blocks),
        }
    }

    /// A copy with one gene set to the allele at `index`.
    ///
    /// # Panics
    /// If `index >= gene.allele_count()`: callers draw indices from that count.
    pub fn with_allele(&self, gene: Gene, index: usize) -> Genome {
        let mut g = *self;
        match gene {
            Gene::QkMath => g.qk_math = Math::ALL[index],
            Gene::PvMath => g.pv_math = Math::ALL[index],
            Gene::PPath => g.p_path = Residence::ALL[index],
            Gene::OAccum => g.o_accum = Residence::ALL[index],
            Gene::BlockM => g.block_m = Tile::ALL[index],
            Gene::BlockN => g.block_n = Tile::ALL[index],
            Gene::Warps => g.warps = Warps::ALL[index],
            Gene::ProducerWarps => g.producer_warps = ProducerWarps::ALL[index],
            Gene::KvLoad => g.kv_load = KvLoad::ALL[index],
            Gene::Stages => g.stages = Stages::ALL[index],
            Gene::SmemLayout => g.smem_layout = SmemLayout::ALL[index],
            Gene::VecBytes => g.vec_bytes = VecBytes::ALL[index],
            Gene::Exp => g.exp = ExpFn::ALL[index],
            Gene::SplitKv => g.split_kv = SplitKv::ALL[index],
            Gene::RegCap => g.reg_cap = RegCap::ALL[index],
            Gene::MinBlocks => g.min_blocks = MinBlocks::ALL[index],
        }
        g
    }

    /// The allele of one gene as written in TOML.
    pub fn allele_label(&self, gene: Gene) -> String {
        gene.allele_labels().swap_remove(self.allele_index(gene))
    }

    /// All allele indices in canonical gene order.
    pub fn allele_indices(&self) -> [usize; 16] {
        Gene::ALL.map(|g| self.allele_index(g))
    }

    /// Builds a genome from allele indices in canonical gene order.
    pub fn from_allele_indices(indices: [usize; 16]) -> Genome {
        let mut g = Genome::baseline();
        for (gene, idx) in Gene::ALL.into_iter().zip(indices) {
            g = g.with_allele(gene, idx);
        }
        g
    }

    /// Compute threads plus producer threads per CTA.
    pub fn threads(&self) -> u32 {
        (self.warps.get() + self.producer_warps.get()) * 32
    }

    /// The genes on which two genomes differ, in canonical order.
    pub fn diff(&self, other: &Genome) -> Vec<Gene> {
        Gene::ALL
            .into_iter()
            .filter(|&g| self.allele_index(g) != other.allele_index(g))
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
            block_n: Tile::T32,
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
        }
    }
}
