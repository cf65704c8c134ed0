//! The shape suites: GREEN's (`default`, `quick`) and the timing suites (`seed`, `anchors`).
//!
//! The default GREEN suite is built so that each classic kernel bug fails at least
//! one case: odd lengths (77, 1000: partial tiles in both dimensions), Lq != Lk both
//! ways (a kernel that assumes square attention), causal and not, D 64 and 128,
//! B·H not a power of two (grid and indexing mix-ups), Lq = 1, both dtypes, and
//! large logits (|s| > 100: a softmax without the running max overflows).

use evo_genome::{Dtype, HeadDim, MaskAlign, Problem};
use serde::{Deserialize, Serialize};

mod drawn;
pub use drawn::{
    drawn_cases, full_cases, suite_lengths, DRAWN_CASES, MAX_DRAWN_LEN, MAX_DRAWN_SCORES,
};

/// One GREEN case: a problem and how its inputs are drawn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Case {
    pub problem: Problem,
    /// Q is multiplied by this (1 for ordinary cases; 40 for the large-logit cases).
    pub q_gain: f32,
    /// Drawn from the run seed ([`drawn_cases`]) rather than fixed.
    #[serde(default)]
    pub drawn: bool,
}

impl Case {
    fn new(
        batch: u32,
        heads: u32,
        q_len: u32,
        kv_len: u32,
        d: HeadDim,
        dtype: Dtype,
        causal: bool,
    ) -> Case {
        Case {
            problem: Problem {
                batch,
                heads,
                q_len,
                kv_len,
                head_dim: d,
                dtype,
                causal,
                ..Problem::seed()
            },
            q_gain: 1.0,
            drawn: false,
        }
    }

    /// The case of a spec (`B,H,Lq,Lk,D,dtype,options`, [`evo_genome::SPEC_FORM`]).
    fn spec(spec: &str) -> Case {
        Case {
            problem: spec.parse().expect("a built-in suite's spec"),
            q_gain: 1.0,
            drawn: false,
        }
    }

    /// The case as multi-head attention with a top-left causal mask or none (every K/V
    /// head its query head's, no window, the same lengths): what GREEN runs for a kernel
    /// whose ABI cannot state the case itself.
    pub fn basic(&self) -> Case {
        Case {
            problem: Problem {
                kv_heads: None,
                align: MaskAlign::TopLeft,
                window_left: None,
                window_right: None,
                ..self.problem
            },
            ..self.clone()
        }
    }

    fn large_logits(mut self) -> Case {
        self.q_gain = LARGE_LOGIT_GAIN;
        self
    }

    /// `B1 H8 L512 D64 f16` plus ` large-logits` where it applies.
    pub fn label(&self) -> String {
        let mut label = self.problem.label();
        if self.q_gain != 1.0 {
            label += " large-logits";
        }
        if self.drawn {
            label += " drawn";
        }
        label
    }
}

/// One `[[case]]` of a user's suite file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseSpec {
    batch: u32,
    heads: u32,
    q_len: u32,
    kv_len: u32,
    head_dim: HeadDim,
    dtype: Dtype,
    causal: bool,
    #[serde(default)]
    kv_heads: Option<u32>,
    #[serde(default)]
    align: MaskAlign,
    #[serde(default)]
    window_left: Option<u32>,
    #[serde(default)]
    window_right: Option<u32>,
    #[serde(default = "unit_gain")]
    q_gain: f32,
}

