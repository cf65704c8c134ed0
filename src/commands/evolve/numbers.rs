//! The numeric options of the search commands, bounded as they are parsed: a value past
//! its bound is a typo or an attack, and an unbounded one panics later (a wall budget
//! that no `Duration` holds, a timeout added to an `Instant`).

use evo_mutator::MAX_MINUTES;

/// The most evaluations one budget may ask for; far past any space evo searches.
pub const MAX_EVALUATIONS: u64 = 1_000_000_000;
/// The longest a worker may spend on one candidate: a day.
pub const MAX_TIMEOUT_S: u64 = 86_400;
/// The largest generation (population) and the most candidates in flight.
pub const MAX_POPULATION: u64 = 100_000;
/// More compile threads than any host has cores.
pub const MAX_THREADS: u64 = 4096;

/// A whole number in `lo..=hi`; `what` says what it counts.
fn whole(s: &str, lo: u64, hi: u64, what: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(n) if (lo..=hi).contains(&n) => Ok(n),
        _ => Err(format!("give a whole number of {what} from {lo} to {hi}")),
    }
}

/// `--budget`: at least one evaluation; 0 would leave a folder that nothing can open.
pub fn evaluations(s: &str) -> Result<usize, String> {
    whole(s, 1, MAX_EVALUATIONS, "evaluations").map(|n| n as usize)
}

/// `--minutes`: above 0 and at most a year; `inf`, `nan` and `1e308` are refused.
pub fn minutes(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(m) if m > 0.0 && m <= MAX_MINUTES => Ok(m),
        _ => Err(format!(
            "give a number of minutes above 0 and at most {MAX_MINUTES} (a year)"
        )),
    }
}

/// `--timeout`: seconds a worker may spend on one candidate.
pub fn timeout_seconds(s: &str) -> Result<u64, String> {
    whole(s, 1, MAX_TIMEOUT_S, "seconds")
}

/// `--population` and `--in-flight`: candidates.
pub fn candidates(s: &str) -> Result<usize, String> {
    whole(s, 1, MAX_POPULATION, "candidates").map(|n| n as usize)
}

/// `--compile-threads N`: threads, at least one.
pub fn threads(s: &str) -> Result<usize, String> {
    whole(s, 1, MAX_THREADS, "threads").map(|n| n as usize)
}

/// `--plant-faults N`: every N-th candidate; 0 would plant nothing and say nothing.
pub fn every_nth(s: &str) -> Result<usize, String> {
    whole(s, 1, u32::MAX as u64, "candidates").map(|n| n as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minutes_refuses_what_no_duration_holds() {
        for bad in ["0", "-1", "inf", "nan", "NaN", "1e308", "525601", "", "1 "] {
            assert!(minutes(bad).is_err(), "{bad} accepted");
        }
        assert_eq!(minutes("0.05"), Ok(0.05));
        assert_eq!(minutes("525600"), Ok(525_600.0));
    }

    #[test]
    fn counts_are_whole_and_bounded() {
        for bad in [
            "0",
            "-1",
            "1.5",
            "1e3",
            "18446744073709551616",
            "1000000001",
        ] {
            assert!(evaluations(bad).is_err(), "{bad} accepted");
        }
        assert_eq!(evaluations("200"), Ok(200));
        assert!(timeout_seconds("0").is_err() && timeout_seconds("86401").is_err());
        assert!(every_nth("0").is_err());
    }
}
