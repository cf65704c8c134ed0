//! The attention problem a kernel is built and judged for.

pub use crate::head_dim::HeadDim;
pub use crate::spec::SPEC_FORM;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Element type of Q, K, V and O (accumulation is always fp32).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    F16,
    Bf16,
}

impl Dtype {
    pub const ALL: [Dtype; 2] = [Dtype::F16, Dtype::Bf16];

    pub fn label(self) -> &'static str {
        match self {
            Dtype::F16 => "f16",
            Dtype::Bf16 => "bf16",
        }
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// Where the causal mask's (and a window's) diagonal sits when `Lq != Lk`.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum MaskAlign {
    /// PyTorch's `is_causal`: query i's diagonal is key i.
    #[default]
    TopLeft,
    /// FlashAttention >= 2.1 and the KV-cache convention: query i's diagonal is key
    /// `i + Lk - Lq` (the last query sees every key).
    BottomRight,
}

impl MaskAlign {
    fn is_top_left(&self) -> bool {
        *self == MaskAlign::TopLeft
    }
}

/// One attention call: tensors are contiguous `[B, H, L, D]` as in PyTorch's SDPA (K and
/// V `[B, kv_heads, Lk, D]`: query head h reads K/V head `h / (heads / kv_heads)`),
/// scale `1/sqrt(D)`.
///
/// The mask: with diagonal `d(i) = i` (top-left) or `i + Lk - Lq` (bottom-right), query
/// i sees key j when `j <= d(i)` if causal, `j >= d(i) - window_left` if that is set and
/// `j <= d(i) + window_right` if that is set. A row that sees no key outputs zeros (as
/// FlashAttention). The fields added after the first release are left out of the
/// serialized form when they hold their default, so every recorded problem reads and
/// writes as before.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Problem {
    pub batch: u32,
    pub heads: u32,
    /// K/V heads (grouped-query attention; 1 is multi-query); none: `heads`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_heads: Option<u32>,
    pub q_len: u32,
    pub kv_len: u32,
    pub head_dim: HeadDim,
    pub dtype: Dtype,
    #[serde(default)]
    pub causal: bool,
    #[serde(default, skip_serializing_if = "MaskAlign::is_top_left")]
    pub align: MaskAlign,
    /// Keys further than this left of the diagonal are masked (a sliding window).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_left: Option<u32>,
    /// Keys further than this right of the diagonal are masked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_right: Option<u32>,
}

/// The largest batch, head count or length: kernels take them as 32-bit ints
/// (kernels/ABI.md, `evo_attention_fwd`).
pub const MAX_DIM: u32 = i32::MAX as u32;

/// The mask as a kernel takes it (kernels/ABI.md): the diagonal's offset and the window
/// bounds, -1 for none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaskArgs {
    pub causal: i32,
    pub diag: i32,
    pub window_left: i32,
    pub window_right: i32,
}

impl Problem {
    /// The seeds' shape: B=1 H=8 L=512 D=64, f16, not causal.
    pub fn seed() -> Problem {
        Problem {
            batch: 1,
            heads: 8,
            kv_heads: None,
            q_len: 512,
            kv_len: 512,
            head_dim: HeadDim::D64,
            dtype: Dtype::F16,
            causal: false,
            align: MaskAlign::TopLeft,
            window_left: None,
            window_right: None,
        }
    }

    /// MHA with a top-left or no causal mask: the problem every kernel of the first ABI
    /// takes (a module that does not declare `evo_abi` >= 2 is judged only on these).
    pub fn is_basic(&self) -> bool {
        self.kv_heads.is_none_or(|k| k == self.heads)
            && (self.align == MaskAlign::TopLeft || !self.causal || self.q_len == self.kv_len)
            && self.window_left.is_none()
            && self.window_right.is_none()
    }

    /// K/V heads.
    pub fn kv_heads(&self) -> u32 {
        self.kv_heads.unwrap_or(self.heads)
    }

    /// Query heads per K/V head.
    pub fn group(&self) -> u32 {
        self.heads / self.kv_heads().max(1)
    }

    /// The K/V head that flattened query head `bh = b·H + h` reads: head `h / group`
    /// of batch `b`, flattened as `b·kv_heads + h / group`.
    pub fn kv_head(&self, bh: usize) -> usize {
        let heads = self.heads as usize;
        bh / heads * self.kv_heads() as usize + bh % heads / self.group() as usize
    }

