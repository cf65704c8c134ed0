use crate::util::{evo, stderr, stdout};
use evo_genome::{space, Family, HeadDim, Target};

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

#[test]
fn space_prints_every_device_family_and_head_dim() {
    let out = evo(&["space"], &[]);
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    for family in Family::ALL {
        assert!(
            text.contains(&thousands(space::family_size(*family))),
            "{text}"
        );
    }
    for target in Target::ALL {
        for family in Family::ALL {
            for d in HeadDim::ALL {
                let valid = thousands(space::count_valid_in(*family, d, target));
                let row = text
                    .lines()
                    .find(|l| {
                        let cols: Vec<&str> = l.split_whitespace().collect();
                        cols.len() > 3
                            && cols[0] == target.arch()
                            && cols[1] == family.label()
                            && cols[2] == d.to_string()
                    })
                    .unwrap_or_else(|| panic!("no row for {target} {family} D{d}:\n{text}"));
                assert!(row.contains(&valid), "{row} should hold {valid}");
            }
        }
    }
    // No Hopper kernel runs on sm_89, and the rule that says so is named.
    assert!(
        text.lines()
            .any(|l| l.starts_with("sm_89   hopper") && l.contains("hopper_needs_sm90")),
        "{text}"
    );
    assert!(text.contains("rule excluding the most kernels"), "{text}");
}

#[test]
fn space_for_one_target() {
    let out = evo(&["space", "--target", "sm_89"], &[]);
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(text.lines().any(|l| l.starts_with("sm_89")), "{text}");
    assert!(!text.lines().any(|l| l.starts_with("sm_90")), "{text}");
}

#[test]
fn space_rejects_an_unknown_target() {
    let out = evo(&["space", "--target", "sm_70"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("unknown architecture `sm_70`; use sm_89 or sm_90"),
        "{}",
        stderr(&out)
    );
}
