use crate::util::{evo, stderr, stdout};
use evo_genome::{space, HeadDim, Target};

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
fn space_prints_every_device_and_head_dim() {
    let out = evo(&["space"], &[]);
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(text.contains(&thousands(space::total_size())), "{text}");
    for target in Target::ALL {
        for d in HeadDim::ALL {
            let valid = thousands(space::count_valid(d, target));
            let row = text
                .lines()
                .find(|l| {
                    let cols: Vec<&str> = l.split_whitespace().collect();
                    cols.len() > 2 && cols[0] == target.arch() && cols[1] == d.to_string()
                })
                .unwrap_or_else(|| panic!("no row for {target} D{d}:\n{text}"));
            assert!(row.contains(&valid), "{row} should hold {valid}");
        }
    }
    assert!(text.contains("rule excluding the most genomes"), "{text}");
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
