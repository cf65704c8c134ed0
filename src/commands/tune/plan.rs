//! `OUT/tune.toml`: what a tune was asked, written before its first search.
//!
//! The plan is what makes a tune resumable: a rerun with the same `--out` reads it, skips
//! the shapes whose search is done, resumes the one that was cut off (each search is an
//! `evo evolve` experiment, which resumes itself), and starts the others. An option
//! given on the rerun must agree with the plan (one left out takes the recorded value),
//! so a rerun can never mix two tunes' searches in one folder. A folder that holds
//! files but no plan is not a tune, and is never taken over.

use anyhow::{bail, Context};
use evo_genome::{from_toml, Problem};
use evo_lineage::write_atomic;
use evo_mutator::BudgetConfig;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The plan's file in the tune's folder.
pub const PLAN_FILE: &str = "tune.toml";

/// `tune.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// The preset the shapes come from; none when they were given as specs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// `evo evolve --strategy`.
    pub strategy: String,
    /// `evo evolve --backend`: auto, gpu or replay:DIR.
    pub backend: String,
    /// `--gpus` as given (`all`, `0,1`); none: one search at a time on the first GPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<String>,
    /// The champions folder whose dispatch table gives each search its champion seeds.
    pub seeds_from: PathBuf,
    /// The folder of the named genomes every search is also seeded with.
    pub genomes: PathBuf,
    /// `--seed`: each search's seed is drawn from it and its shape; none: a fresh seed
    /// per search.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// `--model-data` as given: the records the guided searches' cost model learns from;
    /// none: the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_data: Option<PathBuf>,
    /// Each shape's search budget.
    pub budget: BudgetConfig,
    /// In the order they are listed (with several GPUs, the costliest start first).
    #[serde(rename = "shape")]
    pub shapes: Vec<PlannedShape>,
}

/// One shape and the folder its search writes, relative to the tune's folder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlannedShape {
    /// `B,H,Lq,Lk,D,dtype[,options]`.
    pub spec: String,
    /// `searches/<name>`: the `evo evolve` experiment; `<name>.seeds` and `<name>.log`
    /// beside it.
    pub search: PathBuf,
}

/// What this run was asked; `None` where an option was left out (a resume then takes
/// the plan's value, a new tune the default).
#[derive(Debug, Clone, Default)]
pub struct Asked {
    pub model: Option<String>,
    pub shapes: Option<Vec<Problem>>,
    pub strategy: Option<String>,
    pub backend: Option<String>,
    pub gpus: Option<String>,
    pub seeds_from: Option<PathBuf>,
    pub genomes: Option<PathBuf>,
    pub seed: Option<u64>,
    pub model_data: Option<PathBuf>,
    pub budget: Option<BudgetConfig>,
}

/// The defaults of a new tune's options.
pub struct Defaults {
    pub strategy: &'static str,
    pub seeds_from: &'static str,
    pub genomes: &'static str,
    pub evaluations: usize,
}

impl Plan {
    /// Reads a plan; every shape must parse (the error names the file and the shape).
    pub fn load(path: &Path) -> anyhow::Result<Plan> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("{}: cannot read", path.display()))?;
        let plan: Plan = from_toml(&text, path)?;
        for s in &plan.shapes {
            s.spec.parse::<Problem>().map_err(|e| {
                anyhow::anyhow!(
                    "{}: shape {e}; restore the spec this tune was planned with",
                    path.display()
                )
            })?;
        }
        Ok(plan)
    }

    /// The shapes, parsed (checked by [`Plan::load`] or made from problems).
    pub fn problems(&self) -> Vec<Problem> {
        self.shapes
            .iter()
            .map(|s| {
                s.spec
                    .parse()
                    .expect("checked when the plan was made or loaded")
            })
            .collect()
    }

    pub fn save(&self, path: &Path) -> anyhow::Result<()> {
        let mut text = String::from(
            "# written by `evo tune` before its first search; rerun with the same --out to resume\n",
        );
        text += &toml::to_string(self).context("the plan serializes")?;
        write_atomic(path, text.as_bytes())
            .with_context(|| format!("{}: cannot write", path.display()))
    }

    /// The budget as `evo evolve` takes it.
    pub fn budget_args(&self) -> Vec<String> {
        match (self.budget.evaluations, self.budget.minutes) {
            (_, Some(m)) => vec!["--minutes".into(), m.to_string()],
            (Some(n), None) => vec!["--budget".into(), n.to_string()],
            (None, None) => Vec::new(),
        }
    }

    /// One line: the budget per shape.
    pub fn budget_label(&self) -> String {
        match (self.budget.evaluations, self.budget.minutes) {
            (_, Some(m)) => format!("{m} minutes"),
            (Some(n), None) => format!("{n} evaluations"),
            (None, None) => "evolve's default budget".into(),
        }
    }
}