    /// Whether any key is masked by position (causal or a window).
    pub fn masked(&self) -> bool {
        self.causal || self.window_left.is_some() || self.window_right.is_some()
    }

    /// The diagonal's offset: query i's diagonal key is `i + diag`.
    pub fn diag(&self) -> i64 {
        match self.align {
            MaskAlign::TopLeft => 0,
            MaskAlign::BottomRight => self.kv_len as i64 - self.q_len as i64,
        }
    }

    /// The mask's kernel arguments. A window wider than `Lq + Lk` bounds nothing and is
    /// passed as none, so a kernel's `i + diag + w` never overflows an int.
    pub fn mask_args(&self) -> MaskArgs {
        let reach = self.q_len as u64 + self.kv_len as u64;
        let side = |w: Option<u32>| w.filter(|&w| (w as u64) <= reach).map_or(-1, |w| w as i32);
        MaskArgs {
            causal: i32::from(self.causal),
            diag: self.diag().clamp(i32::MIN as i64, i32::MAX as i64) as i32,
            window_left: side(self.window_left),
            window_right: side(self.window_right),
        }
    }

    /// The keys query `i` sees: `lo..hi` (empty when `hi <= lo`: the row outputs zeros).
    pub fn visible_keys(&self, i: u32) -> std::ops::Range<u32> {
        let d = i as i64 + self.diag();
        let lk = self.kv_len as i64;
        let mut hi = lk;
        if self.causal {
            hi = hi.min(d + 1);
        }
        if let Some(w) = self.window_right {
            hi = hi.min(d + w as i64 + 1);
        }
        let lo = self.window_left.map_or(0, |w| (d - w as i64).max(0));
        let hi = hi.clamp(0, lk);
        lo.min(hi) as u32..hi as u32
    }

    /// The `B,H,Lq,Lk,D,dtype[,options]` form the parser reads back (see [`SPEC_FORM`]).
    pub fn spec(&self) -> String {
        let mut s = format!(
            "{},{},{},{},{},{}",
            self.batch,
            self.heads,
            self.q_len,
            self.kv_len,
            self.head_dim.get(),
            self.dtype.label(),
        );
        for option in self.options() {
            s.push(',');
            s.push_str(&option);
        }
        s
    }

    /// The spec's options after the dtype, in the parser's words.
    fn options(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.causal {
            out.push(match self.align {
                MaskAlign::TopLeft => "causal".into(),
                MaskAlign::BottomRight => "causal=br".into(),
            });
        } else if self.align == MaskAlign::BottomRight {
            out.push("align=br".into());
        }
        if let Some(k) = self.kv_heads.filter(|&k| k != self.heads) {
            out.push(format!("kv={k}"));
        }
        if let Some(w) = self.window() {
            out.push(format!("window={w}"));
        }
        out
    }

    /// The window as `LEFT:RIGHT` (a side without a bound left empty), if there is one.
    fn window(&self) -> Option<String> {
        let side = |w: Option<u32>| w.map_or(String::new(), |w| w.to_string());
        (self.window_left.is_some() || self.window_right.is_some())
            .then(|| format!("{}:{}", side(self.window_left), side(self.window_right)))
    }

    /// Floating-point operations of the two products: 4·B·H·Lq·Lk·D, halved for top-left
    /// causal attention without a window (the convention of FlashAttention's and
    /// PyTorch's benchmarks); any other mask counts the (query, key) pairs it leaves
    /// visible.
    pub fn flops(&self) -> f64 {
        let per_pair = 4.0 * self.batch as f64 * self.heads as f64 * self.head_dim.get() as f64;
        let full = per_pair * self.q_len as f64 * self.kv_len as f64;
        if !self.masked() {
            return full;
        }
        if self.causal
            && self.align == MaskAlign::TopLeft
            && self.window_left.is_none()
            && self.window_right.is_none()
        {
            return full / 2.0;
        }
        let pairs: u64 = (0..self.q_len)
            .map(|i| self.visible_keys(i).len() as u64)
            .sum();
        per_pair * pairs as f64
    }

    /// Multiply-adds of one of the two products, B·H·Lq·Lk·D, mask ignored (the size
    /// by which the gates choose how to check a launch).
    pub fn macs(&self) -> u64 {
        self.batch as u64
            * self.heads as u64
            * self.q_len as u64
            * self.kv_len as u64
            * self.head_dim.get() as u64
    }