fn unit_gain() -> f32 {
    1.0
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SuiteFile {
    case: Vec<CaseSpec>,
}

/// A user's own GREEN cases from a TOML file of `[[case]]` tables (`batch`, `heads`,
/// `q_len`, `kv_len`, `head_dim` 64, 96, 128 or 256, `dtype` "f16" or "bf16", `causal`, and
/// optionally `kv_heads`, `align` ("top_left" or "bottom_right"), `window_left`,
/// `window_right` and `q_gain`). Errors name the file, the line and the field.
pub fn load_suite(path: &std::path::Path) -> Result<Vec<Case>, crate::GateError> {
    let err = |message: String| crate::GateError::Suite {
        path: path.display().to_string(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|error| crate::GateError::Io {
        path: path.display().to_string(),
        error,
    })?;
    let file: SuiteFile = toml::from_str(&text).map_err(|e| {
        let line = e
            .span()
            .map(|s| format!("line {}: ", text[..s.start].matches('\n').count() + 1))
            .unwrap_or_default();
        err(format!(
            "{line}{} (each [[case]] has batch, heads, q_len, kv_len, head_dim = 64, 96, 128 or 256, \
             dtype = \"f16\" or \"bf16\", causal, optional kv_heads, align = \
             \"top_left\" or \"bottom_right\", window_left, window_right, q_gain)",
            e.message()
        ))
    })?;
    if file.case.is_empty() {
        return Err(err("no [[case]] tables; add at least one".into()));
    }
    // The line of each `[[case]]` header, for errors found after parsing.
    let headers: Vec<usize> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.trim_start().starts_with("[[case]]"))
        .map(|(n, _)| n + 1)
        .collect();
    file.case
        .into_iter()
        .enumerate()
        .map(|(n, c)| {
            let problem = Problem {
                batch: c.batch,
                heads: c.heads,
                q_len: c.q_len,
                kv_len: c.kv_len,
                head_dim: c.head_dim,
                dtype: c.dtype,
                causal: c.causal,
                kv_heads: c.kv_heads,
                align: c.align,
                window_left: c.window_left,
                window_right: c.window_right,
            };
            let at = headers
                .get(n)
                .map(|l| format!("line {l}: "))
                .unwrap_or_default();
            problem
                .validate()
                .map_err(|m| err(format!("{at}[[case]] number {}: {m}", n + 1)))?;
            if !(c.q_gain > 0.0 && c.q_gain <= MAX_Q_GAIN) {
                return Err(err(format!(
                    "{at}[[case]] number {}: field `q_gain` is {}, out of range: it must be \
                     above 0 and at most {MAX_Q_GAIN} (Q is stored in f16 or bf16 after the \
                     gain)",
                    n + 1,
                    c.q_gain
                )));
            }
            Ok(Case {
                problem,
                q_gain: c.q_gain,
                drawn: false,
            })
        })
        .collect()
}

/// A search's screen: `cases` at the head dims and dtypes the search times (its
/// objective's), so that a candidate is compiled only at the variants FAST runs. A case
/// at another (head dim, dtype) is moved to the objective's first shape's. The screen
/// keeps every case's shape, mask and logit scale; the other head dims and dtypes are
/// the full gate's, which a new best passes before it is crowned.
pub fn screen_cases(cases: Vec<Case>, objective: &[Problem]) -> Vec<Case> {
    let Some(first) = objective.first() else {
        return cases;
    };
    let timed = |c: &Case| {
        objective
            .iter()
            .any(|p| (p.head_dim, p.dtype) == (c.problem.head_dim, c.problem.dtype))
    };
    cases
        .into_iter()
        .map(|mut c| {
            if !timed(&c) {
                c.problem.head_dim = first.head_dim;
                c.problem.dtype = first.dtype;
            }
            c
        })
        .collect()
}

/// The largest `q_gain` a suite file may ask for: standard normal Q times this stays
/// well inside f16's range (65504), and 25 times [`LARGE_LOGIT_GAIN`] tests nothing more.
pub const MAX_Q_GAIN: f32 = 1000.0;

/// With standard normal Q and K, s = q·k/√D is N(0, 1); multiplying Q by 40 gives
/// scores with σ = 40, so rows of ≥ 77 keys reach |s| > 100 (exp(100) overflows f32).
pub const LARGE_LOGIT_GAIN: f32 = 40.0;

/// A named list of GREEN cases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GreenSuite {
    Default,
    Quick,
}

impl GreenSuite {
    pub fn parse(s: &str) -> Option<GreenSuite> {
        match s {
            "default" => Some(GreenSuite::Default),
            "quick" => Some(GreenSuite::Quick),
            _ => None,
        }
    }