/// The plan of `out`: the recorded one when `out/tune.toml` exists (each option asked
/// must agree with it), else a new one from `asked` and the defaults (not written yet).
/// Returns the plan and whether it was on record.
pub fn open(out: &Path, asked: &Asked, defaults: &Defaults) -> anyhow::Result<(Plan, bool)> {
    let path = out.join(PLAN_FILE);
    if path.exists() {
        let plan = Plan::load(&path)?;
        check_resume(&path, &plan, asked)?;
        return Ok((plan, true));
    }
    refuse_foreign(out)?;
    let Some(problems) = &asked.shapes else {
        bail!(
            "{} holds no tune to resume; name the shapes with --model NAME, --problem SPEC or --problems FILE",
            out.display()
        );
    };
    let plan = Plan {
        model: asked.model.clone(),
        strategy: asked
            .strategy
            .clone()
            .unwrap_or_else(|| defaults.strategy.into()),
        backend: asked.backend.clone().unwrap_or_else(|| "auto".into()),
        gpus: asked.gpus.clone(),
        seeds_from: asked
            .seeds_from
            .clone()
            .unwrap_or_else(|| defaults.seeds_from.into()),
        genomes: asked
            .genomes
            .clone()
            .unwrap_or_else(|| defaults.genomes.into()),
        seed: asked.seed,
        model_data: asked.model_data.clone(),
        budget: asked.budget.clone().unwrap_or(BudgetConfig {
            evaluations: Some(defaults.evaluations),
            minutes: None,
        }),
        shapes: problems
            .iter()
            .map(|p| PlannedShape {
                spec: p.spec(),
                search: Path::new("searches").join(super::search_name(p)),
            })
            .collect(),
    };
    Ok((plan, false))
}

/// A folder without a plan is a new tune only when it is empty: files there are
/// someone's measurements, and nothing measured is ever replaced.
fn refuse_foreign(out: &Path) -> anyhow::Result<()> {
    if !out.exists() {
        return Ok(());
    }
    if !out.is_dir() {
        bail!("--out {} is a file; name a folder", out.display());
    }
    let Some((_, shown)) = evo_gates::outcome::files::other_files(out)
        .with_context(|| format!("{}: cannot list", out.display()))?
    else {
        return Ok(());
    };
    bail!(
        "--out {} holds {shown} but no {PLAN_FILE}: it is not a tune evo can resume, and nothing measured is replaced; choose a new --out folder",
        out.display()
    )
}