    /// Elements of Q (and of O).
    pub fn q_elems(&self) -> usize {
        self.batch as usize
            * self.heads as usize
            * self.q_len as usize
            * self.head_dim.get() as usize
    }

    /// Elements of K (and of V): `[B, kv_heads, Lk, D]`.
    pub fn kv_elems(&self) -> usize {
        self.batch as usize
            * self.kv_heads() as usize
            * self.kv_len as usize
            * self.head_dim.get() as usize
    }

    /// Checks the sizes are usable; the message names the field and the fix.
    pub fn validate(&self) -> Result<(), String> {
        for (name, v) in [
            ("batch", self.batch),
            ("heads", self.heads),
            ("q_len", self.q_len),
            ("kv_len", self.kv_len),
        ] {
            if v == 0 {
                return Err(format!(
                    "problem field `{name}` is 0; it must be at least 1"
                ));
            }
            if v > MAX_DIM {
                return Err(format!(
                    "problem field `{name}` is {v}, out of range: it must be 1 to {MAX_DIM} \
                     (kernels take it as a 32-bit int)"
                ));
            }
        }
        if self.batch as u64 * self.heads as u64 > 65_535 {
            return Err(
                "problem fields `batch`·`heads` exceed 65535 (grid y limit); split the call".into(),
            );
        }
        if let Some(k) = self.kv_heads {
            if k == 0 || !self.heads.is_multiple_of(k) {
                return Err(format!(
                    "problem field `kv_heads` is {k}, which does not divide `heads` ({}); \
                     use a divisor of heads (1 for multi-query attention, heads for none)",
                    self.heads
                ));
            }
        }
        // A packing kernel launches the K/V heads as heads of `group · q_len` rows, an int.
        if self.group() as u64 * self.q_len as u64 > MAX_DIM as u64 {
            return Err(format!(
                "problem fields `heads`/`kv_heads`·`q_len` ({}·{}) exceed {MAX_DIM}, the rows \
                 a grouped launch indexes with a 32-bit int; split the call",
                self.group(),
                self.q_len
            ));
        }
        for (name, w) in [
            ("window_left", self.window_left),
            ("window_right", self.window_right),
        ] {
            if let Some(w) = w.filter(|&w| w > MAX_DIM) {
                return Err(format!(
                    "problem field `{name}` is {w}, out of range: it must be 0 to {MAX_DIM}, \
                     or left out for no bound"
                ));
            }
        }
        Ok(())
    }