    pub fn cases(self) -> Vec<Case> {
        use Dtype::{Bf16, F16};
        use HeadDim::{D128, D64};
        match self {
            GreenSuite::Default => vec![
                Case::new(1, 8, 512, 512, D64, F16, false),
                Case::new(1, 8, 512, 512, D64, Bf16, true),
                Case::new(2, 3, 77, 77, D64, F16, true),
                Case::new(1, 5, 77, 1000, D128, F16, false),
                Case::new(1, 3, 1000, 77, D64, Bf16, true),
                Case::new(3, 5, 1000, 1000, D128, Bf16, false),
                Case::new(2, 3, 1000, 1000, D64, F16, true),
                Case::new(1, 6, 128, 333, D128, Bf16, true),
                Case::new(3, 1, 1, 1000, D64, F16, false),
                Case::new(1, 1, 16, 16, D128, F16, true),
                Case::new(1, 4, 512, 512, D64, F16, false).large_logits(),
                Case::new(1, 2, 300, 300, D128, Bf16, true).large_logits(),
                // Grouped and multi-query heads; the bottom-right diagonal (Lq > Lk:
                // rows that see no key output zeros); sliding and two-sided windows;
                // decode (a few queries over a long cache).
                Case::spec("2,8,77,1000,64,f16,causal=br,kv=2"),
                Case::spec("1,6,128,333,128,bf16,kv=1"),
                Case::spec("1,3,1000,77,64,f16,causal=br"),
                Case::spec("1,4,1000,1000,128,f16,causal,window=100:"),
                Case::spec("2,2,77,1000,64,bf16,window=64:32,align=br,kv=1"),
                Case::spec("4,8,1,5000,128,f16,causal=br,kv=2"),
                Case::spec("2,4,7,3000,64,bf16,causal=br,kv=1"),
                // Phi's and Gemma's head dims, with the kinds above.
                Case::spec("1,4,300,300,96,f16,causal"),
                Case::spec("2,4,77,1000,96,bf16,causal=br,kv=2"),
                Case::spec("1,2,333,128,256,bf16,causal"),
                Case::spec("2,4,3,3000,256,f16,causal=br,kv=1,window=1000:"),
            ],
            GreenSuite::Quick => vec![
                Case::new(1, 8, 512, 512, D64, F16, false),
                Case::new(2, 3, 77, 77, D64, F16, true),
                Case::new(1, 3, 1000, 77, D128, Bf16, true),
                Case::new(1, 4, 512, 512, D64, F16, false).large_logits(),
                Case::spec("2,4,100,333,64,f16,causal=br,kv=2,window=50:"),
            ],
        }
    }
}

/// The shapes `evo bench` and FAST time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimingSuite {
    /// The seed shape only: B1 H8 L512 D64 f16, not causal.
    Seed,
    /// B1 H8 L512 D64, B4 H16 L1024 D64, B2 H16 L4096 D128, each causal and not, and
    /// B1 H16 L8192 D128 (the shapes PyTorch SDPA is measured at in the anchors).
    Anchors,
    /// The problems served models pose: Llama-3-8B's prefill (B1 H32/8 L4096 D128
    /// causal) and decode (B16 H32/8, one query over 8192 keys), a Mistral-style
    /// sliding-window prefill (window 4096 over 8192), a multi-query decode, Gemma-2-9B's
    /// prefill (B1 H16/8 L4096 D256 causal) and Phi-3-mini's (B1 H32 L4096 D96 causal).
    Models,
}

impl TimingSuite {
    pub fn parse(s: &str) -> Option<TimingSuite> {
        match s {
            "seed" => Some(TimingSuite::Seed),
            "anchors" => Some(TimingSuite::Anchors),
            "models" => Some(TimingSuite::Models),
            _ => None,
        }
    }

