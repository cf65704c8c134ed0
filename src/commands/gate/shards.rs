//! `evo gate` over several GPUs: `--shard K/N` (which kernels of the list a process
//! runs) and `--gpus` (one `evo gate --shard K/N` process per GPU, pinned by
//! CUDA_VISIBLE_DEVICES, their rows merged in list order).

use super::{report_rows, GateArgs};
use anyhow::{bail, Context};
use evo_gates::report::Row;
use evo_gates::Device;
use std::time::Instant;

/// `--shard K/N`: the K-th (from 1) of N parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub k: usize,
    pub n: usize,
}

pub(super) fn parse_shard(s: &str) -> Result<Shard, String> {
    let bad = || format!("`{s}` is not K/N; write e.g. 1/2 for the first of two parts");
    let (k, n) = s.split_once('/').ok_or_else(bad)?;
    let (k, n): (usize, usize) = (
        k.trim().parse().map_err(|_| bad())?,
        n.trim().parse().map_err(|_| bad())?,
    );
    if n == 0 || k == 0 || k > n {
        return Err(format!("`{s}`: K must be between 1 and N"));
    }
    Ok(Shard { k, n })
}

/// The list positions (from 1) a gate runs: from `from` on, and of those only its shard's.
pub(super) fn positions(total: usize, from: usize, shard: Option<Shard>) -> Vec<usize> {
    (from..=total)
        .filter(|p| shard.is_none_or(|s| (p - from) % s.n == s.k - 1))
        .collect()
}

/// The command line of one GPU's shard: this process's arguments without `--gpus` and
/// `--json` (the shard writes its own JSON for the parent to merge), `--save-samples`
/// kept for the first shard only (every shard draws the same sample).
fn shard_args(argv: &[String], shard: Shard, json: &std::path::Path) -> Vec<String> {
    let mut dropped = vec!["--gpus", "--json"];
    if shard.k > 1 {
        dropped.push("--save-samples");
    }
    let mut out = Vec::new();
    let mut it = argv.iter();
    while let Some(a) = it.next() {
        if dropped.contains(&a.as_str()) {
            it.next();
            continue;
        }
        if dropped.iter().any(|f| a.starts_with(&format!("{f}="))) {
            continue;
        }
        out.push(a.clone());
    }
    out.push("--shard".into());
    out.push(format!("{}/{}", shard.k, shard.n));
    out.push("--json".into());
    out.push(json.display().to_string());
    out
}

/// What the shards of a gate over several GPUs left.
struct Shards {
    /// Every shard's rows, each naming its GPU (unsorted).
    rows: Vec<Row>,
    /// GPUs whose shard stopped at a hung kernel (exit status 3).
    hung: Vec<u32>,
    /// GPUs whose shard ended with another error status, with the status.
    broken: Vec<String>,
}

