//! The model presets of `evo tune --model`: the attention problems a served model poses,
//! from the numbers its published config states.
//!
//! A preset holds only what decides the attention call: query heads, K/V heads, head
//! dim and a sliding window. The shapes are those of serving: a prefill of one sequence
//! (causal) at a few lengths, and decode, one query against a KV cache, at a few batch x
//! context points. Decode is masked as `evo bench --suite models` states it: causal with
//! the diagonal at the bottom right, so the one query sees the whole cache.
//!
//! A window is the model's where its layers use one: every layer (Mistral) makes every
//! problem windowed, every other layer (Gemma 2) makes both the global and the windowed
//! problem the model's. A window at least as long as the keys masks nothing, so there
//! the problem is the unwindowed one (and is tuned once).

use evo_genome::{Dtype, HeadDim, MaskAlign, Problem};

/// Which layers of a model attend through a sliding window of this many keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    None,
    /// Every layer: each problem is windowed.
    Every(u32),
    /// Every other layer: each problem comes global and windowed.
    Alternate(u32),
}

/// One model's attention, as its config states it.
#[derive(Debug, Clone, Copy)]
pub struct Preset {
    pub name: &'static str,
    pub heads: u32,
    pub kv_heads: u32,
    pub head_dim: HeadDim,
    pub window: Window,
    /// The published config the numbers come from, in words.
    pub source: &'static str,
}

/// Prefill lengths (keys = queries, batch 1) of a preset [`--prefill`].
pub const DEFAULT_PREFILL: [u32; 3] = [2048, 8192, 32768];
/// Decode points, batch x context [`--decode`].
pub const DEFAULT_DECODE: [(u32, u32); 4] = [(1, 4096), (16, 8192), (64, 32768), (1, 131072)];

pub const PRESETS: [Preset; 7] = [
    Preset {
        name: "llama-3-8b",
        heads: 32,
        kv_heads: 8,
        head_dim: HeadDim::D128,
        window: Window::None,
        source: "Meta-Llama-3-8B's config.json on its Hugging Face model page: \
                 num_attention_heads 32, num_key_value_heads 8, hidden_size 4096 (head dim 128)",
    },
    Preset {
        name: "llama-3-70b",
        heads: 64,
        kv_heads: 8,
        head_dim: HeadDim::D128,
        window: Window::None,
        source: "Meta-Llama-3-70B's config.json on its Hugging Face model page: \
                 num_attention_heads 64, num_key_value_heads 8, hidden_size 8192 (head dim 128)",
    },
    Preset {
        name: "mistral-7b",
        heads: 32,
        kv_heads: 8,
        head_dim: HeadDim::D128,
        window: Window::Every(4096),
        source: "Mistral-7B-v0.1's config.json on its Hugging Face model page: \
                 num_attention_heads 32, num_key_value_heads 8, hidden_size 4096 (head dim 128), \
                 sliding_window 4096 on every layer",
    },
    Preset {
        name: "mixtral-8x7b",
        heads: 32,
        kv_heads: 8,
        head_dim: HeadDim::D128,
        window: Window::None,
        source: "Mixtral-8x7B-v0.1's config.json on its Hugging Face model page: \
                 num_attention_heads 32, num_key_value_heads 8, hidden_size 4096 (head dim 128)",
    },
    Preset {
        name: "gemma-2-9b",
        heads: 16,
        kv_heads: 8,
        head_dim: HeadDim::D256,
        window: Window::Alternate(4096),
        source: "gemma-2-9b's config.json on its Hugging Face model page: \
                 num_attention_heads 16, num_key_value_heads 8, head_dim 256, sliding_window 4096 \
                 on alternate layers (the others global)",
    },
    Preset {
        name: "phi-3-mini",
        heads: 32,
        kv_heads: 32,
        head_dim: HeadDim::D96,
        window: Window::None,
        source: "Phi-3-mini's config.json on its Hugging Face model page: \
                 num_attention_heads 32, num_key_value_heads 32, hidden_size 3072 (head dim 96)",
    },
    Preset {
        name: "qwen2.5-7b",
        heads: 28,
        kv_heads: 4,
        head_dim: HeadDim::D128,
        window: Window::None,
        source: "Qwen2.5-7B's config.json on its Hugging Face model page: \
                 num_attention_heads 28, num_key_value_heads 4, hidden_size 3584 (head dim 128)",
    },
];

