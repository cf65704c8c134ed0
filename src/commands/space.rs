//! `evo space`: how big the search space is, per device and head dimension, and which
//! validity rule cuts it down the most.

use clap::Args;
use evo_genome::{rules, space, Genome, HeadDim, Rule, Target};
use std::collections::BTreeMap;

/// Count the valid genomes per device and head dimension.
///
/// A genome is valid when every rule of crates/genome/src/rules.rs holds (shared
/// memory and register budgets, which math combinations exist). Only 9 of the 16
/// genes appear in a rule, so the count walks their product and multiplies by the
/// free genes' product: exact, and instant.
#[derive(Debug, Args)]
pub struct SpaceArgs {
    /// Only this device: sm_89 (Ada, e.g. L4) or sm_90 (Hopper, e.g. H100). Default: both.
    #[arg(long, value_parser = super::compile::parse_target)]
    pub target: Option<Target>,
}

/// Genomes each rule excludes (a genome breaking two rules counts for both).
fn excluded_by_rule(head_dim: HeadDim, target: Target) -> BTreeMap<Rule, u128> {
    let free: u128 = space::free_genes()
        .iter()
        .map(|g| g.allele_count() as u128)
        .product();
    let mut counts = BTreeMap::new();
    for g in space::product(Genome::baseline(), &space::STRUCTURAL) {
        for v in rules::violations(&g, head_dim, target) {
            *counts.entry(v.rule).or_insert(0) += free;
        }
    }
    counts
}

/// `95551488` -> `95,551,488`.
fn thousands(n: u128) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub fn run(args: SpaceArgs) -> anyhow::Result<()> {
    let total = space::total_size();
    let targets: Vec<Target> = match args.target {
        Some(t) => vec![t],
        None => Target::ALL.to_vec(),
    };
    println!(
        "{} genes; the full product of their alleles has {} genomes.\n",
        evo_genome::Gene::ALL.len(),
        thousands(total)
    );
    println!(
        "{:<7} {:>4} {:>13} {:>8}   rule excluding the most genomes",
        "device", "D", "valid", "share"
    );
    let mut top_rules = Vec::new();
    for target in targets {
        for head_dim in HeadDim::ALL {
            let valid = space::count_valid(head_dim, target);
            let excluded = excluded_by_rule(head_dim, target);
            let top = excluded.iter().max_by_key(|(_, n)| **n);
            let top_text = match top {
                Some((rule, n)) => {
                    if !top_rules.contains(rule) {
                        top_rules.push(*rule);
                    }
                    format!(
                        "{rule} ({} genomes, {:.1}%)",
                        thousands(*n),
                        100.0 * *n as f64 / total as f64
                    )
                }
                None => "none".to_string(),
            };
            println!(
                "{:<7} {:>4} {:>13} {:>7.2}%   {top_text}",
                target.arch(),
                head_dim.get(),
                thousands(valid),
                100.0 * valid as f64 / total as f64
            );
        }
    }
    println!("\nA genome breaking several rules counts for each of them.");
    for rule in top_rules {
        println!("{rule}: {}", rule.why());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(95_551_488), "95,551,488");
    }
}
