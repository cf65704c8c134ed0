//! A class's figures against its baselines: every baseline the bench timed on the
//! class's shape is recorded, and a ratio is printed against the fastest of them, with
//! its name. A ratio against one backend (cuDNN) flattered a champion where another
//! backend (flash on the grouped decode, FlexAttention on the window) was faster.

use super::ShapeClass;
use serde::{Deserialize, Serialize};

/// One baseline's figures on a class's shape, in the run that timed the champion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaselineFigure {
    /// As the bench names it: `sdpa-cudnn`, `sdpa-flash`, `sdpa-flex`, `cublas-hybrid`.
    pub backend: String,
    /// Median µs, replayed back to back (graph or events, as the bench chose).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub us: Option<f64>,
    /// Median µs on a cold L2 (`--cold-l2`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cold_us: Option<f64>,
}

/// The champion against the fastest baseline of its record, warm or cold.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub champion_us: f64,
    pub backend: String,
    pub backend_us: f64,
    /// backend_us / champion_us: above 1, the champion is faster.
    pub ratio: f64,
    /// How many baselines had a figure; 0 for a table older than `baselines`, which
    /// records cuDNN's figure only.
    pub of: usize,
}

impl std::fmt::Display for Comparison {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:.2} µs against {} {:.2} µs: {:.2}x",
            self.champion_us, self.backend, self.backend_us, self.ratio
        )?;
        match self.of {
            0 => write!(
                f,
                " (the only backend this table records; a faster one may not be)"
            ),
            1 => write!(f, " (the only baseline timed)"),
            n => write!(f, " (the fastest of {n} baselines)"),
        }
    }
}

impl ShapeClass {
    /// The champion against the fastest baseline of its record, replayed (`cold` false)
    /// or on a cold L2; `None` when the record lacks the champion's figure or every
    /// baseline's. A table written before `baselines` compares with cuDNN's figure and
    /// says that it is the only one recorded.
    pub fn comparison(&self, cold: bool) -> Option<Comparison> {
        let champion_us = if cold { self.cold_us } else { self.median_us }?;
        let timed: Vec<(&str, f64)> = self
            .baselines
            .iter()
            .filter_map(|b| Some((b.backend.as_str(), if cold { b.cold_us } else { b.us }?)))
            .collect();
        let (backend, backend_us, of) = if self.baselines.is_empty() {
            let cudnn = if cold {
                self.cudnn_cold_us
            } else {
                self.cudnn_us
            }?;
            ("sdpa-cudnn", cudnn, 0)
        } else {
            let (b, us) = timed.iter().copied().min_by(|a, b| a.1.total_cmp(&b.1))?;
            (b, us, timed.len())
        };
        Some(Comparison {
            champion_us,
            backend: backend.to_string(),
            backend_us,
            ratio: backend_us / champion_us,
            of,
        })
    }

    /// The comment header of the class's champion file: what it is, where it came from,
    /// and its figures against the fastest baseline, each ratio naming its backend.
    pub fn champion_header(&self, device: &str) -> String {
        let mut h = format!(
            "Champion of {} on {device} (`evo champions`).\nShape: {} (either dtype; the bench measures both).\nEvolved in: {}\n",
            self.name, self.shape, self.experiment
        );
        let bench = self.bench.as_deref().unwrap_or("bench");
        match (self.median_us, self.comparison(false)) {
            (Some(_), Some(warm)) => {
                h += &format!("Measured: {warm}.\n");
                if let Some(cold) = self.comparison(true) {
                    h += &format!("Cold L2: {cold}.\n");
                }
                h += &format!("Figures: {bench}.\n");
            }
            (Some(us), None) => {
                h += &format!("Measured: {us:.2} µs, no baseline in that run ({bench}).\n")
            }
            _ => h += "Not benched yet: `evo bench --champions DIR --record`.\n",
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::tests::class;

    #[test]
    fn a_ratio_is_against_the_fastest_baseline_and_names_it() {
        let figure = |backend: &str, us: f64, cold: Option<f64>| BaselineFigure {
            backend: backend.into(),
            us: Some(us),
            cold_us: cold,
        };
        let c = ShapeClass {
            median_us: Some(179.5),
            cold_us: Some(179.23),
            cudnn_us: Some(210.66),
            cudnn_cold_us: Some(179.25),
            baselines: vec![
                figure("sdpa-cudnn", 210.66, Some(179.25)),
                figure("sdpa-flash", 181.96, Some(184.11)),
                figure("sdpa-efficient+expanded-kv", 827.76, None),
            ],
            ..class("16,32,1,8192,128,f16,causal=br,kv=8")
        };
        let warm = c.comparison(false).unwrap();
        assert_eq!(
            warm.to_string(),
            "179.50 µs against sdpa-flash 181.96 µs: 1.01x (the fastest of 3 baselines)"
        );
        let cold = c.comparison(true).unwrap();
        assert_eq!((cold.backend.as_str(), cold.of), ("sdpa-cudnn", 2));
        // A table without baselines: cuDNN's figure, said to be the only one recorded.
        let old = ShapeClass {
            baselines: Vec::new(),
            ..c.clone()
        };
        assert!(old
            .comparison(false)
            .unwrap()
            .to_string()
            .ends_with("against sdpa-cudnn 210.66 µs: 1.17x (the only backend this table records; a faster one may not be)"));
        let header = c.champion_header("H100");
        assert!(
            header.contains("Measured: 179.50 µs against sdpa-flash")
                && header.contains("Cold L2: 179.23 µs against sdpa-cudnn 179.25 µs: 1.00x"),
            "{header}"
        );
        // No champion figure: no ratio is made up.
        let unbenched = ShapeClass {
            median_us: None,
            ..c
        };
        assert!(unbenched.comparison(false).is_none());
        assert!(unbenched
            .champion_header("H100")
            .contains("Not benched yet"));
    }
}