/// The preset called `name`; the error names every known one.
pub fn preset(name: &str) -> Result<&'static Preset, String> {
    PRESETS.iter().find(|p| p.name == name).ok_or_else(|| {
        format!(
            "--model {name}: no such preset; the presets are {} (`evo tune --list-models` shows their shapes), or give the shapes with --problem SPEC",
            names().join(", ")
        )
    })
}

pub fn names() -> Vec<&'static str> {
    PRESETS.iter().map(|p| p.name).collect()
}

impl Preset {
    /// The problems of this model: each prefill length, then each decode point; where a
    /// window applies, the windowed problem after the global one (or instead of it).
    pub fn shapes(&self, prefill: &[u32], decode: &[(u32, u32)], dtype: Dtype) -> Vec<Problem> {
        let mut out: Vec<Problem> = Vec::new();
        let lengths = prefill.iter().map(|&l| (1, l, l, MaskAlign::TopLeft));
        let decodes = decode
            .iter()
            .map(|&(b, l)| (b, 1, l, MaskAlign::BottomRight));
        for (batch, q_len, kv_len, align) in lengths.chain(decodes) {
            let global = Problem {
                batch,
                heads: self.heads,
                kv_heads: (self.kv_heads != self.heads).then_some(self.kv_heads),
                q_len,
                kv_len,
                head_dim: self.head_dim,
                dtype,
                causal: true,
                align,
                window_left: None,
                window_right: None,
            };
            // A window of W keys left of the diagonal masks a key only when the last
            // query's diagonal (key Lk - 1) lies more than W keys in.
            let windowed = |w: u32| Problem {
                window_left: (kv_len - 1 > w).then_some(w),
                ..global
            };
            let kinds = match self.window {
                Window::None => vec![global],
                Window::Every(w) => vec![windowed(w)],
                Window::Alternate(w) => vec![global, windowed(w)],
            };
            for p in kinds {
                if !out.contains(&p) {
                    out.push(p);
                }
            }
        }
        out
    }

    /// One line of --list-models, then its source and one shape a line.
    pub fn describe(&self, dtype: Dtype) -> String {
        let shapes = self.shapes(&DEFAULT_PREFILL, &DEFAULT_DECODE, dtype);
        let window = match self.window {
            Window::None => String::new(),
            Window::Every(w) => format!(", window {w} on every layer"),
            Window::Alternate(w) => format!(", window {w} on alternate layers"),
        };
        let mut text = format!(
            "{}: {} heads, {} K/V heads, head dim {}{window}; {} shapes\n  source: {}\n",
            self.name,
            self.heads,
            self.kv_heads,
            self.head_dim,
            shapes.len(),
            self.source
        );
        for p in &shapes {
            let kind = if p.q_len == 1 { "decode " } else { "prefill" };
            text += &format!("  {kind} {:<52} {}\n", p.spec(), p.label());
        }
        text
    }
}

/// `--prefill 2048,8192` (lengths) or `none`.
pub fn parse_prefill(text: &str) -> Result<Vec<u32>, String> {
    if text.trim() == "none" {
        return Ok(Vec::new());
    }
    text.split(',')
        .map(|part| {
            let part = part.trim();
            part.parse::<u32>()
                .ok()
                .filter(|&l| (1..=evo_genome::MAX_DIM).contains(&l))
                .ok_or_else(|| {
                    format!(
                        "`{part}` is not a length; give lengths such as 2048,8192, or `none` for no prefill"
                    )
                })
        })
        .collect()
}