    /// A short label such as `B1 H8 L512 D64 f16`, `B2 H16 Lq77 Lk1000 D128 bf16 causal`
    /// or `B1 H32/8 L4096 D128 f16 causal window 4096:`.
    pub fn label(&self) -> String {
        let lens = if self.q_len == self.kv_len {
            format!("L{}", self.q_len)
        } else {
            format!("Lq{} Lk{}", self.q_len, self.kv_len)
        };
        let heads = match self.kv_heads.filter(|&k| k != self.heads) {
            Some(k) => format!("H{}/{k}", self.heads),
            None => format!("H{}", self.heads),
        };
        let mut s = format!(
            "B{} {heads} {lens} D{} {}",
            self.batch, self.head_dim, self.dtype
        );
        if self.causal {
            s.push_str(match self.align {
                MaskAlign::TopLeft => " causal",
                MaskAlign::BottomRight => " causal-br",
            });
        } else if self.align == MaskAlign::BottomRight && self.masked() {
            s.push_str(" br");
        }
        if let Some(w) = self.window() {
            s.push_str(&format!(" window {w}"));
        }
        s
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grouped_heads_and_masks_parse_print_and_serialize_back() {
        let p: Problem = "1,32,4096,4096,128,f16,causal,kv=8,window=4096:"
            .parse()
            .unwrap();
        assert_eq!((p.kv_heads(), p.group()), (8, 4));
        assert_eq!(p.window_left, Some(4096));
        assert_eq!(p.window_right, None);
        assert_eq!(p.spec(), "1,32,4096,4096,128,f16,causal,kv=8,window=4096:");
        assert_eq!(p.label(), "B1 H32/8 L4096 D128 f16 causal window 4096:");
        // K/V hold kv_heads heads.
        assert_eq!(p.kv_elems(), 8 * 4096 * 128);
        let d: Problem = "16,32,1,8192,128,bf16,causal=br,kv=1".parse().unwrap();
        assert_eq!(d.align, MaskAlign::BottomRight);
        assert_eq!(d.spec(), "16,32,1,8192,128,bf16,causal=br,kv=1");
        // The one query of a bottom-right decode sees every key; a top-left one only key 0.
        assert_eq!(d.visible_keys(0), 0..8192);
        assert_eq!(
            Problem {
                align: MaskAlign::TopLeft,
                ..d
            }
            .visible_keys(0),
            0..1
        );
        // kv = heads is plain multi-head attention, written as such.
        let m: Problem = "1,8,512,512,64,f16,kv=8".parse().unwrap();
        assert_eq!(m, Problem::seed());
        assert!(m.is_basic() && !p.is_basic() && !d.is_basic());
        // The TOML form of the first release still reads, and the new fields are written
        // only when set.
        let old = "batch = 1\nheads = 8\nq_len = 512\nkv_len = 512\nhead_dim = 64\ndtype = \"f16\"\ncausal = true\n";
        let read: Problem = toml::from_str(old).unwrap();
        assert_eq!(toml::to_string(&read).unwrap(), old);
        let back: Problem = toml::from_str(&toml::to_string(&p).unwrap()).unwrap();
        assert_eq!(back, p);
    }

    #[test]
    fn visible_keys_follow_the_diagonal_and_the_window() {
        // Bottom-right with Lq > Lk: rows 0..7 see no key, row 7 sees key 0.
        let br: Problem = "1,1,12,5,64,f16,causal=br".parse().unwrap();
        assert!(br.visible_keys(6).is_empty());
        assert_eq!(br.visible_keys(7), 0..1);
        assert_eq!(br.visible_keys(11), 0..5);
        // A sliding window of 3 keys left of a top-left diagonal.
        let w: Problem = "1,1,20,20,64,f16,causal,window=3:".parse().unwrap();
        assert_eq!(w.visible_keys(0), 0..1);
        assert_eq!(w.visible_keys(10), 7..11);
        // Two-sided, bottom-right, not causal.
        let t: Problem = "1,1,4,10,64,f16,window=1:2,align=br".parse().unwrap();
        assert_eq!(t.visible_keys(0), 5..9);
        assert_eq!(t.visible_keys(3), 8..10);
        // The flops count the visible pairs once a window is set; top-left causal keeps
        // the halving convention.
        assert_eq!(w.flops(), 4.0 * 64.0 * (1 + 2 + 3 + 17 * 4) as f64);
        let c: Problem = "1,1,20,20,64,f16,causal".parse().unwrap();
        assert_eq!(c.flops(), 4.0 * 64.0 * 400.0 / 2.0);
        // Windows wider than both lengths are passed as none; the diagonal as an offset.
        let wide: Problem = "1,1,4,10,64,f16,causal=br,window=9:".parse().unwrap();
        let m = wide.mask_args();
        assert_eq!(
            (m.causal, m.diag, m.window_left, m.window_right),
            (1, 6, 9, -1)
        );
        let wider: Problem = "1,1,4,10,64,f16,window=15:".parse().unwrap();
        assert_eq!(wider.mask_args().window_left, -1);
    }

    #[test]
    fn bad_grouped_or_masked_specs_name_the_field() {
        for (bad, says) in [
            ("1,32,512,512,64,f16,kv=3", "`kv_heads` is 3"),
            ("1,32,512,512,64,f16,kv=0", "`kv_heads` is 0"),
            ("1,32,512,512,64,f16,kv=x", "kv `x`"),
            (
                "1,8,512,512,64,f16,window=-5:",
                "window left -5 is negative",
            ),
            (
                "1,8,512,512,64,f16,window=5:-1",
                "window right -1 is negative",
            ),
            ("1,8,512,512,64,f16,window=5", "LEFT:RIGHT"),
            ("1,8,512,512,64,f16,causal=up", "alignment `up`"),
            ("1,8,512,512,64,f16,sliding", "`sliding` is not an option"),
            (
                "1,8,512,512,80,f16",
                "head_dim 80 is not supported; use 64, 96, 128 or 256",
            ),
        ] {
            let err = bad.parse::<Problem>().unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
        let toml_err = toml::from_str::<Problem>(
            "batch = 1\nheads = 8\nq_len = 5\nkv_len = 5\nhead_dim = 64\ndtype = \"f16\"\nwindow_left = -3\n",
        )
        .unwrap_err();
        assert!(toml_err.to_string().contains("window_left"), "{toml_err}");
    }
}