    pub fn problems(self, dtype: Dtype) -> Vec<Problem> {
        let shape = |b, h, l, d, causal| Problem {
            batch: b,
            heads: h,
            q_len: l,
            kv_len: l,
            head_dim: d,
            dtype,
            causal,
            ..Problem::seed()
        };
        match self {
            TimingSuite::Seed => vec![shape(1, 8, 512, HeadDim::D64, false)],
            TimingSuite::Models => [
                "1,32,4096,4096,128,f16,causal,kv=8",
                "16,32,1,8192,128,f16,causal=br,kv=8",
                "1,32,8192,8192,128,f16,causal,kv=8,window=4096:",
                "16,32,1,8192,128,f16,causal=br,kv=1",
                "1,16,4096,4096,256,f16,causal,kv=8",
                "1,32,4096,4096,96,f16,causal",
            ]
            .iter()
            .map(|spec| Problem {
                dtype,
                ..spec.parse().expect("a built-in suite's spec")
            })
            .collect(),
            TimingSuite::Anchors => [false, true]
                .into_iter()
                .flat_map(|causal| {
                    [
                        shape(1, 8, 512, HeadDim::D64, causal),
                        shape(4, 16, 1024, HeadDim::D64, causal),
                        shape(2, 16, 4096, HeadDim::D128, causal),
                    ]
                })
                .chain([Problem {
                    batch: 1,
                    heads: 16,
                    q_len: 8192,
                    kv_len: 8192,
                    head_dim: HeadDim::D128,
                    dtype,
                    causal: false,
                    ..Problem::seed()
                }])
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_suite_covers_what_the_issue_lists() {
        let cases = GreenSuite::Default.cases();
        assert!(cases.len() >= 10);
        let has = |f: &dyn Fn(&Case) -> bool| cases.iter().any(f);
        for d in HeadDim::ALL {
            assert!(has(&|c| c.problem.head_dim == d), "no D{d} case");
        }
        assert!(has(&|c| c.problem.causal) && has(&|c| !c.problem.causal));
        assert!(has(&|c| c.problem.q_len == 77) && has(&|c| c.problem.kv_len == 1000));
        assert!(has(&|c| c.problem.q_len < c.problem.kv_len));
        assert!(has(&|c| c.problem.q_len > c.problem.kv_len));
        assert!(has(
            &|c| !(c.problem.batch * c.problem.heads).is_power_of_two()
        ));
        assert!(has(&|c| c.problem == Problem::seed()));
        assert!(
            has(&|c| c.problem.dtype == Dtype::F16) && has(&|c| c.problem.dtype == Dtype::Bf16)
        );
        assert!(has(&|c| c.q_gain == LARGE_LOGIT_GAIN));
        // The kinds of issue 18: grouped and multi-query heads, the bottom-right diagonal
        // with rows that see no key, windows on either side, decode.
        assert!(has(&|c| c.problem.group() > 1 && c.problem.kv_heads() > 1));
        assert!(has(&|c| c.problem.kv_heads() == 1 && c.problem.heads > 1));
        assert!(has(&|c| {
            let p = c.problem;
            p.align == MaskAlign::BottomRight && (0..p.q_len).any(|i| p.visible_keys(i).is_empty())
        }));
        assert!(has(&|c| c.problem.window_left.is_some() && c.problem.causal));
        assert!(has(&|c| c.problem.window_right.is_some()));
        assert!(has(&|c| c.problem.q_len == 1 && c.problem.kv_len > 4096));
        for c in &cases {
            c.problem.validate().unwrap();
        }
    }

    #[test]
    fn the_models_suite_states_the_served_problems() {
        let models = TimingSuite::parse("models").unwrap().problems(Dtype::Bf16);
        let specs: Vec<String> = models.iter().map(Problem::spec).collect();
        assert_eq!(
            specs,
            [
                "1,32,4096,4096,128,bf16,causal,kv=8",
                "16,32,1,8192,128,bf16,causal=br,kv=8",
                "1,32,8192,8192,128,bf16,causal,kv=8,window=4096:",
                "16,32,1,8192,128,bf16,causal=br,kv=1",
                "1,16,4096,4096,256,bf16,causal,kv=8",
                "1,32,4096,4096,96,bf16,causal",
            ]
        );
    }

    #[test]
    fn a_suite_file_states_grouped_heads_and_masks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("suite.toml");
        std::fs::write(
            &path,
            "[[case]]\nbatch = 1\nheads = 8\nkv_heads = 2\nq_len = 7\nkv_len = 300\n\
             head_dim = 64\ndtype = \"f16\"\ncausal = true\nalign = \"bottom_right\"\n\
             window_left = 16\n",
        )
        .unwrap();
        let cases = load_suite(&path).unwrap();
        assert_eq!(
            cases[0].problem.spec(),
            "1,8,7,300,64,f16,causal=br,kv=2,window=16:"
        );
        std::fs::write(
            &path,
            "[[case]]\nbatch = 1\nheads = 8\nkv_heads = 3\nq_len = 7\nkv_len = 300\n\
             head_dim = 64\ndtype = \"f16\"\ncausal = true\n",
        )
        .unwrap();
        let err = load_suite(&path).unwrap_err().to_string();
        assert!(
            err.contains("suite.toml") && err.contains("`kv_heads` is 3"),
            "{err}"
        );
    }

    #[test]
    fn a_users_suite_loads_and_a_bad_field_is_named_with_its_line() {
        let dir = std::env::temp_dir().join(format!("evo-suite-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good.toml");
        std::fs::write(
            &good,
            "[[case]]\nbatch = 1\nheads = 2\nq_len = 4000\nkv_len = 37\nhead_dim = 128\n\
             dtype = \"bf16\"\ncausal = true\n",
        )
        .unwrap();
        let cases = load_suite(&good).unwrap();
        assert_eq!(cases.len(), 1);
        assert_eq!(
            (cases[0].problem.q_len, cases[0].problem.kv_len),
            (4000, 37)
        );
        assert_eq!(cases[0].q_gain, 1.0);

        let bad = dir.join("bad.toml");
        std::fs::write(
            &bad,
            "[[case]]\nbatch = 1\nheads = 2\nq_len = 8\nkv_len = 8\nhead_dim = 80\n\
             dtype = \"f16\"\ncausal = false\n",
        )
        .unwrap();
        let e = load_suite(&bad).unwrap_err().to_string();
        assert!(
            e.contains("bad.toml") && e.contains("line 6") && e.contains("head_dim 80"),
            "{e}"
        );

        let zero = dir.join("zero.toml");
        std::fs::write(
            &zero,
            "# mine\n[[case]]\nbatch = 1\nheads = 2\nq_len = 0\nkv_len = 8\nhead_dim = 64\n\
             dtype = \"f16\"\ncausal = false\n",
        )
        .unwrap();
        let e = load_suite(&zero).unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("q_len"), "{e}");

        // Bounded: a length past what the kernels index as an int, a gain that
        // overflows the input's f16.
        let case = "[[case]]\nbatch = 1\nheads = 2\nq_len = 8\nkv_len = 8\nhead_dim = 64\n\
                    dtype = \"f16\"\ncausal = false\n";
        for (edit, says) in [
            (
                case.replace("q_len = 8", "q_len = 2147483648"),
                "`q_len` is 2147483648, out of range: it must be 1 to 2147483647",
            ),
            (
                format!("{case}q_gain = 1e30\n"),
                "out of range: it must be above 0 and at most 1000",
            ),
            (
                format!("{case}q_gain = nan\n"),
                "`q_gain` is NaN, out of range",
            ),
        ] {
            let path = dir.join("bounds.toml");
            std::fs::write(&path, &edit).unwrap();
            let e = load_suite(&path).unwrap_err().to_string();
            assert!(e.contains("bounds.toml") && e.contains(says), "{e}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn suites_parse_by_name() {
        assert_eq!(GreenSuite::parse("quick"), Some(GreenSuite::Quick));
        assert_eq!(GreenSuite::parse("nope"), None);
        assert_eq!(
            TimingSuite::parse("anchors")
                .unwrap()
                .problems(Dtype::F16)
                .len(),
            7
        );
        assert_eq!(
            TimingSuite::Seed.problems(Dtype::F16),
            vec![Problem::seed()]
        );
    }

    #[test]
    fn the_screen_runs_every_quick_case_at_the_timed_variants_only() {
        let quick = GreenSuite::Quick.cases();
        let seed: Problem = "1,8,512,512,64,f16".parse().unwrap();
        let screen = screen_cases(quick.clone(), &[seed]);
        assert_eq!(screen.len(), quick.len());
        for (s, q) in screen.iter().zip(&quick) {
            assert_eq!(
                (s.problem.head_dim, s.problem.dtype),
                (HeadDim::D64, Dtype::F16)
            );
            // Shape, mask and logit scale kept.
            assert_eq!(
                (s.problem.q_len, s.problem.kv_len),
                (q.problem.q_len, q.problem.kv_len)
            );
            assert_eq!(
                (s.problem.causal, s.problem.kv_heads),
                (q.problem.causal, q.problem.kv_heads)
            );
            assert_eq!(s.q_gain, q.q_gain);
        }
        // The quick suite's D128 bf16 case moved: it is no variant this search times.
        assert!(quick.iter().any(|c| c.problem.head_dim == HeadDim::D128));
        // A suite objective keeps the cases at any of its variants.
        let d128: Problem = "1,8,512,512,128,bf16".parse().unwrap();
        let both = screen_cases(quick.clone(), &[seed, d128]);
        assert_eq!(both, quick);
        // No objective: nothing to move to.
        assert_eq!(screen_cases(quick.clone(), &[]), quick);
    }
}
