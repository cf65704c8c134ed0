//! After the searches: their champions as a champions folder (`evo champions`), those
//! champions timed against PyTorch SDPA (`evo bench --champions --record --cold-l2`),
//! and the table of the tune, printed and written to `OUT/tune.md`.
//!
//! Both steps are child processes of this binary, like the searches: the bench opens the
//! GPU, and a fault there must not take the table of the searches with it. Their output
//! goes to `OUT/champions.log` and `OUT/bench.log`.
//!
//! The bench writes its `--json` file as one JSON array of rows (rewritten as each kernel
//! is timed, so a bench cut short leaves the rows it measured), not as JSON lines. A
//! champion's rows are `champion <class>`, each SDPA backend's `sdpa-<backend>`; the
//! cold-L2 rows carry ` (cold L2)` after the name.

use super::plan::Plan;
use super::run;
use anyhow::{bail, Context};
use evo_genome::dispatch::{DispatchTable, ShapeClass, DISPATCH_FILE};
use evo_genome::Problem;
use evo_lineage::{write_atomic, Lineage};
use serde::Deserialize;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The champions folder, bench record and logs of a tune, under its folder.
pub const CHAMPIONS_DIR: &str = "champions";
pub const BENCH_JSON: &str = "bench.json";
pub const TABLE_FILE: &str = "tune.md";

const COLD: &str = " (cold L2)";

/// Runs `evo ARGS` with its output in `log`; the error quotes the log's end.
fn child(exe: &Path, args: &[String], log: &Path) -> anyhow::Result<()> {
    let file = File::create(log).with_context(|| format!("{}: cannot write", log.display()))?;
    let err = file.try_clone()?;
    let status = Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err)
        .status()
        .with_context(|| format!("cannot start {}", exe.display()))?;
    if !status.success() {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        bail!(
            "`evo {}` failed; the last lines of {}:\n{}",
            args.join(" "),
            log.display(),
            lines[lines.len().saturating_sub(8)..].join("\n")
        );
    }
    Ok(())
}

/// `evo champions SEARCH... --out OUT/champions`.
pub fn champions(exe: &Path, out: &Path, searches: &[PathBuf]) -> anyhow::Result<()> {
    let mut args = vec!["champions".to_string()];
    args.extend(searches.iter().map(|s| s.display().to_string()));
    args.extend([
        "--out".into(),
        out.join(CHAMPIONS_DIR).display().to_string(),
    ]);
    child(exe, &args, &out.join("champions.log"))
}

/// Whether a class of the tune's champions folder has no bench figures (new, or its
/// champion replaced since): `evo bench --record` writes them only at a bench's end.
pub fn needs_bench(out: &Path) -> bool {
    let path = out.join(CHAMPIONS_DIR).join(DISPATCH_FILE);
    DispatchTable::load(&path).map_or(true, |t| {
        t.classes
            .iter()
            .any(|c| c.median_us.is_none() || c.genome_id.is_none())
    })
}

/// `evo bench --champions OUT/champions --record --cold-l2 --json OUT/bench.json`.
pub fn bench(exe: &Path, out: &Path, dtype: &str) -> anyhow::Result<()> {
    let args: Vec<String> = [
        "bench",
        "--champions",
        &out.join(CHAMPIONS_DIR).display().to_string(),
        "--record",
        "--cold-l2",
        "--json",
        &out.join(BENCH_JSON).display().to_string(),
        "--dtype",
        dtype,
    ]
    .map(String::from)
    .to_vec();
    child(exe, &args, &out.join("bench.log"))
}

/// One row of the bench's JSON, the fields the table reads.
#[derive(Debug, Deserialize)]
struct BenchRow {
    kernel: String,
    problem: Problem,
    verdict: String,
    median_us: Option<f64>,
}

