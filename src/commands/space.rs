//! `evo space`: how big the search space is, per device and head dimension, and which
//! validity rule cuts it down the most.

use clap::Args;
use evo_genome::{rules, space, Family, Gene, Genome, HeadDim, Rule, Target};
use std::collections::BTreeMap;

/// Count the valid kernels per device, family and head dimension.
///
/// Every family is listed with its pass: a search is of one pass, forward or backward,
/// and never proposes a family of the other.
///
/// A genome is valid when every rule of crates/genome/src/rules.rs holds (shared
/// memory and register budgets, which math combinations exist, which device a family
/// runs on). Each family is counted over the genes that shape its kernels (the others
/// do not make a different kernel); only the genes that appear in a rule are walked,
/// and the count multiplies by the free genes' product: exact, and instant.
#[derive(Debug, Args)]
pub struct SpaceArgs {
    /// Only this device: sm_89 (Ada, e.g. L4) or sm_90 (Hopper, e.g. H100). Default: both.
    #[arg(long, value_parser = super::compile::parse_target)]
    pub target: Option<Target>,
}

/// Kernels of one family each rule excludes (a kernel breaking two rules counts for both).
fn excluded_by_rule(family: Family, head_dim: HeadDim, target: Target) -> BTreeMap<Rule, u128> {
    let free: u128 = space::free_genes_in(family)
        .iter()
        .map(|g| g.allele_count() as u128)
        .product();
    let structural = space::structural_in(family);
    let base = Genome {
        family,
        ..Genome::baseline()
    };
    let mut counts = BTreeMap::new();
    for g in space::product(base, &structural) {
        // A rule can fail twice in one genome (the backward's two kernels, the Hopper
        // consumers' two register budgets): the kernel counts once for it.
        let mut failed: Vec<Rule> = rules::violations(&g, head_dim, target)
            .into_iter()
            .map(|v| v.rule)
            .collect();
        failed.sort_unstable();
        failed.dedup();
        for rule in failed {
            *counts.entry(rule).or_insert(0) += free;
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
    let targets: Vec<Target> = match args.target {
        Some(t) => vec![t],
        None => Target::ALL.to_vec(),
    };
    println!(
        "{} genes in {} kernel families; a family's kernels are the product of the genes \
         that shape it:",
        Gene::ALL.len(),
        Family::ALL.len()
    );
    for &family in Family::ALL {
        let genes = Genome {
            family,
            ..Genome::baseline()
        }
        .genes();
        println!(
            "  {family:<10} {} genes, {} kernels ({} pass)",
            genes.len() - 1,
            thousands(space::family_size(family)),
            family.pass()
        );
    }
    println!();
    println!(
        "{:<7} {:<10} {:>4} {:>13} {:>8}   rule excluding the most kernels",
        "device", "family", "D", "valid", "share"
    );
    let mut top_rules = Vec::new();
    for target in targets {
        for &family in Family::ALL {
            let total = space::family_size(family);
            for head_dim in HeadDim::ALL {
                let valid = space::count_valid_in(family, head_dim, target);
                let excluded = excluded_by_rule(family, head_dim, target);
                let top = excluded.iter().max_by_key(|(_, n)| **n);
                let top_text = match top {
                    Some((rule, n)) => {
                        if !top_rules.contains(rule) {
                            top_rules.push(*rule);
                        }
                        format!(
                            "{rule} ({} kernels, {:.1}%)",
                            thousands(*n),
                            100.0 * *n as f64 / total as f64
                        )
                    }
                    None => "none".to_string(),
                };
                println!(
                    "{:<7} {:<10} {:>4} {:>13} {:>7.2}%   {top_text}",
                    target.arch(),
                    family.label(),
                    head_dim.get(),
                    thousands(valid),
                    100.0 * valid as f64 / total as f64
                );
            }
        }
    }
    println!("\nA kernel breaking several rules counts for each of them.");
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