/// Every option asked must be the plan's. The budget is fixed too: the searches done
/// at the recorded budget would stand beside searches run further, and the table would
/// compare them as equals.
fn check_resume(path: &Path, plan: &Plan, asked: &Asked) -> anyhow::Result<()> {
    let clash = |field: &str, given: String, recorded: String| -> anyhow::Result<()> {
        if given != recorded {
            bail!(
                "{}: records {field} = {recorded}, but {given} was given; drop the option to resume this tune, or use a new --out folder",
                path.display()
            );
        }
        Ok(())
    };
    let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "none".into());
    if asked.model.is_some() {
        clash("model", show(&asked.model), show(&plan.model))?;
    }
    if let Some(shapes) = &asked.shapes {
        let specs = |v: Vec<String>| v.join("; ");
        clash(
            "shapes",
            specs(shapes.iter().map(Problem::spec).collect()),
            specs(plan.shapes.iter().map(|s| s.spec.clone()).collect()),
        )?;
    }
    if let Some(s) = &asked.strategy {
        clash("strategy", s.clone(), plan.strategy.clone())?;
    }
    if let Some(b) = &asked.backend {
        clash("backend", b.clone(), plan.backend.clone())?;
    }
    if asked.gpus.is_some() {
        clash("gpus", show(&asked.gpus), show(&plan.gpus))?;
    }
    if let Some(seed) = asked.seed {
        let recorded = plan.seed.map_or("none".into(), |s| s.to_string());
        clash("seed", seed.to_string(), recorded)?;
    }
    let path_of = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
    if asked.seeds_from.is_some() {
        clash(
            "seeds_from",
            show(&path_of(&asked.seeds_from)),
            plan.seeds_from.display().to_string(),
        )?;
    }
    if asked.genomes.is_some() {
        clash(
            "genomes",
            show(&path_of(&asked.genomes)),
            plan.genomes.display().to_string(),
        )?;
    }
    if asked.model_data.is_some() {
        clash(
            "model_data",
            show(&path_of(&asked.model_data)),
            show(&path_of(&plan.model_data)),
        )?;
    }
    if let Some(b) = &asked.budget {
        if *b != plan.budget {
            let label = |b: &BudgetConfig| match (b.evaluations, b.minutes) {
                (_, Some(m)) => format!("budget.minutes = {m}"),
                (Some(n), None) => format!("budget.evaluations = {n}"),
                (None, None) => "no budget".into(),
            };
            bail!(
                "{}: records {} per shape, but {} was given; a tune's budget is fixed: drop the option to resume this tune, or use a new --out folder (one search goes further with `evo evolve --experiment SEARCH --budget N`)",
                path.display(),
                label(&plan.budget),
                label(b)
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use evo_gates::outcome::files::LOCK_FILE;

    const DEFAULTS: Defaults = Defaults {
        strategy: "guided",
        seeds_from: "genomes/champions/h100",
        genomes: "genomes",
        evaluations: 200,
    };

    fn asked(spec: &str) -> Asked {
        Asked {
            shapes: Some(vec![spec.parse().unwrap()]),
            strategy: Some("evolutionary".into()),
            budget: Some(BudgetConfig {
                evaluations: Some(24),
                minutes: None,
            }),
            ..Asked::default()
        }
    }

    #[test]
    fn a_plan_round_trips_and_a_resume_takes_what_was_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("t");
        let (plan, resumed) = open(&out, &asked("1,8,512,512,64,f16"), &DEFAULTS).unwrap();
        assert!(!resumed);
        assert_eq!(plan.seeds_from, PathBuf::from("genomes/champions/h100"));
        assert_eq!(
            plan.shapes[0].search,
            PathBuf::from("searches/b1-h8-l512-d64-f16")
        );
        std::fs::create_dir_all(&out).unwrap();
        plan.save(&out.join(PLAN_FILE)).unwrap();
        let (again, resumed) = open(&out, &Asked::default(), &DEFAULTS).unwrap();
        assert!(resumed);
        assert_eq!(again, plan);
    }

    #[test]
    fn a_resume_refuses_another_option_naming_the_field() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("t");
        let (plan, _) = open(&out, &asked("1,8,512,512,64,f16"), &DEFAULTS).unwrap();
        std::fs::create_dir_all(&out).unwrap();
        plan.save(&out.join(PLAN_FILE)).unwrap();
        let e = open(&out, &asked("1,8,512,512,64,bf16"), &DEFAULTS)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("records shapes = 1,8,512,512,64,f16, but 1,8,512,512,64,bf16 was given"),
            "{e}"
        );
        let mut other = asked("1,8,512,512,64,f16");
        other.strategy = Some("random".into());
        let e = open(&out, &other, &DEFAULTS).unwrap_err().to_string();
        assert!(e.contains("records strategy = evolutionary"), "{e}");
        assert!(e.contains("use a new --out folder"), "{e}");
        // A seed given to an unseeded tune would not make its searches done so far the
        // seed's: refused too.
        let mut seeded = asked("1,8,512,512,64,f16");
        seeded.seed = Some(3);
        let e = open(&out, &seeded, &DEFAULTS).unwrap_err().to_string();
        assert!(e.contains("records seed = none, but 3 was given"), "{e}");
    }

    #[test]
    fn a_plan_keeps_its_model_data_for_the_resume() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("t");
        let mut given = asked("1,8,512,512,64,f16");
        given.model_data = Some("snapshot.jsonl.gz".into());
        let (plan, _) = open(&out, &given, &DEFAULTS).unwrap();
        std::fs::create_dir_all(&out).unwrap();
        plan.save(&out.join(PLAN_FILE)).unwrap();
        let (again, _) = open(&out, &Asked::default(), &DEFAULTS).unwrap();
        assert_eq!(again.model_data, Some("snapshot.jsonl.gz".into()));
        let mut other = given.clone();
        other.model_data = Some("experiments".into());
        let e = open(&out, &other, &DEFAULTS).unwrap_err().to_string();
        assert!(
            e.contains("records model_data = snapshot.jsonl.gz, but experiments was given"),
            "{e}"
        );
    }

    #[test]
    fn a_seeded_plan_keeps_its_seed() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("t");
        let mut seeded = asked("1,8,512,512,64,f16");
        seeded.seed = Some(3);
        let (plan, _) = open(&out, &seeded, &DEFAULTS).unwrap();
        std::fs::create_dir_all(&out).unwrap();
        plan.save(&out.join(PLAN_FILE)).unwrap();
        let (again, _) = open(&out, &Asked::default(), &DEFAULTS).unwrap();
        assert_eq!(again.seed, Some(3));
        assert!(open(&out, &seeded, &DEFAULTS).is_ok());
    }

    #[test]
    fn a_folder_without_a_plan_is_new_only_when_empty() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(LOCK_FILE), "").unwrap();
        assert!(open(dir.path(), &asked("1,8,512,512,64,f16"), &DEFAULTS).is_ok());
        std::fs::write(dir.path().join("evaluations.jsonl"), "{}").unwrap();
        let e = open(dir.path(), &asked("1,8,512,512,64,f16"), &DEFAULTS)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("holds evaluations.jsonl but no tune.toml"),
            "{e}"
        );
    }
}