/// The bench's timed rows (none when there is no file).
pub fn read_bench(path: &Path) -> anyhow::Result<Vec<BenchFigure>> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(Vec::new());
    };
    let rows: Vec<BenchRow> = serde_json::from_str(&text).with_context(|| {
        format!(
            "{}: not the JSON array `evo bench --json` writes",
            path.display()
        )
    })?;
    Ok(rows
        .into_iter()
        .filter(|r| r.verdict == "timed")
        .filter_map(|r| {
            Some(BenchFigure {
                us: r.median_us?,
                kernel: r.kernel,
                problem: r.problem,
            })
        })
        .collect())
}

/// A timed kernel on a shape.
#[derive(Debug, Clone)]
pub struct BenchFigure {
    pub kernel: String,
    pub problem: Problem,
    pub us: f64,
}

/// A shape's figures from the bench: the champion's and the fastest SDPA backend's,
/// warm and on a cold L2.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Figures {
    pub champion: Option<f64>,
    pub champion_cold: Option<f64>,
    pub sdpa: Option<(String, f64)>,
    pub sdpa_cold: Option<(String, f64)>,
}

/// The figures of `p` (its class's champion, the SDPA backends) among the bench's rows.
pub fn figures_of(rows: &[BenchFigure], p: &Problem) -> Figures {
    let champion = format!("champion {}", ShapeClass::name_of(p));
    let on_shape = |name: &str| {
        rows.iter()
            .find(|r| r.problem == *p && r.kernel == name)
            .map(|r| r.us)
    };
    let fastest = |cold: bool| {
        rows.iter()
            .filter(|r| r.problem == *p && r.kernel.starts_with("sdpa-"))
            .filter(|r| r.kernel.ends_with(COLD) == cold)
            .min_by(|a, b| a.us.total_cmp(&b.us))
            .map(|r| (r.kernel.trim_end_matches(COLD).to_string(), r.us))
    };
    Figures {
        champion: on_shape(&champion),
        champion_cold: on_shape(&format!("{champion}{COLD}")),
        sdpa: fastest(false),
        sdpa_cold: fastest(true),
    }
}

/// One row of the tune's table.
#[derive(Debug, Clone)]
pub struct TableRow {
    pub problem: Problem,
    pub evaluations: Option<usize>,
    /// The search's champion, as the search timed it.
    pub search_us: Option<f64>,
    pub bench: Figures,
    /// The search folder, relative to the tune's folder.
    pub experiment: String,
    /// Why the shape has no champion (its search failed, or has not run).
    pub missing: Option<String>,
}

fn us(v: Option<f64>) -> String {
    v.map_or("—".into(), |v| format!("{v:.2}"))
}

fn pair(warm: String, cold: String) -> String {
    format!("{warm} / {cold}")
}

/// The Markdown table, with a line that says where its figures come from.
pub fn render(rows: &[TableRow], benched: bool) -> String {
    let mut text = String::new();
    if benched {
        text += "Champion and SDPA figures: `evo bench --champions champions --record --cold-l2 \
                 --json bench.json`, warm (back-to-back launches) / cold L2 (each launch alone \
                 after a read over the L2); speedup = the fastest SDPA backend's µs ÷ the \
                 champion's.\n\n";
        text += "| shape | evaluations | champion µs | best SDPA µs | speedup | experiment |\n";
        text += "|---|---:|---:|---|---:|---|\n";
    } else {
        text += "Champion figures: each search's own timing of its champion (no bench run).\n\n";
        text += "| shape | evaluations | champion µs | experiment |\n";
        text += "|---|---:|---:|---|\n";
    }
    for r in rows {
        let evaluations = r.evaluations.map_or("—".into(), |n| n.to_string());
        let champion = match (&r.missing, benched) {
            (Some(why), _) => why.clone(),
            (None, true) => pair(us(r.bench.champion), us(r.bench.champion_cold)),
            (None, false) => us(r.search_us),
        };
        if !benched {
            text += &format!(
                "| {} | {evaluations} | {champion} | {} |\n",
                r.problem.label(),
                r.experiment
            );
            continue;
        }
        let sdpa = |s: &Option<(String, f64)>| {
            s.as_ref()
                .map_or("—".into(), |(name, v)| format!("{v:.2} ({name})"))
        };
        let ratio = |c: Option<f64>, s: &Option<(String, f64)>| match (c, s) {
            (Some(c), Some((_, s))) => format!("{:.2}×", s / c),
            _ => "—".into(),
        };
        text += &format!(
            "| {} | {evaluations} | {champion} | {} | {} | {} |\n",
            r.problem.label(),
            pair(sdpa(&r.bench.sdpa), sdpa(&r.bench.sdpa_cold)),
            pair(
                ratio(r.bench.champion, &r.bench.sdpa),
                ratio(r.bench.champion_cold, &r.bench.sdpa_cold)
            ),
            r.experiment
        );
    }
    let unbaselined = rows
        .iter()
        .filter(|r| r.missing.is_none() && r.bench.sdpa.is_none() && r.bench.sdpa_cold.is_none())
        .count();
    if benched && unbaselined > 0 {
        text += &format!(
            "\n{unbaselined} of {} shapes have no SDPA figure: every backend failed or was not \
             run there; `bench.log` says why.\n",
            rows.len()
        );
    }
    text
}