/// `--decode 16x8192,1x131072` (batch x context) or `none`.
pub fn parse_decode(text: &str) -> Result<Vec<(u32, u32)>, String> {
    if text.trim() == "none" {
        return Ok(Vec::new());
    }
    let number = |s: &str| {
        s.trim()
            .parse::<u32>()
            .ok()
            .filter(|&n| (1..=evo_genome::MAX_DIM).contains(&n))
    };
    text.split(',')
        .map(|part| {
            part.split_once('x')
                .and_then(|(b, l)| Some((number(b)?, number(l)?)))
                .ok_or_else(|| {
                    format!(
                        "`{}` is not BATCHxCONTEXT; give points such as 16x8192,1x131072, or `none` for no decode",
                        part.trim()
                    )
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specs(name: &str) -> Vec<String> {
        preset(name)
            .unwrap()
            .shapes(&DEFAULT_PREFILL, &DEFAULT_DECODE, Dtype::F16)
            .iter()
            .map(Problem::spec)
            .collect()
    }

    #[test]
    fn llama_3_8b_is_three_prefills_and_four_decodes_with_grouped_heads() {
        assert_eq!(
            specs("llama-3-8b"),
            [
                "1,32,2048,2048,128,f16,causal,kv=8",
                "1,32,8192,8192,128,f16,causal,kv=8",
                "1,32,32768,32768,128,f16,causal,kv=8",
                "1,32,1,4096,128,f16,causal=br,kv=8",
                "16,32,1,8192,128,f16,causal=br,kv=8",
                "64,32,1,32768,128,f16,causal=br,kv=8",
                "1,32,1,131072,128,f16,causal=br,kv=8",
            ]
        );
    }

    #[test]
    fn decode_is_masked_as_the_models_suite_states_it() {
        let suite = evo_gates::TimingSuite::parse("models")
            .unwrap()
            .problems(Dtype::F16);
        // The suite's Llama-3-8B decode is this preset's 16x8192 point.
        let decode: Problem = "16,32,1,8192,128,f16,causal=br,kv=8".parse().unwrap();
        assert!(suite.contains(&decode));
        let shapes = preset("llama-3-8b")
            .unwrap()
            .shapes(&[], &[(16, 8192)], Dtype::F16);
        assert_eq!(shapes, [decode]);
    }

    #[test]
    fn windows_follow_the_layers_that_have_them() {
        // Mistral: every layer windowed; at 2048 keys the window masks nothing.
        assert_eq!(
            specs("mistral-7b")[..3],
            [
                "1,32,2048,2048,128,f16,causal,kv=8",
                "1,32,8192,8192,128,f16,causal,kv=8,window=4096:",
                "1,32,32768,32768,128,f16,causal,kv=8,window=4096:",
            ]
        );
        assert_eq!(specs("mistral-7b").len(), 7);
        // Gemma 2: global and windowed both, where the window masks something.
        let gemma = specs("gemma-2-9b");
        assert_eq!(
            gemma[..5],
            [
                "1,16,2048,2048,256,f16,causal,kv=8",
                "1,16,8192,8192,256,f16,causal,kv=8",
                "1,16,8192,8192,256,f16,causal,kv=8,window=4096:",
                "1,16,32768,32768,256,f16,causal,kv=8",
                "1,16,32768,32768,256,f16,causal,kv=8,window=4096:",
            ]
        );
        assert!(gemma.contains(&"16,16,1,8192,256,f16,causal=br,kv=8,window=4096:".to_string()));
        assert_eq!(gemma.len(), 12);
        // The windowed problems are the ones the models suite states.
        let suite = evo_gates::TimingSuite::parse("models")
            .unwrap()
            .problems(Dtype::F16);
        let mistral = preset("mistral-7b")
            .unwrap()
            .shapes(&[8192], &[], Dtype::F16);
        assert!(suite.contains(&mistral[0]));
    }

    #[test]
    fn every_preset_states_valid_problems_and_its_source() {
        for p in &PRESETS {
            let shapes = p.shapes(&DEFAULT_PREFILL, &DEFAULT_DECODE, Dtype::Bf16);
            assert!(shapes.len() >= 7, "{}", p.name);
            for s in &shapes {
                s.validate().unwrap();
                assert_eq!(s.spec().parse::<Problem>().unwrap(), *s);
                assert_eq!(s.dtype, Dtype::Bf16);
            }
            assert!(p.source.contains("config.json"), "{}", p.name);
        }
        assert_eq!(specs("phi-3-mini")[0], "1,32,2048,2048,96,f16,causal");
        assert_eq!(specs("qwen2.5-7b")[3], "1,28,1,4096,128,f16,causal=br,kv=4");
        assert!(preset("llama-4")
            .unwrap_err()
            .contains("llama-3-8b, llama-3-70b"));
    }

    #[test]
    fn prefill_and_decode_lists_parse_or_say_the_form() {
        assert_eq!(parse_prefill("2048, 8192").unwrap(), [2048, 8192]);
        assert_eq!(parse_prefill("none").unwrap(), Vec::<u32>::new());
        assert!(parse_prefill("2k").unwrap_err().contains("`2k`"));
        assert_eq!(
            parse_decode("16x8192,1x131072").unwrap(),
            [(16, 8192), (1, 131072)]
        );
        assert!(parse_decode("16*8192")
            .unwrap_err()
            .contains("BATCHxCONTEXT"));
        assert!(parse_decode("0x8").is_err());
    }
}
