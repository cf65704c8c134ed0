//! The shape suites: GREEN's (`default`, `quick`) and the timing suites (`seed`, `anchors`).
//!
//! The default GREEN suite is built so that each classic kernel bug fails at least
//! one case: odd lengths (77, 1000: partial tiles in both dimensions), Lq != Lk both
//! ways (a kernel that assumes square attention), causal and not, D 64 and 128,
//! B·H not a power of two (grid and indexing mix-ups), Lq = 1, both dtypes, and
//! large logits (|s| > 100: a softmax without the running max overflows).

use evo_genome::{Dtype, HeadDim, Problem};
use serde::{Deserialize, Serialize};

/// One GREEN case: a problem and how its inputs are drawn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Case {
    pub problem: Problem,
    /// Q is multiplied by this (1 for ordinary cases; 40 for the large-logit cases).
    pub q_gain: f32,
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
            },
            q_gain: 1.0,
        }
    }

    fn large_logits(mut self) -> Case {
        self.q_gain = LARGE_LOGIT_GAIN;
        self
    }

    /// `B1 H8 L512 D64 f16` plus ` large-logits` where it applies.
    pub fn label(&self) -> String {
        if self.q_gain != 1.0 {
            format!("{} large-logits", self.problem)
        } else {
            self.problem.label()
        }
    }
}

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
            ],
            GreenSuite::Quick => vec![
                Case::new(1, 8, 512, 512, D64, F16, false),
                Case::new(2, 3, 77, 77, D64, F16, true),
                Case::new(1, 3, 1000, 77, D128, Bf16, true),
                Case::new(1, 4, 512, 512, D64, F16, false).large_logits(),
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
}

impl TimingSuite {
    pub fn parse(s: &str) -> Option<TimingSuite> {
        match s {
            "seed" => Some(TimingSuite::Seed),
            "anchors" => Some(TimingSuite::Anchors),
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
        };
        match self {
            TimingSuite::Seed => vec![shape(1, 8, 512, HeadDim::D64, false)],
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
        assert!(has(&|c| c.problem.head_dim == HeadDim::D64));
        assert!(has(&|c| c.problem.head_dim == HeadDim::D128));
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
        for c in &cases {
            c.problem.validate().unwrap();
        }
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
}