/// The tune's table from its folder (searches, bench record), written to `OUT/tune.md`
/// when it changed (a rerun that changed nothing leaves the file as it was); returns
/// its text. `done`: the searches that reached their budget.
pub fn write_report(
    out: &Path,
    plan: &Plan,
    problems: &[Problem],
    replayed: bool,
    done: &[PathBuf],
) -> anyhow::Result<String> {
    let benched = !replayed && out.join(BENCH_JSON).is_file();
    let bench_rows = if benched {
        read_bench(&out.join(BENCH_JSON))?
    } else {
        Vec::new()
    };
    let rows: Vec<TableRow> = problems
        .iter()
        .zip(&plan.shapes)
        .map(|(p, shape)| {
            let experiment = out.join(&shape.search);
            let (evaluations, search_us) = run::summary(&experiment);
            let log = shape.search.with_extension("log");
            let missing = if !run::is_done(&experiment) {
                Some(format!("no champion: see {}", log.display()))
            } else if search_us.is_none() {
                Some(format!("{}: see {}", super::NO_CHAMPION, log.display()))
            } else {
                None
            };
            TableRow {
                problem: *p,
                evaluations,
                search_us,
                bench: figures_of(&bench_rows, p),
                experiment: shape.search.display().to_string(),
                missing,
            }
        })
        .collect();
    let device = done
        .iter()
        .find_map(|e| Lineage::load(&e.join("lineage.json")).ok())
        .map(|l| l.meta.device);
    let mut text = format!(
        "# evo tune: {}\n\n{}, {} each, strategy {}, backend {}{}.\n{}\n\n",
        plan.model.as_deref().unwrap_or("shapes"),
        super::shape_count(problems.len()),
        plan.budget_label(),
        plan.strategy,
        plan.backend,
        device.map_or(String::new(), |d| format!(", on {d}")),
        if replayed {
            "Replayed: the searches looked their numbers up in a recorded landscape; nothing \
             was measured on this machine."
        } else {
            "Measured on this machine's GPU."
        }
    );
    text += &render(&rows, benched);
    let path = out.join(TABLE_FILE);
    if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
        write_atomic(&path, text.as_bytes())
            .with_context(|| format!("{}: cannot write", path.display()))?;
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figure(kernel: &str, p: &Problem, us: f64) -> BenchFigure {
        BenchFigure {
            kernel: kernel.into(),
            problem: *p,
            us,
        }
    }

    #[test]
    fn the_fastest_sdpa_backend_is_taken_warm_and_cold_each() {
        let p: Problem = "16,32,1,8192,128,f16,causal=br,kv=8".parse().unwrap();
        let other: Problem = "1,8,512,512,64,f16".parse().unwrap();
        let c = "champion b16-h32kv8-lq1-lk8192-d128-causal-br";
        let rows = vec![
            figure(c, &p, 179.5),
            figure(&format!("{c} (cold L2)"), &p, 179.2),
            figure("sdpa-cudnn", &p, 210.7),
            figure("sdpa-cudnn (cold L2)", &p, 179.3),
            figure("sdpa-flash", &p, 182.0),
            figure("sdpa-flash (cold L2)", &p, 184.1),
            figure("cublas-hybrid", &p, 90.0),
            figure("sdpa-efficient", &other, 1.0),
        ];
        let f = figures_of(&rows, &p);
        assert_eq!(f.champion, Some(179.5));
        assert_eq!(f.champion_cold, Some(179.2));
        assert_eq!(f.sdpa, Some(("sdpa-flash".into(), 182.0)));
        assert_eq!(f.sdpa_cold, Some(("sdpa-cudnn".into(), 179.3)));
        let text = render(
            &[TableRow {
                problem: p,
                evaluations: Some(200),
                search_us: Some(170.0),
                bench: f,
                experiment: "searches/x".into(),
                missing: None,
            }],
            true,
        );
        assert!(
            text.contains(
                "| B16 H32/8 Lq1 Lk8192 D128 f16 causal-br | 200 | 179.50 / 179.20 | 182.00 (sdpa-flash) / 179.30 (sdpa-cudnn) | 1.01× / 1.00× | searches/x |"
            ),
            "{text}"
        );
        assert!(!text.contains("no SDPA figure"), "{text}");
    }

    /// A shape whose SDPA baselines all failed says so under the table, and where to
    /// read why, instead of leaving dashes unexplained.
    #[test]
    fn shapes_without_an_sdpa_figure_are_counted_under_the_table() {
        let p: Problem = "64,32,1,32768,128,f16,causal=br,kv=8".parse().unwrap();
        let c = "champion b64-h32kv8-lq1-lk32768-d128-causal-br";
        let rows = vec![
            figure(c, &p, 2718.9),
            figure(&format!("{c} (cold L2)"), &p, 2717.7),
        ];
        let row = TableRow {
            problem: p,
            evaluations: Some(137),
            search_us: Some(2719.7),
            bench: figures_of(&rows, &p),
            experiment: "searches/x".into(),
            missing: None,
        };
        let text = render(&[row], true);
        assert!(
            text.contains("| 2718.90 / 2717.70 | — / — | — / — |"),
            "{text}"
        );
        assert!(
            text.contains("1 of 1 shapes have no SDPA figure") && text.contains("`bench.log`"),
            "{text}"
        );
    }

    #[test]
    fn the_bench_json_is_one_array_of_rows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bench.json");
        std::fs::write(
            &path,
            r#"[{"kernel":"sdpa-flash","genome_id":null,"shape":"B1 H8 L512 D64 f16",
               "problem":{"batch":1,"heads":8,"q_len":512,"kv_len":512,"head_dim":64,"dtype":"f16","causal":false},
               "causal":false,"dtype":"f16","device":"H100","verdict":"timed","reason":null,
               "rel_frob":null,"max_abs":null,"median_us":9.5,"min_us":9.0,"max_us":10.0,
               "tflops":null,"method":"events"},
               {"kernel":"sdpa-cudnn","genome_id":null,"shape":"B1 H8 L512 D64 f16",
               "problem":{"batch":1,"heads":8,"q_len":512,"kv_len":512,"head_dim":64,"dtype":"f16","causal":false},
               "causal":false,"dtype":"f16","device":"H100","verdict":"error","reason":"x",
               "rel_frob":null,"max_abs":null,"median_us":null,"min_us":null,"max_us":null,
               "tflops":null,"method":null}]"#,
        )
        .unwrap();
        let rows = read_bench(&path).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].us, 9.5);
        assert!(read_bench(&dir.path().join("none.json"))
            .unwrap()
            .is_empty());
        std::fs::write(&path, "{\"kernel\":1}\n").unwrap();
        let e = read_bench(&path).unwrap_err().to_string();
        assert!(e.contains("bench.json"), "{e}");
    }
}