/// Runs `exe` with `argv` once per GPU as `--shard K/N` (pinned by CUDA_VISIBLE_DEVICES),
/// relays their progress lines prefixed with the GPU, and collects their rows.
fn run_shards(exe: &std::path::Path, argv: &[String], gpus: &[u32]) -> anyhow::Result<Shards> {
    use std::io::BufRead;
    let dir = std::env::temp_dir().join(format!("evo-gate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    let n = gpus.len();
    let mut shards = Vec::new();
    for (i, &g) in gpus.iter().enumerate() {
        let shard = Shard { k: i + 1, n };
        let json = dir.join(format!("shard-{}.json", shard.k));
        let mut child = std::process::Command::new(exe)
            .args(shard_args(argv, shard, &json))
            .env("CUDA_VISIBLE_DEVICES", g.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .with_context(|| format!("GPU {g}: cannot start {}", exe.display()))?;
        let err = child.stderr.take().expect("piped");
        let relay = std::thread::spawn(move || {
            for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
                eprintln!("GPU {g} | {line}");
            }
        });
        shards.push((g, child, relay, json));
    }
    let mut out = Shards {
        rows: Vec::new(),
        hung: Vec::new(),
        broken: Vec::new(),
    };
    for (g, mut child, relay, json) in shards {
        let status = child
            .wait()
            .with_context(|| format!("GPU {g}: lost its gate process"))?;
        let _ = relay.join();
        match status.code() {
            Some(0) => {}
            Some(3) => out.hung.push(g),
            _ => out.broken.push(format!("GPU {g} ({status})")),
        }
        // A shard that ended early wrote what it measured (or nothing, if it never ran).
        if let Ok(text) = std::fs::read_to_string(&json) {
            let rows: Vec<Row> = serde_json::from_str(&text)
                .with_context(|| format!("{}: unreadable shard rows", json.display()))?;
            out.rows
                .extend(rows.into_iter().map(|r| Row { gpu: Some(g), ..r }));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(out)
}

/// `evo gate --gpus 0,1,...`: one `evo gate --shard K/N` process per GPU (each pinned by
/// CUDA_VISIBLE_DEVICES, with its own watchdog), their rows merged in list order.
pub(super) fn run_on_gpus(args: &GateArgs, seed: u64, gpus: &[u32]) -> anyhow::Result<()> {
    let mut models = Vec::new();
    for &g in gpus {
        let device = Device::open(g as usize).with_context(|| format!("GPU {g}"))?;
        models.push((g, device.name().to_string()));
    }
    evo_worker::require_one_model("gate", &models)?;
    let exe = std::env::current_exe().context("cannot find the evo executable")?;
    let mut argv: Vec<String> = std::env::args().skip(1).collect();
    if !argv
        .iter()
        .any(|a| a == "--seed" || a.starts_with("--seed="))
    {
        // Every shard draws the same shapes, inputs and sample.
        argv.extend(["--seed".to_string(), seed.to_string()]);
    }
    let n = gpus.len();
    eprintln!(
        "gating on {n} GPUs ({}, {}): one `evo gate --shard K/{n}` process each",
        gpus.iter()
            .map(|g| g.to_string())
            .collect::<Vec<_>>()
            .join(","),
        models[0].1
    );
    let start = Instant::now();
    let Shards {
        mut rows,
        hung,
        broken,
    } = run_shards(&exe, &argv, gpus)?;
    rows.sort_by_key(|r| r.position);
    report_rows(&rows, args.json.as_deref())?;
    let mut failed: Vec<String> = Vec::new();
    for r in rows
        .iter()
        .filter(|r| !matches!(r.verdict.as_str(), "pass" | "timed" | "skipped"))
    {
        if !failed.contains(&r.kernel) {
            failed.push(r.kernel.clone());
        }
    }
    let kernels = rows
        .iter()
        .filter_map(|r| r.position)
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    eprintln!(
        "{kernels} kernels on {n} GPUs in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    if !hung.is_empty() {
        eprintln!(
            "the shard of GPU {} stopped at a hung kernel (its TIMEOUT line above names it); the rows so far are merged",
            hung.iter().map(|g| g.to_string()).collect::<Vec<_>>().join(", GPU ")
        );
        std::process::exit(3);
    }
    if !failed.is_empty() {
        bail!(
            "{} of {kernels} kernels failed: {}",
            failed.len(),
            failed.join(", ")
        );
    }
    if !broken.is_empty() {
        bail!(
            "the gate processes of {} ended with an error (see their lines above)",
            broken.join(", ")
        );
    }
    eprintln!("all {kernels} kernels passed GREEN on {n} GPUs");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use evo_genome::Problem;

    #[test]
    fn shards_split_the_list_from_its_start_and_cover_it_once() {
        assert_eq!(positions(5, 1, None), [1, 2, 3, 4, 5]);
        assert_eq!(positions(5, 3, None), [3, 4, 5]);
        let a = positions(7, 2, Some(Shard { k: 1, n: 3 }));
        let b = positions(7, 2, Some(Shard { k: 2, n: 3 }));
        let c = positions(7, 2, Some(Shard { k: 3, n: 3 }));
        assert_eq!(
            (a.clone(), b.clone(), c.clone()),
            (vec![2, 5], vec![3, 6], vec![4, 7])
        );
        let mut all: Vec<usize> = [a, b, c].concat();
        all.sort_unstable();
        assert_eq!(all, positions(7, 2, None));
    }

    /// The parent with a stand-in shard program (a shell script): rows of every shard
    /// come back naming their GPU, a shard that hung (status 3) and one that failed are
    /// told apart, and each shard was pinned to its GPU.
    #[test]
    fn shards_rows_are_merged_and_their_endings_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let p = Problem::seed();
        let row = |kernel: &str, position: usize, verdict: &str| Row {
            position: Some(position),
            ..Row::not_run(kernel, None, "GPU model", &p, verdict, String::new())
        };
        // Shard K of 3 wrote rows-K.json and exits with status-K (positions 1..=5 split
        // 1,4 / 2,5 / 3).
        let shards = [
            (vec![row("a", 1, "pass"), row("d", 4, "pass")], 0),
            (vec![row("b", 2, "pass"), row("e", 5, "timeout")], 3),
            (vec![row("c", 3, "fail")], 1),
        ];
        for (k, (rows, status)) in shards.iter().enumerate() {
            let k = k + 1;
            std::fs::write(
                dir.path().join(format!("rows-{k}.json")),
                serde_json::to_string(rows).unwrap(),
            )
            .unwrap();
            std::fs::write(dir.path().join(format!("status-{k}")), status.to_string()).unwrap();
        }
        let script = dir.path().join("shard.sh");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\nd={}\nwhile [ $# -gt 0 ]; do case $1 in --shard) s=$2;; --json) j=$2;; esac; shift; done\n\
                 k=${{s%/*}}\necho $CUDA_VISIBLE_DEVICES > $d/pinned-$k\ncp $d/rows-$k.json $j\nexit $(cat $d/status-$k)\n",
                dir.path().display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let argv = ["gate", "--gpus", "4,5,6", "x.toml"].map(String::from);
        let out = run_shards(&script, &argv, &[4, 5, 6]).unwrap();
        let mut rows = out.rows;
        rows.sort_by_key(|r| r.position);
        let got: Vec<(&str, Option<u32>)> =
            rows.iter().map(|r| (r.kernel.as_str(), r.gpu)).collect();
        assert_eq!(
            got,
            [
                ("a", Some(4)),
                ("b", Some(5)),
                ("c", Some(6)),
                ("d", Some(4)),
                ("e", Some(5))
            ]
        );
        for (k, g) in [(1, "4"), (2, "5"), (3, "6")] {
            let pinned = std::fs::read_to_string(dir.path().join(format!("pinned-{k}"))).unwrap();
            assert_eq!(pinned.trim(), g, "shard {k}");
        }
        assert_eq!(out.hung, [5]);
        assert_eq!(out.broken.len(), 1);
        assert!(out.broken[0].starts_with("GPU 6"), "{:?}", out.broken);
    }

    #[test]
    fn shard_is_k_of_n() {
        assert_eq!(parse_shard("2/3"), Ok(Shard { k: 2, n: 3 }));
        assert!(parse_shard("0/3").unwrap_err().contains("between 1 and N"));
        assert!(parse_shard("4/3").unwrap_err().contains("between 1 and N"));
        assert!(parse_shard("2").unwrap_err().contains("is not K/N"));
        assert!(parse_shard("a/b").unwrap_err().contains("is not K/N"));
    }

    #[test]
    fn a_shard_runs_the_same_command_without_gpus_and_with_its_own_json() {
        let argv: Vec<String> = [
            "gate",
            "--gpus",
            "0,1",
            "genomes/fa2.toml",
            "--json=out.json",
            "--sample",
            "8",
            "--save-samples",
            "drawn",
        ]
        .map(String::from)
        .to_vec();
        let json = std::path::Path::new("shard-1.json");
        assert_eq!(
            shard_args(&argv, Shard { k: 1, n: 2 }, json),
            [
                "gate",
                "genomes/fa2.toml",
                "--sample",
                "8",
                "--save-samples",
                "drawn",
                "--shard",
                "1/2",
                "--json",
                "shard-1.json"
            ]
        );
        assert_eq!(
            shard_args(&argv, Shard { k: 2, n: 2 }, json),
            [
                "gate",
                "genomes/fa2.toml",
                "--sample",
                "8",
                "--shard",
                "2/2",
                "--json",
                "shard-1.json"
            ]
        );
    }
}
